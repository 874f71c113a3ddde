"""Metrics: a room of ``legival_core``.

Every per-trace and per-teacher quantity of the Metrics pages: efficiency and redundancy
(``efficiency``, and its threshold sweep ``redundancy_sweep_view``), backtracking, transfer
utility and its curves (``transfer``, ``transfer_curves``), the answer leak (``leak_summary``),
per-step transfer attribution (``attribution``), the efficiency decomposition with its
workloads and audits (``decomposition``, ``workload``, ``trace_audits``), the catalog of
teacher-level metrics with their labels and directions (``metric_catalog``), and what the
``metrics`` stage stores for the pages' default selection, keyed by selection and stamped with
its inputs (``page_results``: the stage, the rankings, the views and the front door all read it,
so it sits here, below them).

May import: store, text, grading, tasks, stats.

Never imports ``legival_core.views`` (the app's data preparation) nor ``legival_core.results``
(the notebooks' front door, which sits above the views).

This ``__init__`` imports nothing: import a module of the room by its full name (``from
legival_core.metrics import efficiency``), so importing one module never loads its neighbours.
"""

from __future__ import annotations
