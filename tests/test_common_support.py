"""Teachers are compared on common ground: every teacher-level value is averaged over the datasets
on which every compared teacher has a value (the common support, docs/rankings.md), unless
``support="all"`` asks for every dataset, and then the teachers that miss one are unranked.

On the bundled demo palm-2-medium has no correct champ-combinatorics trace, so no FOTU there. The
expected numbers are worked out here from the store's own rows, not copied from a page.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from legival_core.metrics.page_results import RewardSelection
from legival_core.oversight import selections
from legival_core.published.references import store_reference_teachers
from legival_core.results import Results
from legival_core.stats.stats import rank_table
from legival_core.stats.support import (
    coverage_text,
    support_datasets,
    teacher_means,
)
from legival_core.store.store import Store
from legival_core.views.app_config import BUNDLED_STORES

PALM = "palm-2-medium"


@pytest.fixture(scope="module")
def demo() -> Store:
    if not (BUNDLED_STORES["demo"] / "manifest.json").exists():
        pytest.fail("the bundled demo store is missing (python -m precompute demo builds it)")
    return Store.open(BUNDLED_STORES["demo"])


@pytest.fixture(scope="module")
def results(demo: Store) -> Results:
    with warnings.catch_warnings():  # the demo's grader-version warning is not under test
        warnings.simplefilter("ignore")
        return Results(demo)


def _fotu_cells(demo: Store) -> pd.DataFrame:
    """teacher × dataset FOTU of the store's teacher_metrics (NaN where there is none)."""
    rows = demo.read("teacher_metrics")
    return rows.pivot_table(index="teacher", columns="dataset", values="fotu", aggfunc="mean")


# --- the averaging itself -------------------------------------------------------------------


def test_a_teacher_missing_a_dataset_narrows_everyone_to_the_common_datasets() -> None:
    rows = pd.DataFrame(
        {
            "teacher": ["a", "a", "b", "b"],
            "dataset": ["easy", "hard", "easy", "hard"],
            "fotu": [0.4, 0.0, 0.3, None],
        }
    )
    common = teacher_means(rows, ["fotu"]).set_index("teacher")
    # a over "easy" only, like b; not (0.4 + 0.0) / 2 = 0.2, which would rank b above a
    assert common.loc["a", "fotu"] == pytest.approx(0.4)
    assert common.loc["b", "fotu"] == pytest.approx(0.3)
    assert common["fotu_datasets"].tolist() == [1, 1]
    assert common["fotu_covered"].tolist() == [2, 1]
    every = teacher_means(rows, ["fotu"], support="all").set_index("teacher")
    assert every.loc["a", "fotu"] == pytest.approx(0.2)
    assert every["fotu_datasets"].tolist() == [2, 1]


def test_a_reference_teacher_does_not_narrow_the_support() -> None:
    covered = pd.DataFrame(
        [[True, True], [True, False]], index=["model", "human"], columns=["x", "y"]
    )
    assert support_datasets(covered) == ["x"]
    assert support_datasets(covered, outside=["human"]) == ["x", "y"]


def test_an_unknown_support_is_a_one_line_error(results: Results) -> None:
    with pytest.raises(ValueError, match="support"):
        results.leaderboard(support="some")


def test_coverage_reads_as_datasets_of_the_selection() -> None:
    assert coverage_text(4, 5) == "4/5 datasets"
    assert coverage_text(5, 5) == ""


# --- the demo: palm-2-medium has no FOTU on one dataset --------------------------------------


def test_the_demo_has_a_teacher_without_fotu_on_one_dataset(demo: Store) -> None:
    cells = _fotu_cells(demo)
    assert cells.shape[1] == 5
    assert int(cells.loc[PALM].notna().sum()) == 4  # the premise of the tests below


def test_leaderboard_averages_every_teacher_over_the_datasets_all_cover(
    demo: Store, results: Results
) -> None:
    """Before: gpt-4-turbo's FOTU was its mean over 5 datasets (12.2%) beside palm's over 4."""
    cells = _fotu_cells(demo)
    common = cells.columns[cells.loc[PALM].notna()]
    board = results.leaderboard().set_index("teacher")
    for teacher in cells.index:
        expected = float(cells.loc[teacher, common].mean())
        assert board.loc[teacher, "fotu"] == pytest.approx(expected), teacher
    assert (board["fotu_datasets"] == 4).all()
    assert int(board.loc[PALM, "fotu_covered"]) == 4
    assert (board["n_dataset"] == 5).all()  # the datasets of the selection
    # accuracy has a value everywhere: its support is every dataset
    assert (board["accuracy_datasets"] == 5).all()


def test_support_all_lists_the_teacher_that_misses_a_dataset_apart(
    demo: Store, results: Results
) -> None:
    cells = _fotu_cells(demo)
    board = results.leaderboard(support="all").set_index("teacher")
    for teacher in cells.index:
        assert board.loc[teacher, "fotu"] == pytest.approx(float(cells.loc[teacher].mean()))
    assert pd.isna(board.loc[PALM, "fotu_rank"])  # over 4 datasets: not compared
    assert not pd.isna(board.loc[PALM, "fotu"])  # but its value is still shown
    ranked = board.drop(index=[PALM, *results.reference_teachers])
    assert ranked["fotu_rank"].notna().all()
    assert sorted(ranked["fotu_rank"].astype(int)) == list(range(1, len(ranked) + 1))


def test_rank_interval_counts_come_from_the_datasets_averaged(
    demo: Store, results: Results
) -> None:
    """n traces beside a FOTU value counts the transfer rows of the 4 common datasets only."""
    cells = _fotu_cells(demo)
    common = set(cells.columns[cells.loc[PALM].notna()])
    detail = results.rank_intervals(metric="fotu", n_boot=20).set_index("teacher")
    transfer = demo.read("trace_transfer")
    on = transfer[transfer["dataset"].astype(str).isin(common) & transfer["fotu"].notna()]
    expected = on.groupby("teacher")["trace_id"].nunique()
    for teacher in ("gpt-4", "gpt-4-turbo", "gpt-3.5", PALM):
        shown = detail.loc[teacher, "n traces"]
        assert int(shown) == int(expected[teacher]), (teacher, shown, expected[teacher])
        assert detail.loc[teacher, "datasets averaged"] == "4 of 5"


def test_reward_score_and_its_count_come_from_the_same_rows(demo: Store) -> None:
    """Before: palm's score 0.891 over "n traces 40" (its champ-combinatorics rewards dropped
    with its missing FOTU) while the store holds 50 rewards averaging 0.895."""
    rewards = demo.read("rewards")
    traces = demo.read("traces")[["trace_id", "teacher", "dataset"]]
    model = str(rewards["reward_model"].iloc[0])
    tables = selections.RewardTables(
        rewards, demo.read("trace_transfer"), demo.read("grades"), traces
    )
    table = selections.teacher_rewards(
        tables, RewardSelection(model), store_reference_teachers(demo)
    ).set_index("teacher")
    mine = rewards[rewards["reward_model"] == model].merge(traces, on="trace_id")
    for teacher, rows in mine.groupby("teacher"):
        assert int(table.loc[teacher, "n_traces"]) == len(rows), teacher
        per_dataset = rows.groupby("dataset")["score"].mean()
        assert table.loc[teacher, "score"] == pytest.approx(float(per_dataset.mean())), teacher
        assert int(table.loc[teacher, "score_datasets"]) == rows["dataset"].nunique()


def test_model_level_correlation_points_use_the_board_values(results: Results) -> None:
    """The correlations' model-level points are the leaderboard's values (one number per name)."""
    from legival_core import views

    board = results.leaderboard().set_index("teacher")
    frame = views.model_level_frame(
        results.table("teacher_metrics"), None, False, results.reference_teachers
    ).set_index("teacher")
    for teacher in board.index.difference(results.reference_teachers):
        assert frame.loc[teacher, "fotu"] == pytest.approx(board.loc[teacher, "fotu"])


def test_the_published_rank_table_is_the_same_under_both_supports() -> None:
    """Every paper teacher covers every dataset, so the papers' table is unchanged."""
    from importlib import resources

    path = resources.files("legival_core") / "data/published/legival_table7_published.csv"
    with path.open() as handle:
        table = pd.read_csv(handle)
    directions = {"tokens": False, "fotu_pct": True, "sotu_pct": True}
    directions = {c: v for c, v in directions.items() if c in table}
    assert directions
    args = {"by": "model", "accuracy": "accuracy_pct"}
    common = rank_table(table, directions, **args)
    every = rank_table(table, directions, support="all", **args)
    pd.testing.assert_frame_equal(common, every)
    columns = ["accuracy_pct", *directions]
    plain = table.groupby("model")[columns].mean()
    got = common.set_index("model")[columns]
    np.testing.assert_allclose(got.loc[plain.index].to_numpy(), plain.to_numpy())


# --- the leaderboard page --------------------------------------------------------------------


def _palm_row(at) -> pd.Series:  # at: an AppTest
    board = at.dataframe[0].value
    return board[board["teacher"].astype(str) == PALM].iloc[0]


@pytest.mark.slow
def test_the_leaderboard_shows_coverage_and_the_support_choice_in_the_url(
    monkeypatch: pytest.MonkeyPatch, demo: Store
) -> None:
    """By default palm's FOTU cell says it rests on 4 of 5 datasets and a caption says what the
    common support is; ``?support=all`` lists it apart, unranked."""
    import streamlit as st

    from legival_core.views.board import APART_MARK
    from tests.app_runner import run_demo_page

    st.cache_data.clear()
    at = run_demo_page("leaderboard", monkeypatch, demo, {"metric": "fotu"})
    row = _palm_row(at)
    assert "· 4/5 datasets" in str(row["FOTU"]), row["FOTU"]
    assert not str(row["FOTU rank"]).startswith(APART_MARK)
    captions = " ".join(c.value for c in at.caption)
    assert "means over datasets" in captions and "champ" in captions, captions
    assert at.sidebar.radio(key="support").value == "common"

    st.cache_data.clear()
    at = run_demo_page("leaderboard", monkeypatch, demo, {"metric": "fotu", "support": "all"})
    assert at.sidebar.radio(key="support").value == "all"
    assert at.query_params.get("support") in ("all", ["all"])
    row = _palm_row(at)
    assert str(row["FOTU rank"]).startswith(APART_MARK), row["FOTU rank"]  # ⇅ may follow
    assert "· 4/5 datasets" in str(row["FOTU"])


def test_the_export_names_its_support_and_the_datasets_behind_each_value(
    results: Results,
) -> None:
    from legival_core.views.board import board_numbers

    board = results.leaderboard(support="all")
    numbers = board_numbers(board, pd.DataFrame(), ["accuracy", "fotu"], "all")
    assert set(numbers["support"]) == {"all"}
    palm = numbers.set_index("teacher").loc[PALM]
    assert (int(palm["fotu_datasets"]), int(palm["fotu_covered"]), int(palm["n_dataset"])) == (
        4,
        4,
        5,
    )
    assert pd.isna(palm["fotu_rank"])


# --- item 2 (part): no interval from one observation -----------------------------------------


def test_the_per_dataset_table_shows_no_interval_from_one_trace(
    monkeypatch: pytest.MonkeyPatch, demo: Store
) -> None:
    """Before: the demo's n = 1 cells showed [0.000–0.000] and [0.060–0.060], a bootstrap of one
    trace; the docs promise "one trace, no interval"."""
    import streamlit as st

    from legival_core.views.board import ONE_OBSERVATION
    from tests.app_runner import run_demo_page

    st.cache_data.clear()
    at = run_demo_page("leaderboard", monkeypatch, demo, {"metric": "fotu", "per_dataset": "on"})
    table = next(f.value for f in at.dataframe if {"lo", "hi", "n"} <= set(f.value.columns))
    one = table[pd.to_numeric(table["n"]) == 1]
    assert len(one), "the demo has a FOTU cell resting on one trace"
    for column in ("lo", "hi"):  # blank, drawn "—"
        assert one[column].map(lambda v: pd.isna(v) or v == "—").all(), one[column]
    assert (one["note"] == ONE_OBSERVATION).all()
    more = table[pd.to_numeric(table["n"]) > 1]
    assert more["lo"].map(lambda v: not pd.isna(v) and v != "—").any()


# --- item 2 (part): an infinite Δlog says what it means --------------------------------------


def test_a_model_without_a_correct_answer_reads_no_correct_answer_not_minus_infinity(
    monkeypatch: pytest.MonkeyPatch, demo: Store
) -> None:
    """Before: palm-2-medium's Δlog E0 on champ-combinatorics (no correct answer, E0 = 0) showed
    "−∞" in the failure-mode table and on the waterfall."""
    import streamlit as st

    from legival_core.views.efficiency import NO_CORRECT_ANSWER
    from tests.app_runner import run_demo_page

    decomposition = demo.read("decomposition")
    zero = decomposition[(decomposition["model"] == PALM) & (decomposition["e0"] == 0)]
    assert len(zero), "the demo has palm-2-medium at E0 = 0 on a benchmark"
    benchmark = str(zero["benchmark"].iloc[0])
    st.cache_data.clear()
    params = {"dataset": benchmark, "teacher": PALM}
    at = run_demo_page("decomposition", monkeypatch, demo, params)
    modes = next(f.value for f in at.dataframe if "failure mode" in f.value.columns)
    palm = modes[modes["model"].astype(str) == PALM]
    assert len(palm)
    # the header a reader can read, with its unit (before: the raw "dlog e0")
    assert (palm["Δlog E0 (log ratio)"] == NO_CORRECT_ANSWER).all(), palm
    assert not any(str(c).startswith("dlog") for c in modes.columns), list(modes.columns)
    shown = " ".join(str(v) for v in modes.to_numpy().ravel())
    assert "∞" not in shown and "inf" not in shown.lower().replace("information", "")
    bars = [c for c in at.get("plotly_chart") if "waterfall_chart" in c.proto.id]
    assert bars and "−∞" not in str(bars[0].proto.spec)
    assert NO_CORRECT_ANSWER in str(bars[0].proto.spec)
