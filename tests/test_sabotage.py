"""Sabotage injections change exactly what they record, and the answer step when they should."""

from __future__ import annotations

import difflib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.oversight.sabotage import INJECTORS, Edit, apply_edits, middle_steps, sabotage
from tests.oversight_helpers import STEPS, TEXT, spans_of

SPANS = spans_of(STEPS)


def changed_regions(a: str, b: str) -> list[tuple[int, int]]:
    """Spans of ``a`` that differ in ``b`` (found independently of the edit record)."""
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return [(i1, i2) for tag, i1, i2, _j1, _j2 in matcher.get_opcodes() if tag != "equal"]


def test_middle_third() -> None:
    # m = 6: 6 // 3 = 2 -> first middle step 2; 6 - 2 = 4 -> up to step 3.
    assert middle_steps(6) == [2, 3]


@pytest.mark.parametrize("kind", sorted(INJECTORS))
def test_injection_changes_exactly_what_it_records(kind: str) -> None:
    result = sabotage(TEXT, SPANS, kind, seed=1)
    assert result is not None
    assert result.kind == kind
    assert result.text != TEXT
    assert result.step in middle_steps(len(STEPS))
    # Replaying the record on the original gives the sabotaged text exactly.
    assert apply_edits(TEXT, result.edits) == result.text
    # Every character that differs lies inside a recorded edit span.
    for start, end in changed_regions(TEXT, result.text):
        assert any(e.start <= start and end <= e.end for e in result.edits), (start, end)
    # Each edit's old text is what the original had there, in the step it names.
    for edit in result.edits:
        assert TEXT[edit.start : edit.end] == edit.old
        s_start, s_end = SPANS[edit.step]
        assert s_start <= edit.start and edit.end <= max(s_end + 1, edit.end)


def test_number_is_carried_on_into_the_answer_step() -> None:
    # Only numbers in the middle steps (2, 3) are candidates. Whatever number is picked,
    # all of its later whole-token occurrences change too.
    for seed in range(10):
        result = sabotage(TEXT, SPANS, "number", seed=seed)
        assert result is not None
        first = result.edits[0]
        later = [m for m in range(first.end, len(TEXT)) if TEXT.startswith(first.old, m)]
        assert len(result.edits) >= 1
        if first.old == "48":
            # 48 appears in step 2 ("= 48") and step 3 ("48 - 3"); if step 2's 48 was hit,
            # step 3's must be carried; the answer (45) is not 48, so step 5 is untouched.
            assert 5 not in result.changed_steps
        if first.old == "45":
            # step 3 "= 45" carries on into "The answer is 45." -> the answer step changes.
            assert 5 in result.changed_steps
            assert result.text.endswith(f"The answer is {result.edits[-1].new}.")
        assert all(e.old == first.old and e.new == first.new for e in result.edits)
        assert len(later) + 1 >= len(result.edits)


def test_number_hand_worked() -> None:
    text = "We buy 5 eggs. Then 5 + 5 = 10 eggs. Half of 10 is 5. So 10 eggs in all. Done, 10."
    spans = [(0, 14), (15, 36), (37, 54), (55, 73), (74, 83)]
    # m = 5 -> middle steps: 5 // 3 = 1 .. 5 - 1 = 4 -> [1, 2, 3]
    result = sabotage(text, spans, "number", seed=3)
    assert result is not None
    # the new value differs from the old one and replaces every later occurrence
    first = result.edits[0]
    assert first.new != first.old
    remaining = result.text[first.start :]
    assert f" {first.old} " not in remaining.replace(f"{first.old}.", f"{first.old} ")


@pytest.mark.parametrize(
    ("kind", "text", "spans", "sabotaged", "also"),
    [
        pytest.param(
            "operator",
            "Start. We add: 7 + 2 = 9. End.",
            [(0, 6), (7, 25), (26, 30)],
            "Start. We add: 7 - 2 = 9. End.",
            # the answer step (2) is not touched
            {"edits": (Edit(1, 17, 18, "+", "-"),), "changed_steps": (1,)},
            id="operator_hand_worked",
        ),
        pytest.param(
            "sign",
            "Start. So x = -4 here. End.",
            [(0, 6), (7, 22), (23, 27)],
            "Start. So x = 4 here. End.",
            {"edits": (Edit(1, 14, 15, "-", ""),)},
            id="sign_prefers_a_negative_literal",
        ),
        pytest.param(
            "sign",
            "Start. So 9 - 4 = 5. End.",
            [(0, 6), (7, 20), (21, 25)],
            "Start. So 9 + 4 = 5. End.",
            {},
            id="binary_minus_is_not_a_negative_literal",
        ),
        pytest.param(
            "drop_step",
            "Start. Note the colour. Now 3 * 3 = 9. Also words. The answer is 9.",
            [(0, 6), (7, 23), (24, 38), (39, 50), (51, 67)],
            "Start. Note the colour. Also words. The answer is 9.",
            # middle steps of 5: [1, 2, 3]; only step 2 carries a computation.
            {"step": 2},
            id="drop_step_removes_a_computation",
        ),
    ],
)
def test_hand_worked_sabotage(
    kind: str, text: str, spans: list[tuple[int, int]], sabotaged: str, also: dict[str, object]
) -> None:
    result = sabotage(text, spans, kind, seed=0)
    assert result is not None
    assert result.text == sabotaged
    for field, value in also.items():
        assert getattr(result, field) == value, field


def test_no_place_returns_none() -> None:
    text = "One. Two. Three."
    spans = [(0, 4), (5, 9), (10, 16)]
    assert sabotage(text, spans, "operator") is None
    assert sabotage("Only one step.", [(0, 14)], "number") is None


def test_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown sabotage kind"):
        sabotage(TEXT, SPANS, "explode")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.text(alphabet="0123456789 +-*=xab.()", min_size=1, max_size=30), min_size=3, max_size=9
    ),
    st.sampled_from(sorted(INJECTORS)),
    st.integers(0, 50),
)
def test_property_record_replays(steps: list[str], kind: str, seed: int) -> None:
    text = " ".join(steps)
    spans = spans_of(steps)
    result = sabotage(text, spans, kind, seed=seed)
    if result is None:
        return
    assert apply_edits(text, result.edits) == result.text
    # Independent check: nothing before the first or after the last recorded edit changed.
    first = min(e.start for e in result.edits)
    last = max(e.end for e in result.edits)
    tail = len(text) - last
    assert result.text[:first] == text[:first]
    assert result.text[len(result.text) - tail :] == text[last:]
