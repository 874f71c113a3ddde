"""Rankings and their uncertainty: a room of ``legival_core``.

Teachers ranked with their uncertainty: rank intervals (``rank_intervals``; the per-cell
weighted sums every resample is computed from, ``cell_sums``; the resamples one chunk of
problems at a time, merged: ``board_partials``) and the robustness
of a ranking to resampling and to analysis choices (``robustness``, ``robustness_choices``),
and the :class:`~legival_core.rankings.selection.Selection` a leaderboard view is computed for
(``selection``).
Above the metrics and the published references, which they rank.

May import: store, text, grading, tasks, stats, metrics, published.

Never imports ``legival_core.views`` (the app's data preparation) nor ``legival_core.results``
(the notebooks' front door, which sits above the views).

This ``__init__`` imports nothing: import a module of the room by its full name (``from
legival_core.rankings import rank_intervals``), so importing one module never loads its
neighbours.
"""

from __future__ import annotations
