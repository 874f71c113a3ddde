"""The slow pages' default results, stored by the metrics stage (issue 28 item 2).

A copy of the bundled demo store goes through the real ``metrics`` stage, which writes
``page_results``. The leaderboard, monitoring, reward-model, transfer, robustness, Pareto,
redundancy and decomposition pages must then open
their default view without computing what was stored (the computing functions are replaced by
ones that fail), show the same numbers as the functions give on the store's tables, fall back
to computing for another selection, and never use a row whose inputs were written since.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st

from legival_core import views
from legival_core.metrics import leak_summary as leak_module
from legival_core.metrics import page_results, redundancy_sweep_view
from legival_core.metrics.page_results import (
    DecompositionSelection,
    MonitorSelection,
    RewardSelection,
    TransferSelection,
    stored_frame,
)
from legival_core.oversight import oversight
from legival_core.rankings import rank_intervals, robustness_choices
from legival_core.store.store import Store
from tests.app_runner import run_app_page

# Slow: nearly every test reads the demo store after a real metrics stage run (a minute on
# two cores) and opens the pages on it.
pytestmark = pytest.mark.slow
DEMO = Path(__file__).resolve().parents[1] / "results" / "demo"
#: The functions behind the stored results (what a page computes when nothing is stored).
COMPUTING = (
    (rank_intervals, "resample_teachers"),
    (rank_intervals, "interval_table"),
    (oversight, "monitor_scores"),
    (oversight, "monitor_legibility_correlation"),
    (views, "workload_audits"),
    (oversight, "reward_correlations"),
    (oversight, "teacher_level_rewards"),
    (oversight, "trace_level_rewards"),
    (leak_module, "leak_summary"),
    (robustness_choices, "robustness_report"),
    (redundancy_sweep_view, "teacher_redundancy_sweep"),
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The demo store after one real ``metrics`` stage run (about 10 s)."""
    from precompute.demo import DemoOptions, demo_config
    from precompute.stages import StageContext, run_stage

    path = tmp_path_factory.mktemp("page_results") / "demo"
    shutil.copytree(DEMO, path)
    opened = Store.open(path)
    run_stage(
        "metrics", StageContext(store=opened, config=demo_config(DemoOptions()), progress=False)
    )
    return opened


@pytest.fixture(autouse=True)
def _clear_caches() -> Iterator[None]:
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def _forbid_computing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replace every computing function by one that records its call and fails."""
    calls: list[str] = []
    for module, name in COMPUTING:

        def fail(*args: object, _name: str = name, **kwargs: object) -> object:
            calls.append(_name)
            raise AssertionError(f"{_name} computed although the stage stored it")

        monkeypatch.setattr(module, name, fail)
    return calls


def _spy_computing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Wrap every computing function so that its calls are recorded (it still computes)."""
    calls: list[str] = []
    for module, name in COMPUTING:
        real = getattr(module, name)

        def spy(*args: object, _name: str = name, _real=real, **kwargs: object) -> object:
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)
    return calls


def _tables(at) -> list[pd.DataFrame]:
    return [frame.value for frame in at.dataframe]


#: The pages whose default view the metrics stage stores.
PAGES = (
    "leaderboard",
    "monitoring",
    "rewards",
    "transfer",
    "robustness",
    "pareto",
    "redundancy",
    "decomposition",
)


@pytest.mark.parametrize("page", PAGES)
def test_the_default_view_reads_the_stored_results_and_shows_the_computed_numbers(
    monkeypatch: pytest.MonkeyPatch, store: Store, page: str
) -> None:
    """Fails on a page that computes its default view: every computing function raises. Then,
    without the stored rows (the fallback, computed as before), the page shows the same."""
    with monkeypatch.context() as patched:
        calls = _forbid_computing(patched)
        at = run_app_page(page, patched, [store.path])
        assert calls == [], calls
        metrics, tables = [m.value for m in at.metric], _tables(at)
    _clear_caches_now()
    monkeypatch.setattr(page_results, "stored_frame", lambda *args, **kwargs: None)
    at = run_app_page(page, monkeypatch, [store.path])
    assert [m.value for m in at.metric] == metrics
    computed = _tables(at)
    assert len(computed) == len(tables)
    for got, want in zip(computed, tables, strict=True):
        pd.testing.assert_frame_equal(
            got.reset_index(drop=True), want.reset_index(drop=True), check_dtype=False
        )


def _clear_caches_now() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def test_the_stored_results_equal_the_functions_on_the_stores_tables(store: Store) -> None:
    """Each stored frame against its function run here on the tables the page reads."""
    from legival_core.metrics.leak_summary import leak_summary

    manifest = store.manifest
    table = store.read("page_results")
    verdicts = store.read("monitor_verdicts")
    scores = stored_frame(table, manifest, "monitor_scores", MonitorSelection(500))
    assert scores is not None
    pd.testing.assert_frame_equal(scores, oversight.monitor_scores(verdicts, n_boot=500, seed=0))
    rewards, transfer, grades = (store.read(t) for t in ("rewards", "trace_transfer", "grades"))
    (model,) = sorted(rewards["reward_model"].unique())
    rho = stored_frame(table, manifest, "reward_rho", RewardSelection(model, level="trace"))
    assert rho is not None
    expected = oversight.reward_correlations(
        rewards, transfer, grades, traces=store.read("traces")[["trace_id", "teacher", "dataset"]]
    )
    pd.testing.assert_frame_equal(rho, expected)
    leaks = stored_frame(table, manifest, "transfer_leaks", TransferSelection())
    assert leaks is not None
    rollouts = store.read("rollouts", columns=["trace_id", "student", "k", "correct"])
    pd.testing.assert_frame_equal(
        leaks[["pairs", "leaks", "first_solves", "at_or_after_leak"]].reset_index(drop=True),
        leak_summary(transfer, rollouts)[["pairs", "leaks", "first_solves", "at_or_after_leak"]],
        check_dtype=False,
    )
    from legival_core.published.references import store_reference_teachers
    from legival_core.rankings.selection import Selection

    stored = stored_frame(table, manifest, "board_resamples", Selection(n_boot=1000, seed=0))
    assert stored is not None
    drawn = rank_intervals.resamples_from_frame(stored, ["accuracy", "fotu", "sotu"])
    fresh = rank_intervals.resample_teachers(  # averaged over the page's common support
        store.read("trace_efficiency"),
        transfer,
        ["accuracy", "fotu", "sotu"],
        1000,
        0,
        outside=store_reference_teachers(store),
    )
    assert drawn.teachers == fresh.teachers and list(drawn.metrics) == list(fresh.metrics)
    # the stage merges the board from its buckets' partial sums: the same sums added in another
    # order, equal to the last bit or two
    for name, one in fresh.metrics.items():
        got = drawn.metrics[name]
        np.testing.assert_allclose(got.replicates, one.replicates, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got.point, one.point, rtol=1e-12, atol=1e-15)


def test_the_monitor_legibility_and_workload_audits_equal_the_pages_computation(
    store: Store,
) -> None:
    """The two results stored last: ρ(FOTU, score) across teachers, and each benchmark's
    workload audits. The audits are computed here the page's way, reasoning texts read (the
    stage leaves them out when every trace has a token count, as in the demo)."""
    from legival_core.metrics.decomposition import decomposition_instances
    from legival_core.published.references import keep_teachers, store_reference_teachers

    manifest, table = store.manifest, store.read("page_results")
    references = store_reference_teachers(store)
    scores = oversight.monitor_scores(store.read("monitor_verdicts"), n_boot=500, seed=0)
    teachers = keep_teachers(store.read("teacher_metrics"), references)
    stored = stored_frame(table, manifest, "monitor_legibility", MonitorSelection(500))
    assert stored is not None and len(stored)
    pd.testing.assert_frame_equal(
        stored, oversight.monitor_legibility_correlation(scores, teachers)
    )
    assert store.read("traces", columns=["tokens"])["tokens"].notna().all()
    efficiency = store.read("trace_efficiency")
    instances = decomposition_instances(
        store.read("traces"),
        store.read("grades", columns=["trace_id", "correct"]),
        sigma=pd.Series(efficiency["compression"].to_numpy(), index=efficiency["trace_id"]),
    )
    benchmarks = sorted(store.read("decomposition")["benchmark"].unique())
    assert benchmarks
    for benchmark in benchmarks:
        want = views.workload_audits(
            instances[instances["benchmark"] == benchmark], references=references
        )
        for part in ("audits", "concentration"):
            key = DecompositionSelection(benchmark)
            got = stored_frame(table, manifest, f"decomposition_{part}", key)
            assert got is not None, (benchmark, part)
            pd.testing.assert_frame_equal(got, want[part])


def test_another_selection_is_computed(monkeypatch: pytest.MonkeyPatch, store: Store) -> None:
    """A selection the stage did not store (one dataset, correct traces only) is computed."""
    dataset = sorted(store.read("trace_transfer")["dataset"].unique())[0]
    calls = _spy_computing(monkeypatch)
    run_app_page("leaderboard", monkeypatch, [store.path], {"dataset": dataset})
    assert "resample_teachers" in calls
    calls.clear()
    run_app_page("transfer", monkeypatch, [store.path], {"dataset": dataset})
    assert "leak_summary" in calls
    calls.clear()
    run_app_page("rewards", monkeypatch, [store.path], {"subset": "correct"})
    assert {"teacher_level_rewards", "trace_level_rewards"} <= set(calls)


def test_a_stale_stored_result_is_not_used(
    monkeypatch: pytest.MonkeyPatch, store: Store, tmp_path: Path
) -> None:
    """Verdicts written after the stage ran: the stored scores no longer match the store, so
    the page computes them (and shows the new verdicts' numbers)."""
    copy = tmp_path / "stale"
    shutil.copytree(store.path, copy)
    stale = Store.open(copy)
    verdicts = stale.read("monitor_verdicts")
    flipped = verdicts.assign(verdict=verdicts["verdict"].map({"valid": "invalid"}).fillna("valid"))
    stale.write("monitor_verdicts", flipped, stage="monitor")
    assert (
        stored_frame(
            stale.read("page_results"), stale.manifest, "monitor_scores", MonitorSelection(500)
        )
        is None
    )
    calls = _spy_computing(monkeypatch)
    at = run_app_page("monitoring", monkeypatch, [copy])
    assert "monitor_scores" in calls
    fresh = oversight.monitor_scores(stale.read("monitor_verdicts"), n_boot=500, seed=0)
    old = stored_frame(
        store.read("page_results"), store.manifest, "monitor_scores", MonitorSelection(500)
    )
    assert old is not None and not fresh["f1"].equals(old["f1"])
    assert at.get("plotly_chart")


def test_the_robustness_rows_are_stamped_with_every_table_the_report_reads() -> None:
    # every table the report reads, and traces: its reference teachers (traces.source)
    wanted = (*robustness_choices.TABLE_COLUMNS, "traces")
    for part in robustness_choices.REPORT_PARTS:
        assert page_results.INPUTS[f"robustness_{part}"] == wanted


# --- the inspector's trace list: step counts from the stage when they are current -------------


def test_the_trace_list_takes_its_step_counts_from_the_stage_when_they_are_current(
    monkeypatch: pytest.MonkeyPatch, store: Store
) -> None:
    """Counting 11M steps per trace was most of the inspector's cold start at a million traces;
    the metrics stage's ``trace_efficiency.steps`` holds the same counts, and a ``page_results``
    row stamped with the steps table says whether they are current."""
    from legival_core import views

    counted = views.trace_choices(
        store.read("traces"),
        store.read("grades"),
        store.read("trace_transfer"),
        store.read("steps", columns=["trace_id"])["trace_id"].astype(str).value_counts(),
    )

    def fail(*args: object, **kwargs: object) -> object:
        raise AssertionError("steps counted although the stage's counts are current")

    monkeypatch.setattr(Store, "rows_per", fail)
    listed = views.store_trace_choices(store, stored=False)  # computed, not the stored list
    pd.testing.assert_frame_equal(listed, counted)
    assert listed["m"].notna().all()


def test_the_trace_list_counts_steps_written_after_the_stage(
    monkeypatch: pytest.MonkeyPatch, store: Store, tmp_path: Path
) -> None:
    """Steps written since the stage ran (one trace gets one more step): the stored counts are
    stale, so the list counts the steps table again and shows the new count."""
    from legival_core import views

    copy = tmp_path / "new-steps"
    shutil.copytree(store.path, copy)
    stale = Store.open(copy)
    steps = stale.read("steps")
    first = str(steps["trace_id"].iloc[0])
    mine = steps[steps["trace_id"].astype(str) == first]
    before = len(mine)
    extra = mine.tail(1).assign(step=mine["step"].max() + 1)
    stale.write("steps", extra, stage="segment")
    calls: list[str] = []
    real = Store.rows_per

    def spy(self: Store, *args: object, **kwargs: object) -> object:
        calls.append("rows_per")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Store, "rows_per", spy)
    listed = views.store_trace_choices(stale).set_index("trace_id")
    assert calls == ["rows_per"]
    assert int(listed.loc[first, "m"]) == before + 1


# --- the inspector's trace list, stored by the stage (issue 43 item 6) ------------------------


def _fail_computing_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    from legival_core.metrics import trace_list

    def fail(*args: object, **kwargs: object) -> object:
        raise AssertionError("the trace list was computed although a current one is stored")

    monkeypatch.setattr(trace_list, "trace_choices", fail)


def test_the_stored_trace_list_equals_the_list_computed_afresh(
    monkeypatch: pytest.MonkeyPatch, store: Store
) -> None:
    """At a million traces, joining and sorting the trace list took 2 s of the inspector's
    cold start; the metrics stage stores it, and what it stored is the computed list, row for
    row and dtype for dtype, read without computing anything."""
    fresh = views.store_trace_choices(store, stored=False)
    assert len(fresh) == len(store.read("traces", columns=["trace_id"]))
    stored = views.stored_trace_choices(store)
    assert stored is not None
    pd.testing.assert_frame_equal(stored, fresh)
    _fail_computing_the_list(monkeypatch)
    pd.testing.assert_frame_equal(views.store_trace_choices(store), fresh)


def test_the_stored_trace_list_of_a_hand_built_store(tmp_path: Path) -> None:
    """A store of a few traces (one ungraded, one without steps, no rollouts): the row the
    stage's page results hold for the list equals the list computed from its tables."""
    from precompute.stages.metrics import page_results_table

    store = Store.create(tmp_path / "hand")
    traces = pd.DataFrame(
        {
            "trace_id": ["t3", "t1", "t2", "t4"],
            "problem_id": ["p2", "p1", "p1", "p2"],
            "dataset": "D",
            "teacher": ["B", "A", "B", "A"],
            "sample": [0, 0, 0, 1],
            "reasoning": ["a. b.", "c.", "d. e. f.", "g."],
            "tokens": [5, 2, 7, 1],
        }
    )
    store.write("traces", traces, stage="ingest")
    grades = pd.DataFrame({"trace_id": ["t1", "t2", "t3"], "correct": [True, False, True]})
    store.write("grades", grades.assign(status="ok"), stage="grade")
    steps = pd.DataFrame(
        {
            "trace_id": ["t3", "t3", "t1", "t2", "t2", "t2"],
            "step": [0, 1, 0, 0, 1, 2],
            "start": 0,
            "end": 1,
            "text": "x",
        }
    )
    store.write("steps", steps, stage="segment")
    pages = page_results_table(store, store.manifest)
    assert pages is not None
    store.write("page_results", pages, stage="metrics")
    stored = views.stored_trace_choices(store)
    assert stored is not None
    fresh = views.store_trace_choices(store, stored=False)
    pd.testing.assert_frame_equal(stored, fresh)
    m = fresh.set_index("trace_id")["m"]
    assert m.drop("t4").to_dict() == {"t1": 1, "t2": 3, "t3": 2} and pd.isna(m["t4"])


def test_a_trace_list_stored_before_the_grades_changed_is_not_used(
    store: Store, tmp_path: Path
) -> None:
    """Grades rewritten after the stage ran (one trace's verdict flipped): the stored list no
    longer matches the store, so the list is computed again and shows the new verdict."""
    copy = tmp_path / "regraded"
    shutil.copytree(store.path, copy)
    stale = Store.open(copy)
    grades = stale.read("grades")
    first = str(grades["trace_id"].iloc[0])
    flipped = grades.iloc[:1].assign(correct=not bool(grades["correct"].iloc[0]))
    stale.write("grades", flipped, stage="grade")
    assert views.stored_trace_choices(stale) is None
    listed = views.store_trace_choices(stale)
    pd.testing.assert_frame_equal(listed, views.store_trace_choices(stale, stored=False))
    now = bool(flipped["correct"].iloc[0])
    assert bool(listed.set_index("trace_id").loc[first, "correct"]) == now
    old = views.stored_trace_choices(store)
    assert old is not None
    assert bool(old.set_index("trace_id").loc[first, "correct"]) != now


def test_the_bundled_demo_carries_a_current_trace_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bundled demo store's metrics ran with the stored list: its row is current, equal to
    the list computed afresh, and the inspector page opens on it."""
    demo = Store.open(DEMO)
    stored = views.stored_trace_choices(demo)
    assert stored is not None
    listed = views.store_trace_choices(demo, stored=False)
    assert len(listed) == len(demo.read("traces", columns=["trace_id"]))
    pd.testing.assert_frame_equal(
        stored.reset_index(drop=True), listed.reset_index(drop=True), check_dtype=False
    )
    at = run_app_page("inspector", monkeypatch, [DEMO])
    assert not at.exception


# --- one key value per stored result, made by one class for the stage and the page (#44) ---
def test_every_page_asks_with_the_key_the_stage_stored_its_default_view_under(
    monkeypatch: pytest.MonkeyPatch, store: Store
) -> None:
    """Every page's first view asks for each stored result with a value of the result's key
    class (:data:`legival_core.metrics.page_results.KEYS`, never a tuple built by hand), its
    key text is a row the stage wrote, current; and between them the pages ask for every
    kind of result the stage stored. Fails when a page and the stage disagree on a key."""
    asked: set[tuple[str, str]] = set()
    real_frame, real_current = page_results.stored_frame, page_results.is_current

    def record(name: str, key: object) -> None:
        assert isinstance(key, page_results.KEYS[name]), (name, key)
        asked.add((name, key.key(name)))

    def frame_spy(table, manifest, name, key, columns=None):  # type: ignore[no-untyped-def]
        record(name, key)
        return real_frame(table, manifest, name, key, columns)

    def current_spy(table, manifest, name, key):  # type: ignore[no-untyped-def]
        record(name, key)
        return real_current(table, manifest, name, key)

    monkeypatch.setattr(page_results, "stored_frame", frame_spy)
    monkeypatch.setattr(page_results, "is_current", current_spy)
    for page in (*PAGES, "inspector"):
        _clear_caches_now()
        run_app_page(page, monkeypatch, [store.path])
    rows = store.read("page_results", columns=["name", "selection", "inputs_stamp"])
    written = {
        (name, selection)
        for name, selection, stamp in zip(
            rows["name"], rows["selection"], rows["inputs_stamp"], strict=True
        )
        if stamp == page_results.inputs_stamp(store.manifest, page_results.INPUTS[name])
    }
    assert asked - written == set()  # a first view asks only for what the stage stored
    # Read only when another stored result does not serve: the board's draws under a
    # composite (whose intervals are computed from the stored draws), the step-count marker
    # when the trace list is made afresh.
    _clear_caches_now()
    run_app_page("leaderboard", monkeypatch, [store.path], {"weights": "fotu:1"})
    views.store_trace_choices(store, stored=False)
    # each stored kind is asked for by some page with the very key it is stored under
    assert {name for name, _ in written} == {name for name, _ in asked & written}


def test_a_selection_spells_its_weights_one_way() -> None:
    """The page's weights (a mapping in the widgets' order) and a notebook's (any order, zero
    weights left in) give one key: the cached and stored results are found either way."""
    from legival_core.rankings.selection import Selection

    page = Selection(weights={"fotu": 1.0, "accuracy": 2.0})
    notebook = Selection(weights=[("accuracy", 2), ("fotu", 1), ("tokens", 0)])
    assert page == notebook and hash(page) == hash(notebook)
    weighted = '[null, null, [["accuracy", 2.0], ["fotu", 1.0]], 1000, 0, false, "common"]'
    assert page.key() == weighted
    assert Selection(dataset="d").key() != Selection().key()
