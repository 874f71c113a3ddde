"""Issue 42, item 4: the board carries facts about its models, as the boards people use do.

A ``models.csv`` in the store's folder (model, parameters, release_date, open_weights, family,
link; only model required) adds those facts to the leaderboard: shown when chosen under
*More columns*, filterable (family, open weights, parameter range), searchable by name, every
choice in the URL, and carried by the CSV export. A bad row is named (file, line, field) and
left out; the good rows stay. A link other than http(s) never reaches a cell.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st

from legival_core.views import model_info
from legival_core.views.app_config import BUNDLED_STORES
from tests.app_runner import run_app_page


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


# --- the file ------------------------------------------------------------------------------


def test_bad_rows_are_named_and_the_good_rows_kept() -> None:
    text = (
        "model,parameters,release_date,open_weights,family,link,size\n"
        "good-7b,7B,2024-01-02,true,Meta,https://example.org/a\n"
        "bad-count,seven,,,,\n"
        "bad-date,,2024-13-01,,,\n"
        "bad-open,,,maybe,,\n"
        "bad-link,,,,,javascript:alert(1)\n"
        ",1B,,,,\n"
        "good-7b,8B,,,,\n"
        "bare\n"
    )
    info = model_info.parse_models(text, "store/models.csv")
    assert info.frame["model"].tolist() == ["good-7b", "bare"]
    good = info.frame.iloc[0]
    assert (good["parameters"], good["release_date"], bool(good["open_weights"])) == (
        7e9,
        "2024-01-02",
        True,
    )
    assert info.frame.iloc[1][["parameters", "family", "link"]].isna().all()
    assert info.problems == [
        "store/models.csv line 1, field 'size': not a column of models.csv (model, parameters, "
        "release_date, open_weights, family, link); ignored",
        "store/models.csv line 3, field parameters: 'seven' is not a count (a number, "
        "optionally with K, M, B or T); row left out",
        "store/models.csv line 4, field release_date: '2024-13-01' is not a date (YYYY-MM-DD, "
        "YYYY-MM or YYYY); row left out",
        "store/models.csv line 5, field open_weights: 'maybe' is not true or false; row left out",
        "store/models.csv line 6, field link: 'javascript:alert(1)' is not an http or https "
        "address; row left out",
        "store/models.csv line 7, field model: empty; row left out",
        "store/models.csv line 8, field model: 'good-7b' is already on line 2; row left out",
    ]


@pytest.mark.parametrize(
    "link",
    [
        "javascript:alert(1)",
        "JAVASCRIPT:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "//evil.example/x",
        "https://",
        "https://a.example/ x",
        "https://a.example/\u202ex",
        "file:///etc/passwd",
    ],
)
def test_only_http_links_are_kept(link: str) -> None:
    with pytest.raises(ValueError):
        model_info.safe_link(link)


def test_a_store_without_models_csv_has_no_facts_and_no_problem(tmp_path: Path) -> None:
    info = model_info.read_models(tmp_path)
    assert info.empty and info.problems == []
    (tmp_path / "models.csv").write_bytes(b"model\n\xff\xfe\n")
    assert "cannot be read as UTF-8" in model_info.read_models(tmp_path).problems[0]


def test_the_demo_facts_are_public_ones_and_leave_unknowns_empty() -> None:
    """The demo's file holds only facts that are public and sure; no parameter count is
    published for these closed models, so that column stays empty."""
    info = model_info.read_models(BUNDLED_STORES["demo"])
    assert info.problems == []
    facts = info.frame.set_index("model")
    assert set(facts.index) == {"gpt-3.5", "gpt-4", "gpt-4-turbo", "palm-2-medium"}
    assert facts["parameters"].isna().all()
    assert not facts["open_weights"].any()
    assert facts.loc["gpt-4", "family"] == "OpenAI" and facts.loc["palm-2-medium", "family"] == (
        "Google"
    )


def test_the_export_carries_the_facts_of_the_rows_kept() -> None:
    numbers = pd.DataFrame({"teacher": ["a", "b", "c"], "fotu": [0.1, 0.2, 0.3]})
    models = model_info.parse_models("model,parameters,family\na,7B,X\nb,,Y\n").frame
    out = model_info.with_facts(numbers, models, ["a", "c"])
    assert out["teacher"].tolist() == ["a", "c"]
    assert out.columns.tolist() == ["teacher", "fotu", *model_info.MODEL_COLUMNS[1:]]
    assert out.loc[0, "parameters"] == 7e9 and out.loc[0, "family"] == "X"
    assert out.loc[1, ["parameters", "family"]].isna().all()


# --- the page ------------------------------------------------------------------------------


def grid(at) -> pd.DataFrame:  # the rank table: the first grid
    return at.dataframe[0].value


@pytest.mark.slow
def test_the_demo_board_shows_filters_and_searches_the_facts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    demo = BUNDLED_STORES["demo"]
    at = run_app_page(
        "leaderboard",
        monkeypatch,
        [demo],
        {"columns": ["fotu_before_leak", "family", "open_weights", "release_date", "link"]},
        timeout=300,
    )
    shown = grid(at).set_index("teacher")
    assert shown.columns[:4].tolist() == ["Released", "Open weights", "Family", "Link"]
    assert shown.loc["gpt-4", "Family"] == "OpenAI" and shown.loc["gpt-4", "Open weights"] == "no"
    assert shown.loc["gpt-4", "Released"] == "2023-03-14"
    assert shown.loc["palm-2-medium", "Link"] == "https://arxiv.org/abs/2305.10403"
    assert shown.loc["human", "Family"] == "—"  # models.csv says nothing of the human
    assert shown.loc["gpt-3.5", "Released"] == "—" and shown.loc["gpt-3.5", "Link"] == ""
    config = json.loads(at.dataframe[0].proto.columns)
    assert config["Link"]["type_config"]["type"] == "link"

    # filter on a fact: the family, kept in the URL; ranks stay those of every teacher
    next(m for m in at.multiselect if m.label == "Family").set_value(["Google"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert grid(at)["teacher"].tolist() == ["palm-2-medium"]
    assert at.query_params["family"] in ("Google", ["Google"])
    assert any("Showing 1 of 5 teachers" in c.value for c in at.caption)

    # search by name, from a link
    again = run_app_page(
        "leaderboard", monkeypatch, [demo], {"search": "GPT-4", "open_weights": "closed"}
    )
    assert sorted(grid(again)["teacher"]) == ["gpt-4", "gpt-4-turbo"]
    assert next(t for t in again.text_input if t.label == "Search teachers").value == "GPT-4"
    assert again.query_params["open_weights"] == "closed"
    # open weights: no demo model has them, and the unknown (human) is left out too
    opened = run_app_page("leaderboard", monkeypatch, [demo], {"open_weights": "open"})
    assert grid(opened).empty


@pytest.mark.slow
def test_a_bad_models_csv_row_is_named_on_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page says which line and field of models.csv it left out, shows the rest, and a
    parameter range filters on the counts."""
    from tests.app_fixtures import build_store

    store = build_store(tmp_path / "toy")
    teachers = sorted(set(store.read("teacher_metrics")["teacher"].astype(str)))
    assert len(teachers) >= 2
    rows = [f"{teachers[0]},7B,,true,Fam <b>x</b>,https://example.org/{teachers[0]}"]
    rows += [f"{teachers[1]},70B,,false,Other,javascript:alert(1)"]
    (store.path / "models.csv").write_text(
        "model,parameters,release_date,open_weights,family,link\n" + "\n".join(rows) + "\n",
        encoding="utf-8",
    )
    at = run_app_page(
        "leaderboard",
        monkeypatch,
        [store.path],
        {"columns": ["family", "parameters", "link"], "params_min": "1B"},
    )
    from legival_core.text.safe_text import markdown_literal

    warnings = " ".join(w.value for w in at.warning)
    assert markdown_literal("models.csv line 3, field link: 'javascript:") in warnings, warnings
    shown = grid(at).set_index("teacher")
    assert shown.index.tolist() == [teachers[0]]  # the other has no known count left
    assert shown.loc[teachers[0], "Parameters"] == "7B"
    assert shown.loc[teachers[0], "Family"] == "Fam <b>x</b>"  # text in a grid cell, not markup
    assert not [c for c in grid(at).to_numpy().ravel() if "javascript" in str(c)]
    bigger = run_app_page("leaderboard", monkeypatch, [store.path], {"params_min": "100B"})
    assert grid(bigger).empty
    wrong = run_app_page("leaderboard", monkeypatch, [store.path], {"params_max": "lots"})
    assert any("Parameters up to" in i.value for i in wrong.info)
    assert len(grid(wrong)) == len(teachers)


def test_the_demo_store_folder_keeps_models_csv_out_of_the_checks(tmp_path: Path) -> None:
    """A models.csv in a store folder is not a table: verifying the store does not flag it."""
    from legival_core.store.store import Store

    copy = tmp_path / "demo"
    shutil.copytree(BUNDLED_STORES["demo"], copy)
    problems = Store.open(copy).verify()
    assert not [p for p in problems if "models.csv" in str(p)], problems
