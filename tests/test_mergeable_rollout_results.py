"""The rollout-derived results of the metrics stage, computed chunk by chunk, equal the whole
computation (legival_core.metrics.rollout_partials, issue #43 item 3).

A chunk is every rollout of the traces of a stable hash bucket of problem ids, as the metrics
stage splits them; the demo store is split into 1, 7 and 64 chunks, and small hand-built cases
check the merged numbers against arithmetic done here.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.metrics import rollout_partials as rp
from legival_core.metrics.attribution import trace_concentration
from legival_core.metrics.leak_summary import selection_leak_summary
from legival_core.metrics.transfer import PROFILES, ROLLOUT_COLUMNS
from legival_core.metrics.transfer_curves import (
    first_measured_positions,
    observed_coverage,
    transfer_curve_table,
)
from legival_core.stats.poisson_bootstrap import poisson_weights
from legival_core.store.store import Store
from legival_core.views.app_config import BUNDLED_STORES

if TYPE_CHECKING:
    from precompute.stages.metrics import RolloutResults

CHUNKS = (1, 7, 64)
#: CHUNKS with the largest count in the full lane only: its whole-table comparisons take seconds
CHUNKS_LARGEST_SLOW = [*CHUNKS[:-1], pytest.param(CHUNKS[-1], marks=pytest.mark.slow)]
N_BOOT = 200


def bucket(problem_id: object, chunks: int) -> int:
    """A stable hash bucket of a problem id (independent of the stage's own hashing)."""
    digest = hashlib.sha256(str(problem_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % chunks


def split(frame: pd.DataFrame, chunks: int) -> list[pd.DataFrame]:
    buckets = np.array([bucket(p, chunks) for p in frame["problem_id"]], dtype=np.int64)
    return [frame[buckets == b] for b in range(chunks)]


def same(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got, expected, check_exact=False, rtol=0, atol=1e-12)


def same_per_trace_results(
    got: RolloutResults, rollouts: pd.DataFrame, transfer: pd.DataFrame
) -> None:
    """The merged per-trace results equal the whole-table functions' (both driver tests)."""
    for profile in PROFILES:
        pd.testing.assert_frame_equal(got.coverage[profile], observed_coverage(rollouts, profile))
    same(got.first_measured, first_measured_positions(rollouts))
    same(got.concentration, trace_concentration(rollouts))
    assert got.leaks is not None
    same(got.leaks, selection_leak_summary(transfer, rollouts))


@pytest.fixture(scope="module")
def demo() -> tuple[pd.DataFrame, pd.DataFrame]:
    store = Store.open(BUNDLED_STORES["demo"])
    rollouts = store.read("rollouts", columns=list(ROLLOUT_COLUMNS))
    return rollouts, store.read("trace_transfer")


@pytest.fixture(scope="module")
def whole_curves(demo: tuple[pd.DataFrame, pd.DataFrame]) -> pd.DataFrame:
    return transfer_curve_table(demo[0], n_boot=N_BOOT, seed=3, stamp="s")


def curves_in_chunks(chunks: list[pd.DataFrame], n_boot: int = N_BOOT) -> pd.DataFrame:
    parts = [rp.curve_rows(c, n_boot=n_boot, seed=3).resampled() for c in chunks]
    return rp.transfer_curve_finalize(functools.reduce(rp.merge_transfer_curves, parts), stamp="s")


# ---------------------------------------------------------------------------------------------
# The demo store: 1, 7 and 64 chunks, and shuffled rows
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunks", CHUNKS_LARGEST_SLOW)
def test_transfer_curves_in_chunks_equal_the_whole_table(demo, whole_curves, chunks) -> None:
    assert whole_curves["lo"].notna().any()  # the bands are there to compare
    same(curves_in_chunks(split(demo[0], chunks)), whole_curves)


@pytest.mark.parametrize("chunks", CHUNKS_LARGEST_SLOW[1:])
def test_curve_pairs_joined_then_weighed_once_equal_the_whole_table(
    demo, whole_curves, chunks
) -> None:
    """The stage's driver joins several chunks' pairs and weighs them at once: two batches of
    joined chunks, weighed and merged, give the whole table's curves and bands."""
    rows = [rp.curve_rows(c, n_boot=N_BOOT, seed=3) for c in split(demo[0], chunks)]
    half = len(rows) // 2
    batches = [rp.concat_curve_rows(rows[:half]), rp.concat_curve_rows(rows[half:])]
    merged = rp.merge_transfer_curves(*(b.resampled() for b in batches))
    same(rp.transfer_curve_finalize(merged, stamp="s"), whole_curves)


def test_joining_curve_pairs_of_other_settings_is_refused(demo) -> None:
    a = rp.curve_rows(demo[0], ["paper"], n_boot=4, seed=0)
    b = rp.curve_rows(demo[0], ["paper"], n_boot=4, seed=1)
    with pytest.raises(ValueError, match="different settings"):
        rp.concat_curve_rows([a, b])


@pytest.mark.parametrize("chunks", CHUNKS)
@pytest.mark.parametrize("profile", list(PROFILES))
def test_coverage_in_chunks_equals_the_whole(demo, chunks: int, profile: str) -> None:
    parts = [rp.coverage_partial(c, profile) for c in split(demo[0], chunks)]
    got = rp.coverage_finalize(functools.reduce(rp.merge_coverage, parts))
    pd.testing.assert_frame_equal(got, observed_coverage(demo[0], profile))


@pytest.mark.parametrize("chunks", CHUNKS)
@pytest.mark.parametrize(
    ("partial", "whole"),
    [
        (rp.first_measured_partial, first_measured_positions),
        (rp.concentration_partial, trace_concentration),
    ],
)
def test_per_trace_results_in_chunks_equal_the_whole(
    demo,
    chunks: int,
    partial: Callable[[pd.DataFrame], pd.DataFrame],
    whole: Callable[[pd.DataFrame], pd.DataFrame],
) -> None:
    got = rp.concat_per_trace(partial(c) for c in split(demo[0], chunks))
    same(got, whole(demo[0]))


@pytest.mark.parametrize("chunks", CHUNKS)
def test_leak_summary_in_chunks_equals_the_whole(demo, chunks: int) -> None:
    rollouts, transfer = demo
    assert transfer["leak_k"].notna().any()
    parts = [
        rp.leak_partial(t, r)
        for t, r in zip(split(transfer, chunks), split(rollouts, chunks), strict=True)
    ]
    got = rp.leak_finalize(functools.reduce(rp.merge_leaks, parts))
    same(got, selection_leak_summary(transfer, rollouts))


@pytest.mark.slow
def test_row_order_changes_nothing(demo, whole_curves) -> None:
    """Shuffled rows, chunks merged in reverse: the same results (the demo has one sample per
    prefix, so the release profile's "last sample wins" has nothing to pick between)."""
    rollouts, transfer = demo
    shuffled = rollouts.sample(frac=1.0, random_state=11)
    chunks = split(shuffled, 7)[::-1]
    same(curves_in_chunks(chunks), whole_curves)
    for profile in PROFILES:
        parts = [rp.coverage_partial(c, profile) for c in chunks]
        got = rp.coverage_finalize(functools.reduce(rp.merge_coverage, parts))
        pd.testing.assert_frame_equal(got, observed_coverage(rollouts, profile))
    got = rp.concat_per_trace(rp.first_measured_partial(c) for c in chunks)
    same(got, first_measured_positions(rollouts))
    got = rp.concat_per_trace(rp.concentration_partial(c) for c in chunks)
    same(got, trace_concentration(rollouts))
    shuffled_transfer = transfer.sample(frac=1.0, random_state=5)
    parts = [
        rp.leak_partial(t, r)
        for t, r in zip(split(shuffled_transfer, 7)[::-1], chunks, strict=True)
    ]
    got = rp.leak_finalize(functools.reduce(rp.merge_leaks, parts))
    same(got, selection_leak_summary(transfer, rollouts))


@pytest.mark.slow
def test_driver_returns_every_result_merged(demo) -> None:
    from legival_core.metrics.transfer_curves import BAND_RESAMPLES
    from precompute.stages.metrics import rollout_results_in_chunks, transfer_curves_table

    rollouts, transfer = demo
    got = rollout_results_in_chunks(split(rollouts, 7), stamp="s", seed=0, trace_transfer=transfer)
    assert BAND_RESAMPLES == 200
    same(got.transfer_curves, transfer_curves_table(rollouts, "s", 0))
    same_per_trace_results(got, rollouts, transfer)
    alone = rollout_results_in_chunks(split(rollouts, 7), stamp="s", seed=0)
    assert alone.leaks is None  # no trace_transfer: no leak table, as page_results_table


# ---------------------------------------------------------------------------------------------
# By hand
# ---------------------------------------------------------------------------------------------


def two_traces() -> pd.DataFrame:
    """Teacher T, student S, m = 2: trace a solves at k = 1 and 2, trace b only at k = 2.

    Paper bins: k = 1 -> ceil(50 / 2) = 25, k = 2 -> 50. Curve a: 1 everywhere (constant
    before its first bin). Curve b: 0 on bins 1..25, (j - 25) / 25 on 26..49, 1 at 50."""
    return pd.DataFrame(
        {
            "teacher": "T",
            "dataset": "D",
            "student": "S",
            "trace_id": ["a"] * 3 + ["b"] * 3,
            "problem_id": ["p"] * 3 + ["q"] * 3,
            "k": [0, 1, 2] * 2,
            "m": 2,
            "correct": [0.0, 1.0, 1.0, 0.0, 0.0, 1.0],
        }
    )


def test_transfer_curves_by_hand_one_trace_per_chunk() -> None:
    rollouts = two_traces()
    n_boot = 4
    parts = [
        rp.curve_rows(rollouts[rollouts["trace_id"] == t], ["paper"], n_boot=n_boot).resampled()
        for t in ("b", "a")
    ]
    table = rp.transfer_curve_finalize(functools.reduce(rp.merge_transfer_curves, parts))
    view = table[(table["dataset"] == "*") & (table["student"] == "*")].set_index("bin")
    # mean curve = (curve a + curve b) / 2: bin 25 (1 + 0) / 2, bin 38 (1 + 13/25) / 2, bin 50 1
    assert view.loc[25, "mean"] == pytest.approx(0.5, abs=1e-12)
    assert view.loc[38, "mean"] == pytest.approx((1 + 13 / 25) / 2, abs=1e-12)
    assert view.loc[50, "mean"] == pytest.approx(1.0, abs=1e-12)
    # FOTU a = 1; FOTU b = (sum_{i=1..24} i/25 + 1) / 50 = (12 + 1) / 50; teacher = the mean
    assert view.loc[1, "fotu"] == pytest.approx((1 + 13 / 50) / 2, abs=1e-12)
    # hazards 25 and 50, one each: SOTU = log 2 / log 50; shares 1/2, 1/2; never solved 0
    assert view.loc[1, "sotu"] == pytest.approx(math.log(2) / math.log(50), abs=1e-12)
    assert view.loc[25, "hazard_share"] == 0.5 and view.loc[50, "hazard_share"] == 0.5
    assert view.loc[0, "hazard_share"] == 0.0 and view.loc[1, "never_solved"] == 0.0
    assert int(view.loc[1, "n_traces"]) == 2 and float(view.loc[1, "student_baseline"]) == 0.0
    # The band at bin 25: replicate r weighs a by w_a[r], b by w_b[r]: its mean curve there is
    # (w_a * 1 + w_b * 0) / (w_a + w_b), undefined when both weigh 0; the band is the 2.5th and
    # 97.5th percentiles (linear interpolation) of the defined replicates.
    # Seed 0 gives (w_a, w_b) = (2, 2), (0, 1), (1, 0), (3, 2): replicates 2/4, 0, 1, 3/5.
    weights = poisson_weights(["a", "b"], n_boot, 0).tolist()
    assert weights == [[2, 2], [0, 1], [1, 0], [3, 2]]
    replicates = sorted(a / (a + b) for a, b in weights if a + b > 0)
    assert replicates == [0.0, 0.5, 0.6, 1.0]
    # 2.5th percentile: position 0.025 * 3 = 0.075 -> 0 + 0.075 * (0.5 - 0) = 0.0375;
    # 97.5th: position 2.925 -> 0.6 + 0.925 * (1 - 0.6) = 0.97
    assert view.loc[25, "lo"] == pytest.approx(0.0375, abs=1e-12)
    assert view.loc[25, "hi"] == pytest.approx(0.97, abs=1e-12)
    # the whole table, computed at once, is the same
    same(table, transfer_curve_table(rollouts, ["paper"], n_boot=n_boot))


def test_coverage_by_hand() -> None:
    # a: k/m = 1/2 (bin 25) and 1 (bin 50); b: 4/4 (bin 50); one trace per chunk
    a = pd.DataFrame({"teacher": "T", "trace_id": "a", "k": [0, 1, 2], "m": 2})
    b = pd.DataFrame({"teacher": "T", "trace_id": "b", "k": [0, 4], "m": 4})
    got = rp.coverage_finalize(rp.merge_coverage(rp.coverage_partial(b), rp.coverage_partial(a)))
    observed = got[got["n_observed"] > 0]
    assert observed[["bin", "n_observed", "n_traces"]].values.tolist() == [[25, 1, 2], [50, 2, 2]]
    assert len(got) == 50 and set(got["n_traces"]) == {2}


def test_first_measured_by_hand() -> None:
    # a: smallest k/m over k >= 1 is 1/2; b: only k = m = 4, so 1.0 and whole_only
    a = pd.DataFrame({"teacher": "T", "trace_id": "a", "k": [1, 2], "m": 2})
    b = pd.DataFrame({"teacher": "T", "trace_id": "b", "k": [4], "m": 4})
    got = rp.concat_per_trace([rp.first_measured_partial(b), rp.first_measured_partial(a)])
    assert got[["trace_id", "first_x", "whole_only"]].values.tolist() == [
        ["a", 0.5, False],
        ["b", 1.0, True],
    ]


def test_concentration_by_hand() -> None:
    # t (m = 10): rates 1/4, 1/4, 3/4, 1, 1 at k = 0, 3, 6, 9, 10: per-step attributions 0 (x3),
    # 1/6 (x3), 1/12 (x3), 0 (x1); 10 steps, top ceil(10%) = 1; positive 3/6 + 3/12 = 3/4;
    # share (1/6) / (3/4) = 2/9. s (m = 5): 0 -> 1 over k = 0..5: 1/5 per step (x5); top 1;
    # positive 1; share 1/5; uniform share 1/5 and 1/10.
    t = pd.DataFrame(
        {
            "trace_id": "t",
            "teacher": "T",
            "dataset": "D",
            "m": 10,
            "k": np.repeat([0, 3, 6, 9, 10], 4),
            "correct": [1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1],
        }
    )
    s = pd.DataFrame(
        {
            "trace_id": "s",
            "teacher": "U",
            "dataset": "D",
            "m": 5,
            "k": np.repeat([0, 5], 4),
            "correct": [0] * 4 + [1] * 4,
        }
    )
    got = rp.concat_per_trace([rp.concentration_partial(t), rp.concentration_partial(s)])
    assert got["trace_id"].tolist() == ["s", "t"]
    assert got["teacher"].tolist() == ["U", "T"]
    assert got["steps_measured"].tolist() == [5, 10]
    assert got["top_steps"].tolist() == [1, 1]
    np.testing.assert_allclose(got["positive"], [1.0, 0.75], atol=1e-12)
    np.testing.assert_allclose(got["top_share"], [0.2, 2 / 9], atol=1e-12)
    np.testing.assert_allclose(got["uniform_share"], [1 / 5, 1 / 10], atol=1e-12)


def test_leak_summary_by_hand() -> None:
    # T: a leaks at 6 and is first solved at k = 6 (at the leak); b never leaks, solved at 3.
    # U: c never leaks and is never solved.
    transfer = pd.DataFrame(
        {
            "trace_id": ["a", "b", "c"],
            "student": "s",
            "teacher": ["T", "T", "U"],
            "fotu": [0.5, 0.25, 0.5],
            "leak_k": pd.array([6, None, None], dtype="Int64"),
            "fotu_before_leak": [0.0, math.nan, 0.5],
        }
    )
    rollouts = pd.DataFrame(
        {
            "trace_id": ["a"] * 3 + ["b"] * 3 + ["c"] * 2,
            "student": "s",
            "k": [0, 3, 6, 0, 3, 6, 0, 3],
            "correct": [0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0],
        }
    )
    parts = [
        rp.leak_partial(transfer[transfer["trace_id"].isin(ids)], rollouts)
        for ids in (["c", "b"], ["a"])
    ]
    got = rp.leak_finalize(functools.reduce(rp.merge_leaks, parts)).set_index("teacher")
    # T: 2 pairs, 1 leak, 2 first solves, 1 at or after the leak: share 1/2;
    # FOTU (0.5 + 0.25) / 2; before the leak: b's NaN left out, 0.0
    assert got.loc["T"].tolist()[:4] == [2, 1, 2, 1]
    assert got.loc["T", "share_at_or_after_leak"] == 0.5
    assert got.loc["T", "fotu"] == pytest.approx(0.375, abs=1e-12)
    assert got.loc["T", "fotu_before_leak"] == 0.0
    # U: 1 pair, no leak, no first solve: no share (NaN)
    assert got.loc["U"].tolist()[:4] == [1, 0, 0, 0]
    assert pd.isna(got.loc["U", "share_at_or_after_leak"])
    assert got.loc["U", "fotu"] == 0.5 and got.loc["U", "fotu_before_leak"] == 0.5
    same(got.reset_index(), selection_leak_summary(transfer, rollouts))


def test_partials_of_different_settings_do_not_merge() -> None:
    a = rp.curve_rows(two_traces(), ["paper"], n_boot=4, seed=0).resampled()
    b = rp.curve_rows(two_traces(), ["paper"], n_boot=4, seed=1).resampled()
    with pytest.raises(ValueError, match="different settings"):
        rp.merge_transfer_curves(a, b)


@pytest.mark.slow
def test_page_style_rollouts_in_chunks_equal_the_page_results() -> None:
    """``page_results_table`` reads the rollouts with categorical ids and plain int32 ``k``/``m``
    (not the store's nullable integers): chunks of that frame equal its whole results too."""
    from precompute.stages.metrics import _read_rollouts_as_pages, rollout_results_in_chunks

    store = Store.open(BUNDLED_STORES["demo"])
    rollouts, transfer = _read_rollouts_as_pages(store), store.read("trace_transfer")
    assert isinstance(rollouts["trace_id"].dtype, pd.CategoricalDtype)
    got = rollout_results_in_chunks(split(rollouts, 7), stamp="s", seed=0, trace_transfer=transfer)
    same_per_trace_results(got, rollouts, transfer)


@pytest.mark.slow
def test_pairs_wait_at_most_one_chunk_past_the_batch(demo, monkeypatch) -> None:
    """The driver checks what waits after every chunk: with a batch of 1 byte, each chunk's
    pairs are weighed before the next chunk is merged, the first chunk's included (they used
    to wait for a second chunk, and two chunks' pairs could wait at once)."""
    from precompute.stages import metrics as stage

    monkeypatch.setattr(stage, "RESAMPLE_BATCH_BYTES", 1)
    waited: list[int] = []
    merge = stage.RolloutPartials.merge

    def watched(self: stage.RolloutPartials, other: stage.RolloutPartials):
        waited.append(sum(rows.nbytes for rows in self.curve_rows))  # what waited so far
        return merge(self, other)

    monkeypatch.setattr(stage.RolloutPartials, "merge", watched)
    rollouts, _ = demo
    got = stage.rollout_results_in_chunks(split(rollouts, 7), stamp="s", seed=0)
    assert len(waited) >= 5 and waited == [0] * len(waited)
    # weighed a chunk at a time, the curves are the whole table's
    same(got.transfer_curves, stage.transfer_curves_table(rollouts, "s", 0))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b10", "b9", "é", None]),  # trace_id
            st.sampled_from(["T", "U", None]),  # teacher
            st.integers(0, 4),  # k
            st.integers(1, 4),  # m
        ),
        max_size=20,
    ),
    st.sampled_from(["str", "object", "category"]),
)
def test_first_measured_positions_are_a_plain_reading_of_the_rows(
    rows: list[tuple], dtype: str
) -> None:
    # grouped by the ids' codes: every non-null trace with a prefix k >= 1, sorted by id, its
    # first non-null teacher, min k / m, and whether its one measured k is the whole trace
    frame = pd.DataFrame(rows, columns=["trace_id", "teacher", "k", "m"]).astype(
        {"trace_id": dtype, "teacher": dtype, "k": "Int64", "m": "Int64"}
    )
    got = first_measured_positions(frame)
    seen: dict[str, dict] = {}
    for trace, teacher, k, m in rows:
        if trace is None or k < 1:
            continue
        entry = seen.setdefault(trace, {"teacher": None, "x": [], "k": set()})
        if entry["teacher"] is None:
            entry["teacher"] = teacher
        entry["x"].append(k / m)
        entry["k"].add(k)
    assert got["trace_id"].tolist() == sorted(seen)
    for row in got.itertuples(index=False):
        entry = seen[row.trace_id]
        assert (None if pd.isna(row.teacher) else row.teacher) == entry["teacher"]
        assert row.first_x == min(entry["x"])
        assert bool(row.whole_only) == (len(entry["k"]) == 1 and min(entry["x"]) == 1.0)
