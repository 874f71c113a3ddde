"""The correlations page's data: model- and trace-level frames, partial Spearman matrices."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from legival_core.metrics.registry import metrics_in
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
        columns = [c for c in metrics_in("efficiency_means") if c in correct]
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
    columns = [c for c in metrics_in("efficiency_means") if c in trace_efficiency]
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
    number of teachers the ρ rests on; significance marks read from the Holm-adjusted p over
    the pairs of the matrix (:func:`holm_matrix`) and only from
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
    adjusted = holm_matrix(pvalue)
    for a in rho.index:
        for b in rho.columns:
            if a == b:
                cells.loc[a, b] = "—"
                continue
            n = int(counts.loc[a, b])
            value = float(rho.loc[a, b])
            text = "n/a" if not np.isfinite(value) else f"{value:+.3f}"
            if np.isfinite(value):
                text += significance_stars(float(adjusted.loc[a, b]), n)
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


#: Family-wise level the stars of a corrected matrix are read at (Holm's procedure).
FAMILY_ALPHA = 0.05
#: Marker of a cell whose pair is related by construction (never starred).
BY_CONSTRUCTION_MARK = "†"


def holm_matrix(pvalue: pd.DataFrame) -> pd.DataFrame:
    """Holm-adjusted p of every off-diagonal cell of a symmetric p matrix, corrected over the
    distinct pairs shown (each unordered pair once; the diagonal is no test and stays NaN).

    >>> cols = ["a", "b", "c"]
    >>> p = pd.DataFrame([[0.0, 0.01, 0.04], [0.01, 0.0, 0.03], [0.04, 0.03, 0.0]],
    ...     index=cols, columns=cols)
    >>> holm_matrix(p).loc["a", ["b", "c"]].round(2).tolist()  # 0.01·3, max(0.03·2, 0.04·1)
    [0.03, 0.06]
    """
    from legival_core.stats.stats import holm_adjust

    cols = list(pvalue.columns)
    upper = [(i, j) for i in range(len(cols)) for j in range(i + 1, len(cols))]
    raw = [float(pvalue.iat[i, j]) for i, j in upper]
    adjusted = holm_adjust(raw)
    out = pd.DataFrame(np.nan, index=pvalue.index, columns=pvalue.columns)
    for (i, j), value in zip(upper, adjusted, strict=True):
        out.iat[i, j] = out.iat[j, i] = value
    return out


def corrected_pairs(pvalue: pd.DataFrame) -> int:
    """How many pairs :func:`holm_matrix` corrects for: off-diagonal pairs with a defined p.

    >>> corrected_pairs(pd.DataFrame([[0.0, 0.2], [0.2, 0.0]]))
    1
    """
    values = pvalue.to_numpy(dtype=float)
    return int(np.isfinite(values[np.triu_indices_from(values, k=1)]).sum())


def construction_matrix(columns: Sequence[str]) -> pd.DataFrame:
    """For every pair of ``columns`` the reason they are related by construction
    (:data:`legival_core.metrics.metric_catalog.DERIVED_FROM`), "" when they are not.

    >>> construction_matrix(["fotu", "lift", "tokens"]).loc["fotu", "tokens"]
    ''
    """
    from legival_core.metrics.metric_catalog import construction_reason

    cols = list(columns)
    return pd.DataFrame(
        [[construction_reason(a, b) or "" for b in cols] for a in cols],
        index=cols,
        columns=cols,
        dtype=object,
    )


def construction_notes(columns: Sequence[str], label: Callable[[str], str] = str) -> list[str]:
    """``"<a>–<b>: <reason>"`` for every pair of ``columns`` related by construction
    (:func:`construction_matrix`), each name shown by ``label``: the heatmap's footnote.

    >>> construction_notes(["fotu", "tokens"])
    []
    >>> construction_notes(["fotu", "lift"], str.upper)[0][:16]
    'FOTU–LIFT: lift '
    """
    reasons = construction_matrix(columns)
    cols = list(columns)
    return [
        f"{label(a)}–{label(b)}: {reasons.loc[a, b]}"
        for i, a in enumerate(cols)
        for b in cols[i + 1 :]
        if reasons.loc[a, b]
    ]


def stability_table(frame: pd.DataFrame, metric: str, across: str) -> pd.DataFrame:
    """The rank-stability table of ``metric`` across the levels of column ``across``
    (``dataset`` or ``student``) of ``frame`` (one row per teacher and level): the
    :func:`stability_cells` of :func:`legival_core.stats.stats.rank_stability`, one row per
    level (its name in column ``across``).

    >>> frame = pd.DataFrame({"teacher": list("abcd") * 2, "dataset": ["x"] * 4 + ["y"] * 4,
    ...     "fotu": [0.1, 0.2, 0.3, 0.4, 0.2, 0.4, 0.6, 0.8]})
    >>> stability_table(frame, "fotu", "dataset").to_dict("records")[0]
    {'dataset': 'x', 'x': '—', 'y': '+1.000 · n 4'}
    """
    from legival_core.stats.stats import rank_stability, rank_stability_counts

    rho, pvalue = rank_stability(frame, metric, across=across)
    counts = rank_stability_counts(frame, metric, across=across)
    return stability_cells(rho, pvalue, counts).reset_index(names=across)


def cell_stars(p_holm: float, n: int, reason: str = "") -> str:
    """Stars of one cell from its Holm-adjusted p: none for a pair related by construction
    (``reason``), none below five points (:func:`significance_stars`).

    >>> cell_stars(0.0001, 100), cell_stars(0.0001, 100, "lift = FOTU − baseline")
    ('***', '')
    """
    return "" if reason else significance_stars(p_holm, n)


def correlation_pairs(
    rho: pd.DataFrame, pvalue: pd.DataFrame, counts: pd.DataFrame
) -> pd.DataFrame:
    """The heatmap as one row per distinct pair: ρ, n, the raw p, the Holm-adjusted p over the
    ``pairs_corrected`` pairs shown, the stars read from the adjusted p and ``by_construction``
    (the reason, "" when the pair is measured apart; such pairs get no star). The page's
    download and ``lv.open(...).correlations(value="pairs")``.

    >>> cols = ["fotu", "lift"]
    >>> rho = pd.DataFrame([[1.0, 1.0], [1.0, 1.0]], index=cols, columns=cols)
    >>> p = pd.DataFrame([[0.0, 1e-9], [1e-9, 0.0]], index=cols, columns=cols)
    >>> row = correlation_pairs(rho, p, pd.DataFrame(50, index=cols, columns=cols)).iloc[0]
    >>> row.stars, row.by_construction[:22], int(row.pairs_corrected)
    ('', 'lift = FOTU − baseline', 1)
    """
    adjusted = holm_matrix(pvalue)
    reasons = construction_matrix(rho.columns)
    m = corrected_pairs(pvalue)
    cols = list(rho.columns)
    records = []
    for i, a in enumerate(cols):
        for b in cols[i + 1 :]:
            n = int(counts.loc[a, b])
            p_holm = float(adjusted.loc[a, b])
            reason = str(reasons.loc[a, b])
            records.append(
                {
                    "metric_a": a,
                    "metric_b": b,
                    "rho": float(rho.loc[a, b]),
                    "n": n,
                    "p": float(pvalue.loc[a, b]),
                    "p_holm": p_holm,
                    "pairs_corrected": m,
                    "stars": cell_stars(p_holm, n, reason),
                    "by_construction": reason,
                }
            )
    columns = ["metric_a", "metric_b", "rho", "n", "p", "p_holm", "pairs_corrected", "stars",
               "by_construction"]  # fmt: skip
    return pd.DataFrame.from_records(records, columns=columns)


def trace_pooling_note(teacher: str | None, dataset: str | None) -> str:
    """What the points of a trace-level ρ pool: with no ``teacher`` every teacher's traces
    (and with no ``dataset`` every dataset's) form one cloud, so a ρ can come from differences
    between teachers or datasets rather than from a relation inside any one of them.

    >>> trace_pooling_note(None, None)[:60]
    'Trace level pools the traces across every teacher and every '
    >>> trace_pooling_note("gpt-4", "MATH")[:50]
    'Trace level, within one teacher (gpt-4) and one da'
    """
    if teacher is not None and dataset is not None:
        return (
            f"Trace level, within one teacher ({teacher}) and one dataset ({dataset}): each "
            "point is one of its traces."
        )
    pooled = " and ".join(
        what
        for what, chosen in (("every teacher", teacher), ("every dataset", dataset))
        if chosen is None
    )
    scope = "" if teacher is None else f" of {teacher}"
    return (
        f"Trace level pools the traces{scope} across {pooled} into one cloud: a ρ here can come "
        "from differences between them (one teacher longer and less useful than another) "
        "rather than from a relation inside any one. Pick a teacher (and a dataset) for a "
        "within-teacher ρ."
    )
