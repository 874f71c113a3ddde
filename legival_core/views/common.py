"""What several pages share: the metrics they know about
(:mod:`legival_core.metrics.metric_catalog`, re-exported), row filters, the transfer profile a store
was computed with, and Arrow tables as pandas frames.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from legival_core.metrics.metric_catalog import (
    LEADERBOARD_METRICS,
    METRICS,
    RANKED_METRICS,
    STUDENT_METRICS,
    Metric,
    ranked_metrics,
)
from legival_core.store.frames import arrow_to_frame

__all__ = [
    "LEADERBOARD_METRICS",
    "METRICS",
    "RANKED_METRICS",
    "STUDENT_METRICS",
    "TRACE_SCORE_LABEL",
    "TRACE_SCORE_NOTE",
    "Metric",
    "arrow_to_frame",
    "filter_rows",
    "metrics_profile",
    "ranked_metrics",
    "trace_metric_label",
]


def filter_rows(frame: pd.DataFrame, **wanted: object | Sequence[object] | None) -> pd.DataFrame:
    """Rows whose columns equal the wanted values (a list = any of them; None = no filter).

    Names that are not columns of ``frame`` are ignored, so one call serves every table.

    >>> df = pd.DataFrame({"dataset": ["a", "b", "c"], "x": [1, 2, 3]})
    >>> filter_rows(df, dataset=["a", "c"], student="s").x.tolist()
    [1, 3]
    """
    mask = np.ones(len(frame), dtype=bool)
    for column, value in wanted.items():
        if value is None or column not in frame.columns:
            continue
        values = list(value) if isinstance(value, list | tuple | set) else [value]
        mask &= frame[column].isin(values).to_numpy()
    return frame[mask] if not mask.all() else frame


#: Label of the per-trace ``fotu`` column under a profile whose per-trace number is the
#: release's trace score (the released scripts have no per-trace FOTU).
TRACE_SCORE_LABEL = "Trace score (release)"
#: What that trace score is, for captions.
TRACE_SCORE_NOTE = (
    "Profile 'release': the authors' released code has no per-trace FOTU, so each trace's "
    "number is its trace score, the mean correctness over all its rollouts (k = 0 included, "
    "unbinned), not the area under its curve."
)


def trace_metric_label(name: str, profile: str = "paper") -> str:
    """Label of a per-trace column of ``trace_transfer`` computed with ``profile``.

    >>> trace_metric_label("fotu"), trace_metric_label("fotu", "release")
    ('FOTU', 'Trace score (release)')
    """
    from legival_core.metrics.transfer import get_profile

    if name == "fotu" and get_profile(profile).trace_fotu == "trace_score":
        return TRACE_SCORE_LABEL
    metric = METRICS.get(name)
    return metric.label if metric else name


def metrics_profile(manifest: Mapping[str, Any]) -> str:
    """The transfer profile a store's ``teacher_metrics`` / ``trace_transfer`` were computed
    with: the latest ``metrics`` provenance entry, else the stored config, else ``"paper"``.

    >>> metrics_profile({"provenance": [{"stage": "metrics", "profile": "release"}]})
    'release'
    >>> metrics_profile({"config": {"metrics": {"profile": "paper"}}, "provenance": []})
    'paper'
    """
    for entry in reversed(manifest.get("provenance") or []):
        if isinstance(entry, Mapping) and entry.get("stage") == "metrics" and entry.get("profile"):
            return str(entry["profile"])
    config = (manifest.get("config") or {}).get("metrics") or {}
    return str(config.get("profile") or "paper")


#: Version of the curve definitions behind a stored ``transfer_curves`` table. Raised when a
