"""Which traces the ``leaks`` stage (re)checks and the metrics stage refuses to read past:
:func:`precompute.stages.leaks.stale_leaks`, one case of its rule per trace, by hand."""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd
import pytest

from precompute.stages.leaks import stale_leaks

PROBLEMS = {"p": {"gold": "4"}, "q": {"gold": 7}, "r": {"gold": None}, "s": {}}
GRADER = 2


class Case(NamedTuple):
    trace: str
    problem: str
    #: its answer_leaks rows, in stored order: (gold, grader version)
    stored: list[tuple[str | None, int | None]]
    stale: bool


CASES = [
    Case("fresh", "p", [("4", GRADER)], False),
    Case("other_gold", "p", [("5", GRADER)], True),
    Case("old_grader", "p", [("4", 1)], True),
    Case("never_checked", "p", [], True),
    Case("no_version", "p", [("4", None)], True),
    # a gold given as a number is stored as its text
    Case("numeric_gold", "q", [("7", GRADER)], False),
    # no gold (missing, no field, or no such problem) is stored as none or as empty text
    Case("no_gold", "r", [(None, GRADER)], False),
    Case("no_gold_field", "s", [("", GRADER)], False),
    Case("unknown_problem", "x", [(None, GRADER)], False),
    # stored twice: the last row counts
    Case("fresh_last", "p", [("9", 1), ("4", GRADER)], False),
    Case("stale_last", "p", [("4", GRADER), ("4", 1)], True),
]


def _tables(cases: list[Case], text_dtype: object = object) -> tuple[pd.DataFrame, pd.DataFrame]:
    wanted = pd.DataFrame(
        {"trace_id": [c.trace for c in cases], "problem_id": [c.problem for c in cases]}
    )
    rows = [(c.trace, gold, version) for c in cases for gold, version in c.stored]
    stored = pd.DataFrame(rows, columns=["trace_id", "gold", "grader_version"])
    stored = stored.astype({"trace_id": text_dtype, "gold": text_dtype})
    stored["grader_version"] = stored["grader_version"].astype("Int64")
    return wanted.astype(text_dtype), stored


@pytest.mark.parametrize("text_dtype", [object, "str"])
def test_each_case_of_the_rule_by_hand(text_dtype: object) -> None:
    wanted, stored = _tables(CASES, text_dtype)
    assert stale_leaks(wanted, stored, PROBLEMS, GRADER) == [c.trace for c in CASES if c.stale]


def test_order_and_repeats_of_the_wanted_traces_are_kept() -> None:
    by_name = {c.trace: c for c in CASES}
    _, stored = _tables(CASES)
    ids = ["never_checked", "fresh", "old_grader", "never_checked"]
    wanted = pd.DataFrame({"trace_id": ids, "problem_id": [by_name[t].problem for t in ids]})
    expected = ["never_checked", "old_grader", "never_checked"]
    assert stale_leaks(wanted, stored, PROBLEMS, GRADER) == expected


def test_nothing_stored_makes_every_trace_stale() -> None:
    wanted, _ = _tables(CASES)
    stored = pd.DataFrame({"trace_id": [], "gold": [], "grader_version": []})
    assert stale_leaks(wanted, stored, PROBLEMS, GRADER) == list(wanted["trace_id"])
