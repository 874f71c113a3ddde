"""Robustness: how each default ranking fares when one analysis choice is made the other way."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from legival_core.rankings.robustness import REAL_FLIP, WITHIN_NOISE
from legival_core.text.safe_text import markdown_literal
from legival_core.views import robustness as robustness_view
from legival_core.views.display import MISSING, tidy_table
from pages import common, robustness_report

st.title("🧭 Robustness")
st.caption(
    "Every ranking rests on choices the paper and the authors' released code make differently: "
    "the redundancy threshold, the prefix grid, the transfer profile, the student, the "
    "backtracking labeler, the tokenizer, the segmenter, whether reference teachers are "
    "ranked. Each alternative below changes one choice and ranks the teachers again; τ_b and ρ "
    "compare that ranking with the default one."
)
common.page_setup("robustness")
common.need_tables("trace_efficiency", what="The robustness report")

config = common.get_config()
try:
    report = robustness_report.report(config.rank_resamples, config.resample_seed)
except ValueError as error:  # a table that does not fit: the message names table, row, field
    st.warning(markdown_literal(f"The robustness report cannot be made for this store: {error}"))
    st.stop()
settings = report.settings
st.caption(
    markdown_literal(
        f"Defaults of this store: redundancy τ = {settings.threshold:g}; transfer profile "
        f"{settings.profile}; tokens by {settings.encoding}; steps by {settings.segmenter}; "
        f"backtracking by {settings.labeler or 'the stored labels'}. A flipped pair is "
        f"“{WITHIN_NOISE}” when the two teachers' 95% rank intervals overlap under the default "
        f"({config.rank_resamples:,} resamples of problems, as on the leaderboard), "
        f"“{REAL_FLIP}” when they do not."
    )
)

st.subheader("Which conclusions survive every choice")
common.table(robustness_view.survival_table(report), "robustness_survival")

metrics = list(dict.fromkeys(report.summary["metric"]))
if not metrics:
    st.info("No alternative choice can be computed from this store's tables.")
    st.stop()
metric = common.url_select("Metric", metrics, "metric", format_func=common.metric_label)
st.subheader(f"{common.metric_label(metric)}: every alternative")
common.table(robustness_view.choice_matrix(report, metric), f"robustness_{metric}")
if metric == "backtracking":
    st.caption(common.backtracking_note())

flips = robustness_view.flip_table(report, metric)
if len(flips):
    with st.expander(f"Every flipped pair of {common.metric_label(metric)} ({len(flips)})"):
        common.table(flips, f"robustness_{metric}_flips")

options = robustness_view.choice_options(report, metric)
labels = dict(options)
choice = common.url_select(
    "Compare the default with", [key for key, _ in options], "choice", format_func=labels.get
)
pair_table = robustness_view.side_by_side(report, metric, choice)


def highlight(row: pd.Series) -> list[str]:
    """Rows of teachers in a flipped pair: red for a real flip, amber within noise."""
    text = str(row["flipped with"])
    colour = "#f5b7b1" if REAL_FLIP in text else "#fdebd0" if text else ""
    return [f"background-color: {colour}" if colour else "" for _ in row]


st.caption(
    "The default ranking beside the chosen alternative, in default order; highlighted rows "
    f"swap places with another teacher (red: {REAL_FLIP}, amber: {WITHIN_NOISE})."
)
# tidy_table writes a column with a gap as text (the reference teacher has no default rank):
# the grid would draw a null as "None" whatever a Styler's na_rep says.
short = {
    name: (lambda v: MISSING if pd.isna(v) else f"{v:.4g}")
    for name in ("default value", "value under the choice")
}
shown_pairs = tidy_table(pair_table, formats=short).apply(highlight, axis=1)
st.dataframe(shown_pairs, hide_index=True)
common.download_csv(pair_table, f"robustness_{metric}_pairs")

if len(report.unavailable):
    st.subheader("Not compared on this store")
    common.table(
        report.unavailable[["label", "reason"]].rename(columns={"label": "choice"}),
        "robustness_unavailable",
    )
