"""``legival_core.store.frames.is_in`` is pandas' ``isin`` (Arrow's hash lookup on text
columns, pandas' elsewhere): the same answer for every column and every kind of ``wanted``."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.store.frames import is_in

TEXT = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "", "é", "trace-1"]))
KINDS = ("list", "set", "series", "index", "array")


def _wanted(items: list[str | None], kind: str) -> object:
    if kind == "set":
        return set(items)
    if kind == "series":
        return pd.Series(items, dtype="str")
    if kind == "index":
        return pd.Index(items, dtype="str")
    if kind == "array":
        return np.array(items, dtype=object)
    return items


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, max_size=12), st.lists(TEXT, max_size=6), st.sampled_from(KINDS))
def test_is_in_answers_as_isin_on_text(
    values: list[str | None], wanted: list[str | None], kind: str
) -> None:
    column = pd.Series(values, dtype="str")
    expected = column.isin(_wanted(wanted, kind)).to_numpy(dtype=bool)
    got = is_in(column, _wanted(wanted, kind))
    assert got.dtype == bool
    np.testing.assert_array_equal(got, expected)


def test_is_in_by_hand() -> None:
    column = pd.Series(["t1", "t2", None, "t3"], dtype="str")
    assert is_in(column, ["t3", "t1"]).tolist() == [True, False, False, True]
    assert is_in(column, {"t2", None}).tolist() == [False, True, True, False]
    assert is_in(column, []).tolist() == [False] * 4
    # a text column against numbers, and a column that is not text: pandas' answer
    assert is_in(column, [1, 2]).tolist() == column.isin([1, 2]).tolist()
    assert is_in(pd.Series([1, 2, 3]), [3, 1]).tolist() == [True, False, True]
    assert is_in(pd.Index(["a", "b"], dtype="str"), ["b"]).tolist() == [False, True]
