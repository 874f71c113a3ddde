"""Experiment configuration: one TOML file describes a whole precompute run.

Sections (every one optional; defaults follow the **[choice]** values of docs/profiles.md and
docs/metrics/)::

    [experiment]   name, seed, stages (the order ``run`` executes)
    [problems]     dataset (a key of precompute.datasets.DATASETS), limit, ids, options
    [[teachers]]   name, engine, model, max_tokens, temperature, top_p, repetition_penalty,
                   samples, seed, options (passed to the engine)
    [generate]     batch_size
    [grade]        timeout_s
    [segment]      mode ("math" | "paper" | "lines"; default "math", "paper" under
                   ``[metrics] profile = "release"``), encoding (tiktoken)
    [embed]        batch_size, disk_cache
    [[students]]   like a teacher, plus forcing_tokens (second pass budget)
    [rollout]      interval, samples, batch_size, include_full (k = m)
    [judge]        labelers (["lexical", "cues", "llm"]; default ["lexical", "cues"]), model
                   fields as for a teacher, batch_size
    [metrics]      threshold, profile, grid, primary_labeler, encoding (``profile =
                   "release"`` also sets threshold = 0.85 and [rollout] include_full = false
                   unless they are given)

Unknown keys are errors (a typo must not silently fall back to a default); every error
names the file, the section and the key.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_LABELERS",
    "DEFAULT_STAGES",
    "JUDGE_LABELERS",
    "PROFILE_SEGMENTERS",
    "PROFILE_THRESHOLDS",
    "ConfigError",
    "EmbedConfig",
    "ExperimentConfig",
    "GenerateConfig",
    "GradeConfig",
    "JudgeConfig",
    "MetricsConfig",
    "ModelConfig",
    "ProblemsConfig",
    "RolloutConfig",
    "SegmentConfig",
    "load_config",
]

#: The order in which ``run`` executes the stages when the config does not say.
DEFAULT_STAGES = (
    "problems",
    "generate",
    "grade",
    "segment",
    "embed",
    "rollout",
    "leaks",
    "judge",
    "metrics",
)


class ConfigError(ValueError):
    """An experiment config that cannot be used; the message names file, section and key."""


class _Section:
    """Reads typed values out of one TOML table and rejects keys nobody asked for."""

    def __init__(self, source: str, where: str, table: Any):
        if table is None:
            table = {}
        if not isinstance(table, Mapping):
            raise ConfigError(f"{source}: [{where}] must be a table, got {type(table).__name__}")
        self.source = source
        self.where = where
        self.table = dict(table)
        self.used: set[str] = set()

    def _fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: [{self.where}] {key}: {message}")

    def _get(self, key: str) -> Any:
        self.used.add(key)
        return self.table.get(key)

    def string(self, key: str, default: str | None = None) -> str | None:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, str) or not value.strip():
            raise self._fail(key, f"expected a non-empty string, got {value!r}")
        return value

    def required_string(self, key: str) -> str:
        value = self.string(key)
        if value is None:
            raise self._fail(key, "is required")
        return value

    def integer(self, key: str, default: int, minimum: int | None = None) -> int:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, f"expected an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self._fail(key, f"must be at least {minimum}, got {value}")
        return value

    def optional_integer(self, key: str, minimum: int | None = None) -> int | None:
        if self.table.get(key) is None:
            self.used.add(key)
            return None
        return self.integer(key, 0, minimum)

    def number(
        self, key: str, default: float, low: float | None = None, high: float | None = None
    ) -> float:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._fail(key, f"expected a number, got {value!r}")
        if not math.isfinite(value):  # TOML allows nan and inf; no setting means either
            raise self._fail(key, f"expected a finite number, got {value!r}")
        if (low is not None and value < low) or (high is not None and value > high):
            raise self._fail(key, f"must be within [{low}, {high}], got {value}")
        return float(value)

    def positive_number(self, key: str) -> float | None:
        """A finite number above 0, or None when the key is absent."""
        if self.table.get(key) is None:
            self.used.add(key)
            return None
        value = self.number(key, 0.0)
        if value <= 0:
            raise self._fail(key, f"must be a positive number, got {value}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._fail(key, f"expected true or false, got {value!r}")
        return value

    def strings(self, key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self._fail(key, f"expected a list of non-empty strings, got {value!r}")
        return tuple(value)

    def mapping(self, key: str) -> dict[str, Any]:
        value = self._get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self._fail(key, f"expected a table, got {value!r}")
        return dict(value)

    def choice(self, key: str, default: str, allowed: tuple[str, ...]) -> str:
        value = self.string(key, default)
        assert value is not None
        if value not in allowed:
            raise self._fail(key, f"must be one of {list(allowed)}, got {value!r}")
        return value

    def finish(self) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            raise ConfigError(
                f"{self.source}: [{self.where}] unknown key(s) {unknown}; "
                f"known: {sorted(self.used)}"
            )


@dataclass(frozen=True)
class ModelConfig:
    """A model behind an engine, with the sampling settings it is run with.

    ``name`` is the label stored in the tables (``teacher`` / ``student`` / judge labeler);
    it defaults to ``model``.
    """

    name: str
    engine: str
    model: str
    max_tokens: int = 1024
    temperature: float = 0.0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    samples: int = 1
    seed: int = 0
    forcing_tokens: int = 128
    options: dict[str, Any] = field(default_factory=dict)

    def sampling(self) -> dict[str, Any]:
        """The settings that change the output, for provenance and the ``sampling`` column."""
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "repetition_penalty": self.repetition_penalty,
            "seed": self.seed,
            "samples": self.samples,
        }


def _model(section: _Section, *, default_max_tokens: int) -> ModelConfig:
    engine = section.required_string("engine")
    model = section.required_string("model")
    spec = ModelConfig(
        name=section.string("name", model) or model,
        engine=engine,
        model=model,
        max_tokens=section.integer("max_tokens", default_max_tokens, minimum=1),
        temperature=section.number("temperature", 0.0, low=0.0),
        top_p=section.number("top_p", 1.0, low=0.0, high=1.0),
        repetition_penalty=section.number("repetition_penalty", 1.0, low=0.0),
        samples=section.integer("samples", 1, minimum=1),
        seed=section.integer("seed", 0),
        forcing_tokens=section.integer("forcing_tokens", 128, minimum=0),
        options=section.mapping("options"),
    )
    if spec.top_p == 0:
        raise section._fail("top_p", "must be > 0")
    return spec


@dataclass(frozen=True)
class ProblemsConfig:
    dataset: str | None = None
    limit: int | None = None
    ids: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GenerateConfig:
    batch_size: int = 8


@dataclass(frozen=True)
class GradeConfig:
    timeout_s: float = 10.0
    batch_size: int = 64


#: The step segmenter of each profile when ``[segment]`` names no ``mode``: the maths-aware
#: splitter for the paper profile, plain Punkt (the authors' released scripts) for release.
PROFILE_SEGMENTERS = {"paper": "math", "release": "paper"}


@dataclass(frozen=True)
class SegmentConfig:
    mode: str = PROFILE_SEGMENTERS["paper"]
    encoding: str = "cl100k_base"
    batch_size: int = 256


@dataclass(frozen=True)
class EmbedConfig:
    batch_size: int = 64
    traces_per_part: int = 64
    disk_cache: bool = False


@dataclass(frozen=True)
class RolloutConfig:
    interval: int = 3
    samples: int = 1
    batch_size: int = 8
    include_full: bool = True
    reuse_baseline: bool = True


#: The labelers ``[judge] labelers`` accepts: the offline detectors
#: (:data:`legival_core.metrics.backtracking.OFFLINE_LABELERS`) and an LLM judge.
JUDGE_LABELERS = ("lexical", "cues", "llm")
#: The labelers a config that names none runs: both offline detectors, so the robustness
#: report compares them (the context-aware ``cues`` gives the stored share).
DEFAULT_LABELERS = ("lexical", "cues")


@dataclass(frozen=True)
class JudgeConfig:
    labelers: tuple[str, ...] = DEFAULT_LABELERS
    model: ModelConfig | None = None
    batch_size: int = 4


#: Redundancy τ of each transfer profile when ``[metrics]`` gives no ``threshold`` (the same
#: values as :data:`legival_core.metrics.efficiency.REDUNDANCY_THRESHOLDS`; a test keeps them
#: equal).
PROFILE_THRESHOLDS = {"paper": 0.8, "release": 0.85}


@dataclass(frozen=True)
class MetricsConfig:
    threshold: float = 0.8
    profile: str = "paper"
    grid: str = "interpolate"
    primary_labeler: str | None = None
    encoding: str = "cl100k_base"
    #: Buckets of problems the per-trace tables are computed in (a stable hash of the problem
    #: id); the tables are the same for any count (docs/running-at-scale.md).
    chunks: int = 16
    #: A memory budget in GB (10^9 bytes) for one bucket's per-row inputs (similarity,
    #: judgments, rollouts): the stage then takes more chunks than ``chunks`` when the store's
    #: row counts need them (:func:`precompute.stages.metrics.budget_chunks`); None: no budget.
    memory_gb: float | None = None


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything a run needs; :func:`load_config` builds it from TOML."""

    name: str = "experiment"
    seed: int = 0
    stages: tuple[str, ...] = DEFAULT_STAGES
    source: str = "<defaults>"
    problems: ProblemsConfig = field(default_factory=ProblemsConfig)
    teachers: tuple[ModelConfig, ...] = ()
    students: tuple[ModelConfig, ...] = ()
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    grade: GradeConfig = field(default_factory=GradeConfig)
    segment: SegmentConfig = field(default_factory=SegmentConfig)
    embed: EmbedConfig = field(default_factory=EmbedConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for the manifest); :meth:`from_dict` reads it back."""
        data = asdict(self)
        data.pop("source")
        data["experiment"] = {
            "name": data.pop("name"),
            "seed": data.pop("seed"),
            "stages": list(data.pop("stages")),
        }
        data["judge"]["labelers"] = list(data["judge"]["labelers"])
        judge_model = data["judge"].pop("model")
        if judge_model:
            data["judge"].update(judge_model)
        data["problems"]["ids"] = list(data["problems"]["ids"])
        for key in ("problems", "metrics"):
            data[key] = {k: v for k, v in data[key].items() if v is not None}
        data["teachers"] = list(data["teachers"])
        data["students"] = list(data["students"])
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<dict>") -> ExperimentConfig:
        return _parse(data, source)


def _parse(data: Mapping[str, Any], source: str) -> ExperimentConfig:
    # Every stage has a section of its own; the model lists and [experiment] are the rest.
    known = {"experiment", "teachers", "students", *DEFAULT_STAGES}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {unknown}; known: {sorted(known)}")

    exp = _Section(source, "experiment", data.get("experiment"))
    name = exp.string("name", "experiment") or "experiment"
    seed = exp.integer("seed", 0)
    stages = exp.strings("stages", DEFAULT_STAGES)
    if "metrics" in stages and "leaks" not in stages:
        # A config written before the leaks stage existed: the metrics read its table
        # (answer_leaks), so it runs just before them.
        at = stages.index("metrics")
        stages = (*stages[:at], "leaks", *stages[at:])
    exp.finish()

    prob = _Section(source, "problems", data.get("problems"))
    problems = ProblemsConfig(
        dataset=prob.string("dataset"),
        limit=prob.optional_integer("limit", minimum=1),
        ids=prob.strings("ids"),
        options=prob.mapping("options"),
    )
    prob.finish()

    teachers = _models(source, "teachers", data.get("teachers"), default_max_tokens=1024)
    students = _models(source, "students", data.get("students"), default_max_tokens=1024)

    gen = _Section(source, "generate", data.get("generate"))
    generate = GenerateConfig(batch_size=gen.integer("batch_size", 8, minimum=1))
    gen.finish()

    gr = _Section(source, "grade", data.get("grade"))
    grade = GradeConfig(
        timeout_s=gr.number("timeout_s", 10.0, low=0.001),
        batch_size=gr.integer("batch_size", 64, minimum=1),
    )
    gr.finish()

    metrics_table = data.get("metrics")
    release = isinstance(metrics_table, Mapping) and metrics_table.get("profile") == "release"
    seg = _Section(source, "segment", data.get("segment"))
    default_mode = PROFILE_SEGMENTERS["release" if release else "paper"]
    segment = SegmentConfig(
        mode=seg.string("mode", default_mode) or default_mode,
        encoding=seg.string("encoding", "cl100k_base") or "cl100k_base",
        batch_size=seg.integer("batch_size", 256, minimum=1),
    )
    seg.finish()

    emb = _Section(source, "embed", data.get("embed"))
    embed = EmbedConfig(
        batch_size=emb.integer("batch_size", 64, minimum=1),
        traces_per_part=emb.integer("traces_per_part", 64, minimum=1),
        disk_cache=emb.boolean("disk_cache", False),
    )
    emb.finish()

    ro = _Section(source, "rollout", data.get("rollout"))
    rollout = RolloutConfig(
        interval=ro.integer("interval", 3, minimum=1),
        samples=ro.integer("samples", 1, minimum=1),
        batch_size=ro.integer("batch_size", 8, minimum=1),
        # the released scripts never show the whole trace (last prefix m - 1)
        include_full=ro.boolean("include_full", not release),
        reuse_baseline=ro.boolean("reuse_baseline", True),
    )
    ro.finish()

    jd = _Section(source, "judge", data.get("judge"))
    labelers = jd.strings("labelers", DEFAULT_LABELERS)
    for labeler in labelers:
        if labeler not in JUDGE_LABELERS:
            choices = ", ".join(repr(name) for name in JUDGE_LABELERS)
            raise ConfigError(
                f"{source}: [judge] labelers: unknown labeler {labeler!r} (use {choices})"
            )
    judge_model = None
    if "llm" in labelers or "engine" in jd.table:
        judge_model = _model(jd, default_max_tokens=512)
    judge = JudgeConfig(
        labelers=labelers,
        model=judge_model,
        batch_size=jd.integer("batch_size", 4, minimum=1),
    )
    jd.finish()

    # The leaks stage takes its verifier timeout from [grade]; its own section has no keys.
    _Section(source, "leaks", data.get("leaks")).finish()

    me = _Section(source, "metrics", data.get("metrics"))
    profile = me.choice("profile", "paper", ("paper", "release"))
    metrics = MetricsConfig(
        # The profile brings its redundancy τ (release: the scripts' 0.85) unless the config
        # names a threshold of its own.
        threshold=me.number("threshold", PROFILE_THRESHOLDS[profile], low=0.0, high=1.0),
        profile=profile,
        grid=me.choice("grid", "interpolate", ("interpolate", "observed")),
        primary_labeler=me.string("primary_labeler"),
        encoding=me.string("encoding", "cl100k_base") or "cl100k_base",
        chunks=me.integer("chunks", 16, minimum=1),
        memory_gb=me.positive_number("memory_gb"),
    )
    me.finish()

    _check_unique(source, "teachers", teachers)
    _check_unique(source, "students", students)
    return ExperimentConfig(
        name=name,
        seed=seed,
        stages=stages,
        source=source,
        problems=problems,
        teachers=teachers,
        students=students,
        generate=generate,
        grade=grade,
        segment=segment,
        embed=embed,
        rollout=rollout,
        judge=judge,
        metrics=metrics,
    )


def _models(
    source: str, where: str, value: Any, *, default_max_tokens: int
) -> tuple[ModelConfig, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{source}: [[{where}]] must be an array of tables")
    models = []
    for index, table in enumerate(value):
        section = _Section(source, f"{where}[{index}]", table)
        models.append(_model(section, default_max_tokens=default_max_tokens))
        section.finish()
    return tuple(models)


def _check_unique(source: str, where: str, models: tuple[ModelConfig, ...]) -> None:
    seen: set[str] = set()
    for model in models:
        if model.name in seen:
            raise ConfigError(
                f"{source}: [[{where}]] name {model.name!r} appears twice; names label table "
                "rows and must be unique"
            )
        seen.add(model.name)


def load_config(path: str | Path) -> ExperimentConfig:
    """Read and validate a TOML experiment config.

    Raises:
        ConfigError: the file is missing, is not valid TOML, or a value does not fit.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: config is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: invalid TOML ({err})") from None
    return _parse(data, str(path))
