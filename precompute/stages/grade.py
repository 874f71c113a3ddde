"""Stage ``grade``: check each trace's final answer against the gold answer.

The answer is read from the trace's answer part (what follows the reasoning) and, when that
states none, from the whole raw output and then the reasoning (models without a think block
write everything in one piece; recorded traces keep their full text as reasoning). The task's
own extractor decides first; answers stated in prose go through the answer layer
(:meth:`legival_core.tasks.base.Task.grade_text`), and every grade records which candidate it
graded and its span. Grading runs under the task's
deadline: a check that overruns counts as wrong with status ``timeout`` (SPEC §7).

Problems whose gold answer is unknown (ingested traces without one: ``gold = ""`` and
``meta.gold_known = false``) are not graded: their traces get no grades row, so accuracy and
the decomposition leave them out instead of counting them wrong; the stage notes how many.
"""

from __future__ import annotations

import json
from typing import Any

from legival_core.tasks.base import TextGrade
from precompute.stages.base import BatchWriter, StageContext, StageResult, register_stage
from precompute.stages.common import done_ids, is_missing, problem_rows, read_or_empty, task_of

__all__ = ["gold_is_known", "grade_row", "run_grade"]


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
    }


@register_stage(
    "grade",
    reads=("problems", "traces"),
    writes=("grades",),
    help="grade each trace's extracted answer against the gold answer",
)
def run_grade(ctx: StageContext) -> StageResult:
    from precompute.stages.common import require_rows

    result = StageResult("grade")
    traces = read_or_empty(
        ctx.store, "traces", ["trace_id", "problem_id", "answer_text", "raw", "reasoning"]
    )
    require_rows(traces, "traces", "grade", "generate")
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
    return result
