"""Published data and references: a room of ``legival_core``.

What others measured and what is not a competitor: the papers' bundled tables (``published``),
reference teachers such as a human solution (``references``) and the CogniLoad consistency check
(``cogniload_consistency``).

May import: store, text, grading, tasks, stats, metrics.

It keeps the two rules of every room below the views (:mod:`legival_core`).
"""

from __future__ import annotations
