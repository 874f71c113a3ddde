"""The task-family interface and its registry.

A task family knows how to ask a model for a problem (chat messages), how to read the final
answer back out of untrusted model text, how to grade it against the gold answer under a time
limit, how to force an answer out of a student (docs/metrics/fotu.md) and what the backtracking
judge should
look for (docs/metrics/backtracking.md). Families register themselves by name; callers use
:func:`get_task`.

Reference: Legi-Val, arXiv 2603.20508 (§2 backtracking rubrics, §3 forcing cue and grading).
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from legival_core.grading.grader import (
    Grade,
    TextGrade,
    first_leaking_step,
    grade_texts,
)
from legival_core.tasks.deadline import run_with_deadline

Family = Literal["math", "science", "puzzles"]
DEFAULT_TIMEOUT_S = 10.0
#: The forcing cue of the families whose answer goes in ``\boxed{}``: what follows it is the
#: answer, closed by ``}``.
BOXED_FORCING_CUE = "\n\nThe answer is \\boxed{"

# Modules that define the built-in families; importing one registers its task.
BUILTIN_TASK_MODULES: tuple[str, ...] = (
    "legival_core.tasks.math",
    "legival_core.tasks.champ",
    "legival_core.tasks.gsm8k",
    "legival_core.tasks.gpqa",
    "legival_core.tasks.connections",
    "legival_core.tasks.jsonl",
)


class Task(ABC):
    """One task family. Subclasses set the class attributes and implement the abstract methods.

    Attributes:
        name: registry key (``problems.task`` in the store).
        family: ``"math"``, ``"science"`` or ``"puzzles"``; picks the lexical backtracking cues.
        system_prompt: the system message.
        answer_instructions: what the user turn asks after the problem (how to reason and how
            to give the final answer); :meth:`instructions` returns it unless a family words
            it per problem.
        forcing_cue: text appended to a student's output when no answer could be extracted, so
            that a short second generation has to produce one; by default
            :data:`BOXED_FORCING_CUE`, for the families that answer in ``\boxed{}``.
        stop_strings: strings at which generation may stop because, once written, the answer is
            complete (include them in the output). Empty where no finite set exists (a boxed
            answer can nest braces): engines that can run a callback use
            :meth:`answer_extractable` instead.
        backtracking_rubric: what counts as backtracking for this family (the judge's rubric).
        warm_imports: heavy modules the grading worker imports before the clock starts.
        reads_prose_answers: read prose answers through the answer layer (see grade_text).
    """

    # Declared here once: a task class assigns values only (``name = "gsm8k"``) and the type
    # checker holds each value to the type declared here.
    name: ClassVar[str]
    family: ClassVar[Family]
    system_prompt: ClassVar[str]
    answer_instructions: ClassVar[str]
    forcing_cue: ClassVar[str] = BOXED_FORCING_CUE
    stop_strings: ClassVar[tuple[str, ...]] = ()
    backtracking_rubric: ClassVar[str]
    warm_imports: ClassVar[tuple[str, ...]] = ()
    #: Whether answers stated in prose ("so there are 239 strings") are read through
    #: :mod:`legival_core.grading.answers` when the task's extractor finds none.
    reads_prose_answers: ClassVar[bool] = True

    def build_messages(self, problem: Mapping[str, Any]) -> list[dict[str, str]]:
        """System and user chat messages asking for step-by-step reasoning and a final answer."""
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.user_prompt(problem)},
        ]

    def user_prompt(self, problem: Mapping[str, Any]) -> str:
        """The user turn: the problem's ``prompt``, a blank line, then :meth:`instructions`."""
        question = problem_field(problem, "prompt", task=self.name)
        return f"{question}\n\n{self.instructions(problem)}"

    def instructions(self, problem: Mapping[str, Any]) -> str:
        """What follows the problem in the user turn: :attr:`answer_instructions`, unless a
        family words it for each problem (the options of a multiple choice, a user's own)."""
        return self.answer_instructions

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
            _raise_if_code_error(outcome.detail)
            return Grade(False, 0.0, f"error: {outcome.detail}")
        score = float(outcome.value)
        if not 0.0 <= score <= 1.0 or math.isnan(score):
            return Grade(False, 0.0, f"error: score {score!r} outside [0, 1]")
        return Grade(score >= 1.0, score, "ok")

    #: The question type of every problem of this task (None: derived from each prompt).
    fixed_question_type: ClassVar[str | None] = None

    def question_type(self, problem: Mapping[str, Any] | None) -> str:
        """What ``problem`` asks (:mod:`legival_core.grading.questions`):
        ``meta.question_type`` when the problem sets it, else the task's
        :attr:`fixed_question_type`, else the type read from its prompt.

        >>> get_task("champ").question_type({"prompt": "Are there integer solutions?"})
        'yes_no'
        >>> meta = '{"question_type": "count"}'
        >>> get_task("champ").question_type({"prompt": "Is it odd?", "meta": meta})
        'count'
        """
        from legival_core.grading.questions import QUESTION_TYPES, question_type

        override = problem_meta(problem).get("question_type")
        if isinstance(override, str) and override.strip():
            return override.strip()
        if self.fixed_question_type is not None:
            return self.fixed_question_type
        prompt = (problem or {}).get("prompt")
        derived = question_type(prompt if isinstance(prompt, str) else None)
        assert derived == "expression" or derived in QUESTION_TYPES
        return derived

    def gold_values(self, gold: str) -> list[str]:
        """The answers ``gold`` accepts (one per alternative form); used to tell whether a
        list of values can be right (see :func:`legival_core.grading.scanning.value_count`)."""
        return [gold]

    def gold_is_statement(self, gold: str) -> bool:
        """True when ``gold`` is a sentence to be stated ("No integer solutions"), not a
        value; such a gold may be read in a whole sentence."""
        return False

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
        :func:`legival_core.grading.answers.final_answer_candidates`, read in the frame of the
        problem's :meth:`question_type`, is checked by the task's verifier in their order of trust
        and the first one accepted is the answer. When none is accepted, the most trusted
        candidate is recorded as the answer.

        All of it — extraction, candidate search and verification — runs in one worker under
        one ``timeout_s`` deadline: a text that takes longer is graded wrong with status
        ``"timeout"`` (no answer recorded), and the caller goes on.

        >>> graded = get_task("champ").grade_text(
        ...     {"answer_text": "So there are 239 strings of length 6."}, "239")
        >>> graded.grade.correct, graded.answer, graded.kind, graded.field, graded.span
        (True, '239', 'copula_tail', 'answer_text', (13, 16))
        """
        question = self.question_type(problem)
        options = self.grading_options(problem)
        prompt = (problem or {}).get("prompt")
        outcome = run_with_deadline(
            grade_texts,
            type(self),
            {k: v for k, v in texts.items() if isinstance(v, str) and v.strip()},
            gold,
            options,
            dict(problem) if problem is not None else None,
            question,
            prompt if isinstance(prompt, str) else None,
            timeout_s=timeout_s,
            warm_imports=self.warm_imports,
        )
        if outcome.status == "timeout":
            return TextGrade(Grade(False, 0.0, "timeout"), None, None, None, None, question)
        if outcome.status == "error":
            _raise_if_code_error(outcome.detail)
            grade = Grade(False, 0.0, f"error: {outcome.detail}")
            return TextGrade(grade, None, None, None, None, question)
        return outcome.value

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
        answer the task's verifier accepts against ``gold`` — the answer-leak point
        (docs/metrics/fotu-before-leak.md).

        Each step adds the candidates of the prefix that end inside it
        (:func:`legival_core.grading.answers.prefix_candidates`, read in the problem's question
        frame: "so there are no integer solutions" states "No" for a yes/no question); they are
        found and checked in one worker under a ``timeout_s`` deadline for the whole trace. ``k`` is
        None when no prefix states the gold, and the status says ``"timeout"`` or
        ``"error: ..."`` when the check could not finish.

        >>> text = "We count cases. So there are 239 strings. Check: done."
        >>> point = get_task("champ").answer_leak_step(text, [15, 41, 54], "239")
        >>> point.k, text[point.span[0] : point.span[1]], point.status
        (2, '239', 'ok')
        """
        prompt = (problem or {}).get("prompt")
        outcome = run_with_deadline(
            first_leaking_step,
            type(self),
            reasoning,
            [int(e) for e in step_ends],
            gold,
            self.grading_options(problem),
            self.question_type(problem),
            prompt if isinstance(prompt, str) else None,
            timeout_s=timeout_s,
            warm_imports=self.warm_imports,
        )
        if outcome.status == "timeout":
            return LeakPoint(None, None, "timeout")
        if outcome.status == "error":
            _raise_if_code_error(outcome.detail)
            return LeakPoint(None, None, f"error: {outcome.detail}")
        found = outcome.value
        if found is None:
            return LeakPoint(None, None, "ok")
        k, start, end = found
        return LeakPoint(int(k), (int(start), int(end)), "ok")


class GraderCodeError(RuntimeError):
    """The grader's own code failed (it could not import, or names what does not exist): no
    grade may be recorded, since the text was never read. A malformed gold or a hostile text
    is a grade with status ``"error: …"``; this is not."""


#: Errors that say the grading code is broken, whatever text it was given.
_CODE_ERRORS = ("ImportError", "ModuleNotFoundError", "SyntaxError", "NameError")


def _raise_if_code_error(detail: str) -> None:
    """Raise :class:`GraderCodeError` when a grading worker's error is one of the code's own
    (seen: a demo build whose workers imported modules changed on disk mid-run graded 41
    rollouts wrong with "ImportError: cannot import name …")."""
    if detail.startswith(_CODE_ERRORS):
        raise GraderCodeError(f"the grading code failed, nothing was graded: {detail}")


@dataclass(frozen=True)
class LeakPoint:
    """Where a trace first states the gold: step ``k`` (1-based) and the answer's span in the
    reasoning, or ``k = None``; ``status`` as in :class:`Grade`."""

    k: int | None
    span: tuple[int, int] | None
    status: str


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
    # A gap in a pandas column arrives as NaN: no meta, like None or "".
    if meta is None or meta == "" or (isinstance(meta, float) and meta != meta):
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
