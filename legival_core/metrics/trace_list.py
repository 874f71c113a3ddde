"""The inspector's trace list: one row per trace with what a reader picks a trace by (teacher,
problem, correct, steps, tokens, FOTU, leak step), the most telling first.

It lives below the view layer because the ``metrics`` stage stores it (a ``page_results``
entry) for the inspector and ``lv.open(...).traces()`` to read; the view layer re-exports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from legival_core.store.store import Store

__all__ = [
    "TRACE_CHOICE_COLUMNS",
    "store_trace_choices",
    "stored_trace_choices",
    "telling_first",
    "trace_choices",
]


#: The columns :func:`trace_choices` uses of each table (the others are not read).
TRACE_CHOICE_COLUMNS: dict[str, tuple[str, ...]] = {
    "traces": ("trace_id", "problem_id", "dataset", "teacher", "sample", "tokens"),
    "grades": ("trace_id", "correct"),
    "trace_transfer": ("trace_id", "fotu", "leak_k"),
}


def store_trace_choices(
    store: Store,
    *,
    stored: bool = True,
    steps_per_trace: pd.Series | None = None,
    trace_transfer: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """:func:`trace_choices` of a :class:`~legival_core.store.store.Store`'s tables.

    Shared by the inspector page and ``Results.traces()`` so both list the same rows. With
    ``stored``, the list the metrics stage stored (:func:`stored_trace_choices`) while it is
    current, else computed: only the columns shown are read, and the steps per trace are
    counted in Arrow (``Store.rows_per``): on 100,000 traces and 1.1M steps, loading every
    step's trace id into pandas to count it was a sixth of the page's cold start.
    ``steps_per_trace`` (trace id → steps, traces without steps left out) is used instead of
    counting when the caller has the counts (the metrics stage, from ``trace_counts``), and
    ``trace_transfer`` instead of reading that table when the caller has each trace's mean
    FOTU and ``leak_k`` (the metrics stage, merged from its chunks: one row per trace, whose
    mean and first value are its own).
    """
    if stored:
        found = stored_trace_choices(store)
        if found is not None:
            return found

    def read(table: str) -> pd.DataFrame | None:
        if not store.has(table):
            return None
        return store.read(table, columns=list(TRACE_CHOICE_COLUMNS[table]))

    traces = read("traces")
    if traces is None:
        traces = pd.DataFrame(columns=list(TRACE_CHOICE_COLUMNS["traces"]))
    steps = _steps_per_trace(store) if steps_per_trace is None else steps_per_trace
    if trace_transfer is None:
        trace_transfer = read("trace_transfer")
    return trace_choices(traces, read("grades"), trace_transfer, steps)


def stored_trace_choices(store: Store) -> pd.DataFrame | None:
    """The trace list the metrics stage stored in ``page_results`` (``trace_choices``), or
    None when there is none or the traces, grades, transfer rows or steps were written since
    it was computed (its inputs stamp differs: the caller then computes it). At a million
    traces, reading it takes a fraction of computing it (joining and sorting a million rows)."""
    from legival_core.metrics.page_results import WholeStore, stored_frame

    if not store.has("page_results"):
        return None
    # A keyed read: only the batches that hold the list's row are decoded.
    rows = store.read("page_results", filters={"name": "trace_choices"})
    return stored_frame(rows, store.manifest, "trace_choices", WholeStore())


def _steps_per_trace(store: Store) -> pd.Series:
    """Steps per trace id: the metrics stage's ``trace_efficiency.steps`` while its
    ``page_results`` marker says they were counted from today's steps table, else counted
    (``Store.rows_per``; 4 s of 11M steps at a million traces, against 0.2 s read)."""
    from legival_core.metrics.page_results import WholeStore, is_current

    if store.has("page_results") and store.has("trace_efficiency"):
        marker = store.read("page_results", columns=["name", "selection", "inputs_stamp"])
        if is_current(marker, store.manifest, "trace_steps", WholeStore()):
            counts = store.read("trace_efficiency", columns=["trace_id", "steps"])
            counts = counts[counts["steps"] > 0]  # a trace without steps has no count
            return pd.Series(
                counts["steps"].to_numpy(), index=counts["trace_id"].astype(str), name="count"
            )
    return store.rows_per("steps", "trace_id")


def _id_codes(*columns: Any) -> list[np.ndarray]:
    """One integer code per distinct text of the ids in ``columns`` (shared by all of them;
    None gives an empty array), so that joining them on ids compares numbers."""
    present = [pd.Series(np.asarray([], dtype=object) if c is None else c) for c in columns]
    texts = [c.astype(str).reset_index(drop=True) for c in present]
    codes, _ = pd.factorize(pd.concat(texts, ignore_index=True))
    return np.split(codes, np.cumsum([len(t) for t in texts])[:-1])


def trace_choices(
    traces: pd.DataFrame,
    grades: pd.DataFrame | None = None,
    trace_transfer: pd.DataFrame | None = None,
    steps_per_trace: pd.Series | None = None,
) -> pd.DataFrame:
    """The inspector's way in: one row per trace with what a reader picks a trace by.

    Columns: ``trace_id``, ``teacher``, ``dataset``, ``problem_id``, ``sample``, ``correct``
    (from ``grades``), ``m`` (steps), ``tokens``, ``fotu`` (mean over students, from
    ``trace_transfer``), ``leak_k`` and ``rollouts`` (whether students were run on it). Sorted
    so the most telling traces come first: correct with rollouts, then by teacher and problem.

    >>> traces = pd.DataFrame({"trace_id": ["a", "b"], "teacher": "T", "dataset": "D",
    ...     "problem_id": ["p", "q"], "sample": 0, "tokens": [10, 20]})
    >>> grades = pd.DataFrame({"trace_id": ["a", "b"], "correct": [False, True]})
    >>> tt = pd.DataFrame({"trace_id": ["b", "b"], "fotu": [0.2, 0.4],
    ...     "leak_k": pd.array([3, 3], "Int64")})
    >>> out = trace_choices(traces, grades, tt)
    >>> out[["trace_id", "correct", "fotu", "rollouts"]].values.tolist()
    [['b', True, 0.30000000000000004, True], ['a', False, nan, False]]
    """
    columns = ["trace_id", "teacher", "dataset", "problem_id", "sample", "tokens"]
    out = traces[[c for c in columns if c in traces]].copy()
    out["trace_id"] = out["trace_id"].astype(str)
    # An empty table counts as none.
    grades = grades.drop_duplicates("trace_id") if grades is not None and len(grades) else None
    if trace_transfer is not None and not len(trace_transfer):
        trace_transfer = None
    # Every trace id as one integer code: the lookups below then hash numbers, not the strings
    # of 100,000 traces once per column (a fifth of the inspector's cold start).
    ids = _id_codes(
        out["trace_id"],
        grades["trace_id"] if grades is not None else None,
        steps_per_trace.index if steps_per_trace is not None else None,
        trace_transfer["trace_id"] if trace_transfer is not None else None,
    )
    trace_codes = pd.Series(ids[0], index=out.index)
    if grades is not None:
        correct = grades["correct"].set_axis(ids[1])
        out["correct"] = trace_codes.map(correct).astype("boolean")
    else:
        out["correct"] = pd.array([pd.NA] * len(out), dtype="boolean")
    out["m"] = (
        trace_codes.map(steps_per_trace.set_axis(ids[2])).astype("Int64")
        if steps_per_trace is not None
        else pd.array([pd.NA] * len(out), dtype="Int64")
    )
    if trace_transfer is not None:
        grouped = trace_transfer.groupby(ids[3])
        fotu = grouped["fotu"].mean()
        out["fotu"] = trace_codes.map(fotu)
        if "leak_k" in trace_transfer:
            out["leak_k"] = trace_codes.map(grouped["leak_k"].first()).astype("Int64")
        # the traces with transfer rows (the groups' keys, without building every group)
        out["rollouts"] = trace_codes.isin(fotu.index).to_numpy()
    else:
        out["fotu"] = np.nan
        out["rollouts"] = False
    return telling_first(out)


def telling_first(out: pd.DataFrame) -> pd.DataFrame:
    """The trace list in its order and columns, once its columns are joined: the most telling
    traces first (correct with rollouts), then by teacher, problem and sample; ``leak_k`` is
    added as missing where no transfer table gave it.
    """
    if "leak_k" not in out:
        out["leak_k"] = pd.array([pd.NA] * len(out), dtype="Int64")
    telling = (out["correct"].fillna(False).astype(bool) & out["rollouts"]).to_numpy()
    out = out.assign(_first=~telling).sort_values(
        ["_first", "teacher", "problem_id", "sample"], kind="stable"
    )
    order = ["trace_id", "teacher", "dataset", "problem_id", "sample", "correct", "m",
             "tokens", "fotu", "leak_k", "rollouts"]  # fmt: skip
    return out[[c for c in order if c in out]].reset_index(drop=True)
