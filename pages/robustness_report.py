"""The current store's robustness report, cached: shared by the Robustness page and the
leaderboard's "rank changes under some choice" marker (not a page itself)."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitAPIException

from legival_core.metrics.page_results import RobustnessSelection
from legival_core.rankings.robustness_choices import RobustnessReport
from legival_core.text.safe_text import markdown_literal
from pages import common

#: Where the leaderboard's marker links to.
PAGE = "pages/robustness.py"


@common.derived("robustness_report")
def report(n_boot: int, seed: int) -> RobustnessReport:
    """Every metric's ranking under every alternative choice
    (legival_core.rankings.robustness_choices), flips judged against the default's rank intervals
    from ``n_boot`` resamples (none: 0); stored by the metrics stage for the leaderboard's
    marker (0) and the Robustness page (the configured resamples)."""
    from legival_core.rankings import robustness_choices as choices

    def read(table: str, columns: list[str] | None) -> pd.DataFrame:
        return common.load_table(table, columns) if common.has_table(table) else pd.DataFrame()

    settings = choices.Settings.from_manifest(common.load_manifest())
    # the metrics stage stores the report of the default settings (leaderboard and page)
    chosen = RobustnessSelection(choices.settings_key(settings), n_boot, seed)
    parts = common.stored_parts("robustness", choices.REPORT_PARTS, chosen)
    if parts is not None:
        return choices.report_from_frames(parts, settings)
    tables = choices.read_tables(read, common.reference_teachers())
    return choices.robustness_report(tables, settings, n_boot=n_boot, seed=seed)


def leaderboard_marker(shown: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """The leaderboard's text table with ⇅ after each rank whose order flips under some
    alternative choice, and a link to the Robustness page; unchanged when the store has no
    per-trace tables or the report cannot be made (a note says why)."""
    from legival_core.views import robustness as robustness_view

    if not common.has_table("trace_efficiency"):
        return shown
    try:
        drawn = report(0, 0)
    except ValueError as error:  # a table that does not fit (SchemaError names it)
        st.caption(f"No robustness marks: {markdown_literal(str(error))}")
        return shown
    marked = robustness_view.mark_changing_ranks(shown, drawn, metrics)
    if not marked.equals(shown):
        # The explanation as a caption (it wraps); the link short, since a page link's label
        # stays on one line and a long one ran off the page.
        st.caption(
            f"{robustness_view.CHANGE_MARK} marks a rank whose order against another teacher "
            "flips under some analysis choice (threshold, prefix grid, profile, student, "
            "labeler, tokenizer, segmenter)."
        )
        label = f"{robustness_view.CHANGE_MARK} Which rankings survive every choice: Robustness"
        try:
            st.page_link(PAGE, label=label)
        except StreamlitAPIException:  # the page run on its own, outside app.py's navigation
            st.caption(label)
    return marked
