"""The answer layer: candidate answers, with their character spans, found in any model text.

Models state answers in many ways: ``\\boxed{2^{n-1}}``, "the answer is 239", "so there are 239
strings", "the number of ways is (2n)!/(2^n n!)", "No, it cannot be done", "= 5050", "There
are no integer solutions". A grader that only knows boxes marks all but the first wrong; a
leak finder that only knows boxes never fires on prose. This module finds every such
*candidate* with its span in the original text and leaves the decision to the task's verifier
(math-verify for math and CHAMP), so grading, leak points, early stop and forcing checks share
one definition of "states an answer".

Finders are registered in :data:`FINDERS`, each with its scope (anywhere in the text, or the
closing sentence) and its trust; each returns candidates with exact spans.
:func:`answer_candidates` runs them all; :func:`final_answer_candidates` keeps the ones that
state the *final* answer of a text: those of the most trusted finder that finds any.

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

Every such decision is a named rule of :data:`legival_core.grading.rules.REJECTION_RULES`; the
candidates and their kinds are :mod:`legival_core.grading.candidates`; the sentence finders
(copula tails, "there are", inline maths, …) are :mod:`legival_core.grading.sentences`; the
question types and how a statement answers each are :mod:`legival_core.grading.questions`.

Linear time: no regular expression here can backtrack more than a bounded window. Maths
regions, sentence breaks and expressions are found by hand-written one-pass scanners; the
patterns used on sentences run on at most
:data:`~legival_core.grading.scanning.MAX_SENTENCE_CHARS` characters.

Reference: Legi-Val (arXiv 2603.20508) §3 answer extraction and forcing;
docs/metrics/fotu-before-leak.md answer leak.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from legival_core.grading.boxes import box_content_spans
from legival_core.grading.candidates import AnswerCandidate, CandidateKind
from legival_core.grading.frames import AnswerFrame, normal_maths
from legival_core.grading.polarity import is_hedge
from legival_core.grading.questions import QUESTION_TYPES, Dropped
from legival_core.grading.rules import RESTATES, Reading, RejectionRule, Stage, first_rejection
from legival_core.grading.scanning import (
    MAX_PREFIX_SENTENCE_CHARS,
    MAX_SENTENCE_CHARS,
    ScannedText,
    brackets_close,
    list_value_spans,
    trimmed_candidate,
    value_list_span,
    window_end,
    window_start,
)
from legival_core.grading.sentences import SENTENCE_FINDERS, concludes, read_sentence

__all__ = [
    "FINDERS",
    "AnswerCandidate",
    "AnswerFrame",
    "TextFinder",
    "answer_candidates",
    "explained",
    "final_answer_candidates",
    "first_accepted",
    "prefix_candidates",
    "register_finder",
    "sentence_candidates",
]

TextWide = Callable[[ScannedText, AnswerFrame, "Dropped | None"], Iterable[AnswerCandidate]]
InSentence = Callable[
    [ScannedText, int, int, AnswerFrame, bool, "Dropped | None"], Iterable[AnswerCandidate]
]


@dataclass(frozen=True)
class TextFinder:
    """A finder of candidates in a whole text.

    Attributes:
        name: its registry key.
        trust: lower is trusted more: the final answer is what the most trusted finder that
            finds anything finds.
        keeps: ``"last"``: only its last candidate states the final answer (a later box
            replaces an earlier one); ``"all"``: all its candidates do, most trusted first.
        find_in_text: finds candidates anywhere in the text (a prefix of a trace holds those
            that end inside it); or None.
        find_in_sentence: finds the candidates of one sentence ``(source, start, end, frame,
            conclusions_only, dropped)``; it is given the closing sentence; or None.
    """

    name: str
    trust: int
    keeps: Literal["last", "all"]
    find_in_text: TextWide | None = None
    find_in_sentence: InSentence | None = None


#: name -> finder; :func:`final_answer_candidates` tries them by trust.
FINDERS: dict[str, TextFinder] = {}


def register_finder(finder: TextFinder) -> TextFinder:
    """Register a text finder under its name."""
    FINDERS[finder.name] = finder
    return finder


def _run(
    finder: TextFinder,
    source: ScannedText,
    frame: AnswerFrame,
    *,
    dropped: Dropped | None = None,
) -> Iterator[AnswerCandidate]:
    """What ``finder`` finds in the whole text (a sentence finder reads the closing sentence)."""
    if finder.find_in_text is not None:
        yield from finder.find_in_text(source, frame, dropped)
    if finder.find_in_sentence is not None:
        start, end = source.closing_sentence()
        yield from finder.find_in_sentence(source, start, end, frame, False, dropped)


def explained(rule: RejectionRule) -> str:
    """How a rejection reads in an explanation: the rule's name and its reason."""
    return f"{rule.name}: {rule.reason}"


# --- boxes and answer phrases ---------------------------------------------------------------------


def _placed(
    found: AnswerCandidate, source: ScannedText, frame: AnswerFrame, dropped: Dropped | None
) -> bool:
    """True when a box or an answer phrase may state the answer where it stands (the ``text``
    rules: not in a question, not negated, not taken back later); else it goes to ``dropped``."""
    rule = first_rejection(Reading(found, frame, source), Stage.TEXT)
    if rule is not None and dropped is not None:
        dropped.append((found, explained(rule)))
    return rule is None


def _boxed(
    source: ScannedText, frame: AnswerFrame, dropped: Dropped | None = None
) -> Iterator[AnswerCandidate]:
    for start, end in box_content_spans(source.text):
        found = trimmed_candidate(source.text, start, end, CandidateKind.BOXED)
        if found is not None and _placed(found, source, frame, dropped):
            yield found


# "the answer is X", "final answer: X", "answer = X"; X runs to the end of the sentence.
_ANSWER_PHRASE = re.compile(
    r"\b(?:final\s+answer|the\s+answer|answer)[ \t]*(?:is|:|=|would\s+be|will\s+be)[ \t]*"
    r"(?::[ \t]*)?",
    re.IGNORECASE,
)


def _answer_phrase(
    source: ScannedText, frame: AnswerFrame, dropped: Dropped | None = None
) -> Iterator[AnswerCandidate]:
    text = source.text
    for match in _ANSWER_PHRASE.finditer(text):
        end = source.sentence_end(match.end())
        if end - match.end() > MAX_SENTENCE_CHARS:
            end = window_end(text, match.end(), match.end() + MAX_SENTENCE_CHARS)
        found = trimmed_candidate(text, match.end(), end, CandidateKind.ANSWER_PHRASE)
        if found is None or not _placed(found, source, frame, dropped):
            continue
        if is_hedge(found.text):
            yield AnswerCandidate(found.start, found.end, found.text, CandidateKind.HEDGE)
        elif value_list_span(found.text) is not None:
            yield AnswerCandidate(found.start, found.end, found.text, CandidateKind.LIST)
        else:
            yield found


# --- the closing sentence -------------------------------------------------------------------------


def sentence_candidates(
    source: ScannedText,
    start: int,
    end: int,
    frame: AnswerFrame,
    conclusions_only: bool = False,
    dropped: Dropped | None = None,
) -> Iterator[AnswerCandidate]:
    """Every candidate of the sentence ``text[start:end]`` read in ``frame`` (see the module
    docstring): a hedge yields only itself; a list is one candidate; nothing from a trailing
    clause, inside a list, or restating the problem's givens."""
    text = source.text
    start = window_start(
        text, start, end, MAX_PREFIX_SENTENCE_CHARS if conclusions_only else MAX_SENTENCE_CHARS
    )
    words = text[start:end]
    if words.rstrip().endswith("?"):
        return  # a question ("What is 2 + 3?") states no answer
    if is_hedge(words):
        if (whole := trimmed_candidate(text, start, end, CandidateKind.HEDGE)) is not None:
            yield whole
        return
    sentence = read_sentence(source, start, end)
    listed = value_list_span(
        text[sentence.answer_start : sentence.answer_end], sentence.answer_start
    )
    if listed is not None and frame.set_aside:
        # "25 and 76" for "… besides 25": the value the question set aside is not offered.
        rest = [
            span for span in list_value_spans(text, *listed)
            if normal_maths(text[span[0] : span[1]]) not in frame.set_aside
        ]  # fmt: skip
        if (
            len(rest) == 1
            and (one := trimmed_candidate(text, *rest[0], CandidateKind.LIST_REST)) is not None
        ):
            yield one
    if listed is not None:
        found = trimmed_candidate(text, listed[0], listed[1], CandidateKind.LIST)
        if found is not None:
            # One answer made of several values: graded whole, never value by value.
            yield found
    subject_list = value_list_span(text[start : sentence.answer_start], start)
    own_drops: Dropped = []
    for finder in SENTENCE_FINDERS.values():
        for found in finder(sentence):
            reading = Reading(found, frame, source, sentence, listed, subject_list)
            rule = first_rejection(reading, Stage.SENTENCE)
            if rule is None:
                yield found
            else:
                own_drops.append((found, explained(rule)))
    asked = QUESTION_TYPES.get(frame.question_type)
    # Inside a trace only a sentence that concludes gives the frame's own readings: "Let x be
    # odd." is no answer "Yes".
    reads = asked.reads if asked is not None else None
    if reads is not None and (not conclusions_only or concludes(sentence)):
        yield from reads(sentence, frame, own_drops)
    if dropped is not None:
        dropped += own_drops
    # The whole sentence last: a gold that is a statement ("No integer solutions") is checked
    # against the sentence that states it. One that offers a list is graded as a list.
    restating = any(why.endswith(RESTATES) for _, why in own_drops)
    kind = (
        CandidateKind.LIST_SENTENCE
        if listed is not None
        else CandidateKind.GIVEN_SENTENCE
        if restating
        else CandidateKind.SENTENCE
    )
    if kind == CandidateKind.SENTENCE and not brackets_close(words):
        kind = CandidateKind.CUT_SENTENCE  # cut off mid-expression: its last number is no answer
    if (whole := trimmed_candidate(text, start, end, kind)) is not None:
        yield whole


# The finders, by trust: a box, then an answer phrase, then the closing sentence.
register_finder(TextFinder("boxed", trust=0, keeps="last", find_in_text=_boxed))
register_finder(TextFinder("answer_phrase", trust=1, keeps="last", find_in_text=_answer_phrase))
register_finder(
    TextFinder("closing_sentence", trust=2, keeps="all", find_in_sentence=sentence_candidates)
)


def answer_candidates(text: str, frame: AnswerFrame | None = None) -> list[AnswerCandidate]:
    """Every candidate answer in ``text`` from every registered finder, in text order.

    Candidates can overlap (a box inside a closing sentence is found twice, as ``boxed`` and as
    part of the sentence). Duplicates of the same span and kind are dropped.

    >>> for c in answer_candidates("So there are 239 strings."):
    ...     print(c.kind, repr(c.text), c.start, c.end)
    sentence 'So there are 239 strings' 0 24
    copula_tail '239' 13 16
    there_are '239' 13 16
    stated_value '239' 13 16
    copula_tail '239 strings' 13 24
    """
    frame = frame or AnswerFrame()
    source = ScannedText(text)
    seen: set[AnswerCandidate] = set()
    found: list[AnswerCandidate] = []
    for finder in FINDERS.values():
        for candidate in _run(finder, source, frame):
            if candidate not in seen:
                seen.add(candidate)
                found.append(candidate)
    return sorted(found, key=lambda c: (c.start, c.end))


def final_answer_candidates(
    text: str, frame: AnswerFrame | None = None, *, dropped: Dropped | None = None
) -> list[AnswerCandidate]:
    """The candidates that state ``text``'s *final* answer, most trusted first.

    The candidates of the most trusted finder (:data:`FINDERS`) that finds any: the last box if
    there is one; else the last answer phrase; else every candidate of the closing sentence
    (see the module docstring), the whole sentence last. Empty for empty text.
    ``dropped``, when given, receives the closing sentence's candidates that were left out and
    why (a value inside a list, a trailing clause, a restated condition).

    >>> [c.text for c in final_answer_candidates(r"Maybe \\boxed{3}. No: \\boxed{4}. Done.")]
    ['4']
    >>> [c.text for c in final_answer_candidates("We get 5. The final answer is 7.")]
    ['7']
    >>> [(str(c.kind), c.text) for c in final_answer_candidates("No, it cannot be done.")]
    [('yes_no', 'No'), ('sentence', 'No, it cannot be done')]
    >>> yes_no = AnswerFrame("yes_no")
    >>> [(str(c.kind), c.text) for c in final_answer_candidates("There are no solutions.", yes_no)]
    [('copula_tail', 'no solutions'), ('polarity', 'No'), ('sentence', 'There are no solutions')]
    >>> [str(c.kind) for c in final_answer_candidates("I am not sure.")]  # a hedge states nothing
    ['hedge']
    >>> final_answer_candidates("")
    []
    """
    frame = frame or AnswerFrame()
    source = ScannedText(text)
    for finder in sorted(FINDERS.values(), key=lambda f: f.trust):
        found = list(_run(finder, source, frame, dropped=dropped))
        if found:
            return found[-1:] if finder.keeps == "last" else list(dict.fromkeys(found))
    return []


def prefix_candidates(
    text: str, ends: Sequence[int], frame: AnswerFrame | None = None
) -> Iterator[tuple[int, list[AnswerCandidate]]]:
    """For each prefix ``text[:end]`` (``ends`` ascending), the candidates it adds: the boxes
    and answer phrases that end inside it and the candidates of its closing sentence — what
    :func:`answer_candidates` of the prefix finds, in linear time over all prefixes.

    Yields ``(index into ends, candidates)``.
    """
    frame = frame or AnswerFrame()
    source = ScannedText(text)
    finders = sorted(FINDERS.values(), key=lambda f: f.trust)
    # Text-wide finders run once; each prefix takes those that end inside it.
    anywhere = [
        sorted(f.find_in_text(source, frame, None), key=lambda c: c.end)
        for f in finders
        if f.find_in_text is not None
    ]
    taken = [0] * len(anywhere)
    for index, end in enumerate(ends):
        found: list[AnswerCandidate] = []
        for which, candidates in enumerate(anywhere):
            while taken[which] < len(candidates) and candidates[taken[which]].end <= end:
                found.append(candidates[taken[which]])
                taken[which] += 1
        start, stop = source.closing_sentence(end)
        for finder in finders:
            if finder.find_in_sentence is not None:
                found += finder.find_in_sentence(source, start, stop, frame, True, None)
        yield index, found


def first_accepted(
    candidates: Iterable[AnswerCandidate], accepts: Callable[[str], bool]
) -> AnswerCandidate | None:
    """The first candidate whose text ``accepts`` (the task's verifier against the gold) takes;
    hedges are never accepted.

    >>> found = first_accepted(answer_candidates("So there are 239 strings."), lambda a: a == "239")
    >>> (str(found.kind), found.start, found.end)
    ('copula_tail', 13, 16)
    """
    for candidate in candidates:
        if candidate.policy.commits and accepts(candidate.text):
            return candidate
    return None
