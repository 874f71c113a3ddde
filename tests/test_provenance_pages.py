"""Provenance on screen (issue 13, item 6), AppTest.

* The Reward models page warns when the reward model is a stand-in, read from the manifest,
  and never shows the paper's |ρ| ≤ 0.2 beside a stand-in's ρ without that warning.
* The efficiency decomposition page, the leaderboard and the inspector say what the token
  counts are, from the same provenance (legival_core.store.provenance.token_sources).

Stores: the bundled demo (CHAMP recorded traces, the stand-in reward model) and copies of the
app's toy store with provenance records written the way the stages write them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core.store.provenance import TOKEN_KINDS
from legival_core.store.store import Store
from tests import app_fixtures

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "pages"
DEMO = ROOT / "results" / "demo"
PAPER = "|ρ| ≤ 0.2"


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("provenance_pages")
    store = app_fixtures.build_store(root / "toy")
    app_fixtures.add_oversight_tables(store)
    return store.path


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def _copy(toy: Path, tmp_path: Path) -> Store:
    shutil.copytree(toy, tmp_path / "copy")
    return Store.open(tmp_path / "copy")


def run_page(page: str, monkeypatch: pytest.MonkeyPatch, store: Path) -> AppTest:
    monkeypatch.setenv("LEGIVAL_STORE", str(store))
    at = AppTest.from_file(str(PAGES / f"{page}.py"), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest, kind: str) -> list[str]:
    """The elements' text as shown: store text is backslash-escaped Markdown (safe_text), so
    the escapes are dropped before comparing."""
    return [str(element.value).replace("\\", "") for element in getattr(at, kind)]


def test_reward_page_warns_about_the_demo_standin(monkeypatch: pytest.MonkeyPatch) -> None:
    at = run_page("rewards", monkeypatch, DEMO)
    warnings = texts(at, "warning")
    assert len(warnings) == 1 and "Stand-in reward model" in warnings[0]
    assert "untrained" in warnings[0]
    # The paper's figure appears only inside that warning, never as a bare caption.
    assert not any(PAPER in caption for caption in texts(at, "caption"))


@pytest.mark.slow
def test_reward_page_quotes_the_paper_for_a_real_model_and_warns_for_a_recorded_standin(
    monkeypatch: pytest.MonkeyPatch, toy: Path, tmp_path: Path
) -> None:
    store = _copy(toy, tmp_path)
    store.record_stage("reward", models={"rm-a": {"model": "org/some-reward-model"}})
    at = run_page("rewards", monkeypatch, store.path)
    assert not texts(at, "warning")
    assert any(PAPER in caption for caption in texts(at, "caption"))

    store.record_stage(
        "reward", models={"rm-a": {"model": "/m/rm-a", "standin": "a seeded untrained head"}}
    )
    st.cache_data.clear()
    at = run_page("rewards", monkeypatch, store.path)
    warnings = texts(at, "warning")
    assert len(warnings) == 1 and "seeded untrained head" in warnings[0]
    assert not any(PAPER in caption for caption in texts(at, "caption"))


@pytest.mark.slow
def test_decomposition_and_leaderboard_say_the_demo_counts_recorded_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = run_page("decomposition", monkeypatch, DEMO)
    captions = " ".join(texts(at, "caption"))
    assert "tiktoken count of the recorded text" in captions
    assert "own generated tokens" not in captions
    # the E0 bar chart's E[T] hover label
    assert any(
        "E[T] (a tiktoken count of the recorded text" in f.proto.spec
        for f in at.get("plotly_chart")
    )
    at = run_page("leaderboard", monkeypatch, DEMO)
    captions = " ".join(texts(at, "caption"))
    assert "Tokens: tiktoken cl100k_base count of the reasoning text" in captions
    assert (
        "E[T] on the Efficiency decomposition page: a tiktoken count of the recorded text"
        in captions
    )


@pytest.mark.slow
def test_decomposition_page_labels_generated_and_warns_when_mixed(
    monkeypatch: pytest.MonkeyPatch, toy: Path, tmp_path: Path
) -> None:
    store = _copy(toy, tmp_path)
    teachers = sorted(app_fixtures.TEACHERS)
    store.record_stage("generate", models={t: {"engine": "vllm"} for t in teachers})
    at = run_page("decomposition", monkeypatch, store.path)
    assert any(TOKEN_KINDS["generated"] in c for c in texts(at, "caption"))
    assert not texts(at, "warning")
    # One teacher's traces replaced by an ingest without token counts: the sources differ.
    store.record_stage("ingest", teacher=teachers[0], tokens={"given": 0, "counted": 3})
    st.cache_data.clear()
    at = run_page("decomposition", monkeypatch, store.path)
    assert any("mixed" in c for c in texts(at, "caption"))
    assert any("not on one scale" in w for w in texts(at, "warning"))


def test_inspector_says_what_a_traces_tokens_count(monkeypatch: pytest.MonkeyPatch) -> None:
    at = run_page("inspector", monkeypatch, DEMO)
    tokens = next(m for m in at.metric if m.label == "Tokens")
    assert str(tokens.proto.help).replace("\\", "") == "T of this trace: " + TOKEN_KINDS["counted"]


def test_pareto_page_says_what_its_token_axis_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    at = run_page("pareto", monkeypatch, DEMO)  # x axis: tokens by default
    captions = " ".join(texts(at, "caption"))
    assert "Tokens: tiktoken cl100k_base count of the reasoning text" in captions
