"""Checking a grader against a person: explanations of each grade, and agreement with labels.

The loop that built the project's hand labels, as a feature for anyone's own store:

1. ``python -m precompute grade --store DIR --explain`` writes ``DIR/grade_review.csv``: one row
   per graded trace with the question type, the answer accepted (or the most trusted one), its
   span and the sentence around it, every candidate considered with why it was taken or left,
   and an empty ``label`` column;
2. a person fills ``label`` in a spreadsheet (``correct``, ``incorrect`` or ``no_answer``: does
   the answer the model *states* equal the gold?);
3. ``python -m precompute grade --store DIR --labels FILE`` prints the agreement, the confusion
   of labels against grades and every disagreement.

Cells are written for spreadsheets: a cell that would start with ``=``, ``+``, ``-`` or ``@``
(a formula to Excel or LibreOffice) gets a leading apostrophe — model text is untrusted.

Reference: Legi-Val (arXiv 2603.20508) §3 grading; docs/grading.md answer extraction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

__all__ = [
    "LABELS",
    "REVIEW_COLUMNS",
    "LabelAgreement",
    "label_agreement",
    "review_row",
    "spreadsheet_safe",
    "terminal_safe",
]

#: The labels a person may give; only ``correct`` counts as a right answer.
LABELS = ("correct", "incorrect", "no_answer")
REVIEW_COLUMNS = (
    "trace_id", "problem_id", "teacher", "gold", "question_type", "graded", "status",
    "answer_kind", "answer", "answer_field", "answer_start", "answer_end", "context",
    "candidates", "label",
)  # fmt: skip
#: Characters of the text around an answer shown in ``context``.
CONTEXT_CHARS = 160


def spreadsheet_safe(value: object) -> object:
    """``value`` with a leading apostrophe when a spreadsheet would read it as a formula: the
    rule of every CSV the project writes, :func:`legival_core.store.safe_export.csv_cell`.

    >>> spreadsheet_safe("=1+1"), spreadsheet_safe("-3"), spreadsheet_safe("3"), spreadsheet_safe(4)
    ("'=1+1", "'-3", '3', 4)
    """
    from legival_core.store.safe_export import csv_cell

    return csv_cell(value)


def terminal_safe(text: object, limit: int = 200) -> str:
    """``text`` on one line for a terminal: control characters escaped, cut at ``limit``.

    >>> terminal_safe("a\\x1b[31mb\\nc")
    'a\\\\x1b[31mb\\\\nc'
    """
    escaped = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return escaped if len(escaped) <= limit else escaped[: limit - 1] + "…"


def review_row(
    trace: Mapping[str, Any], gold: str, graded: Any, texts: Mapping[str, str | None]
) -> dict[str, Any]:
    """One row of the review CSV from a trace, its gold and its :class:`TextGrade`."""
    span = graded.span
    text = texts.get(graded.field or "") or ""
    context = ""
    if span is not None and text:
        start, end = span
        context = text[max(0, start - CONTEXT_CHARS // 2) : end + CONTEXT_CHARS // 2]
    candidates = [
        {"field": f, "kind": k, "text": t, "start": s, "end": e, "why": w}
        for f, k, t, s, e, w in graded.considered
    ]
    row = {
        "trace_id": trace["trace_id"],
        "problem_id": trace.get("problem_id"),
        "teacher": trace.get("teacher"),
        "gold": gold,
        "question_type": graded.question_type,
        "graded": "correct" if graded.grade.correct else "incorrect",
        "status": graded.grade.status,
        "answer_kind": graded.kind,
        "answer": graded.answer,
        "answer_field": graded.field,
        "answer_start": None if span is None else span[0],
        "answer_end": None if span is None else span[1],
        "context": context,
        "candidates": json.dumps(candidates, ensure_ascii=False),
        "label": "",
    }
    return {key: spreadsheet_safe(value) for key, value in row.items()}


@dataclass(frozen=True)
class LabelAgreement:
    """How a store's grades agree with a person's labels.

    Attributes:
        agreement: share of labelled traces where the grade (right / wrong) equals the label
            (``correct`` / anything else).
        compared: how many labelled traces were compared.
        confusion: counts by label (rows) and grade (columns).
        disagreements: the labelled rows whose grade differs, with the grade's answer.
        unmatched: trace ids of the labels file that the store has no grade for.
    """

    agreement: float
    compared: int
    confusion: pd.DataFrame
    disagreements: pd.DataFrame
    unmatched: list[str]


def label_agreement(labels: pd.DataFrame, grades: pd.DataFrame) -> LabelAgreement:
    """Agreement of ``grades`` (the store's table) with ``labels`` (``trace_id``, ``label``).

    Agreement = (number of traces where ``label == "correct"`` equals ``grades.correct``) /
    (number of labelled traces that have a grade). Rows with an empty label are skipped.

    Raises:
        ValueError: a column is missing, or a label is not one of :data:`LABELS` (the row of
            the file, counting the header as row 1, is named).

    >>> labels = pd.DataFrame({"trace_id": ["a", "b", "c"], "label": ["correct", "no_answer", ""]})
    >>> grades = pd.DataFrame({"trace_id": ["a", "b"], "correct": [True, True],
    ...                        "extracted": ["3", "4"], "answer_kind": ["boxed", "boxed"]})
    >>> result = label_agreement(labels, grades)
    >>> result.agreement, result.compared  # a agrees; b is labelled no_answer but graded right
    (0.5, 2)
    """
    for column in ("trace_id", "label"):
        if column not in labels.columns:
            raise ValueError(f"labels file: column {column!r} is missing")
    labels = labels.assign(label=labels["label"].fillna("").astype(str).str.strip())
    for position, label in enumerate(labels["label"], start=2):
        if label and label not in LABELS:
            raise ValueError(
                f"labels file, row {position}: label {label!r} is not one of {', '.join(LABELS)}"
            )
    labelled = labels[labels["label"] != ""]
    known = set(grades["trace_id"])
    unmatched = [str(t) for t in labelled["trace_id"] if t not in known]
    joined = labelled[labelled["trace_id"].isin(known)].merge(
        grades, on="trace_id", how="left", suffixes=("_label", "")
    )
    graded = joined["correct"].astype(bool).map({True: "graded correct", False: "graded wrong"})
    agree = (joined["label"] == "correct") == joined["correct"].astype(bool)
    confusion = pd.crosstab(joined["label"], graded) if len(joined) else pd.DataFrame()
    shown = [c for c in ("trace_id", "label", "correct", "extracted", "answer_kind")
             if c in joined.columns]  # fmt: skip
    return LabelAgreement(
        agreement=float(agree.mean()) if len(joined) else float("nan"),
        compared=len(joined),
        confusion=confusion,
        disagreements=joined.loc[~agree, shown].reset_index(drop=True),
        unmatched=unmatched,
    )


def agreement_report(result: LabelAgreement) -> list[str]:
    """Lines a terminal shows for :func:`label_agreement`'s result."""
    lines = [f"agreement: {result.agreement:.1%} of {result.compared} labelled traces"]
    if len(result.confusion):
        lines += ["confusion (label x grade):", *result.confusion.to_string().splitlines()]
    lines.append(f"disagreements: {len(result.disagreements)}")
    for row in result.disagreements.to_dict(orient="records"):
        lines.append(
            "  " + terminal_safe(
                f"{row['trace_id']}: label {row['label']}, graded "
                f"{'correct' if row['correct'] else 'wrong'} ({row.get('answer_kind')}: "
                f"{row.get('extracted')!r})"
            )
        )  # fmt: skip
    if result.unmatched:
        lines.append(f"{len(result.unmatched)} labelled trace(s) have no grade in the store")
    return lines


def explain_lines(rows: Iterable[Mapping[str, Any]], limit: int | None = None) -> list[str]:
    """Lines a terminal shows for review rows: per trace the question type, the answer taken
    and why, then each candidate considered."""
    lines: list[str] = []
    for count, row in enumerate(rows):
        if limit is not None and count >= limit:
            lines.append("… (the CSV holds every trace)")
            break
        lines.append(
            terminal_safe(
                f"{row['trace_id']} [{row['question_type']}] {row['graded']} "
                f"({row['status']}): {row['answer_kind']} {row['answer']!r}"
            )
        )
        candidates: Sequence[Mapping[str, Any]] = json.loads(str(row["candidates"]).lstrip("'"))
        for candidate in candidates:
            lines.append(
                "    " + terminal_safe(
                    f"{candidate['kind']} {candidate['text']!r} @{candidate['start']}: "
                    f"{candidate['why']}", 160,
                )
            )  # fmt: skip
    return lines
