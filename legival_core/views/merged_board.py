"""The merged board of several stores, ranked as the Leaderboard ranks one store's rows.

The rows come from :func:`legival_core.views.board_merge.merge_teacher_rows` (which store holds
which (teacher, dataset), a clash refused unless ``prefer`` decides it); ranking them needs the
leaderboard's own layout (:mod:`legival_core.views.leaderboard`), so it lives here, with the
views, and both the app's merged board and ``precompute publish`` call it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from legival_core.views.board_merge import (
    MergeConflict,
    clashes,
    merge_teacher_rows,
    merged_table,
)

__all__ = ["MergedBoard", "merged_board", "merged_rank_board", "prefer_note"]


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
    tables (:func:`merged_table`; :mod:`legival_core.rankings.rank_intervals`), and, ``with_store``,
    each teacher's store(s), and config when ``kept`` has that column (a teacher may span
    runs, one per dataset: joined by ", ")."""
    from legival_core import views
    from legival_core.rankings.rank_intervals import (
        agreeing_intervals,
        interval_table,
        resample_teachers,
    )
    from legival_core.stats.support import COMMON_SUPPORT
    from legival_core.views import board as board_layout

    teacher_metrics = kept.drop(columns=["store", "config"], errors="ignore")
    # The Leaderboard page's metrics, FOTU before the leak included (the column its leak
    # warning points to).
    metrics = views.ranked_metrics(teacher_metrics, views.LEADERBOARD_METRICS)
    board = views.leaderboard(teacher_metrics, metrics, None, references, include)
    directions = {m: v.higher_is_better for m, v in views.METRICS.items()}
    resamples = None
    intervals = pd.DataFrame()
    if any(t is not None and len(t) for t in (efficiency, transfer)):
        # reference teachers are resampled for their value intervals, left out of the ranks
        # averaged over the common support as the board is; references do not narrow it
        apart = () if include else references
        resamples = resample_teachers(efficiency, transfer, metrics, n_boot, seed, outside=apart)
        intervals = agreeing_intervals(
            interval_table(resamples, directions, references=apart), board
        )
    text = board_layout.uncertainty_board(board, intervals, metrics, low_n)
    numbers = board_layout.board_numbers(board, intervals, metrics, COMMON_SUPPORT)
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
    allow_mixed_graders: bool = False,
) -> MergedBoard:
    """The merged board of the opened stores ``stores`` (name -> :class:`legival_core.store.store.
    Store`): :func:`merge_teacher_rows` of their ``teacher_metrics`` (raises
    :class:`MergeConflict` on a clash ``prefer`` does not decide), each row with its store and
    the first 12 hex digits of its store's config digest (:mod:`legival_core.views.site_pin`, as a
    published site's footer shows it), ranked by :func:`merged_rank_board`. Stores graded by
    different grader versions raise :class:`MergeConflict` unless ``allow_mixed_graders``: their
    accuracies would not mean the same thing. Reads only."""
    from legival_core.published.references import store_reference_teachers
    from legival_core.views.site_pin import canonical_digest

    if not allow_mixed_graders:
        from legival_core.grading.stamps import mixed_grader_versions

        mixed = mixed_grader_versions(stores.items())
        if mixed is not None:
            raise MergeConflict(
                f"{mixed}: their grades do not mean the same thing. Regrade the older ones "
                "(python -m precompute regrade --store DIR), or merge anyway with "
                "--allow-mixed-graders"
            )

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


def prefer_note(
    decided: Sequence[tuple[str, str, Sequence[str]]], prefer: str, named: int = 5
) -> str:
    """What ``--prefer`` decided on a merged board: the (teacher, dataset) pairs ``decided``
    held by more than one store and shown from ``prefer``, the first ``named`` of them named
    and the rest counted (a lab's second run often repeats every pair); a sentence saying it
    decided nothing when no pair is in two stores.

    >>> note = prefer_note([("t", "d", ["a", "b"]), ("u", "d", ["a", "b"])], "b", named=1)
    >>> note[:32], note[-44:]
    ('--prefer b: 2 teacher and datase', "from b: 't' on 'd' (in a and b); and 1 more.")
    >>> prefer_note([], "b")
    '--prefer b decides nothing here: no teacher and dataset is in two stores.'
    """
    if not decided:
        return f"--prefer {prefer} decides nothing here: no teacher and dataset is in two stores."
    shown = decided[:named]
    pairs = "; ".join(
        f"{teacher!r} on {dataset!r} (in {' and '.join(holders)})"
        for teacher, dataset, holders in shown
    )
    if len(decided) > len(shown):
        pairs += f"; and {len(decided) - len(shown)} more"
    return (
        f"--prefer {prefer}: {len(decided)} teacher and dataset pair(s) held by more than one "
        f"store are shown from {prefer}: {pairs}."
    )
