"""Stage ``segment``: split each trace's reasoning into steps with exact character spans.

Steps are Punkt sentences (``[segment] mode = "paper"``, docs/metrics/index.md#steps) or the
``lines`` variant;
each row keeps ``start``/``end`` into ``traces.reasoning`` and the tiktoken count of the step.
All steps of one trace go into the same part, so a resumed run never sees half a trace.
"""

from __future__ import annotations

from typing import Any

from precompute.stages.base import BatchWriter, StageContext, StageResult, register_stage
from precompute.stages.common import done_ids, read_or_empty, require_rows, shard_rows

__all__ = ["run_segment", "step_rows"]


def step_rows(trace_id: str, reasoning: str, mode: str, encoding: str) -> list[dict[str, object]]:
    """Rows of the ``steps`` table for one trace."""
    from legival_core.segment import split_steps
    from legival_core.tokens import count_tokens_many

    steps = split_steps(reasoning, mode)
    counts = count_tokens_many([s.text for s in steps], encoding)
    return [
        {
            "trace_id": trace_id,
            "step": index,
            "start": step.start,
            "end": step.end,
            "text": step.text,
            "tokens": tokens,
        }
        for index, (step, tokens) in enumerate(zip(steps, counts, strict=True))
    ]


@register_stage(
    "segment",
    reads=("traces",),
    writes=("steps",),
    help="split reasoning into sentence steps (char spans, token counts)",
)
def run_segment(ctx: StageContext) -> StageResult:
    cfg = ctx.config.segment
    result = StageResult("segment")
    traces = read_or_empty(ctx.store, "traces", ["trace_id", "reasoning"])
    require_rows(traces, "traces", "segment", "generate")
    done = done_ids(ctx.store, "steps")
    mine = shard_rows(traces, ctx.shard)
    todo = mine[~mine["trace_id"].isin(done)]
    result.skipped = len(mine) - len(todo)
    result.todo = len(todo)
    empty = 0
    # Traces that came with chunk importances (Thought Anchors): how their chunks fall on the
    # steps is said once the steps exist (the inspector carries them over the same way).
    chunks = (
        ctx.store.read("chunk_importance", filters={"trace_id": list(todo["trace_id"])})
        if ctx.store.has("chunk_importance") and len(todo)
        else None
    )
    chunked = set() if chunks is None else set(chunks["trace_id"])
    alignments = []
    bar = ctx.bar(len(todo), "segment", "trace")
    with BatchWriter(ctx.store, "steps", "segment", cfg.batch_size * 16) as writer:
        for trace_id, reasoning in zip(todo["trace_id"], todo["reasoning"], strict=True):
            rows = step_rows(trace_id, reasoning or "", cfg.mode, cfg.encoding)
            empty += not rows
            writer.add_group(rows)
            if trace_id in chunked and chunks is not None:
                alignments.append(_aligned(rows, chunks[chunks["trace_id"] == trace_id]))
            bar.update(1)
    bar.close()
    result.written["steps"] = writer.written
    if empty:
        result.notes.append(f"{empty} trace(s) with empty reasoning have no steps")
    result.provenance = {"mode": cfg.mode, "encoding": cfg.encoding}
    if alignments:
        counts = {
            "traces": len(alignments),
            "chunks": sum(a.chunks for a in alignments),
            "placed": sum(a.placed for a in alignments),
            "clean": sum(a.clean for a in alignments),
        }
        result.notes.append(
            f"Thought Anchors chunks of {counts['traces']} trace(s): {counts['placed']} of "
            f"{counts['chunks']} placed on steps, {counts['clean']} map cleanly onto whole steps"
        )
        result.provenance["chunk_alignment"] = counts
    return result


def _aligned(rows: list[dict[str, object]], chunks: Any) -> Any:
    """:func:`legival_core.chunk_alignment.align_chunks` of one trace's new step rows."""
    import pandas as pd

    from legival_core.chunk_alignment import align_chunks

    steps = pd.DataFrame(rows, columns=["step", "start", "end"])
    return align_chunks(steps, chunks)
