"""Rankings and their uncertainty: a room of ``legival_core``.

Teachers ranked with their uncertainty: rank intervals (``rank_intervals``; the per-cell
weighted sums every resample is computed from, ``cell_sums``; the resamples one chunk of
problems at a time, merged: ``board_partials``) and the robustness
of a ranking to resampling and to analysis choices (``robustness``, ``robustness_choices``),
and the :class:`~legival_core.rankings.selection.Selection` a leaderboard view is computed for
(``selection``).
Above the metrics and the published references, which they rank.

May import: store, text, grading, tasks, stats, metrics, published.

It keeps the two rules of every room below the views (:mod:`legival_core`).
"""

from __future__ import annotations
