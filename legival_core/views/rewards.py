"""The reward-model page's data: its headline ρ and its table of every correlation, the metrics
named as the other pages name them."""

from __future__ import annotations

import pandas as pd

__all__ = ["named_correlations", "rho_of"]


def rho_of(correlations: pd.DataFrame, metric: str) -> float:
    """ρ of the reward with ``metric`` in a :func:`legival_core.oversight.selections.reward_rho`
    table, NaN when the table has no such row.

    >>> rho_of(pd.DataFrame({"metric": ["fotu", "sotu"], "rho": [0.25, -0.5]}), "sotu")
    -0.5
    """
    row = correlations[correlations["metric"] == metric]
    return float(row["rho"].iloc[0]) if len(row) else float("nan")


def named_correlations(correlations: pd.DataFrame, profile: str) -> pd.DataFrame:
    """``correlations`` (``metric``, ``level``, …) with each metric under the label the other
    pages give it: at trace level the label of ``trace_transfer``'s column under ``profile``
    (a release-profile store's trace "fotu" is the release's trace score), at teacher level
    the leaderboard's.

    >>> table = pd.DataFrame({"metric": ["fotu", "fotu"], "level": ["trace", "teacher"]})
    >>> named_correlations(table, "paper")["metric"].tolist()
    ['FOTU', 'FOTU']
    """
    from legival_core.views.common import METRICS, trace_metric_label

    def teacher_label(name: str) -> str:
        metric = METRICS.get(name)
        return metric.label if metric else name

    labels = [
        trace_metric_label(name, profile) if level == "trace" else teacher_label(name)
        for name, level in zip(correlations["metric"], correlations["level"], strict=True)
    ]
    return correlations.assign(metric=labels)
