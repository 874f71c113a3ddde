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


def accepts(
    score: Scorer,
    candidate: AnswerCandidate,
    gold: str,
    options: Mapping[str, Any],
    frame: AnswerFrame,
    several_values: bool,
    statement_gold: bool = False,
) -> tuple[bool, str]:
    """Whether one candidate is the gold, and why (for explanations): the ``gold`` rules first
    (a hedge, a list for a one-value gold, …), then the task's verifier ``score``."""
    reading = Reading(
        candidate, frame, several_values=several_values, statement_gold=statement_gold
    )
    rule = first_rejection(reading, Stage.GOLD)
    if rule is not None:
        return False, explained(rule)
    try:
        value = float(score(candidate.text, gold, options))
    except Exception as error:  # a malformed candidate is simply not the answer
        return False, f"check raised {type(error).__name__}"
    if value >= 1.0:
        return True, "the verifier accepts it"
    return False, "the verifier finds it different from the gold"


def _several_values(task: GradingTask, gold: str) -> bool:
    return any(value_count(v) >= 2 for v in task.gold_values(gold))


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
    several = _several_values(task, gold)
    statement = task.gold_is_statement(gold)
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
            accepted, _ = accepts(score, candidate, gold, options, frame, several, statement)
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
    several = _several_values(task, gold)
    statement = task.gold_is_statement(gold)
    considered: list[tuple[str, str, str, int, int, str]] = []
    for field, text in texts.items():
        extracted = task.extract_answer(text, problem=problem)
        if extracted is not None:
            found = final_answer_candidates(text, frame)
            span = next((c.span for c in found if c.text == extracted), None)
            grade = _task_grade(score, extracted, gold, options)
            why = "the task's own extractor found it; " + (
                "the verifier accepts it" if grade.correct else "the verifier rejects it"
            )
            task_kind = str(CandidateKind.TASK)
            considered.append((field, task_kind, extracted, *(span or (-1, -1)), why))
            return TextGrade(
                grade, extracted, task_kind, field, span, question_type, tuple(considered)
            )
        if not task.reads_prose_answers:
            continue
        dropped: list[tuple[AnswerCandidate, str]] = []
        candidates = final_answer_candidates(text, frame, dropped=dropped)
        for candidate, why in dropped:
            considered.append((field, str(candidate.kind), candidate.text, *candidate.span, why))
        candidates = candidates[:MAX_PROSE_CANDIDATES]
        if not candidates:
            continue
        for candidate in candidates:
            accepted, why = accepts(score, candidate, gold, options, frame, several, statement)
            considered.append((field, str(candidate.kind), candidate.text, *candidate.span, why))
            if accepted:
                return TextGrade(
                    Grade(True, 1.0, "ok"), candidate.text, str(candidate.kind), field,
                    candidate.span, question_type, tuple(considered),
                )  # fmt: skip
        first = candidates[0]
        return TextGrade(
            Grade(False, 0.0, "ok"), first.text, str(first.kind), field, first.span, question_type,
            tuple(considered),
        )  # fmt: skip
    return TextGrade(
        Grade(False, 0.0, "no_answer"), None, None, None, None, question_type, tuple(considered)
    )
