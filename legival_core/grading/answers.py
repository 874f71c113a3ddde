"""The answer layer: candidate answers, with their character spans, found in any model text.

Models state answers in many ways: ``\\boxed{2^{n-1}}``, "the answer is 239", "so there are 239
strings", "the number of ways is (2n)!/(2^n n!)", "No, it cannot be done", "= 5050", "There
are no integer solutions". A grader that only knows boxes marks all but the first wrong; a
leak finder that only knows boxes never fires on prose. This module finds every such
*candidate* with its span in the original text and leaves the decision to the task's verifier
(math-verify for math and CHAMP), so grading, leak points, early stop and forcing checks share
one definition of "states an answer".

Finders are registered by kind (:data:`FINDERS`); each returns candidates with exact spans.
:func:`answer_candidates` runs them all; :func:`final_answer_candidates` keeps the ones that
state the *final* answer of a text, in the order a grader should trust them:

1. boxed answers (the last box wins: a model that boxes has committed to it);
2. answer phrases ("the answer is X", "final answer: X"), the last one;
3. the closing sentence: the tail after its last copula ("… is X", "… are X", "… equals X",
   "… is given by the expression X"), "there are X …", its inline maths, the right-hand side
   of its last equation, a residue "≡ r (mod n)", a leading yes/no, an option letter.

Every candidate is read in the frame of its question (:class:`AnswerFrame`, the question type
of :mod:`legival_core.grading.questions`):

- a yes/no question answered by a statement gets a ``polarity`` candidate, "Yes" or "No", from
  the negations of the sentence (:mod:`legival_core.grading.polarity`); a count question gets a
  ``count`` candidate from "exactly two", "no such", "none", "For 20 values of n, …";
- a sentence that hedges ("Yes and no", "3 (or possibly 239)", "we cannot conclude …") states
  nothing: its only candidate is of kind ``hedge``, which no grader accepts;
- several values offered together ("3 or 239", "$0$, $1$, or $-1$", "Possible answers: 3,
  239") are one candidate of kind ``list``, graded whole and only against a gold that is
  itself several values; the values inside it are never candidates on their own;
- what follows the answer ("is 11, achieved when m = 1 and n = 2") is cut off: a trailing
  clause holds no candidates;
- a candidate that restates a condition of the problem (the same equation, congruence or
  inequality written in the prompt) is never the answer.

Linear time: no regular expression here can backtrack more than a bounded window. Maths
regions, sentence breaks and expressions are found by hand-written one-pass scanners; the
patterns used on sentences run on at most :data:`MAX_SENTENCE_CHARS` characters.

Reference: Legi-Val (arXiv 2603.20508) §3 answer extraction and forcing;
docs/metrics/fotu-before-leak.md answer leak.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from legival_core.grading.boxes import box_content_spans
from legival_core.grading.lexicon import NUMBER_WORDS
from legival_core.grading.polarity import (
    AskedClaim,
    asked_claim,
    clause_start,
    is_hedge,
    main_clause,
    negation_count,
    polarity,
    sentential_negation_count,
    speaks_to,
    unequal_count,
)

__all__ = [
    "FINDERS",
    "MAX_SENTENCE_CHARS",
    "REJECTED_KINDS",
    "STATEMENT_ONLY_KINDS",
    "AnswerCandidate",
    "AnswerFrame",
    "answer_candidates",
    "closing_sentence_span",
    "expression_end",
    "final_answer_candidates",
    "first_accepted",
    "math_regions",
    "register_finder",
    "restates_given",
    "topic_words",
    "value_count",
]

#: A sentence (or the text after "the answer is") is read on at most this many characters; an
#: answer is short, and the bound keeps every pattern on it linear in the whole text.
MAX_SENTENCE_CHARS = 2000
#: Inside a trace (leak points: one closing sentence per step) a sentence is read on at most
#: this many characters: a sentence that states an answer is short.
MAX_PREFIX_SENTENCE_CHARS = 500
#: Candidate kinds that state no single answer: never accepted by a grader (kept for
#: explanations).
REJECTED_KINDS = frozenset({"hedge"})
#: Whole-sentence candidates that hold a list, a restated condition or an expression cut off
#: before its brackets close: read only against a gold that is a statement (a value's verifier
#: would take the list's, the condition's or the fragment's last value).
STATEMENT_ONLY_KINDS = frozenset({"list_sentence", "given_sentence", "cut_sentence"})


@dataclass(frozen=True, order=True)
class AnswerCandidate:
    """One answer a text may state.

    Attributes:
        start, end: the span of ``text`` in the source (``source[start:end] == text``), except
            for ``polarity`` and ``count`` candidates, whose text is the answer they read
            ("No", "0") and whose span is the sentence that states it.
        text: the candidate answer as written (stripped of surrounding spaces and punctuation).
        kind: the finder that produced it (a key of :data:`FINDERS` or a sentence finder).
    """

    start: int
    end: int
    text: str
    kind: str

    @property
    def span(self) -> tuple[int, int]:
        return self.start, self.end


@dataclass(frozen=True)
class AnswerFrame:
    """What the question asks, for reading its answers.

    Attributes:
        question_type: a type of :mod:`legival_core.grading.questions` (default
            ``"expression"``).
        prompt: the problem text, whose conditions are never the answer (None: unknown).
    """

    question_type: str = "expression"
    prompt: str | None = None
    _givens: str | None = field(default=None, compare=False, repr=False)
    _focus: frozenset[str] | None = field(default=None, compare=False, repr=False)
    _asked: AskedClaim | None = field(default=None, compare=False, repr=False)
    _asked_object: str | None = field(default=None, compare=False, repr=False)
    _set_aside: frozenset[str] | None = field(default=None, compare=False, repr=False)

    @property
    def question_negated(self) -> bool:
        """True when the question itself is negated ("Must x_n ≠ 0 for all n?")."""
        from legival_core.grading.questions import asking_sentence

        if not self.prompt:
            return False
        # A remark in brackets ("(i.e., not encountering division by zero)") is no negation.
        asking = _BRACKETED.sub(" ", asking_sentence(self.prompt))
        # "≠" negates the question's claim ("Must x_n ≠ 0 for all n?"), not when it only
        # ranges over cases ("for any p ≠ q"); a reply's polarity counts it the same way.
        return (sentential_negation_count(asking) + unequal_count(asking)) % 2 == 1

    @property
    def asked(self) -> AskedClaim:
        """What the question's claim is about beyond its words (a limit; computed once)."""
        if self._asked is None:
            from legival_core.grading.questions import asking_sentence

            object.__setattr__(self, "_asked", asked_claim(asking_sentence(self.prompt or "")))
        return self._asked or AskedClaim()

    @property
    def focus(self) -> frozenset[str]:
        """The words and numbers of the asking sentence that the rest of the prompt does not
        hold: what the question asks about ("Must x_n ≠ 0 for all n?" after a definition of
        the sequence: {"0"}). Empty without a prompt (computed once)."""
        if self._focus is None:
            from legival_core.grading.questions import asking_sentence

            asking = asking_sentence(self.prompt or "")
            lowered = (self.prompt or "").lower()
            cut = lowered.rfind(asking) if asking else -1
            rest = lowered[:cut] + lowered[cut + len(asking) :] if cut >= 0 else lowered
            focus = frozenset(topic_words(asking)) - frozenset(topic_words(rest))
            object.__setattr__(self, "_focus", focus)
        return self._focus or frozenset()

    @property
    def set_aside(self) -> frozenset[str]:
        """Values the question itself sets aside ("… besides 25": {"25"}), in the normal form
        of :func:`restates_given`; computed once per frame (it is asked once per sentence)."""
        if self._set_aside is None:
            from legival_core.grading.questions import asking_sentence

            asking = asking_sentence(self.prompt or "")
            values = frozenset(
                _normal_maths(value)
                for match in _SET_ASIDE.finditer(asking)
                for value in re.split(r"\s*(?:,|\band\b|\bor\b)\s*", match.group(1))
                if value
            )
            object.__setattr__(self, "_set_aside", values)
        return self._set_aside or frozenset()

    def restates_object(self, candidate: str) -> bool:
        """True when ``candidate`` is the one expression the question asks about ("Factorize
        x^8+x^4+1": "x^8 + x^4 + 1"), which is never its answer. Not for yes/no and choice
        questions, nor when the asking sentence writes several expressions ("Which is larger,
        2^100 or 3^60?"): there a restated expression may be the answer."""
        if self.question_type in ("yes_no", "choice") or not self.prompt:
            return False
        if self._asked_object is None:
            from legival_core.grading.questions import asking_sentence

            asked_object = _only_expression(asking_sentence(self.prompt))
            object.__setattr__(self, "_asked_object", asked_object)
        normal = _normal_maths(candidate)
        return bool(self._asked_object) and normal == self._asked_object

    @property
    def givens(self) -> str:
        """The prompt in the normal form of :func:`restates_given` (computed once)."""
        if self._givens is None:
            object.__setattr__(self, "_givens", _normal_maths(self.prompt or ""))
        return self._givens or ""


_BRACKETED = re.compile(r"\([^()]*\)")
_OPERATOR_CHARS = frozenset("+-*/^")


def _only_expression(asking: str) -> str:
    """The normal form (:func:`_normal_maths`) of the one expression with an operator that
    ``asking`` writes, of five or more characters; "" when it writes none or several."""
    found: list[str] = []
    index = 0
    while index < len(asking):
        stop = expression_end(asking, index)
        if stop > index:
            normal = _normal_maths(asking[index:stop])
            if len(normal) >= 5 and _OPERATOR_CHARS.intersection(normal):
                found.append(normal)
            index = stop
        else:
            index += 1
    return found[0] if len(found) == 1 else ""


_TOPIC_TOKEN = re.compile(r"\\[A-Za-z]+|[A-Za-z]{3,}|\d+")
#: Words that ask or join, not what is asked about.
_TOPIC_STOP = frozenset({
    "the", "and", "for", "all", "any", "must", "can", "could", "does", "did", "are", "was",
    "were", "there", "that", "this", "with", "such", "have", "has", "not", "what", "which",
    "whether", "determine", "prove", "disprove", "find", "some", "each", "every", "its", "their",
    "from", "into", "than", "then", "also", "only", "may", "might", "will", "would", "should",
    "shall", "let", "given",
})  # fmt: skip
_TOPIC_SAME = {"zero": "0", "impossible": "possible", "exists": "exist"}


def topic_words(text: str) -> list[str]:
    """Lower-cased words of three or more letters and numbers of ``text`` (LaTeX commands,
    joining and asking words left out; a plural "s" dropped, "zero" read as 0), by one pass.

    >>> topic_words(r"The sequence has no zero terms, $x_n \\neq 0$.")
    ['sequence', '0', 'term', '0']
    """
    words = []
    for match in _TOPIC_TOKEN.finditer(text[-MAX_SENTENCE_CHARS * 2 :].lower()):
        word = match.group()
        if word.startswith("\\") or word in _TOPIC_STOP:
            continue
        word = _TOPIC_SAME.get(word, word)
        words.append(word[:-1] if len(word) > 3 and word.endswith("s") else word)
    return words


Finder = Callable[["_Text", AnswerFrame], Iterable[AnswerCandidate]]
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
    if start >= end:
        return None
    return AnswerCandidate(start, end, source[start:end], kind)


# --- linear scanners ------------------------------------------------------------------------------


def math_regions(text: str) -> list[tuple[int, int]]:
    """Spans of the maths regions ``$$…$$``, ``$…$``, ``\\(…\\)``, ``\\[…\\]`` of ``text``,
    in order, by one left-to-right pass (an unclosed opener is plain text).

    Each closer is looked up with ``str.find``; once a closer is known to be absent after some
    position it is never looked up again, so the pass is linear even on thousands of unclosed
    openers.

    >>> math_regions(r"a $x$ b \\(y\\) $$z$$ $unclosed")
    [(2, 5), (8, 13), (14, 19)]
    """
    regions: list[tuple[int, int]] = []
    absent_after: dict[str, int] = {}  # closer -> a position after which it never occurs
    index, length = 0, len(text)

    def closer(token: str, start: int) -> int:
        if start >= absent_after.get(token, length + 1):
            return -1
        found = text.find(token, start)
        if found < 0:
            absent_after[token] = start
        return found

    while index < length:
        char = text[index]
        if char == "$":
            if text.startswith("$$", index):
                end = closer("$$", index + 2)
                # "$$…$$" needs something inside; "$$" alone may open an empty "$…$" pair.
                if end > index + 2:
                    regions.append((index, end + 2))
                    index = end + 2
                    continue
            end = closer("$", index + 1)
            if end > index + 1:
                regions.append((index, end + 1))
                index = end + 1
                continue
            index += 1
        elif char == "\\" and text.startswith(("\\(", "\\["), index):
            close = "\\)" if text[index + 1] == "(" else "\\]"
            end = closer(close, index + 2)
            if end > index + 2:
                regions.append((index, end + 2))
                index = end + 2
                continue
            index += 2
        else:
            index += 1
    return regions


_BREAK_AFTER = ".!?"
_LIST_LEAD = "-*#0123456789"


def _sentence_breaks(text: str) -> list[tuple[int, int]]:
    """Spans of the sentence breaks of ``text``: the spaces after ". ", "! ", "? " before a
    capital, a backslash or "$"; a blank line; a line break before a list item or a numbered
    line. One pass over the whitespace runs of ``text``.

    >>> _sentence_breaks("One. Two\\n\\nthree\\n- four")
    [(4, 5), (8, 10), (15, 16)]
    """
    breaks: list[tuple[int, int]] = []
    length, index = len(text), 0
    while index < length:
        if not text[index].isspace():
            index += 1
            continue
        run_start = index
        while index < length and text[index].isspace():
            index += 1
        run_end = index  # text[run_start:run_end] is a maximal whitespace run
        after = text[run_end] if run_end < length else ""
        if (
            run_start > 0
            and text[run_start - 1] in _BREAK_AFTER
            and after
            and (after.isupper() or after in "\\$")
        ):
            breaks.append((run_start, run_end))
            continue
        newline = text.find("\n", run_start, run_end)
        while newline >= 0:
            last = text.rfind("\n", newline + 1, run_end)
            if last >= 0:  # a blank line: from this line break to the last one of the run
                breaks.append((newline, last + 1))
                break
            if after and after in _LIST_LEAD:
                breaks.append((newline, newline + 1))
            newline = text.find("\n", newline + 1, run_end)
    return breaks


_SPACE = re.compile(r"\s+")


def _window_start(text: str, start: int, end: int, limit: int) -> int:
    """Where a sentence ``text[start:end]`` read on its last ``limit`` characters begins: at
    ``end - limit``, moved on past the token that the cut falls inside ("= 1000…0" read from
    inside its zeros would be the value 0); ``end`` when no whole token is left.

    >>> text = "x = 1" + "0" * 10 + " so 7"
    >>> text[_window_start(text, 0, len(text), 8) :]
    'so 7'
    >>> _window_start("1" + "0" * 10, 0, 11, 8)
    11
    """
    if end - start <= limit:
        return start
    cut = end - limit
    if text[cut - 1].isspace() or text[cut].isspace():
        return cut
    gap = _SPACE.search(text, cut, end)
    return gap.end() if gap is not None else end


def _window_end(text: str, start: int, cut: int) -> int:
    """Where a text ``text[start:]`` read up to ``cut`` ends: at ``cut``, moved back before the
    token it falls inside ("is 1000…0" cut inside its zeros names a smaller number); ``start``
    when no whole token is left.

    >>> text = "is 7 and 1" + "0" * 10
    >>> text[: _window_end(text, 0, 15)]
    'is 7 and'
    """
    if cut >= len(text) or text[cut].isspace() or text[cut - 1].isspace():
        return cut
    last = max(text.rfind(space, start, cut) for space in " \t\n\r")
    return last if last > start else start


class _Text:
    """A text with its maths regions and sentence breaks, found once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.regions = math_regions(text)
        self._region_starts = [start for start, _ in self.regions]
        self.breaks = [b for b in _sentence_breaks(text) if not self.inside(b[0])]
        self._break_starts = [start for start, _ in self.breaks]
        self._good: list[int] | None = None

    def inside(self, position: int) -> bool:
        """True when ``position`` lies strictly inside a maths region."""
        at = bisect.bisect_left(self._region_starts, position) - 1
        return at >= 0 and self.regions[at][0] < position < self.regions[at][1]

    def region_at(self, position: int) -> tuple[int, int] | None:
        """The maths region holding ``position`` (its delimiters included), or None."""
        at = bisect.bisect_right(self._region_starts, position) - 1
        if at >= 0 and self.regions[at][0] <= position < self.regions[at][1]:
            return self.regions[at]
        return None

    def sentence_end(self, position: int) -> int:
        """Where the sentence holding ``position`` ends (the next break, or the end)."""
        at = bisect.bisect_left(self._break_starts, position)
        return self.breaks[at][0] if at < len(self.breaks) else len(self.text)

    def sentence_start(self, position: int) -> int:
        """Where the sentence holding ``position`` starts."""
        at = bisect.bisect_right(self._break_starts, position) - 1
        while at >= 0 and self.breaks[at][1] > position:
            at -= 1
        return self.breaks[at][1] if at >= 0 else 0

    def closing_sentence(self, end: int | None = None) -> tuple[int, int]:
        """The last sentence of ``text[:end]`` that has a word or a number in it (in
        logarithmic time: whether each full sentence has one is found once)."""
        end = len(self.text) if end is None else end
        at = bisect.bisect_left(self._break_starts, end)  # breaks[:at] start before end
        start = self.breaks[at - 1][1] if at > 0 else 0
        if start < end and _ALNUM.search(self.text, max(start, end - MAX_SENTENCE_CHARS), end):
            return start, end
        good = self._last_good()[at - 1] if at > 0 else -1
        if good < 0:
            return 0, end
        return (self.breaks[good - 1][1] if good > 0 else 0), self.breaks[good][0]

    def _last_good(self) -> list[int]:
        """For each full sentence i (ending at break i), the last sentence <= i with a word or
        a number in it, or -1."""
        if self._good is None:
            good, last = [], -1
            for i, (stop, _) in enumerate(self.breaks):
                start = self.breaks[i - 1][1] if i > 0 else 0
                if start < stop and _ALNUM.search(self.text, start, stop):
                    last = i
                good.append(last)
            self._good = good
        return self._good


_ALNUM = re.compile(r"[A-Za-z0-9]")


def closing_sentence_span(text: str) -> tuple[int, int]:
    """The span of the last sentence of ``text`` that has a word or a number in it.

    >>> text = "We count cases. So there are 239 strings."
    >>> start, end = closing_sentence_span(text)
    >>> text[start:end]
    'So there are 239 strings.'
    """
    return _Text(text).closing_sentence()


# Two-letter words that are prose, never a variable of an answer ("3 or 239", "2 is it").
_PROSE_PAIRS = frozenset(
    {"or", "is", "if", "of", "in", "on", "at", "to", "as", "be", "by", "we", "so", "it", "an"}
    | {"no", "do", "us", "he", "am", "my", "me", "up", "go"}
)
_OPERATORS = frozenset("-+*/^!=<>(){}[]_⋅·×√π∑∏")


def _token_end(text: str, index: int, end: int) -> int:
    """End of the maths token at ``index`` (``index`` itself when none starts there).

    Tokens: a number (``2``, ``2,001,000``, ``2.5``) with at most a two-letter suffix
    (``2n``), a one- or two-letter variable standing alone (not ``or``, ``is``, …), a LaTeX
    command, an operator or bracket.
    """
    char = text[index]
    if char.isdigit() and char.isascii():
        stop = index + 1
        while stop < end and (text[stop].isdigit() or _thousands_comma(text, stop, end)):
            stop += 1
        if stop + 1 < end and text[stop] == "." and text[stop + 1].isdigit():
            stop += 1
            while stop < end and text[stop].isdigit():
                stop += 1
        letters = stop
        while letters < end and letters - stop < 3 and _is_letter(text[letters]):
            letters += 1
        if 0 < letters - stop <= 2 and not (letters < end and _is_letter(text[letters])):
            return letters
        return stop
    if _is_letter(char):
        if index > 0 and _is_letter(text[index - 1]):
            return index
        stop = index
        while stop < end and stop - index < 3 and _is_letter(text[stop]):
            stop += 1
        word = text[index:stop]
        if len(word) <= 2 and not (stop < end and _is_letter(text[stop])):
            return index if word.lower() in _PROSE_PAIRS else stop
        return index
    if char == "\\":
        stop = index + 1
        while stop < end and _is_letter(text[stop]):
            stop += 1
        return stop if stop > index + 1 else index
    if char in _OPERATORS:
        return index + 1
    return index


def _thousands_comma(text: str, index: int, end: int) -> bool:
    """True for the comma of "2,001,000": followed by exactly three digits (not "1, 2")."""
    digits = text[index + 1 : index + 5]
    return (
        text[index] == ","
        and len(digits) >= 3
        and digits[:3].isdigit()
        and index + 4 <= end
        and not digits[3:4].isdigit()
    )


def _is_letter(char: str) -> bool:
    return char.isascii() and char.isalpha()


def expression_end(text: str, start: int, end: int | None = None) -> int:
    """End of the maths-looking run at ``text[start:]`` (``start`` when there is none).

    A run is tokens (:func:`_token_end`) separated by spaces or tabs; it stops at a word of
    three or more letters. One pass, no backtracking (the regular expression this replaces
    could split a run of n digits in 2^(n-1) ways).

    >>> text = "is 2^(n-1) ways"
    >>> text[3 : expression_end(text, 3)]
    '2^(n-1)'
    >>> text = "3 or 239 strings"
    >>> text[: expression_end(text, 0)]
    '3'
    """
    end = len(text) if end is None else end
    index = last = start
    opened: list[int] = []  # open brackets: inside them a comma separates coordinates
    while index < end:
        char = text[index]
        stop = index + 1 if char == "," and opened else _token_end(text, index, end)
        if stop == index:
            break
        if stop == index + 1 and char in "([{":
            opened.append(index)
        elif stop == index + 1 and char in ")]}" and opened:
            opened.pop()
        last = index = stop
        while index < end and text[index] in " \t":
            index += 1
    if opened and index < end and _is_letter(text[index]):
        # "2 (attained by …)": a word inside a bracket it opened; the run ends before it.
        last = opened[0]
        while last > start and text[last - 1] in " \t":
            last -= 1
    return last


def _leading_expression(text: str, start: int, end: int, kind: str) -> AnswerCandidate | None:
    """The maths-looking run at ``start``, or None. A bare variable followed by a word ("n
    factorial", "no two") is prose, not an answer."""
    stop = expression_end(text, start, end)
    if stop == start or (found := _candidate(text, start, stop, kind)) is None:
        return None
    rest = text[found.end : end].lstrip()
    if found.text.isalpha() and rest[:1].isalpha():
        return None
    return found


def _is_value(text: str) -> bool:
    """True when all of ``text`` is one maths-looking run (maths delimiters aside)."""
    bare = text.strip()
    for opener, closer in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if bare.startswith(opener) and bare.endswith(closer) and len(bare) > 2 * len(opener):
            return True
    return bool(bare) and expression_end(bare, 0) == len(bare)


# --- restated givens ------------------------------------------------------------------------------

_NORMAL_REPLACEMENTS = (
    ("\\left", ""), ("\\right", ""), ("\\equiv", "≡"), ("\\pmod", "mod"), ("\\bmod", "mod"),
    ("\\mod", "mod"), ("\\cdots", "..."), ("\\ldots", "..."), ("\\dots", "..."), ("…", "..."),
    ("\\leq", "≤"), ("\\le", "≤"), ("\\geq", "≥"), ("\\ge", "≥"), ("\\neq", "≠"), ("\\ne", "≠"),
    ("\\cdot", "*"), ("\\times", "*"), ("⋅", "*"), ("·", "*"), ("×", "*"), ("−", "-"),
    ("modulo", "mod"), ("<=", "≤"), (">=", "≥"),
)  # fmt: skip
_RELATIONS = frozenset("=≡<>≤≥≠")


def _normal_maths(text: str) -> str:
    """Maths text without spaces, ``$``, braces, ``\\,`` and case, LaTeX relations as symbols."""
    lowered = text.lower()
    for old, new in _NORMAL_REPLACEMENTS:
        lowered = lowered.replace(old, new)
    return "".join(c for c in lowered if not c.isspace() and c not in "${}()\\")


def restates_given(statement: str, frame: AnswerFrame) -> bool:
    """True when ``statement`` is a relation (equation, congruence, inequality) written in the
    frame's prompt: a condition of the problem restated, not an answer. An ellipsis in the
    statement ("a^5 + … + e^5 ≡ 0 mod 25") stands for any text of the prompt.

    >>> frame = AnswerFrame(prompt="Let a + b = 5 and ab = 6. Find a^2 + b^2.")
    >>> restates_given("a+b = 5", frame), restates_given("a^2 + b^2 = 13", frame)
    (True, False)
    >>> frame = AnswerFrame(prompt="If $a^5+b^5+c^5 \\\\equiv 0 \\\\pmod{25}$, find abc mod 5.")
    >>> restates_given("a^5 + ... + c^5 ≡ 0 mod 25", frame)
    True
    >>> restates_given("a^5+b^5+c^5 mod 25 = 0", frame)  # the same congruence, spelt otherwise
    True
    """
    if not frame.prompt:
        return False
    normal = _normal_maths(statement)
    if len(normal) < 3 or not (any(c in _RELATIONS for c in normal) or "mod" in normal):
        return False
    return any(_occurs_in(form, frame.givens) for form in _congruence_forms(normal))


def _congruence_forms(normal: str) -> list[str]:
    """A relation in normal form and, for a congruence, its other spelling: ``x≡rmodn`` and
    ``xmodn=r`` say the same."""
    forms = [normal]
    if (at := normal.find("≡")) > 0 and (mod := normal.find("mod", at)) > at:
        forms.append(f"{normal[:at]}{normal[mod:]}={normal[at + 1 : mod]}")
    elif (eq := normal.find("=")) > 0 and (mod := normal.rfind("mod", 0, eq)) > 0:
        forms.append(f"{normal[:mod]}≡{normal[eq + 1 :]}{normal[mod:eq]}")
    return forms


def _occurs_in(normal: str, givens: str) -> bool:
    """``normal`` is a substring of ``givens``, each "..." in it standing for any text."""
    position = 0
    for piece in (p for p in normal.split("...") if p):
        found = givens.find(piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return True


#: Words that belong to a relation written in prose maths ("≡ 0 mod 25").
_MATHS_WORDS = frozenset({"mod", "modulo", "pmod", "bmod", "equiv"})


def _mathish(text: str, index: int) -> bool:
    """True when ``text[index]`` belongs to a maths-looking run (not a prose word, not the end
    of a clause)."""
    char = text[index]
    if char in ",;:" or (char == "." and text[index + 1 : index + 2] in ("", " ", "\n")):
        return False
    if not _is_letter(char):
        return not char.isalpha()
    begin = end = index
    while begin > 0 and _is_letter(text[begin - 1]):
        begin -= 1
    while end < len(text) and _is_letter(text[end]):
        end += 1
    word = text[begin:end].lower()
    return (len(word) <= 2 and word not in _PROSE_PAIRS) or word in _MATHS_WORDS


def _relation_around(source: _Text, candidate: AnswerCandidate, start: int, end: int) -> str:
    """The relation a candidate belongs to: its maths region, or the maths-looking run around
    it inside ``text[start:end]`` (``a + b = 5`` for the right-hand side ``5``)."""
    region = source.region_at(candidate.start)
    if region is not None:
        return source.text[region[0] : region[1]]
    text = source.text
    left, right = candidate.start, candidate.end
    while left > start and left > candidate.start - MAX_SENTENCE_CHARS and _mathish(text, left - 1):
        left -= 1
    while right < end and right < candidate.end + MAX_SENTENCE_CHARS and _mathish(text, right):
        right += 1
    return text[left:right]


# --- boxes and answer phrases ---------------------------------------------------------------------


@register_finder("boxed")
def _boxed(source: _Text, frame: AnswerFrame) -> Iterator[AnswerCandidate]:
    for start, end in box_content_spans(source.text):
        if (found := _candidate(source.text, start, end, "boxed")) is not None:
            yield found


# "the answer is X", "final answer: X", "answer = X"; X runs to the end of the sentence.
_ANSWER_PHRASE = re.compile(
    r"\b(?:final\s+answer|the\s+answer|answer)[ \t]*(?:is|:|=|would\s+be|will\s+be)[ \t]*"
    r"(?::[ \t]*)?",
    re.IGNORECASE,
)


@register_finder("answer_phrase")
def _answer_phrase(source: _Text, frame: AnswerFrame) -> Iterator[AnswerCandidate]:
    text = source.text
    for match in _ANSWER_PHRASE.finditer(text):
        end = source.sentence_end(match.end())
        if end - match.end() > MAX_SENTENCE_CHARS:
            end = _window_end(text, match.end(), match.end() + MAX_SENTENCE_CHARS)
        if (found := _candidate(text, match.end(), end, "answer_phrase")) is None:
            continue
        if is_hedge(found.text):
            yield AnswerCandidate(found.start, found.end, found.text, "hedge")
        elif _value_list(found.text) is not None:
            yield AnswerCandidate(found.start, found.end, found.text, "list")
        else:
            yield found


# --- the closing sentence -------------------------------------------------------------------------

# The last copula of a sentence introduces what it states: "… is X", "… are X", "… equals X",
# "… results in 2,001,000 terms" (only before a number or maths),
# "… will have X", "… is given by (the expression|formula) X", "… is equal to X".
_COPULA = re.compile(
    r"\b(?:is|are|was|were|equals|will\s+have|has|have|becomes|be|(?:will\s+)?results?\s+in(?=\s+[-\d$\\]))"
    r"(?:\s+(?:given\s+by|equal\s+to|exactly|simply|just))?"
    r"(?:\s+(?:the\s+)?(?:expression|formula|value|number|sum|product|answer))?"
    r"(?:\s*:)?\s+",
    re.IGNORECASE,
)
# "there are X …", "there is X …": X is the first maths-looking run after it.
_THERE_ARE = re.compile(r"\bthere\s+(?:are|is|will\s+be|exist|exists)\s+", re.IGNORECASE)
# Used with Pattern.match(text, start): anchored at the sentence start.
_YES_NO = re.compile(r"\W*(yes|no)\b(?=\s*(?:[,.;:!—–-]|$)|\s+(?:it|they|there|we|this)\b)",
                     re.IGNORECASE)  # fmt: skip
_OPTION_AT_START = re.compile(r"\s*([A-E])[.)]\s")
_OPTION = re.compile(r"\(([A-E])\)|\boption\s+([A-E])\b", re.IGNORECASE)
# What follows an answer and qualifies it: "11, achieved when …", "1/3, which occurs when …",
# "0 modulo 120 for any integer n". A trailing clause holds no candidates of its own.
_TRAILING = re.compile(
    r"(?:,\s*|\s+)(?:achieved|attained|obtained|reached|occurring|which|when|whenever|where"
    r"|with|for|if|since|because|given|provided|so\s+that|as\s+(?:long|shown|required))\b"
    r"|\s+\((?:i\.e\.|e\.g\.|when|for|with|achieved|attained)",
    re.IGNORECASE,
)
# In the frame of a question about residues: "is always congruent to 0 for any n" (the
# modulus said before it) states the residue 0.
_CONGRUENT_TO = re.compile(r"\bcongruent\s+to\s+(-?\d+)\b(?![.,]?\d)", re.IGNORECASE)
# "≡ r (mod n)", "\equiv r \pmod{n}", "congruent to r modulo n": r is the residue.
_CONGRUENCE = re.compile(
    r"(?:≡|\\equiv|congruent\s+to)\s*(-?\d+)\s*(?:\(\s*)?(?:\\pmod|\\bmod|\\mod|mod(?:ulo)?)\b",
    re.IGNORECASE,
)
_COUNT_WORD = re.compile(
    r"\b(?:(?:exactly|precisely|only|are|is|be|have|has|of)\s+|(?:least|most),?\s+)("
    + "|".join(NUMBER_WORDS)
    + r")\b",
    re.IGNORECASE,
)
# The comma of "At most, two …" sets off the bound; the count still follows it.
_BOUND = re.compile(r"\b(?:at\s+least|at\s+most|exactly),?\s+", re.IGNORECASE)
# A count sentence that opens with the number of cases ("For 20 values of n, …", "In 20 cases,
# …", "Therefore, for exactly twenty integers n …"); used with Pattern.match at its start. The
# number must be followed by a word: "For n = 20" and "In 2020, …" name no count.
# "holds for 98 values of n", "in exactly two cases": the number of cases inside a sentence.
_CASES_INSIDE = re.compile(
    r"\b(?:for|in)\s+(?:(?:exactly|precisely|only|just|all)\s+)?"
    r"(\d+|" + "|".join(NUMBER_WORDS) + r")"
    r"\s+(?:(?:distinct|different|positive|integer|such)\s+)?"
    r"(?:values?|integers?|numbers?|choices|cases|pairs?|triples?)\b",
    re.IGNORECASE,
)
# A clause that gives a reason ("…, since f(x)=x has no real solutions"): what it says of
# "no" or "none" is the premise, not the count.
_REASON_CLAUSE = re.compile(r"\W*(?:because|since|as|given|if|when|whenever)\b", re.IGNORECASE)
_REASON_WORD = re.compile(r"\b(?:because|since)\b", re.IGNORECASE)
# A claim that its cases fail: "fails for 98 values of n" counts the other cases.
_FAILS = re.compile(r"\bfail(?:s|ed)?\b", re.IGNORECASE)
# "besides 25", "other than 1 and 2": values the question itself sets aside.
_SET_ASIDE = re.compile(
    r"\b(?:besides|other\s+than|apart\s+from|aside\s+from|except(?:\s+for)?)\s+"
    r"(-?\d+(?:\s*(?:,|\band\b|\bor\b)\s*-?\d+)*)",
    re.IGNORECASE,
)
_CASES_COUNT = re.compile(
    r"\W*(?:(?:so|thus|hence|therefore|finally|overall|in\s+(?:conclusion|summary))\s*,?\s+)?"
    r"(?:for|in)\s+(?:(?:exactly|precisely|only|just|all)\s+)?"
    r"(\d+|" + "|".join(NUMBER_WORDS) + r")\s+(?=[A-Za-z])",
    re.IGNORECASE,
)
# "no such", "there are no …", "none", and "has no roots …" (a count of none).
_NONE = re.compile(
    r"\b(?:no\s+such|there\s+(?:are|is|exist|exists)\s+no|none|(?:has|have)\s+no)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Sentence:
    """One sentence of a text, read once: where its answer part and its trailing clause are."""

    source: _Text
    start: int
    end: int
    copulas: list[re.Match[str]]
    answer_start: int  # after the copula that introduces the answer (start if none)
    answer_end: int  # where a trailing clause begins (end if none)
    value_tail: bool = False  # the copula's tail leads with a value ("… is 1")


def _read_sentence(source: _Text, start: int, end: int) -> _Sentence:
    text = source.text
    copulas = [m for m in _COPULA.finditer(text, start, end) if not source.inside(m.start())]
    answer_start, answer_end = start, end
    value_tail = False
    # The copula that introduces the answer: the last one whose tail starts with a value
    # before any trailing clause ("is 11, which is achieved when …" -> the first "is").
    for copula in reversed(copulas):
        cut = _trailing_cut(source, copula.end(), end)
        value = source.region_at(copula.end()) is not None or text.startswith("\\", copula.end())
        if value or _leading_expression(text, copula.end(), cut, "probe") is not None:
            answer_start, answer_end, value_tail = copula.end(), cut, True
            break
    else:
        if copulas:
            answer_start = copulas[-1].end()
            answer_end = _trailing_cut(source, answer_start, end)
    if not copulas:
        answer_end = _trailing_cut(source, start, end, require_value=True)
    return _Sentence(source, start, end, copulas, answer_start, answer_end, value_tail)


def _trailing_cut(source: _Text, start: int, end: int, *, require_value: bool = False) -> int:
    """Where a trailing clause starts in ``text[start:end]`` after the first value (or end)."""
    text = source.text
    for match in _TRAILING.finditer(text, start, end):
        if source.inside(match.start()):
            continue
        before = text[start : match.start()]
        has_value = any(c.isdigit() for c in before) or "$" in before or "\\" in before
        if before.strip() and (has_value or not require_value):
            return match.start()
    return end


def _value_list(text: str, offset: int = 0) -> tuple[int, int] | None:
    """Span (plus ``offset``) of the first run of two or more values joined by ",", "or",
    "and" in ``text`` ("$0$, $1$, or $-1$", "3 or 239", "x = 3 or x = 239"), else None.

    >>> _value_list("We get $0$, $1$, or $-1$.")
    (7, 24)
    >>> _value_list("The minimum is 11") is None
    True
    """
    index, length = 0, len(text)
    regions = math_regions(text)
    region_at = {start: end for start, end in regions}
    while index < length:
        first = _value_at(text, index, region_at)
        if first is None:
            index += 1
            continue
        if _QUANTIFIER_BEFORE.search(text, max(0, index - 12), index):
            index = first  # "For all $x, y$, $w \ge 20$": the domain, not a value offered
            continue
        values, stop, cursor, joined_by_word = 1, first, first, False
        while True:
            after, word = _separator(text, cursor)
            if after is None:
                break
            following = _value_at(text, after, region_at)
            if following is None:
                # "0 and any positive integer below 100": a value joined to a quantified
                # phrase is a list too (the phrase stands for more values).
                quantified = _QUANTIFIED.match(text, after)
                if word and quantified is not None:
                    values, stop = values + 1, len(text.rstrip(_TRIM))
                break
            values += 1
            joined_by_word |= word
            stop = cursor = following
        if values >= 2:
            return offset + index, offset + stop
        index = max(first, index + 1)
    return None


def _list_values(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The spans of the values of the list ``text[start:end]`` (a span of :func:`_value_list`)."""
    region_at = {a: b for a, b in math_regions(text)}
    spans: list[tuple[int, int]] = []
    index = start
    while index < end:
        stop = _value_at(text, index, region_at)
        if stop is None or stop > end:
            break
        spans.append((index, stop))
        after, _word = _separator(text, stop)
        if after is None:
            break
        index = after
    return spans


def _value_at(text: str, index: int, region_at: dict[int, int]) -> int | None:
    """End of a value starting exactly at ``index`` (a maths region or an expression)."""
    if index in region_at:
        return region_at[index]
    if index > 0 and (text[index - 1].isalnum() or text[index - 1] == "\\"):
        return None
    stop = expression_end(text, index)
    if stop == index:
        return None
    value = text[index:stop].strip()
    # A lone bracket or operator is not a value; a value holds a digit or a variable.
    if not any(c.isalnum() for c in value):
        return None
    return stop


_QUANTIFIER_BEFORE = re.compile(r"\bfor\s+(?:all|any|every|each)\s+$", re.IGNORECASE)
_QUANTIFIED = re.compile(r"(?:any|all|every|each|some|other|several|many)\b", re.IGNORECASE)
_SEPARATOR = re.compile(
    r"[ \t]*(?:,[ \t]*(?:(?:or|and)[ \t]+)?|(?:or|and|to|through)[ \t]+)", re.IGNORECASE
)


def _separator(text: str, index: int) -> tuple[int | None, bool]:
    match = _SEPARATOR.match(text, index)
    if match is None:
        return None, False
    return match.end(), bool(re.search(r"or|and|to|through", match.group(), re.IGNORECASE))


def value_count(text: str) -> int:
    """How many values ``text`` offers: 1 for one value, more for a list ("1, 2 and 3").

    Commas inside brackets do not separate (``(2, 1)`` is one pair).

    >>> value_count("3"), value_count("3 or 239"), value_count("(2, 1)"), value_count("1, 2, 3")
    (1, 2, 1, 3)
    """
    depth, count = 0, 1
    for match in re.finditer(r"[([{]|[)\]}]|,|\b(?:or|and)\b", text):
        token = match.group()
        if token in "([{":
            depth += 1
        elif token in ")]}":
            depth = max(depth - 1, 0)
        elif depth == 0:
            count += 1
    if count > 1 and text.count(",") and re.search(r"\b(?:or|and)\b", text):
        # "1, 2, and 3": the ", and" is one separator, not two.
        count -= len(re.findall(r",\s*(?:or|and)\b", text))
    return count


def _inline_math(sentence: _Sentence) -> Iterator[AnswerCandidate]:
    source = sentence.source
    text = source.text
    at = bisect.bisect_left(source._region_starts, sentence.start)
    while at < len(source.regions) and source.regions[at][0] < sentence.end:
        start, end = source.regions[at]
        at += 1
        if end > sentence.end:
            continue
        inner_start = start + (2 if text.startswith(("$$", "\\(", "\\["), start) else 1)
        inner_end = end - (2 if text.endswith(("$$", "\\)", "\\]"), start, end) else 1)
        if found := _candidate(text, inner_start, inner_end, "inline_math"):
            yield found


def _copula_tail(sentence: _Sentence) -> Iterator[AnswerCandidate]:
    if not sentence.copulas:
        return
    text = sentence.source.text
    last = sentence.copulas[-1]
    # The whole tail after the last copula ("… is given by the expression (2n)!/(2^n n!).")
    if (tail := _candidate(text, last.end(), sentence.end, "copula_tail")) is not None:
        yield tail
        # An appositive in parentheses after a word: "n factorial (n!)".
        for inner in _APPOSITIVE.finditer(tail.text):
            a, b = tail.start + inner.start(1), tail.start + inner.end(1)
            if (part := _candidate(text, a, b, "copula_tail")) is not None:
                yield part
    # After every copula, the expression that leads the rest of the sentence, without the words
    # that qualify it ("is 0, achieved when all x_i are equal", "are (n+1)^4 ways").
    for copula in sentence.copulas:
        if (
            part := _leading_expression(text, copula.end(), sentence.end, "copula_tail")
        ) is not None:
            yield part


# "(n!)" after a word and a space; not a function call "ln(n)" nor a power "2^(n-1)".
_APPOSITIVE = re.compile(r"(?<=[A-Za-z]) \(([^()]+)\)")


def _there_are(sentence: _Sentence) -> Iterator[AnswerCandidate]:
    text = sentence.source.text
    for match in _THERE_ARE.finditer(text, sentence.start, sentence.end):
        if (found := _leading_expression(text, match.end(), sentence.end, "there_are")) is not None:
            yield found


def _equation_rhs(sentence: _Sentence) -> Iterator[AnswerCandidate]:
    text = sentence.source.text
    position = text.rfind("=", sentence.start, sentence.end)
    if position < 0 or text[position - 1 : position] in "<>!":
        return
    if (found := _candidate(text, position + 1, sentence.end, "equation_rhs")) is not None:
        yield found


def _congruence(sentence: _Sentence) -> Iterator[AnswerCandidate]:
    text = sentence.source.text
    for match in _CONGRUENCE.finditer(text, sentence.start, sentence.end):
        yield AnswerCandidate(match.start(1), match.end(1), match.group(1), "congruence")


def _yes_no(sentence: _Sentence) -> Iterator[AnswerCandidate]:
    if match := _YES_NO.match(sentence.source.text, sentence.start, sentence.end):
        yield AnswerCandidate(match.start(1), match.end(1), match.group(1), "yes_no")


def _option(sentence: _Sentence) -> Iterator[AnswerCandidate]:
    text = sentence.source.text
    if match := _OPTION_AT_START.match(text, sentence.start, sentence.end):
        yield AnswerCandidate(match.start(1), match.end(1), match.group(1), "option")
    for match in _OPTION.finditer(text, sentence.start, sentence.end):
        group = 1 if match.group(1) is not None else 2
        letter = match.group(group)
        if group == 2 or letter.isupper():
            yield AnswerCandidate(match.start(group), match.end(group), letter.upper(), "option")


_SENTENCE_FINDERS = (
    _copula_tail, _there_are, _inline_math, _equation_rhs, _congruence, _yes_no, _option,
)  # fmt: skip


# A sentence that draws a conclusion: inside a trace, only these state a yes/no or a count.
_CONCLUSION = re.compile(
    r"\b(?:so|thus|hence|therefore|consequently|we\s+conclude|in\s+conclusion|the\s+answer"
    r"|this\s+(?:shows|proves|means))\b",
    re.IGNORECASE,
)


_OFF_TOPIC = "its claim holds none of the words the question asks about"


def _frame_candidates(
    sentence: _Sentence,
    frame: AnswerFrame,
    conclusions_only: bool,
    dropped: Dropped | None = None,
) -> Iterator[AnswerCandidate]:
    """Candidates that only the question's frame gives: the polarity of a statement answering
    a yes/no question, the count in "exactly two" / "no such" for a count question. Inside a
    trace (``conclusions_only``) only a sentence that concludes ("so", "hence", …) gives them:
    "Let x be odd." is no answer "Yes"."""
    text = sentence.source.text
    words = text[sentence.start : sentence.end]
    if conclusions_only and not _CONCLUSION.search(words):
        return
    if frame.question_type == "yes_no":
        stated = polarity(words, frame.asked)
        if stated is not None:
            if frame.question_negated:  # "Must x_n ≠ 0?" answered "x_n is never 0": Yes
                stated = "yes" if stated == "no" else "no"
            found = AnswerCandidate(sentence.start, sentence.end, stated.capitalize(), "polarity")
            # "The sequence … has no repeated terms" for "Must x_n ≠ 0 for all n?": a claim
            # about something else answers neither Yes nor No.
            # A claim of divergence speaks of the limit asked about without naming it.
            off_topic = frame.focus and frame.focus.isdisjoint(topic_words(main_clause(words)))
            if off_topic and not speaks_to(words, frame.asked):
                if dropped is not None:
                    dropped.append((found, _OFF_TOPIC))
            else:
                yield found
    elif frame.question_type == "count":
        if any(not _in_reason_clause(words, m.start()) for m in _NONE.finditer(words)):
            yield AnswerCandidate(sentence.start, sentence.end, "0", "count")
        for match in _COUNT_WORD.finditer(words):
            if _in_reason_clause(words, match.start()):
                continue
            number = NUMBER_WORDS[match.group(1).lower()]
            yield AnswerCandidate(sentence.start, sentence.end, number, "count")
        for match in _CASES_INSIDE.finditer(words):
            clause = words[clause_start(words, match.start()) : match.start()]
            if _in_reason_clause(words, match.start()) or negation_count(clause):
                continue
            if _FAILS.search(clause):
                continue
            number = NUMBER_WORDS.get(match.group(1).lower(), match.group(1))
            yield AnswerCandidate(sentence.start, sentence.end, number, "count")
        # "At least k - 2 integers …": the bound is the count asked for.
        for match in _BOUND.finditer(text, sentence.start, sentence.end):
            found = _leading_expression(text, match.end(), sentence.end, "count")
            if found is not None:
                yield found
        # "For 20 values of n, the remainder is 4": the number of cases is the count.
        if cases := _CASES_COUNT.match(text, sentence.start, sentence.end):
            number = NUMBER_WORDS.get(cases.group(1).lower(), cases.group(1))
            yield AnswerCandidate(sentence.start, sentence.end, number, "count")
    elif frame.question_type == "mod_value":
        for match in _CONGRUENT_TO.finditer(text, sentence.start, sentence.end):
            yield AnswerCandidate(match.start(1), match.end(1), match.group(1), "congruence")


Dropped = list[tuple[AnswerCandidate, str]]


def _in_reason_clause(words: str, index: int) -> bool:
    """True when ``words[index]`` is in a clause of reasons: one that opens with "since",
    "because", "if", … or holds "because"/"since" before it ("is 2 because f(x) = x has no
    real solutions")."""
    clause = clause_start(words, index)
    return bool(_REASON_CLAUSE.match(words, clause) or _REASON_WORD.search(words, clause, index))


def _sentence_candidates(
    source: _Text,
    start: int,
    end: int,
    frame: AnswerFrame,
    *,
    conclusions_only: bool = False,
    dropped: Dropped | None = None,
) -> Iterator[AnswerCandidate]:
    """Every candidate of the sentence ``text[start:end]`` read in ``frame`` (see the module
    docstring): a hedge yields only itself; a list is one candidate; nothing from a trailing
    clause, inside a list, or restating the problem's givens."""
    text = source.text
    start = _window_start(
        text, start, end, MAX_PREFIX_SENTENCE_CHARS if conclusions_only else MAX_SENTENCE_CHARS
    )
    words = text[start:end]
    if words.rstrip().endswith("?"):
        return  # a question ("What is 2 + 3?") states no answer
    if is_hedge(words):
        if (whole := _candidate(text, start, end, "hedge")) is not None:
            yield whole
        return
    sentence = _read_sentence(source, start, end)
    listed = _value_list(text[sentence.answer_start : sentence.answer_end], sentence.answer_start)
    if listed is not None and frame.set_aside:
        # "25 and 76" for "… besides 25": the value the question set aside is not offered.
        rest = [
            span for span in _list_values(text, *listed)
            if _normal_maths(text[span[0] : span[1]]) not in frame.set_aside
        ]  # fmt: skip
        if len(rest) == 1 and (one := _candidate(text, *rest[0], "list_rest")) is not None:
            yield one
    if listed is not None:
        found = _candidate(text, listed[0], listed[1], "list")
        if found is not None:
            # One answer made of several values: graded whole, never value by value.
            yield found
    subject_list = _value_list(text[start : sentence.answer_start], start)
    own_drops: Dropped = []
    for finder in _SENTENCE_FINDERS:
        for found in finder(sentence):
            why = _why_not(source, sentence, found, frame, listed, subject_list)
            if why is None:
                yield found
            else:
                own_drops.append((found, why))
    yield from _frame_candidates(sentence, frame, conclusions_only, own_drops)
    if dropped is not None:
        dropped += own_drops
    # The whole sentence last: a gold that is a statement ("No integer solutions") is checked
    # against the sentence that states it. One that offers a list is graded as a list.
    restating = any(why == _RESTATES for _, why in own_drops)
    kind = "list_sentence" if listed is not None else "given_sentence" if restating else "sentence"
    if kind == "sentence" and not _brackets_close(words):
        kind = "cut_sentence"  # a reply cut off mid-expression: its last number is no answer
    if (whole := _candidate(text, start, end, kind)) is not None:
        yield whole


def _why_not(
    source: _Text,
    sentence: _Sentence,
    found: AnswerCandidate,
    frame: AnswerFrame,
    listed: tuple[int, int] | None,
    subject_list: tuple[int, int] | None,
) -> str | None:
    """Why a sentence finder's candidate is not an answer, or None when it may be."""
    if listed is not None and listed[0] <= found.start < listed[1]:
        return "one value of a list (the list is graded whole)"
    if subject_list is not None and subject_list[0] <= found.start < subject_list[1]:
        return "one value of a list before the answer"
    if found.start >= sentence.answer_end and found.kind not in ("yes_no", "option"):
        return "in the clause after the answer"  # "achieved when m = 1 and n = 2"
    if found.kind not in ("yes_no", "option", "congruence") and not _brackets_close(found.text):
        return _CUT_OFF  # a reply cut off mid-expression
    if found.kind not in ("yes_no", "option") and frame.restates_object(found.text):
        return _RESTATES  # "Factorize x^8+x^4+1" answered by "x^8 + x^4 + 1 factorizes as …"
    if found.kind == "inline_math" and sentence.value_tail and found.end <= sentence.answer_start:
        # "The number of values of $n$ in $\{1, …, 100\}$ … is 1": the subject names what is
        # asked; the copula's tail gives the value.
        return "in the subject; the value follows the copula"
    if restates_given(_relation_around(source, found, sentence.start, sentence.end), frame):
        return _RESTATES
    if found.kind not in ("yes_no", "option") and _negated(source.text, sentence.start, found):
        return 'negated by its clause ("it is false that …")'
    if frame.question_type == "count" and _names_a_counted_object(source.text, sentence, found):
        return _COUNTED_OBJECT
    return None


def _brackets_close(text: str) -> bool:
    """True when ``text`` closes as many brackets as it opens ("[0, 1)" counts as closed)."""
    return sum(text.count(c) for c in "([{") == sum(text.count(c) for c in ")]}")


_RESTATES = "restates a condition of the problem"
_CUT_OFF = "cut off: a bracket it opens never closes"
_COUNTED_OBJECT = "names what was counted (the count is said in words before it)"
# "z = 0": a letter given a value, the way a root or a solution is named.
_NAMED_OBJECT = re.compile(r"\s*[A-Za-z](?:_\{?\w+\}?)?\s*=\s*\S")


def _names_a_counted_object(text: str, sentence: _Sentence, found: AnswerCandidate) -> bool:
    """True for "has exactly one root …, which is z = 0" in reply to "how many roots …?": a
    candidate that gives a letter a value, after a count said in words in its sentence, names
    the object counted, not the count."""
    before = text[sentence.start : found.start]
    said = _COUNT_WORD.search(before) or _NONE.search(before)
    return said is not None and _NAMED_OBJECT.match(text, found.start, found.end) is not None


_CLAUSE_START = re.compile(r"[,;:]|\b(?:but|although|though|whereas|while)\b", re.IGNORECASE)


def _negated(text: str, start: int, found: AnswerCandidate) -> bool:
    """True when the clause before a candidate negates it an odd number of times."""
    clause = start
    for match in _CLAUSE_START.finditer(text, start, found.start):
        clause = match.end()
    return sentential_negation_count(text[clause : found.start]) % 2 == 1


@register_finder("closing_sentence")
def _closing_sentence(
    source: _Text, frame: AnswerFrame, dropped: Dropped | None = None
) -> Iterator[AnswerCandidate]:
    start, end = source.closing_sentence()
    yield from _sentence_candidates(source, start, end, frame, dropped=dropped)


# --- public API ---------------------------------------------------------------------------------


def answer_candidates(text: str, frame: AnswerFrame | None = None) -> list[AnswerCandidate]:
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
    frame = frame or AnswerFrame()
    source = _Text(text)
    seen: set[AnswerCandidate] = set()
    found: list[AnswerCandidate] = []
    for finder in FINDERS.values():
        for candidate in finder(source, frame):
            if candidate not in seen:
                seen.add(candidate)
                found.append(candidate)
    return sorted(found, key=lambda c: (c.start, c.end))


def final_answer_candidates(
    text: str, frame: AnswerFrame | None = None, *, dropped: Dropped | None = None
) -> list[AnswerCandidate]:
    """The candidates that state ``text``'s *final* answer, most trusted first.

    The last box if there is one; else the last answer phrase; else every candidate of the
    closing sentence (see the module docstring), the whole sentence last. Empty for empty text.
    ``dropped``, when given, receives the closing sentence's candidates that were left out and
    why (a value inside a list, a trailing clause, a restated condition).

    >>> [c.text for c in final_answer_candidates(r"Maybe \\boxed{3}. No: \\boxed{4}. Done.")]
    ['4']
    >>> [c.text for c in final_answer_candidates("We get 5. The final answer is 7.")]
    ['7']
    >>> [(c.kind, c.text) for c in final_answer_candidates("No, it cannot be done.")]
    [('yes_no', 'No'), ('sentence', 'No, it cannot be done')]
    >>> yes_no = AnswerFrame("yes_no")
    >>> [(c.kind, c.text) for c in final_answer_candidates("There are no solutions.", yes_no)]
    [('copula_tail', 'no solutions'), ('polarity', 'No'), ('sentence', 'There are no solutions')]
    >>> [c.kind for c in final_answer_candidates("I am not sure.")]  # a hedge states nothing
    ['hedge']
    >>> final_answer_candidates("")
    []
    """
    frame = frame or AnswerFrame()
    source = _Text(text)
    boxed = list(FINDERS["boxed"](source, frame))
    if boxed:
        return [boxed[-1]]
    phrases = list(FINDERS["answer_phrase"](source, frame))
    if phrases:
        return [phrases[-1]]
    return list(dict.fromkeys(_closing_sentence(source, frame, dropped)))


def prefix_candidates(
    text: str, ends: Sequence[int], frame: AnswerFrame | None = None
) -> Iterator[tuple[int, list[AnswerCandidate]]]:
    """For each prefix ``text[:end]`` (``ends`` ascending), the candidates it adds: the boxes
    and answer phrases that end inside it and the candidates of its closing sentence — what
    :func:`answer_candidates` of the prefix finds, in linear time over all prefixes.

    Yields ``(index into ends, candidates)``.
    """
    frame = frame or AnswerFrame()
    source = _Text(text)
    boxes = sorted(FINDERS["boxed"](source, frame), key=lambda c: c.end)
    phrases = sorted(FINDERS["answer_phrase"](source, frame), key=lambda c: c.end)
    box_at = phrase_at = 0
    for index, end in enumerate(ends):
        found: list[AnswerCandidate] = []
        while box_at < len(boxes) and boxes[box_at].end <= end:
            found.append(boxes[box_at])
            box_at += 1
        while phrase_at < len(phrases) and phrases[phrase_at].end <= end:
            found.append(phrases[phrase_at])
            phrase_at += 1
        start, stop = source.closing_sentence(end)
        found += _sentence_candidates(source, start, stop, frame, conclusions_only=True)
        yield index, found


def first_accepted(
    candidates: Iterable[AnswerCandidate], accepts: Callable[[str], bool]
) -> AnswerCandidate | None:
    """The first candidate whose text ``accepts`` (the task's verifier against the gold) takes;
    hedges are never accepted.

    >>> found = first_accepted(answer_candidates("So there are 239 strings."), lambda a: a == "239")
    >>> (found.kind, found.start, found.end)
    ('copula_tail', 13, 16)
    """
    for candidate in candidates:
        if candidate.kind not in REJECTED_KINDS and accepts(candidate.text):
            return candidate
    return None
