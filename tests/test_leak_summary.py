"""First solves against the answer leak, per teacher (legival_core.metrics.leak_summary), by
hand."""

from __future__ import annotations

import math

import pandas as pd

from legival_core.metrics.leak_summary import first_solve_positions, leak_summary


def _rollouts(rows: list[tuple[str, str, int, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["trace_id", "student", "k", "correct"])


def test_first_solve_is_the_smallest_k_correct_at_least_half_the_time() -> None:
    frame = _rollouts(
        [
            # t1: two samples at k = 3 (1 of 2 correct: mean 0.5 counts), k = 6 correct.
            ("t1", "s", 0, 0.0),
            ("t1", "s", 3, 1.0),
            ("t1", "s", 3, 0.0),
            ("t1", "s", 6, 1.0),
            # t2: solved by the student alone (k = 0).
            ("t2", "s", 0, 1.0),
            ("t2", "s", 3, 0.0),
            # t3: one correct sample in three at k = 3 (mean 1/3 < 0.5): never solved.
            ("t3", "s", 0, 0.0),
            ("t3", "s", 3, 1.0),
            ("t3", "s", 3, 0.0),
            ("t3", "s", 3, 0.0),
        ]
    )
    got = first_solve_positions(frame).set_index("trace_id")["first_k"]
    assert got["t1"] == 3 and got["t2"] == 0 and got.isna()["t3"]


def test_leak_summary_counts_first_solves_at_or_after_the_leak() -> None:
    transfer = pd.DataFrame(
        {
            "trace_id": ["a", "b", "c", "d"],
            "student": ["s"] * 4,
            "teacher": ["T", "T", "T", "U"],
            "fotu": [0.5, 0.25, 0.0, 1.0],
            "leak_k": pd.array([6, 6, None, 3], dtype="Int64"),
            "fotu_before_leak": [0.0, 0.5, math.nan, 1.0],
        }
    )
    rollouts = _rollouts(
        [
            ("a", "s", 0, 0.0), ("a", "s", 3, 0.0), ("a", "s", 6, 1.0),  # first 6 = leak 6
            ("b", "s", 0, 0.0), ("b", "s", 3, 1.0), ("b", "s", 6, 1.0),  # first 3 < leak 6
            ("c", "s", 0, 0.0), ("c", "s", 3, 0.0),  # never solved, no leak
            ("d", "s", 0, 1.0), ("d", "s", 3, 1.0),  # solved alone (k = 0 < leak 3)
        ]
    )  # fmt: skip
    table = leak_summary(transfer, rollouts).set_index("teacher")
    t = table.loc["T"]
    # T: 3 pairs, 2 with a leak (a, b), 2 ever solved (a, b), 1 at or after its leak (a).
    assert (t["pairs"], t["leaks"], t["first_solves"], t["at_or_after_leak"]) == (3, 2, 2, 1)
    assert t["share_at_or_after_leak"] == 0.5  # 1 / 2
    assert math.isclose(t["fotu"], (0.5 + 0.25 + 0.0) / 3)  # 0.25
    assert t["fotu_before_leak"] == 0.25  # (0.0 + 0.5) / 2, c has none (NaN left out)
    u = table.loc["U"]
    assert (u["first_solves"], u["at_or_after_leak"], u["share_at_or_after_leak"]) == (1, 0, 0.0)


def test_leak_summary_of_nothing_is_an_empty_table() -> None:
    empty = pd.DataFrame(
        columns=["trace_id", "student", "teacher", "fotu", "leak_k", "fotu_before_leak"]
    )
    assert leak_summary(empty, _rollouts([])).empty


def test_headline_never_calls_an_unmeasured_fotu_before_leak_zero() -> None:
    """A teacher whose traces all leak before any measured prefix (k = 0 and k = m measured,
    the leak at step 2: nothing kept before it) has FOTU before leak NaN, not 0 (its docs:
    "left out of the second mean"). The headline said "is 0 for 1 of 1 model teachers" on such
    a store of my own; it must say the value could not be measured instead, and keep "is 0"
    for a measured 0."""
    from legival_core.metrics.leak_summary import leak_headline

    table = pd.DataFrame(
        {
            "teacher": ["unmeasured", "zero", "fine", "human"],
            "first_solves": [3, 2, 2, 5],
            "at_or_after_leak": [3, 1, 0, 5],
            "fotu_before_leak": [float("nan"), 0.0, 0.4, float("nan")],
        }
    )
    text = leak_headline(table, ["human"], "below")
    assert text is not None
    # 3 + 1 + 0 = 4 of 3 + 2 + 2 = 7 model first solves come at or after the leak
    assert "4 of 7 first solves" in text
    assert "FOTU before the leak is 0 for 1 of 3 model teachers" in text
    assert "and cannot be measured for 1 of 3 model teachers" in text
    only_unmeasured = leak_headline(table.iloc[[0]], [], "below")
    assert only_unmeasured is not None and "is 0 for" not in only_unmeasured
    assert "cannot be measured for 1 of 1 model teachers" in only_unmeasured
