"""Transfer utility: how much a correct teacher trace helps a weak student (docs/metrics/fotu.md).

A student continues the first ``k`` of the ``m`` steps of a correct teacher trace; ``k = 0`` is
the student alone (its baseline). From those rollouts this module computes, per (trace, student):

* the **curve** ``f_p`` on 50 bins of width 0.02 over the position ``x = k/m``;
* **FOTU** (first-order transfer utility) = mean of ``f_p`` over the 50 bins (area under it);
* the **hazard** bin: the bin of the smallest ``k >= 1`` whose rollout is correct;
* the **regression** count and rate: drops of correctness from one prefix to the next;
* the **baseline** (correctness at ``k = 0``) and the **lift** = FOTU - baseline;

and per teacher (per dataset): the same averaged over traces then over students, **SOTU**
(second-order transfer utility: normalised entropy of the hazard histogram), the share of traces
never solved, and seeded bootstrap confidence intervals over traces.

Everything is vectorised with numpy: the rollouts are collapsed to one row per prefix, and all
per-trace quantities are bincounts and cumulative maxima over a ``[traces, 50]`` array.

Two profiles (:data:`PROFILES`) say how bins, prefixes and averages are formed: ``"paper"``
follows the paper (default); ``"release"`` follows the authors' released code (docs/profiles.md).

The pieces live in their own modules and are all importable from here:
:mod:`legival_core.metrics.transfer_grid` (bins, grids, curve filling, entropy),
:mod:`legival_core.metrics.transfer_profiles` (profiles and :func:`sotu`),
:mod:`legival_core.metrics.transfer_prefixes` (checking rollouts, collapsing them to prefixes)
and :mod:`legival_core.metrics.transfer_traces` (per-trace metrics). This module holds the
teacher-level aggregation with its bootstrap, the curves and :func:`fotu_before_leak`.

Reference: Legi-Val, "Measuring Reasoning Trace Legibility: Can Those Who Understand Teach?"
(arXiv 2603.20508), section on transfer utility.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from legival_core.metrics.registry import metrics_in
from legival_core.metrics.transfer_grid import (
    GRIDS,
    INTERPOLATE_BLOCK,
    N_BINS,
    RELEASE_SOTU_EPS,
    CurveGrid,
    Grid,
    bin_centres,
    interpolate_curve,
    normalised_entropy,
    paper_bin,
    release_bin,
)
from legival_core.metrics.transfer_prefixes import (
    FULLY_CORRECT,
    ROLLOUT_CATEGORIES,
    ROLLOUT_COLUMNS,
    TRACE_COLUMNS,
    _adjacent_differs,
    _collapse,
    _dense_rank,
    _group_keys,
    _Prefixes,
)
from legival_core.metrics.transfer_profiles import (
    PROFILES,
    Regression,
    TraceFotu,
    TransferProfile,
    _grid_of,
    as_grid,
    get_profile,
    register_profile,
    sotu,
)
from legival_core.metrics.transfer_traces import (
    SOLVED_THRESHOLD,
    _bin_sums,
    _curves,
    _fotu,
    _observed_bins,
    _pair_metrics,
    _PairMetrics,
    _trace_frame,
    trace_curves,
    trace_metrics,
)
from legival_core.stats.stats import (
    bias_corrected_interval,
    nan_mean,
    percentile_interval,
    resample_counts,
    seeded_stream,
)
from legival_core.store.schema import SchemaError, require_columns

__all__ = [
    "CURVE_COLUMNS",
    "FULLY_CORRECT",
    "GRIDS",
    "INTERPOLATE_BLOCK",
    "N_BINS",
    "PROFILES",
    "RELEASE_SOTU_EPS",
    "ROLLOUT_CATEGORIES",
    "ROLLOUT_COLUMNS",
    "SOLVED_THRESHOLD",
    "TEACHER_QUANTITIES",
    "TRACE_COLUMNS",
    "CurveGrid",
    "Grid",
    "GroupBy",
    "Regression",
    "TraceFotu",
    "TransferProfile",
    "as_grid",
    "bin_centres",
    "curve",
    "fotu_before_leak",
    "get_profile",
    "interpolate_curve",
    "normalised_entropy",
    "paper_bin",
    "register_profile",
    "release_bin",
    "selection_curves",
    "sotu",
    "teacher_metrics",
    "trace_curves",
    "trace_metrics",
    "trace_metrics_with_leaks",
]

#: Teacher-level quantities reported by :func:`teacher_metrics`, each with ``_lo`` / ``_hi``.
TEACHER_QUANTITIES: tuple[str, ...] = metrics_in("teacher_quantities")

GroupBy = str | Sequence[str]

# --------------------------------------------------------------------------------------------
# Teacher level: group blocks, bootstrap weights, aggregation
# --------------------------------------------------------------------------------------------


def _as_columns(by: GroupBy) -> list[str]:
    columns = [by] if isinstance(by, str) else list(by)
    unknown = [c for c in columns if c not in TRACE_COLUMNS]
    if not columns or unknown:
        raise ValueError(
            f"cannot group transfer metrics by {unknown or columns}; use {TRACE_COLUMNS}"
        )
    return columns


@dataclass(frozen=True)
class _Block:
    """The (trace, student) pairs of one group laid out as a dense [traces, students] grid."""

    key: tuple[Hashable, ...]
    rows: np.ndarray  # rows of the pairs table
    trace: np.ndarray  # per row: local trace index
    student: np.ndarray  # per row: local student index
    n_traces: int
    n_students: int

    def dense(self, values: np.ndarray, fill: float = np.nan) -> np.ndarray:
        """``values[rows]`` (shape ``[rows, ...]``) placed on ``[n_traces, n_students, ...]``."""
        values = np.asarray(values, dtype=np.float64)[self.rows]
        out = np.full((self.n_traces, self.n_students, *values.shape[1:]), fill)
        out[self.trace, self.student] = values
        return out


def _appearance_codes(column: pd.Series) -> np.ndarray:
    """``pd.factorize(column)[0]``: codes in order of first appearance."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        # Rank the category codes by where each first appears (no hashing of strings).
        codes = column.cat.codes.to_numpy().astype(np.int64)
        present, first = np.unique(codes, return_index=True)
        rank = np.empty(int(codes.max()) + 1 if len(codes) else 0, dtype=np.int64)
        rank[present[np.argsort(first)]] = np.arange(len(present))
        return rank[codes]
    return pd.factorize(column)[0]


def _group_codes(pairs: pd.DataFrame, by: list[str]) -> np.ndarray:
    """``pairs.groupby(by, sort=True, observed=True).ngroup()`` from per-column sorted codes."""
    group = np.zeros(len(pairs), dtype=np.int64)
    span = 1
    for column in by:
        codes, uniques = pd.factorize(pairs[column], sort=True)
        span *= max(len(uniques), 1)
        if span >= 2**62:  # the combined code would overflow: let pandas do it
            ngroup = pairs.groupby(by, sort=True, observed=True, dropna=False).ngroup()
            return ngroup.to_numpy().astype(np.int64)
        group = group * max(len(uniques), 1) + codes
    return _group_keys(group)[2]


def _blocks(pairs: pd.DataFrame, by: list[str]) -> Iterator[_Block]:
    group = _group_codes(pairs, by)
    # Pairs are sorted by trace, so each trace is one run: its run number is its code.
    trace_code = _dense_rank(np.r_[True, _adjacent_differs(pairs["trace_id"])])
    student_code = _appearance_codes(pairs["student"])
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    for rows in np.split(order, bounds):
        if len(rows) == 0:
            continue
        traces, trace = np.unique(trace_code[rows], return_inverse=True)
        students, student = np.unique(student_code[rows], return_inverse=True)
        key = tuple(pairs[c].iloc[rows[0]] for c in by)
        yield _Block(key, rows, trace, student, len(traces), len(students))


_REPLICATES_PER_CHUNK = 64


def _bootstrap_weights(n: int, n_boot: int, seed: int, key: tuple[Hashable, ...]) -> np.ndarray:
    """``[n, n_boot]`` resampling counts: column b says how often each of the n traces was
    drawn in replicate b (n draws with replacement).

    Traces are the rows so that gathering or summing traces touches contiguous memory. The
    stream is seeded by ``seed`` and the group key, so a group's interval does not change when
    other groups are added or removed.
    """
    rng = seeded_stream(seed, repr(key))
    # float32 is exact for these small counts and halves the memory the products stream
    # through; the point estimates use float64 unit weights.
    weights = np.empty((n, n_boot), dtype=np.float32)
    # A few replicates at a time keep the draws and the counting in cache.
    for start in range(0, n_boot, _REPLICATES_PER_CHUNK):
        width = min(_REPLICATES_PER_CHUNK, n_boot - start)
        weights[:, start : start + width] = resample_counts(n, width, rng).T
    return weights


def _band_weights(block: _Block, pairs: pd.DataFrame, n_boot: int, seed: int) -> np.ndarray:
    """``[n, n_boot]`` Poisson(1) weights of the block's traces for the curve bands
    (:func:`legival_core.stats.poisson_bootstrap.poisson_weights` keyed by ``trace_id``).

    A trace's weights depend only on ``seed``, its id and the replicate, not on which other
    traces are in the block: so a band can be summed one chunk of traces at a time
    (:mod:`legival_core.metrics.rollout_partials`) and equals the band computed at once.
    float64, so the weighted sums are exact and do not depend on the order they are added in.
    """
    from legival_core.stats.poisson_bootstrap import poisson_weights

    ids = np.empty(block.n_traces, dtype=object)
    ids[block.trace] = pairs["trace_id"].to_numpy(dtype=object)[block.rows]
    return poisson_weights([str(i) for i in ids], n_boot, seed).T.astype(np.float64)


def _unit_weights(n: int) -> np.ndarray:
    """The point estimate as a single "replicate" in which every trace counts once."""
    return np.ones((n, 1))


def _weighted_student_means(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per replicate and student: weighted mean over traces of ``values [t, s, ...]`` (NaN =
    absent), with ``weights [t, B]``. Returns ``[B, s, ...]``."""
    n_t = values.shape[0]
    flat = values.reshape(n_t, -1)
    present = ~np.isnan(flat)
    # Numerators and denominators in one product: one pass over the weights.
    both = np.concatenate([np.where(present, flat, 0.0), present], axis=1).astype(weights.dtype)
    num, den = np.split(weights.T @ both, 2, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)
    return out.reshape(weights.shape[1], *values.shape[1:])


# Per-pair scalar quantities averaged over traces then students, in this order.
_MEAN_QUANTITIES: tuple[str, ...] = metrics_in("teacher_means")


def _pair_inputs(pm: _PairMetrics, pre: _Prefixes, pooled: bool) -> dict[str, np.ndarray]:
    """Per-pair arrays that teacher-level aggregation needs; NaN / 0 mean absent."""
    never_solved = np.where(pm.n_binned > 0, (pm.hazard == 0).astype(np.float64), np.nan)
    inputs = {
        "scalars": np.stack([pm.fotu, pm.regression_rate, never_solved, pm.baseline], axis=1),
        "hazards": pm.hazard.astype(np.float64),
    }
    if pooled:
        inputs["sums"], inputs["counts"] = _bin_sums(pre)
    return inputs


# Absent pairs are NaN for means, 0 for histograms and pooled sums.
_ABSENT_FILL = {"scalars": np.nan, "hazards": 0.0, "sums": 0.0, "counts": 0.0}


def _block_inputs(block: _Block, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: block.dense(values, _ABSENT_FILL[name]) for name, values in inputs.items()}


def _weighted_histograms(weights: np.ndarray, hazards: np.ndarray) -> np.ndarray:
    """``[B, s, 50]`` hazard histograms: for replicate b, student s and bin j, the total weight
    of the traces whose hazard is j (``hazards [t, s]``: 1..50, 0 = never solved or absent;
    ``weights [t, B]``)."""
    from scipy import sparse

    n_t, n_students = hazards.shape
    codes = hazards.astype(np.int64)
    trace, student = np.nonzero(codes > 0)
    cell = student * N_BINS + codes[trace, student] - 1
    if weights.shape[1] == 1:  # the point estimate: a plain weighted count
        histograms = np.bincount(cell, weights=weights[trace, 0], minlength=n_students * N_BINS)
        return histograms.reshape(1, n_students, N_BINS)
    # A sparse [s * 50, t] indicator times the weights: one pass over the solved traces. The
    # counts are whole numbers, exact in float32 whatever the order of the sums.
    order = np.argsort(cell, kind="stable")
    indptr = np.zeros(n_students * N_BINS + 1, dtype=np.int64)
    np.cumsum(np.bincount(cell, minlength=n_students * N_BINS), out=indptr[1:])
    indicator = sparse.csr_matrix(
        (np.ones(len(trace), dtype=weights.dtype), trace[order], indptr),
        shape=(n_students * N_BINS, n_t),
    )
    histograms = np.asarray(indicator @ weights)
    return histograms.reshape(n_students, N_BINS, -1).transpose(2, 0, 1)


def _pooled_curve(weights: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Release: each student's bin means pooled over traces, plain average over students."""
    from scipy import sparse

    n_t = sums.shape[0]
    # Most (trace, bin) cells are empty: sparse products touch only the observed ones.
    num = np.asarray(sparse.csr_matrix(sums.reshape(n_t, -1).T) @ weights).T
    den = np.asarray(sparse.csr_matrix(counts.reshape(n_t, -1).T) @ weights).T
    with np.errstate(invalid="ignore", divide="ignore"):
        student_bins = np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)
    student_bins = student_bins.reshape(weights.shape[1], sums.shape[1], N_BINS)
    return nan_mean(student_bins, axis=1)  # [B, 50]


def _aggregate(
    weights: np.ndarray, inputs: dict[str, np.ndarray], profile: TransferProfile
) -> dict[str, np.ndarray]:
    """Teacher-level quantities for each row of ``weights`` (trace multiplicities)."""
    per_student = _weighted_student_means(weights, inputs["scalars"])  # [B, s, 4]
    teacher = nan_mean(per_student, axis=1)  # [B, 4]
    out = {name: teacher[:, i] for i, name in enumerate(_MEAN_QUANTITIES)}
    centres = None
    if profile.pooled_student_curves:
        mean_curve = _pooled_curve(weights, inputs["sums"], inputs["counts"])  # [B, 50]
        out["fotu"] = nan_mean(mean_curve, axis=1)
        # The centres the teacher's curve has data in (the release's SOTU denominator).
        centres = (~np.isnan(mean_curve)).sum(axis=1)[:, None]
    histograms = _weighted_histograms(weights, inputs["hazards"])
    out["sotu"] = nan_mean(profile.sotu_entropy(histograms, centres), axis=1)
    out["lift"] = out["fotu"] - out["baseline"]
    return out


def _intervals(samples: np.ndarray, alpha: float) -> np.ndarray:
    """:func:`legival_core.stats.stats.percentile_interval` of every column of ``samples [B, q]``,
    as ``[q, 2]`` (columns without a NaN in one vectorised call)."""
    out = np.full((samples.shape[1], 2), np.nan)
    complete = ~np.isnan(samples).any(axis=0)
    if complete.any():
        bounds = np.quantile(samples[:, complete], [alpha / 2, 1 - alpha / 2], axis=0)
        out[complete] = bounds.T
    for column in np.flatnonzero(~complete):
        out[column] = percentile_interval(samples[:, column], alpha)
    return out


def _check_boot(n_boot: int, seed: int, alpha: float) -> None:
    if int(n_boot) != n_boot or n_boot < 0:
        raise ValueError(f"n_boot must be a whole number >= 0, got {n_boot!r}")
    if int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be a whole number >= 0, got {seed!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")


def teacher_metrics(
    rollouts: pd.DataFrame,
    profile: str | TransferProfile = "paper",
    n_boot: int = 1000,
    seed: int = 0,
    *,
    by: GroupBy = ("teacher", "dataset"),
    grid: Grid | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Teacher-level transfer utility, one row per group (default: per teacher and dataset).

    Per group, every per-trace quantity of :func:`trace_metrics` is averaged over the group's
    traces for each student, then over students: ``fotu``, ``regression_rate``, ``baseline``
    and ``never_solved`` (share of traces with no solved prefix). ``lift = fotu - baseline``.
    ``sotu`` per student = ``H(hazard histogram over 50 bins) / log 50`` (never-solved traces
    left out), then the mean over students.

    With the ``release`` profile (docs/profiles.md), as the released leaderboard computes them:
    ``fotu`` = the mean over the centres with data of the teacher curve, whose value at a centre
    is the plain average over the students with data there of each student's mean correctness
    pooled over traces (k = 0 in centre 1); ``regression_rate`` = per student the share of
    traces with at least one drop along k = 0, 3, ..., then the mean over students; ``sotu``
    per student = ``-sum q log(q + 1e-12) / log C`` over the hazard shares ``q`` (hazard = first
    correct k, k = 0 included), ``C`` = the number of centres the teacher curve has data in,
    then the mean over the students with a solved trace.

    Confidence intervals (``<q>_lo``, ``<q>_hi``) are percentile intervals from ``n_boot``
    resamples of the group's traces with replacement (a resampled trace brings all its
    students); the random stream depends only on ``seed`` and the group key. SOTU's is the
    bias-corrected percentile interval (:func:`legival_core.stats.stats.bias_corrected_interval`:
    a resampled entropy is biased low), so it holds the estimate. ``n_boot = 0`` leaves them NaN.

    Args:
        rollouts: rollouts table (see :data:`ROLLOUT_COLUMNS`).
        profile: a key of :data:`PROFILES`.
        n_boot: bootstrap replicates.
        seed: seed of the bootstrap.
        by: grouping columns among :data:`TRACE_COLUMNS`; add ``"student"`` for a per-student
            table (cross-student stability).
        grid: per-trace grid; None = the profile's default.
        alpha: 1 - confidence level.

    Returns:
        The ``by`` columns, ``n_traces``, ``n_students``, then for each of
        :data:`TEACHER_QUANTITIES` the value and its ``_lo`` / ``_hi`` bounds.

    Reference: Legi-Val (arXiv 2603.20508), FOTU / SOTU; docs/metrics/sotu.md.

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": "S",
    ...     "trace_id": ["a"] * 3 + ["b"] * 3, "problem_id": ["p", "p", "p", "q", "q", "q"],
    ...     "k": [0, 1, 2] * 2, "m": 2, "correct": [0, 1, 1, 0, 0, 1]})
    >>> row = teacher_metrics(rollouts, n_boot=0).iloc[0]
    >>> # trace a: bins 25, 50 both solved -> fotu 1; trace b: 0 at bin 25, 1 at bin 50 ->
    >>> # fotu (sum_{i=1..24} i/25 + 1) / 50 = 13/50; hazards 25 and 50 -> log 2 / log 50
    >>> float(row.fotu), round(float(row.sotu), 4), float(row.never_solved)
    (0.63, 0.1772, 0.0)
    """
    _check_boot(n_boot, seed, alpha)
    prof = get_profile(profile)
    columns = _as_columns(by)
    pre = _collapse(rollouts, prof)
    fotu = _fotu(pre, _grid_of(prof, grid), prof)
    pair_inputs = _pair_inputs(_pair_metrics(pre, fotu, prof), pre, prof.pooled_student_curves)

    records = []
    for block in _blocks(pre.pairs, columns):
        inputs = _block_inputs(block, pair_inputs)
        point = _aggregate(_unit_weights(block.n_traces), inputs, prof)
        record: dict[str, object] = dict(zip(columns, block.key, strict=True))
        record["n_traces"] = block.n_traces
        record["n_students"] = block.n_students
        if n_boot:
            weights = _bootstrap_weights(block.n_traces, n_boot, seed, block.key)
            boot = _aggregate(weights, inputs, prof)
            del weights  # free it before the next group's (they are the biggest arrays here)
            bounds = _intervals(np.column_stack([boot[q] for q in TEACHER_QUANTITIES]), alpha)
            # SOTU is a plug-in entropy, biased low under resampling: its percentile interval
            # would sit below the estimate, so it gets the bias-corrected one
            bounds[TEACHER_QUANTITIES.index("sotu")] = bias_corrected_interval(
                boot["sotu"].ravel(), float(point["sotu"][0]), alpha, (0.0, 1.0)
            )
        else:
            bounds = np.full((len(TEACHER_QUANTITIES), 2), np.nan)
        for name, (lo, hi) in zip(TEACHER_QUANTITIES, bounds.tolist(), strict=True):
            record[name] = float(point[name][0])
            record[f"{name}_lo"] = lo
            record[f"{name}_hi"] = hi
        records.append(record)
    names = [*columns, "n_traces", "n_students"]
    for name in TEACHER_QUANTITIES:
        names += [name, f"{name}_lo", f"{name}_hi"]
    return pd.DataFrame.from_records(records, columns=names)


#: Columns of one curve row (per group, per grid bin); ``curve`` returns them after the keys.
CURVE_COLUMNS = (
    "bin",
    "x",
    "mean",
    "lo",
    "hi",
    "baseline",
    "baseline_lo",
    "baseline_hi",
    "n_traces",
)


def curve(
    rollouts: pd.DataFrame,
    by: GroupBy = "teacher",
    n_boot: int = 200,
    seed: int = 0,
    *,
    profile: str | TransferProfile = "paper",
    grid: Grid | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Mean transfer curve ``mu_T(x)`` per group with a bootstrap band, for plotting.

    ``mu_T(b)`` = mean over students of the mean over traces of ``f_p(b)`` (so its mean over
    the 50 bins is the teacher FOTU); with the ``release`` profile, the plain average over
    students of each student's pooled bin means, k = 0 in the first bin (centre 1), NaN in the
    bins without data (its mean over the other bins is the release teacher FOTU). ``lo`` /
    ``hi`` are the percentile band of ``n_boot`` Poisson bootstrap replicates over traces: each
    trace weighs Poisson(1) in each replicate, a function of ``seed``, its ``trace_id`` and the
    replicate only (:func:`legival_core.stats.poisson_bootstrap.poisson_weights`), so the band
    can be computed one chunk of traces at a time and merged
    (:mod:`legival_core.metrics.rollout_partials`); both profiles (the release has no band of
    its own). Until #43 the band came from multinomial resamples of the traces (a stream per
    group): on the demo store the bounds moved by 0.007 on average (paper; up to 0.33 in the
    selections of a few traces) and the mean band width went from 0.181 to 0.198.
    ``baseline`` (with ``baseline_lo`` / ``baseline_hi``) is the student alone (k = 0),
    averaged the same way, repeated on every row of the group.

    Returns:
        Long table: the ``by`` columns, ``bin`` (1..50), ``x`` (bin centre), ``mean``, ``lo``,
        ``hi``, ``baseline``, ``baseline_lo``, ``baseline_hi``, ``n_traces``.

    Reference: Legi-Val (arXiv 2603.20508), transfer curves; docs/metrics/fotu.md.

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": "S",
    ...     "trace_id": "a", "problem_id": "p", "k": [0, 1, 2], "m": 2, "correct": [0, 0, 1]})
    >>> c = curve(rollouts, n_boot=0)
    >>> c["mean"].iloc[[0, 24, 37, 49]].tolist(), float(c["baseline"].iloc[0])
    ([0.0, 0.0, 0.52, 1.0], 0.0)
    """
    _check_boot(n_boot, seed, alpha)
    prof = get_profile(profile)
    columns = _as_columns(by)
    pre = _collapse(rollouts, prof)
    curves = _curves(pre, _grid_of(prof, grid))
    pm = _pair_metrics(pre, nan_mean(curves, axis=1), prof)
    return _curve_frame(_CurveInputs.of(pre, curves, pm, prof), columns, prof, n_boot, seed, alpha)


@dataclass(frozen=True)
class _CurveInputs:
    """Per-pair arrays a mean curve is built from (rows follow ``pairs``)."""

    pairs: pd.DataFrame
    curves: np.ndarray  # [n, 50]
    baseline: np.ndarray  # [n]
    sums: np.ndarray | None  # [n, 50] pooled bin sums and counts (release profile only)
    counts: np.ndarray | None

    @classmethod
    def of(
        cls, pre: _Prefixes, curves: np.ndarray, pm: _PairMetrics, prof: TransferProfile
    ) -> _CurveInputs:
        sums, counts = _bin_sums(pre) if prof.pooled_student_curves else (None, None)
        return cls(pre.pairs, curves, pm.baseline, sums, counts)

    def subset(self, keep: np.ndarray) -> _CurveInputs:
        return _CurveInputs(
            self.pairs[keep].reset_index(drop=True),
            self.curves[keep],
            self.baseline[keep],
            None if self.sums is None else self.sums[keep],
            None if self.counts is None else self.counts[keep],
        )


def _curve_frame(
    data: _CurveInputs,
    columns: list[str],
    prof: TransferProfile,
    n_boot: int,
    seed: int,
    alpha: float,
) -> pd.DataFrame:
    def summarise(weights: np.ndarray, inputs: dict[str, np.ndarray]) -> np.ndarray:
        # [B, 51]: the 50 curve values, then the baseline.
        if prof.pooled_student_curves:
            mean_curve = _pooled_curve(weights, inputs["sums"], inputs["counts"])
        else:
            mean_curve = nan_mean(_weighted_student_means(weights, inputs["curves"]), axis=1)
        base = nan_mean(_weighted_student_means(weights, inputs["baseline"]), axis=1)
        return np.column_stack([mean_curve, base])

    frames = []
    for block in _blocks(data.pairs, columns):
        inputs = {"curves": block.dense(data.curves), "baseline": block.dense(data.baseline)}
        if data.sums is not None and data.counts is not None:
            inputs["sums"] = block.dense(data.sums, fill=0.0)
            inputs["counts"] = block.dense(data.counts, fill=0.0)
        point = summarise(_unit_weights(block.n_traces), inputs)[0]
        boot = summarise(_band_weights(block, data.pairs, n_boot, seed), inputs) if n_boot else None
        frame = curve_frame(point, boot, alpha, block.n_traces)
        for name, value in zip(columns, block.key, strict=True):
            frame.insert(columns.index(name), name, value)
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=[*columns, *CURVE_COLUMNS])
    return pd.concat(frames, ignore_index=True)


def curve_frame(
    point: np.ndarray, replicates: np.ndarray | None, alpha: float, n_traces: int
) -> pd.DataFrame:
    """One curve's rows (:data:`CURVE_COLUMNS` but the grouping ones): bins 1..N_BINS with the
    mean and its band, and the baseline (column N_BINS of ``point``, the student alone) with its
    band, each band the percentile interval of ``replicates`` (rows = resamples; None: no band).
    """
    if replicates is not None:
        bounds = _intervals(replicates, alpha)
    else:
        bounds = np.full((N_BINS + 1, 2), np.nan)
    return pd.DataFrame(
        {
            "bin": np.arange(1, N_BINS + 1),
            "x": bin_centres(),
            "mean": point[:N_BINS],
            "lo": bounds[:N_BINS, 0],
            "hi": bounds[:N_BINS, 1],
            "baseline": point[N_BINS],
            "baseline_lo": bounds[N_BINS, 0],
            "baseline_hi": bounds[N_BINS, 1],
            "n_traces": n_traces,
        }
    )


def selection_curves(
    rollouts: pd.DataFrame,
    selections: Sequence[Mapping[str, Hashable | Sequence[Hashable] | None]],
    by: GroupBy = "teacher",
    n_boot: int = 200,
    seed: int = 0,
    *,
    profile: str | TransferProfile = "paper",
    grid: Grid | None = None,
    alpha: float = 0.05,
) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """:func:`curve` and :func:`trace_metrics` of several selections of rows, in one pass.

    Each selection maps columns of :data:`TRACE_COLUMNS` to a wanted value or list of values
    (None or a missing column = no filter; ``{}`` = every row). For each one, in order, yields
    ``(curve(selected, by, n_boot, seed, ...), trace_metrics(selected, profile, grid))`` for
    the rows it selects: the same numbers, but the rollouts are checked and collapsed once
    and only the teacher-level bootstrap runs per selection (a selection keeps or drops whole
    (trace, student) pairs, and every per-pair number depends on that pair's rows alone).

    Reference: Legi-Val (arXiv 2603.20508), transfer curves; docs/metrics/fotu.md.

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": ["D"] * 3 + ["E"] * 3,
    ...     "student": "S", "trace_id": ["a"] * 3 + ["b"] * 3, "problem_id": "p",
    ...     "k": [0, 1, 2] * 2, "m": 2, "correct": [0, 1, 1, 0, 0, 1]})
    >>> out = list(selection_curves(rollouts, [{}, {"dataset": "E"}], n_boot=0))
    >>> # trace b alone: 0 at bin 25, 1 at bin 50, linear in between -> bin 38 is 13/25
    >>> out[1][0]["mean"].iloc[[24, 37, 49]].round(2).tolist(), out[1][1]["trace_id"].tolist()
    ([0.0, 0.52, 1.0], ['b'])
    >>> out[0][0].equals(curve(rollouts, n_boot=0))
    True
    """
    _check_boot(n_boot, seed, alpha)
    prof = get_profile(profile)
    columns = _as_columns(by)
    curve_grid = _grid_of(prof, grid)
    pre = _collapse(rollouts, prof)
    pm = _pair_metrics(pre, _fotu(pre, curve_grid, prof), prof)
    per_trace = _trace_frame(pre, pm)
    data = _CurveInputs.of(pre, _curves(pre, curve_grid), pm, prof)
    for selection in selections:
        keep = np.ones(pre.n_pairs, dtype=bool)
        for column, wanted in selection.items():
            if wanted is None:
                continue
            if column not in TRACE_COLUMNS:
                raise ValueError(f"cannot select rollouts by {column!r}; use {TRACE_COLUMNS}")
            values = list(wanted) if isinstance(wanted, list | tuple | set) else [wanted]
            keep &= pre.pairs[column].isin(values).to_numpy()
        chosen = data if keep.all() else data.subset(keep)
        traces = per_trace if keep.all() else per_trace[keep].reset_index(drop=True)
        yield _curve_frame(chosen, columns, prof, n_boot, seed, alpha), traces


# --------------------------------------------------------------------------------------------
# Answer leak
# --------------------------------------------------------------------------------------------


def fotu_before_leak(
    rollouts: pd.DataFrame,
    leaks: pd.DataFrame,
    profile: str | TransferProfile = "paper",
    grid: Grid | None = None,
) -> pd.DataFrame:
    """FOTU computed only from prefixes shown before the answer leaks.

    Keeps the rollouts with ``k < leak_k`` (all of them when ``leak_k`` is null), builds the
    per-trace curve from those, and averages it over bins ``1..B`` where ``B`` is the bin of the
    last kept prefix (the curve is not extrapolated past it) **[choice]**. A trace that never
    leaks gets its ordinary FOTU (paper profile: ``B = 50``); one that leaks at ``k = 1`` gets
    NaN; a trace missing from ``leaks`` gets NaN.

    Args:
        rollouts: rollouts table.
        leaks: ``trace_id``, ``leak_k`` — the answer-leak step of each trace
            (:meth:`legival_core.tasks.base.Task.answer_leak_step`, as the metrics stage finds
            it for every trace with rollouts).

    Returns:
        :data:`TRACE_COLUMNS`, ``leak_k``, ``fotu`` (ordinary), ``fotu_before_leak``.

    Reference: Legi-Val (arXiv 2603.20508); docs/metrics/fotu-before-leak.md, answer-leak point.

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": "S",
    ...     "trace_id": "t", "problem_id": "p", "k": [1, 2, 3, 4], "m": 4,
    ...     "correct": [0.0, 1.0, 1.0, 1.0]})
    >>> leaks = pd.DataFrame({"trace_id": ["t"], "leak_k": [3]})
    >>> out = fotu_before_leak(rollouts, leaks).iloc[0]
    >>> # bins 13 (0), 25 (1), 38, 50 (1): fotu (11*12/2/12 + 26) / 50 = 31.5/50;
    >>> # before the leak only bins 13 and 25 count, mean over bins 1..25: (5.5 + 1) / 25
    >>> float(out.fotu), float(out.fotu_before_leak)
    (0.63, 0.26)
    """
    require_columns(leaks, ("trace_id", "leak_k"), "leaks")
    prof = get_profile(profile)
    curve_grid = _grid_of(prof, grid)
    pre = _collapse(rollouts, prof)
    out = pre.pairs.copy()
    leak_k, before = _leak_columns(pre, leaks, curve_grid)
    out["leak_k"] = leak_k
    out["fotu"] = _fotu(pre, curve_grid, prof)
    out["fotu_before_leak"] = before
    return out


def trace_metrics_with_leaks(
    rollouts: pd.DataFrame,
    leaks: pd.DataFrame,
    profile: str | TransferProfile = "paper",
    grid: Grid | None = None,
) -> pd.DataFrame:
    """:func:`trace_metrics`' rows with :func:`fotu_before_leak`'s ``leak_k`` and
    ``fotu_before_leak`` beside them, from one collapse of ``rollouts`` (the two functions
    collapse the same rows, so the pairs are the same, in the same order).

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": "S",
    ...     "trace_id": "t", "problem_id": "p", "k": [1, 2, 3, 4], "m": 4,
    ...     "correct": [0.0, 1.0, 1.0, 1.0]})
    >>> row = trace_metrics_with_leaks(rollouts, pd.DataFrame({"trace_id": ["t"],
    ...     "leak_k": [3]})).iloc[0]
    >>> float(row.fotu), int(row.leak_k), float(row.fotu_before_leak)
    (0.63, 3, 0.26)
    """
    require_columns(leaks, ("trace_id", "leak_k"), "leaks")
    prof = get_profile(profile)
    curve_grid = _grid_of(prof, grid)
    pre = _collapse(rollouts, prof)
    out = _trace_frame(pre, _pair_metrics(pre, _fotu(pre, curve_grid, prof), prof))
    out["leak_k"], out["fotu_before_leak"] = _leak_columns(pre, leaks, curve_grid)
    return out


def _leak_columns(
    pre: _Prefixes, leaks: pd.DataFrame, curve_grid: CurveGrid
) -> tuple[pd.arrays.IntegerArray, np.ndarray]:
    """Per pair of ``pre``: its trace's leak step (null where unknown or never) and its FOTU
    before the leak."""
    pair_leak = _pair_leaks(pre.pairs, leaks)
    known = np.isfinite(pair_leak)
    leak_k = pd.arrays.IntegerArray(np.where(known, pair_leak, 0).astype(np.int64), ~known)
    return leak_k, _before_leak(pre, pair_leak, curve_grid)


def _pair_leaks(pairs: pd.DataFrame, leaks: pd.DataFrame) -> np.ndarray:
    """Per pair: its trace's leak step (NaN: unknown, inf: never leaks)."""
    require_columns(leaks, ("trace_id", "leak_k"), "leaks")
    leak_map = pd.Series(
        pd.array(leaks["leak_k"], dtype="Int64").to_numpy(dtype=np.float64, na_value=np.inf),
        index=leaks["trace_id"].to_numpy(),
    )
    if leak_map.index.has_duplicates:
        dup = leak_map.index[leak_map.index.duplicated()][0]
        raise SchemaError("leaks", f"trace {dup!r} appears more than once", column="trace_id")
    return leak_map.reindex(pairs["trace_id"].to_numpy()).to_numpy()  # NaN = unknown


def _before_leak(pre: _Prefixes, pair_leak: np.ndarray, curve_grid: CurveGrid) -> np.ndarray:
    """Per pair of ``pre``: its FOTU before the leak (:func:`fotu_before_leak`) given its leak
    step (:func:`_pair_leaks`), apart so that the robustness report reuses a collapse it
    already has."""
    point_leak = pair_leak[pre.pair]
    keep = pre.k < point_leak  # NaN compares False: unknown traces keep nothing
    kept = pre.points(keep)
    last_bin = np.zeros(kept.n_pairs, dtype=np.int64)
    np.maximum.at(last_bin, kept.pair, kept.bin)  # bin 0 (a k = 0 kept apart) changes nothing
    # the curve's mean over bins 1..last_bin from its observed bins, as the FOTU is made: the
    # dense [pairs, 50] curves this was once the mean of took most of a chunk's transfer time
    obs = _observed_bins(kept)
    return curve_grid.area(obs.row, obs.bin, obs.value, kept.n_pairs, last_bin)
