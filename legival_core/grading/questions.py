"""What a problem asks: its question type, read from the prompt.

The answer layer reads a reply in the frame of its question. "There are no integer solutions."
answers "Are there integer solutions …?" with *No*; "exactly two" answers "How many …?" with 2;
a list "1, 2 and 3" can answer "Find all …" but not "What is …?". The type is derived from the
prompt's asking sentence (its last question, else its last "Find / Determine / Compute …"
sentence: :func:`legival_core.grading.frames.asking_sentence`) by detectors registered in
:data:`QUESTION_TYPES`, tried in order; the first that fires wins, and ``"expression"`` (a
single value or formula) is the fallback. A task or a
problem's ``meta.question_type`` can override it (see :meth:`legival_core.tasks.base.Task
.question_type`).

Types:

- ``yes_no``: "Is …?", "Are there …?", "Do there exist …?", "Can …?", "Determine whether …";
- ``count``: "How many …?", "At least how many …", "Find the number of …" ("For how many n
  does … leave a remainder of 4?" too: "how many" wins over a remainder);
- ``find_all``: "Find all …", "Determine all …", "What are all the possible values …";
- ``mod_value``: a value modulo n or a remainder ("What are the possible values of x mod 5?");
- ``expression``: anything else.

All scanning is linear: the prompt is cut into sentences with ``str`` methods and matched with
patterns that cannot backtrack (fixed words, no nested quantifiers).

Reference: Legi-Val (arXiv 2603.20508) §3 answer extraction; CHAMP (arXiv 2401.06961) problems.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from legival_core.grading.candidates import AnswerCandidate, CandidateKind
from legival_core.grading.frames import AnswerFrame, asking_sentence, topic_words
from legival_core.grading.lexicon import NUMBER_WORDS
from legival_core.grading.polarity import (
    clause_start,
    main_clause,
    negation_count,
    polarity,
    sentential_negation_count,
    speaks_to,
)
from legival_core.grading.scanning import leading_expression
from legival_core.grading.sentences import (
    BOUND,
    CASES_COUNT,
    CASES_INSIDE,
    CONGRUENT_TO,
    COUNT_WORD,
    FAILS,
    NONE_STATED,
    SentenceReading,
    in_reason_clause,
    one_of_several_counts,
)

__all__ = [
    "QUESTION_TYPES",
    "QuestionType",
    "question_type",
    "register_question_type",
]

#: A detector reads the asking sentence (lower case) and says whether it asks this type.
QuestionDetector = Callable[[str], bool]
#: Dropped candidates and why (for explanations).
Dropped = list[tuple[AnswerCandidate, str]]
#: A reader gives the candidates a sentence states in the frame of this type of question.
FrameReader = Callable[[SentenceReading, AnswerFrame, "Dropped | None"], Iterator[AnswerCandidate]]


@dataclass(frozen=True)
class QuestionType:
    """One type of question: how to tell it from the asking sentence, and how a sentence that
    states no value in so many words answers it.

    Attributes:
        name: the type's name (``problem.meta.question_type`` may name it).
        detects: the detector of :data:`QuestionDetector`.
        reads: the frame reader (None: the type gives no candidates of its own; a value or a
            formula is read by the sentence finders alone).
    """

    name: str
    detects: QuestionDetector
    reads: FrameReader | None = None


#: The question types, in the order their detectors are tried; "expression" is the fallback.
QUESTION_TYPES: dict[str, QuestionType] = {}
FALLBACK_TYPE = "expression"


def register_question_type(
    name: str, *, reads: FrameReader | None = None
) -> Callable[[QuestionDetector], QuestionDetector]:
    """Decorator: register a detector ``asking sentence (lower case) -> bool`` for ``name``,
    with the reader of its answers beside it."""

    def add(detector: QuestionDetector) -> QuestionDetector:
        QUESTION_TYPES[name] = QuestionType(name, detector, reads)
        return detector

    return add


# --- how a sentence answers each type ---------------------------------------------------------

_OFF_TOPIC = "its claim holds none of the words the question asks about"


def _reads_yes_no(
    sentence: SentenceReading, frame: AnswerFrame, dropped: Dropped | None
) -> Iterator[AnswerCandidate]:
    """The polarity of a statement: "There are no integer solutions." answers No. A claim about
    something the question does not ask about answers neither (dropped, with why)."""
    words = sentence.source.text[sentence.start : sentence.end]
    stated = polarity(words, frame.asked)
    if stated is None:
        return
    if frame.question_negated:  # "Must x_n ≠ 0?" answered "x_n is never 0": Yes
        stated = "yes" if stated == "no" else "no"
    found = AnswerCandidate(
        sentence.start, sentence.end, stated.capitalize(), CandidateKind.POLARITY
    )
    # "The sequence … has no repeated terms" for "Must x_n ≠ 0 for all n?": a claim about
    # something else answers neither Yes nor No. A claim of divergence speaks of the limit
    # asked about without naming it.
    off_topic = frame.focus and frame.focus.isdisjoint(topic_words(main_clause(words)))
    if off_topic and not speaks_to(words, frame.asked):
        if dropped is not None:
            dropped.append((found, _OFF_TOPIC))
    else:
        yield found


def _reads_count(
    sentence: SentenceReading, frame: AnswerFrame, dropped: Dropped | None
) -> Iterator[AnswerCandidate]:
    """A count said in words: "no such" / "none" (0), "exactly two", "holds for 98 values of
    n", "at least k - 2 integers", "For 20 values of n, …"; never one in a clause of reasons."""
    text = sentence.source.text
    words = text[sentence.start : sentence.end]

    def count(number: str) -> AnswerCandidate:
        return AnswerCandidate(sentence.start, sentence.end, number, CandidateKind.COUNT)

    def denied_or_mixed(at: int) -> bool:
        # "It cannot have exactly 2 solutions."; "2 complex solutions and 3 real ones".
        denied = sentential_negation_count(words[clause_start(words, at) : at]) % 2 == 1
        return denied or one_of_several_counts(words, at, frame.asking_words)

    if any(not in_reason_clause(words, m.start()) for m in NONE_STATED.finditer(words)):
        yield count("0")
    for match in COUNT_WORD.finditer(words):
        if in_reason_clause(words, match.start()) or denied_or_mixed(match.start(1)):
            continue
        yield count(NUMBER_WORDS[match.group(1).lower()])
    for match in CASES_INSIDE.finditer(words):
        clause = words[clause_start(words, match.start()) : match.start()]
        if in_reason_clause(words, match.start()) or negation_count(clause):
            continue
        if FAILS.search(clause):
            continue
        yield count(NUMBER_WORDS.get(match.group(1).lower(), match.group(1)))
    # "At least k - 2 integers …": the bound is the count asked for.
    for match in BOUND.finditer(text, sentence.start, sentence.end):
        found = leading_expression(text, match.end(), sentence.end, CandidateKind.COUNT)
        if found is not None and not denied_or_mixed(found.start - sentence.start):
            yield found
    # "For 20 values of n, the remainder is 4": the number of cases is the count.
    if cases := CASES_COUNT.match(text, sentence.start, sentence.end):
        yield count(NUMBER_WORDS.get(cases.group(1).lower(), cases.group(1)))


def _reads_residue(
    sentence: SentenceReading, frame: AnswerFrame, dropped: Dropped | None
) -> Iterator[AnswerCandidate]:
    """ "is always congruent to 0 for any n" (the modulus said before it) states the residue 0."""
    text = sentence.source.text
    for match in CONGRUENT_TO.finditer(text, sentence.start, sentence.end):
        yield AnswerCandidate(
            match.start(1), match.end(1), match.group(1), CandidateKind.CONGRUENCE
        )


# Auxiliary verbs that open a yes/no question, also after a leading clause set off by a comma
# ("For a, b, c > 0, are there …?", "If f is symmetric, can we …?"); "whether" asks one inside
# a statement. The lazy leading clause is tried once per comma: linear in the sentence.
_YES_NO = re.compile(
    r"^(?:\W*)(?:(?:for|if|given|when|suppose|assuming)\b[^?]*?,\s*)?"
    r"(?:is|are|was|were|does|do|did|can|could|will|would|must|may|has|have|should)\b"
    r"|\bwhether\b|\bprove or disprove\b|\bis it (?:true|possible)\b"
)
_COUNT = re.compile(r"\bhow many\b|\bnumber of\b|\bhow much\b")
_FIND_ALL = re.compile(
    r"\b(?:find|determine|list|give|what are) all\b|\ball (?:the )?possible values\b"
    r"|\bwhat are the possible\b|\ball (?:the )?(?:solutions|pairs|triples|integers)\b"
)
_MOD = re.compile(r"\bmod(?:ulo)?\b|\\pmod|\\bmod|\bremainders?\b|\bcongruent\b|≡")
# "For how many n … give a remainder of 4?" counts cases, whatever they are about.
_HOW_MANY = re.compile(r"\bhow many\b")


# "Do we have A, B, or C?" offers options to choose from: not a yes/no question.
_ALTERNATIVES = re.compile(r",\s*or\s+(?!not\b)")


@register_question_type("yes_no", reads=_reads_yes_no)
def _asks_yes_no(sentence: str) -> bool:
    return (
        _YES_NO.search(sentence) is not None
        and not _COUNT.search(sentence)
        and not _ALTERNATIVES.search(sentence)
    )


@register_question_type("mod_value", reads=_reads_residue)
def _asks_mod_value(sentence: str) -> bool:
    return (
        _MOD.search(sentence) is not None
        and not _asks_yes_no(sentence)
        and not _HOW_MANY.search(sentence)
    )


@register_question_type("count", reads=_reads_count)
def _asks_count(sentence: str) -> bool:
    return _COUNT.search(sentence) is not None and not _FIND_ALL.search(sentence)


@register_question_type("find_all")
def _asks_find_all(sentence: str) -> bool:
    return _FIND_ALL.search(sentence) is not None


def question_type(prompt: str | None) -> str:
    """The question type of ``prompt`` (a key of :data:`QUESTION_TYPES` or ``"expression"``).

    >>> question_type("Are there integer solutions to x^2 + y^2 = 3?")
    'yes_no'
    >>> question_type("For a, b, c>0, are there values of them making a+b+c less than 1?")
    'yes_no'
    >>> question_type("Do we have w > 20 always, w < 20 always, or sometimes either?")
    'expression'
    >>> question_type("How many subsets of {1, ..., 10} have no two consecutive elements?")
    'count'
    >>> question_type("Find all pairs (m, n) of positive integers with m^2 = n^3.")
    'find_all'
    >>> question_type("What are the possible values of abcde mod 5?")
    'mod_value'
    >>> question_type("For how many n in {1, ..., 60} does n^2 leave a remainder of 1 mod 3?")
    'count'
    >>> question_type("Find the minimum of x + 1/x for x > 0.")
    'expression'
    """
    if not prompt or not prompt.strip():
        return FALLBACK_TYPE
    sentence = asking_sentence(prompt)
    for name, kind in QUESTION_TYPES.items():
        if kind.detects(sentence):
            return name
    return FALLBACK_TYPE
