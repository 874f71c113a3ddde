"""Stage ``grade``: check each trace's final answer against the gold answer.

The answer is extracted from the trace's answer part (what follows the reasoning) and, when
that holds none, from the whole raw output (models without a think block write everything in
one piece; recorded traces keep their full text as reasoning). Grading runs under the task's
deadline: a check that overruns counts as wrong with status ``timeout`` (SPEC §7).
"""

from __future__ import annotations

from typing import Any

from precompute.stages.base import BatchWriter, StageContext, StageResult, register_stage
from precompute.stages.common import done_ids, is_missing, problem_rows, read_or_empty, task_of

__all__ = ["extract_trace_answer", "run_grade"]


def extract_trace_answer(task: Any, trace: dict[str, Any], problem: dict[str, Any]) -> str | None:
    """The answer of a trace: from its answer part first, then from its raw text/reasoning."""
    for column in ("answer_text", "raw", "reasoning"):
        text = trace.get(column)
        if is_missing(text) or not str(text).strip():
            continue
        found = task.extract_answer(str(text), problem=problem)
        if found is not None:
            return found
    return None


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
            task = task_of(problem)
            extracted = extract_trace_answer(task, trace, problem)
            grade = task.grade(extracted, problem["gold"], timeout_s=timeout, problem=problem)
            writer.add(
                {
                    "trace_id": trace["trace_id"],
                    "extracted": extracted,
                    "correct": bool(grade.correct),
                    "score": float(grade.score),
                    "status": grade.status,
                }
            )
            bar.update(1)
    bar.close()
    result.written["grades"] = writer.written
    result.provenance = {"timeout_s": timeout}
    return result
