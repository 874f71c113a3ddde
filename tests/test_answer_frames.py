"""Issue 23: answers read in the frame of their question; hedges, lists, negations and restated
givens are never the gold; the whole search runs in linear time inside the deadline.

Each shape below is one the issue's outside probe (or its CHAMP "Problem C w/ H" run) found
graded the wrong way, written as ``grade_text`` sees it: a model's one-sentence answer, the
gold in CHAMP's convention and the problem's prompt (the question type comes from it).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.grading.answers import AnswerFrame, final_answer_candidates
from legival_core.grading.polarity import polarity
from legival_core.grading.questions import question_type
from legival_core.grading.scanning import expression_end
from legival_core.tasks import get_task

# A generous deadline for work that must finish well under it: a grade's status "ok" says it
# did (the worker's own clock, start-up left out). The old code took 8.5 s on 24 digits and
# doubled per digit; hours on 2 MB.
DEADLINE_S = 30.0


def graded(text: str, gold: str, prompt: str = "", task: str = "champ"):
    problem = {"problem_id": "p", "prompt": prompt} if prompt else None
    return get_task(task).grade_text({"answer_text": text}, gold, problem=problem)


def class_cases(name: str, prompt: str, rows: list[tuple[Any, ...]]) -> list[Any]:
    """The cases of one grader class as test parameters: ``prompt`` (the question they answer)
    followed by each row, with ids made of ``name`` (the class) and the row's place."""
    return [pytest.param(prompt, *row, id=f"{name}-{index}") for index, row in enumerate(rows)]


def replies(name: str, prompt: str, gold: str, cases: list[tuple[str, bool]]) -> list[Any]:
    """:func:`class_cases` of ``(reply, gold, right)`` for a class whose replies all answer one
    ``gold`` (``right``: whether the reply is right for it)."""
    return class_cases(name, prompt, [(text, gold, right) for text, right in cases])


# --- hedges and lists are not the gold (item 2) ---------------------------------------------------

HEDGES_AND_LISTS = [
    ("We get $0$, $1$, or $-1$.", "0"),  # docs/grading.md's own example of what is never 0
    ("So x = 3 or x = 239.", "239"),
    ("So x = 3 or x = 239.", "3"),
    ("There are 3 or 239 strings.", "239"),
    ("There are 3 or 239 strings.", "3"),
    ("Possible answers: $3$, $239$.", "239"),
    ("Possible answers: $3$, $239$.", "3"),
    ("Hence the value is 3 (or possibly 239)", "3"),
    ("Hence the value is 3 (or possibly 239)", "239"),
    ("The answer is 3 or 239.", "3"),
    ("The values are 0 and any positive integer below 100.", "0"),
    ("The remainder is 0 to 4, depending on n.", "0"),
    ("The count is perhaps 12.", "12"),
    ("Either 5 or 7 works, so the value is 5 or 7.", "7"),
]


@pytest.mark.parametrize("task", ["champ", "math"])
@pytest.mark.parametrize(("text", "gold"), HEDGES_AND_LISTS)
def test_hedges_and_lists_holding_the_gold_are_wrong(text: str, gold: str, task: str) -> None:
    result = graded(text, gold, "Find the value of x.", task=task)
    assert result.grade.status == "ok"
    assert not result.grade.correct, (result.kind, result.answer)


def test_a_list_is_right_when_the_gold_is_that_set() -> None:
    result = graded("The solutions are 3 and 239.", "3, 239", "Find all x with f(x) = 0.")
    assert result.grade.correct and result.kind == "list"
    assert result.question_type == "find_all"


# --- negations and yes/no hedges ------------------------------------------------------------------

NEGATED = [
    ("It is false that there are no integer solutions.", "No integer solutions"),
    ("We cannot conclude that there are no integer solutions.", "No integer solutions"),
    ("It is false that there are no integer solutions.", "No"),
    ("Yes or no, I cannot tell.", "Yes"),
    ("Yes and no.", "Yes"),
    ("Yes and no.", "No"),
    ("No doubt, it can.", "No"),
]


@pytest.mark.parametrize(("text", "gold"), NEGATED)
def test_negations_and_yes_no_hedges_are_wrong(text: str, gold: str) -> None:
    result = graded(text, gold, "Are there integer solutions to x^2 - 3y^2 = 2? Can it be done?")
    assert not result.grade.correct, (result.kind, result.answer)


# --- yes/no questions answered by a statement (item 1) --------------------------------------------

STATEMENTS = [
    ("Are there integer solutions to (x^2-1)(y^2-1)+1985=z^2?",
     "There are no integer solutions to the equation.", "No"),
    ("Is 4^545+545^4 a prime number?", "4^545+545^4 is not a prime number.", "No"),
    ("Do there exist positive integers x, y with x+y and x+2y both squares?",
     "There do not exist such integers.", "No"),
    ("Can the board be tiled by dominoes?",
     "Not only can the board be tiled, but it can be tiled in two ways.", "Yes"),
    ("Can the sequence be extended indefinitely?",
     "The sequence can be extended indefinitely without a division by zero.", "Yes"),
    ("Are there integer solutions to x^2 = 3y^2 + 2?",
     "There are no integer solutions, as squares are 0 or 1 mod 3 and this is not.", "No"),
    ("Must x_n≠0 for all n in the sequence?",
     "The sequence does not contain any zero elements.", "Yes"),
]  # fmt: skip


@pytest.mark.parametrize(("prompt", "text", "gold"), STATEMENTS)
def test_yes_no_questions_answered_by_a_statement(prompt: str, text: str, gold: str) -> None:
    right = graded(text, gold, prompt)
    assert right.grade.correct and right.kind == "polarity", (right.kind, right.answer)
    assert right.question_type == "yes_no"
    other = "Yes" if gold == "No" else "No"
    assert not graded(text, other, prompt).grade.correct


def test_polarity_counts_negations_of_the_main_clause() -> None:
    # one negation -> No; two -> Yes; a reason clause ("because … not …") does not count
    assert polarity("There are no solutions.") == "no"
    assert polarity("It is false that there are no solutions.") == "yes"
    assert polarity("There are no solutions, because 2 is not a square.") == "no"
    assert polarity("A is about 0.01, which means A is not greater than 0.1.") == "no"


# --- counts, trailing clauses, residues (item 1) --------------------------------------------------


def test_a_trailing_clause_is_cut() -> None:
    text = "The minimum value of m + n is 11, achieved when m = 1 and n = 2."
    prompt = "Find the minimum of m + n over positive integers with m^2 + n = 3."
    right = graded(text, "11", prompt)
    assert right.grade.correct and right.answer == "11"
    assert text[right.span[0] : right.span[1]] == "11"
    # the "n = 2" of the trailing clause is no answer
    assert not graded(text, "2", prompt).grade.correct


def test_at_least_one_states_at_least_1_number() -> None:
    text = "At least one of the three integers a, b, c must be divisible by 3."
    prompt = "Show how many of the integers a, b, c must be divisible by 3."
    assert graded(text, "At least 1 number", prompt).grade.correct


def test_a_count_read_from_words() -> None:
    prompt = "How many primes p make p^2 + 2 prime?"
    assert graded("There is exactly one such prime.", "1", prompt).grade.correct
    assert graded("No such prime exists.", "0", prompt).grade.correct
    assert not graded("There is exactly one such prime.", "2", prompt).grade.correct


def test_a_residue_for_all_n_answers_a_possible_values_gold() -> None:
    text = "n^5 - 5n^3 + 4n is congruent to 0 modulo 120 for any integer n."
    prompt = "What are the possible values of n^5 - 5n^3 + 4n mod 120?"
    result = graded(text, "0 is the only possible value", prompt)
    assert result.grade.correct and result.kind == "congruence"
    assert result.question_type == "mod_value"


# --- the six disagreements of the first test half, each as a class -----------------------------
# Real CHAMP prompts and recorded replies (tests/fixtures/champ_settings_labels_test.csv, the half
# that became development data once looked at); each rule is written for the class, the variants
# below are not recorded texts.

INEQ40 = (
    "For positive a, b, c, at most how many of the three inequalities a(1-b)>1/4, b(1-c)>1/4, "
    "c(1-a)>1/4 can be true at the same time?"
)


def test_a_bound_in_words_answers_a_count_and_a_gold_with_its_noun() -> None:
    # 1/3 Soln, GPT-4 Turbo: "at most two" for "at most how many"; the gold names its noun
    text = (
        "At most two of the inequalities \\( a(1-b) > \\frac{1}{4} \\), \\( b(1-c) > "
        "\\frac{1}{4} \\), \\( c(1-a) > \\frac{1}{4} \\) can be true at the same time for "
        "positive \\( a, b, c \\)."
    )
    right = graded(text, "2 inequalities", INEQ40)
    assert right.grade.correct and (right.kind, right.answer) == ("count", "2")
    assert right.question_type == "count"
    assert not graded(text.replace("two", "one"), "2 inequalities", INEQ40).grade.correct
    at_least = graded("At least three of them hold.", "3 numbers", "How many of them hold?")
    assert at_least.grade.correct


def test_a_count_gold_with_its_noun_accepts_the_number_of_a_long_sentence() -> None:
    # 5-Shot, GPT-4 Turbo: the sentence goes on after "98 values"; the gold is "98 values"
    prompt = (
        "If a, b, c are sides of a non-degenerate 90-degree triangle with c being the hypotenuse, "
        "then for how many values of n in {1, 2, 3, ..., 100} do we have c^n>a^n+b^n?"
    )
    text = (
        "There are 98 values of n in the set {1, 2, 3, ..., 100} for which \\( c^n > a^n + b^n "
        "\\) for a non-degenerate 90-degree triangle with sides a, b, and hypotenuse c."
    )
    right = graded(text, "98 values", prompt)
    assert right.grade.correct and right.answer == "98"
    assert not graded(text.replace("98", "97"), "98 values", prompt).grade.correct
    # the set {1, 2, 3, ..., 100} of the question is no answer "3 values"
    assert not graded(text, "3 values", prompt).grade.correct


SEQ41 = (
    "For a>0, does the limit of the sequence defined by a_0=sqrt(a), a_(n+1)=sqrt(a+a_n) exist, "
    "and if so, find it as an expression of a."
)
LIMIT_GOLD = "The limit exists and is equal to (1+sqrt(4a+1))/2"


def test_a_limit_given_as_its_value_states_that_it_exists() -> None:
    # 1/3 Soln, GPT-4 Turbo: "… is L = …" for the gold "the limit exists and is equal to …"
    text = (
        "The limit of the sequence defined by \\( a_0 = \\sqrt{a} \\) and \\( a_{n+1} = "
        "\\sqrt{a + a_n} \\) for \\( a > 0 \\) is \\( L = \\frac{1 + \\sqrt{1 + 4a}}{2} \\)."
    )
    assert graded(text, LIMIT_GOLD, SEQ41).grade.correct
    wrong = text.replace("1 + \\sqrt", "1 - \\sqrt")
    assert not graded(wrong, LIMIT_GOLD, SEQ41).grade.correct
    assert not graded("The limit does not exist.", LIMIT_GOLD, SEQ41).grade.correct
    # a restated given is not the value: a_0 = sqrt(a) is no limit sqrt(a)
    gold = "The only possible value for the limit is sqrt(a)"
    assert not graded("The sequence with $a_0 = \\sqrt{a}$ diverges.", gold, SEQ41).grade.correct


SEQ37 = (
    "The sequence {x_n} is defined by x_1=2, x_(n+1)=(2+x_n)/(1\u22122x_n). Must x_n\u22600 for "
    "all n in the sequence?"
)


def test_a_yes_no_answered_by_the_condition_itself() -> None:
    # 1/3 Soln, PaLM 2: the reply restates the asked condition "x_n ≠ 0 for all n" as true
    text = (
        "The sequence $x_n$ defined by $x_1=2$ and $x_{n+1}=(2+x_n)/(1-2x_n)$ is such that "
        "$x_n\\neq 0$ for all $n$."
    )
    right = graded(text, "Yes", SEQ37)
    assert right.grade.correct and right.kind == "polarity"
    assert not graded(text, "No", SEQ37).grade.correct
    # the same reply to the question asked the other way round ("is some x_n = 0?") is No
    other = "The sequence {x_n} is defined by x_1=2. Is x_n=0 for some n?"
    assert graded(text, "No", other).grade.correct
    # a "≠" in the subject of the claim is no negation of it
    prompt = "Let x_1 = 2. Could x_p=x_q for some p≠q? If so, find the least p+q."
    reply = "The smallest value of p + q with x_p = x_q and p≠q is 3."
    assert not graded(reply, "No", prompt).grade.correct


def test_a_comma_inside_a_restated_definition_does_not_cut_the_main_clause() -> None:
    # Problem C w/o H, GPT-3.5: the comma of "a_1=1, a_(n+1)=…" cut the clause before its verb
    prompt = (
        "A sequence {a_n} is defined by a_1=1, a_(n+1)=a_n+1/a_n^2. Does a finite limit of a_n "
        "exist, and if so, find it."
    )
    text = "The sequence {a_n} defined by a_1=1, a_(n+1)=a_n+1/a_n^2 does not have a finite limit."
    result = graded(text, "The limit does not exist", prompt)
    assert result.grade.correct and (result.kind, result.answer) == ("polarity", "No")
    assert not graded(text, "Yes", prompt).grade.correct
    # a comma between clauses still cuts: the reason's negation is not the claim's
    reason = "The sequence has a finite limit, as a_(n+1) - a_n is not large."
    assert not graded(reason, "The limit does not exist", prompt).grade.correct


def test_a_claim_about_something_else_answers_neither_yes_nor_no() -> None:
    # Problem C w/ H, PaLM 2 (labelled no_answer, graded Yes): "no repeated terms" says nothing
    # about x_n ≠ 0; through the question's negation its "no" had read as Yes
    text = (
        "The sequence $x_n$ defined by $x_1=2$ and $x_{n+1} = \\frac{2 + x_n}{1 - 2x_n}$ has no "
        "repeated terms."
    )
    for gold in ("Yes", "No"):
        result = graded(text, gold, SEQ37)
        assert not result.grade.correct, (gold, result.kind, result.answer)
    # the claim about the asked condition still answers it
    assert graded("The sequence has no zero terms.", "Yes", SEQ37).grade.correct


# --- the held-out half's disagreements, each as a class ------------------------------------------
# The held-out half (tests/fixtures/champ_settings_labels_heldout.csv) was scored once, then read;
# four of its five disagreements were grader classes. The prompts and replies below are written
# for these tests in the shape of the recorded ones, with their kin; none is a recorded text.

LIMIT_PROMPT = (
    "A sequence {b_n} is defined by b_1=2, b_(n+1)=b_n+1/b_n. Does a finite limit of b_n "
    "exist, and if so, find it."
)
NO_LIMIT = "The limit does not exist"


@pytest.mark.parametrize(
    "text",
    [
        "The sequence $\\{b_n\\}$ diverges to infinity.",
        "The sequence b_n tends to infinity.",
        "Therefore, the sequence is unbounded.",
        "The terms b_n grow without bound.",
        "Hence the sequence is divergent.",
        "So b_n increases without bound, since each step adds a positive amount.",
    ],
)
def test_a_divergence_claim_denies_that_the_limit_exists(text: str) -> None:
    # Example C w/o H, PaLM 2 ("diverges to infinity", labelled right): a claim that the
    # sequence diverges answers "does a (finite) limit exist?" with No
    result = graded(text, NO_LIMIT, LIMIT_PROMPT)
    assert result.grade.correct and (result.kind, result.answer) == ("polarity", "No"), result
    assert not graded(text, "Yes", LIMIT_PROMPT).grade.correct
    assert not graded(text, "The limit exists and is equal to 2", LIMIT_PROMPT).grade.correct


def test_divergence_is_read_against_what_the_question_asks() -> None:
    # a negated divergence affirms the limit; "as n tends to infinity" is no claim of divergence
    assert graded("The sequence does not diverge.", "Yes", LIMIT_PROMPT).grade.correct
    settles = "As n tends to infinity, the sequence settles down to a finite limit."
    assert not graded(settles, NO_LIMIT, LIMIT_PROMPT).grade.correct
    # a question that asks about divergence itself: divergence is its Yes
    asks = "A sequence {b_n} is defined by b_1=2, b_(n+1)=b_n+1/b_n. Does b_n diverge?"
    assert graded("The sequence b_n tends to infinity.", "Yes", asks).grade.correct
    assert graded("The sequence b_n converges to a finite limit.", "No", asks).grade.correct
    # a question about no limit: "unbounded" keeps its plain Yes
    bounded = "Let f(x) = x^3 - x. Is f unbounded on the real line?"
    assert graded("The function f is unbounded on the real line.", "Yes", bounded).grade.correct


COUNT_MOD_PROMPT = (
    "For how many integers n in {1, 2, ..., 60} does n^2+n+1 leave a remainder of 1 when "
    "divided by 3?"
)


@pytest.mark.parametrize(
    "text",
    [
        "For 40 values of n in {1, 2, ..., 60}, n^2+n+1 leaves a remainder of 1 when divided by 3.",
        "For exactly 40 values of n, the remainder is 1.",
        "In 40 cases, n^2+n+1 leaves a remainder of 1.",
        "Therefore, for all 40 such integers n, the remainder of n^2+n+1 is 1.",
    ],
)
def test_a_count_stated_as_for_n_values(text: str) -> None:
    # Name C w/o H, GPT-3.5 ("For 20 values of n …", labelled right): "for how many … give a
    # remainder of 4?" asks a count, and a sentence that opens with "For N values" states N
    assert question_type(COUNT_MOD_PROMPT) == "count"
    result = graded(text, "40", COUNT_MOD_PROMPT)
    assert result.grade.correct and (result.kind, result.answer) == ("count", "40"), result
    assert not graded(text, "41", COUNT_MOD_PROMPT).grade.correct


def test_only_a_count_question_reads_for_n_values_as_its_answer() -> None:
    # a remainder asked of a count is still a residue question; an expression question does not
    # take the number of cases for its answer
    assert question_type("Find the remainder when the number of subsets is divided by 7.") == (
        "mod_value"
    )
    prompt = "Let s_n = n^2 + 1. What is the sum of s_n mod 5 over n in {1, ..., 40}?"
    assert not graded("For 40 values of n, the sum is 60.", "40", prompt).grade.correct
    # "For n = 40" names a case, not a count of cases
    assert not graded("For n = 40, the remainder is 1.", "40", COUNT_MOD_PROMPT).grade.correct


COMPARE_PROMPT = "A sequence {c_n} is defined by c_1=1, c_(n+1)=c_n+1/c_n. Do we have c_500>40?"


A_COMPARISON_WITH_THE_ASKED_BOUND_ANSWERS_BY_ITS_DIRECTION = class_cases(
    "a_comparison_with_the_asked_bound_answers_by_its_direction", COMPARE_PROMPT,
    [
        # Example C w/o H, GPT-3.5 ("… is approximately 2.71828, which is less than 30", labelled
        # a No): the reply compares the asked quantity with the asked bound the other way round
        ("The value of c_500 is approximately 31.6, which is less than 40.", "No"),
        ("Thus c_500 is at most 40.", "No"),
        ("We find that $c_{500} < 40$.", "No"),
        ("So $c_{500} \\leq 40$ for this sequence.", "No"),
        ("c_500 is no more than 40.", "No"),
        ("c_500 is not less than 40.", "Yes"),
        ("The value of c_500 is about 45, which is greater than 40.", "Yes"),
        ("Hence c_500 exceeds 40.", "Yes"),
        ("It is false that c_500 is smaller than 40.", "Yes"),
    ],
)  # fmt: skip


def test_a_comparison_rule_needs_the_asked_bound_and_direction() -> None:
    # a question asking "less than": "greater than" denies it
    less = "Let a be the sum of 1/k^3 over k >= 2. Is a less than 0.25?"
    assert graded("The sum a is about 0.202, which is less than 0.25.", "Yes", less).grade.correct
    assert graded("We get a > 0.25.", "No", less).grade.correct
    # a leading "Yes," decides by itself
    assert graded("Yes, c_500 > 40.", "Yes", COMPARE_PROMPT).grade.correct
    # a comparison inside a hedge commits to nothing (its clause no longer hid it once the
    # comparison was read: these were graded Yes by the first version of this rule)
    for hedge in (
        "From the estimate, it seems unlikely that c_500 would be greater than 40, but a "
        "careful analysis is needed to determine its exact value.",
        "From the recursion, it is conjectured that c_500 is greater than 40, but without "
        "computing it, a definitive conclusion cannot be made.",
    ):
        for gold in ("Yes", "No"):
            assert not graded(hedge, gold, COMPARE_PROMPT).grade.correct, (hedge, gold)


LONG_DIGITS = "0" * 3000


def test_a_window_that_starts_inside_a_number_reads_no_value() -> None:
    # Misleading C w/o H, GPT-3.5 (cut off by the length limit inside "= 1000…0", no summary,
    # labelled no answer): a sentence longer than the window was read from a cut inside its last
    # number, so the trailing zeros read as the value 0
    prompt = "Let n be 22...22, with a total of 1980 digits. What is n mod 1982?"
    text = f"We square repeatedly.\n\nCalculating this, we get:\n\n10^1980 mod 991 = 1{LONG_DIGITS}"
    result = graded(text, "0", prompt)
    assert not result.grade.correct and result.grade.status == "no_answer", result
    # the window's far end cut inside a number names a different, shorter number
    long_value = "1" + "0" * 2500
    assert not graded(f"The answer is {long_value}.", "1" + "0" * 1999).grade.correct
    # a cut inside one token moves to the next word: what follows it is still read
    tail = graded(f"Then x = 1{LONG_DIGITS} in this case, so the remainder is 7.", "7", prompt)
    assert tail.grade.correct and tail.answer == "7"


# --- no answer from the question (item 4) ---------------------------------------------------------

NT20 = (
    "For positive integers a, b, c, d, e satisfying a^5+b^5+c^5+d^5+e^5 mod 25=0, what are "
    "possible values of abcde mod 5?"
)


@pytest.mark.parametrize(
    "text",
    [
        # the false positive (CHAMP "Problem C w/ H", GPT-4 Turbo, P_Number-Theory_20)
        "The possible values of \\( abcde \\mod 5 \\) for positive integers \\( a, b, c, d, e "
        "\\) satisfying \\( a^5 + b^5 + c^5 + d^5 + e^5 \\equiv 0 \\mod 25 \\) and \\( 5 \\nmid "
        "abcde \\) are 1, 2, 3, and 4.",
        # its kin: the condition restated, in the prompt's spelling and in another one
        "We know that a^5+b^5+c^5+d^5+e^5 mod 25=0.",
        "Since $a^5 + b^5 + c^5 + d^5 + e^5 \\equiv 0 \\pmod{25}$, the product can be anything.",
    ],
)
def test_a_restated_condition_of_the_problem_is_never_the_answer(text: str) -> None:
    result = graded(text, "0 is the only possible value", NT20)
    assert not result.grade.correct, (result.kind, result.answer)


def test_a_restated_equation_is_not_the_answer_but_a_new_one_is() -> None:
    prompt = "Let x^2 + y^2 = 25 and x + y = 7. Find xy."
    assert not graded("We know that $x^2 + y^2 = 25$.", "25", prompt).grade.correct
    assert graded("So we get $xy = 12$.", "12", prompt).grade.correct


# --- question types (item 1) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("Are there integer solutions to x^2 = 2?", "yes_no"),
        ("Is 4^545+545^4 a prime number?", "yes_no"),
        ("Do there exist three integers whose sum is 1?", "yes_no"),
        ("Determine whether the limit exists.", "yes_no"),
        ("How many strings of length 6 avoid 11?", "count"),
        ("At least how many of them are even?", "count"),
        ("Find all pairs (m, n) with m^2 = n^3.", "find_all"),
        ("What are possible values of abcde mod 5?", "mod_value"),
        ("Find the remainder when 2^100 is divided by 7.", "mod_value"),
        ("Find the minimum of x + 1/x for x > 0.", "expression"),
    ],
)
def test_question_type_from_the_prompt(prompt: str, expected: str) -> None:
    assert question_type(prompt) == expected


def test_the_task_or_the_problem_overrides_the_question_type() -> None:
    champ = get_task("champ")
    meta = json.dumps({"question_type": "count"})
    assert champ.question_type({"prompt": "Is it odd?", "meta": meta}) == "count"
    assert get_task("gpqa").question_type({"prompt": "Is it odd?"}) == "choice"


# --- linear time, inside the deadline (item 3) ----------------------------------------------------

SUBSETS = "The number of subsets is 340282366920938463463374607431768211456 in total, or 2^128."


def test_the_39_digit_sentence_is_graded_inside_the_deadline() -> None:
    result = get_task("champ").grade_text(
        {"answer_text": SUBSETS}, "2^128", timeout_s=DEADLINE_S,
        problem={"prompt": "How many subsets does a 128-element set have?"},
    )  # fmt: skip
    assert result.grade.status == "ok"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "gold"),
    [
        ("The answer is 1. " * 60_000, "1"),  # 1 MB of answer phrases
        ("We get $x_1 + y$ and $z$. " * 40_000 + "So the total is 7.", "7"),  # inline maths
        ("1 or " * 200_000 + "2.", "2"),  # one list sentence of 1 MB
        ("\\( $ " * 200_000 + "So there are 5.", "5"),  # unclosed maths everywhere
    ],
)
def test_a_megabyte_answer_is_graded_inside_the_deadline(text: str, gold: str) -> None:
    assert len(text) >= 800_000
    result = get_task("champ").grade_text({"answer_text": text}, gold, timeout_s=DEADLINE_S)
    assert result.grade.status == "ok"


def test_a_megabyte_trace_gets_its_leak_step_inside_the_deadline() -> None:
    steps = ["We try the case number 3 and add the terms one by one. "] * 18_000
    steps[-1] = "So there are 239 strings."
    reasoning = "".join(steps)
    # 90 steps of 200 sentences each; the gold is stated in the last sentence of the last one
    ends = [sum(len(s) for s in steps[: index + 1]) for index in range(199, len(steps), 200)]
    assert ends[-1] == len(reasoning)
    assert len(reasoning) >= 900_000
    point = get_task("champ").answer_leak_step(reasoning, ends, "239", timeout_s=DEADLINE_S)
    assert point.status == "ok" and point.k == len(ends)


def test_a_check_past_the_deadline_is_a_timeout_graded_wrong() -> None:
    # A deadline no real grading meets: the row is wrong with status "timeout", no raise. The
    # text is a megabyte no earlier test graded (a fresh number in it), so no cache answers
    # it: reading it takes milliseconds, far past the 0.1 ms deadline on any machine.
    fresh = f"The answer is {time.time_ns()}. " + "We check the case again. " * 40_000
    result = get_task("champ").grade_text({"answer_text": fresh + SUBSETS}, "2^128", timeout_s=1e-4)
    assert result.grade.status == "timeout" and not result.grade.correct


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="0123456789 ,.or$\\()=+", max_size=300))
def test_expression_scan_ends_inside_the_text_and_never_backtracks(text: str) -> None:
    # The scanner reads each character at most a bounded number of times: its end lies in
    # [start, len(text)] and a second scan from the end finds nothing more.
    for start in range(0, len(text), 7):
        end = expression_end(text, start)
        assert start <= end <= len(text)
        assert expression_end(text, end) in (end, *range(end, len(text) + 1))


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["3", "239", "x", "$2^{n}$", "(2, 1)"]),
    st.sampled_from(["7", "11", "y", "$n!$"]),
    st.sampled_from([" or ", ", ", " and ", ", or "]),
)
def test_any_two_values_offered_together_are_one_list(first: str, second: str, sep: str) -> None:
    text = f"The value is {first}{sep}{second}."
    found = final_answer_candidates(text, AnswerFrame("expression"))
    kinds = {c.kind for c in found}
    assert "list" in kinds
    # neither value alone is a candidate
    bare = {c.text for c in found if c.kind != "sentence"}
    assert first.strip("$") not in bare and second.strip("$") not in bare


# --- through ingest: bounded texts, good rows kept (item 3) ---------------------------------------


def test_ingest_keeps_the_good_rows_around_a_hostile_one_and_bounds_every_text(
    tmp_path: Path,
) -> None:
    from legival_core.store.store import Store
    from precompute.ingest import ingest

    rows = [
        {"problem_id": "good-1", "prompt": "How many strings?", "gold": "239",
         "reasoning": "We count.", "answer": "So there are 239 strings."},
        {"problem_id": "hostile", "prompt": "How many subsets?", "gold": "2^128",
         "reasoning": "We count subsets.", "answer": SUBSETS},
        {"problem_id": "good-2", "prompt": "Is 7 prime?", "gold": "Yes",
         "reasoning": "Check divisors.", "answer": "7 is a prime number."},
        # 1.2 MB answer and 1.2 MB raw output: above a 1 MB limit, quarantined by field
        {"problem_id": "huge-answer", "prompt": "p", "gold": "1", "reasoning": "r",
         "answer": "The answer is 1. " * 75_000},
        {"problem_id": "huge-raw", "prompt": "p", "gold": "1", "raw": "x " * 600_000},
    ]  # fmt: skip
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    report = ingest(source, tmp_path / "store", "t", task="champ", max_trace_mb=1.0)
    assert report.kept == 3
    assert sorted((q.line, q.field) for q in report.quarantined) == [(4, "answer"), (5, "raw")]
    grades = Store.open(tmp_path / "store").read("grades")
    by_status = dict(zip(grades["trace_id"], grades["status"], strict=True))
    assert len(by_status) == 3 and set(by_status.values()) == {"ok"}
    assert grades["correct"].all()  # 239; the 39 digits equal 2^128; "is a prime" is Yes
    assert set(grades["question_type"]) == {"count", "yes_no"}


# --- the leak step in the same frame (item 6) -----------------------------------------------------


def test_a_trace_that_concludes_no_solutions_leaks_no_at_that_step() -> None:
    steps = [
        "Let x and y be integers.",
        "Squares are 0 or 1 mod 4.",
        "So there are no integer solutions.",
        "We double check the residues.",
    ]
    reasoning = " ".join(steps)
    ends = [reasoning.index(s) + len(s) for s in steps]
    problem = {"prompt": "Are there integer solutions to x^2 + y^2 = 4003?"}
    point = get_task("champ").answer_leak_step(reasoning, ends, "No", problem=problem)
    # step 1 is a declarative sentence too, but no conclusion: it leaks nothing
    assert point.status == "ok" and point.k == 3


@pytest.mark.parametrize(
    ("prompt", "conclusion", "gold"),
    [
        # a yes/no answered by a concluding declarative (polarity in the question's frame)
        ("Is 4^545+545^4 a prime number?", "Hence 4^545+545^4 is not a prime number.", "No"),
        # a count read from "at least one"
        ("At least how many of a, b, c are divisible by 3?",
         "So at least one of a, b, c is divisible by 3.", "1"),
        # a residue for a mod question
        ("What is n^5 - 5n^3 + 4n mod 120 for an integer n?",
         "Thus n^5 - 5n^3 + 4n ≡ 0 (mod 120) for every n.", "0 is the only possible value"),
        # the value before a trailing clause, not the numbers after it
        ("Find the minimum of m + n over positive integers with m^2 + n = 3.",
         "So the minimum is 11, achieved when m = 1 and n = 2.", "11"),
    ],
)  # fmt: skip
def test_the_leak_step_reads_the_new_phrasings_at_their_step(
    prompt: str, conclusion: str, gold: str
) -> None:
    # Step 2 mentions the same objects without concluding: it states nothing.
    steps = ["We look at small cases first.", "Each of a, b, c and n is an integer.", conclusion]
    reasoning = " ".join(steps)
    ends = [reasoning.index(s) + len(s) for s in steps]
    point = get_task("champ").answer_leak_step(reasoning, ends, gold, problem={"prompt": prompt})
    assert (point.status, point.k) == ("ok", 3), point
    # the numbers of the trailing clause are not the leak: gold 2 is never stated
    if "achieved" in conclusion:
        again = get_task("champ").answer_leak_step(reasoning, ends, "2", problem={"prompt": prompt})
        assert again.k is None, again


def test_a_conclusion_opened_by_therefore_leaks_its_polarity() -> None:
    # CHAMP Number-Theory 2, GPT-4 0-Shot (gold No): the reasoning's last sentence states the
    # answer, yet no leak step is found, so FOTU before the leak counts the whole trace.
    prompt = "Do there exist positive integers x, y such that x+y, x+2y and 2x+y are both squares?"
    text = (
        "We try small cases. Therefore, there do not exist positive integers $x$ and $y$ such "
        "that $x+y$, $x+2y$, and $2x+y$ are all squares."
    )
    problem = {"prompt": prompt, "task": "champ"}
    point = get_task("champ").answer_leak_step(text, [20, len(text)], "No", problem=problem)
    assert point.k == 2


# --- the fresh half's disagreements, each as a class ----------------------------------------------
# The fresh half (tests/fixtures/champ_settings_labels_fresh.csv) was scored once, then read;
# four of its five disagreements were grader classes. The sentences below are written for these
# tests in the shape of the recorded ones, with their kin; none is a recorded text.

PRIME_PROMPT = (
    "Let x be 1000...0001, with a total of 1961 zeros in the middle. Is x a prime number?"
)


AN_ASIDE_BETWEEN_SUBJECT_AND_VERB_KEEPS_THE_VERBS_POLARITY = class_cases(
    "an_aside_between_subject_and_verb_keeps_the_verbs_polarity", PRIME_PROMPT,
    [
        # an aside between the subject and its verb: the verb still carries the claim
        ("The number 1000...0001, with 1961 zeros in the middle, is not a prime number.", "No"),
        ("The number x, as shown above, cannot be prime.", "No"),
        ("The number x, with its 1963 digits, is a prime number.", "Yes"),
        ("The number x, being a sum of two cubes, is not prime.", "No"),
    ],
)  # fmt: skip


SOLUTIONS_PROMPT = (
    "Find all integer solutions to the equation (n-2)^2+(n-1)^2+n^2+(n+1)^2+(n+2)^2=m^2."
)


@pytest.mark.parametrize(
    "text",
    [
        "The solutions are $n=\\pm\\frac{m}{2}+1$ if $m$ is even, and there are no integer "
        "solutions if $m$ is odd.",
        "There are no integer solutions if m is odd, and n = 1 if m is even.",
    ],
)
def test_a_gold_statement_true_in_one_case_of_a_piecewise_reply_is_not_the_gold(text: str) -> None:
    # Direct C w/ H, PaLM 2 (labelled wrong, graded right): the gold "No integer solutions"
    # holds for one case only; the reply as a whole gives solutions in the other
    assert not graded(text, "No integer solutions", SOLUTIONS_PROMPT).grade.correct


def test_an_unconditional_no_solutions_is_still_the_gold() -> None:
    for text in [
        "There are no integer solutions.",
        "If there were a solution, m^2 would be 2 mod 5; so there are no integer solutions.",
        "Since 5n^2 + 10 is never a square, there are no integer solutions.",
    ]:
        assert graded(text, "No integer solutions", SOLUTIONS_PROMPT).grade.correct, text


BOUND_PROMPT = (
    "For positive a, b, c, d, at most how many of the three inequalities a+b<c+d, "
    "(a+b)(c+d)<ab+cd, (a+b)cd<ab(c+d) can be true at the same time?"
)


# Root C w/ H, GPT-4 (labelled right, graded wrong: "true at the same time" was taken)
A_COMMA_AFTER_AT_MOST_KEEPS_THE_COUNT = replies(
    "a_comma_after_at_most_keeps_the_count", BOUND_PROMPT, "2 inequalities",
    [
        ("At most, two of the three given inequalities can be true at the same time.", True),
        ("At most, 2 of them can hold at once.", True),
        ("At most, one of them can be true.", False),
        ("At most, three of the inequalities can be true at the same time.", False),
    ],
)  # fmt: skip


LIMIT_VALUE_PROMPT = (
    "What are possible values of the limit of the sequence x_(n+1)=(x_n+a/x_n)/2, for "
    "different values of x_0>0, a>0, possibly as an expression of x_0, a?"
)
ROOT_GOLD = "The only possible value for the limit is sqrt(a)"


# Root C w/o H, GPT-4 (labelled right, graded wrong: the words were not maths)
A_ROOT_SAID_IN_WORDS_IS_READ_AS_MATHS = replies(
    "a_root_said_in_words_is_read_as_maths", LIMIT_VALUE_PROMPT, ROOT_GOLD,
    [
        ("The limit of the sequence is the positive square root of a, denoted as √a.", True),
        ("The limit is the square root of a.", True),
        ("So the limit is the principal square root of a.", True),
        ("The limit is the negative square root of a.", False),
        ("The limit is the cube root of a.", False),
        ("The limit is the square root of 2a.", False),
    ],
)  # fmt: skip


# --- the unseen-problems half's disagreements, each as a class ------------------------------------
# The unseen-problems half (tests/fixtures/champ_settings_labels_unseen.csv) was scored once
# (110 / 120), then read; nine of its ten disagreements were four grader classes. The sentences
# below are written for these tests in the shape of the recorded ones; none is a recorded text.


@pytest.mark.parametrize(
    ("prompt", "text", "gold"),
    [
        # a yes/no question behind a leading clause: its frame still reads the reply's polarity
        ("For a, b, c>0, are there possible values of them to make (a+b+c)/3 less than "
         "(abc)^(1/3)?", "There are no possible values of a, b, and c that make (a+b+c)/3 less "
         "than (abc)^(1/3).", "No"),
        ("For a, b, c>0, are there possible values of them to make (a+b+c)/3 less than "
         "(abc)^(1/3)?", "There are no values of \\( a, b, c > 0 \\) that make it smaller, as "
         "AM-GM shows that the mean is always at least \\( (abc)^{1/3} \\).", "No"),
        ("If f(x) is a polynomial with f(1) = 0, can we always find g(x) with f(x)=(x-1)g(x) "
         "such that g(x) is a polynomial?", "Yes, we can always find g(x) with f(x) = (x-1) g(x) "
         "such that g(x) is a polynomial function.", "Yes"),
        ("Given that n is odd, is n^2 - 1 divisible by 8?", "n^2 - 1 is divisible by 8.", "Yes"),
    ],
)  # fmt: skip
def test_a_yes_no_question_after_a_leading_clause_is_read_as_yes_no(
    prompt: str, text: str, gold: str
) -> None:
    assert question_type(prompt) == "yes_no"
    result = graded(text, gold, prompt)
    # read as the reply's polarity, or its leading "Yes," / "No,"
    assert result.grade.correct and result.kind in ("polarity", "yes_no"), result
    assert not graded(text, "Yes" if gold == "No" else "No", prompt).grade.correct


def test_a_leading_clause_does_not_make_a_yes_no_question() -> None:
    assert question_type("For n > 1, what is the smallest prime factor of n^2 + 1?") != "yes_no"
    assert question_type("If x + y = 5, find all possible values of xy.") == "find_all"


@pytest.mark.parametrize(
    "text",
    [
        "Determining whether integer solutions exist requires further advanced analysis or "
        "computational methods beyond the provided steps.",
        "Whether such integers exist requires more careful study.",
    ],
)
def test_a_reply_that_defers_to_further_analysis_is_a_hedge(text: str) -> None:
    prompt = "Are there integer solutions to the equation (x^2-1)(y^2-1)+1984=z^2?"
    assert not graded(text, "Yes", prompt).grade.correct
    assert not graded(text, "No", prompt).grade.correct


MOD_PROMPT = "Find all possible values of 4^n+15n-1 mod 9 for integer n≥0."


CONGRUENT_TO_R_ANSWERS_A_QUESTION_ABOUT_RESIDUES = class_cases(
    "congruent_to_r_answers_a_question_about_residues", MOD_PROMPT,
    [
        ("The expression \\(4^n + 15n - 1 \\mod 9\\) is always congruent to 0 for any "
         "non-negative integer \\(n\\).", "0 is the only possible value", True),
        ("Modulo 9, the expression is always congruent to 3.", "0 is the only possible value",
         False),
        ("Modulo 9, the expression is always congruent to 3.", "3", True),
    ],
)  # fmt: skip


# --- the last sample's disagreements, each as a class ---------------------------------------------
# The last sample (tests/fixtures/champ_settings_labels_last.csv) was scored once (42 / 46), then
# read; two of its four disagreements were the question misread (its asking sentence cut short
# by a factorial's "!" or an ellipsis), one a count gold said in words.


@pytest.mark.parametrize(
    ("prompt", "kind"),
    [
        ("How many (real or complex) roots have multiplicity greater than 1 for the polynomial "
         "f(x)=1+x/(1!)+x^2/(2!)+...+x^n/(n!)?", "count"),
        ("How many sequences of positive numbers a_0, a_1, a_2, ... satisfy a_0=1 and "
         "a_(n+2)=a_n-a_(n+1) for all n≥0?", "count"),
        ("Is it possible to select an infinite geometric sequence from 1, 1/2, 1/4, ... such "
         "that the sum is 1/5?", "yes_no"),
        ("Let n! be the product 1*2*...*n. Is n! + 1 ever a square for n > 7?", "yes_no"),
    ],
)  # fmt: skip
def test_a_factorial_or_an_ellipsis_does_not_cut_the_asking_sentence(
    prompt: str, kind: str
) -> None:
    assert question_type(prompt) == kind


ROOTS_PROMPT = "How many roots of f(x)=1+x/(1!)+...+x^n/(n!) have multiplicity greater than 1?"
SEQUENCES_PROMPT = "How many sequences of positive numbers a_0, a_1, ... satisfy a_0=1?"
COUNTS_IN_WORDS_ANSWER_A_COUNT_QUESTION = class_cases(
    "counts_in_words_answer_a_count_question", ROOTS_PROMPT,
    [
        ("The polynomial has no roots with multiplicity greater than 1, because f and f' share "
         "no root.", "0 roots", True),
        ("The polynomial has no repeated roots.", "1 root", False),
    ],
) + class_cases(
    "counts_in_words_answer_a_count_question-sequences", SEQUENCES_PROMPT,
    [
        ("There is only one sequence of positive numbers that satisfies the conditions, with "
         "a_1 close to 0.618.", "Exactly one sequence", True),
        ("There are exactly two such sequences.", "Exactly one sequence", False),
    ],
)  # fmt: skip


A_VALUE_NAMING_WHAT_WAS_COUNTED_IS_NOT_THE_COUNT = class_cases(
    "a_value_naming_what_was_counted_is_not_the_count",
    "How many (real or complex) roots have multiplicity greater than 1 for f(x)?",
    [
        # Last sample, GPT-4 Turbo 2/3 Soln (labelled wrong, graded right): the root named in
        # the relative clause verified as the gold count 0
        ("The polynomial has exactly one root with multiplicity greater than 1, which is "
         "\\( z = 0 \\) with multiplicity \\( n+1 \\).", "0 roots", False),
        ("The polynomial has exactly one root with multiplicity greater than 1, which is "
         "\\( z = 0 \\).", "1 root", True),
        ("There are no such roots, since every root x = r would also be a root of f'.",
         "0 roots", True),
        ("So the number of such roots is $N = 0$.", "0 roots", True),  # no count in words
    ],
)  # fmt: skip


# --- the seventh sample's disagreements, each as a class ------------------------------------------
# The seventh sample (tests/fixtures/champ_settings_labels_final.csv: answers no reader had seen)
# was scored once (198 / 208), then read; seven of its ten disagreements were grader classes. The
# sentences below are written for these tests in the shape of the recorded ones, with their kin.

MONOTONE_PROMPT = (
    "Let 0<a<b. Define two sequences {a_n} and {b_n} as a_0=a, b_0=b. Is the sequence a_n/b_n "
    "monotonically increasing, monotonically decreasing, or neither?"
)


NEITHER_NOR_DENIES_THE_STATEMENT_IT_NAMES = replies(
    "neither_nor_denies_the_statement_it_names", MONOTONE_PROMPT, "Monotonically increasing",
    [
        # Seventh sample, PaLM 2 Medium, Name C w/o H (labelled wrong, graded right)
        ("The sequence $\\frac{a_n}{b_n}$ is neither monotonically increasing nor monotonically "
         "decreasing, since it is constant.", False),
        ("The sequence a_n/b_n is not monotonically increasing.", False),
        ("The sequence a_n/b_n is monotonically increasing.", True),
        ("The sequence a_n/b_n is monotonically increasing, not decreasing.", True),
    ],
)  # fmt: skip


FIXED_POINT_PROMPT = (
    "Let f(x) be a polynomial of degree n and f(x)=x has no real number solutions. What is the "
    "maximum number of real number solutions does f(f(x))=x have?"
)


A_COUNT_IS_NOT_READ_FROM_A_CLAUSE_OF_REASONS = replies(
    "a_count_is_not_read_from_a_clause_of_reasons", FIXED_POINT_PROMPT, "0",
    [
        # Seventh sample, PaLM 2 Medium, 2/3 Soln (labelled wrong, graded right): the count 0
        # was read from the reason clause, which restates the problem's own condition
        ("The maximum number of real number solutions of $f(f(x))=x$ is $1$, since $f(x)=x$ has "
         "no real number solutions.", False),
        ("The maximum number of real solutions is 2 because f(x) = x has no real solutions.",
         False),
        ("The maximum number of real number solutions of $f(f(x))=x$ is $0$, since $f(x)=x$ has "
         "no real number solutions.", True),
        ("So $f(f(x))=x$ has no real number solutions, since $f(x) > x$ for all $x$.", True),
    ],
)  # fmt: skip


RANGE_PROMPT = (
    "For how many values of n in {1, 2, ..., 100} is the product (1/2)(3/4)...((2n-1)/(2n)) at "
    "most 1/sqrt(3n+1)?"
)


MATHS_IN_THE_SUBJECT_IS_NOT_THE_VALUE_THE_TAIL_GIVES = replies(
    "maths_in_the_subject_is_not_the_value_the_tail_gives", RANGE_PROMPT, "100 (i.e., all values)",
    [
        # Seventh sample, PaLM 2 Medium, Direct C w/o H (labelled wrong, graded right): the set
        # of the subject, the prompt's own range, verified as "all values"
        ("The number of values of $n$ in $\\\\{1, 2, ..., 100\\\\}$ such that the product is at "
         "most $\\frac{1}{\\sqrt{3n+1}}$ is 1.", False),
        ("The number of values of $n$ in $\\{1, 2, ..., 100\\}$ with this property is 7.", False),
        ("The number of values of $n$ in $\\{1, 2, ..., 100\\}$ with this property is 100.", True),
        ("$100$ is the number of such values of $n$.", True),
    ],
)  # fmt: skip


LARGEST_PROMPT = (
    "Let a, b, c be the lengths of the three sides of a (possibly degenerate) triangle. What is "
    "the largest value of (a^2+b^2+c^2)/(ab+bc+ac)?"
)


AN_EXPRESSION_CUT_OFF_BEFORE_ITS_BRACKETS_CLOSE_IS_NO_ANSWER = replies(
    "an_expression_cut_off_before_its_brackets_close_is_no_answer", LARGEST_PROMPT, "2",
    [
        # Seventh sample, GPT-3.5, Root C w/o H (truncated, labelled no_answer, graded right):
        # the reply is cut off inside an expression, whose last number verified as the gold
        ("Now, let's simplify further:\n\n[(a^2+b^2+c^2)(1/a + 1/b + 1/c) + 2(ab+bc+ac)] / "
         "(a+b+c)\n= [(a^2+b^2+c^2)(1/a + 1/b + 1/c) + 2(ab+", False),
        ("So the largest value is (2", False),
        ("So the largest value is 2 (attained by a degenerate triangle).", True),
        ("The largest value is $\\left(\\frac{4}{2}\\right)$.", True),
    ],
)  # fmt: skip


BOUND_QUESTION = "A sequence {a_n} is defined by a_1=1, a_(n+1)=a_n+1/a_n^2. Do we have a_9000>30?"


@pytest.mark.parametrize(
    ("text", "stated"),
    [
        # Seventh sample, PaLM 2 Medium, 2/3 Soln (labelled no_answer, graded right): a bound
        # weaker than the one asked settles nothing
        ("Since $a_n^3>3n$ for all $n\\geq 2$, we have $a_{9000}>5$.", None),
        ("Hence a_9000 is less than 40.", None),
        ("Hence $a_{9000} > 30$.", "yes"),
        ("Hence $a_{9000} > 31$, which answers the question.", "yes"),
        ("Hence a_9000 < 29.", "no"),
        ("Hence a_9000 is at most 20.", "no"),
    ],
)  # fmt: skip
def test_a_comparison_answers_a_bound_question_only_when_it_settles_it(
    text: str, stated: str | None
) -> None:
    from legival_core.grading.polarity import asked_claim

    asked = asked_claim("Do we have a_9000>30?")
    assert polarity(text, asked) == stated
    if stated is None:
        assert not graded(text, "Yes", BOUND_QUESTION).grade.correct
        assert not graded(text, "No", BOUND_QUESTION).grade.correct


INEQUALITY_COUNT_PROMPT = (
    "Let a, b, c be the side lengths of a right triangle with hypotenuse c. For how many values "
    "of n in {1, 2, ..., 100} does c^n > a^n + b^n hold?"
)


FOR_N_VALUES_INSIDE_A_SENTENCE_STATES_A_COUNT = replies(
    "for_n_values_inside_a_sentence_states_a_count", INEQUALITY_COUNT_PROMPT, "98 values",
    [
        # Seventh sample, GPT-4 Turbo, Example C w/ H (labelled right, graded wrong)
        ("The inequality c^n > a^n + b^n holds for 98 values of n in the set {1, 2, 3, ..., 100}.",
         True),
        ("The inequality holds for exactly 98 values of n.", True),
        ("The inequality holds for 97 values of n in the set {1, 2, ..., 100}.", False),
        ("The inequality c^n > a^n + b^n fails for 98 values of n.", False),
    ],
)  # fmt: skip


AUTOMORPHIC_PROMPT = (
    "An integer a is called automorphic if a^2 ends in a. For example, 25 is automorphic "
    "because 25^2=625 ends in 25. Find all two-digit automorphic numbers besides 25."
)


A_LIST_MEMBER_THE_QUESTION_SETS_ASIDE_IS_NOT_OFFERED = replies(
    "a_list_member_the_question_sets_aside_is_not_offered", AUTOMORPHIC_PROMPT, "76",
    [
        # Seventh sample, GPT-4, 1/3 Soln (labelled right, graded wrong): the list names the
        # value the question set aside along with the answer
        ("The two-digit automorphic numbers are 25 and 76.", True),
        ("The two-digit automorphic numbers are 76 and 25.", True),
        ("The two-digit automorphic numbers are 25, 76 and 93.", False),
        ("The two-digit automorphic numbers are 76 and 93.", False),
    ],
)  # fmt: skip


# --- the eighth sample's disagreements, each as a class -------------------------------------------
# The eighth sample (tests/fixtures/champ_settings_labels_confirm.csv) was scored once with the code
# final (201 / 208), then read; six of its seven disagreements were grader classes.

PRODUCT_COUNT_PROMPT = (
    "For how many values of n in {1, 2, ..., 100}, do we have "
    "(1/2)*(3/4)*(5/6)*...*(2n-1)/(2n)≤1/sqrt(3n+1)?"
)


FOR_ALL_N_VALUES_STATES_THE_COUNT = replies(
    "for_all_n_values_states_the_count", PRODUCT_COUNT_PROMPT, "100 (i.e., all values)",
    [
        # Eighth sample, GPT-4 Turbo, 1/3 Soln (labelled right, graded wrong)
        ("The inequality \\( \\left(\\frac{1}{2}\\right)\\cdots\\left(\\frac{2n-1}{2n}\\right) "
         "\\leq \\frac{1}{\\sqrt{3n+1}} \\) holds for all 100 values of \\( n \\) in the set "
         "\\( \\{1, 2, \\ldots, 100\\} \\).", True),
        ("The inequality holds for all 99 values of n with n > 1.", False),
    ],
)  # fmt: skip


PROGRESSIONS_PROMPT = (
    "In how many ways can 12 geometric progressions be selected from the numbers 1, 2, ..., 100 "
    "such that every number is in exactly one progression?"
)


A_GOLD_VALUE_WITH_A_REMARK_IN_BRACKETS_ACCEPTS_THE_VALUE = class_cases(
    "a_gold_value_with_a_remark_in_brackets_accepts_the_value", PROGRESSIONS_PROMPT,
    [
        # Eighth sample, PaLM 2 Medium, 2/3 Soln (labelled right, graded wrong): the gold is a
        # value with a remark in brackets, which no reading of the count could match
        ("There is no way to choose 12 geometric progressions from the numbers 1 to 100 such "
         "that every number is in exactly one progression.", "0 (no such selection is possible)",
         True),
        ("So the number of ways is 0.", "0 (no such selection is possible)", True),
        ("So the number of ways is 12.", "0 (no such selection is possible)", False),
        ("So the number of ways is 12.", "12 (one per prime)", True),
    ],
)  # fmt: skip


QUARTIC_PROMPT = "Solve the equation x^4+a^4-3a*x^3+3a^3*x=0 for a≠0 as an expression of a."
QUARTIC_GOLD = "a(1±sqrt(2)), a(1±sqrt(5))/2"


A_PLUS_MINUS_GOLD_STANDS_FOR_BOTH_VALUES = replies(
    "a_plus_minus_gold_stands_for_both_values", QUARTIC_PROMPT, QUARTIC_GOLD,
    [
        # Eighth sample, GPT-4 Turbo, Direct C w/ H (labelled right, graded wrong): the gold's
        # "±" stands for two values each
        ("The solutions for \\( x \\) in terms of \\( a \\) are \\( x = a(1 + \\sqrt{2}) \\), "
         "\\( x = a(1 - \\sqrt{2}) \\), "
         "\\( x = a\\left(\\frac{1}{2} + \\frac{\\sqrt{5}}{2}\\right) \\), and "
         "\\( x = a\\left(\\frac{1}{2} - \\frac{\\sqrt{5}}{2}\\right) \\).", True),
        ("The solutions are a(1+sqrt(2)), a(1-sqrt(2)), a(1+sqrt(5))/2 and a(1-sqrt(5))/2.", True),
        ("The solutions are a(1+sqrt(2)) and a(1+sqrt(5))/2.", False),
        ("The solutions are a(1+sqrt(2)), a(1-sqrt(2)), a(1+sqrt(3))/2 and a(1-sqrt(3))/2.", False),
    ],
)  # fmt: skip


FACTOR_PROMPT = "Factorize x^8+x^4+1 into terms of integer coefficients."
FACTOR_GOLD = "(x^2+x+1)(x^2-x+1)(x^4-x^2+1)"


THE_EXPRESSION_THE_QUESTION_ASKS_ABOUT_IS_NOT_ITS_ANSWER = replies(
    "the_expression_the_question_asks_about_is_not_its_answer", FACTOR_PROMPT, FACTOR_GOLD,
    [
        # Eighth sample, GPT-4 Turbo, Example C w/o H (labelled wrong, graded right): the
        # expression the question asks about, restated, verified as equal to its factorisation
        ("The expression \\( x^8 + x^4 + 1 \\) factorizes into terms with integer coefficients as "
         "\\( (x^2 + 1)^2(x^4 - x^2 + 1) \\).", False),
        ("So $x^8+x^4+1$ is the answer.", False),
        ("The expression \\( x^8 + x^4 + 1 \\) factorizes as \\( (x^2+x+1)(x^2-x+1)(x^4-x^2+1) "
         "\\).", True),
    ],
)  # fmt: skip


def test_a_letter_list_in_an_opening_clause_does_not_cut_the_main_clause() -> None:
    # Eighth sample, GPT-4, Name C w/ H (labelled right, graded wrong): "a, b, and c," ended
    # the opening clause early, and its claim was read from "and c"
    prompt = (
        "For a, b, c>0, are there possible values of them to make (a^3*b+b^3*c+c^3*a)/(a+b+c) "
        "less than abc?"
    )
    text = (
        "For any positive real numbers a, b, and c, there are no possible values that would make "
        "the expression (a^3*b + b^3*c + c^3*a)/(a + b + c) less than abc."
    )
    assert graded(text, "No", prompt).grade.correct
    assert not graded(text, "Yes", prompt).grade.correct
    assert polarity(text) == "no"


EXPANSION_PROMPT = (
    "When (x+y+z)^1999 is expanded and like terms are collected, how many terms will there be?"
)
RESULT_IN_INTRODUCES_THE_COUNT = replies(
    "result_in_introduces_the_count", EXPANSION_PROMPT, "2001000",
    [
        # Eighth sample, GPT-4, No C w/ H (labelled right, graded wrong): "result in" gives the
        # count; the last copula ("are collected") was read instead
        ("The expansion of (x+y+z)^1999 will result in 2,001,000 terms when like terms are "
         "collected.", True),
        ("The expansion results in 2001000 terms.", True),
        ("The expansion will result in 1,999,000 terms when like terms are collected.", False),
    ],
)  # fmt: skip


# --- after the ninth sample's measurement: one of its wrong answers graded right -----------------
# The ninth sample (scored once, 470 / 480) was read after its score was recorded; this class is
# fixed after it (the sample's recorded first score stays the measurement).


A_GOLD_STATEMENT_IS_NOT_MATCHED_ACROSS_A_REASON_CLAUSE = replies(
    "a_gold_statement_is_not_matched_across_a_reason_clause", MONOTONE_PROMPT,
    "Monotonically increasing",
    [
        # Ninth sample, PaLM 2 Medium, Misleading C w/ H (labelled wrong, graded right): the
        # gold's words were found across the reason clause ("monotonically … since … increasing")
        ("The sequence $a_n/b_n$ is monotonically decreasing, since $a_n$ is increasing and "
         "$b_n$ is decreasing.", False),
        ("The sequence a_n/b_n is monotonically increasing, since a_n grows faster than b_n.",
         True),
        ("Since a_n grows faster than b_n, the sequence is monotonically increasing.", True),
    ],
)  # fmt: skip


# --- every class above whose check is one grade ---------------------------------------------------
# Each class keeps its cases where it was found (with the sample it came from); they are graded
# here by one test, so a new class of that kind is a table, not another copy of this test.


@pytest.mark.parametrize(
    ("prompt", "text", "gold", "right"),
    [
        *A_COMMA_AFTER_AT_MOST_KEEPS_THE_COUNT,
        *A_ROOT_SAID_IN_WORDS_IS_READ_AS_MATHS,
        *CONGRUENT_TO_R_ANSWERS_A_QUESTION_ABOUT_RESIDUES,
        *COUNTS_IN_WORDS_ANSWER_A_COUNT_QUESTION,
        *A_VALUE_NAMING_WHAT_WAS_COUNTED_IS_NOT_THE_COUNT,
        *NEITHER_NOR_DENIES_THE_STATEMENT_IT_NAMES,
        *A_COUNT_IS_NOT_READ_FROM_A_CLAUSE_OF_REASONS,
        *MATHS_IN_THE_SUBJECT_IS_NOT_THE_VALUE_THE_TAIL_GIVES,
        *AN_EXPRESSION_CUT_OFF_BEFORE_ITS_BRACKETS_CLOSE_IS_NO_ANSWER,
        *FOR_N_VALUES_INSIDE_A_SENTENCE_STATES_A_COUNT,
        *A_LIST_MEMBER_THE_QUESTION_SETS_ASIDE_IS_NOT_OFFERED,
        *FOR_ALL_N_VALUES_STATES_THE_COUNT,
        *A_GOLD_VALUE_WITH_A_REMARK_IN_BRACKETS_ACCEPTS_THE_VALUE,
        *A_PLUS_MINUS_GOLD_STANDS_FOR_BOTH_VALUES,
        *THE_EXPRESSION_THE_QUESTION_ASKS_ABOUT_IS_NOT_ITS_ANSWER,
        *RESULT_IN_INTRODUCES_THE_COUNT,
        *A_GOLD_STATEMENT_IS_NOT_MATCHED_ACROSS_A_REASON_CLAUSE,
    ],
)
def test_each_grader_class_grades_its_replies(
    prompt: str, text: str, gold: str, right: bool
) -> None:
    result = graded(text, gold, prompt)
    assert result.grade.correct is right, (text, result.kind, result.answer)


@pytest.mark.parametrize(
    ("prompt", "text", "gold"),
    [
        *A_COMPARISON_WITH_THE_ASKED_BOUND_ANSWERS_BY_ITS_DIRECTION,
        *AN_ASIDE_BETWEEN_SUBJECT_AND_VERB_KEEPS_THE_VERBS_POLARITY,
    ],
)
def test_each_polarity_class_answers_yes_or_no_by_the_replys_polarity(
    prompt: str, text: str, gold: str
) -> None:
    result = graded(text, gold, prompt)
    assert result.grade.correct and result.kind == "polarity", result
    other = "Yes" if gold == "No" else "No"
    assert not graded(text, other, prompt).grade.correct
