"""Task families: prompts, answer extraction, grading under a deadline, forcing cues, rubrics.

``get_task(name)`` returns a registered family (math, champ, gsm8k, gpqa, connections, jsonl).
Importing this package stays light: math-verify is imported only by the grading worker.

A room of ``legival_core``: prompts, answer extraction and grading per benchmark family. May
import: store, text, grading.
"""

from legival_core.tasks.base import (
    BUILTIN_TASK_MODULES,
    TASKS,
    Family,
    Grade,
    Task,
    _load_builtin_tasks,
    get_task,
    problem_meta,
    register_task,
    task_names,
)
from legival_core.tasks.gpqa import choice_seed_for, shuffle_choices

_load_builtin_tasks()  # so that TASKS lists every built-in family after this import

__all__ = [
    "BUILTIN_TASK_MODULES",
    "TASKS",
    "Family",
    "Grade",
    "Task",
    "choice_seed_for",
    "get_task",
    "problem_meta",
    "register_task",
    "shuffle_choices",
    "task_names",
]
