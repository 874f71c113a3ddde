"""Per-step transfer attribution: which steps of a correct trace carry the solution to the
students (docs/metrics/attribution.md).

The students were shown the trace's prefixes on a grid ``0 = k_0 < k_1 < … < k_n`` (steps
shown). Between two measured prefixes the students' solve rate changes by
``a_i = r(k_i) − r(k_{i−1})``: the steps ``k_{i−1}+1 … k_i`` added between them share that
change equally. Its standard error comes from the two binomial counts. Per trace, how
concentrated the positive attribution is (the share the top 10% of steps carry), and per
teacher the mean of that share.

Everything is computed from the ``rollouts`` table as stored (``trace_id``, ``k``, ``correct``;
``teacher``, ``dataset`` and ``m`` for the summaries): no new model call.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = [
    "TOP_SHARE",
    "interval_attribution",
    "prefix_rates",
    "step_attribution",
    "teacher_concentration",
    "top_share",
    "trace_concentration",
]

#: The share of a trace's steps whose attribution :func:`top_share` adds up (the top 10%).
TOP_SHARE = 0.1


def prefix_rates(rollouts: pd.DataFrame) -> pd.DataFrame:
    """The students' solve rate after each measured prefix: one row per (``trace_id``, ``k``)
    with ``rate`` (mean ``correct`` over every student and sample shown that prefix), ``n``
    (rollouts behind it) and ``m`` (the trace's steps, when the rollouts carry it).

    >>> rows = pd.DataFrame({"trace_id": "t", "k": [0, 0, 3, 3], "correct": [0, 1, 1, 1]})
    >>> prefix_rates(rows)[["k", "rate", "n"]].values.tolist()
    [[0.0, 0.5, 2.0], [3.0, 1.0, 2.0]]
    """
    keys = ["trace_id", "k"]
    grouped = rollouts.groupby(keys, observed=True, sort=True)
    out = grouped["correct"].agg(rate="mean", n="count").reset_index()
    if "m" in rollouts:
        out["m"] = grouped["m"].max().to_numpy()
    out["trace_id"] = out["trace_id"].astype(str)
    out["k"] = out["k"].astype("int64")
    return out


def _binomial_variance(rate: pd.Series, n: pd.Series) -> pd.Series:
    """r (1 − r) / n, the variance of a solve rate from n rollouts (partial credit clipped)."""
    clipped = rate.clip(0.0, 1.0)
    return clipped * (1.0 - clipped) / n


def interval_attribution(rates: pd.DataFrame) -> pd.DataFrame:
    """One row per interval between consecutive measured prefixes of each trace.

    Columns: ``trace_id``, ``k_prev`` and ``k`` (the interval is the steps ``k_prev+1 … k``),
    ``width`` (``k − k_prev``), ``rate_prev``, ``rate``, ``n_prev``, ``n``, ``attribution``
    (``rate − rate_prev``), ``se`` (√(r(1−r)/n + r'(1−r')/n') over the two ends), and the
    same per step: ``per_step`` and ``per_step_se`` (divided by ``width``). The first row of a
    trace starts at its smallest measured ``k`` (0 when the students were also run alone); the
    steps before it have no attribution.

    >>> rates = pd.DataFrame({"trace_id": "t", "k": [0, 3, 6], "rate": [0.25, 0.25, 0.75],
    ...                       "n": [4, 4, 4]})
    >>> out = interval_attribution(rates)
    >>> out[["k_prev", "k", "attribution", "per_step"]].round(4).values.tolist()
    [[0.0, 3.0, 0.0, 0.0], [3.0, 6.0, 0.5, 0.1667]]
    >>> round(float(out["se"].iloc[1]), 4)
    0.3062
    """
    ordered = rates.sort_values(["trace_id", "k"], kind="stable").reset_index(drop=True)
    previous = ordered.groupby("trace_id", sort=False)[["k", "rate", "n"]].shift(1)
    has_previous = previous["k"].notna().to_numpy()
    out = pd.DataFrame(
        {
            "trace_id": ordered["trace_id"].astype(str),
            "k_prev": previous["k"].astype("float64"),
            "k": ordered["k"].astype("int64"),
            "rate_prev": previous["rate"].astype("float64"),
            "rate": ordered["rate"].astype("float64"),
            "n_prev": previous["n"].astype("float64"),
            "n": ordered["n"].astype("float64"),
        }
    )[has_previous].reset_index(drop=True)
    out["k_prev"] = out["k_prev"].astype("int64")
    out["width"] = out["k"] - out["k_prev"]
    out["attribution"] = out["rate"] - out["rate_prev"]
    variance = _binomial_variance(out["rate"], out["n"]) + _binomial_variance(
        out["rate_prev"], out["n_prev"]
    )
    out["se"] = np.sqrt(variance)
    out["per_step"] = out["attribution"] / out["width"]
    out["per_step_se"] = out["se"] / out["width"]
    return out


def step_attribution(rollouts: pd.DataFrame, m: int | None = None) -> pd.DataFrame:
    """The attribution of every step of ONE trace: one row per step number ``1 … m``.

    Columns: ``step`` (1-based, as the inspector numbers them), ``attribution`` (the step's
    share ``a_i / width`` of its interval's change), ``se`` (its standard error, also divided
    by ``width``), ``k_prev`` and ``k`` (the interval it lies in), ``interval_attribution``
    (``a_i`` itself). Steps outside every measured interval (before the first measured
    prefix, after the last) get NaN. ``m`` defaults to the rollouts' ``m``, else to the
    largest measured ``k``.

    >>> rows = pd.DataFrame({"trace_id": "t", "m": 4, "k": [0, 0, 2, 2, 4, 4],
    ...                      "correct": [0, 0, 1, 0, 1, 1]})
    >>> step_attribution(rows)[["step", "attribution"]].values.tolist()
    [[1.0, 0.25], [2.0, 0.25], [3.0, 0.25], [4.0, 0.25]]
    """
    rates = prefix_rates(rollouts)
    if m is None:
        known = rates["m"].dropna() if "m" in rates else pd.Series(dtype="float64")
        m = int(known.max()) if len(known) else int(rates["k"].max()) if len(rates) else 0
    steps = pd.DataFrame({"step": np.arange(1, int(m) + 1, dtype="int64")})
    intervals = interval_attribution(rates)
    columns = ["attribution", "se", "k_prev", "k", "interval_attribution"]
    if intervals.empty or not len(steps):
        for column in columns:
            steps[column] = np.nan
        return steps
    # each step lies in the interval whose k is the first measured k at or after it
    ends = intervals["k"].to_numpy()
    where = np.searchsorted(ends, steps["step"].to_numpy(), side="left")
    inside = where < len(ends)
    where = np.minimum(where, len(ends) - 1)
    inside &= intervals["k_prev"].to_numpy()[where] < steps["step"].to_numpy()
    picked = intervals.iloc[where].reset_index(drop=True)
    steps["attribution"] = picked["per_step"].where(inside)
    steps["se"] = picked["per_step_se"].where(inside)
    steps["k_prev"] = picked["k_prev"].astype("float64").where(inside)
    steps["k"] = picked["k"].astype("float64").where(inside)
    steps["interval_attribution"] = picked["attribution"].where(inside)
    return steps


def top_share(per_step: np.ndarray, widths: np.ndarray | None = None) -> tuple[float, int]:
    """The share of the positive attribution carried by the top :data:`TOP_SHARE` of steps,
    and how many steps that is.

    ``per_step`` is each step's attribution (NaN: not measured, left out); with ``widths`` it
    is one value per interval and ``widths`` the steps it stands for (the same as repeating
    each value ``width`` times). The steps are ranked by attribution; the top
    ``⌈TOP_SHARE · steps⌉`` are kept; the share is the sum of their positive parts over the
    sum of every step's positive part: NaN when no step has a positive attribution.

    >>> top_share(np.array([0.0, 0.5 / 3, 0.25 / 3, 0.0]), np.array([3, 3, 3, 1]))
    (0.2222222222222222, 1)
    """
    values = np.asarray(per_step, dtype="float64")
    counts = np.ones(len(values), dtype="int64") if widths is None else np.asarray(widths, "int64")
    keep = np.isfinite(values) & (counts > 0)
    values, counts = values[keep], counts[keep]
    steps = int(counts.sum())
    if steps == 0:
        return math.nan, 0
    top = math.ceil(TOP_SHARE * steps - 1e-9)
    positive = np.clip(values, 0.0, None)
    total = float((positive * counts).sum())
    if total <= 0:
        return math.nan, top
    order = np.argsort(-values, kind="stable")
    taken, carried = 0, 0.0
    for index in order:
        if taken >= top:
            break
        use = min(int(counts[index]), top - taken)
        carried += use * float(positive[index])
        taken += use
    return carried / total, top


def trace_concentration(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Per trace with rollouts: how concentrated its positive attribution is.

    Columns: ``trace_id``, ``teacher``, ``dataset`` (when the rollouts carry them),
    ``steps_measured`` (steps inside a measured interval), ``top_steps`` (⌈10%⌉ of them),
    ``positive`` (the sum of the positive per-step attributions), ``top_share``
    (:func:`top_share`: NaN when no step helps) and ``uniform_share`` (``top_steps /
    steps_measured``, what ``top_share`` would be if every step helped alike).

    >>> rows = pd.DataFrame({"trace_id": "t", "teacher": "T", "dataset": "D", "m": 10,
    ...     "k": np.repeat([0, 3, 6, 9, 10], 4),
    ...     "correct": [1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1]})
    >>> trace_concentration(rows)[["top_steps", "positive", "top_share"]].round(4).values.tolist()
    [[1.0, 0.75, 0.2222]]
    """
    intervals = interval_attribution(prefix_rates(rollouts))
    intervals = intervals[np.isfinite(intervals["per_step"].to_numpy())]
    # One row per measured step (an interval's value repeated over its width), ranked within
    # its trace, best first: vectorised, as a million traces hold ten million steps.
    widths = intervals["width"].to_numpy()
    steps = pd.DataFrame(
        {
            "trace_id": np.repeat(intervals["trace_id"].to_numpy(), widths),
            "value": np.repeat(intervals["per_step"].to_numpy(), widths),
        }
    )
    steps["positive"] = steps["value"].clip(lower=0.0)
    steps = steps.sort_values(["trace_id", "value"], ascending=[True, False], kind="stable")
    grouped = steps.groupby("trace_id", sort=True)
    measured = grouped.size()
    top = np.ceil(TOP_SHARE * measured - 1e-9).astype("int64")
    rank = grouped.cumcount().to_numpy()
    if measured.sum() == len(steps):  # no null id: the sorted rows run group by group
        # each group's count repeated over its rows: mapping every step's id was a third of
        # this function's time on a bucket of rollouts
        in_top = rank < np.repeat(top.to_numpy(), measured.to_numpy())
    else:
        in_top = rank < steps["trace_id"].map(top).to_numpy()
    positive = grouped["positive"].sum()
    carried = steps["positive"].where(in_top, 0.0).groupby(steps["trace_id"], sort=True).sum()
    out = pd.DataFrame(
        {
            "trace_id": measured.index.astype(str),
            "steps_measured": measured.to_numpy(dtype="int64"),
            "top_steps": top.to_numpy(),
            "positive": positive.to_numpy(),
            "top_share": (carried / positive.where(positive > 0)).to_numpy(),
        }
    )
    out["uniform_share"] = out["top_steps"] / out["steps_measured"]
    labels = [c for c in ("teacher", "dataset") if c in rollouts]
    if labels:
        names = rollouts[["trace_id", *labels]].drop_duplicates("trace_id")
        names = names.assign(trace_id=names["trace_id"].astype(str))
        out = out.merge(names.astype({c: str for c in labels}), on="trace_id", how="left")
        out = out[["trace_id", *labels, *[c for c in out if c not in ("trace_id", *labels)]]]
    return out


def teacher_concentration(traces: pd.DataFrame, by: tuple[str, ...] = ("teacher",)) -> pd.DataFrame:
    """Per teacher (or per ``by``): the mean of :func:`trace_concentration`'s ``top_share``
    over the traces where it is defined, beside the mean ``uniform_share``.

    Columns: ``by``…, ``top_share`` (mean), ``top_share_se`` (its standard error over traces,
    NaN from one trace), ``uniform_share``, ``traces`` (with a defined share) and
    ``traces_without_help`` (no step with a positive attribution).

    >>> t = pd.DataFrame({"teacher": ["T", "T", "T"], "top_share": [0.5, 0.3, float("nan")],
    ...                   "uniform_share": [0.1, 0.1, 0.1]})
    >>> teacher_concentration(t).round(3).iloc[0].to_dict()  # doctest: +NORMALIZE_WHITESPACE
    {'teacher': 'T', 'top_share': 0.4, 'top_share_se': 0.1, 'uniform_share': 0.1, 'traces': 2,
     'traces_without_help': 1}
    """
    keys = list(by)
    defined = traces[traces["top_share"].notna()]
    grouped = defined.groupby(keys, observed=True, sort=True)
    out = grouped.agg(
        top_share=("top_share", "mean"),
        top_share_se=("top_share", lambda s: s.std(ddof=1) / math.sqrt(len(s))),
        uniform_share=("uniform_share", "mean"),
        traces=("top_share", "size"),
    ).reset_index()
    without = (
        traces[traces["top_share"].isna()].groupby(keys, observed=True).size().rename("without")
    )
    out = out.merge(without.reset_index(), on=keys, how="outer")
    out["traces"] = out["traces"].fillna(0).astype("int64")
    out["traces_without_help"] = out.pop("without").fillna(0).astype("int64")
    return out.sort_values(keys, kind="stable").reset_index(drop=True)
