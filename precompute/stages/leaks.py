"""Stage ``leaks``: the answer-leak point of every trace with rollouts, stored once.

A trace's answer-leak point is the first step whose prefix already states an answer equal to
the gold (:meth:`legival_core.tasks.Task.answer_leak_step`, the answer layer;
docs/metrics/fotu-before-leak.md). Finding it reads the reasoning text and calls the verifier
per candidate, so it is done here, once per trace, and kept in ``answer_leaks``; the metrics
stage reads the numbers (FOTU before the leak) and never the text.

A row records the gold it was checked against and the grader version that checked it: when
either changes (a corrected gold, a new grader), the row is stale and the next run checks the
trace again. Resumable: rows are written in blocks, a rerun checks only what is missing or
stale. A store without rollouts has nothing to check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from precompute.stages.base import StageContext, StageResult, register_stage
from precompute.stages.common import is_missing, problem_rows, read_or_empty

__all__ = ["LEAK_BLOCK", "leak_table", "run_leaks", "stale_leaks"]

#: Traces checked per write (a kill loses at most one block's work).
LEAK_BLOCK = 512


def _gold(problem: Mapping[str, Any] | None) -> str:
    gold = None if problem is None else problem.get("gold")
    return "" if is_missing(gold) else str(gold)


def leak_table(
    rollouts: pd.DataFrame,
    traces: pd.DataFrame,
    steps: pd.DataFrame,
    problems: Mapping[str, Mapping[str, Any]],
    timeout_s: float,
) -> pd.DataFrame:
    """``trace_id``, ``leak_k``: for every trace with rollouts, the first step whose prefix
    already states an answer equal to the gold (:meth:`Task.answer_leak_step`, the answer
    layer), null when none does or the check did not finish (docs/metrics/fotu-before-leak.md,
    answer-leak point)."""
    from precompute.stages.common import task_of

    wanted = set(rollouts["trace_id"].astype(str))
    chosen = traces[traces["trace_id"].astype(str).isin(wanted)]
    ends = (
        steps[steps["trace_id"].astype(str).isin(wanted)]
        .sort_values(["trace_id", "step"])
        .groupby("trace_id", observed=True)["end"]
        .agg(list)
    )
    records: list[tuple[Any, int | None]] = []
    # The answer layer is the slow part (a verifier call per candidate); traces with the same
    # text, steps, gold and grading settings (greedy samples, one trace under two teachers)
    # are checked once.
    known: dict[tuple[Any, ...], int | None] = {}
    for trace in chosen.itertuples():
        problem = problems.get(str(trace.problem_id))
        step_ends = ends.get(trace.trace_id)
        if problem is None or step_ends is None or not _gold(problem):
            records.append((trace.trace_id, None))
            continue
        task = task_of(dict(problem))
        reasoning = str(trace.reasoning)
        key = (
            task.name,
            _gold(problem),
            reasoning,
            tuple(int(e) for e in step_ends),
            json.dumps(task.grading_options(dict(problem)), sort_keys=True, default=str),
        )
        if key not in known:
            point = task.answer_leak_step(
                reasoning, step_ends, problem["gold"], timeout_s=timeout_s, problem=dict(problem)
            )
            known[key] = point.k
        records.append((trace.trace_id, known[key]))
    out = pd.DataFrame.from_records(records, columns=["trace_id", "leak_k"])
    out["leak_k"] = pd.array(out["leak_k"].tolist(), dtype="Int64")
    return out


def stale_leaks(
    wanted: pd.DataFrame,
    stored: pd.DataFrame,
    problems: Mapping[str, Mapping[str, Any]],
    grader_version: int,
) -> list[str]:
    """The ids of the ``wanted`` traces (``trace_id``, ``problem_id``) whose ``answer_leaks``
    row (``stored``: ``trace_id``, ``gold``, ``grader_version``) is missing, was checked
    against another gold, or by another grader version.

    >>> wanted = pd.DataFrame({"trace_id": ["a", "b", "c"], "problem_id": ["p", "p", "q"]})
    >>> stored = pd.DataFrame({"trace_id": ["a", "b"], "gold": ["4", "5"],
    ...                        "grader_version": [1, 1]})
    >>> stale_leaks(wanted, stored, {"p": {"gold": "4"}, "q": {"gold": "7"}}, 1)
    ['b', 'c']
    """
    # column-wise: at ten million traces a dictionary of every stored row took half a minute
    stored_ids = stored["trace_id"].astype("string")
    last = ~stored_ids.duplicated(keep="last").to_numpy()  # a trace stored twice: its last row
    # each stored trace's gold and version, then a row no trace matches (gold None, version
    # NaN: equal to nothing), which position -1 of a trace never stored picks
    recorded_gold = np.append(_text_or_empty(stored["gold"])[last], np.array([None], dtype=object))
    versions = pd.to_numeric(stored["grader_version"]).to_numpy(float, na_value=np.nan)
    recorded_version = np.append(versions[last], np.nan)
    ids = wanted["trace_id"].astype("string")
    row = pd.Index(stored_ids[last]).get_indexer(ids)
    problem_ids = wanted["problem_id"].astype("string")
    gold_of = {p: _gold(problems.get(p)) for p in problem_ids.unique() if not is_missing(p)}
    current_gold = problem_ids.map(gold_of).fillna("").to_numpy(object)
    fresh = (recorded_gold[row] == current_gold) & (recorded_version[row] == grader_version)
    return [str(t) for t in ids[~fresh]]


def _text_or_empty(values: pd.Series) -> np.ndarray:
    """Each value as text (``str``), a missing one as ``""``, as :func:`_gold` reads a gold."""
    return values.astype("string").fillna("").to_numpy(object)


@register_stage(
    "leaks",
    reads=("problems", "traces", "steps", "rollouts"),
    writes=("answer_leaks",),
    help="answer-leak point of each trace with rollouts (first step stating the gold)",
)
def run_leaks(ctx: StageContext) -> StageResult:
    from legival_core.grading.grader import GRADER_VERSION
    from precompute.stages.common import shard_rows

    result = StageResult("leaks")
    store = ctx.store
    rollouts = read_or_empty(store, "rollouts", ["trace_id"])
    if rollouts.empty:
        result.notes.append("no rollouts: no answer-leak point to find")
        return result
    with_rollouts = set(rollouts["trace_id"].astype(str))
    del rollouts
    traces = read_or_empty(store, "traces", ["trace_id", "problem_id"])
    wanted = shard_rows(traces[traces["trace_id"].astype(str).isin(with_rollouts)], ctx.shard)
    problems = problem_rows(store)
    stored = read_or_empty(store, "answer_leaks", ["trace_id", "gold", "grader_version"])
    todo = stale_leaks(wanted, stored, problems, GRADER_VERSION)
    result.skipped = len(wanted) - len(todo)
    result.todo = len(todo)
    bar = ctx.bar(len(todo), "leaks", "trace")
    found = 0
    for first in range(0, len(todo), LEAK_BLOCK):
        ids = todo[first : first + LEAK_BLOCK]
        chosen = {"trace_id": ids}
        block_traces = store.read(
            "traces", columns=["trace_id", "problem_id", "reasoning"], filters=chosen
        )
        block_steps = (
            store.read("steps", columns=["trace_id", "step", "end"], filters=chosen)
            if store.has("steps")
            else pd.DataFrame({"trace_id": [], "step": [], "end": []})
        )
        leaks = leak_table(
            pd.DataFrame({"trace_id": ids}),
            block_traces,
            block_steps,
            problems,
            ctx.config.grade.timeout_s,
        )
        problem_of = dict(zip(block_traces["trace_id"], block_traces["problem_id"], strict=True))
        leaks["gold"] = [_gold(problems.get(str(problem_of.get(t)))) for t in leaks["trace_id"]]
        leaks["grader_version"] = GRADER_VERSION
        store.write("answer_leaks", leaks, stage="leaks")
        found += int(leaks["leak_k"].notna().sum())
        bar.update(len(ids))
    bar.close()
    result.written["answer_leaks"] = len(todo)
    if todo:
        result.notes.append(f"{found} of {len(todo)} trace(s) checked state the gold early")
    result.provenance = {"timeout_s": ctx.config.grade.timeout_s}
    return result
