"""CHAMP competition math: boxed answers graded against CHAMP's own answer conventions.

CHAMP (MIT licence; the ``champ-dataset`` package) writes gold answers in plain ASCII math with
``@@`` around the math parts and sometimes several accepted forms, e.g.
``@@sqrt(3)/3@@, or equivalently @@1/sqrt(3)@@``, ``900 (i.e., all values)``,
``0 is the only possible value``, ``Yes`` / ``No``, or a sentence. We turn such a gold into a list
of accepted answers: the alternatives after ", or equivalently", each without the ``@@`` marks,
without a trailing "(i.e., ...)" remark, with "N is the only possible value" reduced to N. The
model's boxed answer is right when it matches any accepted answer, either as mathematics
(math-verify, after translating CHAMP's ASCII functions such as ``sqrt(x)`` and ``C(n, k)`` into
LaTeX) or as normalised text. Yes/No golds are compared as words only: math-verify would read
"No" as the product n·o.

Reference: CHAMP (Mao et al., 2024, arXiv 2401.06961); Legi-Val, arXiv 2603.20508.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from legival_core.tasks.base import register_task
from legival_core.tasks.math import MathTask, math_verify_equal, normalise_text_answer

_ALTERNATIVE_SEPARATOR = re.compile(r",?\s*or equivalently\s*,?\s*", re.IGNORECASE)
# A trailing "(i.e., ...)" remark; it may hold parentheses of its own.
_IE_REMARK = re.compile(r"\s*\((?:i\.e\.|e\.g\.).*\)\s*$", re.IGNORECASE | re.DOTALL)
_ONLY_VALUE = re.compile(r"^(.+?)\s+is the only possible value\.?$", re.IGNORECASE)
_WORD_ANSWERS = frozenset({"yes", "no"})
_UNICODE_TO_LATEX = {"±": r"\pm ", "≥": r"\geq ", "≤": r"\leq ", "−": "-", "≠": r"\neq ", "·": "*"}


def _replace_call(text: str, function: str, render: Any) -> str:
    """Rewrite ``function(arg, ...)`` calls with balanced parentheses via ``render(args)``."""
    pattern = re.compile(rf"(?<![A-Za-z\\]){function}\(")
    while (match := pattern.search(text)) is not None:
        depth, index, args, arg_start = 1, match.end(), [], match.end()
        while index < len(text) and depth:
            char = text[index]
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
            elif char == "," and depth == 1:
                args.append(text[arg_start:index].strip())
                arg_start = index + 1
            index += 1
        if depth:
            return text  # unbalanced: leave the rest untouched
        args.append(text[arg_start : index - 1].strip())
        text = text[: match.start()] + render(args) + text[index:]
    return text


def champ_ascii_to_latex(expression: str) -> str:
    """CHAMP's ASCII math (``sqrt(3)/3``, ``C(n+1, 2m+1)``, ``floor(n/2)``, ``sum_(i=1)^n``)
    as LaTeX.

    Example:
        >>> champ_ascii_to_latex("sqrt(3)/3 + C(n, 2)")
        '\\\\sqrt{3}/3 + \\\\binom{n}{2}'
    """
    latex = expression
    for symbol, replacement in _UNICODE_TO_LATEX.items():
        latex = latex.replace(symbol, replacement)
    latex = _replace_call(latex, "sqrt", lambda args: "\\sqrt{" + ", ".join(args) + "}")
    latex = _replace_call(
        latex,
        "C",
        lambda args: f"\\binom{{{args[0]}}}{{{args[1]}}}" if len(args) == 2 else f"C({args})",
    )
    # Braced, so that "2^floor(n/2)" keeps the whole floor as its exponent; unbraced, the
    # parser read only the leading "2" and then matched any answer "2".
    for function, left, right in (
        ("floor", r"\lfloor ", r" \rfloor"),
        ("ceil", r"\lceil ", r" \rceil"),
    ):
        latex = _replace_call(
            latex, function, lambda args, a=left, b=right: "{" + a + ", ".join(args) + b + "}"
        )
    latex = re.sub(r"\b(sum|prod)_\(([^()]*)\)\^(\w+|\([^()]*\))", r"\\\1_{\2}^{\3}", latex)
    return latex


def champ_accepted_answers(gold: str) -> list[str]:
    """The answers a CHAMP gold accepts, in CHAMP's own notation without ``@@`` marks.

    Example:
        >>> champ_accepted_answers("@@sqrt(3)/3@@, or equivalently @@1/sqrt(3)@@")
        ['sqrt(3)/3', '1/sqrt(3)']
        >>> champ_accepted_answers("900 (i.e., all values)")
        ['900']
        >>> champ_accepted_answers("0 is the only possible value")
        ['0']
    """
    accepted: list[str] = []
    for alternative in _ALTERNATIVE_SEPARATOR.split(gold.strip()):
        text = _IE_REMARK.sub("", alternative.replace("@@", "")).strip()
        if only := _ONLY_VALUE.match(text):
            text = only.group(1).strip()
        if text:
            accepted.append(text)
    return accepted


def champ_answer_matches(accepted: str, answer: str) -> bool:
    """One accepted CHAMP answer against one model answer (words, then mathematics)."""
    accepted_text = normalise_text_answer(accepted)
    answer_text = normalise_text_answer(answer)
    if accepted_text in _WORD_ANSWERS:
        return answer_text == accepted_text
    if accepted_text == answer_text:
        return True
    return math_verify_equal(f"${champ_ascii_to_latex(accepted)}$", answer)


@register_task
class ChampTask(MathTask):
    """CHAMP problems: boxed answers like ``math``; gold in CHAMP's answer conventions."""

    name: ClassVar[str] = "champ"

    @staticmethod
    def score_answer(extracted: str, gold: str, options: Mapping[str, Any]) -> float:
        accepted = champ_accepted_answers(gold)
        if not accepted:
            raise ValueError(f"CHAMP gold answer is empty: {gold!r}")
        return 1.0 if any(champ_answer_matches(a, extracted) for a in accepted) else 0.0
