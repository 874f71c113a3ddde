"""Measured vs filled on the demo's transfer page: a marker on each teacher's curve where some
trace was measured, and nowhere else; a strip counting the traces measured per bin, on which a
bin measured for a single trace is visibly not empty.

The bins come from :func:`legival_core.views.observed_coverage` on the store's rollouts (its
doctest works a case by hand); here the page must draw exactly those.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.colors
import pytest
import streamlit as st

from legival_core import views
from legival_core.store.store import Store
from legival_core.views.app_config import BUNDLED_STORES
from tests.app_fixtures import plotly_array
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
    return plotly_array(data)


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- repairs of issue 42 (item 5) and issue 39 (counts from the rows of the values) ----------


def _gappy_view() -> views.TransferView:
    """Two teachers' curves on five bins; t2 was measured in bins 1, 3 and 5 only (the
    release profile leaves the others empty), t1 everywhere; the student alone solves 25%."""
    nan = float("nan")
    x = [0.1, 0.3, 0.5, 0.7, 0.9]
    curves = pd.DataFrame(
        {
            "teacher": ["t1"] * 5 + ["t2"] * 5,
            "bin": list(range(1, 6)) * 2,
            "x": x * 2,
            "mean": [0.2, 0.3, 0.4, 0.5, 0.6, 0.0, nan, 1.0, nan, 0.5],
            "lo": [0.1, 0.2, 0.3, 0.4, 0.5, 0.0, nan, 0.5, nan, 0.0],
            "hi": [0.3, 0.4, 0.5, 0.6, 0.7, 0.2, nan, 1.0, nan, 1.0],
            "n_traces": [4] * 10,
        }
    )
    hazards = pd.DataFrame({"teacher": ["t1"] * 3, "bin": [0, 10, 40], "share": [0.8, 0.05, 0.15]})
    return views.TransferView(curves=curves, hazards=hazards, baseline=0.25, summary=pd.DataFrame())


def test_a_curve_with_empty_bins_is_drawn_through_its_measured_bins() -> None:
    """Through NaN a Plotly line breaks: t2's curve was three isolated dots. Its line now runs
    through the measured bins only, each with a marker; t1 (no gap) stays a plain line."""
    from legival_core.views import figures

    figure = figures.transfer_curves_figure(_gappy_view(), ["t1", "t2"])
    lines = {t.name: t for t in figure.data if t.name in ("t1", "t2")}
    assert list(lines["t2"].x) == [0.1, 0.5, 0.9] and list(lines["t2"].y) == [0.0, 1.0, 0.5]
    assert lines["t2"].mode == "lines+markers"
    assert lines["t1"].mode == "lines" and len(lines["t1"].x) == 5
    (band,) = [t for t in figure.data if t.name == "t2 band"]
    assert not np.isnan(np.asarray(band.y, dtype=float)).any()  # a NaN tore the polygon


def test_the_student_alone_line_is_named_in_the_legend_not_on_the_chart() -> None:
    """The label sat on the chart at the baseline's height, over every curve near it."""
    from legival_core.views import figures

    figure = figures.transfer_curves_figure(_gappy_view(), ["t1", "t2"])
    assert not any("student alone" in (a.text or "") for a in figure.layout.annotations)
    (alone,) = [t for t in figure.data if (t.name or "").startswith("student alone (k = 0)")]
    assert alone.name == "student alone (k = 0): 0.25" and alone.showlegend is not False
    assert list(alone.y) == [0.25, 0.25] and list(alone.x) == [0.0, 1.0]


def test_never_solved_has_its_own_panel_and_the_positions_their_own_scale() -> None:
    """Bin 0 (never solved, 80% here) shared the position axis: it set the y range, and the
    first solves (5% and 15%) were slivers under empty space."""
    from legival_core.views import figures

    figure = figures.hazard_figure(_gappy_view().hazards, ["t1"])
    never = [t for t in figure.data if t.xaxis == "x"]
    placed = [t for t in figure.data if t.xaxis == "x2"]
    assert [list(t.y) for t in never] == [[0.8]]
    assert [list(t.x) for t in placed] == [[10 / 50, 40 / 50]]
    low, high = figure.layout.yaxis2.range
    assert low == 0 and 0.15 <= high <= 0.15 * 1.1  # the tallest position bar fills the panel
    assert "never solved" not in (figure.layout.xaxis2.title.text or "")


def test_the_release_profile_draws_connected_curves_and_says_so(monkeypatch) -> None:
    demo = Store.open(BUNDLED_STORES["demo"])
    at = run_app_page("transfer", monkeypatch, [demo.path], {"profile": "release"}, timeout=300)
    curves, strip, hazards = (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
    lines = {d["name"]: d for d in curves["data"] if d["name"] in ("gpt-4", "gpt-3.5")}
    for line in lines.values():
        assert line["mode"] == "lines+markers"
        assert not np.isnan(values(line["y"]).astype(float)).any()
    assert not any(
        "student alone" in a.get("text", "") for a in curves["layout"].get("annotations", [])
    )
    assert any("drawn from their measured bins only" in c.value for c in at.caption)
    # nothing is filled in under this profile, so nothing may say so
    assert not any("filled in by the profile's grid" in c.value for c in at.caption)
    assert "filled in" not in strip["layout"]["title"]["text"]
    assert {t.get("xaxis") for t in hazards["data"]} == {"x", "x2"}


def test_the_boards_fotu_comes_with_the_traces_it_rests_on(monkeypatch) -> None:
    """The summary showed the leaderboard's FOTU (over the datasets every teacher covers)
    beside n traces counted over every dataset; its own n counts the traces with a FOTU on
    those datasets."""
    demo = Store.open(BUNDLED_STORES["demo"])
    at = run_app_page("transfer", monkeypatch, [demo.path], timeout=300)
    table = next(d.value for d in at.dataframe if "n traces (FOTU)" in d.value.columns)
    shown = table.set_index("teacher")["n traces (FOTU)"].astype(int).to_dict()
    metrics = demo.read("teacher_metrics")
    compared = metrics[metrics["teacher"] != "human"]  # the reference teacher narrows nothing
    covered = compared.pivot_table(index="teacher", columns="dataset", values="fotu").notna()
    common = [d for d in covered.columns if covered[d].all()]
    pairs = demo.read("trace_transfer")
    pairs = pairs[pairs["fotu"].notna() & pairs["dataset"].isin(common)]
    expected = pairs.groupby(pairs["teacher"].astype(str))["trace_id"].nunique().to_dict()
    assert shown == expected
    pooled = table.set_index("teacher")["n traces, pooled"].astype(int).to_dict()
    assert any(pooled[t] != shown[t] for t in shown)  # the two counts differ on the demo
