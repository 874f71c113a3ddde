"""Calibration and grade review: a room of ``legival_core``.

Planted-truth calibration traces (``calibration``) and the loop that checks a grader against a
person's labels (``grade_review``).

May import: store, text, grading, tasks, stats, metrics.

Never imports ``legival_core.views`` (the app's data preparation) nor ``legival_core.results``
(the notebooks' front door, which sits above the views).

This ``__init__`` imports nothing: import a module of the room by its full name (``from
legival_core.calibration import calibration``), so importing one module never loads its
neighbours.
"""

from __future__ import annotations
