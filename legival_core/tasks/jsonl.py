"""Custom problems from a user's JSONL file: exact match, or a regular expression.

Settings come from the problem's ``meta`` (a JSON object):

- ``answer_pattern``: a regular expression that finds the answer in the model's text; its last
  match is used (the group named ``answer``, else group 1, else the whole match). Without it the
  answer is the last ``\\boxed{...}``, else the text after the last "Answer:" on its line.
- ``match``: ``"exact"`` (default): the normalised answer equals the normalised gold;
  ``"regex"``: the gold is a regular expression the normalised answer must match in full.
- ``case_sensitive``: compare case-sensitively (default ``false``).
- ``instructions``: replaces the default request to box the final answer.

The regular expressions come from the user's own data file, not from model output; still, the
regex match of grading runs under the grading deadline.

Reference: Legi-Val, arXiv 2603.20508 (custom datasets in the workbench).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from legival_core.grading.boxes import last_boxed
from legival_core.tasks.base import Task, problem_meta, register_task
from legival_core.tasks.math import MATH_BACKTRACKING_RUBRIC

MATCH_MODES = ("exact", "regex")
_ANSWER_LINE = re.compile(r"(?im)^[ \t*#>]*(?:final\s+)?answer\s*[:：]\**\s*(.+?)\s*$")
_TEXT_COMMAND = re.compile(r"\\(?:text|textbf|mathrm)\s*\{([^{}]*)\}")
DEFAULT_INSTRUCTIONS = "Reason step by step, then write the final answer inside \\boxed{}."


def normalise_free_answer(answer: str, *, case_sensitive: bool = False) -> str:
    """Unwrap ``\\text{}``; drop surrounding ``$``, quotes, ``*`` and an end period; squeeze spaces.

    Example:
        >>> normalise_free_answer(r'  "\\text{Paris}". ')
        'paris'
    """
    text = _TEXT_COMMAND.sub(r"\1", answer)
    text = " ".join(text.split()).strip(" $*\"'`").rstrip(".").strip(" $*\"'`")
    return text if case_sensitive else text.casefold()


def _match_answer(match: re.Match[str]) -> str:
    if "answer" in match.re.groupindex:
        return match.group("answer") or ""
    return match.group(1) if match.re.groups >= 1 else match.group(0)


@register_task
class JsonlTask(Task):
    """Generic task for a user's JSONL problems (exact or regex match, set per problem)."""

    name = "jsonl"
    family = "math"
    system_prompt = (
        "You are a careful problem solver. Reason step by step before giving a final answer."
    )
    backtracking_rubric = MATH_BACKTRACKING_RUBRIC
    answer_instructions = DEFAULT_INSTRUCTIONS

    def instructions(self, problem: Mapping[str, Any]) -> str:
        """The problem's own ``meta.instructions``, else :data:`DEFAULT_INSTRUCTIONS`."""
        return str(problem_meta(problem).get("instructions") or self.answer_instructions)

    def extract_answer(self, text: str, *, problem: Mapping[str, Any] | None = None) -> str | None:
        """The answer per ``meta.answer_pattern``, else the last box, else the last "Answer:".

        Example:
            >>> JsonlTask().extract_answer("thinking...\\nFinal answer: Paris")
            'Paris'
        """
        pattern = problem_meta(problem).get("answer_pattern")
        if pattern:
            try:
                compiled = re.compile(pattern)
            except re.error as error:
                problem_id = (problem or {}).get("problem_id", "<no problem_id>")
                raise ValueError(
                    f"problems row {problem_id!r}: meta.answer_pattern is not a valid regular "
                    f"expression: {error}"
                ) from None
            matches = list(compiled.finditer(text))
            if not matches:
                return None
            return _match_answer(matches[-1]).strip() or None
        boxed = last_boxed(text)
        if boxed:
            return boxed
        lines = list(_ANSWER_LINE.finditer(text))
        if not lines:
            return None
        return lines[-1].group(1).strip() or None

    def grading_options(self, problem: Mapping[str, Any] | None) -> dict[str, Any]:
        meta = problem_meta(problem)
        mode = meta.get("match", "exact")
        if mode not in MATCH_MODES:
            problem_id = (problem or {}).get("problem_id", "<no problem_id>")
            raise ValueError(
                f"problems row {problem_id!r}: meta.match must be one of {MATCH_MODES}, "
                f"got {mode!r}"
            )
        return {"match": mode, "case_sensitive": bool(meta.get("case_sensitive", False))}

    @staticmethod
    def score_answer(extracted: str, gold: str, options: Mapping[str, Any]) -> float:
        case_sensitive = bool(options.get("case_sensitive", False))
        answer = normalise_free_answer(extracted, case_sensitive=case_sensitive)
        if options.get("match", "exact") == "regex":
            flags = 0 if case_sensitive else re.IGNORECASE
            return 1.0 if re.fullmatch(gold, answer, flags) else 0.0
        return 1.0 if answer == normalise_free_answer(gold, case_sensitive=case_sensitive) else 0.0
