"""Oversight: a room of ``legival_core``.

Weak-monitor detection scores and reward-model correlations (``oversight``), the planted
errors they are measured on (``sabotage``) and the oversight pages' results for one selection
(``selections``).

May import: store, text, grading, tasks, stats, metrics.

Never imports ``legival_core.views`` (the app's data preparation) nor ``legival_core.results``
(the notebooks' front door, which sits above the views).

This ``__init__`` imports nothing: import a module of the room by its full name (``from
legival_core.oversight import oversight``), so importing one module never loads its neighbours.
"""

from __future__ import annotations
