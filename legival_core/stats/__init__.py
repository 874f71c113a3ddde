"""Statistics: a room of ``legival_core``.

The statistics every metric and ranking shares: rank tables, correlations, bootstrap intervals
(``stats``). Nothing here knows what a metric means.

May import: store.

Never imports ``legival_core.views`` (the app's data preparation) nor ``legival_core.results``
(the notebooks' front door, which sits above the views).

This ``__init__`` imports nothing: import a module of the room by its full name (``from
legival_core.stats import stats``), so importing one module never loads its neighbours.
"""

from __future__ import annotations
