"""Redundancy threshold: each teacher's redundancy share as τ sweeps 0..1
(docs/metrics/redundancy.md), from the
store's ``similarity`` table, with the τ behind the store's other redundancy figures marked."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from legival_core.metrics.efficiency import REDUNDANCY_THRESHOLDS
from legival_core.metrics.page_results import RedundancySelection
from legival_core.metrics.redundancy_sweep_view import (
    recorded_threshold,
    sweep_thresholds,
    teacher_redundancy_sweep,
)
from legival_core.views import figures
from legival_core.views.redundancy import at_threshold, sweep_over_datasets
from pages import common

st.title("🔁 Redundancy threshold")
st.caption(
    "A trace's redundancy is the share of its steps i ≥ 1 whose closest earlier step (cosine "
    "r_i of MiniLM embeddings) exceeds τ. Each curve is a teacher's mean over its traces as τ "
    "sweeps the published 21 thresholds 0, 0.05, …, 1 (Legi-Val, arXiv 2603.20508)."
)
common.page_setup("redundancy")
common.need_tables("similarity", "traces", what="The redundancy threshold page")
include = common.include_references()

recorded = recorded_threshold(common.load_manifest())
chosen = recorded if recorded is not None else REDUNDANCY_THRESHOLDS["paper"]


@common.derived("redundancy_sweep", stored=True)
def sweep(chosen: RedundancySelection) -> pd.DataFrame:
    """Every teacher's and dataset's sweep over the published grid plus the chosen τ (stored
    by the metrics stage for the τ it recorded)."""
    return teacher_redundancy_sweep(
        common.load_table("similarity", columns=["trace_id", "step", "max_similarity"]),
        common.load_table("traces", columns=["trace_id", "teacher", "dataset"]),
        sweep_thresholds(chosen.threshold),
    )


table = sweep(RedundancySelection(chosen))
dataset = common.url_select("Dataset", [common.ALL, *sorted(table["dataset"].unique())], "dataset")
# "All": the mean over datasets at every τ, the same average as the leaderboard's
rows = sweep_over_datasets(table) if dataset == common.ALL else table[table["dataset"] == dataset]
dashed = set() if include else set(common.reference_teachers())

figure = figures.redundancy_sweep_figure(rows, chosen, dashed, dataset == common.ALL)
st.plotly_chart(figure, key="sweep_chart")
if recorded is None:
    st.caption(
        f"The dotted line is the paper's τ = {chosen:.2f}: the store's manifest records no τ "
        "from a metrics run."
    )
else:
    st.caption(
        f"The dotted line is τ = {chosen:.2f}, the threshold the store's metrics stage used for "
        "trace_efficiency.redundancy (the leaderboard's and the correlations' redundancy)."
    )

st.subheader(f"At τ = {chosen:.2f}")
at_chosen = at_threshold(rows, chosen)
common.table(at_chosen[["teacher", "redundancy", "n_traces"]], "redundancy_at_tau")
common.download_csv(rows, "redundancy_sweep", label="Download the whole sweep (CSV)")
