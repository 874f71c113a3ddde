"""AppTest checks of the "Reward models" and "Monitoring" pages against
legival_core.oversight.oversight.

The store is the app's toy store (tests/app_fixtures.py) plus oversight tables written here:
reward scores that are a fixed function of each trace, sabotaged copies (the real sabotage
injections where a trace offers a place, else a fixture rewrite whose edits come from the
stage's own character diff), and verdicts of a made-up monitor whose skill differs by
teacher. Every number the pages show is compared with the oversight function run on the same
tables.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core.oversight import oversight
from legival_core.store.schema import trace_id_for
from legival_core.store.store import Store
from tests import app_fixtures

# Slow: the store with the oversight tables is built by the real code (about 20 s), and each
# test runs a page on it.
pytestmark = pytest.mark.slow
PAGES = Path(__file__).resolve().parents[1] / "pages"
XSS_ID = trace_id_for(*app_fixtures.XSS_TRACE)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Store]:
    root = tmp_path_factory.mktemp("oversight_pages")
    plain = app_fixtures.build_store(root / "plain")
    shutil.copytree(plain.path, root / "full")
    full = Store.open(root / "full")
    app_fixtures.add_oversight_tables(full)
    return {"plain": plain, "full": full}


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def run_page(
    page: str, monkeypatch: pytest.MonkeyPatch, store: Store, params: dict[str, str] | None = None
) -> AppTest:
    monkeypatch.setenv("LEGIVAL_STORE", str(store.path))
    at = AppTest.from_file(str(PAGES / f"{page}.py"), default_timeout=60)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metric_values(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def check_headlines(at: AppTest, here: pd.DataFrame, points: pd.DataFrame) -> None:
    """Each ρ(FOTU, score) is a headline metric equal to the stored ρ where the headline rule
    (:func:`legival_core.views.monitoring.headline_blocker`) allows one, else a line saying
    why and no metric."""
    from legival_core.views.monitoring import headline_blocker

    values = metric_values(at)
    texts = [m.value for m in at.markdown]
    for measure in ("precision", "recall", "f1"):
        rho = here.loc[measure, "rho"]
        reason = headline_blocker(points["fotu"], points[measure], measure)
        if reason is None:
            assert values[f"ρ(FOTU, {measure})"] == ("n/a" if pd.isna(rho) else f"{rho:+.3f}")
        else:
            assert f"ρ(FOTU, {measure})" not in values
            assert f"**ρ(FOTU, {measure})** not shown: {reason}." in texts


def figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


# ---------------------------------------------------------------------------------- reward page


def test_reward_page_shows_the_oversight_rhos(monkeypatch: pytest.MonkeyPatch, stores) -> None:
    store = stores["full"]
    at = run_page("rewards", monkeypatch, store)
    rewards = store.read("rewards")
    rewards = rewards[rewards["reward_model"] == "rm-a"]
    transfer, grades = store.read("trace_transfer"), store.read("grades")
    every = oversight.reward_correlations(rewards, transfer, grades)
    correct = oversight.reward_correlations(rewards, transfer, grades, correct_only=True)
    shown = metric_values(at)
    expected_all = every.loc[every.metric == "fotu", "rho"].item()
    expected_correct = correct.loc[correct.metric == "fotu", "rho"].item()
    assert shown["ρ(reward, FOTU), all traces"] == f"{expected_all:+.3f}"
    assert shown["ρ(reward, FOTU), correct traces only"] == f"{expected_correct:+.3f}"
    # The scatter holds one point per trace with a reward and a transfer row.
    points = oversight.trace_level_rewards(rewards, transfer, grades)
    scatter = figures(at)[0]
    assert sum(len(t["customdata"]) for t in scatter["data"]) == len(points)
    assert f"ρ = {expected_all:+.3f}" in scatter["layout"]["title"]["text"]
    # Teacher-level table and CSV export.
    teachers = oversight.teacher_level_rewards(
        rewards, transfer, grades, traces=store.read("traces")
    )
    table = at.dataframe[0].value.set_index("teacher")
    for row in teachers.itertuples():
        assert table.loc[row.teacher, "score"] == pytest.approx(row.score)
        assert table.loc[row.teacher, "FOTU"] == pytest.approx(row.fotu)
    assert any(b.label == "Download CSV" for b in at.get("download_button"))
    # the ρ table names each metric as the other pages do, not by its field name
    rho = next(d.value for d in at.dataframe if "level" in d.value.columns)
    assert "FOTU" in set(rho["metric"]) and not set(rho["metric"]) & {"fotu", "regression_rate"}


def test_reward_page_follows_the_url(monkeypatch: pytest.MonkeyPatch, stores) -> None:
    store = stores["full"]
    at = run_page(
        "rewards", monkeypatch, store, {"rm": "rm-b", "subset": "correct", "dataset": "toy-math"}
    )
    rewards = store.read("rewards")
    transfer = store.read("trace_transfer")
    traces = store.read("traces")
    math_ids = set(traces.loc[traces["dataset"] == "toy-math", "trace_id"])
    correct = oversight.reward_correlations(
        rewards[(rewards["reward_model"] == "rm-b") & rewards["trace_id"].isin(math_ids)],
        transfer[transfer["dataset"] == "toy-math"],
        store.read("grades"),
        correct_only=True,
    )
    value = correct.loc[correct.metric == "fotu", "rho"].item()
    assert metric_values(at)["ρ(reward, FOTU), correct traces only"] == f"{value:+.3f}"
    title = figures(at)[0]["layout"]["title"]["text"]
    assert "correct traces only" in title and f"{value:+.3f}" in title
    assert at.query_params["rm"] == ["rm-b"] or at.query_params["rm"] == "rm-b"


def test_reward_page_labels_the_release_trace_score(
    monkeypatch: pytest.MonkeyPatch, stores, tmp_path: Path
) -> None:
    # A store whose metrics stage ran with profile "release": its trace_transfer "fotu" is the
    # release's trace score (the release has no per-trace FOTU), and the page says so.
    shutil.copytree(stores["full"].path, tmp_path / "release")
    store = Store.open(tmp_path / "release")
    from precompute.stages.metrics import transfer_table

    release = transfer_table(store.read("rollouts"), "release", "interpolate")
    store.write("trace_transfer", release, stage="metrics")
    store.record_stage("metrics", profile="release")
    at = run_page("rewards", monkeypatch, store)
    shown = metric_values(at)
    assert "ρ(reward, Trace score (release)), all traces" in shown
    assert not any("FOTU" in label for label in shown)
    assert any("no per-trace FOTU" in c.value for c in at.caption)
    assert "Trace score (release)" in figures(at)[0]["layout"]["yaxis"]["title"]["text"]


def test_reward_page_without_rewards_says_so(monkeypatch: pytest.MonkeyPatch, stores) -> None:
    at = run_page("rewards", monkeypatch, stores["plain"])
    assert any("no reward scores yet" in i.value for i in at.info)
    assert not at.get("plotly_chart")


# ------------------------------------------------------------------------------ monitoring page


def test_monitoring_page_matches_the_scores(monkeypatch: pytest.MonkeyPatch, stores) -> None:
    store = stores["full"]
    at = run_page("monitoring", monkeypatch, store, {"dataset": "toy-math"})
    scores = oversight.monitor_scores(store.read("monitor_verdicts"), n_boot=500, seed=0)
    legibility = oversight.monitor_legibility_correlation(scores, store.read("teacher_metrics"))
    # Default negatives: the pooled sabotage set.
    view = scores[(scores.dataset == "toy-math") & (scores.negative_type == "sabotage")]
    shown = at.dataframe[0].value.set_index("teacher")

    def text(value: float) -> str:  # the page writes an undefined score as "n/a"
        return "n/a" if pd.isna(value) else f"{value:.3f}"

    def same(cell: object, value: float) -> bool:
        return cell == text(value) if isinstance(cell, str) else cell == pytest.approx(value)

    for row in view.itertuples():
        assert same(shown.loc[row.teacher, "precision"], row.precision)
        assert same(shown.loc[row.teacher, "recall"], row.recall)
    # alpha-mini's monitor is perfect by construction; beta-large's calls everything invalid.
    assert same(shown.loc["alpha-mini", "precision"], 1.0)
    assert same(shown.loc["alpha-mini", "recall"], 1.0)
    assert same(shown.loc["beta-large", "recall"], 1.0)
    beta = view.set_index("teacher").loc["beta-large", "precision"]
    assert beta < 1 and same(shown.loc["beta-large", "precision"], beta)
    here = legibility[
        (legibility.dataset == "toy-math") & (legibility.negative_type == "sabotage")
    ].set_index("measure")
    points = oversight.monitor_legibility_points(scores, store.read("teacher_metrics"))
    check_headlines(
        at, here, points[(points.dataset == "toy-math") & (points.negative_type == "sabotage")]
    )
    bars = figures(at)[0]
    assert [t["name"] for t in bars["data"]] == [
        "precision (Wilson 95%)", "recall (Wilson 95%)", "F1 (bootstrap 95%)"
    ]  # fmt: skip


def test_monitoring_page_pools_all_datasets(monkeypatch: pytest.MonkeyPatch, stores) -> None:
    """ "All" is the first dataset choice, as on every page: the scores of every verdict of a
    teacher, whatever its dataset, and the ρ of the pooled row (teachers averaged over
    datasets first), each n given."""
    store = stores["full"]
    verdicts = store.read("monitor_verdicts")
    assert verdicts["dataset"].nunique() > 1  # the check pools something
    at = run_page("monitoring", monkeypatch, store)
    choice = next(box for box in at.selectbox if box.label == "Dataset")
    assert choice.options[0] == "All" and choice.value == "All"
    pooled = oversight.monitor_scores(verdicts.assign(dataset="All"), n_boot=500, seed=0)
    view = pooled[pooled.negative_type == "sabotage"].set_index("teacher")
    shown = at.dataframe[0].value.set_index("teacher")
    for teacher, row in view.iterrows():
        assert shown.loc[teacher, "n valid"] == row["n_valid"]
        # every header a readable name (issue 39): the verdict counts written out
        assert shown.loc[teacher, "true positives"] == row["tp"]
        assert shown.loc[teacher, "false negatives"] == row["fn"]
        assert "F1 95%" in shown.columns and "tp" not in shown.columns
        cell = shown.loc[teacher, "precision"]
        assert cell == ("n/a" if pd.isna(row["precision"]) else pytest.approx(row["precision"]))
    scores = oversight.monitor_scores(verdicts, n_boot=500, seed=0)
    legibility = oversight.monitor_legibility_correlation(scores, store.read("teacher_metrics"))
    here = legibility[
        (legibility.dataset == oversight.POOLED_DATASETS) & (legibility.negative_type == "sabotage")
    ].set_index("measure")
    points = oversight.monitor_legibility_points(scores, store.read("teacher_metrics"))
    check_headlines(
        at,
        here,
        points[
            (points.dataset == oversight.POOLED_DATASETS) & (points.negative_type == "sabotage")
        ],
    )
    captions = " ".join(c.value for c in at.caption)
    assert f"n = {int(here.loc['precision', 'n'])} teachers" in captions


def test_monitoring_page_highlights_a_sabotage_safely(
    monkeypatch: pytest.MonkeyPatch, stores
) -> None:
    store = stores["full"]
    at = run_page(
        "monitoring",
        monkeypatch,
        store,
        {"dataset": "toy-math", "kind": "number", "trace": XSS_ID},
    )
    blocks = [h.proto.body for h in at.get("html")]
    markup = "\n".join(blocks)
    assert '<del class="lv-old">' in markup and '<mark class="lv-new">' in markup
    assert "<script>" not in markup and "<img" not in markup
    assert "&lt;script&gt;alert(" in markup
    record = store.read("sabotaged", filters={"trace_id": XSS_ID, "kind": "number"}).iloc[0]
    texts = [t.value for t in at.text]
    assert f"What changed: {record['description']}" in texts
    assert any(t.startswith("Monitor: ") for t in texts)


def test_monitoring_page_without_verdicts_says_so(monkeypatch: pytest.MonkeyPatch, stores) -> None:
    at = run_page("monitoring", monkeypatch, stores["plain"])
    assert any("no monitor verdicts yet" in i.value for i in at.info)


def test_monitoring_page_keeps_the_reference_teacher_out_of_the_comparison(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the demo with dataset "All", the human reference teacher is drawn as a grey outline
    labelled "reference (not compared)", never as an ordinary coloured bar beside the models."""
    from legival_core.published.references import store_reference_teachers
    from legival_core.views.app_config import BUNDLED_STORES
    from tests.app_runner import run_app_page

    demo = Store.open(BUNDLED_STORES["demo"])
    references = set(store_reference_teachers(demo))
    assert "human" in references  # the check has a reference to keep apart
    at = run_app_page("monitoring", monkeypatch, [demo.path], timeout=300)
    assert next(box for box in at.selectbox if box.label == "Dataset").value == "All"
    bars = figures(at)[0]
    for trace in bars["data"]:
        labels = list(trace["x"])
        fills = trace["marker"]["color"]
        assert isinstance(fills, list) and len(fills) == len(labels), trace["name"]
        marked = [i for i, x in enumerate(labels) if "reference (not compared)" in x]
        assert [labels[i].split(" · ")[0] for i in marked] == ["human"], labels
        for i, fill in enumerate(fills):
            if i in marked:
                assert fill == "rgba(0,0,0,0)", (trace["name"], labels[i])
            else:
                assert fill != "rgba(0,0,0,0)", (trace["name"], labels[i])
    captions = " ".join(c.value for c in at.caption)
    assert "reference (not compared)" in captions
