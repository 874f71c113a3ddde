"""Stage ``segment``: split each trace's reasoning into steps with exact character spans.

Steps are Punkt sentences (``[segment] mode = "paper"``, docs/metrics/index.md#steps) or the
``lines`` variant;
each row keeps ``start``/``end`` into ``traces.reasoning`` and the tiktoken count of the step.
All steps of one trace go into the same part, so a resumed run never sees half a trace.
"""

from __future__ import annotations

from precompute.stages.base import BatchWriter, StageContext, StageResult, register_stage
from precompute.stages.common import done_ids, read_or_empty, require_rows, shard_rows

__all__ = ["run_segment", "step_rows"]


def step_rows(trace_id: str, reasoning: str, mode: str, encoding: str) -> list[dict[str, object]]:
    """Rows of the ``steps`` table for one trace."""
    from legival_core.text.segment import split_steps
    from legival_core.text.tokens import count_tokens_many

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
    writes=("steps", "step_importance"),
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
    bar = ctx.bar(len(todo), "segment", "trace")
    with BatchWriter(ctx.store, "steps", "segment", cfg.batch_size * 16) as writer:
        for trace_id, reasoning in zip(todo["trace_id"], todo["reasoning"], strict=True):
            rows = step_rows(trace_id, reasoning or "", cfg.mode, cfg.encoding)
            empty += not rows
            writer.add_group(rows)
            bar.update(1)
    bar.close()
    result.written["steps"] = writer.written
    if empty:
        result.notes.append(f"{empty} trace(s) with empty reasoning have no steps")
    result.provenance = {"mode": cfg.mode, "encoding": cfg.encoding}
    counts = _carry_chunks(ctx, set(mine["trace_id"]), cfg.batch_size * 16)
    if counts["traces"]:
        result.written["step_importance"] = counts.pop("rows")
        result.notes.append(
            f"Thought Anchors chunks of {counts['traces']} trace(s): {counts['placed']} of "
            f"{counts['chunks']} placed on steps, {counts['clean']} map cleanly onto whole steps"
        )
        result.provenance["chunk_alignment"] = counts
    return result


def _carry_chunks(ctx: StageContext, mine: set[str], batch_rows: int) -> dict[str, int]:
    """``step_importance`` rows for the traces of this shard that came with chunk importances
    (Thought Anchors) and have steps but no such rows yet (a resumed run included): each
    chunk carried onto the steps by character span (:mod:`legival_core.text.chunk_alignment`)."""
    counts = {"traces": 0, "chunks": 0, "placed": 0, "clean": 0, "rows": 0}
    if not ctx.store.has("chunk_importance"):
        return counts
    need = (done_ids(ctx.store, "chunk_importance") & mine) - done_ids(ctx.store, "step_importance")
    if not need:
        return counts
    from legival_core.text.chunk_alignment import align_chunks

    wanted = {"trace_id": sorted(need)}
    chunks = ctx.store.read("chunk_importance", filters=wanted)
    steps = ctx.store.read("steps", columns=["trace_id", "step", "start", "end"], filters=wanted)
    with BatchWriter(ctx.store, "step_importance", "segment", batch_rows) as writer:
        for trace_id, trace_steps in steps.groupby("trace_id", sort=True):
            alignment = align_chunks(trace_steps, chunks[chunks["trace_id"] == trace_id])
            rows = alignment.steps.to_dict("records")
            writer.add_group([{"trace_id": trace_id, **row} for row in rows])
            counts["traces"] += 1
            counts["chunks"] += alignment.chunks
            counts["placed"] += alignment.placed
            counts["clean"] += alignment.clean
    counts["rows"] = writer.written
    return counts
