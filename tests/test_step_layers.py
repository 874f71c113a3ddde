"""Thought Anchors importances in the trace inspector (issue 26, item 3): the step layers put
resampling importance, redundancy, backtracking and the students on the same steps.

The page test ingests a Thought Anchors folder, runs the real segment stage (Punkt) and opens
the inspector with Streamlit's AppTest.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core.store.store import Store
from legival_core.text.chunk_alignment import align_chunks
from legival_core.views.step_layers import (
    IMPORTANCE_ROW,
    step_dtick,
    step_layers,
    step_layers_figure,
    student_strip_figure,
)
from precompute.cli import EXIT_OK, main
from tests.test_formats import _thought_anchors_folder

PAGES = Path(__file__).resolve().parents[1] / "pages"


def test_step_layers_rows_line_up_on_the_steps() -> None:
    """Three steps; chunk 0 covers step 0 ([0, 11)) with importance 0.05, chunk 1 covers step
    2 ([34, 50)) with -0.1; step 2 repeats step 1 (r = 0.9); the lexical labeler flagged step
    2; one student was right after step 1 (1.0), wrong after step 2 (0.0), with no rollout
    after step 3."""
    table = pd.DataFrame(
        {
            "step": [0, 1, 2],
            "number": [1, 2, 3],
            "similarity": [np.nan, 0.9, 0.2],
            "flag_lexical": [False, True, False],
        }
    )
    steps = pd.DataFrame({"step": [0, 1, 2], "start": [0, 12, 34], "end": [11, 33, 50]})
    chunks = pd.DataFrame(
        {"chunk": [0, 1], "start": [0, 34], "end": [11, 50], "importance": [0.05, -0.1]}
    )
    strip = pd.DataFrame({0: [0.0], 1: [1.0], 2: [0.0]}, index=["smol"])
    layers = step_layers(table, align_chunks(steps, chunks), strip)
    assert list(layers.index) == [IMPORTANCE_ROW, "redundancy r_i", "backtracking", "smol"]
    assert list(layers.columns) == [1, 2, 3]
    rows = layers.to_numpy().tolist()
    assert rows[0][0] == 0.05 and math.isnan(rows[0][1]) and rows[0][2] == -0.1
    assert math.isnan(rows[1][0]) and rows[1][1:] == [0.9, 0.2]
    assert rows[2] == [0.0, 1.0, 0.0]
    assert rows[3][:2] == [1.0, 0.0] and math.isnan(rows[3][2])  # k = 0 is left out
    figure = step_layers_figure(layers)
    # Importance is shaded symmetrically around 0 up to the trace's largest |importance|, 0.1.
    importance = next(t for t in figure.data if t.y[0] == IMPORTANCE_ROW)
    assert (importance.zmin, importance.zmax) == (-0.1, 0.1)
    assert len(figure.data) == 4
    # The step axis counts whole steps (Plotly's own ticks were 0.5, 1, 1.5, … on 3 steps).
    axes = [v for k, v in figure.layout.to_plotly_json().items() if k.startswith("xaxis")]
    assert len(axes) == 4 and all(a.get("dtick") == 1 for a in axes)


def test_step_axes_tick_whole_steps_and_stay_readable() -> None:
    """Ticks at whole steps, at most 15 of them: every step up to 15 steps, then 2, 5, 10, 20,
    … steps apart (2,000 steps: 2000 / 15 = 133.3, so 200)."""
    assert [step_dtick(m) for m in (1, 3, 15, 16, 30, 31, 75, 76, 2000)] == [
        1, 1, 1, 2, 2, 5, 5, 10, 200,
    ]  # fmt: skip
    # The student strip below the layers: its k axis too (it read 0.5, 1, 1.5, … on 3 steps).
    strip = pd.DataFrame({0: [0.0], 1: [1.0], 2: [1.0], 3: [0.0]}, index=["smol"])
    figure = student_strip_figure(strip)
    # one point per measured prefix, k = 0 (the student alone) included
    assert figure.layout.xaxis.dtick == 1 and list(figure.data[0].x) == [0, 1, 2, 3]


def test_a_hostile_student_name_is_escaped_in_the_figure() -> None:
    table = pd.DataFrame({"step": [0], "number": [1], "similarity": [np.nan]})
    strip = pd.DataFrame({1: [1.0]}, index=["<img src=x onerror=alert(1)>"])
    figure = step_layers_figure(step_layers(table, None, strip))
    labels = [t.y[0] for t in figure.data]
    assert "&lt;img src=x onerror=alert(1)&gt;" in labels and not any("<img" in x for x in labels)


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def test_the_inspector_shows_thought_anchors_importance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _thought_anchors_folder(tmp_path / "rollouts")
    store_dir = tmp_path / "store"
    assert main(["ingest", str(root), "--store", str(store_dir)]) == EXIT_OK
    assert main(["segment", "--store", str(store_dir), "--no-progress"]) == EXIT_OK
    (trace_id,) = Store.open(store_dir).read("traces")["trace_id"]
    monkeypatch.setenv("LEGIVAL_STORE", str(store_dir))
    at = AppTest.from_file(str(PAGES / "inspector.py"), default_timeout=120)
    at.query_params["trace"] = trace_id
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [str(c.value) for c in at.caption]
    # Punkt cuts the reasoning into the chunks' own sentences: every chunk is found (chunk 1's
    # doubled space aside) and maps onto a whole step.
    wanted = "3 chunks: 3 placed on steps by character span, 3 of them map cleanly onto whole steps"
    assert any(wanted in c for c in captions), captions
    # What the importance colours mean is said beside the chart.
    assert any("blue where resampling the step away lowers" in c for c in captions), captions
    charts = [c for c in at.get("plotly_chart")]
    assert charts, "no step-layers chart"


@pytest.mark.slow
def test_chromium_draws_the_step_layers(tmp_path: Path) -> None:
    """Plotly.js must draw every layer (it once drew nothing for several one-row heatmaps on
    one axis, with no error in Python): one heatmap per layer in a real Chromium."""
    from tests.browser_fixtures import chromium_context, streamlit_app

    root = _thought_anchors_folder(tmp_path / "rollouts")
    store_dir = tmp_path / "store"
    assert main(["ingest", str(root), "--store", str(store_dir)]) == EXIT_OK
    assert main(["segment", "--store", str(store_dir), "--no-progress"]) == EXIT_OK
    (trace_id,) = Store.open(store_dir).read("traces")["trace_id"]
    with (
        streamlit_app(["--store", f"ta={store_dir}"]) as base,
        chromium_context(1400, 1400) as context,
    ):
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{base}/inspector?store=ta&trace={trace_id}", timeout=120_000)
        page.wait_for_selector('[data-testid="stPlotlyChart"]', timeout=120_000)
        page.locator('[data-testid="stPlotlyChart"]').first.scroll_into_view_if_needed()
        # Three rows: importance, redundancy (no similarity yet: every cell empty, so Plotly
        # draws no image for it) and backtracking: two heatmap images.
        page.wait_for_function(
            "() => document.querySelectorAll('.js-plotly-plot .hm').length >= 2", timeout=60_000
        )
        assert page.locator(".js-plotly-plot .hm").count() == 2
        assert page.locator(".js-plotly-plot .cartesianlayer .subplot").count() == 3
        assert not errors


def test_segment_says_how_many_chunks_map_cleanly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The segment stage, having cut the Thought Anchors trace into Punkt steps, says in its
    line and in the store's provenance how the chunks fall on them: all three are sentences
    of their own (test_the_inspector_shows_thought_anchors_importance shows the same)."""
    root = _thought_anchors_folder(tmp_path / "rollouts")
    store_dir = tmp_path / "store"
    assert main(["ingest", str(root), "--store", str(store_dir)]) == EXIT_OK
    capsys.readouterr()
    assert main(["segment", "--store", str(store_dir), "--no-progress"]) == EXIT_OK
    out = capsys.readouterr().err  # the stage's line goes where its progress goes
    assert (
        "Thought Anchors chunks of 1 trace(s): 3 of 3 placed on steps, 3 map cleanly onto "
        "whole steps"
    ) in out
    (record,) = [r for r in Store.open(store_dir).manifest["provenance"] if r["stage"] == "segment"]
    assert record["chunk_alignment"] == {"traces": 1, "chunks": 3, "placed": 3, "clean": 3}
    # The importances are stored per step, beside the steps (one chunk on each).
    stored = Store.open(store_dir).read("step_importance").sort_values("step")
    assert stored[["step", "importance", "n_chunks"]].values.tolist() == [
        [0, 0.05, 1], [1, 0.4, 1], [2, -0.1, 1],
    ]  # fmt: skip
    assert stored["function_tags"].tolist() == [
        "plan_generation", "active_computation", "result_consolidation",
    ]  # fmt: skip
