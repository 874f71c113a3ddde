"""The task-family interface and its registry.

A task family knows how to ask a model for a problem (chat messages), how to read the final
answer back out of untrusted model text, how to grade it against the gold answer under a time
limit, how to force an answer out of a student (SPEC §3) and what the backtracking judge should
look for (SPEC §2). Families register themselves by name; callers use :func:`get_task`.

Reference: Legi-Val, arXiv 2603.20508 (§2 backtracking rubrics, §3 forcing cue and grading).
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from legival_core.tasks.deadline import run_with_deadline

Family = Literal["math", "science", "puzzles"]
DEFAULT_TIMEOUT_S = 10.0

# Modules that define the built-in families; importing one registers its task.
BUILTIN_TASK_MODULES: tuple[str, ...] = (
    "legival_core.tasks.math",
    "legival_core.tasks.champ",
    "legival_core.tasks.gsm8k",
    "legival_core.tasks.gpqa",
    "legival_core.tasks.connections",
    "legival_core.tasks.jsonl",
)


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


class Task(ABC):
    """One task family. Subclasses set the class attributes and implement the abstract methods.

    Attributes:
        name: registry key (``problems.task`` in the store).
        family: ``"math"``, ``"science"`` or ``"puzzles"``; picks the lexical backtracking cues.
        system_prompt: the system message.
        forcing_cue: text appended to a student's output when no answer could be extracted, so
            that a short second generation has to produce one.
        stop_strings: strings at which generation may stop because, once written, the answer is
            complete (include them in the output). Empty where no finite set exists (a boxed
            answer can nest braces): engines that can run a callback use
            :meth:`answer_extractable` instead.
        backtracking_rubric: what counts as backtracking for this family (the judge's rubric).
        warm_imports: heavy modules the grading worker imports before the clock starts.
        reads_prose_answers: read prose answers through the answer layer (see grade_text).
    """

    name: ClassVar[str]
    family: ClassVar[Family]
    system_prompt: ClassVar[str]
    forcing_cue: ClassVar[str]
    stop_strings: ClassVar[tuple[str, ...]] = ()
    backtracking_rubric: ClassVar[str]
    warm_imports: ClassVar[tuple[str, ...]] = ()
    #: Whether answers stated in prose ("so there are 239 strings") are read through
    #: :mod:`legival_core.answers` when the task's extractor finds none.
    reads_prose_answers: ClassVar[bool] = True

    def build_messages(self, problem: Mapping[str, Any]) -> list[dict[str, str]]:
        """System and user chat messages asking for step-by-step reasoning and a final answer."""
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.user_prompt(problem)},
        ]

    @abstractmethod
    def user_prompt(self, problem: Mapping[str, Any]) -> str:
        """The user turn: the problem and how to present the final answer."""

    @abstractmethod
    def extract_answer(self, text: str, *, problem: Mapping[str, Any] | None = None) -> str | None:
        """The final answer written in ``text`` (a string in the family's canonical form)."""

    def answer_extractable(self, text: str, *, problem: Mapping[str, Any] | None = None) -> bool:
        """True once ``text`` holds an explicit final answer (used to stop a student early)."""
        return self.extract_answer(text, problem=problem) is not None

    @staticmethod
    @abstractmethod
    def score_answer(extracted: str, gold: str, options: Mapping[str, Any]) -> float:
        """Credit in [0, 1]; runs in the grading worker, so it must be importable by name."""

    def grading_options(self, problem: Mapping[str, Any] | None) -> dict[str, Any]:
        """Per-problem grading settings passed to :meth:`score_answer` (picklable)."""
        return {}

    def grade(
        self,
        extracted: str | None,
        gold: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        problem: Mapping[str, Any] | None = None,
    ) -> Grade:
        """Grade ``extracted`` against ``gold``; the check runs under a ``timeout_s`` deadline.

        A missing answer is wrong with status ``"no_answer"``; a check that overruns the
        deadline is wrong with status ``"timeout"``; a check that raises (e.g. a malformed
        gold answer) is wrong with status ``"error: ..."``.
        """
        if extracted is None:
            return Grade(False, 0.0, "no_answer")
        outcome = run_with_deadline(
            type(self).score_answer,
            extracted,
            gold,
            self.grading_options(problem),
            timeout_s=timeout_s,
            warm_imports=self.warm_imports,
        )
        if outcome.status == "timeout":
            return Grade(False, 0.0, "timeout")
        if outcome.status == "error":
            return Grade(False, 0.0, f"error: {outcome.detail}")
        score = float(outcome.value)
        if not 0.0 <= score <= 1.0 or math.isnan(score):
            return Grade(False, 0.0, f"error: score {score!r} outside [0, 1]")
        return Grade(score >= 1.0, score, "ok")

    def grade_text(
        self,
        texts: Mapping[str, str | None],
        gold: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        problem: Mapping[str, Any] | None = None,
    ) -> TextGrade:
        """Grade the final answer that a model's text states, through the answer layer.

        ``texts`` maps field names to texts, most trusted first (e.g. a trace's answer part,
        then its raw output). In the first field that states anything: the task's own extractor
        decides when it finds an answer (a box, a letter, a JSON grouping); otherwise, when
        :attr:`reads_prose_answers` is set, every candidate of
        :func:`legival_core.answers.final_answer_candidates` is checked by the task's verifier
        (in their order of trust, under one ``timeout_s`` deadline) and the first one accepted is
        the answer. When none is accepted, the most trusted candidate is recorded as the answer.

        >>> graded = get_task("champ").grade_text(
        ...     {"answer_text": "So there are 239 strings of length 6."}, "239")
        >>> graded.grade.correct, graded.answer, graded.kind, graded.field, graded.span
        (True, '239', 'copula_tail', 'answer_text', (13, 16))
        """
        from legival_core.answers import final_answer_candidates

        for field, text in texts.items():
            if not isinstance(text, str) or not text.strip():
                continue
            extracted = self.extract_answer(text, problem=problem)
            if extracted is not None:
                grade = self.grade(extracted, gold, timeout_s=timeout_s, problem=problem)
                found = final_answer_candidates(text)
                span = next((c.span for c in found if c.text == extracted), None)
                return TextGrade(grade, extracted, "task", field, span)
            if not self.reads_prose_answers:
                continue
            candidates = final_answer_candidates(text)[:MAX_PROSE_CANDIDATES]
            if not candidates:
                continue
            outcome = run_with_deadline(
                first_accepted_answer,
                self.name,
                [c.text for c in candidates],
                gold,
                self.grading_options(problem),
                timeout_s=timeout_s,
                warm_imports=self.warm_imports,
            )
            if outcome.status == "timeout":
                first = candidates[0]
                return TextGrade(
                    Grade(False, 0.0, "timeout"), first.text, first.kind, field, first.span
                )
            if outcome.status == "error":
                first = candidates[0]
                grade = Grade(False, 0.0, f"error: {outcome.detail}")
                return TextGrade(grade, first.text, first.kind, field, first.span)
            index = int(outcome.value)
            chosen = candidates[max(index, 0)]
            grade = Grade(True, 1.0, "ok") if index >= 0 else Grade(False, 0.0, "ok")
            return TextGrade(grade, chosen.text, chosen.kind, field, chosen.span)
        return TextGrade(Grade(False, 0.0, "no_answer"), None, None, None, None)

    def answer_leak_step(
        self,
        reasoning: str,
        step_ends: Sequence[int],
        gold: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        problem: Mapping[str, Any] | None = None,
    ) -> LeakPoint:
        """The first step k (1-based) whose prefix ``reasoning[:step_ends[k-1]]`` states an
        answer the task's verifier accepts against ``gold`` — the answer-leak point (SPEC §3).

        Each step adds the candidates (:func:`legival_core.answers.answer_candidates` of the
        prefix) that end inside it; they are checked in one worker under a ``timeout_s``
        deadline for the whole trace. ``k`` is None when no prefix states the gold, and the
        status says ``"timeout"`` or ``"error: ..."`` when the check could not finish.

        >>> text = "We count cases. So there are 239 strings. Check: done."
        >>> point = get_task("champ").answer_leak_step(text, [15, 41, 54], "239")
        >>> point.k, text[point.span[0] : point.span[1]], point.status
        (2, '239', 'ok')
        """
        outcome = run_with_deadline(
            first_leaking_step,
            self.name,
            reasoning,
            [int(e) for e in step_ends],
            gold,
            self.grading_options(problem),
            timeout_s=timeout_s,
            warm_imports=self.warm_imports,
        )
        if outcome.status == "timeout":
            return LeakPoint(None, None, "timeout")
        if outcome.status == "error":
            return LeakPoint(None, None, f"error: {outcome.detail}")
        found = outcome.value
        if found is None:
            return LeakPoint(None, None, "ok")
        k, start, end = found
        return LeakPoint(int(k), (int(start), int(end)), "ok")


@dataclass(frozen=True)
class LeakPoint:
    """Where a trace first states the gold: step ``k`` (1-based) and the answer's span in the
    reasoning, or ``k = None``; ``status`` as in :class:`Grade`."""

    k: int | None
    span: tuple[int, int] | None
    status: str


def first_leaking_step(
    task_name: str, reasoning: str, step_ends: list[int], gold: str, options: Mapping[str, Any]
) -> tuple[int, int, int] | None:
    """``(k, start, end)`` of the first step whose prefix states an accepted answer (runs in the
    grading worker; see :meth:`Task.answer_leak_step`)."""
    from legival_core.answers import answer_candidates

    score = type(get_task(task_name)).score_answer
    checked: set[str] = set()
    previous_end = 0
    for k, end in enumerate(step_ends, start=1):
        found = answer_candidates(reasoning[:end])
        # Specific statements before the whole sentence that holds them.
        for candidate in sorted(found, key=lambda c: c.kind == "sentence"):
            # New statements only: what ends inside this step; a text already checked is
            # not checked again (a restated wrong answer stays wrong).
            if candidate.end <= previous_end or candidate.text in checked:
                continue
            checked.add(candidate.text)
            try:
                accepted = score(candidate.text, gold, options) >= 1.0
            except Exception:  # a malformed candidate is simply not the answer
                accepted = False
            if accepted:
                return k, candidate.start, candidate.end
        previous_end = end
    return None


#: At most this many prose candidates of one text are checked (a closing sentence yields a few;
#: the cap bounds the verifier's work on adversarial text).
MAX_PROSE_CANDIDATES = 16


@dataclass(frozen=True)
class TextGrade:
    """A grade with the answer it was given for and where that answer stands.

    Attributes:
        grade: the :class:`Grade`.
        answer: the answer graded (the accepted candidate, else the most trusted one), or None.
        kind: ``"task"`` (the task's own extractor) or the answer layer's candidate kind.
        field: which of the texts held it (e.g. ``"answer_text"``).
        span: ``(start, end)`` of the answer in that text, when known.
    """

    grade: Grade
    answer: str | None
    kind: str | None
    field: str | None
    span: tuple[int, int] | None


def first_accepted_answer(
    task_name: str, answers: list[str], gold: str, options: Mapping[str, Any]
) -> int:
    """Index of the first answer the task's verifier gives full credit, or -1 (runs in the
    grading worker; an answer whose check raises counts as not accepted)."""
    score = type(get_task(task_name)).score_answer
    for index, answer in enumerate(answers):
        try:
            if score(answer, gold, options) >= 1.0:
                return index
        except Exception:  # a malformed candidate is simply not the answer
            continue
    return -1


TASKS: dict[str, Task] = {}
TaskT = TypeVar("TaskT", bound=Task)


def register_task(task_class: type[TaskT]) -> type[TaskT]:
    """Class decorator: instantiate ``task_class`` and register it under its ``name``.

    Raises:
        ValueError: another task already uses that name.
    """
    existing = TASKS.get(task_class.name)
    if existing is not None and type(existing) is not task_class:
        raise ValueError(f"task name {task_class.name!r} is taken by {type(existing).__qualname__}")
    TASKS[task_class.name] = task_class()
    return task_class


def _load_builtin_tasks() -> None:
    import importlib

    for module in BUILTIN_TASK_MODULES:
        importlib.import_module(module)


def get_task(name: str) -> Task:
    """The registered task called ``name``.

    Example:
        >>> get_task("math").family
        'math'
    """
    _load_builtin_tasks()
    try:
        return TASKS[name]
    except KeyError:
        known = ", ".join(sorted(TASKS))
        raise KeyError(f"unknown task {name!r}; registered tasks: {known}") from None


def task_names() -> list[str]:
    """Names of all registered tasks (built-ins included), sorted."""
    _load_builtin_tasks()
    return sorted(TASKS)


def problem_field(problem: Mapping[str, Any], field: str, *, task: str) -> Any:
    """``problem[field]``, or a ``ValueError`` naming the problem, the field and the task."""
    value = problem.get(field)
    if value is None or (isinstance(value, str) and not value.strip()):
        problem_id = problem.get("problem_id", "<no problem_id>")
        raise ValueError(
            f"problems row {problem_id!r}: field {field!r} is missing or empty "
            f"(needed by task {task!r})"
        )
    return value


def problem_meta(problem: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``meta`` of a problem as a dict (the store keeps it as a JSON string)."""
    if problem is None:
        return {}
    meta = problem.get("meta")
    if meta is None or meta == "":
        return {}
    if isinstance(meta, Mapping):
        return dict(meta)
    try:
        parsed = json.loads(meta)
    except (TypeError, ValueError) as error:
        problem_id = problem.get("problem_id", "<no problem_id>")
        raise ValueError(
            f"problems row {problem_id!r}: field 'meta' is not a JSON object: {error}"
        ) from None
    if not isinstance(parsed, dict):
        problem_id = problem.get("problem_id", "<no problem_id>")
        raise ValueError(f"problems row {problem_id!r}: field 'meta' is not a JSON object")
    return parsed
