"""Headless tests of every page with streamlit's AppTest, on small stores built by the real code.

Each test checks content against ``legival_core`` run on the same store, not just "no
exception": ranks, curve values, frontier membership, correlation matrices, waterfall bars.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core import views
from legival_core.metrics import transfer
from legival_core.stats import stats
from legival_core.store.schema import trace_id_for
from legival_core.store.store import Store
from legival_core.text.safe_text import markdown_literal, markdown_math
from legival_core.views import board as board_layout
from tests import app_fixtures
from tests.app_fixtures import plotly_array
from tests.app_runner import leaderboard_detail, rank_the_composite, run_app_page


@pytest.fixture(scope="module")
def toy_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return app_fixtures.build_store(tmp_path_factory.mktemp("stores") / "toy")


@pytest.fixture(scope="module")
def published_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    from precompute.build_published import build

    return build(tmp_path_factory.mktemp("stores") / "paper")


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def run_page(
    page: str,
    monkeypatch: pytest.MonkeyPatch,
    stores: list[Store | Path],
    params: dict[str, str] | None = None,
    readonly: bool = False,
) -> AppTest:
    """Run ``app.py`` on ``page`` with the given stores configured at launch."""
    paths = [s.path if isinstance(s, Store) else s for s in stores]
    return run_app_page(page, monkeypatch, paths, params, readonly=readonly, timeout=60)


def figures(at: AppTest) -> list[dict[str, Any]]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def values(data: Any) -> np.ndarray:
    return plotly_array(data)


def select(at: AppTest, label: str) -> Any:
    return next(s for s in at.selectbox if s.label == label)


# --- leaderboard ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_leaderboard_ranks_equal_rank_table(toy_store: Store, monkeypatch) -> None:
    at = run_page("leaderboard", monkeypatch, [toy_store], {"metric": "accuracy"})
    stored = toy_store.read("teacher_metrics")
    metrics = views.ranked_metrics(stored)
    # every metric's columns (the default shows a few)
    at.multiselect(key="qp_leaderboard_columns").set_value(metrics[1:])
    next(t for t in at.toggle if t.label == "Rank and Δ of every column").set_value(True).run()
    shown = at.dataframe[0].value
    expected = stats.rank_table(
        stored[["teacher", "dataset", *metrics]],
        {m: views.METRICS[m].higher_is_better for m in metrics if m != "accuracy"},
    )
    assert shown["teacher"].tolist() == expected["teacher"].tolist()
    for metric in metrics:
        label = views.METRICS[metric].label
        if board_layout.is_tied(expected, metric):  # equal for every teacher: no ranking
            assert set(shown[f"{label} rank"]) == {board_layout.TIED_MARK}, metric
            continue
        # "2 (1–3)": the rank first, then its 95% interval
        ranks = [int(text.split()[0]) for text in shown[f"{label} rank"]]
        assert ranks == expected[f"{metric}_rank"].tolist()
        for text, value in zip(shown[label], expected[metric], strict=True):
            assert text.startswith(board_layout.format_value(value, metric) + " ["), text
    # The change arrows say acc_rank - metric_rank.
    for row, exp in zip(shown.itertuples(), expected.itertuples(), strict=True):
        change = int(exp.tokens_change)
        text = getattr(row, "_" + str(list(shown.columns).index("Tokens Δ") + 1))
        assert text == (f"▲ {change}" if change > 0 else f"▼ {-change}" if change else "=")
    assert dict(at.query_params)["store"] == "toy"
    # another metric: the rows follow its rank (they stayed in accuracy order before)
    next(s for s in at.selectbox if s.label == "Metric").select("tokens").run()
    shown = at.dataframe[0].value
    by_tokens = expected.sort_values(["tokens_rank", "accuracy_rank"], kind="stable")
    assert shown["teacher"].tolist() == by_tokens["teacher"].tolist()
    assert shown.columns[1] == "Tokens"


def test_leaderboard_dataset_filter_changes_table_and_figure(toy_store: Store, monkeypatch):
    at = run_page("leaderboard", monkeypatch, [toy_store])
    before = values(figures(at)[0]["data"][0]["y"]).tolist()
    select(at, "Dataset").select("toy-logic").run()
    assert at.query_params["dataset"] == "toy-logic"
    stored = toy_store.read("teacher_metrics")
    logic = stored[stored["dataset"] == "toy-logic"].set_index("teacher")
    shown = leaderboard_detail(at).set_index("teacher")
    np.testing.assert_allclose(shown["value"], logic.loc[shown.index, "fotu"])
    after = values(figures(at)[0]["data"][0]["y"]).tolist()
    assert before != after


def test_leaderboard_student_filter_uses_that_students_rollouts(toy_store: Store, monkeypatch):
    at = run_page("leaderboard", monkeypatch, [toy_store], {"student": "stu-tiny"})
    rollouts = toy_store.read("rollouts")
    per_pair = transfer.teacher_metrics(rollouts[rollouts["student"] == "stu-tiny"], n_boot=0)
    expected = per_pair.groupby("teacher")["fotu"].mean()
    shown = leaderboard_detail(at).set_index("teacher")["value"]
    np.testing.assert_allclose(shown.sort_index(), expected.sort_index())
    # and it differs from the all-students value
    assert not np.allclose(
        shown.sort_index(), toy_store.read("teacher_metrics").groupby("teacher")["fotu"].mean()
    )


def test_leaderboard_composite_and_exports(toy_store: Store, monkeypatch):
    at = run_page("leaderboard", monkeypatch, [toy_store])
    # the weighted composite becomes the sorting metric, and its rank intervals show
    shown = rank_the_composite(at, {"accuracy": 2.0, "fotu": 1.0}).set_index("teacher")
    board_table = views.leaderboard(toy_store.read("teacher_metrics"))
    expected = views.composite_score(board_table, {"accuracy": 2.0, "fotu": 1.0})
    expected.index = board_table["teacher"]
    np.testing.assert_allclose(shown["value"], expected.loc[shown.index])
    assert shown["rank"].min() == 1
    assert at.dataframe[0].value.columns[1:3].tolist() == ["composite", "composite rank"]
    labels = [b.label for b in at.get("download_button")]
    assert "Download CSV" in labels and "Download LaTeX" in labels


@pytest.mark.parametrize("readonly", [False, True])
def test_tables_offer_only_the_neutralised_csv_export(
    toy_store: Store, monkeypatch: pytest.MonkeyPatch, readonly: bool
) -> None:
    """Issue 24, item 12: besides each table's own "Download CSV" button (its cells
    neutralised, ``pages.common.download_csv``), Streamlit's dataframe toolbar offered a CSV
    export that writes every cell verbatim, so a teacher named ``=HYPERLINK(…)`` became a
    live formula. The app turns that export off (``client.disableDataExport``) for every
    session, local or hosted; the page's own buttons stay."""
    st.set_option("client.disableDataExport", False)  # Streamlit's default
    at = run_page("leaderboard", monkeypatch, [toy_store], readonly=readonly)
    assert st.get_option("client.disableDataExport") is True
    assert "Download CSV" in [b.label for b in at.get("download_button")]


def test_leaderboard_grids_show_bidi_controls_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24, item 9, in the grids: a teacher named with U+202E (right-to-left override)
    was drawn raw in the rank table and the tables below it, so the name read reversed."""
    from tests.test_publish import HOSTILE, hostile_store

    at = run_page("leaderboard", monkeypatch, [hostile_store(tmp_path / "hostile")])
    cells = [
        str(value)
        for frame in at.dataframe
        for value in [*frame.value.columns, *frame.value.to_numpy().ravel()]
    ]
    assert cells and not [cell for cell in cells if "\u202e" in cell]
    escaped = HOSTILE["twin-b"].replace("\u202e", "\\u202e")
    assert escaped in at.dataframe[0].value["teacher"].tolist()


def test_leaderboard_intervals_match_bootstrap(toy_store: Store, monkeypatch):
    at = run_page("leaderboard", monkeypatch, [toy_store], {"metric": "accuracy"})
    next(t for t in at.toggle if t.label.startswith("Per dataset")).set_value(True).run()
    intervals = at.dataframe[-1].value
    efficiency = toy_store.read("trace_efficiency")
    group = efficiency[(efficiency.teacher == "alpha-mini") & (efficiency.dataset == "toy-math")]
    ci = stats.bootstrap_ci(group["correct"].astype(float).to_numpy(), n_boot=200)
    row = intervals[(intervals.teacher == "alpha-mini") & (intervals.dataset == "toy-math")]
    assert (row["value"].item(), row["lo"].item(), row["hi"].item()) == pytest.approx(tuple(ci))
    error_bars = figures(at)[0]["data"][0]["error_y"]
    assert error_bars["type"] == "data"


# --- transfer -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_transfer_curves_equal_library_and_follow_filters(toy_store: Store, monkeypatch):
    at = run_page("transfer", monkeypatch, [toy_store])
    rollouts = toy_store.read("rollouts")
    expected = transfer.curve(rollouts, by="teacher", n_boot=200)
    lines = {d["name"]: d for d in figures(at)[0]["data"] if d.get("mode") == "lines"}
    for teacher in app_fixtures.TEACHERS:
        mine = expected[expected["teacher"] == teacher]
        np.testing.assert_allclose(values(lines[teacher]["y"]), mine["mean"])
    # the dashed student baseline, named in the legend: mean over students of mean k=0
    # correctness (all 0 here)
    alone = next(d for d in figures(at)[0]["data"] if d["name"].startswith("student alone"))
    assert alone["line"]["dash"] == "dash" and values(alone["y"]) == pytest.approx([0.0, 0.0])

    select(at, "Dataset").select("toy-math").run()
    math_only = transfer.curve(rollouts[rollouts["dataset"] == "toy-math"], n_boot=200)
    lines = {d["name"]: d for d in figures(at)[0]["data"] if d.get("mode") == "lines"}
    beta = math_only[math_only["teacher"] == "beta-large"]["mean"]
    np.testing.assert_allclose(values(lines["beta-large"]["y"]), beta)

    select(at, "Profile").select("release").run()
    release = transfer.curve(
        rollouts[rollouts["dataset"] == "toy-math"], n_boot=200, profile="release"
    )
    lines = curve_lines(at)
    got = values(lines["gamma-r1"]["y"])
    want = release[release["teacher"] == "gamma-r1"]["mean"].to_numpy()
    assert np.isnan(want).any()  # the release leaves bins empty: the line skips them
    np.testing.assert_allclose(got, want[~np.isnan(want)])
    assert at.query_params["profile"] == "release"


def curve_lines(at: AppTest) -> dict[str, dict]:
    """The transfer chart's teacher lines by name (a curve with empty bins is drawn as
    "lines+markers" through its measured bins)."""
    return {
        d["name"]: d
        for d in figures(at)[0]["data"]
        if d.get("mode") in ("lines", "lines+markers") and not d["name"].startswith("student")
    }


def hazard_shares(at: AppTest, teacher: str) -> dict[int, float]:
    """Hazard bin -> share of one teacher's bars: bin 0 (never solved) from its own panel on
    the left (x axis "x"), the positions (x = bin / 50) from the right one."""
    hazard = next(f for f in figures(at) if f["data"] and f["data"][0]["type"] == "bar")
    shares: dict[int, float] = {}
    for bars in (d for d in hazard["data"] if d["name"] == teacher):
        if bars.get("xaxis", "x") == "x":
            (never,) = values(bars["y"])
            shares[0] = float(never)
        else:
            bins = np.round(values(bars["x"]) * 50).astype(int)
            shares |= dict(zip(bins.tolist(), values(bars["y"]).tolist(), strict=True))
    return shares


def pooled_summary(at: AppTest) -> pd.DataFrame:
    """The transfer page's summary with its "…, traces pooled" headers back to field names."""
    table = at.dataframe[0].value.set_index("teacher")
    names = {
        f"{views.METRICS[c].label if c in views.METRICS else c}, traces pooled": c
        for c in ("fotu", "sotu", "never_solved", "regression_rate", "baseline", "lift")
    }
    return table.rename(columns=names)


def test_transfer_hazards_and_summary(toy_store: Store, monkeypatch):
    at = run_page("transfer", monkeypatch, [toy_store], {"student": "stu-tiny"})
    rollouts = toy_store.read("rollouts")
    tiny = rollouts[rollouts["student"] == "stu-tiny"]
    summary = pooled_summary(at)
    expected = transfer.teacher_metrics(tiny, n_boot=0, by="teacher").set_index("teacher")
    for column in ("fotu", "sotu", "never_solved", "regression_rate", "baseline", "lift"):
        np.testing.assert_allclose(summary[column], expected.loc[summary.index, column])
    # alpha-mini has one never-solved trace out of its correct ones for the tiny student
    alpha = tiny[tiny["teacher"] == "alpha-mini"]["trace_id"].nunique()
    assert summary.loc["alpha-mini", "never_solved"] == pytest.approx(1 / alpha)
    # beside the pooled numbers, "FOTU" is the leaderboard's: the mean over datasets of the
    # one student's per-dataset FOTU
    per_dataset = transfer.teacher_metrics(tiny, n_boot=0, by=("teacher", "dataset"))
    board_fotu = per_dataset.groupby("teacher")["fotu"].mean()
    shown = at.dataframe[0].value.set_index("teacher")["FOTU"]
    np.testing.assert_allclose(shown, board_fotu.loc[shown.index])
    # the curves, the coverage strip of measured bins, then the hazard bars
    shares = hazard_shares(at, "alpha-mini")
    assert shares[0] == pytest.approx(1 / alpha)  # bin 0 = never solved, in its own panel
    assert sum(shares.values()) == pytest.approx(1.0)


def test_transfer_profile_toggle_switches_every_number(toy_store: Store, monkeypatch):
    at = run_page("transfer", monkeypatch, [toy_store], {"profile": "release"})
    rollouts = toy_store.read("rollouts")
    # the curves
    curves = transfer.curve(rollouts, by="teacher", n_boot=200, profile="release")
    lines = curve_lines(at)
    for teacher in app_fixtures.TEACHERS:
        mine = curves[curves["teacher"] == teacher]["mean"].to_numpy()
        np.testing.assert_allclose(values(lines[teacher]["y"]), mine[~np.isnan(mine)])
    # every number of the summary is the release's
    summary = pooled_summary(at)
    release = transfer.teacher_metrics(rollouts, "release", n_boot=0, by="teacher")
    paper = transfer.teacher_metrics(rollouts, n_boot=0, by="teacher").set_index("teacher")
    release = release.set_index("teacher")
    columns = ("fotu", "sotu", "never_solved", "regression_rate", "baseline", "lift")
    for column in columns:
        np.testing.assert_allclose(summary[column], release.loc[summary.index, column])
    for column in ("fotu", "sotu", "regression_rate"):
        assert not np.allclose(release[column], paper[column]), column  # the toggle matters
    # the hazard histogram: release hazards (k = 0 included, release bins)
    traces = transfer.trace_metrics(rollouts, profile="release")
    # the curves, the coverage strip of measured bins, then the hazard bars
    for teacher in app_fixtures.TEACHERS:
        mine = traces[traces["teacher"] == teacher]["hazard_bin"]
        bins = mine.fillna(0).astype(int).to_numpy()
        want = np.bincount(bins, minlength=51) / len(bins)
        got = hazard_shares(at, teacher)
        np.testing.assert_allclose([got.get(b, 0.0) for b in range(51)], want)
    # back to paper: the summary follows
    select(at, "Profile").select("paper").run()
    summary = pooled_summary(at)
    for column in columns:
        np.testing.assert_allclose(summary[column], paper.loc[summary.index, column])


# --- pareto, correlations -------------------------------------------------------------------------


def test_pareto_frontier_matches_library(toy_store: Store, monkeypatch):
    at = run_page("pareto", monkeypatch, [toy_store], {"x": "tokens", "y": "fotu"})
    board = views.leaderboard(toy_store.read("teacher_metrics"))
    mask = stats.pareto_front(board, "tokens", "fotu", maximize=(False, True))
    expected = sorted(board.loc[mask, "teacher"])
    table = at.dataframe[0].value
    assert sorted(table[table["frontier"]]["teacher"]) == expected
    line = next(d for d in figures(at)[0]["data"] if d.get("name") == "frontier")
    assert len(values(line["x"])) == len(expected)
    # alpha-mini: fewest tokens and highest FOTU in the fixture -> the only frontier teacher
    assert expected == ["alpha-mini"]


def heat_z(figure: dict[str, Any]) -> np.ndarray:
    """The ρ matrix of the correlation heatmap: its full-strength cells (trace 0) and its
    faded cells from few points (trace 1) put back together."""
    strong, faded = (values(d["z"]).astype(float) for d in figure["data"][:2])
    return np.where(np.isnan(strong), faded, strong)


@pytest.mark.slow
def test_correlation_heatmap_equals_spearman_matrix(toy_store: Store, monkeypatch):
    at = run_page("correlations", monkeypatch, [toy_store], {"level": "model"})
    figure = figures(at)[0]
    heat = figure["data"][0]
    frame = views.model_level_frame(toy_store.read("teacher_metrics"))
    columns = [
        c for c in views.ranked_metrics(frame, list(views.METRICS)) if frame[c].nunique() > 1
    ]
    rho, _ = stats.spearman_matrix(frame, columns)
    np.testing.assert_allclose(heat_z(figure), rho.to_numpy(), equal_nan=True)
    assert heat["x"] == [views.METRICS[c].label for c in columns]

    select(at, "Level").select("trace").run()
    at.toggle(key="partial").set_value(True).run()
    figure = figures(at)[0]
    trace_frame = views.trace_level_frame(
        toy_store.read("trace_efficiency"), toy_store.read("trace_transfer")
    )
    columns = [
        c
        for c in views.ranked_metrics(trace_frame, list(views.METRICS))
        if trace_frame[c].nunique() > 1
    ]
    partial, _ = views.partial_matrix(trace_frame, columns, control="tokens")
    np.testing.assert_allclose(heat_z(figure), partial.to_numpy(), equal_nan=True)
    assert "Tokens" not in figure["data"][0]["x"]


def test_correlations_rank_stability_tables(toy_store: Store, monkeypatch):
    at = run_page("correlations", monkeypatch, [toy_store], {"metric": "fotu"})
    across_datasets = at.dataframe[0].value
    rho, _ = stats.rank_stability(toy_store.read("teacher_metrics"), "fotu", across="dataset")
    # a text cell "ρ[marks] · n N": ρ to 3 decimals and the teachers it rests on
    value = str(across_datasets.iloc[0, 2]).split(" · n ")[0].rstrip("*")
    assert float(value) == pytest.approx(round(rho.iloc[0, 1], 3))
    assert list(at.dataframe[1].value["student"]) == ["stu-small", "stu-tiny"]


# --- efficiency decomposition ---------------------------------------------------------------------


def test_decomposition_waterfall_on_published_numbers(published_store: Store, monkeypatch):
    at = run_page(
        "decomposition",
        monkeypatch,
        [published_store],
        {"dataset": "CogniLoad", "teacher": "GPT-5", "reference": "o3"},
    )
    board = at.dataframe[0].value
    assert board.iloc[0]["model"] == "o3" and board.iloc[0]["E0 rank"] == 1  # (tidy header)
    waterfall = next(f for f in figures(at) if f["data"][0]["type"] == "waterfall")["data"][0]
    bars = dict(zip(waterfall["x"], values(waterfall["y"]), strict=True))
    # Published: E0 13.41 vs 15.25 (x100), r_ctx 98 vs 98, r_logic 95 vs 91.
    assert bars["Δlog E0"] == pytest.approx(math.log(13.41 / 15.25))
    assert bars["Δlog r_ctx"] == pytest.approx(0.0)
    assert bars["Δlog r_logic"] == pytest.approx(math.log(95 / 91))
    # VO 24.17 vs 19.84, kappa 0.58 vs 0.60
    assert bars["−Δlog VŌ"] == pytest.approx(-math.log(24.17 / 19.84))
    assert bars["−Δlog κ"] == pytest.approx(-math.log(0.58 / 0.60))
    relative = [v for k, v in bars.items() if k != "Δlog E0"]
    assert sum(relative) == pytest.approx(bars["Δlog E0"])
    # The failure-mode table, found by its header (other tables, e.g. where each model's T
    # comes from, may stand before it).
    modes_table = next(d.value for d in at.dataframe if "failure mode" in d.value.columns)
    modes = modes_table.set_index("model")["failure mode"]  # (tidy header)
    assert modes["o3"] == "no-shortfall"
    assert set(modes) <= {
        "no-shortfall",
        "logic-limited",
        "context-limited",
        "verbosity-limited",
        "redundancy-limited",
        "undetermined",
    }
    assert any("Audits need" in i.value for i in at.info)


def test_decomposition_audits_on_toy_store(toy_store: Store, monkeypatch):
    at = run_page(
        "decomposition", monkeypatch, [toy_store], {"dataset": "toy-math", "layer": "solver"}
    )
    tables = [d.value for d in at.dataframe]
    audits = next(t for t in tables if "audit" in t.columns)
    # the audits' names in words (issue 39: no raw field names on a page)
    assert set(audits["audit"]) <= {
        "leave self out",
        "leave out the best k",
        "two disjoint half pools",
    }
    assert {"leave self out", "two disjoint half pools"} <= set(audits["audit"])
    share = "top solver's share of problems"  # (tidy header)
    concentration = next(t for t in tables if share in t.columns)
    assert 0 < concentration[share].item() <= 1
    board = tables[0]
    stored = toy_store.read("decomposition")
    stored = stored[(stored.benchmark == "toy-math") & (stored.layer == "solver")]
    e0 = "E0 (correct per 1,000 tokens)"  # (tidy header)
    np.testing.assert_allclose(
        board.set_index("model")[e0].sort_index(), stored.set_index("model")["e0"].sort_index()
    )


# --- inspector ------------------------------------------------------------------------------------


def html_of(at: AppTest) -> str:
    """The page's HTML: st.html bodies and the Markdown of the steps (the inspector's own
    HTML around model text escaped as Markdown)."""
    return "".join(h.proto.body for h in at.get("html")) + "".join(
        m.value for m in at.markdown if 'class="lv-trace"' in m.value
    )


def test_inspector_deep_link_opens_trace_and_escapes_payloads(toy_store: Store, monkeypatch):
    teacher, problem = app_fixtures.XSS_TRACE
    trace_id = trace_id_for(teacher, problem)
    at = run_page("inspector", monkeypatch, [toy_store], {"trace": trace_id})
    assert select(at, "Teacher").value == teacher
    assert select(at, "Problem").value == problem
    assert at.query_params["trace"] == trace_id
    body = html_of(at)
    # the payloads are Markdown-escaped text (each "<" a "\\<"): never a tag
    assert markdown_math(app_fixtures.XSS_SCRIPT) in body
    assert markdown_math(app_fixtures.XSS_IMG) in body
    assert not re.search(r"(?<!\\)<(script|img)", body)
    # three labeler kinds are distinguished, and the leak point is marked
    assert "lv-bt-judge" in body and "lv-bt-lexical" in body and "lv-bt-human" in body
    assert "leak point k = " in body
    leak = next(m for m in at.metric if m.label == "Answer leak k")
    # the answer "\\boxed{3}" is stated in the last step: k = m
    steps = toy_store.read("steps", filters={"trace_id": trace_id})
    assert int(leak.value) == len(steps)


def test_inspector_pages_a_long_trace_and_compares(toy_store: Store, monkeypatch):
    teacher, problem, _ = app_fixtures.LONG_TRACE
    at = run_page(
        "inspector",
        monkeypatch,
        [toy_store],
        {"trace": trace_id_for(teacher, problem), "compare": "gamma-r1"},
    )
    page_input = next(n for n in at.number_input if n.key == "page_main")
    assert "of 3" in page_input.label
    first = html_of(at)
    assert 'id="lv-main-s1"' in first and 'id="lv-main-s61"' not in first
    assert 'id="lv-compare-s1"' in first  # the compared trace is drawn beside it
    page_input.set_value(3).run()
    third = html_of(at)
    assert 'id="lv-main-s121"' in third and 'id="lv-main-s1"' not in third
    # the student strip: one row of points per student
    strip = next(f for f in figures(at) if f["data"][0]["type"] == "scatter")
    assert [t["y"][0] for t in strip["data"]] == ["stu-small", "stu-tiny"]


def test_unknown_or_hostile_url_values_are_refused_politely(toy_store: Store, monkeypatch):
    at = run_page(
        "inspector",
        monkeypatch,
        [toy_store],
        {"store": "../../etc/passwd", "trace": "x" * 5000, "dataset": "<b>nope</b>"},
    )
    messages = " ".join(i.value for i in [*at.info, *at.sidebar.info])
    # Messages are Markdown in which the URL value shows literally (escaped).
    assert markdown_literal("no store called '../../etc/passwd'") in messages
    assert "There is no trace" in messages and "x" * 100 not in messages
    assert at.query_params["store"] == "toy"


def test_missing_store_gets_a_friendly_message(tmp_path: Path, monkeypatch):
    at = run_page("transfer", monkeypatch, [tmp_path / "not-built"])
    assert any("cannot be read" in w.value for w in at.warning)


# --- published, about -----------------------------------------------------------------------------


@pytest.mark.slow
def test_published_tables_and_matching_teachers(toy_store: Store, tmp_path: Path, monkeypatch):
    from legival_core.published import published

    at = run_page("published", monkeypatch, [toy_store])
    table7 = at.dataframe[0].value
    expected = published.legival_table7()
    np.testing.assert_allclose(table7["FOTU"], expected["fotu"])  # (tidy header)
    assert len(at.dataframe[-1].value) == 25  # CogniLoad rows

    # A store whose teacher carries a published Hugging Face id shows up beside the paper.
    mine = Store.create(tmp_path / "mine")
    mine.write(
        "teacher_metrics",
        pd.DataFrame(
            {
                "teacher": ["my-qwen"],
                "dataset": ["math"],
                "accuracy": [0.5],
                "fotu": [0.4],
                "hf_id": ["Qwen/Qwen3-8B"],
            }
        ),
    )
    at = run_page("published", monkeypatch, [mine])
    beside = next(d.value for d in at.dataframe if "your teacher" in d.value.columns)
    row = beside.iloc[0]
    assert (row["model"], row["your teacher"], row["fotu yours"]) == ("qwen3-8b", "my-qwen", 0.4)
    paper = expected[(expected.model == "qwen3-8b") & (expected.dataset == "MATH")]
    assert row["fotu published"] == pytest.approx(paper["fotu"].item())


def test_about_lists_tables_and_hides_paths_when_readonly(toy_store: Store, monkeypatch):
    at = run_page("about", monkeypatch, [toy_store], readonly=True)
    overview = at.dataframe[0].value.set_index("table")
    assert overview.loc["rollouts", "rows"] == len(toy_store.read("rollouts"))
    texts = " ".join(t.value for t in at.text)
    assert str(toy_store.path) not in texts
    assert "Read-only mode" in " ".join(c.value for c in at.caption)
    assert "2603.20508" in texts and "2602.09805" in texts


def test_hosted_about_keeps_only_the_last_name_of_any_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24, item 13, as a visitor sees it: paths in a store's config and provenance are
    cut to their last name on the hosted About page, whatever the folder names hold. The cut
    stopped at the first space (then at a ``<`` or ``>``), and it split the JSON text on the
    backslash of an escape, showing ``…/u00e9 notes.jsonl`` for ``café notes.jsonl``."""
    secret = "/srv/Secret Project (v2), client ACME/traces of acme.jsonl"
    odd = '/srv/a "quoted" <name>/caf\u00e9 notes.jsonl'
    store = Store.create(tmp_path / "runs", config={"data": odd, "/home/u/Key Folder/x": 1})
    store.record_stage("ingest", file=secret, note=f"read {secret}")
    at = run_page("about", monkeypatch, [store], readonly=True)
    config = at.code[0].value
    provenance = next(d.value for d in at.dataframe if "details" in d.value.columns)
    details = " ".join(provenance["details"])
    for hidden in ("Secret Project", "client ACME", "quoted", "<name>", "Key Folder", "/srv"):
        assert hidden not in config + details, hidden
    assert json.loads(config) == {"data": "…/caf\u00e9 notes.jsonl", "…/x": 1}
    ingest = json.loads(provenance.set_index("stage").loc["ingest", "details"])
    assert ingest["file"] == "…/traces of acme.jsonl"
    assert ingest["note"] == "read …/traces of acme.jsonl"


def test_inspector_shows_first_wrong_step_labels(tmp_path: Path, monkeypatch):
    # A store with one CHAMP-style human annotation: the first wrong step is step 2.
    store = app_fixtures.build_store(tmp_path / "labelled", with_rollouts=False)
    teacher, problem = app_fixtures.XSS_TRACE
    trace_id = trace_id_for(teacher, problem)
    store.write(
        "error_labels",
        pd.DataFrame(
            [
                {
                    "trace_id": trace_id,
                    "labeler": "human",
                    "teacher": teacher,
                    "problem_id": problem,
                    "error_found": True,
                    "step": 2,
                    "wrong_step_text": "<b>2 + 2 = 5</b>",
                }
            ]
        ),
    )
    at = run_page("inspector", monkeypatch, [store], {"trace": trace_id})
    texts = [t.value for t in at.text]
    assert "human label: first wrong step = step 2: <b>2 + 2 = 5</b>" in texts
    # and the steps mark step 2 with ✗ (views.wrong_steps, shared with the static trace pages)
    (steps,) = [m.value for m in at.markdown if 'class="lv-trace"' in m.value]
    assert re.findall(r'id="lv-main-s(\d+)"[^>]*>(?:(?!\n\n).)*class="lv-wrong"', steps) == ["2"]
