"""The inspector's trace list (views.trace_choices) joins its tables by looking the trace ids
up in Arrow's hash table and orders the rows from the sort keys' codes; these tests hold it to
the same frame as the string-keyed joins and the whole-frame sort it replaced, both kept here
verbatim as the reference, on the demo store and on awkward inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core import views
from legival_core.metrics.trace_list import telling_first
from legival_core.store.store import Store

DEMO = Path(__file__).resolve().parents[1] / "results" / "demo"


def reference_trace_choices(
    traces: pd.DataFrame,
    grades: pd.DataFrame | None = None,
    trace_transfer: pd.DataFrame | None = None,
    steps_per_trace: pd.Series | None = None,
) -> pd.DataFrame:
    """views.trace_choices as it was before the integer codes (commit 8d44667)."""
    columns = ["trace_id", "teacher", "dataset", "problem_id", "sample", "tokens"]
    out = traces[[c for c in columns if c in traces]].copy()
    out["trace_id"] = out["trace_id"].astype(str)
    if grades is not None and len(grades):
        correct = grades.drop_duplicates("trace_id").set_index(grades["trace_id"].astype(str))
        out["correct"] = out["trace_id"].map(correct["correct"]).astype("boolean")
    else:
        out["correct"] = pd.array([pd.NA] * len(out), dtype="boolean")
    out["m"] = (
        out["trace_id"].map(steps_per_trace).astype("Int64")
        if steps_per_trace is not None
        else pd.array([pd.NA] * len(out), dtype="Int64")
    )
    if trace_transfer is not None and len(trace_transfer):
        grouped = trace_transfer.assign(trace_id=trace_transfer["trace_id"].astype(str)).groupby(
            "trace_id", observed=True
        )
        fotu = grouped["fotu"].mean()
        out["fotu"] = out["trace_id"].map(fotu)
        if "leak_k" in trace_transfer:
            out["leak_k"] = out["trace_id"].map(grouped["leak_k"].first()).astype("Int64")
        # the traces with transfer rows (the groups' keys, without building every group; a
        # lookup, since isin on Arrow strings makes a scalar of every key)
        has_rows = pd.Series(True, index=fotu.index)
        out["rollouts"] = out["trace_id"].map(has_rows).notna().to_numpy()
    else:
        out["fotu"] = np.nan
        out["rollouts"] = False
    return reference_telling_first(out)


def reference_telling_first(out: pd.DataFrame) -> pd.DataFrame:
    """views.telling_first as it was before the order was found from the keys' codes
    (commit efb6add): the whole frame sorted."""
    if "leak_k" not in out:
        out["leak_k"] = pd.array([pd.NA] * len(out), dtype="Int64")
    telling = (out["correct"].fillna(False).astype(bool) & out["rollouts"]).to_numpy()
    out = out.assign(_first=~telling).sort_values(
        ["_first", "teacher", "problem_id", "sample"], kind="stable"
    )
    order = ["trace_id", "teacher", "dataset", "problem_id", "sample", "correct", "m",
             "tokens", "fotu", "leak_k", "rollouts"]  # fmt: skip
    return out[[c for c in order if c in out]].reset_index(drop=True)


def demo_inputs() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.Series]:
    store = Store.open(DEMO)
    traces = store.read(
        "traces", ["trace_id", "problem_id", "dataset", "teacher", "sample", "tokens"]
    )
    grades = store.read("grades", ["trace_id", "correct"])
    transfer = store.read("trace_transfer")
    per_trace = store.read("steps", ["trace_id"])["trace_id"].astype(str).value_counts()
    return traces, grades, transfer, per_trace


def test_the_demo_trace_list_is_unchanged() -> None:
    traces, grades, transfer, per_trace = demo_inputs()
    got = views.trace_choices(traces, grades, transfer, per_trace)
    pd.testing.assert_frame_equal(got, reference_trace_choices(traces, grades, transfer, per_trace))
    assert got["rollouts"].any() and got["m"].notna().all()


def awkward_inputs() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.Series]:
    traces = pd.DataFrame(
        {
            "trace_id": ["b", "a", "ç", "", "7", "x\x00"],
            "teacher": ["T2", "T1", "T1", "T2", "T1", "T1"],
            "dataset": "D",
            "problem_id": ["p", "q", "p", "q", "p", "r"],
            "sample": pd.array([0, 1, 0, 0, 2, 0], dtype="Int32"),
            "tokens": pd.array([10, None, 30, 40, 50, 60], dtype="Int64"),
        }
    )
    grades = pd.DataFrame(
        {
            "trace_id": ["a", "b", "ç", "zz", "7"],  # "zz" is no trace; "" and "x\0" have none
            "correct": pd.array([True, False, None, True, True], dtype="boolean"),
        }
    )
    transfer = pd.DataFrame(
        {
            "trace_id": ["a", "a", "ç", "ç", "zz", "7", "7"],
            "student": ["s1", "s2", "s1", "s2", "s1", "s1", "s2"],
            "fotu": [0.1, 0.4, np.nan, np.nan, 0.9, 0.2, np.nan],  # ç: no value, yet rows
            "leak_k": pd.array([None, 3, 2, 2, 1, None, None], dtype="Int64"),
        }
    )
    per_trace = pd.Series({"a": 3, "b": 9, "7": 1, "nowhere": 4}, name="count")
    return traces, grades, transfer, per_trace


@pytest.mark.parametrize(
    "drop",
    [(), ("grades",), ("transfer",), ("per_trace",), ("grades", "transfer", "per_trace")],
)
def test_awkward_inputs_give_the_same_list(drop: tuple[str, ...]) -> None:
    traces, grades, transfer, per_trace = awkward_inputs()
    args = (
        traces,
        None if "grades" in drop else grades,
        None if "transfer" in drop else transfer,
        None if "per_trace" in drop else per_trace,
    )
    pd.testing.assert_frame_equal(views.trace_choices(*args), reference_trace_choices(*args))


def test_empty_tables_and_number_ids_give_the_same_list() -> None:
    traces, grades, transfer, per_trace = awkward_inputs()
    empty = (traces, grades.iloc[:0], transfer.iloc[:0], per_trace.iloc[:0])
    pd.testing.assert_frame_equal(views.trace_choices(*empty), reference_trace_choices(*empty))
    numbered = traces.assign(trace_id=range(len(traces)))
    by_number = (
        numbered,
        grades.assign(trace_id=[1, 0, 2, 99, 4]),
        transfer.assign(trace_id=[1, 1, 2, 2, 99, 4, 4]),
        pd.Series({"1": 3, "0": 9}),
    )
    pd.testing.assert_frame_equal(
        views.trace_choices(*by_number), reference_trace_choices(*by_number)
    )
    # No trace at all: the same (empty) rows and columns; the reference's FOTU column came out
    # as text there (its map of an empty text column), now it is a number column as elsewhere.
    none = traces.iloc[:0]
    got = views.trace_choices(none, grades, transfer, per_trace)
    pd.testing.assert_frame_equal(
        got, reference_trace_choices(none, grades, transfer, per_trace), check_dtype=False
    )
    assert got.empty and got["fotu"].dtype == np.float64


_TEXT = st.one_of(st.none(), st.sampled_from(["", "T", "T2", "t", "ç", "Z", "a b", "T\x00"]))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            _TEXT,
            _TEXT,
            st.one_of(st.none(), st.integers(-2, 3)),
            st.one_of(st.none(), st.booleans()),
            st.booleans(),
        ),
        max_size=30,
    )
)
def test_the_order_is_the_stable_sort_of_the_whole_frame(rows: list[tuple]) -> None:
    """Ties, missing teachers, problems and samples (last, as sort_values puts them), text
    that sorts by code point: the order from the keys' codes is the whole frame's stable
    sort."""
    out = pd.DataFrame(
        {
            "trace_id": [str(i) for i in range(len(rows))],
            "teacher": pd.array([r[0] for r in rows], dtype="str"),
            "dataset": "D",
            "problem_id": pd.array([r[1] for r in rows], dtype="str"),
            "sample": pd.array([r[2] for r in rows], dtype="Int32"),
            "correct": pd.array([r[3] for r in rows], dtype="boolean"),
            "rollouts": np.array([r[4] for r in rows], dtype=bool),
        }
    )
    pd.testing.assert_frame_equal(telling_first(out.copy()), reference_telling_first(out.copy()))
