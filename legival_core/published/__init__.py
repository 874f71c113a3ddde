"""Published data and references: a room of ``legival_core``.

What others measured and what is not a competitor: the papers' bundled tables (``published``),
reference teachers such as a human solution (``references``) and the CogniLoad consistency check
(``cogniload_consistency``).

May import: store, text, grading, tasks, stats, metrics.

Never imports ``legival_core.views`` (the app's data preparation) nor ``legival_core.results``
(the notebooks' front door, which sits above the views).

This ``__init__`` imports nothing: import a module of the room by its full name (``from
legival_core.published import published``), so importing one module never loads its neighbours.
"""

from __future__ import annotations
