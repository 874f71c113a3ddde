"""Several stores, one board: which store each (teacher, dataset) row of a leaderboard comes from.

A lab's board grows run by run: each run is its own store, and the board is the union of their
``teacher_metrics`` rows. A (teacher, dataset) pair that two stores both hold is ambiguous — two
runs measured the same thing, perhaps with different configs — so it is refused unless the
caller names the store that wins (``prefer``).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

__all__ = ["MergeConflict", "merge_teacher_rows"]


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
    legival_core.board_merge.MergeConflict: teacher 'y' on dataset 'd' is in stores run1 and run2; pass --prefer run1 or --prefer run2 to choose
    """  # noqa: E501
    if prefer is not None and prefer not in tables:
        raise MergeConflict(
            f"--prefer {prefer}: no store of that name (stores: {', '.join(tables)})"
        )
    frames = [table.assign(store=name) for name, table in tables.items() if len(table)]
    if not frames:
        return pd.DataFrame(columns=["teacher", "dataset", "store"])
    rows = pd.concat(frames, ignore_index=True)
    pair = rows["teacher"].astype(str) + "\x1f" + rows["dataset"].astype(str)
    holders = rows.groupby(pair, sort=False)["store"].agg(list)
    keep = pd.Series(True, index=rows.index)
    for key, stores in holders.items():
        if len(stores) < 2:
            continue
        if prefer not in stores:
            teacher, dataset = key.split("\x1f", 1)
            choices = " or ".join(f"--prefer {s}" for s in stores)
            raise MergeConflict(
                f"teacher {teacher!r} on dataset {dataset!r} is in stores "
                f"{' and '.join(stores)}; pass {choices} to choose"
            )
        keep &= ~((pair == key) & (rows["store"] != prefer))
    return rows[keep].reset_index(drop=True)
