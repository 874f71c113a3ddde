"""Leaderboard: the rank table of SPEC section 4, with filters, CIs, a composite and exports."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from legival_core import views
from pages import common

st.title("🏆 Leaderboard")
st.caption(
    "Rank 1 = best. Values are averaged over the chosen datasets first; the arrow after each "
    "rank is its change against the accuracy rank (▲ = better than its accuracy suggests)."
)
common.page_setup("leaderboard")
common.need_tables("teacher_metrics", what="The leaderboard")


@common.derived("student_metrics")
def student_metrics(profile: str) -> pd.DataFrame:
    return views.student_transfer_metrics(common.load_rollouts(), profile)


@common.derived("intervals")
def intervals(student: str | None, n_boot: int) -> pd.DataFrame:
    """Per (teacher, dataset) values with bootstrap CIs: efficiency from trace_efficiency,
    transfer from the rollouts (legival_core.transfer.teacher_metrics)."""
    from legival_core.transfer import teacher_metrics

    frames = []
    if common.has_table("trace_efficiency"):
        frames.append(
            views.efficiency_intervals(common.load_table("trace_efficiency"), n_boot=n_boot)
        )
    if common.has_table("rollouts"):
        rollouts = views.filter_rows(common.load_rollouts(), student=student)
        transfer = teacher_metrics(rollouts, n_boot=n_boot)
        for name in ("fotu", "sotu", "regression_rate", "never_solved", "lift"):
            frames.append(
                pd.DataFrame(
                    {
                        "teacher": transfer["teacher"],
                        "dataset": transfer["dataset"],
                        "metric": name,
                        "value": transfer[name],
                        "lo": transfer[f"{name}_lo"],
                        "hi": transfer[f"{name}_hi"],
                        "n": transfer["n_traces"],
                    }
                )
            )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


teacher_metrics = common.load_table("teacher_metrics")
datasets = sorted(teacher_metrics["dataset"].unique())
left, middle, right = st.columns(3)
dataset = common.url_select("Dataset", [common.ALL, *datasets], "dataset", where=left)
student_options = common.distinct("rollouts", "student")
student = (
    common.url_select("Student", [common.ALL, *student_options], "student", where=middle)
    if student_options
    else common.ALL
)
frame = views.filter_rows(teacher_metrics, dataset=None if dataset == common.ALL else dataset)
if student != common.ALL:
    frame = views.with_student(frame, student_metrics("paper"), student)
metrics = views.ranked_metrics(frame)
metric = common.url_select(
    "Metric",
    metrics,
    "metric",
    where=right,
    format_func=common.metric_label,
    default="fotu" if "fotu" in metrics else "accuracy",
)

with st.expander("Composite score (weights per metric)"):
    st.caption(
        "composite = Σ w·s / Σ w, where s = (n − rank) / (n − 1) is each metric's rank score "
        "(1 = best of n teachers). Leave every weight at 0 for no composite."
    )
    weight_columns = st.columns(len(metrics))
    weights = {
        m: column.number_input(
            common.metric_label(m),
            min_value=0.0,
            max_value=10.0,
            value=0.0,
            step=0.5,
            key=f"weight_{m}",
        )
        for m, column in zip(metrics, weight_columns, strict=True)
    }
weights = {m: w for m, w in weights.items() if w > 0}

board = views.leaderboard(frame, metrics, weights or None)


def arrow(change: object) -> str:
    if change is None or pd.isna(change):
        return ""
    change = int(change)
    return f"▲ {change}" if change > 0 else f"▼ {-change}" if change < 0 else "="


shown = board[["teacher"]].copy()
if weights:
    shown["composite"] = board["composite"]
    shown["composite rank"] = board["composite_rank"]
for m in metrics:
    label = common.metric_label(m)
    shown[label] = board[m]
    shown[f"{label} rank"] = board[f"{m}_rank"]
    if m != "accuracy":
        shown[f"{label} Δ"] = board[f"{m}_change"].map(arrow)
if weights:
    shown = shown.sort_values(["composite rank", "teacher"]).reset_index(drop=True)
change_columns = [c for c in shown.columns if c.endswith(" Δ")]


def colour(text: object) -> str:
    text = str(text)
    return (
        "color: #1e8449"
        if text.startswith("▲")
        else "color: #c0392b"
        if text.startswith("▼")
        else "color: #7f8c8d"
    )


formats = {common.metric_label(m): "{:.1%}" for m in metrics if views.METRICS[m].share}
formats.update({common.metric_label(m): "{:,.0f}" for m in metrics if m == "tokens"})
if weights:
    formats["composite"] = "{:.3f}"
styled = shown.style.map(colour, subset=change_columns).format(formats, na_rep="–")
st.dataframe(styled, hide_index=True, key="leaderboard_table")
export_left, export_right = st.columns(2)
with export_left:
    common.download_csv(board, "leaderboard")
with export_right:
    st.download_button(
        "Download LaTeX",
        views.latex_table(shown, caption="Legi-Val rank table"),
        file_name="leaderboard.tex",
        mime="text/x-tex",
        key="latex_leaderboard",
        on_click="ignore",
    )

show_ci = st.toggle("Raw values per dataset with 95% bootstrap CIs", key="show_ci")
figure = go.Figure()
if show_ci:
    ci = intervals(None if student == common.ALL else student, 200)
    ci = views.filter_rows(ci, dataset=None if dataset == common.ALL else dataset)
    chosen = ci[ci["metric"] == metric] if not ci.empty else ci
    if chosen.empty:
        st.info(
            "This store has no per-trace tables to bootstrap from (e.g. the published store), "
            "so no intervals can be shown; the chart shows the stored values."
        )
    else:
        for name, group in chosen.groupby("dataset", observed=True, sort=True):
            figure.add_trace(
                go.Scatter(
                    x=group["teacher"],
                    y=group["value"],
                    mode="markers",
                    name=str(name),
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": group["hi"] - group["value"],
                        "arrayminus": group["value"] - group["lo"],
                    },
                    customdata=group[["lo", "hi", "n"]].to_numpy(),
                    hovertemplate="%{x}<br>%{y:.4g} [%{customdata[0]:.4g}, %{customdata[1]:.4g}]"
                    "<br>n = %{customdata[2]}<extra>%{fullData.name}</extra>",
                )
            )
        common.table(chosen, "leaderboard_intervals")
if not figure.data:
    ordered = board.sort_values(f"{metric}_rank")
    figure.add_trace(
        go.Bar(
            x=ordered["teacher"],
            y=ordered[metric],
            name=common.metric_label(metric),
            hovertemplate="%{x}<br>%{y:.4g}<extra></extra>",
        )
    )
figure.update_layout(
    title=f"{common.metric_label(metric)} per teacher",
    height=380,
    yaxis_title=common.metric_label(metric),
    margin={"t": 50, "b": 40},
)
st.plotly_chart(figure, key="leaderboard_chart")
st.caption(views.METRICS[metric].description.capitalize() + ".")
