"""GSM8K grade-school word problems: the answer is one number.

Gold answers come in GSM8K's own format (a worked solution ending in ``#### 42``) or as a bare
number. A model's answer is the content of its last ``\\boxed{}`` (or the text after ``####``);
without one, the answer layer reads its prose like every other family's (``grade_text``), with
the same hedge, negation and correction policy.

An answer is right when it states **one number** equal to the gold (:func:`number_value`): a
plain number ("1,234.00", "$0.50", "12 apples"), or an arithmetic expression evaluated exactly
(``\\frac{3}{4}`` is 0.75, ``3^2`` is 9, never their first digit), or a computation that ends in
its value ("12 - 4 = 8" states 8, "x = 12" states 12; "3 + 4 = 8" states nothing). A list, a
hedge or words between numbers state no one number.

Reference: Cobbe et al., GSM8K (arXiv 2110.14168); Kaiser et al., arXiv 2602.09805 (GSM8K as a
workload benchmark).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from legival_core.grading.boxes import last_boxed
from legival_core.tasks.base import Task, register_task
from legival_core.tasks.math import MATH_BACKTRACKING_RUBRIC

# A signed number: "1,234.5" (thousands groups), "1234.5", ".5"; optional $ before the digits.
_NUMBER_TOKEN = re.compile(r"-?\$?\s?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)")
# "#### 42": GSM8K's own answer line.
_GSM8K_MARK = re.compile(r"####[ \t]*([^\n]*)")
# "the answer is 42" (used only to stop a student early: grading reads prose through the
# answer layer).
_ANSWER_IS = re.compile(r"\banswer\s*(?:is|:)\s*\$?\s*-?\$?\s?[\d,]*\.?\d", re.IGNORECASE)


def parse_number(text: str) -> Decimal | None:
    """The first number in ``text`` as a ``Decimal``; commas, ``$`` and ``%`` ignored (for the
    gold's ``#### 42`` line).

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


# --- one number, read exactly ------------------------------------------------------------------

# \text{…} and friends: units and words inside maths.
_TEXT_COMMAND = re.compile(r"\\(?:text|textbf|textit|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
_DROPPED = (
    ("\\left", ""), ("\\right", ""), ("\\$", ""), ("$", ""), ("\\,", ""), ("\\!", ""),
    ("\\;", ""), ("\\:", ""), ("~", ""), ("\\%", ""), ("%", ""), ("\\displaystyle", ""),
    ("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\times", "*"), ("\\cdot", "*"),
    ("×", "*"), ("·", "*"), ("÷", "/"), ("\\div", "/"), ("−", "-"),
)  # fmt: skip
# Unit words after a number ("12 apples", "5 dollars per hour"): letters and spaces only.
_TRAILING_WORDS = re.compile(r"(?<=[\d)}])\s*[A-Za-z][A-Za-z \t.]*$")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# A name on the left of "=" ("x = 12", "total = 12", "a_1 = 3").
_NAME = re.compile(r"^[A-Za-z][A-Za-z_{}0-9]*$")
#: Powers larger than this are not evaluated (a reply is untrusted: 9^9^9 must stay cheap).
MAX_EXPONENT = 64
#: An expression longer than this is not evaluated.
MAX_EXPRESSION_CHARS = 200


def number_value(text: str) -> Fraction | None:
    """The one number ``text`` states, exactly, or None.

    A plain number, an arithmetic expression (``+ - * / ^``, brackets, ``\\frac``, ``\\times``),
    or a computation ``E_1 = … = E_k`` whose every side that evaluates equals the last (a side
    may also be a name: "x = 12"); units after it are ignored.

    >>> number_value(r"\\$1,234.00"), number_value(r"\\frac{3}{4}"), number_value("3^2")
    (Fraction(1234, 1), Fraction(3, 4), Fraction(9, 1))
    >>> number_value("12 - 4 = 8"), number_value("3 + 4 = 8"), number_value("x = 12")
    (Fraction(8, 1), None, Fraction(12, 1))
    >>> number_value("3 or 4") is None, number_value(r"12 \\text{ apples}")
    (True, Fraction(12, 1))
    """
    if len(text) > 4 * MAX_EXPRESSION_CHARS:
        return None
    words = _TEXT_COMMAND.sub(lambda m: f" {m.group(1)} ", text)
    for old, new in _DROPPED:
        words = words.replace(old, new)
    words = _THOUSANDS.sub("", words).strip().rstrip(".")
    words = _TRAILING_WORDS.sub("", words).strip()
    sides = [side.strip() for side in re.split(r"(?<![<>!])=(?!=)", words)]
    if not sides or not sides[-1]:
        return None
    value = _evaluate(sides[-1])
    if value is None:
        return None
    for side in sides[:-1]:
        if _NAME.match(side):
            continue
        if _evaluate(side) != value:
            return None
    return value


_TOKEN = re.compile(r"\s*(\d+\.\d*|\.\d+|\d+|\\frac|[-+*/^(){}])")


def _evaluate(expression: str) -> Fraction | None:
    """The exact value of an arithmetic expression, or None when it is anything else."""
    if not expression or len(expression) > MAX_EXPRESSION_CHARS:
        return None
    tokens: list[str] = []
    position = 0
    while position < len(expression):
        match = _TOKEN.match(expression, position)
        if match is None:
            if expression[position:].strip():
                return None
            break
        tokens.append(match.group(1))
        position = match.end()
    parser = _ArithmeticReader(tokens)
    try:
        value = parser.sum()
    except (ValueError, ZeroDivisionError, IndexError):
        return None
    return value if parser.at == len(tokens) else None


class _ArithmeticReader:
    """Recursive descent over arithmetic tokens: sum, product, power, unary sign, atom."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.at = 0

    def _peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> str:
        token = self.tokens[self.at]
        if expected is not None and token != expected:
            raise ValueError(f"expected {expected!r}, got {token!r}")
        self.at += 1
        return token

    def sum(self) -> Fraction:
        value = self.product()
        while self._peek() in ("+", "-"):
            value = value + self.product() if self._take() == "+" else value - self.product()
        return value

    def product(self) -> Fraction:
        value = self.power()
        while self._peek() in ("*", "/"):
            value = value * self.power() if self._take() == "*" else value / self.power()
        return value

    def power(self) -> Fraction:
        base = self.unary()
        if self._peek() == "^":
            self._take()
            exponent = self.unary()
            if exponent.denominator != 1 or abs(exponent) > MAX_EXPONENT:
                raise ValueError("exponent")
            return base ** int(exponent)
        return base

    def unary(self) -> Fraction:
        if self._peek() in ("-", "+"):
            sign = -1 if self._take() == "-" else 1
            return sign * self.unary()
        return self.atom()

    def atom(self) -> Fraction:
        token = self._take()
        if token == "\\frac":
            numerator = self._group()
            return numerator / self._group()
        if token in ("(", "{"):
            self.at -= 1
            return self._group()
        return Fraction(token)

    def _group(self) -> Fraction:
        opener = self._take()
        if opener not in ("(", "{"):
            # \frac12: single digits
            if opener.isdigit():
                return Fraction(opener)
            raise ValueError("group")
        value = self.sum()
        self._take(")" if opener == "(" else "}")
        return value


@register_task
class GSM8KTask(Task):
    """GSM8K: reason step by step, give one number in ``\\boxed{}``; exact value match."""

    name = "gsm8k"
    family = "math"
    system_prompt = (
        "You solve arithmetic word problems carefully, one step at a time, and give the "
        "final number inside \\boxed{}."
    )
    backtracking_rubric = MATH_BACKTRACKING_RUBRIC
    answer_instructions = (
        "Think it through step by step, then write only the final number inside \\boxed{}."
    )

    def extract_answer(self, text: str, *, problem: Mapping[str, Any] | None = None) -> str | None:
        """The content of the last closed box, else what follows the last ``####``; None
        otherwise (prose is read by the answer layer).

        Example:
            >>> GSM8KTask().extract_answer(r"so she pays \\boxed{\\$1,234.00}")
            '\\\\$1,234.00'
            >>> GSM8KTask().extract_answer("#### 42") , GSM8KTask().extract_answer("7 and 12")
            ('42', None)
        """
        boxed = last_boxed(text)
        if boxed:
            return boxed
        marked = _GSM8K_MARK.findall(text)
        if marked and marked[-1].strip():
            return marked[-1].strip()
        return None

    def answer_extractable(self, text: str, *, problem: Mapping[str, Any] | None = None) -> bool:
        """Only an explicit answer (boxed, ``####``, "answer is 7") counts for stopping early."""
        return self.extract_answer(text) is not None or _ANSWER_IS.search(text) is not None

    @staticmethod
    def score_answer(extracted: str, gold: str, options: Mapping[str, Any]) -> float:
        answer = number_value(extracted)
        if answer is None:
            return 0.0
        return 1.0 if answer == Fraction(gsm8k_gold_number(gold)) else 0.0
