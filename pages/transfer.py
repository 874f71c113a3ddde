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
from legival_core.metrics.page_results import TransferSelection
from legival_core.metrics.registry import metrics_in
from legival_core.text.safe_text import markdown_literal
from legival_core.views import board as board_layout
from legival_core.views import figures
from legival_core.views.display import format_share
from legival_core.views.transfer import board_fotu as transfer_board_fotu
from legival_core.views.transfer import (
    has_gaps,
    no_rollouts_message,
    rollouts_command,
)
from pages import common

st.title("📈 Transfer curves")
st.caption(
    "How often a weak student answers correctly after seeing the first share x of a correct "
    "teacher trace. FOTU is the area under a teacher's curve; the hazard histogram shows where "
    "students first succeed, and SOTU is its normalised entropy."
)
common.page_setup("transfer")
if not common.has_table("rollouts"):
    # Ingested traces have no students: the command that adds them, not a generic "run".
    st.info(no_rollouts_message(common.store_label()))
    shown = None if common.get_config().readonly else str(common.current_store_path())
    st.code(rollouts_command(shown), language="bash")
    st.stop()
include = common.include_references()
support = common.support_choice()

#: Resamples of traces behind the bands (the metrics stage stores views with the same).
from legival_core.metrics.transfer_curves import BAND_RESAMPLES  # noqa: E402


@common.derived("transfer_view")
def transfer_view(
    dataset: str | None, student: str | None, profile: str, n_boot: int
) -> views.TransferView:
    return views.stored_or_computed_view(
        common.fresh_curves(), common.load_rollouts, dataset, student, profile, n_boot
    )


@common.derived("transfer_coverage", stored=True)
def coverage(chosen: TransferSelection) -> pd.DataFrame:
    """Traces measured per (teacher, bin) of the selection (legival_core.views; stored by the
    metrics stage for every dataset and student)."""
    return views.observed_coverage(
        common.load_rollouts(), chosen.dataset, chosen.student, chosen.profile
    )


@common.derived("transfer_first_measured", stored=True)
def first_measured(chosen: TransferSelection) -> pd.DataFrame:
    """Per trace, the first measured position (stored for every dataset and student)."""
    return views.first_measured_positions(common.load_rollouts(), chosen.dataset, chosen.student)


@common.derived("transfer_board_fotu")
def board_fotu(
    dataset: str | None, student: str | None, include: bool, support: str
) -> pd.DataFrame:
    """The leaderboard's FOTU of each teacher for this selection and the traces it rests on
    (:func:`legival_core.views.transfer.board_fotu`); reference teachers narrow the averaged
    datasets only when ``include``."""
    per_student = None
    if student is not None:
        per_student = common.student_metrics(views.metrics_profile(common.load_manifest()))
    return transfer_board_fotu(
        common.load_table("teacher_metrics"),
        common.load_table("trace_transfer"),
        per_student,
        dataset,
        student,
        support,
        () if include else common.reference_teachers(),
    )


@st.cache_resource(show_spinner=False, max_entries=16)
def _figures(
    path: str,
    stamp: float,
    selection: tuple[str | None, str | None, str, int],
    picked: tuple[str, ...],
    dashed: tuple[str, ...] = (),
) -> tuple[go.Figure, go.Figure, go.Figure]:
    """The two charts of one view (shared, read-only: drawing them does not change them).
    Teachers in ``dashed`` (reference teachers) are drawn as dashed reference lines."""
    view = transfer_view(*selection)
    # the same curve chart as the published snapshot's; bands only when the view has them
    curves = figures.transfer_curves_figure(view, picked, dashed, bands=selection[3] > 0)
    # Measured vs filled: a marker where at least one trace has a prefix in the bin (the same
    # marks as the published site's chart).
    covered = coverage(TransferSelection(*selection[:3]))
    figures.add_measured_markers(curves, view, covered, picked)
    strip = figures.coverage_figure(covered, picked, filled=not has_gaps(view, picked))
    hazards = figures.hazard_figure(view.hazards, picked)
    return curves, hazards, strip


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
    from legival_core.metrics.transfer import PROFILES

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
bands = common.url_toggle(
    f"Bootstrap bands (95%, {BAND_RESAMPLES} resamples of traces)", "bands", default=True
)
selection = (
    None if dataset == common.ALL else dataset,
    None if student == common.ALL else student,
    profile,
    BAND_RESAMPLES if bands else 0,
)
view = transfer_view(*selection)
chosen = TransferSelection(*selection[:3])

teachers = sorted(view.curves["teacher"].unique())
picked = common.url_multiselect("Teachers", teachers, "teachers", default=teachers)
dashed = () if include else tuple(t for t in common.reference_teachers() if t in picked)
curve_figure, hazard_figure, coverage_figure = _figures(
    *common.store_key(), selection, tuple(picked), dashed
)
st.plotly_chart(curve_figure, key="curves_chart")
if headline := common.leak_headline(per_teacher="in “Before the answer leaks” below"):
    st.warning(markdown_literal(headline))
st.plotly_chart(coverage_figure, key="coverage_chart")
firsts = first_measured(chosen)
firsts = firsts[firsts["teacher"].isin(picked)]
if has_gaps(view, picked):
    st.caption(
        "Some curves have bins no trace was measured in (this profile fills nothing in): those "
        "curves are drawn from their measured bins only, each a marker, and the lines between "
        "markers only join them, they are not measurements. A bin resting on a few rollouts "
        "swings between 0 and 1, hence the spikes; the strip below counts the traces per bin."
    )
elif len(firsts):
    st.caption(
        f"Dots mark the bins where some trace was measured; the line between them is filled in "
        f"by the profile's grid, and left of a trace's first measured prefix it repeats that "
        f"prefix's value. Median first measured x = {firsts['first_x'].median():.2f}; "
        f"{int(firsts['whole_only'].sum())} of {len(firsts)} traces were measured only on the "
        "whole trace (k = m)."
    )
if dashed:
    st.caption(
        "Dashed curves are reference teachers (a human solution, a gold rationale), drawn for "
        "comparison; *Include reference teachers* in the sidebar draws them like any model."
    )
common.download_csv(view.curves, "transfer_curves")

st.subheader("Hazard: where students first succeed")
st.caption(
    "Share of (trace, student) pairs whose first correct prefix falls in each 2% bin of the "
    "position (right); the pairs no prefix solved are apart on the left, each panel on its own "
    "scale. Flat histograms mean high SOTU, peaks mean low SOTU."
)
st.plotly_chart(hazard_figure, key="hazard_chart")
if PROFILES[profile].pool_baseline:
    st.caption(
        "Profile 'release': the student alone (k = 0) is pooled into the first bin, so a trace "
        "the student solves without any prefix has its hazard in bin 1, and the curve's first "
        "bin mixes k = 0 with the shortest prefixes."
    )
summary = view.summary[view.summary["teacher"].isin(picked)]
pooled_labels = {
    name: f"{common.metric_label(name)}, traces pooled" for name in metrics_in("teacher_quantities")
} | {"n_traces": "n traces, pooled"}
if profile == views.metrics_profile(common.load_manifest()):
    # the leaderboard's number under its own name, beside the pooled one
    fotu = board_fotu(selection[0], selection[1], include, support)
    summary = summary.assign(
        board_fotu=summary["teacher"].map(fotu["fotu"]),
        board_n=summary["teacher"].map(fotu["n"]).astype("Int64"),
    )
    pooled_labels |= {"board_fotu": "FOTU", "board_n": "n traces (FOTU)"}
    first = ["teacher", "board_fotu", "board_n"]
    summary = summary[[*first, *[c for c in summary if c not in first]]]
st.caption(
    "“…, traces pooled”: every selected trace weighs the same, whatever its dataset; *n traces, "
    "pooled* counts them. *FOTU* is the leaderboard's number: the mean over datasets of each "
    "dataset's FOTU, over the datasets the sidebar's averaging names; *n traces (FOTU)* counts "
    "the traces with a FOTU on those datasets, the rows it rests on."
)
common.table(
    summary,
    "transfer_summary",
    labels=pooled_labels,
    formats={"board_fotu": lambda v: board_layout.format_value(v, "fotu")},
)

st.subheader("Before the answer leaks")
st.caption(
    "A trace leaks at step k when its first k steps already state the gold answer (the answer "
    "layer, the same check the inspector marks). A student that first succeeds at or after the "
    "leak may only have copied the answer; FOTU before the leak keeps the prefixes before it "
    "(paper definitions, per (trace, student) pair as stored by the metrics stage)."
)


@common.derived("transfer_leaks", stored=True)
def leaks_of(chosen: TransferSelection) -> pd.DataFrame:
    """The leak table of a selection (cached: it groups every rollout of the selection;
    stored by the metrics stage for every dataset and student)."""
    from legival_core.metrics.leak_summary import selection_leak_summary

    pairs = views.filter_rows(
        common.load_table("trace_transfer"), dataset=chosen.dataset, student=chosen.student
    )
    return selection_leak_summary(pairs, common.load_rollouts())


columns = common.load_table("trace_transfer").columns if common.has_table("trace_transfer") else []
if {"leak_k", "fotu_before_leak"} <= set(columns):
    leaks = leaks_of(chosen)
    common.table(
        leaks[leaks["teacher"].isin(picked)],
        "transfer_leaks",
        labels={
            "fotu": "FOTU, pairs pooled",
            "fotu_before_leak": "FOTU before leak, pairs pooled",
            "share_at_or_after_leak": "share of first solves at or after the leak",
            "at_or_after_leak": "first solves at or after the leak",
            "first_solves": "first solves",
            "leaks": "pairs whose trace leaks",
            "pairs": "(trace, student) pairs",
        },
        formats={"share_at_or_after_leak": format_share},
    )
else:
    st.info(
        "This store has no leak points yet (`trace_transfer` without `leak_k`): rerun the "
        "metrics stage (`python -m precompute metrics --store DIR`)."
    )
