"""The trace inspector's data: step tables, the student strip, step pages and the labeler
kinds. The steps are drawn by :mod:`legival_core.views.reading` (the app as Markdown, the
published site as escaped HTML), which reads the labeler kinds from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

# ---------------------------------------------------------------------------------------------
# Trace inspector
# ---------------------------------------------------------------------------------------------

#: Kinds of backtracking labeler, each with its marker and colour in the inspector.
LABELER_KINDS: dict[str, tuple[str, str]] = {
    "judge": ("J", "#c0392b"),
    "cues": ("C", "#1e8449"),
    "lexical": ("L", "#d68910"),
    "human": ("H", "#7d3c98"),
    "other": ("O", "#566573"),
}
#: What each marker stands for, in the legend.
LABELER_KIND_NAMES = {
    "judge": "LLM judge",
    "cues": "context-aware cues",
    "lexical": "lexical detector",
    "human": "human label",
    "other": "another labeler",
}


def labeler_kind(labeler: str) -> str:
    """``judge`` (``judge:<model>``), ``cues``, ``lexical``, ``human`` or ``other``.

    >>> [labeler_kind(x) for x in ("judge:qwen", "cues", "lexical", "human:ann", "rubric-x")]
    ['judge', 'cues', 'lexical', 'human', 'other']
    """
    name = str(labeler).lower()
    for kind in ("judge", "cues", "lexical", "human"):
        if name == kind or name.startswith(kind + ":"):
            return kind
    return "other"


def labeler_legend(labelers: list[str] | tuple[str, ...] = ()) -> str:
    """The inspector's marker legend, with how well each of ``labelers`` (the labelers whose
    marks are shown) finds hand-labelled backtracking (plain text; the page escapes it).

    >>> labeler_legend()[:61]
    'Markers: J = LLM judge, C = context-aware cues, L = lexical d'
    """
    from legival_core.metrics.label_quality import quality_note

    keys = ", ".join(
        f"{letter} = {LABELER_KIND_NAMES[kind]}"
        for kind, (letter, _) in LABELER_KINDS.items()
        if kind != "other"
    )
    measured = [
        f"{LABELER_KINDS[labeler_kind(name)][0]}: {quality_note(name)}"
        for name in dict.fromkeys(labelers)
    ]
    return f"Markers: {keys}." + ("" if not measured else " " + " ".join(measured))


def step_table(
    steps: pd.DataFrame,
    similarity: pd.DataFrame | None = None,
    judgments: pd.DataFrame | None = None,
    threshold: float = 0.8,
) -> pd.DataFrame:
    """One row per step of one trace: text, tokens, redundancy and backtracking flags.

    Columns: ``step`` (0-based), ``number`` (1-based, the judge's numbering), ``text``,
    ``tokens``, ``similarity`` (r_i, NaN for step 0), ``matched_step`` (argmax j), ``redundant``
    (r_i > ``threshold``), and one boolean column per labeler kind present
    (``flag_judge``, ``flag_lexical``, ``flag_human``, ``flag_other``) from the valid judgments.
    """
    table = steps.sort_values("step")[["step", "text", "tokens"]].reset_index(drop=True)
    table.insert(1, "number", table["step"].astype(int) + 1)
    if similarity is not None and not similarity.empty:
        sims = similarity.set_index("step")
        table["similarity"] = table["step"].map(sims["max_similarity"]).astype("float64")
        table["matched_step"] = table["step"].map(sims["matched_step"]).astype("Int64")
    else:
        table["similarity"] = np.nan
        table["matched_step"] = pd.array([None] * len(table), dtype="Int64")
    table["redundant"] = (table["similarity"] > threshold).fillna(False).astype(bool)
    if judgments is not None and not judgments.empty:
        valid = judgments[judgments["valid"].fillna(False).astype(bool)]
        for labeler, flagged in zip(valid["labeler"], valid["steps"], strict=True):
            column = f"flag_{labeler_kind(labeler)}"
            if column not in table:
                table[column] = False
            numbers = (
                set()
                if flagged is None or (isinstance(flagged, float) and math.isnan(flagged))
                else {int(n) for n in flagged}
            )
            table[column] = table[column] | table["number"].isin(numbers)
    return table


def with_offline_flags(table: pd.DataFrame, task: str | None) -> pd.DataFrame:
    """``table`` (:func:`step_table`'s) with the flags of both offline backtracking labelers
    (``flag_lexical``, ``flag_cues``) of ``task``'s family (math when the task is unknown)
    where the store held none of that labeler's; unchanged when there is no step or task.

    >>> table = pd.DataFrame({"number": [1, 2], "text": ["x = 1.", "But wait, x = 2."]})
    >>> with_offline_flags(table, "math")[["flag_lexical", "flag_cues"]].values.tolist()
    [[False, False], [True, True]]
    """
    if not task or not len(table):
        return table
    from legival_core.metrics.backtracking import offline_backtracking
    from legival_core.tasks import get_task

    try:
        family = get_task(str(task)).family
    except KeyError:
        family = "math"
    texts = table["text"].astype(str).tolist()
    table = table.copy()
    for labeler in ("lexical", "cues"):
        if f"flag_{labeler}" not in table:
            flagged = set(offline_backtracking(labeler, texts, family))
            table[f"flag_{labeler}"] = table["number"].isin(flagged)
    return table


#: What :func:`stored_leak_step` returns for a trace the metrics stage left no row for.
NOT_STORED = object()


def with_lexical_flags(table: pd.DataFrame, task: str | None) -> pd.DataFrame:
    """``table`` (:func:`step_table`'s) with a ``flag_lexical`` column from the lexical
    backtracking detector of ``task``'s family (math when the task is unknown), when the store
    held no lexical labels; unchanged when it did or when there is no step or no task."""
    if "flag_lexical" in table or not task or not len(table):
        return table
    from legival_core.metrics.backtracking import lexical_backtracking
    from legival_core.tasks import get_task

    try:
        family = get_task(str(task)).family
    except KeyError:
        family = "math"
    flagged = set(lexical_backtracking(table["text"].astype(str).tolist(), family))
    table = table.copy()
    table["flag_lexical"] = table["number"].isin(flagged)
    return table


def stored_leak_step(transfer_rows: pd.DataFrame) -> int | object | None:
    """The leak step the metrics stage stored for one trace (its ``trace_transfer`` rows, one
    per student, all with the same ``leak_k``): an int, None when no prefix states the gold,
    or :data:`NOT_STORED` when there is no row to read.

    >>> rows = pd.DataFrame({"student": ["a", "b"], "leak_k": pd.array([4, 4], "Int64")})
    >>> stored_leak_step(rows), stored_leak_step(rows.assign(leak_k=pd.NA))
    (4, None)
    >>> stored_leak_step(pd.DataFrame()) is NOT_STORED
    True
    """
    if transfer_rows.empty or "leak_k" not in transfer_rows:
        return NOT_STORED
    known = transfer_rows["leak_k"].dropna()
    return int(known.iloc[0]) if len(known) else None


def wrong_steps(error_labels: pd.DataFrame) -> dict[int, str]:
    """The first wrong step of each label that found one (``error_labels`` rows of one trace):
    step number -> labeler, for :func:`trace_html`'s ✗ marker. Labels that found no mistake,
    or name no step, mark nothing.

    >>> labels = pd.DataFrame({"labeler": ["human", "judge"], "error_found": [True, False],
    ...     "step": pd.array([4, pd.NA], "Int64")})
    >>> wrong_steps(labels), wrong_steps(pd.DataFrame())
    ({4: 'human'}, {})
    """
    return {
        int(label["step"]): str(label["labeler"])
        for label in error_labels.to_dict(orient="records")
        if label.get("error_found") and pd.notna(label.get("step"))
    }


def graded_answer_line(grade: Mapping[str, Any], text: str | None) -> str:
    """One plain-text line: the answer the grade took, the span it stands at in ``text`` and the
    question type it was read for (issue 23). Show it with ``st.text`` (never as HTML).

    >>> graded_answer_line({"extracted": "No", "answer_kind": "polarity", "answer_start": 0,
    ...     "answer_end": 12, "question_type": "yes_no"}, "There are no solutions.")
    "Graded answer: 'No' (polarity) from 'There are no' · question type: yes_no"
    """
    if not grade or grade.get("extracted") is None:
        return "Graded answer: none found"
    start, end = grade.get("answer_start"), grade.get("answer_end")
    span = ""
    if text and start is not None and end is not None and not pd.isna(start) and not pd.isna(end):
        span = f" from {text[int(start) : int(end)][:200]!r}"
    question = grade.get("question_type")
    question = "–" if question is None or pd.isna(question) else question
    return (
        f"Graded answer: {str(grade['extracted'])[:200]!r} ({grade.get('answer_kind')}){span}"
        f" · question type: {question}"
    )


def student_strip(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Students × prefixes of one trace: mean correctness at each k (k = 0: the student alone).

    >>> r = pd.DataFrame({"student": ["s"] * 4, "k": [0, 1, 2, 2], "correct": [0, 0, 1, 0]})
    >>> student_strip(r).values.tolist()
    [[0.0, 0.0, 0.5]]
    """
    if rollouts.empty:
        return pd.DataFrame()
    strip = rollouts.pivot_table(
        index="student", columns="k", values="correct", aggfunc="mean", observed=True, sort=True
    )
    strip.columns = [int(c) for c in strip.columns]
    return strip.astype("float64")


@dataclass(frozen=True)
class StepPage:
    """Which steps one page of the inspector shows: ``start`` (inclusive) to ``stop``."""

    page: int
    pages: int
    start: int
    stop: int


def step_page(m: int, page: int, per_page: int = 60) -> StepPage:
    """The slice of steps on ``page`` (1-based; out-of-range pages are clamped).

    >>> step_page(130, 3, 60), step_page(0, 5)
    (StepPage(page=3, pages=3, start=120, stop=130), StepPage(page=1, pages=1, start=0, stop=0))
    """
    if per_page < 1:
        raise ValueError(f"per_page must be >= 1, got {per_page}")
    pages = max(1, math.ceil(m / per_page))
    page = min(max(1, int(page)), pages)
    start = (page - 1) * per_page
    return StepPage(page, pages, start, min(m, start + per_page))
