"""The Pareto page's data: a leaderboard's teachers with their frontier flag and family."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from legival_core.views.common import METRICS

if TYPE_CHECKING:
    from legival_core.rankings.rank_intervals import TeacherResamples

# ---------------------------------------------------------------------------------------------
# Pareto
# ---------------------------------------------------------------------------------------------

_FAMILY_WORD = re.compile(r"[A-Za-z]+")


def model_family(teacher: str, hf_id: object = None) -> str:
    """A model's family for colouring: the organisation of its Hugging Face id when known,
    else the first word of its name.

    >>> model_family("qwen3-8b", "Qwen/Qwen3-8B"), model_family("deep-r1-0528"), model_family("7")
    ('Qwen', 'deep', 'other')
    """
    if isinstance(hf_id, str) and "/" in hf_id:
        return hf_id.split("/", 1)[0]
    match = _FAMILY_WORD.search(str(teacher))
    return match.group(0).lower() if match else "other"


def pareto_view(
    table: pd.DataFrame,
    x: str,
    y: str,
    references: Sequence[str] = (),
    include_references: bool = False,
) -> pd.DataFrame:
    """The teachers of a leaderboard with a ``frontier`` flag on (``x``, ``y``) and a family.

    The frontier is :func:`legival_core.stats.stats.pareto_front` with each axis' better direction
    taken from :data:`METRICS`; frontier rows come sorted by ``x`` so they draw as a line.
    Reference teachers stay in the table (a ``reference`` column marks them) but are never on
    the frontier and dominate no one, unless ``include_references``. So do the teachers the
    rank table left unranked on ``x`` or ``y`` (under ``support="all"``, those that miss a
    dataset; a ``compared`` column is False for them and for the references left out).

    >>> board = pd.DataFrame({"teacher": ["a", "b", "human"], "tokens": [300.0, 100.0, 50.0],
    ...     "fotu": [0.5, 0.2, 0.9]})
    >>> view = pareto_view(board, "tokens", "fotu", references=["human"])
    >>> view[["teacher", "frontier", "reference"]].values.tolist()
    [['human', False, True], ['b', True, False], ['a', True, False]]
    >>> pareto_view(board, "tokens", "fotu", ["human"], include_references=True).frontier.tolist()
    [True, False, False]
    """
    from legival_core.stats.stats import pareto_front

    out = table.copy()
    hf = out["hf_id"] if "hf_id" in out else pd.Series(None, index=out.index, dtype=object)
    out["family"] = [model_family(t, h) for t, h in zip(out["teacher"], hf, strict=True)]
    maximize = (METRICS[x].higher_is_better, METRICS[y].higher_is_better)
    left_out = set() if include_references else {str(r) for r in references}
    for axis in (x, y):  # averaged over fewer datasets than the others: not compared
        if f"{axis}_rank" in out:
            apart = out[axis].notna() & out[f"{axis}_rank"].isna()
            left_out |= set(out.loc[apart, "teacher"].astype(str))
    out["frontier"] = pareto_front(
        out, x, y, maximize=maximize, references=tuple(sorted(left_out))
    ).to_numpy()
    out["reference"] = out["teacher"].astype(str).isin([str(r) for r in references])
    out["compared"] = ~out["teacher"].astype(str).isin(left_out)
    return out.sort_values([x, y], kind="stable").reset_index(drop=True)


def frontier_line_shape(x: str) -> str:
    """The Plotly ``line_shape`` that draws a frontier sorted by ``x`` as a staircase.

    The frontier bounds the region its teachers dominate. Between two frontier teachers i and
    i + 1 (in increasing ``x``) the best value on y that can be had at a given x is the one of
    the teacher the x already reaches: when lower x is better (tokens), every x from x_i on
    reaches teacher i, so the line stays at y_i up to x_{i+1} and then steps ("hv"); when higher
    x is better, x up to x_{i+1} still reaches teacher i + 1, so the line steps first ("vh").
    The direction of y only decides which way the steps go, not their shape.

    >>> frontier_line_shape("tokens"), frontier_line_shape("accuracy")
    ('hv', 'vh')
    """
    return "vh" if METRICS[x].higher_is_better else "hv"


def interval_bars(
    points: pd.DataFrame, intervals: pd.DataFrame, metric: str
) -> tuple[pd.Series, pd.Series]:
    """Error bar lengths (above, below) of ``metric`` for each row of ``points``.

    ``intervals`` has one row per (``metric``, ``teacher``) with ``lo`` and ``hi``; a teacher
    without one (a reference teacher left out of the resamples, a value from one trace) gets
    NaN, which Plotly draws as no bar.

    >>> points = pd.DataFrame({"teacher": ["a", "b"], "fotu": [0.5, 0.2]})
    >>> intervals = pd.DataFrame({"metric": ["fotu"], "teacher": ["a"], "lo": [0.4],
    ...     "hi": [0.7]})
    >>> above, below = interval_bars(points, intervals, "fotu")
    >>> [round(v, 3) for v in above.fillna(-1)], [round(v, 3) for v in below.fillna(-1)]
    ([0.2, -1.0], [0.1, -1.0])
    """
    rows = intervals[intervals["metric"] == metric] if len(intervals) else intervals
    if rows.empty:
        nothing = pd.Series(float("nan"), index=points.index, dtype="float64")
        return nothing, nothing.copy()
    by_teacher = rows.set_index(rows["teacher"].astype(str))
    names = points["teacher"].astype(str)
    value = pd.to_numeric(points[metric], errors="coerce").astype("float64")
    lo = names.map(by_teacher["lo"]).astype("float64")
    hi = names.map(by_teacher["hi"]).astype("float64")
    return (hi - value).clip(lower=0), (value - lo).clip(lower=0)


def frontier_uncertainty(
    resamples: TeacherResamples, board: pd.DataFrame, x: str, y: str
) -> tuple[dict[str, float], pd.DataFrame]:
    """The Pareto page's uncertainty of the frontier drawn from ``board`` (the rank table of
    ``x`` and ``y``): teacher → share of the paired problem ``resamples`` in which it is on
    the frontier, and the 95% value intervals of ``x`` and ``y`` from the same draws (long:
    metric, teacher, lo, hi; none from a single trace). Both empty when the resamples do not
    give the values drawn (:func:`legival_core.rankings.rank_intervals.points_agree`)."""
    from legival_core.rankings.rank_intervals import frontier_shares, points_agree, rank_intervals

    if not all(
        m in resamples.metrics and points_agree(resamples.metrics[m], board, m) for m in (x, y)
    ):
        return {}, pd.DataFrame()
    maximize = (METRICS[x].higher_is_better, METRICS[y].higher_is_better)
    shares = frontier_shares(resamples.metrics[x], resamples.metrics[y], maximize)
    bars = []
    for metric in (x, y):
        table = rank_intervals(resamples.metrics[metric], METRICS[metric].higher_is_better)
        table = table[table["n_traces"] > 1]  # one trace: no interval
        bars.append(
            pd.DataFrame(
                {
                    "metric": metric,
                    "teacher": table["teacher"].astype(str),
                    "lo": table["value_lo"],
                    "hi": table["value_hi"],
                }
            )
        )
    return dict(zip(resamples.teachers, shares.tolist(), strict=True)), pd.concat(bars)
