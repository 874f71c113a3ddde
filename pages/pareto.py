"""Pareto: any two teacher metrics, the non-dominated teachers joined as the frontier."""

from __future__ import annotations

import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from legival_core import views
from legival_core.safe_text import markdown_literal, plotly_literals
from pages import common

st.title("⚖️ Pareto frontier")
st.caption(
    "Each point is a teacher (metrics averaged over the chosen datasets). A teacher is on the "
    "frontier when no other is at least as good on both axes and better on one."
)
common.page_setup("pareto")
common.need_tables("teacher_metrics", what="The Pareto page")

teacher_metrics = common.load_table("teacher_metrics")
datasets = sorted(teacher_metrics["dataset"].unique())
left, middle, right = st.columns(3)
dataset = common.url_select("Dataset", [common.ALL, *datasets], "dataset", where=left)
frame = views.filter_rows(teacher_metrics, dataset=None if dataset == common.ALL else dataset)
metrics = views.ranked_metrics(frame)
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

board = views.leaderboard(frame, metrics)
points = views.pareto_view(board, x, y)
hover = {m: ":.4g" for m in metrics}
points["position"] = points["frontier"].map({True: "on the frontier", False: "dominated"})
# Names from the store are data: the chart gets them escaped (Plotly reads HTML in labels).
drawn = points.assign(
    teacher=plotly_literals(points["teacher"]), family=plotly_literals(points["family"])
)
figure = px.scatter(
    drawn,
    x=x,
    y=y,
    color="family",
    symbol="position",
    hover_name="teacher",
    hover_data={**hover, "family": True, "position": True},
    text="teacher",
    height=520,
    labels={m: common.metric_label(m) for m in metrics},
    symbol_map={"on the frontier": "circle", "dominated": "circle-open"},
)
figure.update_traces(textposition="top center", marker={"size": 12})
front = points[points["frontier"]]
figure.add_trace(
    go.Scatter(
        x=front[x],
        y=front[y],
        mode="lines",
        name="frontier",
        line={"color": "#444", "dash": "dot", "width": 2},
        hoverinfo="skip",
    )
)
better = {True: "higher is better", False: "lower is better"}
figure.update_layout(
    xaxis_title=f"{common.metric_label(x)} ({better[views.METRICS[x].higher_is_better]})",
    yaxis_title=f"{common.metric_label(y)} ({better[views.METRICS[y].higher_is_better]})",
)
st.plotly_chart(figure, key="pareto_chart")
if len(front):
    st.markdown(markdown_literal(f"On the frontier: {', '.join(map(str, front['teacher']))}"))
common.table(points[["teacher", "family", "frontier", *metrics]], "pareto")
