"""Data the pages prepared themselves, now in ``legival_core.views`` (issue 44 item 1): checked
on the bundled demo store against the library's other front door and the stored tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import legival_core as lv
from legival_core.metrics.efficiency import REDUNDANCY_THRESHOLDS
from legival_core.metrics.redundancy_sweep_view import recorded_threshold
from legival_core.store.store import Store
from legival_core.views import reading

DEMO = Path(__file__).resolve().parents[1] / "results" / "demo"


def test_the_inspectors_bundle_is_the_notebooks_trace() -> None:
    """The inspector's one-trace bundle holds the same step table as ``lv.open(...).trace``
    (two front doors, one set of steps), each step's end offset in step order, and the
    trace's own rows only."""
    store = Store.open(DEMO)
    tau = recorded_threshold(store.manifest) or REDUNDANCY_THRESHOLDS["paper"]
    results = lv.open(DEMO)
    trace_id = str(results.traces()["trace_id"].iloc[0])
    bundle = reading.trace_bundle(store, trace_id, tau)
    notebook = results.trace(trace_id)
    shared = [c for c in notebook.columns if c in bundle["steps"].columns]
    assert len(shared) >= 7
    pd.testing.assert_frame_equal(
        bundle["steps"][shared].reset_index(drop=True), notebook[shared].reset_index(drop=True)
    )
    steps = store.read("steps", filters={"trace_id": trace_id}).sort_values("step")
    assert bundle["ends"] == steps["end"].tolist() and len(bundle["ends"]) == len(notebook)
    assert bundle["trace"]["trace_id"] == trace_id
    assert set(bundle["stored_leaks"]["trace_id"]) <= {trace_id}


def test_the_leak_step_is_the_stored_one_when_the_stage_stored_it() -> None:
    """A trace with rollouts: the inspector's leak step is ``trace_transfer.leak_k`` as stored
    (the task's check is not run); with the stored rows left out it is computed by the task
    and, the stage having computed the stored one the same way, equals it."""
    store = Store.open(DEMO)
    tau = recorded_threshold(store.manifest) or REDUNDANCY_THRESHOLDS["paper"]
    transfer = store.read("trace_transfer", columns=["trace_id", "leak_k"])
    leaking = transfer[transfer["leak_k"].notna()]
    assert len(leaking)
    trace_id = str(leaking["trace_id"].iloc[0])
    bundle = reading.trace_bundle(store, trace_id, tau)
    stored = int(leaking["leak_k"].iloc[0])
    assert reading.bundle_leak_step(bundle) == stored
    recomputed = dict(bundle, stored_leaks=bundle["stored_leaks"].iloc[0:0])
    assert reading.bundle_leak_step(recomputed) == stored


class _Unstored:
    """A front door to the same store whose stored page results are never found."""

    def __init__(self, source: object) -> None:
        self._source = source

    def __getattr__(self, name: str) -> object:
        return getattr(self._source, name)

    def stored_result(self, name: str, key: object) -> None:
        return None


def test_the_frontier_shares_from_the_stored_draws_equal_the_drawn_ones() -> None:
    """The Pareto page's frontier shares (board_view.frontier_shares, through ``lv.open``): from
    the stage's stored draws and drawn afresh from the per-trace tables, the same numbers;
    each a share of resamples, between 0 and 1."""
    from legival_core.rankings.selection import Selection
    from legival_core.views import board_view

    results = lv.open(DEMO)
    stored = board_view.frontier_shares(results, Selection(), "tokens", "fotu")
    drawn = board_view.frontier_shares(_Unstored(results), Selection(), "tokens", "fotu")
    assert stored[0] and stored[0] == drawn[0]
    assert all(0.0 <= share <= 1.0 for share in stored[0].values())
    pd.testing.assert_frame_equal(stored[1], drawn[1])


def test_the_stored_leak_table_is_the_one_computed_from_the_rollouts() -> None:
    """Every page's leak headline reads one table (views.transfer.store_leak_table): the
    stage's stored one while current, else computed; both give the same counts."""
    from legival_core.views.transfer import store_leak_table

    store = Store.open(DEMO)
    stored = store_leak_table(store, store.read("page_results"), store.manifest)
    computed = store_leak_table(store, None, store.manifest)
    assert stored is not None and computed is not None
    counts = ["pairs", "leaks", "first_solves", "at_or_after_leak"]
    pd.testing.assert_frame_equal(
        stored[counts].reset_index(drop=True),
        computed[counts].reset_index(drop=True),
        check_dtype=False,
    )
    assert int(stored["pairs"].sum()) == len(
        store.read("trace_transfer", columns=["trace_id", "student"]).drop_duplicates()
    )
