"""Several stores, one board: which store each (teacher, dataset) row of a leaderboard comes from.

A lab's board grows run by run: each run is its own store, and the board is the union of their
``teacher_metrics`` rows. A (teacher, dataset) pair that two stores both hold is ambiguous — two
runs measured the same thing, perhaps with different configs — so it is refused unless the
caller names the store that wins (``prefer``).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

__all__ = [
    "MergeConflict",
    "clashes",
    "merge_teacher_rows",
    "merged_table",
]


class MergeConflict(ValueError):
    """Two stores hold a row for one (teacher, dataset) and no preference decides it."""


def merge_teacher_rows(
    tables: Mapping[str, pd.DataFrame], prefer: str | None = None
) -> pd.DataFrame:
    """The union of several stores' ``teacher_metrics`` rows, each with a ``store`` column.

    Rule: a (teacher, dataset) pair held by one store is kept; one held by several is kept from
    ``prefer`` when ``prefer`` is among them, else :class:`MergeConflict` is raised with a
    one-line message naming the pair and the stores. Rows keep the order of ``tables``, then
    their own.

    Args:
        tables: store name -> that store's ``teacher_metrics`` table.
        prefer: the store whose row wins a clash, or None to refuse every clash.

    >>> a = pd.DataFrame({"teacher": ["x", "y"], "dataset": ["d", "d"], "fotu": [0.1, 0.2]})
    >>> b = pd.DataFrame({"teacher": ["y"], "dataset": ["d"], "fotu": [0.3]})
    >>> merge_teacher_rows({"run1": a, "run2": b}, prefer="run2")[["teacher", "store", "fotu"]]
      teacher store  fotu
    0       x  run1   0.1
    1       y  run2   0.3
    >>> merge_teacher_rows({"run1": a, "run2": b})  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    legival_core.views.board_merge.MergeConflict: teacher 'y' on dataset 'd' is in stores run1 and run2; pass --prefer run1 or --prefer run2 to choose
    """  # noqa: E501
    if prefer is not None and prefer not in tables:
        raise MergeConflict(
            f"--prefer {prefer}: no store of that name (stores: {', '.join(tables)})"
        )
    rows = _stacked(tables)
    pairs = _pairs(rows)
    keep = pd.Series(True, index=rows.index)
    for teacher, dataset, stores in clashes(tables):
        if prefer not in stores:
            choices = " or ".join(f"--prefer {s}" for s in stores)
            raise MergeConflict(
                f"teacher {teacher!r} on dataset {dataset!r} is in stores "
                f"{' and '.join(stores)}; pass {choices} to choose"
            )
        same = pd.Series(pairs.isin([(teacher, dataset)]), index=rows.index)
        keep &= ~(same & (rows["store"] != prefer))
    return rows[keep].reset_index(drop=True)


def _stacked(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    frames = [table.assign(store=name) for name, table in tables.items() if len(table)]
    if not frames:
        return pd.DataFrame(columns=["teacher", "dataset", "store"])
    return pd.concat(frames, ignore_index=True)


def _pairs(rows: pd.DataFrame) -> pd.MultiIndex:
    """Each row's (teacher, dataset) as a pair of texts. Names may hold any character (U+001F
    too), so pairs are compared as pairs, never as one joined string."""
    return pd.MultiIndex.from_arrays([rows["teacher"].astype(str), rows["dataset"].astype(str)])


def clashes(tables: Mapping[str, pd.DataFrame]) -> list[tuple[str, str, list[str]]]:
    """Every (teacher, dataset) pair held by more than one store: ``(teacher, dataset,
    stores)``, in the order the rows come (stores in ``tables``' order).

    >>> a = pd.DataFrame({"teacher": ["x", "y"], "dataset": ["d", "d"]})
    >>> clashes({"run1": a, "run2": a.iloc[1:]})
    [('y', 'd', ['run1', 'run2'])]
    """
    rows = _stacked(tables)
    pairs = _pairs(rows)
    holders = rows.groupby([pairs.get_level_values(0), pairs.get_level_values(1)], sort=False)
    found = []
    for (teacher, dataset), stores in holders["store"].agg(list).items():
        if len(stores) > 1:
            found.append((str(teacher), str(dataset), list(dict.fromkeys(stores))))
    return found


def merged_table(
    frames: Mapping[str, pd.DataFrame | None], kept: pd.DataFrame
) -> pd.DataFrame | None:
    """One table of several stores (store name -> its rows, None where it lacks the table) as
    the board ``kept`` (:func:`merge_teacher_rows`) sees it: rows keyed by teacher and dataset
    keep only the pairs ``kept`` takes from their store, so a clash decided by ``prefer`` drops
    the losing store's traces too; every row gains a ``store`` column. None when no store has
    the table.

    >>> kept = pd.DataFrame({"teacher": ["x", "y"], "dataset": ["d", "d"], "store": ["a", "b"]})
    >>> trace = pd.DataFrame({"teacher": ["x", "y"], "dataset": ["d", "d"], "tokens": [1, 2]})
    >>> merged_table({"a": trace, "b": trace}, kept)[["teacher", "store", "tokens"]]
      teacher store  tokens
    0       x     a       1
    1       y     b       2
    """
    parts = []
    for name, frame in frames.items():
        if frame is None:
            continue
        if {"teacher", "dataset"} <= set(frame.columns):
            mine = kept[kept["store"] == name]
            frame = frame[_pairs(frame).isin(_pairs(mine))]
        parts.append(frame.assign(store=name))
    if not parts:
        return None
    return pd.concat(parts, ignore_index=True)
