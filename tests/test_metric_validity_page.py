"""Metric validity on the bundled app: the demo holds no planted traces, so the page shows the
calibration store that ships with the app (``results/calibration``, built offline by the
project's own ``calibrate`` command), says so, and names a command that exists.
"""

from __future__ import annotations

import json
import shlex

import pytest
import streamlit as st

from legival_core.store.store import Store
from legival_core.views.app_config import BUNDLED_STORES
from pages.common import CALIBRATION_COMMAND, CALIBRATION_STORE
from precompute.cli import _build_parser
from tests.app_runner import run_app_page


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def test_the_hint_names_a_command_the_cli_takes() -> None:
    words = shlex.split(CALIBRATION_COMMAND)
    assert words[:4] == ["python", "-m", "precompute", "calibrate"]
    options = _build_parser().parse_args(words[3:])
    assert str(options.store) == str(CALIBRATION_STORE.relative_to(CALIBRATION_STORE.parents[1]))
    assert options.size == "small"


def test_demo_page_shows_the_bundled_calibration_store(monkeypatch: pytest.MonkeyPatch) -> None:
    if not (CALIBRATION_STORE / "manifest.json").exists():
        pytest.fail(f"the bundled calibration store is missing ({CALIBRATION_COMMAND} builds it)")
    demo = Store.open(BUNDLED_STORES["demo"])
    assert not demo.has("calibration_report")
    report = Store.open(CALIBRATION_STORE).read("calibration_report")
    at = run_app_page("metric_validity", monkeypatch, [demo.path], timeout=300)
    assert not at.info  # no "has not been built" message
    assert len(at.dataframe[0].value) == len(report)
    captions = " ".join(c.value for c in at.caption)
    assert "holds no planted traces" in captions and CALIBRATION_COMMAND in captions
    # one colour per template set across both charts
    colours: dict[str, set[str]] = {}
    for chart in at.get("plotly_chart"):
        for trace in json.loads(chart.proto.spec)["data"]:
            colours.setdefault(trace["name"], set()).add(trace["marker"]["color"])
    assert {"dev", "held_out"} <= set(colours) and all(len(c) == 1 for c in colours.values())
    assert len({next(iter(c)) for c in colours.values()}) == len(colours)


def test_page_shows_the_hand_label_measurements(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: beside the planted-cue calibration, the page shows how each backtracking
    labeler and each segmenter fares against the hand labels, the stored numbers exactly, and
    which labeler gave this store's Backtracking column."""
    from legival_core.metrics.label_quality import (
        backtracking_table,
        quality_note,
        segmentation_table,
    )

    demo = Store.open(BUNDLED_STORES["demo"])
    at = run_app_page("metric_validity", monkeypatch, [demo.path], timeout=300)
    assert not at.exception
    shown = {tuple(d.value.columns): d.value for d in at.dataframe}
    backtracking = shown[tuple(backtracking_table().columns)]
    pairs = backtracking[["labeler", "half"]].values.tolist()
    assert [p for p in pairs if p[0] in ("cues", "lexical")] == [
        ["cues", "dev"],
        ["cues", "test"],
        ["lexical", "dev"],
        ["lexical", "test"],
    ]
    assert backtracking["precision"].tolist() == backtracking_table()["precision"].tolist()
    segmentation = shown[tuple(segmentation_table().columns)]
    assert set(segmentation["segmenter"]) == {"paper", "lines", "math", "second reader"}
    captions = " ".join(c.value for c in at.caption)
    # the committed demo's Backtracking column comes from the context-aware cues
    from legival_core.text.safe_text import markdown_literal

    assert markdown_literal(quality_note("cues")) in captions
