"""Position bins, curve grids and entropy: the pure pieces under transfer utility.

The small pure pieces every transfer number is built from: where a prefix ``k`` of an ``m``-step
trace falls among the 50 position bins (the paper's rule and the released code's rule), the bin
centres, filling a per-trace curve between the bins it was observed in, the two grids a curve's
area can be taken on (:data:`GRIDS`), and the normalised entropy of hazard histograms behind SOTU
(the paper's normaliser and the released one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

#: Number of position bins; each has width ``1 / N_BINS = 0.02``.
N_BINS = 50

Grid = Literal["interpolate", "observed"]


def paper_bin(k: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Paper bin of prefix ``k`` of an ``m``-step trace: ``ceil((k/m) / 0.02) = ceil(50 k / m)``.

    Integer arithmetic, so ``k/m = 0.34`` lands in bin 17 and not, by float error, in bin 18.
    Valid for ``1 <= k <= m``; the result is in ``1..50``.

    >>> paper_bin(np.array([3, 6, 9]), np.array([9, 9, 9])).tolist()
    [17, 34, 50]
    """
    k = np.asarray(k, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    return -((-N_BINS * k) // m)


def release_bin(k: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Bin used by the authors' released code, as an index ``1..50``, in floating point.

    The release stores ``pct = k / m * 100`` (a float, computed in that order) and labels a
    prefix with the centre ``int(pct / 2) * 2 + 1`` (1, 3, ..., 99); the index of that centre
    is ``int(pct / 2) + 1``. Float rounding is kept on purpose: ``k = 87, m = 150`` gives
    ``pct = 57.99999...`` and centre 57 (index 29), where exact arithmetic gives 59. ``k = 0``
    gives centre 1. Valid for ``0 <= k < m`` (the release never shows the whole trace).

    Reference: ``src/viz/db_backend.py`` (``percentage_complete``) and ``migrate_database.py``
    (``bin_center``) of the released scripts; docs/profiles.md.

    >>> release_bin(np.array([3, 6, 8, 0, 87]), np.array([9, 9, 9, 9, 150])).tolist()
    [17, 34, 45, 1, 29]
    """
    pct = np.asarray(k, dtype=np.float64) / np.asarray(m, dtype=np.float64) * 100.0
    return np.floor(pct / 2.0).astype(np.int64) + 1


def bin_centres() -> np.ndarray:
    """Centres of the 50 bins on the position axis: 0.01, 0.03, ..., 0.99.

    >>> bin_centres()[[0, 1, -1]].round(2).tolist()
    [0.01, 0.03, 0.99]
    """
    return (np.arange(1, N_BINS + 1) - 0.5) / N_BINS


#: Curves filled per :func:`interpolate_curve` call (larger inputs go block by block).
INTERPOLATE_BLOCK = 65_536


def interpolate_curve(values: np.ndarray) -> np.ndarray:
    """Fill the empty bins of per-trace curves (docs/metrics/fotu.md, ``grid="interpolate"``).

    ``values`` is ``[n, 50]`` with NaN for bins without a rollout. Between two observed bins
    ``a < b`` the value at bin ``j`` is ``v_a + (v_b - v_a) (j - a) / (b - a)``; before the first
    observed bin the curve equals that bin's value, after the last one the last value. A row
    with no observed bin stays all-NaN.

    >>> row = np.full((1, 50), np.nan); row[0, 16] = 0.0; row[0, 33] = 1.0
    >>> filled = interpolate_curve(row)[0]
    >>> filled[[0, 16, 25, 33, 49]].round(4).tolist()  # bin 26 is 9/17 of the way up
    [0.0, 0.0, 0.5294, 1.0, 1.0]
    """
    values = np.asarray(values, dtype=np.float64)
    n_rows, n_bins = values.shape
    if n_rows > INTERPOLATE_BLOCK:
        # Block by block: at 2M curves the query and index arrays of one call held ~8 GB
        # (bench/scale_bench.py); rows never interact, so the blocks give the same values.
        out = np.empty((n_rows, n_bins))
        for start in range(0, n_rows, INTERPOLATE_BLOCK):
            block = slice(start, start + INTERPOLATE_BLOCK)
            out[block] = interpolate_curve(values[block])
        return out
    row, col = np.nonzero(~np.isnan(values))
    out = np.full((n_rows, n_bins), np.nan)
    if len(row) == 0:
        return out
    # One np.interp call over all rows: row r's bins sit at r * stride + 1..n_bins, and each
    # observed row gets sentinels at r * stride + 0 and + n_bins + 1 that repeat its first and
    # last value, so no query ever interpolates across two rows.
    stride = n_bins + 2
    val = values[row, col]
    first = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
    last = np.r_[first[1:] - 1, len(row) - 1]
    rows = row[first]
    xp = np.concatenate([rows * stride, row * stride + col + 1, rows * stride + n_bins + 1])
    fp = np.concatenate([val[first], val, val[last]])
    order = np.argsort(xp, kind="stable")
    queries = (rows[:, None] * stride + np.arange(1, n_bins + 1)[None, :]).astype(np.float64)
    out[rows] = np.interp(queries, xp[order].astype(np.float64), fp[order])
    return out


def _observed_only(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


def _interpolated_area(
    row: np.ndarray, bin_: np.ndarray, value: np.ndarray, n: int, end: np.ndarray | None = None
) -> np.ndarray:
    """Mean over bins 1..E of the interpolated curve (E = 50, or ``end[r]`` for row r), in
    closed form from the observed bins.

    ``(row, bin_, value)`` lists each row's observed bins in increasing order (all at most E).
    The constant head contributes ``v_first * b_first`` (bins 1..b_first), the tail ``v_last *
    (E - b_last)``, and a linear piece from bin a to bin c (bins a+1..c) ``(c - a) v_a + (v_c -
    v_a) (c - a + 1) / 2``. Equal (to float rounding) to the mean of :func:`interpolate_curve`
    over those bins.

    >>> # bins 13 (0) and 25 (1): a piece of 12 bins rising to 1 adds 12 * 0 + 1 * 13 / 2
    >>> _interpolated_area(np.array([0, 0]), np.array([13, 25]), np.array([0.0, 1.0]), 1,
    ...                    np.array([25])).tolist()  # 6.5 over bins 1..25
    [0.26]
    """
    out = np.full(n, np.nan)
    if len(row) == 0:
        return out
    ends = np.full(n, float(N_BINS)) if end is None else np.asarray(end, dtype=np.float64)
    first = np.r_[True, row[1:] != row[:-1]]
    last = np.r_[row[1:] != row[:-1], True]
    total = np.zeros(n)
    total[row[first]] += value[first] * bin_[first]
    total[row[last]] += value[last] * (ends[row[last]] - bin_[last])
    piece = ~last[:-1]  # entry i and i + 1 belong to the same row
    width = (bin_[1:] - bin_[:-1])[piece]
    v_a, v_c = value[:-1][piece], value[1:][piece]
    total += np.bincount(
        row[:-1][piece], weights=width * v_a + (v_c - v_a) * (width + 1) / 2, minlength=n
    )
    out[row[first]] = total[row[first]] / ends[row[first]]
    return out


def _observed_area(
    row: np.ndarray, bin_: np.ndarray, value: np.ndarray, n: int, end: np.ndarray | None = None
) -> np.ndarray:
    """Mean of each row's observed bins (those up to ``end[r]`` when given)."""
    if end is not None:
        within = bin_ <= np.asarray(end)[row]
        row, value = row[within], value[within]
    counts = np.bincount(row, minlength=n)
    sums = np.bincount(row, weights=value, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


@dataclass(frozen=True)
class CurveGrid:
    """How a per-trace curve treats bins without a rollout.

    Attributes:
        name: registry key.
        fill: dense ``[n, 50]`` (NaN = empty bin) -> curve on the 50 bins.
        area: ``(row, bin, value, n[, end])`` observed bins -> FOTU per row, i.e. the mean of
            ``fill``'s curve over its non-NaN bins (only bins 1..``end[r]`` when ``end`` is
            given), computed without the dense array.
    """

    name: str
    fill: Callable[[np.ndarray], np.ndarray]
    area: Callable[..., np.ndarray]


#: Per-trace grids (docs/metrics/fotu.md): ``interpolate`` (paper default) and ``observed``.
GRIDS: dict[str, CurveGrid] = {
    "interpolate": CurveGrid("interpolate", interpolate_curve, _interpolated_area),
    "observed": CurveGrid("observed", _observed_only, _observed_area),
}


def _log_all_bins(histograms: np.ndarray) -> np.ndarray:
    # Paper: divide by log 50 whatever the histogram looks like.
    return np.full(histograms.shape[:-1], math.log(N_BINS))


def normalised_entropy(
    histograms: np.ndarray, normaliser: Callable[[np.ndarray], np.ndarray] = _log_all_bins
) -> np.ndarray:
    """Shannon entropy ``-sum p_b log p_b`` of histograms over the last axis, divided by
    ``normaliser(histograms)``; NaN where a histogram is empty.

    >>> normalised_entropy(np.array([[4.0] + [0.0] * 49, [1.0] * 50])).round(6).tolist()
    [0.0, 1.0]
    """
    histograms = np.asarray(histograms, dtype=np.float64)
    total = histograms.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = histograms / total
        plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
        entropy = -plogp.sum(axis=-1)
        out = entropy / normaliser(histograms)
    out = np.where(total[..., 0] > 0, np.maximum(out, 0.0), np.nan)
    return out


#: Epsilon the released SOTU formula adds inside the logarithm: ``-sum q log(q + 1e-12)``.
RELEASE_SOTU_EPS = 1e-12


def _paper_sotu(histograms: np.ndarray, curve_centres: np.ndarray | None) -> np.ndarray:
    """Paper SOTU of hazard histograms ``[..., 50]``: entropy / log 50 (centres unused)."""
    return normalised_entropy(histograms, _log_all_bins)


def _release_sotu(histograms: np.ndarray, curve_centres: np.ndarray | None) -> np.ndarray:
    """Released SOTU formula (``src/viz/db_backend.py``, leaderboard statistics).

    ``q`` = hazard masses over the bins divided by their total; ``H = -sum q log(q + 1e-12)``;
    the result is ``H / log(C)`` where ``C`` is the number of curve centres the teacher has data
    in (not the number of non-empty hazard bins), and ``H / 1`` when ``C <= 1`` (so a single
    centre gives ``-log(1 + 1e-12)``, about -1e-12, as released). NaN where no mass.
    ``curve_centres`` broadcasts against ``histograms.shape[:-1]``.
    """
    if curve_centres is None:
        raise ValueError(
            "the release SOTU divides by log(number of curve centres the teacher has data "
            "in): pass curve_centres"
        )
    histograms = np.asarray(histograms, dtype=np.float64)
    total = histograms.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = histograms / total
        entropy = -(np.where(q > 0, q, 0.0) * np.log(q + RELEASE_SOTU_EPS)).sum(axis=-1)
    centres = np.asarray(curve_centres, dtype=np.float64)
    denominator = np.where(centres > 1, np.log(np.maximum(centres, 1.0)), 1.0)
    return np.where(total[..., 0] > 0, entropy / denominator, np.nan)
