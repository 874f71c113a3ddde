"""Why a candidate is not the answer: one ordered list of named rejection rules.

Every decision that a candidate found in a reply is *not* its answer is a rule of
:data:`REJECTION_RULES`: a name, a predicate and the reason shown to a person
(``grade --explain`` names the rule). Rules are tried in order and the first that fires
decides. Each rule has a stage:

- ``sentence`` rules need the sentence the candidate was found in (a value inside a list, in a
  clause after the answer, negated by its clause, restating a condition of the problem …);
  they run when the candidate is found, so a rejected candidate is never verified;
- ``gold`` rules need what the gold is (one value, several values, a statement); they run
  before the verifier compares the candidate with the gold.

A rule must never reject a plain, correct answer: the gold restated in a committed sentence
("Therefore, G.", "… is factorized as G", "G for all n ≥ 2"). ``tests/test_grading_rules.py``
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
from legival_core.grading.lexicon import CLAUSE_BREAKERS, words_pattern
from legival_core.grading.polarity import sentential_negation_count
from legival_core.grading.scanning import ScannedText, brackets_close
from legival_core.grading.sentences import COUNT_WORD, NONE_STATED, SentenceReading

__all__ = [
    "REJECTION_RULES",
    "Reading",
    "RejectionRule",
    "Stage",
    "first_rejection",
]


class Stage(StrEnum):
    """When a rule can run: with the candidate's sentence, or against the gold."""

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
    """

    candidate: AnswerCandidate
    frame: AnswerFrame
    source: ScannedText | None = None
    sentence: SentenceReading | None = None
    listed: tuple[int, int] | None = None
    subject_list: tuple[int, int] | None = None
    several_values: bool = False
    statement_gold: bool = False

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


# --- the predicates ----------------------------------------------------------------------------

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
    return sentential_negation_count(r.text[clause : r.candidate.start]) % 2 == 1


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


#: The rules, in the order they are tried (the first that fires decides).
REJECTION_RULES: list[RejectionRule] = [
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
