"""Statistics: a room of ``legival_core``.

The statistics every metric and ranking shares: rank tables, correlations, bootstrap intervals
(``stats``). Nothing here knows what a metric means.

May import: store.

It keeps the two rules of every room below the views (:mod:`legival_core`).
"""

from __future__ import annotations
