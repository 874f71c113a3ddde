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

It keeps the two rules of every room below the views (:mod:`legival_core`).
"""

from __future__ import annotations
