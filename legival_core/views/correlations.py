"""The correlations page's data: model- and trace-level frames, partial Spearman matrices."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from legival_core.views.common import METRICS, ranked_metrics

# ---------------------------------------------------------------------------------------------
# Correlations
# ---------------------------------------------------------------------------------------------


def model_level_frame(
    teacher_metrics: pd.DataFrame,
    trace_efficiency: pd.DataFrame | None = None,
    correct_only: bool = False,
    references: Sequence[str] = (),
    include_references: bool = False,
    support: str = "common",
) -> pd.DataFrame:
    """One row per teacher, metrics averaged over datasets (the model-level correlation input)
    as the leaderboard averages them: under ``support`` (:mod:`legival_core.stats.support`),
    by default over the datasets every teacher of the frame has a value of that metric on;
    with ``"all"`` a teacher that misses a dataset has no value (no point) for that metric.

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
    from legival_core.published.references import keep_teachers

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
    from legival_core.stats.support import ALL_DATASETS, teacher_means

    numeric = [m for m in METRICS if m in frame.columns]
    means = teacher_means(frame, numeric, support=support)
    out = means[["teacher", *numeric]].copy()
    if support == ALL_DATASETS:  # a mean over fewer datasets is not compared: no point
        for metric in numeric:
            short = means[f"{metric}_covered"] < means["n_dataset"]
            out.loc[short, metric] = np.nan
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

    Each cell is :func:`legival_core.stats.stats.partial_spearman`; the control itself is left out.
    """
    from legival_core.stats.stats import partial_spearman

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


def significance_stars(p: float, n: int | None = None) -> str:
    """``***`` p < 0.001, ``**`` p < 0.01, ``*`` p < 0.05, else empty; nothing with fewer than
    five points (:func:`legival_core.stats.stats.significance_marks`).

    >>> [significance_stars(p) for p in (0.0005, 0.005, 0.03, 0.2, float("nan"))]
    ['***', '**', '*', '', '']
    >>> significance_stars(0.0005, n=4)
    ''
    """
    from legival_core.stats.stats import significance_marks

    return significance_marks(p, n)


def stability_cells(rho: pd.DataFrame, pvalue: pd.DataFrame, counts: pd.DataFrame) -> pd.DataFrame:
    """The rank-stability matrix as text: "ρ[marks] · n N" per pair of levels, where N is the
    number of teachers the ρ rests on; significance marks only from
    :data:`legival_core.stats.stats.MIN_N_FOR_SIGNIFICANCE` teachers up
    (:func:`significance_stars`); an em dash on the diagonal, "n/a" for an undefined ρ.

    >>> levels = pd.Index(["X", "Y"])
    >>> rho = pd.DataFrame([[1.0, 1.0], [1.0, 1.0]], index=levels, columns=levels)
    >>> p = pd.DataFrame([[0.0, 0.0001], [0.0001, 0.0]], index=levels, columns=levels)
    >>> stability_cells(rho, p, pd.DataFrame(4, index=levels, columns=levels)).loc["X", "Y"]
    '+1.000 · n 4'
    >>> stability_cells(rho, p, pd.DataFrame(6, index=levels, columns=levels)).loc["X", "Y"]
    '+1.000*** · n 6'
    """
    cells = pd.DataFrame("", index=rho.index, columns=rho.columns, dtype=object)
    for a in rho.index:
        for b in rho.columns:
            if a == b:
                cells.loc[a, b] = "—"
                continue
            n = int(counts.loc[a, b])
            value = float(rho.loc[a, b])
            text = "n/a" if not np.isfinite(value) else f"{value:+.3f}"
            if np.isfinite(value):
                text += significance_stars(float(pvalue.loc[a, b]), n)
            cells.loc[a, b] = f"{text} · n {n}"
    return cells


def correlation_matrices(
    frame: pd.DataFrame, partial: bool
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """ρ, p and n (the points behind each coefficient) of the ranked metrics in ``frame`` that
    vary: Spearman (:func:`legival_core.stats.stats.spearman_matrix`) or, with ``partial``, partial
    Spearman controlling for tokens (:func:`partial_matrix`). A metric with one value has no
    rank order, so it is left out rather than shown as an undefined row. The Correlations page
    and ``lv.open(...).correlations`` both call it."""
    from legival_core.stats.stats import pairwise_counts, spearman_matrix

    columns = ranked_metrics(frame, list(METRICS))
    columns = [c for c in columns if frame[c].nunique(dropna=True) > 1]
    if partial:
        rho, pvalue = partial_matrix(frame, columns, control="tokens")
        return rho, pvalue, pairwise_counts(frame, list(rho.columns), control="tokens")
    rho, pvalue = spearman_matrix(frame, columns)
    return rho, pvalue, pairwise_counts(frame, columns)
