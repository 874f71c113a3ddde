"""The redundancy-threshold sweep of docs/metrics/redundancy.md, per teacher and dataset, as the
app draws it.

A trace's redundancy at τ is the share of its steps i ≥ 1 whose best match to an earlier step
has cosine r_i > τ (:func:`legival_core.metrics.efficiency.redundancy_share`). The published
threshold study reports it over 21 thresholds 0.0, 0.05, …, 1.0; this module applies
:func:`legival_core.metrics.efficiency.redundancy_sweep` to the stored ``similarity`` rows of every
trace and averages per teacher and dataset, the way ``teacher_metrics.redundancy`` averages the
per-trace shares at the store's own τ.

The average splits into a partial over any set of whole traces (:func:`sweep_partial`: per
teacher and dataset, the sum of the shares at each τ and the trace count), a merge by addition
(:func:`merge_sweep_partials`) and a division (:func:`finalize_sweep`): the metrics stage sums
one bucket of problems at a time and never reads ``similarity`` whole, and
:func:`teacher_redundancy_sweep` is the same partial over every trace, finalized.

Reference: Legi-Val, arXiv 2603.20508 (redundancy and its threshold study).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from legival_core.metrics.efficiency import SWEEP_THRESHOLDS, resolve_threshold
from legival_core.store.schema import SchemaError

__all__ = [
    "SweepPartial",
    "finalize_sweep",
    "merge_sweep_partials",
    "recorded_threshold",
    "sweep_partial",
    "sweep_thresholds",
    "teacher_redundancy_sweep",
    "trace_redundancy",
]

#: Decimal places a threshold is rounded to: ``np.linspace`` gives 0.8500000000000001 for the
#: grid's 0.85, which must be the same point as the authors' τ = 0.85.
_THRESHOLD_DECIMALS = 12


def sweep_thresholds(
    chosen: float, grid: Sequence[float] | np.ndarray = SWEEP_THRESHOLDS
) -> np.ndarray:
    """The sweep grid with the chosen τ in it, sorted, each value rounded to 12 decimals.

    The chosen τ is added so that the curve passes through the point the page marks; when the
    grid already holds it, the grid is unchanged.

    >>> sweep_thresholds(0.85)[15:19].tolist()  # the grid's 0.85 and τ = 0.85: one point
    [0.75, 0.8, 0.85, 0.9]
    >>> sweep_thresholds(0.83)[16:19].tolist(), sweep_thresholds(0.83).size
    ([0.8, 0.83, 0.85], 22)
    """
    values = np.append(np.asarray(grid, dtype=np.float64), float(chosen))
    return np.unique(np.round(values, _THRESHOLD_DECIMALS))


def recorded_threshold(manifest: Mapping[str, Any]) -> float | None:
    """The τ of ``trace_efficiency.redundancy``: the one the store's latest ``metrics`` run
    recorded in its provenance, else ``None`` (no metrics run recorded one).

    >>> recorded_threshold({"provenance": [{"stage": "metrics", "threshold": 0.8},
    ...                                     {"stage": "embed"},
    ...                                     {"stage": "metrics", "threshold": 0.85}]})
    0.85
    >>> recorded_threshold({"provenance": [{"stage": "embed"}]}) is None
    True
    """
    for record in reversed(list(manifest.get("provenance") or [])):
        if not isinstance(record, Mapping) or record.get("stage") != "metrics":
            continue
        value = record.get("threshold")
        # bool is an int: a stray true/false in a hand-edited manifest is not a threshold.
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def _similarity_arrays(
    similarity: pd.DataFrame,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The checked rows sorted by (trace, step): the id of each trace (in the sorted order),
    the row where each trace starts, each row's step position in its trace, and r per row."""
    missing = [c for c in ("trace_id", "step", "max_similarity") if c not in similarity.columns]
    if missing:
        raise SchemaError("similarity", f"missing column(s) {missing}")
    # Sorted by (trace, step) on integer codes: sorting a million id strings is the slow part.
    # The ids are factorized as stored (no Python string per row: 60 bytes a row of a bucket)
    # and named as text per trace; ids equal only as text are factorized as text.
    codes, uniques = pd.factorize(similarity["trace_id"], sort=False)
    names = pd.Index(uniques).astype(str)
    if not names.is_unique:
        codes, uniques = pd.factorize(similarity["trace_id"].astype(str), sort=False)
        names = pd.Index(uniques)
    step_values = pd.to_numeric(similarity["step"], errors="coerce").to_numpy(dtype=float)
    order = np.lexsort((step_values, codes))
    if not len(order):
        empty = np.zeros(0)
        return empty.astype(str), empty.astype(np.int64), empty.astype(np.int64), empty
    rows = order  # the input's row numbers, so an error can name the row
    steps = step_values[order]
    del step_values
    sims = pd.to_numeric(similarity["max_similarity"], errors="coerce").to_numpy(float)[order]
    same_trace = codes[order]
    del codes
    # Arrays, not a group-by loop: a store can hold 10⁵ traces. A trace's rows start where its
    # id changes; its k-th row (in step order) must be step k.
    starts = np.flatnonzero(np.r_[True, same_trace[1:] != same_trace[:-1]])
    position = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    gaps = np.flatnonzero(steps != position)
    if gaps.size:
        first = gaps[0]
        own = same_trace == same_trace[first]
        listed = ", ".join(f"{s:g}" for s in steps[own][:10])
        raise SchemaError(
            "similarity",
            f"trace {names[same_trace[first]]!r} has steps {listed}; expected 0..{own.sum() - 1}",
            row=int(rows[first]),
            column="step",
        )
    holes = np.flatnonzero(np.isnan(sims) & (position > 0))
    if holes.size:
        first = holes[0]
        raise SchemaError(
            "similarity",
            f"trace {names[same_trace[first]]!r}: step {position[first]} has no similarity to "
            "an earlier step",
            row=int(rows[first]),
            column="max_similarity",
        )
    return names.to_numpy(dtype=object)[same_trace[starts]], starts, position, sims


def _trace_shares(similarity: pd.DataFrame, taus: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Trace ids and, per trace and τ, |{i ≥ 1 : r_i > τ}| / (m − 1) (0 when m ≤ 1): what
    :func:`legival_core.metrics.efficiency.redundancy_sweep` gives each trace, for all at once.

    One pass over the rows, not one per τ: each r_i falls in the bin of the number b of τ
    below it (r_i > τ_j exactly when j < b), the bins are counted per trace, and the hits at
    τ_j are the counts of the bins above j (integers: the same shares as per τ)."""
    trace_ids, starts, position, sims = _similarity_arrays(similarity)
    if not len(sims):
        return [], np.zeros((0, taus.size))
    lengths = np.diff(np.r_[starts, len(sims)])
    later = position > 0
    owner = np.repeat(np.arange(len(starts)), lengths)[later]
    below = np.searchsorted(np.sort(taus), sims[later], side="left")  # τ_j < r_i, j < below
    width = taus.size + 1
    counts = np.bincount(owner * width + below, minlength=len(starts) * width)
    counts = counts.reshape(len(starts), width)
    # hits at the k-th smallest τ: the rows with more than k thresholds below them
    above = np.cumsum(counts[:, ::-1], axis=1)[:, ::-1][:, 1:].astype(float)
    hits = above[:, np.argsort(np.argsort(taus, kind="stable"), kind="stable")]
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = np.where(lengths[:, None] > 1, hits / (lengths[:, None] - 1), 0.0)
    return trace_ids.tolist(), shares


def trace_redundancy(similarity: pd.DataFrame, tau: float) -> pd.Series:
    """Per trace (indexed by trace id), |{i ≥ 1 : r_i > τ}| / (m − 1), 0 when m ≤ 1: the
    redundancy of :func:`legival_core.metrics.efficiency.redundancy_share` for every trace of
    ``similarity`` at once (``trace_id``, ``step``, ``max_similarity`` rows; every row of a
    trace given). One definition of the share for the metrics stage's ``trace_efficiency``,
    the robustness report's other τ and the sweep; vectorised, because a Python loop over a
    million traces' groups took minutes.

    Raises:
        SchemaError: a trace's steps are not 0..m−1, or r_i is missing for some i ≥ 1.

    >>> sims = pd.DataFrame({"trace_id": ["a", "a", "a", "b"], "step": [0, 1, 2, 0],
    ...     "max_similarity": [None, 0.9, 0.5, None]})
    >>> trace_redundancy(sims, 0.8).to_dict()  # a: 1 of 2 later steps above 0.8; b: one step
    {'a': 0.5, 'b': 0.0}
    """
    ids, shares = _trace_shares(similarity, np.array([tau], dtype=np.float64))
    return pd.Series(shares[:, 0] if len(ids) else [], index=ids, dtype="float64")


Group = tuple[str, str]  # (teacher, dataset)

_COLUMNS = ["teacher", "dataset", "threshold", "redundancy", "n_traces"]


@dataclass(frozen=True)
class SweepPartial:
    """The sweep's sums over a set of whole traces: per (teacher, dataset) with at least one
    embedded trace, ``sums[group][j]`` = Σ_t share_t(``thresholds[j]``) and ``counts[group]`` =
    the number of those traces. Sets of different traces merge by addition."""

    thresholds: tuple[float, ...]
    sums: Mapping[Group, np.ndarray]
    counts: Mapping[Group, int]


def _checked_thresholds(thresholds: Sequence[float] | np.ndarray) -> np.ndarray:
    # numbers only (as before), each checked as a threshold the way redundancy_sweep checks it
    values = np.asarray(thresholds, dtype=np.float64)
    return np.asarray([resolve_threshold(t) for t in values], np.float64)


def sweep_partial(
    similarity: pd.DataFrame,
    traces: pd.DataFrame,
    thresholds: Sequence[float] | np.ndarray = SWEEP_THRESHOLDS,
) -> SweepPartial:
    """The :class:`SweepPartial` of the traces in ``traces`` that have ``similarity`` rows
    (every row of such a trace must be given: a trace's share needs all its steps).

    A trace with one step counts, with share 0; a trace without rows (never embedded) and
    rows of a trace not in ``traces`` are left out. Inputs as for
    :func:`teacher_redundancy_sweep`.

    Raises:
        SchemaError: a trace's steps are not 0..m−1, r_i is missing for some i ≥ 1, or a
            column is missing.
    """
    missing = [c for c in ("trace_id", "teacher", "dataset") if c not in traces.columns]
    if missing:
        raise SchemaError("traces", f"missing column(s) {missing}")
    taus = _checked_thresholds(thresholds)
    ids, per_trace = _trace_shares(similarity, taus)
    owners = traces[["trace_id", "teacher", "dataset"]].astype({"trace_id": str})
    owners = owners.drop_duplicates("trace_id")
    where = pd.Index(ids).get_indexer(owners["trace_id"])  # -1: a trace never embedded
    owners = owners[where >= 0]
    shares = per_trace[where[where >= 0]]
    sums: dict[Group, np.ndarray] = {}
    counts: dict[Group, int] = {}
    groups = owners.reset_index(drop=True).groupby(["teacher", "dataset"], sort=True)
    for (teacher, dataset), group in groups:
        # summed in the traces' order, as np.mean sums: one chunk gives the mean's own bits
        sums[(str(teacher), str(dataset))] = shares[group.index.to_numpy()].sum(axis=0)
        counts[(str(teacher), str(dataset))] = len(group)
    return SweepPartial(tuple(float(t) for t in taus), sums, counts)


def merge_sweep_partials(a: SweepPartial, b: SweepPartial) -> SweepPartial:
    """``a`` and ``b`` added (partials of different traces; neither is changed).

    Raises:
        ValueError: the two were summed over different thresholds.
    """
    if a.thresholds != b.thresholds:
        raise ValueError(
            f"redundancy sweep partials over different thresholds: {a.thresholds} and "
            f"{b.thresholds}"
        )
    sums = dict(a.sums)
    counts = dict(a.counts)
    for group, values in b.sums.items():
        sums[group] = sums[group] + values if group in sums else values
        counts[group] = counts.get(group, 0) + b.counts[group]
    return SweepPartial(a.thresholds, sums, counts)


def finalize_sweep(partial: SweepPartial) -> pd.DataFrame:
    """The sweep table of :func:`teacher_redundancy_sweep` from its partial: per group and τ
    the sum over n, one row per (teacher, dataset, threshold), sorted so."""
    rows = []
    for group in sorted(partial.counts):
        n = partial.counts[group]
        mean = partial.sums[group] / n
        for tau, value in zip(partial.thresholds, mean, strict=True):
            rows.append((group[0], group[1], float(tau), float(value), n))
    if not rows:
        return pd.DataFrame(columns=_COLUMNS)
    return pd.DataFrame.from_records(rows, columns=_COLUMNS)


def teacher_redundancy_sweep(
    similarity: pd.DataFrame,
    traces: pd.DataFrame,
    thresholds: Sequence[float] | np.ndarray = SWEEP_THRESHOLDS,
) -> pd.DataFrame:
    """Redundancy share as a function of τ, per teacher and dataset (docs/metrics/redundancy.md
    threshold sweep).

    R(τ) = (1/N) Σ_t |{i ≥ 1 : r_{t,i} > τ}| / (m_t − 1)

    over the N traces t of the teacher on the dataset that have ``similarity`` rows (a trace
    with m_t ≤ 1 steps counts 0, as in :func:`legival_core.metrics.efficiency.redundancy_share`; a
    trace without rows, one that was never embedded, is left out). The per-trace shares come from
    :func:`legival_core.metrics.efficiency.redundancy_sweep`; the table is :func:`finalize_sweep`
    of :func:`sweep_partial` over every trace.

    Args:
        similarity: ``trace_id``, ``step``, ``max_similarity`` (the store's ``similarity``).
        traces: ``trace_id``, ``teacher``, ``dataset`` (the store's ``traces``).
        thresholds: the τ values (default: the published 21).

    Returns:
        One row per (teacher, dataset, threshold), sorted so: ``teacher``, ``dataset``,
        ``threshold``, ``redundancy``, ``n_traces``.

    Raises:
        SchemaError: a trace's steps are not 0..m−1, or r_i is missing for some i ≥ 1.

    >>> sims = pd.DataFrame({"trace_id": ["a"] * 3 + ["b"] * 2, "step": [0, 1, 2, 0, 1],
    ...                      "max_similarity": [None, 0.9, 0.5, None, 0.6]})
    >>> traces = pd.DataFrame({"trace_id": ["a", "b"], "teacher": ["T", "T"],
    ...                        "dataset": ["d", "d"]})
    >>> sweep = teacher_redundancy_sweep(sims, traces, [0.55, 0.8])
    >>> sweep["redundancy"].tolist()  # τ 0.55: (1/2 + 1/1) / 2; τ 0.8: (1/2 + 0/1) / 2
    [0.75, 0.25]
    >>> a = sweep_partial(sims[:3], traces, [0.55, 0.8])  # a's rows; b's below
    >>> b = sweep_partial(sims[3:], traces, [0.55, 0.8])
    >>> finalize_sweep(merge_sweep_partials(a, b))["redundancy"].tolist()
    [0.75, 0.25]
    """
    return finalize_sweep(sweep_partial(similarity, traces, thresholds))
