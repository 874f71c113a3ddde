"""The transfer-curves page's data, computed from the rollouts or read from the stored
``transfer_curves`` table (:mod:`legival_core.transfer_curves`).
"""

from __future__ import annotations

import pandas as pd

from legival_core.transfer_curves import TransferView, selection_view
from legival_core.views.common import filter_rows


def transfer_view(
    rollouts: pd.DataFrame,
    dataset: str | None = None,
    student: str | None = None,
    profile: str = "paper",
    n_boot: int = 200,
    seed: int = 0,
) -> TransferView:
    """The transfer page's curves, hazards, baseline and summary, computed from the rollouts.

    The rows of ``dataset`` / ``student`` (None = all) are collapsed once for both the curves
    (:func:`legival_core.transfer.curve` by teacher, ``n_boot`` resamples) and the per-trace
    table (:func:`legival_core.transfer.trace_metrics`); see
    :func:`legival_core.transfer.selection_curves`. The stored ``transfer_curves`` table holds
    the same view for every selection:

    >>> from legival_core.transfer_curves import transfer_curve_table, transfer_view_from_table
    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": ["S", "U"] * 3,
    ...     "trace_id": "a", "problem_id": "p", "k": [0, 0, 1, 1, 2, 2], "m": 2,
    ...     "correct": [0, 0, 0, 1, 1, 1]})
    >>> table = transfer_curve_table(rollouts, ["paper"], n_boot=0)
    >>> stored = transfer_view_from_table(table, None, "S", "paper", 0)
    >>> stored.curves.equals(transfer_view(rollouts, None, "S", "paper", 0).curves)
    True
    """
    from legival_core.transfer import selection_curves

    selected = filter_rows(rollouts, dataset=dataset, student=student)
    ((curves, per_trace),) = selection_curves(
        selected, [{}], by="teacher", n_boot=n_boot, seed=seed, profile=profile
    )
    return selection_view(curves, per_trace, profile)
