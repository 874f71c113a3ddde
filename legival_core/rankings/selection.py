"""What a leaderboard view is computed for: one frozen :class:`Selection`.

The Leaderboard page, the notebooks' front door (``lv.open(...).rank_intervals``) and the
``metrics`` stage that stores the default view's results (``page_results``) all name a view by
a :class:`Selection`. The stored rows are keyed by :meth:`Selection.key`, so the stage's key of
the default view and the key the page asks with are made by the same code and cannot drift.
The other pages' stored results are keyed the same way, by the key classes of
:mod:`legival_core.metrics.page_results` (:class:`~legival_core.metrics.page_results.ResultKey`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from legival_core.metrics.page_results import ResultKey

__all__ = ["BOARD_RESULTS", "RANK_RESAMPLES", "RESAMPLE_SEED", "Selection"]

#: The default view's uncertainty (issue 17): the problem resamples behind every interval and
#: rank interval, and their seed. The app's settings (:mod:`legival_core.views.app_config`), the
#: notebooks' front door and the ``metrics`` stage take these, so one default view is stored,
#: shown and asked for.
RANK_RESAMPLES = 1000
RESAMPLE_SEED = 0

#: The ``page_results`` a board selection names, and the fields of :class:`Selection` each is
#: keyed by, in the order of the stored key (the order the rows of older stores were written
#: in: changing it makes every stored row a miss).
BOARD_RESULTS: dict[str, tuple[str, ...]] = {
    # the rank and value intervals of the board (weights change the composite's)
    "board_intervals": (
        "dataset",
        "student",
        "weights",
        "n_boot",
        "seed",
        "include_references",
        "support",
    ),
    # the paired resamples behind them (the same draws serve every composite)
    "board_resamples": ("dataset", "student", "n_boot", "seed", "include_references", "support"),
    # the Pareto page's resamples: every student's rollouts, no composite
    "pareto_resamples": ("dataset", "n_boot", "seed", "include_references", "support"),
}


def _weights(weights: Mapping[str, float] | Any) -> tuple[tuple[str, float], ...]:
    """The composite's positive weights as (metric, weight) pairs in name order (the page's URL
    and cache key sort them; one order gives the same float sums)."""
    pairs = weights.items() if isinstance(weights, Mapping) else weights
    return tuple(sorted((str(m), float(w)) for m, w in pairs if float(w) > 0))


@dataclass(frozen=True)
class Selection(ResultKey):
    """One view of the leaderboard: which rows (``dataset``, ``student``; None is "All"), the
    composite's ``weights`` (metric → weight; none: no composite), the paired resamples
    (``n_boot`` draws from ``seed``), whether reference teachers are ranked
    (``include_references``) and which datasets a teacher's mean is over (``support``,
    :mod:`legival_core.stats.support`). The default is the page's first view.

    >>> Selection().key("board_intervals")
    '[null, null, [], 1000, 0, false, "common"]'
    >>> Selection(weights={"fotu": 2, "accuracy": 0}).weights
    (('fotu', 2.0),)
    >>> Selection(student="s").key("board_resamples")
    '[null, "s", 1000, 0, false, "common"]'
    """

    dataset: str | None = None
    student: str | None = None
    weights: tuple[tuple[str, float], ...] = field(default=())
    n_boot: int = RANK_RESAMPLES
    seed: int = RESAMPLE_SEED
    include_references: bool = False
    support: str = "common"

    RESULTS: ClassVar[Mapping[str, tuple[str, ...]]] = BOARD_RESULTS

    def __post_init__(self) -> None:
        # a mapping or unsorted pairs become the one spelling the keys and caches use
        object.__setattr__(self, "weights", _weights(self.weights))
        object.__setattr__(self, "n_boot", int(self.n_boot))
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "include_references", bool(self.include_references))

    @property
    def composite(self) -> dict[str, float] | None:
        """The composite's weights as a mapping, None without one."""
        return dict(self.weights) or None

    def unweighted(self) -> Selection:
        """This view without a composite: the paired resamples of every composite are the
        same draws, so they are cached and stored under this one.

        >>> Selection(weights={"fotu": 1}).unweighted() == Selection()
        True
        """
        return replace(self, weights=())

    def args(self, result: str = "board_intervals") -> tuple[Any, ...]:
        """The arguments the stored ``result`` (one of :data:`BOARD_RESULTS`) is keyed by."""
        return super().args(result)

    def key(self, result: str = "board_intervals") -> str:
        """The ``page_results`` selection text of ``result`` for this view
        (:func:`legival_core.metrics.page_results.selection_key` of :meth:`args`)."""
        return super().key(result)
