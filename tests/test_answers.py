"""The answer layer (legival_core.grading.answers) and grading through it (Task.grade_text).

Spans are checked exactly (``text[start:end]``); the grader is measured against answers labelled
by reading (tests/fixtures/champ_answer_labels.csv, how they were made:
tests/fixtures/champ_answer_labels.md).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from legival_core.grading.answers import (
    answer_candidates,
    final_answer_candidates,
    first_accepted,
)
from legival_core.grading.scanning import closing_sentence_span
from legival_core.tasks import get_task
from legival_core.tasks.champ import statement_matches
from tests.champ_fixtures import ingest_labelled_replies

LABELS = Path(__file__).resolve().parent / "fixtures" / "champ_answer_labels.csv"


def texts(candidates: list) -> list[str]:
    return [c.text for c in candidates]


def test_every_candidate_span_is_an_exact_slice() -> None:
    source = (
        "We try small cases. Hmm, $n = 3$ gives 4. So the answer is \\boxed{2^{n-1}}.\n\n"
        "There are $2^{n-1}$ sequences, i.e. the count is 2^(n-1) for every n = 1, 2, 3."
    )
    found = answer_candidates(source)
    assert found
    for candidate in found:
        assert source[candidate.start : candidate.end] == candidate.text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the prose answers
        ("so there are 239 strings", "239"),
        ("Adding up, the answer is $2^{n-1}$.", "$2^{n-1}$"),
        ("No, it cannot.", "No"),
        # copula tails, with and without qualifiers
        ("The number of involutions is 76.", "76"),
        ("The smallest value is 0, achieved when all x_i are equal.", "0"),
        ("It is given by the expression (2n)! / (2^n * n!).", "(2n)! / (2^n * n!)"),
        ("The expansion will have 2,001,000 terms.", "2,001,000"),
        ("The count is n factorial (n!).", "n!"),
        ("The total is S = n(n+1)/2.", "n(n+1)/2"),
    ],
)
def test_prose_answers_are_candidates(text: str, expected: str) -> None:
    assert expected in texts(final_answer_candidates(text))


def test_a_box_is_the_committed_answer_nested_and_escaped_braces_included() -> None:
    text = r"First \boxed{3}. Then \boxed{\frac{1}{2}} and \{not a box\}, so \boxed{\{1, 2\}}."
    # the last box wins; its content keeps the escaped braces
    assert texts(final_answer_candidates(text)) == [r"\{1, 2\}"]
    boxes = [c.text for c in answer_candidates(text) if c.kind == "boxed"]
    assert boxes == ["3", r"\frac{1}{2}", r"\{1, 2\}"]
    assert texts(final_answer_candidates(r"cut off \boxed{\frac{1}{")) != [r"\frac{1}{"]


def test_an_answer_phrase_beats_the_closing_sentence() -> None:
    text = "So the final answer is 12. We double check: 3 * 4 = 12, done in 5 minutes."
    assert texts(final_answer_candidates(text)) == ["12"]


def test_a_list_of_values_is_one_answer() -> None:
    # "0, 1, or -1" holds the gold 0 among other values: it is one (wrong) answer, never "0".
    found = final_answer_candidates("The remainder is $0$, $1$, or $-1$.")
    assert ("list", "$0$, $1$, or $-1$") in [(c.kind, c.text) for c in found]
    assert "0" not in texts(found)
    found = final_answer_candidates("The values are 0 and any positive integer below 100.")
    assert "0" not in texts(found)


def test_numbers_that_restate_the_problem_are_not_candidates() -> None:
    found = final_answer_candidates("The number of strings of length 5 with no two 1s is 96.")
    assert "96" in texts(found)
    assert "5" not in texts(found) and "1" not in texts(found)


def test_closing_sentence_skips_math_and_trailing_blank_lines() -> None:
    text = "Step one. We get $a. b$ as before.\n\n"
    start, end = closing_sentence_span(text)
    assert text[start:end].strip() == "We get $a. b$ as before."


def test_first_accepted_returns_the_span_of_the_match() -> None:
    text = "There are 89 subsets."
    found = first_accepted(final_answer_candidates(text), lambda a: a == "89")
    assert found is not None and text[found.start : found.end] == "89"


def test_statement_golds_match_in_order_and_close_together() -> None:
    assert statement_matches("No integer solutions", "There are no integer solutions.")
    # the words are there, but far apart: "no simple general solution ... possible solutions"
    assert not statement_matches(
        "No possible solutions",
        "It has no simple general solution, and finding all possible solutions is hard.",
    )
    assert statement_matches("At least 1 number", "At least one of the three numbers is even.")


def test_grade_text_records_kind_field_and_span() -> None:
    champ = get_task("champ")
    summary = "The number of strings is 239."
    graded = champ.grade_text({"answer_text": summary, "reasoning": "..."}, "239")
    assert graded.grade.correct and graded.field == "answer_text"
    assert graded.span is not None and summary[graded.span[0] : graded.span[1]] == "239"
    # a box decides, through the task's own extractor
    boxed = champ.grade_text({"answer_text": r"so \boxed{240}", "reasoning": "239"}, "239")
    assert not boxed.grade.correct and boxed.kind == "task" and boxed.answer == "240"
    # an empty summary falls through to the reasoning
    fallback = champ.grade_text({"answer_text": "", "reasoning": "So there are 239."}, "239")
    assert fallback.grade.correct and fallback.field == "reasoning"
    nothing = champ.grade_text({"answer_text": "", "reasoning": "  "}, "239")
    assert nothing.grade.status == "no_answer" and nothing.answer is None


@pytest.mark.slow
def test_grader_agrees_with_the_hand_labels() -> None:
    """The CHAMP grader against 83 answers labelled by reading (80 drawn + 3 "No mistake").

    Agreement target: at least 95% (issue 13); every trace CHAMP's annotators marked "No
    mistake" graded correct (the label file lists none whose summary states another answer).
    """
    from precompute.champ import champ_traces

    labels = pd.read_csv(LABELS, dtype=str, keep_default_na=False)
    traces = champ_traces(include_human=False, count_tokens=False).set_index(
        ["problem_id", "teacher"]
    )
    champ = get_task("champ")
    graded = {}
    for row in labels.itertuples():
        trace = traces.loc[(row.problem_id, row.teacher)]
        texts_of = {"answer_text": trace["answer_text"], "reasoning": trace["reasoning"]}
        graded[(row.problem_id, row.teacher)] = champ.grade_text(texts_of, row.gold).grade.correct
    labels["graded"] = [graded[(r.problem_id, r.teacher)] for r in labels.itertuples()]
    labels["agree"] = labels["graded"] == (labels["label"] == "correct")
    agreement = labels["agree"].mean()
    disagreements = labels.loc[~labels["agree"], ["problem_id", "teacher", "label"]]
    assert len(labels) == 83
    assert agreement >= 0.95, disagreements.to_string()
    no_mistake = labels[labels["no_mistake_annotation"] == "true"]
    assert len(no_mistake) == 6 and no_mistake["graded"].all()


@pytest.mark.slow
def test_recorded_prose_answers_ingested_as_a_user_would_grade_like_the_hand_labels(
    tmp_path: Path,
) -> None:
    """Issue 13's user path: recorded CHAMP solutions with their prose one-sentence answers in a
    JSONL file, ``python -m precompute ingest FILE --task champ``. Before the answer layer
    every such row graded wrong (no box, no extracted answer)."""
    from legival_core.store.schema import trace_id_for
    from legival_core.store.store import Store
    from precompute.champ import champ_traces

    labels = pd.read_csv(LABELS, dtype=str, keep_default_na=False)
    traces = champ_traces(include_human=False, count_tokens=False).set_index(
        ["problem_id", "teacher"]
    )
    store_path = tmp_path / "store"
    code = ingest_labelled_replies(
        labels,
        lambda row: traces.loc[(row.problem_id, row.teacher)],
        tmp_path / "recorded.jsonl",
        store_path,
    )
    assert code == 0
    grades = Store.open(store_path).read("grades").set_index("trace_id")
    assert len(grades) == len(labels)
    graded = [
        bool(grades.loc[trace_id_for(r.teacher, r.problem_id, 0), "correct"])
        for r in labels.itertuples()
    ]
    agreement = (pd.Series(graded) == (labels["label"] == "correct")).mean()
    assert agreement >= 0.95
    # every correct grade names the candidate it accepted, inside the answer text
    accepted = grades[grades["correct"]]
    assert accepted["answer_kind"].notna().all() and accepted["answer_start"].notna().all()


@pytest.mark.parametrize(
    ("steps", "gold", "leak_k", "stated"),
    [
        # the prose answers, each stated in the third step
        (["We count by cases.", "Length 1 gives 3.", "So there are 239 strings."], "239", 3, "239"),
        (
            ["Try n = 1, 2, 3.", "The pattern doubles.", "So the answer is $2^{n-1}$."],
            "2^(n-1)",
            3,
            "$2^{n-1}$",
        ),
        (["Suppose it can.", "Then the sum is odd.", "No, it cannot."], "No", 3, "No"),
        # a box in the second step; the number 4 in step 1 restates the problem, not the gold 6
        (["We need 4 cards.", r"Thus \boxed{6}.", "Check."], "6", 2, "6"),
        # a restated question is not an answer, though "2 + 3" equals the gold
        (["Let me read the question: What is 2 + 3?", "So the total is 5."], "5", 2, "5"),
        # never stated: no leak
        (["We try.", "It is hard.", "Stop."], "239", None, None),
    ],
)
def test_the_leak_step_is_the_first_prefix_that_states_the_gold(
    steps: list[str], gold: str, leak_k: int | None, stated: str | None
) -> None:
    reasoning = " ".join(steps)
    ends = []
    for step in steps:
        ends.append(reasoning.index(step) + len(step))
    point = get_task("champ").answer_leak_step(reasoning, ends, gold)
    assert point.status == "ok" and point.k == leak_k
    if stated is not None:
        assert point.span is not None and reasoning[point.span[0] : point.span[1]] == stated


def test_metrics_tables_carry_the_leak_and_fotu_before_it() -> None:
    """leak_table + transfer_table + teacher_table on one trace of 4 steps, worked by hand."""
    from precompute.stages.leaks import leak_table
    from precompute.stages.metrics import teacher_table, transfer_table

    reasoning = "Set up. Count pairs. So there are 12 pairs. Done."
    steps = pd.DataFrame({"trace_id": "t", "step": [0, 1, 2, 3], "end": [7, 20, 43, 49]})
    traces = pd.DataFrame({"trace_id": ["t"], "problem_id": ["p"], "reasoning": [reasoning]})
    problems = {"p": {"problem_id": "p", "task": "champ", "gold": "12"}}
    rollouts = pd.DataFrame(
        {"teacher": "T", "dataset": "D", "student": "S", "trace_id": "t", "problem_id": "p",
         "k": [0, 1, 2, 3, 4], "m": 4, "sample": 0, "correct": [0.0, 0.0, 1.0, 1.0, 1.0]}
    )  # fmt: skip
    leaks = leak_table(rollouts, traces, steps, problems, timeout_s=10.0)
    assert leaks["leak_k"].tolist() == [3]  # "So there are 12 pairs." is step 3
    table = transfer_table(rollouts, "paper", "interpolate", leaks).iloc[0]
    # Paper bins: k=1 -> 13, k=2 -> 25, k=3 -> 38, k=4 -> 50. FOTU: bins 1..13 hold 0,
    # 14..24 rise linearly to 1 at 25 (sum 11*12/2/12 = 5.5), 25..50 hold 1 (26 bins):
    # (5.5 + 26) / 50 = 0.63. Before the leak only k = 1, 2 count (bins 13 and 25): mean of the
    # curve over bins 1..25 = (0*13 + 5.5 + 1) / 25 = 0.26.
    assert table["leak_k"] == 3
    assert table["fotu"] == pytest.approx(0.63)
    assert table["fotu_before_leak"] == pytest.approx(0.26)
    efficiency = pd.DataFrame(
        {"teacher": ["T"], "dataset": ["D"], "correct": [True], "tokens": [10],
         "redundancy": [0.0], "backtracking": [0.0]}
    )  # fmt: skip
    tm = teacher_table(
        efficiency, rollouts, "paper", "interpolate", 0, transfer_table(rollouts, "paper",
        "interpolate", leaks)
    )  # fmt: skip
    assert tm["fotu_before_leak"].iloc[0] == pytest.approx(0.26)
