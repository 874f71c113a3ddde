"""Stage ``embed``: per-step redundancy r_i = max_{j<i} cos(s_i, s_j) with its argmax j.

Steps are embedded with all-MiniLM-L6-v2 (:func:`legival_core.text.embedding.embed_sentences`,
deduplicated and cached) a few traces at a time;
:func:`legival_core.metrics.efficiency.step_similarities` gives r_i and j*
(docs/metrics/redundancy.md). Step 0 has neither (null).
"""

from __future__ import annotations

import math

import pandas as pd

from precompute.stages.base import BatchWriter, StageContext, StageResult, register_stage
from precompute.stages.common import chunks, done_ids, read_required, shard_rows

__all__ = ["run_embed", "similarity_rows"]


def similarity_rows(trace_id: str, embeddings: object) -> list[dict[str, object]]:
    """Rows of the ``similarity`` table for one trace's step embeddings (in step order)."""
    from legival_core.metrics.efficiency import step_similarities

    max_similarity, matched = step_similarities(embeddings)  # type: ignore[arg-type]
    return [
        {
            "trace_id": trace_id,
            "step": step,
            "max_similarity": None if math.isnan(value) else float(value),
            "matched_step": match,
        }
        for step, (value, match) in enumerate(zip(max_similarity.tolist(), matched, strict=True))
    ]


@register_stage(
    "embed",
    reads=("steps",),
    writes=("similarity",),
    help="embed steps (MiniLM) and record each step's most similar earlier step",
)
def run_embed(ctx: StageContext) -> StageResult:
    from legival_core.text.embedding import embed_sentences

    cfg = ctx.config.embed
    result = StageResult("embed")
    steps = read_required(ctx.store, "steps", ["trace_id", "step", "text"], "embed", "segment")
    done = done_ids(ctx.store, "similarity")
    steps = shard_rows(steps, ctx.shard)
    todo_steps = steps[~steps["trace_id"].isin(done)].sort_values(["trace_id", "step"])
    trace_ids = list(dict.fromkeys(todo_steps["trace_id"]))
    result.skipped = steps["trace_id"].nunique() - len(trace_ids)
    result.todo = len(trace_ids)
    grouped = {tid: group for tid, group in todo_steps.groupby("trace_id", sort=False)}
    bar = ctx.bar(len(trace_ids), "embed", "trace")
    with BatchWriter(ctx.store, "similarity", "embed", 1) as writer:
        for batch in chunks(trace_ids, cfg.traces_per_part):
            texts = pd.concat([grouped[t]["text"] for t in batch]).astype(str).tolist()
            vectors = embed_sentences(texts, batch_size=cfg.batch_size, disk_cache=cfg.disk_cache)
            rows: list[dict[str, object]] = []
            offset = 0
            for trace_id in batch:
                count = len(grouped[trace_id])
                rows.extend(similarity_rows(trace_id, vectors[offset : offset + count]))
                offset += count
            writer.add_group(rows)  # one part per batch of traces
            bar.update(len(batch))
    bar.close()
    result.written["similarity"] = writer.written
    result.provenance = {"models": {"embedding": "sentence-transformers/all-MiniLM-L6-v2"}}
    return result
