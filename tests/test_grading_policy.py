"""One hedge / negation / correction policy for every family and both paths (issue 37).

Each shape below was graded right when wrong by an outside probe (boxed or plain, math, champ,
gsm8k): a relation with no left side, a hedge or a correction inside a box's ``\\text{}``, the
first number of a box, a value corrected after it is stated, a negated or mixed count. Each is
wrong for every family. Beside them, the plain shapes the policy must keep right (the gold
boxed, stated, computed to), so that no rejection rule costs a correct answer.
"""

from __future__ import annotations

import pytest

from legival_core.tasks import get_task

FAMILIES = ("math", "champ", "gsm8k")
COUNT_PROMPT = "How many real solutions does the equation x^4 - 5x^2 + 4 = 0 have?"


def graded(task: str, text: str, gold: str, prompt: str | None = None) -> bool:
    problem = {"problem_id": "p", "prompt": prompt} if prompt else None
    return get_task(task).grade_text({"answer_text": text}, gold, problem=problem).grade.correct


#: (reply, gold): wrong answers that each family graded right before the policy.
WRONG_FOR_EVERY_FAMILY = [
    # a relation with no left side read as its value
    (r"\boxed{\neq 3}", "3"),
    (r"\boxed{< 3}", "3"),
    (r"\boxed{\leq 3}", "3"),
    (r"\boxed{\not\equiv 3}", "3"),
    (r"\boxed{\neg 3}", "3"),
    (r"The answer is $\neq 3$.", "3"),
    # a hedge or a correction inside the box's \text{}
    (r"\boxed{3 \text{ (or possibly 4)}}", "3"),
    (r"\boxed{3 \text{ (wrong, it is 4)}}", "3"),
    (r"\boxed{3 \text{ or } 4}", "3"),
    # a value corrected after it is stated
    ("I thought the answer was 3, but it is 4.", "3"),
    ("The total is 3, minus 1, so 2.", "3"),
    ("The answer is 3? No, it is 4.", "3"),
    ("It is wrong that the answer is 3.", "3"),
    ("The answer is not 3.", "3"),
    (r"So \boxed{3}. Actually, no: the answer is 4.", "3"),
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("reply", "gold"), WRONG_FOR_EVERY_FAMILY)
def test_a_hedged_negated_or_corrected_answer_is_wrong(family: str, reply: str, gold: str) -> None:
    assert not graded(family, reply, gold), (family, reply)


#: GSM8K read the first number of a box: each of these is not the gold 3.
@pytest.mark.parametrize(
    "reply", [r"\boxed{\frac{3}{4}}", r"\boxed{3^2}", r"\boxed{3 \times 4}", r"\boxed{3.5}"]
)
def test_gsm8k_reads_the_whole_box_not_its_first_number(reply: str) -> None:
    assert not graded("gsm8k", reply, "3")


def test_gsm8k_takes_the_final_value_of_a_computation_only() -> None:
    # "12 - 4 = 8" is a computation ending in 8: its value is 8, not its first number.
    assert not graded("gsm8k", r"\boxed{12 - 4 = 8}", "12")
    assert graded("gsm8k", r"\boxed{12 - 4 = 8}", "8")
    # 3 + 4 = 8 is no computation: no value is taken from it.
    assert not graded("gsm8k", r"\boxed{3 + 4 = 8}", "8")
    # What a box can hold and still be one number.
    assert graded("gsm8k", r"\boxed{\frac{3}{4}}", "0.75")
    assert graded("gsm8k", r"\boxed{3^2}", "9")
    assert graded("gsm8k", r"\boxed{\$1,234.00}", "1234")
    assert graded("gsm8k", r"\boxed{12 \text{ apples}}", "12")
    assert graded("gsm8k", r"\boxed{x = 12}", "12")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "reply",
    [
        "It cannot have exactly 2 solutions.",
        "There are 2 complex solutions and 3 real ones.",
        "The equation does not have 2 real solutions.",
    ],
)
def test_a_negated_or_mixed_count_is_not_the_count(family: str, reply: str) -> None:
    assert not graded(family, reply, "2", COUNT_PROMPT), (family, reply)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "reply",
    [
        r"\boxed{4}",
        "The answer is 4.",
        "There are 4 real solutions.",
        "There are 4 real solutions and no complex ones.",
        "There are 4 real solutions and 0 complex ones.",
        "Therefore, the equation has exactly 4 real solutions.",
        "It has 4 real solutions, namely -2, -1, 1 and 2.",
        "So 4.",
    ],
)
def test_a_plain_count_stays_right(family: str, reply: str) -> None:
    assert graded(family, reply, "4", COUNT_PROMPT), (family, reply)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "reply",
    [
        r"\boxed{3}",
        r"So the answer is $\boxed{3}$.",
        "The answer is 3.",
        "I first thought it was 4, but it is 3.",
        "The answer is 4? No, it is 3.",
        r"So \boxed{4}. Actually, no: the answer is 3.",
        "Therefore, 3.",
        "Hence we obtain 3.",
        r"\boxed{3 \text{ apples}}",
        "We get 3 apples in total.",
    ],
)
def test_the_corrected_or_plain_value_is_right(family: str, reply: str) -> None:
    assert graded(family, reply, "3"), (family, reply)


#: The plain correct answers an outside probe found graded wrong (CHAMP, issue 37): the final
#: sentence restates the gold, wrapped in a longer sentence.
PLAIN_RESTATEMENTS = [
    (
        "The expression x^4 + x^2 + 1 is factorized over the integers as (x²+x+1)(x²−x+1).",
        "(x^2+x+1)(x^2-x+1)",
        "Factorize x^4+x^2+1 over the integers.",
    ),
    (
        "The sequence defined by x_1 = 1, x_(n+1) = x_n^2 + 1 is not periodic.",
        "The sequence is not periodic",
        "Is the sequence defined by x_1 = 1, x_(n+1) = x_n^2 + 1 periodic?",
    ),
    (
        "Therefore, 1/(n+1) < a_n < 1/n for all integer values of n ≥ 2.",
        "1/(n+1) < a_n < 1/n",
        "Find bounds on a_n in terms of n.",
    ),
    (
        "The possible pairs (m, n) are (1, 2), (2, 1), and (3, 3).",
        "(1, 2), (2, 1), (3, 3)",
        "Find all pairs (m, n) of positive integers with m + n = mn - 1 or m = n = 3.",
    ),
]


@pytest.mark.parametrize(("reply", "gold", "prompt"), PLAIN_RESTATEMENTS)
def test_a_final_sentence_restating_the_gold_is_correct(reply: str, gold: str, prompt: str) -> None:
    assert graded("champ", reply, gold, prompt), reply


#: Classes read from the sealed samples after their one score (issue 37); each is a test that
#: failed on the code that scored them.
def test_a_negation_inside_the_subject_does_not_deny_the_boxed_value() -> None:
    reply = r"Therefore, the number of students who do not have a pet is \boxed{10}."
    assert graded("gsm8k", reply, "10")
    assert graded("math", reply, "10")
    # a negation of the claim itself still denies it
    assert not graded("gsm8k", r"The number of students with a pet is not \boxed{10}.", "10")


def test_the_question_given_back_unevaluated_is_no_answer() -> None:
    prompt = r"What is $\frac{1}{2} - \frac{1}{3}$?"
    assert not graded("math", r"The answer is $\frac{1}{2} - \frac{1}{3}$.", r"\frac{1}{6}", prompt)
    assert graded("math", r"The answer is $\frac{1}{6}$.", r"\frac{1}{6}", prompt)
    decimal = "What is $0.25$ written as a fraction in lowest terms?"
    assert not graded("math", "So $0.25$.", r"\frac{1}{4}", decimal)
    assert graded("math", r"So $\frac{1}{4}$.", r"\frac{1}{4}", decimal)


def test_an_incomplete_factorization_is_not_the_factorization() -> None:
    prompt = "Factorize x^8+x^4+1 over the integers."
    gold = "(x^2+x+1)(x^2-x+1)(x^4-x^2+1)"
    incomplete = "The factorization is (x^4 + x^2 + 1)(x^4 - x^2 + 1)."
    assert not graded("champ", incomplete, gold, prompt)
    assert graded("champ", "The factorization is (x^2+x+1)(x^2-x+1)(x^4-x^2+1).", gold, prompt)


def test_a_limit_stated_as_converges_to_is_its_value() -> None:
    prompt = "Does the sequence converge, and if so, to what limit?"
    reply = "For any x_0 > 0 and any a > 0, the sequence always converges to sqrt(a)."
    assert graded("champ", reply, "The only possible value for the limit is sqrt(a)", prompt)


def test_a_degenerate_run_of_digits_is_no_value() -> None:
    reply = "So the value is 0.25" + "0" * 300
    assert not graded("math", reply, r"\frac{1}{4}")
    assert graded("math", "So the value is 0.2500.", r"\frac{1}{4}")
