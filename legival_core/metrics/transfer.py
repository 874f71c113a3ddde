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

Reference: Legi-Val, "Measuring Reasoning Trace Legibility: Can Those Who Understand Teach?"
(arXiv 2603.20508), section on transfer utility.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
import pandas as pd

from legival_core.metrics.registry import metrics_in
from legival_core.stats.stats import (
    bias_corrected_interval,
    nan_mean,
    percentile_interval,
    resample_counts,
    seeded_stream,
)
from legival_core.store.schema import SchemaError, require_columns

#: Number of position bins; each has width ``1 / N_BINS = 0.02``.
N_BINS = 50
#: A prefix counts as solved (for the hazard) when this share of its samples is fully correct.
SOLVED_THRESHOLD = 0.5
#: A sample is fully correct when its grade reaches this (grades below are partial credit).
FULLY_CORRECT = 1.0 - 1e-9
#: Columns :func:`trace_metrics` and friends need in the rollouts table.
ROLLOUT_COLUMNS = ("teacher", "dataset", "student", "trace_id", "problem_id", "k", "m", "correct")
#: Of those, the ids the app and the front door load as categoricals (big tables group faster).
ROLLOUT_CATEGORIES = ("teacher", "dataset", "student", "trace_id", "problem_id")
#: Columns that identify a (trace, student) pair in every per-trace output.
TRACE_COLUMNS = ("trace_id", "student", "teacher", "dataset", "problem_id", "m")
#: Teacher-level quantities reported by :func:`teacher_metrics`, each with ``_lo`` / ``_hi``.
TEACHER_QUANTITIES: tuple[str, ...] = metrics_in("teacher_quantities")

Grid = Literal["interpolate", "observed"]
GroupBy = str | Sequence[str]

# --------------------------------------------------------------------------------------------
# Small pure pieces: binning, grids, entropy normalisers
# --------------------------------------------------------------------------------------------


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


def _interpolated_area(row: np.ndarray, bin_: np.ndarray, value: np.ndarray, n: int) -> np.ndarray:
    """Mean over the 50 bins of the interpolated curve, in closed form from the observed bins.

    ``(row, bin_, value)`` lists each row's observed bins in increasing order. The constant
    head contributes ``v_first * b_first`` (bins 1..b_first), the tail ``v_last * (50 -
    b_last)``, and a linear piece from bin a to bin c (bins a+1..c) ``(c - a) v_a + (v_c - v_a)
    (c - a + 1) / 2``. Equal (to float rounding) to the mean of :func:`interpolate_curve`.
    """
    out = np.full(n, np.nan)
    if len(row) == 0:
        return out
    first = np.r_[True, row[1:] != row[:-1]]
    last = np.r_[row[1:] != row[:-1], True]
    total = np.zeros(n)
    total[row[first]] += value[first] * bin_[first]
    total[row[last]] += value[last] * (N_BINS - bin_[last])
    piece = ~last[:-1]  # entry i and i + 1 belong to the same row
    width = (bin_[1:] - bin_[:-1])[piece]
    v_a, v_c = value[:-1][piece], value[1:][piece]
    total += np.bincount(
        row[:-1][piece], weights=width * v_a + (v_c - v_a) * (width + 1) / 2, minlength=n
    )
    out[row[first]] = total[row[first]] / N_BINS
    return out


def _observed_area(row: np.ndarray, bin_: np.ndarray, value: np.ndarray, n: int) -> np.ndarray:
    """Mean of each row's observed bins."""
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
        area: ``(row, bin, value, n)`` observed bins -> FOTU per row, i.e. the mean of ``fill``'s
            curve over its non-NaN bins, computed without the dense array.
    """

    name: str
    fill: Callable[[np.ndarray], np.ndarray]
    area: Callable[[np.ndarray, np.ndarray, np.ndarray, int], np.ndarray]


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


# --------------------------------------------------------------------------------------------
# Profiles
# --------------------------------------------------------------------------------------------

Regression = Literal["drop_rate", "any_drop"]
TraceFotu = Literal["curve", "trace_score"]


@dataclass(frozen=True)
class TransferProfile:
    """How rollouts become transfer-utility numbers.

    Attributes:
        name: registry key.
        description: one line for the app and the docs.
        bin_of: ``(k, m) -> bin index 1..50`` for the binned prefixes (``k >= 1``, and ``k = 0``
            too when ``pool_baseline``).
        keep_full_trace: keep the prefix ``k = m`` (the whole trace); the release drops it.
        grid: default per-trace grid, a key of :data:`GRIDS`.
        pooled_student_curves: teacher curve / FOTU from each student's bin means pooled over
            all traces, then a plain average over students per bin (release), instead of the
            mean of per-trace curves (paper).
        pool_baseline: the ``k = 0`` rollout (no prefix) is binned like any other prefix
            (``bin_of(0, m)``, the first bin) and counts in the curve, FOTU, hazard and
            regression (release); otherwise it is kept apart as the baseline only (paper).
        last_sample_wins: one sample per (trace, student, k): a later row replaces an earlier
            one (release); otherwise the samples are averaged (paper).
        regression: ``"drop_rate"`` = drops / (K - 1) over the binned prefixes (paper);
            ``"any_drop"`` = 1 if the trace has at least one drop from a prefix whose score is
            > 0 to one whose score is 0, else 0, so its mean is the share of traces with a drop
            (release).
        trace_fotu: per-trace ``fotu``: ``"curve"`` = mean of the trace's curve (paper);
            ``"trace_score"`` = mean correctness over all its rollouts, unbinned (release:
            it has no per-trace FOTU).
        sotu_entropy: ``(histograms [..., 50], curve_centres [...]) -> SOTU``: the normalised
            entropy of hazard histograms; ``curve_centres`` is the number of bins the
            teacher's curve has data in.
    """

    name: str
    description: str
    bin_of: Callable[[np.ndarray, np.ndarray], np.ndarray]
    keep_full_trace: bool
    grid: Grid
    pooled_student_curves: bool
    pool_baseline: bool = False
    last_sample_wins: bool = False
    regression: Regression = "drop_rate"
    trace_fotu: TraceFotu = "curve"
    sotu_entropy: Callable[[np.ndarray, np.ndarray | None], np.ndarray] = _paper_sotu


PROFILES: dict[str, TransferProfile] = {}


def register_profile(profile: TransferProfile) -> TransferProfile:
    """Add a profile to :data:`PROFILES` (the name must be new)."""
    if profile.name in PROFILES:
        raise ValueError(f"transfer profile {profile.name!r} is already registered")
    if profile.grid not in GRIDS:
        raise ValueError(f"transfer profile {profile.name!r}: unknown grid {profile.grid!r}")
    if profile.regression not in ("drop_rate", "any_drop"):
        raise ValueError(f"transfer profile {profile.name!r}: unknown regression rule")
    if profile.trace_fotu not in ("curve", "trace_score"):
        raise ValueError(f"transfer profile {profile.name!r}: unknown per-trace FOTU rule")
    PROFILES[profile.name] = profile
    return profile


register_profile(
    TransferProfile(
        name="paper",
        description=(
            "Paper: bin = ceil(50k/m), k = 0 kept apart as the baseline, k = m kept, samples "
            "averaged, interpolated curves, SOTU / log 50, regression = drops / (K - 1)."
        ),
        bin_of=paper_bin,
        keep_full_trace=True,
        grid="interpolate",
        pooled_student_curves=False,
    )
)
register_profile(
    TransferProfile(
        name="release",
        description=(
            "Authors' released code: centre = int(pct/2)*2+1 with float pct = k/m*100, k = 0 "
            "pooled into centre 1, last prefix m-1, last sample per prefix wins, student bin "
            "means averaged per bin, SOTU / log(curve centres), regression = share of traces "
            "with a drop; per-trace 'fotu' is the trace score (mean correctness, unbinned)."
        ),
        bin_of=release_bin,
        keep_full_trace=False,
        grid="observed",
        pooled_student_curves=True,
        pool_baseline=True,
        last_sample_wins=True,
        regression="any_drop",
        trace_fotu="trace_score",
        sotu_entropy=_release_sotu,
    )
)


def get_profile(profile: str | TransferProfile) -> TransferProfile:
    """Look a profile up by name (or pass one through)."""
    if isinstance(profile, TransferProfile):
        return profile
    try:
        return PROFILES[profile]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown transfer profile {profile!r} (known: {known})") from None


def as_grid(name: str | None) -> Grid | None:
    """A grid name read from a config or a table as a :data:`Grid` (None stays None), with a
    clear error for an unknown one.

    >>> as_grid("observed")
    'observed'
    """
    if name is None:
        return None
    if name not in GRIDS:
        known = ", ".join(sorted(GRIDS))
        raise ValueError(f"unknown grid {name!r} (known: {known})")
    return cast(Grid, name)


def _grid_of(profile: TransferProfile, grid: Grid | None) -> CurveGrid:
    name = profile.grid if grid is None else grid
    try:
        return GRIDS[name]
    except KeyError:
        known = ", ".join(sorted(GRIDS))
        raise ValueError(f"unknown grid {name!r} (known: {known})") from None


def sotu(
    hazard_bins: Sequence[float | None] | np.ndarray,
    profile: str | TransferProfile = "paper",
    *,
    curve_centres: int | None = None,
) -> float:
    """SOTU of a set of traces: normalised entropy of their hazard histogram.

    ``SOTU = -sum_b p_b log p_b / log 50`` with ``p_b`` the share of solved traces whose hazard
    falls in bin ``b`` (1..50); never-solved traces (None / NaN / 0) are left out. The
    ``release`` profile computes ``-sum_b p_b log(p_b + 1e-12) / log C`` instead, with ``C`` =
    ``curve_centres``, the number of bins the teacher's curve has data in (not the number of
    non-empty hazard bins; ``/ 1`` when ``C <= 1``). NaN when no trace was solved.

    Reference: Legi-Val (arXiv 2603.20508), second-order transfer utility; docs/metrics/fotu.md
    and 7 (``src/viz/db_backend.py`` of the released scripts for ``release``).

    >>> sotu([7, 7, 7, None])
    0.0
    >>> round(sotu(list(range(1, 51))), 6)
    1.0
    >>> # two hazard centres among five curve centres: log 2 / log 50 (paper), log 2 / log 5
    >>> round(sotu([1, 2]), 4), round(sotu([1, 2], "release", curve_centres=5), 4)
    (0.1772, 0.4307)
    """
    prof = get_profile(profile)
    bins = pd.to_numeric(pd.Series(list(hazard_bins), dtype=object), errors="coerce")
    bins = bins[bins.notna() & (bins >= 1)].to_numpy(dtype=np.int64)
    if np.any(bins > N_BINS):
        raise ValueError(f"hazard bins must be in 1..{N_BINS}, got {int(bins.max())}")
    hist = np.bincount(bins - 1, minlength=N_BINS).astype(np.float64)
    centres = None if curve_centres is None else np.array([curve_centres])
    return float(prof.sotu_entropy(hist[None, :], centres)[0])


# --------------------------------------------------------------------------------------------
# Validation and collapsing rollouts to prefix points
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _RolloutNumbers:
    """The numeric rollout columns, checked: ``k`` and ``m`` as int64, ``correct`` as float64."""

    k: np.ndarray
    m: np.ndarray
    correct: np.ndarray


def _check_rollouts(rollouts: pd.DataFrame, table: str = "rollouts") -> _RolloutNumbers:
    require_columns(rollouts, ROLLOUT_COLUMNS, table)
    for col in ROLLOUT_COLUMNS:
        nulls = rollouts[col].isna().to_numpy()
        if nulls.any():
            raise SchemaError(table, "value is missing (null)", int(nulls.argmax()), col)
    # An integer column is whole and finite by construction: it is read as int64 and skips
    # the (slow) float remainder below.
    integer = {c: pd.api.types.is_integer_dtype(rollouts[c].dtype) for c in ("k", "m")}
    numbers = {}
    for col in ("k", "m", "correct"):
        try:
            numbers[col] = rollouts[col].to_numpy(
                dtype=np.int64 if integer.get(col) else np.float64
            )
        except (TypeError, ValueError):
            values = pd.to_numeric(rollouts[col], errors="coerce").isna().to_numpy()
            raise SchemaError(table, "value is not a number", int(values.argmax()), col) from None

    def not_whole(col: str) -> np.ndarray:
        if integer[col]:
            return np.zeros(len(rollouts), dtype=bool)
        return ~np.isfinite(numbers[col]) | (numbers[col] % 1 != 0)

    checks = (
        ("k", lambda: not_whole("k"), "k must be a whole number"),
        ("m", lambda: not_whole("m"), "m must be a whole number"),
        ("m", lambda: numbers["m"] < 1, "m (steps in the trace) must be at least 1"),
        ("k", lambda: (numbers["k"] < 0) | (numbers["k"] > numbers["m"]), "k must be in 0..m"),
        (
            "correct",
            lambda: ~((numbers["correct"] >= 0) & (numbers["correct"] <= 1)),
            "correct must be in [0, 1]",
        ),
    )
    for col, find_bad, message in checks:
        bad = find_bad()
        if bad.any():
            row = int(bad.argmax())
            value = rollouts[col].iloc[row]
            raise SchemaError(table, f"{message} (got {value!r})", row, col)
    return _RolloutNumbers(
        k=numbers["k"].astype(np.int64),
        m=numbers["m"].astype(np.int64),
        correct=numbers["correct"],
    )


def _is_sorted(keys: np.ndarray) -> bool:
    return bool(np.all(keys[1:] >= keys[:-1]))


def _group_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(keys, return_index=True, return_inverse=True)`` via a stable argsort, which
    runs in near-linear time on the mostly sorted keys that rollout tables have (and is skipped
    when the keys are already sorted)."""
    if _is_sorted(keys):
        starts = np.r_[True, keys[1:] != keys[:-1]] if len(keys) else np.zeros(0, dtype=bool)
        return keys[starts], np.flatnonzero(starts), np.cumsum(starts) - 1
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.r_[True, ordered[1:] != ordered[:-1]]
    inverse = np.empty(len(keys), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return ordered[starts], order[starts], inverse


def _adjacent_differs(column: pd.Series) -> np.ndarray:
    """``column[i + 1] != column[i]`` for every i, without hashing the whole column."""
    if len(column) < 2:
        return np.zeros(0, dtype=bool)
    dtype = column.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()
        return codes[1:] != codes[:-1]
    if pd.api.types.is_numeric_dtype(dtype):
        values = column.to_numpy()  # nulls were rejected before
        return values[1:] != values[:-1]
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        import pyarrow as pa
        import pyarrow.compute as pc

        arrow = pa.array(column.array)
        if isinstance(arrow, pa.ChunkedArray):
            arrow = arrow.combine_chunks()
        differs = pc.not_equal(arrow.slice(1), arrow.slice(0, len(arrow) - 1))
        return differs.to_numpy(zero_copy_only=False)
    codes, _ = pd.factorize(column)
    return codes[1:] != codes[:-1]


def _sorted_codes(column: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """``pd.factorize(column, sort=True)``, hashing one value per run of equal values.

    Rollout ids come in long runs (a trace's prefixes, a student's rows), so factorizing the
    first value of each run and repeating the codes is several times cheaper on strings.
    """
    if isinstance(column.dtype, pd.CategoricalDtype) or len(column) < 2:
        codes, uniques = pd.factorize(column, sort=True)
        return codes, uniques
    starts = np.flatnonzero(np.r_[True, _adjacent_differs(column)])
    if len(starts) > len(column) // 4:  # short runs: hashing every row is as cheap
        codes, uniques = pd.factorize(column, sort=True)
        return codes, uniques
    run_codes, uniques = pd.factorize(column.iloc[starts], sort=True)
    return np.repeat(run_codes, np.diff(np.r_[starts, len(column)])), uniques


def _check_trace_consistency(
    rollouts: pd.DataFrame, trace_code: np.ndarray, table: str = "rollouts"
) -> None:
    """teacher, dataset, problem_id and m must not change within one trace_id.

    The error names the first row whose value differs from the first row of its trace.
    """
    if len(trace_code) == 0:
        return
    new_run = trace_code[1:] != trace_code[:-1]
    n_runs = 1 + int(np.count_nonzero(new_run))
    if n_runs == int(trace_code.max()) + 1:
        # Every trace's rows are contiguous (as written by the rollout stage): comparing each
        # row with the one before it finds the same first offending row as comparing it with
        # the trace's first row, at a fraction of the cost of hashing the column.
        run_start = np.flatnonzero(np.r_[True, new_run])
        for col in ("teacher", "dataset", "problem_id", "m"):
            bad = _adjacent_differs(rollouts[col]) & ~new_run
            if bad.any():
                row = int(bad.argmax()) + 1
                first = int(run_start[np.searchsorted(run_start, row, side="right") - 1])
                _raise_inconsistent(rollouts, table, col, row, first)
        return
    _, first_row, _ = _group_keys(trace_code)
    for col in ("teacher", "dataset", "problem_id", "m"):
        codes, _ = pd.factorize(rollouts[col])
        bad = codes != codes[first_row][trace_code]
        if bad.any():
            row = int(bad.argmax())
            _raise_inconsistent(rollouts, table, col, row, int(first_row[trace_code[row]]))


def _raise_inconsistent(rollouts: pd.DataFrame, table: str, col: str, row: int, first: int) -> None:
    trace = rollouts["trace_id"].iloc[row]
    raise SchemaError(
        table,
        f"trace {trace!r} has more than one {col} "
        f"({rollouts[col].iloc[first]!r} and {rollouts[col].iloc[row]!r})",
        row,
        col,
    )


def _dense_rank(starts: np.ndarray) -> np.ndarray:
    """Run number of each entry, given where runs start (int32 accumulation is ~2x faster)."""
    small = len(starts) < 2**31 - 1
    return np.cumsum(starts, dtype=np.int32 if small else np.int64).astype(np.int64) - 1


def _changes(keys: np.ndarray) -> np.ndarray:
    """True where a run of equal ``keys`` starts."""
    starts = np.empty(len(keys), dtype=bool)
    if len(keys):
        starts[0] = True
        np.not_equal(keys[1:], keys[:-1], out=starts[1:])
    return starts


@dataclass(frozen=True)
class _Binned:
    """The points that have a bin (``bin >= 1``): ``k >= 1``, and ``k = 0`` too when the
    profile pools the baseline into the first bin. The curve, hazard and regression use only
    these."""

    pair: np.ndarray
    bin: np.ndarray
    y: np.ndarray
    solved: np.ndarray
    scored: np.ndarray


@dataclass(frozen=True)
class _Prefixes:
    """Rollouts collapsed to one point per (trace, student, k), sorted by pair then k."""

    pairs: pd.DataFrame  # TRACE_COLUMNS, one row per (trace, student), sorted
    pair: np.ndarray  # per point: row of ``pairs``
    k: np.ndarray
    y: np.ndarray  # mean correctness over samples (partial credit included)
    solved: np.ndarray  # share of samples fully correct (correct = 1)
    scored: np.ndarray  # share of samples with any credit (correct > 0)
    bin: np.ndarray  # 1..50 for binned points, 0 for a k = 0 kept apart

    @property
    def n_pairs(self) -> int:
        return len(self.pairs)

    @functools.cached_property
    def binned(self) -> _Binned:
        keep = self.bin >= 1
        if keep.all():
            return _Binned(self.pair, self.bin, self.y, self.solved, self.scored)
        index = np.flatnonzero(keep)
        return _Binned(
            self.pair[index], self.bin[index], self.y[index], self.solved[index],
            self.scored[index],
        )  # fmt: skip

    def points(self, keep: np.ndarray) -> _Prefixes:
        """The same pairs with only the points where ``keep`` is True."""
        return _Prefixes(
            self.pairs, self.pair[keep], self.k[keep], self.y[keep], self.solved[keep],
            self.scored[keep], self.bin[keep],
        )  # fmt: skip


def _run_order(pair_key: np.ndarray, point_key: np.ndarray) -> np.ndarray | None:
    """Row order that sorts ``point_key`` stably; None when it is already sorted.

    Rollout tables are written pair by pair, so each pair's rows usually form one run in
    increasing k: then only the runs need sorting (a gather instead of a full sort)."""
    if _is_sorted(point_key):
        return None
    new_run = _changes(pair_key)
    run_start = np.flatnonzero(new_run)
    run_key = pair_key[run_start]
    run_order = np.argsort(run_key, kind="stable")
    sorted_runs = run_key[run_order]
    k_rises = (point_key[1:] >= point_key[:-1]) | new_run[1:]
    if np.all(sorted_runs[1:] > sorted_runs[:-1]) and k_rises.all():
        length = np.diff(np.r_[run_start, len(pair_key)])[run_order]
        shift = run_start[run_order] - (np.cumsum(length) - length)
        return np.repeat(shift, length) + np.arange(len(pair_key))
    return np.argsort(point_key, kind="stable")


def _sample_shares(correct: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One sample per point: its value, fully correct (0/1) and any credit (0/1)."""
    y = correct + 0.0  # + 0.0 as in a bincount, so -0.0 reads 0.0
    return y, (correct >= FULLY_CORRECT).astype(np.float64), (correct > 0).astype(np.float64)


def _collapse(rollouts: pd.DataFrame, profile: TransferProfile) -> _Prefixes:
    numbers = _check_rollouts(rollouts)
    trace_all, _ = _sorted_codes(rollouts["trace_id"])
    _check_trace_consistency(rollouts, trace_all)
    student_all, students = _sorted_codes(rollouts["student"])

    rows = None if profile.keep_full_trace else np.flatnonzero(numbers.k < numbers.m)

    def kept(values: np.ndarray) -> np.ndarray:
        return values if rows is None else values[rows]

    k, m, correct = kept(numbers.k), kept(numbers.m), kept(numbers.correct)
    pair_key = kept(trace_all).astype(np.int64)
    pair_key *= max(len(students), 1)
    pair_key += kept(student_all)
    stride = int(k.max()) + 1 if len(k) else 1
    if len(k) and (int(pair_key.max()) + 1) * stride >= 2**62:
        return _collapse_wide(rollouts, numbers, rows, pair_key, profile)
    # One key per (pair, k), sorted once: the pairs and the points both come out of it.
    point_key = pair_key * stride
    point_key += k
    order = _run_order(pair_key, point_key)
    source = order  # row (among the kept ones) of each sorted entry; None = the same row
    if order is not None:
        pair_key, point_key = pair_key[order], point_key[order]
        k, m, correct = k[order], m[order], correct[order]
    starts = _changes(point_key)
    if starts.all():
        # One sample per prefix (the usual design): the mean is the sample itself.
        y, solved, scored = _sample_shares(correct)
    elif profile.last_sample_wins:
        # The release keeps one row per (trace, student, k): a later insert replaces an
        # earlier one. The sort is stable, so the last entry of a run is the last row.
        last_sample = np.r_[np.flatnonzero(starts)[1:] - 1, len(starts) - 1]
        y, solved, scored = _sample_shares(correct[last_sample])
        first_sample = np.flatnonzero(starts)
        pair_key, k, m = pair_key[first_sample], k[first_sample], m[first_sample]
        source = first_sample if source is None else source[first_sample]
    else:
        point = _dense_rank(starts)
        n_samples = np.bincount(point)
        y = np.bincount(point, weights=correct) / n_samples
        # The hazard asks for a full solve: partial credit (Connections: groups right / 4)
        # counts in the curve but not here (docs/profiles.md).
        solved = np.bincount(point, weights=(correct >= FULLY_CORRECT)) / n_samples
        scored = np.bincount(point, weights=(correct > 0)) / n_samples
        first_sample = np.flatnonzero(starts)
        pair_key, k, m = pair_key[first_sample], k[first_sample], m[first_sample]
        source = first_sample if source is None else source[first_sample]
    new_pair = _changes(pair_key)
    point_pair = _dense_rank(new_pair)
    first_rows = np.flatnonzero(new_pair)
    if source is not None:
        first_rows = source[first_rows]
    if rows is not None:
        first_rows = rows[first_rows]
    pairs = rollouts[list(TRACE_COLUMNS)].iloc[first_rows].reset_index(drop=True)
    return _with_bins(pairs, point_pair, k, m, y, solved, scored, profile)


def _collapse_wide(
    rollouts: pd.DataFrame,
    numbers: _RolloutNumbers,
    rows: np.ndarray | None,
    pair_key: np.ndarray,
    profile: TransferProfile,
) -> _Prefixes:
    """:func:`_collapse` in two sorts, for tables whose (pair, k) key would not fit in int64."""
    rows = np.arange(len(numbers.k)) if rows is None else rows
    _, first, pair = _group_keys(pair_key)
    pairs = rollouts[list(TRACE_COLUMNS)].iloc[rows[first]].reset_index(drop=True)
    k = numbers.k[rows]
    stride = int(k.max()) + 1
    point_key, _, point = _group_keys(pair * stride + k)
    correct = numbers.correct[rows]
    if profile.last_sample_wins:
        last_sample = np.zeros(len(point_key), dtype=np.int64)
        np.maximum.at(last_sample, point, np.arange(len(point)))
        y, solved, scored = _sample_shares(correct[last_sample])
    else:
        n_samples = np.bincount(point)
        y = np.bincount(point, weights=correct) / n_samples
        solved = np.bincount(point, weights=(correct >= FULLY_CORRECT)) / n_samples
        scored = np.bincount(point, weights=(correct > 0)) / n_samples
    point_pair = point_key // stride
    point_m = pairs["m"].to_numpy(dtype=np.int64)[point_pair]
    return _with_bins(pairs, point_pair, point_key % stride, point_m, y, solved, scored, profile)


def _with_bins(
    pairs: pd.DataFrame,
    point_pair: np.ndarray,
    point_k: np.ndarray,
    point_m: np.ndarray,
    y: np.ndarray,
    solved: np.ndarray,
    scored: np.ndarray,
    profile: TransferProfile,
) -> _Prefixes:
    bins = np.zeros(len(point_k), dtype=np.int64)
    binned = np.ones(len(point_k), dtype=bool) if profile.pool_baseline else point_k >= 1
    bins[binned] = profile.bin_of(point_k[binned], point_m[binned])
    if binned.any() and (bins[binned].min() < 1 or bins[binned].max() > N_BINS):
        raise ValueError(f"profile {profile.name!r} put a prefix outside bins 1..{N_BINS}")
    return _Prefixes(
        pairs=pairs, pair=point_pair, k=point_k, y=y, solved=solved, scored=scored, bin=bins
    )


# --------------------------------------------------------------------------------------------
# Per (trace, student) quantities
# --------------------------------------------------------------------------------------------


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
    ``hi`` come from ``n_boot`` resamples of traces. ``baseline`` (with ``baseline_lo`` /
    ``baseline_hi``) is the student alone (k = 0), averaged the same way, repeated on every row
    of the group.

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
        if n_boot:
            boot = summarise(_bootstrap_weights(block.n_traces, n_boot, seed, block.key), inputs)
            bounds = _intervals(boot, alpha)
        else:
            bounds = np.full((N_BINS + 1, 2), np.nan)
        frame = pd.DataFrame(
            {
                "bin": np.arange(1, N_BINS + 1),
                "x": bin_centres(),
                "mean": point[:N_BINS],
                "lo": bounds[:N_BINS, 0],
                "hi": bounds[:N_BINS, 1],
                "baseline": point[N_BINS],
                "baseline_lo": bounds[N_BINS, 0],
                "baseline_hi": bounds[N_BINS, 1],
                "n_traces": block.n_traces,
            }
        )
        for name, value in zip(columns, block.key, strict=True):
            frame.insert(columns.index(name), name, value)
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=[*columns, *CURVE_COLUMNS])
    return pd.concat(frames, ignore_index=True)


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
    leak_map = pd.Series(
        pd.array(leaks["leak_k"], dtype="Int64").to_numpy(dtype=np.float64, na_value=np.inf),
        index=leaks["trace_id"].to_numpy(),
    )
    if leak_map.index.has_duplicates:
        dup = leak_map.index[leak_map.index.duplicated()][0]
        raise SchemaError("leaks", f"trace {dup!r} appears more than once", column="trace_id")
    pair_leak = leak_map.reindex(pre.pairs["trace_id"].to_numpy()).to_numpy()  # NaN = unknown
    point_leak = pair_leak[pre.pair]
    keep = pre.k < point_leak  # NaN compares False: unknown traces keep nothing
    kept = pre.points(keep)
    curves = _curves(kept, curve_grid)
    last_bin = np.zeros(kept.n_pairs, dtype=np.int64)
    np.maximum.at(last_bin, kept.pair, kept.bin)  # bin 0 (a k = 0 kept apart) changes nothing
    within = np.arange(1, N_BINS + 1)[None, :] <= last_bin[:, None]
    before = nan_mean(np.where(within, curves, np.nan), axis=1)
    out = pre.pairs.copy()
    known = np.isfinite(pair_leak)
    out["leak_k"] = pd.arrays.IntegerArray(np.where(known, pair_leak, 0).astype(np.int64), ~known)
    out["fotu"] = _fotu(pre, curve_grid, prof)
    out["fotu_before_leak"] = before
    return out
