"""How sure a leaderboard is of each teacher's value and place: paired problem resampling.

A rank table on a few dozen traces per teacher can look decisive when it is noise. This module
resamples *problems* with replacement (the same draw for every teacher, so the comparison is
paired: a hard problem drawn twice is hard for everyone), recomputes each teacher's metric on
every resample, ranks the teachers again and reports

* the 95% percentile interval of the value (``value_lo``, ``value_hi``),
* the 95% interval of the rank (``rank_lo``–``rank_hi``, e.g. "2–4"),
* the upper-bound rank ``rank_ub = 1 + #{teachers whose value interval lies entirely on the
  better side of this teacher's}`` (the convention of public arena leaderboards),
* the teachers whose rank intervals overlap this one's: not separated from it.

Per teacher, a metric is computed as the stored tables compute it: the mean over the traces of
each (dataset, student) cell, then over students, then over datasets (``teacher_metrics`` and
:func:`legival_core.stats.stats.rank_table`); SOTU is the normalised entropy of each cell's hazard
histogram (:func:`legival_core.metrics.transfer.normalised_entropy`, paper profile). A resample
gives each trace its problem's weight in that resample, so every statistic becomes a weighted sum:
one sparse matrix product per metric for all resamples at once.

The weights are Poisson(1) bootstrap weights (:mod:`legival_core.stats.poisson_bootstrap`): a
problem's weight in resample b depends only on the seed, b and the problem's key
``f"{dataset}\\x1f{problem_id}"`` (:func:`problem_key`), not on how many other problems there
are. A resample's total weight varies around the number of problems P instead of being exactly P
(the multinomial bootstrap's), so the intervals differ slightly from a multinomial bootstrap's;
in exchange the sums of any chunk of problems can be computed alone and added
(:mod:`legival_core.rankings.board_partials`), on one machine or many, with the same result.

Reference: Legi-Val (arXiv 2603.20508) for the metrics and rank table; the percentile bootstrap
(Efron & Tibshirani 1993); rank intervals by resampling as in public model arenas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from legival_core.metrics.metric_catalog import METRICS
from legival_core.metrics.registry import metrics_in
from legival_core.rankings.cell_sums import MetricResamples, finalize_metric, metric_partial
from legival_core.stats.poisson_bootstrap import poisson_weights
from legival_core.stats.stats import (
    bias_corrected_interval,
    percentile_interval,
)

__all__ = [
    "MetricResamples",
    "TeacherResamples",
    "agreeing_intervals",
    "board_unranked",
    "collapsed_share_bounds",
    "composite_resamples",
    "composite_scores",
    "frontier_shares",
    "interval_table",
    "metric_resamples",
    "metric_rows",
    "points_agree",
    "problem_key",
    "problem_weights",
    "rank_intervals",
    "replicate_ranks",
    "resample_teachers",
    "resamples_frame",
    "resamples_from_frame",
    "shown_intervals",
    "stored_board_resamples",
]

#: Metrics read from ``trace_efficiency`` (cells = datasets) and from ``trace_transfer``
#: (cells = dataset x student); ``accuracy`` is the mean of the ``correct`` column.
EFFICIENCY_METRICS: tuple[str, ...] = metrics_in("resampled_efficiency")
TRANSFER_METRICS: tuple[str, ...] = metrics_in("resampled_transfer")
#: Metrics whose estimator is biased under resampling, with the range their bias-corrected
#: interval is clipped to: SOTU, a plug-in entropy (a resample's histogram is more
#: concentrated than the sample's, so its entropy is lower).
BIAS_CORRECTED: dict[str, tuple[float, float]] = {"sotu": (0.0, 1.0)}
# Values are rounded before ranking so that float noise cannot split a tie (as rank_table does).
_RANK_DECIMALS = 9


@dataclass(frozen=True)
class TeacherResamples:
    """Every metric of :func:`resample_teachers`, all computed on the same problem weights."""

    teachers: tuple[str, ...]
    n_boot: int
    seed: int
    metrics: dict[str, MetricResamples]


def problem_key(dataset: object, problem_id: object) -> str:
    """The text a problem's bootstrap weights are keyed by: ``f"{dataset}\\x1f{problem_id}"``
    (unit separator between the two, so ``("a", "b_c")`` and ``("a_b", "c")`` differ).

    Changing it changes every stored interval: keep it stable.

    >>> problem_key("gsm8k", 17)
    'gsm8k\\x1f17'
    """
    return f"{dataset}\x1f{problem_id}"


def problem_weights(problems: pd.MultiIndex, n_boot: int, seed: int = 0) -> np.ndarray:
    """Each problem's weight in each of ``n_boot`` resamples: ``(n_boot, P)`` floats.

    ``problems`` holds (dataset, problem_id) pairs. Column p is
    :func:`legival_core.stats.poisson_bootstrap.poisson_weights` of ``problem_key(*problems[p])``:
    a Poisson(1) count that depends only on ``seed``, the problem and the resample, whatever
    other problems come with it, so any chunk of problems gets its own columns alone. A row
    sums to about P (expected value P, variance P), not exactly P as a multinomial draw would.

    >>> problems = pd.MultiIndex.from_tuples([("d", "p"), ("d", "q"), ("e", "p")])
    >>> w = problem_weights(problems, n_boot=3, seed=0)
    >>> w.shape  # a subset of the problems, in any order, gets the same columns:
    (3, 3)
    >>> bool((problem_weights(problems[[2, 0]], 3, seed=0) == w[:, [2, 0]]).all())
    True
    """
    if n_boot < 0:
        raise ValueError(f"problem_weights: n_boot must be >= 0, got {n_boot}")
    keys = [problem_key(d, p) for d, p in problems]
    return poisson_weights(keys, int(n_boot), seed).astype(np.float64)


def metric_resamples(
    rows: pd.DataFrame,
    value: str,
    teachers: Sequence[str],
    problems: pd.Index,
    draws: np.ndarray,
    statistic: str = "mean",
    support: str = "common",
    outside: Sequence[str] = (),
) -> MetricResamples:
    """One teacher metric on the data (weight 1 per problem) and on every row of ``draws``
    (``(n_boot, P)`` problem weights, columns in the order of ``problems``:
    :func:`problem_weights`, or any other weights).

    ``rows`` has one row per trace (or per trace and student) with ``teacher``, ``dataset``,
    ``problem_id``, optionally ``student``, and ``value``. With weights w_p (problem p's weight
    in the resample), for each (teacher, dataset, student) cell:

    * ``statistic="mean"``: ``sum_i w_p(i) v_i / sum_i w_p(i)`` over the cell's rows with a
      value (a weighted mean);
    * ``statistic="entropy"``: ``value`` is a hazard bin 1..50 (NaN = never solved, left
      out); the cell's histogram ``h_b = sum_i w_p(i) [v_i = b]`` gives
      ``H(h) / log 50``.

    The teacher's value is the mean over students of each dataset's cells, then the mean over
    datasets (cells with no weight are left out). Under ``support="common"`` only the datasets
    on which every teacher not in ``outside`` with a value has one on the data as it is enter
    that mean (the rank table's common support, :mod:`legival_core.stats.support`), in every
    resample alike. ``n_traces`` and ``n_students`` count the rows with a value on those
    datasets (for SOTU: the traces some prefix of which the student solves).

    >>> rows = pd.DataFrame({"teacher": ["a", "a", "b", "b"], "dataset": "d",
    ...     "problem_id": ["p", "q", "p", "q"], "v": [1.0, 0.0, 0.5, 0.5]})
    >>> problems = pd.Index([("d", "p"), ("d", "q")])
    >>> draws = np.array([[2.0, 0.0], [1.0, 1.0]])  # p twice; then p and q once each
    >>> res = metric_resamples(rows, "v", ["a", "b"], problems, draws)
    >>> res.point.tolist(), res.replicates.tolist(), res.n_traces.tolist()
    ([0.5, 0.5], [[1.0, 0.5], [0.5, 0.5]], [2, 2])
    """
    partial = metric_partial(rows, value, problems, draws, statistic, known_only=True)
    return finalize_metric(partial, teachers, support, outside)


def replicate_ranks(values: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Rank 1 = best along the last axis, ties sharing the best rank; NaN stays unranked.

    ``rank_t = 1 + #{u : v_u strictly better than v_t}`` among the finite values (pandas'
    ``method="min"``), after rounding to 9 decimals so float noise cannot split a tie.

    >>> replicate_ranks(np.array([[0.2, 0.9, 0.9, np.nan]]), higher_is_better=True).tolist()
    [[3.0, 1.0, 1.0, nan]]
    >>> replicate_ranks(np.array([300.0, 100.0, 200.0]), higher_is_better=False).tolist()
    [3.0, 1.0, 2.0]
    """
    rounded = np.round(np.asarray(values, dtype=np.float64), _RANK_DECIMALS)
    signed = rounded if higher_is_better else -rounded
    finite = ~np.isnan(signed)
    better = (signed[..., None, :] > signed[..., :, None]) & finite[..., None, :]
    ranks = 1.0 + better.sum(axis=-1)
    return np.where(finite, ranks, np.nan)


def rank_intervals(
    resamples: MetricResamples,
    higher_is_better: bool,
    alpha: float = 0.05,
    share: bool = False,
    bias_bounds: tuple[float, float] | None = None,
) -> pd.DataFrame:
    """Value interval, rank, rank interval, upper-bound rank and overlaps of every teacher.

    With ``V[b, t]`` the value of teacher t on resample b and ``R[b, t]`` its rank there
    (:func:`replicate_ranks`; resamples where t has no value are left out of its columns):

    * ``value_lo``, ``value_hi`` = the alpha/2 and 1 - alpha/2 quantiles of ``V[:, t]``;
    * ``rank`` = the rank of the point values; ``rank_lo``, ``rank_hi`` = the alpha/2 and
      1 - alpha/2 quantiles of ``R[:, t]`` (empirical, so always ranks that occurred);
    * ``rank_ub = 1 + #{u : value interval of u entirely better than t's}`` (higher is better:
      ``value_lo[u] > value_hi[t]``);
    * ``not_separated`` = the teachers u != t whose rank intervals overlap t's
      (``rank_lo[u] <= rank_hi[t]`` and ``rank_lo[t] <= rank_hi[u]``), comma-separated.

    With ``bias_bounds`` (a metric whose estimator is biased under resampling, SOTU's entropy:
    :data:`BIAS_CORRECTED`) the value interval is the bias-corrected percentile interval
    clipped to those bounds (:func:`legival_core.stats.stats.bias_corrected_interval`), which
    holds the point value.

    ``rank_ub`` compares the intervals the pages show (:func:`shown_intervals`: for a share,
    ``share=True``, whose bootstrap collapsed to a point, its Wilson interval; none from one
    trace). Where the bootstrap cannot order a teacher (its interval collapsed, or it ties
    another teacher in every resample, say two teachers at 0% throughout) its rank interval is
    widened to what those shown intervals allow, and so is the interval of every teacher whose
    shown interval overlaps such a teacher's (:func:`_unresolved_by_overlap`): a rank read off
    resamples that are all alike is not certain.

    >>> # a beats b on every problem; b and c have identical scores problem by problem
    >>> res = MetricResamples(("a", "b", "c"), np.array([0.9, 0.5, 0.5]),
    ...     np.array([[0.8, 0.4, 0.4], [0.95, 0.6, 0.6], [0.9, 0.5, 0.5]]),
    ...     np.array([3, 3, 3]), np.array([1, 1, 1]))
    >>> table = rank_intervals(res, higher_is_better=True)
    >>> # a's interval [0.81, 0.95] lies above b's and c's [0.40, 0.60]: both have rank_ub 2;
    >>> # b and c tie in every resample, so either may be second: rank interval 2-3
    >>> table[["teacher", "rank", "rank_lo", "rank_hi", "rank_ub", "not_separated"]].values.tolist()
    [['a', 1, 1, 1, 1, ''], ['b', 2, 2, 3, 2, 'c'], ['c', 2, 2, 3, 2, 'b']]
    """
    if not 0 < alpha < 1:
        raise ValueError(f"rank_intervals: alpha must be in (0, 1), got {alpha!r}")
    teachers = list(resamples.teachers)
    n_teachers = len(teachers)
    replicates = np.asarray(resamples.replicates, dtype=np.float64).reshape(-1, n_teachers)
    point_rank = replicate_ranks(resamples.point, higher_is_better)
    ranks = replicate_ranks(replicates, higher_is_better)
    value_lo, value_hi, rank_lo, rank_hi = (np.full(n_teachers, np.nan) for _ in range(4))
    for t in range(n_teachers):
        values = replicates[:, t][~np.isnan(replicates[:, t])]
        if len(values):
            if bias_bounds is None:
                value_lo[t], value_hi[t] = percentile_interval(values, alpha)
            else:  # a biased estimator (SOTU's entropy): the bias-corrected interval
                value_lo[t], value_hi[t] = bias_corrected_interval(
                    values, float(resamples.point[t]), alpha, bias_bounds
                )
            placed = ranks[:, t][~np.isnan(ranks[:, t])]
            rank_lo[t], rank_hi[t] = np.quantile(
                placed, [alpha / 2, 1 - alpha / 2], method="inverted_cdf"
            )
    n_traces = np.asarray(resamples.n_traces, dtype=np.float64).reshape(n_teachers)
    shown_lo, shown_hi, collapsed = shown_intervals(
        resamples.point, value_lo, value_hi, n_traces, share
    )
    with np.errstate(invalid="ignore"):
        if higher_is_better:
            beats = shown_lo[None, :] > shown_hi[:, None]  # [t, u]: u surely better than t
        else:
            beats = shown_hi[None, :] < shown_lo[:, None]
    has_interval = ~np.isnan(value_lo)
    rank_ub = np.where(has_interval, 1 + beats.sum(axis=1), np.nan)
    rank_lo, rank_hi = _unresolved_by_overlap(
        rank_lo, rank_hi, beats, collapsed | _always_tied(resamples.point, replicates),
        shown_lo, shown_hi, ~np.isnan(point_rank),
    )  # fmt: skip
    with np.errstate(invalid="ignore"):
        overlap = (rank_lo[None, :] <= rank_hi[:, None]) & (rank_lo[:, None] <= rank_hi[None, :])
    np.fill_diagonal(overlap, False)
    return pd.DataFrame(
        {
            "teacher": teachers,
            "value": resamples.point,
            "value_lo": value_lo,
            "value_hi": value_hi,
            "n_traces": resamples.n_traces,
            "n_students": resamples.n_students,
            "rank": pd.array(point_rank, dtype="Float64").astype("Int64"),
            "rank_lo": pd.array(rank_lo, dtype="Float64").astype("Int64"),
            "rank_hi": pd.array(rank_hi, dtype="Float64").astype("Int64"),
            "rank_ub": pd.array(rank_ub, dtype="Float64").astype("Int64"),
            "not_separated": [
                ", ".join(teachers[u] for u in np.flatnonzero(overlap[t]))
                for t in range(n_teachers)
            ],
        }
    )


def shown_intervals(
    point: np.ndarray,
    value_lo: np.ndarray,
    value_hi: np.ndarray,
    n_traces: np.ndarray,
    share: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The value intervals as the pages show them, and which bootstraps collapsed.

    A percentile interval of zero width from two traces or more collapsed (every trace scores
    the same); for a share the pages show the Wilson 95% interval of ``round(value · n)`` of
    ``n`` instead (:func:`collapsed_share_bounds`). From fewer than two traces no interval is
    shown: the value could be anywhere, so its bounds are -inf and +inf. Returns the shown
    lower and upper bounds and a mask of the collapsed (or one-trace) teachers.

    >>> lo, hi, collapsed = shown_intervals(np.array([0.0, 0.5, 0.2]), np.array([0.0, 0.3, 0.2]),
    ...     np.array([0.0, 0.7, 0.2]), np.array([14, 10, 1]), share=True)
    >>> lo.round(4).tolist(), hi.round(4).tolist(), collapsed.tolist()
    ([0.0, 0.3, -inf], [0.2153, 0.7, inf], [True, False, True])
    """
    shown_lo = np.asarray(value_lo, dtype=np.float64).copy()
    shown_hi = np.asarray(value_hi, dtype=np.float64).copy()
    n = np.asarray(n_traces, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        one = ~np.isnan(shown_lo) & (n < 2)
        collapsed = ~np.isnan(shown_lo) & (shown_hi - shown_lo <= _COLLAPSED) & ~one
    shown_lo[one], shown_hi[one] = -np.inf, np.inf
    for t in np.flatnonzero(collapsed):
        bounds = collapsed_share_bounds(point[t], shown_lo[t], shown_hi[t], n[t], share)
        if bounds is not None:
            shown_lo[t], shown_hi[t] = bounds
    return shown_lo, shown_hi, collapsed | one


#: An interval narrower than this has collapsed to a point (float noise aside).
_COLLAPSED = 1e-12


def collapsed_share_bounds(
    value: float, lo: float, hi: float, n_traces: float, share: bool
) -> tuple[float, float] | None:
    """The Wilson 95% interval of a share (``share``) whose bootstrap interval ``[lo, hi]``
    collapsed to a point, from ``n_traces >= 2`` traces: ``round(value · n)`` of ``n``
    (:func:`legival_core.stats.stats.wilson_interval`); None otherwise (an interval with
    width, not a share, fewer than two traces, or a missing number).

    >>> [round(b, 4) for b in collapsed_share_bounds(0.0, 0.0, 0.0, 14, share=True)]
    [0.0, 0.2153]
    >>> collapsed_share_bounds(0.0, 0.0, 0.0, 14, share=False) is None
    True
    """
    from legival_core.stats.stats import wilson_interval

    numbers = np.array([value, lo, hi, n_traces], dtype=np.float64)
    if not share or np.isnan(numbers).any() or n_traces < 2 or hi - lo > _COLLAPSED:
        return None
    n = int(n_traces)
    ci = wilson_interval(min(n, max(0, round(float(value) * n))), n)
    return ci.lo, ci.hi


def _always_tied(point: np.ndarray, replicates: np.ndarray) -> np.ndarray:
    """Per teacher, whether some other teacher has the same value (to 9 decimals) on the data
    and on every resample where both have one: the bootstrap can never order the two."""
    values = np.round(np.vstack([np.asarray(point, dtype=np.float64), replicates]), _RANK_DECIMALS)
    finite = ~np.isnan(values)
    both = finite[:, :, None] & finite[:, None, :]
    same = (values[:, :, None] == values[:, None, :]) | ~both
    tied = same.all(axis=0) & both[0]
    np.fill_diagonal(tied, False)
    return tied.any(axis=1)


def _unresolved_by_overlap(
    rank_lo: np.ndarray,
    rank_hi: np.ndarray,
    beats: np.ndarray,
    unresolved: np.ndarray,
    shown_lo: np.ndarray,
    shown_hi: np.ndarray,
    ranked: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Rank intervals widened where the bootstrap cannot order teachers.

    ``beats[t, u]`` says u's shown interval lies entirely on the better side of t's. The shown
    intervals alone allow t every rank from ``1 + #{u surely better}`` to
    ``n - #{u surely worse}`` (n = the ranked teachers). A teacher marked ``unresolved`` (its
    bootstrap collapsed, or it ties another in every resample) and every teacher whose shown
    interval overlaps an unresolved one's get the union of their bootstrap rank interval and
    that range; the others keep the bootstrap's.
    """
    n_ranked = int(ranked.sum())
    better = beats & ranked[None, :]
    worse = beats.T & ranked[None, :]
    allowed_lo = 1.0 + better.sum(axis=1)
    allowed_hi = n_ranked - worse.sum(axis=1)
    with np.errstate(invalid="ignore"):
        overlaps = (shown_lo[:, None] <= shown_hi[None, :]) & (
            shown_lo[None, :] <= shown_hi[:, None]
        )
    np.fill_diagonal(overlaps, False)
    touched = ranked & (unresolved | (overlaps & (unresolved & ranked)[None, :]).any(axis=1))
    touched &= ~np.isnan(rank_lo)
    return (
        np.where(touched, np.fmin(rank_lo, allowed_lo), rank_lo),
        np.where(touched, np.fmax(rank_hi, allowed_hi), rank_hi),
    )


def composite_scores(ranks: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """The weighted composite of rank scores along the last axis (teachers), in [0, 1].

    Each metric's rank r among the n teachers ranked on it (per row) becomes the score
    ``(n - r) / (n - 1)`` (1 = best, 0 = worst; 1 when n = 1); the composite is
    ``sum_m w_m s_m / sum_m w_m`` over the weighted metrics the teacher has a rank for, NaN
    when it has none. Works on one ranking (shape [T]) or on many at once ([B, T]).

    >>> ranks = {"accuracy": np.array([1.0, 2.0, 3.0]), "tokens": np.array([3.0, 1.0, 2.0])}
    >>> # scores: accuracy 1, 0.5, 0; tokens 0, 1, 0.5; weights 2:1 -> (2*s_acc + s_tok) / 3
    >>> composite_scores(ranks, {"accuracy": 2, "tokens": 1}).round(4).tolist()
    [0.6667, 0.6667, 0.1667]
    """
    total: np.ndarray | float = 0.0
    weight_sum: np.ndarray | float = 0.0
    for metric, weight in weights.items():
        if weight < 0 or not np.isfinite(weight):
            raise ValueError(f"composite_scores: weight of {metric!r} must be >= 0, got {weight}")
        if weight == 0 or metric not in ranks:
            continue
        rank = np.asarray(ranks[metric], dtype=np.float64)
        n = (~np.isnan(rank)).sum(axis=-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            score = np.where(
                n > 1, (n - rank) / np.maximum(n - 1, 1), np.where(np.isnan(rank), np.nan, 1.0)
            )
        present = ~np.isnan(score)
        total = total + np.where(present, weight * score, 0.0)
        weight_sum = weight_sum + np.where(present, weight, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.asarray(weight_sum) > 0, total / np.maximum(weight_sum, 1e-300), np.nan)


def composite_resamples(
    resamples: TeacherResamples,
    weights: Mapping[str, float],
    higher_is_better: Mapping[str, bool],
) -> MetricResamples:
    """The composite score (:func:`composite_scores`) on the data and on every resample.

    Each weighted metric is ranked within each resample (:func:`replicate_ranks`), so the
    composite of resample b uses the ranks of resample b: the same paired draws throughout.
    ``n_traces`` and ``n_students`` are the largest over the weighted metrics.
    """
    chosen = [m for m, w in weights.items() if w > 0 and m in resamples.metrics]
    if not chosen:
        raise ValueError("composite_resamples: no weighted metric has resamples")
    used = {m: resamples.metrics[m] for m in chosen}
    point = composite_scores(
        {m: replicate_ranks(r.point, higher_is_better[m]) for m, r in used.items()}, weights
    )
    replicates = composite_scores(
        {m: replicate_ranks(r.replicates, higher_is_better[m]) for m, r in used.items()}, weights
    )
    return MetricResamples(
        teachers=resamples.teachers,
        point=point,
        replicates=replicates,
        n_traces=np.max([r.n_traces for r in used.values()], axis=0),
        n_students=np.max([r.n_students for r in used.values()], axis=0),
    )


def frontier_shares(
    x: MetricResamples,
    y: MetricResamples,
    maximize: tuple[bool, bool],
    references: Sequence[str] = (),
) -> np.ndarray:
    """Per teacher, the share of resamples in which it is on the Pareto frontier of (x, y).

    The frontier of each resample is :func:`legival_core.stats.stats.pareto_mask` of that
    resample's values; resamples where a teacher has no value count as off the frontier.
    Resamples where no teacher has both values are left out: a Poisson bootstrap
    (:func:`problem_weights`) can weigh every problem 0 (probability e^-P for P problems), and
    such an empty resample says nothing about who is on the frontier.
    Teachers in ``references`` (reference teachers) take no part: they dominate no one and
    their share is NaN.

    >>> x = MetricResamples(("a", "b"), np.array([1.0, 2.0]),
    ...     np.array([[1.0, 2.0], [3.0, 2.0]]), np.array([1, 1]), np.array([1, 1]))
    >>> y = MetricResamples(("a", "b"), np.array([1.0, 2.0]),
    ...     np.array([[1.0, 2.0], [3.0, 2.0]]), np.array([1, 1]), np.array([1, 1]))
    >>> frontier_shares(x, y, (True, True)).tolist()  # b wins resample 0, a resample 1
    [0.5, 0.5]
    """
    from legival_core.stats.stats import pareto_mask

    xs = np.atleast_2d(np.asarray(x.replicates, dtype=np.float64)).copy()
    ys = np.atleast_2d(np.asarray(y.replicates, dtype=np.float64))
    if not len(xs):
        return np.full(len(x.teachers), np.nan)
    left_out = np.array([t in set(references) for t in x.teachers], dtype=bool)
    xs[:, left_out] = np.nan  # a NaN is never on the frontier and dominates no one
    defined = (~np.isnan(xs) & ~np.isnan(ys)).any(axis=1)
    xs, ys = xs[defined], ys[defined]
    if not len(xs):
        return np.full(len(x.teachers), np.nan)
    on_front = np.array([pareto_mask(xb, yb, maximize) for xb, yb in zip(xs, ys, strict=True)])
    return np.where(left_out, np.nan, on_front.mean(axis=0))


def resample_teachers(
    trace_efficiency: pd.DataFrame | None,
    trace_transfer: pd.DataFrame | None,
    metrics: Sequence[str],
    n_boot: int = 1000,
    seed: int = 0,
    references: Sequence[str] = (),
    include_references: bool = False,
    support: str = "common",
    outside: Sequence[str] = (),
) -> TeacherResamples:
    """Every metric of ``metrics`` per teacher, on the data and on ``n_boot`` paired resamples.

    Reference teachers (``references``, :mod:`legival_core.published.references`) are left out, so
    they take no place in the resampled ranks or frontiers, unless ``include_references``.
    Each metric is averaged over datasets under ``support`` as the rank table averages it
    (:func:`metric_resamples`); teachers in ``outside`` (reference teachers resampled for their
    value intervals but not ranked) do not narrow the common support.

    Problems are the (dataset, problem_id) pairs of both tables; one :func:`problem_weights`
    (Poisson, keyed by problem: :func:`problem_key`) serves every metric and every teacher, so
    each resample weighs a problem alike for all of them.
    :mod:`legival_core.rankings.board_partials` computes the same one chunk of problems at a
    time. ``accuracy``, ``tokens``, ``redundancy`` and
    ``backtracking`` come from ``trace_efficiency`` (one row per trace); ``fotu`` and
    ``regression_rate`` are means, and ``sotu`` the hazard entropy, over ``trace_transfer``
    (one row per trace and student, already filtered to the chosen students). Metrics whose
    table is absent or empty are left out.

    >>> eff = pd.DataFrame({"trace_id": ["1", "2", "3", "4"], "teacher": ["a", "a", "b", "b"],
    ...     "dataset": "d", "problem_id": ["p", "q", "p", "q"], "correct": [1, 1, 0, 1]})
    >>> res = resample_teachers(eff, None, ["accuracy"], n_boot=50, seed=0)
    >>> res.teachers, res.metrics["accuracy"].point.tolist()
    (('a', 'b'), [1.0, 0.5])
    >>> a = res.metrics["accuracy"].replicates[:, 0]  # a is right wherever a problem weighs
    >>> np.unique(a[~np.isnan(a)]).tolist()
    [1.0]
    >>> resample_teachers(eff, None, ["accuracy"], n_boot=5, references=["b"]).teachers
    ('a',)
    """
    from legival_core.published.references import keep_teachers

    frames = {
        name: keep_teachers(frame, references, include_references)
        if frame is not None
        else pd.DataFrame()
        for name, frame in (("efficiency", trace_efficiency), ("transfer", trace_transfer))
    }
    present = [f for f in frames.values() if len(f)]
    teachers = tuple(sorted({str(t) for f in present for t in pd.unique(f["teacher"].astype(str))}))
    keys = [
        pd.MultiIndex.from_arrays([f["dataset"].astype(str), f["problem_id"].astype(str)])
        for f in present
    ]
    problems = (
        keys[0].append(keys[1:]).unique().sort_values()
        if keys
        else pd.MultiIndex.from_tuples([("", "")])[:0]
    )
    problems.names = ["dataset", "problem_id"]
    draws = problem_weights(problems, n_boot, seed)
    out: dict[str, MetricResamples] = {}
    efficiency = frames["efficiency"]
    transfer = frames["transfer"]
    for metric in metrics:
        frame = efficiency if metric in EFFICIENCY_METRICS else transfer
        picked = metric_rows(metric, efficiency, transfer) if len(frame) else None
        if picked is None:
            continue
        rows, column, statistic = picked
        out[metric] = metric_resamples(
            rows, column, teachers, problems, draws, statistic, support, outside
        )
    return TeacherResamples(teachers=teachers, n_boot=int(n_boot), seed=int(seed), metrics=out)


def metric_rows(
    metric: str, efficiency: pd.DataFrame, transfer: pd.DataFrame
) -> tuple[pd.DataFrame, str, str] | None:
    """The rows a resampled ``metric`` is averaged over, the column holding its value and its
    statistic (``"mean"``, or ``"entropy"`` of the hazard bins for SOTU): ``trace_efficiency``'s
    rows for :data:`EFFICIENCY_METRICS` (accuracy = the ``correct`` column, as a number),
    ``trace_transfer``'s for :data:`TRANSFER_METRICS`; None when the table lacks the column.

    >>> eff = pd.DataFrame({"correct": [True, False]})
    >>> rows, column, statistic = metric_rows("accuracy", eff, pd.DataFrame())
    >>> rows[column].tolist(), statistic
    ([1.0, 0.0], 'mean')
    >>> metric_rows("sotu", eff, pd.DataFrame({"hazard_bin": [3]}))[1:]
    ('hazard_bin', 'entropy')
    """
    if metric in EFFICIENCY_METRICS:
        column = "correct" if metric == "accuracy" else metric
        if column not in efficiency:
            return None
        rows = efficiency.assign(
            value=pd.to_numeric(efficiency[column].astype("Float64"), errors="coerce")
        ).drop(columns=["student"], errors="ignore")
        return rows, "value", "mean"
    if metric in TRANSFER_METRICS:
        column = "hazard_bin" if metric == "sotu" else metric
        if column not in transfer:
            return None
        return transfer, column, "entropy" if metric == "sotu" else "mean"
    return None


def _teacher_subset(resamples: MetricResamples, keep: np.ndarray) -> MetricResamples:
    """The columns ``keep`` (a boolean mask over teachers) of ``resamples``."""
    replicates = np.asarray(resamples.replicates, dtype=np.float64).reshape(
        -1, len(resamples.teachers)
    )
    return MetricResamples(
        teachers=tuple(t for t, k in zip(resamples.teachers, keep, strict=True) if k),
        point=np.asarray(resamples.point)[keep],
        replicates=replicates[:, keep],
        n_traces=np.asarray(resamples.n_traces)[keep],
        n_students=np.asarray(resamples.n_students)[keep],
    )


def _value_intervals_only(
    resamples: MetricResamples, alpha: float, bias_bounds: tuple[float, float] | None = None
) -> pd.DataFrame:
    """:func:`rank_intervals` columns for teachers shown with their values but not ranked
    (reference teachers): value interval and n; rank columns missing."""
    table = rank_intervals(resamples, True, alpha, bias_bounds=bias_bounds)
    for column in ("rank", "rank_lo", "rank_hi", "rank_ub"):
        table[column] = pd.array([pd.NA] * len(table), dtype="Int64")
    table["not_separated"] = ""
    return table


def _without_values(resamples: MetricResamples, teachers: set[str]) -> MetricResamples:
    """``resamples`` with no value (NaN) for ``teachers``: they then take no rank in it."""
    if not teachers:
        return resamples
    gone = np.array([t in teachers for t in resamples.teachers], dtype=bool)
    replicates = np.asarray(resamples.replicates, dtype=np.float64).reshape(
        -1, len(resamples.teachers)
    )
    return MetricResamples(
        teachers=resamples.teachers,
        point=np.where(gone, np.nan, np.asarray(resamples.point, dtype=np.float64)),
        replicates=np.where(gone[None, :], np.nan, replicates),
        n_traces=resamples.n_traces,
        n_students=resamples.n_students,
    )


def board_unranked(board: pd.DataFrame, metrics: Sequence[str]) -> dict[str, list[str]]:
    """Per metric, the teachers of a rank table (:func:`legival_core.stats.stats.rank_table`)
    that have a value but no rank and are not reference teachers: under ``support="all"``,
    those that miss a dataset (:func:`interval_table`'s ``unranked``).

    >>> board = pd.DataFrame({"teacher": ["a", "b"], "fotu": [0.2, 0.1],
    ...     "fotu_rank": pd.array([1, None], dtype="Int64"), "reference": [False, False]})
    >>> board_unranked(board, ["fotu"])
    {'fotu': ['b']}
    """
    reference = (
        board["reference"].fillna(False).astype(bool)
        if "reference" in board
        else pd.Series(False, index=board.index)
    )
    out: dict[str, list[str]] = {}
    for metric in metrics:
        if metric not in board or f"{metric}_rank" not in board:
            continue
        apart = board[metric].notna() & board[f"{metric}_rank"].isna() & ~reference
        if apart.any():
            out[metric] = board.loc[apart, "teacher"].astype(str).tolist()
    return out


def interval_table(
    resamples: TeacherResamples,
    higher_is_better: Mapping[str, bool],
    weights: Mapping[str, float] | None = None,
    alpha: float = 0.05,
    references: Sequence[str] = (),
    unranked: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """:func:`rank_intervals` of every resampled metric (and of the composite, when weighted),
    stacked: one row per (metric, teacher), ``metric = "composite"`` for the composite.

    Teachers in ``references`` (reference teachers left out of the ranks) get their value
    interval and n from the same paired draws, but no rank, rank interval or composite, and
    take no place in the others' ranks (:mod:`legival_core.published.references`). So do, for
    one metric, the teachers ``unranked[metric]`` (those the rank table leaves unranked on it:
    under ``support="all"``, a teacher that misses a dataset; :func:`board_unranked`).

    >>> eff = pd.DataFrame({"trace_id": list("1234"), "teacher": ["a", "a", "b", "b"],
    ...     "dataset": "d", "problem_id": ["p", "q", "p", "q"], "correct": [1, 1, 0, 1],
    ...     "tokens": [10, 20, 10, 20]})
    >>> res = resample_teachers(eff, None, ["accuracy", "tokens"], n_boot=20)
    >>> table = interval_table(res, {"accuracy": True, "tokens": False}, {"accuracy": 1})
    >>> # a is right on both problems in every resample, but 2 of 2 is Wilson [34%, 100%]:
    >>> # it overlaps b's interval, so a's first place is not certain
    >>> table[["metric", "teacher", "rank", "rank_lo", "rank_hi"]].values.tolist()[:2]
    [['accuracy', 'a', 1, 1, 2], ['accuracy', 'b', 2, 1, 2]]
    >>> sorted(set(table.metric))
    ['accuracy', 'composite', 'tokens']
    >>> directions = {"accuracy": True, "tokens": False}
    >>> apart = interval_table(res, directions, {"accuracy": 1}, references=["b"])
    >>> apart[apart.metric != "tokens"][["metric", "teacher", "value", "rank"]].values.tolist()
    [['accuracy', 'a', 1.0, 1], ['accuracy', 'b', 0.5, <NA>], ['composite', 'a', 1.0, 1]]
    """
    wanted = {str(r) for r in references}
    is_reference = np.array([t in wanted for t in resamples.teachers], dtype=bool)
    frames = []
    composite_inputs: dict[str, MetricResamples] = {}
    for m, r in resamples.metrics.items():
        left = {str(t) for t in (unranked or {}).get(m, ())}
        apart = is_reference | np.array([t in left for t in resamples.teachers], dtype=bool)
        if not apart.all():
            ranked_here = _teacher_subset(r, ~apart)
            share = m in METRICS and METRICS[m].share
            table = rank_intervals(
                ranked_here, higher_is_better[m], alpha, share, BIAS_CORRECTED.get(m)
            )
            frames.append(table.assign(metric=m))
        if apart.any():
            alone = _value_intervals_only(_teacher_subset(r, apart), alpha, BIAS_CORRECTED.get(m))
            frames.append(alone.assign(metric=m))
        composite_inputs[m] = _without_values(_teacher_subset(r, ~is_reference), left)
    ranked = TeacherResamples(
        teachers=tuple(t for t in resamples.teachers if t not in wanted),
        n_boot=resamples.n_boot,
        seed=resamples.seed,
        metrics=composite_inputs,
    )
    if weights and any(w > 0 and m in ranked.metrics for m, w in weights.items()):
        composite = composite_resamples(ranked, weights, higher_is_better)
        frames.append(rank_intervals(composite, True, alpha).assign(metric="composite"))
    if not frames:
        return pd.DataFrame(columns=["metric", "teacher"])
    table = pd.concat(frames, ignore_index=True)
    return table[["metric", *[c for c in table.columns if c != "metric"]]]


def agreeing_intervals(intervals: pd.DataFrame, board: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``intervals`` whose metric's point values equal the ``board``'s values.

    An interval is only shown around the number it belongs to. The resamples recompute each
    metric from the per-trace tables with the paper profile's definitions; a store whose
    teacher table was made otherwise (the ``release`` profile) or has gone stale gives other
    point values, and that metric's rows are dropped (relative tolerance 1e-9). The composite is
    kept only when every metric is.

    >>> board = pd.DataFrame({"teacher": ["a", "b"], "fotu": [0.5, 0.2], "tokens": [10.0, 20]})
    >>> intervals = pd.DataFrame({"metric": ["fotu", "fotu", "tokens", "tokens"],
    ...     "teacher": ["a", "b", "a", "b"], "value": [0.5, 0.2, 10.0, 25.0]})
    >>> sorted(set(agreeing_intervals(intervals, board)["metric"]))
    ['fotu']
    """
    if intervals.empty:
        return intervals
    shown = board.set_index(board["teacher"].astype(str))
    keep = []
    for metric, rows in intervals.groupby("metric", sort=False):
        if metric == "composite" or metric not in shown:
            continue
        expected = shown[metric].reindex(rows["teacher"].astype(str))
        if _same_values(rows["value"], expected):
            keep.append(metric)
    has_composite = (intervals["metric"] == "composite").any()
    if has_composite and set(intervals["metric"]) - {"composite"} <= set(keep):
        keep.append("composite")
    return intervals[intervals["metric"].isin(keep)].reset_index(drop=True)


def _same_values(got: object, expected: object) -> bool:
    """Equal to a relative 1e-9, NaN matching NaN."""
    a = np.asarray(got, dtype=np.float64)
    b = np.asarray(expected, dtype=np.float64)
    return bool((np.isclose(a, b, rtol=1e-9, atol=0.0) | (np.isnan(a) & np.isnan(b))).all())


def points_agree(resampled: MetricResamples, board: pd.DataFrame, metric: str) -> bool:
    """Whether the resampled metric's point values are ``board[metric]`` for its teachers
    (see :func:`agreeing_intervals` for why this is checked).

    >>> res = MetricResamples(("a",), np.array([0.5]), np.zeros((1, 1)), np.array([1]),
    ...     np.array([1]))
    >>> points_agree(res, pd.DataFrame({"teacher": ["a"], "fotu": [0.5]}), "fotu")
    True
    """
    shown = board.set_index(board["teacher"].astype(str))[metric]
    return _same_values(resampled.point, shown.reindex(list(resampled.teachers)))


#: Every metric :func:`resample_teachers` can resample: what the metrics stage stores, so any
#: board's metrics are a subset (each metric's resamples do not depend on the others).
RESAMPLED_METRICS = EFFICIENCY_METRICS + TRANSFER_METRICS


def stored_board_resamples(
    trace_efficiency: pd.DataFrame | None,
    trace_transfer: pd.DataFrame | None,
    n_boot: int,
    seed: int,
    references: Sequence[str] = (),
    outside: Sequence[str] = (),
) -> TeacherResamples:
    """:func:`resample_teachers` for every metric of :data:`RESAMPLED_METRICS` on every dataset
    and student (the leaderboard's default selection), as the metrics stage stores it, each
    averaged over the common support. The weights depend on the problems only, so a board's
    metrics are picked out of it unchanged (:func:`resamples_from_frame`). With
    ``references`` those teachers are left out (the Pareto page's draws); the leaderboard
    resamples them too, as ``outside`` (they do not narrow the common support)."""
    return resample_teachers(
        trace_efficiency,
        trace_transfer,
        RESAMPLED_METRICS,
        n_boot=n_boot,
        seed=seed,
        references=references,
        outside=outside,
    )


def resamples_frame(resamples: TeacherResamples) -> pd.DataFrame:
    """``resamples`` as a frame to store: one row per (metric, teacher) with its point value,
    counts and replicates (a list of ``n_boot`` floats), in the teachers' order.

    >>> eff = pd.DataFrame({"trace_id": ["1", "2", "3"], "teacher": ["a", "a", "b"],
    ...     "dataset": "d", "problem_id": ["p", "q", "p"], "correct": [1, 0, 1]})
    >>> res = resample_teachers(eff, None, ["accuracy"], n_boot=4, seed=0)
    >>> back = resamples_from_frame(resamples_frame(res), ["accuracy"])
    >>> a, b = back.metrics["accuracy"], res.metrics["accuracy"]
    >>> np.array_equal(a.replicates, b.replicates, equal_nan=True), a.teachers == b.teachers
    (True, True)
    """
    frames = []
    for metric, one in resamples.metrics.items():
        replicates = np.asarray(one.replicates, dtype=np.float64).reshape(-1, len(one.teachers))
        frames.append(
            pd.DataFrame(
                {
                    "metric": metric,
                    "teacher": list(one.teachers),
                    "point": np.asarray(one.point, dtype=np.float64),
                    "n_traces": np.asarray(one.n_traces),
                    "n_students": np.asarray(one.n_students),
                    "replicates": list(replicates.T),
                    "n_boot": resamples.n_boot,
                    "seed": resamples.seed,
                    "teachers": "\n".join(resamples.teachers),
                }
            )
        )
    if not frames:
        return pd.DataFrame(
            {"metric": [], "teacher": [], "n_boot": resamples.n_boot, "seed": resamples.seed}
        )
    return pd.concat(frames, ignore_index=True)


def resamples_from_frame(frame: pd.DataFrame, metrics: Sequence[str]) -> TeacherResamples:
    """The :class:`TeacherResamples` of ``metrics`` (those :func:`resamples_frame` stored, in
    the order of ``metrics``) from a stored frame."""
    out: dict[str, MetricResamples] = {}
    teachers: tuple[str, ...] = ()
    for metric in metrics:
        rows = frame[frame["metric"] == metric]
        if rows.empty:
            continue
        teachers = tuple(str(rows["teachers"].iloc[0]).split("\n"))
        mine = tuple(str(t) for t in rows["teacher"])
        out[metric] = MetricResamples(
            teachers=mine,
            point=rows["point"].to_numpy(dtype=np.float64),
            replicates=np.stack([np.asarray(r, dtype=np.float64) for r in rows["replicates"]]).T,
            n_traces=rows["n_traces"].to_numpy(),
            n_students=rows["n_students"].to_numpy(),
        )
    if not teachers and len(frame) and "teachers" in frame:
        teachers = tuple(str(frame["teachers"].iloc[0]).split("\n"))
    n_boot = int(frame["n_boot"].iloc[0]) if len(frame) else 0
    seed = int(frame["seed"].iloc[0]) if len(frame) else 0
    return TeacherResamples(teachers=teachers, n_boot=n_boot, seed=seed, metrics=out)
