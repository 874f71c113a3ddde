"""The results the metrics stage derives from the whole ``rollouts`` table, one chunk at a time.

At a million traces the rollouts are 37M rows; the stored ``transfer_curves`` table and the
transfer / attribution page results used to need all of them in memory at once. Each result
here has a pure per-chunk form, a ``merge`` and a ``finalize`` (or, for one row per trace, a
concatenation sorted as the whole function sorts), and the merged result equals the whole
function's (tables within 1e-12, the same columns, dtypes and row order):

* :func:`curve_rows` → :meth:`CurveRows.resampled` (or :func:`concat_curve_rows` of several
  chunks first) → :func:`merge_transfer_curves` → :func:`transfer_curve_finalize`
  equals :func:`legival_core.metrics.transfer_curves.transfer_curve_table`;
* :func:`coverage_partial` → :func:`merge_coverage` → :func:`coverage_finalize` equals
  :func:`legival_core.metrics.transfer_curves.observed_coverage`;
* :func:`first_measured_partial` / :func:`concentration_partial` → :func:`concat_per_trace`
  equal :func:`legival_core.metrics.transfer_curves.first_measured_positions` and
  :func:`legival_core.metrics.attribution.trace_concentration`;
* :func:`leak_partial` → :func:`merge_leaks` → :func:`leak_finalize` equals
  :func:`legival_core.metrics.leak_summary.selection_leak_summary`.

A chunk must hold every row of each of its traces (the metrics stage's chunks are hash buckets
of problem ids, :func:`precompute.stages.metrics.problem_buckets`): every per-trace quantity
then comes from one chunk, and the per-teacher counts of traces add up across chunks. Sums of
floats are added in another order than the whole function adds them, hence "within 1e-12".

The transfer curves' bands merge because they are Poisson bootstrap bands keyed by trace
(:func:`legival_core.stats.poisson_bootstrap.poisson_weights`): a chunk sums each replicate's
weighted values of its own traces, and the replicates' sums of all chunks add up to the
replicates of the whole table. That weighing is a step of its own (:func:`curve_rows`, then
:meth:`CurveRows.resampled`), so that a chunk run elsewhere sends back its pairs, not the
replicates' sums.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from legival_core.stats.poisson_bootstrap import add_counts, add_fields, check_alike
from legival_core.store.frames import text_codes, text_groups

if TYPE_CHECKING:
    from legival_core.metrics.transfer_curves import TransferView

__all__ = [
    "CoveragePartial",
    "CurveCell",
    "CurveRows",
    "ProfileRows",
    "TransferCurvePartial",
    "concat_curve_rows",
    "concat_per_trace",
    "concentration_partial",
    "coverage_finalize",
    "coverage_partial",
    "curve_rows",
    "first_measured_partial",
    "leak_finalize",
    "leak_partial",
    "merge_coverage",
    "merge_leaks",
    "merge_transfer_curves",
    "transfer_curve_finalize",
]

#: What transfer-curve partials must share to be merged.
_SETTINGS = ("profiles", "n_boot", "seed")

# ---------------------------------------------------------------------------------------------
# (a) transfer curves
# ---------------------------------------------------------------------------------------------


@dataclass
class CurveCell:
    """The sums one (profile, dataset, teacher, student) cell contributes to every view.

    ``num`` / ``den`` are ``[1 + n_boot, 51]``: row 0 with every trace weighing 1 (the point
    estimate), row ``1 + b`` with the traces' Poisson weights of replicate b; columns 0..49 the
    curve's bins (paper: sum of the pair curves' values and count of pairs with a value;
    release: the pooled bin sums and sample counts), column 50 the baseline (k = 0).
    ``hazards[j]`` counts the pairs with a FOTU whose hazard bin is j (0: never solved) and
    ``usable`` those pairs; ``regression_*`` / ``baseline_*`` are the sum and count of the
    non-missing values (regression over the pairs with a FOTU, baseline over every pair).
    """

    num: np.ndarray
    den: np.ndarray
    n_traces: int
    hazards: np.ndarray
    usable: int
    regression_sum: float
    regression_n: int
    baseline_sum: float
    baseline_n: int

    def __add__(self, other: CurveCell) -> CurveCell:
        return add_fields(self, other)


@dataclass
class TransferCurvePartial:
    """What one chunk of rollouts contributes to the ``transfer_curves`` table.

    ``cells`` by (profile, dataset, teacher, student); ``traces`` the number of distinct traces
    by (profile, dataset, teacher) (a trace counts once whatever its students); ``datasets`` /
    ``students`` every value the chunk's rollouts hold (the whole table's selections).
    """

    profiles: tuple[str, ...]
    n_boot: int
    seed: int
    datasets: frozenset[str] = frozenset()
    students: frozenset[str] = frozenset()
    cells: dict[tuple[str, str, str, str], CurveCell] = field(default_factory=dict)
    traces: dict[tuple[str, str, str], int] = field(default_factory=dict)


@dataclass
class ProfileRows:
    """One profile's (trace, student) pairs of a chunk, before the bands' weights: ``values`` /
    ``present`` one row per pair (the curve's 50 bins and the baseline), ``trace_of_pair`` its
    trace's position in ``trace_ids``, and per (dataset, teacher, student) cell the pairs'
    positions and the cell's unweighted sums (a :class:`CurveCell` whose ``num`` / ``den`` are
    still empty)."""

    trace_ids: np.ndarray
    trace_of_pair: np.ndarray
    values: np.ndarray
    present: np.ndarray
    pairs: dict[tuple[str, str, str], np.ndarray] = field(default_factory=dict)
    cells: dict[tuple[str, str, str], CurveCell] = field(default_factory=dict)


@dataclass
class CurveRows:
    """What one chunk of rollouts gives for the transfer curves before the bands' resampling:
    per profile its :class:`ProfileRows`, whose size grows with the chunk's pairs, where the
    :class:`TransferCurvePartial` is ``(1 + n_boot) x 51`` per cell whatever the chunk's size
    (317 MB at 40 teachers and 200 resamples). :meth:`resampled` weighs the pairs; a chunk on
    a Ray worker sends these rows back and the driver resamples them."""

    profiles: tuple[str, ...]
    n_boot: int
    seed: int
    datasets: frozenset[str] = frozenset()
    students: frozenset[str] = frozenset()
    by_profile: dict[str, ProfileRows] = field(default_factory=dict)
    traces: dict[tuple[str, str, str], int] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """The bytes of the pairs' arrays (what a batch of them holds)."""
        return sum(
            r.values.nbytes + r.present.nbytes + r.trace_of_pair.nbytes
            for r in self.by_profile.values()
        )

    def resampled(self) -> TransferCurvePartial:
        """The chunk's :class:`TransferCurvePartial`: each cell's pairs summed once with unit
        weights and once per replicate with their trace's Poisson weights."""
        from legival_core.stats.poisson_bootstrap import poisson_weights

        out = TransferCurvePartial(
            self.profiles, self.n_boot, self.seed, self.datasets, self.students,
            traces=dict(self.traces),
        )  # fmt: skip
        for name, rows in self.by_profile.items():
            weights = np.ones((len(rows.trace_ids), 1 + self.n_boot), dtype=np.float64)
            if self.n_boot:
                weights[:, 1:] = poisson_weights(rows.trace_ids.tolist(), self.n_boot, self.seed).T
            for key, pairs in rows.pairs.items():
                w = weights[rows.trace_of_pair[pairs]]
                out.cells[(name, *key)] = replace(
                    rows.cells[key], num=w.T @ rows.values[pairs], den=w.T @ rows.present[pairs]
                )
        return out


def _concat_profile_rows(parts: Sequence[ProfileRows]) -> ProfileRows:
    """One profile's pairs of several chunks (of different traces) one after the other."""
    trace_offsets = np.cumsum([0, *(len(p.trace_ids) for p in parts)])
    pair_offsets = np.cumsum([0, *(len(p.values) for p in parts)])
    joined = ProfileRows(
        trace_ids=np.concatenate([p.trace_ids for p in parts]),
        trace_of_pair=np.concatenate(
            [p.trace_of_pair + np.int32(o) for p, o in zip(parts, trace_offsets, strict=False)]
        ),
        values=np.concatenate([p.values for p in parts]),
        present=np.concatenate([p.present for p in parts]),
    )
    for key in sorted({key for p in parts for key in p.pairs}):
        mine = [(p, o) for p, o in zip(parts, pair_offsets, strict=False) if key in p.pairs]
        joined.pairs[key] = np.concatenate([p.pairs[key] + o for p, o in mine])
        cell = mine[0][0].cells[key]
        for p, _ in mine[1:]:
            cell = cell + p.cells[key]
        joined.cells[key] = cell
    return joined


def concat_curve_rows(parts: Sequence[CurveRows]) -> CurveRows:
    """The :class:`CurveRows` of several chunks (of different traces) as one: resampled once,
    the same sums as each part resampled and merged (:func:`merge_transfer_curves`), to float
    rounding, with the ``(1 + n_boot) x 51`` arrays of each cell made once, not once a part."""
    if not parts:
        raise ValueError("concat_curve_rows: no rows to join")
    check_alike(parts, _SETTINGS, "concat_curve_rows: rows of different settings")
    first = parts[0]
    joined = CurveRows(
        first.profiles, first.n_boot, first.seed,
        frozenset().union(*(p.datasets for p in parts)),
        frozenset().union(*(p.students for p in parts)),
    )  # fmt: skip
    for name in first.profiles:
        mine = [p.by_profile[name] for p in parts if name in p.by_profile]
        if mine:
            joined.by_profile[name] = _concat_profile_rows(mine)
    joined.traces = add_counts(p.traces for p in parts)
    return joined


def curve_rows(
    rollouts: pd.DataFrame,
    profiles: Sequence[str] | None = None,
    *,
    n_boot: int = 200,
    seed: int = 0,
) -> CurveRows:
    """One chunk's :class:`CurveRows` (every row of each of its traces).

    Per profile the chunk is collapsed to (trace, student) pairs as
    :func:`legival_core.metrics.transfer.selection_curves` does; each pair's curve (or pooled
    bin sums) and baseline are kept per pair, and the cells' unweighted counts summed.
    """
    from legival_core.metrics.transfer import PROFILES, _check_boot
    from legival_core.metrics.transfer_prefixes import _collapse
    from legival_core.metrics.transfer_profiles import _grid_of, get_profile
    from legival_core.metrics.transfer_traces import (
        _bin_sums,
        _curves,
        _fotu,
        _pair_metrics,
        _trace_frame,
    )

    _check_boot(n_boot, seed, 0.05)
    chosen = tuple(PROFILES) if profiles is None else tuple(profiles)
    out = CurveRows(chosen, int(n_boot), int(seed))
    if rollouts.empty:
        return out
    out.datasets = frozenset(str(v) for v in pd.unique(rollouts["dataset"]))
    out.students = frozenset(str(v) for v in pd.unique(rollouts["student"]))
    empty = np.zeros((0, 0))
    for name in chosen:
        prof = get_profile(name)
        pre = _collapse(rollouts, prof)
        if pre.n_pairs == 0:
            continue
        grid = _grid_of(prof, None)
        pm = _pair_metrics(pre, _fotu(pre, grid, prof), prof)
        per_trace = _trace_frame(pre, pm)
        baseline = pm.baseline.astype(np.float64)
        if prof.pooled_student_curves:
            sums, counts = _bin_sums(pre)
            values = np.column_stack([sums, np.nan_to_num(baseline, nan=0.0)])
            present = np.column_stack([counts, ~np.isnan(baseline)]).astype(np.float64)
        else:
            curves = np.column_stack([_curves(pre, grid), baseline])
            present = (~np.isnan(curves)).astype(np.float64)
            values = np.where(np.isnan(curves), 0.0, curves)
        # codes into the sorted distinct ids and names, not a Python string per pair
        trace_of_pair, unique_ids = text_codes(pre.pairs["trace_id"])
        rows = ProfileRows(unique_ids, trace_of_pair.astype(np.int32), values, present)
        fotu = per_trace["fotu"].to_numpy(dtype=np.float64)
        hazard = pd.array(per_trace["hazard_bin"], dtype="Int64").to_numpy(
            dtype=np.int64, na_value=0
        )
        regression = per_trace["regression_rate"].to_numpy(dtype=np.float64)
        names = [pre.pairs[c] for c in ("dataset", "teacher", "student")]
        for (dataset, teacher, student), pairs in text_groups(names).items():
            usable = pairs[~np.isnan(fotu[pairs])]
            reg = regression[usable]
            base = baseline[pairs]
            key = (dataset, teacher, student)
            rows.pairs[key] = pairs
            rows.cells[key] = CurveCell(
                num=empty,
                den=empty,
                n_traces=len(np.unique(trace_of_pair[pairs])),
                hazards=np.bincount(hazard[usable], minlength=51)[:51].astype(np.int64),
                usable=len(usable),
                regression_sum=float(np.nansum(reg)),
                regression_n=int((~np.isnan(reg)).sum()),
                baseline_sum=float(np.nansum(base)),
                baseline_n=int((~np.isnan(base)).sum()),
            )
        out.by_profile[name] = rows
        for (dataset, teacher), pairs in text_groups(names[:2]).items():
            out.traces[(name, dataset, teacher)] = len(np.unique(trace_of_pair[pairs]))
    return out


def merge_transfer_curves(a: TransferCurvePartial, b: TransferCurvePartial) -> TransferCurvePartial:
    """Two chunks' partials as one (their traces must be disjoint); same settings required."""
    check_alike([a, b], _SETTINGS, "merge_transfer_curves: partials of different settings")
    cells = dict(a.cells)
    for key, cell in b.cells.items():
        cells[key] = cells[key] + cell if key in cells else cell
    return TransferCurvePartial(
        a.profiles, a.n_boot, a.seed, a.datasets | b.datasets, a.students | b.students,
        cells, add_counts([a.traces, b.traces]),
    )  # fmt: skip


def transfer_curve_finalize(
    partial: TransferCurvePartial, *, alpha: float = 0.05, stamp: str = ""
) -> pd.DataFrame:
    """The ``transfer_curves`` rows of the merged partials: equal (within 1e-12) to
    :func:`legival_core.metrics.transfer_curves.transfer_curve_table` of all the chunks'
    rollouts with the same profiles, ``n_boot``, ``seed``, ``alpha`` and ``stamp``."""
    from legival_core.metrics.transfer import _check_boot
    from legival_core.metrics.transfer_curves import _check_selectable, table_of_views

    _check_boot(partial.n_boot, partial.seed, alpha)
    datasets, students = sorted(partial.datasets), sorted(partial.students)
    _check_selectable(datasets, "dataset")
    _check_selectable(students, "student")
    views = (
        (profile, dataset, student, _selection_view(partial, profile, dataset, student, alpha))
        for profile in partial.profiles
        for dataset in [None, *datasets]
        for student in [None, *students]
    )
    return table_of_views(views, n_boot=partial.n_boot, seed=partial.seed, alpha=alpha, stamp=stamp)


def _selection_view(
    partial: TransferCurvePartial,
    profile: str,
    dataset: str | None,
    student: str | None,
    alpha: float,
) -> TransferView | None:
    """The :class:`legival_core.metrics.transfer_curves.TransferView` of one selection from the
    merged cells (None when it selects no pair), as
    :func:`legival_core.metrics.transfer_curves.selection_view` builds it from the rollouts."""
    from legival_core.metrics.transfer import curve_frame
    from legival_core.metrics.transfer_curves import SUMMARY_COLUMNS
    from legival_core.metrics.transfer_curves import TransferView as View
    from legival_core.metrics.transfer_grid import N_BINS
    from legival_core.metrics.transfer_profiles import get_profile
    from legival_core.stats.stats import nan_mean

    prof = get_profile(profile)
    chosen = {
        key: cell
        for key, cell in partial.cells.items()
        if key[0] == profile
        and (dataset is None or key[1] == dataset)
        and (student is None or key[3] == student)
    }
    if not chosen:
        return None
    curve_frames, hazard_frames, summary_rows = [], [], []
    for teacher in sorted({key[2] for key in chosen}):
        by_student: dict[str, CurveCell] = {}
        for key, cell in chosen.items():
            if key[2] == teacher:
                by_student[key[3]] = by_student[key[3]] + cell if key[3] in by_student else cell
        if student is None:
            n_traces = sum(
                n
                for (p, d, t), n in partial.traces.items()
                if p == profile and t == teacher and (dataset is None or d == dataset)
            )
        else:
            n_traces = by_student[student].n_traces
        cells = [by_student[s] for s in sorted(by_student)]
        num = np.stack([c.num for c in cells], axis=1)  # [1 + B, s, 51]
        den = np.stack([c.den for c in cells], axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)
        teacher_curve = nan_mean(means, axis=1)  # [1 + B, 51]
        point = teacher_curve[0]
        replicates = teacher_curve[1:] if partial.n_boot else None
        frame = curve_frame(point, replicates, alpha, n_traces)
        curve_frames.append(frame.assign(teacher=teacher)[["teacher", *frame.columns]])
        usable = [c for c in cells if c.usable]
        if usable:
            counts = sum((c.hazards for c in usable), np.zeros(N_BINS + 1, dtype=np.int64))
            shares = counts / max(1, sum(c.usable for c in usable))
            hazard_frames.append(
                pd.DataFrame({"teacher": teacher, "bin": np.arange(N_BINS + 1), "share": shares})
            )
        centres = int((~np.isnan(point[:N_BINS])).sum())
        per_student = np.array(
            [
                float(prof.sotu_entropy(c.hazards[None, 1:].astype(np.float64),
                                        np.array([centres]))[0])
                for c in usable
            ]
        )  # fmt: skip
        solved = per_student[~np.isnan(per_student)]
        regression = pd.Series(
            [c.regression_sum / c.regression_n if c.regression_n else math.nan for c in usable],
            dtype=np.float64,
        )
        summary_rows.append(
            {
                "teacher": teacher,
                "n_traces": n_traces,
                "n_students": len(usable),
                "fotu": float(np.nanmean(point[:N_BINS])),
                "sotu": float(solved.mean()) if len(solved) else math.nan,
                "never_solved": float(np.mean([c.hazards[0] / c.usable for c in usable]))
                if usable
                else math.nan,
                "regression_rate": float(regression.mean()) if usable else math.nan,
                "baseline": float(point[N_BINS]),
            }
        )
    curves = pd.concat(curve_frames, ignore_index=True)
    curves = curves.assign(teacher=curves["teacher"].astype(str))
    summary = pd.DataFrame(summary_rows)
    summary["lift"] = summary["fotu"] - summary["baseline"]
    hazards = (
        pd.concat(hazard_frames, ignore_index=True)
        if hazard_frames
        else pd.DataFrame(columns=["teacher", "bin", "share"])
    )
    hazards = hazards.assign(teacher=hazards["teacher"].astype(str))
    per_student_base: dict[str, list[float]] = {}
    for key, cell in chosen.items():
        sums = per_student_base.setdefault(key[3], [0.0, 0.0])
        sums[0] += cell.baseline_sum
        sums[1] += cell.baseline_n
    base = pd.Series([s / n if n else math.nan for s, n in per_student_base.values()], dtype=float)
    return View(
        curves=curves,
        hazards=hazards,
        baseline=float(base.mean()),
        summary=summary[list(SUMMARY_COLUMNS)],
    )


# ---------------------------------------------------------------------------------------------
# (b) observed coverage
# ---------------------------------------------------------------------------------------------


@dataclass
class CoveragePartial:
    """Traces measured per (teacher, bin) (``counts``) and traces per teacher (``totals``)."""

    profile: str
    counts: pd.Series
    totals: pd.Series


def coverage_partial(rollouts: pd.DataFrame, profile: str = "paper") -> CoveragePartial:
    """One chunk's :class:`CoveragePartial` (see
    :func:`legival_core.metrics.transfer_curves.observed_coverage`)."""
    from legival_core.metrics.transfer_curves import _coverage_counts

    counts, totals = _coverage_counts(rollouts, profile)
    return CoveragePartial(profile, counts, totals)


def merge_coverage(a: CoveragePartial, b: CoveragePartial) -> CoveragePartial:
    """Two chunks' coverage as one: the counts add (a trace lies in one chunk)."""
    if a.profile != b.profile:
        raise ValueError(f"merge_coverage: profiles {a.profile!r} and {b.profile!r} differ")
    if a.totals.empty:  # a chunk without a measured prefix (or the start of a merge)
        return b
    if b.totals.empty:
        return a
    counts = a.counts.add(b.counts, fill_value=0).astype("int64")
    totals = a.totals.add(b.totals, fill_value=0).astype("int64")
    return CoveragePartial(a.profile, counts, totals)


def coverage_finalize(partial: CoveragePartial) -> pd.DataFrame:
    """:func:`legival_core.metrics.transfer_curves.observed_coverage` from merged counts."""
    from legival_core.metrics.transfer_curves import _coverage_frame

    return _coverage_frame(partial.counts, partial.totals)


# ---------------------------------------------------------------------------------------------
# (c), (d) one row per trace
# ---------------------------------------------------------------------------------------------


def first_measured_partial(rollouts: pd.DataFrame) -> pd.DataFrame:
    """One chunk's rows of :func:`legival_core.metrics.transfer_curves.first_measured_positions`
    (merged by :func:`concat_per_trace`)."""
    from legival_core.metrics.transfer_curves import first_measured_positions

    return first_measured_positions(rollouts)


def concentration_partial(rollouts: pd.DataFrame) -> pd.DataFrame:
    """One chunk's rows of :func:`legival_core.metrics.attribution.trace_concentration`
    (merged by :func:`concat_per_trace`)."""
    from legival_core.metrics.attribution import trace_concentration

    return trace_concentration(rollouts)


def concat_per_trace(parts: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Per-trace rows of several chunks as the whole function returns them: one table sorted
    by ``trace_id`` (as text, the order both functions give). Chunks without a row are left
    out of the concatenation so they do not change the dtypes; all empty: the first one."""
    frames = list(parts)
    if not frames:
        raise ValueError("concat_per_trace: no chunk given")
    kept = [f for f in frames if len(f)]
    if not kept:
        return frames[0].reset_index(drop=True)
    out = pd.concat(kept, ignore_index=True)
    order = np.argsort(out["trace_id"].astype(str).to_numpy(), kind="stable")
    return out.iloc[order].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# (e) the leak summary
# ---------------------------------------------------------------------------------------------

_LEAK_SUMS = (
    "pairs", "leaks", "first_solves", "at_or_after_leak", "fotu_sum", "fotu_n",
    "before_sum", "before_n",
)  # fmt: skip


def leak_partial(trace_transfer: pd.DataFrame, rollouts: pd.DataFrame) -> pd.DataFrame:
    """One chunk's sums behind :func:`legival_core.metrics.leak_summary.selection_leak_summary`:
    ``trace_transfer`` is the chunk's rows of it (the pairs of the chunk's traces), ``rollouts``
    the chunk's rollouts. One row per teacher (index), columns ``_LEAK_SUMS``."""
    from legival_core.metrics.leak_summary import leak_pairs

    if trace_transfer.empty:
        return pd.DataFrame(columns=list(_LEAK_SUMS))
    wanted = set(trace_transfer["trace_id"])
    pairs = leak_pairs(trace_transfer, rollouts[rollouts["trace_id"].isin(wanted)])
    fotu = pairs["fotu"].astype("float64")
    before = pairs["fotu_before_leak"].astype("float64")
    sums = pairs.assign(
        pairs=1,
        leaks=pairs["has_leak"],
        first_solves=pairs["solved"],
        at_or_after_leak=pairs["after"],
        fotu_sum=fotu.fillna(0.0),
        fotu_n=fotu.notna(),
        before_sum=before.fillna(0.0),
        before_n=before.notna(),
    )
    out = sums.groupby("teacher", sort=True, observed=True)[list(_LEAK_SUMS)].sum()
    out.index = out.index.astype(str)
    return out  # the whole function's dtypes (``after`` is nullable when ``leak_k`` is)


def merge_leaks(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Two chunks' leak sums as one (per teacher, the sums add)."""
    if a.empty:
        return b
    if b.empty:
        return a
    return pd.concat([a, b]).groupby(level=0, sort=True).sum()


def leak_finalize(sums: pd.DataFrame) -> pd.DataFrame:
    """:func:`legival_core.metrics.leak_summary.selection_leak_summary` from merged sums."""
    from legival_core.metrics.leak_summary import LEAK_COLUMNS

    if sums.empty:
        return pd.DataFrame(columns=list(LEAK_COLUMNS))
    sums = sums.sort_index()
    out = pd.DataFrame(
        {
            "teacher": sums.index.to_numpy(),
            "pairs": sums["pairs"].to_numpy(),
            "leaks": sums["leaks"].to_numpy(),
            "first_solves": sums["first_solves"].to_numpy(),
            "at_or_after_leak": sums["at_or_after_leak"].array,
        }
    )
    solves = out["first_solves"]
    out["share_at_or_after_leak"] = out["at_or_after_leak"] / solves.where(solves > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["fotu"] = np.where(sums["fotu_n"] > 0, sums["fotu_sum"] / sums["fotu_n"], np.nan)
        out["fotu_before_leak"] = np.where(
            sums["before_n"] > 0, sums["before_sum"] / sums["before_n"], np.nan
        )
    for column in ("pairs", "leaks", "first_solves", "at_or_after_leak"):
        out[column] = out[column].astype(int)
    return out[list(LEAK_COLUMNS)]
