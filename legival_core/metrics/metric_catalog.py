"""The teacher-level metrics the app, the leaderboard layout and the static snapshot know
about: each one's label, unit and better direction, and which of them the published rank
table (docs/rankings.md) and the leaderboard rank. All derived from the one registry,
:mod:`legival_core.metrics.registry`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from legival_core.metrics.registry import METRIC_SPECS, metrics_in

__all__ = [
    "DERIVED_FROM",
    "LEADERBOARD_METRICS",
    "METRICS",
    "RANKED_METRICS",
    "STUDENT_METRICS",
    "Metric",
    "construction_reason",
    "ranked_metrics",
]

# ---------------------------------------------------------------------------------------------
# The metrics the app knows about
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    """One teacher-level metric: how to label it and which direction is better."""

    name: str
    label: str
    higher_is_better: bool
    share: bool  # a fraction in [0, 1], shown as a percentage
    description: str


#: Every metric the app labels, derived from the registry (group ``catalog``).
METRICS: dict[str, Metric] = {
    name: Metric(s.name, s.label, s.higher_is_better, s.share, s.description)
    for name, s in METRIC_SPECS.items()
    if "catalog" in s.groups
}
#: The seven metrics of the published rank table (docs/rankings.md), in its order.
RANKED_METRICS: tuple[str, ...] = metrics_in("ranked")
#: What the leaderboard offers: the published seven and FOTU before the answer leaks.
LEADERBOARD_METRICS: tuple[str, ...] = metrics_in("leaderboard")
#: Transfer metrics that depend on the student (replaced by :func:`with_student`).
STUDENT_METRICS: tuple[str, ...] = metrics_in("student")

#: Pairs of metrics related by construction: one is computed from the other, or both are read
#: off the same per-prefix success curve of the student, so a strong ρ between them says
#: nothing about legibility. The correlations page flags these cells and never stars them.
#: Keys are (metric, metric) in either order; the value is the reason shown beside the cell.
DERIVED_FROM: dict[tuple[str, str], str] = {
    ("lift", "fotu"): "lift = FOTU − baseline (the student's k = 0 success): where the "
    "baseline is constant (0 on the demo) ρ is 1 by arithmetic",
    ("regression_rate", "fotu"): "both read off the same success curve: a regression needs a "
    "solved prefix, so any regression forces FOTU above 0",
    ("never_solved", "fotu"): "a never-solved trace has FOTU 0 by definition",
    ("fotu_before_leak", "fotu"): "FOTU before leak is FOTU over the first prefixes only",
    ("regression_rate", "lift"): "lift is FOTU − baseline, and regression is read off FOTU's "
    "success curve",
    ("never_solved", "lift"): "lift is FOTU − baseline, and a never-solved trace has FOTU 0",
    ("fotu_before_leak", "lift"): "lift is FOTU − baseline, FOTU before leak is FOTU over the "
    "first prefixes",
}


def construction_reason(a: str, b: str) -> str | None:
    """Why ``a`` and ``b`` are related by construction (:data:`DERIVED_FROM`, either order),
    or None when they are measured apart.

    >>> construction_reason("fotu", "lift")[:24]
    'lift = FOTU − baseline ('
    >>> construction_reason("tokens", "fotu") is None
    True
    """
    return DERIVED_FROM.get((a, b)) or DERIVED_FROM.get((b, a))


def ranked_metrics(frame: pd.DataFrame, candidates: Sequence[str] = RANKED_METRICS) -> list[str]:
    """The metrics among ``candidates`` that ``frame`` has with at least one value.

    >>> ranked_metrics(pd.DataFrame({"accuracy": [0.5], "fotu": [float("nan")]}))
    ['accuracy']
    """
    return [
        m
        for m in candidates
        if m in frame.columns and pd.to_numeric(frame[m], errors="coerce").notna().any()
    ]
