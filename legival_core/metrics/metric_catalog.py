"""The teacher-level metrics the app, the leaderboard layout and the static snapshot know
about: each one's label, unit and better direction, and which of them the published rank
table (docs/rankings.md) and the leaderboard rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

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


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("accuracy", "Accuracy", True, True, "share of traces graded correct"),
        Metric(
            "tokens",
            "Tokens",
            False,
            False,
            "mean reasoning length in tokens (the store's provenance says how they were "
            "counted: legival_core.store.provenance.token_sources)",
        ),
        Metric(
            "redundancy",
            "Redundancy",
            False,
            True,
            "share of steps whose best match to an earlier step exceeds τ",
        ),
        Metric(
            "backtracking",
            "Backtracking",
            False,
            True,
            "share of steps flagged as backtracking by the primary labeler",
        ),
        Metric(
            "fotu",
            "FOTU",
            True,
            True,
            "first-order transfer utility: area under the student's success curve",
        ),
        Metric(
            "sotu",
            "SOTU",
            True,
            True,
            "second-order transfer utility: normalised entropy of the hazard histogram",
        ),
        Metric(
            "regression_rate",
            "Regression",
            False,
            True,
            "share of consecutive prefixes where the student falls from right to wrong",
        ),
        Metric(
            "never_solved",
            "Never solved",
            False,
            True,
            "share of correct traces no prefix of which the student solves",
        ),
        Metric("lift", "Lift", True, True, "FOTU minus the student's baseline (k = 0)"),
        Metric(
            "fotu_before_leak",
            "FOTU before leak",
            True,
            True,
            "FOTU from the prefixes shown before the trace first states the gold answer "
            "(the student cannot just copy it)",
        ),
    )
}
#: The seven metrics of the published rank table (docs/rankings.md), in its order.
RANKED_METRICS: tuple[str, ...] = (
    "accuracy",
    "tokens",
    "redundancy",
    "backtracking",
    "fotu",
    "sotu",
    "regression_rate",
)
#: What the leaderboard offers: the published seven and FOTU before the answer leaks.
LEADERBOARD_METRICS: tuple[str, ...] = (*RANKED_METRICS, "fotu_before_leak")
#: Transfer metrics that depend on the student (replaced by :func:`with_student`).
STUDENT_METRICS: tuple[str, ...] = (
    "fotu",
    "sotu",
    "regression_rate",
    "never_solved",
    "baseline",
    "fotu_before_leak",
)

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
