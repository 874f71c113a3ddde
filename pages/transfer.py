"""Transfer curves: μ_T(x) per teacher with bootstrap bands, the student baseline, hazards."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from legival_core import views
from pages import common

st.title("📈 Transfer curves")
st.caption(
    "How often a weak student answers correctly after seeing the first share x of a correct "
    "teacher trace. FOTU is the area under a teacher's curve; the hazard histogram shows where "
    "students first succeed, and SOTU is its normalised entropy."
)
common.page_setup("transfer")
common.need_tables("rollouts", what="Transfer curves")


def _rollouts(dataset: str | None, student: str | None) -> pd.DataFrame:
    return views.filter_rows(common.load_rollouts(), dataset=dataset, student=student)


@common.derived("curves")
def curves(dataset: str | None, student: str | None, profile: str, n_boot: int) -> pd.DataFrame:
    from legival_core.transfer import curve

    table = curve(_rollouts(dataset, student), by="teacher", n_boot=n_boot, profile=profile)
    return table.assign(teacher=table["teacher"].astype(str))


@common.derived("hazards")
def hazards(
    dataset: str | None, student: str | None, profile: str, n_boot: int
) -> tuple[pd.DataFrame, float, pd.DataFrame]:
    """Hazard histograms, the student baseline and the per-teacher summary (small results,
    so a rerun does not copy the per-trace table out of the cache)."""
    from legival_core.transfer import trace_metrics

    per_trace = trace_metrics(_rollouts(dataset, student), profile=profile)
    per_trace = per_trace.assign(teacher=per_trace["teacher"].astype(str))
    summary = views.transfer_summary(curves(dataset, student, profile, n_boot), per_trace, profile)
    return views.hazard_histograms(per_trace), views.student_baseline(per_trace), summary


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
        help="paper: the paper's definitions; release: "
        "the authors' released code (bins, last prefix, SOTU normaliser).",
    )
    st.caption(PROFILES[profile].description)
chosen_dataset = None if dataset == common.ALL else dataset
chosen_student = None if student == common.ALL else student
bands = st.toggle("Bootstrap bands (95%, 200 resamples of traces)", value=True, key="bands")
curve_table = curves(chosen_dataset, chosen_student, profile, 200 if bands else 0)
hazard_table, baseline, summary = hazards(
    chosen_dataset, chosen_student, profile, 200 if bands else 0
)

teachers = sorted(curve_table["teacher"].unique())
picked = st.multiselect("Teachers", teachers, default=teachers, key="curve_teachers")
palette = px.colors.qualitative.Plotly
figure = go.Figure()
for index, teacher in enumerate(picked):
    group = curve_table[curve_table["teacher"] == teacher]
    colour = palette[index % len(palette)]
    if bands and group["lo"].notna().any():
        figure.add_trace(
            go.Scatter(
                x=[*group["x"], *group["x"][::-1]],
                y=[*group["hi"], *group["lo"][::-1]],
                fill="toself",
                fillcolor=colour,
                opacity=0.18,
                line={"width": 0},
                hoverinfo="skip",
                showlegend=False,
                legendgroup=teacher,
                name=f"{teacher} band",
            )
        )
    figure.add_trace(
        go.Scatter(
            x=group["x"],
            y=group["mean"],
            mode="lines",
            name=str(teacher),
            legendgroup=teacher,
            line={"color": colour, "width": 2},
            customdata=group[["lo", "hi", "n_traces"]].to_numpy(),
            hovertemplate="x = %{x:.2f}<br>μ = %{y:.3f} [%{customdata[0]:.3f}, "
            "%{customdata[1]:.3f}]<br>traces: %{customdata[2]}<extra>%{fullData.name}</extra>",
        )
    )
if pd.notna(baseline):
    figure.add_hline(
        y=baseline,
        line_dash="dash",
        line_color="#555",
        annotation_text=f"student alone (k = 0): {baseline:.2f}",
        annotation_position="top left",
    )
figure.update_layout(
    height=430,
    xaxis_title="position x = k / m in the teacher trace",
    yaxis_title="student accuracy μ_T(x)",
    yaxis_range=[-0.02, 1.02],
    margin={"t": 30},
)
st.plotly_chart(figure, key="curves_chart")
common.download_csv(curve_table, "transfer_curves")

st.subheader("Hazard: where students first succeed")
st.caption(
    "Share of (trace, student) pairs whose first correct prefix falls in each 2% bin; bin 0 "
    "holds the pairs never solved. Flat histograms mean high SOTU, peaks mean low SOTU."
)
hazard_table = hazard_table[hazard_table["teacher"].isin(picked)]
hazard_figure = px.bar(
    hazard_table.assign(position=hazard_table["bin"] / 50),
    x="position",
    y="share",
    color="teacher",
    barmode="group",
    labels={"position": "hazard position (bin / 50; 0 = never solved)"},
    height=360,
)
st.plotly_chart(hazard_figure, key="hazard_chart")
summary = summary[summary["teacher"].isin(picked)]
st.caption("Pooled over the selected traces (not averaged over datasets as the leaderboard is).")
common.table(
    summary[
        [
            "teacher",
            "n_traces",
            "n_students",
            "fotu",
            "sotu",
            "never_solved",
            "regression_rate",
            "baseline",
            "lift",
        ]
    ],
    "transfer_summary",
)
