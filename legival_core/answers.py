"""The answer layer: candidate answers, with their character spans, found in any model text.

Models state answers in many ways: ``\\boxed{2^{n-1}}``, "the answer is 239", "so there are 239
strings", "the number of ways is (2n)!/(2^n n!)", "No, it cannot be done", "= 5050". A grader
that only knows boxes marks all but the first wrong; a leak finder that only knows boxes never
fires on prose. This module finds every such *candidate* with its span in the original text and
leaves the decision to the task's verifier (math-verify for math and CHAMP), so grading, leak
points, early stop and forcing checks can share one definition of "states an answer".

Finders are registered by kind (:data:`FINDERS`); each returns candidates with exact spans.
:func:`answer_candidates` runs them all; :func:`final_answer_candidates` keeps the ones that
state the *final* answer of a text, in the order a grader should trust them:

1. boxed answers (the last box wins: a model that boxes has committed to it);
2. answer phrases ("the answer is X", "final answer: X"), the last one;
3. the closing sentence: the tail after its last copula ("… is X", "… are X", "… equals X",
   "… is given by the expression X"), "there are X …", its inline maths, the right-hand side
   of its last equation, a leading yes/no, an option letter.

Within group 3 every candidate is tried (the sentence states one answer, but where it starts is
a guess); numbers that merely restate the problem ("strings of length 6") are never candidates,
because only the spans named above are taken.

Reference: Legi-Val (arXiv 2603.20508) §3 answer extraction and forcing; SPEC §3 answer leak.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from legival_core.tasks.boxed import box_content_spans

__all__ = [
    "FINDERS",
    "AnswerCandidate",
    "answer_candidates",
    "closing_sentence_span",
    "final_answer_candidates",
    "first_accepted",
    "register_finder",
]


@dataclass(frozen=True, order=True)
class AnswerCandidate:
    """One answer a text may state.

    Attributes:
        start, end: the span of ``text`` in the source (``source[start:end] == text``).
        text: the candidate answer as written (stripped of surrounding spaces and punctuation).
        kind: the finder that produced it (a key of :data:`FINDERS`).
    """

    start: int
    end: int
    text: str
    kind: str

    @property
    def span(self) -> tuple[int, int]:
        return self.start, self.end


Finder = Callable[[str], Iterable[AnswerCandidate]]
#: kind -> finder. Order matters only for :func:`answer_candidates`' output before sorting.
FINDERS: dict[str, Finder] = {}


def register_finder(kind: str) -> Callable[[Finder], Finder]:
    """Decorator: register a finder of candidates of ``kind``."""

    def add(finder: Finder) -> Finder:
        FINDERS[kind] = finder
        return finder

    return add


# Characters trimmed from both ends of a candidate: spaces, sentence punctuation, and quotes.
_TRIM = " \t\r\n.,;:?\"'`“”‘’"  # not "!": a factorial ends an answer


def _candidate(source: str, start: int, end: int, kind: str) -> AnswerCandidate | None:
    """The candidate ``source[start:end]`` after trimming, or None when nothing is left."""
    while start < end and source[start] in _TRIM:
        start += 1
    while end > start and source[end - 1] in _TRIM:
        end -= 1
    # A trailing "$" or "\)" closes maths opened inside the span: keep the pair balanced.
    if start >= end:
        return None
    return AnswerCandidate(start, end, source[start:end], kind)


@register_finder("boxed")
def _boxed(text: str) -> Iterator[AnswerCandidate]:
    for start, end in box_content_spans(text):
        if (found := _candidate(text, start, end, "boxed")) is not None:
            yield found


# "the answer is X", "final answer: X", "answer = X"; X runs to the end of the sentence.
_ANSWER_PHRASE = re.compile(
    r"\b(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=|would\s+be|will\s+be)\s*(?::\s*)?",
    re.IGNORECASE,
)


@register_finder("answer_phrase")
def _answer_phrase(text: str) -> Iterator[AnswerCandidate]:
    for match in _ANSWER_PHRASE.finditer(text):
        end = _sentence_end(text, match.end())
        if (found := _candidate(text, match.end(), end, "answer_phrase")) is not None:
            yield found


# --- sentences ----------------------------------------------------------------------------------

# A sentence ends at ". ", "! ", "? " or a line break (not inside a number like "2.5", nor after
# an abbreviation handled by the caller's segmentation; answers are short, so this is enough).
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z\\$])|\n\s*\n|\n(?=\s*[-*#\d])")
# Maths regions whose inside is never split: $…$, $$…$$, \(…\), \[…\].
_MATH_REGION = re.compile(r"\$\$.+?\$\$|\$[^$]+\$|\\\(.+?\\\)|\\\[.+?\\\]", re.DOTALL)


def _math_regions(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _MATH_REGION.finditer(text)]


def _inside(position: int, regions: Sequence[tuple[int, int]]) -> bool:
    return any(start < position < end for start, end in regions)


def _sentence_end(text: str, position: int) -> int:
    regions = _math_regions(text)
    for match in _SENTENCE_BREAK.finditer(text, position):
        if not _inside(match.start(), regions):
            return match.start()
    return len(text)


def closing_sentence_span(text: str) -> tuple[int, int]:
    """The span of the last sentence of ``text`` that has a word or a number in it.

    >>> text = "We count cases. So there are 239 strings."
    >>> start, end = closing_sentence_span(text)
    >>> text[start:end]
    'So there are 239 strings.'
    """
    regions = _math_regions(text)
    breaks = _SENTENCE_BREAK.finditer(text)
    starts = [0] + [m.end() for m in breaks if not _inside(m.start(), regions)]
    for start in reversed(starts):
        end = _sentence_end(text, start) if start < len(text) else len(text)
        if re.search(r"[A-Za-z0-9]", text[start:end]):
            return start, end
    return 0, len(text)


# --- the closing sentence -------------------------------------------------------------------------

# The last copula of a sentence introduces what it states: "… is X", "… are X", "… equals X",
# "… will have X", "… is given by (the expression|formula) X", "… is equal to X".
_COPULA = re.compile(
    r"\b(?:is|are|was|were|equals|will\s+have|has|have|becomes|be)"
    r"(?:\s+(?:given\s+by|equal\s+to|exactly|simply|just))?"
    r"(?:\s+(?:the\s+)?(?:expression|formula|value|number|sum|product|answer))?"
    r"(?:\s*:)?\s+",
    re.IGNORECASE,
)
# "there are X …", "there is X …": X is the first maths-looking run after it.
_THERE_ARE = re.compile(r"\bthere\s+(?:are|is|will\s+be|exist|exists)\s+", re.IGNORECASE)
# A maths-looking run: numbers (also "2n", "2,001,000"), one- or two-letter variables, LaTeX
# commands, operators and brackets, possibly spaced; it stops at a word of three or more letters.
_TOKEN = (
    r"(?:\d[\d,]*(?:\.\d+)?(?:[A-Za-z]{1,2}(?![A-Za-z]))?"
    r"|(?<![A-Za-z])[A-Za-z]{1,2}(?![A-Za-z])"
    r"|\\[A-Za-z]+"
    r"|[-+*/^!=<>(){}\[\]_⋅·×√π∑∏])"
)
_EXPRESSION = re.compile(rf"{_TOKEN}(?:[ \t]*{_TOKEN})*")
# Used with Pattern.match(text, start): anchored at the sentence start ("^" would only match at
# the start of the whole text).
_YES_NO = re.compile(r"\W*(yes|no)\b", re.IGNORECASE)
_OPTION_AT_START = re.compile(r"\s*([A-E])[.)]\s")
_OPTION = re.compile(r"\(([A-E])\)|\boption\s+([A-E])\b", re.IGNORECASE)
_INLINE_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$]+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)


def _inline_math(text: str, start: int, end: int) -> Iterator[AnswerCandidate]:
    for match in _INLINE_MATH.finditer(text, start, end):
        group = next(g for g in range(1, 5) if match.group(g) is not None)
        if found := _candidate(text, match.start(group), match.end(group), "inline_math"):
            yield found


def _copula_tail(text: str, start: int, end: int) -> Iterator[AnswerCandidate]:
    regions = _math_regions(text)
    copulas = [m for m in _COPULA.finditer(text, start, end) if not _inside(m.start(), regions)]
    if not copulas:
        return
    # The whole tail after the last copula ("… is given by the expression (2n)!/(2^n n!).")
    if (tail := _candidate(text, copulas[-1].end(), end, "copula_tail")) is not None:
        yield tail
        # An appositive in parentheses after a word: "n factorial (n!)".
        for inner in _APPOSITIVE.finditer(tail.text):
            a, b = tail.start + inner.start(1), tail.start + inner.end(1)
            if (part := _candidate(text, a, b, "copula_tail")) is not None:
                yield part
    # After every copula, the expression that leads the rest of the sentence, without the words
    # that qualify it ("is 0, achieved when all x_i are equal", "are (n+1)^4 ways").
    for copula in copulas:
        if (part := _leading_expression(text, copula.end(), end, "copula_tail")) is not None:
            yield part


def _leading_expression(text: str, start: int, end: int, kind: str) -> AnswerCandidate | None:
    """The maths-looking run at ``start``, or None. A bare variable followed by a word ("n
    factorial", "no two") is prose, not an answer."""
    lead = _EXPRESSION.match(text, start, end)
    if lead is None or (found := _candidate(text, lead.start(), lead.end(), kind)) is None:
        return None
    rest = text[found.end : end].lstrip()
    if found.text.isalpha() and rest[:1].isalpha():
        return None
    return found


# "(n!)" after a word and a space; not a function call "ln(n)" nor a power "2^(n-1)".
_APPOSITIVE = re.compile(r"(?<=[A-Za-z]) \(([^()]+)\)")


def _there_are(text: str, start: int, end: int) -> Iterator[AnswerCandidate]:
    for match in _THERE_ARE.finditer(text, start, end):
        if (found := _leading_expression(text, match.end(), end, "there_are")) is not None:
            yield found


def _equation_rhs(text: str, start: int, end: int) -> Iterator[AnswerCandidate]:
    sentence = text[start:end]
    position = sentence.rfind("=")
    if position < 0 or sentence[position - 1 : position] in "<>!":
        return
    if (found := _candidate(text, start + position + 1, end, "equation_rhs")) is not None:
        yield found


def _yes_no(text: str, start: int, end: int) -> Iterator[AnswerCandidate]:
    if match := _YES_NO.match(text, start, end):
        yield AnswerCandidate(match.start(1), match.end(1), match.group(1), "yes_no")


def _option(text: str, start: int, end: int) -> Iterator[AnswerCandidate]:
    if match := _OPTION_AT_START.match(text, start, end):
        yield AnswerCandidate(match.start(1), match.end(1), match.group(1), "option")
    for match in _OPTION.finditer(text, start, end):
        group = 1 if match.group(1) is not None else 2
        letter = match.group(group)
        if group == 2 or letter.isupper():
            yield AnswerCandidate(match.start(group), match.end(group), letter.upper(), "option")


_SENTENCE_FINDERS = (_copula_tail, _there_are, _inline_math, _equation_rhs, _yes_no, _option)

# Separators of a list of values: "A, B, or C", "A or B", "A and B" (a bare comma followed by
# words, as in "0, achieved when …", is a qualifier, not a list).
_LIST_SEPARATOR = re.compile(r"\s*,?\s*\b(?:or|and)\b\s*|\s*,\s*")
_MATH_DELIMITERS = re.compile(r"^\$+|\$+$|^\\\(|\\\)$")


def _looks_like_value(part: str) -> bool:
    bare = _MATH_DELIMITERS.sub("", part.strip()).strip()
    return bool(bare) and _EXPRESSION.fullmatch(bare) is not None


def _value_list_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The span of the tail after the sentence's last copula when it lists several values
    ("is $0$, $1$, or $-1$", "are 0 and any positive integer less than 100"), else None."""
    regions = _math_regions(text)
    copulas = [m for m in _COPULA.finditer(text, start, end) if not _inside(m.start(), regions)]
    if not copulas or (tail := _candidate(text, copulas[-1].end(), end, "list")) is None:
        return None
    separators = [
        m
        for m in _LIST_SEPARATOR.finditer(tail.text)
        if not _inside(tail.start + m.start(), regions)
    ]
    if not separators:
        return None
    parts = _LIST_SEPARATOR.split(tail.text)
    has_conjunction = any(re.search(r"\b(?:or|and)\b", m.group()) for m in separators)
    values = sum(_looks_like_value(part) for part in parts)
    if _looks_like_value(parts[0]) and (has_conjunction or values == len(parts)):
        return tail.start, tail.end
    return None


@register_finder("closing_sentence")
def _closing_sentence(text: str) -> Iterator[AnswerCandidate]:
    start, end = closing_sentence_span(text)
    if text[start:end].rstrip().endswith("?"):
        return  # a question ("What is 2 + 3?") states no answer
    listed = _value_list_span(text, start, end)
    if listed is not None:
        # One answer made of several values: graded whole, never value by value (a list that
        # holds the gold among other values is not the gold).
        yield AnswerCandidate(listed[0], listed[1], text[listed[0] : listed[1]], "list")
    for finder in _SENTENCE_FINDERS:
        for found in finder(text, start, end):
            inside_list = listed is not None and listed[0] <= found.start < listed[1]
            if not inside_list or (found.start, found.end) == listed:
                yield found
    # The whole sentence last: a gold that is a statement ("No integer solutions") is checked
    # against the sentence that states it.
    if (whole := _candidate(text, start, end, "sentence")) is not None:
        yield whole


# --- public API ---------------------------------------------------------------------------------


def answer_candidates(text: str) -> list[AnswerCandidate]:
    """Every candidate answer in ``text`` from every registered finder, in text order.

    Candidates can overlap (a box inside a closing sentence is found twice, as ``boxed`` and as
    part of the sentence). Duplicates of the same span and kind are dropped.

    >>> for c in answer_candidates("So there are 239 strings."):
    ...     print(c.kind, repr(c.text), c.start, c.end)
    sentence 'So there are 239 strings' 0 24
    copula_tail '239' 13 16
    there_are '239' 13 16
    copula_tail '239 strings' 13 24
    """
    seen: set[AnswerCandidate] = set()
    found: list[AnswerCandidate] = []
    for finder in FINDERS.values():
        for candidate in finder(text):
            if candidate not in seen:
                seen.add(candidate)
                found.append(candidate)
    return sorted(found, key=lambda c: (c.start, c.end))


def final_answer_candidates(text: str) -> list[AnswerCandidate]:
    """The candidates that state ``text``'s *final* answer, most trusted first.

    The last box if there is one; else the last answer phrase; else every candidate of the
    closing sentence (see the module docstring), the whole sentence last. Empty for empty text.

    >>> [c.text for c in final_answer_candidates(r"Maybe \\boxed{3}. No: \\boxed{4}. Done.")]
    ['4']
    >>> [c.text for c in final_answer_candidates("We get 5. The final answer is 7.")]
    ['7']
    >>> [(c.kind, c.text) for c in final_answer_candidates("No, it cannot be done.")]
    [('copula_tail', 'done'), ('yes_no', 'No'), ('sentence', 'No, it cannot be done')]
    >>> [c.kind for c in final_answer_candidates("I am not sure.")]  # only for statement golds
    ['sentence']
    >>> final_answer_candidates("")
    []
    """
    boxed = list(FINDERS["boxed"](text))
    if boxed:
        return [boxed[-1]]
    phrases = list(FINDERS["answer_phrase"](text))
    if phrases:
        return [phrases[-1]]
    return list(dict.fromkeys(FINDERS["closing_sentence"](text)))


def first_accepted(
    candidates: Iterable[AnswerCandidate], accepts: Callable[[str], bool]
) -> AnswerCandidate | None:
    """The first candidate whose text ``accepts`` (the task's verifier against the gold) takes.

    >>> found = first_accepted(answer_candidates("So there are 239 strings."), lambda a: a == "239")
    >>> (found.kind, found.start, found.end)
    ('copula_tail', 13, 16)
    """
    for candidate in candidates:
        if accepts(candidate.text):
            return candidate
    return None
