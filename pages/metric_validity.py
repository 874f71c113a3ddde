"""Metric validity: how well each metric recovers properties planted in synthetic traces."""

from __future__ import annotations

import streamlit as st

from legival_core.calibration.calibration import detector_table, report_view
from legival_core.metrics import label_quality
from legival_core.text.safe_text import markdown_literal
from legival_core.views import figures
from pages import common


def hand_labels() -> None:
    """How the backtracking labelers and the segmenters fare against hand labels (stored in
    the package: legival_core/data/label_quality.json)."""
    st.subheader("Against hand labels: backtracking and steps")
    readers = label_quality.stored_quality()["backtracking"]["readers_kappa"]["all"]
    st.caption(
        "The planted traces measure the lexical detector on planted cues and decoys; real "
        "reasoning is harder. These numbers come from steps and passages of CHAMP solutions "
        f"labelled by two readers (tests/fixtures; backtracking κ between them {readers:.2f}), "
        "each split into a dev half (the rules were developed on it) and a test half (scored "
        "once). *Weighted*: over the demo store's steps, each stratum of the draw weighted by "
        "the inverse of its sampling rate. Intervals: 95% over resamples of traces."
    )
    common.table(label_quality.backtracking_table(), "label_quality_backtracking")
    st.caption("The stored Backtracking numbers of this store: " + common.backtracking_note())
    common.table(label_quality.segmentation_table(), "label_quality_segmentation")
    st.caption(
        "Step boundaries: a step start counts as found when a reader put one at the same character."
    )


st.title("🧪 Metric validity")
st.caption(
    "Synthetic traces with planted properties (key facts, answer leaks, repeats, paraphrases, "
    "near-misses, self-corrections and decoys) run through the real stages; each row compares "
    "the planted value with what the pipeline recovered. Held-out templates are wordings no "
    "detector was developed on."
)
common.page_setup("metric_validity")

if common.has_table("calibration_report"):
    report = common.load_table("calibration_report")
    st.caption(f"Calibration report of the store '{common.store_label()}'.")
else:
    # Most stores hold real traces, not planted ones: show the calibration store that ships
    # with the app, built offline by the project's own command.
    report = common.bundled_calibration_report()
    if report is None:
        st.info(
            f"The store '{common.store_label()}' has no calibration report, and the bundled "
            "calibration store has not been built. Build one with "
            f"`{common.CALIBRATION_COMMAND}` (offline, a few minutes)."
        )
        hand_labels()
        st.stop()
    st.caption(
        f"The store '{common.store_label()}' holds no planted traces, so this page shows the "
        f"bundled calibration store (built with `{common.CALIBRATION_COMMAND}`; "
        "`python -m precompute calibrate --store DIR` builds your own, and a store chosen in the "
        "sidebar that has a report is shown instead)."
    )

properties = sorted(report["property"].unique())
chosen = common.url_select("Property", [common.ALL, *properties], "property")
shown = report_view(report, None if chosen == common.ALL else chosen)

outside = shown[shown["within_tolerance"].fillna(True).eq(False)]
if len(outside):
    names = "; ".join(
        f"{row.measure} ({row.template_set}, {row.case})" for row in outside.itertuples()
    )
    st.warning(markdown_literal(f"{len(outside)} row(s) outside their tolerance: {names}."))
st.subheader("Planted vs recovered")
common.table(shown, "calibration_report")


st.subheader("Detectors: development vs held-out templates")
detectors = detector_table(shown)
common.table(detectors, "calibration_detectors")
cases = shown[shown["recall"].notna() & (shown["case"] != "summary")]
if len(cases):
    figure = figures.template_set_bars_figure(cases, "recall", "recall (flagged share)")
    st.plotly_chart(figure, key="calibration_recall")

alarms = shown[shown["planted"].eq(0.0) & (shown["case"] != "summary")]
if len(alarms):
    st.subheader("False alarms: decoys, near-misses, unplanted steps, no-leak traces")
    figure = figures.template_set_bars_figure(alarms, "recovered", "flagged share")
    st.plotly_chart(figure, key="calibration_false_alarms")


hand_labels()
