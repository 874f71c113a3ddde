"""Reference teachers: marked in the store, shown apart, left out of ranks, frontiers,
teacher-level correlations and the solver pool unless included.

The constructed case, worked by hand: three model teachers and one reference (``human``) on one
dataset,

    teacher   accuracy  tokens  fotu
    a           0.6       500   0.3
    b           0.4       300   0.5
    c           0.2       400   0.1
    human       1.0       100   0.2   (reference)

* accuracy ranks without the reference: a 1, b 2, c 3 (human none); with it: human 1, a 2,
  b 3, c 4. Tokens (lower is better) without: b 1, c 2, a 3; with: human 1, b 2, c 3, a 4.
* Pareto on (tokens, lower better; fotu, higher better): among a, b, c, b (300, 0.5) beats a
  (500, 0.3) and c (400, 0.1) on both axes, so the frontier is {b}. The human (100, 0.2) is
  not beaten on tokens by anyone, so with it included the frontier is {human, b}; left out,
  it is on no frontier although no one dominates it.
* Model-level Spearman ρ(accuracy, tokens): without the reference the ranks are accuracy
  (a 3, b 2, c 1) and tokens (a 3, b 1, c 2); d = (0, 1, −1), Σd² = 2,
  ρ = 1 − 6·2 / (3·(9 − 1)) = 1 − 12/24 = 0.5. With it: accuracy (a 3, b 2, c 1, human 4),
  tokens (a 4, b 2, c 3, human 1); d = (−1, 0, −2, 3), Σd² = 14,
  ρ = 1 − 6·14 / (4·(16 − 1)) = 1 − 84/60 = −0.4.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core import views
from legival_core.published.references import reference_teachers, store_reference_teachers
from legival_core.stats.stats import rank_table, spearman
from legival_core.store.store import Store
from legival_core.views.board import board_numbers

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
DEMO = ROOT / "results" / "demo"

BOARD = pd.DataFrame(
    {
        "teacher": ["a", "b", "c", "human"],
        "dataset": "d",
        "accuracy": [0.6, 0.4, 0.2, 1.0],
        "tokens": [500.0, 300.0, 400.0, 100.0],
        "fotu": [0.3, 0.5, 0.1, 0.2],
    }
)


def ranks(table: pd.DataFrame, metric: str) -> dict[str, object]:
    return dict(zip(table["teacher"], table[f"{metric}_rank"], strict=True))


def test_reference_is_unranked_by_default_and_ranked_when_included() -> None:
    left_out = views.leaderboard(BOARD, ["accuracy", "tokens"], references=["human"])
    assert ranks(left_out, "accuracy") == {"a": 1, "b": 2, "c": 3, "human": pd.NA}
    assert ranks(left_out, "tokens") == {"b": 1, "c": 2, "a": 3, "human": pd.NA}
    assert left_out["tokens_change"].isna().tolist() == [False, False, False, True]
    assert left_out["teacher"].iloc[-1] == "human"  # the reference row comes last
    assert left_out.set_index("teacher")["reference"].to_dict() == {
        "a": False,
        "b": False,
        "c": False,
        "human": True,
    }
    # its values are still shown, and the CSV export says which row is a reference
    assert left_out.set_index("teacher").loc["human", "tokens"] == 100.0
    numbers = board_numbers(left_out, pd.DataFrame(), ["accuracy", "tokens"])
    assert numbers["reference"].tolist() == [False, False, False, True]
    included = views.leaderboard(
        BOARD, ["accuracy", "tokens"], references=["human"], include_references=True
    )
    assert ranks(included, "accuracy") == {"human": 1, "a": 2, "b": 3, "c": 4}
    assert ranks(included, "tokens") == {"human": 1, "b": 2, "c": 3, "a": 4}
    # the stats layer directly: the same ranks
    direct = rank_table(BOARD, {"tokens": False}, references=["human"])
    assert ranks(direct, "accuracy") == {"a": 1, "b": 2, "c": 3, "human": pd.NA}


def test_composite_leaves_the_reference_out() -> None:
    # accuracy scores (n − r)/(n − 1) over a, b, c: a 1, b 0.5, c 0; the human has none.
    board = views.leaderboard(BOARD, ["accuracy"], {"accuracy": 1.0}, references=["human"])
    composite = board.set_index("teacher")["composite"]
    assert composite[["a", "b", "c"]].tolist() == [1.0, 0.5, 0.0]
    assert pd.isna(composite["human"])


def test_reference_is_never_on_the_frontier_unless_included() -> None:
    view = views.pareto_view(BOARD, "tokens", "fotu", references=["human"])
    assert set(view.loc[view["frontier"], "teacher"]) == {"b"}
    assert view.set_index("teacher").loc["human", "reference"]
    included = views.pareto_view(BOARD, "tokens", "fotu", ["human"], include_references=True)
    assert set(included.loc[included["frontier"], "teacher"]) == {"human", "b"}


def test_model_level_correlation_leaves_the_reference_out() -> None:
    frame = views.model_level_frame(BOARD, references=["human"])
    assert frame["teacher"].tolist() == ["a", "b", "c"]
    assert spearman(frame["accuracy"], frame["tokens"]).rho == pytest.approx(0.5)
    everyone = views.model_level_frame(BOARD, references=["human"], include_references=True)
    assert spearman(everyone["accuracy"], everyone["tokens"]).rho == pytest.approx(-0.4)


def test_resampled_ranks_leave_the_reference_out() -> None:
    from legival_core.rankings.rank_intervals import (
        frontier_shares,
        interval_table,
        resample_teachers,
    )

    efficiency = pd.DataFrame(
        {
            "trace_id": [f"{t}-{p}" for t in ("a", "b", "human") for p in ("p", "q")],
            "teacher": ["a", "a", "b", "b", "human", "human"],
            "dataset": "d",
            "problem_id": ["p", "q"] * 3,
            "correct": [1, 0, 0, 0, 1, 1],
        }
    )
    drawn = resample_teachers(efficiency, None, ["accuracy"], n_boot=50, references=["human"])
    assert drawn.teachers == ("a", "b")
    table = interval_table(drawn, {"accuracy": True})
    # a (1/2) always at least ties b (0/2) in a paired resample: rank 1 in every draw; but b's
    # bootstrap collapses (0 in every draw) and its Wilson interval, 0 of 2: [0, 0.66], holds
    # a's 1/2, so a's first place is not certain (issue 39): 1–2
    assert table.set_index("teacher").loc["a", "rank_hi"] == 2
    everyone = resample_teachers(
        efficiency, None, ["accuracy"], n_boot=50, references=["human"], include_references=True
    )
    assert everyone.teachers == ("a", "b", "human")
    # Resampled with everyone, ranked without the human: the human (2/2 right on both
    # problems, so 1.0 in every draw) keeps its value interval [1, 1] but has no rank, and a
    # is still rank 1 in every draw although the human beats it in every draw (its rank
    # interval 1–2 is against b alone, as above).
    apart = interval_table(everyone, {"accuracy": True}, references=["human"]).set_index("teacher")
    assert (apart.loc["human", "value_lo"], apart.loc["human", "value_hi"]) == (1.0, 1.0)
    assert pd.isna(apart.loc["human", "rank"]) and pd.isna(apart.loc["human", "rank_hi"])
    assert (apart.loc["a", "rank"], apart.loc["a", "rank_hi"]) == (1, 2)
    accuracy = everyone.metrics["accuracy"]
    shares = frontier_shares(accuracy, accuracy, (True, True), references=["human"])
    # on (accuracy, accuracy) a ties or beats b in every draw: a always on the frontier
    assert shares[0] == 1.0 and pd.isna(shares[2])
    assert frontier_shares(accuracy, accuracy, (True, True))[0] < 1.0  # the human beats a


def _a_b_and_human(correct: list[bool], tokens: list[float], **columns: object) -> pd.DataFrame:
    """Instances 1 and 2 of benchmark d, each answered by a, b and the human (rows a1 a2 b1 b2
    human1 human2), none truncated; ``columns`` adds constant columns."""
    return pd.DataFrame(
        {
            "model": ["a", "a", "b", "b", "human", "human"],
            "benchmark": "d",
            "instance_id": ["1", "2"] * 3,
            "correct": correct,
            "tokens": tokens,
            "truncated": False,
            **columns,
        }
    )


def test_solver_pool_leaves_the_reference_out() -> None:
    """Two instances. a: right on 1 (400 tokens), wrong on 2 (400); b: wrong on both (200
    each); human: right on both (100 each). E0 = 1000·accuracy/E[T]: a 1000·0.5/400 = 1.25,
    b 0, human 1000·1/100 = 10. Pool {a, b}: instance 1 solved by a (W = 400), instance 2 by
    no one, coverage 1/2. Pool with the human: both solved by it (W = 100), coverage 1."""
    from precompute.stages.metrics import decomposition_table

    instances = _a_b_and_human(
        correct=[True, False, False, False, True, True],
        tokens=[400.0, 400.0, 200.0, 200.0, 100.0, 100.0],
        workload=None,
        trace="some reasoning text",
    )
    default = decomposition_table(instances, references=["human"])
    solver = default[default["layer"] == "solver"].set_index("model")
    assert solver["coverage"].tolist() == [0.5, 0.5, 0.5]
    assert solver.loc["a", "mean_workload"] == 400.0
    with_human = decomposition_table(instances)
    solver = with_human[with_human["layer"] == "solver"].set_index("model")
    assert solver["coverage"].tolist() == [1.0, 1.0, 1.0]
    assert solver.loc["a", "mean_workload"] == 100.0


def test_workload_audits_pool_leaves_the_reference_out() -> None:
    instances = _a_b_and_human(
        correct=[True, False, True, True, True, True],
        tokens=[400.0, 400.0, 200.0, 300.0, 100.0, 100.0],
    )
    # E0: a 1000·0.5/400 = 1.25, b 1000·1/250 = 4, human 10: the human would solve all.
    left_out = views.workload_audits(instances, n_splits=5, references=["human"])
    assert left_out["concentration"].iloc[0]["top1_solver"] == "b"
    everyone = views.workload_audits(
        instances, n_splits=5, references=["human"], include_references=True
    )
    assert everyone["concentration"].iloc[0]["top1_solver"] == "human"


def test_a_teacher_is_a_reference_only_when_every_trace_says_so() -> None:
    traces = pd.DataFrame(
        {
            "teacher": ["gpt-4", "human", "gold", "mixed", "mixed"],
            "source": [
                "champ:0-Shot",
                "champ:reference",
                "reference:ingest:gold.jsonl",
                "reference:ingest:x.jsonl",
                "ingest:y.jsonl",
            ],
        }
    )
    assert reference_teachers(traces) == ["gold", "human"]


def test_ingest_reference_marks_the_teacher(tmp_path: Path) -> None:
    from precompute.ingest import ingest

    rows = [
        {"problem_id": "p1", "prompt": "What is 2 + 3?", "reasoning": "2 + 3 = 5.", "correct": 1},
        {"problem_id": "p2", "prompt": "What is 4 * 6?", "reasoning": "4 * 6 = 24.", "correct": 1},
    ]
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = tmp_path / "model.jsonl"
    model.write_text("".join(json.dumps({**r, "correct": 0}) + "\n" for r in rows))
    store = tmp_path / "store"
    ingest(gold, store, "gold-rationale", reference=True)
    ingest(model, store, "some-model")
    assert store_reference_teachers(store) == ["gold-rationale"]
    # a second run of the same file changes nothing (the source is the same)
    again = ingest(gold, store, "gold-rationale", reference=True)
    assert len(Store.open(store).read("traces")) == 4, again


def test_demo_store_human_is_a_reference() -> None:
    # The demo was built before the mark existed: its human traces say champ:reference.
    assert store_reference_teachers(DEMO) == ["human"]


@pytest.fixture()
def _fresh_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def _rank(cell: object) -> int | None:
    match = re.match(r"(\d+)", str(cell))
    return int(match.group(1)) if match else None


@pytest.mark.usefixtures("_fresh_caches")
def test_leaderboard_shows_the_reference_row_unranked_and_the_switch_ranks_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LEGIVAL_STORE", raising=False)
    monkeypatch.delenv("LEGIVAL_READONLY", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    # the first screen shows FOTU's rank only (issue 39 item 6): Accuracy and every rank on
    at.multiselect(key="qp_leaderboard_columns").set_value(["accuracy", "fotu_before_leak"])
    at.toggle(key="qp_leaderboard_all_ranks").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    board = at.dataframe[0].value.set_index("teacher")
    assert board.loc["human", "Accuracy rank"] == "reference"
    assert board.loc["human", "FOTU rank"] == "reference"
    # its values keep their intervals; 50 of 50 right collapses the bootstrap to a point, so
    # the cell shows the Wilson interval: lower n / (n + z²) = 50 / 53.8416 = 0.929
    assert board.loc["human", "Accuracy"].startswith("100.0% [92.9–100.0] (Wilson)")
    models = board.drop(index="human")
    assert sorted(_rank(c) for c in models["Accuracy rank"]) == [1, 2, 3, 4]
    assert at.query_params["references"] == "exclude"

    at.toggle(key="include_references").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    board = at.dataframe[0].value.set_index("teacher")
    assert _rank(board.loc["human", "Accuracy rank"]) == 1  # accuracy 1.0 by construction
    assert sorted(_rank(c) for c in board["Accuracy rank"]) == [1, 2, 3, 4, 5]
    assert at.query_params["references"] == "include"


@pytest.mark.usefixtures("_fresh_caches")
def test_a_shared_url_includes_references(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEGIVAL_STORE", raising=False)
    monkeypatch.delenv("LEGIVAL_READONLY", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["references"] = "include"
    at.query_params["metric"] = "accuracy"  # the sorted metric shows its rank
    at.run()
    assert at.toggle(key="include_references").value is True
    board = at.dataframe[0].value.set_index("teacher")
    assert _rank(board.loc["human", "Accuracy rank"]) == 1


def _demo_page(monkeypatch: pytest.MonkeyPatch, page: str, include: bool) -> AppTest:
    """The demo store's ``page`` with the reference switch set through the URL (the
    correlations page at model level, which counts teachers)."""
    monkeypatch.delenv("LEGIVAL_STORE", raising=False)
    monkeypatch.delenv("LEGIVAL_READONLY", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(f"pages/{page}.py")
    at.query_params["references"] = "include" if include else "exclude"
    if page == "correlations":
        at.query_params["level"] = "model"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.toggle(key="include_references").value is include
    return at


def select(at: AppTest, label: str) -> object:
    return next(box for box in at.selectbox if box.label == label)


def _chart(at: AppTest, index: int = 0) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


@pytest.mark.slow
@pytest.mark.usefixtures("_fresh_caches")
def test_transfer_page_draws_the_reference_dashed(monkeypatch: pytest.MonkeyPatch) -> None:
    at = _demo_page(monkeypatch, "transfer", include=False)
    lines = {d["name"]: d["line"].get("dash") for d in _chart(at)["data"] if "line" in d}
    assert lines["human (reference)"] == "dash"
    assert lines["gpt-4"] is None
    at = _demo_page(monkeypatch, "transfer", include=True)
    lines = {d["name"]: d["line"].get("dash") for d in _chart(at)["data"] if "line" in d}
    assert "human (reference)" not in lines and lines["human"] is None


@pytest.mark.slow
@pytest.mark.usefixtures("_fresh_caches")
def test_pareto_page_marks_the_reference_off_the_frontier(monkeypatch: pytest.MonkeyPatch) -> None:
    # Demo, tokens vs FOTU: the human has the fewest tokens (172 on average against 421-640),
    # so no model beats it on tokens and, compared, it is on the frontier.
    at = _demo_page(monkeypatch, "pareto", include=False)
    points = at.dataframe[0].value.set_index("teacher")
    assert not points.loc["human", "frontier"] and points.loc["human", "reference"]
    symbols = {d["name"]: d.get("marker", {}).get("symbol") for d in _chart(at)["data"]}
    assert symbols["human, reference (not compared)"] == "star-diamond"
    at = _demo_page(monkeypatch, "pareto", include=True)
    assert at.dataframe[0].value.set_index("teacher").loc["human", "frontier"]


@pytest.mark.slow
@pytest.mark.usefixtures("_fresh_caches")
def test_teacher_level_correlations_count_the_reference_only_when_included(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Four model teachers in the demo, plus the human: n = 4 by default, 5 with it.
    for include, n in ((False, 4), (True, 5)):
        at = _demo_page(monkeypatch, "correlations", include)
        # model level, all traces; with 4 or 5 points every cell is in the faded heatmap
        cells = [c for trace in _chart(at)["data"] for row in trace["text"] for c in row if c]
        assert cells and all(c.endswith(f"n {n}") for c in cells), (include, cells[:3])
        at = _demo_page(monkeypatch, "rewards", include)
        rho = next(d.value for d in at.dataframe if "level" in d.value.columns)
        assert set(rho.loc[rho["level"] == "teacher", "n"]) == {n}
        at = _demo_page(monkeypatch, "monitoring", include)
        legibility = next(
            d.value for d in at.dataframe if "partial ρ (given tokens)" in d.value.columns
        )
        assert legibility.loc[legibility["measure"] == "recall", "n"].max() == n


@pytest.mark.slow
@pytest.mark.usefixtures("_fresh_caches")
def test_decomposition_page_keeps_the_reference_out_of_comparisons(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The human's E0 (5.37 on champ-combinatorics against at most 0.74 for a model) is a line,
    not a bar; the waterfall opens on two models; the failure modes are against the best model;
    the VŌ–κ scatter draws the human apart (an open marker named as the reference)."""
    at = _demo_page(monkeypatch, "decomposition", include=False)
    charts = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    bars = next(c for c in charts if c["data"][0]["type"] == "bar")
    assert "human" not in bars["data"][0]["x"]
    notes = [a["text"] for a in bars["layout"].get("annotations", [])]
    assert any(n.startswith("human (reference): E0") for n in notes), notes
    assert "human" not in (select(at, "Model").value, select(at, "Compared with").value)
    # the one dataset selector without "All" says why
    assert 'no "All"' in select(at, "Benchmark").help
    modes = next(d.value for d in at.dataframe if "failure mode" in d.value.columns)
    assert "human" not in set(modes["model"]) | set(modes["reference"])
    scatter = next(c for c in charts if c["data"][0]["type"] == "scatter")
    points = {d["name"]: d for d in scatter["data"] if d.get("mode") != "lines"}
    model_names = {t for d in scatter["data"] for t in d.get("text", []) if d["name"] == "models"}
    assert "human" not in model_names and "gpt-4" in model_names
    reference = points["reference (not compared)"]
    assert list(reference["text"]) == ["human"]
    assert reference["marker"]["symbol"] == "circle-open"
    at = _demo_page(monkeypatch, "decomposition", include=True)
    scatter = next(
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if json.loads(c.proto.spec)["data"][0]["type"] == "scatter"
    )
    assert all(d["name"] != "reference (not compared)" for d in scatter["data"])
