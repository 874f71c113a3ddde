"""The redundancy-threshold page's data: the sweep of every dataset, and its mean over datasets.

The leaderboard's redundancy of a teacher is the mean over datasets of each dataset's mean over
traces; the page's "All" shows the same mean at every τ, so its value at the store's τ is the
leaderboard's number (a dataset with more traces does not weigh more).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["at_threshold", "sweep_over_datasets"]


def sweep_over_datasets(sweep: pd.DataFrame) -> pd.DataFrame:
    """Per (teacher, threshold): the mean over datasets of the redundancy share, the traces
    behind it (summed) and the number of datasets, from
    :func:`legival_core.metrics.redundancy_sweep_view.teacher_redundancy_sweep`.

    >>> sweep = pd.DataFrame({"teacher": "T", "dataset": ["a", "b"], "threshold": 0.5,
    ...     "redundancy": [0.2, 0.4], "n_traces": [1, 3]})
    >>> sweep_over_datasets(sweep).values.tolist()  # (0.2 + 0.4) / 2, not (0.2 + 3 * 0.4) / 4
    [['T', 0.5, 0.30000000000000004, 4, 2]]
    """
    grouped = sweep.groupby(["teacher", "threshold"], observed=True, sort=True)
    out = grouped.agg(
        redundancy=("redundancy", "mean"),
        n_traces=("n_traces", "sum"),
        n_datasets=("dataset", "nunique"),
    )
    return out.reset_index()


def at_threshold(sweep: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """The rows of ``sweep`` at τ = ``threshold`` (to 1e-9: the grid's τ are sums of 0.05
    steps, so 0.85 may be stored as 0.8500000000000001).

    >>> sweep = pd.DataFrame({"threshold": [0.8, 0.05 * 17, 0.9], "redundancy": [0.3, 0.2, 0.1]})
    >>> at_threshold(sweep, 0.85)["redundancy"].tolist()
    [0.2]
    """
    return sweep[np.isclose(sweep["threshold"], threshold, rtol=0.0, atol=1e-9)]
