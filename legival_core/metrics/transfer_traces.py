"""Per (trace, student) transfer quantities: FOTU, hazard bin, regressions, baseline, lift.

Reads the collapsed prefixes (:mod:`legival_core.metrics.transfer_prefixes`) and forms each
pair's curve over the 50 bins, its area (FOTU), the first solved bin and the drops from one
prefix to the next. :func:`trace_metrics` and :func:`trace_curves` are the public tables; the
private pieces are shared with the teacher-level aggregation in
:mod:`legival_core.metrics.transfer`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from legival_core.metrics.transfer_grid import N_BINS, CurveGrid, Grid
from legival_core.metrics.transfer_prefixes import (
    _changes,
    _collapse,
    _dense_rank,
    _group_keys,
    _is_sorted,
    _Prefixes,
)
from legival_core.metrics.transfer_profiles import TransferProfile, _grid_of, get_profile

#: A prefix counts as solved (for the hazard) when this share of its samples is fully correct.
SOLVED_THRESHOLD = 0.5


def _bin_sums(pre: _Prefixes) -> tuple[np.ndarray, np.ndarray]:
    """Per pair and bin: sum of prefix correctness and number of binned prefixes."""
    binned = pre.binned
    flat = binned.pair * N_BINS + binned.bin - 1
    size = pre.n_pairs * N_BINS
    sums = np.bincount(flat, weights=binned.y, minlength=size).reshape(-1, N_BINS)
    counts = np.bincount(flat, minlength=size).reshape(-1, N_BINS).astype(np.float64)
    return sums, counts


@dataclass(frozen=True)
class _ObservedBins:
    """Mean correctness of the binned prefixes in each observed (pair, bin), sorted."""

    row: np.ndarray
    bin: np.ndarray  # 1..50
    value: np.ndarray


def _observed_bins(pre: _Prefixes) -> _ObservedBins:
    binned = pre.binned
    key = binned.pair * (N_BINS + 1) + binned.bin
    if not _is_sorted(key):  # a profile whose bins do not rise with k
        cells, _, cell = _group_keys(key)
        value = np.bincount(cell, weights=binned.y) / np.bincount(cell)
        return _ObservedBins(cells // (N_BINS + 1), cells % (N_BINS + 1), value)
    starts = _changes(key)
    if starts.all():  # one prefix per bin: its mean is its value (+ 0.0 as in a bincount)
        return _ObservedBins(binned.pair, binned.bin, binned.y + 0.0)
    cell = _dense_rank(starts)
    value = np.bincount(cell, weights=binned.y) / np.bincount(cell)
    return _ObservedBins(binned.pair[starts], binned.bin[starts], value)


def _fotu(pre: _Prefixes, grid: CurveGrid, profile: TransferProfile) -> np.ndarray:
    """Per-pair ``fotu``: the area under the trace's curve, or (``trace_fotu =
    "trace_score"``, release) the mean correctness over all its points, k = 0 included."""
    if profile.trace_fotu == "trace_score":
        counts = np.bincount(pre.pair, minlength=pre.n_pairs)
        sums = np.bincount(pre.pair, weights=pre.y, minlength=pre.n_pairs)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    obs = _observed_bins(pre)
    return grid.area(obs.row, obs.bin, obs.value, pre.n_pairs)


def _curves(pre: _Prefixes, grid: CurveGrid) -> np.ndarray:
    obs = _observed_bins(pre)
    observed = np.full((pre.n_pairs, N_BINS), np.nan)
    observed[obs.row, obs.bin - 1] = obs.value
    return grid.fill(observed)


@dataclass(frozen=True)
class _PairMetrics:
    fotu: np.ndarray
    hazard: np.ndarray  # 1..50, 0 = never solved
    n_binned: np.ndarray  # number of binned prefixes (k >= 1; k = 0 too when pooled)
    regression_count: np.ndarray
    regression_rate: np.ndarray
    baseline: np.ndarray


def _pair_metrics(pre: _Prefixes, fotu: np.ndarray, profile: TransferProfile) -> _PairMetrics:
    n = pre.n_pairs

    binned = pre.binned
    pair_b = binned.pair
    # Points are sorted by (pair, k): the first solved point of a pair is its hazard.
    solved = np.flatnonzero(binned.solved >= SOLVED_THRESHOLD)
    hazard = np.zeros(n, dtype=np.int64)
    solved_pair = pair_b[solved]  # sorted, so a pair's first entry is its smallest k
    first_solved = _changes(solved_pair)
    hazard[solved_pair[first_solved]] = binned.bin[solved[first_solved]]

    same_pair = pair_b[1:] == pair_b[:-1]
    n_binned = np.bincount(pair_b, minlength=n)
    if profile.regression == "any_drop":
        # Release: the share of samples with any credit, a drop = from >= 0.5 to < 0.5.
        hit = binned.scored >= SOLVED_THRESHOLD
        drops = same_pair & hit[:-1] & ~hit[1:]
        regression_count = np.bincount(pair_b[1:][drops], minlength=n)
        regression_rate = np.where(n_binned >= 1, (regression_count > 0).astype(np.float64), np.nan)
    else:
        drops = same_pair & (binned.y[1:] < binned.y[:-1])
        regression_count = np.bincount(pair_b[1:][drops], minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            regression_rate = np.where(n_binned >= 2, regression_count / (n_binned - 1), np.nan)

    baseline = np.full(n, np.nan)
    start = pre.k == 0
    baseline[pre.pair[start]] = pre.y[start]
    return _PairMetrics(fotu, hazard, n_binned, regression_count, regression_rate, baseline)


def _trace_frame(pre: _Prefixes, pm: _PairMetrics) -> pd.DataFrame:
    out = pre.pairs.copy()
    out["fotu"] = pm.fotu
    out["hazard_bin"] = pd.arrays.IntegerArray(pm.hazard.astype(np.int64), pm.hazard == 0)
    out["regression_count"] = pm.regression_count.astype(np.int64)
    out["regression_rate"] = pm.regression_rate
    out["baseline"] = pm.baseline
    out["lift"] = pm.fotu - pm.baseline
    return out


def trace_metrics(
    rollouts: pd.DataFrame, profile: str | TransferProfile = "paper", grid: Grid | None = None
) -> pd.DataFrame:
    """Transfer utility of each (trace, student) pair.

    Rollouts (one row per generation; columns :data:`ROLLOUT_COLUMNS`) are first averaged over
    samples of the same (trace, student, k). For prefixes ``k >= 1`` at ``x = k/m``:

    * ``f_p(b)`` = mean correctness of the prefixes in bin ``b = ceil(50 k / m)``; empty bins are
      interpolated (``grid="interpolate"``) or skipped (``grid="observed"``);
    * ``fotu`` = mean of ``f_p`` over the 50 bins (over the observed bins with ``"observed"``);
      NaN when the pair has no prefix ``k >= 1``;
    * ``hazard_bin`` = bin of the smallest ``k >= 1`` at which at least half of the samples are
      fully correct (``correct = 1``; partial credit does not count), null if none; with one
      binary sample per prefix this is the first correct rollout;
    * ``regression_count`` = #{i : y_{i+1} < y_i} over the prefixes ``k >= 1`` in order of k,
      ``regression_rate`` = count / (K - 1), NaN when K < 2;
    * ``baseline`` = correctness at ``k = 0`` (NaN if absent); ``lift`` = fotu - baseline.

    With ``profile="release"`` (the authors' released scripts, docs/profiles.md): one sample per
    (trace, student, k), the last row winning; ``k = m`` is dropped; ``k = 0`` is binned with
    the others (centre 1) by :func:`release_bin`; ``fotu`` is the release's **trace score**
    (mean correctness over all the pair's rollouts, k = 0 included, unbinned: the release has
    no per-trace FOTU); ``hazard_bin`` = bin of the first k (k = 0 included) whose sample is
    fully correct; ``regression_count`` = drops from a sample with credit (> 0) to one
    without along k = 0, 3, ..., and ``regression_rate`` = 1 if there is at least one drop,
    else 0 (its mean over traces is the release's share of traces with a regression).

    Args:
        rollouts: rollouts table (extra columns are ignored).
        profile: a key of :data:`PROFILES` or a :class:`TransferProfile`.
        grid: ``"interpolate"`` or ``"observed"``; None = the profile's default (it does not
            change the release's trace score).

    Returns:
        One row per (trace_id, student), sorted, with :data:`TRACE_COLUMNS` then ``fotu,
        hazard_bin, regression_count, regression_rate, baseline, lift`` (the ``trace_transfer``
        table of the store).

    Reference: Legi-Val (arXiv 2603.20508), transfer utility; docs/metrics/fotu.md.

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": "S",
    ...     "trace_id": "t1", "problem_id": "p1", "k": [0, 3, 6, 9], "m": 9,
    ...     "correct": [0.0, 0.0, 1.0, 1.0]})
    >>> row = trace_metrics(rollouts).iloc[0]
    >>> float(row.fotu), int(row.hazard_bin), int(row.regression_count), float(row.lift)
    (0.5, 34, 0, 0.5)
    """
    prof = get_profile(profile)
    pre = _collapse(rollouts, prof)
    return _trace_frame(pre, _pair_metrics(pre, _fotu(pre, _grid_of(prof, grid), prof), prof))


def trace_curves(
    rollouts: pd.DataFrame, profile: str | TransferProfile = "paper", grid: Grid | None = None
) -> tuple[pd.DataFrame, np.ndarray]:
    """Per-trace curves ``f_p`` on the 50-bin grid.

    Returns ``(index, curves)``: ``index`` has :data:`TRACE_COLUMNS` (one row per (trace,
    student), the same order as :func:`trace_metrics`), ``curves`` is ``[n, 50]`` (NaN for bins
    left empty by ``grid="observed"``). Bin ``b`` (1-based) is ``curves[:, b - 1]``; its centre
    is :func:`bin_centres`. Reference: Legi-Val (arXiv 2603.20508); docs/metrics/fotu.md.

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": "S",
    ...     "trace_id": "t1", "problem_id": "p1", "k": [3, 6], "m": 6, "correct": [0.0, 1.0]})
    >>> index, curves = trace_curves(rollouts)
    >>> curves[0, [0, 24, 37, 49]].tolist()  # bin 25 -> 0, bin 38 -> 13/25, bin 50 -> 1
    [0.0, 0.0, 0.52, 1.0]
    """
    prof = get_profile(profile)
    pre = _collapse(rollouts, prof)
    return pre.pairs.copy(), _curves(pre, _grid_of(prof, grid))
