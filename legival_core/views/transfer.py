"""The transfer-curves page's data, computed from the rollouts or read from the stored
``transfer_curves`` table (:mod:`legival_core.metrics.transfer_curves`).
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from legival_core.metrics.transfer_curves import (
    TransferView,
    selection_view,
    transfer_view_from_table,
)
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
    (:func:`legival_core.metrics.transfer.curve` by teacher, ``n_boot`` resamples) and the per-trace
    table (:func:`legival_core.metrics.transfer.trace_metrics`); see
    :func:`legival_core.metrics.transfer.selection_curves`. The stored ``transfer_curves`` table
    holds the same view for every selection:

    >>> from legival_core.metrics.transfer_curves import (
    ...     transfer_curve_table,
    ...     transfer_view_from_table,
    ... )
    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": ["S", "U"] * 3,
    ...     "trace_id": "a", "problem_id": "p", "k": [0, 0, 1, 1, 2, 2], "m": 2,
    ...     "correct": [0, 0, 0, 1, 1, 1]})
    >>> table = transfer_curve_table(rollouts, ["paper"], n_boot=0)
    >>> stored = transfer_view_from_table(table, None, "S", "paper", 0)
    >>> stored.curves.equals(transfer_view(rollouts, None, "S", "paper", 0).curves)
    True
    """
    from legival_core.metrics.transfer import selection_curves

    selected = filter_rows(rollouts, dataset=dataset, student=student)
    ((curves, per_trace),) = selection_curves(
        selected, [{}], by="teacher", n_boot=n_boot, seed=seed, profile=profile
    )
    return selection_view(curves, per_trace, profile)


def stored_or_computed_view(
    table: pd.DataFrame | None,
    load_rollouts: Callable[[], pd.DataFrame],
    dataset: str | None,
    student: str | None,
    profile: str,
    n_boot: int,
) -> TransferView:
    """The transfer view of one selection: read from the stored ``transfer_curves`` ``table``
    when it holds the selection, else computed from the rollouts (``load_rollouts`` is called
    only then, so a store with fresh curves never reads its rollouts). The Transfer page and
    ``lv.open(...).transfer`` both call it."""
    view = (
        transfer_view_from_table(table, dataset, student, profile, n_boot)
        if table is not None
        else None
    )
    if view is None:
        view = transfer_view(load_rollouts(), dataset, student, profile, n_boot)
    return view


def observed_coverage(
    rollouts: pd.DataFrame,
    dataset: str | None = None,
    student: str | None = None,
    profile: str = "paper",
) -> pd.DataFrame:
    """How many traces were measured in each bin of the transfer curve, per teacher.

    A curve's value in a bin is *measured* for a trace when the trace has a prefix ``k >= 1``
    whose bin (:func:`legival_core.metrics.transfer.paper_bin`, or ``release_bin`` under the
    ``release`` profile) is that bin; every other bin is filled in by the profile's grid (from
    the neighbouring measured prefixes, the first one back-filled to x = 0). Traces count once
    whatever the number of students.

    Returns:
        ``teacher``, ``bin`` (1..50), ``x`` (bin centre), ``n_observed``, ``n_traces`` (the
        teacher's traces with at least one measured prefix), one row per (teacher, bin).

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": "S",
    ...     "trace_id": ["a", "a", "a", "b", "b"], "k": [0, 1, 2, 0, 4], "m": [2, 2, 2, 4, 4]})
    >>> c = observed_coverage(rollouts)  # a: k/m = 1/2 (bin 25) and 1 (bin 50); b: 4/4 (bin 50)
    >>> c[c["n_observed"] > 0][["bin", "n_observed", "n_traces"]].values.tolist()
    [[25, 1, 2], [50, 2, 2]]
    """
    import numpy as np

    from legival_core.metrics.transfer import N_BINS, bin_centres, paper_bin, release_bin

    selected = filter_rows(rollouts, dataset=dataset, student=student)
    prefixes = selected[selected["k"] >= 1][["teacher", "trace_id", "k", "m"]]
    prefixes = prefixes.drop_duplicates(["trace_id", "k"]).astype({"teacher": str})
    to_bin = release_bin if profile == "release" else paper_bin
    prefixes = prefixes.assign(
        bin=to_bin(prefixes["k"].to_numpy(), prefixes["m"].to_numpy()).clip(1, N_BINS)
    )
    counts = (
        prefixes.drop_duplicates(["trace_id", "bin"])
        .groupby(["teacher", "bin"], observed=True)["trace_id"]
        .nunique()
    )
    totals = prefixes.groupby("teacher", observed=True)["trace_id"].nunique()
    teachers = sorted(totals.index)
    grid = pd.MultiIndex.from_product([teachers, range(1, N_BINS + 1)], names=["teacher", "bin"])
    out = counts.reindex(grid, fill_value=0).rename("n_observed").reset_index()
    out.insert(2, "x", np.tile(bin_centres(), len(teachers)))
    out["n_traces"] = out["teacher"].map(totals).astype("int64")
    out["n_observed"] = out["n_observed"].astype("int64")
    return out


def first_measured_positions(
    rollouts: pd.DataFrame, dataset: str | None = None, student: str | None = None
) -> pd.DataFrame:
    """Per trace: the first measured position ``min k / m`` over ``k >= 1`` and whether the
    only measured prefix is the whole trace (``k = m``).

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": "S",
    ...     "trace_id": ["a", "a", "b"], "k": [1, 2, 4], "m": [2, 2, 4]})
    >>> first_measured_positions(rollouts)[["trace_id", "first_x", "whole_only"]].values.tolist()
    [['a', 0.5, False], ['b', 1.0, True]]
    """
    selected = filter_rows(rollouts, dataset=dataset, student=student)
    prefixes = selected[selected["k"] >= 1][["teacher", "trace_id", "k", "m"]].astype(
        {"teacher": str, "trace_id": str}
    )
    prefixes = prefixes.assign(x=prefixes["k"] / prefixes["m"])
    grouped = prefixes.groupby("trace_id", observed=True, sort=True)
    out = grouped.agg(teacher=("teacher", "first"), first_x=("x", "min"), k_min=("k", "min"))
    out["whole_only"] = grouped["k"].nunique().eq(1) & out["first_x"].eq(1.0)
    return out.reset_index()[["trace_id", "teacher", "first_x", "whole_only"]]
