"""Per-cell weighted sums of a teacher metric, the one computation behind every rank-interval
resample: on the whole rows (:func:`legival_core.rankings.rank_intervals.metric_resamples`) and
one chunk of problems at a time (:mod:`legival_core.rankings.board_partials`).

For each (teacher, dataset, student) cell, row 0 of the sums is the data (every problem weighs
1) and row b the b-th resample (problem p weighs w_bp): a mean's numerator and denominator, or
the 50 bins of a hazard histogram. Sums over different problems add, so chunks merge by
addition (:func:`merge_metric_partials`); :func:`finalize_metric` turns the sums into each
teacher's value: the weighted mean (or normalised hazard entropy) per cell, then the mean over
students and over datasets, on the common support.

The sums are made in two steps, so that the large one can run where the chunks are merged:
:func:`cell_rows` reduces a chunk's rows to (problem, column, amount) triples, as many as the
rows, and :func:`resample_cells` weighs them by each problem's weight in each resample, an
array of resamples x cells x columns whatever the chunk's size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from legival_core.stats.poisson_bootstrap import add_counts, check_alike, unite_sets
from legival_core.stats.stats import nan_mean
from legival_core.store.frames import text_codes

__all__ = [
    "HAZARD_BINS",
    "CellRows",
    "MetricPartial",
    "MetricResamples",
    "cell_rows",
    "concat_cell_rows",
    "finalize_metric",
    "merge_metric_partials",
    "metric_partial",
    "resample_cells",
    "weighted_sums",
]

#: What partials must share to be merged: the statistic and whether cells have students.
_KIND = ("statistic", "by_student")
#: The hazard bins of SOTU's histogram (first success at bin 1..50).
HAZARD_BINS = 50

Cell = tuple[str, str, str]  # (teacher, dataset, student); student "" for efficiency metrics
Pair = tuple[str, str]  # (teacher, dataset)


@dataclass(frozen=True)
class MetricResamples:
    """One metric for every teacher: on the data as it is and on each resample of problems.

    ``point[t]`` and ``replicates[b, t]`` are NaN where teacher t has no value (no traces, or
    none of its problems drawn in resample b). ``n_traces`` counts distinct traces and
    ``n_students`` distinct students behind the point value (1 for efficiency metrics).
    """

    teachers: tuple[str, ...]
    point: np.ndarray
    replicates: np.ndarray
    n_traces: np.ndarray
    n_students: np.ndarray


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


#: Resamples whose hazard histograms are built and reduced together (see metric_resamples).
_ENTROPY_BLOCK = 64
# Above this many cells, the problem-by-column matrix stays sparse (the hazard histograms).
_DENSE_LIMIT = 5_000_000


def weighted_sums(
    draws: np.ndarray,
    problem_index: np.ndarray,
    column_index: np.ndarray,
    weights: np.ndarray,
    width: int,
) -> np.ndarray:
    """``draws @ A`` where A[p, c] sums ``weights`` of the rows of problem p and column c."""
    n_problems = draws.shape[1]
    if n_problems * width <= _DENSE_LIMIT:
        flat = np.bincount(
            problem_index * width + column_index, weights=weights, minlength=n_problems * width
        )
        return draws @ flat.reshape(n_problems, width)
    from scipy import sparse

    matrix = sparse.csr_matrix((weights, (problem_index, column_index)), shape=(n_problems, width))
    matrix.sum_duplicates()
    by_column = matrix.T.tocsr()
    # a block of draws at a time into one array: the whole product at once made two more
    # arrays of the result's size (transposed, then copied), 768 MB of SOTU sums at 40 teachers
    out = np.empty((draws.shape[0], width))
    for start in range(0, draws.shape[0], _ENTROPY_BLOCK):
        block = draws[start : start + _ENTROPY_BLOCK]
        out[start : start + len(block)] = (by_column @ block.T).T
    return out


@dataclass(frozen=True)
class CellRows:
    """One metric's rows of a chunk, reduced to what its resampled cell sums are made of: row
    i adds ``row_weights[i]`` to column ``slot[i]`` of problem ``problem_index[i]`` (a position
    in ``problems``), scaled by that problem's weight in each resample.

    :func:`resample_cells` turns it into the :class:`MetricPartial` (one row per resample).
    Its size grows with the chunk's rows, not with resamples x cells: a chunk computed on a
    Ray worker sends this back (a few MB) and the driver resamples it, where the resampled
    sums (hundreds of MB at 40 teachers) would cross the object store instead.
    """

    statistic: str
    by_student: bool
    cells: tuple[Cell, ...]
    columns: int
    problems: pd.MultiIndex
    problem_index: np.ndarray
    slot: np.ndarray
    row_weights: np.ndarray
    traces: Mapping[Pair, int]
    students: Mapping[Pair, frozenset[str]]


def cell_rows(
    rows: pd.DataFrame,
    value: str,
    problems: pd.MultiIndex,
    statistic: str = "mean",
    *,
    known_only: bool = False,
) -> CellRows:
    """The :class:`CellRows` of one metric over ``rows`` (the rows of some problems);
    ``problems`` must hold every (dataset, problem_id) of ``rows`` (``known_only``: rows of
    other problems are left out instead).

    Rows as :func:`legival_core.rankings.rank_intervals.metric_resamples` reads them (``teacher``,
    ``dataset``, ``problem_id``, optionally ``student`` and ``trace_id``, and ``value``); rows
    with no value (for ``"entropy"``: no hazard bin in 1..50) are left out, as there.

    >>> rows = pd.DataFrame({"teacher": ["a", "a"], "dataset": "d", "problem_id": ["p", "q"],
    ...     "v": [1.0, 0.0]})
    >>> part = cell_rows(rows, "v", pd.MultiIndex.from_tuples([("d", "p"), ("d", "q")]))
    >>> part.slot.tolist(), part.row_weights.tolist()  # values into slot 0, counts into 1
    ([0, 0, 1, 1], [1.0, 0.0, 1.0, 1.0])
    """
    values = pd.to_numeric(rows[value], errors="coerce").to_numpy(dtype=np.float64)
    if statistic == "mean":
        keep = ~np.isnan(values)
    elif statistic == "entropy":
        keep = ~np.isnan(values) & (values >= 1) & (values <= HAZARD_BINS)
    else:
        raise ValueError(
            f"metric_partial: statistic must be 'mean' or 'entropy', not {statistic!r}"
        )
    used, values = rows[keep], values[keep]
    by_student = "student" in rows
    # each text column as codes into its sorted distinct strings: the cells, the problems and
    # the counts below are made from integers, not from a Python string per row
    teacher, teachers = text_codes(used["teacher"])
    dataset, datasets = text_codes(used["dataset"])
    if by_student:
        student, students_named = text_codes(used["student"])
    else:
        student, students_named = np.zeros(len(used), np.int64), np.array([""], dtype=object)
    problem_id, problem_ids = text_codes(used["problem_id"])
    problem_index = _problem_positions(problems, dataset, datasets, problem_id, problem_ids)
    if known_only:  # rows of other problems are left out (as a resample of these problems)
        known = problem_index >= 0
        used, values, problem_index = used[known], values[known], problem_index[known]
        teacher, dataset, student = teacher[known], dataset[known], student[known]
    elif (problem_index < 0).any():
        missing = problem_ids[problem_id[problem_index < 0][0]]
        raise ValueError(f"metric_partial: problem {missing!r} of {value!r} is not in problems")
    # a cell's key orders as its (teacher, dataset, student) strings do: each code is sorted
    per_teacher = len(datasets) * len(students_named)
    present, codes = np.unique(
        teacher * per_teacher + dataset * len(students_named) + student, return_inverse=True
    )
    codes = codes.reshape(-1)
    cells: tuple[Cell, ...] = tuple(
        (str(teachers[k // per_teacher]), str(datasets[k % per_teacher // len(students_named)]),
         str(students_named[k % len(students_named)]))
        for k in present.tolist()
    )  # fmt: skip
    if statistic == "mean":  # two columns per cell: sum of the values, number of rows
        columns = 2
        slot = np.concatenate([codes * 2, codes * 2 + 1])
        row_weights = np.concatenate([values, np.ones_like(values)])
        problem_rows = np.tile(problem_index, 2)
    else:  # one column per hazard bin
        columns = HAZARD_BINS
        slot = codes * columns + values.astype(np.int64) - 1
        row_weights, problem_rows = np.ones_like(values), problem_index
    traced = used["trace_id"] if "trace_id" in used else used["problem_id"]
    traces, students = _pair_counts(
        teacher * len(datasets) + dataset, (teachers, datasets), traced, student, students_named
    )
    if not by_student:
        students = {pair: frozenset[str]() for pair in traces}
    return CellRows(
        statistic=statistic,
        by_student=by_student,
        cells=cells,
        columns=columns,
        problems=problems,
        problem_index=problem_rows.astype(np.int32),  # halves what a chunk sends back
        slot=slot.astype(np.int32),
        row_weights=row_weights,
        traces=traces,
        students=students,
    )


def _problem_positions(
    problems: pd.MultiIndex,
    dataset: np.ndarray,
    datasets: np.ndarray,
    problem_id: np.ndarray,
    problem_ids: np.ndarray,
) -> np.ndarray:
    """Each row's position in ``problems`` (-1 where absent), looked up once per distinct
    (dataset, problem_id) of the rows."""
    distinct, inverse = np.unique(dataset * len(problem_ids) + problem_id, return_inverse=True)
    keys = pd.MultiIndex.from_arrays(
        [datasets[distinct // len(problem_ids)], problem_ids[distinct % len(problem_ids)]]
    )
    return problems.get_indexer(keys)[inverse.reshape(-1)]


def _pair_counts(
    pair: np.ndarray,
    names: tuple[np.ndarray, np.ndarray],
    traced: pd.Series,
    student: np.ndarray,
    students_named: np.ndarray,
) -> tuple[dict[Pair, int], dict[Pair, frozenset[str]]]:
    """For each (teacher, dataset) of the rows (``pair`` = teacher code x datasets + dataset
    code, a null name left out as a group-by leaves it), its number of distinct non-null
    ``traced`` ids and the set of its students' names."""
    teachers, datasets = names
    traced_code, traced_names = text_codes(traced)
    named = ~pd.isna(teachers)[pair // len(datasets)] & ~pd.isna(datasets)[pair % len(datasets)]
    pairs = np.unique(pair[named])
    counted = named & ~pd.isna(traced_names)[traced_code]
    distinct = np.unique(pair[counted] * len(traced_names) + traced_code[counted])
    found, counts = np.unique(distinct // len(traced_names), return_counts=True)
    per_pair = dict(zip(found.tolist(), counts.tolist(), strict=True))
    with_student = np.unique(pair[named] * len(students_named) + student[named])
    names_of: dict[int, set[str]] = {}
    for key in with_student.tolist():
        names_of.setdefault(key // len(students_named), set()).add(
            str(students_named[key % len(students_named)])
        )
    traces, students = {}, {}
    for key in pairs.tolist():
        name = (str(teachers[key // len(datasets)]), str(datasets[key % len(datasets)]))
        traces[name] = per_pair.get(key, 0)
        students[name] = frozenset(names_of[key])
    return traces, students


def concat_cell_rows(parts: Sequence[CellRows]) -> CellRows:
    """The :class:`CellRows` of several chunks (of different problems) as one: problems one
    after the other, cells united and every triple's slot moved to its cell's new place.
    Resampling the result gives the sums of resampling each part and merging, to float
    rounding of the value sums; it makes the resamples x cells array once, not once a part.

    >>> rows = pd.DataFrame({"teacher": ["a", "b"], "dataset": "d", "problem_id": ["p", "q"],
    ...     "v": [1.0, 0.0]})
    >>> one = cell_rows(rows[:1], "v", pd.MultiIndex.from_tuples([("d", "p")]))
    >>> two = cell_rows(rows[1:], "v", pd.MultiIndex.from_tuples([("d", "q")]))
    >>> both = concat_cell_rows([one, two])
    >>> both.cells, both.slot.tolist(), both.problem_index.tolist()
    ((('a', 'd', ''), ('b', 'd', '')), [0, 1, 2, 3], [0, 0, 1, 1])
    """
    if not parts:
        raise ValueError("concat_cell_rows: no rows to join")
    check_alike(parts, _KIND, "concat_cell_rows: rows of different statistics or student columns")
    first = parts[0]
    cells = tuple(sorted(set().union(*(p.cells for p in parts))))
    where = {cell: i for i, cell in enumerate(cells)}
    columns, slots, problem_rows, offset = first.columns, [], [], 0
    for part in parts:
        moved = np.array([where[c] for c in part.cells], dtype=np.int64)
        cell, column = np.divmod(part.slot.astype(np.int64), columns)
        slots.append((moved[cell] * columns + column).astype(np.int32))
        problem_rows.append(part.problem_index + np.int32(offset))
        offset += len(part.problems)
    return CellRows(
        statistic=first.statistic,
        by_student=first.by_student,
        cells=cells,
        columns=columns,
        problems=first.problems.append([p.problems for p in parts[1:]]),
        problem_index=np.concatenate(problem_rows),
        slot=np.concatenate(slots),
        row_weights=np.concatenate([p.row_weights for p in parts]),
        traces=add_counts(p.traces for p in parts),
        students=unite_sets(p.students for p in parts),
    )


def resample_cells(rows: CellRows, weights: np.ndarray) -> MetricPartial:
    """The :class:`MetricPartial` of ``rows``: its sums on the data (every problem weighs 1)
    and for each row of ``weights`` (``(n_boot, P)``, columns in the order of
    ``rows.problems``).

    >>> rows = pd.DataFrame({"teacher": ["a", "a"], "dataset": "d", "problem_id": ["p", "q"],
    ...     "v": [1.0, 0.0]})
    >>> part = cell_rows(rows, "v", pd.MultiIndex.from_tuples([("d", "p"), ("d", "q")]))
    >>> resample_cells(part, np.array([[2.0, 0.0]])).sums.tolist()  # data; p twice, q never
    [[[1.0, 2.0]], [[2.0, 2.0]]]
    """
    all_weights = np.vstack([np.ones((1, len(rows.problems))), np.asarray(weights, np.float64)])
    width = len(rows.cells) * rows.columns
    sums = weighted_sums(
        all_weights,
        rows.problem_index.astype(np.int64),
        rows.slot.astype(np.int64),
        rows.row_weights,
        width,
    )
    return MetricPartial(
        statistic=rows.statistic,
        by_student=rows.by_student,
        cells=rows.cells,
        sums=sums.reshape(len(all_weights), len(rows.cells), rows.columns),
        traces=rows.traces,
        students=rows.students,
    )


def metric_partial(
    rows: pd.DataFrame,
    value: str,
    problems: pd.MultiIndex,
    weights: np.ndarray,
    statistic: str = "mean",
    *,
    known_only: bool = False,
) -> MetricPartial:
    """The cell sums of one metric over ``rows`` (the rows of some problems), for the data and
    for each row of ``weights`` (``(n_boot, P)``, columns in the order of ``problems``):
    :func:`resample_cells` of :func:`cell_rows`.

    >>> rows = pd.DataFrame({"teacher": ["a", "a"], "dataset": "d", "problem_id": ["p", "q"],
    ...     "v": [1.0, 0.0]})
    >>> problems = pd.MultiIndex.from_tuples([("d", "p"), ("d", "q")])
    >>> part = metric_partial(rows, "v", problems, np.array([[2.0, 0.0]]))
    >>> part.cells, part.sums.tolist()  # data: 1 + 0 over 2 rows; resample: 2 x 1 over 2
    ((('a', 'd', ''),), [[[1.0, 2.0]], [[2.0, 2.0]]])
    """
    chosen = cell_rows(rows, value, problems, statistic, known_only=known_only)
    return resample_cells(chosen, weights)


def merge_metric_partials(*parts: MetricPartial, into_first: bool = False) -> MetricPartial:
    """The partial of the rows of all ``parts`` (which must be of different problems): sums of
    the same cell added, trace counts added, student sets united. All at once: the merged sums
    are allocated once, whatever the number of parts.

    ``into_first``: when the first part's cells hold every other part's, the others are added
    into the first part's ``sums`` array, which the result then shares (no new array): for a
    running total its owner folds chunks into (at 40 teachers a chunk's SOTU sums are 384 MB,
    and a new array per merge held three such arrays at once).

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
    check_alike(
        parts, _KIND, "merge_metric_partials: partials of different statistics or student columns"
    )
    first = parts[0]
    for part in parts[1:]:
        if part.sums.shape[0] != first.sums.shape[0]:
            raise ValueError(
                f"merge_metric_partials: {first.sums.shape[0] - 1} and "
                f"{part.sums.shape[0] - 1} resamples"
            )
    cells = tuple(sorted(set().union(*(p.cells for p in parts))))
    where = {cell: i for i, cell in enumerate(cells)}
    reuse = into_first and cells == first.cells
    sums = first.sums if reuse else np.zeros((first.sums.shape[0], len(cells), first.sums.shape[2]))
    for n_part, part in enumerate(parts):
        if not (reuse and n_part == 0):
            _add_cells(sums, [where[c] for c in part.cells], part.sums)
    traces = add_counts(p.traces for p in parts)
    students = unite_sets(p.students for p in parts)
    return MetricPartial(first.statistic, first.by_student, cells, sums, traces, students)


def _add_cells(sums: np.ndarray, where: list[int], part: np.ndarray) -> None:
    """``sums[:, where] += part`` without the copy of ``sums[:, where]`` that fancy indexing
    makes: all at once when ``where`` is every cell in order, else one cell at a time."""
    if where == list(range(sums.shape[1])):
        sums += part
        return
    for j, i in enumerate(where):  # a part's cells are distinct
        sums[:, i] += part[:, j]


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
