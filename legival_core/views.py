"""Data preparation for the app's pages: plain pandas in, plain pandas (or escaped HTML) out.

The Streamlit pages under ``pages/`` only read a store, call one of these functions and draw
the result; every number shown comes from here or from the metric modules these call
(:mod:`legival_core.stats`, :mod:`legival_core.transfer`, :mod:`legival_core.decomposition`,
:mod:`legival_core.workload`). Nothing here imports Streamlit or Plotly, so the logic is tested
without a browser.

Model text, problem text, teacher and dataset names are untrusted: the only function that
produces HTML, :func:`trace_html`, escapes every piece of text it puts in.

References: Legi-Val (arXiv 2603.20508) for the legibility metrics and rankings; Kaiser et al.
(arXiv 2602.09805) for the efficiency decomposition.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from legival_core.transfer import CURVE_COLUMNS

__all__ = [
    "ALL_ROWS",
    "LABELER_KINDS",
    "METRICS",
    "Metric",
    "StepPage",
    "TransferView",
    "arrow_to_frame",
    "composite_score",
    "decomposition_instances",
    "delta_log_terms",
    "e0_board",
    "efficiency_intervals",
    "failure_mode_table",
    "filter_rows",
    "fresh_transfer_curves",
    "hazard_histograms",
    "labeler_kind",
    "latex_table",
    "leaderboard",
    "model_family",
    "model_level_frame",
    "pareto_view",
    "partial_matrix",
    "provenance_table",
    "published_beside",
    "ranked_metrics",
    "rollouts_stamp",
    "significance_stars",
    "step_page",
    "step_table",
    "store_overview",
    "student_baseline",
    "student_strip",
    "student_transfer_metrics",
    "trace_html",
    "trace_level_frame",
    "transfer_curve_table",
    "transfer_options",
    "transfer_summary",
    "transfer_view",
    "transfer_view_from_table",
    "with_student",
    "workload_audits",
]


# ---------------------------------------------------------------------------------------------
# The metrics the pages know about
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    """One teacher-level metric: how to label it and which direction is better."""

    name: str
    label: str
    higher_is_better: bool
    share: bool  # a fraction in [0, 1], shown as a percentage
    description: str


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("accuracy", "Accuracy", True, True, "share of traces graded correct"),
        Metric(
            "tokens",
            "Tokens",
            False,
            False,
            "mean reasoning length in tokens (the store's provenance says how they were "
            "counted: legival_core.provenance.token_sources)",
        ),
        Metric(
            "redundancy",
            "Redundancy",
            False,
            True,
            "share of steps whose best match to an earlier step exceeds τ",
        ),
        Metric(
            "backtracking",
            "Backtracking",
            False,
            True,
            "share of steps flagged as backtracking by the primary labeler",
        ),
        Metric(
            "fotu",
            "FOTU",
            True,
            True,
            "first-order transfer utility: area under the student's success curve",
        ),
        Metric(
            "sotu",
            "SOTU",
            True,
            True,
            "second-order transfer utility: normalised entropy of the hazard histogram",
        ),
        Metric(
            "regression_rate",
            "Regression",
            False,
            True,
            "share of consecutive prefixes where the student falls from right to wrong",
        ),
        Metric(
            "never_solved",
            "Never solved",
            False,
            True,
            "share of correct traces no prefix of which the student solves",
        ),
        Metric("lift", "Lift", True, True, "FOTU minus the student's baseline (k = 0)"),
        Metric(
            "fotu_before_leak",
            "FOTU before leak",
            True,
            True,
            "FOTU from the prefixes shown before the trace first states the gold answer "
            "(the student cannot just copy it)",
        ),
    )
}
#: The seven metrics of the published rank table (SPEC section 4), in its order.
RANKED_METRICS: tuple[str, ...] = (
    "accuracy",
    "tokens",
    "redundancy",
    "backtracking",
    "fotu",
    "sotu",
    "regression_rate",
)
#: What the leaderboard offers: the published seven and FOTU before the answer leaks.
LEADERBOARD_METRICS: tuple[str, ...] = (*RANKED_METRICS, "fotu_before_leak")
#: Transfer metrics that depend on the student (replaced by :func:`with_student`).
STUDENT_METRICS: tuple[str, ...] = (
    "fotu",
    "sotu",
    "regression_rate",
    "never_solved",
    "baseline",
    "fotu_before_leak",
)


def ranked_metrics(frame: pd.DataFrame, candidates: Sequence[str] = RANKED_METRICS) -> list[str]:
    """The metrics among ``candidates`` that ``frame`` has with at least one value.

    >>> ranked_metrics(pd.DataFrame({"accuracy": [0.5], "fotu": [np.nan]}))
    ['accuracy']
    """
    return [
        m
        for m in candidates
        if m in frame.columns and pd.to_numeric(frame[m], errors="coerce").notna().any()
    ]


def filter_rows(frame: pd.DataFrame, **wanted: object | Sequence[object] | None) -> pd.DataFrame:
    """Rows whose columns equal the wanted values (a list = any of them; None = no filter).

    Names that are not columns of ``frame`` are ignored, so one call serves every table.

    >>> df = pd.DataFrame({"dataset": ["a", "b", "c"], "x": [1, 2, 3]})
    >>> filter_rows(df, dataset=["a", "c"], student="s").x.tolist()
    [1, 3]
    """
    mask = np.ones(len(frame), dtype=bool)
    for column, value in wanted.items():
        if value is None or column not in frame.columns:
            continue
        values = list(value) if isinstance(value, list | tuple | set) else [value]
        mask &= frame[column].isin(values).to_numpy()
    return frame[mask] if not mask.all() else frame


# ---------------------------------------------------------------------------------------------
# Leaderboard
# ---------------------------------------------------------------------------------------------


def student_transfer_metrics(rollouts: pd.DataFrame, profile: str = "paper") -> pd.DataFrame:
    """Transfer metrics per (teacher, dataset, student), no bootstrap.

    A thin call of :func:`legival_core.transfer.teacher_metrics` grouped by student too, so a
    leaderboard can be filtered to one student and cross-student stability can be measured.
    """
    from legival_core.transfer import teacher_metrics

    if rollouts.empty:
        return pd.DataFrame(columns=["teacher", "dataset", "student", *STUDENT_METRICS])
    return teacher_metrics(
        rollouts, profile=profile, n_boot=0, by=("teacher", "dataset", "student")
    )


def with_student(
    teacher_metrics: pd.DataFrame, per_student: pd.DataFrame, student: str | None
) -> pd.DataFrame:
    """``teacher_metrics`` with its transfer columns taken from one student.

    ``per_student`` is :func:`student_transfer_metrics`' output. With ``student`` None the
    table is returned unchanged (its transfer columns average over students). Rows without
    rollouts of that student get NaN transfer values.

    >>> tm = pd.DataFrame({"teacher": ["a"], "dataset": ["d"], "accuracy": [0.9], "fotu": [0.5]})
    >>> ps = pd.DataFrame({"teacher": ["a"], "dataset": ["d"], "student": ["s"], "fotu": [0.7]})
    >>> with_student(tm, ps, "s")[["accuracy", "fotu"]].values.tolist()
    [[0.9, 0.7]]
    """
    if student is None:
        return teacher_metrics
    chosen = per_student[per_student["student"] == student]
    columns = [c for c in STUDENT_METRICS if c in chosen.columns]
    base = teacher_metrics.drop(columns=[c for c in columns if c in teacher_metrics.columns])
    merged = base.merge(
        chosen[["teacher", "dataset", *columns]], on=["teacher", "dataset"], how="left"
    )
    # A student metric the per-student table lacks is unknown for one student, not the
    # average over all of them.
    for column in STUDENT_METRICS:
        if column in teacher_metrics.columns and column not in merged.columns:
            merged[column] = np.nan
    return merged[[c for c in teacher_metrics.columns if c in merged.columns]]


def composite_score(ranks: pd.DataFrame, weights: Mapping[str, float]) -> pd.Series:
    """Weighted composite of rank scores, in [0, 1] (1 = best on every weighted metric).

    Each metric's rank r (1 = best) among the n models ranked on it becomes the score
    ``(n - r) / (n - 1)`` (1 for the best, 0 for the worst; 1 when n = 1), and the composite is
    ``sum_m w_m * score_m / sum_m w_m`` over the metrics with a positive weight that the model
    has a rank for. Ranks rather than raw values make metrics with different units comparable.
    A model with no weighted rank gets NaN.

    Args:
        ranks: a :func:`legival_core.stats.rank_table` result (``<metric>_rank`` columns).
        weights: metric -> weight >= 0.

    >>> ranks = pd.DataFrame({"accuracy_rank": [1, 2, 3], "tokens_rank": [3, 1, 2]})
    >>> # scores: accuracy 1, 0.5, 0; tokens 0, 1, 0.5; weights 2:1 -> (2*s_acc + s_tok) / 3
    >>> composite_score(ranks, {"accuracy": 2, "tokens": 1}).round(4).tolist()
    [0.6667, 0.6667, 0.1667]
    """
    from legival_core.rank_intervals import composite_scores

    # One definition of the composite: composite_scores also scores each bootstrap resample.
    columns = {
        metric: pd.to_numeric(ranks[f"{metric}_rank"], errors="coerce").to_numpy(dtype="float64")
        for metric in weights
        if f"{metric}_rank" in ranks.columns
    }
    for metric, weight in weights.items():
        if weight < 0 or not math.isfinite(weight):
            raise ValueError(f"composite_score: weight of {metric!r} must be >= 0, got {weight}")
    scores = composite_scores(columns, weights) if columns else np.full(len(ranks), np.nan)
    return pd.Series(np.broadcast_to(scores, (len(ranks),)), index=ranks.index, name="composite")


def leaderboard(
    teacher_metrics: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
    references: Sequence[str] = (),
    include_references: bool = False,
) -> pd.DataFrame:
    """The rank table of SPEC section 4 for the rows given (already filtered by dataset).

    Values are averaged over datasets per teacher, ranked (1 = best) and each rank's change
    against the accuracy rank is given (``<metric>_change = accuracy_rank - metric_rank``), by
    :func:`legival_core.stats.rank_table`. With ``weights``, a ``composite`` column
    (:func:`composite_score`) and its rank are added. ``hf_id`` is carried over where known.

    Reference teachers (``references``, see :mod:`legival_core.references`) keep a row with
    their values but no rank, no change and no composite, below the ranked teachers, and do
    not move anyone else's rank; with ``include_references`` they are ranked like the others.
    When ``references`` is given the table has a boolean ``reference`` column.

    >>> tm = pd.DataFrame({"teacher": ["a", "b", "human"], "dataset": "d",
    ...     "accuracy": [0.5, 0.4, 1.0]})
    >>> board = leaderboard(tm, references=["human"])
    >>> board[["teacher", "accuracy_rank", "reference"]].values.tolist()
    [['a', 1, False], ['b', 2, False], ['human', <NA>, True]]
    >>> leaderboard(tm, references=["human"], include_references=True).accuracy_rank.tolist()
    [1, 2, 3]
    """
    from legival_core.stats import rank_table

    chosen = list(metrics) if metrics is not None else ranked_metrics(teacher_metrics)
    chosen = [m for m in chosen if m in ranked_metrics(teacher_metrics, chosen)]
    if "accuracy" not in chosen:
        chosen.insert(0, "accuracy")
    frame = teacher_metrics[["teacher", "dataset", *chosen]]
    left_out = () if include_references else tuple(str(r) for r in references)
    table = rank_table(
        frame,
        {m: METRICS[m].higher_is_better for m in chosen if m != "accuracy"},
        references=left_out,
    )
    if "hf_id" in teacher_metrics.columns:
        ids = teacher_metrics.dropna(subset=["hf_id"]).drop_duplicates("teacher")
        table.insert(
            1, "hf_id", table["teacher"].map(dict(zip(ids["teacher"], ids["hf_id"], strict=True)))
        )
    if weights:
        ranked = ~table["teacher"].astype(str).isin(left_out)
        table["composite"] = composite_score(table, weights).where(ranked)
        table["composite_rank"] = (
            table["composite"].round(9).rank(ascending=False, method="min").astype("Int64")
        )
    if references:
        table["reference"] = table["teacher"].astype(str).isin([str(r) for r in references])
    return table


def efficiency_intervals(
    trace_efficiency: pd.DataFrame, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> pd.DataFrame:
    """Per (teacher, dataset): accuracy, tokens, redundancy and backtracking with bootstrap CIs.

    Each value is the mean over the group's traces (what ``teacher_metrics`` stores) and its
    percentile interval from :func:`legival_core.stats.bootstrap_ci` (``n_boot`` resamples of
    the traces, seeded). Long table: ``teacher, dataset, metric, value, lo, hi, n``.
    """
    from legival_core.stats import bootstrap_ci

    rows = []
    columns = [c for c in ("tokens", "redundancy", "backtracking") if c in trace_efficiency]
    frame = trace_efficiency.assign(
        accuracy=trace_efficiency["correct"].astype("Float64").astype("float64")
    )
    for (teacher, dataset), group in frame.groupby(["teacher", "dataset"], observed=True):
        for metric in ["accuracy", *columns]:
            values = pd.to_numeric(group[metric], errors="coerce").to_numpy(dtype=float)
            values = values[~np.isnan(values)]
            if not len(values):
                continue
            ci = bootstrap_ci(values, n_boot=n_boot, seed=seed, alpha=alpha)
            rows.append((teacher, dataset, metric, ci.estimate, ci.lo, ci.hi, len(values)))
    return pd.DataFrame(rows, columns=["teacher", "dataset", "metric", "value", "lo", "hi", "n"])


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def latex_table(frame: pd.DataFrame, caption: str = "", decimals: int = 3) -> str:
    """A ``tabular`` (booktabs) of ``frame`` for a paper; every cell is LaTeX-escaped.

    >>> print(latex_table(pd.DataFrame({"teacher": ["a_b"], "fotu": [0.51234]})))
    \\begin{tabular}{lr}
    \\toprule
    teacher & fotu \\\\
    \\midrule
    a\\_b & 0.512 \\\\
    \\bottomrule
    \\end{tabular}
    """

    def cell(value: object) -> str:
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            return "--"
        if isinstance(value, float | np.floating):
            return f"{float(value):.{decimals}f}"
        return _latex_escape(str(value))

    align = "".join("r" if pd.api.types.is_numeric_dtype(frame[c]) else "l" for c in frame.columns)
    lines = [
        f"\\begin{{tabular}}{{{align}}}",
        "\\toprule",
        " & ".join(_latex_escape(str(c)) for c in frame.columns) + " \\\\",
        "\\midrule",
    ]
    for row in frame.itertuples(index=False):
        lines.append(" & ".join(cell(v) for v in row) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    if caption:
        lines = [
            "\\begin{table}",
            "\\centering",
            *lines,
            f"\\caption{{{_latex_escape(caption)}}}",
            "\\end{table}",
        ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Transfer curves
# ---------------------------------------------------------------------------------------------


def hazard_histograms(trace_transfer: pd.DataFrame, by: str = "teacher") -> pd.DataFrame:
    """Share of each teacher's (trace, student) pairs whose hazard falls in each bin.

    Long table ``<by>, bin (1..50), share`` plus one row per group with ``bin`` 0 holding the
    never-solved share; shares of a group add up to 1 over bins 0..50. SOTU is the normalised
    entropy of the bins 1..50 part (Legi-Val, arXiv 2603.20508).

    >>> tt = pd.DataFrame({"teacher": "T", "hazard_bin": pd.array([3, 3, None, 50], "Int64"),
    ...                    "fotu": 0.5})
    >>> h = hazard_histograms(tt)
    >>> h[h.share > 0][["bin", "share"]].values.tolist()
    [[0.0, 0.25], [3.0, 0.5], [50.0, 0.25]]
    """
    from legival_core.transfer import N_BINS

    rows = []
    # Pairs without any prefix k >= 1 (NaN FOTU) have no hazard to report.
    usable = (
        trace_transfer[trace_transfer["fotu"].notna()]
        if "fotu" in trace_transfer
        else (trace_transfer)
    )
    for key, group in usable.groupby(by, observed=True, sort=True):
        bins = pd.array(group["hazard_bin"], dtype="Int64").to_numpy(dtype=np.int64, na_value=0)
        counts = np.bincount(bins, minlength=N_BINS + 1)[: N_BINS + 1]
        shares = counts / max(1, len(bins))
        rows.append(pd.DataFrame({by: key, "bin": np.arange(N_BINS + 1), "share": shares}))
    if not rows:
        return pd.DataFrame(columns=[by, "bin", "share"])
    return pd.concat(rows, ignore_index=True)


def transfer_summary(
    curves: pd.DataFrame, per_trace: pd.DataFrame, profile: str = "paper"
) -> pd.DataFrame:
    """Per teacher: FOTU, SOTU, never-solved share and baseline, from what the curves page has.

    ``curves`` is :func:`legival_core.transfer.curve` by teacher and ``per_trace`` is
    :func:`legival_core.transfer.trace_metrics` on the same rollouts, so no third pass over
    the rollouts is needed: FOTU = mean of μ_T over the (non-empty) bins; SOTU = mean over
    the students with a solved trace of :func:`legival_core.transfer.sotu` of their hazards
    (``release``: divided by log of the number of bins μ_T has data in); never solved = mean over
    students of the share of traces without a hazard; regression rate = mean over students of
    the mean over traces; baseline = the curve's baseline. These
    equal :func:`legival_core.transfer.teacher_metrics` grouped by teacher.
    """
    from legival_core.transfer import sotu

    usable = per_trace[per_trace["fotu"].notna()]
    rows = []
    for teacher, group in curves.groupby("teacher", observed=True, sort=True):
        pairs = usable[usable["teacher"] == teacher]
        by_student = pairs.groupby("student", observed=True)
        centres = int(group["mean"].notna().sum())
        per_student = np.array(
            [sotu(g["hazard_bin"], profile, curve_centres=centres) for _, g in by_student]
        )
        solved = per_student[~np.isnan(per_student)]
        rows.append(
            {
                "teacher": teacher,
                "n_traces": int(group["n_traces"].iloc[0]),
                "n_students": int(pairs["student"].nunique()),
                "fotu": float(np.nanmean(group["mean"].to_numpy(dtype=float))),
                "sotu": float(solved.mean()) if len(solved) else math.nan,
                "never_solved": float(
                    by_student["hazard_bin"].apply(lambda h: h.isna().mean()).mean()
                )
                if len(pairs)
                else math.nan,
                "regression_rate": float(by_student["regression_rate"].mean().mean())
                if len(pairs)
                else math.nan,
                "baseline": float(group["baseline"].iloc[0]),
            }
        )
    out = pd.DataFrame(rows)
    if len(out):
        out["lift"] = out["fotu"] - out["baseline"]
    return out


#: Columns of the per-teacher summary the transfer page shows, in order.
SUMMARY_COLUMNS = (
    "teacher",
    "n_traces",
    "n_students",
    "fotu",
    "sotu",
    "never_solved",
    "regression_rate",
    "baseline",
    "lift",
)
#: ``dataset`` / ``student`` of a ``transfer_curves`` row that pools every dataset / student.
ALL_ROWS = "*"
_CURVE_VIEW_COLUMNS = ("teacher", *CURVE_COLUMNS)
_BAND_COLUMNS = ("lo", "hi", "baseline_lo", "baseline_hi")


@dataclass(frozen=True)
class TransferView:
    """What the transfer-curves page draws for one selection (dataset, student, profile).

    Attributes:
        curves: :func:`legival_core.transfer.curve` by teacher (teacher as text, sorted).
        hazards: :func:`hazard_histograms` of the selection's (trace, student) pairs.
        baseline: :func:`student_baseline` of the selection (the student alone, k = 0).
        summary: :func:`transfer_summary`, columns :data:`SUMMARY_COLUMNS`.
    """

    curves: pd.DataFrame
    hazards: pd.DataFrame
    baseline: float
    summary: pd.DataFrame


def _view_of(curves: pd.DataFrame, per_trace: pd.DataFrame, profile: str) -> TransferView:
    curves = curves.assign(teacher=curves["teacher"].astype(str))
    curves = curves.sort_values("teacher", kind="stable").reset_index(drop=True)
    per_trace = per_trace.assign(teacher=per_trace["teacher"].astype(str))
    summary = transfer_summary(curves, per_trace, profile)
    if summary.empty:
        summary = pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    return TransferView(
        curves=curves[list(_CURVE_VIEW_COLUMNS)],
        hazards=hazard_histograms(per_trace),
        baseline=student_baseline(per_trace),
        summary=summary[list(SUMMARY_COLUMNS)],
    )


def transfer_view(
    rollouts: pd.DataFrame,
    dataset: str | None = None,
    student: str | None = None,
    profile: str = "paper",
    n_boot: int = 200,
    seed: int = 0,
) -> TransferView:
    """The transfer page's curves, hazards, baseline and summary, computed from the rollouts.

    The rows of ``dataset`` / ``student`` (None = all) are collapsed once for both the curves
    (:func:`legival_core.transfer.curve` by teacher, ``n_boot`` resamples) and the per-trace
    table (:func:`legival_core.transfer.trace_metrics`); see
    :func:`legival_core.transfer.selection_curves`.
    """
    from legival_core.transfer import selection_curves

    selected = filter_rows(rollouts, dataset=dataset, student=student)
    ((curves, per_trace),) = selection_curves(
        selected, [{}], by="teacher", n_boot=n_boot, seed=seed, profile=profile
    )
    return _view_of(curves, per_trace, profile)


#: Label of the per-trace ``fotu`` column under a profile whose per-trace number is the
#: release's trace score (the released scripts have no per-trace FOTU).
TRACE_SCORE_LABEL = "Trace score (release)"
#: What that trace score is, for captions.
TRACE_SCORE_NOTE = (
    "Profile 'release': the authors' released code has no per-trace FOTU, so each trace's "
    "number is its trace score, the mean correctness over all its rollouts (k = 0 included, "
    "unbinned), not the area under its curve."
)


def trace_metric_label(name: str, profile: str = "paper") -> str:
    """Label of a per-trace column of ``trace_transfer`` computed with ``profile``.

    >>> trace_metric_label("fotu"), trace_metric_label("fotu", "release")
    ('FOTU', 'Trace score (release)')
    """
    from legival_core.transfer import get_profile

    if name == "fotu" and get_profile(profile).trace_fotu == "trace_score":
        return TRACE_SCORE_LABEL
    metric = METRICS.get(name)
    return metric.label if metric else name


def metrics_profile(manifest: Mapping[str, Any]) -> str:
    """The transfer profile a store's ``teacher_metrics`` / ``trace_transfer`` were computed
    with: the latest ``metrics`` provenance entry, else the stored config, else ``"paper"``.

    >>> metrics_profile({"provenance": [{"stage": "metrics", "profile": "release"}]})
    'release'
    >>> metrics_profile({"config": {"metrics": {"profile": "paper"}}, "provenance": []})
    'paper'
    """
    for entry in reversed(manifest.get("provenance") or []):
        if isinstance(entry, Mapping) and entry.get("stage") == "metrics" and entry.get("profile"):
            return str(entry["profile"])
    config = (manifest.get("config") or {}).get("metrics") or {}
    return str(config.get("profile") or "paper")


#: Version of the curve definitions behind a stored ``transfer_curves`` table. Raised when a
#: definition changes (2: the ``release`` profile pools k = 0 into centre 1, bins in floating
#: point and normalises SOTU by the curve's centres), so tables computed before are stale.
TRANSFER_CURVES_VERSION = 2


def rollouts_stamp(manifest: Mapping[str, Any]) -> str:
    """Which state of a store's ``rollouts`` table, and which curve definitions, a derived
    table was computed from.

    Every write or merge of a table raises its ``last_seq`` in the manifest, so a stored
    ``transfer_curves`` table whose stamp differs from the store's is stale; so is one made
    under an older :data:`TRANSFER_CURVES_VERSION`.

    >>> rollouts_stamp({"tables": {"rollouts": {"last_seq": 3, "rows": 120}}})
    'curves v2, seq 3, rows 120'
    """
    entry = (manifest.get("tables") or {}).get("rollouts") or {}
    seq, rows = int(entry.get("last_seq") or 0), int(entry.get("rows") or 0)
    return f"curves v{TRANSFER_CURVES_VERSION}, seq {seq}, rows {rows}"


def fresh_transfer_curves(table: pd.DataFrame, manifest: Mapping[str, Any]) -> pd.DataFrame | None:
    """``table`` (a store's ``transfer_curves``) if it was computed from the store's current
    rollouts (see :func:`rollouts_stamp`), else None.

    >>> manifest = {"tables": {"rollouts": {"last_seq": 3, "rows": 120}}}
    >>> table = pd.DataFrame({"rollouts_stamp": ["curves v2, seq 3, rows 120"]})
    >>> fresh_transfer_curves(table, manifest) is table
    True
    >>> old = pd.DataFrame({"rollouts_stamp": ["seq 3, rows 120"]})  # older definitions
    >>> fresh_transfer_curves(old, manifest) is None
    True
    >>> manifest["tables"]["rollouts"]["last_seq"] = 4  # rollouts written since
    >>> fresh_transfer_curves(table, manifest) is None
    True
    """
    if table.empty or "rollouts_stamp" not in table:
        return None
    return table if (table["rollouts_stamp"] == rollouts_stamp(manifest)).all() else None


def _check_selectable(values: Sequence[str], column: str) -> None:
    if ALL_ROWS in values:
        from legival_core.schema import SchemaError

        raise SchemaError(
            "transfer_curves",
            f"a {column} is literally named {ALL_ROWS!r}, which the table uses for 'all'",
            column=column,
        )


def transfer_curve_table(
    rollouts: pd.DataFrame,
    profiles: Sequence[str] | None = None,
    *,
    n_boot: int = 200,
    seed: int = 0,
    alpha: float = 0.05,
    stamp: str = "",
) -> pd.DataFrame:
    """Rows of the store's ``transfer_curves`` table: every view the transfer page can show.

    For each profile (default: every registered one), each dataset and each student, plus
    ``"*"`` (:data:`ALL_ROWS`) for all of them, it holds the :class:`TransferView` that
    :func:`transfer_view` computes for that selection: the mean curve with its ``n_boot``
    band (bins 1..50), the hazard shares (bin 0 = never solved), the teacher summary and the
    selection's student baseline (repeated on each of a teacher's rows). The rollouts are
    collapsed once per profile (:func:`legival_core.transfer.selection_curves`).
    ``stamp`` is :func:`rollouts_stamp` of the store the rollouts were read from.

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": ["S", "U"] * 3,
    ...     "trace_id": "a", "problem_id": "p", "k": [0, 0, 1, 1, 2, 2], "m": 2,
    ...     "correct": [0, 0, 0, 1, 1, 1]})
    >>> table = transfer_curve_table(rollouts, ["paper"], n_boot=0)
    >>> sorted(set(zip(table.dataset, table.student)))
    [('*', '*'), ('*', 'S'), ('*', 'U'), ('D', '*'), ('D', 'S'), ('D', 'U')]
    >>> view = transfer_view_from_table(table, None, "S", "paper", 0)
    >>> view.curves["mean"].iloc[[24, 37, 49]].round(2).tolist()  # 0 at bin 25, 1 at bin 50
    [0.0, 0.52, 1.0]
    >>> view.curves.equals(transfer_view(rollouts, None, "S", "paper", 0).curves)
    True
    """
    from legival_core.schema import spec
    from legival_core.transfer import PROFILES, selection_curves

    chosen = list(PROFILES) if profiles is None else list(profiles)
    datasets = sorted({str(v) for v in pd.unique(rollouts["dataset"])}) if len(rollouts) else []
    students = sorted({str(v) for v in pd.unique(rollouts["student"])}) if len(rollouts) else []
    _check_selectable(datasets, "dataset")
    _check_selectable(students, "student")
    selections = [(d, s) for d in [None, *datasets] for s in [None, *students]]
    frames = []
    for profile in chosen:
        results = selection_curves(
            rollouts,
            [{"dataset": d, "student": s} for d, s in selections],
            by="teacher",
            n_boot=n_boot,
            seed=seed,
            profile=profile,
            alpha=alpha,
        )
        for (dataset, student), (curves, per_trace) in zip(selections, results, strict=True):
            view = _view_of(curves, per_trace, profile)
            if view.curves.empty:
                continue
            rows = _view_rows(view).assign(
                profile=profile,
                dataset=ALL_ROWS if dataset is None else dataset,
                student=ALL_ROWS if student is None else student,
                n_boot=n_boot,
                seed=seed,
                alpha=alpha,
                rollouts_stamp=stamp,
            )
            frames.append(rows)
    columns = spec("transfer_curves").columns
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def _view_rows(view: TransferView) -> pd.DataFrame:
    """One :class:`TransferView` as ``transfer_curves`` rows (bins 0..50 per teacher)."""
    curves = view.curves
    never = curves.drop_duplicates("teacher").assign(bin=0, x=math.nan, mean=math.nan)
    never = never.assign(lo=math.nan, hi=math.nan)
    rows = pd.concat([never, curves], ignore_index=True)
    rows = rows.sort_values(["teacher", "bin"], kind="stable")
    hazards = view.hazards.rename(columns={"share": "hazard_share"})
    rows = rows.merge(hazards, on=["teacher", "bin"], how="left")
    summary = view.summary.drop(columns=["n_traces", "baseline"])
    rows = rows.merge(summary, on="teacher", how="left")
    return rows.assign(student_baseline=view.baseline)


def transfer_options(table: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The datasets and students a ``transfer_curves`` table has views for (sorted).

    >>> transfer_options(pd.DataFrame({"dataset": ["*", "b", "a"], "student": ["*", "s", "s"]}))
    (['a', 'b'], ['s'])
    """
    datasets = sorted({str(d) for d in table["dataset"].unique()} - {ALL_ROWS})
    students = sorted({str(s) for s in table["student"].unique()} - {ALL_ROWS})
    return datasets, students


def transfer_view_from_table(
    table: pd.DataFrame,
    dataset: str | None,
    student: str | None,
    profile: str,
    n_boot: int,
    seed: int = 0,
    alpha: float = 0.05,
) -> TransferView | None:
    """The :class:`TransferView` of one selection, read from a ``transfer_curves`` table.

    The same numbers :func:`transfer_view` computes from the rollouts; None when the table has
    no rows for the selection, or its bands come from another ``n_boot`` / ``seed`` /
    ``alpha`` (``n_boot = 0`` asks for no band and fits any table).
    """
    rows = table[
        (table["profile"] == profile).to_numpy()
        & (table["dataset"] == (ALL_ROWS if dataset is None else dataset)).to_numpy()
        & (table["student"] == (ALL_ROWS if student is None else student)).to_numpy()
    ]
    if rows.empty:
        return None
    if n_boot and not (
        (rows["n_boot"] == n_boot).all()
        and (rows["seed"] == seed).all()
        and (rows["alpha"] == alpha).all()
    ):
        return None
    rows = rows.assign(teacher=rows["teacher"].astype(str))
    rows = rows.sort_values(["teacher", "bin"], kind="stable").reset_index(drop=True)
    curve_rows = rows[rows["bin"] > 0]
    curves = pd.DataFrame(
        {
            "teacher": curve_rows["teacher"].to_numpy(dtype=object),
            "bin": curve_rows["bin"].to_numpy(dtype=np.int64),
            **{c: curve_rows[c].to_numpy(dtype=np.float64) for c in _CURVE_VIEW_COLUMNS[2:-1]},
            "n_traces": curve_rows["n_traces"].to_numpy(dtype=np.int64),
        }
    ).assign(teacher=lambda f: f["teacher"].astype(str))
    if not n_boot:
        curves[list(_BAND_COLUMNS)] = math.nan
    shown = rows[rows["hazard_share"].notna()]
    hazards = pd.DataFrame(
        {
            "teacher": shown["teacher"].to_numpy(dtype=object),
            "bin": shown["bin"].to_numpy(dtype=np.int64),
            "share": shown["hazard_share"].to_numpy(dtype=np.float64),
        }
    ).assign(teacher=lambda f: f["teacher"].astype(str))
    first = rows.drop_duplicates("teacher")
    summary = pd.DataFrame(
        {
            "teacher": first["teacher"].to_numpy(dtype=object),
            "n_traces": first["n_traces"].to_numpy(dtype=np.int64),
            "n_students": first["n_students"].to_numpy(dtype=np.int64),
            **{c: first[c].to_numpy(dtype=np.float64) for c in SUMMARY_COLUMNS[3:]},
        }
    ).assign(teacher=lambda f: f["teacher"].astype(str))
    return TransferView(
        curves=curves,
        hazards=hazards,
        baseline=float(rows["student_baseline"].iloc[0]),
        summary=summary,
    )


def arrow_to_frame(table: Any, categorical: Sequence[str] = ()) -> pd.DataFrame:
    """A pyarrow table as pandas, with the ``categorical`` string columns dictionary-encoded.

    Repeated ids (teacher, student, trace_id in a rollouts table) become pandas categoricals,
    which group and factorize several times faster than plain strings.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = {}
    for name in table.column_names:
        column = table.column(name)
        if name in categorical and (
            pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        ):
            column = pc.dictionary_encode(column)
        columns[name] = column
    return pa.table(columns).to_pandas()


def student_baseline(trace_transfer: pd.DataFrame) -> float:
    """The student alone (k = 0): mean over students of the mean baseline of their traces.

    >>> tt = pd.DataFrame({"student": ["a", "a", "b"], "baseline": [0.0, 1.0, 0.0]})
    >>> student_baseline(tt)
    0.25
    """
    if trace_transfer.empty or "baseline" not in trace_transfer:
        return math.nan
    per_student = trace_transfer.groupby("student", observed=True)["baseline"].mean()
    return float(per_student.mean())


# ---------------------------------------------------------------------------------------------
# Pareto
# ---------------------------------------------------------------------------------------------

_FAMILY_WORD = re.compile(r"[A-Za-z]+")


def model_family(teacher: str, hf_id: object = None) -> str:
    """A model's family for colouring: the organisation of its Hugging Face id when known,
    else the first word of its name.

    >>> model_family("qwen3-8b", "Qwen/Qwen3-8B"), model_family("deep-r1-0528"), model_family("7")
    ('Qwen', 'deep', 'other')
    """
    if isinstance(hf_id, str) and "/" in hf_id:
        return hf_id.split("/", 1)[0]
    match = _FAMILY_WORD.search(str(teacher))
    return match.group(0).lower() if match else "other"


def pareto_view(
    table: pd.DataFrame,
    x: str,
    y: str,
    references: Sequence[str] = (),
    include_references: bool = False,
) -> pd.DataFrame:
    """The teachers of a leaderboard with a ``frontier`` flag on (``x``, ``y``) and a family.

    The frontier is :func:`legival_core.stats.pareto_front` with each axis' better direction
    taken from :data:`METRICS`; frontier rows come sorted by ``x`` so they draw as a line.
    Reference teachers stay in the table (a ``reference`` column marks them) but are never on
    the frontier and dominate no one, unless ``include_references``.

    >>> board = pd.DataFrame({"teacher": ["a", "b", "human"], "tokens": [300.0, 100.0, 50.0],
    ...     "fotu": [0.5, 0.2, 0.9]})
    >>> view = pareto_view(board, "tokens", "fotu", references=["human"])
    >>> view[["teacher", "frontier", "reference"]].values.tolist()
    [['human', False, True], ['b', True, False], ['a', True, False]]
    >>> pareto_view(board, "tokens", "fotu", ["human"], include_references=True).frontier.tolist()
    [True, False, False]
    """
    from legival_core.stats import pareto_front

    out = table.copy()
    hf = out["hf_id"] if "hf_id" in out else pd.Series(None, index=out.index, dtype=object)
    out["family"] = [model_family(t, h) for t, h in zip(out["teacher"], hf, strict=True)]
    maximize = (METRICS[x].higher_is_better, METRICS[y].higher_is_better)
    left_out = () if include_references else tuple(str(r) for r in references)
    out["frontier"] = pareto_front(out, x, y, maximize=maximize, references=left_out).to_numpy()
    out["reference"] = out["teacher"].astype(str).isin([str(r) for r in references])
    return out.sort_values([x, y], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# Correlations
# ---------------------------------------------------------------------------------------------


def model_level_frame(
    teacher_metrics: pd.DataFrame,
    trace_efficiency: pd.DataFrame | None = None,
    correct_only: bool = False,
    references: Sequence[str] = (),
    include_references: bool = False,
) -> pd.DataFrame:
    """One row per teacher, metrics averaged over datasets (the model-level correlation input).

    With ``correct_only`` the efficiency metrics (tokens, redundancy, backtracking) are
    recomputed from the correct traces of ``trace_efficiency`` only (transfer metrics are
    already correct-only) and accuracy, constant there, is dropped. Reference teachers
    (``references``) are left out, so they add no point to a teacher-level ρ, unless
    ``include_references``.

    >>> tm = pd.DataFrame({"teacher": ["a", "b", "human"], "dataset": "d",
    ...     "accuracy": [0.5, 0.4, 1.0]})
    >>> model_level_frame(tm, references=["human"]).teacher.tolist()
    ['a', 'b']
    """
    from legival_core.references import keep_teachers

    frame = keep_teachers(teacher_metrics, references, include_references).copy()
    if correct_only:
        if trace_efficiency is None or trace_efficiency.empty:
            raise ValueError("correct-only correlations need the trace_efficiency table")
        correct = trace_efficiency[trace_efficiency["correct"].fillna(False).astype(bool)]
        columns = [c for c in ("tokens", "redundancy", "backtracking") if c in correct]
        means = correct.groupby(["teacher", "dataset"], observed=True)[columns].mean()
        frame = frame.drop(columns=[*columns, "accuracy"], errors="ignore").merge(
            means.reset_index(), on=["teacher", "dataset"], how="left"
        )
    numeric = [m for m in METRICS if m in frame.columns]
    out = frame.groupby("teacher", observed=True, sort=True)[numeric].mean().reset_index()
    return out


def trace_level_frame(
    trace_efficiency: pd.DataFrame,
    trace_transfer: pd.DataFrame | None,
    correct_only: bool = False,
) -> pd.DataFrame:
    """One row per trace: efficiency metrics and transfer metrics averaged over students."""
    columns = [c for c in ("tokens", "redundancy", "backtracking") if c in trace_efficiency]
    frame = trace_efficiency[["trace_id", "teacher", "dataset", "correct", *columns]]
    if correct_only:
        frame = frame[frame["correct"].fillna(False).astype(bool)]
    if trace_transfer is not None and not trace_transfer.empty:
        transfer = trace_transfer.groupby("trace_id", observed=True)[
            ["fotu", "regression_rate", "lift"]
        ].mean()
        frame = frame.merge(transfer.reset_index(), on="trace_id", how="left")
    return frame.reset_index(drop=True)


def partial_matrix(
    frame: pd.DataFrame, columns: Sequence[str], control: str = "tokens"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Partial Spearman ρ (and p) of every pair of ``columns`` with ``control`` held fixed.

    Each cell is :func:`legival_core.stats.partial_spearman`; the control itself is left out.
    """
    from legival_core.stats import partial_spearman

    cols = [c for c in columns if c != control]
    rho = pd.DataFrame(np.nan, index=cols, columns=cols)
    pvalue = pd.DataFrame(np.nan, index=cols, columns=cols)
    for i, a in enumerate(cols):
        for b in cols[i:]:
            if a == b:
                rho.loc[a, b], pvalue.loc[a, b] = 1.0, 0.0
                continue
            result = partial_spearman(frame, a, b, control=control)
            rho.loc[a, b] = rho.loc[b, a] = result.rho
            pvalue.loc[a, b] = pvalue.loc[b, a] = result.pvalue
    return rho, pvalue


def significance_stars(p: float) -> str:
    """``***`` p < 0.001, ``**`` p < 0.01, ``*`` p < 0.05, else empty.

    >>> [significance_stars(p) for p in (0.0005, 0.005, 0.03, 0.2, float("nan"))]
    ['***', '**', '*', '', '']
    """
    if p is None or not math.isfinite(p):
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


# ---------------------------------------------------------------------------------------------
# Efficiency decomposition
# ---------------------------------------------------------------------------------------------


def decomposition_instances(
    traces: pd.DataFrame, grades: pd.DataFrame, problems: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The instances table of :func:`legival_core.decomposition.decompose` from store tables.

    One row per graded trace: ``model`` = teacher, ``benchmark`` = dataset, ``instance_id`` =
    problem id (``#sample`` appended for samples > 0), ``correct``, ``tokens`` (the trace's
    generated tokens T), ``truncated`` and the problem's native ``workload`` where known.
    """
    graded = traces.merge(grades[["trace_id", "correct"]], on="trace_id", how="inner")
    graded = graded[graded["correct"].notna()]
    sample = graded["sample"].fillna(0).astype(int) if "sample" in graded else 0
    instance = (
        graded["problem_id"]
        .astype(str)
        .where(sample == 0, graded["problem_id"].astype(str) + "#" + pd.Series(sample).astype(str))
    )
    out = pd.DataFrame(
        {
            "model": graded["teacher"].astype(str).to_numpy(),
            "benchmark": graded["dataset"].astype(str).to_numpy(),
            "instance_id": instance.to_numpy(),
            "correct": graded["correct"].astype(bool).to_numpy(),
            "tokens": pd.to_numeric(graded["tokens"], errors="coerce").to_numpy(dtype=float),
            "truncated": graded["truncated"].astype("boolean").fillna(False).to_numpy(dtype=bool)
            if "truncated" in graded
            else False,
        }
    )
    if "reasoning" in graded:
        # The trace layer (compression sigma of the reasoning text) needs the text itself.
        out["trace"] = graded["reasoning"].fillna("").astype(str).to_numpy()
    if problems is not None and "workload" in problems:
        workload = dict(zip(problems["problem_id"], problems["workload"], strict=True))
        out["workload"] = [workload.get(p) for p in graded["problem_id"]]
        out["workload"] = pd.to_numeric(out["workload"], errors="coerce")
    return out[np.isfinite(out["tokens"])].reset_index(drop=True)


def e0_board(
    decomposition: pd.DataFrame,
    references: Sequence[str] = (),
    include_references: bool = False,
) -> pd.DataFrame:
    """The E0 board: one row per (benchmark, model), ranked by E0 within each benchmark.

    Columns: benchmark, model, e0_rank, e0 (correct answers per 1,000 tokens), accuracy,
    r_ctx, r_logic, mean_tokens (E[T]), vo, kappa (where the layer has them). Reference
    teachers (``references``) keep their row but get no rank and sort last, unless
    ``include_references``.

    >>> d = pd.DataFrame({"benchmark": "b", "model": ["a", "human", "c"], "e0": [0.5, 5.8, 0.1]})
    >>> e0_board(d, ["human"])[["model", "e0_rank"]].values.tolist()
    [['a', 1], ['c', 2], ['human', <NA>]]
    """
    columns = [
        c
        for c in (
            "accuracy",
            "r_ctx",
            "r_logic",
            "mean_tokens",
            "mean_workload",
            "vo",
            "kappa",
            "coverage",
            "n_instances",
        )
        if c in decomposition
    ]
    board = decomposition[["benchmark", "model", "e0", *columns]].copy()
    left_out = () if include_references else [str(r) for r in references]
    ranked = board["e0"].where(~board["model"].astype(str).isin(left_out))
    board.insert(
        2,
        "e0_rank",
        ranked.groupby(board["benchmark"], observed=True)
        .rank(ascending=False, method="min")
        .astype("Int64"),
    )
    return board.sort_values(["benchmark", "e0_rank", "model"]).reset_index(drop=True)


def _log_ratio(model: float, reference: float) -> float:
    if not (math.isfinite(model) and math.isfinite(reference)) or model <= 0 or reference <= 0:
        return math.nan
    return math.log(model) - math.log(reference)


def delta_log_terms(row: Mapping[str, Any], reference: Mapping[str, Any]) -> pd.DataFrame:
    """The Δlog E0 waterfall of one model against a reference, from two decomposition rows.

    Δlog E0 = Δlog r_ctx + Δlog r_logic − Δlog E[W] − Δlog VŌ − Δlog κ (Kaiser et al., arXiv
    2602.09805). When a row lacks the workload terms, −Δlog E[T] stands in for the last three.
    A ``rounding`` bar holds whatever the stored terms leave over (published tables are
    rounded; on rows computed by :func:`legival_core.decomposition.decompose` it is ~0), so
    the bars always add up to the ``total``.

    Returns ``term, value, measure`` (``"relative"`` bars, then the ``"total"``).

    >>> a = {"e0": 2.0, "r_ctx": 1.0, "r_logic": 0.5, "mean_tokens": 250.0}
    >>> b = {"e0": 1.0, "r_ctx": 1.0, "r_logic": 0.5, "mean_tokens": 500.0}
    >>> t = delta_log_terms(a, b)  # tokens halve: −Δlog E[T] = log 2 = Δlog E0
    >>> [(r.term, round(r.value, 4) + 0.0) for r in t.itertuples()][2:]
    [('−Δlog E[T]', 0.6931), ('rounding', 0.0), ('Δlog E0', 0.6931)]
    """

    def term(name: str) -> tuple[float, float]:
        return float(row.get(name, math.nan)), float(reference.get(name, math.nan))

    parts = [
        ("Δlog r_ctx", _log_ratio(*term("r_ctx"))),
        ("Δlog r_logic", _log_ratio(*term("r_logic"))),
    ]
    workload = [_log_ratio(*term(n)) for n in ("mean_workload", "vo", "kappa")]
    if all(math.isfinite(v) for v in workload):
        parts += [
            ("−Δlog E[W]", -workload[0]),
            ("−Δlog VŌ", -workload[1]),
            ("−Δlog κ", -workload[2]),
        ]
    elif math.isfinite(workload[1]) and math.isfinite(workload[2]):
        # Published rows give VŌ and κ but not E[W]: E[W] = E[T] / (VŌ κ) on each side.
        dlog_tokens = _log_ratio(*term("mean_tokens"))
        parts += [
            ("−Δlog E[W]", -(dlog_tokens - workload[1] - workload[2])),
            ("−Δlog VŌ", -workload[1]),
            ("−Δlog κ", -workload[2]),
        ]
    else:
        parts.append(("−Δlog E[T]", -_log_ratio(*term("mean_tokens"))))
    total = _log_ratio(*term("e0"))
    explained = sum(v for _, v in parts)
    parts.append(("rounding", total - explained if math.isfinite(total) else math.nan))
    frame = pd.DataFrame(parts, columns=["term", "value"])
    frame["measure"] = "relative"
    total_row = pd.DataFrame({"term": ["Δlog E0"], "value": [total], "measure": ["total"]})
    return pd.concat([frame, total_row], ignore_index=True)


def failure_mode_table(decomposition: pd.DataFrame) -> pd.DataFrame:
    """Failure-mode label of every model against its benchmark's best-E0 model.

    The Δlog terms are taken from the stored rows (model vs reference), then labelled by
    :func:`legival_core.decomposition.failure_modes` (logic-, context-, verbosity- or
    redundancy-limited; the reference itself has no shortfall).
    """
    from legival_core.decomposition import failure_modes

    rows = []
    for bench, group in decomposition.groupby("benchmark", observed=True, sort=True):
        best = group.sort_values(["e0", "model"], ascending=[False, True]).iloc[0]
        for record in group.to_dict(orient="records"):

            def d(name: str, rec: dict[str, Any] = record, ref: pd.Series = best) -> float:
                return _log_ratio(float(rec.get(name, math.nan)), float(ref.get(name, math.nan)))

            rows.append(
                {
                    "benchmark": bench,
                    "model": record["model"],
                    "reference": best["model"],
                    "dlog_e0": d("e0"),
                    "dlog_r_ctx": d("r_ctx"),
                    "dlog_r_logic": d("r_logic"),
                    "dlog_tokens": d("mean_tokens"),
                    "dlog_vo": d("vo"),
                    "dlog_kappa": d("kappa"),
                }
            )
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table["failure_mode"] = failure_modes(table).to_numpy()
    return table


def workload_audits(
    instances: pd.DataFrame,
    n_splits: int = 200,
    seed: int = 0,
    references: Sequence[str] = (),
    include_references: bool = False,
) -> dict[str, pd.DataFrame]:
    """Solver-derived workload and its audits (Kaiser et al., arXiv 2602.09805).

    The pool is every model of the instances except the reference teachers (``references``:
    a human solution that carries the gold would solve every instance), unless
    ``include_references``; the references' instances are left out of the audits too.
    Returns ``"audits"`` (leave-self-out, leave-top-k for k = 1, 3, 5, and ``n_splits``
    random half-pool splits, one table) and ``"concentration"`` (top-1 solver share,
    effective number of solvers) from :mod:`legival_core.workload`.
    """
    from legival_core.references import keep_teachers
    from legival_core.workload import (
        held_out_pools,
        leave_self_out,
        leave_top_k,
        solver_concentration,
        solver_workload,
    )

    base = keep_teachers(
        instances.drop(columns=["workload"], errors="ignore"),
        references,
        include_references,
        column="model",
    )
    pool = sorted(base["model"].unique())
    audits = pd.concat(
        [
            leave_self_out(base, pool),
            leave_top_k(base, pool),
            held_out_pools(base, pool, n_splits, seed),
        ],
        ignore_index=True,
    )
    solved = solver_workload(base, pool)
    return {"audits": audits, "concentration": solver_concentration(solved)}


# ---------------------------------------------------------------------------------------------
# Trace inspector
# ---------------------------------------------------------------------------------------------

#: Kinds of backtracking labeler, each with its marker and colour in the inspector.
LABELER_KINDS: dict[str, tuple[str, str]] = {
    "judge": ("J", "#c0392b"),
    "lexical": ("L", "#d68910"),
    "human": ("H", "#7d3c98"),
    "other": ("O", "#566573"),
}


def labeler_kind(labeler: str) -> str:
    """``judge`` (``judge:<model>``), ``lexical``, ``human`` or ``other``.

    >>> [labeler_kind(x) for x in ("judge:qwen", "lexical", "human:ann", "rubric-x")]
    ['judge', 'lexical', 'human', 'other']
    """
    name = str(labeler).lower()
    for kind in ("judge", "lexical", "human"):
        if name == kind or name.startswith(kind + ":"):
            return kind
    return "other"


def step_table(
    steps: pd.DataFrame,
    similarity: pd.DataFrame | None = None,
    judgments: pd.DataFrame | None = None,
    threshold: float = 0.8,
) -> pd.DataFrame:
    """One row per step of one trace: text, tokens, redundancy and backtracking flags.

    Columns: ``step`` (0-based), ``number`` (1-based, the judge's numbering), ``text``,
    ``tokens``, ``similarity`` (r_i, NaN for step 0), ``matched_step`` (argmax j), ``redundant``
    (r_i > ``threshold``), and one boolean column per labeler kind present
    (``flag_judge``, ``flag_lexical``, ``flag_human``, ``flag_other``) from the valid judgments.
    """
    table = steps.sort_values("step")[["step", "text", "tokens"]].reset_index(drop=True)
    table.insert(1, "number", table["step"].astype(int) + 1)
    if similarity is not None and not similarity.empty:
        sims = similarity.set_index("step")
        table["similarity"] = table["step"].map(sims["max_similarity"]).astype("float64")
        table["matched_step"] = table["step"].map(sims["matched_step"]).astype("Int64")
    else:
        table["similarity"] = np.nan
        table["matched_step"] = pd.array([None] * len(table), dtype="Int64")
    table["redundant"] = (table["similarity"] > threshold).fillna(False).astype(bool)
    if judgments is not None and not judgments.empty:
        valid = judgments[judgments["valid"].fillna(False).astype(bool)]
        for labeler, flagged in zip(valid["labeler"], valid["steps"], strict=True):
            column = f"flag_{labeler_kind(labeler)}"
            if column not in table:
                table[column] = False
            numbers = (
                set()
                if flagged is None or (isinstance(flagged, float) and math.isnan(flagged))
                else {int(n) for n in flagged}
            )
            table[column] = table[column] | table["number"].isin(numbers)
    return table


def student_strip(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Students × prefixes of one trace: mean correctness at each k (k = 0: the student alone).

    >>> r = pd.DataFrame({"student": ["s"] * 4, "k": [0, 1, 2, 2], "correct": [0, 0, 1, 0]})
    >>> student_strip(r).values.tolist()
    [[0.0, 0.0, 0.5]]
    """
    if rollouts.empty:
        return pd.DataFrame()
    strip = rollouts.pivot_table(
        index="student", columns="k", values="correct", aggfunc="mean", observed=True, sort=True
    )
    strip.columns = [int(c) for c in strip.columns]
    return strip.astype("float64")


@dataclass(frozen=True)
class StepPage:
    """Which steps one page of the inspector shows: ``start`` (inclusive) to ``stop``."""

    page: int
    pages: int
    start: int
    stop: int


def step_page(m: int, page: int, per_page: int = 60) -> StepPage:
    """The slice of steps on ``page`` (1-based; out-of-range pages are clamped).

    >>> step_page(130, 3, 60), step_page(0, 5)
    (StepPage(page=3, pages=3, start=120, stop=130), StepPage(page=1, pages=1, start=0, stop=0))
    """
    if per_page < 1:
        raise ValueError(f"per_page must be >= 1, got {per_page}")
    pages = max(1, math.ceil(m / per_page))
    page = min(max(1, int(page)), pages)
    start = (page - 1) * per_page
    return StepPage(page, pages, start, min(m, start + per_page))


def _shade(similarity: float) -> str:
    """Background of a step: transparent below 0.5, then deeper orange with r_i."""
    if not math.isfinite(similarity) or similarity <= 0.5:
        return "transparent"
    alpha = min(0.55, (similarity - 0.5) * 1.1)
    return f"rgba(230,126,34,{alpha:.2f})"


def _cell(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "#d5d8dc"  # no rollout at this prefix
    return "#27ae60" if value >= 0.5 else "#e74c3c"


def trace_html(
    table: pd.DataFrame,
    *,
    anchor: str,
    start: int = 0,
    stop: int | None = None,
    leak_k: int | None = None,
    strip: pd.DataFrame | None = None,
) -> str:
    """HTML of steps ``start:stop`` of a :func:`step_table`, every piece of text escaped.

    Each step is a block shaded by its redundancy r_i; its tooltip gives r_i, the matched
    earlier step and the token count; a link jumps to the matched step (``#<anchor>-s<n>``) when
    it is on the page. Backtracking markers show which labeler kinds flagged the step
    (:data:`LABELER_KINDS`). A rule marks the answer-leak point (the teacher's prefix up to step
    ``leak_k`` already states the correct answer). With ``strip`` (:func:`student_strip`), one
    small cell per student shows the correctness after that step (green right, red wrong,
    grey no rollout), aligned to the step.

    ``anchor`` must be a simple id (letters, digits, ``-``, ``_``); it is checked, not escaped.
    """
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", anchor):
        raise ValueError(f"trace_html: anchor {anchor[:40]!r} is not a simple id")
    stop = len(table) if stop is None else stop
    shown = table.iloc[start:stop]
    on_page = set(shown["number"].astype(int))
    flag_columns = [c for c in table.columns if c.startswith("flag_")]
    students = list(strip.index) if strip is not None and not strip.empty else []
    esc = html.escape
    parts = [f'<div class="lv-trace" id="{anchor}">']
    for row in shown.itertuples(index=False):
        number = int(row.number)
        sim = float(row.similarity) if pd.notna(row.similarity) else math.nan
        matched = None if pd.isna(row.matched_step) else int(row.matched_step) + 1
        tokens = None if pd.isna(row.tokens) else int(row.tokens)
        tip = [f"step {number}"]
        if math.isfinite(sim):
            tip.append(f"similarity {sim:.2f} to step {matched}")
        if tokens is not None:
            tip.append(f"{tokens} tokens")
        markers = []
        for column in flag_columns:
            if bool(getattr(row, column)):
                kind = column.removeprefix("flag_")
                letter, colour = LABELER_KINDS[kind]
                markers.append(
                    f'<span class="lv-bt lv-bt-{kind}" title="backtracking ({kind})" '
                    f'style="background:{colour};color:white;border-radius:3px;'
                    f'padding:0 3px;margin-right:2px;font-size:0.75em">{letter}</span>'
                )
        cells = []
        for student in students:
            value = strip.loc[student].get(number, math.nan)
            value = float(value) if pd.notna(value) else math.nan
            label = "no rollout" if not math.isfinite(value) else f"correct {value:.2f}"
            cells.append(
                f'<span class="lv-cell" title="{esc(str(student))} after step {number}: {label}" '
                f'style="display:inline-block;width:8px;height:12px;margin-right:1px;'
                f'background:{_cell(value)}"></span>'
            )
        jump = ""
        if matched is not None and math.isfinite(sim):
            if matched in on_page:
                jump = (
                    f' <a class="lv-jump" href="#{anchor}-s{matched}" '
                    f'title="jump to step {matched}">↩ {matched}</a>'
                )
            else:
                jump = f' <span class="lv-jump" title="on another page">↩ {matched}</span>'
        parts.append(
            f'<div class="lv-step" id="{anchor}-s{number}" title="{esc(" · ".join(tip))}" '
            f'style="background:{_shade(sim)};padding:2px 4px;margin:1px 0;'
            f'border-left:3px solid {"#e67e22" if bool(row.redundant) else "#eaecee"}">'
            f'<span class="lv-num" style="color:#7f8c8d;font-size:0.75em;margin-right:6px">'
            f"{number}{'' if tokens is None else f' · {tokens}t'}</span>"
            f"{''.join(cells)}{''.join(markers)}"
            f'<span class="lv-text" style="white-space:pre-wrap">{esc(str(row.text))}</span>'
            f"{jump}</div>"
        )
        if leak_k is not None and number == leak_k:
            parts.append(
                '<div class="lv-leak" style="border-top:2px dashed #2874a6;color:#2874a6;'
                'font-size:0.8em;margin:2px 0">▲ the prefix up to here already states the '
                f"correct answer (leak point k = {int(leak_k)})</div>"
            )
    parts.append("</div>")
    return "".join(parts)


# ---------------------------------------------------------------------------------------------
# Published numbers and the store overview
# ---------------------------------------------------------------------------------------------


def published_beside(
    published: pd.DataFrame, mine: pd.DataFrame, metrics: Sequence[str]
) -> pd.DataFrame:
    """Published rows next to the store's rows for the same teacher and dataset.

    A store teacher matches a published model when its name or its ``hf_id`` equals the
    published short name or Hugging Face id (case-insensitive); datasets match
    case-insensitively. Columns: dataset, model, then ``<metric>_published`` and
    ``<metric>_yours`` per metric. Empty when nothing matches.
    """
    pub = published.assign(
        _model=published["model"].str.lower(),
        _hf=published["hf_id"].str.lower() if "hf_id" in published else "",
        _dataset=published["dataset"].str.lower(),
    )
    names = {
        **dict(zip(pub["_model"], pub["model"], strict=True)),
        **dict(zip(pub["_hf"], pub["model"], strict=True)),
    }
    rows = []
    for record in mine.to_dict(orient="records"):
        keys = [str(record.get("teacher", "")).lower(), str(record.get("hf_id") or "").lower()]
        model = next((names[k] for k in keys if k and k in names), None)
        if model is None:
            continue
        match = pub[(pub["model"] == model) & (pub["_dataset"] == str(record["dataset"]).lower())]
        if match.empty:
            continue
        published_row = match.iloc[0]
        row: dict[str, Any] = {
            "dataset": published_row["dataset"],
            "model": model,
            "your_teacher": record["teacher"],
        }
        for metric in metrics:
            row[f"{metric}_published"] = published_row.get(metric, math.nan)
            row[f"{metric}_yours"] = record.get(metric, math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def store_overview(manifest: Mapping[str, Any]) -> pd.DataFrame:
    """What a store holds, from its manifest: per table the rows, parts, bytes and meaning."""
    from legival_core.schema import TABLES

    rows = []
    for name, entry in sorted((manifest.get("tables") or {}).items()):
        parts = entry.get("parts") or []
        size = sum(int(p.get("bytes") or 0) for p in parts if isinstance(p, Mapping))
        spec = TABLES.get(name)
        rows.append(
            {
                "table": name,
                "rows": int(entry.get("rows") or 0),
                "parts": len(parts),
                "bytes": size,
                "description": spec.description if spec else "(unknown table)",
            }
        )
    return pd.DataFrame(rows, columns=["table", "rows", "parts", "bytes", "description"])


def provenance_table(manifest: Mapping[str, Any], *, hide_paths: bool = False) -> pd.DataFrame:
    """The manifest's provenance records as rows: time, stage, and the rest as JSON text.

    With ``hide_paths`` (a hosted app) every absolute local path in the details is cut to its
    last component (:func:`legival_core.safe_text.without_local_paths`).

    >>> record = {"time": "t0", "stage": "reward", "model": "/home/me/models/rm"}
    >>> provenance_table({"provenance": [record]}, hide_paths=True)["details"].iloc[0]
    '{"model": "…/rm"}'
    """
    from legival_core.safe_text import without_local_paths

    rows = []
    for record in manifest.get("provenance") or []:
        if not isinstance(record, Mapping):
            continue
        rest = {k: v for k, v in record.items() if k not in ("time", "stage")}
        details = json.dumps(rest, sort_keys=True, default=str)
        rows.append(
            {
                "time": str(record.get("time", "")),
                "stage": str(record.get("stage", "")),
                "details": (without_local_paths(details) if hide_paths else details)[:2000],
            }
        )
    return pd.DataFrame(rows, columns=["time", "stage", "details"])


def config_text(manifest: Mapping[str, Any], *, hide_paths: bool = False) -> str:
    """The store's experiment config as indented JSON; ``hide_paths`` as in
    :func:`provenance_table`.

    >>> print(config_text({"config": {"data": "/srv/x/problems.jsonl"}}, hide_paths=True))
    {
      "data": "…/problems.jsonl"
    }
    """
    from legival_core.safe_text import without_local_paths

    text = json.dumps(manifest.get("config") or {}, indent=2, sort_keys=True, default=str)
    return without_local_paths(text) if hide_paths else text
