"""Honest correlations (issue 39, item 3): pairs related by construction flagged and never
starred, stars only after Holm's correction, the pooling of trace-level points stated, and the
Monitoring page's ρ(FOTU, score) a headline only where n and spread carry one."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core import views
from legival_core.store.store import Store
from legival_core.views.app_config import BUNDLED_STORES
from tests.app_runner import run_app_page

DEMO = BUNDLED_STORES["demo"]


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


# --- Holm by hand ------------------------------------------------------------------------------


def test_holm_adjusted_p_values_worked_by_hand() -> None:
    """Five p-values: sorted 0.001 < 0.01 < 0.02 < 0.04 < 0.30, multiplied by 5, 4, 3, 2, 1:
    0.005, 0.04, 0.06, 0.08, 0.30 (already non-decreasing). Read at 0.05 only the first two
    survive, where the raw p would have starred four."""
    from legival_core.stats.stats import holm_adjust

    raw = [0.04, 0.001, 0.30, 0.02, 0.01]  # given out of order: the result keeps the order
    adjusted = holm_adjust(raw)
    np.testing.assert_allclose(adjusted, [0.04 * 2, 0.001 * 5, 0.30 * 1, 0.02 * 3, 0.01 * 4])
    assert int((adjusted < 0.05).sum()) == 2 and sum(p < 0.05 for p in raw) == 4


def test_holm_keeps_the_order_caps_at_one_and_skips_undefined_tests() -> None:
    """0.010, 0.011, 0.600 and an undefined p (m = 3): 0.010·3 = 0.030, 0.011·2 = 0.022 is
    raised to the running maximum 0.030, 0.600·1 = 0.600; 0.4 among m = 3 where it is the
    smallest: 0.4·3 = 1.2 is capped at 1."""
    from legival_core.stats.stats import holm_adjust

    adjusted = holm_adjust([0.011, float("nan"), 0.010, 0.600])
    np.testing.assert_allclose(adjusted, [0.030, np.nan, 0.030, 0.600])
    np.testing.assert_allclose(holm_adjust([0.4, 0.5, 0.9]), [1.0, 1.0, 1.0])
    assert holm_adjust([]).shape == (0,)


def test_holm_matrix_corrects_each_pair_once() -> None:
    """Three metrics are three pairs, not six cells: a–b 0.01·3 = 0.03, b–c 0.02·2 = 0.04,
    a–c 0.04·1 = 0.04; the diagonal is no test."""
    cols = ["a", "b", "c"]
    p = pd.DataFrame([[0.0, 0.01, 0.04], [0.01, 0.0, 0.02], [0.04, 0.02, 0.0]], cols, cols)
    adjusted = views.holm_matrix(p)
    assert adjusted.loc["a", "b"] == pytest.approx(0.03) == adjusted.loc["b", "a"]
    assert adjusted.loc["b", "c"] == pytest.approx(0.04)
    assert adjusted.loc["a", "c"] == pytest.approx(0.04)
    assert np.isnan(np.diag(adjusted.to_numpy())).all()
    assert views.corrected_pairs(p) == 3


# --- related by construction ---------------------------------------------------------------


def test_the_catalog_declares_lift_and_regression_as_built_from_fotu() -> None:
    from legival_core.metrics.metric_catalog import DERIVED_FROM, METRICS, construction_reason

    assert "FOTU − baseline" in str(construction_reason("fotu", "lift"))
    assert construction_reason("regression_rate", "fotu") is not None
    assert construction_reason("fotu", "regression_rate") == construction_reason(
        "regression_rate", "fotu"
    )
    assert construction_reason("tokens", "redundancy") is None
    for a, b in DERIVED_FROM:  # every declared pair names metrics the app knows
        assert a in METRICS and b in METRICS


def heatmap_layers(at: AppTest) -> list[dict]:
    """The two layers (full-strength and faded cells) of the correlation heatmap."""
    chart = next(c for c in at.get("plotly_chart") if "correlation_heatmap" in c.proto.id)
    return json.loads(chart.proto.spec)["data"]


def heatmap_cells(at: AppTest) -> dict[tuple[str, str], str]:
    """The correlation heatmap's cell texts by (row label, column label), both layers."""
    cells: dict[tuple[str, str], str] = {}
    for layer in heatmap_layers(at):
        for row_label, row in zip(layer["y"], layer["text"], strict=True):
            for column_label, text in zip(layer["x"], row, strict=True):
                if text:
                    cells[(row_label, column_label)] = text
    return cells


def test_fotu_lift_and_regression_fotu_are_flagged_and_unstarred_on_the_demo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the demo's trace level FOTU–Lift is ρ = 1.00 with p ≈ 0 (lift = FOTU − baseline, a
    baseline of 0) and Regression–FOTU ρ ≈ 0.55 with p ≈ 0: both once carried ***. Now both
    carry the † mark and no star, the caption names the reason, and a pair measured apart
    whose raw p < 0.05 does not survive Holm (Tokens–FOTU, raw p 0.013 over 15 pairs) loses its
    star too."""
    at = run_app_page("correlations", monkeypatch, [DEMO], timeout=300)
    assert not at.exception
    cells = heatmap_cells(at)
    for pair in (("FOTU", "Lift"), ("Lift", "FOTU"), ("FOTU", "Regression")):
        text = cells[pair]
        assert "*" not in text, (pair, text)
        assert views.BY_CONSTRUCTION_MARK in text, (pair, text)
    assert "*" not in cells[("Tokens", "FOTU")]
    assert "***" in cells[("Tokens", "Redundancy")]  # a real association keeps its stars
    captions = " ".join(c.value for c in at.caption)
    assert "lift = FOTU − baseline" in captions
    assert re.search(r"Holm's correction over the 15 pairs shown", captions), captions


def test_the_pairs_export_carries_the_flags_and_both_p_values() -> None:
    """``lv.open(...).correlations(value="pairs")`` (the page's pairs CSV) has raw and Holm p,
    the number of pairs corrected for and the by-construction reason; FOTU–Lift no star."""
    import legival_core as lv

    demo = lv.open(DEMO)
    pairs = demo.correlations(value="pairs")
    assert {"p", "p_holm", "pairs_corrected", "stars", "by_construction"} <= set(pairs.columns)
    rows = pairs.set_index(["metric_a", "metric_b"])
    lift = rows.loc[("fotu", "lift")]
    assert lift["rho"] == pytest.approx(1.0) and lift["p"] < 1e-6
    assert lift["stars"] == "" and "FOTU − baseline" in lift["by_construction"]
    m = int(pairs["pairs_corrected"].iloc[0])
    assert m == len(pairs) == 15
    tokens_fotu = rows.loc[("tokens", "fotu")]
    assert tokens_fotu["p_holm"] >= tokens_fotu["p"]
    assert tokens_fotu["p"] < 0.05 <= tokens_fotu["p_holm"] and tokens_fotu["stars"] == ""
    holm = demo.correlations(value="p_holm")
    assert holm.loc["fotu", "lift"] == pytest.approx(lift["p_holm"])


def test_the_page_offers_the_pairs_csv(monkeypatch: pytest.MonkeyPatch) -> None:
    at = run_app_page("correlations", monkeypatch, [DEMO], {"level": "model"}, timeout=300)
    labels = [b.label for b in at.get("download_button")]
    assert any("Holm p" in label and "flags" in label for label in labels), labels


# --- pooled trace-level points -------------------------------------------------------------


@pytest.mark.slow
def test_trace_level_says_it_pools_teachers_and_offers_one_teacher(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default trace level states that it pools every teacher's and dataset's traces;
    picking a teacher correlates that teacher's traces only (n = its traces)."""
    at = run_app_page("correlations", monkeypatch, [DEMO], timeout=300)
    captions = " ".join(c.value for c in at.caption)
    assert "pools the traces across every teacher and every dataset" in captions
    efficiency = Store.open(DEMO).read("trace_efficiency")
    teacher = "gpt-4"
    st.cache_data.clear()
    at = run_app_page("correlations", monkeypatch, [DEMO], {"teacher": teacher}, timeout=300)
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    # still pooled over datasets; the name reaches Markdown escaped
    assert "pools the traces of gpt\\-4 across every dataset" in captions, captions
    layers = heatmap_layers(at)
    labels = list(layers[0]["x"])
    tokens = labels.index("Tokens")
    n = max(int(layer["customdata"][tokens][tokens][1]) for layer in layers)
    assert n == int((efficiency["teacher"] == teacher).sum())


# --- the monitoring headline ---------------------------------------------------------------


def test_headline_rule_needs_five_teachers_and_a_spread() -> None:
    from legival_core.views.monitoring import HEADLINE_MIN_SPREAD, headline_blocker

    fotu = [0.1, 0.2, 0.3, 0.4]
    recall = [0.0, 0.02, 0.06, 0.04]  # the demo's shape: four teachers, recalls 0–6%
    assert "too few teachers" in str(headline_blocker(fotu, recall, "recall"))
    five = [*fotu, 0.5]
    assert "too little spread" in str(headline_blocker(five, [*recall, 0.01], "recall"))
    wide = [0.0, 0.2, 0.6, 0.4, 0.0 + HEADLINE_MIN_SPREAD]
    assert headline_blocker(five, wide, "recall") is None
    # a teacher without a score is no point: five rows, four values
    assert "too few" in str(headline_blocker(five, [0.0, 0.3, 0.6, np.nan, 0.9], "recall"))


def test_monitoring_shows_no_headline_rho_from_four_teachers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The demo's monitor was scored on four model teachers: no ρ(FOTU, ·) in large type; each
    says why, and the teachers' values stand in a small table instead."""
    at = run_app_page("monitoring", monkeypatch, [DEMO], timeout=300)
    assert not at.exception
    assert not [m.label for m in at.metric if m.label.startswith("ρ(FOTU")]
    texts = [m.value for m in at.markdown]
    for measure in ("precision", "recall", "f1"):
        assert any(
            t.startswith(f"**ρ(FOTU, {measure})** not shown: too few teachers") for t in texts
        ), texts
    points = next(
        d.value for d in at.dataframe if "FOTU (over the scored datasets)" in d.value.columns
    )
    assert len(points) == 4


def test_rank_stability_stars_read_the_holm_p() -> None:
    """Three datasets are three pairs, each with raw p 0.03 from six teachers: uncorrected
    each would carry *, after Holm (0.03·3 = 0.09 for the smallest, the others raised to it)
    none does."""
    levels = pd.Index(["X", "Y", "Z"])
    rho = pd.DataFrame(0.85, index=levels, columns=levels)
    p = pd.DataFrame(0.03, index=levels, columns=levels)
    cells = views.stability_cells(rho, p, pd.DataFrame(6, index=levels, columns=levels))
    assert cells.loc["X", "Y"] == "+0.850 · n 6"
    assert (
        views.stability_cells(
            rho.loc[["X", "Y"], ["X", "Y"]],
            p.loc[["X", "Y"], ["X", "Y"]],
            pd.DataFrame(6, index=levels[:2], columns=levels[:2]),
        ).loc["X", "Y"]
        == "+0.850* · n 6"
    )
