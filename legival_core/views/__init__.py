"""Data preparation for the app's pages: plain pandas in, plain pandas (or escaped HTML) out.

One module per page (:mod:`~legival_core.views.leaderboard`, :mod:`~legival_core.views.transfer`,
:mod:`~legival_core.views.pareto`, :mod:`~legival_core.views.correlations`,
:mod:`~legival_core.views.efficiency`, :mod:`~legival_core.views.inspector`,
:mod:`~legival_core.views.published`, :mod:`~legival_core.views.about`) plus
:mod:`~legival_core.views.common` for what several pages share, and
:mod:`~legival_core.views.board_view`, the Leaderboard's read path that the page and the
notebooks' ``lv.open`` both call; this package re-exports the per-page modules,
so ``views.leaderboard(...)`` and ``from legival_core.views import METRICS`` keep working.

The Streamlit pages under ``pages/`` only read a store, call one of these functions and draw
the result; every number shown comes from here or from the metric modules these call
(:mod:`legival_core.stats.stats`, :mod:`legival_core.metrics.transfer`,
:mod:`legival_core.metrics.transfer_curves`, :mod:`legival_core.metrics.decomposition`,
:mod:`legival_core.metrics.workload`). Nothing here imports Streamlit, so the logic is tested
without a browser; :mod:`~legival_core.views.figures` builds the charts a page and the published
snapshot share, importing Plotly only inside its functions (it is not re-exported here). The
pipeline (``precompute``) does not import this package: the table it stores lives in
:mod:`legival_core.metrics.transfer_curves`.

Model text, problem text, teacher and dataset names are untrusted: the only function that
produces HTML, :func:`trace_html`, escapes every piece of text it puts in.

References: Legi-Val (arXiv 2603.20508) for the legibility metrics and rankings; Kaiser et al.
(arXiv 2602.09805) for the efficiency decomposition.

A room of ``legival_core``: the view helpers, the app's data preparation (one module per page)
and the helpers beside it (board layout, merged boards, number formatting, the static site's
pages and the digests it is pinned to, ``site_pin``), and the app's settings (``app_config``:
which stores it may open, read-only or not). May import: store, text, grading, tasks, stats,
metrics, published, rankings, oversight, calibration. Outside the tests, only the front door
(``legival_core.results``), the app (``app.py`` and its pages) and ``precompute/publish.py``
import this room.
"""

from __future__ import annotations

from legival_core.metrics.decomposition import INSTANCE_TRACE_COLUMNS, decomposition_instances
from legival_core.metrics.trace_list import (
    store_trace_choices,
    stored_trace_choices,
    trace_choices,
)
from legival_core.metrics.transfer_curves import (
    ALL_ROWS,
    SUMMARY_COLUMNS,
    TRANSFER_CURVES_VERSION,
    TransferView,
    fresh_transfer_curves,
    hazard_histograms,
    rollouts_stamp,
    student_baseline,
    student_metrics_from_curves,
    transfer_curve_table,
    transfer_options,
    transfer_summary,
    transfer_view_from_table,
)
from legival_core.views.about import config_text, provenance_table, store_overview
from legival_core.views.common import (
    LEADERBOARD_METRICS,
    METRICS,
    RANKED_METRICS,
    STUDENT_METRICS,
    TRACE_SCORE_LABEL,
    TRACE_SCORE_NOTE,
    Metric,
    arrow_to_frame,
    filter_rows,
    metrics_profile,
    ranked_metrics,
    trace_metric_label,
)
from legival_core.views.correlations import (
    BY_CONSTRUCTION_MARK,
    FAMILY_ALPHA,
    cell_stars,
    construction_matrix,
    construction_notes,
    corrected_pairs,
    correlation_matrices,
    correlation_pairs,
    holm_matrix,
    model_level_frame,
    partial_matrix,
    significance_stars,
    stability_cells,
    stability_table,
    trace_level_frame,
    trace_pooling_note,
)
from legival_core.views.efficiency import (
    delta_log_terms,
    e0_board,
    failure_mode_table,
    workload_audits,
)
from legival_core.views.inspector import (
    LABELER_KIND_NAMES,
    LABELER_KINDS,
    NOT_STORED,
    StepPage,
    graded_answer_line,
    labeler_kind,
    labeler_legend,
    step_page,
    step_table,
    stored_leak_step,
    student_strip,
    with_lexical_flags,
    with_offline_flags,
    wrong_steps,
)
from legival_core.views.leaderboard import (
    LATEX_CAPTION,
    board_resamples,
    composite_score,
    dataset_intervals,
    efficiency_intervals,
    latex_notes,
    latex_rank_tables,
    latex_table,
    leaderboard,
    student_transfer_metrics,
    with_student,
    without_one_trace_intervals,
)
from legival_core.views.pareto import model_family, pareto_view
from legival_core.views.published import published_beside
from legival_core.views.reading import (
    stored_teacher_attribution,
    stored_trace_concentration,
    teacher_attribution_table,
    trace_html,
)
from legival_core.views.transfer import (
    first_measured_positions,
    observed_coverage,
    stored_or_computed_view,
    transfer_view,
)

__all__ = [
    "ALL_ROWS",
    "BY_CONSTRUCTION_MARK",
    "FAMILY_ALPHA",
    "INSTANCE_TRACE_COLUMNS",
    "LABELER_KINDS",
    "LABELER_KIND_NAMES",
    "LATEX_CAPTION",
    "LEADERBOARD_METRICS",
    "METRICS",
    "NOT_STORED",
    "RANKED_METRICS",
    "STUDENT_METRICS",
    "SUMMARY_COLUMNS",
    "TRACE_SCORE_LABEL",
    "TRACE_SCORE_NOTE",
    "TRANSFER_CURVES_VERSION",
    "Metric",
    "StepPage",
    "TransferView",
    "arrow_to_frame",
    "board_resamples",
    "cell_stars",
    "composite_score",
    "config_text",
    "construction_matrix",
    "construction_notes",
    "corrected_pairs",
    "correlation_matrices",
    "correlation_pairs",
    "dataset_intervals",
    "decomposition_instances",
    "delta_log_terms",
    "e0_board",
    "efficiency_intervals",
    "failure_mode_table",
    "filter_rows",
    "first_measured_positions",
    "fresh_transfer_curves",
    "graded_answer_line",
    "hazard_histograms",
    "holm_matrix",
    "labeler_kind",
    "labeler_legend",
    "latex_notes",
    "latex_rank_tables",
    "latex_table",
    "leaderboard",
    "metrics_profile",
    "model_family",
    "model_level_frame",
    "observed_coverage",
    "pareto_view",
    "partial_matrix",
    "provenance_table",
    "published_beside",
    "ranked_metrics",
    "rollouts_stamp",
    "significance_stars",
    "stability_cells",
    "stability_table",
    "step_page",
    "step_table",
    "store_overview",
    "store_trace_choices",
    "stored_leak_step",
    "stored_or_computed_view",
    "stored_teacher_attribution",
    "stored_trace_choices",
    "stored_trace_concentration",
    "student_baseline",
    "student_metrics_from_curves",
    "student_strip",
    "student_transfer_metrics",
    "teacher_attribution_table",
    "trace_choices",
    "trace_html",
    "trace_level_frame",
    "trace_metric_label",
    "trace_pooling_note",
    "transfer_curve_table",
    "transfer_options",
    "transfer_summary",
    "transfer_view",
    "transfer_view_from_table",
    "with_lexical_flags",
    "with_offline_flags",
    "with_student",
    "without_one_trace_intervals",
    "workload_audits",
    "wrong_steps",
]
