"""The teacher table from mergeable partial sums: what lets the metrics run chunk by chunk.

Each teacher-level metric of the registry (:data:`legival_core.metrics.registry.METRIC_SPECS`)
has an aggregate that splits into ``partial`` (over any subset of a teacher's rows), ``merge``
and ``finalize``. :func:`teacher_partials` takes the per-trace tables of one chunk of problems
and keeps, per (teacher, dataset), one partial per metric and the trace count;
:func:`merge_teacher_partials` adds two chunks' partials; :func:`teacher_rows` finalizes them
into the rows of ``teacher_metrics``. Because every aggregate merges exactly, the table is the
same whatever the chunks (one, seven or sixty-four buckets of problems): a property the tests
check on the demo store, and what a run over many processes or machines relies on.

The ``paper`` profile's arithmetic (the registry's aggregates); the ``release`` profile pools
FOTU and normalises SOTU as the authors' scripts do and is computed whole
(:func:`legival_core.metrics.transfer.teacher_metrics`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from legival_core.metrics.registry import AGGREGATES, METRIC_SPECS, MetricSpec
from legival_core.store.frames import text_codes
from legival_core.store.schema import TABLES as TABLE_SPECS

__all__ = [
    "TEACHER_TABLE_METRICS",
    "TeacherPartials",
    "merge_teacher_partials",
    "teacher_partials",
    "teacher_rows",
]

#: The registry metrics ``teacher_metrics`` stores, in the registry's order: a new metric
#: with a column there is aggregated here without another list to edit.
TEACHER_TABLE_METRICS: tuple[str, ...] = tuple(
    name for name in METRIC_SPECS if name in TABLE_SPECS["teacher_metrics"].columns
)

Group = tuple[str, str]


@dataclass
class TeacherPartials:
    """Per (teacher, dataset): the trace count and one partial per metric (absent: no row of
    that metric's table in any chunk so far)."""

    n_traces: dict[Group, int] = field(default_factory=dict)
    partials: dict[Group, dict[str, Any]] = field(default_factory=dict)


def _spec(name: str) -> MetricSpec:
    return METRIC_SPECS[name]


def _group_codes(frame: pd.DataFrame) -> tuple[np.ndarray, list[Group]]:
    """Each row's (teacher, dataset) code and the groups, in order of first appearance."""
    # from each column's codes: a MultiIndex of every row's strings took most of this time
    teacher, teachers = text_codes(frame["teacher"])
    dataset, datasets = text_codes(frame["dataset"])
    codes, pairs = pd.factorize(teacher * len(datasets) + dataset, sort=False)
    groups = [
        (str(teachers[pair // len(datasets)]), str(datasets[pair % len(datasets)]))
        for pair in pairs.tolist()
    ]
    return codes.astype(np.int64), groups


def teacher_partials(
    efficiency: pd.DataFrame,
    transfer: pd.DataFrame | None,
    metrics: Iterable[str] = TEACHER_TABLE_METRICS,
) -> TeacherPartials:
    """The partials of one chunk: ``efficiency`` rows (``trace_efficiency``) and ``transfer``
    rows (``trace_transfer``, may be None or empty) of the chunk's traces.

    >>> eff = pd.DataFrame({"teacher": "T", "dataset": "d", "correct": [True, False, True],
    ...                     "tokens": [10, 20, 30], "redundancy": 0.0, "backtracking": 0.0})
    >>> a = teacher_partials(eff.iloc[:1], None, ["tokens"])
    >>> b = teacher_partials(eff.iloc[1:], None, ["tokens"])
    >>> teacher_rows(merge_teacher_partials(a, b), ["tokens"])["tokens"].tolist()
    [20.0]
    """
    out = TeacherPartials()
    wanted = list(metrics)
    tables = {"trace_efficiency": efficiency, "trace_transfer": transfer}
    if efficiency is not None and len(efficiency):
        codes, groups = _group_codes(efficiency)
        for group, count in zip(groups, np.bincount(codes, minlength=len(groups)), strict=True):
            out.n_traces[group] = out.n_traces.get(group, 0) + int(count)
    for table, frame in tables.items():
        names = [n for n in wanted if _spec(n).table == table]
        if frame is None or frame.empty or not names:
            continue
        codes, groups = _group_codes(frame)
        slots = [out.partials.setdefault(group, {}) for group in groups]
        for name in names:
            spec = _spec(name)
            aggregate = AGGREGATES[spec.aggregate]
            if aggregate.by_group is not None:
                parts = aggregate.by_group(frame, spec.columns, codes, len(groups))
            else:
                parts = [
                    aggregate.partial(frame[codes == g], spec.columns) for g in range(len(groups))
                ]
            for slot, part in zip(slots, parts, strict=True):
                slot[name] = part
    return out


def merge_teacher_partials(a: TeacherPartials, b: TeacherPartials) -> TeacherPartials:
    """``a`` and ``b`` added together (neither is changed)."""
    out = TeacherPartials(dict(a.n_traces), {g: dict(p) for g, p in a.partials.items()})
    for group, count in b.n_traces.items():
        out.n_traces[group] = out.n_traces.get(group, 0) + count
    for group, partials in b.partials.items():
        slot = out.partials.setdefault(group, {})
        for name, partial in partials.items():
            if name in slot:
                slot[name] = AGGREGATES[_spec(name).aggregate].merge(slot[name], partial)
            else:
                slot[name] = partial
    return out


def teacher_rows(
    partials: TeacherPartials, metrics: Iterable[str] = TEACHER_TABLE_METRICS
) -> pd.DataFrame:
    """One row per (teacher, dataset) with a trace, sorted: ``teacher``, ``dataset``, each
    metric finalized (NaN where no row carried it) and ``n_traces``."""
    wanted = list(metrics)
    records: list[dict[str, Any]] = []
    for group in sorted(partials.n_traces):
        record: dict[str, Any] = {"teacher": group[0], "dataset": group[1]}
        slot: Mapping[str, Any] = partials.partials.get(group, {})
        for name in wanted:
            aggregate = AGGREGATES[_spec(name).aggregate]
            record[name] = float(aggregate.finalize(slot[name])) if name in slot else math.nan
        record["n_traces"] = int(partials.n_traces[group])
        records.append(record)
    columns = ["teacher", "dataset", *wanted, "n_traces"]
    return pd.DataFrame.from_records(records, columns=columns)
