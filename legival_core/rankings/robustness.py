"""How much a ranking depends on one analysis choice: rank agreement and flipped pairs.

Every teacher ranking rests on choices (a redundancy threshold, a prefix grid, a student, a
labeler, a segmenter, a tokenizer). :mod:`legival_core.rankings.robustness_choices` recomputes the
per-teacher values under each alternative; this module compares such a ranking with the
default one:

* **Kendall's τ_b** between the two rankings (pairs of teachers that keep, swap or tie their
  order; ties corrected as in Kendall 1945);
* **Spearman's ρ** between them (Pearson correlation of the average ranks);
* the **flipped pairs**: teachers a, b with a strictly above b by default and b strictly above
  a under the alternative. A flip is **within noise** when the two teachers' 95% rank
  intervals overlap under the default (:func:`legival_core.rankings.rank_intervals.rank_intervals`:
  resampling problems could already swap them), and a **real flip** when they do not (the
  default separates them, and the choice reverses them anyway).

Pure numpy/pandas; rank 1 = best, ties share the best rank, values rounded to 9 decimals
before ranking exactly as the leaderboard does
(:func:`legival_core.rankings.rank_intervals.replicate_ranks`).

Reference: Kendall, "The treatment of ties in ranking problems", Biometrika 33 (1945) for τ_b;
Legi-Val (arXiv 2603.20508) for the rankings compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from legival_core.stats.stats import spearman_rho

__all__ = [
    "FLIP_COLUMNS",
    "NO_INTERVAL",
    "REAL_FLIP",
    "WITHIN_NOISE",
    "RankingComparison",
    "compare_rankings",
    "flipped_pairs",
    "kendall_tau_b",
    "noise_verdict",
    "ranks_of",
]

#: Verdicts of a flipped pair (see :func:`noise_verdict`).
WITHIN_NOISE = "within noise"
REAL_FLIP = "real flip"
NO_INTERVAL = "no interval"
#: Columns of :func:`flipped_pairs`.
FLIP_COLUMNS = (
    "above",
    "below",
    "default_rank_above",
    "default_rank_below",
    "alternative_rank_above",
    "alternative_rank_below",
    "verdict",
)


def ranks_of(values: pd.Series, higher_is_better: bool) -> pd.Series:
    """Rank 1 = best of a Series of values (teacher -> value); ties share the best rank and
    NaN stays unranked (the leaderboard's ranking, via
    :func:`legival_core.rankings.rank_intervals.replicate_ranks`).

    >>> ranks_of(pd.Series({"a": 0.2, "b": 0.9, "c": 0.9}), higher_is_better=True).tolist()
    [3.0, 1.0, 1.0]
    """
    from legival_core.rankings.rank_intervals import replicate_ranks

    numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    return pd.Series(replicate_ranks(numbers, higher_is_better), index=values.index, name="rank")


def _pair_signs(values: np.ndarray) -> np.ndarray:
    """sign(v_i - v_j) for every pair i < j, in the order of ``np.triu_indices``."""
    i, j = np.triu_indices(len(values), k=1)
    return np.sign(values[i] - values[j])


def kendall_tau_b(x: np.ndarray | list[float], y: np.ndarray | list[float]) -> float:
    """Kendall's τ_b of two paired sequences (pairs with a NaN dropped).

    Over the n_0 = n(n−1)/2 pairs i < j: n_c pairs ordered the same way in x and y
    (concordant), n_d ordered oppositely (discordant), n_1 pairs tied in x, n_2 tied in y:

        τ_b = (n_c − n_d) / sqrt((n_0 − n_1)(n_0 − n_2))

    NaN when fewer than two pairs remain or either sequence is constant (the denominator is 0).
    Ranks or values give the same τ_b (only the order of each pair counts).

    Reference: Kendall (1945), τ_b; scipy.stats.kendalltau computes the same statistic.

    >>> # pairs (1,2) (1,3) (2,3): x orders all three up; y = 1, 3, 2 swaps (2,3): (2 - 1) / 3
    >>> round(kendall_tau_b([1, 2, 3], [1, 3, 2]), 4)
    0.3333
    >>> # a tie in x: n_0 = 3, n_1 = 1, n_2 = 0, n_c = 2, n_d = 0 -> 2 / sqrt(2 * 3)
    >>> round(kendall_tau_b([1, 1, 2], [1, 2, 3]), 4)
    0.8165
    """
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape:
        raise ValueError(f"kendall_tau_b: x and y differ in length ({len(xs)} vs {len(ys)})")
    keep = ~(np.isnan(xs) | np.isnan(ys))
    xs, ys = xs[keep], ys[keep]
    n = len(xs)
    if n < 2:
        return float("nan")
    sx, sy = _pair_signs(xs), _pair_signs(ys)
    n0 = n * (n - 1) / 2
    n1 = float(np.count_nonzero(sx == 0))
    n2 = float(np.count_nonzero(sy == 0))
    denominator = np.sqrt((n0 - n1) * (n0 - n2))
    if denominator == 0:
        return float("nan")
    concordant_minus_discordant = float(np.sum(sx * sy))
    return float(np.clip(concordant_minus_discordant / denominator, -1.0, 1.0))


def noise_verdict(lo_above: object, hi_above: object, lo_below: object, hi_below: object) -> str:
    """Whether a flip of two teachers is :data:`WITHIN_NOISE` (their 95% rank intervals under
    the default overlap: lo_a ≤ hi_b and lo_b ≤ hi_a) or a :data:`REAL_FLIP` (they do not);
    :data:`NO_INTERVAL` when either interval is unknown.

    >>> noise_verdict(1, 2, 2, 3), noise_verdict(1, 1, 2, 3), noise_verdict(1, 1, None, None)
    ('within noise', 'real flip', 'no interval')
    """
    bounds = [lo_above, hi_above, lo_below, hi_below]
    if any(b is None or b is pd.NA or (isinstance(b, float) and np.isnan(b)) for b in bounds):
        return NO_INTERVAL
    la, ha, lb, hb = (float(b) for b in bounds)  # type: ignore[arg-type]
    return WITHIN_NOISE if la <= hb and lb <= ha else REAL_FLIP


def flipped_pairs(
    default_ranks: pd.Series,
    alternative_ranks: pd.Series,
    intervals: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The pairs of teachers whose order the alternative reverses, with their verdict.

    A pair (a, b) of teachers ranked under both is flipped when rank_default(a) <
    rank_default(b) and rank_alternative(a) > rank_alternative(b) (strictly: a pair that
    becomes or stops being a tie lowers τ_b but is not a flip). ``intervals`` has
    ``teacher``, ``rank_lo``, ``rank_hi`` (the default's rank intervals); each flip gets
    :func:`noise_verdict` of the two teachers' intervals. Rows sorted by the default ranks.

    Columns: :data:`FLIP_COLUMNS` (``above`` is the teacher ranked better by default).

    >>> default = pd.Series({"a": 1.0, "b": 2.0, "c": 3.0})
    >>> alternative = pd.Series({"a": 1.0, "b": 3.0, "c": 2.0})
    >>> intervals = pd.DataFrame({"teacher": ["a", "b", "c"], "rank_lo": [1, 2, 2],
    ...     "rank_hi": [1, 3, 3]})
    >>> flips = flipped_pairs(default, alternative, intervals)
    >>> flips[["above", "below", "verdict"]].values.tolist()
    [['b', 'c', 'within noise']]
    """
    common = [t for t in default_ranks.index if t in alternative_ranks.index]
    d = pd.to_numeric(default_ranks.reindex(common), errors="coerce").to_numpy(np.float64)
    a = pd.to_numeric(alternative_ranks.reindex(common), errors="coerce").to_numpy(np.float64)
    lo: Mapping[object, object] = {}
    hi: Mapping[object, object] = {}
    if intervals is not None and len(intervals):
        by_teacher = intervals.drop_duplicates("teacher").set_index("teacher")
        lo, hi = by_teacher["rank_lo"].to_dict(), by_teacher["rank_hi"].to_dict()
    rows = []
    for i in range(len(common)):
        for j in range(len(common)):
            if np.isnan(d[i]) or np.isnan(d[j]) or np.isnan(a[i]) or np.isnan(a[j]):
                continue
            if d[i] < d[j] and a[i] > a[j]:
                above, below = common[i], common[j]
                rows.append(
                    (
                        above,
                        below,
                        int(d[i]),
                        int(d[j]),
                        int(a[i]),
                        int(a[j]),
                        noise_verdict(lo.get(above), hi.get(above), lo.get(below), hi.get(below)),
                    )
                )
    frame = pd.DataFrame.from_records(rows, columns=list(FLIP_COLUMNS))
    return frame.sort_values(
        ["default_rank_above", "default_rank_below", "above", "below"], kind="stable"
    ).reset_index(drop=True)


@dataclass(frozen=True)
class RankingComparison:
    """One alternative ranking against the default: τ_b, ρ, the teachers compared (those
    ranked under both), the flipped pairs, how many of them are real flips, and ``n_ties``:
    the pairs the default orders that the alternative ties (no flip, but an order lost)."""

    tau_b: float
    rho: float
    n_teachers: int
    flips: pd.DataFrame
    n_ties: int = 0

    @property
    def n_flips(self) -> int:
        return len(self.flips)

    @property
    def n_real_flips(self) -> int:
        return int((self.flips["verdict"] == REAL_FLIP).sum()) if len(self.flips) else 0


def compare_rankings(
    default_values: pd.Series,
    alternative_values: pd.Series,
    higher_is_better: bool,
    intervals: pd.DataFrame | None = None,
) -> RankingComparison:
    """Compare the ranking of ``alternative_values`` with that of ``default_values``.

    Both are Series teacher -> metric value. Each is ranked on its own (:func:`ranks_of`);
    τ_b (:func:`kendall_tau_b`) and ρ (:func:`spearman_rho`) are taken over the teachers
    ranked under both, and the flips are :func:`flipped_pairs` with the default's rank
    ``intervals``; ``n_ties`` counts the pairs ordered by default and tied under the
    alternative.

    >>> default = pd.Series({"a": 0.9, "b": 0.5, "c": 0.4})
    >>> same = compare_rankings(default, default * 2, higher_is_better=True)
    >>> same.tau_b, same.rho, same.n_flips
    (1.0, 1.0, 0)
    >>> swapped = compare_rankings(default, pd.Series({"a": 0.9, "b": 0.3, "c": 0.4}), True)
    >>> round(swapped.tau_b, 4), swapped.rho, swapped.flips[["above", "below"]].values.tolist()
    (0.3333, 0.5, [['b', 'c']])
    >>> compare_rankings(default, pd.Series({"a": 0.9, "b": 0.4, "c": 0.4}), True).n_ties
    1
    """
    default_ranks = ranks_of(default_values, higher_is_better)
    alternative_ranks = ranks_of(alternative_values, higher_is_better)
    common = [
        t
        for t in default_ranks.index
        if t in alternative_ranks.index
        and not np.isnan(default_ranks[t])
        and not np.isnan(alternative_ranks[t])
    ]
    x = default_ranks.reindex(common).to_numpy(np.float64)
    y = alternative_ranks.reindex(common).to_numpy(np.float64)
    return RankingComparison(
        tau_b=kendall_tau_b(x, y),
        rho=spearman_rho(x, y),
        n_teachers=len(common),
        n_ties=int(np.count_nonzero((_pair_signs(x) != 0) & (_pair_signs(y) == 0))),
        flips=flipped_pairs(default_ranks, alternative_ranks, intervals),
    )
