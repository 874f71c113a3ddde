"""Stage ``grade``: check each trace's final answer against the gold answer.

The answer is read from the trace's answer part (what follows the reasoning) and, when that
states none, from the whole raw output and then the reasoning (models without a think block
write everything in one piece; recorded traces keep their full text as reasoning). The task's
own extractor decides first; answers stated in prose go through the answer layer
(:meth:`legival_core.tasks.base.Task.grade_text`), and every grade records which candidate it
graded and its span. Grading runs under the task's
deadline: a check that overruns counts as wrong with status ``timeout`` (docs/grading.md).

Problems whose gold answer is unknown (ingested traces without one: ``gold = ""`` and
``meta.gold_known = false``) are not graded: their traces get no grades row, so accuracy and
the decomposition leave them out instead of counting them wrong; the stage notes how many.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pandas as pd

from legival_core.calibration.grade_review import (
    REVIEW_COLUMNS,
    LabelAgreement,
    agreement_report,
    explain_lines,
    label_agreement,
    review_row,
)
from legival_core.tasks.base import TextGrade
from precompute.stages.base import (
    BatchWriter,
    StageContext,
    StageOption,
    StageResult,
    grading_stamp,
    register_stage,
)
from precompute.stages.common import (
    done_ids,
    is_missing,
    problem_rows,
    read_or_empty,
    read_required,
    task_of,
)

__all__ = ["gold_is_known", "grade_row", "review_rows", "run_grade"]


def gold_is_known(problem: dict[str, Any]) -> bool:
    """False when the problem's loader recorded that it has no gold answer.

    >>> gold_is_known({"gold": "", "meta": '{"gold_known": false}'})
    False
    >>> gold_is_known({"gold": "4", "meta": None})
    True
    """
    meta = problem.get("meta")
    if isinstance(meta, str) and meta:
        try:
            meta = json.loads(meta)
        except ValueError:
            meta = None
    return not (isinstance(meta, dict) and meta.get("gold_known") is False)


def grade_row(graded: TextGrade) -> dict[str, Any]:
    """The columns of a ``grades`` row (all but ``trace_id``) from a graded text."""
    span = graded.span or (None, None)
    return {
        "extracted": graded.answer,
        "correct": bool(graded.grade.correct),
        "score": float(graded.grade.score),
        "status": graded.grade.status,
        "answer_kind": graded.kind,
        "answer_field": graded.field,
        "answer_start": span[0],
        "answer_end": span[1],
        "question_type": graded.question_type,
        **grading_stamp(),
    }


GRADE_OPTIONS = (
    StageOption(
        "--explain",
        "explain",
        {
            "action": "store_true",
            "help": "write DIR/grade_review.csv: per trace the question "
            "type, the candidates considered and why one was taken (label it, then --labels)",
        },
    ),
    StageOption("--review-csv", "review_csv", {"help": "where --explain writes its CSV"}),
    StageOption(
        "--labels",
        "labels",
        {
            "help": "a CSV with trace_id and label (correct / incorrect / no_answer): print the "
            "agreement of the grades with it, the confusion and the disagreements"
        },
    ),
)
REVIEW_FILE = "grade_review.csv"
#: Traces whose explanation is printed by --explain (the CSV holds all).
EXPLAIN_PRINTED = 50


@register_stage(
    "grade",
    reads=("problems", "traces"),
    writes=("grades",),
    help="grade each trace's extracted answer against the gold answer",
    options=GRADE_OPTIONS,
)
def run_grade(ctx: StageContext) -> StageResult:
    result = StageResult("grade")
    traces = read_required(
        ctx.store,
        "traces",
        ["trace_id", "problem_id", "teacher", "answer_text", "raw", "reasoning"],
        "grade",
        "generate",
    )
    problems = problem_rows(ctx.store)
    done = done_ids(ctx.store, "grades")
    todo = [
        row
        for row in traces.to_dict(orient="records")
        if ctx.shard.owns(row["trace_id"]) and row["trace_id"] not in done
    ]
    result.skipped = sum(1 for t in traces["trace_id"] if ctx.shard.owns(t) and t in done)
    result.todo = len(todo)
    timeout = ctx.config.grade.timeout_s
    no_gold = 0
    bar = ctx.bar(len(todo), "grade", "trace")
    with BatchWriter(ctx.store, "grades", "grade", ctx.config.grade.batch_size) as writer:
        for trace in todo:
            problem = problems.get(trace["problem_id"])
            if problem is None:
                from precompute.stages.base import StageError

                raise StageError(
                    f"table 'traces', trace {trace['trace_id']}: problem_id "
                    f"{trace['problem_id']!r} is not in table 'problems'"
                )
            if not gold_is_known(problem):
                no_gold += 1
                bar.update(1)
                continue
            task = task_of(problem)
            texts = {
                c: None if is_missing(trace.get(c)) else str(trace[c])
                for c in ("answer_text", "raw", "reasoning")
            }
            graded = task.grade_text(texts, problem["gold"], timeout_s=timeout, problem=problem)
            writer.add({"trace_id": trace["trace_id"], **grade_row(graded)})
            bar.update(1)
    bar.close()
    result.written["grades"] = writer.written
    result.provenance = {"timeout_s": timeout, "no_gold": no_gold}
    if no_gold:
        result.notes.append(f"{no_gold} trace(s) left ungraded: their problem has no gold answer")
    options = ctx.options_of("grade")
    if options.get("explain"):
        path = Path(options.get("review_csv") or Path(ctx.store.path) / REVIEW_FILE)
        rows = review_rows(ctx, traces, problems, timeout)
        write_review(pd.DataFrame(rows, columns=list(REVIEW_COLUMNS)), path)
        print("\n".join(explain_lines(rows, EXPLAIN_PRINTED)))
        result.notes.append(f"review of {len(rows)} grade(s) written to {path}")
    if options.get("labels"):
        print("\n".join(agreement_report(labels_agreement(ctx, Path(options["labels"])))))
    return result


def write_review(frame: pd.DataFrame, path: Path) -> None:
    """Write a CSV of grades (the review, the regrade's flips) to ``path`` through a new file
    beside it, renamed into place.

    The default ``path`` is inside the store, and a store may come from someone else: a
    symbolic link or FIFO named ``grade_review.csv`` is replaced, never written through (the
    review never lands outside the store), and a kill leaves the previous review whole."""
    temp = path.with_name(f".tmp-review-{os.getpid()}-{uuid.uuid4().hex[:12]}.csv")
    try:
        frame.to_csv(temp, index=False)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def review_rows(
    ctx: StageContext, traces: pd.DataFrame, problems: dict[str, dict[str, Any]], timeout: float
) -> list[dict[str, Any]]:
    """Every owned trace with a known gold, regraded with its explanation (nothing written)."""
    rows = []
    for trace in traces.to_dict(orient="records"):
        problem = problems.get(trace["problem_id"])
        if not ctx.shard.owns(trace["trace_id"]) or problem is None or not gold_is_known(problem):
            continue
        texts = {
            c: None if is_missing(trace.get(c)) else str(trace[c])
            for c in ("answer_text", "raw", "reasoning")
        }
        graded = task_of(problem).grade_text(
            texts, problem["gold"], timeout_s=timeout, problem=problem
        )
        rows.append(review_row(trace, problem["gold"], graded, texts))
    return rows


def labels_agreement(ctx: StageContext, path: Path) -> LabelAgreement:
    """The store's grades against a labels CSV (a filled-in review file)."""
    from precompute.errors import InputMissingError, InputUnusableError

    if not path.is_file():
        raise InputMissingError(f"{path}: no such labels file")
    try:
        labels = pd.read_csv(path, dtype=str, keep_default_na=False)
        return label_agreement(labels, read_or_empty(ctx.store, "grades", ["trace_id", "correct",
                               "extracted", "answer_kind"]))  # fmt: skip
    except (ValueError, pd.errors.ParserError) as error:
        raise InputUnusableError(f"{path}: {error}") from None
