"""Leaderboard: the rank table of SPEC section 4, with filters, CIs, a composite and exports."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from legival_core import views
from legival_core.safe_text import plotly_literal, plotly_literals
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
        # the profile the stored teacher_metrics were computed with, so the CIs match them
        profile = views.metrics_profile(common.load_manifest())
        transfer = teacher_metrics(rollouts, profile=profile, n_boot=n_boot)
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


@common.derived("board_rows")
def board_rows(dataset: str | None, student: str | None) -> tuple[pd.DataFrame, list[str]]:
    """The teacher_metrics rows of the selection (transfer columns of one student if chosen)
    and the metrics they have values for."""
    frame = views.filter_rows(common.load_table("teacher_metrics"), dataset=dataset)
    if student is not None:
        profile = views.metrics_profile(common.load_manifest())
        frame = views.with_student(frame, student_metrics(profile), student)
    return frame, views.ranked_metrics(frame)


@common.derived("board")
def board_table(
    dataset: str | None, student: str | None, weights: tuple[tuple[str, float], ...]
) -> pd.DataFrame:
    frame, metrics = board_rows(dataset, student)
    return views.leaderboard(frame, metrics, dict(weights) or None)


def student_options() -> list[str]:
    """Students with rollouts: from the small transfer_curves table when it is current, so a
    cold start does not read a column of the (possibly millions of rows) rollouts table."""
    if common.has_table("transfer_curves"):
        table = views.fresh_transfer_curves(
            common.load_table("transfer_curves", ["dataset", "student", "rollouts_stamp"]),
            common.load_manifest(),
        )
        if table is not None:
            return views.transfer_options(table)[1]
    return common.distinct("rollouts", "student")


datasets = common.distinct("teacher_metrics", "dataset")
left, middle, right = st.columns(3)
dataset = common.url_select("Dataset", [common.ALL, *datasets], "dataset", where=left)
students = student_options()
student = (
    common.url_select("Student", [common.ALL, *students], "student", where=middle)
    if students
    else common.ALL
)
chosen_dataset = None if dataset == common.ALL else dataset
chosen_student = None if student == common.ALL else student
frame, metrics = board_rows(chosen_dataset, chosen_student)
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

board = board_table(chosen_dataset, chosen_student, tuple(sorted(weights.items())))


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


def ci_rows(dataset: str | None, student: str | None, metric: str) -> pd.DataFrame:
    ci = views.filter_rows(intervals(student, 200), dataset=dataset)
    return ci[ci["metric"] == metric] if not ci.empty else ci


@st.cache_resource(show_spinner=False, max_entries=32)
def chart(
    path: str,
    stamp: float,
    selection: tuple[str | None, str | None, tuple[tuple[str, float], ...]],
    metric: str,
    with_ci: bool,
) -> go.Figure:
    """The chart under the table (shared, read-only: drawing it does not change it)."""
    dataset, student, weights = selection
    figure = go.Figure()
    chosen = ci_rows(dataset, student, metric) if with_ci else pd.DataFrame()
    for name, group in chosen.groupby("dataset", observed=True, sort=True) if len(chosen) else []:
        figure.add_trace(
            go.Scatter(
                x=plotly_literals(group["teacher"]),
                y=group["value"],
                mode="markers",
                name=plotly_literal(name),
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
    if not figure.data:
        ordered = board_table(dataset, student, weights).sort_values(f"{metric}_rank")
        figure.add_trace(
            go.Bar(
                x=plotly_literals(ordered["teacher"]),
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
    return figure


show_ci = st.toggle("Raw values per dataset with 95% bootstrap CIs", key="show_ci")
if show_ci:
    chosen = ci_rows(chosen_dataset, chosen_student, metric)
    if chosen.empty:
        st.info(
            "This store has no per-trace tables to bootstrap from (e.g. the published store), "
            "so no intervals can be shown; the chart shows the stored values."
        )
    else:
        common.table(chosen, "leaderboard_intervals")
selection = (chosen_dataset, chosen_student, tuple(sorted(weights.items())))
st.plotly_chart(chart(*common.store_key(), selection, metric, show_ci), key="leaderboard_chart")
st.caption(views.METRICS[metric].description.capitalize() + ".")
