"""The grader: the answer a text states, checked against the gold by a task's verifier.

:func:`grade_texts` reads the texts of a trace, most trusted first: in the first that states
anything, the task's own extractor decides when it finds an answer (a box, a letter, a JSON
grouping); otherwise the answer layer's candidates of the final answer
(:func:`legival_core.grading.answers.final_answer_candidates`) are checked, each first against
the ``gold`` rules of :data:`legival_core.grading.rules.REJECTION_RULES`, then by the task's
verifier, in their order of trust; the first one accepted is the answer.
:func:`first_leaking_step` finds the first prefix of a trace that states an accepted answer.

Every grade is made by one version of this grader: :data:`GRADER_VERSION` is raised by any
change that can flip a grade, and the grade stage stores it (with the code revision) on every
row, so a store graded by an older grader says so and ``regrade`` can bring it current.

Both functions run inside the grading worker under the task's deadline
(:mod:`legival_core.tasks.deadline`); they take the task's class, not an instance, so that
they can be sent to the worker by name.

Reference: Legi-Val (arXiv 2603.20508) §3 answer extraction and grading.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from legival_core.grading.answers import (
    AnswerFrame,
    explained,
    final_answer_candidates,
    prefix_candidates,
)
from legival_core.grading.candidates import AnswerCandidate, CandidateKind
from legival_core.grading.rules import Reading, Stage, first_rejection
from legival_core.grading.scanning import value_count

__all__ = [
    "GRADER_VERSION",
    "MAX_PROSE_CANDIDATES",
    "GoldFacts",
    "Grade",
    "GradingTask",
    "TextGrade",
    "accepts",
    "first_leaking_step",
    "grade_texts",
]

#: The grader's version: raised by every change that can flip a grade (a new rule, a new
#: finder, a verifier change). Stored with each grade; ``verify`` and the app compare it.
GRADER_VERSION = 1

#: At most this many prose candidates of one text are checked (a closing sentence yields a few;
#: the cap bounds the verifier's work on adversarial text).
MAX_PROSE_CANDIDATES = 16


@dataclass(frozen=True)
class Grade:
    """The grade of one extracted answer.

    Attributes:
        correct: fully right (Connections: all four groups).
        score: credit in [0, 1] (Connections: groups right / 4; other families 0 or 1).
        status: ``"ok"``, ``"no_answer"`` (nothing extractable), ``"timeout"`` (the check ran
            past its deadline: counted wrong) or ``"error: <Type>: <message>"``.
    """

    correct: bool
    score: float
    status: str


@dataclass(frozen=True)
class TextGrade:
    """A grade with the answer it was given for and where that answer stands.

    Attributes:
        grade: the :class:`Grade`.
        answer: the answer graded (the accepted candidate, else the most trusted one), or None.
        kind: ``"task"`` (the task's own extractor) or the answer layer's candidate kind.
        field: which of the texts held it (e.g. ``"answer_text"``).
        span: ``(start, end)`` of the answer in that text, when known.
        question_type: what the problem asks (:meth:`legival_core.tasks.base.Task.question_type`).
        considered: the candidates looked at and why each was taken or not (for ``grade
            --explain``).
    """

    grade: Grade
    answer: str | None
    kind: str | None
    field: str | None
    span: tuple[int, int] | None
    question_type: str | None = None
    #: (field, kind, text, start, end, verdict) of every candidate looked at, in order.
    considered: tuple[tuple[str, str, str, int, int, str], ...] = ()


class GradingTask(Protocol):
    """What the grader needs of a task family (see :class:`legival_core.tasks.base.Task`)."""

    reads_prose_answers: bool

    def extract_answer(
        self, text: str, *, problem: Mapping[str, Any] | None = None
    ) -> str | None: ...

    @staticmethod
    def score_answer(extracted: str, gold: str, options: Mapping[str, Any]) -> float: ...

    def gold_values(self, gold: str) -> list[str]: ...

    def gold_is_statement(self, gold: str) -> bool: ...


Scorer = Callable[[str, str, Mapping[str, Any]], float]


@dataclass(frozen=True)
class GoldFacts:
    """What the ``gold`` rules need to know of a gold answer (found once per grade).

    Attributes:
        text: the gold as stored.
        forms: the answers it accepts (:meth:`GradingTask.gold_values`).
        several_values: one of its forms is several values ("1, 2 and 3").
        statement: it is a statement to be asserted ("No integer solutions").
    """

    text: str
    forms: tuple[str, ...]
    several_values: bool
    statement: bool

    @classmethod
    def of(cls, task: GradingTask, gold: str) -> GoldFacts:
        forms = tuple(task.gold_values(gold))
        several = any(value_count(v) >= 2 for v in forms)
        return cls(gold, forms, several, task.gold_is_statement(gold))


def accepts(
    score: Scorer,
    candidate: AnswerCandidate,
    gold: GoldFacts,
    options: Mapping[str, Any],
    frame: AnswerFrame,
) -> tuple[bool, str]:
    """Whether one candidate is the gold, and why (for explanations): the ``gold`` rules first
    (a hedge, a list for a one-value gold, a relation with no left side …), then the task's
    verifier ``score``."""
    reading = Reading(
        candidate,
        frame,
        several_values=gold.several_values,
        statement_gold=gold.statement,
        gold_forms=gold.forms,
    )
    rule = first_rejection(reading, Stage.GOLD)
    if rule is not None:
        return False, explained(rule)
    try:
        value = float(score(candidate.text, gold.text, options))
    except Exception as error:  # a malformed candidate is simply not the answer
        return False, f"check raised {type(error).__name__}"
    if value >= 1.0:
        return True, "the verifier accepts it"
    return False, "the verifier finds it different from the gold"


def first_leaking_step(
    task_class: type[GradingTask],
    reasoning: str,
    step_ends: list[int],
    gold: str,
    options: Mapping[str, Any],
    question_type: str = "expression",
    prompt: str | None = None,
) -> tuple[int, int, int] | None:
    """``(k, start, end)`` of the first step whose prefix states an accepted answer (runs in the
    grading worker; see :meth:`legival_core.tasks.base.Task.answer_leak_step`)."""
    task = task_class()
    score = task_class.score_answer
    facts = GoldFacts.of(task, gold)
    frame = AnswerFrame(question_type, prompt)
    checked: set[tuple[str, str]] = set()
    previous_end = 0
    for index, found in prefix_candidates(reasoning, step_ends, frame):
        end = step_ends[index]
        # Specific statements before the whole sentence that holds them.
        for candidate in sorted(found, key=lambda c: c.kind == CandidateKind.SENTENCE):
            # New statements only: what ends inside this step; a text already checked is
            # not checked again (a restated wrong answer stays wrong).
            kind = candidate.kind if candidate.policy.kept_apart_in_leaks else ""
            key = (kind, candidate.text)
            if candidate.end <= previous_end or key in checked:
                continue
            checked.add(key)
            accepted, _ = accepts(score, candidate, facts, options, frame)
            if accepted:
                return index + 1, candidate.start, candidate.end
        previous_end = max(previous_end, end)
    return None


def _task_grade(score: Scorer, extracted: str, gold: str, options: Mapping[str, Any]) -> Grade:
    """The grade of the task's own extraction (its verifier's score, validated)."""
    try:
        value = float(score(extracted, gold, options))
    except Exception as error:
        return Grade(False, 0.0, f"error: {type(error).__name__}: {error}")
    if not 0.0 <= value <= 1.0 or math.isnan(value):
        return Grade(False, 0.0, f"error: score {value!r} outside [0, 1]")
    return Grade(value >= 1.0, value, "ok")


def grade_texts(
    task_class: type[GradingTask],
    texts: Mapping[str, str],
    gold: str,
    options: Mapping[str, Any],
    problem: Mapping[str, Any] | None,
    question_type: str,
    prompt: str | None,
) -> TextGrade:
    """The whole of :meth:`legival_core.tasks.base.Task.grade_text` (runs in the grading
    worker, under its deadline).

    ``considered`` of the result lists every candidate looked at, in order, with its verdict
    (see :func:`legival_core.calibration.grade_review.explain_rows`)."""
    task = task_class()
    score = task_class.score_answer
    frame = AnswerFrame(question_type, prompt)
    facts = GoldFacts.of(task, gold)
    considered: list[tuple[str, str, str, int, int, str]] = []
    for field, text in texts.items():
        dropped: list[tuple[AnswerCandidate, str]] = []
        found = final_answer_candidates(text, frame, dropped=dropped)
        extracted = task.extract_answer(text, problem=problem)
        # A box the task reads but the answer layer took back where it stands (in a question,
        # negated, corrected after it) is no answer of the task's either.
        taken_back = next(
            (why for c, why in dropped if c.kind == CandidateKind.BOXED and c.text == extracted),
            None,
        )
        if extracted is not None and taken_back is not None:
            considered.append((field, str(CandidateKind.TASK), extracted, -1, -1, taken_back))
            extracted = None
        if extracted is not None:
            span = next((c.span for c in found if c.text == extracted), None)
            boxed = any(c.kind == CandidateKind.BOXED and c.text == extracted for c in found)
            # The task's own extraction is read by the same policy as the layer's: a box's
            # content by the box's rules.
            kind = CandidateKind.BOXED if boxed else CandidateKind.TASK
            candidate = AnswerCandidate(*(span or (-1, -1)), extracted, kind)
            rule = first_rejection(
                Reading(
                    candidate,
                    frame,
                    several_values=facts.several_values,
                    statement_gold=facts.statement,
                    gold_forms=facts.forms,
                ),
                Stage.GOLD,
            )
            if rule is not None:
                grade, why = Grade(False, 0.0, "ok"), explained(rule)
            else:
                grade = _task_grade(score, extracted, gold, options)
                why = "the verifier accepts it" if grade.correct else "the verifier rejects it"
            task_kind = str(CandidateKind.TASK)
            why = "the task's own extractor found it; " + why
            considered.append((field, task_kind, extracted, *(span or (-1, -1)), why))
            return TextGrade(
                grade, extracted, task_kind, field, span, question_type, tuple(considered)
            )
        if not task.reads_prose_answers:
            continue
        for candidate, why in dropped:
            considered.append((field, str(candidate.kind), candidate.text, *candidate.span, why))
        candidates = found[:MAX_PROSE_CANDIDATES]
        if not candidates:
            continue
        for candidate in candidates:
            accepted, why = accepts(score, candidate, facts, options, frame)
            considered.append((field, str(candidate.kind), candidate.text, *candidate.span, why))
            if accepted:
                return TextGrade(
                    Grade(True, 1.0, "ok"), candidate.text, str(candidate.kind), field,
                    candidate.span, question_type, tuple(considered),
                )  # fmt: skip
        first = candidates[0]
        return TextGrade(
            Grade(False, 0.0, "ok"), first.text, str(first.kind), field, first.span,
            question_type, tuple(considered),
        )  # fmt: skip
    return TextGrade(
        Grade(False, 0.0, "no_answer"), None, None, None, None, question_type, tuple(considered)
    )
