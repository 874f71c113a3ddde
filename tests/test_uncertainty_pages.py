"""Uncertainty on the leaderboard: paired problem resampling, rank intervals, n and low-n marks.

The constructed store is small enough to work out by hand: three teachers answer the same six
problems, all correctly, with these reasoning lengths (tokens, lower is better):

    problem      p0   p1   p2   p3   p4   p5   mean
    ace         100  110  120  130  140  150   750 / 6 = 125
    twin-a      200  300  160  400  250  350  1660 / 6 = 276.67
    twin-b      200  300  160  400  250  350  (the same as twin-a, problem by problem)

Every resample of problems gives each teacher a weighted mean of its own row with the *same*
weights, so ace (shorter on every problem) is below both twins in every resample, and the
twins are equal in every resample. Hence: ace rank 1 in every resample (interval 1–1), the twins
tie at rank 2 in every resample; nothing orders the two, and their intervals overlap, so each
takes rank 2 or 3 (interval 2–3, not separated from each other; issue 39: a tie in every
resample is not a certain rank, docs/rankings.md). Ace's mean lies
in [100, 150] and each twin's in [160, 400], so ace's interval lies wholly below the twins':
rank upper bound 1 for ace and 1 + 1 = 2 for each twin (the other twin's interval is the same,
not better).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core.rankings import cell_sums, rank_intervals
from legival_core.store.store import Store
from legival_core.views.board import LOW_N_MARK, NO_INTERVAL
from tests.app_runner import leaderboard_detail, rank_the_composite, run_app_page

TOKENS = {
    "ace": [100, 110, 120, 130, 140, 150],
    "twin-a": [200, 300, 160, 400, 250, 350],
    "twin-b": [200, 300, 160, 400, 250, 350],
}


def hand_worked_efficiency() -> pd.DataFrame:
    rows = []
    for teacher, tokens in TOKENS.items():
        for index, count in enumerate(tokens):
            rows.append(
                {
                    "trace_id": f"{teacher}-p{index}",
                    "teacher": teacher,
                    "dataset": "hand",
                    "problem_id": f"p{index}",
                    "correct": True,
                    "tokens": count,
                    "steps": 5,
                    "redundancy": 0.2,
                    "backtracking": 0.0,
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def hand_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    from precompute.stages.metrics import teacher_table

    store = Store.create(tmp_path_factory.mktemp("stores") / "hand", config={"synthetic": True})
    efficiency = hand_worked_efficiency()
    store.write("trace_efficiency", efficiency, stage="metrics")
    teachers = teacher_table(
        store.read("trace_efficiency"), pd.DataFrame(), "paper", "interpolate", 0
    )
    store.write("teacher_metrics", teachers, stage="metrics")
    return store


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def leaderboard(monkeypatch: pytest.MonkeyPatch, store: str, params: dict[str, str]) -> AppTest:
    return open_page(monkeypatch, store, "leaderboard", params)


def test_hand_worked_rank_intervals_on_the_page(hand_store: Store, monkeypatch) -> None:
    at = leaderboard(monkeypatch, str(hand_store.path), {"metric": "tokens"})
    table = leaderboard_detail(at).set_index("teacher")
    assert table.loc["ace", "rank 95% interval"] == "1–1"
    assert table.loc["twin-a", "rank 95% interval"] == "2–3"
    assert table.loc["twin-b", "rank 95% interval"] == "2–3"
    # the one-line verdict above the table: ace's interval 1-1 lies above both twins' 2-3
    verdicts = [
        m.value.replace("\\", "")
        for m in at.markdown
        if "ahead" in m.value or "separated" in m.value
    ]  # (Markdown escapes removed)
    assert verdicts == [
        "**On Tokens, ace is ahead of twin-a and twin-b; the others are not separated from "
        "each other.**"
    ], verdicts
    assert table.loc["ace", "not separated from"] == ""
    assert table.loc["twin-a", "not separated from"] == "twin-b"
    assert table.loc["twin-b", "not separated from"] == "twin-a"
    # means 750/6 = 125 and 1660/6; each resample mean lies within the row's min and max
    assert table.loc["ace", "value"] == pytest.approx(125.0)
    assert table.loc["twin-a", "value"] == pytest.approx(1660 / 6)
    assert 100 <= table.loc["ace", "95% lo"] <= table.loc["ace", "95% hi"] <= 150
    assert 160 <= table.loc["twin-b", "95% lo"] <= table.loc["twin-b", "95% hi"] <= 400
    # six traces each, under the app config's low-n threshold of 20
    assert table["n traces"].tolist() == [6, 6, 6] and table["low n"].all()
    board = at.dataframe[0].value.set_index("teacher")
    assert board.loc["ace", "Tokens rank"] == "1 (1)"
    assert board.loc["twin-a", "Tokens rank"] == "2 (2–3)"
    assert board.loc["ace", "Tokens"].startswith("125 [")
    assert board.loc["ace", "Tokens"].endswith(f"· n 6 · {LOW_N_MARK}")
    # the bar chart carries error bars for the intervals
    import json

    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert figure["data"][0]["error_y"]["visible"] is True


def test_hand_worked_composite_interval(hand_store: Store, monkeypatch) -> None:
    # Accuracy: all tie at rank 1 -> score (3 - 1) / 2 = 1 for everyone. Tokens: ace rank 1 ->
    # score 1, twins rank 2 -> (3 - 2) / 2 = 0.5. Weights 1:1 -> ace (1 + 1) / 2 = 1.0, each
    # twin (1 + 0.5) / 2 = 0.75, in every resample.
    at = leaderboard(monkeypatch, str(hand_store.path), {"metric": "tokens"})
    # the weighted composite becomes the sorting metric, and its rank intervals show
    table = rank_the_composite(at, {"accuracy": 1.0, "tokens": 1.0}).set_index("teacher")
    assert table["value"].to_dict() == pytest.approx({"ace": 1.0, "twin-a": 0.75, "twin-b": 0.75})
    assert table["95% lo"].to_dict() == pytest.approx({"ace": 1.0, "twin-a": 0.75, "twin-b": 0.75})
    # the twins tie in every resample: either may be second (see the module docstring)
    assert table["rank 95% interval"].to_dict() == {"ace": "1–1", "twin-a": "2–3", "twin-b": "2–3"}


def test_published_store_says_no_interval(monkeypatch) -> None:
    at = leaderboard(monkeypatch, "", {"store": "published", "metric": "fotu"})
    board = at.dataframe[0].value
    assert all(cell.endswith(f"· {NO_INTERVAL}") for cell in board["FOTU"])
    assert set(leaderboard_detail(at)["rank 95% interval"]) == {NO_INTERVAL}
    assert any(NO_INTERVAL in c.value for c in at.caption)


def test_paired_resampling_separates_a_uniform_gap() -> None:
    # b = a + 1 on every problem, but problems differ by far more than 1 (0 .. 900). Paired
    # resamples keep b above a in every draw (rank 1 always); resampling each teacher with
    # its own draw would mix hard and easy problems differently and let the order flip.
    base = np.arange(10) * 100.0
    rows = pd.DataFrame(
        {
            "teacher": ["a"] * 10 + ["b"] * 10,
            "dataset": "d",
            "problem_id": [f"p{i}" for i in range(10)] * 2,
            "value": np.r_[base, base + 1],
        }
    )
    problems = pd.MultiIndex.from_tuples([("d", f"p{i}") for i in range(10)])
    draws = rank_intervals.problem_weights(problems, n_boot=500, seed=3)
    paired = rank_intervals.metric_resamples(rows, "value", ["a", "b"], problems, draws)
    table = rank_intervals.rank_intervals(paired, higher_is_better=True).set_index("teacher")
    assert (table.loc["b", "rank_lo"], table.loc["b", "rank_hi"]) == (1, 1)
    assert (table.loc["a", "rank_lo"], table.loc["a", "rank_hi"]) == (2, 2)
    # the same data with a's problems drawn independently of b's: the order flips sometimes
    other = rank_intervals.problem_weights(problems, n_boot=500, seed=4)
    alone = rank_intervals.metric_resamples(rows, "value", ["a", "b"], problems, other)
    flips = (alone.replicates[:, 0] > paired.replicates[:, 1]).mean()
    assert flips > 0.2


def open_page(monkeypatch: pytest.MonkeyPatch, store: str, page: str, params: dict) -> AppTest:
    return run_app_page(page, monkeypatch, [Path(store)], params, timeout=90)


def test_pareto_frontier_share_hand_worked(hand_store: Store, monkeypatch) -> None:
    # Accuracy is 1 for all; ace has fewer tokens than both twins in every resample, so ace
    # dominates them in every resample: frontier share 1 for ace, 0 for each twin.
    at = open_page(monkeypatch, str(hand_store.path), "pareto", {"x": "tokens", "y": "accuracy"})
    table = at.dataframe[0].value.set_index("teacher")
    shares = table["on frontier in resamples"].to_dict()
    assert shares == {"ace": 1.0, "twin-a": 0.0, "twin-b": 0.0}


@pytest.mark.slow
def test_correlations_show_n_and_fade_few_points(tmp_path: Path, monkeypatch) -> None:
    from tests.app_fixtures import build_store

    store = build_store(tmp_path / "toy")
    # trace level is the default; model level asked for by the URL
    at = open_page(monkeypatch, str(store.path), "correlations", {"level": "model"})
    strong, faded = json_figure(at)["data"][:2]
    # model level: one point per teacher, 3 teachers -> every cell n 3 < 8, all faded, and
    # no significance star from 3 points (the exact p at n = 3 is at least 2/6)
    assert faded["opacity"] == pytest.approx(0.3) and strong["opacity"] == 1
    assert all(t == "" for row in strong["text"] for t in row)
    assert all(t.endswith("<br>n 3") for row in faded["text"] for t in row if t)
    assert not any("*" in t for row in faded["text"] for t in row)
    # both layers share one colour scale, so faded cells keep their colours
    assert strong["coloraxis"] == faded["coloraxis"] == "coloraxis"
    # and their numbers stay readable: dark text (Plotly's automatic white was lost on them)
    assert faded["textfont"]["color"] == "#333"
    assert any("number of teachers" in c.value for c in at.caption)
    # trace level: 3 teachers x 6 problems = 18 traces; transfer metrics exist for the 15
    # correct ones only (3 wrong), so tokens-vs-redundancy has n 18 and tokens-vs-FOTU n 15,
    # both >= 8: drawn at full strength
    next(s for s in at.selectbox if s.label == "Level").select("trace").run()
    strong, faded = json_figure(at)["data"][:2]
    labels = strong["x"]
    text = {
        (y, x): t
        for y, row in zip(labels, strong["text"], strict=True)
        for x, t in zip(labels, row, strict=True)
    }
    assert text[("Tokens", "Redundancy")].endswith("<br>n 18")
    assert text[("Tokens", "FOTU")].endswith("<br>n 15")
    assert all(t == "" for row in faded["text"] for t in row)


def json_figure(at: AppTest) -> dict:
    import json

    return json.loads(at.get("plotly_chart")[0].proto.spec)


@pytest.mark.slow
@pytest.mark.parametrize("student", [None, "stu-tiny"])
def test_interval_points_are_the_leaderboard_values(tmp_path: Path, student: str | None) -> None:
    # The intervals must sit around the numbers the table shows: the resampler's point values
    # (recomputed from trace_efficiency / trace_transfer) equal views.leaderboard's (from
    # teacher_metrics, or the rollouts of one student) for every metric.
    from legival_core import views
    from tests.app_fixtures import build_store

    store = build_store(tmp_path / "toy")
    stored = store.read("teacher_metrics")
    if student is not None:
        stored = views.with_student(
            stored, views.student_transfer_metrics(store.read("rollouts")), student
        )
    metrics = views.ranked_metrics(stored)
    board = views.leaderboard(stored, metrics).set_index("teacher")
    transfer = views.filter_rows(store.read("trace_transfer"), student=student)
    drawn = rank_intervals.resample_teachers(
        store.read("trace_efficiency"), transfer, metrics, n_boot=10
    )
    assert sorted(drawn.metrics) == sorted(metrics)
    for metric, resampled in drawn.metrics.items():
        expected = board.loc[list(drawn.teachers), metric].to_numpy(dtype=float)
        np.testing.assert_allclose(resampled.point, expected, rtol=1e-12, err_msg=metric)


@pytest.mark.slow
def test_no_interval_around_a_number_it_does_not_belong_to(tmp_path: Path, monkeypatch) -> None:
    # A store whose metrics stage ran with the authors' release profile: its teacher FOTU pools
    # bin means over traces, so the mean of per-trace FOTU (what the resamples recompute)
    # is another number. The page then shows FOTU without an interval, and keeps the
    # intervals of the metrics that agree (accuracy, tokens, ...).
    from precompute.stages.metrics import teacher_table, transfer_table
    from tests.app_fixtures import build_store

    store = build_store(tmp_path / "toy")
    rollouts = store.read("rollouts")
    store.write("trace_transfer", transfer_table(rollouts, "release", "observed"), stage="metrics")
    release = teacher_table(store.read("trace_efficiency"), rollouts, "release", "observed", 0)
    release["hf_id"] = (
        store.read("teacher_metrics")
        .set_index("teacher")["hf_id"]
        .reindex(release["teacher"])
        .to_numpy()
    )
    store.write("teacher_metrics", release, stage="metrics")
    # Accuracy is behind the column chooser since the first screen fits 1,400 px
    at = leaderboard(monkeypatch, str(store.path), {"metric": "fotu", "columns": "accuracy"})
    board = at.dataframe[0].value
    assert all(cell.endswith("· no interval") for cell in board["FOTU"]), board["FOTU"].tolist()
    assert all(" [" in cell and "· n " in cell for cell in board["Accuracy"])
    assert set(leaderboard_detail(at)["rank 95% interval"]) == {"no interval"}
    # the Pareto page likewise: no frontier shares with FOTU on an axis, shares with accuracy
    from legival_core.views.display import MISSING

    def missing(column: pd.Series) -> pd.Series:
        # A column with a gap is shown as text, the gap as the em dash (legival_core.views.display).
        return column.isna() | (column.astype(object) == MISSING)

    at = open_page(monkeypatch, str(store.path), "pareto", {"x": "tokens", "y": "fotu"})
    assert missing(at.dataframe[0].value["on frontier in resamples"]).all()
    at = open_page(monkeypatch, str(store.path), "pareto", {"x": "tokens", "y": "accuracy"})
    assert not missing(at.dataframe[0].value["on frontier in resamples"]).any()


def test_sotu_resamples_are_the_same_in_blocks_of_any_size(monkeypatch) -> None:
    """The hazard histograms of SOTU are built and reduced a block of resamples at a time; the
    block size changes the memory used, never a value (each resample row is independent)."""
    rng = np.random.default_rng(3)
    n = 400
    transfer = pd.DataFrame(
        {
            "trace_id": [f"t{i}" for i in range(n)],
            "student": rng.choice(["s1", "s2"], n),
            "teacher": rng.choice(["a", "b", "c"], n),
            "dataset": rng.choice(["d1", "d2"], n),
            "problem_id": [f"p{i % 37}" for i in range(n)],
            "hazard_bin": rng.integers(0, 51, n),
            "fotu": rng.random(n),
        }
    )
    results = []
    for block in (1, 7, 10_000):
        monkeypatch.setattr(cell_sums, "_ENTROPY_BLOCK", block)
        drawn = rank_intervals.resample_teachers(None, transfer, ["sotu"], n_boot=50, seed=1)
        results.append(drawn.metrics["sotu"])
    for other in results[1:]:
        assert np.array_equal(results[0].replicates, other.replicates, equal_nan=True)
        assert np.array_equal(results[0].point, other.point, equal_nan=True)
    assert np.isfinite(results[0].replicates).any()


def test_rank_stability_cells_give_n_and_no_stars_below_five(monkeypatch) -> None:
    """On the demo each rank-stability ρ rests on the four model teachers ranked on both
    datasets (the human reference is left out): every cell names its n, and none below n = 5
    carries a significance mark, however extreme its ρ."""
    import re

    from legival_core.published.references import store_reference_teachers
    from legival_core.stats.stats import MIN_N_FOR_SIGNIFICANCE, rank_stability
    from legival_core.views.app_config import BUNDLED_STORES

    demo = Store.open(BUNDLED_STORES["demo"])
    at = run_app_page("correlations", monkeypatch, [demo.path], {"metric": "fotu"}, timeout=300)
    table = next(d.value for d in at.dataframe if d.value.columns[0] == "dataset")
    table = table.set_index("dataset")
    metrics = demo.read("teacher_metrics")
    models = metrics[~metrics["teacher"].isin(store_reference_teachers(demo))]
    rho, _ = rank_stability(models, "fotu", across="dataset")
    wide = models.pivot_table(index="teacher", columns="dataset", values="fotu")
    checked = 0
    for a in table.index:
        for b in table.columns:
            cell = str(table.loc[a, b])
            if a == b:
                continue
            n = int(wide[[a, b]].dropna().shape[0])  # teachers with a FOTU on both datasets
            match = re.fullmatch(r"([+-]\d\.\d{3}|n/a)(\**) · n (\d+)", cell)
            assert match, cell
            assert int(match.group(3)) == n
            if match.group(1) != "n/a":
                assert float(match.group(1)) == pytest.approx(rho.loc[a, b], abs=5e-4)
            if n < MIN_N_FOR_SIGNIFICANCE:
                assert match.group(2) == "", cell
            checked += 1
    assert checked and n < MIN_N_FOR_SIGNIFICANCE  # the demo's cells are the small-n case
