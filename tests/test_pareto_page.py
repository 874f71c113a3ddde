"""The Pareto page's first screen (issue 39, item 6): FOTU before the leak as an axis, 95%
interval bars on both axes, and the frontier drawn as the staircase that bounds the region its
teachers dominate, not as straight segments between them.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
import streamlit as st

from legival_core import views
from legival_core.store.store import Store
from legival_core.views import figures
from legival_core.views.app_config import BUNDLED_STORES
from tests.app_fixtures import plotly_array
from tests.app_runner import run_app_page


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def values(data: object) -> np.ndarray:
    return plotly_array(data, dtype=float)


def drawn_path(trace: go.Scatter) -> list[tuple[float, float]]:
    """The vertices Plotly draws for a line trace: its points, with the corner each step
    adds for ``shape`` "hv" (across, then up or down) or "vh" (up or down, then across)."""
    points = list(zip(trace.x, trace.y, strict=True))
    shape = trace.line.shape or "linear"
    path = [points[0]]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if shape == "hv":
            path.append((x1, y0))
        elif shape == "vh":
            path.append((x0, y1))
        path.append((x1, y1))
    return path


def weakly_dominated(point: tuple[float, float], teachers: pd.DataFrame, x: str, y: str) -> bool:
    """Whether some teacher is at least as good as ``point`` on both axes (in each metric's
    better direction): a point of the region the frontier's teachers reach."""
    better = {m: views.METRICS[m].higher_is_better for m in (x, y)}

    def as_good(value: float, target: float, higher: bool) -> bool:
        return value >= target if higher else value <= target

    return any(
        as_good(row[x], point[0], better[x]) and as_good(row[y], point[1], better[y])
        for _, row in teachers.iterrows()
    )


@pytest.mark.parametrize(
    ("x", "y", "rows", "corner", "shape"),
    [
        # tokens (lower better) × FOTU (higher better): a = (100, 0.2), b = (300, 0.5) on the
        # frontier, c and d dominated. From a the best FOTU within 300 tokens stays 0.2 until
        # b's 300 tokens: across to (300, 0.2), then up to b.
        (
            "tokens",
            "fotu",
            {"a": (100.0, 0.2), "b": (300.0, 0.5), "c": (200.0, 0.1), "d": (400.0, 0.3)},
            (300.0, 0.2),
            "hv",
        ),
        # accuracy (higher better) × FOTU: b = (0.5, 0.4), a = (0.9, 0.1). Any accuracy up to
        # 0.9 still reaches a's FOTU 0.1, so from b the line drops first to (0.5, 0.1), then
        # runs across to a.
        (
            "accuracy",
            "fotu",
            {"a": (0.9, 0.1), "b": (0.5, 0.4), "c": (0.4, 0.05)},
            (0.5, 0.1),
            "vh",
        ),
    ],
)
def test_the_frontier_is_the_staircase_of_the_dominated_region(
    x: str, y: str, rows: dict[str, tuple[float, float]], corner: tuple[float, float], shape: str
) -> None:
    board = pd.DataFrame(
        {"teacher": list(rows), x: [v[0] for v in rows.values()], y: [v[1] for v in rows.values()]}
    )
    points = views.pareto_view(board, x, y)
    assert set(points.loc[points["frontier"], "teacher"]) == {"a", "b"}
    figure = figures.add_frontier(go.Figure(), points, x, y)
    (frontier,) = [t for t in figure.data if t.name == "frontier"]
    assert frontier.line.shape == shape
    path = drawn_path(frontier)
    assert len(path) == 3 and path[1] == pytest.approx(corner)
    # every vertex of the staircase is reached by some teacher: it bounds what is attainable
    assert all(weakly_dominated(p, points, x, y) for p in path)
    # a straight segment's midpoint claims a trade-off no teacher reaches
    (x0, y0), (x1, y1) = path[0], path[-1]
    assert not weakly_dominated(((x0 + x1) / 2, (y0 + y1) / 2), points, x, y)


@pytest.mark.slow
def test_fotu_before_leak_is_an_axis_on_the_demo(monkeypatch) -> None:
    demo = Store.open(BUNDLED_STORES["demo"])
    at = run_app_page("pareto", monkeypatch, [demo.path], {"x": "tokens", "y": "fotu_before_leak"})
    y_box = next(s for s in at.selectbox if s.label == "y axis")
    assert y_box.value == "fotu_before_leak"
    assert "FOTU before leak" in y_box.options
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert chart["layout"]["yaxis"]["title"]["text"].startswith("FOTU before leak")
    board = at.dataframe[-1].value.set_index("teacher")
    for trace in chart["data"]:
        if trace.get("mode") == "markers+text":
            for name, value in zip(trace["hovertext"], values(trace["y"]), strict=True):
                assert value == pytest.approx(board.loc[name, "FOTU before leak"])


def test_every_compared_teacher_has_interval_bars_on_the_demo(monkeypatch) -> None:
    """Bars on both axes of the default view (tokens × FOTU) for the compared teachers, from
    the same resamples as the frontier shares; none on the reference teacher left out."""
    demo = Store.open(BUNDLED_STORES["demo"])
    at = run_app_page("pareto", monkeypatch, [demo.path])
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    barred: dict[str, set[str]] = {"error_x": set(), "error_y": set()}
    for trace in chart["data"]:
        if trace.get("mode") != "markers+text":
            continue
        for axis in barred:
            bars = trace.get(axis) or {}
            above = values(bars.get("array", [np.nan] * len(trace["hovertext"])))
            below = values(bars.get("arrayminus", [np.nan] * len(trace["hovertext"])))
            for name, up, down in zip(trace["hovertext"], above, below, strict=True):
                if not (np.isnan(up) or np.isnan(down)):
                    assert up >= 0 and down >= 0
                    if up + down > 0:
                        barred[axis].add(name)
    compared = {"gpt-3.5", "gpt-4", "gpt-4-turbo", "palm-2-medium"}
    assert barred["error_x"] == compared and barred["error_y"] == compared
    assert any("Bars: 95% intervals" in c.value for c in at.caption)
