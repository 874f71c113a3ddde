"""Rankings and statistics over metric tables (docs/rankings.md).

Small pure functions on pandas DataFrames:

* :func:`rank_table` - rank 1 = best per metric, after averaging over datasets, with the change
  of each rank against the accuracy rank;
* :func:`spearman_matrix`, :func:`partial_spearman` - rank correlations between metrics (at model
  level or trace level: only the input table differs), the partial one controlling for length;
* :func:`rank_stability` - Spearman correlation between the rankings a metric gives on each
  dataset (or each student);
* :func:`bootstrap_ci` - a seeded percentile bootstrap interval;
* :func:`pareto_front` - the non-dominated rows on two metrics.

Reference: Legi-Val, "Measuring Reasoning Trace Legibility: Can Those Who Understand Teach?"
(arXiv 2603.20508), correlation and ranking analyses.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from legival_core.stats.support import ALL_DATASETS, teacher_means
from legival_core.store.schema import require_columns


class Correlation(NamedTuple):
    """A correlation coefficient with its two-sided p-value, the number of rows used and how
    the p-value was found (:data:`EXACT_METHOD` or :data:`T_METHOD`)."""

    rho: float
    pvalue: float
    n: int
    method: str = "t"


#: Up to this many pairs Spearman's p-value is the exact permutation p (10! = 3,628,800
#: orderings, counted by :func:`spearman_permutation_p` without listing them).
EXACT_SPEARMAN_MAX_N = 10
#: ``Correlation.method`` of an exact permutation p-value.
EXACT_METHOD = "exact permutation"
#: ``Correlation.method`` of a p-value from the t approximation (n - 2 degrees of freedom).
T_METHOD = "t"
#: Below this many points a p-value is shown but earns no significance mark: at n = 4 the
#: smallest exact two-sided p is 2/24 = 0.083, so a star would only ever come from an
#: approximation.
MIN_N_FOR_SIGNIFICANCE = 5


class BootstrapCI(NamedTuple):
    """A statistic on the full sample and its percentile bootstrap interval."""

    estimate: float
    lo: float
    hi: float


def _as_list(columns: str | Sequence[str]) -> list[str]:
    return [columns] if isinstance(columns, str) else list(columns)


def _numeric(df: pd.DataFrame, columns: Sequence[str], table: str) -> pd.DataFrame:
    out = {}
    for col in columns:
        values = pd.to_numeric(df[col], errors="coerce")
        bad = values.isna() & df[col].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(
                f"{table}, row {row}, field {col!r}: {df[col].iloc[row]!r} is not a number"
            )
        out[col] = values.astype(np.float64)
    return pd.DataFrame(out, index=df.index)


# ---------------------------------------------------------------------------------------------
# Rank tables
# ---------------------------------------------------------------------------------------------


def rank_table(
    df: pd.DataFrame,
    metrics: Mapping[str, bool],
    by: str | Sequence[str] = "teacher",
    accuracy: str = "accuracy",
    average_over: str | None = "dataset",
    *,
    method: str = "min",
    decimals: int | None = 9,
    references: Sequence[str] = (),
    support: str = "common",
) -> pd.DataFrame:
    """Rank models on each metric, 1 = best, and show how each rank moves against accuracy.

    Each metric is first averaged over ``average_over`` (the datasets) per ``by`` group, under
    ``support`` (:mod:`legival_core.stats.support`): by default over the datasets on which every
    ranked model has a value of that metric; with ``support="all"`` over every dataset, and a
    model that misses one gets no rank on that metric. Then
    ``<metric>_rank`` ranks the groups (descending when ``metrics[metric]`` is True, i.e.
    higher is better; ascending otherwise) and ``<metric>_change = accuracy_rank -
    <metric>_rank`` (positive: the model does better on this metric than its accuracy
    suggests). Ties share the best rank (``method="min"``: 1, 2, 2, 4); averages are rounded to
    ``decimals`` before ranking so that float noise in a mean (e.g. 26.1 / 3 reached by two
    different sums) cannot split a tie.

    Args:
        df: one row per (model, dataset), or per model when ``average_over`` is None.
        metrics: column -> True when higher is better.
        by: the model column(s).
        accuracy: the accuracy column (higher is better); added to ``metrics`` if absent.
        average_over: the column averaged over first, or None.
        method: ``pandas.Series.rank`` tie method.
        decimals: rounding before ranking; None = none.
        references: reference teachers (:mod:`legival_core.published.references`), matched on the
            first ``by`` column: their rows keep their means but get no rank and no change, sort
            last, and do not count in the others' ranks nor narrow the common support.
        support: ``"common"`` (the default) or ``"all"``, see above.

    Returns:
        One row per model, sorted by accuracy rank: the ``by`` columns, ``n_<average_over>``
        (the datasets of the selection), then per metric its mean, ``_rank`` (Int64) and
        ``_change`` (Int64; not for accuracy); with ``average_over``, last, per metric
        ``_datasets`` (the datasets its mean is over) and ``_covered`` (those the model has a
        value on).

    Reference: Legi-Val (arXiv 2603.20508), rank table; docs/rankings.md.

    >>> df = pd.DataFrame({"teacher": ["a", "a", "b", "b", "c", "c"],
    ...     "dataset": ["X", "Y"] * 3, "accuracy": [90, 70, 60, 60, 80, 90],
    ...     "tokens": [900, 1100, 300, 500, 2000, 2000]})
    >>> t = rank_table(df, {"tokens": False})
    >>> t[["teacher", "accuracy", "accuracy_rank", "tokens_rank", "tokens_change"]]
      teacher  accuracy  accuracy_rank  tokens_rank  tokens_change
    0       c      85.0              1            3             -2
    1       a      80.0              2            2              0
    2       b      60.0              3            1              2

    With ``c`` as a reference the two others are ranked 1..2 and ``c`` gets none:

    >>> t = rank_table(df, {"tokens": False}, references=["c"])
    >>> t[["teacher", "accuracy_rank", "tokens_rank"]].values.tolist()
    [['a', 1, 2], ['b', 2, 1], ['c', <NA>, <NA>]]
    """
    keys = _as_list(by)
    directions = dict(metrics)
    directions.setdefault(accuracy, True)
    table = "rank_table input"
    group_cols = keys + ([average_over] if average_over else [])
    require_columns(df, [*group_cols, *directions], table)
    values = _numeric(df, list(directions), table)
    frame = pd.concat(
        [df[group_cols].reset_index(drop=True), values.reset_index(drop=True)], axis=1
    )

    duplicated = frame.duplicated(group_cols, keep="first").to_numpy()
    if duplicated.any():
        row = int(np.flatnonzero(duplicated)[0])
        what = ", ".join(f"{c}={frame[c].iloc[row]!r}" for c in group_cols)
        raise ValueError(f"{table}, row {row}: more than one row for {what}")

    left_out = [str(r) for r in references]
    if average_over and len(keys) == 1:
        out = teacher_means(
            frame, list(directions), by=keys[0], over=average_over, support=support,
            outside=left_out,
        )  # fmt: skip
        out[keys[0]] = out[keys[0]].astype(frame[keys[0]].dtype, copy=False)
    else:
        grouped = frame.groupby(keys, sort=True, observed=True, dropna=False)
        out = grouped[list(directions)].mean()
        if average_over:
            out.insert(0, f"n_{average_over}", grouped[average_over].nunique())
        out = out.reset_index()

    ranked_rows = ~out[keys[0]].astype(str).isin(left_out).to_numpy()

    def rank(column: str) -> pd.Series:
        series = out[column] if decimals is None else out[column].round(decimals)
        mine = ranked_rows
        if average_over and len(keys) == 1 and support == ALL_DATASETS:
            # averaged over fewer datasets than the others: listed apart, not ranked
            mine = mine & (out[f"{column}_covered"] == out[f"n_{average_over}"]).to_numpy()
        ranked = series[mine].rank(ascending=not directions[column], method=method)
        return ranked.reindex(out.index).astype("Int64")

    acc_rank = rank(accuracy)
    columns = [*keys] + ([f"n_{average_over}"] if average_over else [])
    result = out[columns].copy()
    for column in [accuracy, *[c for c in directions if c != accuracy]]:
        result[column] = out[column]
        result[f"{column}_rank"] = acc_rank if column == accuracy else rank(column)
        if column != accuracy:
            result[f"{column}_change"] = acc_rank - result[f"{column}_rank"]
    for column in [accuracy, *[c for c in directions if c != accuracy]]:
        for part in ("datasets", "covered"):
            if f"{column}_{part}" in out:
                result[f"{column}_{part}"] = out[f"{column}_{part}"]
    order = [f"{accuracy}_rank", *keys]
    return result.sort_values(order, kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# Correlations
# ---------------------------------------------------------------------------------------------


def _pearson_p(r: float, n: int, dof: int) -> float:
    from scipy import stats

    if not np.isfinite(r) or dof < 1:
        return float("nan")
    if abs(r) >= 1.0:
        return 0.0
    t = r * np.sqrt(dof / (1.0 - r * r))
    return float(2.0 * stats.t.sf(abs(t), dof))


def spearman_permutation_p(
    x_ranks: Sequence[float] | np.ndarray, y_ranks: Sequence[float] | np.ndarray
) -> float:
    """Exact two-sided permutation p-value of Spearman's rho.

    Under the null hypothesis every one of the n! pairings of the ``y`` ranks with the ``x``
    ranks is equally likely. rho is an increasing affine function of ``S = sum_i x_i y_i`` (the
    rank means and spreads do not change under a pairing), so

        p = #{pairings with |S - E[S]| >= |S_obs - E[S]|} / n!

    The pairings are counted, not listed: ranks are doubled to whole numbers (average ranks of
    ties are halves) and a dynamic programme over the subsets of ``y`` already paired keeps how
    many partial pairings reach each partial sum (2^n subsets, fine up to n = 10 or so).

    Args:
        x_ranks, y_ranks: the two rank vectors (average ranks for ties), equal length >= 1.

    Reference: Hollander, Wolfe and Chicken, *Nonparametric Statistical Methods* (3rd ed.),
    section 8.5, the exact null distribution of Spearman's statistic.

    >>> spearman_permutation_p([1, 2, 3, 4], [1, 2, 3, 4])  # identity and reversal: 2 of 24
    0.08333333333333333
    """
    a = np.rint(2 * np.asarray(x_ranks, dtype=np.float64)).astype(np.int64)
    b = np.rint(2 * np.asarray(y_ranks, dtype=np.float64)).astype(np.int64)
    n = len(a)
    if n != len(b) or n == 0:
        raise ValueError("spearman_permutation_p: two rank vectors of the same length >= 1")
    observed = int(a @ b)
    top = int(np.sort(a) @ np.sort(b))  # the largest S any pairing reaches
    # 2 n S, so that the mean n E[S] = sum(a) sum(b) / n stays a whole number
    centre = int(a.sum()) * int(b.sum())
    counts: dict[int, np.ndarray] = {0: np.zeros(top + 1, dtype=np.float64)}
    counts[0][0] = 1.0  # exact: at most 10! = 3.6e6 pairings, far below 2**53
    for position in range(n):
        grown: dict[int, np.ndarray] = {}
        for used, reach in counts.items():
            for j in range(n):
                if used >> j & 1:
                    continue
                step = int(a[position] * b[j])
                target = grown.setdefault(used | 1 << j, np.zeros(top + 1, dtype=np.float64))
                target[step:] += reach[: top + 1 - step]
        counts = grown
    (distribution,) = counts.values()
    sums = np.arange(top + 1, dtype=np.int64)
    extreme = np.abs(n * sums - centre) >= abs(n * observed - centre)
    return float(distribution[extreme].sum() / distribution.sum())


def _finite_pairs(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, name: str
) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``y`` as floats, the pairs where either is NaN or infinite dropped."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape:
        raise ValueError(f"{name}: x and y differ in length ({xs.size} vs {ys.size})")
    keep = np.isfinite(xs) & np.isfinite(ys)
    return xs[keep], ys[keep]


def _rank_correlation(x_ranks: np.ndarray, y_ranks: np.ndarray) -> float:
    """Pearson's r of two rank vectors, rounded off at 1e-15 and held in [-1, 1]."""
    rho = float(np.corrcoef(x_ranks, y_ranks)[0, 1])
    return float(np.clip(round(rho, 15), -1.0, 1.0))


def spearman_rho(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *, min_pairs: int = 3
) -> float:
    """Spearman's ρ alone: the Pearson correlation of the average ranks of ``x`` and ``y``,
    on the pairs where both are finite. NaN with fewer than ``min_pairs`` pairs or a constant
    side. The one implementation of ρ: :func:`spearman` adds its p-value, the robustness
    report and the workload audits call this.

    Without ties this is 1 − 6 Σ d² / (n (n² − 1)), d the rank differences.

    >>> spearman_rho([1, 2, 3, 4], [10, 20, 40, 30])  # 1 − 6·(0+0+1+1)/(4·15)
    0.8
    >>> spearman_rho([1, 2, float("nan"), 3], [3, 2, 7, 1])  # the NaN pair dropped
    -1.0
    >>> spearman_rho([1, 2], [1, 2]), spearman_rho([1, 2], [1, 2], min_pairs=2)
    (nan, 1.0)
    """
    from scipy import stats

    xs, ys = _finite_pairs(x, y, "spearman_rho")
    if len(xs) < max(2, min_pairs) or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return float("nan")
    return _rank_correlation(stats.rankdata(xs), stats.rankdata(ys))


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> Correlation:
    """Spearman's rho of two sequences (pairs with a NaN or an infinity dropped) and its
    two-sided p-value.

    rho is :func:`spearman_rho`. The p-value is exact for up to
    :data:`EXACT_SPEARMAN_MAX_N` pairs (:func:`spearman_permutation_p`); above, it uses the t
    statistic ``rho sqrt((n - 2) / (1 - rho^2))`` with n - 2 degrees of freedom (as scipy does).
    ``method`` says which. NaN with fewer than 3 pairs or a constant input.

    >>> spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]).rho  # 1 - 6*4 / (5*24)
    0.8
    >>> spearman([1, 2, 3, 4], [10, 20, 30, 40])  # 2 of the 24 pairings are as extreme
    Correlation(rho=1.0, pvalue=0.08333333333333333, n=4, method='exact permutation')
    """
    from scipy import stats

    xs, ys = _finite_pairs(x, y, "spearman")
    n = len(xs)
    if n < 3 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return Correlation(float("nan"), float("nan"), n)
    x_ranks, y_ranks = stats.rankdata(xs), stats.rankdata(ys)
    rho = _rank_correlation(x_ranks, y_ranks)
    if n <= EXACT_SPEARMAN_MAX_N:
        return Correlation(rho, spearman_permutation_p(x_ranks, y_ranks), n, EXACT_METHOD)
    return Correlation(rho, _pearson_p(rho, n, n - 2), n, T_METHOD)


def spearman_matrix(df: pd.DataFrame, columns: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Spearman rho and p-value between every pair of ``columns`` (pairwise complete rows).

    At model level pass one row per model (metrics averaged over datasets); at trace level
    one row per trace. Returns ``(rho, p)``, two square DataFrames indexed by the columns;
    the diagonal is rho 1 with the p of a perfect correlation at that n (NaN for a constant
    column).

    Reference: Legi-Val (arXiv 2603.20508), correlation analysis; docs/rankings.md.

    >>> df = pd.DataFrame({"a": [1, 2, 3, 4, 5], "b": [2, 1, 4, 3, 5], "c": [5, 4, 3, 2, 1]})
    >>> rho, p = spearman_matrix(df, ["a", "b", "c"])
    >>> rho.round(2).values.tolist()
    [[1.0, 0.8, -1.0], [0.8, 1.0, -0.8], [-1.0, -0.8, 1.0]]
    """
    cols = list(columns)
    require_columns(df, cols, "spearman_matrix input")
    values = _numeric(df, cols, "spearman_matrix input")
    rho = pd.DataFrame(np.nan, index=cols, columns=cols)
    pvalue = pd.DataFrame(np.nan, index=cols, columns=cols)
    for i, a in enumerate(cols):
        for b in cols[i:]:
            result = spearman(values[a].to_numpy(), values[b].to_numpy())
            rho.loc[a, b] = rho.loc[b, a] = result.rho
            pvalue.loc[a, b] = pvalue.loc[b, a] = result.pvalue
    return rho, pvalue


def pairwise_counts(
    df: pd.DataFrame, columns: Sequence[str], control: str | Sequence[str] = ()
) -> pd.DataFrame:
    """How many rows each coefficient of :func:`spearman_matrix` (or, with ``control``, of a
    partial matrix) is computed from: n[a, b] = rows where a, b and every control are numbers.

    >>> df = pd.DataFrame({"a": [1, 2, None, 4], "b": [1, None, 3, 4], "c": [1, 2, 3, None]})
    >>> pairwise_counts(df, ["a", "b", "c"]).values.tolist()
    [[3, 2, 2], [2, 3, 2], [2, 2, 3]]
    >>> pairwise_counts(df, []).shape  # no column left to correlate: an empty matrix
    (0, 0)
    """
    controls = _as_list(control)
    cols = list(columns)
    require_columns(df, [*cols, *controls], "pairwise_counts input")
    present = _numeric(df, [*dict.fromkeys([*cols, *controls])], "pairwise_counts input").notna()
    base = present[controls].all(axis=1).to_numpy() if controls else np.ones(len(df), bool)
    # dtype=bool: with no columns pandas would hand back an empty float array
    mask = present[cols].to_numpy(dtype=bool) & base[:, None]
    counts = mask.T.astype(np.int64) @ mask.astype(np.int64)
    return pd.DataFrame(counts, index=cols, columns=cols)


def partial_spearman(
    df: pd.DataFrame, x: str, y: str, control: str | Sequence[str] = "tokens"
) -> Correlation:
    """Spearman correlation of ``x`` and ``y`` with ``control`` (e.g. token length) held fixed.

    All columns are rank-transformed (average ranks); the ranks of ``x`` and of ``y`` are each
    regressed (least squares with an intercept) on the ranks of the control(s); rho is the
    Pearson correlation of the two residual vectors. With one control this equals
    ``(r_xy - r_xz r_yz) / sqrt((1 - r_xz^2)(1 - r_yz^2))``. The p-value uses the t statistic
    with ``n - 2 - n_controls`` degrees of freedom (n - 3 for one control). Rows with a NaN in
    any of the columns are dropped.

    Reference: Legi-Val (arXiv 2603.20508), partial correlations controlling for length.

    >>> df = pd.DataFrame({"x": [1, 2, 3, 4, 5], "y": [2, 1, 4, 3, 5], "z": [1, 3, 2, 5, 4]})
    >>> round(partial_spearman(df, "x", "y", control="z").rho, 4)  # (0.8 - 0.8*0.3) / ...
    0.9784
    """
    from scipy import stats

    controls = _as_list(control)
    cols = [x, y, *controls]
    require_columns(df, cols, "partial_spearman input")
    values = _numeric(df, cols, "partial_spearman input").dropna()
    n = len(values)
    dof = n - 2 - len(controls)
    if dof < 1:
        return Correlation(float("nan"), float("nan"), n)
    ranks = {c: stats.rankdata(values[c].to_numpy()) for c in cols}
    design = np.column_stack([np.ones(n), *[ranks[c] for c in controls]])

    def residual(column: str) -> np.ndarray:
        coef, *_ = np.linalg.lstsq(design, ranks[column], rcond=None)
        return ranks[column] - design @ coef

    rx, ry = residual(x), residual(y)
    scale = np.sqrt((rx @ rx) * (ry @ ry))
    if scale <= 1e-12 * n:
        return Correlation(float("nan"), float("nan"), n)
    rho = float(np.clip(rx @ ry / scale, -1.0, 1.0))
    return Correlation(rho, _pearson_p(rho, n, dof), n, T_METHOD)


def _by_across(
    df: pd.DataFrame, metric: str, by: str, across: str
) -> tuple[pd.DataFrame, list[object]]:
    """The mean of ``metric`` per ``by`` (rows) and ``across`` level (columns, named as strings),
    and the levels as they were: what :func:`rank_stability` and its counts both rank."""
    require_columns(df, [metric, by, across], "rank_stability input")
    values = _numeric(df, [metric], "rank_stability input")[metric]
    frame = pd.DataFrame({by: df[by].to_numpy(), across: df[across].to_numpy(), metric: values})
    wide = frame.pivot_table(
        index=by, columns=across, values=metric, aggfunc="mean", observed=True, sort=True
    )
    levels = list(wide.columns)
    wide.columns = [str(c) for c in levels]
    return wide, levels


def rank_stability(
    df: pd.DataFrame,
    metric: str,
    by: str = "teacher",
    across: str = "dataset",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """How stable a metric's ranking of models is across datasets (or students).

    For every pair of levels of ``across`` (e.g. MATH vs GPQA), Spearman's rho between the
    values of ``metric`` for the ``by`` groups present in both (rho between the two rankings;
    the direction of "better" does not matter). Several rows per (by, across) cell, such as
    datasets when ``across="student"``, are averaged first.

    Returns ``(rho, p)``: square DataFrames indexed by the levels of ``across``.

    Reference: Legi-Val (arXiv 2603.20508), cross-dataset / cross-student rank stability.

    >>> df = pd.DataFrame({"teacher": list("abcd") * 2, "dataset": ["X"] * 4 + ["Y"] * 4,
    ...     "fotu": [0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.7, 0.6]})
    >>> rank_stability(df, "fotu")[0].values.tolist()
    [[1.0, -1.0], [-1.0, 1.0]]
    """
    wide, levels = _by_across(df, metric, by, across)
    rho, pvalue = spearman_matrix(wide, list(wide.columns))
    rho.index = rho.columns = pvalue.index = pvalue.columns = pd.Index(levels, name=across)
    return rho, pvalue


def rank_stability_counts(
    df: pd.DataFrame, metric: str, by: str = "teacher", across: str = "dataset"
) -> pd.DataFrame:
    """How many ``by`` groups (teachers) each coefficient of :func:`rank_stability` rests on:
    n[a, b] = groups with a value of ``metric`` on both levels a and b of ``across``.

    >>> df = pd.DataFrame({"teacher": list("abcd") + list("abc"), "dataset": ["X"] * 4 + ["Y"] * 3,
    ...     "fotu": [0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.7]})
    >>> rank_stability_counts(df, "fotu").values.tolist()
    [[4, 3], [3, 3]]
    """
    wide, levels = _by_across(df, metric, by, across)
    counts = pairwise_counts(wide, list(wide.columns))
    counts.index = counts.columns = pd.Index(levels, name=across)
    return counts


def significance_marks(p: float, n: int | None = None) -> str:
    """``***`` p < 0.001, ``**`` p < 0.01, ``*`` p < 0.05, else empty; always empty with fewer
    than :data:`MIN_N_FOR_SIGNIFICANCE` points (a handful of teachers cannot carry a star).

    >>> [significance_marks(p) for p in (0.0005, 0.005, 0.03, 0.2, float("nan"))]
    ['***', '**', '*', '', '']
    >>> significance_marks(0.0005, n=4)
    ''
    """
    if p is None or not np.isfinite(p):
        return ""
    if n is not None and n < MIN_N_FOR_SIGNIFICANCE:
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


def holm_adjust(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control over the tests given).

    With the m defined p-values sorted ascending, p_(i) is multiplied by m - i + 1 (i from 1),
    a running maximum keeps the order, and nothing exceeds 1. A NaN (an undefined test) is not
    one of the m tests and stays NaN. Comparing the adjusted p to 0.05 is Holm's procedure at
    level 0.05.

    Reference: Holm (1979), "A simple sequentially rejective multiple test procedure".

    >>> holm_adjust([0.01, 0.04, 0.03, float("nan")]).round(3).tolist()
    [0.03, 0.06, 0.06, nan]
    """
    values = np.asarray(pvalues, dtype=np.float64)
    out = np.full(values.shape, np.nan)
    defined = np.flatnonzero(np.isfinite(values))
    m = len(defined)
    if m == 0:
        return out
    order = defined[np.argsort(values[defined], kind="stable")]
    scaled = values[order] * (m - np.arange(m))
    out[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return out


# ---------------------------------------------------------------------------------------------
# Intervals of proportions
# ---------------------------------------------------------------------------------------------


class ProportionCI(NamedTuple):
    """A share ``successes / n`` with its interval; every field NaN when n is 0."""

    estimate: float
    lo: float
    hi: float
    n: int


def wilson_interval(successes: int, n: int, alpha: float = 0.05) -> ProportionCI:
    """Wilson score interval of a proportion: good coverage even at n = 1 or a share of 0 or 1.

    With ``p = k / n`` and z the ``1 - alpha/2`` normal quantile::

        centre = (p + z^2 / (2n)) / (1 + z^2 / n)
        half   = z sqrt(p (1 - p) / n + z^2 / (4 n^2)) / (1 + z^2 / n)
        [centre - half, centre + half]

    Unlike a bootstrap (which gives [0, 0] for one failure) it never collapses to a point.
    n = 0 (e.g. a precision with no positive prediction) is undefined: all NaN.

    Reference: E. B. Wilson, "Probable inference, the law of succession, and statistical
    inference", JASA 22 (1927); Brown, Cai and DasGupta, Statistical Science 16 (2001).

    >>> ci = wilson_interval(0, 1)  # z = 1.96: centre = half = 1.9208 / 4.8416
    >>> round(ci.lo, 4), round(ci.hi, 4)
    (0.0, 0.7935)
    """
    from scipy import stats

    k, total = int(successes), int(n)
    if total < 0 or not 0 <= k <= max(total, 0):
        raise ValueError(f"wilson_interval: need 0 <= successes <= n, got {k} of {total}")
    if not 0 < alpha < 1:
        raise ValueError(f"wilson_interval: alpha must be in (0, 1), got {alpha!r}")
    if total == 0:
        return ProportionCI(float("nan"), float("nan"), float("nan"), 0)
    z = float(stats.norm.ppf(1 - alpha / 2))
    share = k / total
    scale = 1 + z * z / total
    centre = (share + z * z / (2 * total)) / scale
    half = z * np.sqrt(share * (1 - share) / total + z * z / (4 * total * total)) / scale
    # clipped: at k = 0 or k = n the bound is 0 or 1 up to float noise
    return ProportionCI(
        share, float(max(0.0, centre - half)), float(min(1.0, centre + half)), total
    )


# ---------------------------------------------------------------------------------------------
# Bootstrap and Pareto
# ---------------------------------------------------------------------------------------------


def seeded_stream(seed: int, *parts: str) -> np.random.Generator:
    """The random generator of every seeded bootstrap: ``seed`` plus the CRC-32 of each name.

    One independent, reproducible stream per group (model, benchmark, teacher, ...), whatever
    other groups exist: adding a model does not change another model's draws. With no
    ``parts`` it is ``numpy.random.default_rng(seed)``.

    >>> seeded_stream(0, "m", "b").integers(0, 100, 3).tolist()
    [27, 39, 41]
    >>> seeded_stream(0, "n", "b").integers(0, 100, 3).tolist()  # another model, another stream
    [0, 86, 12]
    """
    return np.random.default_rng([int(seed), *(zlib.crc32(p.encode()) for p in parts)])


def resample_indices(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``[n_boot, n]`` positions: row b is n draws with replacement from ``0..n-1``.

    The one resampling draw of the library (:func:`resample_counts` counts these same draws).

    >>> resample_indices(3, 2, seeded_stream(0)).tolist()
    [[2, 1, 1], [0, 0, 0]]
    """
    return rng.integers(0, n, size=(int(n_boot), int(n)))


def resample_counts(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``[n_boot, n]`` float counts: how often each of n items is drawn in each resample.

    Row b counts the draws of row b of :func:`resample_indices` (so it sums to n); a
    statistic that is a sum over items is then ``counts @ values`` for every resample at once.

    >>> resample_counts(3, 2, seeded_stream(0)).tolist()  # draws [2, 1, 1] and [0, 0, 0]
    [[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]]
    """
    picks = resample_indices(n, n_boot, rng)
    # One bincount for all rows: row b's picks are offset by b * n.
    offsets = np.arange(int(n_boot), dtype=np.int64)[:, None] * int(n)
    counts = np.bincount((picks + offsets).ravel(), minlength=int(n_boot) * int(n))
    return counts.reshape(int(n_boot), int(n)).astype(np.float64)


def nan_mean(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean over ``axis`` ignoring NaN; NaN (without a warning) where every value is NaN.

    >>> nan_mean(np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]]), axis=1).tolist()
    [2.0, nan]
    """
    present = ~np.isnan(values)
    count = present.sum(axis=axis)
    total = np.where(present, values, 0.0).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def percentile_interval(draws: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """The ``alpha/2`` and ``1 - alpha/2`` quantiles of bootstrap replicates (NaNs left out).

    Undefined replicates (NaN) are dropped; none left gives (NaN, NaN). When a replicate is
    ±inf (a log ratio against a zero) the bounds are order statistics (``lower`` /
    ``higher``), since interpolating between a number and an infinity is undefined.

    >>> percentile_interval(np.array([0.0, 1.0, 2.0, 3.0, np.nan]), alpha=0.5)  # q 0.25, 0.75
    (0.75, 2.25)
    >>> percentile_interval(np.array([-np.inf, 0.0, 1.0]), alpha=0.5)
    (-inf, 1.0)
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    kept = np.asarray(draws, dtype=np.float64)
    kept = kept[~np.isnan(kept)]
    if kept.size == 0:
        return float("nan"), float("nan")
    if np.isinf(kept).any():
        lo = np.quantile(kept, alpha / 2, method="lower")
        hi = np.quantile(kept, 1 - alpha / 2, method="higher")
    else:
        lo, hi = np.quantile(kept, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def bias_corrected_interval(
    draws: np.ndarray,
    estimate: float,
    alpha: float = 0.05,
    bounds: tuple[float, float] = (-np.inf, np.inf),
) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates, shifted by the bootstrap's estimate of
    the estimator's bias, for a statistic whose resamples are biased (a plug-in entropy).

    A resample repeats some observations and drops others, so its histogram is more
    concentrated than the sample's and its entropy lower: the replicates sit below the
    estimate, and a plain percentile interval puts the estimate at (or above) its top. With
    ``bias = mean(replicates) - estimate`` (the bootstrap bias estimate, Efron & Tibshirani
    1993, ch. 10) the interval is ``[q_lo - bias, q_hi - bias]``, clipped to ``bounds`` (the
    statistic's range). Should it still miss the estimate (replicates whose mean lies outside
    their own central 1 - alpha, which takes a very lopsided distribution) it is widened to
    reach it: the estimate always lies inside its interval. NaN replicates are left out; none
    left, or a NaN estimate, gives (NaN, NaN).

    >>> # replicates 0.1 below the estimate on average: the interval moves up by 0.1
    >>> [round(b, 3) for b in bias_corrected_interval(np.array([0.3, 0.4, 0.5]), 0.5, 0.5)]
    [0.45, 0.55]
    >>> bias_corrected_interval(np.array([0.9, 1.0]), 1.0, 0.5, bounds=(0.0, 1.0))[1]
    1.0
    """
    kept = np.asarray(draws, dtype=np.float64)
    kept = kept[np.isfinite(kept)]
    if kept.size == 0 or not np.isfinite(estimate):
        return float("nan"), float("nan")
    lo, hi = percentile_interval(kept, alpha)
    bias = float(kept.mean()) - float(estimate)
    lo, hi = max(lo - bias, bounds[0]), min(hi - bias, bounds[1])
    return float(min(lo, estimate)), float(max(hi, estimate))


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    stat: Callable[..., float] = np.mean,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> BootstrapCI:
    """Percentile bootstrap interval of ``stat`` over ``values`` (NaNs dropped), seeded.

    Draws ``n_boot`` samples of size n with replacement from a ``numpy`` generator seeded with
    ``seed``; the interval is the ``alpha/2`` and ``1 - alpha/2`` quantiles of the statistic
    over the samples. ``stat`` is called as ``stat(samples, axis=1)`` when it accepts ``axis``
    (numpy reductions do), else once per sample.

    >>> bootstrap_ci([0.0, 1.0], n_boot=2000, seed=0)  # sample means are 0, 0.5 or 1
    BootstrapCI(estimate=0.5, lo=0.0, hi=1.0)
    """
    data = np.asarray(values, dtype=np.float64)
    data = data[~np.isnan(data)]
    if int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"bootstrap_ci: n_boot must be a whole number >= 1, got {n_boot!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"bootstrap_ci: alpha must be in (0, 1), got {alpha!r}")
    if len(data) == 0:
        return BootstrapCI(float("nan"), float("nan"), float("nan"))
    estimate = float(stat(data))
    samples = data[resample_indices(len(data), n_boot, seeded_stream(seed))]
    try:
        replicates = np.asarray(stat(samples, axis=1), dtype=np.float64)
    except TypeError:
        replicates = np.array([stat(row) for row in samples], dtype=np.float64)
    if replicates.shape != (int(n_boot),):
        raise ValueError("bootstrap_ci: stat must return one number per sample")
    return BootstrapCI(estimate, *percentile_interval(replicates, alpha))


def pareto_front(
    df: pd.DataFrame,
    x: str,
    y: str,
    maximize: tuple[bool, bool] = (True, True),
    references: Sequence[str] = (),
    by: str = "teacher",
) -> pd.Series:
    """Boolean mask of the rows not dominated on (``x``, ``y``).

    Row i is dominated when another row is at least as good on both axes and strictly better
    on one ("good" = larger when the matching ``maximize`` flag is True). Identical rows do not
    dominate each other. Rows with a NaN are never on the front. O(n log n): sort by x (best
    first), keep the best y seen among strictly better x. Rows whose ``by`` value is one of
    ``references`` (reference teachers) are left out: never on the front, dominating no one.

    Reference: Legi-Val (arXiv 2603.20508); docs/rankings.md, Pareto frontier.

    >>> df = pd.DataFrame({"eff": [1, 2, 3, 2], "fotu": [5, 4, 3, 2]})
    >>> pareto_front(df, "eff", "fotu").tolist()
    [True, True, True, False]
    >>> df["teacher"] = ["a", "b", "c", "human"]
    >>> df.loc[3, ["eff", "fotu"]] = [9, 9]  # the reference beats everyone on both axes
    >>> pareto_front(df, "eff", "fotu", references=["human"]).tolist()
    [True, True, True, False]
    """
    require_columns(df, [x, y], "pareto_front input")
    values = _numeric(df, [x, y], "pareto_front input")
    if references:
        require_columns(df, [by], "pareto_front input")
        left_out = df[by].astype(str).isin([str(r) for r in references]).to_numpy()
        values = values.astype("float64")
        values.loc[left_out, :] = np.nan
    mask = pareto_mask(values[x].to_numpy(), values[y].to_numpy(), maximize)
    return pd.Series(mask, index=df.index, name="pareto")


#: Decimals at which two values are the same on a frontier (as ranks round them).
_TIE_DECIMALS = 9


def pareto_mask(
    xs: np.ndarray, ys: np.ndarray, maximize: tuple[bool, bool] = (True, True)
) -> np.ndarray:
    """:func:`pareto_front` on two plain arrays (no DataFrame: cheap enough to run once per
    bootstrap resample). Values are compared rounded to 9 decimals, as ranks are: the same
    rows summed in another order (whole tables, the metrics stage's chunks) differ in the last
    bits, and that noise must not make one of two tied rows dominate the other.

    >>> pareto_mask(np.array([1.0, 2, 3, 2]), np.array([5.0, 4, 3, 2])).tolist()
    [True, True, True, False]
    >>> pareto_mask(np.array([0.3, 0.1 + 0.2]), np.array([1.0, 1.0])).tolist()  # a tie
    [True, True]
    """
    xs = np.round(np.asarray(xs, dtype=np.float64), _TIE_DECIMALS) * (1 if maximize[0] else -1)
    ys = np.round(np.asarray(ys, dtype=np.float64), _TIE_DECIMALS) * (1 if maximize[1] else -1)
    valid = ~(np.isnan(xs) | np.isnan(ys))
    mask = np.zeros(len(xs), dtype=bool)
    idx = np.flatnonzero(valid)
    if len(idx):
        # Best x first; within equal x, best y first.
        order = idx[np.lexsort((-ys[idx], -xs[idx]))]
        sx, sy = xs[order], ys[order]
        new_x = np.r_[True, sx[1:] != sx[:-1]]
        group = np.cumsum(new_x) - 1
        group_best_y = sy[new_x]  # first row of each x-group has that group's largest y
        # Best y among all rows with strictly larger x (none for the first group).
        better_x_best_y = np.r_[-np.inf, np.maximum.accumulate(group_best_y)[:-1]]
        on_front = (sy == group_best_y[group]) & (sy > better_x_best_y[group])
        mask[order] = on_front
    return mask
