"""Correlations: Spearman heatmaps (model and trace level), partial ρ, rank stability."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from legival_core import views
from legival_core.published.references import keep_teachers
from legival_core.stats.stats import MIN_N_FOR_SIGNIFICANCE
from legival_core.text.safe_text import markdown_literal
from legival_core.views import figures
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


def stability_across(frame: pd.DataFrame, metric: str, across: str) -> None:
    """The rank-stability table of ``metric`` across the ``across`` column's values (datasets
    or students), or why there is none: one value gives nothing to compare."""
    if frame[across].nunique() > 1:
        st.markdown(f"**Across {across}s**")
        common.table(views.stability_table(frame, metric, across), f"stability_{across}s")
    else:
        st.info(f"One {across} only: no cross-{across} stability.")


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
    n = counts.loc[rho.index, rho.columns].to_numpy()
    figure = figures.correlation_heatmap(
        rho, pvalue, counts, title, [label(c) for c in rho.columns], few
    )
    st.plotly_chart(figure, key=key)
    st.caption(
        f"Stars after Holm's correction over the {views.corrected_pairs(pvalue)} pairs shown "
        "(family-wise 5%); the hover gives the raw p beside the adjusted one."
    )
    derived = views.construction_notes(rho.columns, label)
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
    stability_across(teacher_metrics, metric, "dataset")
with stability_right:
    if common.has_table("rollouts") and metric in views.STUDENT_METRICS:
        stability_across(per_student(profile, include), metric, "student")
    else:
        st.info("Cross-student stability needs rollouts and a transfer metric (FOTU, SOTU, …).")
