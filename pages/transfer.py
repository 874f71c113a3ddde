"""Transfer curves: μ_T(x) per teacher with bootstrap bands, the student baseline, hazards.

The page reads the store's small ``transfer_curves`` table (written by the metrics stage) when
it is there and was computed from the current rollouts; otherwise it computes the same view
from the rollouts (see :mod:`legival_core.views`).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from legival_core import views
from legival_core.safe_text import plotly_literal
from legival_core.views import figures
from pages import common

st.title("📈 Transfer curves")
st.caption(
    "How often a weak student answers correctly after seeing the first share x of a correct "
    "teacher trace. FOTU is the area under a teacher's curve; the hazard histogram shows where "
    "students first succeed, and SOTU is its normalised entropy."
)
common.page_setup("transfer")
common.need_tables("rollouts", what="Transfer curves")
include = common.include_references()

#: Resamples of traces behind the bands (the metrics stage stores views with the same).
BAND_RESAMPLES = 200


@common.derived("transfer_view")
def transfer_view(
    dataset: str | None, student: str | None, profile: str, n_boot: int
) -> views.TransferView:
    table = common.fresh_curves()
    view = (
        views.transfer_view_from_table(table, dataset, student, profile, n_boot)
        if table is not None
        else None
    )
    if view is None:
        view = views.transfer_view(common.load_rollouts(), dataset, student, profile, n_boot)
    return view


@st.cache_resource(show_spinner=False, max_entries=16)
def _figures(
    path: str,
    stamp: float,
    selection: tuple[str | None, str | None, str, int],
    picked: tuple[str, ...],
    dashed: tuple[str, ...] = (),
) -> tuple[go.Figure, go.Figure]:
    """The two charts of one view (shared, read-only: drawing them does not change them).
    Teachers in ``dashed`` (reference teachers) are drawn as dashed reference lines."""
    view = transfer_view(*selection)
    # the same curve chart as the published snapshot's; bands only when the view has them
    curves = figures.transfer_curves_figure(view, picked, dashed, bands=selection[3] > 0)

    hazards = go.Figure()
    shown = view.hazards[view.hazards["teacher"].isin(picked)]
    for index, (teacher, group) in enumerate(shown.groupby("teacher", sort=True)):
        hazards.add_trace(
            go.Bar(
                x=group["bin"].to_numpy() / 50,
                y=group["share"].to_numpy(),
                name=plotly_literal(teacher),
                marker_color=figures.PALETTE[index % len(figures.PALETTE)],
                offsetgroup=plotly_literal(teacher),
                hovertemplate="position %{x:.2f}<br>share %{y:.3f}<extra>%{fullData.name}</extra>",
            )
        )
    hazards.update_layout(
        barmode="group",
        height=360,
        xaxis_title="hazard position (bin / 50; 0 = never solved)",
        yaxis_title="share",
        legend_title_text="teacher",
    )
    return curves, hazards


table = common.fresh_curves()
if table is not None:
    datasets, students = views.transfer_options(table)
else:
    datasets = common.distinct("rollouts", "dataset")
    students = common.distinct("rollouts", "student")
left, middle, right = st.columns(3)
dataset = common.url_select("Dataset", [common.ALL, *datasets], "dataset", where=left)
student = common.url_select("Student", [common.ALL, *students], "student", where=middle)
with right:
    from legival_core.transfer import PROFILES

    profile = common.url_select(
        "Profile",
        list(PROFILES),
        "profile",
        help="paper: the paper's definitions; release: the authors' released code, bug for "
        "bug (float centres, k = 0 pooled into centre 1, last prefix m - 1, last sample wins, "
        "SOTU / log(curve centres), regression = share of traces with a drop). It switches "
        "the curves, bands, hazards and every number of the summary.",
    )
    st.caption(PROFILES[profile].description)
bands = st.toggle(
    f"Bootstrap bands (95%, {BAND_RESAMPLES} resamples of traces)", value=True, key="bands"
)
selection = (
    None if dataset == common.ALL else dataset,
    None if student == common.ALL else student,
    profile,
    BAND_RESAMPLES if bands else 0,
)
view = transfer_view(*selection)

teachers = sorted(view.curves["teacher"].unique())
picked = st.multiselect("Teachers", teachers, default=teachers, key="curve_teachers")
dashed = () if include else tuple(t for t in common.reference_teachers() if t in picked)
curve_figure, hazard_figure = _figures(*common.store_key(), selection, tuple(picked), dashed)
st.plotly_chart(curve_figure, key="curves_chart")
if dashed:
    st.caption(
        "Dashed curves are reference teachers (a human solution, a gold rationale), drawn for "
        "comparison; *Include reference teachers* in the sidebar draws them like any model."
    )
common.download_csv(view.curves, "transfer_curves")

st.subheader("Hazard: where students first succeed")
st.caption(
    "Share of (trace, student) pairs whose first correct prefix falls in each 2% bin; bin 0 "
    "holds the pairs never solved. Flat histograms mean high SOTU, peaks mean low SOTU."
)
st.plotly_chart(hazard_figure, key="hazard_chart")
if PROFILES[profile].pool_baseline:
    st.caption(
        "Profile 'release': the student alone (k = 0) is pooled into the first bin, so a trace "
        "the student solves without any prefix has its hazard in bin 1, and the curve's first "
        "bin mixes k = 0 with the shortest prefixes."
    )
st.caption("Pooled over the selected traces (not averaged over datasets as the leaderboard is).")
common.table(view.summary[view.summary["teacher"].isin(picked)], "transfer_summary")

st.subheader("Before the answer leaks")
st.caption(
    "A trace leaks at step k when its first k steps already state the gold answer (the answer "
    "layer, the same check the inspector marks). A student that first succeeds at or after the "
    "leak may only have copied the answer; FOTU before the leak keeps the prefixes before it "
    "(paper definitions, per (trace, student) pair as stored by the metrics stage)."
)


@common.derived("transfer_leaks")
def leaks_of(dataset: str | None, student: str | None) -> pd.DataFrame:
    """The leak table of a selection (cached: it groups every rollout of the selection)."""
    from legival_core.leak_summary import leak_summary

    pairs = views.filter_rows(common.load_table("trace_transfer"), dataset=dataset, student=student)
    rows = common.load_rollouts()
    return leak_summary(pairs, rows[rows["trace_id"].isin(set(pairs["trace_id"]))])


columns = common.load_table("trace_transfer").columns if common.has_table("trace_transfer") else []
if {"leak_k", "fotu_before_leak"} <= set(columns):
    leaks = leaks_of(selection[0], selection[1])
    common.table(leaks[leaks["teacher"].isin(picked)], "transfer_leaks")
else:
    st.info(
        "This store has no leak points yet (`trace_transfer` without `leak_k`): rerun the "
        "metrics stage (`python -m precompute metrics --store DIR`)."
    )
