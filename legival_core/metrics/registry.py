"""One registry of metrics: what each metric is, where its values come from, how a teacher's
value is aggregated from them, how its interval is drawn and which lists it belongs to.

Every hand-written list of metric names the library, the pages and the pipeline used to keep
(the leaderboard's, the rank intervals', the robustness report's, the oversight page's, the
transfer module's) is now :func:`metrics_in` of a group here, and
:mod:`legival_core.metrics.metric_catalog` (labels and directions) is derived from it.

The registry *describes* the arithmetic the code does; it does not replace it: the teacher
values the store holds are computed by ``precompute/stages/metrics.py`` and
:func:`legival_core.metrics.transfer.teacher_metrics`. Each :class:`Aggregate` is a small
mergeable restatement of that arithmetic (``partial`` over a chunk of trace rows, ``merge``
of two partials, ``finalize`` to the teacher value), which ``tests/test_metric_registry.py``
checks against the real code paths on worked tables.

How to add a metric: one :class:`MetricSpec` in :data:`METRIC_SPECS`, its per-trace kernel
in ``legival_core/metrics/`` (and its column in the store), its docs page under
``docs/metrics/`` and its row in the docs' metric index (``docs/metrics/index.md``).
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "AGGREGATES",
    "GROUPS",
    "INTERVAL_METHODS",
    "METRIC_SPECS",
    "Aggregate",
    "Level",
    "MetricSpec",
    "aggregate_teacher",
    "metric_index_markdown",
    "metrics_in",
    "spec",
]


class Level(StrEnum):
    """The finest unit a metric has one value for."""

    STEP = "step"
    TRACE = "trace"
    TRACE_STUDENT = "trace_student"
    PROBLEM = "problem"
    TEACHER = "teacher"


#: Groups a metric can belong to, and which list of the code each one is.
GROUPS: dict[str, str] = {
    "catalog": "metrics the app labels (metric_catalog.METRICS)",
    "ranked": "the published rank table's seven (docs/rankings.md; metric_catalog.RANKED_METRICS)",
    "leaderboard": "what the leaderboard offers (metric_catalog.LEADERBOARD_METRICS)",
    "student": "transfer metrics that depend on the student (metric_catalog.STUDENT_METRICS)",
    "resampled_efficiency": "resampled from trace_efficiency for rank intervals and the "
    "robustness report (cells = datasets)",
    "resampled_transfer": "resampled from trace_transfer for rank intervals and the "
    "robustness report (cells = dataset x student)",
    "efficiency_means": "per-trace efficiency means the leaderboard and correlations pages "
    "read off trace_efficiency",
    "teacher_quantities": "teacher_metrics' transfer quantities (transfer.TEACHER_QUANTITIES)",
    "teacher_means": "transfer quantities averaged over traces then students "
    "(transfer._MEAN_QUANTITIES)",
    "stored_transfer": "transfer columns of teacher_metrics the metrics stage merges in",
    "transfer_intervals": "transfer metrics the leaderboard page shows with intervals",
    "latex_core": "columns of the leaderboard's LaTeX table (views.leaderboard)",
    "oversight_trace": "trace-level metrics the oversight page correlates with monitor scores",
    "oversight_teacher": "teacher-level metrics the oversight page correlates with rewards",
}

#: The intervals the code draws, by name.
INTERVAL_METHODS: dict[str, str] = {
    "wilson": "Wilson score interval of a share (legival_core.stats.stats.wilson_interval); "
    "the bootstrap percentile interval is stored beside it",
    "bootstrap_percentile": "percentile interval of a bootstrap over the teacher's traces "
    "(legival_core.stats.stats.bootstrap_ci / percentile_interval)",
    "bootstrap_bias_corrected": "bias-corrected percentile interval "
    "(legival_core.stats.stats.bias_corrected_interval): a resampled entropy is biased low",
}


# ---------------------------------------------------------------------------------------------
# Aggregates: how a teacher's value comes from its trace rows
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Aggregate:
    """A teacher-level aggregate as a mergeable trio: ``finalize(merge(partial(a),
    partial(b)))`` equals ``finalize(partial(a ∪ b))`` for any split of the rows."""

    name: str
    description: str
    partial: Callable[[pd.DataFrame, tuple[str, ...]], Any]
    merge: Callable[[Any, Any], Any]
    finalize: Callable[[Any], float]
    #: ``partial`` of every group of rows at once: ``by_group(rows, columns, group, n)[g]``
    #: equals ``partial(rows[group == g], columns)`` for each g in 0..n-1 with a row (codes
    #: ``group``); None: the partial is taken group by group. What makes a bucket's teacher
    #: partials one pass over its rows instead of a pandas call per (teacher, dataset, metric).
    by_group: Callable[[pd.DataFrame, tuple[str, ...], np.ndarray, int], list[Any]] | None = None


def _numbers(rows: pd.DataFrame, column: str) -> np.ndarray:
    return pd.to_numeric(rows[column].astype("Float64"), errors="coerce").to_numpy(
        dtype=np.float64, na_value=np.nan
    )


def _mean_partial(rows: pd.DataFrame, columns: tuple[str, ...]) -> tuple[float, int]:
    values = _numbers(rows, columns[0])
    present = ~np.isnan(values)
    return float(values[present].sum()), int(present.sum())


def _mean_merge(a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
    return a[0] + b[0], a[1] + b[1]


def _mean_finalize(part: tuple[float, int]) -> float:
    return part[0] / part[1] if part[1] else math.nan


def _student_values(rows: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """``student`` and ``value`` per row; for never-solved, the value is 1 when the pair has
    a FOTU (some prefix k >= 1) but no hazard bin, 0 when it has one, NaN without a FOTU."""
    if columns == ("hazard_bin", "fotu"):
        fotu = _numbers(rows, "fotu")
        solved = _numbers(rows, "hazard_bin")
        value = np.where(np.isnan(fotu), np.nan, np.isnan(solved).astype(np.float64))
    else:
        value = _numbers(rows, columns[0])
    return pd.DataFrame({"student": rows["student"].astype(str).to_numpy(), "value": value})


def _student_mean_partial(
    rows: pd.DataFrame, columns: tuple[str, ...]
) -> dict[str, tuple[float, int]]:
    frame = _student_values(rows, columns).dropna(subset=["value"])
    grouped = frame.groupby("student", sort=True)["value"]
    return {
        str(s): (float(total), int(count))
        for s, total, count in zip(
            grouped.sum().index, grouped.sum().to_numpy(), grouped.count().to_numpy(), strict=True
        )
    }


def _student_mean_by_group(
    rows: pd.DataFrame, columns: tuple[str, ...], group: np.ndarray, n: int
) -> list[dict[str, tuple[float, int]]]:
    # one groupby over (group, student): each cell's values are summed in row order by the
    # same routine as a group's own groupby by student, so the sums are the same bits
    frame = _student_values(rows, columns).assign(group=group).dropna(subset=["value"])
    grouped = frame.groupby(["group", "student"], sort=True)["value"]
    sums, counts = grouped.sum(), grouped.count()
    out: list[dict[str, tuple[float, int]]] = [{} for _ in range(n)]
    for (g, student), total, count in zip(
        sums.index, sums.to_numpy(), counts.to_numpy(), strict=True
    ):
        out[int(g)][str(student)] = (float(total), int(count))
    return out


def _student_mean_merge(
    a: dict[str, tuple[float, int]], b: dict[str, tuple[float, int]]
) -> dict[str, tuple[float, int]]:
    return {s: _mean_merge(a.get(s, (0.0, 0)), b.get(s, (0.0, 0))) for s in sorted({*a, *b})}


def _student_mean_finalize(part: dict[str, tuple[float, int]]) -> float:
    means = [total / count for total, count in part.values() if count]
    return float(np.mean(means)) if means else math.nan


def _entropy_partial(rows: pd.DataFrame, columns: tuple[str, ...]) -> dict[str, np.ndarray]:
    from legival_core.metrics.transfer_grid import N_BINS

    frame = _student_values(rows, columns)
    out: dict[str, np.ndarray] = {}
    for student, values in frame.groupby("student", sort=True)["value"]:
        bins = values.dropna().to_numpy().astype(np.int64)
        out[str(student)] = np.bincount(bins[bins > 0] - 1, minlength=N_BINS).astype(np.float64)
    return out


def _entropy_by_group(
    rows: pd.DataFrame, columns: tuple[str, ...], group: np.ndarray, n: int
) -> list[dict[str, np.ndarray]]:
    from legival_core.metrics.transfer_grid import N_BINS

    frame = _student_values(rows, columns)
    students, names = pd.factorize(frame["student"], sort=True)
    values = frame["value"].to_numpy()
    present = ~np.isnan(values)
    bins = np.zeros(len(values), dtype=np.int64)
    bins[present] = values[present].astype(np.int64)  # truncated, as partial does
    solved = present & (bins > 0)
    if (bins > N_BINS).any():  # a bin past the last: as partial does, group by group
        return [_entropy_partial(rows[group == g], columns) for g in range(n)]
    cell = group.astype(np.int64) * len(names) + students
    counts = np.bincount(
        cell[solved] * N_BINS + bins[solved] - 1,
        minlength=n * len(names) * N_BINS,
    ).reshape(n, len(names), N_BINS)
    out: list[dict[str, np.ndarray]] = [{} for _ in range(n)]
    for c in np.unique(cell):  # every (group, student) with a row, solved or not
        g, s = divmod(int(c), len(names))
        out[g][str(names[s])] = counts[g, s].astype(np.float64)
    return out


def _entropy_merge(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from legival_core.metrics.transfer_grid import N_BINS

    empty = np.zeros(N_BINS)
    return {s: a.get(s, empty) + b.get(s, empty) for s in sorted({*a, *b})}


def _entropy_finalize(part: dict[str, np.ndarray]) -> float:
    from legival_core.metrics.transfer_grid import normalised_entropy

    if not part:
        return math.nan
    values = normalised_entropy(np.stack(list(part.values())))
    return float(np.nanmean(values)) if (~np.isnan(values)).any() else math.nan


def _difference_partial(rows: pd.DataFrame, columns: tuple[str, ...]) -> tuple[dict, dict]:
    return _student_mean_partial(rows, columns[:1]), _student_mean_partial(rows, columns[1:])


def _difference_by_group(
    rows: pd.DataFrame, columns: tuple[str, ...], group: np.ndarray, n: int
) -> list[tuple[dict, dict]]:
    first = _student_mean_by_group(rows, columns[:1], group, n)
    second = _student_mean_by_group(rows, columns[1:], group, n)
    return list(zip(first, second, strict=True))


def _mean_by_group(
    rows: pd.DataFrame, columns: tuple[str, ...], group: np.ndarray, n: int
) -> list[tuple[float, int]]:
    values = _numbers(rows, columns[0])
    order = np.argsort(group, kind="stable")  # each group's values contiguous, in row order
    edges = np.searchsorted(group[order], np.arange(n + 1))
    out = []
    for g in range(n):
        mine = values[order[edges[g] : edges[g + 1]]]
        present = ~np.isnan(mine)
        out.append((float(mine[present].sum()), int(present.sum())))
    return out


def _difference_merge(a: tuple[dict, dict], b: tuple[dict, dict]) -> tuple[dict, dict]:
    return _student_mean_merge(a[0], b[0]), _student_mean_merge(a[1], b[1])


def _difference_finalize(part: tuple[dict, dict]) -> float:
    return _student_mean_finalize(part[0]) - _student_mean_finalize(part[1])


#: The teacher aggregates, by name (the ``paper`` profile's arithmetic for transfer metrics;
#: docs/profiles.md says how the ``release`` profile pools FOTU and normalises SOTU).
AGGREGATES: dict[str, Aggregate] = {
    a.name: a
    for a in (
        Aggregate(
            "mean",
            "mean over the teacher's traces with a value: sum(x) / #{x not NaN} "
            "(precompute/stages/metrics.teacher_table)",
            _mean_partial,
            _mean_merge,
            _mean_finalize,
            _mean_by_group,
        ),
        Aggregate(
            "student_mean",
            "per student the mean over the teacher's traces with a value, then the plain mean "
            "over students: mean_s (sum_t x_ts / n_s) (transfer.teacher_metrics)",
            _student_mean_partial,
            _student_mean_merge,
            _student_mean_finalize,
            _student_mean_by_group,
        ),
        Aggregate(
            "hazard_entropy",
            "per student the hazard histogram over 50 bins (never-solved traces left out), "
            "H(p) / log 50, then the mean over students with a solved trace "
            "(transfer.teacher_metrics, SOTU)",
            _entropy_partial,
            _entropy_merge,
            _entropy_finalize,
            _entropy_by_group,
        ),
        Aggregate(
            "student_mean_difference",
            "student_mean of the first column minus student_mean of the second "
            "(lift = FOTU − baseline at teacher level)",
            _difference_partial,
            _difference_merge,
            _difference_finalize,
            _difference_by_group,
        ),
    )
}


# ---------------------------------------------------------------------------------------------
# The metrics
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricSpec:
    """Everything the code knows about one metric.

    ``table`` and ``columns`` are the store table and the columns of it the teacher value is
    aggregated from (by :data:`AGGREGATES` ``[aggregate]``); ``interval`` a key of
    :data:`INTERVAL_METHODS`; ``groups`` keys of :data:`GROUPS`; ``docs`` a page under
    ``docs/`` (``anchor`` an optional heading id on it).
    """

    name: str
    label: str
    unit: str
    higher_is_better: bool
    share: bool  # a fraction in [0, 1], shown as a percentage
    description: str
    level: Level
    table: str
    columns: tuple[str, ...]
    aggregate: str
    interval: str
    depends_on_student: bool
    groups: frozenset[str]
    docs: str
    anchor: str = ""


def _groups(*names: str) -> frozenset[str]:
    return frozenset(names)


_EFFICIENCY_GROUPS = ("catalog", "ranked", "leaderboard", "resampled_efficiency")
_TRANSFER_GROUPS = ("teacher_quantities", "teacher_means", "stored_transfer", "student")
#: The groups of the three ranked transfer metrics (FOTU, SOTU, regression).
_RANKED_TRANSFER_GROUPS = (
    "catalog",
    "ranked",
    "leaderboard",
    "resampled_transfer",
    "transfer_intervals",
    "oversight_teacher",
)

#: The metrics, in the order every group lists them.
METRIC_SPECS: dict[str, MetricSpec] = {
    m.name: m
    for m in (
        MetricSpec(
            "accuracy",
            "Accuracy",
            "share",
            True,
            True,
            "share of traces graded correct",
            Level.TRACE,
            "trace_efficiency",
            ("correct",),
            "mean",
            "wilson",
            False,
            _groups(*_EFFICIENCY_GROUPS, "latex_core"),
            "metrics/accuracy.md",
        ),
        MetricSpec(
            "tokens",
            "Tokens",
            "tokens",
            False,
            False,
            "mean reasoning length in tokens (the store's provenance says how they were "
            "counted: legival_core.store.provenance.token_sources)",
            Level.TRACE,
            "trace_efficiency",
            ("tokens",),
            "mean",
            "bootstrap_percentile",
            False,
            _groups(*_EFFICIENCY_GROUPS, "efficiency_means", "latex_core"),
            "metrics/tokens.md",
        ),
        MetricSpec(
            "redundancy",
            "Redundancy",
            "share",
            False,
            True,
            "share of steps whose best match to an earlier step exceeds τ",
            Level.TRACE,
            "trace_efficiency",
            ("redundancy",),
            "mean",
            "bootstrap_percentile",
            False,
            _groups(*_EFFICIENCY_GROUPS, "efficiency_means"),
            "metrics/redundancy.md",
        ),
        MetricSpec(
            "backtracking",
            "Backtracking",
            "share",
            False,
            True,
            "share of steps flagged as backtracking by the primary labeler",
            Level.TRACE,
            "trace_efficiency",
            ("backtracking",),
            "mean",
            "bootstrap_percentile",
            False,
            _groups(*_EFFICIENCY_GROUPS, "efficiency_means"),
            "metrics/backtracking.md",
        ),
        MetricSpec(
            "fotu",
            "FOTU",
            "share",
            True,
            True,
            "first-order transfer utility: area under the student's success curve",
            Level.TRACE_STUDENT,
            "trace_transfer",
            ("fotu",),
            "student_mean",
            "bootstrap_percentile",
            True,
            _groups(*_RANKED_TRANSFER_GROUPS, *_TRANSFER_GROUPS, "latex_core", "oversight_trace"),
            "metrics/fotu.md",
        ),
        MetricSpec(
            "sotu",
            "SOTU",
            "normalised entropy",
            True,
            True,
            "second-order transfer utility: normalised entropy of the hazard histogram",
            Level.TEACHER,
            "trace_transfer",
            ("hazard_bin",),
            "hazard_entropy",
            "bootstrap_bias_corrected",
            True,
            _groups(*_RANKED_TRANSFER_GROUPS, "teacher_quantities", "stored_transfer", "student"),
            "metrics/sotu.md",
        ),
        MetricSpec(
            "regression_rate",
            "Regression",
            "share",
            False,
            True,
            "share of consecutive prefixes where the student falls from right to wrong",
            Level.TRACE_STUDENT,
            "trace_transfer",
            ("regression_rate",),
            "student_mean",
            "bootstrap_percentile",
            True,
            _groups(*_RANKED_TRANSFER_GROUPS, *_TRANSFER_GROUPS, "oversight_trace"),
            "metrics/regression.md",
        ),
        MetricSpec(
            "never_solved",
            "Never solved",
            "share",
            False,
            True,
            "share of correct traces no prefix of which the student solves",
            Level.TRACE_STUDENT,
            "trace_transfer",
            ("hazard_bin", "fotu"),
            "student_mean",
            "bootstrap_percentile",
            True,
            _groups("catalog", *_TRANSFER_GROUPS, "transfer_intervals"),
            "metrics/sotu.md",
        ),
        MetricSpec(
            "baseline",
            "Baseline",
            "share",
            True,
            True,
            "the student's success without any prefix (k = 0)",
            Level.TRACE_STUDENT,
            "trace_transfer",
            ("baseline",),
            "student_mean",
            "bootstrap_percentile",
            True,
            _groups(*_TRANSFER_GROUPS),
            "metrics/fotu.md",
        ),
        MetricSpec(
            "lift",
            "Lift",
            "share",
            True,
            True,
            "FOTU minus the student's baseline (k = 0)",
            Level.TRACE_STUDENT,
            "trace_transfer",
            ("fotu", "baseline"),
            "student_mean_difference",
            "bootstrap_percentile",
            True,
            _groups("catalog", "teacher_quantities", "transfer_intervals"),
            "metrics/fotu.md",
        ),
        MetricSpec(
            "fotu_before_leak",
            "FOTU before leak",
            "share",
            True,
            True,
            "FOTU from the prefixes shown before the trace first states the gold answer "
            "(the student cannot just copy it)",
            Level.TRACE_STUDENT,
            "trace_transfer",
            ("fotu_before_leak",),
            "student_mean",
            "bootstrap_percentile",
            True,
            _groups("catalog", "leaderboard", "resampled_transfer", "student", "latex_core"),
            "metrics/fotu-before-leak.md",
        ),
    )
}


def spec(name: str) -> MetricSpec:
    """The :class:`MetricSpec` of ``name``.

    >>> spec("fotu").label, spec("fotu").aggregate
    ('FOTU', 'student_mean')
    """
    try:
        return METRIC_SPECS[name]
    except KeyError:
        raise KeyError(f"no metric {name!r} in the registry: {sorted(METRIC_SPECS)}") from None


def metrics_in(group: str, specs: Mapping[str, MetricSpec] = METRIC_SPECS) -> tuple[str, ...]:
    """The names of the metrics in ``group`` (a key of :data:`GROUPS`), in registry order:
    ``(m for m in METRIC_SPECS if group in m.groups)``.

    >>> metrics_in("oversight_teacher")
    ('fotu', 'sotu', 'regression_rate')
    """
    if group not in GROUPS:
        raise KeyError(f"no metric group {group!r}: {sorted(GROUPS)}")
    return tuple(name for name, s in specs.items() if group in s.groups)


def aggregate_teacher(name: str, rows: pd.DataFrame) -> float:
    """One teacher's value of metric ``name`` from its rows of the metric's store table, by
    the registry's aggregate: ``finalize(partial(rows, columns))``.

    >>> rows = pd.DataFrame({"correct": [True, False, True, True]})
    >>> aggregate_teacher("accuracy", rows)  # (1 + 0 + 1 + 1) / 4
    0.75
    """
    s = spec(name)
    agg = AGGREGATES[s.aggregate]
    return agg.finalize(agg.partial(rows, s.columns))


def metric_index_markdown(specs: Mapping[str, MetricSpec] = METRIC_SPECS) -> str:
    """The metric index of ``docs/metrics/index.md``: one table row per :class:`MetricSpec`,
    links relative to ``docs/metrics/`` (``tests/test_metric_registry.py`` checks that the
    page holds exactly this text).

    >>> metric_index_markdown().splitlines()[2].split(" | ")[:3]
    ['| `accuracy`', '[Accuracy](accuracy.md)', 'share']
    """
    rows = [
        "| name | metric | unit | better | level | from | teacher value | interval | groups |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in specs.values():
        link = posixpath.relpath(s.docs, "metrics") + (f"#{s.anchor}" if s.anchor else "")
        columns = ", ".join(f"`{c}`" for c in s.columns)
        groups = ", ".join(f"`{g}`" for g in sorted(s.groups))
        rows.append(
            f"| `{s.name}` | [{s.label}]({link}) | {s.unit} | "
            f"{'higher' if s.higher_is_better else 'lower'} | `{s.level.value}` | "
            f"`{s.table}`: {columns} | `{s.aggregate}` | `{s.interval}` | {groups} |"
        )
    return "\n".join(rows) + "\n"
