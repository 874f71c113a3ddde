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
from typing import Any

from legival_core.grading.lexicon import (
    CLAUSE_BREAKERS,
    CONDITIONS,
    NUMBER_WORDS,
    REASONS,
    words_pattern,
)
from legival_core.tasks.base import register_task
from legival_core.tasks.math import MathTask, math_verify_equal, normalise_text_answer

_ALTERNATIVE_SEPARATOR = re.compile(
    r",?\s*or (?:equivalently|an equivalent form such as|approximately)\s*,?\s*", re.IGNORECASE
)
# A trailing "(i.e., ...)" remark; it may hold parentheses of its own.
_IE_REMARK = re.compile(r"\s*\((?:i\.e\.|e\.g\.).*\)\s*$", re.IGNORECASE | re.DOTALL)
_ONLY_VALUE = re.compile(r"^(.+?)\s+is the only possible value\.?$", re.IGNORECASE)
# A value with a remark of words in brackets: "0 (no such selection is possible)".
_VALUE_REMARK = re.compile(r"^(-?\d+(?:/\d+)?)\s+\([A-Za-z][^()]*\s[^()]*\)$")
# A count with the noun it counts: "98 values", "2 inequalities", "0 roots", "n times" -> also
# "98", "n".
# Also an exact count in words: "Exactly one sequence" -> also "1" (a bound, "At least 1
# number", is not an exact count and keeps its words).
_COUNTED = re.compile(r"^(-?\d+|[a-z])\s+[A-Za-z]+(?:\s+[A-Za-z]+){0,2}\.?$")
_COUNTED_IN_WORDS = re.compile(
    r"^(?:exactly|only|precisely)\s+(one|two|three|four|five|six|seven|eight|nine|ten|\d+)"
    r"\s+[A-Za-z]+(?:\s+[A-Za-z]+){0,2}\.?$",
    re.IGNORECASE,
)
# A statement that names its value at the end: "The limit exists and is equal to 2", "The only
# possible value for the limit is sqrt(a)" -> also "2", "sqrt(a)" (stating the value states it).
_MAX_NAMED_GOLD = 200
_NAMED_VALUE = re.compile(
    r"^(?P<claim>.+?)\s(?:is|equals)(?:\s+equal\s+to)?\s+(?P<value>\S.*?)\.?$", re.IGNORECASE
)
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
        >>> champ_accepted_answers("0 (no such selection is possible)")
        ['0']
        >>> champ_accepted_answers("a(1±sqrt(2)), 5")
        ['a(1±sqrt(2)), 5', 'a(1+sqrt(2)), a(1-sqrt(2)), 5']
        >>> champ_accepted_answers("98 values")
        ['98 values', '98']
        >>> champ_accepted_answers("Exactly one sequence")
        ['Exactly one sequence', '1']
        >>> champ_accepted_answers("The limit exists and is equal to (1+sqrt(4a+1))/2")
        ['The limit exists and is equal to (1+sqrt(4a+1))/2', '(1+sqrt(4a+1))/2']
    """
    accepted: list[str] = []
    for alternative in _ALTERNATIVE_SEPARATOR.split(gold.strip()):
        text = _IE_REMARK.sub("", alternative.replace("@@", "")).strip()
        if only := _ONLY_VALUE.match(text):
            text = only.group(1).strip()
        if remarked := _VALUE_REMARK.match(text):
            text = remarked.group(1)  # "0 (no such selection is possible)": the value is 0
        if text:
            accepted.append(text)
            accepted += _value_of_statement(text)
            if "±" in text and (both := _both_signs(text)):
                accepted.append(both)
    return accepted


def _both_signs(text: str) -> str:
    """A gold list with each "±" written out as its two values ("a(1±sqrt(2)), 3" ->
    "a(1+sqrt(2)), a(1-sqrt(2)), 3"); "" when a value holds more than one "±"."""
    values: list[str] = []
    for value in (v.strip() for v in text.split(",")):
        if value.count("±") > 1:
            return ""
        values += [value.replace("±", "+"), value.replace("±", "-")] if "±" in value else [value]
    return ", ".join(values)


def _value_of_statement(text: str) -> list[str]:
    """The value a gold states along with its words: the number of a count with its noun
    ("98 values" -> 98), the value an affirmed statement ends with ("The limit exists and is
    equal to 2" -> 2; not when the claim is negated or the tail is itself prose)."""
    from legival_core.grading.polarity import negation_count

    if len(text) > _MAX_NAMED_GOLD:
        return []  # such golds are short; the bound keeps the lazy pattern below linear
    if counted := _COUNTED.match(text):
        return [counted.group(1)]
    if counted := _COUNTED_IN_WORDS.match(text):
        number = counted.group(1).lower()
        return [NUMBER_WORDS.get(number, number)]
    named = _NAMED_VALUE.match(text)
    if named is None or negation_count(named.group("claim")) or not is_statement_answer(text):
        return []
    from legival_core.grading.scanning import value_count

    value = named.group("value").strip()
    # One value only: "Yes, and the sequence is 1/2^3, 1/2^6, …" names no single value.
    if _prose_words(value) or not re.search(r"[0-9A-Za-z]", value) or value_count(value) > 1:
        return []
    return [value]


# Words of three or more letters outside LaTeX commands: what makes a text a sentence.
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}(?![A-Za-z])")
_STOP_WORDS = frozenset(
    {"the", "a", "an", "is", "are", "was", "were", "of", "in", "on", "to", "and", "that", "this"}
    | {"there", "it", "its", "be", "for", "with", "by", "as", "any", "all", "which", "such"}
)
_UNICODE_POWERS = {"²": "^2", "³": "^3", "⁴": "^4", "ⁿ": "^n"}


_INLINE_MATHS = re.compile(r"\$\$.+?\$\$|\$[^$]+\$|\\\(.+?\\\)|\\\[.+?\\\]", re.DOTALL)
#: At most this many other content words may stand between two consecutive words of a
#: statement gold in the text that states it.
STATEMENT_GAP = 2


#: Words a statement may use for one another ("one of the integers" states "1 number").
_SYNONYMS = {"integer": "number"}


def _content_words(text: str) -> list[str]:
    """Lower-cased words and numbers of ``text`` without stop words, plural "s" dropped."""
    return [word for word, _ in _content_words_at(text)]


def _content_words_at(text: str) -> list[tuple[str, int]]:
    """:func:`_content_words` with the position of each word in ``text``."""
    words = []
    for match in re.finditer(r"[a-z]+|\d+", text.lower()):
        token = NUMBER_WORDS.get(match.group(), match.group())
        if token in _STOP_WORDS:
            continue
        token = token[:-1] if len(token) > 3 and token.endswith("s") else token
        words.append((_SYNONYMS.get(token, token), match.start()))
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
    return _statement_position(statement, text) is not None


#: Words that open a clause of reasons: a statement's words are not matched across them.
_REASON_WORDS = frozenset(REASONS)
#: A word a statement gold may leave unsaid: "At least 1 number" is stated by "At least one
#: of $x$, $y$ and $z$ …".
_OPTIONAL_WORDS = frozenset({"number"})


def _without_maths(text: str) -> str:
    """``text`` with its maths blanked (same length), inline or in ASCII, and the commas between
    two formulas with it: "The sequence defined by x_1 = 1, x_(n+1) = … is not periodic" reads
    "The sequence defined by … is not periodic", one clause that states "The sequence is not
    periodic"."""
    from legival_core.grading.scanning import blank_ascii_maths

    blanked = blank_ascii_maths(_INLINE_MATHS.sub(lambda m: " " * len(m.group()), text))
    # A comma right after a blanked formula and before another one lists givens.
    return "".join(
        " " if c == "," and _between_blanked(text, blanked, i) else c for i, c in enumerate(blanked)
    )


def _between_blanked(text: str, blanked: str, index: int) -> bool:
    """True when the comma at ``index`` has a blanked formula just before it and just after it."""
    before = index - 1
    while before >= 0 and text[before] == " ":
        before -= 1
    after = index + 1
    while after < len(text) and text[after] == " ":
        after += 1
    return (
        before >= 0
        and after < len(text)
        and blanked[before] == " " != text[before]
        and blanked[after] == " " != text[after]
    )


def _statement_position(statement: str, text: str) -> int | None:
    """Where in ``text`` the words of ``statement`` start, read with inline maths blanked, then,
    when that finds nothing, with ASCII formulas blanked too (a formula between the subject and
    its verb: "The sequence defined by x_1 = 1, … is not periodic"). A statement of fewer than
    two content words ("all numbers") is too weak to be matched."""
    wanted = [w for w in _content_words(statement) if w not in _OPTIONAL_WORDS]
    if len(wanted) < 2:
        return None
    inline_blanked = _INLINE_MATHS.sub(lambda m: " " * len(m.group()), text)
    for words in (inline_blanked, _without_maths(text)):
        found = _words_position(wanted, _content_words_at(words))
        if found is not None:
            return found
    return None


def _words_position(wanted: list[str], located: list[tuple[str, int]]) -> int | None:
    """Where ``wanted`` starts among the ``located`` words, in order, each at most
    :data:`STATEMENT_GAP` words after the one before and never across a reason."""
    have = [word for word, _ in located]
    for first in (i for i, word in enumerate(have) if word == wanted[0]):
        position, matched = first, 1
        for word in wanted[1:]:
            window = have[position + 1 : position + 2 + STATEMENT_GAP]
            # Not across a reason: "monotonically decreasing, since a_n is increasing".
            cut = next((i for i, w in enumerate(window) if w in _REASON_WORDS), len(window))
            window = window[:cut] if word not in _REASON_WORDS else window
            if word not in window:
                break
            position += 1 + window.index(word)
            matched += 1
        if matched == len(wanted):
            return located[first][1]
    return None


# A case of a piecewise answer: "if m is odd", "when n is even", "otherwise".
_CONDITION = re.compile(rf"\b(?:{words_pattern(CONDITIONS)})\b", re.IGNORECASE)
# Where a clause begins: a negation before it does not scope over what follows.
_CLAUSE_BREAK = re.compile(rf"[,;:]|\b(?:{words_pattern(CLAUSE_BREAKERS)})\b", re.IGNORECASE)


def statement_asserted(statement: str, text: str) -> bool:
    """``text`` states ``statement`` (:func:`statement_matches`) and asserts it: it does not
    hedge, and the negations of the clause that states it agree in parity with the
    statement's own ("It is false that there are no integer solutions" denies "No integer
    solutions"; "We cannot conclude that …" commits to nothing).

    >>> gold = "No integer solutions"
    >>> statement_asserted(gold, "Since 3 is odd, there are no integer solutions.")
    True
    >>> statement_asserted(gold, "It is false that there are no integer solutions.")
    False
    >>> statement_asserted(gold, "We cannot conclude that there are no integer solutions.")
    False
    >>> statement_asserted(gold, "n = m/2 if m is even, and no integer solutions if m is odd.")
    False
    """
    from legival_core.grading.polarity import is_hedge, negation_count

    position = _statement_position(statement, text)
    if position is None or is_hedge(text):
        return False
    # Clauses are cut on the words: the commas of a formula list its givens.
    words = _without_maths(text)
    clause_start = condition_start = 0
    for match in _CLAUSE_BREAK.finditer(words, 0, position):
        condition_start, clause_start = clause_start, match.end()
    after = _CLAUSE_BREAK.search(words, position)
    # The clause that states it: its negations against the gold's.
    clause = words[clause_start : after.start() if after else len(words)]
    # Its condition: inside it ("… if m is odd") or the clause just before ("if m is odd, …").
    if not _CONDITION.match(text, condition_start) and not re.match(
        r"\W*(?:and\s+)?(?:if|when|whenever|unless)\b", text[condition_start:clause_start]
    ):
        condition_start = clause_start
    governed = text[condition_start : after.start() if after else len(text)]
    elsewhere = text[:condition_start] + " " + (text[after.start() :] if after else "")
    if _CONDITION.search(governed) and _CONDITION.search(elsewhere):
        # "… are n = m/2 + 1 if m is even, and there are no integer solutions if m is odd":
        # the gold holds in one case of a piecewise answer, which as a whole is not the gold.
        return False
    return negation_count(clause) % 2 == negation_count(statement) % 2


# A root said in words: "the positive square root of a" is sqrt(a) (the principal root; a
# "negative square root" is left alone, it is another value).
_SPOKEN_ROOT = re.compile(
    r"\b(?:the\s+)?(?:(?:positive|principal|non-?negative)\s+)?(square|cube)\s+root\s+of\s+"
    r"([A-Za-z0-9]+|\([^()]{0,80}\))",
    re.IGNORECASE,
)


def spoken_roots(answer: str) -> str:
    """``answer`` with roots said in words written as maths.

    >>> spoken_roots("the positive square root of a, denoted as √a")
    'sqrt(a)'
    >>> spoken_roots("the cube root of (x+1)")
    '(x+1)^(1/3)'
    >>> spoken_roots("the negative square root of a")
    'the negative square root of a'
    """

    def written(match: re.Match[str]) -> str:
        radicand = match.group(2)
        if match.group(1).lower() == "square":
            return f"sqrt({radicand.removeprefix('(').removesuffix(')')})"
        return f"{radicand}^(1/3)"

    if re.search(r"\bnegative\s+(?:square|cube)\s+root", answer, re.IGNORECASE):
        return answer
    spoken = _SPOKEN_ROOT.sub(written, answer)
    if spoken != answer:
        # "sqrt(a), denoted as √a": the name given after it is the same value again
        spoken = re.sub(r",?\s*(?:denoted|written)\s+(?:as|by)\b.*\Z", "", spoken, flags=re.S)
    return spoken


def champ_answer_for_math(answer: str) -> str:
    """A model's answer with Unicode maths CHAMP models write (√2, n², ≥) made ASCII/LaTeX.

    >>> print(champ_answer_for_math("(√2 + 1)/(4√2)"))
    (\\sqrt{2} + 1)/(4\\sqrt{2})
    """
    if answer.count("\\(") >= 2:
        # A list of inline maths ("\\( x = 1 \\), \\( x = 2 \\)"): one expression per item.
        answer = answer.replace("\\(", " ").replace("\\)", " ")
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
        if answer_text in _WORD_ANSWERS:
            # "No" (a reply's polarity) states a gold that denies: "The limit does not exist".
            from legival_core.grading.polarity import polarity

            return answer_text == "no" and polarity(accepted) == "no"
        return statement_asserted(accepted, answer)
    answer = spoken_roots(answer)
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

    name = "champ"

    def gold_values(self, gold: str) -> list[str]:
        return champ_accepted_answers(gold) or [gold]

    def gold_is_statement(self, gold: str) -> bool:
        accepted = champ_accepted_answers(gold) + champ_statement_answers(gold)
        return any(is_statement_answer(a) for a in accepted)

    @staticmethod
    def score_answer(extracted: str, gold: str, options: Mapping[str, Any]) -> float:
        accepted = champ_accepted_answers(gold)
        if not accepted:
            raise ValueError(f"CHAMP gold answer is empty: {gold!r}")
        accepted += champ_statement_answers(gold)
        return 1.0 if any(champ_answer_matches(a, extracted) for a in accepted) else 0.0
