"""Several stores, one board: which store each (teacher, dataset) row of a leaderboard comes from.

A lab's board grows run by run: each run is its own store, and the board is the union of their
``teacher_metrics`` rows. A (teacher, dataset) pair that two stores both hold is ambiguous — two
runs measured the same thing, perhaps with different configs — so it is refused unless the
caller names the store that wins (``prefer``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = [
    "MergeConflict",
    "MergedBoard",
    "clashes",
    "merge_teacher_rows",
    "merged_board",
    "merged_rank_board",
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
    legival_core.board_merge.MergeConflict: teacher 'y' on dataset 'd' is in stores run1 and run2; pass --prefer run1 or --prefer run2 to choose
    """  # noqa: E501
    if prefer is not None and prefer not in tables:
        raise MergeConflict(
            f"--prefer {prefer}: no store of that name (stores: {', '.join(tables)})"
        )
    rows = _stacked(tables)
    pair = _pair_key(rows)
    keep = pd.Series(True, index=rows.index)
    for teacher, dataset, stores in clashes(tables):
        if prefer not in stores:
            choices = " or ".join(f"--prefer {s}" for s in stores)
            raise MergeConflict(
                f"teacher {teacher!r} on dataset {dataset!r} is in stores "
                f"{' and '.join(stores)}; pass {choices} to choose"
            )
        keep &= ~((pair == f"{teacher}\x1f{dataset}") & (rows["store"] != prefer))
    return rows[keep].reset_index(drop=True)


def _stacked(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    frames = [table.assign(store=name) for name, table in tables.items() if len(table)]
    if not frames:
        return pd.DataFrame(columns=["teacher", "dataset", "store"])
    return pd.concat(frames, ignore_index=True)


def _pair_key(rows: pd.DataFrame) -> pd.Series:
    # \x1f (unit separator) cannot occur in a teacher or dataset name a store accepts
    return rows["teacher"].astype(str) + "\x1f" + rows["dataset"].astype(str)


def clashes(tables: Mapping[str, pd.DataFrame]) -> list[tuple[str, str, list[str]]]:
    """Every (teacher, dataset) pair held by more than one store: ``(teacher, dataset,
    stores)``, in the order the rows come (stores in ``tables``' order).

    >>> a = pd.DataFrame({"teacher": ["x", "y"], "dataset": ["d", "d"]})
    >>> clashes({"run1": a, "run2": a.iloc[1:]})
    [('y', 'd', ['run1', 'run2'])]
    """
    rows = _stacked(tables)
    holders = rows.groupby(_pair_key(rows), sort=False)["store"].agg(list)
    found = []
    for key, stores in holders.items():
        if len(stores) > 1:
            teacher, dataset = str(key).split("\x1f", 1)
            found.append((teacher, dataset, list(dict.fromkeys(stores))))
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
            frame = frame[_pair_key(frame).isin(set(_pair_key(mine)))]
        parts.append(frame.assign(store=name))
    if not parts:
        return None
    return pd.concat(parts, ignore_index=True)


@dataclass(frozen=True)
class MergedBoard:
    """The rank table of several stores, as the app's merged board and ``publish`` show it.

    ``text`` is the rank table's cells (value [95% interval], n, rank (rank interval)), with a
    ``store`` column when more than one store contributes; ``numbers`` the same as numbers;
    ``board``, ``intervals`` and ``resamples`` what they were made from (for further views)."""

    metrics: list[str]
    board: pd.DataFrame
    intervals: pd.DataFrame
    resamples: Any
    text: pd.DataFrame
    numbers: pd.DataFrame
    #: the kept teacher_metrics rows with ``store`` and ``config`` (the config digest, cut)
    rows: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: clashes ``prefer`` decided: (teacher, dataset, stores holding it)
    decided: list[tuple[str, str, list[str]]] = field(default_factory=list)


def merged_rank_board(
    kept: pd.DataFrame,
    efficiency: pd.DataFrame | None,
    transfer: pd.DataFrame | None,
    references: Sequence[str],
    *,
    include: bool,
    n_boot: int,
    seed: int,
    low_n: int,
    with_store: bool,
) -> MergedBoard:
    """The rank table of the merged ``kept`` rows (:func:`merge_teacher_rows`) with 95% value
    and rank intervals from ``n_boot`` paired resamples of problems over the merged per-trace
    tables (:func:`merged_table`; :mod:`legival_core.rank_intervals`), and, ``with_store``,
    each teacher's store(s), and config when ``kept`` has that column (a teacher may span
    runs, one per dataset: joined by ", ")."""
    from legival_core import board as board_layout
    from legival_core import views
    from legival_core.rank_intervals import agreeing_intervals, interval_table, resample_teachers

    teacher_metrics = kept.drop(columns=["store", "config"], errors="ignore")
    metrics = views.ranked_metrics(teacher_metrics)
    board = views.leaderboard(teacher_metrics, metrics, None, references, include)
    directions = {m: v.higher_is_better for m, v in views.METRICS.items()}
    resamples = None
    intervals = pd.DataFrame()
    if any(t is not None and len(t) for t in (efficiency, transfer)):
        # reference teachers are resampled for their value intervals, left out of the ranks
        resamples = resample_teachers(efficiency, transfer, metrics, n_boot, seed)
        apart = () if include else references
        intervals = agreeing_intervals(
            interval_table(resamples, directions, references=apart), board
        )
    text = board_layout.uncertainty_board(board, intervals, metrics, low_n)
    numbers = board_layout.board_numbers(board, intervals, metrics)
    if with_store:
        for column in ("store", "config"):
            if column not in kept:
                continue
            origin = kept.groupby(kept["teacher"].astype(str))[column].agg(
                lambda s: ", ".join(dict.fromkeys(s))
            )
            text[column] = text["teacher"].map(origin).to_numpy()
            numbers[column] = numbers["teacher"].map(origin).to_numpy()
    return MergedBoard(metrics, board, intervals, resamples, text, numbers, kept)


def merged_board(
    stores: Mapping[str, Any],
    prefer: str | None,
    *,
    include: bool,
    n_boot: int,
    seed: int,
    low_n: int,
) -> MergedBoard:
    """The merged board of the opened stores ``stores`` (name -> :class:`legival_core.store.
    Store`): :func:`merge_teacher_rows` of their ``teacher_metrics`` (raises
    :class:`MergeConflict` on a clash ``prefer`` does not decide), each row with its store and
    the first 12 hex digits of its store's config digest (:mod:`legival_core.site_pin`, as a
    published site's footer shows it), ranked by :func:`merged_rank_board`. Reads only."""
    from legival_core.references import store_reference_teachers
    from legival_core.site_pin import canonical_digest

    def read(table: str) -> dict[str, pd.DataFrame | None]:
        return {n: (s.read(table) if s.has(table) else None) for n, s in stores.items()}

    metrics = {
        n: (t if t is not None else pd.DataFrame()) for n, t in read("teacher_metrics").items()
    }
    kept = merge_teacher_rows(metrics, prefer)
    configs = {n: canonical_digest(s.manifest.get("config", {}))[:12] for n, s in stores.items()}
    kept["config"] = kept["store"].map(configs)
    references = sorted({r for s in stores.values() for r in store_reference_teachers(s)})
    made = merged_rank_board(
        kept,
        merged_table(read("trace_efficiency"), kept),
        merged_table(read("trace_transfer"), kept),
        references,
        include=include,
        n_boot=n_boot,
        seed=seed,
        low_n=low_n,
        with_store=True,
    )
    decided = clashes(metrics) if prefer is not None else []
    return MergedBoard(**{**made.__dict__, "decided": decided})
