"""The redundancy-threshold sweep (docs/metrics/redundancy.md): the library view by hand, and the
app's page.

* ``legival_core.metrics.redundancy_sweep_view`` on a tiny similarity table, every value worked out
  by hand; its errors name the table, row and field.
* The *Redundancy threshold* page on the bundled demo store (AppTest): for every dataset, the
  plotted curve of each teacher is the mean over its traces of
  :func:`legival_core.metrics.efficiency.redundancy_sweep` applied to that trace's stored similarity
  rows, and the dotted line is the τ the store's metrics run recorded.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core.metrics.efficiency import SWEEP_THRESHOLDS, redundancy_sweep
from legival_core.metrics.redundancy_sweep_view import (
    recorded_threshold,
    sweep_thresholds,
    teacher_redundancy_sweep,
)
from legival_core.store.schema import SchemaError
from legival_core.store.store import Store
from legival_core.text.safe_text import plotly_literal
from legival_core.views.app_config import BUNDLED_STORES

APP = str(Path(__file__).resolve().parents[1] / "app.py")
DEMO = BUNDLED_STORES["demo"]
NAN = float("nan")


def tiny_similarity() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Five traces with rows (one of them a single step) and one without, rows shuffled."""
    rows = [
        ("a", 0, NAN),
        ("a", 1, 0.9),
        ("a", 2, 0.3),
        ("a", 3, 0.82),
        ("b", 0, NAN),
        ("b", 1, 0.7),
        ("b", 2, 0.85),
        ("c", 0, NAN),
        ("e", 0, NAN),
        ("e", 1, 0.5),
        ("f", 0, NAN),
        ("f", 1, 0.95),
    ]
    order = [7, 3, 10, 0, 5, 11, 2, 9, 4, 1, 8, 6]
    similarity = pd.DataFrame(
        [rows[i] for i in order], columns=["trace_id", "step", "max_similarity"]
    )
    traces = pd.DataFrame(
        {
            "trace_id": ["a", "b", "c", "e", "f", "g"],
            "teacher": ["T", "T", "T", "U", "T", "T"],
            "dataset": ["d", "d", "d", "d", "d2", "d"],
        }
    )
    return similarity, traces


def test_teacher_sweep_by_hand() -> None:
    similarity, traces = tiny_similarity()
    taus = [0.0, 0.5, 0.8, 0.85, 1.0]
    table = teacher_redundancy_sweep(similarity, traces, taus)
    got = {
        (row.teacher, row.dataset, row.threshold): (row.redundancy, row.n_traces)
        for row in table.itertuples()
    }
    # Per trace, share of steps i >= 1 with r_i > τ over m - 1:
    #   a: r = 0.9, 0.3, 0.82 (m - 1 = 3): τ 0 → 3/3, 0.5 → 2/3, 0.8 → 2/3, 0.85 → 1/3, 1 → 0
    #   b: r = 0.7, 0.85 (m - 1 = 2):      τ 0 → 2/2, 0.5 → 2/2, 0.8 → 1/2, 0.85 → 0 (not >), 1 → 0
    #   c: one step → 0 at every τ;  g: no similarity rows → left out, so T on d has n = 3.
    # T on d, mean of a, b, c:
    #   τ 0: (1 + 1 + 0) / 3 = 2/3;  0.5: (2/3 + 1 + 0) / 3 = 5/9;  0.8: (2/3 + 1/2 + 0) / 3 = 7/18
    #   0.85: (1/3 + 0 + 0) / 3 = 1/9;  1: 0
    expected_t = [2 / 3, 5 / 9, 7 / 18, 1 / 9, 0.0]
    # U on d: e alone, r = 0.5: τ 0 → 1, 0.5 → 0 (0.5 is not > 0.5), then 0.
    expected_u = [1.0, 0.0, 0.0, 0.0, 0.0]
    # T on d2: f alone, r = 0.95 > every τ but 1.
    expected_t2 = [1.0, 1.0, 1.0, 1.0, 0.0]
    for (teacher, dataset, n), expected in (
        (("T", "d", 3), expected_t),
        (("U", "d", 1), expected_u),
        (("T", "d2", 1), expected_t2),
    ):
        for tau, value in zip(taus, expected, strict=True):
            share, count = got[(teacher, dataset, tau)]
            assert share == pytest.approx(value), (teacher, dataset, tau)
            assert count == n
    assert len(table) == 3 * len(taus)
    assert list(table.columns) == ["teacher", "dataset", "threshold", "redundancy", "n_traces"]
    assert list(table["teacher"].iloc[:: len(taus)]) == ["T", "T", "U"]


def test_sweep_errors_name_the_table_row_and_field() -> None:
    similarity, traces = tiny_similarity()
    gap = similarity.copy()
    # Input row 1 is a's step 3; as step 4, a has steps 0, 1, 2, 4.
    gap.loc[gap["trace_id"].eq("a") & gap["step"].eq(3), "step"] = 4
    with pytest.raises(SchemaError, match=r"table 'similarity', row 1, field 'step'.*'a'"):
        teacher_redundancy_sweep(gap, traces)
    hole = similarity.copy()
    hole.loc[hole["trace_id"].eq("b") & hole["step"].eq(2), "max_similarity"] = NAN  # row 11
    with pytest.raises(
        SchemaError, match=r"table 'similarity', row 11, field 'max_similarity'.*'b': step 2"
    ):
        teacher_redundancy_sweep(hole, traces)
    with pytest.raises(SchemaError, match=r"table 'traces'.*\['dataset'\]"):
        teacher_redundancy_sweep(similarity, traces.drop(columns="dataset"))


def test_sweep_grid_holds_the_chosen_threshold_once() -> None:
    # np.linspace gives 0.8500000000000001 for the grid's 0.85: the authors' τ is that point.
    assert SWEEP_THRESHOLDS[17] != 0.85
    grid = sweep_thresholds(0.85)
    assert grid.size == 21 and 0.85 in grid.tolist()
    grid = sweep_thresholds(0.83)
    assert grid.size == 22 and grid[17] == 0.83 and np.all(np.diff(grid) > 0)


def test_recorded_threshold_is_the_latest_metrics_runs() -> None:
    manifest = {
        "provenance": [
            {"stage": "metrics", "threshold": 0.85},
            {"stage": "metrics", "threshold": 0.8},
            {"stage": "metrics", "threshold": True},  # not a number: skipped
            {"stage": "embed", "threshold": 0.3},  # not the metrics stage
        ]
    }
    assert recorded_threshold(manifest) == 0.8
    assert recorded_threshold({"provenance": [{"stage": "embed"}]}) is None
    assert recorded_threshold({}) is None


# --- the page ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def _array(value: Any) -> np.ndarray:
    """A Plotly 7 array: a list, or ``{"dtype", "bdata"}`` base64."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), value["dtype"]).astype(float)
    return np.asarray(value, dtype=float)


def _expected_curves(store: Store, dataset: str, taus: np.ndarray) -> dict[str, np.ndarray]:
    """Per teacher, the mean over its traces of ``redundancy_sweep`` on each trace's own
    stored similarity rows, gathered trace by trace."""
    traces = store.read("traces", columns=["trace_id", "teacher", "dataset"])
    similarity = store.read("similarity", columns=["trace_id", "step", "max_similarity"])
    by_trace = {tid: group.sort_values("step") for tid, group in similarity.groupby("trace_id")}
    shares: dict[str, list[np.ndarray]] = {}
    for trace in traces[traces["dataset"] == dataset].itertuples():
        if trace.trace_id in by_trace:
            sims = by_trace[trace.trace_id]["max_similarity"].astype(float).to_numpy()
            shares.setdefault(str(trace.teacher), []).append(redundancy_sweep(sims, taus))
    return {teacher: np.mean(rows, axis=0) for teacher, rows in shares.items()}


@pytest.mark.slow
def test_redundancy_page_plots_the_stored_similarities_swept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LEGIVAL_STORE", raising=False)
    monkeypatch.delenv("LEGIVAL_READONLY", raising=False)
    store = Store.open(DEMO)
    tau = recorded_threshold(store.manifest)
    assert tau is not None, "the demo store records no metrics threshold"
    datasets = sorted(set(store.read("traces", columns=["dataset"])["dataset"]))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    for dataset in datasets:
        at.query_params.clear()
        at.switch_page("pages/redundancy.py")
        at.query_params["store"] = "demo"
        at.query_params["dataset"] = dataset
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        chart = json.loads(at.get("plotly_chart")[0].proto.spec)
        taus = _array(chart["data"][0]["x"])
        # The published 21 thresholds, plus the store's τ when it is not one of them.
        assert set(np.round(SWEEP_THRESHOLDS, 12)) <= set(taus.tolist())
        assert tau in taus.tolist() and len(taus) in (21, 22)
        expected = _expected_curves(store, dataset, taus)
        plotted = {
            trace["name"].removesuffix(" (reference)"): _array(trace["y"])
            for trace in chart["data"]
        }
        assert set(plotted) == {plotly_literal(t) for t in expected}, dataset
        assert all(np.array_equal(_array(trace["x"]), taus) for trace in chart["data"])
        for teacher, curve in expected.items():
            np.testing.assert_allclose(plotted[plotly_literal(teacher)], curve, atol=1e-12)
        # The chosen τ is marked: one vertical line at it.
        lines = [s for s in chart["layout"].get("shapes", []) if s["type"] == "line"]
        assert [(s["x0"], s["x1"]) for s in lines] == [(tau, tau)]
        # The table under the chart: the curves' values at that τ.
        board = at.dataframe[0].value.set_index("teacher")
        column = int(np.flatnonzero(taus == tau)[0])
        for teacher, curve in expected.items():
            assert board.loc[teacher, "Redundancy"] == pytest.approx(curve[column])


def test_teacher_sweep_equals_a_loop_over_traces_on_random_stores() -> None:
    """The array version against a plain loop: each trace's shares from
    ``efficiency.redundancy_sweep`` (its own per-trace function), averaged per teacher and
    dataset. Traces of one step, shuffled rows and a trace without owner included."""
    rng = np.random.default_rng(7)
    for _ in range(20):
        rows, owners = [], []
        for t in range(int(rng.integers(1, 15))):
            m = int(rng.integers(1, 9))
            sims = rng.choice([0.2, 0.5, 0.8, 0.85, 0.95, 1.0], size=m).astype(float)
            sims[0] = np.nan
            rows += [(f"t{t}", i, sims[i]) for i in range(m)]
            owners.append((f"t{t}", f"T{t % 3}", f"d{t % 2}"))
        similarity = pd.DataFrame(rows, columns=["trace_id", "step", "max_similarity"])
        similarity = similarity.sample(frac=1.0, random_state=int(rng.integers(1000)))
        traces = pd.DataFrame(owners[:-1], columns=["trace_id", "teacher", "dataset"])
        got = teacher_redundancy_sweep(similarity, traces, SWEEP_THRESHOLDS)
        expected = []
        for (teacher, dataset), group in traces.groupby(["teacher", "dataset"], sort=True):
            shares = np.vstack(
                [
                    redundancy_sweep(
                        similarity[similarity["trace_id"] == t]
                        .sort_values("step")["max_similarity"]
                        .to_numpy(),
                        SWEEP_THRESHOLDS,
                    )
                    for t in group["trace_id"]
                ]
            ).mean(axis=0)
            expected += [
                (teacher, dataset, float(tau), float(v), len(group))
                for tau, v in zip(SWEEP_THRESHOLDS, shares, strict=True)
            ]
        assert list(got.itertuples(index=False, name=None)) == expected
