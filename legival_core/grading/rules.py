"""Why a candidate is not the answer: one ordered list of named rejection rules.

Every decision that a candidate found in a reply is *not* its answer is a rule of
:data:`REJECTION_RULES`: a name, a predicate and the reason shown to a person
(``grade --explain`` names the rule). Rules are tried in order and the first that fires
decides. Each rule has a stage:

- ``text`` rules look at where a box or an answer phrase stands in the whole text (in a
  question, negated by its clause, corrected after it); they run when it is found, and a box
  or phrase they reject leaves the final answer to the next finder;
- ``sentence`` rules need the sentence the candidate was found in (a value inside a list, in a
  clause after the answer, negated by its clause, restating a condition of the problem, a step
  that a later value of the sentence replaces …); they run when the candidate is found, so a
  rejected candidate is never verified;
- ``gold`` rules need what the gold is (one value, several values, a statement) and read the
  candidate's own text (a relation with no left side, a hedge or a correction inside a box);
  they run before the verifier compares the candidate with the gold, on every candidate,
  the task's own extraction included.

A rule must never reject a plain, correct answer: the gold restated in a committed sentence
("Therefore, G.", "… is factorized as G", "G for all n ≥ 2"). ``tests/test_grading_restatements.py``
checks every rule against such restatements of every gold in the label files.

Reference: Legi-Val (arXiv 2603.20508) §3 answer extraction.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from legival_core.grading.candidates import AnswerCandidate
from legival_core.grading.frames import AnswerFrame, relation_around, restates_given
from legival_core.grading.lexicon import (
    CLAUSE_BREAKERS,
    CONTINUATIONS,
    CORRECTION_CUES,
    RELATION_OPENERS,
    words_pattern,
)
from legival_core.grading.polarity import (
    is_hedge,
    sentential_negation_count,
    without_relative_clauses,
)
from legival_core.grading.scanning import (
    ScannedText,
    brackets_close,
    factor_count,
    value_list_span,
)
from legival_core.grading.sentences import (
    COUNT_WORD,
    NONE_STATED,
    SentenceReading,
    in_reason_clause,
    maths_runs,
    one_of_several_counts,
)

__all__ = [
    "REJECTION_RULES",
    "Reading",
    "RejectionRule",
    "Stage",
    "first_rejection",
    "prose_of",
]


class Stage(StrEnum):
    """When a rule can run: where a box or an answer phrase stands in the text, with the
    candidate's sentence, or against the gold."""

    TEXT = "text"
    SENTENCE = "sentence"
    GOLD = "gold"


@dataclass(frozen=True)
class Reading:
    """Everything a rule may look at about one candidate.

    Attributes:
        candidate: the candidate.
        frame: the question's frame.
        source, sentence: the text and the sentence it was found in (``sentence`` stage).
        listed: the span of the list the sentence's answer part offers, if any.
        subject_list: the span of a list before the answer part (in the subject), if any.
        several_values: the gold accepts several values (``gold`` stage).
        statement_gold: the gold is a statement to be asserted (``gold`` stage).
        gold_forms: the answers the gold accepts (``gold`` stage).
    """

    candidate: AnswerCandidate
    frame: AnswerFrame
    source: ScannedText | None = None
    sentence: SentenceReading | None = None
    listed: tuple[int, int] | None = None
    subject_list: tuple[int, int] | None = None
    several_values: bool = False
    statement_gold: bool = False
    gold_forms: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return self.source.text if self.source is not None else ""


@dataclass(frozen=True)
class RejectionRule:
    """One reason a candidate is not the answer.

    Attributes:
        name: a stable name (``grade --explain`` shows it).
        stage: :class:`Stage` at which it runs.
        rejects: the predicate.
        reason: the reason a person reads.
    """

    name: str
    stage: Stage
    rejects: Callable[[Reading], bool]
    reason: str


# --- the predicates ------------------------------------------------------------------------------

RESTATES = "restates a condition of the problem"
CUT_OFF = "cut off: a bracket it opens never closes"
COUNTED_OBJECT = "names what was counted (the count is said in words before it)"


def _inside(span: tuple[int, int] | None, at: int) -> bool:
    return span is not None and span[0] <= at < span[1]


def _in_list(r: Reading) -> bool:
    return _inside(r.listed, r.candidate.start)


def _in_subject_list(r: Reading) -> bool:
    return _inside(r.subject_list, r.candidate.start)


def _after_the_answer(r: Reading) -> bool:
    """ "is 11, achieved when m = 1 and n = 2": what follows the answer qualifies it."""
    assert r.sentence is not None
    return r.candidate.start >= r.sentence.answer_end and not r.candidate.policy.opens_sentence


def _cut_off(r: Reading) -> bool:
    return not r.candidate.policy.closed_token and not brackets_close(r.candidate.text)


def _restates_asked_object(r: Reading) -> bool:
    """ "Factorize x^8+x^4+1" answered by "x^8 + x^4 + 1 factorizes as …"."""
    return not r.candidate.policy.opens_sentence and r.frame.restates_object(r.candidate.text)


def _in_the_subject(r: Reading) -> bool:
    """ "The number of values of $n$ in $\\{1, …, 100\\}$ … is 1": the subject names what is
    asked; the copula's tail gives the value."""
    assert r.sentence is not None
    return (
        r.candidate.kind == "inline_math"
        and r.sentence.value_tail
        and r.candidate.end <= r.sentence.answer_start
    )


def _restates_condition(r: Reading) -> bool:
    assert r.source is not None and r.sentence is not None
    relation = relation_around(r.source, r.candidate, r.sentence.start, r.sentence.end)
    return restates_given(relation, r.frame)


_CLAUSE_START = re.compile(rf"[,;:]|\b(?:{words_pattern(CLAUSE_BREAKERS)})\b", re.IGNORECASE)


def _negated(r: Reading) -> bool:
    """The clause before the candidate negates it an odd number of times ("it is false that
    …")."""
    assert r.sentence is not None
    if r.candidate.policy.opens_sentence:
        return False
    clause = r.sentence.start
    for match in _CLAUSE_START.finditer(r.text, r.sentence.start, r.candidate.start):
        clause = match.end()
    return (
        sentential_negation_count(without_relative_clauses(r.text[clause : r.candidate.start])) % 2
        == 1
    )


# "z = 0": a letter given a value, the way a root or a solution is named.
_NAMED_OBJECT = re.compile(r"\s*[A-Za-z](?:_\{?\w+\}?)?\s*=\s*\S")


def _names_a_counted_object(r: Reading) -> bool:
    """ "has exactly one root …, which is z = 0" in reply to "how many roots …?": a candidate
    that gives a letter a value, after a count said in words in its sentence, names the object
    counted, not the count."""
    assert r.sentence is not None
    if r.frame.question_type != "count":
        return False
    before = r.text[r.sentence.start : r.candidate.start]
    said = COUNT_WORD.search(before) or NONE_STATED.search(before)
    named = _NAMED_OBJECT.match(r.text, r.candidate.start, r.candidate.end)
    return said is not None and named is not None


def _commits_to_nothing(r: Reading) -> bool:
    return not r.candidate.policy.commits


def _several_values_for_one_gold(r: Reading) -> bool:
    return r.candidate.policy.several_values and not r.several_values


def _statement_only_for_a_value(r: Reading) -> bool:
    return r.candidate.policy.statement_only and not (r.several_values or r.statement_gold)


# --- where a box or an answer phrase stands (text) -----------------------------------------------


def _sentence_of(r: Reading) -> tuple[int, int]:
    assert r.source is not None
    return r.source.sentence_start(r.candidate.start), r.source.sentence_end(r.candidate.end)


def _in_a_question(r: Reading) -> bool:
    """ "The answer is 3? No, it is 4.": a question states no answer."""
    _, end = _sentence_of(r)
    return r.text[r.candidate.end : end].rstrip().endswith("?")


def _negated_before(r: Reading) -> bool:
    """ "It is wrong that the answer is 3.", "The answer is not \\boxed{3}."."""
    start, _ = _sentence_of(r)
    clause = start
    for match in _CLAUSE_START.finditer(r.text, start, r.candidate.start):
        clause = match.end()
    return (
        sentential_negation_count(without_relative_clauses(r.text[clause : r.candidate.start])) % 2
        == 1
    )


# A correction at the start of a sentence or clause: "No,", "Wait", "Actually", "Oops", …
_CORRECTION_OPENS = re.compile(
    r"(?:^|[.!?;:,]\s*|\n\s*)(?:no\s*[,.!:—-]|wait\b|actually\b|correction\b|oops\b"
    r"|hold\s+on\b|i\s+made\s+a\s+mistake\b|that(?:'s|\s+is)\s+(?:wrong|incorrect|not\s+right)\b)",
    re.IGNORECASE,
)
_LATER_ANSWER = re.compile(r"\b(?:final\s+answer|the\s+answer)\s*(?:is|:|=)", re.IGNORECASE)


def _corrected_later(r: Reading) -> bool:
    """ "So \\boxed{3}. Actually, no: the answer is 4.": a correction after a box, followed by
    an answer phrase, takes the box back (a later box replaces it anyway)."""
    after = r.text[r.candidate.end : r.candidate.end + 4 * MAX_LOOK_AHEAD]
    correction = _CORRECTION_OPENS.search(after)
    return correction is not None and _LATER_ANSWER.search(after, correction.end()) is not None


#: How far after a box a correction is looked for (characters, times four).
MAX_LOOK_AHEAD = 500


# --- within a sentence ---------------------------------------------------------------------------

_VALUE_KINDS = frozenset({"copula_tail", "there_are", "inline_math", "stated_value"})


def _superseded(r: Reading) -> bool:
    """ "I thought the answer was 3, but it is 4.": a value stated before the sentence's answer
    part (which leads with a value) is replaced by it."""
    assert r.sentence is not None
    return (
        r.candidate.kind in _VALUE_KINDS
        and r.sentence.value_tail
        and r.candidate.end <= r.sentence.answer_start
    )


_CONTINUED = re.compile(
    rf"(?:,\s*|\s+)(?:{words_pattern(CONTINUATIONS)})\b[\s,:]*(?=[-$\\(\d])", re.IGNORECASE
)


def _replaced_by_a_later_value(r: Reading) -> bool:
    """ "The total is 3, minus 1, so 2.": a value the sentence goes on from ("minus", "so",
    "but", …) to another value is a step, not the answer."""
    assert r.sentence is not None and r.source is not None
    first = r.candidate.start
    stop = max(r.sentence.answer_end, r.candidate.end)
    for match in _CONTINUED.finditer(r.text, first, stop):
        if r.source.inside(match.start()):
            continue
        if maths_runs(r.source, match.end(), stop):
            return True
    return False


def _in_a_reason_or_condition(r: Reading) -> bool:
    """ "Since n = 5, we get a contradiction.": a value in a clause of reasons or conditions is
    a premise, not what the sentence states."""
    assert r.sentence is not None
    if r.candidate.kind != "stated_value":
        return False
    words = r.text[r.sentence.start : r.sentence.end]
    return in_reason_clause(words, r.candidate.start - r.sentence.start)


def _one_of_several_counts(r: Reading) -> bool:
    """For a count question, "There are 2 complex solutions and 3 real ones." states no one
    count (unless the question names what one of them counts)."""
    assert r.sentence is not None
    if r.frame.question_type != "count" or r.candidate.kind not in _VALUE_KINDS:
        return False
    words = r.text[r.sentence.start : r.sentence.end]
    return one_of_several_counts(words, r.candidate.start - r.sentence.start, r.frame.asking_words)


# --- the candidate's own text, against the gold --------------------------------------------------

_TEXT_COMMAND = re.compile(r"\\(?:text|textbf|textit|mathrm|mbox)\s*\{([^{}]*)\}")
_OPENING_MARKS = re.compile(r"^(?:\s|\$|\\\(|\\\[|\\displaystyle)*")


def prose_of(text: str) -> str:
    """A candidate's text with its ``\\text{…}`` words written out (what a hedge or a
    correction inside a box says).

    >>> prose_of(r"3 \\text{(or possibly 4)}")
    '3  (or possibly 4) '
    """
    return _TEXT_COMMAND.sub(lambda m: f" {m.group(1)} ", text)


def _opens_with_relation(text: str) -> bool:
    return re.match(RELATION_OPENERS, _OPENING_MARKS.sub("", text)) is not None


def _relation_without_left_side(r: Reading) -> bool:
    """ "\\boxed{\\neq 3}", "< 3": a relation with no left side states no value (unless the
    gold itself is such a relation)."""
    if r.candidate.kind == "task" or not _opens_with_relation(r.candidate.text):
        return False
    return not any(_opens_with_relation(form) for form in r.gold_forms)


_NEGATED_VALUE = re.compile(r"^\W*(?:not|never|no\s+longer|isn't|is\s+not)\b", re.IGNORECASE)


def _negated_value(r: Reading) -> bool:
    """ "The answer is not 3.": a value denied is not stated."""
    if r.candidate.kind == "task" or r.statement_gold:
        return False
    return _NEGATED_VALUE.match(prose_of(r.candidate.text)) is not None


def _hedged_inside(r: Reading) -> bool:
    """ "\\boxed{3 \\text{ (or possibly 4)}}": a hedge inside the answer commits to nothing."""
    if r.candidate.kind == "task" or not r.candidate.policy.commits:
        return False
    return is_hedge(prose_of(r.candidate.text))


_CORRECTION_INSIDE = re.compile(
    rf"\b(?:{words_pattern(CORRECTION_CUES)})\b|\bno\s*,\s*it\b", re.IGNORECASE
)


def _corrected_inside(r: Reading) -> bool:
    """ "\\boxed{3 \\text{ (wrong, it is 4)}}", "3, but actually 4": a value taken back in the
    same answer."""
    if r.candidate.kind == "task" or r.statement_gold:
        return False
    return _CORRECTION_INSIDE.search(prose_of(r.candidate.text)) is not None


def _restates_the_question(r: Reading) -> bool:
    """ "What is $\\frac{1}{2} - \\frac{1}{3}$?" answered "The answer is $\\frac{1}{2} -
    \\frac{1}{3}$": the expression asked about, given back unevaluated, is no answer (a box or
    an answer phrase as much as a sentence's tail)."""
    return r.candidate.kind != "task" and r.frame.restates_object(r.candidate.text)


_FACTOR = re.compile(r"\b(?:factori[sz]e|factor)\b", re.IGNORECASE)


def _incomplete_factorization(r: Reading) -> bool:
    """ "Factorize … over the integers" answered by fewer factors than the gold's:
    "(x^4 + x^2 + 1)(x^4 - x^2 + 1)" for "(x^2+x+1)(x^2-x+1)(x^4-x^2+1)" is equal as a
    polynomial but not the factorization asked for."""
    if not r.gold_forms or not _FACTOR.search(r.frame.asking):
        return False
    wanted = max(factor_count(form) for form in r.gold_forms)
    return wanted > 1 and factor_count(r.candidate.text) < wanted


_DEGENERATE = re.compile(r"(\d)\1{39}")


def _degenerate_digits(r: Reading) -> bool:
    """ "0.2500000000…" running on for hundreds of digits: a model caught in a loop (the reply
    was cut off by its budget), not a number it stated."""
    return _DEGENERATE.search(r.candidate.text) is not None


def _several_values_inside(r: Reading) -> bool:
    """ "\\boxed{3 \\text{ or } 4}": a box or an answer phrase that offers several values,
    for a gold that is one."""
    if r.several_values or r.candidate.kind not in ("boxed", "answer_phrase"):
        return False
    return value_list_span(prose_of(r.candidate.text)) is not None


#: The rules, in the order they are tried (the first that fires decides).
REJECTION_RULES: list[RejectionRule] = [
    RejectionRule("in_a_question", Stage.TEXT, _in_a_question, "in a question: states no answer"),
    RejectionRule(
        "negated_before",
        Stage.TEXT,
        _negated_before,
        'negated by its clause ("it is wrong that …")',
    ),
    RejectionRule(
        "corrected_later",
        Stage.TEXT,
        _corrected_later,
        "taken back after it (a correction, then another answer)",
    ),
    RejectionRule(
        "value_in_list", Stage.SENTENCE, _in_list, "one value of a list (the list is graded whole)"
    ),
    RejectionRule(
        "value_in_subject_list",
        Stage.SENTENCE,
        _in_subject_list,
        "one value of a list before the answer",
    ),
    RejectionRule(
        "after_the_answer", Stage.SENTENCE, _after_the_answer, "in the clause after the answer"
    ),
    RejectionRule("cut_off", Stage.SENTENCE, _cut_off, CUT_OFF),
    RejectionRule("restates_asked_object", Stage.SENTENCE, _restates_asked_object, RESTATES),
    RejectionRule(
        "in_the_subject",
        Stage.SENTENCE,
        _in_the_subject,
        "in the subject; the value follows the copula",
    ),
    RejectionRule("restates_condition", Stage.SENTENCE, _restates_condition, RESTATES),
    RejectionRule(
        "negated_by_its_clause",
        Stage.SENTENCE,
        _negated,
        'negated by its clause ("it is false that …")',
    ),
    RejectionRule(
        "names_the_counted_object", Stage.SENTENCE, _names_a_counted_object, COUNTED_OBJECT
    ),
    RejectionRule(
        "superseded_in_its_sentence",
        Stage.SENTENCE,
        _superseded,
        "stated before the value its sentence ends with",
    ),
    RejectionRule(
        "replaced_by_a_later_value",
        Stage.SENTENCE,
        _replaced_by_a_later_value,
        'a step: the sentence goes on ("minus", "so", "but" …) to another value',
    ),
    RejectionRule(
        "in_a_reason_or_condition",
        Stage.SENTENCE,
        _in_a_reason_or_condition,
        "in a clause of reasons or conditions: a premise",
    ),
    RejectionRule(
        "one_of_several_counts",
        Stage.SENTENCE,
        _one_of_several_counts,
        "one of several counts its sentence gives",
    ),
    RejectionRule(
        "commits_to_nothing",
        Stage.GOLD,
        _commits_to_nothing,
        "hedges: commits to no single answer",
    ),
    RejectionRule(
        "several_values_for_one_gold",
        Stage.GOLD,
        _several_values_for_one_gold,
        "offers several values; the gold is one",
    ),
    RejectionRule(
        "relation_without_left_side",
        Stage.GOLD,
        _relation_without_left_side,
        "a relation with no left side states no value",
    ),
    RejectionRule("negated_value", Stage.GOLD, _negated_value, "the value is denied"),
    RejectionRule("hedged_inside", Stage.GOLD, _hedged_inside, "hedged inside the answer"),
    RejectionRule(
        "corrected_inside", Stage.GOLD, _corrected_inside, "taken back inside the answer"
    ),
    RejectionRule(
        "several_values_inside",
        Stage.GOLD,
        _several_values_inside,
        "offers several values; the gold is one",
    ),
    RejectionRule(
        "degenerate_digits",
        Stage.GOLD,
        _degenerate_digits,
        "a run of forty or more repeated digits: a loop, not a value",
    ),
    RejectionRule(
        "restates_the_question",
        Stage.GOLD,
        _restates_the_question,
        "the expression asked about, given back unevaluated",
    ),
    RejectionRule(
        "incomplete_factorization",
        Stage.GOLD,
        _incomplete_factorization,
        "fewer factors than the factorization asked for",
    ),
    RejectionRule(
        "statement_only_for_a_value",
        Stage.GOLD,
        _statement_only_for_a_value,
        "a sentence with a list or a restated condition; the gold is a value",
    ),
]


def first_rejection(reading: Reading, stage: Stage) -> RejectionRule | None:
    """The first rule of ``stage`` that rejects the candidate of ``reading``, or None."""
    for rule in REJECTION_RULES:
        if rule.stage == stage and rule.rejects(reading):
            return rule
    return None
