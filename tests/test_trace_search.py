"""Finding traces (issue 42, item 2): metric thresholds, correct/wrong, rollouts and leak
filters, sorting, and a full-text search bounded in characters and time, the same in the
inspector's URL and in ``lv.open(path).traces(...)``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st

import legival_core as lv
from legival_core.store.schema import trace_id_for
from legival_core.store.store import Store
from legival_core.text.safe_text import markdown_literal
from legival_core.views import trace_search
from legival_core.views.trace_search import (
    TraceQuery,
    filter_traces,
    parse_range,
    parse_where,
    search_text,
)
from precompute.cli import EXIT_OK, main
from tests import app_fixtures
from tests.app_runner import run_app_page


def listing() -> pd.DataFrame:
    """Four traces with hand-set metrics (the columns of views.trace_search.trace_metrics)."""
    return pd.DataFrame(
        {
            "trace_id": ["a", "b", "c", "d"],
            "teacher": ["T", "T", "U", "U"],
            "problem_id": ["p", "q", "p", "q"],
            "correct": pd.array([True, True, False, pd.NA], dtype="boolean"),
            "m": pd.array([3, 10, 5, 8], dtype="Int64"),
            "tokens": [30, 100, 50, 80],
            "fotu": [0.0, 0.4, np.nan, 0.2],
            "fotu_before_leak": [0.0, 0.1, np.nan, 0.0],
            "leak_k": pd.array([2, 4, pd.NA, 6], dtype="Int64"),
            "rollouts": [True, True, False, True],
            "redundancy": [0.5, 0.1, 0.35, np.nan],
            "backtracking": [0.0, 0.2, 0.4, 0.25],
            "backtracks": [0.0, 2.0, 2.0, 2.0],
            "top_share": [np.nan, 0.3, np.nan, 0.5],
        }
    )


def kept(query: TraceQuery) -> list[str]:
    return filter_traces(listing(), query)["trace_id"].tolist()


def test_thresholds_flags_and_sort_by_hand() -> None:
    # redundancy > 30%: a (0.5) and c (0.35); d has no value and is dropped by the threshold
    assert kept(TraceQuery(ranges=parse_where("redundancy>0.3"))) == ["a", "c"]
    # backtracking >= 2 steps, correct: b only (c is wrong, d ungraded)
    assert kept(TraceQuery(ranges={"backtracks": (2, None)}, correct=True)) == ["b"]
    # "FOTU = 0 but correct": a
    assert kept(TraceQuery(ranges=parse_where("fotu=0"), correct=True)) == ["a"]
    assert kept(TraceQuery(correct=False)) == ["c"]
    assert kept(TraceQuery(rollouts=False)) == ["c"]
    # leaks: a, b, d; never: c; solved before the leak: b; only after it: d (a never solved)
    assert kept(TraceQuery(leak="leaks")) == ["a", "b", "d"]
    assert kept(TraceQuery(leak="no-leak")) == ["c"]
    assert kept(TraceQuery(leak="solved-before")) == ["b"]
    assert kept(TraceQuery(leak="only-after")) == ["d"]
    # sorted by top share, highest first, missing values last
    assert kept(TraceQuery(sort="top_share", descending=True)) == ["d", "b", "a", "c"]
    assert kept(TraceQuery(ranges={"m": (4, 9)}, sort="tokens")) == ["c", "d"]


def test_strict_bounds_and_bad_thresholds() -> None:
    low, high = parse_range(">0.3")
    assert low is not None and low > 0.3 and high is None and math.isclose(low, 0.3)
    assert parse_range("1..5") == (1.0, 5.0) and parse_range("<=5") == (None, 5.0)
    for bad in ("redundancy>>0.3", "colour>1", "redundancy", ">0.3"):
        with pytest.raises(ValueError, match=r"threshold"):
            parse_where(bad)
    with pytest.raises(ValueError, match="leak filter"):
        TraceQuery(leak="sometimes")
    with pytest.raises(ValueError, match="at most 200"):
        TraceQuery(text="a" * 201, regex=True)
    with pytest.raises(ValueError, match="cannot sort"):
        filter_traces(listing(), TraceQuery(sort="colour"))


@pytest.fixture
def text_store(tmp_path: Path) -> Store:
    """Three traces ingested from JSONL: one about apples, one whose reasoning is 20,000 a's
    then a b (a catastrophic pattern's worst case), one with a hostile answer."""
    rows = [
        {"problem_id": "p1", "prompt": "Count.", "reasoning": "Two apples and three pears.",
         "answer": "5"},
        {"problem_id": "p2", "prompt": "Say.", "reasoning": "a" * 20_000 + "b", "answer": "a"},
        {"problem_id": "p3", "prompt": "Show.", "reasoning": "Nothing here.",
         "answer": "<script>alert(1)</script> APPLES"},
    ]  # fmt: skip
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    store = tmp_path / "store"
    assert main(["ingest", str(path), "--store", str(store), "--teacher", "t"]) == EXIT_OK
    return Store.open(store)


def ids(store: Store) -> dict[str, str]:
    traces = store.read("traces", columns=["trace_id", "problem_id"])
    # the ingest names a problem <dataset>/<id>
    problems = traces["problem_id"].str.rsplit("/", n=1).str[-1]
    return dict(zip(problems, traces["trace_id"], strict=True))


def test_substring_and_regex_search_in_reasoning_and_answers(text_store: Store) -> None:
    by_problem = ids(text_store)
    order = [by_problem[p] for p in ("p1", "p2", "p3")]
    found = search_text(text_store, order, TraceQuery(text="apples"))
    assert found.trace_ids == [by_problem["p1"], by_problem["p3"]] and found.complete
    found = search_text(text_store, order, TraceQuery(text="apples", field="reasoning"))
    assert found.trace_ids == [by_problem["p1"]]
    found = search_text(text_store, order, TraceQuery(text="<script>", field="answer"))
    assert found.trace_ids == [by_problem["p3"]]
    found = search_text(text_store, order, TraceQuery(text=r"\bthree\s+pears", regex=True))
    assert found.trace_ids == [by_problem["p1"]]
    # a regex special character in a substring search is a character
    assert search_text(text_store, order, TraceQuery(text="(1)")).trace_ids == [by_problem["p3"]]
    with pytest.raises(ValueError, match="does not compile"):
        search_text(text_store, order, TraceQuery(text="(unclosed", regex=True))


def test_a_catastrophic_regex_stops_at_the_time_limit(
    text_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(a+)+$ on 20,000 a's then a b backtracks for ever in Python's re; here the search stops
    at its time limit (made short for the test) and says so."""
    monkeypatch.setattr(trace_search, "SEARCH_SECONDS", 0.5)
    by_problem = ids(text_store)
    order = [by_problem[p] for p in ("p1", "p2", "p3")]
    found = search_text(text_store, order, TraceQuery(text=r"(a+)+$", regex=True))
    assert found.stopped_by == "time limit" and not found.complete
    assert found.searched == 1 and "stopped at its time limit" in found.summary()


def test_the_character_budget_stops_a_long_search(
    text_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace_search, "SEARCH_CHARS", 1_000)
    by_problem = ids(text_store)
    order = [by_problem[p] for p in ("p1", "p2", "p3")]
    found = search_text(text_store, order, TraceQuery(text="nothing"))
    assert found.stopped_by == "character budget" and found.searched == 1
    assert found.trace_ids == []


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.mark.slow
def test_the_page_and_the_notebook_keep_the_same_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The filters in the inspector's URL and the same ones in lv.open(...).traces(...)."""
    store = app_fixtures.build_store(tmp_path / "store")
    params = {"q": "alert", "where": "m>=3", "correct": "yes", "sort": "tokens", "desc": "on"}
    at = run_app_page("inspector", monkeypatch, [store.path], params, timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    expected = lv.open(store.path).traces(
        "alert", where={"m": ">=3"}, correct=True, sort="tokens", descending=True
    )
    assert table["problem"].tolist() == expected["problem_id"].tolist()
    assert expected["trace_id"].tolist() == [trace_id_for(*app_fixtures.XSS_TRACE)]
    assert any("1 traces match (all" in c.value for c in at.caption)
    # the filters stay in the URL, so the filtered view is a link
    assert {k: at.query_params[k] for k in params} == params
    # a wrong threshold is a warning, and the list stays whole
    at = run_app_page("inspector", monkeypatch, [store.path], {"where": "colour>1"})
    assert not at.exception
    said = markdown_literal("no threshold on 'colour'")
    assert any(said in w.value for w in at.warning), [w.value for w in at.warning]


def test_without_the_regex_package_a_plain_search_still_works(
    text_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hosted app's lighter requirements have no ``regex``: the plain search needs none,
    a regex search says what to install."""
    monkeypatch.setitem(__import__("sys").modules, "regex", None)
    by_problem = ids(text_store)
    order = [by_problem[p] for p in ("p1", "p2", "p3")]
    assert search_text(text_store, order, TraceQuery(text="PEARS")).trace_ids == [by_problem["p1"]]
    with pytest.raises(ValueError, match="pip install regex"):
        search_text(text_store, order, TraceQuery(text="pears", regex=True))
