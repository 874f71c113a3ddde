"""Reward models: does a reward model's score track transfer utility?
(docs/metrics/oversight.md)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from legival_core import views
from legival_core.metrics.page_results import RewardSelection
from legival_core.oversight import selections
from legival_core.store import provenance
from legival_core.text.safe_text import markdown_literal
from legival_core.views import figures
from legival_core.views.display import tidy_table
from legival_core.views.rewards import named_correlations, rho_of
from pages import common

st.title("🎯 Reward models")
st.caption(
    "Spearman ρ between a reward model's score for each trace and how much that trace helps a "
    "weak student (FOTU)."
)
#: The published finding; shown only beside a real reward model's ρ.
PAPER_FINDING = (
    "The paper (Legi-Val, arXiv 2603.20508) found |ρ| ≤ 0.2, near 0 once only correct traces "
    "are kept: reward models do not see legibility."
)
common.store_or_stop()
if not common.has_table("rewards"):
    st.info(
        f"The store '{common.store_label()}' has no reward scores yet. Add them with "
        "`python -m precompute reward --store DIR --model ID_OR_PATH` (e.g. the published "
        "`skywork-v2` or `allenai-rb2`, or any local reward-model folder)."
    )
    st.stop()
common.need_tables("trace_transfer", "grades", what="The reward-model page")
include = common.include_references()
support = common.support_choice()

SUBSETS = {"all": "all traces", "correct": "correct traces only"}


def _tables() -> selections.RewardTables:
    return selections.RewardTables(
        *(common.load_table(t) for t in ("rewards", "trace_transfer", "grades")),
        common.load_table("traces", columns=["trace_id", "teacher", "dataset"]),
    )


def _outside(chosen: RewardSelection) -> list[str]:
    """The teachers left out of teacher-level results: the reference teachers, unless included."""
    return [] if chosen.include_references else common.reference_teachers()


@common.derived("reward_points", stored=True)
def reward_points(chosen: RewardSelection) -> pd.DataFrame:
    """The scatter's points (stored by the metrics stage for the default selection)."""
    return selections.reward_points(_tables(), chosen)


@common.derived("reward_rho", stored=True)
def reward_rho(chosen: RewardSelection) -> pd.DataFrame:
    """ρ of reward with each transfer metric at the selection's level; at teacher level
    reference teachers add no point unless included and teachers are averaged over the
    datasets its support names (stored by the metrics stage for the default selection)."""
    return selections.reward_rho(_tables(), chosen, _outside(chosen))


@common.derived("teacher_rewards", stored=True)
def teacher_rewards(chosen: RewardSelection) -> pd.DataFrame:
    """Mean reward and transfer per teacher (stored for the default selection), averaged over
    the datasets the support names; reference teachers narrow them only when included."""
    return selections.teacher_rewards(_tables(), chosen, _outside(chosen))


def shown(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:+.3f}"


models = sorted(common.load_table("rewards", columns=["reward_model"])["reward_model"].unique())
datasets = sorted(common.load_table("trace_transfer", columns=["dataset"])["dataset"].unique())
left, middle, right = st.columns(3)
model = common.url_select("Reward model", models, "rm", where=left)
dataset_choice = common.url_select("Dataset", [common.ALL, *datasets], "dataset", where=middle)
subset = common.url_select(
    "Traces", list(SUBSETS), "subset", where=right, format_func=lambda v: SUBSETS[v]
)
dataset = None if dataset_choice == common.ALL else dataset_choice
correct_only = subset == "correct"
chosen = RewardSelection(
    model, dataset, correct_only=correct_only, include_references=include, support=support
)

# A stand-in's ρ must never sit beside the paper's figure without saying what it is.
standin = provenance.reward_standin(common.load_manifest(), model)
if standin is not None:
    st.warning(
        f"**Stand-in reward model.** {markdown_literal(model)} is "
        f"{markdown_literal(standin)}. Its ρ below measures nothing about reward models: do "
        "not compare it with the paper's |ρ| ≤ 0.2 (Legi-Val, arXiv 2603.20508)."
    )
else:
    st.caption(PAPER_FINDING)

# trace_transfer's "fotu" is the release's trace score when the store used that profile
profile = views.metrics_profile(common.load_manifest())
fotu_name = views.trace_metric_label("fotu", profile)
rho_all = rho_of(reward_rho(replace(chosen, level="trace", correct_only=False)), "fotu")
rho_correct = rho_of(reward_rho(replace(chosen, level="trace", correct_only=True)), "fotu")
one, two = st.columns(2)
one.metric(f"ρ(reward, {fotu_name}), all traces", shown(rho_all))
two.metric(f"ρ(reward, {fotu_name}), correct traces only", shown(rho_correct))
st.caption(
    f"Trace level: one point per trace with a reward and a transfer row; {fotu_name} is "
    "averaged over students. The rollout stage runs only on correct traces, so both numbers "
    "coincide unless the store has transfer rows for incorrect traces too."
)
if fotu_name == views.TRACE_SCORE_LABEL:
    st.caption(views.TRACE_SCORE_NOTE)


@st.cache_resource(show_spinner=False, max_entries=16)
def scatter(path: str, stamp: float, chosen: RewardSelection, title: str) -> go.Figure | None:
    """The reward-vs-transfer scatter of a selection, one point per trace (shared and
    read-only; building it for 100,000 traces takes a while, so it is built once)."""
    points = reward_points(chosen)
    if points.empty:
        return None
    return figures.reward_scatter_figure(points, model, fotu_name, title)


rho_here = rho_correct if correct_only else rho_all
figure = scatter(
    *common.store_key(),
    chosen,
    f"Reward vs {fotu_name} ({SUBSETS[subset]}, ρ = {shown(rho_here)})",
)
if figure is None:
    st.info("No trace in this selection has both a reward score and a transfer value.")
else:
    st.plotly_chart(figure, key="reward_scatter")

st.subheader("Teacher level")
st.caption(
    "One row per teacher: mean reward and transfer metrics, each averaged over datasets first "
    "(docs/metrics/oversight.md). ρ is computed across teachers."
)
teachers = teacher_rewards(chosen)
common.table(teachers.drop(columns=["reward_model"]), f"teacher_rewards_{subset}")
correlations = pd.concat(
    [
        reward_rho(replace(chosen, level=level, correct_only=flag))
        for level in ("trace", "teacher")
        for flag in (False, True)
    ],
    ignore_index=True,
)
st.markdown("**Spearman ρ of the reward with each transfer metric**")
# the metrics by their names on the other pages; the CSV keeps the field names
st.dataframe(tidy_table(named_correlations(correlations, profile)), hide_index=True)
common.download_csv(correlations, "reward_correlations")
