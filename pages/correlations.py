"""Correlations: Spearman heatmaps (model and trace level), partial ρ, rank stability."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from legival_core import views
from legival_core.published.references import keep_teachers
from legival_core.stats.stats import MIN_N_FOR_SIGNIFICANCE
from legival_core.text.safe_text import markdown_literal, plotly_literal
from legival_core.views.display import MISSING, format_number
from pages import common

st.title("🧮 Correlations")
st.caption(
    "Spearman ρ between metrics; n is the number of points behind each ρ. Stars mark "
    "significance after Holm's correction over every pair shown (* adjusted p < 0.05, "
    "** < 0.01, *** < 0.001) from five points on: the raw p is the exact permutation p up to "
    "ten points (at four points it cannot go below 2/24 = 0.083) and the t approximation above. "
    f"Pairs related by construction (lift = FOTU − baseline, …) are marked "
    f"{views.BY_CONSTRUCTION_MARK} and never starred. Partial ρ holds token length fixed "
    "(its p: t approximation)."
)
common.page_setup("correlations")
common.need_tables("teacher_metrics", what="The correlations page")
include = common.include_references()
support = common.support_choice()


@common.derived("correlation_input")
def correlation_input(
    level: str,
    correct_only: bool,
    dataset: str | None,
    include: bool,
    support: str,
    teacher: str | None = None,
) -> pd.DataFrame:
    """Model level: one row per teacher (averaged over the datasets ``support`` names),
    reference teachers left out unless ``include``; trace level: one row per trace, of
    ``teacher`` only when one is named (None: every teacher's traces pooled)."""
    efficiency = common.load_table("trace_efficiency")
    efficiency = views.filter_rows(efficiency, dataset=dataset)
    if level == "model":
        teacher_metrics = views.filter_rows(common.load_table("teacher_metrics"), dataset=dataset)
        return views.model_level_frame(
            teacher_metrics,
            efficiency,
            correct_only,
            common.reference_teachers(),
            include,
            support,
        )
    efficiency = views.filter_rows(efficiency, teacher=teacher)
    transfer = views.filter_rows(
        common.load_table("trace_transfer"), dataset=dataset, teacher=teacher
    )
    return views.trace_level_frame(efficiency, transfer, correct_only)


@common.derived("matrices")
def matrices(
    level: str,
    correct_only: bool,
    dataset: str | None,
    partial: bool,
    include: bool,
    support: str,
    teacher: str | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """ρ, p and n (the points behind each coefficient) for the selection."""
    return views.correlation_matrices(
        correlation_input(level, correct_only, dataset, include, support, teacher), partial
    )


@common.derived("per_student")
def per_student(profile: str, include: bool) -> pd.DataFrame:
    """Transfer metrics per (teacher, dataset, student), reference teachers left out unless
    ``include``."""
    from legival_core.published.references import keep_teachers

    frame = common.student_metrics(profile)
    return keep_teachers(frame, common.reference_teachers(), include)


def format_p(p: float) -> str:
    """A p-value for the hover text: three significant digits, an em dash when undefined."""
    return MISSING if not np.isfinite(p) else f"{p:.3g}"


def heatmap(
    rho: pd.DataFrame,
    pvalue: pd.DataFrame,
    counts: pd.DataFrame,
    key: str,
    title: str,
    label: Callable[[str], str] = common.metric_label,
) -> None:
    """ρ with stars and n in every cell; stars read from the Holm-adjusted p over the pairs
    shown, none on a pair related by construction (marked †, reason in the hover); cells from
    fewer than the app config's ``few_correlation_points`` points drawn faded (a second,
    translucent heatmap)."""
    few = common.get_config().few_correlation_points
    labels = [plotly_literal(label(c)) for c in rho.columns]
    n = counts.loc[rho.index, rho.columns].to_numpy()
    adjusted = views.holm_matrix(pvalue)
    reasons = views.construction_matrix(rho.columns)
    text = [
        [
            ""
            if np.isnan(r)
            else format_number(r, 2)
            + (
                ""
                if i == j
                else views.BY_CONSTRUCTION_MARK
                if reason
                else views.cell_stars(q, int(k))
            )
            + f"<br>n {k}"
            for j, (r, q, k, reason) in enumerate(zip(rho_row, q_row, n_row, why_row, strict=True))
        ]
        for i, (rho_row, q_row, n_row, why_row) in enumerate(
            zip(rho.to_numpy(), adjusted.to_numpy(), n, reasons.to_numpy(), strict=True)
        )
    ]
    hover = [
        [
            f"{format_p(p)} (Holm {format_p(q)})"
            + (f"<br>by construction: {plotly_literal(reason)}" if reason else "")
            for p, q, reason in zip(p_row, q_row, why_row, strict=True)
        ]
        for p_row, q_row, why_row in zip(
            pvalue.to_numpy(), adjusted.to_numpy(), reasons.to_numpy(), strict=True
        )
    ]
    z = rho.to_numpy()
    figure = go.Figure()
    for faded in (False, True):
        chosen = (n < few) if faded else (n >= few)
        figure.add_trace(
            go.Heatmap(
                z=np.where(chosen, z, np.nan),
                x=labels,
                y=labels,
                text=np.where(chosen, np.array(text, dtype=object), "").tolist(),
                texttemplate="%{text}",
                # one colour axis for both layers: faded cells keep the scale's colours
                coloraxis="coloraxis",
                opacity=0.3 if faded else 1.0,
                # Plotly picks the text colour from the cell's full colour: white on a faded
                # cell was unreadable, so faded cells get dark text
                textfont={"color": "#333"} if faded else None,
                name=f"fewer than {few} points" if faded else f"{few} points or more",
                customdata=np.dstack([np.array(hover, dtype=object), n]),
                hovertemplate="%{y} vs %{x}<br>ρ = %{z:.3f}<br>p = %{customdata[0]}"
                "<br>n = %{customdata[1]}<extra>%{fullData.name}</extra>",
            )
        )
    figure.update_layout(
        coloraxis={"colorscale": "RdBu", "reversescale": True, "cmin": -1, "cmax": 1,
                   "colorbar": {"title": {"text": "ρ"}}},
    )  # fmt: skip
    figure.update_layout(title=title, height=460, yaxis_autorange="reversed")
    # no grid lines through the cells (they showed through the faded ones)
    figure.update_xaxes(showgrid=False)
    figure.update_yaxes(showgrid=False)
    st.plotly_chart(figure, key=key)
    st.caption(
        f"Stars after Holm's correction over the {views.corrected_pairs(pvalue)} pairs shown "
        "(family-wise 5%); the hover gives the raw p beside the adjusted one."
    )
    derived = [
        f"{label(a)}–{label(b)}: {reasons.loc[a, b]}"
        for i, a in enumerate(rho.columns)
        for b in rho.columns[i + 1 :]
        if reasons.loc[a, b]
    ]
    if derived:
        st.caption(
            f"{views.BY_CONSTRUCTION_MARK} Related by construction, so no star: a strong ρ "
            "there says nothing about legibility. " + "; ".join(derived) + "."
        )
    if (n < few).any():
        st.caption(
            f"Faded cells: ρ from fewer than {few} points, where one point moving can flip the "
            "sign; read them as hints, not findings."
        )
    pairs = views.correlation_pairs(rho, pvalue, counts)
    common.download_csv(pairs, f"{key}_pairs", label="Download pairs: ρ, n, p, Holm p, flags (CSV)")
    export = rho.round(4).reset_index(names="metric")
    common.download_csv(export, f"{key}_rho", label="Download ρ (CSV)")
    common.download_csv(counts.reset_index(names="metric"), f"{key}_n", label="Download n (CSV)")


#: The teacher choice at trace level that keeps every teacher's traces in one cloud.
POOLED = "All teachers (pooled)"
all_teacher_metrics = common.load_table("teacher_metrics")
# Teacher-level views (rank stability) leave reference teachers out unless included.
teacher_metrics = keep_teachers(all_teacher_metrics, common.reference_teachers(), include)
# the transfer profile the stored transfer tables were computed with
profile = views.metrics_profile(common.load_manifest())
datasets = sorted(all_teacher_metrics["dataset"].unique())
left, middle, right = st.columns(3)
dataset = common.url_select("Dataset", [common.ALL, *datasets], "dataset", where=left)
chosen_dataset = None if dataset == common.ALL else dataset
has_traces = common.has_table("trace_efficiency")
# Trace level first: a model-level ρ rests on a handful of teachers.
levels = ["trace", "model"] if has_traces else ["model"]
level = common.url_select(
    "Level",
    levels,
    "level",
    where=middle,
    format_func=lambda v: {
        "model": "model (one point per teacher)",
        "trace": "trace (one point per trace)",
    }[v],
)
with right:
    traces_choice = st.radio(
        "Traces",
        ["all", "correct only"],
        horizontal=True,
        key="traces_choice",
        disabled=not has_traces,
        help="Correct-only recomputes tokens, redundancy and "
        "backtracking from the correct traces (transfer metrics are correct-only already).",
    )
    partial = st.toggle("Partial ρ (control: tokens)", key="partial")
correct_only = traces_choice == "correct only" and has_traces
chosen_teacher = None
if level == "trace":
    # one teacher's traces: a within-teacher ρ, free of differences between teachers
    teachers = sorted(str(t) for t in all_teacher_metrics["teacher"].unique())
    picked = common.url_select(
        "Teacher", [POOLED, *teachers], "teacher", help="Correlate one teacher's traces only."
    )
    chosen_teacher = None if picked == POOLED else picked
rho, pvalue, counts = matrices(
    level, correct_only, chosen_dataset, partial, include, support, chosen_teacher
)
if level == "trace":
    # teacher and dataset names are untrusted text: escaped before they reach Markdown
    st.caption(
        views.trace_pooling_note(
            None if chosen_teacher is None else markdown_literal(chosen_teacher),
            None if chosen_dataset is None else markdown_literal(chosen_dataset),
        )
    )
if level == "model":
    st.caption(
        "At model level n is the number of teachers — one point per teacher, each already "
        "averaged over its traces — not the number of traces. With a handful of teachers a "
        "coefficient has few possible values and wide uncertainty, whatever the trace count."
    )
    if common.reference_teachers() and not include:
        st.caption(
            "Reference teachers (a human solution, a gold rationale) add no point here; "
            "*Include reference teachers* in the sidebar counts them."
        )
if rho.shape[0] < 2:
    st.info("Fewer than two metrics vary in this selection; no correlation to show.")
else:
    what = "Partial Spearman ρ given tokens" if partial else "Spearman ρ"
    title = f"{what}, {level} level, {traces_choice} traces"
    trace_score = views.trace_metric_label("fotu", profile) == views.TRACE_SCORE_LABEL
    if level == "trace" and trace_score and "fotu" in rho.columns:
        heatmap(
            rho,
            pvalue,
            counts,
            "correlation_heatmap",
            title,
            label=lambda c: views.trace_metric_label(c, profile),
        )
        st.caption(views.TRACE_SCORE_NOTE)
    else:
        heatmap(rho, pvalue, counts, "correlation_heatmap", title)
    if "backtracking" in rho.columns:
        st.caption(common.backtracking_note())

st.subheader("Rank stability")
st.caption(
    "Spearman ρ between the teacher rankings a metric gives on two datasets / students, with "
    "n, the teachers ranked on both. Significance marks (* p < 0.05, ** p < 0.01, "
    "*** p < 0.001, p Holm-adjusted over the pairs of the table) only from "
    f"{MIN_N_FOR_SIGNIFICANCE} teachers up: below that a ρ is a hint, not a finding."
)
metrics = views.ranked_metrics(teacher_metrics)
metric = common.url_select(
    "Metric",
    metrics,
    "metric",
    format_func=common.metric_label,
    default="fotu" if "fotu" in metrics else metrics[0],
)
stability_left, stability_right = st.columns(2)
with stability_left:
    if teacher_metrics["dataset"].nunique() > 1:
        from legival_core.stats.stats import rank_stability, rank_stability_counts

        rho_d, p_d = rank_stability(teacher_metrics, metric, across="dataset")
        n_d = rank_stability_counts(teacher_metrics, metric, across="dataset")
        st.markdown("**Across datasets**")
        common.table(
            views.stability_cells(rho_d, p_d, n_d).reset_index(names="dataset"),
            "stability_datasets",
        )
    else:
        st.info("One dataset only: no cross-dataset stability.")
with stability_right:
    if common.has_table("rollouts") and metric in views.STUDENT_METRICS:
        from legival_core.stats.stats import rank_stability, rank_stability_counts

        students = per_student(profile, include)
        if students["student"].nunique() > 1:
            rho_s, p_s = rank_stability(students, metric, across="student")
            n_s = rank_stability_counts(students, metric, across="student")
            st.markdown("**Across students**")
            common.table(
                views.stability_cells(rho_s, p_s, n_s).reset_index(names="student"),
                "stability_students",
            )
        else:
            st.info("One student only: no cross-student stability.")
    else:
        st.info("Cross-student stability needs rollouts and a transfer metric (FOTU, SOTU, …).")
