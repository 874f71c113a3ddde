"""The inspector's trace list: one row per trace with what a reader picks a trace by (teacher,
problem, correct, steps, tokens, FOTU, leak step), the most telling first.

It lives below the view layer because the ``metrics`` stage stores it (a ``page_results``
entry) for the inspector and ``lv.open(...).traces()`` to read; the view layer re-exports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from legival_core.store.frames import first_positions

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
    # the traces' columns handed over, the frame let go: each is dropped once the list has
    # taken it in order (the grades, read inline, once they are looked up)
    columns = _listed_columns(traces)
    del traces
    return _trace_choices(columns, read("grades"), trace_transfer, steps)


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


def _positions(ids: Any, among: Any) -> np.ndarray:
    """For each of ``ids``, the position of its first row in ``among`` (both ids of any type,
    compared as text; -1 where absent), looked up in Arrow's hash table
    (:func:`~legival_core.store.frames.first_positions`): no Python string per id."""
    return first_positions(_as_text(ids), _as_text(among))


def _as_text(ids: Any) -> pd.Series:
    """``ids`` (a column or an index) as text on a range index."""
    return pd.Series(ids).astype(str).reset_index(drop=True)


def _missing(index: pd.RangeIndex, dtype: str) -> pd.Series:
    """A column of ``dtype`` with every value missing (a table the list could not join)."""
    return pd.Series(pd.array([pd.NA] * len(index), dtype=dtype), index=index)


def _taken(values: Any, at: np.ndarray) -> Any:
    """``values`` (a column) at the positions ``at``, missing where ``at`` is -1."""
    return pd.api.extensions.take(pd.array(values), at, allow_fill=True)


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

    Each table is joined by looking the list's ids up in it (Arrow's hash table, the ids
    compared as text), the traces' columns are taken by reference, and the order is found
    from the sort keys' codes. Called by :func:`store_trace_choices` (the metrics stage) at
    ten million traces, the list rose 3.9 GB above what the stage held, against 5.2 GB when
    every table's ids were coded together and the traces copied and sorted whole.

    >>> traces = pd.DataFrame({"trace_id": ["a", "b"], "teacher": "T", "dataset": "D",
    ...     "problem_id": ["p", "q"], "sample": 0, "tokens": [10, 20]})
    >>> grades = pd.DataFrame({"trace_id": ["a", "b"], "correct": [False, True]})
    >>> tt = pd.DataFrame({"trace_id": ["b", "b"], "fotu": [0.2, 0.4],
    ...     "leak_k": pd.array([3, 3], "Int64")})
    >>> out = trace_choices(traces, grades, tt)
    >>> out[["trace_id", "correct", "fotu", "rollouts"]].values.tolist()
    [['b', True, 0.30000000000000004, True], ['a', False, nan, False]]
    """
    return _trace_choices(_listed_columns(traces), grades, trace_transfer, steps_per_trace)


def _listed_columns(traces: pd.DataFrame) -> dict[str, pd.Series]:
    """The columns of ``traces`` the list shows, by reference, on a range index."""
    index = pd.RangeIndex(len(traces))
    shown = ["trace_id", "teacher", "dataset", "problem_id", "sample", "tokens"]
    return {c: traces[c].set_axis(index) for c in shown if c in traces}


def _trace_choices(
    out: dict[str, pd.Series],
    grades: pd.DataFrame | None,
    trace_transfer: pd.DataFrame | None,
    steps_per_trace: pd.Series | None,
) -> pd.DataFrame:
    """:func:`trace_choices` of the traces' ``out`` columns, which it takes over: the list's
    own columns are added to them, and each is dropped once taken in order."""
    index = out["trace_id"].index
    trace_ids = out["trace_id"] = out["trace_id"].astype(str)
    # An empty table counts as none.
    if grades is not None and len(grades):
        at = _positions(trace_ids, grades["trace_id"])
        out["correct"] = pd.Series(_taken(grades["correct"], at), index=index).astype("boolean")
    else:
        out["correct"] = _missing(index, "boolean")
    del grades
    if steps_per_trace is not None:
        at = _positions(trace_ids, steps_per_trace.index)
        out["m"] = pd.Series(_taken(steps_per_trace, at), index=index).astype("Int64")
    else:
        out["m"] = _missing(index, "Int64")
    if trace_transfer is not None and len(trace_transfer):
        # each transfer row's trace as its position in the list (-1: a trace not listed), so
        # the groups below are keyed by numbers
        row_trace = _positions(trace_transfer["trace_id"], trace_ids)
        grouped = trace_transfer.reset_index(drop=True).groupby(row_trace)
        out["fotu"] = grouped["fotu"].mean().reindex(index)
        if "leak_k" in trace_transfer:
            out["leak_k"] = grouped["leak_k"].first().reindex(index).astype("Int64")
        rollouts = np.zeros(len(index), dtype=bool)
        rollouts[row_trace[row_trace >= 0]] = True
        out["rollouts"] = pd.Series(rollouts, index=index)
    else:
        out["fotu"] = pd.Series(np.nan, index=index)
        out["rollouts"] = pd.Series(False, index=index)
    del trace_ids
    return _in_order(out)


def _sort_codes(column: pd.Series) -> np.ndarray:
    """Integer codes of ``column`` in its sorted order, a missing value last (how
    ``sort_values`` places it)."""
    codes, uniques = pd.factorize(column, sort=True)
    return np.where(codes < 0, len(uniques), codes)


def telling_first(out: pd.DataFrame) -> pd.DataFrame:
    """The trace list in its order and columns, once its columns are joined: the most telling
    traces first (correct with rollouts), then by teacher, problem and sample; ``leak_k`` is
    added as missing where no transfer table gave it.

    The order is that of a stable ``sort_values`` by those keys, found from the keys' codes
    alone; each column is then taken once in that order (sorting the whole frame copied its
    text columns several times: a million rows each at a million traces).

    >>> out = pd.DataFrame({"trace_id": list("abc"), "teacher": ["U", "T", "T"],
    ...     "problem_id": "p", "sample": [0, 1, 0], "correct": [True, False, True],
    ...     "rollouts": [True, True, False]})
    >>> telling_first(out)["trace_id"].tolist()
    ['a', 'c', 'b']
    """
    return _in_order({c: out[c] for c in out.columns})


def _in_order(out: dict[str, pd.Series]) -> pd.DataFrame:
    """:func:`telling_first` of the columns ``out``, which it takes over: each is dropped from
    ``out`` once taken in order, so the sorted list and the unsorted one are not both held."""
    telling = (out["correct"].fillna(False).astype(bool) & out["rollouts"]).to_numpy()
    keys = [_sort_codes(out[c]) for c in ("sample", "problem_id", "teacher")]
    order = np.lexsort([*keys, (~telling).astype(np.int8)])  # the last key sorts first
    del keys, telling
    index = pd.RangeIndex(len(order))
    shown = ["trace_id", "teacher", "dataset", "problem_id", "sample", "correct", "m",
             "tokens", "fotu", "leak_k", "rollouts"]  # fmt: skip
    in_order = {}
    for column in shown:
        if column in out:
            in_order[column] = out.pop(column).take(order).set_axis(index)
        elif column == "leak_k":
            in_order[column] = _missing(index, "Int64")
    return pd.DataFrame(in_order, index=index, copy=False)
