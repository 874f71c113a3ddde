"""The leaderboard's paired resamples one chunk of problems at a time: partial sums that add up.

:func:`legival_core.rankings.rank_intervals.resample_teachers` reads the whole per-trace tables.
Every number it computes is, per (teacher, dataset, student) cell, a weighted sum over the cell's
rows (values and row counts for a mean, the 50-bin hazard histogram for SOTU), and a problem's
weight in a resample depends only on the problem and the seed
(:func:`legival_core.rankings.rank_intervals.problem_weights`). So a chunk holding all the rows
of some problems computes its cells' sums alone (:func:`board_rows`, then
:meth:`BoardRows.resampled`), chunks add
(:func:`merge_board_partials`: sums add, trace counts add, student sets and teacher sets unite,
all keyed by labels, not by positions that depend on the chunk), and :func:`finalize_board`
applies what needs every chunk (the common support of datasets, from the merged teacher x
dataset coverage; the per-cell means or entropies; the means over students, then datasets).
The result equals ``resample_teachers`` on the whole tables, to float rounding of the value sums
(histograms and row counts are whole numbers, exact in any order).

A trace's rows must all be in one chunk (its trace count is added, not de-duplicated, across
chunks): chunking by problem guarantees it.

The metrics stage's two boards from one pass over the chunks::

    merged = merge_board_partials(
        board_rows(efficiency_chunk, transfer_chunk, n_boot, seed).resampled() for ... in chunks
    )  # or merge as they come: merge_board_partials([merged, board_rows(...).resampled()])
    # or join several chunks' rows first and resample once: concat_board_rows([...]).resampled()
    board = finalize_board(merged, outside=references)  # the stored board_resamples
    pareto = finalize_board(merged, references)  # the stored pareto_resamples

Memory of one partial: ``(1 + n_boot) x cells x columns`` floats per metric (2 columns for a
mean, 50 for SOTU), cells = the (teacher, dataset, student) cells with a row in the chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from legival_core.rankings.cell_sums import (
    CellRows,
    MetricPartial,
    MetricResamples,
    cell_rows,
    concat_cell_rows,
    finalize_metric,
    merge_metric_partials,
    resample_cells,
)
from legival_core.rankings.rank_intervals import (
    EFFICIENCY_METRICS,
    RESAMPLED_METRICS,
    TeacherResamples,
    metric_rows,
    problem_weights,
)
from legival_core.stats.poisson_bootstrap import check_alike, unite_sets

#: What partials must share to be merged: the resamples and the metrics asked for.
_SETTINGS = ("n_boot", "seed", "requested")

__all__ = [
    "BoardPartials",
    "BoardRows",
    "board_rows",
    "concat_board_rows",
    "finalize_board",
    "merge_board_partials",
]


@dataclass(frozen=True)
class BoardPartials:
    """:func:`board_partials` of one chunk, or several merged.

    ``teachers[table]`` are the teachers with a row in that table (``"efficiency"`` or
    ``"transfer"``), value or not: the board's teachers and whether a metric is on it.
    ``requested`` are the metrics asked for, in order (the order of the board's metrics).
    """

    n_boot: int
    seed: int
    requested: tuple[str, ...]
    teachers: Mapping[str, frozenset[str]]
    metrics: Mapping[str, MetricPartial]


@dataclass(frozen=True)
class BoardRows:
    """A chunk's rows of every board metric as :class:`~legival_core.rankings.cell_sums.CellRows`
    (as many triples as rows), with the resamples to weigh them by: :meth:`resampled` gives the
    chunk's :class:`BoardPartials`. What a chunk computed elsewhere (a Ray worker) sends back;
    the resampled sums, resamples x cells whatever the chunk's size (443 MB at 40 teachers
    and 1,000 resamples), are made where the chunks are merged."""

    n_boot: int
    seed: int
    requested: tuple[str, ...]
    teachers: Mapping[str, frozenset[str]]
    problems: pd.MultiIndex
    metrics: Mapping[str, CellRows]

    @property
    def nbytes(self) -> int:
        """The bytes of the rows' arrays (what a batch of them holds)."""
        return sum(
            r.slot.nbytes + r.problem_index.nbytes + r.row_weights.nbytes
            for r in self.metrics.values()
        )

    def resampled(self) -> BoardPartials:
        """The chunk's partial sums: each metric's rows weighed by each problem's weight in
        each resample (:func:`problem_weights` of the chunk's problems)."""
        weights = problem_weights(self.problems, self.n_boot, self.seed)
        metrics = {}
        for name, rows in self.metrics.items():
            mine = weights  # a metric of some of the parts joined has some of the problems
            if rows.problems is not self.problems and not rows.problems.equals(self.problems):
                mine = weights[:, self.problems.get_indexer(rows.problems)]
            metrics[name] = resample_cells(rows, mine)
        return BoardPartials(self.n_boot, self.seed, self.requested, self.teachers, metrics)


def concat_board_rows(parts: Sequence[BoardRows]) -> BoardRows:
    """The :class:`BoardRows` of several chunks (of different problems) as one
    (:func:`~legival_core.rankings.cell_sums.concat_cell_rows` per metric): resampled once,
    the same board as each part resampled and merged, to float rounding of the value sums."""
    if not parts:
        raise ValueError("concat_board_rows: no rows to join")
    check_alike(parts, _SETTINGS, "concat_board_rows: rows of different resamples or metrics")
    first = parts[0]
    metrics = {
        metric: concat_cell_rows(mine)
        for metric in first.requested
        if (mine := [p.metrics[metric] for p in parts if metric in p.metrics])
    }
    teachers = unite_sets(p.teachers for p in parts)
    problems = first.problems.append([p.problems for p in parts[1:]])
    return BoardRows(first.n_boot, first.seed, first.requested, teachers, problems, metrics)


def board_rows(
    efficiency_chunk: pd.DataFrame | None,
    transfer_chunk: pd.DataFrame | None,
    n_boot: int,
    seed: int,
    metrics: Sequence[str] = RESAMPLED_METRICS,
) -> BoardRows:
    """The :class:`BoardRows` of every metric of ``metrics`` over a chunk of the per-trace
    tables: all the rows of ``trace_efficiency`` and ``trace_transfer`` of some problems (any
    split by problem works; the problem's weights are its own, :func:`problem_weights`).

    Every teacher is kept, reference teachers too: :func:`finalize_board` leaves them out or
    not, so one pass serves the leaderboard (references resampled, outside the common support)
    and the Pareto page (references left out).
    """
    frames = {
        "efficiency": efficiency_chunk if efficiency_chunk is not None else pd.DataFrame(),
        "transfer": transfer_chunk if transfer_chunk is not None else pd.DataFrame(),
    }
    teachers = {
        name: frozenset(str(t) for t in pd.unique(f["teacher"].astype(str))) if len(f)
        else frozenset()
        for name, f in frames.items()
    }  # fmt: skip
    keys = [
        pd.MultiIndex.from_arrays([f["dataset"].astype(str), f["problem_id"].astype(str)])
        for f in frames.values()
        if len(f)
    ]
    problems = (
        keys[0].append(keys[1:]).unique() if keys else pd.MultiIndex.from_tuples([("", "")])[:0]
    )
    out: dict[str, CellRows] = {}
    efficiency, transfer = frames["efficiency"], frames["transfer"]
    for metric in metrics:
        picked = metric_rows(metric, efficiency, transfer)
        if picked is None:
            continue
        rows, column, statistic = picked
        out[metric] = cell_rows(rows, column, problems, statistic)
    return BoardRows(
        n_boot=int(n_boot), seed=int(seed), requested=tuple(metrics), teachers=teachers,
        problems=problems, metrics=out,
    )  # fmt: skip


def merge_board_partials(parts: Iterable[BoardPartials], into_first: bool = False) -> BoardPartials:
    """The partials of several chunks (of different problems) as one: in any order and
    grouping, the same board once finalized (to float rounding of the value sums).

    ``into_first``: the first partial is a running total its caller owns; each metric's sums
    are added into its arrays where its cells hold the others' (:func:`merge_metric_partials`).
    """
    listed = list(parts)
    if not listed:
        raise ValueError("merge_board_partials: no partials to merge")
    check_alike(
        listed, _SETTINGS, "merge_board_partials: partials of different resamples or metrics"
    )
    first = listed[0]
    metrics = {
        metric: merge_metric_partials(
            *mine, into_first=into_first and mine[0] is first.metrics.get(metric)
        )
        for metric in first.requested
        if (mine := [p.metrics[metric] for p in listed if metric in p.metrics])
    }
    teachers = unite_sets(p.teachers for p in listed)
    return BoardPartials(first.n_boot, first.seed, first.requested, teachers, metrics)


def finalize_board(
    partials: BoardPartials,
    references: Sequence[str] = (),
    outside: Sequence[str] = (),
    include_references: bool = False,
    support: str = "common",
) -> TeacherResamples:
    """The board's :class:`~legival_core.rankings.rank_intervals.TeacherResamples` from the
    merged partials: what
    :func:`~legival_core.rankings.rank_intervals.resample_teachers` (``partials.requested``,
    ``n_boot``, ``seed``, ``references``, ``include_references``, ``support``, ``outside``)
    gives on the whole tables. Reference teachers are left out unless ``include_references``;
    teachers in ``outside`` do not narrow the common support.
    """
    dropped = set() if include_references else {str(r) for r in references}
    tables = {name: set(names) - dropped for name, names in partials.teachers.items()}
    teachers = tuple(sorted(set().union(*tables.values())))
    out: dict[str, MetricResamples] = {}
    for metric in partials.requested:
        if metric not in partials.metrics:
            continue
        table = "efficiency" if metric in EFFICIENCY_METRICS else "transfer"
        if not tables.get(table):
            continue
        out[metric] = finalize_metric(partials.metrics[metric], teachers, support, outside)
    return TeacherResamples(
        teachers=teachers, n_boot=partials.n_boot, seed=partials.seed, metrics=out
    )
