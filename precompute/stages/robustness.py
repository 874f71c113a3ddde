"""Stage ``robustness`` (opt-in; the demo build runs it): re-segment and re-embed every trace
under another segmenter.

The robustness report (:mod:`legival_core.rankings.robustness_choices`) computes most alternative
choices from what the store holds; cutting the steps another way needs new steps and new
embeddings. This stage writes them into side tables, never into the default ones:

* ``robustness_steps`` — the steps of each trace under ``--segmenter`` (by default the first
  of ``paper``, ``math``, ``lines`` the store was not cut with), with character spans, token
  counts and the flags of both offline backtracking labelers per step (``lexical_cue``: the
  lexical detector, ``context_cue``: the context-aware cues);
* ``robustness_similarity`` — r_i = max_{j<i} cos(s_i, s_j) over those steps (MiniLM, as the
  ``embed`` stage does).

Resumable like every stage: traces already in ``robustness_similarity`` for that segmenter are
skipped, and each batch of traces lands as one part of steps, then one part of similarities,
so a kill at any moment loses at most the batch in flight and a rerun writes the same rows.

    python -m precompute robustness --store DIR [--segmenter paper|math|lines]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from precompute.errors import UsageError
from precompute.stages.base import (
    BatchWriter,
    StageContext,
    StageOption,
    StageResult,
    register_stage,
)
from precompute.stages.common import (
    chunks,
    problem_rows,
    read_required,
    shard_rows,
    task_of,
)

if TYPE_CHECKING:
    from legival_core.store.store import Store

__all__ = ["run_robustness", "segmenter_rows"]

#: The segmenters an alternative can use (legival_core.text.segment modes), in the order the
#: stage picks a default from: the paper's Punkt first.
SEGMENTERS = ("paper", "math", "lines")

ROBUSTNESS_OPTIONS = (
    StageOption(
        "--segmenter",
        "segmenter",
        {
            "choices": SEGMENTERS,
            "help": "the alternative segmenter (default: the first of paper, math, lines that "
            "the store was not cut with)",
        },
    ),
)


def segmenter_rows(
    trace_id: str, reasoning: str, segmenter: str, encoding: str, family: str
) -> list[dict[str, Any]]:
    """Rows of ``robustness_steps`` for one trace: its steps under ``segmenter`` with the flags
    of the lexical detector and of the context-aware cues
    (:data:`legival_core.metrics.backtracking.OFFLINE_LABELERS`)."""
    from legival_core.metrics.backtracking import context_backtracking, lexical_backtracking
    from precompute.stages.segment import step_rows

    rows = step_rows(trace_id, reasoning, segmenter, encoding)
    texts = [str(r["text"]) for r in rows]
    lexical = set(lexical_backtracking(texts, family))
    context = set(context_backtracking(texts, family))
    return [
        {
            "segmenter": segmenter,
            **row,
            "lexical_cue": index + 1 in lexical,
            "context_cue": index + 1 in context,
        }
        for index, row in enumerate(rows)
    ]


def _default_segmenter(ctx: StageContext) -> str:
    """The segmenter the store's ``steps`` were cut with (its latest segment record)."""
    for record in reversed(ctx.store.manifest.get("provenance") or []):
        if isinstance(record, dict) and record.get("stage") == "segment" and record.get("mode"):
            return str(record["mode"])
    return str(ctx.config.segment.mode)


def _done(store: Store, segmenter: str) -> set[str]:
    if not store.has("robustness_similarity"):
        return set()
    frame = store.read(
        "robustness_similarity", columns=["segmenter", "trace_id"], filters={"segmenter": segmenter}
    )
    return set(frame["trace_id"].astype(str))


@register_stage(
    "robustness",
    reads=("problems", "traces"),
    writes=("robustness_steps", "robustness_similarity"),
    help="opt-in: re-segment with another segmenter (--segmenter paper|math|lines) and "
    "re-embed into side tables for the robustness report",
    options=ROBUSTNESS_OPTIONS,
)
def run_robustness(ctx: StageContext) -> StageResult:
    from legival_core.text.embedding import embed_sentences
    from precompute.stages.embed import similarity_rows

    options = ctx.options_of("robustness")
    default = _default_segmenter(ctx)
    segmenter = str(options.get("segmenter") or next(s for s in SEGMENTERS if s != default))
    if segmenter == default:
        raise UsageError(
            f"stage 'robustness': the store's steps are already cut by {segmenter!r}; choose "
            f"another --segmenter (one of {', '.join(s for s in SEGMENTERS if s != default)})"
        )
    result = StageResult("robustness")
    traces = read_required(
        ctx.store, "traces", ["trace_id", "problem_id", "reasoning"], "robustness", "generate"
    )
    problems = problem_rows(ctx.store)
    done = _done(ctx.store, segmenter)
    mine = shard_rows(traces, ctx.shard).sort_values("trace_id")
    todo = mine[~mine["trace_id"].astype(str).isin(done)]
    result.skipped = len(mine) - len(todo)
    result.todo = len(todo)
    cfg = ctx.config
    families: dict[str, str] = {}
    bar = ctx.bar(len(todo), "robustness", "trace")
    written_steps = written_similarity = 0
    for batch in chunks(list(todo.itertuples(index=False)), cfg.embed.traces_per_part):
        step_groups: list[list[dict[str, Any]]] = []
        for trace in batch:
            problem_id = str(trace.problem_id)
            if problem_id not in families:
                problem = problems.get(problem_id)
                families[problem_id] = task_of(problem).family if problem else "math"
            reasoning = "" if pd.isna(trace.reasoning) else str(trace.reasoning)
            step_groups.append(
                segmenter_rows(
                    str(trace.trace_id),
                    reasoning,
                    segmenter,
                    cfg.segment.encoding,
                    families[problem_id],
                )
            )
        texts = [str(row["text"]) for group in step_groups for row in group]
        # No text: every group below is empty, so no row of the (empty) vectors is read.
        vectors = (
            embed_sentences(texts, batch_size=cfg.embed.batch_size, disk_cache=cfg.embed.disk_cache)
            if texts
            else np.empty((0, 0), dtype=np.float32)
        )
        similarity: list[dict[str, Any]] = []
        offset = 0
        for trace, group in zip(batch, step_groups, strict=True):
            if not group:
                continue
            rows = similarity_rows(str(trace.trace_id), vectors[offset : offset + len(group)])
            similarity.extend({"segmenter": segmenter, **row} for row in rows)
            offset += len(group)
        # Steps first, similarities second: a trace counts as done once its similarities
        # landed, so a kill between the two parts only makes the rerun redo this batch.
        with BatchWriter(ctx.store, "robustness_steps", "robustness", 1 << 30) as writer:
            for group in step_groups:
                writer.add_group(group)
        with BatchWriter(ctx.store, "robustness_similarity", "robustness", 1 << 30) as writer:
            writer.add_group(similarity)
        written_steps += sum(len(group) for group in step_groups)
        written_similarity += len(similarity)
        bar.update(len(batch))
    bar.close()
    result.written = {
        "robustness_steps": written_steps,
        "robustness_similarity": written_similarity,
    }
    result.provenance = {
        "segmenter": segmenter,
        "default_segmenter": default,
        "encoding": cfg.segment.encoding,
        "models": {"embedding": "sentence-transformers/all-MiniLM-L6-v2"},
    }
    return result
