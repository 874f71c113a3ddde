"""The redundancy sweep from mergeable partials (issue 43): per (teacher, dataset) the sum of
the trace shares at each τ and the trace count, added across chunks of traces and divided at
the end, so the metrics stage never reads ``similarity`` whole. A merge worked out by hand;
a merge of partials over different grids refused.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from legival_core.metrics.redundancy_sweep_view import (
    finalize_sweep,
    merge_sweep_partials,
    sweep_partial,
    teacher_redundancy_sweep,
)

NAN = float("nan")
TAUS = [0.0, 0.5, 0.8]


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Traces a, b, c of T on d, e of U on d; c has one step; g (T on d) was never embedded."""
    rows = [
        ("a", 0, NAN), ("a", 1, 0.9), ("a", 2, 0.3), ("a", 3, 0.82),
        ("b", 0, NAN), ("b", 1, 0.7), ("b", 2, 0.85),
        ("c", 0, NAN),
        ("e", 0, NAN), ("e", 1, 0.5),
    ]  # fmt: skip
    similarity = pd.DataFrame(rows, columns=["trace_id", "step", "max_similarity"])
    traces = pd.DataFrame(
        {
            "trace_id": ["a", "b", "c", "e", "g"],
            "teacher": ["T", "T", "T", "U", "T"],
            "dataset": ["d", "d", "d", "d", "d"],
        }
    )
    return similarity, traces


def test_partials_of_two_chunks_merge_by_hand() -> None:
    similarity, traces = _tables()
    # chunk 1: traces a and e; chunk 2: b, c and g (each chunk gets its own traces' rows)
    first_ids, second_ids = {"a", "e"}, {"b", "c", "g"}
    first = sweep_partial(
        similarity[similarity["trace_id"].isin(first_ids)],
        traces[traces["trace_id"].isin(first_ids)],
        TAUS,
    )
    second = sweep_partial(
        similarity[similarity["trace_id"].isin(second_ids)],
        traces[traces["trace_id"].isin(second_ids)],
        TAUS,
    )
    # Shares, |{i >= 1 : r_i > τ}| / (m - 1), at τ = 0, 0.5, 0.8:
    #   a: r = 0.9, 0.3, 0.82 (m - 1 = 3): 3/3, 2/3, 2/3
    #   e: r = 0.5 (m - 1 = 1):            1, 0 (0.5 is not > 0.5), 0
    #   b: r = 0.7, 0.85 (m - 1 = 2):      2/2, 2/2, 1/2
    #   c: one step: 0, 0, 0;  g: no rows, left out
    assert first.thresholds == second.thresholds == (0.0, 0.5, 0.8)
    np.testing.assert_allclose(first.sums[("T", "d")], [1.0, 2 / 3, 2 / 3], rtol=1e-15)
    np.testing.assert_allclose(first.sums[("U", "d")], [1.0, 0.0, 0.0], rtol=1e-15)
    assert first.counts == {("T", "d"): 1, ("U", "d"): 1}
    np.testing.assert_allclose(second.sums[("T", "d")], [1.0 + 0, 1.0 + 0, 0.5 + 0], rtol=1e-15)
    assert dict(second.counts) == {("T", "d"): 2}  # b and c; g never embedded
    merged = merge_sweep_partials(first, second)
    # T on d: sums (1 + 1, 2/3 + 1, 2/3 + 1/2) = (2, 5/3, 7/6) over n = 3
    #   → 2/3, 5/9, 7/18;  U on d: (1, 0, 0) over 1
    np.testing.assert_allclose(merged.sums[("T", "d")], [2.0, 5 / 3, 7 / 6], rtol=1e-15)
    assert merged.counts == {("T", "d"): 3, ("U", "d"): 1}
    table = finalize_sweep(merged)
    assert list(table.columns) == ["teacher", "dataset", "threshold", "redundancy", "n_traces"]
    assert table["teacher"].tolist() == ["T"] * 3 + ["U"] * 3
    assert table["threshold"].tolist() == TAUS * 2
    np.testing.assert_allclose(
        table["redundancy"], [2 / 3, 5 / 9, 7 / 18, 1.0, 0.0, 0.0], rtol=1e-15
    )
    assert table["n_traces"].tolist() == [3, 3, 3, 1, 1, 1]
    # neither input changed by the merge
    np.testing.assert_allclose(first.sums[("T", "d")], [1.0, 2 / 3, 2 / 3], rtol=1e-15)
    # the whole-table function is the partial over every trace, finalized: the same table
    whole = teacher_redundancy_sweep(similarity, traces, TAUS)
    pd.testing.assert_frame_equal(whole, table, rtol=1e-15)


def test_an_empty_chunk_merges_as_nothing_and_grids_must_agree() -> None:
    similarity, traces = _tables()
    empty = sweep_partial(similarity.iloc[:0], traces.iloc[:0], TAUS)
    assert not empty.sums and not empty.counts
    assert finalize_sweep(empty).empty
    whole = sweep_partial(similarity, traces, TAUS)
    pd.testing.assert_frame_equal(
        finalize_sweep(merge_sweep_partials(empty, whole)), finalize_sweep(whole)
    )
    other = sweep_partial(similarity, traces, [0.0, 0.5])
    with pytest.raises(ValueError, match="different thresholds"):
        merge_sweep_partials(whole, other)


def test_thresholds_in_any_order_and_repeated_count_each_on_its_own() -> None:
    """The shares are counted in one pass over bins of the sorted τ: a grid given out of order
    or with a τ twice gives each τ its own share, in the order given."""
    similarity, traces = _tables()
    table = teacher_redundancy_sweep(similarity, traces, [0.8, 0.0, 0.5, 0.5])
    t_on_d = table[table["teacher"] == "T"]
    assert t_on_d["threshold"].tolist() == [0.8, 0.0, 0.5, 0.5]
    # T on d (a, b, c), from the shares above: τ 0.8 → (2/3 + 1/2 + 0) / 3 = 7/18,
    # τ 0 → (1 + 1 + 0) / 3 = 2/3, τ 0.5 → (2/3 + 1 + 0) / 3 = 5/9
    np.testing.assert_allclose(t_on_d["redundancy"], [7 / 18, 2 / 3, 5 / 9, 5 / 9], rtol=1e-15)
    # U on d (e, r = 0.5): 0, 1, 0, 0
    assert table[table["teacher"] == "U"]["redundancy"].tolist() == [0.0, 1.0, 0.0, 0.0]
