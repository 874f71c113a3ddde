"""Which traces the ``leaks`` stage (re)checks and the metrics stage refuses to read past:
:func:`precompute.stages.leaks.stale_leaks`, one case of its rule per trace, by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from precompute.stages.leaks import stale_leaks

PROBLEMS = {"p": {"gold": "4"}, "q": {"gold": 7}, "r": {"gold": None}, "s": {}}
# trace -> (its problem, why it is fresh or stale)
WANTED = {
    "fresh": ("p", "stored with the problem's gold and this grader"),
    "other_gold": ("p", "stored against gold 5"),
    "old_grader": ("p", "stored by grader 1"),
    "no_row": ("p", "never checked"),
    "numeric_gold": ("q", "gold 7 stored as the text '7'"),
    "no_gold": ("r", "a problem without gold, stored with none"),
    "no_gold_field": ("s", "a problem with no gold field, stored with an empty one"),
    "no_version": ("p", "stored without a grader version"),
    "stored_twice": ("p", "stored twice: the last row (fresh) counts"),
    "stale_last": ("p", "stored twice: the last row (old grader) counts"),
    "unknown_problem": ("x", "a problem not in the table: no gold, stored with none"),
}
STORED = [
    ("fresh", "4", 2),
    ("other_gold", "5", 2),
    ("old_grader", "4", 1),
    ("numeric_gold", "7", 2),
    ("no_gold", None, 2),
    ("no_gold_field", "", 2),
    ("no_version", "4", None),
    ("stored_twice", "9", 1),
    ("stored_twice", "4", 2),
    ("stale_last", "4", 2),
    ("stale_last", "4", 1),
    ("unknown_problem", None, 2),
]
STALE = ["other_gold", "old_grader", "no_row", "no_version", "stale_last"]


def _wanted(ids: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"trace_id": ids, "problem_id": [WANTED[t][0] for t in ids]})


@pytest.mark.parametrize("text_dtype", [object, "str"])
def test_each_case_of_the_rule_by_hand(text_dtype: object) -> None:
    stored = pd.DataFrame(STORED, columns=["trace_id", "gold", "grader_version"])
    stored = stored.astype({"trace_id": text_dtype, "gold": text_dtype})
    stored["grader_version"] = stored["grader_version"].astype("Int64")
    wanted = _wanted(list(WANTED)).astype(text_dtype)
    assert stale_leaks(wanted, stored, PROBLEMS, 2) == STALE


def test_order_and_repeats_of_the_wanted_traces_are_kept() -> None:
    stored = pd.DataFrame(STORED, columns=["trace_id", "gold", "grader_version"])
    ids = ["no_row", "fresh", "old_grader", "no_row"]
    assert stale_leaks(_wanted(ids), stored, PROBLEMS, 2) == ["no_row", "old_grader", "no_row"]


def test_nothing_stored_makes_every_trace_stale() -> None:
    stored = pd.DataFrame({"trace_id": [], "gold": [], "grader_version": []})
    ids = ["fresh", "no_gold"]
    assert stale_leaks(_wanted(ids), stored, PROBLEMS, 2) == ids
