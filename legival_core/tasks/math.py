"""Math problems with a boxed final answer (MATH and similar), graded by math-verify.

The answer is the content of the last ``\\boxed{...}``. Grading asks math-verify whether gold and
answer are the same mathematical object (``verify(parse(gold), parse(answer))``). Both sides are
wrapped in ``\\boxed{}`` first: math-verify reads a bare ``3\\sqrt{2}`` as ``3``, so a bare gold
would mark a wrong ``3`` as right. When math-verify can parse neither side (plain words), the
normalised strings are compared.

Reference: Legi-Val, arXiv 2603.20508 (MATH, §2 math rubric, §3 forcing cue).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from legival_core.grading.boxes import last_boxed
from legival_core.tasks.base import Task, register_task

MATH_BACKTRACKING_RUBRIC = """\
Count a step as backtracking when the solver turns back on its own reasoning instead of \
moving forward. Typical signs: it voices doubt about something it already wrote (often opening \
with "Wait", "But", "However", "Hmm", "Alternatively", "Going back"); it drops the method it was \
using and switches to a different one; it goes back to re-check earlier work and revises it; \
or it starts a fresh approach after the previous one failed. Do not count a small arithmetic \
correction that leaves the approach unchanged, a routine final check that confirms the result, \
or ordinary next steps of the same plan."""

_MATH_DELIMITED = re.compile(r"^\s*(\$|\\\(|\\\[)")
_TEXT_COMMAND = re.compile(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}")


def as_verifiable_latex(answer: str) -> str:
    """Wrap an answer so that math-verify reads all of it (``\\boxed{}`` unless delimited).

    Example:
        >>> as_verifiable_latex(r"3\\sqrt{2}")
        '\\\\boxed{3\\\\sqrt{2}}'
        >>> as_verifiable_latex("$x$")
        '$x$'
    """
    if "\\boxed" in answer or _MATH_DELIMITED.match(answer):
        return answer
    return f"\\boxed{{{answer.strip()}}}"


def normalise_text_answer(answer: str) -> str:
    """Lower-case, ``\\text{}`` unwrapped, spaces, ``$`` and end punctuation removed.

    Example:
        >>> normalise_text_answer(r"\\text{ Monday }.")
        'monday'
    """
    unwrapped = _TEXT_COMMAND.sub(r"\1", answer)
    return re.sub(r"[\s$]+", "", unwrapped).strip(".").lower()


def math_verify_equal(gold: str, answer: str) -> bool:
    """True when math-verify finds ``answer`` equal to ``gold`` (both wrapped first).

    Runs without math-verify's own signal-based timeouts: the caller enforces the deadline
    (see :mod:`legival_core.tasks.deadline`).
    """
    from math_verify import parse, verify

    parsed_gold = parse(as_verifiable_latex(gold), parsing_timeout=None)
    parsed_answer = parse(as_verifiable_latex(answer), parsing_timeout=None)
    if not parsed_gold or not parsed_answer:
        return bool(normalise_text_answer(gold)) and (
            normalise_text_answer(gold) == normalise_text_answer(answer)
        )
    return bool(verify(parsed_gold, parsed_answer, timeout_seconds=None))


@register_task
class MathTask(Task):
    """MATH-style problems: reason step by step, answer in ``\\boxed{}``; math-verify grades."""

    name = "math"
    family = "math"
    system_prompt = (
        "You are a careful mathematician. Work through problems one step at a time, "
        "and give the final result inside \\boxed{}."
    )
    backtracking_rubric = MATH_BACKTRACKING_RUBRIC
    warm_imports = ("math_verify",)
    answer_instructions = (
        "Reason it through step by step. When you are done, write the final answer "
        "in simplest form inside \\boxed{}."
    )

    def extract_answer(self, text: str, *, problem: Mapping[str, Any] | None = None) -> str | None:
        """The content of the last closed ``\\boxed{...}``; ``None`` if absent or empty.

        Example:
            >>> MathTask().extract_answer(r"\\boxed{1} no, \\boxed{\\frac{1}{2}}")
            '\\\\frac{1}{2}'
        """
        answer = last_boxed(text)
        return answer or None

    @staticmethod
    def score_answer(extracted: str, gold: str, options: Mapping[str, Any]) -> float:
        return 1.0 if math_verify_equal(gold, extracted) else 0.0
