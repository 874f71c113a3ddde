"""The Leaderboard's read path: its rows, rank table, resamples and intervals for a
:class:`~legival_core.rankings.selection.Selection`, computed once here for every front door.

The app's Leaderboard page (through ``pages.common``, which caches each call with Streamlit)
and the notebooks' ``lv.open(...)`` (:class:`legival_core.results.Results`, which caches in
itself) both call these functions on a :class:`BoardSource`: what they differ in is only how a
table is read and cached, never how a number is made. A result the ``metrics`` stage stored for
the selection (``page_results``, keyed by :meth:`Selection.key`) is read instead of computed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import pandas as pd

from legival_core.views.common import LEADERBOARD_METRICS, METRICS, filter_rows, ranked_metrics
from legival_core.views.leaderboard import (
    board_resamples,
    leaderboard,
    student_transfer_metrics,
    with_student,
)

if TYPE_CHECKING:
    from legival_core.metrics.page_results import ResultKey
    from legival_core.rankings.rank_intervals import TeacherResamples
    from legival_core.rankings.selection import Selection

__all__ = [
    "BoardSource",
    "board_rows",
    "board_table",
    "frontier_shares",
    "selection_intervals",
    "selection_resamples",
    "student_metrics",
]


class BoardSource(Protocol):
    """One store as a front door reads it (each caches its reads its own way)."""

    def table(self, table: str) -> pd.DataFrame:
        """A stored table (empty when absent); shared: never changed by the caller."""
        ...

    def has_table(self, table: str) -> bool:
        """Whether the store has rows in ``table``."""
        ...

    @property
    def reference_teachers(self) -> list[str]:
        """The store's reference teachers (unranked unless included)."""
        ...

    @property
    def profile(self) -> str:
        """The transfer profile the stored ``teacher_metrics`` were computed with."""
        ...

    def student_metrics(self, profile: str) -> pd.DataFrame:
        """Transfer metrics per (teacher, dataset, student) (:func:`student_metrics`)."""
        ...

    def stored_result(self, name: str, key: ResultKey) -> pd.DataFrame | None:
        """The ``page_results`` row ``name`` for ``key`` when it is current, else None."""
        ...


def student_metrics(
    curves: pd.DataFrame | None, rollouts: Callable[[], pd.DataFrame], profile: str
) -> pd.DataFrame:
    """Transfer metrics per (teacher, dataset, student): from the stored ``transfer_curves``
    when they are current (``curves``, None otherwise), else regrouped from every rollout
    (``rollouts`` is called only then: seconds on millions of rollouts)."""
    from legival_core.metrics.transfer_curves import student_metrics_from_curves

    if curves is not None:
        stored = student_metrics_from_curves(curves, profile)
        if len(stored):
            return stored
    return student_transfer_metrics(rollouts(), profile)


def board_rows(
    source: BoardSource, dataset: str | None, student: str | None
) -> tuple[pd.DataFrame, list[str]]:
    """The ``teacher_metrics`` rows of the selection (the transfer columns of one student when
    chosen) and the metrics they have values for, in the board's order."""
    frame = filter_rows(source.table("teacher_metrics"), dataset=dataset)
    if student is not None:
        frame = with_student(frame, source.student_metrics(source.profile), student)
    return frame, ranked_metrics(frame, LEADERBOARD_METRICS)


def board_table(
    source: BoardSource, rows: pd.DataFrame, metrics: Sequence[str], chosen: Selection
) -> pd.DataFrame:
    """The rank table of :func:`board_rows`' ``rows`` (:func:`views.leaderboard`): reference
    teachers get a row without a rank unless included; each teacher averaged over the datasets
    the selection's support names; the composite when it has weights."""
    return leaderboard(
        rows,
        list(metrics),
        chosen.composite,
        source.reference_teachers,
        chosen.include_references,
        chosen.support,
    )


def selection_resamples(
    source: BoardSource, chosen: Selection, metrics: Sequence[str]
) -> TeacherResamples | None:
    """Every ranked metric per teacher on paired resamples of the problems (the same draw for
    every teacher); None when the store has no per-trace tables. Reference teachers are drawn
    too (for their value intervals) and do not narrow the common support unless included. The
    metrics stage stores the draws of the default selection; others are drawn here."""
    from legival_core.rankings.rank_intervals import resamples_from_frame

    stored = source.stored_result("board_resamples", chosen)
    if stored is not None:
        return resamples_from_frame(stored, list(metrics))
    return board_resamples(
        source.table("trace_efficiency") if source.has_table("trace_efficiency") else None,
        source.table("trace_transfer") if source.has_table("trace_transfer") else None,
        metrics,
        chosen.dataset,
        chosen.student,
        n_boot=chosen.n_boot,
        seed=chosen.seed,
        support=chosen.support,
        outside=() if chosen.include_references else source.reference_teachers,
    )


def selection_intervals(
    source: BoardSource,
    chosen: Selection,
    board: pd.DataFrame,
    resamples: Callable[[], TeacherResamples | None],
) -> pd.DataFrame:
    """Value and rank intervals per (metric, teacher) of :func:`board_table`'s ``board``, the
    composite's too when weighted, made to agree with the board's ranks; empty without
    resamples. The default view's are read as the metrics stage stored them; others come from
    ``resamples()`` (:func:`selection_resamples`, called only then and cached by the caller,
    so new weights reuse the draws)."""
    from legival_core.rankings.rank_intervals import (
        agreeing_intervals,
        board_unranked,
        interval_table,
    )

    table = source.stored_result("board_intervals", chosen)
    if table is None:
        drawn = resamples()
        if drawn is None:
            return pd.DataFrame()
        directions = {m: METRICS[m].higher_is_better for m in METRICS}
        apart = () if chosen.include_references else source.reference_teachers
        table = interval_table(
            drawn,
            directions,
            chosen.composite,
            references=apart,
            unranked=board_unranked(board, list(drawn.metrics)),
        )
    return agreeing_intervals(table, board)


def frontier_shares(
    source: BoardSource, chosen: Selection, x: str, y: str
) -> tuple[dict[str, float], pd.DataFrame]:
    """The Pareto page's frontier of ``x`` and ``y`` under resampling, for the rows and
    choices of ``chosen`` (its weights unused): teacher → share of the paired problem
    resamples in which it is on the frontier, and the 95% value intervals of ``x`` and ``y``
    from the same draws (:func:`legival_core.views.pareto.frontier_uncertainty`). The draws of
    every metric over all datasets are stored by the metrics stage (``pareto_resamples``);
    another selection is drawn here. Both empty when the store has no per-trace tables to
    resample."""
    from legival_core.rankings.rank_intervals import resample_teachers, resamples_from_frame
    from legival_core.views.pareto import frontier_uncertainty

    stored = source.stored_result("pareto_resamples", chosen)
    if stored is not None:
        resamples = resamples_from_frame(stored, [x, y])
    else:
        efficiency, transfer = (
            filter_rows(source.table(name), dataset=chosen.dataset)
            if source.has_table(name)
            else None
            for name in ("trace_efficiency", "trace_transfer")
        )
        if all(t is None or t.empty for t in (efficiency, transfer)):
            return {}, pd.DataFrame()
        resamples = resample_teachers(
            efficiency,
            transfer,
            [x, y],
            n_boot=chosen.n_boot,
            seed=chosen.seed,
            references=source.reference_teachers,
            include_references=chosen.include_references,
            support=chosen.support,
        )
    board = leaderboard(
        filter_rows(source.table("teacher_metrics"), dataset=chosen.dataset),
        [x, y],
        None,
        source.reference_teachers,
        chosen.include_references,
        chosen.support,
    )
    return frontier_uncertainty(resamples, board, x, y)
