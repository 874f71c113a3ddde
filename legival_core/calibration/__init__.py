"""Calibration and grade review: a room of ``legival_core``.

Planted-truth calibration traces (``calibration``) and the loop that checks a grader against a
person's labels (``grade_review``).

May import: store, text, grading, tasks, stats, metrics.

It keeps the two rules of every room below the views (:mod:`legival_core`).
"""

from __future__ import annotations
