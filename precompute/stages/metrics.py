"""Stage ``metrics``: the derived tables, recomputed from the whole store with legival_core.

* ``trace_efficiency`` — per trace: tiktoken length n, steps m, both normalised by the median
  of the problem's correct traces, redundancy (share of steps with r_i > τ), backtracking
  (share of steps flagged by the primary labeler), compression σ (docs/metrics/).
* ``trace_transfer`` — per (trace, student): FOTU, hazard bin, regressions, baseline, lift
  (:func:`legival_core.metrics.transfer.trace_metrics`, docs/metrics/fotu.md).
* ``transfer_curves`` — the transfer page's curves, hazards and summaries for every dataset x
  student selection and profile
  (:func:`legival_core.metrics.transfer_curves.transfer_curve_table`), so the app need not read the
  rollouts.
* ``teacher_metrics`` — per (teacher, dataset): accuracy and the means of the efficiency
  columns, plus FOTU, SOTU, regression rate, never-solved share and baseline from
  :func:`legival_core.metrics.transfer.teacher_metrics`.
* ``page_results`` — what the slow pages compute on load for their default selection
  (:func:`page_results_table`), stamped with the state of its inputs, so a page reads it
  instead (:mod:`legival_core.metrics.page_results`).
* ``decomposition`` — per (teacher, dataset, layer): Kaiser et al.'s E0 = 1000·r_ctx·r_logic/E[T]
  with VŌ and κ for the native workload (``problems.workload``), the solver-derived workload
  (pool = every teacher of the dataset but the reference teachers, see
  :mod:`legival_core.published.references`) and the trace layer (σ·T in place of T).

Each run rewrites these tables whole (they are cheap and depend on everything), then
compacts them to one part. The stage needs the whole store, so it refuses ``--shard``.

Before writing anything it checks that the per-trace inputs are complete
(:func:`missing_input`): every trace with a known gold answer graded, every trace with
reasoning segmented, embedded and labelled by the primary labeler. When one is not, it stops
with one line naming the stage to run first (exit 5 on the command line) instead of writing
rows with holes in them. Rollouts are optional: without them the transfer columns stay empty.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa

from legival_core.oversight.reward_partials import RewardPartial
from legival_core.rankings.selection import RANK_RESAMPLES, RESAMPLE_SEED
from legival_core.store.frames import is_in
from legival_core.store.spilled_frames import SpilledFrame, held
from precompute.bucket_spill import BucketFiles, SpilledBuckets, spilled_bucket_reader
from precompute.decomposition_partials import DecompositionPartial
from precompute.memory import release_freed_memory
from precompute.stages.base import (
    StageContext,
    StageError,
    StageOption,
    StageResult,
    register_stage,
)
from precompute.stages.common import is_missing, read_or_empty

if TYPE_CHECKING:
    from legival_core.metrics.page_results import ResultKey
    from legival_core.metrics.redundancy_sweep_view import SweepPartial
    from legival_core.metrics.teacher_partials import TeacherPartials
    from legival_core.rankings.board_partials import BoardPartials, BoardRows
    from legival_core.rankings.rank_intervals import TeacherResamples
    from legival_core.rankings.robustness_choices import Settings
    from legival_core.rankings.robustness_partials import RobustnessPartial
    from legival_core.store.store import Store
    from precompute.config import MetricsConfig

__all__ = [
    "budget_chunks",
    "compute_in_chunks",
    "decomposition_table",
    "efficiency_table",
    "missing_input",
    "primary_labeler",
    "rollout_results_in_chunks",
    "run_metrics",
    "teacher_table",
    "transfer_curves_table",
    "transfer_table",
]

#: How a row both correct and truncated is treated by the decomposition (Kaiser et al.:
#: a truncated output never counts as correct).
TRUNCATED_CORRECT = "count_incorrect"


def primary_labeler(ctx: StageContext) -> str:
    """The labeler whose flags give ``trace_efficiency.backtracking``.

    ``[metrics] primary_labeler`` when set; else the LLM judge when configured; else the
    context-aware cues when the judge stage runs them; else lexical.
    """
    chosen = ctx.config.metrics.primary_labeler
    if chosen:
        return chosen
    judge = ctx.config.judge
    if "llm" in judge.labelers and judge.model is not None:
        from precompute.stages.judge import labeler_name

        return labeler_name(judge.model.name)
    return "cues" if "cues" in judge.labelers else "lexical"


def efficiency_from_counts(
    traces: pd.DataFrame,
    counts: pd.DataFrame,
    grades: pd.DataFrame,
    similarity: pd.DataFrame,
    judgments: pd.DataFrame,
    *,
    threshold: float,
    labeler: str,
    profile: str = "paper",
) -> pd.DataFrame:
    """Rows of ``trace_efficiency`` (docs/metrics/index.md), one per trace of ``traces``
    (``trace_id, teacher, dataset, problem_id``), from numbers only: ``counts`` holds each
    trace's ``tokens``, ``blank``, ``steps`` and ``compression`` in one encoding (the
    ``trace_counts`` table the segment stage writes), so no text is read here.

    ``profile="release"`` counts a whitespace-only reasoning as 0 tokens, as the authors'
    released scripts do (docs/profiles.md); the redundancy τ is ``threshold`` in either case (the
    config gives 0.85 for ``release`` unless it names a threshold).
    """
    from legival_core.metrics.efficiency import labeler_backtracking, normalised_lengths
    from legival_core.metrics.redundancy_sweep_view import trace_redundancy

    frame = traces[["trace_id", "teacher", "dataset", "problem_id"]].copy()
    correct = dict(zip(grades["trace_id"], grades["correct"], strict=True))
    frame["correct"] = [correct.get(t) for t in frame["trace_id"]]
    counted = counts.drop_duplicates("trace_id", keep="last").set_index("trace_id")
    ids = frame["trace_id"]
    tokens = pd.to_numeric(ids.map(counted["tokens"]), errors="coerce").astype("Int64")
    if profile == "release":
        blank = ids.map(counted["blank"]).astype("boolean").fillna(False)
        tokens = tokens.mask(blank.to_numpy(dtype=bool), 0)
    # every trace counted (the stage checks): plain integers, as the table stores them
    frame["tokens"] = tokens.astype("int64") if tokens.notna().all() else tokens
    steps = pd.to_numeric(ids.map(counted["steps"]), errors="coerce").fillna(0).astype(int)
    frame["steps"] = steps.to_numpy()
    step_counts = pd.Series(frame["steps"].to_numpy(), index=ids.to_numpy())
    norm_input = frame.assign(correct=frame["correct"].astype("boolean").fillna(False))
    frame["tokens_norm"] = normalised_lengths(norm_input, "tokens").to_numpy()
    frame["steps_norm"] = normalised_lengths(norm_input, "steps").to_numpy()
    redundancy = (
        trace_redundancy(similarity, threshold) if len(similarity) else pd.Series(dtype=float)
    )
    # A trace without steps has nothing to repeat: redundancy 0 (docs/metrics/redundancy.md: m <= 1
    # gives 0); one with steps but no similarities (not embedded) has none.
    shares = ids.astype(str).map(redundancy).astype("float64")
    frame["redundancy"] = shares.mask(shares.isna() & (steps == 0), 0.0).to_numpy()
    flags = (
        labeler_backtracking(judgments, labeler, step_counts)
        if len(judgments)
        else pd.Series(dtype=float)
    )
    # no judgment of a trace without steps: 0, as for redundancy; of one with steps: none
    shares = ids.astype(str).map(flags).astype("float64")
    frame["backtracking"] = shares.mask(shares.isna() & (steps == 0), 0.0).to_numpy()
    sigma = pd.to_numeric(ids.map(counted["compression"]), errors="coerce")
    frame["compression"] = sigma.astype("float64").to_numpy()
    return frame


def efficiency_table(
    traces: pd.DataFrame,
    grades: pd.DataFrame,
    steps: pd.DataFrame,
    similarity: pd.DataFrame,
    judgments: pd.DataFrame,
    *,
    threshold: float,
    labeler: str,
    encoding: str,
    profile: str = "paper",
) -> pd.DataFrame:
    """:func:`efficiency_from_counts` from the texts: ``traces`` with their ``reasoning`` and
    ``steps`` (one row per step) are first counted as the segment stage counts them
    (:func:`precompute.stages.segment.trace_count_rows`) in ``encoding``."""
    from precompute.stages.segment import trace_count_rows

    step_counts = steps.groupby("trace_id").size() if len(steps) else pd.Series(dtype=int)
    counts = trace_count_rows(
        traces["trace_id"].tolist(),
        traces["reasoning"].tolist(),
        [int(step_counts.get(t, 0)) for t in traces["trace_id"]],
        [encoding],
    )
    return efficiency_from_counts(
        traces,
        counts,
        grades,
        similarity,
        judgments,
        threshold=threshold,
        labeler=labeler,
        profile=profile,
    )


def transfer_table(
    rollouts: pd.DataFrame, profile: str, grid: str, leaks: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Rows of ``trace_transfer`` (docs/metrics/fotu.md), via
    :func:`legival_core.metrics.transfer.trace_metrics`, with the leak step and FOTU before it
    (:func:`legival_core.metrics.transfer.trace_metrics_with_leaks` when there are leaks)."""
    from legival_core.metrics.transfer import as_grid, trace_metrics, trace_metrics_with_leaks
    from legival_core.store.schema import spec

    if leaks is not None and len(leaks):
        # one collapse of the rollouts for both (each was a fifth of the chunk's transfer time)
        table = trace_metrics_with_leaks(rollouts, leaks, profile=profile, grid=as_grid(grid))
    else:
        table = trace_metrics(rollouts, profile=profile, grid=as_grid(grid))
        table["leak_k"] = pd.array([None] * len(table), dtype="Int64")
        table["fotu_before_leak"] = math.nan
    return table[spec("trace_transfer").columns]


def transfer_curves_table(rollouts: pd.DataFrame, stamp: str, seed: int) -> pd.DataFrame:
    """Rows of ``transfer_curves``: every view of the transfer page, bands from 200 resamples
    (what the page draws), stamped with the state of the rollouts they came from."""
    from legival_core.metrics.transfer_curves import BAND_RESAMPLES, transfer_curve_table

    return transfer_curve_table(rollouts, n_boot=BAND_RESAMPLES, seed=seed, stamp=stamp)


def teacher_table(
    efficiency: pd.DataFrame,
    rollouts: pd.DataFrame,
    profile: str,
    grid: str,
    seed: int,
    trace_transfer: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Rows of ``teacher_metrics``: efficiency means per (teacher, dataset) + transfer terms."""
    from legival_core.metrics.registry import metrics_in
    from legival_core.metrics.transfer import as_grid, teacher_metrics

    frame = efficiency.assign(correct_f=efficiency["correct"].astype("Float64"))
    grouped = frame.groupby(["teacher", "dataset"], observed=True, sort=True)
    table = pd.DataFrame(
        {
            "accuracy": grouped["correct_f"].mean().astype("float64"),
            "tokens": grouped["tokens"].mean().astype("float64"),
            "redundancy": grouped["redundancy"].mean(),
            "backtracking": grouped["backtracking"].mean(),
            "n_traces": grouped.size().astype("int64"),
        }
    ).reset_index()
    transfer_cols = list(metrics_in("stored_transfer"))
    if len(rollouts):
        transfer = teacher_metrics(
            rollouts, profile=profile, n_boot=0, seed=seed, grid=as_grid(grid)
        )
        table = table.merge(
            transfer[["teacher", "dataset", *transfer_cols]],
            on=["teacher", "dataset"],
            how="left",
        )
    else:
        for column in transfer_cols:
            table[column] = math.nan
    table["fotu_before_leak"] = math.nan
    if trace_transfer is not None and len(trace_transfer):
        # Like FOTU: the mean over a teacher's traces per student, then over students.
        per_student = (
            trace_transfer.groupby(["teacher", "dataset", "student"], observed=True)[
                "fotu_before_leak"
            ]
            .mean()
            .groupby(level=["teacher", "dataset"], observed=True)
            .mean()
            .rename("before")
            .reset_index()
        )
        table = table.drop(columns=["fotu_before_leak"]).merge(
            per_student, on=["teacher", "dataset"], how="left"
        )
        table = table.rename(columns={"before": "fotu_before_leak"})
    table["hf_id"] = None
    return table


@dataclass
class ChunkedTables:
    """What :func:`compute_in_chunks` leaves after writing each chunk's rows: the efficiency
    and transfer row counts, and the partials of all chunks merged: the teacher table's, the
    stored board resamples' and the rollouts' page results' (None without rollouts), and the
    redundancy sweep's (None without a sweep grid in the settings)."""

    efficiency_rows: int
    transfer_rows: int
    partials: TeacherPartials
    board: BoardPartials | None = None
    rollouts: RolloutPartials | None = None
    #: the robustness report's partials (None when the settings asked for none)
    robustness: RobustnessPartial | None = None
    sweep: SweepPartial | None = None
    #: the reward results' transfer inputs (None without transfer rows)
    rewards: RewardPartial | None = None
    #: the decomposition's instances and reference pairs (None without grades)
    decomposition: DecompositionPartial | None = None


def problem_buckets(problem_ids: pd.Series, chunks: int) -> np.ndarray:
    """The chunk of each problem id: a stable hash bucket (:func:`precompute.sharding.bucket_of`),
    so that every trace of a problem — and the per-problem medians the normalised lengths use —
    falls in one chunk.

    >>> problem_buckets(pd.Series(["p", "q", "p"]), 1).tolist()
    [0, 0, 0]
    """
    from precompute.sharding import bucket_of

    ids = problem_ids.astype(str)
    codes, uniques = pd.factorize(ids)
    buckets = np.array([bucket_of(p, chunks) for p in uniques], dtype=np.int64)
    return buckets[codes] if len(codes) else np.zeros(0, dtype=np.int64)


def trace_buckets(traces: pd.DataFrame, chunks: int) -> pd.Series:
    """The bucket of each trace (indexed by its id as text): its problem's
    :func:`problem_buckets`.

    >>> trace_buckets(pd.DataFrame({"trace_id": [7], "problem_id": ["p"]}), 1).to_dict()
    {'7': 0}
    """
    buckets = problem_buckets(traces["problem_id"], chunks)
    # the ids as one column of text, not an array of Python strings turned back into one
    # (ten million ids: 0.5 GB more while it was built)
    return pd.Series(buckets, index=pd.Index(traces["trace_id"].astype(str)))


@dataclass(frozen=True)
class ChunkSettings:
    """What every chunk is computed with (sent once to each worker)."""

    threshold: float
    labeler: str
    profile: str
    grid: str
    #: the seed of the transfer curves' bands (``transfer_curves``)
    curve_seed: int = 0
    #: the leaderboard's default resamples and seed (the stored board and Pareto resamples)
    board_boot: int = RANK_RESAMPLES
    board_seed: int = RESAMPLE_SEED
    #: the encoding of ``trace_efficiency``'s tokens when ``counts`` holds every encoding's
    #: (None: ``counts`` holds that one only)
    encoding: str | None = None
    #: the robustness report's default choices: each chunk then gives its partial
    #: (:mod:`legival_core.rankings.robustness_partials`); None: no partial
    robustness: Settings | None = None
    #: the redundancy sweep's τ grid (``sweep_thresholds`` of the τ the pages will read, which
    #: the stage records); empty: no sweep partial
    sweep: tuple[float, ...] = ()
    #: problem id -> native workload, for the decomposition's instances
    #: (:func:`legival_core.metrics.decomposition.problem_workload`; None: no ``workload``
    #: column). Left out of equality: a Series has no single truth value.
    workload: pd.Series | None = field(default=None, compare=False)


#: Chunks' rows held at the driver before they are weighed together: one resampling of many
#: chunks' rows makes the resamples x cells arrays (384 MB for SOTU at 40 teachers) once, where
#: a resampling per chunk made them once a chunk. The board's rows and the curves' pairs count
#: together (:func:`_weigh_if_due`, after every chunk), so what waits is at most this plus one
#: chunk's rows.
RESAMPLE_BATCH_BYTES = 128 * 2**20


@dataclass
class RolloutPartials:
    """One chunk's (or several merged chunks') share of what is derived from the whole
    ``rollouts`` table (:mod:`legival_core.metrics.rollout_partials`): the transfer curves'
    sums, each profile's measured-bin counts, the per-trace first measured positions and
    attribution concentration, and the leak pairs.

    The curves come as pairs first (``curve_rows``, what a chunk sends back) and are weighed
    into ``curves`` a batch at a time (:meth:`merge`, :meth:`resampled`)."""

    #: chunks' :class:`~legival_core.metrics.rollout_partials.CurveRows` not weighed yet
    curve_rows: list[Any]
    coverage: dict[str, Any]
    #: per-trace frames, a chunk's each (or its spilled file: :func:`spill_per_trace`)
    first: list[pd.DataFrame | SpilledFrame]
    concentration: list[pd.DataFrame | SpilledFrame]
    leaks: pd.DataFrame | None
    #: the weighed :class:`~legival_core.metrics.rollout_partials.TransferCurvePartial` of the
    #: batches weighed so far (None before the first)
    curves: Any = None

    @classmethod
    def of_chunk(
        cls, rollouts: pd.DataFrame, transfer: pd.DataFrame | None, seed: int
    ) -> RolloutPartials:
        """The partials of one chunk's ``rollouts`` (as the pages load them:
        :func:`rollouts_as_pages`) and its ``trace_transfer`` rows."""
        from legival_core.metrics import rollout_partials as rp
        from legival_core.metrics.transfer import PROFILES
        from legival_core.metrics.transfer_curves import BAND_RESAMPLES

        with_leaks = transfer is not None and {"leak_k", "fotu_before_leak"} <= set(
            transfer.columns
        )
        return cls(
            curve_rows=[rp.curve_rows(rollouts, n_boot=BAND_RESAMPLES, seed=seed)],
            coverage={p: rp.coverage_partial(rollouts, p) for p in PROFILES},
            first=[rp.first_measured_partial(rollouts)],
            concentration=[rp.concentration_partial(rollouts)],
            leaks=rp.leak_partial(transfer, rollouts) if with_leaks else None,
        )

    def resampled(self) -> RolloutPartials:
        """These partials with every pair not yet weighed weighed into ``curves``
        (:func:`~legival_core.metrics.rollout_partials.concat_curve_rows`, resampled once)."""
        from legival_core.metrics import rollout_partials as rp

        if not self.curve_rows:
            return self
        weighed = rp.concat_curve_rows(self.curve_rows).resampled()
        if self.curves is not None:
            weighed = rp.merge_transfer_curves(self.curves, weighed)
        return replace(self, curve_rows=[], curves=weighed)

    @property
    def waiting_bytes(self) -> int:
        """The size of the curve pairs not weighed yet."""
        return sum(rows.nbytes for rows in self.curve_rows)

    def merge(self, other: RolloutPartials) -> RolloutPartials:
        """Both chunks' partials as one (chunks of different traces); their pairs wait, joined,
        until :meth:`resampled` (the caller decides when: :func:`_weigh_if_due`)."""
        from legival_core.metrics import rollout_partials as rp

        leaks = self.leaks
        if other.leaks is not None:
            leaks = other.leaks if leaks is None else rp.merge_leaks(leaks, other.leaks)
        curves = self.curves
        if other.curves is not None:
            curves = (
                other.curves if curves is None else rp.merge_transfer_curves(curves, other.curves)
            )
        return RolloutPartials(
            curve_rows=self.curve_rows + other.curve_rows,
            coverage={p: rp.merge_coverage(c, other.coverage[p]) for p, c in self.coverage.items()},
            first=self.first + other.first,
            concentration=self.concentration + other.concentration,
            leaks=leaks,
            curves=curves,
        )

    def results(self, stamp: str) -> RolloutResults:
        from legival_core.metrics import rollout_partials as rp

        return RolloutResults(
            transfer_curves=rp.transfer_curve_finalize(self.resampled().curves, stamp=stamp),
            coverage={p: rp.coverage_finalize(c) for p, c in self.coverage.items()},
            first_measured=rp.concat_per_trace(held(self.first)),
            concentration=rp.concat_per_trace(held(self.concentration)),
            leaks=rp.leak_finalize(self.leaks) if self.leaks is not None else None,
        )


@dataclass
class ChunkResult:
    """What :func:`metrics_chunk` gives for one bucket: its rows of ``trace_efficiency`` and
    ``trace_transfer`` (None without rollouts), and the partials merged across buckets: the
    teacher table's, the stored board resamples', those of the rollouts' page results
    (None without rollouts) and the redundancy sweep's (None without ``settings.sweep``).
    The board's and the transfer curves' resamples are left to the driver: ``board`` and
    ``rollouts.curve_rows`` hold the rows they are weighed from (``resampled()`` weighs them,
    and the stage weighs several chunks' rows at once)."""

    efficiency: pd.DataFrame
    transfer: pd.DataFrame | None
    partials: TeacherPartials
    board: BoardRows
    rollouts: RolloutPartials | None
    robustness: RobustnessPartial | None = None
    sweep: SweepPartial | None = None
    rewards: RewardPartial | None = None
    decomposition: DecompositionPartial | None = None


def rollouts_as_pages(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Rollouts read by the stage as the app's pages load them (:func:`_read_rollouts_as_pages`:
    the transfer columns, ids as categoricals, ``k``/``m`` as int32), so a page result merged
    from the buckets is computed from what a page would compute it from."""
    from legival_core.metrics.transfer import ROLLOUT_CATEGORIES, ROLLOUT_COLUMNS
    from legival_core.store.frames import arrow_to_frame

    columns = list(ROLLOUT_COLUMNS)
    arrow = pa.Table.from_pandas(rollouts[columns], preserve_index=False)
    typed = {c: pa.int32() if c in ("k", "m") else arrow.schema.field(c).type for c in columns}
    return arrow_to_frame(arrow.cast(pa.schema(typed)), ROLLOUT_CATEGORIES)


def metrics_chunk(inputs: dict[str, pd.DataFrame], settings: ChunkSettings) -> ChunkResult:
    """One chunk's :class:`ChunkResult` from its rows of each input (``traces``, ``counts``,
    ``grades``, ``similarity``, ``judgments``, ``rollouts``, ``leaks``). A pure function of its
    inputs: the same in this process or on a Ray worker."""
    from legival_core.metrics.teacher_partials import teacher_partials
    from legival_core.rankings.board_partials import board_rows

    counts = inputs["counts"]
    if settings.encoding is not None:  # every encoding's counts: the robustness report's too
        counts = counts[counts["encoding"] == settings.encoding]
    efficiency = efficiency_from_counts(
        inputs["traces"],
        counts,
        inputs["grades"],
        inputs["similarity"],
        inputs["judgments"],
        threshold=settings.threshold,
        labeler=settings.labeler,
        profile=settings.profile,
    )
    transfer = None
    if len(inputs["rollouts"]):
        leaks = inputs["leaks"].reset_index(drop=True)
        transfer = transfer_table(inputs["rollouts"], settings.profile, settings.grid, leaks)
    rollouts = None
    rewards = None
    if len(inputs["rollouts"]):
        pages = rollouts_as_pages(inputs["rollouts"])
        rollouts = RolloutPartials.of_chunk(pages, transfer, settings.curve_seed)
    if transfer is not None and len(transfer):
        rewards = RewardPartial.of_chunk(transfer, inputs["grades"])
    robustness = None
    if settings.robustness is not None:
        robustness = _robustness_partial(inputs, efficiency, transfer, settings.robustness)
    sweep = None
    if settings.sweep:
        from legival_core.metrics.redundancy_sweep_view import sweep_partial

        sweep = sweep_partial(inputs["similarity"], inputs["traces"], settings.sweep)
    decomposition = None
    if len(inputs["grades"]):
        # every encoding's counts: a trace without a stored T is counted in the default one
        decomposition = DecompositionPartial.of_chunk(
            inputs["traces"],
            inputs["grades"],
            default_counts(inputs["counts"]),
            efficiency,
            settings.workload,
        )
    return ChunkResult(
        efficiency,
        transfer,
        teacher_partials(efficiency, transfer),
        board_rows(efficiency, transfer, settings.board_boot, settings.board_seed),
        rollouts,
        robustness,
        sweep=sweep,
        rewards=rewards,
        decomposition=decomposition,
    )


def _robustness_partial(
    inputs: dict[str, pd.DataFrame],
    efficiency: pd.DataFrame,
    transfer: pd.DataFrame | None,
    settings: Settings,
) -> RobustnessPartial:
    """The chunk's share of the robustness report, from its rows (every labeler's judgments,
    every encoding's counts, the side tables' rows of its traces)."""
    from legival_core.rankings.robustness_choices import StoreTables
    from legival_core.rankings.robustness_partials import robustness_partial

    rollouts = inputs["rollouts"]
    tables = StoreTables(
        trace_efficiency=efficiency,
        trace_transfer=transfer if transfer is not None else pd.DataFrame(),
        rollouts=rollouts if len(rollouts) else pd.DataFrame(),
        similarity=inputs["similarity"],
        judgments=inputs["judgments"],
        trace_counts=inputs["counts"],
        robustness_steps=inputs.get("robustness_steps", pd.DataFrame()),
        robustness_similarity=inputs.get("robustness_similarity", pd.DataFrame()),
    )
    return robustness_partial(tables, settings)


#: Bytes one row of each per-row input takes while its bucket is computed: the frame as read
#: (:data:`BUCKET_COLUMNS`) and what :func:`metrics_chunk` makes from it, every partial
#: included (the robustness report's and the redundancy sweep's too), measured as the stage's
#: peak resident memory per bucket row on the scale bench's 100k-trace store, the largest of
#: three runs rounded up to 10 (``python bench/scale_bench.py --store S --copies 400
#: --build-only``, then ``python bench/bucket_reads.py --store S/copies-400 --bytes-per-row``:
#: similarity 150-161, judgments 712-742 (every labeler's rows), rollouts 742-754;
#: docs/benchmarks.md, "Reading a bucket at a time").
BUCKET_BYTES_PER_ROW = {"similarity": 170, "judgments": 750, "rollouts": 760}
#: The unit of ``--memory-gb`` and ``[metrics] memory_gb``.
GB = 10**9


def budget_chunks(rows: dict[str, int], memory_gb: float, in_flight: int = 1) -> int:
    """The fewest buckets whose per-row inputs stay under ``memory_gb`` on average:
    ``ceil(in_flight * sum(rows[t] * BUCKET_BYTES_PER_ROW[t]) / (memory_gb * GB))`` (at least
    1), where ``rows`` are the tables' stored row counts (the manifest's) and ``in_flight`` the
    buckets held at once (1 in this process; with Ray the driver holds the ones in flight).

    >>> budget_chunks({"similarity": 0, "judgments": 0, "rollouts": 10**7}, 1.0)
    8
    """
    if not (memory_gb > 0 and math.isfinite(memory_gb)):
        raise ValueError(f"a memory budget must be a positive number of GB, got {memory_gb}")
    need = in_flight * sum(rows.get(t, 0) * b for t, b in BUCKET_BYTES_PER_ROW.items())
    return max(1, math.ceil(need / (memory_gb * GB)))


def metrics_chunks(store: Store, cfg: Any, options: dict[str, Any]) -> int:
    """The stage's bucket count: ``--chunks`` (else ``[metrics] chunks``), raised to
    :func:`budget_chunks` of the store's row counts when a budget is given (``--memory-gb``,
    else ``[metrics] memory_gb``); never fewer than the chunks asked for."""
    given = options.get("chunks")
    chunks = cfg.chunks if given is None else int(given)
    if chunks < 1:
        raise StageError(f"stage 'metrics': --chunks must be at least 1, got {chunks}")
    budget = options.get("memory_gb")
    budget = cfg.memory_gb if budget is None else float(budget)
    if budget is None:
        return int(chunks)
    if not (budget > 0 and math.isfinite(budget)):
        raise StageError(
            f"stage 'metrics': --memory-gb must be a positive number of GB, got {budget}"
        )
    rows = {t: _stored_rows(store, t) for t in BUCKET_BYTES_PER_ROW}
    return max(int(chunks), budget_chunks(rows, budget, chunks_in_flight(options)))


def chunks_in_flight(options: dict[str, Any]) -> int:
    """The buckets the stage holds at once: 1 in this process; with ``--engine processes``
    ``--in-flight`` workers (default :func:`precompute.chunk_runner.default_workers`, one a
    CPU), each reading its own bucket; with ``--engine ray`` ``--in-flight`` (default
    :data:`precompute.chunk_runner.RAY_IN_FLIGHT`, 4), the tasks submitted ahead, which bounds
    how many nodes compute at once."""
    from precompute.chunk_runner import RAY_IN_FLIGHT, default_workers

    engine = options.get("engine")
    given = options.get("in_flight")
    if engine == "processes":
        return default_workers() if given is None else int(given)
    if engine != "ray":
        return 1
    return RAY_IN_FLIGHT if given is None else int(given)


def positive_gb(text: str) -> float:
    """``--memory-gb``'s value: a finite number above 0 (else a usage error naming it)."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of GB, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number of GB, got {text!r}")
    return value


def at_least_one(text: str) -> int:
    """``--in-flight``'s value: a whole number from 1 (else a usage error naming it)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def _trace_ids_in(store: Store, table: str, filters: dict[str, Any] | None = None) -> pd.Series:
    """The distinct trace ids of ``table``'s rows (none when it is absent), streamed
    (:meth:`legival_core.store.store.Store.key_values`): a million ids, not 37M rows. As
    text in one Arrow-backed column, not Python strings (ten million ids as a list of
    strings took about 0.8 GB, and the check holds three such sets)."""
    if not store.has(table):
        return pd.Series([], dtype="str")
    return store.key_values(table, "trace_id", filters).cast(pa.string()).to_pandas()


#: The per-row inputs :func:`compute_in_chunks` reads one bucket at a time, and their columns.
BUCKET_COLUMNS: dict[str, tuple[str, ...]] = {
    "similarity": ("trace_id", "step", "max_similarity"),
    "judgments": ("trace_id", "labeler", "steps", "valid"),
    "rollouts": (
        "trace_id", "problem_id", "dataset", "teacher", "student", "k", "sample", "m", "correct",
        "forced", "status",
    ),
    # the robustness report's side tables (the opt-in robustness stage's; absent: no rows)
    "robustness_steps": ("segmenter", "trace_id", "step", "lexical_cue", "context_cue"),
    "robustness_similarity": ("segmenter", "trace_id", "step", "max_similarity"),
}  # fmt: skip

#: The per-trace inputs (a row or two a trace), by the name :func:`metrics_chunk` gives them:
#: the table each is read from and its columns. The stage reads them one bucket at a time too
#: (:func:`compute_in_chunks` without whole frames), so that the driver does not hold a
#: million traces' rows while the buckets run.
PER_TRACE_INPUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "traces": ("traces", (
        "trace_id", "problem_id", "dataset", "teacher", "sample", "tokens", "truncated", "source",
    )),
    "counts": ("trace_counts", ("trace_id", "encoding", "tokens", "blank", "steps", "compression")),
    "grades": ("grades", ("trace_id", "correct")),
    "leaks": ("answer_leaks", ("trace_id", "leak_k")),
}  # fmt: skip

#: Every table a bucket reads and its columns: the per-row inputs and the per-trace ones.
BUCKET_READS: dict[str, tuple[str, ...]] = {
    **BUCKET_COLUMNS,
    **dict(PER_TRACE_INPUTS.values()),
}

#: Reads one bucket's rows of an input: (table, the bucket's trace ids) -> its rows.
BucketReader = Callable[[str, Sequence[str]], pd.DataFrame]


def store_bucket_reader(store: Store) -> BucketReader:
    """A :data:`BucketReader` on ``store``: a keyed read (``filters={"trace_id": ids}``) of the
    columns :data:`BUCKET_COLUMNS` names, so the store's guarantees hold (the latest part wins
    per key, only the parts the manifest lists, an unreadable part a :class:`StoreError`
    naming it) and what is held is the bucket's rows plus one record batch being decoded.
    Every labeler's judgments are read: the primary labeler's give the backtracking share,
    the others the robustness report's alternatives."""
    present = {name: store.has(name) for name in BUCKET_READS}

    def read(table: str, trace_ids: Sequence[str]) -> pd.DataFrame:
        columns = list(BUCKET_READS[table])
        if not present[table]:
            return read_or_empty(store, table, columns)
        filters: dict[str, Any] = {"trace_id": list(trace_ids)}
        return store.read(table, columns, filters)

    return read


def _bucket_inputs(
    per_trace: Mapping[str, pd.DataFrame | None],
    bucket_of_trace: pd.Series,
    read_rows: BucketReader,
) -> Iterator[dict[str, pd.DataFrame]]:
    """Each bucket's inputs in bucket order, read when asked for: the per-trace frames' rows of
    the bucket (taken from the whole frames by position, so the buckets' rows are never held
    as a second copy of them; a frame given as None is read by ``read_rows`` from its table,
    :data:`PER_TRACE_INPUTS`), the per-row inputs read from the store by the bucket's trace
    ids."""
    positions: dict[str, dict[int, np.ndarray]] = {}
    for name, frame in per_trace.items():
        if frame is None:
            continue
        keys = frame["trace_id"].astype(str).map(bucket_of_trace).to_numpy()
        # each bucket's row positions in frame order (the rows a group-by would give)
        found = frame.groupby(keys, sort=False).indices if len(frame) else {}
        positions[name] = {int(b): rows for b, rows in found.items()}
    if "traces" in positions:
        buckets = sorted(positions["traces"])
    else:  # every trace is in bucket_of_trace: its buckets, and its ids in each
        found = pd.Series(bucket_of_trace.index).groupby(bucket_of_trace.to_numpy()).indices
        positions["traces"] = {int(b): rows for b, rows in found.items()}
        buckets = sorted(positions["traces"])
    for bucket in buckets:
        # built in a call, so this generator keeps no name for a bucket it has handed out
        yield _bucket_item(bucket, per_trace, bucket_of_trace, positions, read_rows)


def _bucket_item(
    bucket: int,
    per_trace: Mapping[str, pd.DataFrame | None],
    bucket_of_trace: pd.Series,
    positions: dict[str, dict[int, np.ndarray]],
    read_rows: BucketReader,
) -> dict[str, pd.DataFrame]:
    item: dict[str, pd.DataFrame] = {}
    for name, frame in per_trace.items():
        if frame is not None:
            found = positions[name].pop(bucket, None)
            item[name] = frame.iloc[:0] if found is None else frame.iloc[found]
    if per_trace.get("traces") is None:  # the bucket's ids, by position in bucket_of_trace
        ids = bucket_of_trace.index[positions["traces"].pop(bucket)].astype(str).tolist()
    else:
        ids = item["traces"]["trace_id"].astype(str).tolist()
    to_read = tuple(name for name, frame in per_trace.items() if frame is None)
    item.update(_read_bucket(lambda table: read_rows(table, ids), to_read))
    return item


def _read_bucket(
    read: Callable[[str], pd.DataFrame], per_trace_read: Iterable[str]
) -> dict[str, pd.DataFrame]:
    """A bucket's rows of each per-row input and of the per-trace inputs named in
    ``per_trace_read`` (:data:`PER_TRACE_INPUTS`), ``read(table)`` giving the bucket's rows of
    a table; the leak rows as :func:`metrics_chunk` takes them."""
    item = {table: read(table) for table in BUCKET_COLUMNS}
    for name in per_trace_read:
        item[name] = read(PER_TRACE_INPUTS[name][0])
    if "leaks" in item:
        item["leaks"] = chunk_leaks(item["leaks"], item["rollouts"]["trace_id"])
    return item


def metrics_chunk_of_files(files: BucketFiles, settings: ChunkSettings) -> ChunkResult:
    """:func:`metrics_chunk` of a bucket read from its scratch files in the process that
    computes it (``--engine processes``: the driver sends the files' names, not the rows)."""
    return metrics_chunk(_read_bucket(files.read, PER_TRACE_INPUTS), settings)


def chunk_leaks(leaks: pd.DataFrame, with_rollouts: Iterable[Any]) -> pd.DataFrame:
    """The ``answer_leaks`` rows :func:`metrics_chunk` takes: those of the traces with rollouts
    (``with_rollouts``: their ids), ``trace_id`` and ``leak_k`` (as Int64).

    >>> kept = chunk_leaks(pd.DataFrame({"trace_id": ["a", "b"], "leak_k": [3, 1]}), ["b"])
    >>> kept["trace_id"].tolist(), kept["leak_k"].tolist(), str(kept["leak_k"].dtype)
    (['b'], [1], 'Int64')
    """
    # Arrow's hash lookup of the ids as they are: a Python set of a bucket's rollout rows' ids
    # (about 37 a trace) took 9 of a 250k-trace stage's 130 s
    wanted = with_rollouts if isinstance(with_rollouts, pd.Series) else list(with_rollouts)
    kept = leaks[is_in(leaks["trace_id"], wanted)]
    kept = kept[["trace_id", "leak_k"]].reset_index(drop=True)
    kept["leak_k"] = kept["leak_k"].astype("Int64")
    return kept


def compute_in_chunks(
    traces: pd.DataFrame | None,
    counts: pd.DataFrame | None,
    grades: pd.DataFrame | None,
    leaks: pd.DataFrame | None,
    read_rows: BucketReader,
    *,
    bucket_of_trace: pd.Series,
    settings: ChunkSettings,
    write: Callable[[str, pd.DataFrame], object],
    engine: str = "local",
    address: str | None = None,
    in_flight: int = 1,
    spill_to: Path | None = None,
) -> ChunkedTables:
    """``trace_efficiency`` and ``trace_transfer`` one bucket of problems at a time
    (``bucket_of_trace``: trace id -> bucket, :func:`trace_buckets`) through
    :func:`metrics_chunk`, run by the ``engine``'s runner (:data:`precompute.chunk_runner.RUNNERS`:
    in this process, or Ray tasks at ``address``); each chunk's rows are handed to ``write`` as
    they come back and the teacher partials of every chunk merged
    (:mod:`legival_core.metrics.teacher_partials`).

    The per-trace frames (``traces``, ``counts``, ``grades``, ``leaks``) are given whole, or
    None to have each bucket's rows read by ``read_rows`` like the per-row inputs (the stage
    does: :data:`PER_TRACE_INPUTS`; ``leaks`` then as :func:`chunk_leaks` gives them); the
    per-row inputs (``similarity``, ``judgments``, ``rollouts``: 19M and 37M rows at a million
    traces) are read one bucket at a time by ``read_rows`` (:func:`store_bucket_reader`), so
    the stage holds one bucket's rows of them (with Ray, the ``in_flight`` buckets submitted
    ahead: :func:`chunks_in_flight`), never a whole table. With ``spill_to`` (a folder) each
    chunk's per-trace frames are written there as they come back (:func:`spill_per_trace`).

    Every per-trace quantity depends on its own trace's rows only, and the normalised lengths on
    the problem's traces, which share a bucket: the tables are the same for any engine, and for
    any bucket count within float rounding (sums are added in another order)."""
    from legival_core.metrics.redundancy_sweep_view import merge_sweep_partials
    from legival_core.metrics.teacher_partials import TeacherPartials, merge_teacher_partials
    from legival_core.rankings.robustness_partials import merge_robustness
    from precompute.chunk_runner import RUNNERS, WORKERS_READ_FILES

    per_trace = {"traces": traces, "counts": counts, "grades": grades, "leaks": leaks}
    function: Callable[..., ChunkResult] = metrics_chunk
    items: Iterator[Any]
    if (
        engine in WORKERS_READ_FILES
        and isinstance(read_rows, SpilledBuckets)
        and all(frame is None for frame in per_trace.values())
    ):
        # each worker reads its bucket from the scratch files: the driver neither reads nor
        # pickles the rows (at a million traces 1.5 s a bucket, a third of the driver's share)
        function = metrics_chunk_of_files
        items = (read_rows.files_of(int(b)) for b in np.unique(bucket_of_trace.to_numpy()))
    else:
        items = _bucket_inputs(per_trace, bucket_of_trace, read_rows)
    merged = TeacherPartials()
    board: BoardPartials | None = None
    board_rows: list[BoardRows] = []
    rollouts: RolloutPartials | None = None
    robustness: RobustnessPartial | None = None
    sweep: SweepPartial | None = None
    rewards: RewardPartial | None = None
    decomposition: DecompositionPartial | None = None
    efficiency_rows = 0
    transfer_rows = 0
    runner = RUNNERS[engine]
    for chunk in runner(function, items, settings, address=address, in_flight=in_flight):
        if spill_to is not None:
            spill_per_trace(chunk, spill_to)
        # written, not kept: the stage reads back the columns it needs once they are merged
        write("trace_efficiency", chunk.efficiency)
        efficiency_rows += len(chunk.efficiency)
        if chunk.transfer is not None and len(chunk.transfer):
            write("trace_transfer", chunk.transfer)
            transfer_rows += len(chunk.transfer)
        # merged as they come: the driver holds one running sum, not every chunk's
        merged = merge_teacher_partials(merged, chunk.partials)
        # The resampling is done here, not in the chunk: a chunk sends back its rows (a few
        # MB) instead of resamples x cells of sums (about 760 MB at 40 teachers), and the rows
        # of several chunks are weighed at once.
        board_rows.append(chunk.board)
        if chunk.rollouts is not None:
            rollouts = chunk.rollouts if rollouts is None else rollouts.merge(chunk.rollouts)
        board, rollouts = _weigh_if_due(board, board_rows, rollouts)
        if chunk.robustness is not None:
            robustness = (
                chunk.robustness
                if robustness is None
                else merge_robustness(robustness, chunk.robustness)
            )
        if chunk.sweep is not None:
            sweep = chunk.sweep if sweep is None else merge_sweep_partials(sweep, chunk.sweep)
        if chunk.rewards is not None:
            rewards = chunk.rewards if rewards is None else rewards.merge(chunk.rewards)
        if chunk.decomposition is not None:
            decomposition = (
                chunk.decomposition
                if decomposition is None
                else decomposition.merge(chunk.decomposition)
            )
        del chunk  # its rows are not held while the next bucket runs
    if board_rows:
        board = _weigh_board(board, board_rows)
    if rollouts is not None:
        rollouts = rollouts.resampled()
    # the reward partial's per-trace means stay one frame a chunk here: they are joined when
    # the page results ask for them, after the decomposition's instances have gone
    return ChunkedTables(
        efficiency_rows,
        transfer_rows,
        merged,
        board,
        rollouts,
        robustness,
        sweep,
        rewards,
        decomposition,
    )


def spill_per_trace(chunk: ChunkResult, folder: Path) -> None:
    """Write ``chunk``'s per-trace frames to ``folder`` and keep their handles in their place
    (:func:`legival_core.store.spilled_frames.spill_frame`): the decomposition's instances,
    the reward means, the first measured positions and the attribution concentration. Only
    concatenated after the last bucket, held they piled up under every bucket (about 230 MB
    a million traces); the code that concatenates them reads them back."""
    from legival_core.store.spilled_frames import spill_frame

    def spilled(frames: list[Any]) -> list[Any]:
        return [spill_frame(f, folder) if isinstance(f, pd.DataFrame) else f for f in frames]

    if chunk.decomposition is not None:
        chunk.decomposition.instances = spilled(chunk.decomposition.instances)
    if chunk.rewards is not None:
        chunk.rewards.per_trace = spilled(chunk.rewards.per_trace)
    if chunk.rollouts is not None:
        chunk.rollouts.first = spilled(chunk.rollouts.first)
        chunk.rollouts.concentration = spilled(chunk.rollouts.concentration)


def _weigh_if_due(
    board: BoardPartials | None,
    board_rows: list[BoardRows],
    rollouts: RolloutPartials | None,
) -> tuple[BoardPartials | None, RolloutPartials | None]:
    """The board's rows and the curves' pairs waiting at the driver, weighed both at once when
    together they pass :data:`RESAMPLE_BATCH_BYTES` (one rule for both kinds, checked after
    every chunk); as they are otherwise."""
    waiting = sum(rows.nbytes for rows in board_rows)
    if rollouts is not None:
        waiting += rollouts.waiting_bytes
    if waiting <= RESAMPLE_BATCH_BYTES:
        return board, rollouts
    if board_rows:
        board = _weigh_board(board, board_rows)
    return board, rollouts.resampled() if rollouts is not None else None


def _weigh_board(total: BoardPartials | None, pending: list[BoardRows]) -> BoardPartials:
    """``total`` with the ``pending`` chunks' board rows weighed in (resampled at once); empties
    ``pending``."""
    from legival_core.rankings.board_partials import concat_board_rows, merge_board_partials

    weighed = concat_board_rows(pending).resampled()
    pending.clear()
    if total is None:
        return weighed
    # the running total is the stage's own: added into, not copied
    return merge_board_partials([total, weighed], into_first=True)


@dataclass
class RolloutResults:
    """What the metrics stage derives from the whole ``rollouts`` table, merged chunk by chunk
    (:func:`rollout_results_in_chunks`): the ``transfer_curves`` rows and the transfer /
    attribution page results of :func:`page_results_table` (``coverage`` by profile;
    ``leaks`` None without a ``trace_transfer`` carrying the leak columns)."""

    transfer_curves: pd.DataFrame
    coverage: dict[str, pd.DataFrame]
    first_measured: pd.DataFrame
    concentration: pd.DataFrame
    leaks: pd.DataFrame | None


def rollout_results_in_chunks(
    chunks_of_rollouts: Iterable[pd.DataFrame],
    *,
    stamp: str,
    seed: int,
    trace_transfer: pd.DataFrame | None = None,
) -> RolloutResults:
    """:class:`RolloutResults` from chunks of rollouts, each holding every row of its traces
    (a hash bucket of problem ids, :func:`problem_buckets`), one chunk in memory at a time.

    Equal (tables within 1e-12) to the whole-table calls: :func:`transfer_curves_table`
    ``(rollouts, stamp, seed)``, and, as :func:`page_results_table` computes them,
    ``observed_coverage(rollouts, profile)`` for each profile, ``first_measured_positions``,
    ``trace_concentration`` and ``selection_leak_summary(trace_transfer, rollouts)``
    (:mod:`legival_core.metrics.rollout_partials`). ``trace_transfer``'s rows are handed to the
    chunk of their trace."""
    merged: RolloutPartials | None = None
    for chunk in chunks_of_rollouts:
        if chunk.empty and merged is not None:  # an empty bucket adds nothing
            continue
        mine = None
        if trace_transfer is not None:
            mine = trace_transfer[trace_transfer["trace_id"].isin(set(chunk["trace_id"]))]
        part = RolloutPartials.of_chunk(chunk, mine, seed)
        merged = part if merged is None else merged.merge(part)
        _, merged = _weigh_if_due(None, [], merged)
    if merged is None:
        raise ValueError("rollout_results_in_chunks: no chunk of rollouts")
    return merged.results(stamp)


_DECOMPOSITION_TERMS = (
    "accuracy",
    "e0",
    "mean_tokens",
    "r_ctx",
    "r_logic",
    "mean_workload",
    "vo",
    "kappa",
    "mean_tokens_correct",
    "mean_tokens_incorrect",
)


def _layer_rows(result: pd.DataFrame, layer: str, coverage: dict[tuple[str, str], float]) -> list:
    rows = []
    for record in result.to_dict(orient="records"):
        key = (record["model"], record["benchmark"])
        row = {
            "model": record["model"],
            "benchmark": record["benchmark"],
            "layer": layer,
            "n_instances": int(record["n"]),
            "coverage": coverage.get(key, math.nan),
        }
        row.update({term: record[term] for term in _DECOMPOSITION_TERMS})
        if layer == "trace":
            # Compressed-signal overhead: σ·T replaces T (Kaiser et al., trace layer).
            row["mean_tokens"] = record["mean_tokens"] * record["signal_share"]
            row["vo"] = record["vo_sig"]
            row["kappa"] = record["kappa_sig"]
        rows.append(row)
    return rows


def decomposition_table(instances: pd.DataFrame, references: Sequence[str] = ()) -> pd.DataFrame:
    """Rows of ``decomposition``: native, solver and trace layers per (teacher, dataset).

    The solver pool is every model but the ``references`` (a human solution that carries the
    gold would solve every instance); a reference still gets solver-layer terms, measured
    against the models' workload.
    """
    from legival_core.metrics.decomposition import decompose
    from legival_core.metrics.workload import attach_workload, solver_workload

    if instances.empty:
        return pd.DataFrame(columns=["model", "benchmark", "layer", "accuracy"])
    rows: list[dict[str, Any]] = []
    has_w = instances["workload"].notna()
    coverage = has_w.groupby([instances["model"], instances["benchmark"]]).mean().to_dict()
    # Native layer: instances with a native workload; groups without any keep outcome terms.
    # (a column operation, not a Python loop over every instance: ten million at 10M)
    in_covered = has_w.groupby(
        [instances["model"], instances["benchmark"]], dropna=False
    ).transform("any")
    native = instances[has_w | ~in_covered.to_numpy(dtype=bool)]
    result = decompose(native, reference=None, n_boot=0, truncated_correct=TRUNCATED_CORRECT)
    rows += _layer_rows(result, "native", coverage)
    if result["vo_sig"].notna().any():
        rows += _layer_rows(result[result["vo_sig"].notna()], "trace", coverage)
    del native, in_covered  # a copy of the instances: not held through the solver layer
    # Solver layer: W_i = tokens of the best-E0 teacher that solved instance i.
    left_out = {str(r) for r in references}
    pool = sorted(m for m in instances["model"].unique() if str(m) not in left_out)
    if pool and instances["correct"].any():
        solved = solver_workload(instances.drop(columns=["workload"]), pool)
        if len(solved):
            cover = solved.attrs.get("coverage", {})
            with_solver = attach_workload(instances, solved)
            solver_result = decompose(
                with_solver.drop(columns=["solver"]),
                reference=None,
                n_boot=0,
                truncated_correct=TRUNCATED_CORRECT,
            )
            solver_cov = {
                (m, b): cover.get(b, {}).get("coverage", math.nan)
                for m, b in zip(solver_result["model"], solver_result["benchmark"], strict=True)
            }
            rows += _layer_rows(solver_result, "solver", solver_cov)
    return pd.DataFrame(rows)


def _read_rollouts_as_pages(store: Store) -> pd.DataFrame:
    """The rollouts as the app's pages load them (the transfer columns, ids as categoricals),
    so the stored page results are computed from exactly what a page would compute them."""
    from legival_core.metrics.transfer import ROLLOUT_CATEGORIES, ROLLOUT_COLUMNS
    from legival_core.store.frames import arrow_to_frame

    arrow = store.read_arrow("rollouts", columns=list(ROLLOUT_COLUMNS))
    return arrow_to_frame(arrow, ROLLOUT_CATEGORIES)


def board_intervals(
    store: Store, drawn: Any, references: Sequence[str]
) -> tuple[str, ResultKey, pd.DataFrame]:
    """The leaderboard's value and rank intervals of its default view (every dataset and
    student, no composite, reference teachers unranked) from the stored draws ``drawn``
    (:func:`legival_core.rankings.rank_intervals.interval_table` of the board's metrics), as a
    ``page_results`` entry."""
    from legival_core.metrics.metric_catalog import LEADERBOARD_METRICS, METRICS, ranked_metrics
    from legival_core.rankings.rank_intervals import (
        interval_table,
        resamples_frame,
        resamples_from_frame,
    )
    from legival_core.rankings.selection import Selection

    metrics = ranked_metrics(store.read("teacher_metrics"), LEADERBOARD_METRICS)
    board = resamples_from_frame(resamples_frame(drawn), metrics)  # the page's metrics, in order
    directions = {m: METRICS[m].higher_is_better for m in METRICS}
    table = interval_table(board, directions, None, references=references)
    # keyed by the page's default view, the one Selection the page asks with first
    return ("board_intervals", Selection(), table)


def chunk_settings(
    cfg: MetricsConfig,
    labeler: str,
    manifest: Mapping[str, Any],
    problems: pd.DataFrame | None = None,
) -> ChunkSettings:
    """What every bucket is computed with in a run of the stage with ``[metrics]`` config
    ``cfg`` and primary ``labeler`` on a store whose manifest is ``manifest`` when the run
    starts: the robustness report's default choices as the pages will read them once this
    run's record is in (checked against the manifest then), the sweep's grid holding the τ
    this run records, and the native workload of ``problems`` (``problem_id``, ``workload``)
    for the decomposition's instances."""
    from legival_core.metrics.decomposition import problem_workload
    from legival_core.rankings.robustness_choices import Settings

    record = {
        "stage": "metrics",
        "threshold": cfg.threshold,
        "profile": cfg.profile,
        "grid": cfg.grid,
        "primary_labeler": labeler,
        "encoding": cfg.encoding,
    }
    provenance = [*(manifest.get("provenance") or []), record]
    return ChunkSettings(
        cfg.threshold,
        labeler,
        cfg.profile,
        cfg.grid,
        encoding=cfg.encoding,
        robustness=Settings.from_manifest({**manifest, "provenance": provenance}),
        sweep=sweep_grid(cfg.threshold),
        workload=problem_workload(problems) if problems is not None else None,
    )


def sweep_grid(threshold: float) -> tuple[float, ...]:
    """The redundancy sweep's τ grid for a run recording ``threshold``
    (:func:`legival_core.metrics.redundancy_sweep_view.sweep_thresholds`), as the chunks get it.

    >>> len(sweep_grid(0.85)), len(sweep_grid(0.83))
    (21, 22)
    """
    from legival_core.metrics.redundancy_sweep_view import sweep_thresholds

    return tuple(sweep_thresholds(threshold).tolist())


def redundancy_results(
    store: Store, manifest: dict[str, Any], sweep: SweepPartial | None = None
) -> list[tuple[str, ResultKey, pd.DataFrame]]:
    """The redundancy page's sweep
    (:func:`legival_core.metrics.redundancy_sweep_view.teacher_redundancy_sweep`) over the
    published τ grid plus the τ the page reads from ``manifest``, as a ``page_results`` entry;
    none without similarities.

    With ``sweep`` (the buckets' merged partials, :func:`compute_in_chunks`) it is finalized
    from them and ``similarity`` is not read; without, it is summed over the whole tables.

    Raises:
        ValueError: ``sweep`` was summed over another grid than the manifest's τ gives.
    """
    from legival_core.metrics.efficiency import REDUNDANCY_THRESHOLDS
    from legival_core.metrics.page_results import RedundancySelection
    from legival_core.metrics.redundancy_sweep_view import (
        finalize_sweep,
        recorded_threshold,
        sweep_thresholds,
        teacher_redundancy_sweep,
    )

    if not (store.has("similarity") and store.has("traces")):
        return []
    recorded = recorded_threshold(manifest)
    chosen = recorded if recorded is not None else REDUNDANCY_THRESHOLDS["paper"]
    grid = sweep_thresholds(chosen)
    if sweep is not None:
        if sweep.thresholds != tuple(grid.tolist()):
            raise ValueError(
                f"the buckets' redundancy sweep is over {sweep.thresholds}, the pages read "
                f"{tuple(grid.tolist())} (τ = {chosen})"
            )
        table = finalize_sweep(sweep)
    else:
        table = teacher_redundancy_sweep(
            store.read("similarity", columns=["trace_id", "step", "max_similarity"]),
            store.read("traces", columns=["trace_id", "teacher", "dataset"]),
            grid,
        )
    return [("redundancy_sweep", RedundancySelection(chosen), table)]


def monitor_legibility_result(
    store: Store, scores: pd.DataFrame, n_boot: int
) -> tuple[str, ResultKey, pd.DataFrame]:
    """The Monitoring page's ρ(FOTU, precision / recall / F1) across teachers
    (:func:`legival_core.oversight.oversight.monitor_legibility_correlation`) from the detection
    ``scores`` of ``n_boot`` resamples, reference teachers left out, as a ``page_results``
    entry."""
    from legival_core.metrics.page_results import MonitorSelection
    from legival_core.oversight import oversight
    from legival_core.published.references import keep_teachers, store_reference_teachers

    teachers = keep_teachers(store.read("teacher_metrics"), store_reference_teachers(store))
    table = oversight.monitor_legibility_correlation(scores, teachers)
    return ("monitor_legibility", MonitorSelection(n_boot), table)


#: The ``trace_counts`` columns the stage reads.
COUNT_COLUMNS = PER_TRACE_INPUTS["counts"][1]


def default_counts(counts: pd.DataFrame) -> pd.Series:
    """Trace id → token count in the default encoding (what the decomposition counts a trace
    with when the engine reported none), from ``trace_counts`` rows."""
    from legival_core.text.tokens import DEFAULT_ENCODING

    if counts.empty:
        return pd.Series(dtype="float64")
    chosen = counts[counts["encoding"] == DEFAULT_ENCODING]
    return pd.Series(
        pd.to_numeric(chosen["tokens"]).to_numpy(dtype=float),
        index=chosen["trace_id"].astype(str).to_numpy(),
    )


def stored_default_counts(store: Store) -> pd.Series:
    """:func:`default_counts` of ``store``'s ``trace_counts``, reading only the default
    encoding's rows and the three columns it uses (a third of the table at two encodings)."""
    from legival_core.text.tokens import DEFAULT_ENCODING

    columns = ["trace_id", "encoding", "tokens"]
    if not store.has("trace_counts"):
        return default_counts(read_or_empty(store, "trace_counts", columns))
    return default_counts(store.read("trace_counts", columns, {"encoding": [DEFAULT_ENCODING]}))


def workload_audit_results(
    store: Store, efficiency: pd.DataFrame | None
) -> list[tuple[str, ResultKey, pd.DataFrame]]:
    """The Decomposition page's solver-workload audits and solver concentration of each
    benchmark (:func:`workload_audits`), from instances built as the page builds them: σ from
    ``efficiency`` (``trace_efficiency``), a trace without a stored token count counted from
    ``trace_counts`` (:func:`default_counts`); no text is read."""
    from legival_core.metrics.decomposition import decomposition_instances
    from legival_core.published.references import store_reference_teachers

    columns = ["trace_id", "problem_id", "dataset", "teacher", "sample", "tokens", "truncated"]
    sigma = None
    if efficiency is not None and "compression" in efficiency:
        sigma = pd.Series(
            efficiency["compression"].to_numpy(), index=efficiency["trace_id"].astype(str)
        )
    instances = decomposition_instances(
        store.read("traces", columns=columns),
        store.read("grades", columns=list(PER_TRACE_INPUTS["grades"][1])),
        sigma=sigma,
        counted=stored_default_counts(store),
    )
    benchmarks = store.read("decomposition", columns=["benchmark"])["benchmark"]
    return workload_audits(instances, store_reference_teachers(store), benchmarks)


def workload_audits(
    instances: pd.DataFrame, references: Sequence[str], benchmarks: Iterable[str]
) -> list[tuple[str, ResultKey, pd.DataFrame]]:
    """The solver-workload audits and solver concentration
    (:func:`legival_core.metrics.workload.pool_audits`) of each of ``benchmarks`` over
    ``instances`` (:func:`legival_core.metrics.decomposition.decomposition_instances`), the
    ``references`` teachers left out of the pool as the page's default leaves them out, as
    ``page_results`` entries."""
    from legival_core.metrics.page_results import DecompositionSelection
    from legival_core.metrics.workload import pool_audits
    from legival_core.published.references import keep_teachers

    # the pool without reference teachers, as the page's default (views' workload_audits)
    pool = keep_teachers(instances, references, column="model")
    out: list[tuple[str, ResultKey, pd.DataFrame]] = []
    for benchmark in sorted(set(benchmarks)):
        audits = pool_audits(pool[pool["benchmark"] == benchmark])
        for part, frame in audits.items():
            out.append((f"decomposition_{part}", DecompositionSelection(benchmark), frame))
    return out


def robustness_results(
    store: Store,
    settings: Settings,
    n_boots: Sequence[int],
    seed: int,
    partial: RobustnessPartial | None = None,
    resamples: TeacherResamples | None = None,
) -> list[tuple[str, ResultKey, pd.DataFrame]]:
    """The robustness report (:func:`legival_core.rankings.robustness_choices.robustness_report`)
    of the store under its default ``settings`` for each of ``n_boots`` (the leaderboard's
    marker uses 0, the Robustness page the configured resamples), as ``page_results`` entries,
    one per frame of the report.

    With ``partial`` (the buckets' merged :mod:`legival_core.rankings.robustness_partials`
    under the same settings) the report is finalized from it: only the per-trace tables the
    rank intervals resample are read, never ``rollouts``, ``similarity`` or ``judgments``; and
    not those either with ``resamples`` (the stage's Pareto resamples, merged from the buckets:
    the default's rank intervals for ``n_boots`` of the same resamples and ``seed``)."""
    from legival_core.metrics.page_results import RobustnessSelection
    from legival_core.rankings import robustness_choices as choices

    if partial is not None and partial.settings == settings:
        from legival_core.published.references import store_reference_teachers
        from legival_core.rankings.robustness_partials import robustness_finalize

        if not partial.n_traces and not partial.error:
            return []
        per_trace = ("trace_efficiency", "trace_transfer")
        drawn = {n for n in n_boots if n > 0}
        if resamples is not None and drawn <= {resamples.n_boot} and seed == resamples.seed:
            drawn = set()  # every interval from the resamples given: no per-trace table read
        else:
            resamples = None
        tables = choices.read_tables(
            lambda name, columns: (
                store.read(name, columns=columns)
                if name in per_trace and store.has(name) and drawn
                else pd.DataFrame()
            ),
            store_reference_teachers(store),
        )

        def report_of(n_boot: int) -> Any:
            return robustness_finalize(
                partial,
                tables,
                tables.references,
                n_boot=n_boot,
                seed=seed,
                resamples=resamples if n_boot > 0 else None,
            )
    else:
        tables = choices.load_tables(store)
        if tables.trace_efficiency.empty:
            return []

        def report_of(n_boot: int) -> Any:
            return choices.robustness_report(tables, settings, n_boot=n_boot, seed=seed)

    out: list[tuple[str, ResultKey, pd.DataFrame]] = []
    for n_boot in n_boots:
        try:
            report = report_of(n_boot)
        except ValueError:  # a table that does not fit: the pages say why when they compute it
            return []
        key = RobustnessSelection(choices.settings_key(settings), n_boot, seed)
        for part, frame in choices.report_frames(report).items():
            out.append((f"robustness_{part}", key, frame))
    return out


def page_results_table(
    store: Store,
    manifest: dict[str, Any],
    future: dict[str, Any] | None = None,
    *,
    board: BoardPartials | None = None,
    rollout_results: RolloutResults | None = None,
    robustness: RobustnessPartial | None = None,
    sweep: SweepPartial | None = None,
    audits: list[tuple[str, ResultKey, pd.DataFrame]] | None = None,
    rewards: RewardPartial | None = None,
) -> pa.Table | None:
    """Rows of ``page_results`` (:mod:`legival_core.metrics.page_results`): what the slow pages
    compute on load for their default selection, from the store's tables as they are now,
    each stamped with the state of its inputs in ``manifest``.

    * leaderboard: the paired resamples of every ranked metric, all datasets and students
      (:func:`legival_core.rankings.rank_intervals.stored_board_resamples`), the default
      view's intervals (:func:`board_intervals`); the Pareto
      page's, reference teachers left out;
    * monitoring: the detection scores with their bootstrap, per dataset and pooled, and
      ρ(FOTU, score) across teachers (reference teachers left out);
    * decomposition: each benchmark's solver-workload audits and solver concentration
      (reference teachers left out);
    * reward models: for each reward model, the trace points, ρ at trace and teacher level
      (all and correct traces) and the teacher table, all datasets, all traces, reference
      teachers left out;
    * transfer curves: the first-solve table before the leak, the measured-bin coverage (each
      profile) and the first measured positions, all datasets and students;
    * step attribution: every trace's top-10% share of its per-step transfer attribution
      (:func:`legival_core.metrics.attribution.trace_concentration`), for the inspector's
      per-teacher summary and trace filter;
    * redundancy threshold: every teacher's sweep over the published τ grid plus the τ the
      pages will read from ``future`` (the manifest once this run's record is in);
    * inspector: a marker that ``trace_efficiency``'s step counts are those of the steps table
      now (the trace list then reads them instead of counting every step), and the trace list
      itself (:func:`legival_core.metrics.trace_list.store_trace_choices`);
    * robustness: the report under the default choices the pages will read from ``future``
      with no resamples (the leaderboard's marks) and with the configured ones (the
      Robustness page).

    The last two are left out without ``future``.

    With ``board`` and ``rollout_results`` (what :func:`compute_in_chunks` merged from the
    buckets this run), the board and Pareto resamples and the rollouts' results come from them
    instead of from ``trace_efficiency``, ``trace_transfer`` and the whole ``rollouts`` read
    again; with ``sweep`` the redundancy sweep is finalized from the buckets' partials instead
    of read from the whole ``similarity``: the same numbers (``tests/test_metrics_buckets.py``).
    ``audits`` are the workload audits from this run's decomposition instances
    (:func:`workload_audits`), used instead of building the instances again. With ``rewards``
    (the buckets' per-trace means and per-student sums) the reward results do not read
    ``trace_transfer``. ``rollout_results``' per-trace frames (first measured positions,
    attribution concentration) are emptied once written, so that they are not held under the
    results after them.

    None when the store holds none of their inputs.
    """
    from legival_core.metrics.page_results import (
        MonitorSelection,
        PageResultRows,
        RewardSelection,
        TransferSelection,
        WholeStore,
    )
    from legival_core.oversight import oversight, selections
    from legival_core.published.references import store_reference_teachers
    from legival_core.rankings.rank_intervals import resamples_frame, stored_board_resamples
    from legival_core.rankings.robustness_choices import Settings
    from legival_core.rankings.selection import RANK_RESAMPLES, RESAMPLE_SEED, Selection

    # each result serialised as it comes, and the per-trace frames let go once used (at two
    # million traces this phase's peak went from 5.74 to 5.38 GB)
    results = PageResultRows(manifest)
    pareto = None
    # The per-trace tables are read whole only where a result needs every column (no
    # partials from this run, reward models); otherwise the columns a result reads: at a
    # million traces ``trace_transfer`` alone is 2.3M rows.

    def whole(name: str) -> pd.DataFrame | None:
        return store.read(name) if store.has(name) else None

    efficiency_rows = _stored_rows(store, "trace_efficiency")
    transfer_rows = _stored_rows(store, "trace_transfer")
    if efficiency_rows or transfer_rows:
        references = store_reference_teachers(store)
        default = Selection()  # the leaderboard's and the Pareto page's first view
        if board is not None and (board.n_boot, board.seed) == (default.n_boot, default.seed):
            from legival_core.rankings.board_partials import finalize_board

            drawn = finalize_board(board, outside=references)
        else:
            efficiency, transfer = whole("trace_efficiency"), whole("trace_transfer")
            drawn = stored_board_resamples(
                efficiency, transfer, default.n_boot, default.seed, outside=references
            )
        results.append(("board_resamples", default, resamples_frame(drawn)))
        if store.has("teacher_metrics"):
            results.append(board_intervals(store, drawn, references))
        if board is not None and (board.n_boot, board.seed) == (default.n_boot, default.seed):
            drawn = finalize_board(board, references)
            pareto = drawn  # resample_teachers(..., references) of the whole tables
        else:
            drawn = stored_board_resamples(
                efficiency, transfer, default.n_boot, default.seed, references
            )
        results.append(("pareto_resamples", default, resamples_frame(drawn)))
    # the rollouts' per-trace results first: written, they are not held under the rest
    if store.has("rollouts"):
        from legival_core.metrics.attribution import trace_concentration
        from legival_core.metrics.leak_summary import selection_leak_summary
        from legival_core.metrics.transfer import PROFILES
        from legival_core.metrics.transfer_curves import (
            first_measured_positions,
            observed_coverage,
        )

        leaks: pd.DataFrame | None
        if rollout_results is not None:
            # merged from the buckets this run read: the rollouts are not read whole again
            # (their leak pairs None unless this run's trace_transfer carries the leak columns)
            leaks, coverage = rollout_results.leaks, rollout_results.coverage
            first, concentration = rollout_results.first_measured, rollout_results.concentration
            with_leaks = leaks is not None
        else:
            transfer = whole("trace_transfer")
            with_leaks = transfer is not None and {"leak_k", "fotu_before_leak"} <= set(
                transfer.columns
            )
            rollouts = _read_rollouts_as_pages(store)
            leaks = selection_leak_summary(transfer, rollouts) if with_leaks else None
            coverage = {p: observed_coverage(rollouts, p) for p in PROFILES}
            first = first_measured_positions(rollouts)
            concentration = trace_concentration(rollouts)
            del rollouts
        if with_leaks and leaks is not None:
            results.append(("transfer_leaks", TransferSelection(), leaks))
        for profile in PROFILES:
            covered = TransferSelection(profile=profile)
            results.append(("transfer_coverage", covered, coverage[profile]))
        results.append(("transfer_first_measured", TransferSelection(), first))
        results.append(("attribution_traces", WholeStore(), concentration))
        del first, concentration
        if rollout_results is not None:
            # written: let go here, where the caller's record of them would keep them under
            # the reward results and the trace list (0.8 GB at ten million traces)
            rollout_results.first_measured = rollout_results.concentration = pd.DataFrame()
        release_freed_memory()
    if store.has("monitor_verdicts"):
        # the columns the scores read: not the monitors' raw replies
        verdicts = store.read("monitor_verdicts", columns=list(oversight.MONITOR_INPUT_COLUMNS))
        monitor = MonitorSelection()  # the Monitoring page's first view
        n_boot = monitor.n_boot
        scores = oversight.monitor_scores(verdicts, n_boot=n_boot, seed=0)
        results.append(("monitor_scores", monitor, scores))
        pooled = selections.pooled_monitor_scores(verdicts, n_boot)
        results.append(("monitor_scores_pooled", monitor, pooled))
        if store.has("teacher_metrics"):
            results.append(monitor_legibility_result(store, scores, n_boot))
        # let go before the reward results and the trace list, which read every trace
        del verdicts, scores, pooled
        release_freed_memory()
    # this run's transfer rows summed per trace by the buckets (one row per trace: the reward
    # results and the trace list read these instead of the 2.3M rows of a million traces),
    # joined from the bucket's frames only now, not held under the results before
    per_trace = rewards.trace_means() if rewards is not None else None
    if store.has("rewards") and store.has("trace_transfer") and store.has("grades"):
        # only the columns the reward results read: at two million traces the whole
        # trace_transfer and grades took this phase, the stage's highest, from 4.9 to 5.8 GB;
        # with this run's partials not even those of trace_transfer (2.3M rows at a million
        # traces, grouped again by every result)
        given, transfer, grades, traces = (
            store.read(name, columns=list(oversight.REWARD_INPUT_COLUMNS[name]))
            if name != "trace_transfer" or per_trace is None
            else per_trace
            for name in ("rewards", "trace_transfer", "grades", "traces")
        )
        references = store_reference_teachers(store)
        tables = selections.RewardTables(
            given, transfer, grades, traces, None if rewards is None else rewards.sums
        )
        for model in sorted(given["reward_model"].unique()):
            every_trace = RewardSelection(model)
            points = selections.reward_points(tables, every_trace)
            results.append(("reward_points", every_trace, points))
            del points
            # each result's joins and lookups of every trace's id leave their memory in the
            # allocators' caches: returned after each, they do not pile up over the results
            release_freed_memory()
            for level in ("trace", "teacher"):
                for correct_only in (False, True):
                    key = RewardSelection(model, level=level, correct_only=correct_only)
                    rho = selections.reward_rho(tables, key, references)
                    results.append(("reward_rho", key, rho))
                    release_freed_memory()
            teachers = selections.teacher_rewards(tables, every_trace, references)
            results.append(("teacher_rewards", every_trace, teachers))
        del given, grades, traces, tables, transfer
        release_freed_memory()  # the trace list's Arrow reads come next
    # trace_efficiency's step counts and σ: the two results below read nothing else of it
    efficiency = (
        read_or_empty(store, "trace_efficiency", ["trace_id", "steps", "compression"])
        if efficiency_rows
        else None
    )
    if audits is not None:
        results += audits
    elif store.has("decomposition") and store.has("traces") and store.has("grades"):
        results += workload_audit_results(store, efficiency)
    if store.has("trace_efficiency") and store.has("steps"):
        # The inspector's trace list reads trace_efficiency's step counts while this marker
        # is current instead of counting every step (seconds at a million traces).
        results.append(("trace_steps", WholeStore(), pd.DataFrame({"current": [True]})))
    if store.has("traces"):
        # The inspector's trace list itself (a million rows joined and sorted: 2 s of its cold
        # start at a million traces), computed afresh from the tables as they are now.
        from legival_core.metrics.trace_list import store_trace_choices

        # this run's counts (trace_counts), current by construction: no step is counted
        steps = _step_counts(efficiency)
        listed = store_trace_choices(
            store, stored=False, steps_per_trace=steps, trace_transfer=per_trace
        )
        results.append(("trace_choices", WholeStore(), listed))
        del listed, steps
    del per_trace, rewards
    del efficiency
    if future is not None:
        results += redundancy_results(store, future, sweep)
        settings = Settings.from_manifest(future)
        results += robustness_results(
            store, settings, (0, RANK_RESAMPLES), RESAMPLE_SEED, robustness, pareto
        )
    return results.table() if len(results) else None


def _step_counts(efficiency: pd.DataFrame | None) -> pd.Series | None:
    """Trace id → step count of the traces with steps in ``efficiency`` (None without rows)."""
    if efficiency is None or not len(efficiency):
        return None
    with_steps = efficiency[efficiency["steps"] > 0]
    return pd.Series(with_steps["steps"].to_numpy(), index=with_steps["trace_id"].astype(str))


def _stored_rows(store: Store, table: str) -> int:
    """``table``'s row count as the manifest records it (0 when absent)."""
    entry = (store.manifest.get("tables") or {}).get(table) or {}
    return int(entry.get("rows", 0)) if store.has(table) else 0


#: An input of :func:`missing_input`: its frame, or a function that reads the frame.
CheckedInput: TypeAlias = pd.DataFrame | Callable[[], pd.DataFrame]


def _given(value: CheckedInput) -> pd.DataFrame:
    """``value``'s frame: read now when it is a function."""
    return value if isinstance(value, pd.DataFrame) else value()


def missing_input(
    traces: pd.DataFrame,
    grades: CheckedInput,
    counts: CheckedInput,
    similarity: CheckedInput,
    judgments: CheckedInput,
    problems: pd.DataFrame,
    *,
    labeler: str,
    encodings: Sequence[str] = ("cl100k_base",),
    unchecked_leaks: Sequence[str] | Callable[[], Sequence[str]] = (),
) -> tuple[str, str, int] | None:
    """The first per-trace input the metrics lack, as (stage to run, table, traces lacking it).

    Each input after ``traces`` may be given as a function that reads it: it is called when
    its check is reached and let go after it, so one input is held at a time (the stage's
    inputs held together took its start to 6.7 GB at ten million traces), and none after
    the first one found lacking is read.

    Checked in pipeline order, so the stage named is the one to run next:

    * ``grade`` — a trace whose problem has a known gold answer has no ``grades`` row
      (problems recorded without a gold answer stay ungraded on purpose);
    * ``segment`` — a trace has no ``trace_counts`` row in one of ``encodings`` (the segment
      stage counts every trace, a blank one too, once it has cut its steps);
    * ``embed`` — a trace with steps has no ``similarity`` rows;
    * ``leaks`` — ``unchecked_leaks`` names traces with rollouts whose answer-leak point is
      missing or stale (:func:`precompute.stages.leaks.stale_leaks`);
    * ``judge`` — a trace with steps has no ``judgments`` row by ``labeler``.

    ``None`` when nothing is missing.

    >>> t = pd.DataFrame({"trace_id": ["a"], "problem_id": ["p"]})
    >>> none = pd.DataFrame({"trace_id": [], "encoding": [], "steps": []})
    >>> g = pd.DataFrame({"trace_id": ["a"]})
    >>> p = pd.DataFrame({"problem_id": ["p"], "gold": ["4"], "meta": [None]})
    >>> missing_input(t, g, none, none, none.assign(labeler=[]), p, labeler="lexical")
    ('segment', 'trace_counts', 1)
    """
    from precompute.stages.grade import gold_is_known

    # Column operations (hash joins in C), not Python sets of a million ids or tuples: at a
    # million traces the sets held about 0.7 GB that the buckets then ran on top of.
    known_gold = {
        str(row["problem_id"])
        for row in problems.to_dict(orient="records")
        if gold_is_known({"meta": None if is_missing(row.get("meta")) else row.get("meta")})
    }
    trace_ids = traces["trace_id"]
    ungraded = ~is_in(trace_ids, _given(grades)["trace_id"]) & is_in(
        traces["problem_id"].astype(str), known_gold
    )
    if ungraded.any():
        return ("grade", "grades", int(ungraded.sum()))
    del ungraded
    counted = _given(counts)
    uncounted = pd.Series(False, index=traces.index)
    for encoding in encodings:
        uncounted |= ~is_in(trace_ids, counted.loc[counted["encoding"] == encoding, "trace_id"])
    if uncounted.any():
        return ("segment", "trace_counts", int(uncounted.sum()))
    del uncounted
    segmented = pd.Series(counted.loc[pd.to_numeric(counted["steps"]) > 0, "trace_id"].unique())
    del counted
    unembedded = ~is_in(segmented, _given(similarity)["trace_id"])
    if unembedded.any():
        return ("embed", "similarity", int(unembedded.sum()))
    del unembedded
    unchecked = unchecked_leaks if isinstance(unchecked_leaks, Sequence) else unchecked_leaks()
    if len(unchecked):
        return ("leaks", "answer_leaks", len(unchecked))
    labels = _given(judgments)
    unlabelled = ~is_in(segmented, labels.loc[labels["labeler"] == labeler, "trace_id"])
    if unlabelled.any():
        return ("judge", "judgments", int(unlabelled.sum()))
    return None


def _stale_leaks(with_rollouts: pd.DataFrame, leaks: pd.DataFrame, gold: pd.DataFrame) -> list[str]:
    """:func:`precompute.stages.leaks.stale_leaks` of the traces with rollouts, by this
    grader, against the problems' gold answers (``gold``: ``problem_id``, ``gold``)."""
    from legival_core.grading.grader import GRADER_VERSION
    from precompute.stages.leaks import stale_leaks

    golds = {str(p): {"gold": g} for p, g in zip(gold["problem_id"], gold["gold"], strict=True)}
    return stale_leaks(with_rollouts, leaks, golds, GRADER_VERSION)


def _refuse_missing(
    found: tuple[str, str, int] | None, n_traces: int, labeler: str, store: Store
) -> None:
    """Raise the one-line :class:`StageError` for what :func:`missing_input` found."""
    if found is None:
        return
    stage, table, count = found
    what = f"table '{table}'" + (f" by labeler {labeler!r}" if stage == "judge" else "")
    where = store.path
    raise StageError(
        f"stage 'metrics' needs {what} for {count} of {n_traces} trace(s), which lack it; run "
        f"`python -m precompute {stage} --store {where}` first (or `python -m precompute run "
        f"--store {where}` for every CPU stage)"
    )


#: The ``traces`` columns the metrics stage reads: no text (``reasoning``, ``raw``,
#: ``answer_text``); what the metrics need from it is in ``trace_counts`` and ``answer_leaks``.
METRICS_TRACE_COLUMNS = PER_TRACE_INPUTS["traces"][1]
#: The ``rollouts`` columns it reads (never the students' texts or token counts).
METRICS_ROLLOUT_COLUMNS = (
    "trace_id", "problem_id", "dataset", "teacher", "student", "k", "sample", "m", "correct",
    "forced", "status",
)  # fmt: skip


@register_stage(
    "metrics",
    reads=(
        "problems",
        "traces",
        "grades",
        "trace_counts",
        "steps",
        "similarity",
        "judgments",
        "rollouts",
        "answer_leaks",
        "rewards",
        "monitor_verdicts",
    ),
    writes=(
        "trace_efficiency",
        "trace_transfer",
        "transfer_curves",
        "teacher_metrics",
        "decomposition",
        "page_results",
    ),
    help="derived tables: trace efficiency, transfer utility, teacher summary, decomposition",
    shardable=False,
    options=(
        StageOption(
            "--engine",
            "engine",
            {
                "choices": ("local", "processes", "ray"),
                "help": "where the chunks run: this process (default), worker processes "
                "of this machine, or Ray tasks",
            },
        ),
        StageOption(
            "--address",
            "address",
            {"help": "with --engine ray: the cluster (default $RAY_ADDRESS, else a local Ray)"},
        ),
        StageOption(
            "--chunks",
            "chunks",
            {"type": int, "help": "buckets of problems (default: [metrics] chunks, 16)"},
        ),
        StageOption(
            "--in-flight",
            "in_flight",
            {
                "type": at_least_one,
                "help": "with --engine processes: worker processes (default: one a CPU); "
                "with --engine ray: buckets submitted ahead, the most nodes busy at once "
                "(default 4; give at least the cluster's CPUs)",
            },
        ),
        StageOption(
            "--memory-gb",
            "memory_gb",
            {
                "type": positive_gb,
                "help": "memory budget for one bucket's rows: more buckets when the store "
                "needs them (default: [metrics] memory_gb, none)",
            },
        ),
    ),
)
def run_metrics(ctx: StageContext) -> StageResult:
    from precompute.bucket_spill import scratch_folder

    # the buckets' per-trace frames wait in this folder until they are concatenated
    with scratch_folder() as spill_to:
        return _run_metrics(ctx, spill_to)


def _run_metrics(ctx: StageContext, spill_to: Path) -> StageResult:
    cfg = ctx.config.metrics
    options = ctx.stage_options.get("metrics", {})
    result = StageResult("metrics")
    store = ctx.store
    # The inputs' state, taken before any read: a write landing after it makes what the reads
    # gave stale (the stamps then differ from the store), never wrong.
    started = store.manifest
    # Only the columns the checks and the buckets' assignment use (the buckets read the rest
    # of their own traces): at ten million traces the stage's eight columns took 1.5 GB here.
    traces = read_or_empty(store, "traces", ["trace_id", "problem_id"])
    if traces.empty:
        raise StageError("stage 'metrics' needs rows in table 'traces', which is empty")
    from legival_core.metrics.transfer_curves import rollouts_stamp
    from precompute.stages.segment import count_encodings

    stamp = rollouts_stamp(started)
    labeler = primary_labeler(ctx)
    # The per-row inputs are read a bucket at a time below; here only which traces have any of
    # their rows (distinct trace ids, streamed a record batch at a time), for the checks.
    with_rollout_rows = _trace_ids_in(store, "rollouts")
    problems = read_or_empty(store, "problems", ["problem_id", "workload"])
    gold = read_or_empty(store, "problems", ["problem_id", "gold", "meta"])
    leaks = read_or_empty(store, "answer_leaks", ["trace_id", "leak_k", "gold", "grader_version"])
    with_rollouts = traces[is_in(traces["trace_id"], with_rollout_rows)]
    has_rollouts = len(with_rollout_rows) > 0
    del with_rollout_rows
    # Each of the other inputs is read when its check comes and let go after it
    # (missing_input): at ten million traces they were 3 GB held together, and with what the
    # checks built the start peaked at 6.7 GB.
    _refuse_missing(
        missing_input(
            traces,
            lambda: read_or_empty(store, "grades", ["trace_id"]),
            lambda: read_or_empty(store, "trace_counts", ["trace_id", "encoding", "steps"]),
            lambda: pd.DataFrame({"trace_id": _trace_ids_in(store, "similarity")}),
            lambda: pd.DataFrame(
                {
                    "trace_id": _trace_ids_in(store, "judgments", {"labeler": labeler}),
                    "labeler": labeler,
                }
            ),
            gold,
            labeler=labeler,
            encodings=count_encodings(cfg.encoding),
            unchecked_leaks=functools.partial(_stale_leaks, with_rollouts, leaks, gold),
        ),
        len(traces),
        labeler,
        store,
    )
    leaks = chunk_leaks(leaks, with_rollouts["trace_id"])
    leaks_found = int(leaks["leak_k"].notna().sum()) if has_rollouts else 0
    n_traces = len(traces)
    chunks = metrics_chunks(store, cfg, options)
    result.notes.append(f"{chunks} chunks")
    bucket_of_trace = trace_buckets(traces, chunks)
    # The buckets read their own rows of every input, the per-trace ones too: the whole frames
    # go before the buckets run (at a million traces ~0.7 GB with what the checks built,
    # under every bucket); the decomposition's instances are built inside the buckets.
    del with_rollouts, traces, leaks
    release_freed_memory()
    # each table split into the buckets in one pass (precompute.bucket_spill), not decoded
    # whole once per bucket by a keyed read
    with spilled_bucket_reader(
        store, bucket_of_trace, BUCKET_READS, store_bucket_reader(store)
    ) as read_rows:
        chunked = compute_in_chunks(
            None,
            None,
            None,
            None,
            read_rows,
            bucket_of_trace=bucket_of_trace,
            # the sweep's grid holds the τ this run records, the one the pages will read
            settings=chunk_settings(cfg, labeler, started, problems),
            write=lambda name, frame: store.write(name, frame, stage="metrics"),
            engine=options.get("engine") or "local",
            address=options.get("address"),
            in_flight=chunks_in_flight(options),
            spill_to=spill_to,
        )
    for name, rows in (
        ("trace_efficiency", chunked.efficiency_rows),
        ("trace_transfer", chunked.transfer_rows),
    ):
        if rows:
            store.merge(name)
            result.written[name] = rows
    # The decomposition from the instances the buckets built, before anything else is derived:
    # the per-trace tables are not read whole again, and the instances go before the page
    # results' inputs come in.
    decomposition, audits = None, None
    if chunked.decomposition is not None:
        instances, references = chunked.decomposition.joined()
        chunked.decomposition = None
        decomposition = decomposition_table(instances, references)
        if len(decomposition):
            # the Decomposition page's audits from the same instances, not built again later
            audits = workload_audits(instances, references, decomposition["benchmark"])
        del instances
    tables: dict[str, pd.DataFrame] = {}
    # The transfer curves and the rollouts' page results, merged from the buckets' partials.
    rollout_results = chunked.rollouts.results(stamp) if chunked.rollouts is not None else None
    if rollout_results is not None:
        tables["transfer_curves"] = rollout_results.transfer_curves
    # what the page results take from the buckets; the rest (the rollouts' merged partials,
    # their results made) goes now, before the release profile reads the rollouts whole
    board, robustness, sweep = chunked.board, chunked.robustness, chunked.sweep
    reward_partial, teacher_partials = chunked.rewards, chunked.partials
    transfer_rows = chunked.transfer_rows
    del chunked
    release_freed_memory()
    if cfg.profile == "paper":
        # the teacher table from the chunks' merged partials (the registry's aggregates)
        from legival_core.metrics.teacher_partials import teacher_rows

        tables["teacher_metrics"] = teacher_rows(teacher_partials).assign(hf_id=None)
    else:
        # the release profile pools FOTU and normalises SOTU as the authors' scripts do: whole
        rollouts = read_or_empty(store, "rollouts", list(METRICS_ROLLOUT_COLUMNS))
        transfer = store.read("trace_transfer") if transfer_rows else None
        tables["teacher_metrics"] = teacher_table(
            store.read("trace_efficiency"), rollouts, cfg.profile, cfg.grid, ctx.config.seed,
            transfer,
        )  # fmt: skip
        del rollouts, transfer
    if decomposition is not None and len(decomposition):
        tables["decomposition"] = decomposition
    del decomposition
    for name, frame in tables.items():
        store.write(name, frame, stage="metrics")
        store.merge(name)
        result.written[name] = len(frame)
    result.todo = n_traces
    written = set(tables) | {
        n for n in ("trace_efficiency", "trace_transfer") if n in result.written
    }
    # The page results read what they need from the store again: let the inputs go first (at
    # a million traces they held ~10 GB, and holding them beside the rollouts read again
    # below crossed 17 GB; bench/scale_bench.py).
    del tables, teacher_partials
    release_freed_memory()
    # The pages' default results, from the tables just written. Each is stamped with its
    # inputs' state: the tables this stage wrote as they are now, the others as they were
    # when the stage started (a table written meanwhile makes the row stale, never wrong).
    now = store.manifest
    state = dict(started)
    state["tables"] = {
        **(started.get("tables") or {}),
        **{n: e for n, e in (now.get("tables") or {}).items() if n in written},
    }
    provenance = {
        "threshold": cfg.threshold,
        "profile": cfg.profile,
        "grid": cfg.grid,
        "primary_labeler": labeler,
        "encoding": cfg.encoding,
        "truncated_correct": TRUNCATED_CORRECT,
        "answer_leaks_found": leaks_found,
    }
    # The manifest as the pages will read it (default choices, τ) once this run's record is in.
    future = {
        **now,
        "provenance": [*(now.get("provenance") or []), {"stage": "metrics", **provenance}],
    }
    pages = page_results_table(
        store,
        state,
        future,
        board=board,
        rollout_results=rollout_results,
        robustness=robustness,
        sweep=sweep,
        audits=audits,
        rewards=reward_partial,
    )
    if pages is not None:
        store.write("page_results", pages, stage="metrics")
        store.merge("page_results")
        result.written["page_results"] = pages.num_rows
    result.provenance = provenance
    return result
