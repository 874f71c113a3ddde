"""Stage ``segment``: split each trace's reasoning into steps with exact character spans.

Steps are Punkt sentences (``[segment] mode = "paper"``, docs/metrics/index.md#steps) or the
``lines`` variant;
each row keeps ``start``/``end`` into ``traces.reasoning`` and the tiktoken count of the step.
All steps of one trace go into the same part, so a resumed run never sees half a trace.

The stage also writes ``trace_counts``: what the metrics need from a trace's text — its token
count under each of :func:`count_encodings`, whether it is blank, its step count and its
compression σ — counted here, where the text is read anyway, so that the metrics stage and the
robustness report read numbers only (docs/running-at-scale.md). A store segmented before this
table existed gets it on the next ``segment`` run (the steps are not cut again).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from precompute.stages.base import BatchWriter, StageContext, StageResult, register_stage
from precompute.stages.common import done_ids, read_required, shard_rows

__all__ = ["COUNT_ENCODINGS", "count_encodings", "run_segment", "step_rows", "trace_count_rows"]

#: The tiktoken encodings every trace is counted in: the metrics' default and the one the
#: robustness report recounts with (docs/robustness.md, the ``encoding`` family).
COUNT_ENCODINGS = ("cl100k_base", "o200k_base")
#: Traces counted per write of ``trace_counts`` (a kill loses at most one block's work).
COUNT_BLOCK = 4096


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


def count_encodings(metrics_encoding: str) -> tuple[str, ...]:
    """The encodings ``trace_counts`` holds: :data:`COUNT_ENCODINGS` and the metrics' own.

    >>> count_encodings("cl100k_base")
    ('cl100k_base', 'o200k_base')
    >>> count_encodings("p50k_base")
    ('cl100k_base', 'o200k_base', 'p50k_base')
    """
    return tuple(dict.fromkeys((*COUNT_ENCODINGS, metrics_encoding)))


def trace_count_rows(
    trace_ids: Sequence[str],
    texts: Sequence[str | None],
    steps: Sequence[int],
    encodings: Sequence[str],
) -> pd.DataFrame:
    """Rows of ``trace_counts`` for traces with reasoning ``texts`` and ``steps`` step counts:
    one row per (trace, encoding) with the whole text's token count (a blank text counted as
    it is; the ``release`` profile's zero for it is applied by the metrics from ``blank``),
    ``blank`` and σ (:func:`legival_core.metrics.efficiency.compression_ratio`).

    >>> rows = trace_count_rows(["a", "b"], ["hello world", "  "], [1, 0], ["cl100k_base"])
    >>> rows[["trace_id", "tokens", "blank", "steps"]].values.tolist()
    [['a', 2, False, 1], ['b', 1, True, 0]]
    """
    from legival_core.metrics.efficiency import compression_ratio
    from legival_core.text.tokens import count_tokens_many

    plain = ["" if text is None else str(text) for text in texts]
    blank = [not text.strip() for text in plain]
    sigma = [compression_ratio(text) for text in plain]
    frames = [
        pd.DataFrame(
            {
                "trace_id": list(trace_ids),
                "encoding": encoding,
                "tokens": count_tokens_many(plain, encoding),
                "blank": blank,
                "steps": [int(m) for m in steps],
                "compression": sigma,
            }
        )
        for encoding in encodings
    ]
    return pd.concat(frames, ignore_index=True)


def _count_traces(ctx: StageContext, traces: pd.DataFrame) -> int:
    """Write ``trace_counts`` for the ``traces`` (id, reasoning) that lack a row for one of
    the encodings, in blocks (resumable); the number of rows written."""
    encodings = count_encodings(ctx.config.metrics.encoding)
    done = (
        ctx.store.done_keys("trace_counts", ["trace_id", "encoding"])
        if ctx.store.has("trace_counts")
        else set()
    )
    complete = {
        trace_id
        for trace_id in traces["trace_id"]
        if all((trace_id, encoding) in done for encoding in encodings)
    }
    todo = traces[~traces["trace_id"].isin(complete)]
    if todo.empty:
        return 0
    step_counts = ctx.store.rows_per("steps", "trace_id") if ctx.store.has("steps") else None
    written = 0
    for first in range(0, len(todo), COUNT_BLOCK):
        block = todo.iloc[first : first + COUNT_BLOCK]
        ids = block["trace_id"].astype(str).tolist()
        steps = [0] * len(ids) if step_counts is None else step_counts.reindex(ids).fillna(0)
        rows = trace_count_rows(ids, block["reasoning"].tolist(), list(steps), encodings)
        ctx.store.write("trace_counts", rows, stage="segment")
        written += len(rows)
    return written


@register_stage(
    "segment",
    reads=("traces",),
    writes=("steps", "step_importance", "trace_counts"),
    help="split reasoning into sentence steps (char spans, token counts); count each trace",
)
def run_segment(ctx: StageContext) -> StageResult:
    cfg = ctx.config.segment
    result = StageResult("segment")
    traces = read_required(ctx.store, "traces", ["trace_id", "reasoning"], "segment", "generate")
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
    counted = _count_traces(ctx, mine)
    if counted:
        result.written["trace_counts"] = counted
        result.provenance["count_encodings"] = list(count_encodings(ctx.config.metrics.encoding))
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
