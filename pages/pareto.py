"""Pareto: any two teacher metrics, the non-dominated teachers joined as the frontier."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from legival_core import views
from legival_core.rankings.selection import Selection
from legival_core.text.safe_text import markdown_literal
from legival_core.views import board as board_layout
from legival_core.views import figures
from legival_core.views.display import format_share
from pages import common

st.title("⚖️ Pareto frontier")
st.caption(
    "Each point is a teacher (metrics averaged over the chosen datasets). A teacher is on the "
    "frontier when no other is at least as good on both axes and better on one."
)
common.page_setup("pareto")
common.need_tables("teacher_metrics", what="The Pareto page")
include = common.include_references()
support = common.support_choice()

teacher_metrics = common.load_table("teacher_metrics")
datasets = sorted(teacher_metrics["dataset"].unique())
left, middle, right = st.columns(3)
dataset = common.url_select("Dataset", [common.ALL, *datasets], "dataset", where=left)
frame = views.filter_rows(teacher_metrics, dataset=None if dataset == common.ALL else dataset)
# the leaderboard's metrics, FOTU before the leak included (the leak warning points to it)
metrics = views.ranked_metrics(frame, views.LEADERBOARD_METRICS)
if len(metrics) < 2:
    st.info("This store has fewer than two metrics with values; nothing to compare.")
    st.stop()
x = common.url_select(
    "x axis", metrics, "x", where=middle, format_func=common.metric_label, default="tokens"
)
y_options = [m for m in metrics if m != x]
y = common.url_select(
    "y axis", y_options, "y", where=right, format_func=common.metric_label, default="fotu"
)
if "tokens" in (x, y):
    st.caption(common.tokens_caption())


@common.derived("frontier_shares")
def frontier_shares(
    dataset: str | None, x: str, y: str, n_boot: int, seed: int, include: bool, support: str
) -> tuple[dict[str, float], pd.DataFrame]:
    """Teacher -> share of paired problem resamples in which it is on the frontier, and the
    95% value intervals of ``x`` and ``y`` (``board_view.frontier_shares``)."""
    from legival_core.views import board_view

    chosen = Selection(dataset=dataset, n_boot=n_boot, seed=seed, include_references=include,
                       support=support)  # fmt: skip
    return board_view.frontier_shares(common.PAGE_READS, chosen, x, y)


config = common.get_config()
board = views.leaderboard(frame, metrics, None, common.reference_teachers(), include, support)
points = views.pareto_view(board, x, y, common.reference_teachers(), include)
shares, intervals = frontier_shares(
    None if dataset == common.ALL else dataset,
    x,
    y,
    config.rank_resamples,
    config.resample_seed,
    include,
    support,
)
points["on frontier in resamples"] = points["teacher"].astype(str).map(shares).astype("float64")
figure, with_bars = figures.pareto_figure(points, intervals, x, y, metrics)
front = points[points["frontier"]]
st.plotly_chart(figure, key="pareto_chart")
if "fotu" in (x, y) and (headline := common.leak_headline()):
    st.warning(markdown_literal(headline))
if "backtracking" in (x, y):
    st.caption(common.backtracking_note())
if len(front):
    st.markdown(markdown_literal(f"On the frontier: {', '.join(map(str, front['teacher']))}"))
st.caption(
    "The dotted staircase is the frontier: the edge of the region its teachers dominate (a "
    "straight line between two of them would promise trade-offs no teacher reaches)."
    + (
        " Bars: 95% intervals of each value over the same resamples of the problems (none for "
        "a value from one trace, nor for reference teachers left out of the comparison)."
        if with_bars
        else ""
    )
)
if shares:
    st.caption(
        f"The frontier is drawn from averages of few traces. In {config.rank_resamples:,} "
        "resamples of the problems (the same draw for every teacher), *on frontier in "
        "resamples* is the share in which each teacher is on the frontier: near 100% is a "
        "solid place, near 50% a coin toss."
    )
else:
    st.caption(f"Frontier shares need per-trace tables to resample ({board_layout.NO_INTERVAL}).")
if points["reference"].any() and not include:
    st.caption(
        "Reference teachers (a human solution, a gold rationale) are drawn as ◆ for comparison "
        "but never join the frontier and dominate no one; *Include reference teachers* in the "
        "sidebar compares them like any model."
    )
common.table(
    points[["teacher", "family", "frontier", "reference", "on frontier in resamples", *metrics]],
    "pareto",
    formats={"on frontier in resamples": format_share},
)
