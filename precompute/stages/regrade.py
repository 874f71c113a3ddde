"""Stage ``regrade``: grade again every grade and rollout an older grader made, and say what
flipped.

A grade records the grader version that made it (``grader_version``; see
:mod:`legival_core.grading.stamps`). When the grader changes (a new rule, a new finder), a store
graded before says so (``verify``, the About page, ``lv.open``); this stage brings it current:
each teacher trace graded by another version than this code's is graded again as the grade
stage grades it, and each rollout's completion as the rollout stage grades it. Rows the file
gave a verdict for (version 0) keep that verdict. The stage prints every grade that flipped and
writes them to ``regrade_flips.csv`` in the store.

Resumable: a row graded again carries the current version, so a rerun after a kill skips it
and goes on (the flips a killed run found were printed, not written again). The metrics depend
on the grades: run ``metrics`` (or ``run``) afterwards; a trace that became correct has no
rollouts until ``rollout`` runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from legival_core.grading.grader import GRADER_VERSION
from legival_core.grading.stamps import FILE_VERDICT
from precompute.stages.base import (
    BatchWriter,
    StageContext,
    StageResult,
    grading_stamp,
    register_stage,
)
from precompute.stages.common import is_missing, problem_rows, read_or_empty, task_of
from precompute.stages.grade import gold_is_known, grade_row, write_review

__all__ = ["FLIPS_FILE", "run_regrade"]

FLIPS_FILE = "regrade_flips.csv"
FLIP_COLUMNS = ("table", "trace_id", "student", "k", "before", "after", "answer", "kind")
#: Flips printed by the stage (the CSV holds all).
FLIPS_PRINTED = 30


def _older(version: Any) -> bool:
    """A row made by another grader version than this code's (not a file's verdict)."""
    if is_missing(version):
        return True
    return int(version) not in (GRADER_VERSION, FILE_VERDICT)


@register_stage(
    "regrade",
    reads=("problems", "traces", "grades", "rollouts"),
    writes=("grades", "rollouts"),
    help="grade again what an older grader graded (grades and rollouts); list what flipped",
)
def run_regrade(ctx: StageContext) -> StageResult:
    run = _Regrade(ctx, problem_rows(ctx.store), ctx.config.grade.timeout_s, StageResult("regrade"))
    run.traces()
    run.rollouts()
    result, flips = run.result, run.flips
    result.provenance = {"grader_version": GRADER_VERSION, "flips": len(flips)}
    if flips:
        path = Path(ctx.store.path) / FLIPS_FILE
        write_review(pd.DataFrame(flips, columns=list(FLIP_COLUMNS)), path)
        for flip in flips[:FLIPS_PRINTED]:
            where = flip["trace_id"] + (
                f" {flip['student']} k={flip['k']}" if flip["table"] == "rollouts" else ""
            )
            print(
                f"flipped {flip['table']} {where}: {flip['before']} -> {flip['after']} "
                f"({flip['kind']}: {flip['answer']!r})"
            )
        result.notes.append(f"{len(flips)} grade(s) flipped, listed in {path}")
    if sum(result.written.values()):
        result.notes.append(
            "the metrics read these grades: run `python -m precompute metrics --store DIR` "
            "(a trace that became correct gets rollouts from `rollout`)"
        )
    return result


@dataclass
class _Regrade:
    """One regrade run over both tables: the problems, the deadline, the stage's counts and the
    flips found, which each table's pass shares."""

    ctx: StageContext
    problems: dict[str, dict[str, Any]]
    timeout: float
    result: StageResult
    flips: list[dict[str, Any]] = field(default_factory=list)

    def _todo(self, rows: pd.DataFrame, unit: str) -> tuple[list[dict[str, Any]], Any]:
        """The rows an older grader made that this shard owns (the others count as skipped),
        and a progress bar over them."""
        stale = rows[rows["grader_version"].map(_older)]
        self.result.skipped += len(rows) - len(stale)
        todo = [row for row in stale.to_dict("records") if self.ctx.shard.owns(row["trace_id"])]
        self.result.todo += len(todo)
        return todo, self.ctx.bar(len(todo), "regrade", unit)

    def traces(self) -> None:
        """Grade each stale teacher-trace grade again, as the grade stage grades it."""
        ctx, timeout = self.ctx, self.timeout
        grades = read_or_empty(
            ctx.store,
            "grades",
            ["trace_id", "correct", "answer_kind", "extracted", "grader_version"],
        )
        if grades.empty:
            return
        traces = read_or_empty(
            ctx.store,
            "traces",
            ["trace_id", "problem_id", "answer_text", "raw", "reasoning"],
        ).set_index("trace_id")
        todo, bar = self._todo(grades, "trace")
        with BatchWriter(ctx.store, "grades", "regrade", ctx.config.grade.batch_size) as writer:
            for before in todo:
                bar.update(1)
                trace_id = before["trace_id"]
                if trace_id not in traces.index:
                    continue
                trace = traces.loc[trace_id]
                problem = self.problems.get(trace["problem_id"])
                if problem is None or not gold_is_known(problem):
                    continue
                task = task_of(problem)
                if before["answer_kind"] == "gold":
                    # A reference graded on its gold: the same answer, graded by this code.
                    from legival_core.grading.grader import TextGrade

                    grade = task.grade(before["extracted"], problem["gold"], timeout_s=timeout)
                    graded = TextGrade(grade, before["extracted"], "gold", "answer_text", None)
                else:
                    texts = {
                        c: None if is_missing(trace[c]) else str(trace[c])
                        for c in ("answer_text", "raw", "reasoning")
                    }
                    graded = task.grade_text(
                        texts, problem["gold"], timeout_s=timeout, problem=problem
                    )
                row = {"trace_id": trace_id, **grade_row(graded)}
                writer.add(row)
                if bool(before["correct"]) != bool(graded.grade.correct):
                    self.flips.append(
                        _flip("grades", trace_id, None, None, before["correct"], graded)
                    )
        bar.close()
        self.result.written["grades"] = writer.written

    def rollouts(self) -> None:
        """Grade each stale rollout's completion again, as the rollout stage grades it."""
        ctx = self.ctx
        if not ctx.store.has("rollouts"):
            return
        todo, bar = self._todo(ctx.store.read("rollouts"), "rollout")
        with BatchWriter(ctx.store, "rollouts", "regrade", 256) as writer:
            for before in todo:
                bar.update(1)
                problem = self.problems.get(before["problem_id"])
                if problem is None or not gold_is_known(problem):
                    continue
                completion = "" if is_missing(before["completion"]) else str(before["completion"])
                graded = task_of(problem).grade_text(
                    {"completion": completion},
                    problem["gold"],
                    timeout_s=self.timeout,
                    problem=problem,
                )
                row = dict(before)
                row.update(
                    extracted=graded.answer,
                    correct=float(graded.grade.score),
                    status=graded.grade.status,
                    **grading_stamp(),
                )
                writer.add(row)
                if float(before["correct"]) != float(graded.grade.score):
                    self.flips.append(
                        _flip(
                            "rollouts",
                            before["trace_id"],
                            before["student"],
                            before["k"],
                            before["correct"],
                            graded,
                        )
                    )
        bar.close()
        self.result.written["rollouts"] = writer.written


def _flip(
    table: str, trace_id: str, student: str | None, k: Any, before: Any, graded: Any
) -> dict[str, Any]:
    return {
        "table": table,
        "trace_id": trace_id,
        "student": student,
        "k": None if k is None else int(k),
        "before": float(before),
        "after": float(graded.grade.score),
        "answer": graded.answer,
        "kind": graded.kind,
    }
