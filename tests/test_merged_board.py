"""Several stores, one board in the live app (issue 27, item 5).

``streamlit run app.py -- --store a=PATH --store b=PATH [--merge] [--prefer a]``: the Leaderboard
shows the union of the launched stores' teacher rows with their store and config; a (teacher,
dataset) that two stores hold is refused with a one-line message unless ``--prefer`` decides it.
Checked with AppTest on small stores built by the real metrics code (tests/app_fixtures.py and
the hand-worked stores of tests/test_publish.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core.store.store import Store
from legival_core.text.safe_text import markdown_literal
from legival_core.views.app_config import BUNDLED_STORES, parse_app_args
from legival_core.views.site_pin import canonical_digest
from tests import app_fixtures
from tests.test_publish import hand_store

APP = str(Path(__file__).resolve().parents[1] / "app.py")
#: run2 renames every teacher of run1 (no clash); run3 keeps gamma-r1 (a clash on both datasets)
RENAMED = {"alpha-mini": "delta-mini", "beta-large": "eps-large", "gamma-r1": "zeta-r1"}
PARTLY = {"alpha-mini": "delta-mini", "beta-large": "eps-large"}


# --- parsing --------------------------------------------------------------------------------


def test_parse_merge_and_prefer_from_arguments() -> None:
    cfg = parse_app_args(["--store", "a=/r/a", "--store", "b=/r/b", "--merge", "--prefer", "b"], {})
    assert cfg.launched == ("a", "b") and cfg.merge and cfg.prefer == "b"
    assert cfg.merge_stores() == {"a": Path("/r/a"), "b": Path("/r/b")}
    plain = parse_app_args(["--store", "a=/r/a", "--store", "b=/r/b"], {})
    assert not plain.merge and plain.prefer is None


def test_parse_merge_and_prefer_from_the_environment() -> None:
    env = {"LEGIVAL_STORE": "a=/r/a:b=/r/b", "LEGIVAL_MERGE": "1", "LEGIVAL_PREFER": "a"}
    cfg = parse_app_args([], env)
    assert cfg.launched == ("a", "b") and cfg.merge and cfg.prefer == "a"
    # the command line wins over the environment, as --store comes after LEGIVAL_STORE
    assert parse_app_args(["--prefer", "b"], env).prefer == "b"
    assert not parse_app_args([], {**env, "LEGIVAL_MERGE": "0"}).merge


def test_a_bundled_store_named_by_path_is_listed_once() -> None:
    # `--store results/demo` used to add the bundled demo a second time as "demo-2"
    relative = (
        BUNDLED_STORES["demo"].relative_to(Path.cwd())
        if BUNDLED_STORES["demo"].is_relative_to(Path.cwd())
        else BUNDLED_STORES["demo"]
    )
    cfg = parse_app_args(["--store", str(relative)], {})
    assert sorted(cfg.stores) == ["demo", "published"]
    assert cfg.launched == ("demo",) and cfg.default == "demo"
    # a different folder with the same base name still gets its own name
    other = parse_app_args(["--store", "/elsewhere/demo"], {})
    assert sorted(other.stores) == ["demo", "demo-2", "published"]


def test_merged_board_needs_two_launched_stores() -> None:
    # the bundled demo and published stores are configured but never merged
    assert parse_app_args([], {}).merge_stores() == {}
    assert parse_app_args(["--store", "a=/r/a"], {}).merge_stores() == {}
    # one name given twice is one store (the later path)
    twice = parse_app_args(["--store", "a=/r/a", "--store", "a=/r/a2"], {})
    assert twice.launched == ("a",) and twice.merge_stores() == {}


# --- the app --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("merged")
    return {
        "run1": app_fixtures.build_store(root / "run1").path,
        "run2": app_fixtures.build_store(root / "run2", names=RENAMED).path,
        "run3": app_fixtures.build_store(root / "run3", names=PARTLY).path,
    }


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hand")
    return {
        "run1": hand_store(root / "run1", {"ace": [100, 110], "bee": [200, 300]}),
        "run2": hand_store(root / "run2", {"bee": [400, 600], "cat": [50, 70]}),
    }


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def run_leaderboard(
    monkeypatch: pytest.MonkeyPatch,
    stores: dict[str, Path],
    *,
    merge: bool = True,
    prefer: str | None = None,
    readonly: bool = False,
) -> AppTest:
    monkeypatch.setenv("LEGIVAL_STORE", ":".join(f"{n}={p}" for n, p in stores.items()))
    for name, on in (("LEGIVAL_MERGE", merge), ("LEGIVAL_READONLY", readonly)):
        if on:
            monkeypatch.setenv(name, "1")
        else:
            monkeypatch.delenv(name, raising=False)
    if prefer is None:
        monkeypatch.delenv("LEGIVAL_PREFER", raising=False)
    else:
        monkeypatch.setenv("LEGIVAL_PREFER", prefer)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def board_of(at: AppTest) -> pd.DataFrame:
    """The merged rank table (the first dataframe: teacher, metric cells, store, config)."""
    return at.dataframe[0].value


def rows_of(at: AppTest) -> pd.DataFrame:
    """The "Rows on this board" table (one row per teacher and dataset)."""
    return next(d.value for d in at.dataframe if "dataset" in d.value.columns)


def config_of(path: Path) -> str:
    return canonical_digest(Store.open(path).manifest["config"])[:12]


@pytest.mark.slow
def test_merged_board_is_the_union_with_store_and_config(
    toy: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    stores = {"run1": toy["run1"], "run2": toy["run2"]}
    at = run_leaderboard(monkeypatch, stores)
    assert not at.error
    board = board_of(at)
    # 3 teachers of run1 + their 3 renamed twins of run2, each with its own store
    origin = dict(zip(board["teacher"], board["store"], strict=True))
    assert origin == {
        **{t: "run1" for t in app_fixtures.TEACHERS},
        **{RENAMED[t]: "run2" for t in app_fixtures.TEACHERS},
    }
    assert set(board["config"]) == {config_of(toy["run1"])}  # one fixture config, one digest
    # every value is the store's own: alpha-mini gets 5 of 6 problems right (one WRONG pair)
    # = 83.3%; its renamed twin in run2 the same. The cell reads "83.3% [lo–hi] …".
    accuracy = dict(zip(board["teacher"], board["Accuracy"], strict=True))
    assert accuracy["alpha-mini"].startswith("83.3%") and accuracy["delta-mini"].startswith("83.3%")
    rows = rows_of(at)
    # 6 teachers × 2 datasets, none dropped
    assert len(rows) == 12
    assert rows.groupby("store").size().to_dict() == {"run1": 6, "run2": 6}
    stored = Store.open(toy["run2"]).read("teacher_metrics")
    assert sorted(rows.loc[rows["store"] == "run2", "teacher"]) == sorted(stored["teacher"])
    assert dict(at.query_params)["board"] == "merged"


@pytest.mark.slow
def test_a_clash_is_refused_in_one_line(
    toy: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    at = run_leaderboard(monkeypatch, {"run1": toy["run1"], "run3": toy["run3"]})
    # gamma-r1 is in both on both datasets; the message names the first pair in run1's rows
    stored = Store.open(toy["run1"]).read("teacher_metrics")
    first = stored.loc[stored["teacher"] == "gamma-r1", "dataset"].iloc[0]
    assert first == "toy-logic"
    assert [e.value for e in at.error] == [
        markdown_literal(
            "teacher 'gamma-r1' on dataset 'toy-logic' is in stores run1 and run3; pass "
            "--prefer run1 or --prefer run3 to choose"
        )
    ]
    assert len(at.dataframe) == 0  # nothing drawn that could be read as the board


def test_prefer_decides_a_clash_and_says_so(
    hand: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    at = run_leaderboard(monkeypatch, hand, prefer="run2")
    assert not at.error
    board = board_of(at).set_index("teacher")
    # bee from run2: (400 + 600) / 2 = 500 tokens (run1's would be (200 + 300) / 2 = 250);
    # ace (100 + 110) / 2 = 105 from run1; cat (50 + 70) / 2 = 60 from run2
    assert board.loc["bee", "Tokens"].startswith("500 ")
    assert board.loc["ace", "Tokens"].startswith("105 ")
    assert board.loc["cat", "Tokens"].startswith("60 ")
    assert board["store"].to_dict() == {"ace": "run1", "bee": "run2", "cat": "run2"}
    # the two hand stores differ in config ({"synthetic": "run1"} vs "run2"): each row says its
    assert board["config"].to_dict() == {
        "ace": config_of(hand["run1"]),
        "bee": config_of(hand["run2"]),
        "cat": config_of(hand["run2"]),
    }
    assert config_of(hand["run1"]) != config_of(hand["run2"])
    rows = rows_of(at)
    assert rows.loc[rows["teacher"] == "bee", "store"].tolist() == ["run2"]
    (note,) = [i.value for i in at.info if "prefer run2" in i.value]
    assert note == markdown_literal(
        "--prefer run2: 1 teacher and dataset pair(s) held by more than one store are shown "
        "from run2: 'bee' on 'hand' (in run1 and run2)."
    )


def test_an_unknown_prefer_is_refused(
    hand: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    at = run_leaderboard(monkeypatch, hand, prefer="run9")
    assert [e.value for e in at.error] == [
        markdown_literal("--prefer run9: no store of that name (stores: run1, run2)")
    ]
    assert len(at.dataframe) == 0


def test_the_switch_is_off_without_merge_and_turns_the_board_on(
    hand: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    at = run_leaderboard(monkeypatch, hand, merge=False, prefer="run2")
    # the first store's own board: ace and bee of run1, no store column
    assert set(at.dataframe[0].value["teacher"]) == {"ace", "bee"}
    assert "store" not in at.dataframe[0].value.columns
    at.toggle(key="merged_board").set_value(True).run()
    assert not at.exception
    assert set(board_of(at)["teacher"]) == {"ace", "bee", "cat"}
    assert dict(at.query_params)["board"] == "merged"
    # ... and back to one store by URL
    at.query_params["board"] = "store"
    at.run()
    assert "store" not in at.dataframe[0].value.columns


def test_one_launched_store_has_no_switch(
    hand: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    at = run_leaderboard(monkeypatch, {"run1": hand["run1"]})
    assert not [t for t in at.toggle if t.key == "merged_board"]
    assert set(at.dataframe[0].value["teacher"]) == {"ace", "bee"}


@pytest.mark.slow
def test_other_pages_show_one_store(toy: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    at = run_leaderboard(monkeypatch, {"run1": toy["run1"], "run2": toy["run2"]})
    at.switch_page("pages/pareto.py").run()
    assert not at.exception, [e.value for e in at.exception]
    names = " ".join(str(d.value.to_dict()) for d in at.dataframe)
    assert "alpha-mini" in names and "delta-mini" not in names  # run1 only


def test_read_only_merged_board_writes_nothing(
    hand: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_readonly import WATCH, _diff, _snapshot

    # importing the app's modules may compile them; Python's bytecode cache is not the app's
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    before = {n: _snapshot(p) for n, p in hand.items()}
    WATCH.writes.clear()
    WATCH.active = True
    try:
        at = run_leaderboard(monkeypatch, hand, prefer="run1", readonly=True)
    finally:
        WATCH.active = False
    assert set(board_of(at)["teacher"]) == {"ace", "bee", "cat"}
    assert WATCH.writes == [], WATCH.writes[:10]
    assert all(_diff(before[n], _snapshot(p)) == [] for n, p in hand.items())


@pytest.mark.slow
def test_prefer_names_a_few_pairs_and_counts_the_rest(
    toy: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same run launched twice: all 3 teachers x 2 datasets = 6 pairs clash; the note names
    # PAIRS_NAMED = 5 of them and counts the 6 - 5 = 1 left.
    at = run_leaderboard(monkeypatch, {"x": toy["run1"], "y": toy["run1"]}, prefer="y")
    assert not at.error
    (note,) = [i.value for i in at.info if "prefer y" in i.value]
    assert note.startswith(markdown_literal("--prefer y: 6 teacher and dataset pair(s)"))
    assert note.count(markdown_literal(" (in x and y)")) == 5
    assert note.endswith(markdown_literal("; and 1 more."))


def test_names_holding_the_unit_separator_are_distinct_pairs() -> None:
    """Rows were matched by teacher + U+001F + dataset, and names may hold U+001F (ingest
    keeps them): teacher "a␟b" on dataset "c" and teacher "a" on "b␟c", in two stores, were
    one clash, refused or (with --prefer) one of them dropped from the board."""
    from legival_core.views.board_merge import clashes, merge_teacher_rows, merged_table

    run1 = pd.DataFrame({"teacher": ["a\x1fb"], "dataset": ["c"], "fotu": [0.1]})
    run2 = pd.DataFrame({"teacher": ["a"], "dataset": ["b\x1fc"], "fotu": [0.2]})
    assert clashes({"run1": run1, "run2": run2}) == []
    board = merge_teacher_rows({"run1": run1, "run2": run2})
    assert board[["teacher", "dataset", "store"]].values.tolist() == [
        ["a\x1fb", "c", "run1"],
        ["a", "b\x1fc", "run2"],
    ]
    traces = pd.DataFrame({"teacher": ["a\x1fb", "a"], "dataset": ["c", "b\x1fc"], "n": [1, 2]})
    table = merged_table({"run1": traces, "run2": traces}, board)
    assert table is not None
    assert table[["teacher", "store", "n"]].values.tolist() == [
        ["a\x1fb", "run1", 1],
        ["a", "run2", 2],
    ]
