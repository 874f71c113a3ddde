"""The reward-model and monitoring pages' results for one selection, as pure functions of the
store's tables: the pages call them on the tables they read, the ``metrics`` stage on the
same tables to store the default selection's results (:mod:`legival_core.metrics.page_results`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from legival_core.metrics.page_results import MONITOR_RESAMPLES
from legival_core.oversight import oversight
from legival_core.oversight.oversight import Level

__all__ = [
    "MONITOR_RESAMPLES",
    "POOLED",
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
    return frame[~frame["teacher"].astype(str).isin(wanted).to_numpy()]


def pooled_monitor_scores(verdicts: pd.DataFrame, n_boot: int) -> pd.DataFrame:
    """The detection scores of every verdict of a teacher whatever its dataset
    (``dataset`` = :data:`POOLED`), seed 0 as the per-dataset scores."""
    return oversight.monitor_scores(verdicts.assign(dataset=POOLED), n_boot=n_boot, seed=0)


def reward_points(
    rewards: pd.DataFrame,
    trace_transfer: pd.DataFrame,
    grades: pd.DataFrame,
    model: str,
    dataset: str | None,
    correct_only: bool,
) -> pd.DataFrame:
    """The scatter's points: one per trace of ``dataset`` (None: all) with a reward by
    ``model`` and a transfer row (:func:`legival_core.oversight.oversight.trace_level_rewards`)."""
    points = oversight.trace_level_rewards(
        rewards[rewards["reward_model"] == model],
        trace_transfer,
        grades,
        correct_only=correct_only,
    )
    return points if dataset is None else points[points["dataset"] == dataset]


def reward_rho(
    rewards: pd.DataFrame,
    trace_transfer: pd.DataFrame,
    grades: pd.DataFrame,
    traces: pd.DataFrame,
    model: str,
    dataset: str | None,
    level: Level,
    correct_only: bool,
    references: Sequence[str] = (),
    support: str = "common",
) -> pd.DataFrame:
    """Spearman ρ of ``model``'s reward with each transfer metric on ``dataset`` (None: all),
    at trace or teacher ``level``
    (:func:`legival_core.oversight.oversight.reward_correlations`); at teacher level the
    ``references`` teachers add no point (pass none to include them) and each teacher is
    averaged over the datasets ``support`` names (:mod:`legival_core.stats.support`)."""
    traces, transfer = _on_dataset(traces, trace_transfer, dataset)
    if level == "teacher":
        traces = _without(traces, references)
        transfer = transfer[transfer["trace_id"].isin(traces["trace_id"])]
    if dataset is not None or level == "teacher":
        rewards = rewards[rewards["trace_id"].isin(traces["trace_id"])]
    return oversight.reward_correlations(
        rewards[rewards["reward_model"] == model],
        transfer,
        grades,
        level=level,
        correct_only=correct_only,
        traces=traces,
        support=support,
    )


def teacher_rewards(
    rewards: pd.DataFrame,
    trace_transfer: pd.DataFrame,
    grades: pd.DataFrame,
    traces: pd.DataFrame,
    model: str,
    dataset: str | None,
    correct_only: bool,
    references: Sequence[str] = (),
    support: str = "common",
) -> pd.DataFrame:
    """Mean reward and transfer metrics per teacher for ``model`` on ``dataset`` (None: all),
    :func:`legival_core.oversight.oversight.teacher_level_rewards`, each averaged over the
    datasets ``support`` names; ``references`` (shown, not compared) do not narrow them."""
    traces, transfer = _on_dataset(traces, trace_transfer, dataset)
    return oversight.teacher_level_rewards(
        rewards[rewards["reward_model"] == model],
        transfer,
        grades,
        correct_only=correct_only,
        traces=traces,
        support=support,
        references=references,
    )
