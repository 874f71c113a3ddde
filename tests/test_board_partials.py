"""The leaderboard's paired resamples computed chunk by chunk of problems and merged equal the
whole computation (legival_core.rankings.board_partials), by hand on a small frame and on the
demo store; the problem weights are the Poisson weights keyed by (dataset, problem_id)."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.rankings import board_partials as bp
from legival_core.rankings import cell_sums as cs
from legival_core.rankings import rank_intervals as ri
from legival_core.stats.poisson_bootstrap import poisson_weights

DEMO = Path(__file__).resolve().parents[1] / "results" / "demo"


def bucket(frame: pd.DataFrame, n: int) -> np.ndarray:
    """A stable bucket per row from its (dataset, problem_id): first 8 bytes of SHA-256, mod n."""
    keys = zip(frame["dataset"].astype(str), frame["problem_id"].astype(str), strict=True)
    return np.array(
        [
            int.from_bytes(hashlib.sha256(f"{d}\x1f{p}".encode()).digest()[:8], "big") % n
            for d, p in keys
        ],
        dtype=np.int64,
    )


def test_problem_weights_are_poisson_weights_keyed_by_dataset_and_problem() -> None:
    problems = pd.MultiIndex.from_tuples([("d1", "p"), ("d2", "p"), ("d1", "q")])
    w = ri.problem_weights(problems, n_boot=6, seed=3)
    expected = poisson_weights(["d1\x1fp", "d2\x1fp", "d1\x1fq"], 6, seed=3)
    assert w.dtype == np.float64 and np.array_equal(w, expected.astype(np.float64))
    # a problem's column does not depend on the other problems: any chunk gets its own alone
    assert np.array_equal(ri.problem_weights(problems[[2]], 6, seed=3), w[:, [2]])


# teacher a covers d1 (problems p, q; students s1, s2) and d2 (problem r); b only d1 (s1)
HAND = pd.DataFrame(
    {
        "trace_id": ["a1", "a1", "a2", "a3", "b1", "b2"],
        "teacher": ["a", "a", "a", "a", "b", "b"],
        "dataset": ["d1", "d1", "d1", "d2", "d1", "d1"],
        "problem_id": ["p", "p", "q", "r", "p", "q"],
        "student": ["s1", "s2", "s1", "s1", "s1", "s1"],
        "v": [1.0, 0.0, 1.0, 0.5, 0.0, 1.0],
    }
)
HAND_PROBLEMS = pd.MultiIndex.from_tuples([("d1", "p"), ("d1", "q"), ("d2", "r")])
# replicate 1: p twice, q never, r once; replicate 2: p never, q once, r three times
HAND_WEIGHTS = np.array([[2.0, 0.0, 1.0], [0.0, 1.0, 3.0]])


def merged_hand(chunks: list[list[str]], order: slice = slice(None)) -> cs.MetricPartial:
    parts = [
        cs.metric_partial(HAND[HAND["problem_id"].isin(c)], "v", HAND_PROBLEMS, HAND_WEIGHTS)
        for c in chunks
    ][order]
    merged = parts[0]
    for part in parts[1:]:
        merged = cs.merge_metric_partials(merged, part)
    return merged


@pytest.mark.parametrize("chunks", [[["p", "q", "r"]], [["p"], ["q", "r"]], [["r"], ["q"], ["p"]]])
@pytest.mark.parametrize("order", [slice(None), slice(None, None, -1)])
def test_hand_frame_chunks_merge_to_the_hand_worked_replicates(
    chunks: list[list[str]], order: slice
) -> None:
    merged = merged_hand(chunks, order)
    # common support: b has no row on d2, so only d1 counts
    # data: a's cells (d1, s1) = (1 + 1) / 2 = 1 and (d1, s2) = 0 / 1 = 0 -> a = 0.5;
    #       b's (d1, s1) = (0 + 1) / 2 = 0.5
    # replicate 1 (p = 2, q = 0): a (d1, s1) = 2*1 / 2 = 1, (d1, s2) = 2*0 / 2 = 0 -> 0.5;
    #       b = 2*0 / 2 = 0
    # replicate 2 (p = 0, q = 1): a (d1, s1) = 1*1 / 1 = 1, (d1, s2) has no weight -> 1;
    #       b = 1*1 / 1 = 1
    res = cs.finalize_metric(merged, ["a", "b"])
    assert res.point.tolist() == [0.5, 0.5]
    assert res.replicates.tolist() == [[0.5, 0.0], [1.0, 1.0]]
    assert res.n_traces.tolist() == [2, 2]  # a1, a2 and b1, b2 on d1
    assert res.n_students.tolist() == [2, 1]
    # b outside the common support: a's d2 counts for a (cell (d2, s1) = 0.5 at any weight)
    # data: (0.5 + 0.5) / 2 = 0.5; replicate 1: (0.5 + 0.5) / 2 = 0.5; replicate 2:
    # (1 + 0.5) / 2 = 0.75; b has d1 only, as above
    res = cs.finalize_metric(merged, ["a", "b"], outside=["b"])
    assert res.point.tolist() == [0.5, 0.5]
    assert res.replicates.tolist() == [[0.5, 0.0], [0.75, 1.0]]
    assert res.n_traces.tolist() == [3, 2]
    # the whole-table function on the same weights agrees
    whole = ri.metric_resamples(HAND, "v", ["a", "b"], HAND_PROBLEMS, HAND_WEIGHTS, outside=["b"])
    assert whole.replicates.tolist() == res.replicates.tolist()
    assert whole.n_traces.tolist() == res.n_traces.tolist()


def test_hand_hazard_histograms_merge_to_the_hand_worked_entropy() -> None:
    rows = pd.DataFrame(
        {
            "trace_id": ["t1", "t2"],
            "teacher": "a",
            "dataset": "d",
            "problem_id": ["p", "q"],
            "student": "s",
            "hazard_bin": [1.0, 2.0],
        }
    )
    problems = pd.MultiIndex.from_tuples([("d", "p"), ("d", "q")])
    weights = np.array([[2.0, 0.0], [1.0, 3.0]])
    parts = [
        cs.metric_partial(rows[i : i + 1], "hazard_bin", problems, weights, "entropy")
        for i in range(2)
    ]
    merged = cs.merge_metric_partials(*parts)
    # histograms (bins 1, 2): data [1, 1]; replicate 1 [2, 0]; replicate 2 [1, 3]
    assert merged.sums[:, 0, :2].tolist() == [[1.0, 1.0], [2.0, 0.0], [1.0, 3.0]]
    res = cs.finalize_metric(merged, ["a"])
    assert res.point[0] == pytest.approx(math.log(2) / math.log(50), abs=1e-15)
    assert res.replicates[0, 0] == 0.0
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert res.replicates[1, 0] == pytest.approx(h / math.log(50), abs=1e-15)


def test_board_on_poisson_weights_by_hand() -> None:
    # teacher a right on p, wrong on q: accuracy in replicate b = w_p / (w_p + w_q)
    eff = pd.DataFrame(
        {"trace_id": ["1", "2"], "teacher": "a", "dataset": "d", "problem_id": ["p", "q"],
         "correct": [1, 0]}
    )  # fmt: skip
    w = poisson_weights(["d\x1fp", "d\x1fq"], 40, seed=5).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = np.where(w.sum(axis=1) > 0, w[:, 0] / w.sum(axis=1), np.nan)
    parts = [bp.board_rows(eff[i : i + 1], None, 40, 5, ["accuracy"]).resampled() for i in range(2)]
    got = bp.finalize_board(bp.merge_board_partials(parts)).metrics["accuracy"]
    assert got.point.tolist() == [0.5]
    assert np.array_equal(got.replicates[:, 0], expected, equal_nan=True)
    whole = ri.resample_teachers(eff, None, ["accuracy"], n_boot=40, seed=5)
    assert np.array_equal(whole.metrics["accuracy"].replicates[:, 0], expected, equal_nan=True)


def assert_same_board(got: ri.TeacherResamples, want: ri.TeacherResamples) -> None:
    assert got.teachers == want.teachers and list(got.metrics) == list(want.metrics)
    assert (got.n_boot, got.seed) == (want.n_boot, want.seed)
    for metric, w in want.metrics.items():
        g = got.metrics[metric]
        assert g.teachers == w.teachers, metric
        assert np.array_equal(g.n_traces, w.n_traces) and np.array_equal(g.n_students, w.n_students)
        for a, b in ((g.point, w.point), (g.replicates, w.replicates)):
            assert np.array_equal(np.isnan(a), np.isnan(b)), metric
            assert np.nanmax(np.abs(a - b), initial=0.0) <= 1e-12, metric


@pytest.fixture(scope="module")
def demo_tables() -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    from legival_core.published.references import store_reference_teachers
    from legival_core.store.store import Store

    store = Store.open(DEMO)
    return (
        store.read("trace_efficiency"),
        store.read("trace_transfer"),
        store_reference_teachers(store),
    )


@pytest.mark.parametrize("n_chunks", [1, 7, pytest.param(64, marks=pytest.mark.slow)])
def test_demo_board_from_chunks_equals_the_whole(
    demo_tables: tuple[pd.DataFrame, pd.DataFrame, list[str]], n_chunks: int
) -> None:
    efficiency, transfer, references = demo_tables
    assert references  # the demo has a reference teacher: both boards differ
    n_boot, seed = 200, 0
    eb, tb = bucket(efficiency, n_chunks), bucket(transfer, n_chunks)
    parts = [
        bp.board_rows(efficiency[eb == i], transfer[tb == i], n_boot, seed).resampled()
        for i in range(n_chunks)
    ]
    merged = bp.merge_board_partials(parts[::-1])  # any order
    leaderboard = ri.stored_board_resamples(efficiency, transfer, n_boot, seed, outside=references)
    assert set(leaderboard.metrics) == set(ri.RESAMPLED_METRICS)
    assert_same_board(bp.finalize_board(merged, outside=references), leaderboard)
    pareto = ri.stored_board_resamples(efficiency, transfer, n_boot, seed, references)
    assert_same_board(bp.finalize_board(merged, references), pareto)


@pytest.mark.parametrize("n_chunks", [7, pytest.param(64, marks=pytest.mark.slow)])
def test_demo_board_from_chunks_joined_then_resampled_equals_the_whole(
    demo_tables: tuple[pd.DataFrame, pd.DataFrame, list[str]], n_chunks: int
) -> None:
    """The stage's driver joins several chunks' rows and resamples them at once: two batches
    of joined chunks, resampled and merged, give the whole tables' board."""
    efficiency, transfer, references = demo_tables
    n_boot, seed = 200, 0
    eb, tb = bucket(efficiency, n_chunks), bucket(transfer, n_chunks)
    rows = [
        bp.board_rows(efficiency[eb == i], transfer[tb == i], n_boot, seed) for i in range(n_chunks)
    ]
    half = n_chunks // 2
    batches = [bp.concat_board_rows(rows[:half]), bp.concat_board_rows(rows[half:])]
    merged = bp.merge_board_partials(b.resampled() for b in batches)
    leaderboard = ri.stored_board_resamples(efficiency, transfer, n_boot, seed, outside=references)
    assert_same_board(bp.finalize_board(merged, outside=references), leaderboard)


def test_hand_rows_joined_then_resampled_give_the_hand_worked_replicates() -> None:
    # the chunks {p} and {q, r}, each with its own problems; joined, then weighed once
    parts = [
        cs.cell_rows(HAND[HAND["problem_id"].isin(c)], "v", HAND_PROBLEMS[i], known_only=True)
        for c, i in ((["p"], [0]), (["q", "r"], [1, 2]))
    ]
    joined = cs.concat_cell_rows(parts)
    assert joined.problems.tolist() == HAND_PROBLEMS.tolist()
    assert joined.cells == (("a", "d1", "s1"), ("a", "d1", "s2"), ("a", "d2", "s1"),
                            ("b", "d1", "s1"))  # fmt: skip
    res = cs.finalize_metric(cs.resample_cells(joined, HAND_WEIGHTS), ["a", "b"])
    assert res.point.tolist() == [0.5, 0.5]  # as worked by hand above
    assert res.replicates.tolist() == [[0.5, 0.0], [1.0, 1.0]]
    assert res.n_traces.tolist() == [2, 2]


@pytest.mark.parametrize("resampled", [False, True], ids=["rows joined", "partials merged"])
def test_chunks_of_other_resamples_are_refused(resampled: bool) -> None:
    eff = HAND.rename(columns={"v": "correct"})
    a, b = (bp.board_rows(eff, None, 5, seed, ["accuracy"]) for seed in (0, 1))
    with pytest.raises(ValueError, match="different resamples"):
        if resampled:
            bp.merge_board_partials([a.resampled(), b.resampled()])
        else:
            bp.concat_board_rows([a, b])


def test_frontier_shares_leave_out_a_resample_that_weighs_every_problem_zero() -> None:
    # resample 2 weighed every problem 0 (probability e^-P under the Poisson bootstrap): no
    # teacher has a value; over the other two, a is on the frontier in both, b in resample 1
    x = ri.MetricResamples(
        ("a", "b"), np.array([1.0, 1.0]), np.array([[1.0, 1.0], [2.0, 1.0], [np.nan, np.nan]]),
        np.array([2, 2]), np.array([1, 1]),
    )  # fmt: skip
    assert ri.frontier_shares(x, x, (True, True)).tolist() == [1.0, 0.5]


def test_float_noise_does_not_split_a_tie_on_the_frontier() -> None:
    """The stage's chunks and the page's whole tables add the same rows in another order:
    a and b tie on both axes but for the last bit (0.1 + 0.2 against 0.3), which made b
    dominate a in that resample (the demo's Pareto page showed 56.5% stored, 56.6% computed).
    Compared at 9 decimals (``pareto_mask``), as ranks are, both are on the frontier."""
    assert 0.1 + 0.2 != 0.3
    x = ri.MetricResamples(
        ("a", "b"), np.array([0.3, 0.3]), np.array([[0.3, 0.1 + 0.2]]), np.array([2, 2]),
        np.array([1, 1]),
    )  # fmt: skip
    y = dataclasses.replace(x, replicates=np.array([[1.0, 1.0]]))
    assert ri.frontier_shares(x, y, (True, True)).tolist() == [1.0, 1.0]


def test_a_running_total_is_added_into_not_copied() -> None:
    """``into_first``: the chunks' sums are added into the first partial's array (the stage's
    running total), with the same numbers as a fresh merge; a chunk with a cell the total lacks
    gets a new array."""
    first = cs.metric_partial(HAND[HAND["problem_id"] == "p"], "v", HAND_PROBLEMS, HAND_WEIGHTS)
    # problem q: teacher a (a2, s1) and b (b2, s1), the cells problem p already has
    second = cs.metric_partial(HAND[HAND["problem_id"] == "q"], "v", HAND_PROBLEMS, HAND_WEIGHTS)
    fresh = cs.merge_metric_partials(first, second)
    assert not np.shares_memory(fresh.sums, first.sums)
    expected = fresh.sums.copy()
    total = cs.merge_metric_partials(first, second, into_first=True)
    assert np.shares_memory(total.sums, first.sums)
    assert np.array_equal(total.sums, expected)
    # cell (a, d1, s1), by hand: data 1 (a1/s1 at p) + 1 (a2 at q) over 2 rows;
    # replicate 1: p x2 -> 2 over 2, q x0; replicate 2: q x1 -> 1 over 1
    cell = total.cells.index(("a", "d1", "s1"))
    assert total.sums[:, cell].tolist() == [[2.0, 2.0], [2.0, 2.0], [1.0, 1.0]]
    assert dict(total.traces) == {("a", "d1"): 2, ("b", "d1"): 2}
    # problem r brings the cell (a, d2, s1) the total lacks: a new array, the same numbers
    third = cs.metric_partial(HAND[HAND["problem_id"] == "r"], "v", HAND_PROBLEMS, HAND_WEIGHTS)
    grown = cs.merge_metric_partials(total, third, into_first=True)
    assert not np.shares_memory(grown.sums, total.sums)
    assert np.array_equal(grown.sums, merged_hand([["p"], ["q"], ["r"]]).sums)


def test_board_merge_into_its_running_total_finalizes_the_same() -> None:
    chunks = [["p"], ["q"], ["r"]]
    rows = HAND.rename(columns={"v": "fotu"})
    frames = [rows[rows["problem_id"].isin(c)] for c in chunks]
    parts = [
        bp.board_rows(None, f, n_boot=5, seed=2, metrics=("fotu",)).resampled() for f in frames
    ]
    expected = bp.finalize_board(bp.merge_board_partials(parts))
    total = parts[0]
    for part in parts[1:]:
        total = bp.merge_board_partials([total, part], into_first=True)
    got = bp.finalize_board(total)
    for field in ("point", "replicates"):  # NaN where a resample draws none of a teacher's
        np.testing.assert_array_equal(
            getattr(got.metrics["fotu"], field), getattr(expected.metrics["fotu"], field)
        )


def test_weighted_sums_sparse_path_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sparse product, computed a block of draws at a time, by hand: problem 0 puts weight
    2 in column 1, problem 1 weight 3 in column 0 (twice 1.5, summed); draw b weighs problem 0
    by b and problem 1 by 1, so row b is [3, 2b]. 130 draws cross two block edges."""
    monkeypatch.setattr(cs, "_DENSE_LIMIT", 0)
    draws = np.column_stack([np.arange(130.0), np.ones(130)])
    got = cs.weighted_sums(
        draws, np.array([0, 1, 1]), np.array([1, 0, 0]), np.array([2.0, 1.5, 1.5]), width=2
    )
    assert got.flags.c_contiguous and got.shape == (130, 2)
    assert np.array_equal(got, np.column_stack([np.full(130, 3.0), 2 * np.arange(130.0)]))


def _plain_cell_rows(rows: pd.DataFrame, problems: pd.MultiIndex, statistic: str) -> dict:
    """What cell_rows must give, row by row in Python: the sorted cells, the (problem, slot,
    weight) triples, the distinct traces and the students of each (teacher, dataset)."""
    position = {key: i for i, key in enumerate(problems)}
    kept = []
    for row in rows.itertuples(index=False):
        value = float(row.v)
        if math.isnan(value) or (statistic == "entropy" and not 1 <= value <= cs.HAZARD_BINS):
            continue
        student = str(row.student) if "student" in rows else ""
        kept.append(
            (
                str(row.teacher),
                str(row.dataset),
                student,
                str(row.problem_id),
                str(row.trace_id),
                value,
            )
        )
    cells = sorted({(t, d, s) for t, d, s, *_ in kept})
    where = {cell: i for i, cell in enumerate(cells)}
    triples = []
    for t, d, s, p, _, value in kept:
        cell = where[(t, d, s)]
        if statistic == "mean":
            triples += [(position[(d, p)], 2 * cell, value), (position[(d, p)], 2 * cell + 1, 1.0)]
        else:
            triples.append((position[(d, p)], cell * cs.HAZARD_BINS + int(value) - 1, 1.0))
    traces: dict = {}
    students: dict = {}
    for t, d, s, _, trace, _ in kept:
        traces.setdefault((t, d), set()).add(trace)
        students.setdefault((t, d), set()).add(s)
    return {
        "cells": tuple(cells),
        "triples": sorted(triples),
        "traces": {pair: len(ids) for pair, ids in traces.items()},
        "students": {
            pair: frozenset(names) if "student" in rows else frozenset()
            for pair, names in students.items()
        },
    }


NAMES = st.sampled_from(["a", "b", "B", "a10", "a9", "é"])


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            NAMES,
            st.sampled_from(["d1", "d2"]),
            st.sampled_from(["p", "q", "r10", "r9"]),
            NAMES,
            st.sampled_from(["t1", "t2", "t3"]),
            st.one_of(st.just(math.nan), st.integers(0, 52).map(float)),
        ),
        max_size=25,
    ),
    st.booleans(),
    st.sampled_from(["mean", "entropy"]),
    st.sampled_from(["str", "object", "category"]),
)
def test_cell_rows_are_the_plain_row_by_row_sums(
    rows: list[tuple], with_student: bool, statistic: str, dtype: str
) -> None:
    # cell_rows works on each text column's codes; a plain reading of every row must agree
    frame = pd.DataFrame(
        rows, columns=["teacher", "dataset", "problem_id", "student", "trace_id", "v"]
    )
    for column in ["teacher", "dataset", "problem_id", "student", "trace_id"]:
        frame[column] = frame[column].astype(dtype)
    if not with_student:
        frame = frame.drop(columns="student")
    problems = pd.MultiIndex.from_product([["d2", "d1"], ["r9", "q", "p", "r10"]])
    got = cs.cell_rows(frame, "v", problems, statistic)
    expected = _plain_cell_rows(frame, problems, statistic)
    assert got.cells == expected["cells"]
    triples = zip(
        got.problem_index.tolist(), got.slot.tolist(), got.row_weights.tolist(), strict=True
    )
    assert sorted(triples) == expected["triples"]
    assert dict(got.traces) == expected["traces"]
    assert dict(got.students) == expected["students"]
