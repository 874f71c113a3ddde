"""Store tables as pandas: the dtypes :meth:`Store.read` gives each column (nullable integers
and booleans, so a column keeps its dtype with or without nulls), :func:`arrow_to_frame` for
a table whose id columns are wanted as categoricals, and lookups of text ids in Arrow's hash
tables (:func:`is_in`, :func:`first_positions`, :func:`lookup_join`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from legival_core.store import schema

__all__ = [
    "arrow_to_frame",
    "first_positions",
    "is_in",
    "lookup_join",
    "pandas_dtypes",
    "text_codes",
    "text_groups",
    "to_pandas",
]


def pandas_dtypes(table: str) -> dict[str, Any]:
    """The pandas dtypes :meth:`Store.read` gives each column of ``table``.

    Integers and booleans become pandas' nullable dtypes (``Int32``, ``boolean``) so that a column
    keeps its dtype whether or not it holds nulls, and an empty table has the same dtypes as a full
    one; floats are ``float64`` (null -> NaN); strings are pandas' ``str``; lists are ``object``.
    """
    spec = schema.spec(table)
    return {f.name: _pandas_dtype(f.type) for f in spec.schema}


def _pandas_dtype(dtype: pa.DataType) -> Any:
    mapped = _types_mapper(dtype)
    if mapped is not None:
        return mapped
    return pa.schema([pa.field("x", dtype)]).empty_table().to_pandas()["x"].dtype


def _types_mapper(dtype: pa.DataType) -> Any:
    if pa.types.is_integer(dtype):
        prefix = "UInt" if pa.types.is_unsigned_integer(dtype) else "Int"
        return pd.api.types.pandas_dtype(f"{prefix}{dtype.bit_width}")
    if pa.types.is_boolean(dtype):
        return pd.BooleanDtype()
    return None


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """``table`` as pandas with the dtypes of :func:`pandas_dtypes`."""
    return table.to_pandas(types_mapper=_types_mapper)


def arrow_to_frame(table: Any, categorical: Sequence[str] = ()) -> pd.DataFrame:
    """A pyarrow table as pandas, with the ``categorical`` string columns dictionary-encoded.

    Repeated ids (teacher, student, trace_id in a rollouts table) become pandas categoricals,
    which group and factorize several times faster than plain strings.
    """
    columns = {}
    for name in table.column_names:
        column = table.column(name)
        if name in categorical and (
            pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        ):
            column = pc.dictionary_encode(column)
        columns[name] = column
    return pa.table(columns).to_pandas()


def _is_arrow_text(values: pd.Series | pd.Index) -> bool:
    """Whether ``values`` is the store's Arrow-backed text (pandas' ``str`` on pyarrow)."""
    return isinstance(values.dtype, pd.StringDtype) and values.dtype.storage == "pyarrow"


def is_in(values: pd.Series | pd.Index, wanted: Any) -> np.ndarray:
    """Whether each of ``values`` is one of ``wanted`` (``values.isin(wanted)`` as a boolean
    array; a null is in ``wanted`` when ``wanted`` holds a null).

    On the store's text columns (pandas' Arrow-backed ``str``) pandas' ``isin`` turns both
    sides into Python strings: 5 s and 0.45 GB to test 2.3M transfer rows against a million
    trace ids, against 0.3 s and nothing in Arrow's hash lookup, which this uses for them.

    >>> is_in(pd.Series(["a", "b", None]), ["b", "c"]).tolist()
    [False, True, False]
    """
    if _is_arrow_text(values):
        column = pa.array(values)
        try:
            value_set = pa.array(_as_list(wanted))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            value_set = None
        if value_set is not None and (
            pa.types.is_string(value_set.type)
            or pa.types.is_large_string(value_set.type)
            or pa.types.is_null(value_set.type)
        ):
            found = pc.is_in(column, value_set=value_set.cast(column.type))
            return found.to_numpy(zero_copy_only=False).astype(bool)
    return np.asarray(values.isin(wanted), dtype=bool)


def first_positions(keys: pd.Series | pd.Index, among: pd.Series | pd.Index) -> np.ndarray:
    """For each of ``keys``, the position in ``among`` of its first occurrence there (-1 where
    it is absent).

    On the store's Arrow-backed text the lookup is Arrow's hash table, as in :func:`is_in`:
    pandas would hash both sides as Python strings (at two million trace ids a join of the
    reward results held 0.48 GB of them at its peak).

    >>> first_positions(pd.Series(["b", "z", "a"]), pd.Series(["a", "b", "a"])).tolist()
    [1, -1, 0]
    """
    if _is_arrow_text(keys) and _is_arrow_text(among):
        found = pc.index_in(pa.array(keys), value_set=pa.array(among))
        return np.asarray(found.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    among_index = pd.Index(among)
    first = ~among_index.duplicated()
    where = pd.Index(among_index[first]).get_indexer(pd.Index(keys))
    starts = np.flatnonzero(first)
    if not len(starts):
        return np.full(len(where), -1, dtype=np.int64)
    return np.where(where >= 0, starts[np.maximum(where, 0)], -1).astype(np.int64)


def lookup_join(left: pd.DataFrame, right: pd.DataFrame, on: str) -> pd.DataFrame:
    """The rows of ``left`` whose ``on`` is in ``right``, in ``left``'s order, each with the
    other columns of the first ``right`` row holding that key: ``left.merge(right.drop_duplicates(
    on), on=on)``, looked up by :func:`first_positions` instead of hashed by pandas.

    Raises:
        ValueError: a column other than ``on`` is in both frames (a merge would suffix it).

    >>> left = pd.DataFrame({"trace_id": ["b", "z", "a"], "score": [1.0, 2.0, 3.0]})
    >>> right = pd.DataFrame({"trace_id": ["a", "b", "a"], "teacher": ["T", "U", "V"]})
    >>> lookup_join(left, right, "trace_id").values.tolist()
    [['b', 1.0, 'U'], ['a', 3.0, 'T']]
    """
    both = (set(left.columns) & set(right.columns)) - {on}
    if both:
        raise ValueError(f"lookup_join: column(s) {sorted(both)} in both frames")
    positions = first_positions(left[on], right[on])
    found = positions >= 0
    out = left[found].reset_index(drop=True)
    taken = right.drop(columns=on).iloc[positions[found]].reset_index(drop=True)
    for column in taken.columns:
        out[column] = taken[column]
    return out


def text_codes(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``values.astype(str)`` as codes into its distinct strings, sorted: ``(codes, labels)``
    with ``labels[codes]`` equal to ``values.astype(str).to_numpy()``.

    The strings are made of the distinct values only. Turning every row into a Python string
    first (and hashing those) was most of the time of a rank-interval chunk's cell sums.

    >>> codes, labels = text_codes(pd.Series(["b", "a", "b", None]))
    >>> codes.tolist(), labels.tolist()
    ([1, 0, 1, 2], ['a', 'b', nan])
    """
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    # the same conversion as on the whole column, made on one row per distinct value
    as_text = pd.Series(uniques, dtype=values.dtype).astype(str).to_numpy()
    # two values may print the same; a null stays null (its own label, sorted last)
    order, labels = pd.factorize(as_text, sort=True, use_na_sentinel=False)
    return order[codes].astype(np.int64), np.asarray(labels, dtype=object)


def text_groups(columns: Sequence[pd.Series]) -> dict[tuple[str, ...], np.ndarray]:
    """The rows of each distinct tuple of the ``columns``' texts, as
    ``DataFrame({...: column.astype(str)}).groupby(names, sort=True).indices`` gives them (keys
    sorted, positions increasing, a row with a null left out), grouped by codes
    (:func:`text_codes`).

    >>> groups = text_groups([pd.Series(["b", "a", "b", None]), pd.Series(["x", "y", "x", "x"])])
    >>> {key: rows.tolist() for key, rows in groups.items()}
    {('a', 'y'): [1], ('b', 'x'): [0, 2]}
    """
    coded = [text_codes(column) for column in columns]
    n_rows = len(columns[0]) if len(columns) else 0
    key = np.zeros(n_rows, dtype=np.int64)
    named = np.ones(n_rows, dtype=bool)
    for codes, labels in coded:
        key = key * len(labels) + codes
        named &= ~pd.isna(labels)[codes]
    rows = np.flatnonzero(named)
    if not len(rows):
        return {}
    rows = rows[np.argsort(key[rows], kind="stable")]
    starts = np.flatnonzero(np.r_[True, key[rows][1:] != key[rows][:-1]])
    groups = {}
    for start, end in zip(starts, np.r_[starts[1:], len(rows)], strict=True):
        first = rows[start]
        name = tuple(str(labels[codes[first]]) for codes, labels in coded)
        groups[name] = rows[start:end]
    return groups


def _as_list(wanted: Any) -> Any:
    """``wanted`` as something :func:`pyarrow.array` takes: a set as a list, a pandas column or
    an array as is."""
    return list(wanted) if isinstance(wanted, set | frozenset | dict) else wanted
