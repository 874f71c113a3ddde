"""The analysis choices behind a ranking, and every teacher's values under each alternative.

A leaderboard number rests on choices that the paper and the authors' released code make
differently. Each *family* of choices here (a registry, :data:`CHOICE_FAMILIES`) turns the
store's tables into one or more *alternatives*: the same per-trace inputs with one choice
changed. Every alternative is then reduced to per-teacher values exactly as the default is
(:func:`dataset_values`: the mean over a teacher's traces per dataset, per student then over
students for transfer metrics; then the mean over datasets), ranked, and compared with the
default ranking by :func:`legival_core.rankings.robustness.compare_rankings`.

Families, and what each needs from the store:

==================  ================================================  =====================
family              alternative                                       from
==================  ================================================  =====================
threshold           redundancy τ = 0.85 (release) vs 0.8 (paper)      ``similarity``
grid                prefixes k ∈ {0, 6, 12, …, m} and {0, 9, 18, …, m}  ``rollouts``
profile             transfer profile ``release`` vs ``paper``         ``rollouts``
student             each student alone                                ``rollouts``
labeler             each other backtracking labeler                   ``judgments``
encoding            another tiktoken encoding (counted at segment)    ``trace_counts``
references          reference teachers ranked too                     ``traces.source``
segmenter           each other segmenter's steps (``paper``: Punkt,    the ``robustness``
                    ``math``, ``lines``)                              stage's side tables
==================  ================================================  =====================

A family that cannot be computed from a store gives an alternative with a ``reason`` instead
of values (one student only, one labeler only, the side tables not built yet).

Reference: Legi-Val (arXiv 2603.20508) for the metrics; docs/profiles.md on how
the authors' release differs (restated in docs/robustness.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from legival_core.metrics.efficiency import labeler_backtracking
from legival_core.metrics.metric_catalog import LEADERBOARD_METRICS, METRICS
from legival_core.metrics.redundancy_sweep_view import trace_redundancy
from legival_core.metrics.registry import metrics_in
from legival_core.rankings.robustness import FLIP_COLUMNS, compare_rankings

if TYPE_CHECKING:
    from legival_core.rankings.rank_intervals import TeacherResamples
    from legival_core.store.store import Store

__all__ = [
    "CHOICE_FAMILIES",
    "DEFAULT_CHOICE",
    "EFFICIENCY_COLUMNS",
    "TABLE_COLUMNS",
    "TRANSFER_COLUMNS",
    "Alternative",
    "AlternativeValues",
    "RobustnessReport",
    "Settings",
    "StoreTables",
    "TransferSetup",
    "Variant",
    "assemble_report",
    "dataset_values",
    "default_intervals",
    "load_tables",
    "read_tables",
    "register_family",
    "report_frames",
    "report_from_frames",
    "robustness_report",
    "settings_key",
    "side_table_coverage",
    "teacher_values",
]

#: The key of the default ranking in :attr:`RobustnessReport.rankings`.
DEFAULT_CHOICE = "default"
#: Metrics taken from ``trace_efficiency`` (one row per trace) and from the rollouts.
EFFICIENCY_COLUMNS: tuple[str, ...] = metrics_in("resampled_efficiency")
TRANSFER_COLUMNS: tuple[str, ...] = metrics_in("resampled_transfer")
#: Segmenters the ``robustness`` stage can re-segment with (legival_core.text.segment modes),
#: each with how the report names it.
SEGMENTER_LABELS = {
    "paper": "Punkt (the paper's)",
    "math": "the maths-aware segmenter",
    "lines": "Punkt and every line break",
}
SEGMENTERS = tuple(SEGMENTER_LABELS)
#: The ``robustness_steps`` column holding each offline labeler's flags on the other steps.
SIDE_FLAGS = {"lexical": "lexical_cue", "cues": "context_cue"}


@dataclass(frozen=True)
class Settings:
    """The default choices of a store: what its ``trace_efficiency`` and ``teacher_metrics``
    were computed with (from the manifest; ``labeler`` None = the one whose labels give the
    stored backtracking column)."""

    threshold: float = 0.8
    profile: str = "paper"
    grid: str | None = None
    labeler: str | None = None
    encoding: str = "cl100k_base"
    segmenter: str = "paper"

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> Settings:
        """The latest ``metrics`` provenance record, else the stored config, else defaults.

        >>> Settings.from_manifest({"provenance": [{"stage": "metrics", "threshold": 0.85,
        ...     "profile": "release", "primary_labeler": "lexical"}]}).threshold
        0.85
        >>> Settings.from_manifest({}).segmenter
        'paper'
        """
        config = manifest.get("config") or {}
        metrics = dict(config.get("metrics") or {}) if isinstance(config, Mapping) else {}
        segment = dict(config.get("segment") or {}) if isinstance(config, Mapping) else {}
        for record in manifest.get("provenance") or []:
            if not isinstance(record, Mapping):
                continue
            if record.get("stage") == "metrics":
                metrics.update({k: v for k, v in record.items() if v is not None})
            elif record.get("stage") == "segment" and record.get("mode"):
                segment["mode"] = record["mode"]
        threshold = metrics.get("threshold")
        valid_threshold = isinstance(threshold, int | float) and not isinstance(threshold, bool)
        return cls(
            threshold=float(threshold) if valid_threshold else 0.8,  # type: ignore[arg-type]
            profile=str(metrics.get("profile") or "paper"),
            grid=str(metrics["grid"]) if metrics.get("grid") else None,
            labeler=str(metrics["primary_labeler"]) if metrics.get("primary_labeler") else None,
            encoding=str(metrics.get("encoding") or "cl100k_base"),
            segmenter=str(segment.get("mode") or "paper"),
        )


@dataclass(frozen=True)
class StoreTables:
    """The per-trace tables the choices are computed from (empty frames where absent)."""

    trace_efficiency: pd.DataFrame
    trace_transfer: pd.DataFrame = field(default_factory=pd.DataFrame)
    rollouts: pd.DataFrame = field(default_factory=pd.DataFrame)
    similarity: pd.DataFrame = field(default_factory=pd.DataFrame)
    judgments: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: ``trace_counts``: each trace's token count per encoding, counted by the segment stage.
    trace_counts: pd.DataFrame = field(default_factory=pd.DataFrame)
    robustness_steps: pd.DataFrame = field(default_factory=pd.DataFrame)
    robustness_similarity: pd.DataFrame = field(default_factory=pd.DataFrame)
    references: tuple[str, ...] = ()


#: Columns each table is read with (what the families use; None = every column).
TABLE_COLUMNS: dict[str, list[str] | None] = {
    "trace_efficiency": [
        "trace_id",
        "teacher",
        "dataset",
        "problem_id",
        "correct",
        "tokens",
        "steps",
        "redundancy",
        "backtracking",
    ],
    "trace_transfer": None,  # every column: the rank intervals resample its per-trace values
    "rollouts": ["teacher", "dataset", "student", "trace_id", "problem_id", "k", "m", "correct"],
    "similarity": ["trace_id", "step", "max_similarity"],
    "judgments": ["trace_id", "labeler", "steps", "valid"],
    "trace_counts": ["trace_id", "encoding", "tokens", "blank"],
    "robustness_steps": ["segmenter", "trace_id", "step", "lexical_cue", "context_cue"],
    "robustness_similarity": ["segmenter", "trace_id", "step", "max_similarity"],
}

Reader = Callable[[str, "list[str] | None"], pd.DataFrame]


def read_tables(read: Reader, references: Sequence[str] = ()) -> StoreTables:
    """:class:`StoreTables` from ``read(table, columns)``, which gives an empty frame for a
    table the store lacks (the app's cached reader, or :func:`load_tables`' store reads)."""
    frames = {name: read(name, columns) for name, columns in TABLE_COLUMNS.items()}
    return StoreTables(**frames, references=tuple(str(r) for r in references))


def load_tables(store: Store | str | Path) -> StoreTables:
    """Read what :func:`robustness_report` needs from a store (a
    :class:`legival_core.store.store.Store` or its folder)."""
    from legival_core.published.references import store_reference_teachers
    from legival_core.store.store import Store

    opened = store if isinstance(store, Store) else Store.open(store)

    def read(name: str, columns: list[str] | None) -> pd.DataFrame:
        return opened.read(name, columns=columns) if opened.has(name) else pd.DataFrame()

    return read_tables(read, store_reference_teachers(opened))


@dataclass(frozen=True)
class TransferSetup:
    """How transfer metrics are computed: which rollouts, which profile and grid."""

    rollouts: pd.DataFrame
    profile: str
    grid: str | None


@dataclass(frozen=True)
class Variant:
    """The inputs of one alternative: ``efficiency`` replaces ``trace_efficiency`` and
    ``transfer`` the default transfer setup (None: as the default); ``include_references``
    ranks the reference teachers too."""

    efficiency: pd.DataFrame | None = None
    transfer: TransferSetup | None = None
    include_references: bool = False


@dataclass(frozen=True)
class Alternative:
    """One alternative choice: its key, family, label, the metrics it can change, and either
    its :class:`Variant` or the ``reason`` it cannot be computed from this store."""

    key: str
    family: str
    label: str
    metrics: tuple[str, ...]
    variant: Variant | None = None
    reason: str = ""
    note: str = ""
    #: True when ``reason`` is the environment's (a package or asset missing here), not the
    #: store's: another environment would compute it, so a publisher must not drop it silently.
    environment: bool = False


Family = Callable[[StoreTables, Settings], list[Alternative]]
#: Every family of choices, by name, in the order the report lists them.
CHOICE_FAMILIES: dict[str, Family] = {}


def register_family(name: str) -> Callable[[Family], Family]:
    """Decorator: add a family of alternatives to :data:`CHOICE_FAMILIES`."""

    def add(function: Family) -> Family:
        if name in CHOICE_FAMILIES:
            raise ValueError(f"choice family {name!r} is registered twice")
        CHOICE_FAMILIES[name] = function
        return function

    return add


# ---------------------------------------------------------------------------------------------
# Per-trace inputs under a choice
# ---------------------------------------------------------------------------------------------


def _with_column(efficiency: pd.DataFrame, column: str, values: pd.Series) -> pd.DataFrame:
    """``efficiency`` with ``column`` taken from ``values`` (by trace id) where it has one."""
    ids = efficiency["trace_id"].astype(str)
    replaced = ids.map(values)
    kept = pd.to_numeric(efficiency[column], errors="coerce").astype("float64")
    return efficiency.assign(**{column: replaced.where(replaced.notna(), kept).to_numpy()})


def _default_labeler(tables: StoreTables, settings: Settings) -> str | None:
    """The labeler behind ``trace_efficiency.backtracking``: the recorded one, else the one
    whose shares reproduce the stored column on every trace it labels."""
    labelers = _labelers(tables.judgments)
    if settings.labeler is not None:
        return settings.labeler
    efficiency = tables.trace_efficiency
    steps = efficiency.set_index(efficiency["trace_id"].astype(str))["steps"]
    stored = pd.to_numeric(
        efficiency.set_index(efficiency["trace_id"].astype(str))["backtracking"], errors="coerce"
    )
    for labeler in labelers:
        shares = labeler_backtracking(tables.judgments, labeler, steps)
        both = stored.reindex(shares.index)
        if len(shares) and np.allclose(shares.to_numpy(), both.to_numpy(), atol=1e-12):
            return labeler
    return None


def _labelers(judgments: pd.DataFrame) -> list[str]:
    if judgments.empty or "labeler" not in judgments:
        return []
    return sorted({str(v) for v in judgments["labeler"].dropna()})


def side_table_coverage(tables: StoreTables, segmenter: str) -> tuple[int, int]:
    """(traces re-segmented and re-embedded with ``segmenter``, traces with steps): how far
    the ``robustness`` stage got.

    >>> eff = pd.DataFrame({"trace_id": ["a", "b"], "steps": [3, 0]})
    >>> side = pd.DataFrame({"segmenter": ["lines"], "trace_id": ["a"], "step": [0]})
    >>> side_table_coverage(StoreTables(eff, robustness_similarity=side), "lines")
    (1, 1)
    """
    efficiency = tables.trace_efficiency
    wanted = set(efficiency.loc[pd.to_numeric(efficiency["steps"]) > 0, "trace_id"].astype(str))
    side = tables.robustness_similarity
    if side.empty:
        return 0, len(wanted)
    done = set(side.loc[side["segmenter"].astype(str) == segmenter, "trace_id"].astype(str))
    return len(done & wanted), len(wanted)


# ---------------------------------------------------------------------------------------------
# The families
# ---------------------------------------------------------------------------------------------


@register_family("threshold")
def _threshold(tables: StoreTables, settings: Settings) -> list[Alternative]:
    from legival_core.metrics.efficiency import REDUNDANCY_THRESHOLDS

    others = [
        (name, tau)
        for name, tau in REDUNDANCY_THRESHOLDS.items()
        if not math.isclose(tau, settings.threshold, abs_tol=1e-12)
    ]
    out = []
    for name, tau in others:
        key, label = f"threshold:{tau:g}", f"redundancy τ = {tau:g} ({name})"
        if tables.similarity.empty:
            out.append(
                Alternative(key, "threshold", label, ("redundancy",), reason="no similarity table")
            )
            continue
        shares = trace_redundancy(tables.similarity, tau)
        efficiency = _with_column(tables.trace_efficiency, "redundancy", shares)
        out.append(Alternative(key, "threshold", label, ("redundancy",), Variant(efficiency)))
    return out


def _grid_interval(rollouts: pd.DataFrame) -> int | None:
    """The step interval of the stored prefix grid: the gcd of every k with 0 < k < m."""
    k = pd.to_numeric(rollouts["k"]).to_numpy(np.int64)
    m = pd.to_numeric(rollouts["m"]).to_numpy(np.int64)
    inner = np.unique(k[(k > 0) & (k < m)])
    return int(np.gcd.reduce(inner)) if len(inner) else None


@register_family("grid")
def _grid(tables: StoreTables, settings: Settings) -> list[Alternative]:
    metrics = TRANSFER_COLUMNS
    if tables.rollouts.empty:
        return [Alternative("grid", "grid", "coarser prefix grid", metrics, reason="no rollouts")]
    interval = _grid_interval(tables.rollouts)
    if interval is None:
        reason = "the rollouts have no prefix between k = 0 and k = m"
        return [Alternative("grid", "grid", "coarser prefix grid", metrics, reason=reason)]
    out = []
    for factor in (2, 3):
        step = interval * factor
        k = pd.to_numeric(tables.rollouts["k"]).to_numpy(np.int64)
        m = pd.to_numeric(tables.rollouts["m"]).to_numpy(np.int64)
        # A coarser run would still show the student nothing (k = 0) and the whole trace (m).
        keep = (k == 0) | (k == m) | (k % step == 0)
        setup = TransferSetup(tables.rollouts[keep], settings.profile, settings.grid)
        label = f"prefix grid every {step} steps"
        out.append(Alternative(f"grid:{step}", "grid", label, metrics, Variant(transfer=setup)))
    return out


@register_family("profile")
def _profile(tables: StoreTables, settings: Settings) -> list[Alternative]:
    from legival_core.metrics.transfer import PROFILES

    out = []
    for name in PROFILES:
        if name == settings.profile:
            continue
        key, label = f"profile:{name}", f"transfer profile {name}"
        if tables.rollouts.empty:
            out.append(Alternative(key, "profile", label, TRANSFER_COLUMNS, reason="no rollouts"))
            continue
        setup = TransferSetup(tables.rollouts, name, None)
        out.append(Alternative(key, "profile", label, TRANSFER_COLUMNS, Variant(transfer=setup)))
    return out


@register_family("student")
def _student(tables: StoreTables, settings: Settings) -> list[Alternative]:
    if tables.rollouts.empty:
        return [
            Alternative(
                "student", "student", "each student alone", TRANSFER_COLUMNS, reason="no rollouts"
            )
        ]
    students = sorted({str(s) for s in tables.rollouts["student"].dropna()})
    if len(students) < 2:
        reason = f"the store has one student ({', '.join(students)}): its ranking is the default"
        return [
            Alternative("student", "student", "each student alone", TRANSFER_COLUMNS, reason=reason)
        ]
    out = []
    chosen = tables.rollouts["student"].astype(str)
    for student in students:
        setup = TransferSetup(
            tables.rollouts[(chosen == student).to_numpy()], settings.profile, settings.grid
        )
        out.append(
            Alternative(
                f"student:{student}",
                "student",
                f"student {student} alone",
                TRANSFER_COLUMNS,
                Variant(transfer=setup),
            )
        )
    return out


@register_family("labeler")
def _labeler(tables: StoreTables, settings: Settings) -> list[Alternative]:
    labelers = _labelers(tables.judgments)
    default = _default_labeler(tables, settings)
    others = [name for name in labelers if name != default]
    if not others:
        reason = (
            f"the judgments hold one labeler ({', '.join(labelers) or 'none'}); an LLM judge's "
            "labels come from the judge stage with a judge model"
        )
        return [
            Alternative("labeler", "labeler", "another labeler", ("backtracking",), reason=reason)
        ]
    efficiency = tables.trace_efficiency
    steps = efficiency.set_index(efficiency["trace_id"].astype(str))["steps"]
    out = []
    for labeler in others:
        shares = labeler_backtracking(tables.judgments, labeler, steps)
        labelled = len(shares)
        # Traces the labeler did not label drop out of the means (NaN), not counted as 0.
        ids = efficiency["trace_id"].astype(str)
        changed = efficiency.assign(backtracking=ids.map(shares).astype("float64").to_numpy())
        note = (
            "" if labelled >= len(efficiency) else f"labels {labelled} of {len(efficiency)} traces"
        )
        out.append(
            Alternative(
                f"labeler:{labeler}",
                "labeler",
                f"backtracking labeler {labeler}",
                ("backtracking",),
                Variant(changed),
                note=note,
            )
        )
    return out


@register_family("encoding")
def _encoding(tables: StoreTables, settings: Settings) -> list[Alternative]:
    other = "o200k_base" if settings.encoding != "o200k_base" else "cl100k_base"
    key, label = f"encoding:{other}", f"tokens counted with {other}"
    counts = tables.trace_counts
    if not counts.empty and "encoding" in counts:
        counts = counts[counts["encoding"] == other]
    if counts.empty or "tokens" not in counts:
        reason = (
            f"no token counts in {other} stored (table trace_counts): run `python -m precompute "
            "segment --store DIR`, which counts every trace in it"
        )
        return [Alternative(key, "encoding", label, ("tokens",), reason=reason)]
    # The segment stage counted the whole text; the release profile counts a blank one as 0.
    tokens = counts["tokens"].astype("float64")
    if settings.profile == "release":
        tokens = tokens.where(~counts["blank"].astype(bool), 0.0)
    recount = pd.Series(tokens.to_numpy(), index=counts["trace_id"].astype(str))
    efficiency = _with_column(tables.trace_efficiency, "tokens", recount)
    return [Alternative(key, "encoding", label, ("tokens",), Variant(efficiency))]


@register_family("references")
def _references(tables: StoreTables, settings: Settings) -> list[Alternative]:
    label = "reference teachers ranked too"
    if not tables.references:
        return [
            Alternative(
                "references",
                "references",
                label,
                LEADERBOARD_METRICS,
                reason="no reference teacher",
            )
        ]
    note = (
        f"{', '.join(tables.references)} joins the ranking; adding a teacher never reorders the "
        "others, so only its own place is new"
    )
    return [
        Alternative(
            "references:in",
            "references",
            label,
            LEADERBOARD_METRICS,
            Variant(include_references=True),
            note=note,
        )
    ]


@register_family("segmenter")
def _segmenter(tables: StoreTables, settings: Settings) -> list[Alternative]:
    labeler = _default_labeler(tables, settings)
    flag = SIDE_FLAGS.get(labeler or "")
    # Backtracking follows the segmentation only when an offline detector made it (a judge's
    # labels on the new steps would need the judge to run again).
    metrics = ("redundancy", "backtracking") if flag else ("redundancy",)
    out = []
    for other in SEGMENTERS:
        if other == settings.segmenter:
            continue
        key, label = f"segmenter:{other}", f"steps cut by {other} ({SEGMENTER_LABELS[other]})"
        done, wanted = side_table_coverage(tables, other)
        if done < wanted or not wanted:
            reason = (
                f"{done} of {wanted} traces re-segmented with {other}; run: python -m precompute "
                f"robustness --store DIR --segmenter {other} (it resumes where it stopped)"
            )
            out.append(Alternative(key, "segmenter", label, metrics, reason=reason))
            continue
        side = tables.robustness_similarity
        side = side[side["segmenter"].astype(str) == other]
        efficiency = _with_column(
            tables.trace_efficiency, "redundancy", trace_redundancy(side, settings.threshold)
        )
        note = "" if flag else f"backtracking left as is: its labeler {labeler} is not offline"
        steps = tables.robustness_steps
        if flag and len(steps):
            steps = steps[steps["segmenter"].astype(str) == other]
            flags = steps[flag] if flag in steps else pd.Series(pd.NA, index=steps.index)
            if len(steps) and flags.notna().any():
                cue = flags.astype("boolean").fillna(False).astype(float)
                shares = cue.groupby(steps["trace_id"].astype(str).to_numpy()).mean()
                efficiency = _with_column(efficiency, "backtracking", shares)
            else:
                note = (
                    f"backtracking left as is: the side tables hold no {labeler} flags (built "
                    "before that labeler); run the robustness stage again on a fresh copy"
                )
        out.append(Alternative(key, "segmenter", label, metrics, Variant(efficiency), note=note))
    return out


# ---------------------------------------------------------------------------------------------
# Teacher values and the report
# ---------------------------------------------------------------------------------------------


def dataset_values(
    efficiency: pd.DataFrame,
    transfer: TransferSetup | None,
    leaks: pd.DataFrame | None = None,
    metrics: Sequence[str] = LEADERBOARD_METRICS,
) -> pd.DataFrame:
    """Per (teacher, dataset): the metrics as the ``metrics`` stage's ``teacher_metrics``
    computes them.

    * accuracy, tokens, redundancy, backtracking: the mean over the teacher's traces in
      ``efficiency`` (one row per trace; NaN values left out);
    * fotu, sotu, regression_rate: :func:`legival_core.metrics.transfer.teacher_metrics` of
      ``transfer.rollouts`` with its profile and grid (per student over traces, then the mean
      over students);
    * fotu_before_leak: :func:`legival_core.metrics.transfer.fotu_before_leak` with ``leaks``
      (``trace_id``, ``leak_k``), the mean over traces per student, then over students.

    >>> eff = pd.DataFrame({"teacher": ["a", "a"], "dataset": "d", "correct": [True, False],
    ...     "tokens": [10, 30]})
    >>> dataset_values(eff, None, metrics=["accuracy", "tokens"]).values.tolist()
    [['a', 'd', 0.5, 20.0]]
    """
    wanted = [m for m in metrics if m in EFFICIENCY_COLUMNS or m in TRANSFER_COLUMNS]
    columns = {
        m: ("correct" if m == "accuracy" else m)
        for m in wanted
        if m in EFFICIENCY_COLUMNS and ("correct" if m == "accuracy" else m) in efficiency
    }
    numbers = pd.DataFrame(
        {
            m: pd.to_numeric(efficiency[c].astype("Float64"), errors="coerce").astype("float64")
            for m, c in columns.items()
        }
    )
    numbers["teacher"] = efficiency["teacher"].astype(str).to_numpy()
    numbers["dataset"] = efficiency["dataset"].astype(str).to_numpy()
    table = numbers.groupby(["teacher", "dataset"], sort=True)[list(columns)].mean().reset_index()
    needs_transfer = [m for m in wanted if m in TRANSFER_COLUMNS]
    if transfer is not None and len(transfer.rollouts) and needs_transfer:
        from legival_core.metrics.transfer import as_grid, fotu_before_leak, teacher_metrics

        rollouts = transfer.rollouts
        quantities = [m for m in needs_transfer if m != "fotu_before_leak"]
        if quantities:
            grid = as_grid(transfer.grid)
            per = teacher_metrics(rollouts, profile=transfer.profile, n_boot=0, grid=grid)
            per = per.assign(teacher=per["teacher"].astype(str), dataset=per["dataset"].astype(str))
            table = table.merge(per[["teacher", "dataset", *quantities]], how="outer")
        if "fotu_before_leak" in needs_transfer and leaks is not None and len(leaks):
            before = fotu_before_leak(
                rollouts, leaks, profile=transfer.profile, grid=as_grid(transfer.grid)
            )
            per_student = (
                before.assign(
                    teacher=before["teacher"].astype(str), dataset=before["dataset"].astype(str)
                )
                .groupby(["teacher", "dataset", "student"], observed=True)["fotu_before_leak"]
                .mean()
                .groupby(level=["teacher", "dataset"], observed=True)
                .mean()
                .reset_index()
            )
            table = table.merge(per_student, how="outer")
    return table.sort_values(["teacher", "dataset"]).reset_index(drop=True)


def teacher_values(
    per_dataset: pd.DataFrame,
    metric: str,
    references: Sequence[str] = (),
    include_references: bool = False,
) -> pd.Series:
    """One metric per teacher: the mean over its datasets (as the leaderboard averages), the
    reference teachers left out unless ``include_references``; teachers without a value
    dropped.

    >>> per = pd.DataFrame({"teacher": ["a", "a", "h"], "dataset": ["x", "y", "x"],
    ...     "fotu": [0.2, 0.4, 0.9]})
    >>> teacher_values(per, "fotu", references=["h"]).round(3).to_dict()
    {'a': 0.3}
    """
    if metric not in per_dataset:
        return pd.Series(dtype="float64")
    values = per_dataset.groupby("teacher", sort=True)[metric].mean()
    if not include_references:
        values = values[~values.index.astype(str).isin([str(r) for r in references])]
    return values.dropna().astype("float64")


def default_intervals(
    tables: StoreTables,
    metrics: Sequence[str],
    defaults: pd.DataFrame,
    n_boot: int,
    seed: int = 0,
    resamples: TeacherResamples | None = None,
) -> pd.DataFrame:
    """The default ranking's 95% rank intervals per (metric, teacher), from ``n_boot`` paired
    resamples of problems (:func:`legival_core.rankings.rank_intervals.interval_table`), kept for
    the metrics whose resampled point values equal ``defaults`` (teacher -> metric columns;
    :func:`legival_core.rankings.rank_intervals.agreeing_intervals`).

    ``resamples``: those resamples already drawn (the metrics stage's, merged from its buckets:
    ``finalize_board(board, references)``, equal to ``resample_teachers`` of ``tables`` with the
    same ``n_boot``, ``seed`` and references), used instead of resampling ``tables`` again."""
    from legival_core.rankings.rank_intervals import (
        TeacherResamples,
        agreeing_intervals,
        interval_table,
        resample_teachers,
    )

    if n_boot <= 0:
        return pd.DataFrame(columns=["metric", "teacher", "rank_lo", "rank_hi"])
    if resamples is not None:
        if (resamples.n_boot, resamples.seed) != (n_boot, seed):
            raise ValueError(
                f"default_intervals: resamples of (n_boot, seed) ({resamples.n_boot}, "
                f"{resamples.seed}) given for ({n_boot}, {seed})"
            )
        drawn = resamples.metrics
        resamples = TeacherResamples(
            resamples.teachers, n_boot, seed, {m: drawn[m] for m in metrics if m in drawn}
        )
    else:
        transfer = tables.trace_transfer
        resamples = resample_teachers(
            tables.trace_efficiency,
            transfer if len(transfer) else None,
            metrics,
            n_boot=n_boot,
            seed=seed,
            references=tables.references,
        )
    directions = {m: METRICS[m].higher_is_better for m in METRICS}
    table = interval_table(resamples, directions)
    return agreeing_intervals(table, defaults)


@dataclass(frozen=True)
class RobustnessReport:
    """Every metric's ranking under every alternative choice, compared with the default.

    * ``summary``: one row per (metric, alternative): ``metric, family, choice, label,
      tau_b, rho, n_teachers, flips, real_flips, note``;
    * ``rankings``: ``metric, choice, teacher, value, rank`` (``choice = "default"`` too);
    * ``flips``: ``metric, choice`` and :data:`legival_core.rankings.robustness.FLIP_COLUMNS`;
    * ``unavailable``: ``family, choice, label, reason`` for alternatives this store cannot
      give;
    * ``settings``: the default choices.
    """

    summary: pd.DataFrame
    rankings: pd.DataFrame
    flips: pd.DataFrame
    unavailable: pd.DataFrame
    settings: Settings
    #: The keys of the :attr:`unavailable` choices that this environment could not compute (a
    #: package missing) although the store holds what they need.
    missing_here: tuple[str, ...] = ()

    def changing_teachers(self, metric: str) -> set[str]:
        """Teachers whose order against another teacher flips under some alternative.

        >>> flips = pd.DataFrame({"metric": ["fotu", "tokens"], "above": ["a", "c"],
        ...     "below": ["b", "d"]})
        >>> empty = pd.DataFrame()
        >>> report = RobustnessReport(empty, empty, flips, empty, Settings())
        >>> sorted(report.changing_teachers("fotu"))
        ['a', 'b']
        """
        rows = self.flips[self.flips["metric"] == metric]
        return {str(t) for t in pd.concat([rows["above"], rows["below"]])}

    def survival(self) -> pd.DataFrame:
        """Per metric: pairs of teachers the default orders, alternatives compared (how many,
        and their labels in ``compared``), flips, real flips, pairs an alternative ties, and
        which alternatives flip (``flipped_by``) or tie (``tied_by``) a pair; both empty =
        the ranking survives every choice compared (only those: a choice this store cannot
        give is in :attr:`unavailable`, never in ``compared``)."""
        records = []
        for metric, rows in self.summary.groupby("metric", sort=False):
            default = self.rankings[
                (self.rankings["metric"] == metric) & (self.rankings["choice"] == DEFAULT_CHOICE)
            ]
            ranks = pd.to_numeric(default["rank"], errors="coerce").dropna().to_numpy()
            i, j = np.triu_indices(len(ranks), k=1)
            records.append(
                {
                    "metric": metric,
                    "ordered_pairs": int(np.count_nonzero(ranks[i] != ranks[j])),
                    "choices": len(rows),
                    "compared": ", ".join(rows["label"].astype(str)),
                    "flips": int(rows["flips"].sum()),
                    "real_flips": int(rows["real_flips"].sum()),
                    "ties": int(rows["ties"].sum()),
                    "flipped_by": ", ".join(rows.loc[rows["flips"] > 0, "label"].astype(str)),
                    "tied_by": ", ".join(rows.loc[rows["ties"] > 0, "label"].astype(str)),
                }
            )
        columns = ["metric", "ordered_pairs", "choices", "compared", "flips", "real_flips"]
        return pd.DataFrame.from_records(
            records, columns=[*columns, "ties", "flipped_by", "tied_by"]
        )


def _leaks(trace_transfer: pd.DataFrame) -> pd.DataFrame | None:
    if trace_transfer.empty or "leak_k" not in trace_transfer:
        return None
    return trace_transfer[["trace_id", "leak_k"]].drop_duplicates("trace_id")


def robustness_report(
    tables: StoreTables,
    settings: Settings,
    metrics: Sequence[str] = LEADERBOARD_METRICS,
    n_boot: int = 0,
    seed: int = 0,
    families: Sequence[str] | None = None,
) -> RobustnessReport:
    """Rank every metric under every alternative of ``families`` (all of
    :data:`CHOICE_FAMILIES` by default) and compare each ranking with the default.

    The default's 95% rank intervals from ``n_boot`` paired resamples of problems (seeded;
    :func:`default_intervals`) decide whether a flip is within noise or real; with
    ``n_boot = 0`` every flip says "no interval". Metrics without a value for any teacher
    under the default are left out.

    On the bundled demo store, redundancy with the steps cut at every line instead of by the
    maths-aware segmenter swaps gpt-4-turbo and PaLM 2 Medium (one discordant pair of
    six: τ_b = (5 − 1) / 6), while τ = 0.85 and Punkt's steps keep the order:

    >>> from legival_core.store.store import Store
    >>> demo = Store.open("results/demo")
    >>> report = robustness_report(load_tables(demo), Settings.from_manifest(demo.manifest))
    >>> summary = report.summary.set_index(["metric", "choice"])
    >>> row = summary.loc[("redundancy", "segmenter:lines")]
    >>> round(float(row.tau_b), 2), round(float(row.rho), 2), int(row.flips)
    (0.67, 0.8, 1)
    >>> int(summary.loc[("redundancy", "threshold:0.85")].flips)
    0
    >>> flips = report.flips[report.flips["metric"] == "redundancy"]
    >>> flips[["above", "below", "verdict"]].values.tolist()  # n_boot = 0: no interval to judge
    [['gpt-4-turbo', 'palm-2-medium', 'no interval']]
    >>> sorted(report.changing_teachers("redundancy"))
    ['gpt-4-turbo', 'palm-2-medium']
    >>> report.unavailable["choice"].tolist()  # both labelers and the side tables: all compared
    []
    """
    leaks = _leaks(tables.trace_transfer)
    default_setup = (
        TransferSetup(tables.rollouts, settings.profile, settings.grid)
        if len(tables.rollouts)
        else None
    )
    defaults = dataset_values(tables.trace_efficiency, default_setup, leaks, metrics)
    alternatives: list[AlternativeValues] = []
    for family in families if families is not None else list(CHOICE_FAMILIES):
        for alternative in CHOICE_FAMILIES[family](tables, settings):
            variant = alternative.variant
            if variant is None:
                alternatives.append((family, alternative, None, False))
                continue

            def per_dataset(wanted: Sequence[str], variant: Variant = variant) -> pd.DataFrame:
                return dataset_values(
                    variant.efficiency
                    if variant.efficiency is not None
                    else tables.trace_efficiency,
                    variant.transfer if variant.transfer is not None else default_setup,
                    leaks,
                    wanted,
                )

            alternatives.append((family, alternative, per_dataset, variant.include_references))
    labeler = _default_labeler(tables, settings)
    return assemble_report(
        tables, replace(settings, labeler=labeler), defaults, alternatives, metrics, n_boot, seed
    )


#: One alternative for :func:`assemble_report`: its family, the :class:`Alternative`, its
#: per-(teacher, dataset) values of the metrics asked for (None: it has a ``reason``), and
#: whether the reference teachers are ranked too.
AlternativeValues = tuple[str, Alternative, "Callable[[Sequence[str]], pd.DataFrame] | None", bool]


def assemble_report(
    tables: StoreTables,
    settings: Settings,
    defaults: pd.DataFrame,
    alternatives: Sequence[AlternativeValues],
    metrics: Sequence[str],
    n_boot: int,
    seed: int,
    resamples: TeacherResamples | None = None,
) -> RobustnessReport:
    """The report from the default's per-(teacher, dataset) values ``defaults`` and each
    alternative's (whole tables: :func:`robustness_report`; merged chunk partials:
    :func:`legival_core.rankings.robustness_partials.robustness_finalize`); ``tables`` gives
    the per-trace tables the default's rank intervals resample (or ``resamples`` those
    resamples drawn: :func:`default_intervals`), and the reference teachers."""
    shown = [m for m in metrics if m in defaults and defaults[m].notna().any()]
    default_values = {m: teacher_values(defaults, m, tables.references) for m in shown}
    ranking_rows = [_ranking_rows(m, DEFAULT_CHOICE, default_values[m]) for m in shown]
    board = pd.DataFrame({m: default_values[m] for m in shown}).rename_axis("teacher")
    intervals = default_intervals(tables, shown, board.reset_index(), n_boot, seed, resamples)
    summary, flips, unavailable, missing_here = [], [], [], []
    for family, alternative, values_of, include_references in alternatives:
        affected = [m for m in alternative.metrics if m in shown]
        if values_of is None:
            unavailable.append((family, alternative.key, alternative.label, alternative.reason))
            if alternative.environment:
                missing_here.append(alternative.key)
            continue
        if not affected:
            continue
        per_dataset = values_of(affected)
        for metric in affected:
            values = teacher_values(per_dataset, metric, tables.references, include_references)
            metric_intervals = intervals[intervals["metric"] == metric]
            comparison = compare_rankings(
                default_values[metric],
                values,
                METRICS[metric].higher_is_better,
                metric_intervals,
            )
            ranking_rows.append(_ranking_rows(metric, alternative.key, values))
            summary.append(
                {
                    "metric": metric,
                    "family": family,
                    "choice": alternative.key,
                    "label": alternative.label,
                    "tau_b": comparison.tau_b,
                    "rho": comparison.rho,
                    "n_teachers": comparison.n_teachers,
                    "flips": comparison.n_flips,
                    "real_flips": comparison.n_real_flips,
                    "ties": comparison.n_ties,
                    "note": alternative.note,
                }
            )
            if comparison.n_flips:
                flips.append(comparison.flips.assign(metric=metric, choice=alternative.key))
    summary_columns = [
        "metric",
        "family",
        "choice",
        "label",
        "tau_b",
        "rho",
        "n_teachers",
        "flips",
        "real_flips",
        "ties",
        "note",
    ]
    summary_frame = pd.DataFrame.from_records(summary, columns=summary_columns)
    order = {m: i for i, m in enumerate(shown)}
    summary_frame = summary_frame.sort_values(
        "metric", key=lambda s: s.map(order), kind="stable"
    ).reset_index(drop=True)
    flip_frame = (
        pd.concat(flips, ignore_index=True)[["metric", "choice", *FLIP_COLUMNS]]
        if flips
        else pd.DataFrame(columns=["metric", "choice", *FLIP_COLUMNS])
    )
    return RobustnessReport(
        summary=summary_frame,
        rankings=pd.concat(ranking_rows, ignore_index=True)
        if ranking_rows
        else pd.DataFrame(columns=["metric", "choice", "teacher", "value", "rank"]),
        flips=flip_frame,
        unavailable=pd.DataFrame.from_records(
            unavailable, columns=["family", "choice", "label", "reason"]
        ),
        settings=settings,
        missing_here=tuple(missing_here),
    )


def _ranking_rows(metric: str, choice: str, values: pd.Series) -> pd.DataFrame:
    from legival_core.rankings.robustness import ranks_of

    ranks = ranks_of(values, METRICS[metric].higher_is_better)
    frame = pd.DataFrame(
        {
            "metric": metric,
            "choice": choice,
            "teacher": values.index.astype(str),
            "value": values.to_numpy(dtype="float64"),
            "rank": pd.array(ranks.to_numpy(), dtype="Float64").astype("Int64"),
        }
    )
    return frame.sort_values(["rank", "teacher"], kind="stable").reset_index(drop=True)


#: The frames of a :class:`RobustnessReport`, stored one ``page_results`` row each.
REPORT_PARTS = ("summary", "rankings", "flips", "unavailable")


def settings_key(settings: Settings) -> str:
    """``settings`` as a JSON text (part of a stored report's selection: a report made under
    other default choices is never read for these).

    >>> settings_key(Settings())[:40]
    '{"encoding": "cl100k_base", "grid": null'
    """
    import dataclasses
    import json

    return json.dumps(dataclasses.asdict(settings), sort_keys=True)


def report_frames(report: RobustnessReport) -> dict[str, pd.DataFrame]:
    """The frames of ``report`` by :data:`REPORT_PARTS` name (what the metrics stage stores)."""
    return {part: getattr(report, part) for part in REPORT_PARTS}


def report_from_frames(frames: Mapping[str, pd.DataFrame], settings: Settings) -> RobustnessReport:
    """The :class:`RobustnessReport` :func:`report_frames` gave, under ``settings``.

    >>> empty = pd.DataFrame()
    >>> report = RobustnessReport(empty, empty, empty, empty, Settings())
    >>> report_from_frames(report_frames(report), Settings()) == report
    True
    """
    return RobustnessReport(**{part: frames[part] for part in REPORT_PARTS}, settings=settings)
