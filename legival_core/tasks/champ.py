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

_ALTERNATIVE_SEPARATOR = re.compile(
    r",?\s*or (?:equivalently|an equivalent form such as)\s*,?\s*", re.IGNORECASE
)
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


# Words of three or more letters outside LaTeX commands: what makes a text a sentence.
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}(?![A-Za-z])")
_STOP_WORDS = frozenset(
    {"the", "a", "an", "is", "are", "was", "were", "of", "in", "on", "to", "and", "that", "this"}
    | {"there", "it", "its", "be", "for", "with", "by", "as", "any", "all", "which", "such"}
)
_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10",
}  # fmt: skip
_UNICODE_POWERS = {"²": "^2", "³": "^3", "⁴": "^4", "ⁿ": "^n"}


_INLINE_MATHS = re.compile(r"\$\$.+?\$\$|\$[^$]+\$|\\\(.+?\\\)|\\\[.+?\\\]", re.DOTALL)
#: At most this many other content words may stand between two consecutive words of a
#: statement gold in the text that states it.
STATEMENT_GAP = 2


def _content_words(text: str) -> list[str]:
    """Lower-cased words and numbers of ``text`` without stop words, plural "s" dropped."""
    words = []
    for token in re.findall(r"[a-z]+|\d+", text.lower()):
        token = _NUMBER_WORDS.get(token, token)
        if token in _STOP_WORDS:
            continue
        words.append(token[:-1] if len(token) > 3 and token.endswith("s") else token)
    return words


def is_statement_answer(answer: str) -> bool:
    """True when a gold answer is a sentence ("No integer solutions"), not a value.

    >>> is_statement_answer("No positive integer solutions"), is_statement_answer("2^(n-1)")
    (True, False)
    """
    return len(_prose_words(answer)) >= 2


# Function names that CHAMP's ASCII maths writes as words; they do not make a text prose.
_MATH_WORDS = frozenset(
    {"floor", "ceil", "sqrt", "sum", "prod", "log", "sin", "cos", "tan", "exp", "max", "min"}
    | {"mod", "gcd", "lcm", "binom", "frac", "cdot", "times", "infty", "pmod", "arctan"}
)


def _prose_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in _MATH_WORDS]


def statement_matches(statement: str, text: str) -> bool:
    """A statement gold is stated by ``text`` when the content words of the gold (numbers and
    negations included; "one" read as 1, plurals as singulars) occur in ``text`` in the same
    order, at most :data:`STATEMENT_GAP` other content words apart (inline maths skipped).

    >>> statement_matches("No integer solutions", "There are no integer solutions for x > 0.")
    True
    >>> statement_matches("No integer solutions", "There are integer solutions.")
    False
    >>> statement_matches("No solutions", "It has no simple general form; all solutions vary.")
    False
    """
    wanted = _content_words(statement)
    have = _content_words(_INLINE_MATHS.sub(" ", text))
    for first in (i for i, word in enumerate(have) if wanted and word == wanted[0]):
        position, matched = first, 1
        for word in wanted[1:]:
            window = have[position + 1 : position + 2 + STATEMENT_GAP]
            if word not in window:
                break
            position += 1 + window.index(word)
            matched += 1
        if matched == len(wanted):
            return True
    return False


def champ_answer_for_math(answer: str) -> str:
    """A model's answer with Unicode maths CHAMP models write (√2, n², ≥) made ASCII/LaTeX.

    >>> print(champ_answer_for_math("(√2 + 1)/(4√2)"))
    (\\sqrt{2} + 1)/(4\\sqrt{2})
    """
    for power, ascii_power in _UNICODE_POWERS.items():
        answer = answer.replace(power, ascii_power)
    answer = re.sub(r"√\s*\(", "sqrt(", answer)
    answer = re.sub(r"√\s*([0-9A-Za-z]+)", r"\\sqrt{\1}", answer)
    return champ_ascii_to_latex(answer)


def champ_answer_matches(accepted: str, answer: str) -> bool:
    """One accepted CHAMP answer against one model answer (words, then mathematics).

    A statement gold is matched word by word (:func:`statement_matches`); a value gold never
    matches a candidate that is itself a sentence (three or more words), so that a number inside
    prose is not taken for the answer.
    """
    accepted_text = normalise_text_answer(accepted)
    answer_text = normalise_text_answer(answer)
    if accepted_text in _WORD_ANSWERS:
        return answer_text == accepted_text
    if accepted_text == answer_text:
        return True
    if is_statement_answer(accepted):
        return statement_matches(accepted, answer)
    if len(_prose_words(answer)) >= 3:
        return False
    return math_verify_equal(f"${champ_ascii_to_latex(accepted)}$", champ_answer_for_math(answer))


def champ_statement_answers(gold: str) -> list[str]:
    """Statements a CHAMP gold gives in words inside an "(i.e., ...)" remark.

    >>> champ_statement_answers("0 (i.e., no real-valued zeros)")
    ['no real-valued zeros']
    >>> champ_statement_answers("252")
    []
    """
    remarks = re.findall(r"\((?:i\.e\.|e\.g\.),?\s*([^()]*)\)", gold, re.IGNORECASE)
    return [r.strip() for r in remarks if is_statement_answer(r)]


@register_task
class ChampTask(MathTask):
    """CHAMP problems: boxed answers like ``math``; gold in CHAMP's answer conventions."""

    name: ClassVar[str] = "champ"

    @staticmethod
    def score_answer(extracted: str, gold: str, options: Mapping[str, Any]) -> float:
        accepted = champ_accepted_answers(gold)
        if not accepted:
            raise ValueError(f"CHAMP gold answer is empty: {gold!r}")
        accepted += champ_statement_answers(gold)
        return 1.0 if any(champ_answer_matches(a, extracted) for a in accepted) else 0.0
