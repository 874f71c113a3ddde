"""Oversight: a room of ``legival_core``.

Weak-monitor detection scores and reward-model correlations (``oversight``), the planted
errors they are measured on (``sabotage``) and the oversight pages' results for one selection
(``selections``).

May import: store, text, grading, tasks, stats, metrics.

It keeps the two rules of every room below the views (:mod:`legival_core`).
"""

from __future__ import annotations
