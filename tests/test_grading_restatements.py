"""The plain path (issue 37): a final sentence that restates the gold is correct, for every gold.

A reply whose last sentence states the gold — verbatim, in LaTeX, boxed, after "Therefore,",
wrapped in a longer sentence ("… is factorized as G", "G for all n ≥ 2") — with no hedge,
negation or correction, is a plain correct answer. This property must hold for every gold of the
development label files and of every task family, so every rejection rule of the answer layer
is checked against it here. (The sealed sample's golds are left out until it is scored.)
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from legival_core.tasks import get_task
from legival_core.tasks.champ import (
    champ_accepted_answers,
    champ_ascii_to_latex,
    is_statement_answer,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: Label files whose golds are restated (development data; never the sealed sample).
LABEL_FILES = sorted(p for p in FIXTURES.glob("champ_*labels*.csv") if "sealed" not in p.name)

#: How a value gold G (its LaTeX form L) is restated.
VALUE_RESTATEMENTS = (
    "The answer is {g}.",
    "Therefore, {g}.",
    "So the final result is ${l}$.",
    "Hence we obtain {g}.",
    "The required expression is given by {g}.",
    "{g} for all n ≥ 2.",
    "Thus, the answer to the question is \\({l}\\).",
    "\\boxed{{{l}}}",
    "We find that the value is {g}, as claimed.",
    "After simplifying, the expression is factorized as {g}.",
)
#: How a Yes / No gold is restated.
YES_NO_RESTATEMENTS = ("{g}.", "Therefore, {g}.", "The answer is {g}.", "{g}, it is.")
#: How a statement gold S (s: its first letter lower-cased) is restated.
STATEMENT_RESTATEMENTS = (
    "Therefore, {s}.",
    "In conclusion, {s}.",
    "We conclude that {s}.",
    "The answer is: {S}.",
    "{S} for all n ≥ 2.",
)


def _champ_golds() -> dict[str, str]:
    golds: dict[str, str] = {}
    for path in LABEL_FILES:
        with path.open(encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f):
                golds[row["problem_id"]] = row["gold"]
    return golds


def restatements(gold: str) -> list[str]:
    """The plain restatements of a CHAMP gold (its first accepted form)."""
    form = (champ_accepted_answers(gold) or [gold])[0]
    if form.lower() in ("yes", "no"):
        return [t.format(g=form) for t in YES_NO_RESTATEMENTS]
    if is_statement_answer(form):
        lowered = form[0].lower() + form[1:]
        return [t.format(s=lowered, S=form) for t in STATEMENT_RESTATEMENTS]
    latex = champ_ascii_to_latex(form)
    return [t.format(g=form, l=latex) for t in VALUE_RESTATEMENTS]


@pytest.mark.slow
def test_every_champ_gold_restated_plainly_is_correct() -> None:
    from precompute.champ import champ_problems

    prompts = champ_problems().set_index("problem_id")["prompt"].to_dict()
    champ = get_task("champ")
    golds = _champ_golds()
    assert len(golds) > 250  # every problem of the label files
    wrong = []
    for problem_id, gold in sorted(golds.items()):
        problem = {"problem_id": problem_id, "prompt": prompts[problem_id]}
        for text in restatements(gold):
            graded = champ.grade_text({"answer_text": text}, gold, problem=problem)
            if not graded.grade.correct:
                wrong.append((problem_id, gold, text, graded.kind, graded.answer))
    assert not wrong, "\n".join(map(str, wrong))


#: GSM8K golds: the fixtures' and the number shapes word problems have.
GSM8K_GOLDS = ("18", "72", "3", "1234", "0.5", "-4", "1,250", "12.75", "100000")
GSM8K_RESTATEMENTS = (
    "\\boxed{{{g}}}",
    "#### {g}",
    "The answer is {g}.",
    "So the answer is ${g}.",
    "Therefore, she has {g} apples left.",
    "So the total cost is ${g}.",
    "Hence we get {g}.",
    "Therefore, {g}.",
    "In total, they sold {g} tickets.",
    "She earns {g} dollars in total.",
)


def _gsm8k_golds() -> list[str]:
    fixture = FIXTURES / "gsm8k.jsonl"
    lines = fixture.read_text(encoding="utf-8").splitlines()
    return [*GSM8K_GOLDS, *(json.loads(line)["answer"] for line in lines)]


@pytest.mark.parametrize("gold", _gsm8k_golds())
def test_every_gsm8k_gold_restated_plainly_is_correct(gold: str) -> None:
    number = gold.rsplit("####", 1)[-1].strip()
    gsm8k = get_task("gsm8k")
    for text in GSM8K_RESTATEMENTS:
        graded = gsm8k.grade_text({"answer_text": text.format(g=number)}, gold)
        assert graded.grade.correct, (text.format(g=number), graded)


#: MATH golds in LaTeX: the fixtures' and the shapes MATH answers take.
MATH_GOLDS = (
    "\\frac{1}{2}", "3\\sqrt{2}", "9\\pi", "x^2+1", "(1,2)", "-3", "0.25", "\\frac{\\sqrt{3}}{2}",
    "2^{10}", "\\dfrac{7}{8}", "10",
)  # fmt: skip
MATH_RESTATEMENTS = (
    "\\boxed{{{g}}}",
    "The final answer is $\\boxed{{{g}}}$.",
    "The answer is ${g}$.",
    "Therefore, ${g}$.",
    "Hence we obtain \\({g}\\).",
    "So the value is ${g}$.",
    "$${g}$$",
)


def _math_golds() -> list[str]:
    golds = list(MATH_GOLDS)
    for name in ("math500.jsonl", "hendrycks_math.jsonl"):
        for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            gold = row.get("answer")
            if isinstance(gold, str) and gold:
                golds.append(gold)
    return golds


@pytest.mark.parametrize("gold", _math_golds())
def test_every_math_gold_restated_plainly_is_correct(gold: str) -> None:
    math = get_task("math")
    for text in MATH_RESTATEMENTS:
        graded = math.grade_text({"answer_text": text.format(g=gold)}, gold)
        assert graded.grade.correct, (text.format(g=gold), graded)
