"""The robustness report from mergeable per-chunk partials: what lets the metrics stage build it
one bucket of problems at a time instead of reading ``rollouts``, ``similarity`` and
``judgments`` whole (21 GB at a million traces, bench/scale_bench.py).

Every built-in alternative of :mod:`legival_core.rankings.robustness_choices` is trace-local up
to :func:`legival_core.rankings.robustness_choices.dataset_values`: a trace's redundancy under
another τ, its backtracking under another labeler or segmenter, its token count in another
encoding, its (trace, student) transfer quantities under another grid or profile depend on that
trace's rows only. So :func:`robustness_partial` of one chunk keeps, per alternative, the sums
``dataset_values`` divides:

* per (teacher, dataset) the sum and count of each efficiency column (the mean over traces);
* per (teacher, dataset, student) a :class:`TransferCell`: the sums and counts of the per-pair
  FOTU, regression rate, never-solved and baseline, the hazard histogram, the pooled bin sums
  (``release``) and the sum and count of FOTU before the leak — what
  :func:`legival_core.metrics.transfer.teacher_metrics` (``n_boot = 0``) and
  :func:`legival_core.metrics.transfer.fotu_before_leak` average;

plus the facts the families decide on (is there a similarity table, which labelers and
students, the prefix grid's interval, how far the side tables got). :func:`merge_robustness`
adds two chunks' partials; :func:`robustness_finalize` gives the same
:class:`~legival_core.rankings.robustness_choices.RobustnessReport` as
:func:`~legival_core.rankings.robustness_choices.robustness_report` of the whole tables (within
rtol 1e-12: sums added in another order; tests/test_robustness_buckets.py).

Two global facts are unknown inside a chunk, so the chunk keeps every candidate: the prefix
grid's interval g (the gcd of every inner k over all chunks divides the chunk's own gcd, so a
chunk sums the coarser grids 2d and 3d for every divisor d of its gcd) and the labeler behind
the stored backtracking (the side tables' backtracking is kept for both offline labelers).

A chunk must hold every row of each of its traces (the stage's buckets of problems do).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np
import pandas as pd

from legival_core.metrics.efficiency import labeler_backtracking
from legival_core.metrics.metric_catalog import LEADERBOARD_METRICS
from legival_core.metrics.redundancy_sweep_view import trace_redundancy
from legival_core.metrics.transfer_prefixes import _collapse_sorted, _sort_rows, _SortedRows
from legival_core.rankings.rank_intervals import TeacherResamples
from legival_core.rankings.robustness_choices import (
    EFFICIENCY_COLUMNS,
    SEGMENTER_LABELS,
    SEGMENTERS,
    SIDE_FLAGS,
    TRANSFER_COLUMNS,
    Alternative,
    RobustnessReport,
    Settings,
    StoreTables,
    _grid_interval,
    _labelers,
    _leaks,
    _with_column,
    assemble_report,
)
from legival_core.stats.poisson_bootstrap import add_fields
from legival_core.store.frames import text_groups

__all__ = [
    "RobustnessPartial",
    "TransferCell",
    "merge_robustness",
    "robustness_finalize",
    "robustness_partial",
    "transfer_setups",
]

Cells = dict[tuple[str, str, str], "TransferCell"]
#: the per-pair scalars averaged per student then over students (transfer._MEAN_QUANTITIES)
_SCALARS = ("fotu", "regression_rate", "never_solved", "baseline")


@dataclass
class TransferCell:
    """One (teacher, dataset, student)'s sums: ``sums`` / ``counts`` of the per-pair
    :data:`_SCALARS` (NaN left out), ``hazards`` the histogram of the solved pairs' hazard bins
    1..50, ``bin_sums`` / ``bin_counts`` the pooled per-bin correctness (``release``; zeros
    otherwise), ``before_sum`` / ``before_n`` FOTU before the leak."""

    sums: np.ndarray
    counts: np.ndarray
    hazards: np.ndarray
    bin_sums: np.ndarray
    bin_counts: np.ndarray
    before_sum: float = 0.0
    before_n: int = 0

    def __add__(self, other: TransferCell) -> TransferCell:
        return add_fields(self, other)


def _add_cells(a: Cells, b: Cells) -> Cells:
    out = dict(a)
    for key, cell in b.items():
        out[key] = out[key] + cell if key in out else cell
    return out


@dataclass
class RobustnessPartial:
    """One chunk's (or several merged chunks') share of the robustness report.

    ``efficiency`` by variant key: per (teacher, dataset) ``<metric>_sum`` / ``<metric>_n``;
    ``transfer`` by setup key: :class:`TransferCell` per (teacher, dataset, student); ``grid``
    by coarser step; the rest are the facts the families decide on, each added across chunks.
    """

    settings: Settings
    efficiency: dict[str, pd.DataFrame] = field(default_factory=dict)
    transfer: dict[str, Cells] = field(default_factory=dict)
    grid: dict[int, Cells] = field(default_factory=dict)
    #: gcd of every k with 0 < k < m (None: no such k in these chunks)
    grid_gcd: int | None = None
    n_traces: int = 0
    with_steps: int = 0
    similarity_rows: int = 0
    rollout_rows: int = 0
    leak_rows: int = 0
    other_counts: int = 0
    students: frozenset[str] = frozenset()
    #: per labeler: traces it labels, and whether its shares equal the stored backtracking
    labelers: dict[str, tuple[int, bool]] = field(default_factory=dict)
    #: per segmenter: its traces with steps re-embedded, its side step rows, and per flag
    #: column whether any of its steps has a flag
    side_done: dict[str, int] = field(default_factory=dict)
    side_rows: dict[str, int] = field(default_factory=dict)
    side_steps_rows: int = 0
    side_flags: dict[tuple[str, str], bool] = field(default_factory=dict)
    #: a table that does not fit (the whole report's ValueError), else ""
    error: str = ""


def _efficiency_sums(efficiency: pd.DataFrame) -> pd.DataFrame:
    """Per (teacher, dataset): sum and count of each efficiency metric (NaN left out), as
    ``dataset_values`` reads the columns."""
    data: dict[str, np.ndarray] = {}
    for metric in EFFICIENCY_COLUMNS:
        column = "correct" if metric == "accuracy" else metric
        values = pd.to_numeric(efficiency[column].astype("Float64"), errors="coerce")
        numbers = values.astype("float64").to_numpy()
        present = ~np.isnan(numbers)
        data[f"{metric}_sum"] = np.where(present, numbers, 0.0)
        data[f"{metric}_n"] = present.astype(np.int64)
    frame = pd.DataFrame(data)
    keys = [
        efficiency["teacher"].astype(str).to_numpy(),
        efficiency["dataset"].astype(str).to_numpy(),
    ]
    return frame.groupby(keys, sort=True).sum().rename_axis(["teacher", "dataset"])


@dataclass(frozen=True)
class _PairLabels:
    """Of one collapse's pairs: the pairs of each (teacher, dataset, student) cell in key
    order, each pair's cell (its position in that order) and its leak step (None without
    leaks)."""

    groups: dict[tuple[str, str, str], np.ndarray]
    cell_of_pair: np.ndarray
    leaks: np.ndarray | None


class _LabelsByPairs:
    """One :class:`_PairLabels` per pairs frame: the setups whose collapse keeps every pair
    share one frame (:func:`legival_core.metrics.transfer_prefixes._collapse_sorted`), so they
    label it once."""

    def __init__(self, leaks: pd.DataFrame | None) -> None:
        self._leaks = leaks
        self._seen: list[tuple[pd.DataFrame, _PairLabels]] = []

    def of(self, pairs: pd.DataFrame) -> _PairLabels:
        from legival_core.metrics.transfer import _pair_leaks

        for frame, labels in self._seen:
            if frame is pairs:
                return labels
        # grouped by the names' codes, not by Python strings of every pair; three columns,
        # so every key is a (teacher, dataset, student) triple
        groups = cast(
            dict[tuple[str, str, str], np.ndarray],
            text_groups([pairs[c] for c in ("teacher", "dataset", "student")]),
        )
        cell_of_pair = np.full(len(pairs), -1, dtype=np.int64)
        for cell, rows in enumerate(groups.values()):
            cell_of_pair[rows] = cell
        leaks = self._leaks
        labels = _PairLabels(
            groups,
            cell_of_pair,
            _pair_leaks(pairs, leaks) if leaks is not None and len(leaks) else None,
        )
        self._seen.append((pairs, labels))
        return labels


def _transfer_cells(
    rollouts: pd.DataFrame,
    profile: str,
    grid: str | None,
    leaks: pd.DataFrame | None,
    sorted_rows: _SortedRows | None = None,
    keep: np.ndarray | None = None,
    labels_by_pairs: _LabelsByPairs | None = None,
) -> Cells:
    """The :class:`TransferCell` of each (teacher, dataset, student) of ``rollouts[keep]``
    (``keep`` None: every row), from the per-pair inputs
    :func:`legival_core.metrics.transfer.teacher_metrics` aggregates. ``sorted_rows``: the
    rollouts sorted once for every setup (:func:`transfer_setups`); None collapses
    ``rollouts[keep]`` on its own. ``labels_by_pairs``: the pairs' labels shared across setups."""
    from legival_core.metrics.transfer import (
        _before_leak,
        _collapse,
        _fotu,
        _grid_of,
        _pair_inputs,
        _pair_metrics,
        as_grid,
        get_profile,
    )
    from legival_core.metrics.transfer_grid import N_BINS

    prof = get_profile(profile)
    if sorted_rows is not None:
        pre = _collapse_sorted(sorted_rows, prof, keep)
    else:
        pre = _collapse(rollouts if keep is None else rollouts[keep], prof)
    curve_grid = _grid_of(prof, as_grid(grid))
    fotu = _fotu(pre, curve_grid, prof)
    inputs = _pair_inputs(_pair_metrics(pre, fotu, prof), pre, prof.pooled_student_curves)
    labels = (labels_by_pairs or _LabelsByPairs(leaks)).of(pre.pairs)
    scalars = inputs["scalars"]
    present = ~np.isnan(scalars)
    hazards = inputs["hazards"].astype(np.int64)
    out: Cells = {}
    for key, rows in labels.groups.items():
        solved = hazards[rows]
        solved = solved[solved > 0]
        zeros = np.zeros(N_BINS)
        out[key] = TransferCell(
            sums=np.where(present[rows], scalars[rows], 0.0).sum(axis=0),
            counts=present[rows].sum(axis=0).astype(np.int64),
            hazards=np.bincount(solved - 1, minlength=N_BINS).astype(np.float64),
            bin_sums=inputs["sums"][rows].sum(axis=0) if "sums" in inputs else zeros,
            bin_counts=inputs["counts"][rows].sum(axis=0) if "counts" in inputs else zeros,
        )
    if labels.leaks is not None:
        # fotu_before_leak's numbers, from the collapse above (it would collapse again)
        values = _before_leak(pre, labels.leaks, curve_grid)
        named = labels.cell_of_pair >= 0
        cell_of_pair, values = labels.cell_of_pair[named], values[named]
        sums = np.bincount(cell_of_pair, weights=np.nan_to_num(values), minlength=len(out))
        counts = np.bincount(cell_of_pair, weights=~np.isnan(values), minlength=len(out))
        for key, total, n in zip(labels.groups, sums, counts, strict=True):
            out[key].before_sum, out[key].before_n = float(total), int(n)
    return out


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def transfer_setups(
    rollouts: pd.DataFrame,
    settings: Settings,
    leaks: pd.DataFrame | None,
    grid_gcd: int | None,
    every_divisor: bool = True,
    sorted_rows: _SortedRows | None = None,
) -> dict[str | int, Cells]:
    """The cells of every transfer setup a chunk sums: ``"default"``, ``"profile:<name>"`` for
    each other profile, and per coarser step (an int) when ``grid_gcd`` is not None (its own
    grid, or 2d and 3d for every divisor d of it with ``every_divisor``).

    ``sorted_rows`` (:func:`legival_core.metrics.transfer_prefixes._sort_rows` of
    ``rollouts``): each setup collapses that one check and sort (a profile, a row subset),
    which was most of the work of the setups that each re-derived it; None collapses each
    setup's rows on their own (the same cells bit for bit: tests/test_transfer_setups.py)."""
    from legival_core.metrics.transfer import PROFILES

    shared = _LabelsByPairs(leaks)
    out: dict[str | int, Cells] = {
        "default": _transfer_cells(
            rollouts, settings.profile, settings.grid, leaks, sorted_rows, None, shared
        )
    }
    for name in PROFILES:
        if name != settings.profile:
            out[f"profile:{name}"] = _transfer_cells(
                rollouts, name, None, leaks, sorted_rows, None, shared
            )
    if grid_gcd is not None:
        k = pd.to_numeric(rollouts["k"]).to_numpy(np.int64)
        m = pd.to_numeric(rollouts["m"]).to_numpy(np.int64)
        bases = _divisors(grid_gcd) if every_divisor else [grid_gcd]
        for step in sorted({d * f for d in bases for f in (2, 3)}):
            keep = (k == 0) | (k == m) | (k % step == 0)
            out[step] = _transfer_cells(
                rollouts, settings.profile, settings.grid, leaks, sorted_rows, keep, shared
            )
    return out


def robustness_partial(
    tables: StoreTables, settings: Settings, *, every_divisor: bool = True
) -> RobustnessPartial:
    """The partial of one chunk's tables (every row of each of its traces; ``references``
    unused: they are given to :func:`robustness_finalize`). ``every_divisor=False`` sums the
    coarser grids of the chunk's own interval only: right when the chunk is the whole store."""
    from legival_core.metrics.efficiency import REDUNDANCY_THRESHOLDS

    out = RobustnessPartial(settings)
    efficiency = tables.trace_efficiency
    try:
        out.n_traces = len(efficiency)
        ids = efficiency["trace_id"].astype(str)
        with_steps = set(ids[pd.to_numeric(efficiency["steps"]) > 0])
        out.with_steps = len(with_steps)
        out.efficiency["default"] = _efficiency_sums(efficiency)
        # threshold: each other τ's shares
        out.similarity_rows = len(tables.similarity)
        if len(tables.similarity):
            for tau in REDUNDANCY_THRESHOLDS.values():
                if not math.isclose(tau, settings.threshold, abs_tol=1e-12):
                    shares = trace_redundancy(tables.similarity, tau)
                    changed = _with_column(efficiency, "redundancy", shares)
                    out.efficiency[f"threshold:{tau:g}"] = _efficiency_sums(changed)
        # labeler: every labeler's shares (which is the default is decided on the whole)
        steps = efficiency.set_index(ids)["steps"]
        stored = pd.to_numeric(efficiency.set_index(ids)["backtracking"], errors="coerce")
        for labeler in _labelers(tables.judgments):
            shares = labeler_backtracking(tables.judgments, labeler, steps)
            both = stored.reindex(shares.index)
            same = bool(np.allclose(shares.to_numpy(), both.to_numpy(), atol=1e-12))
            out.labelers[labeler] = (len(shares), same)
            changed = efficiency.assign(backtracking=ids.map(shares).astype("float64").to_numpy())
            out.efficiency[f"labeler:{labeler}"] = _efficiency_sums(changed)
        # encoding: the other encoding's counts
        other = "o200k_base" if settings.encoding != "o200k_base" else "cl100k_base"
        counts = tables.trace_counts
        if not counts.empty and "encoding" in counts:
            counts = counts[counts["encoding"] == other]
        if not counts.empty and "tokens" in counts:
            out.other_counts = len(counts)
            tokens = counts["tokens"].astype("float64")
            if settings.profile == "release":
                tokens = tokens.where(~counts["blank"].astype(bool), 0.0)
            recount = pd.Series(tokens.to_numpy(), index=counts["trace_id"].astype(str))
            out.efficiency[f"encoding:{other}"] = _efficiency_sums(
                _with_column(efficiency, "tokens", recount)
            )
        # segmenter: the side tables' redundancy, and backtracking for each offline labeler
        side = tables.robustness_similarity
        side_steps = tables.robustness_steps
        out.side_steps_rows = len(side_steps)
        for seg in SEGMENTERS:
            if seg == settings.segmenter:
                continue
            rows = side[side["segmenter"].astype(str) == seg] if len(side) else side
            out.side_done[seg] = (
                len(set(rows["trace_id"].astype(str)) & with_steps) if len(rows) else 0
            )
            redundancy = (
                trace_redundancy(rows, settings.threshold)
                if len(rows)
                else pd.Series(dtype="float64")
            )
            changed = _with_column(efficiency, "redundancy", redundancy)
            out.efficiency[f"segmenter:{seg}"] = _efficiency_sums(changed)
            mine = (
                side_steps[side_steps["segmenter"].astype(str) == seg]
                if len(side_steps)
                else side_steps
            )
            out.side_rows[seg] = len(mine)
            for flag in SIDE_FLAGS.values():
                flags = mine[flag] if flag in mine else pd.Series(pd.NA, index=mine.index)
                out.side_flags[(seg, flag)] = bool(len(mine) and flags.notna().any())
                if len(mine):
                    cue = flags.astype("boolean").fillna(False).astype(float)
                    shares = cue.groupby(mine["trace_id"].astype(str).to_numpy()).mean()
                    flagged = _with_column(changed, "backtracking", shares)
                    out.efficiency[f"segmenter:{seg}:{flag}"] = _efficiency_sums(flagged)
        # transfer: the default setup, each other profile, the coarser grids
        rollouts = tables.rollouts
        out.rollout_rows = len(rollouts)
        if len(rollouts):
            leaks = _leaks(tables.trace_transfer)
            out.leak_rows = 0 if leaks is None else len(leaks)
            out.students = frozenset(str(s) for s in rollouts["student"].dropna().unique())
            # checked and sorted once for every setup (the default's collapse checked first)
            sorted_rows = _sort_rows(rollouts)
            out.grid_gcd = _grid_interval(rollouts)
            setups = transfer_setups(
                rollouts, settings, leaks, out.grid_gcd, every_divisor, sorted_rows
            )
            for key, cells in setups.items():
                if isinstance(key, int):
                    out.grid[key] = cells
                else:
                    out.transfer[key] = cells
    except ValueError as error:  # a table that does not fit: the whole report would raise too
        return RobustnessPartial(settings, error=str(error) or type(error).__name__)
    return out


def _add_frames(a: pd.DataFrame | None, b: pd.DataFrame | None) -> pd.DataFrame | None:
    if a is None:
        return b
    if b is None:
        return a
    return a.add(b, fill_value=0).sort_index()


def _grid_cells(partial: RobustnessPartial, step: int) -> Cells | None:
    """The chunk's sums for ``step``: its own when it has prefixes between 0 and m, else the
    default's (without such a prefix a coarser grid keeps every row)."""
    if partial.grid_gcd is None:
        return partial.transfer.get("default", {})
    return partial.grid.get(step)


def merge_robustness(a: RobustnessPartial, b: RobustnessPartial) -> RobustnessPartial:
    """Two chunks' partials (of disjoint traces, same settings) as one."""
    if a.settings != b.settings:
        raise ValueError(
            f"merge_robustness: partials of different settings {a.settings} and {b.settings}"
        )
    if a.error or b.error:
        return RobustnessPartial(a.settings, error=a.error or b.error)
    out = RobustnessPartial(a.settings)
    for key in sorted({*a.efficiency, *b.efficiency}):
        merged = _add_frames(a.efficiency.get(key), b.efficiency.get(key))
        if merged is not None:
            out.efficiency[key] = merged
    for key in sorted({*a.transfer, *b.transfer}):
        out.transfer[key] = _add_cells(a.transfer.get(key, {}), b.transfer.get(key, {}))
    gcds = [g for g in (a.grid_gcd, b.grid_gcd) if g is not None]
    out.grid_gcd = int(np.gcd.reduce(gcds)) if gcds else None
    if out.grid_gcd is not None:
        for step in sorted({d * f for d in _divisors(out.grid_gcd) for f in (2, 3)}):
            cells_a, cells_b = _grid_cells(a, step), _grid_cells(b, step)
            if cells_a is not None and cells_b is not None:
                out.grid[step] = _add_cells(cells_a, cells_b)
    for name in ("n_traces", "with_steps", "similarity_rows", "rollout_rows", "leak_rows"):
        setattr(out, name, getattr(a, name) + getattr(b, name))
    out.other_counts = a.other_counts + b.other_counts
    out.side_steps_rows = a.side_steps_rows + b.side_steps_rows
    out.students = a.students | b.students
    for labeler in sorted({*a.labelers, *b.labelers}):
        na, sa = a.labelers.get(labeler, (0, True))
        nb, sb = b.labelers.get(labeler, (0, True))
        out.labelers[labeler] = (na + nb, sa and sb)
    for seg in sorted({*a.side_done, *b.side_done}):
        out.side_done[seg] = a.side_done.get(seg, 0) + b.side_done.get(seg, 0)
        out.side_rows[seg] = a.side_rows.get(seg, 0) + b.side_rows.get(seg, 0)
    for pair in sorted({*a.side_flags, *b.side_flags}):
        out.side_flags[pair] = a.side_flags.get(pair, False) or b.side_flags.get(pair, False)
    return out


# ---------------------------------------------------------------------------------------------
# Finalize
# ---------------------------------------------------------------------------------------------


def _transfer_values(cells: Cells, profile: str, leaks: bool) -> pd.DataFrame:
    """Per (teacher, dataset): fotu, sotu, regression_rate as ``teacher_metrics`` (n_boot = 0)
    aggregates the pairs, and fotu_before_leak (with ``leaks``)."""
    from legival_core.metrics.transfer import get_profile
    from legival_core.stats.stats import nan_mean

    prof = get_profile(profile)
    blocks: dict[tuple[str, str], list[TransferCell]] = {}
    for (teacher, dataset, _student), cell in sorted(cells.items()):
        blocks.setdefault((teacher, dataset), []).append(cell)
    records = []
    for (teacher, dataset), group in blocks.items():
        sums = np.stack([c.sums for c in group])  # [s, 4]
        counts = np.stack([c.counts for c in group])
        with np.errstate(invalid="ignore", divide="ignore"):
            per_student = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        means = nan_mean(per_student[None], axis=1)[0]
        record: dict[str, object] = {"teacher": teacher, "dataset": dataset}
        record.update({name: float(means[i]) for i, name in enumerate(_SCALARS)})
        centres = None
        if prof.pooled_student_curves:
            num = np.stack([c.bin_sums for c in group])
            den = np.stack([c.bin_counts for c in group])
            with np.errstate(invalid="ignore", divide="ignore"):
                bins = np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)
            mean_curve = nan_mean(bins[None], axis=1)  # [1, 50]
            record["fotu"] = float(nan_mean(mean_curve, axis=1)[0])
            centres = (~np.isnan(mean_curve)).sum(axis=1)[:, None]
        histograms = np.stack([c.hazards for c in group])[None]  # [1, s, 50]
        record["sotu"] = float(nan_mean(prof.sotu_entropy(histograms, centres), axis=1)[0])
        if leaks:
            before = [c.before_sum / c.before_n for c in group if c.before_n]
            record["fotu_before_leak"] = float(np.mean(before)) if before else math.nan
        records.append(record)
    columns = ["teacher", "dataset", "fotu", "sotu", "regression_rate"]
    return pd.DataFrame.from_records(
        records, columns=[*columns, *(["fotu_before_leak"] if leaks else [])]
    )


def _dataset_values(
    sums: pd.DataFrame | None,
    cells: Cells | None,
    profile: str,
    leaks: bool,
    metrics: Sequence[str],
) -> pd.DataFrame:
    """:func:`legival_core.rankings.robustness_choices.dataset_values` from the sums."""
    wanted = [m for m in metrics if m in EFFICIENCY_COLUMNS or m in TRANSFER_COLUMNS]
    efficiency = [m for m in wanted if m in EFFICIENCY_COLUMNS]
    table = pd.DataFrame(columns=["teacher", "dataset"])
    if sums is not None:
        with np.errstate(invalid="ignore", divide="ignore"):
            values = {
                m: np.where(
                    sums[f"{m}_n"] > 0, sums[f"{m}_sum"] / np.maximum(sums[f"{m}_n"], 1), np.nan
                )
                for m in efficiency
            }
        table = pd.DataFrame(values, index=sums.index).reset_index()
    transfer = [m for m in wanted if m in TRANSFER_COLUMNS]
    if cells and transfer:
        per = _transfer_values(cells, profile, leaks)
        keep = [m for m in transfer if m in per]
        table = table.merge(per[["teacher", "dataset", *keep]], how="outer")
    return table.sort_values(["teacher", "dataset"]).reset_index(drop=True)


def _default_labeler(partial: RobustnessPartial) -> str | None:
    if partial.settings.labeler is not None:
        return partial.settings.labeler
    for labeler, (labelled, same) in sorted(partial.labelers.items()):
        if labelled and same:
            return labeler
    return None


def robustness_finalize(
    partial: RobustnessPartial,
    interval_tables: StoreTables,
    references: Sequence[str] = (),
    metrics: Sequence[str] = LEADERBOARD_METRICS,
    n_boot: int = 0,
    seed: int = 0,
    families: Sequence[str] | None = None,
    resamples: TeacherResamples | None = None,
) -> RobustnessReport:
    """The :class:`RobustnessReport` of the merged ``partial``: the same as
    :func:`legival_core.rankings.robustness_choices.robustness_report` of the whole tables.
    ``interval_tables`` holds ``trace_efficiency`` and ``trace_transfer`` (per trace) for the
    default's rank intervals (``n_boot > 0``), unless ``resamples`` are those intervals'
    resamples already drawn (:func:`~legival_core.rankings.robustness_choices.default_intervals`);
    ValueError when a chunk's tables did not fit."""
    from legival_core.metrics.efficiency import REDUNDANCY_THRESHOLDS
    from legival_core.metrics.transfer import PROFILES

    if partial.error:
        raise ValueError(partial.error)
    settings = partial.settings
    leaks = partial.leak_rows > 0
    default_cells = partial.transfer.get("default") if partial.rollout_rows else None
    default_sums = partial.efficiency.get("default")
    labeler = _default_labeler(partial)
    chosen = list(families) if families is not None else [
        "threshold", "grid", "profile", "student", "labeler", "encoding", "references", "segmenter",
    ]  # fmt: skip

    def values(
        sums: pd.DataFrame | None = None,
        cells: Cells | None = None,
        profile: str | None = None,
    ) -> Mapping[str, object]:
        return {
            "sums": default_sums if sums is None else sums,
            "cells": default_cells if cells is None else cells,
            "profile": settings.profile if profile is None else profile,
        }

    alternatives: list[tuple[str, Alternative, Mapping[str, object] | None]] = []

    def add(alternative: Alternative, inputs: Mapping[str, object] | None) -> None:
        alternatives.append((alternative.family, alternative, inputs))

    for family in chosen:
        if family == "threshold":
            for name, tau in REDUNDANCY_THRESHOLDS.items():
                if math.isclose(tau, settings.threshold, abs_tol=1e-12):
                    continue
                key, label = f"threshold:{tau:g}", f"redundancy τ = {tau:g} ({name})"
                if not partial.similarity_rows:
                    reason = "no similarity table"
                    add(Alternative(key, family, label, ("redundancy",), reason=reason), None)
                else:
                    add(
                        Alternative(key, family, label, ("redundancy",)),
                        values(partial.efficiency[key]),
                    )
        elif family == "grid":
            label = "coarser prefix grid"
            if not partial.rollout_rows:
                add(
                    Alternative("grid", family, label, TRANSFER_COLUMNS, reason="no rollouts"), None
                )
            elif partial.grid_gcd is None:
                reason = "the rollouts have no prefix between k = 0 and k = m"
                add(Alternative("grid", family, label, TRANSFER_COLUMNS, reason=reason), None)
            else:
                for factor in (2, 3):
                    step = partial.grid_gcd * factor
                    alt = Alternative(
                        f"grid:{step}", family, f"prefix grid every {step} steps", TRANSFER_COLUMNS
                    )
                    add(alt, values(cells=partial.grid[step]))
        elif family == "profile":
            for name in PROFILES:
                if name == settings.profile:
                    continue
                key, label = f"profile:{name}", f"transfer profile {name}"
                if not partial.rollout_rows:
                    add(
                        Alternative(key, family, label, TRANSFER_COLUMNS, reason="no rollouts"),
                        None,
                    )
                else:
                    add(
                        Alternative(key, family, label, TRANSFER_COLUMNS),
                        values(cells=partial.transfer[key], profile=name),
                    )
        elif family == "student":
            label = "each student alone"
            students = sorted(partial.students)
            if not partial.rollout_rows:
                add(
                    Alternative("student", family, label, TRANSFER_COLUMNS, reason="no rollouts"),
                    None,
                )
            elif len(students) < 2:
                reason = (
                    f"the store has one student ({', '.join(students)}): its ranking is the default"
                )
                add(Alternative("student", family, label, TRANSFER_COLUMNS, reason=reason), None)
            else:
                for student in students:
                    cells = {k: c for k, c in (default_cells or {}).items() if k[2] == student}
                    alt = Alternative(
                        f"student:{student}", family, f"student {student} alone", TRANSFER_COLUMNS
                    )
                    add(alt, values(cells=cells))
        elif family == "labeler":
            labelers = sorted(partial.labelers)
            others = [name for name in labelers if name != labeler]
            if not others:
                reason = (
                    f"the judgments hold one labeler ({', '.join(labelers) or 'none'}); an LLM "
                    "judge's labels come from the judge stage with a judge model"
                )
                add(
                    Alternative(
                        "labeler", family, "another labeler", ("backtracking",), reason=reason
                    ),
                    None,
                )
            for name in others:
                labelled = partial.labelers[name][0]
                n = partial.n_traces
                note = "" if labelled >= n else f"labels {labelled} of {n} traces"
                alt = Alternative(
                    f"labeler:{name}",
                    family,
                    f"backtracking labeler {name}",
                    ("backtracking",),
                    note=note,
                )
                add(alt, values(partial.efficiency[f"labeler:{name}"]))
        elif family == "encoding":
            other = "o200k_base" if settings.encoding != "o200k_base" else "cl100k_base"
            key, label = f"encoding:{other}", f"tokens counted with {other}"
            if not partial.other_counts:
                reason = (
                    f"no token counts in {other} stored (table trace_counts): run `python -m "
                    "precompute segment --store DIR`, which counts every trace in it"
                )
                add(Alternative(key, family, label, ("tokens",), reason=reason), None)
            else:
                add(Alternative(key, family, label, ("tokens",)), values(partial.efficiency[key]))
        elif family == "references":
            label = "reference teachers ranked too"
            if not references:
                add(
                    Alternative(
                        "references",
                        family,
                        label,
                        LEADERBOARD_METRICS,
                        reason="no reference teacher",
                    ),
                    None,
                )
            else:
                note = (
                    f"{', '.join(references)} joins the ranking; adding a teacher never reorders "
                    "the others, so only its own place is new"
                )
                alt = Alternative("references:in", family, label, LEADERBOARD_METRICS, note=note)
                add(alt, {**values(), "references": True})
        elif family == "segmenter":
            flag = SIDE_FLAGS.get(labeler or "")
            affected = ("redundancy", "backtracking") if flag else ("redundancy",)
            for other in SEGMENTERS:
                if other == settings.segmenter:
                    continue
                key, label = (
                    f"segmenter:{other}",
                    f"steps cut by {other} ({SEGMENTER_LABELS[other]})",
                )
                done, wanted = partial.side_done.get(other, 0), partial.with_steps
                if done < wanted or not wanted:
                    reason = (
                        f"{done} of {wanted} traces re-segmented with {other}; run: python -m "
                        f"precompute robustness --store DIR --segmenter {other} (it resumes "
                        "where it stopped)"
                    )
                    add(Alternative(key, family, label, affected, reason=reason), None)
                    continue
                sums = partial.efficiency[key]
                note = (
                    "" if flag else f"backtracking left as is: its labeler {labeler} is not offline"
                )
                if flag and partial.side_steps_rows:
                    if partial.side_rows.get(other, 0) and partial.side_flags.get((other, flag)):
                        sums = partial.efficiency[f"{key}:{flag}"]
                    else:
                        note = (
                            f"backtracking left as is: the side tables hold no {labeler} flags "
                            "(built before that labeler); run the robustness stage again on a "
                            "fresh copy"
                        )
                add(Alternative(key, family, label, affected, note=note), values(sums))
        else:
            raise ValueError(f"robustness_finalize: no partial form of the family {family!r}")

    def per_dataset(inputs: Mapping[str, object], wanted: Sequence[str]) -> pd.DataFrame:
        return _dataset_values(
            inputs["sums"],  # type: ignore[arg-type]
            inputs["cells"],  # type: ignore[arg-type]
            str(inputs["profile"]),
            leaks,
            wanted,
        )

    tables = replace(interval_tables, references=tuple(str(r) for r in references))
    return assemble_report(
        tables,
        replace(settings, labeler=labeler),
        per_dataset(values(), metrics),
        [
            (
                family,
                alt,
                None if inputs is None else _bound(per_dataset, inputs),
                bool(inputs and inputs.get("references")),
            )
            for family, alt, inputs in alternatives
        ],
        metrics,
        n_boot,
        seed,
        resamples,
    )


def _bound(function, inputs):  # type: ignore[no-untyped-def]
    return lambda wanted: function(inputs, wanted)
