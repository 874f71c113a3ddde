"""GSM8K grade-school word problems: the answer is one number.

Gold answers come in GSM8K's own format (a worked solution ending in ``#### 42``) or as a bare
number. Numbers are compared as exact decimals after dropping thousands separators, currency
and percent signs, so "1,234.00" equals "1234" and "$0.50" equals ".5".

Reference: Cobbe et al., GSM8K (arXiv 2110.14168); Kaiser et al., arXiv 2602.09805 (GSM8K as a
workload benchmark).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

from legival_core.grading.boxes import last_boxed
from legival_core.tasks.base import Family, Task, problem_field, register_task
from legival_core.tasks.math import MATH_BACKTRACKING_RUBRIC

# A signed number: "1,234.5" (thousands groups), "1234.5", ".5"; optional $ before the digits.
_NUMBER_TOKEN = re.compile(r"-?\$?\s?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)")
_MARKED_ANSWER = re.compile(
    r"(?:####|answer\s*(?:is|:)|answer\s+is\s*:)\s*\$?\s*(-?\$?\s?[\d,]*\.?\d+)", re.IGNORECASE
)


def parse_number(text: str) -> Decimal | None:
    """The first number in ``text`` as a ``Decimal``; commas, ``$`` and ``%`` ignored.

    Example:
        >>> parse_number("$1,234.00")
        Decimal('1234.00')
        >>> parse_number("no digits") is None
        True
    """
    match = _NUMBER_TOKEN.search(text)
    if match is None:
        return None
    cleaned = re.sub(r"[\s$,]", "", match.group(0))
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


def canonical_number(value: Decimal) -> str:
    """A number written without trailing zeros or exponent: ``1234.00`` -> ``'1234'``.

    Example:
        >>> canonical_number(Decimal("1234.50"))
        '1234.5'
    """
    text = format(value.normalize(), "f")
    return "0" if text in {"-0", "0"} else text


def gsm8k_gold_number(gold: str) -> Decimal:
    """The number after the last ``####`` (or the whole gold when there is none).

    Raises:
        ValueError: the gold holds no number.
    """
    tail = gold.rsplit("####", 1)[-1]
    number = parse_number(tail)
    if number is None:
        raise ValueError(f"GSM8K gold has no number after '####': {gold[-80:]!r}")
    return number


@register_task
class GSM8KTask(Task):
    """GSM8K: reason step by step, give one number in ``\\boxed{}``; exact decimal match."""

    name: ClassVar[str] = "gsm8k"
    family: ClassVar[Family] = "math"
    system_prompt: ClassVar[str] = (
        "You solve arithmetic word problems carefully, one step at a time, and give the "
        "final number inside \\boxed{}."
    )
    forcing_cue: ClassVar[str] = "\n\nThe answer is \\boxed{"
    stop_strings: ClassVar[tuple[str, ...]] = ()
    backtracking_rubric: ClassVar[str] = MATH_BACKTRACKING_RUBRIC

    def user_prompt(self, problem: Mapping[str, Any]) -> str:
        question = problem_field(problem, "prompt", task=self.name)
        return (
            f"{question}\n\n"
            "Think it through step by step, then write only the final number inside \\boxed{}."
        )

    def _explicit_answer(self, text: str) -> str | None:
        boxed = last_boxed(text)
        if boxed is not None and (number := parse_number(boxed)) is not None:
            return canonical_number(number)
        marked = list(_MARKED_ANSWER.finditer(text))
        if marked and (number := parse_number(marked[-1].group(1))) is not None:
            return canonical_number(number)
        return None

    def extract_answer(self, text: str, *, problem: Mapping[str, Any] | None = None) -> str | None:
        """The boxed number, else the number after ``####`` / "answer is", else the last number.

        Example:
            >>> GSM8KTask().extract_answer(r"so she pays \\boxed{\\$1,234.00}")
            '1234'
            >>> GSM8KTask().extract_answer("7 apples and then 12 pears")
            '12'
        """
        explicit = self._explicit_answer(text)
        if explicit is not None:
            return explicit
        numbers = list(_NUMBER_TOKEN.finditer(text))
        for match in reversed(numbers):
            if (number := parse_number(match.group(0))) is not None:
                return canonical_number(number)
        return None

    def answer_extractable(self, text: str, *, problem: Mapping[str, Any] | None = None) -> bool:
        """Only an explicit answer (boxed, ``####``, "answer is") counts for stopping early."""
        return self._explicit_answer(text) is not None

    @staticmethod
    def score_answer(extracted: str, gold: str, options: Mapping[str, Any]) -> float:
        answer = parse_number(extracted)
        return 1.0 if answer is not None and answer == gsm8k_gold_number(gold) else 0.0
