"""The leaderboard's paired resamples one chunk of problems at a time: partial sums that add up.

:func:`legival_core.rankings.rank_intervals.resample_teachers` reads the whole per-trace tables.
Every number it computes is, per (teacher, dataset, student) cell, a weighted sum over the cell's
rows (values and row counts for a mean, the 50-bin hazard histogram for SOTU), and a problem's
weight in a resample depends only on the problem and the seed
(:func:`legival_core.rankings.rank_intervals.problem_weights`). So a chunk holding all the rows
of some problems computes its cells' sums alone (:func:`board_partials`), chunks add
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
        board_partials(efficiency_chunk, transfer_chunk, n_boot, seed) for ... in chunks
    )  # or merge as they come: merge_board_partials([merged, board_partials(...)])
    board = finalize_board(merged, outside=references)  # the stored board_resamples
    pareto = finalize_board(merged, references)  # the stored pareto_resamples

Memory of one partial: ``(1 + n_boot) x cells x columns`` floats per metric (2 columns for a
mean, 50 for SOTU), cells = the (teacher, dataset, student) cells with a row in the chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from legival_core.rankings.rank_intervals import (
    _ENTROPY_BLOCK,
    _HAZARD_BINS,
    EFFICIENCY_METRICS,
    RESAMPLED_METRICS,
    TRANSFER_METRICS,
    MetricResamples,
    TeacherResamples,
    _weighted_sums,
    problem_weights,
)
from legival_core.stats.stats import nan_mean

__all__ = [
    "BoardPartials",
    "MetricPartial",
    "board_partials",
    "finalize_board",
    "finalize_metric",
    "merge_board_partials",
    "merge_metric_partials",
    "metric_partial",
]

Cell = tuple[str, str, str]  # (teacher, dataset, student); student "" for efficiency metrics
Pair = tuple[str, str]  # (teacher, dataset)


@dataclass(frozen=True)
class MetricPartial:
    """One metric's sums over the rows of a chunk, row 0 of ``sums`` on the data (weight 1),
    row b on resample b.

    ``sums[r, i]`` belongs to ``cells[i]``: for ``statistic="mean"`` the weighted sum of the
    values and the weighted number of rows, for ``"entropy"`` the 50 bins of the weighted
    hazard histogram. ``traces[(teacher, dataset)]`` counts the distinct traces with a value
    and ``students[(teacher, dataset)]`` names their students (empty without a student
    column); their keys are the teacher x dataset coverage the common support needs.
    """

    statistic: str
    by_student: bool
    cells: tuple[Cell, ...]
    sums: np.ndarray
    traces: Mapping[Pair, int]
    students: Mapping[Pair, frozenset[str]]


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


def metric_partial(
    rows: pd.DataFrame,
    value: str,
    problems: pd.MultiIndex,
    weights: np.ndarray,
    statistic: str = "mean",
) -> MetricPartial:
    """The cell sums of one metric over ``rows`` (the rows of some problems), for the data and
    for each row of ``weights`` (``(n_boot, P)``, columns in the order of ``problems``, which
    must hold every (dataset, problem_id) of ``rows``).

    Rows as :func:`legival_core.rankings.rank_intervals.metric_resamples` reads them (``teacher``,
    ``dataset``, ``problem_id``, optionally ``student`` and ``trace_id``, and ``value``); rows
    with no value (for ``"entropy"``: no hazard bin in 1..50) are left out, as there.

    >>> rows = pd.DataFrame({"teacher": ["a", "a"], "dataset": "d", "problem_id": ["p", "q"],
    ...     "v": [1.0, 0.0]})
    >>> problems = pd.MultiIndex.from_tuples([("d", "p"), ("d", "q")])
    >>> part = metric_partial(rows, "v", problems, np.array([[2.0, 0.0]]))
    >>> part.cells, part.sums.tolist()  # data: 1 + 0 over 2 rows; resample: 2 x 1 over 2
    ((('a', 'd', ''),), [[[1.0, 2.0]], [[2.0, 2.0]]])
    """
    values = pd.to_numeric(rows[value], errors="coerce").to_numpy(dtype=np.float64)
    if statistic == "mean":
        keep = ~np.isnan(values)
    elif statistic == "entropy":
        keep = ~np.isnan(values) & (values >= 1) & (values <= _HAZARD_BINS)
    else:
        raise ValueError(
            f"metric_partial: statistic must be 'mean' or 'entropy', not {statistic!r}"
        )
    used, values = rows[keep], values[keep]
    by_student = "student" in rows
    teacher = used["teacher"].astype(str).to_numpy()
    dataset = used["dataset"].astype(str).to_numpy()
    student = used["student"].astype(str).to_numpy() if by_student else np.full(len(used), "")
    codes, labels = pd.factorize(pd.MultiIndex.from_arrays([teacher, dataset, student]), sort=True)
    cells: tuple[Cell, ...] = tuple((str(t), str(d), str(s)) for t, d, s in labels)
    problem_index = problems.get_indexer(
        pd.MultiIndex.from_arrays([dataset, used["problem_id"].astype(str).to_numpy()])
    )
    if (problem_index < 0).any():
        missing = used["problem_id"].astype(str).to_numpy()[problem_index < 0][0]
        raise ValueError(f"metric_partial: problem {missing!r} of {value!r} is not in problems")
    all_weights = np.vstack([np.ones((1, len(problems))), np.asarray(weights, np.float64)])
    if statistic == "mean":  # two columns per cell: sum of the values, number of rows
        columns = 2
        slot = np.concatenate([codes * 2, codes * 2 + 1])
        row_weights = np.concatenate([values, np.ones_like(values)])
        problem_rows = np.tile(problem_index, 2)
    else:  # one column per hazard bin
        columns = _HAZARD_BINS
        slot = codes * columns + values.astype(np.int64) - 1
        row_weights, problem_rows = np.ones_like(values), problem_index
    sums = _weighted_sums(all_weights, problem_rows, slot, row_weights, len(cells) * columns)
    ids = used["trace_id"] if "trace_id" in used else used["problem_id"]
    pairs = pd.DataFrame(
        {"teacher": teacher, "dataset": dataset, "id": ids.astype(str).to_numpy(),
         "student": student}
    )  # fmt: skip
    grouped = pairs.groupby(["teacher", "dataset"], sort=True)
    traces = {(str(t), str(d)): int(n) for (t, d), n in grouped["id"].nunique().items()}
    students = {pair: frozenset[str]() for pair in traces}
    if by_student:
        for (t, d), names in grouped["student"].unique().items():
            students[(str(t), str(d))] = frozenset(map(str, names))
    return MetricPartial(
        statistic=statistic,
        by_student=by_student,
        cells=cells,
        sums=sums.reshape(len(all_weights), len(cells), columns),
        traces=traces,
        students=students,
    )


def merge_metric_partials(*parts: MetricPartial) -> MetricPartial:
    """The partial of the rows of all ``parts`` (which must be of different problems): sums of
    the same cell added, trace counts added, student sets united. All at once: the merged sums
    are allocated once, whatever the number of parts.

    >>> rows = pd.DataFrame({"teacher": ["a", "a"], "dataset": "d", "problem_id": ["p", "q"],
    ...     "v": [1.0, 0.0]})
    >>> problems = pd.MultiIndex.from_tuples([("d", "p"), ("d", "q")])
    >>> w = np.array([[2.0, 0.0]])
    >>> one = metric_partial(rows, "v", problems, w)
    >>> two = merge_metric_partials(metric_partial(rows[:1], "v", problems, w),
    ...     metric_partial(rows[1:], "v", problems, w))
    >>> bool((one.sums == two.sums).all()), dict(two.traces)
    (True, {('a', 'd'): 2})
    """
    if not parts:
        raise ValueError("merge_metric_partials: no partials to merge")
    first = parts[0]
    for part in parts[1:]:
        if (part.statistic, part.by_student) != (first.statistic, first.by_student):
            raise ValueError(
                "merge_metric_partials: partials of different statistics "
                f"({first.statistic!r}, {part.statistic!r}) or student columns"
            )
        if part.sums.shape[0] != first.sums.shape[0]:
            raise ValueError(
                f"merge_metric_partials: {first.sums.shape[0] - 1} and "
                f"{part.sums.shape[0] - 1} resamples"
            )
    cells = tuple(sorted(set().union(*(p.cells for p in parts))))
    where = {cell: i for i, cell in enumerate(cells)}
    sums = np.zeros((first.sums.shape[0], len(cells), first.sums.shape[2]))
    traces: dict[Pair, int] = {}
    students: dict[Pair, frozenset[str]] = {}
    for part in parts:
        sums[:, [where[c] for c in part.cells]] += part.sums  # a part's cells are distinct
        for pair, n in part.traces.items():
            traces[pair] = traces.get(pair, 0) + n
        for pair, names in part.students.items():
            students[pair] = students.get(pair, frozenset()) | names
    return MetricPartial(first.statistic, first.by_student, cells, sums, traces, students)


def finalize_metric(
    partial: MetricPartial,
    teachers: Sequence[str],
    support: str = "common",
    outside: Sequence[str] = (),
) -> MetricResamples:
    """The :class:`~legival_core.rankings.rank_intervals.MetricResamples` of the merged
    ``partial`` for ``teachers`` (cells of other teachers are left out), as
    :func:`~legival_core.rankings.rank_intervals.metric_resamples` computes it on the whole rows:
    under ``support="common"`` only the datasets every teacher with a value (not in
    ``outside``) covers; per cell the weighted mean (or normalised hazard entropy), then the
    mean over students and over datasets, cells with no weight left out.
    """
    from legival_core.metrics.transfer import normalised_entropy
    from legival_core.stats.support import ALL_DATASETS, check_support, support_datasets

    wanted = [str(t) for t in teachers]
    mine = set(wanted)
    coverage = sorted(p for p, n in partial.traces.items() if n > 0 and p[0] in mine)
    on = {d for _, d in coverage}
    if check_support(support) != ALL_DATASETS and coverage:
        pairs = pd.DataFrame(coverage, columns=["teacher", "dataset"])
        covered = pd.crosstab(pairs["teacher"], pairs["dataset"]).astype(bool)
        on = set(support_datasets(covered, outside))
    kept = [i for i, (t, d, _) in enumerate(partial.cells) if t in mine and d in on]
    cells = [partial.cells[i] for i in kept]
    sums = partial.sums[:, kept]
    if partial.statistic == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            per_cell = np.where(sums[..., 1] > 0, sums[..., 0] / sums[..., 1], np.nan)
    else:
        per_cell = np.vstack(
            [
                normalised_entropy(sums[start : start + _ENTROPY_BLOCK])
                for start in range(0, len(sums), _ENTROPY_BLOCK)
            ]
        ).reshape(len(sums), len(cells))
    datasets = sorted({d for _, d, _ in cells})
    students = sorted({s for _, _, s in cells})
    dense = np.full((len(sums), len(wanted), len(datasets), len(students)), np.nan)
    if cells:
        index = (
            pd.Index(wanted).get_indexer([t for t, _, _ in cells]),
            pd.Index(datasets).get_indexer([d for _, d, _ in cells]),
            pd.Index(students).get_indexer([s for _, _, s in cells]),
        )
        dense[:, index[0], index[1], index[2]] = per_cell
    per_teacher = nan_mean(nan_mean(dense, axis=-1), axis=-1)
    n_traces = np.zeros(len(wanted), dtype=np.int64)
    n_students = np.zeros(len(wanted), dtype=np.int64)
    for i, teacher in enumerate(wanted):
        mine_on = [(teacher, d) for d in sorted(on) if (teacher, d) in partial.traces]
        n_traces[i] = sum(partial.traces[p] for p in mine_on)
        if partial.by_student:
            n_students[i] = len(frozenset().union(*(partial.students[p] for p in mine_on)))
        else:
            n_students[i] = int(n_traces[i] > 0)
    return MetricResamples(
        teachers=tuple(wanted),
        point=per_teacher[0],
        replicates=per_teacher[1:],
        n_traces=n_traces,
        n_students=n_students,
    )


def board_partials(
    efficiency_chunk: pd.DataFrame | None,
    transfer_chunk: pd.DataFrame | None,
    n_boot: int,
    seed: int,
    metrics: Sequence[str] = RESAMPLED_METRICS,
) -> BoardPartials:
    """The partial sums of every metric of ``metrics`` over a chunk of the per-trace tables:
    all the rows of ``trace_efficiency`` and ``trace_transfer`` of some problems (any split by
    problem works; the problem's weights are its own, :func:`problem_weights`).

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
    weights = problem_weights(problems, n_boot, seed)
    out: dict[str, MetricPartial] = {}
    efficiency, transfer = frames["efficiency"], frames["transfer"]
    for metric in metrics:
        if metric in EFFICIENCY_METRICS:
            column = "correct" if metric == "accuracy" else metric
            if column not in efficiency:
                continue
            rows = efficiency.assign(
                value=pd.to_numeric(efficiency[column].astype("Float64"), errors="coerce")
            ).drop(columns=["student"], errors="ignore")
            out[metric] = metric_partial(rows, "value", problems, weights)
        elif metric in TRANSFER_METRICS:
            column = "hazard_bin" if metric == "sotu" else metric
            if column not in transfer:
                continue
            statistic = "entropy" if metric == "sotu" else "mean"
            out[metric] = metric_partial(transfer, column, problems, weights, statistic)
    return BoardPartials(
        n_boot=int(n_boot), seed=int(seed), requested=tuple(metrics), teachers=teachers,
        metrics=out,
    )  # fmt: skip


def merge_board_partials(parts: Iterable[BoardPartials]) -> BoardPartials:
    """The partials of several chunks (of different problems) as one: in any order and
    grouping, the same board once finalized (to float rounding of the value sums)."""
    listed = list(parts)
    if not listed:
        raise ValueError("merge_board_partials: no partials to merge")
    first = listed[0]
    for part in listed[1:]:
        if (part.n_boot, part.seed, part.requested) != (first.n_boot, first.seed, first.requested):
            raise ValueError(
                "merge_board_partials: partials of different resamples or metrics: "
                f"(n_boot, seed) ({first.n_boot}, {first.seed}) vs ({part.n_boot}, {part.seed}),"
                f" metrics {first.requested} vs {part.requested}"
            )
    metrics = {
        metric: merge_metric_partials(*mine)
        for metric in first.requested
        if (mine := [p.metrics[metric] for p in listed if metric in p.metrics])
    }
    names = {name for p in listed for name in p.teachers}
    teachers = {
        name: frozenset().union(*(p.teachers.get(name, frozenset()) for p in listed))
        for name in names
    }
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
