"""The reward-model and monitoring pages' results for one selection, as pure functions of the
store's tables: the pages call them on the tables they read, the ``metrics`` stage on the
same tables to store the default selection's results (:mod:`legival_core.metrics.page_results`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, cast

import pandas as pd

from legival_core.metrics.page_results import MONITOR_RESAMPLES, RewardSelection
from legival_core.oversight import oversight
from legival_core.oversight.oversight import Level
from legival_core.oversight.reward_partials import sums_without, teacher_transfer
from legival_core.store.frames import is_in

__all__ = [
    "MONITOR_RESAMPLES",
    "POOLED",
    "RewardTables",
    "pooled_monitor_scores",
    "reward_points",
    "reward_rho",
    "teacher_rewards",
]

#: ``dataset`` of the monitoring rows that pool every dataset (the page's "All").
POOLED = "All"


def _on_dataset(
    traces: pd.DataFrame, trace_transfer: pd.DataFrame, dataset: str | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The traces' key columns and the transfer rows, both on ``dataset`` (None: all)."""
    traces = traces[["trace_id", "teacher", "dataset"]]
    if dataset is None:
        return traces, trace_transfer
    on = trace_transfer[trace_transfer["dataset"] == dataset]
    return traces[traces["dataset"] == dataset], on


def _without(frame: pd.DataFrame, references: Sequence[str]) -> pd.DataFrame:
    """``frame`` without the rows of the ``references`` teachers (none: unchanged), the filter
    of :func:`legival_core.published.references.keep_teachers`."""
    wanted = [str(r) for r in references]
    if not wanted or "teacher" not in frame.columns or frame.empty:
        return frame
    return frame[~is_in(frame["teacher"], wanted)]


def _rows_of(frame: pd.DataFrame, trace_ids: pd.Series) -> pd.DataFrame:
    """The rows of ``frame`` whose trace is one of ``trace_ids``: ``frame`` itself when that is
    every row (no copy of millions of transfer rows when no teacher was left out)."""
    mask = is_in(frame["trace_id"], trace_ids)
    return frame if mask.all() else frame[mask]


def pooled_monitor_scores(verdicts: pd.DataFrame, n_boot: int) -> pd.DataFrame:
    """The detection scores of every verdict of a teacher whatever its dataset
    (``dataset`` = :data:`POOLED`), seed 0 as the per-dataset scores."""
    return oversight.monitor_scores(verdicts.assign(dataset=POOLED), n_boot=n_boot, seed=0)


class RewardTables(NamedTuple):
    """The tables the reward results read: every reward, the per-(trace, student) transfer
    rows, the grades, and the traces' ``trace_id``, ``teacher`` and ``dataset``.

    The metrics stage passes what it merged from its chunks instead of the transfer rows
    (:class:`legival_core.oversight.reward_partials.RewardPartial`): ``trace_transfer`` then
    holds one row per trace (its means over students) and ``student_sums`` the per-student
    sums of every trace (``"all"``) and of the correct ones (``"correct"``), from which the
    teacher-level transfer means come."""

    rewards: pd.DataFrame
    trace_transfer: pd.DataFrame
    grades: pd.DataFrame
    traces: pd.DataFrame
    student_sums: Mapping[str, pd.DataFrame] | None = None


def _teacher_means(
    tables: RewardTables,
    chosen: RewardSelection,
    references: Sequence[str] = (),
) -> pd.DataFrame | None:
    """The per-(teacher, dataset) transfer means from ``tables.student_sums`` on the selection's
    dataset and traces, ``references`` left out (None without sums: computed from the rows)."""
    if tables.student_sums is None:
        return None
    sums = tables.student_sums["correct" if chosen.correct_only else "all"]
    return teacher_transfer(sums_without(sums, references, chosen.dataset))


def _of_model(tables: RewardTables, chosen: RewardSelection) -> pd.DataFrame:
    """The rewards given by the selection's reward model."""
    return tables.rewards[tables.rewards["reward_model"] == chosen.model]


def reward_points(tables: RewardTables, chosen: RewardSelection) -> pd.DataFrame:
    """The scatter's points: one per trace of the selection's dataset (None: all) with a reward
    by its model and a transfer row
    (:func:`legival_core.oversight.oversight.trace_level_rewards`)."""
    points = oversight.trace_level_rewards(
        _of_model(tables, chosen),
        tables.trace_transfer,
        tables.grades,
        correct_only=chosen.correct_only,
    )
    return points if chosen.dataset is None else points[points["dataset"] == chosen.dataset]


def reward_rho(
    tables: RewardTables, chosen: RewardSelection, references: Sequence[str] = ()
) -> pd.DataFrame:
    """Spearman ρ of the selection's reward with each transfer metric on its dataset (None:
    all), at its level, trace or teacher
    (:func:`legival_core.oversight.oversight.reward_correlations`); at teacher level the
    ``references`` teachers add no point (pass none to include them) and each teacher is
    averaged over the datasets the selection's support names (:mod:`legival_core.stats.support`)."""
    # reward_correlations refuses any other level; the cast only tells the type checker so
    level = cast(Level, chosen.level)
    traces, transfer = _on_dataset(tables.traces, tables.trace_transfer, chosen.dataset)
    rewards = _of_model(tables, chosen)
    if level == "teacher":
        traces = _without(traces, references)
        # the teacher means join each reward to its owner among ``traces``, so a reward of a
        # trace left out drops there; the transfer rows are read only without the sums (at ten
        # million traces each of these copies was hundreds of MB)
        if tables.student_sums is None:
            transfer = _rows_of(transfer, traces["trace_id"])
    elif chosen.dataset is not None:
        rewards = _rows_of(rewards, traces["trace_id"])
    return oversight.reward_correlations(
        rewards,
        transfer,
        tables.grades,
        level=level,
        correct_only=chosen.correct_only,
        traces=traces,
        support=chosen.support,
        teacher_transfer=_teacher_means(tables, chosen, references) if level == "teacher" else None,
    )


def teacher_rewards(
    tables: RewardTables, chosen: RewardSelection, references: Sequence[str] = ()
) -> pd.DataFrame:
    """Mean reward and transfer metrics per teacher for the selection's model on its dataset
    (None: all), :func:`legival_core.oversight.oversight.teacher_level_rewards`, each averaged
    over the datasets its support names; ``references`` (shown, not compared) do not narrow
    them."""
    traces, transfer = _on_dataset(tables.traces, tables.trace_transfer, chosen.dataset)
    return oversight.teacher_level_rewards(
        _of_model(tables, chosen),
        transfer,
        tables.grades,
        correct_only=chosen.correct_only,
        traces=traces,
        support=chosen.support,
        references=references,
        transfer=_teacher_means(tables, chosen),
    )
