"""Measured vs filled on the demo's transfer page: a marker on each teacher's curve where some
trace was measured, and nowhere else; a strip counting the traces measured per bin, on which a
bin measured for a single trace is visibly not empty.

The bins come from :func:`legival_core.views.observed_coverage` on the store's rollouts (its
doctest works a case by hand); here the page must draw exactly those.
"""

from __future__ import annotations

import base64
import itertools
import json
from pathlib import Path

import numpy as np
import plotly.colors
import pytest
import streamlit as st

from legival_core import views
from legival_core.store.app_config import BUNDLED_STORES
from legival_core.store.store import Store
from tests.app_runner import run_app_page


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def rgb(colour: str) -> tuple[float, ...]:
    """A Plotly colour ("#aabbcc" or "rgb(1,2,3)") as an (r, g, b) tuple."""
    if colour.startswith("#"):
        return tuple(float(v) for v in plotly.colors.hex_to_rgb(colour))
    return tuple(float(v) for v in plotly.colors.unlabel_rgb(colour))


def values(data: object) -> np.ndarray:
    """Plotly arrays: plain lists or ``{"dtype", "bdata"}`` base64 blocks."""
    if isinstance(data, dict) and "bdata" in data:
        return np.frombuffer(base64.b64decode(data["bdata"]), data["dtype"])
    return np.asarray(data)


def test_markers_sit_on_the_measured_bins_and_the_strip_shows_one_trace(monkeypatch) -> None:
    if not (BUNDLED_STORES["demo"] / "manifest.json").exists():
        pytest.fail("the bundled demo store is missing (python -m precompute demo builds it)")
    demo = Store.open(BUNDLED_STORES["demo"])
    at = run_app_page("transfer", monkeypatch, [demo.path], timeout=300)
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    curves, strip = charts[0], charts[1]
    coverage = views.observed_coverage(demo.read("rollouts"))
    lines = {d["name"]: d for d in curves["data"] if d.get("mode") == "lines"}
    markers = {d["name"]: d for d in curves["data"] if d.get("mode") == "markers"}
    for teacher in ("gpt-4", "gpt-3.5", "palm-2-medium"):
        seen = coverage[(coverage["teacher"] == teacher) & (coverage["n_observed"] > 0)]
        dots = markers[f"{teacher} measured"]
        np.testing.assert_allclose(np.sort(values(dots["x"])), np.sort(seen["x"].to_numpy()))
        # each dot lies on its line
        xs, ys = np.round(values(lines[teacher]["x"]), 6), values(lines[teacher]["y"])
        line = dict(zip(xs, ys, strict=True))
        for x, y in zip(values(dots["x"]), values(dots["y"]), strict=True):
            assert line[round(float(x), 6)] == pytest.approx(y)
    assert len(seen) < 50  # the check has filled bins to leave unmarked
    # the leak warning beside the curves points at this page's own table, not at this page
    (warning,) = [w.value for w in at.warning if "Answer leak" in w.value]
    assert "Before the answer leaks" in warning and "Transfer curves page" not in warning
    # the strip: one trace measured is drawn at least a light grey, not white
    heat = strip["data"][0]
    assert heat["type"] == "heatmap"
    counts = values(heat["z"])
    assert counts.min() == 0 and 1 in counts
    scale = [(float(p), c) for p, c in heat["colorscale"]]
    one = (1 - heat.get("zmin", 0)) / (heat.get("zmax", counts.max()) - heat.get("zmin", 0))
    colour = plotly.colors.find_intermediate_color(
        *next(
            (rgb(a), rgb(b), (one - p) / (q - p))
            for (p, a), (q, b) in itertools.pairwise(scale)
            if p <= one <= q
        )
    )
    assert max(colour) <= 215, colour  # white is 255; a single trace must show


def band_count(at) -> int:
    """Filled bootstrap bands on the transfer page's charts."""
    charts = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    return sum(1 for f in charts for t in f["data"] if t.get("fill") == "toself")


def test_the_bands_toggle_is_in_the_url_and_a_shared_link_reopens_it(monkeypatch) -> None:
    """The bootstrap-band switch is shared state like the dataset or teachers: switching it off
    writes ?bands=off, and a link with ?bands=off opens without bands."""
    demo = Store.open(BUNDLED_STORES["demo"])
    at = run_app_page("transfer", monkeypatch, [demo.path], timeout=300)
    assert at.query_params["bands"] == "on" and band_count(at) > 0
    next(t for t in at.toggle if t.label.startswith("Bootstrap bands")).set_value(False).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params["bands"] == "off" and band_count(at) == 0
    st.cache_data.clear()
    again = run_app_page("transfer", monkeypatch, [demo.path], {"bands": "off"}, timeout=300)
    assert next(t for t in again.toggle if t.label.startswith("Bootstrap bands")).value is False
    assert band_count(again) == 0


def _ingested_store(folder: Path) -> Path:
    """A store of one's own traces, ingested and nothing more: no students, no rollouts."""
    from precompute.cli import main

    file = folder / "mine.jsonl"
    row = {"problem_id": "p1", "prompt": "What is 2 + 3?", "reasoning": "2 + 3 = 5.",
           "answer": "5", "gold": "5"}  # fmt: skip
    file.write_text(json.dumps(row) + "\n", encoding="utf-8")
    store = folder / "my run"
    args = ["ingest", str(file), "--store", str(store), "--teacher", "me", "--task", "math"]
    assert main(args) == 0
    return store


def test_a_store_without_rollouts_gets_the_command_that_adds_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint was "run the precompute stages (`python -m precompute run ...`)", and `run`
    on such a store adds no rollouts; the page now gives the command that does, for this
    store, and that command is one the CLI takes."""
    import shlex

    from precompute.cli import _build_parser

    store = _ingested_store(tmp_path)
    at = run_app_page("transfer", monkeypatch, [store])
    assert "no student rollouts" in at.info[0].value
    (code,) = at.code
    assert code.value == f"python -m precompute run --store '{store}' --students default"
    args = _build_parser().parse_args(shlex.split(code.value)[3:])
    assert (args.command, args.store, args.students) == ("run", store, "default")
    assert not at.get("plotly_chart")

    hosted = run_app_page("transfer", monkeypatch, [store], readonly=True)
    (code,) = hosted.code
    assert code.value == "python -m precompute run --store DIR --students default"
    assert str(tmp_path) not in " ".join(e.value for e in hosted.info)
