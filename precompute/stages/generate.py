"""Stage ``generate``: each teacher answers each problem; the reasoning is parsed out.

For every (problem, teacher, sample) whose trace id is not yet in ``traces`` (and that the
shard owns), the teacher's engine completes the task's chat messages. The raw output is
split into reasoning and final answer (:func:`legival_core.text.reasoning.parse_reasoning`), the
generated tokens T are the engine's count, and a trace is *truncated* when it stopped at the
output budget without an extractable answer (docs/metrics/decomposition.md; Kaiser et al. C_i).

Samples get seeds ``teacher.seed + sample``, so a rerun of a missing sample reproduces it.
Requests that fail in the engine are logged and left out (the next run retries them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from legival_core.store.schema import trace_id_for
from precompute.config import ModelConfig
from precompute.stages.base import BatchWriter, StageContext, StageResult, register_stage
from precompute.stages.common import (
    chunks,
    done_ids,
    problem_rows,
    read_required,
    task_of,
    to_json,
)

__all__ = ["GenerationJob", "parse_output", "run_generate"]


@dataclass(frozen=True)
class GenerationJob:
    trace_id: str
    problem: dict[str, Any]
    teacher: ModelConfig
    sample: int


def parse_output(raw: str, family: str = "auto") -> tuple[str, str, bool]:
    """(reasoning, answer_text, complete) of a raw model output."""
    from legival_core.text.reasoning import parse_reasoning

    parsed = parse_reasoning(raw, family=family)
    return parsed.reasoning, parsed.answer_text, bool(parsed.complete)


@register_stage(
    "generate",
    reads=("problems",),
    writes=("traces",),
    help="teacher traces: each teacher answers each problem (engine per teacher)",
)
def run_generate(ctx: StageContext) -> StageResult:
    from precompute.backends import GenerationRequest
    from precompute.stages.base import StageError

    config = ctx.config
    result = StageResult("generate")
    if not config.teachers:
        raise StageError(
            f"{config.source}: no [[teachers]] configured; generate has nothing to run"
        )
    read_required(ctx.store, "problems", ["problem_id"], "generate", "problems")
    problems = problem_rows(ctx.store)
    done = done_ids(ctx.store, "traces")
    jobs: list[GenerationJob] = []
    for teacher in config.teachers:
        for problem_id, problem in problems.items():
            for sample in range(teacher.samples):
                trace_id = trace_id_for(teacher.name, problem_id, sample)
                if not ctx.shard.owns(trace_id):
                    continue
                if trace_id in done:
                    result.skipped += 1
                    continue
                jobs.append(GenerationJob(trace_id, problem, teacher, sample))
    result.todo = len(jobs)
    result.provenance = {
        "models": {t.name: {"engine": t.engine, "model": t.model} for t in config.teachers},
        "sampling": {t.name: t.sampling() for t in config.teachers},
    }
    failures: list[str] = []
    bar = ctx.bar(len(jobs), "generate", "trace")
    with BatchWriter(ctx.store, "traces", "generate", config.generate.batch_size) as writer:
        for teacher in config.teachers:
            mine = [job for job in jobs if job.teacher is teacher]
            if not mine:
                continue
            engine = ctx.engines.get(teacher)
            for batch in chunks(mine, config.generate.batch_size):
                requests = [
                    GenerationRequest(
                        job.trace_id,
                        task_of(job.problem).build_messages(job.problem),
                        max_tokens=teacher.max_tokens,
                        temperature=teacher.temperature,
                        top_p=teacher.top_p,
                        repetition_penalty=teacher.repetition_penalty,
                        seed=teacher.seed + job.sample,
                    )
                    for job in batch
                ]
                completions = engine.generate(requests)
                for job, completion in zip(batch, completions, strict=True):
                    if not completion.ok:
                        failures.append(f"{job.trace_id}: {completion.error}")
                        ctx.logger.warning(
                            "generation failed for %s: %s", job.trace_id, completion.error
                        )
                        continue
                    writer.add(_trace_row(job, completion))
                bar.update(len(batch))
    bar.close()
    result.written["traces"] = writer.written
    _report_failures(result, failures, len(jobs))
    return result


def _trace_row(job: GenerationJob, completion: Any) -> dict[str, Any]:
    task = task_of(job.problem)
    raw = completion.text
    reasoning, answer_text, complete = parse_output(raw)
    hit_budget = completion.finish_reason == "length"
    truncated = hit_budget and not task.answer_extractable(raw, problem=job.problem)
    return {
        "trace_id": job.trace_id,
        "problem_id": job.problem["problem_id"],
        "dataset": job.problem["dataset"],
        "teacher": job.teacher.name,
        "sample": job.sample,
        "reasoning": reasoning,
        "answer_text": answer_text,
        "raw": raw,
        "complete": complete,
        "tokens": int(completion.completion_tokens),
        "truncated": bool(truncated),
        "source": f"generate:{job.teacher.engine}",
        "sampling": to_json({**job.teacher.sampling(), "seed": job.teacher.seed + job.sample}),
    }


def _report_failures(result: StageResult, failures: list[str], attempted: int) -> None:
    """Note failed requests; if every single one failed, the stage itself failed."""
    if not failures:
        return
    if len(failures) == attempted:
        raise RuntimeError(
            f"all {attempted} generation(s) failed in the engine; first: {failures[0]}"
        )
    result.notes.append(f"{len(failures)} failed in the engine (logged; rerun to retry)")
