"""The monitoring page's data: detection scores with intervals that hold at a handful of traces.

:func:`legival_core.oversight.oversight.monitor_scores` gives precision, recall and F1 with
percentile bootstrap intervals. With one flagged trace every resample is that trace, so the
bootstrap says [1, 1]: certainty from one observation. Precision and recall are proportions (``tp``
of the ``tp + fp`` traces called invalid, ``tp`` of the ``n_invalid`` invalid ones), so they get
Wilson intervals, which stay wide at small n; F1 is not a proportion and keeps its bootstrap
interval, dropped when it rests on fewer than two traces. An undefined score (no trace called
invalid, so no precision) stays undefined: "n/a", never a bar of height 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = [
    "HEADLINE_MIN_SPREAD",
    "HEADLINE_MIN_TEACHERS",
    "MEASURES",
    "NOT_DEFINED",
    "Headline",
    "headline_blocker",
    "legibility_headlines",
    "monitor_intervals",
    "reference_bars",
    "sabotaged_choices",
    "score_table",
    "verdict_text",
]

#: What an undefined score (a zero denominator) is shown as.
NOT_DEFINED = "n/a"
#: A headline ρ(FOTU, score) needs this many teachers with both values: below five points no
#: ρ earns a significance mark either (legival_core.stats.stats.MIN_N_FOR_SIGNIFICANCE).
HEADLINE_MIN_TEACHERS = 5
#: ... and the score must span at least this much across them (max − min, in score units):
#: teachers whose recalls all sit within 0–6% are ranked by noise, not by how well they are
#: monitored.
HEADLINE_MIN_SPREAD = 0.10


def monitor_intervals(scores: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """``scores`` (a :func:`legival_core.oversight.oversight.monitor_scores` table) with the
    intervals the page draws: Wilson for precision (``tp`` of ``tp + fp``) and recall (``tp`` of
    ``n_invalid``), the bootstrap one for F1 only when ``tp + fp + fn >= 2``.

    Adds ``precision_n``, ``recall_n`` and ``f1_n`` (the observations behind each score) and
    replaces the ``_lo`` / ``_hi`` columns. A score whose ``_n`` is 0 is NaN with no interval.

    >>> s = pd.DataFrame({"tp": [1], "fp": [0], "fn": [0], "n_invalid": [1], "precision": [1.0],
    ...     "recall": [1.0], "f1": [1.0], "precision_lo": [1.0], "precision_hi": [1.0],
    ...     "recall_lo": [1.0], "recall_hi": [1.0], "f1_lo": [1.0], "f1_hi": [1.0]})
    >>> out = monitor_intervals(s)  # Wilson for 1 of 1: [1 / (1 + 1.96^2), 1]
    >>> round(float(out.precision_lo[0]), 4), float(out.precision_hi[0]), bool(out.f1_lo.isna()[0])
    (0.2065, 1.0, True)
    """
    from legival_core.stats.stats import wilson_interval

    out = scores.copy()
    tp = out["tp"].astype(int).to_numpy()
    fp = out["fp"].astype(int).to_numpy()
    fn = out["fn"].astype(int).to_numpy()
    n_invalid = out["n_invalid"].astype(int).to_numpy()
    for measure, denominators in (("precision", tp + fp), ("recall", n_invalid)):
        intervals = [wilson_interval(k, n, alpha) for k, n in zip(tp, denominators, strict=True)]
        out[f"{measure}_n"] = denominators
        out[measure] = out[measure].where(denominators > 0)
        out[f"{measure}_lo"] = [ci.lo for ci in intervals]
        out[f"{measure}_hi"] = [ci.hi for ci in intervals]
    f1_n = tp + fp + fn
    out["f1_n"] = f1_n
    out["f1"] = out["f1"].where(f1_n > 0)
    out["f1_lo"] = out["f1_lo"].where(f1_n >= 2)
    out["f1_hi"] = out["f1_hi"].where(f1_n >= 2)
    return out


def interval_text(lo: object, hi: object) -> str:
    """``[lo–hi]`` with 3 decimals, or an em dash.

    >>> interval_text(0.20655, 1.0), interval_text(float("nan"), 1.0)
    ('0.207–1.000', '—')
    """
    from legival_core.views.display import MISSING, format_number

    if pd.isna(lo) or pd.isna(hi):
        return MISSING
    return f"{format_number(lo)}–{format_number(hi)}"


def headline_blocker(legibility: Sequence[float], score: Sequence[float], name: str) -> str | None:
    """Why ρ(legibility, ``score``) across teachers may not be a headline number, or None when
    it may: at least :data:`HEADLINE_MIN_TEACHERS` teachers with both values, and ``score``
    spanning at least :data:`HEADLINE_MIN_SPREAD` across them.

    >>> headline_blocker([0.1, 0.2, 0.3, 0.4], [0.0, 0.02, 0.06, 0.04], "recall")
    'too few teachers for a correlation (4 with a value, under 5)'
    >>> headline_blocker([0.1, 0.2, 0.3, 0.4, 0.5], [0.0, 0.02, 0.06, 0.04, 0.01], "recall")
    'too little spread for a correlation (recall spans 0.000–0.060, under 0.10)'
    >>> headline_blocker([0.1, 0.2, 0.3, 0.4, 0.5], [0.0, 0.2, 0.6, 0.4, 0.1], "recall") is None
    True
    """
    x = np.asarray(legibility, dtype=np.float64)
    y = np.asarray(score, dtype=np.float64)
    both = np.isfinite(x) & np.isfinite(y)
    n = int(both.sum())
    if n < HEADLINE_MIN_TEACHERS:
        return (
            f"too few teachers for a correlation ({n} with a value, under {HEADLINE_MIN_TEACHERS})"
        )
    lo, hi = float(y[both].min()), float(y[both].max())
    if hi - lo < HEADLINE_MIN_SPREAD:
        return (
            f"too little spread for a correlation ({name} spans {lo:.3f}–{hi:.3f}, "
            f"under {HEADLINE_MIN_SPREAD:.2f})"
        )
    return None


#: The three detection scores the page shows, in its column order.
MEASURES = ("precision", "recall", "f1")


def score_table(view: pd.DataFrame) -> pd.DataFrame:
    """The page's score table from :func:`monitor_intervals` rows: each score followed by its
    95% interval as text (``"<label> 95%"``), the bound columns and the negative type left out.

    >>> view = pd.DataFrame({"teacher": ["a"], "negative_type": ["sabotage"],
    ...     "precision": [0.5], "precision_lo": [0.1], "precision_hi": [0.9],
    ...     "recall": [1.0], "recall_lo": [0.2], "recall_hi": [1.0],
    ...     "f1": [0.667], "f1_lo": [float("nan")], "f1_hi": [float("nan")]})
    >>> table = score_table(view)
    >>> list(table.columns)
    ['teacher', 'precision', 'precision 95%', 'recall', 'recall 95%', 'f1', 'F1 95%']
    >>> table.iloc[0, 2], table.iloc[0, 6]
    ('0.100–0.900', '—')
    """
    from legival_core.views.display import column_label

    intervals = {
        f"{column_label(m)} 95%": [
            interval_text(lo, hi) for lo, hi in zip(view[f"{m}_lo"], view[f"{m}_hi"], strict=True)
        ]
        for m in MEASURES
    }
    shown = view.assign(**intervals)
    order = [
        c for c in shown.columns if not c.endswith(("_lo", "_hi", " 95%")) and c != "negative_type"
    ]
    for measure in MEASURES:
        order.insert(order.index(measure) + 1, f"{column_label(measure)} 95%")
    return shown[order]


def reference_bars(
    teachers: Sequence[object], apart: Sequence[str], label: str
) -> tuple[list[str], list[bool]]:
    """The chart's bar labels and which bars are reference teachers: a teacher in ``apart``
    (reference teachers, left out of the comparison) is labelled ``"<teacher> · <label>"``.

    >>> reference_bars(["a", "human"], ["human"], "reference")
    (['a', 'human · reference'], [False, True])
    """
    wanted = {str(t) for t in apart}
    is_reference = [str(t) in wanted for t in teachers]
    labels = [
        f"{t} · {label}" if ref else str(t) for t, ref in zip(teachers, is_reference, strict=True)
    ]
    return labels, is_reference


@dataclass(frozen=True)
class Headline:
    """One ρ(FOTU, score) of the legibility panel: its value (NaN when absent), the teachers
    it rests on and why it may not be a headline (None: it may, :func:`headline_blocker`)."""

    measure: str
    rho: float
    n: int
    blocker: str | None


def legibility_headlines(rows: pd.DataFrame, points: pd.DataFrame) -> list[Headline]:
    """One :class:`Headline` per score of :data:`MEASURES`, from the correlation ``rows`` of
    one (monitor, negative type, dataset) (``measure``, ``rho``, ``n``) and the per-teacher
    ``points`` behind them (``fotu`` and each score).

    >>> rows = pd.DataFrame({"measure": ["precision", "recall"], "rho": [0.5, 0.1],
    ...     "n": [5, None]})
    >>> points = pd.DataFrame({"fotu": [0.1, 0.2, 0.3, 0.4, 0.5],
    ...     "precision": [0.0, 0.2, 0.6, 0.4, 0.1], "recall": [0.5] * 5, "f1": [0.2] * 5})
    >>> [(h.measure, h.rho, h.n, h.blocker is None) for h in legibility_headlines(rows, points)]
    [('precision', 0.5, 5, True), ('recall', 0.1, 0, False), ('f1', nan, 0, False)]
    """
    out = []
    for measure in MEASURES:
        row = rows[rows["measure"] == measure]
        rho = float(row["rho"].iloc[0]) if len(row) else float("nan")
        n = int(row["n"].iloc[0]) if len(row) and pd.notna(row["n"].iloc[0]) else 0
        blocker = headline_blocker(points["fotu"], points[measure], measure)
        out.append(Headline(measure, rho, n, blocker))
    return out


def sabotaged_choices(
    sabotaged: pd.DataFrame, kind: str | None, dataset: str | None
) -> tuple[pd.DataFrame, list[str], dict[str, str], pd.DataFrame]:
    """The sabotaged copies of ``dataset`` (None: all): the copies of injection ``kind`` by
    teacher and trace, the injection kinds there are, each copy's label (``"teacher · trace"``)
    and the copies to export (without their text).

    >>> frame = pd.DataFrame({"trace_id": ["2", "1", "3"], "teacher": ["b", "a", "a"],
    ...     "dataset": ["x", "x", "y"], "kind": ["flip", "flip", "drop"], "text": ["", "", ""]})
    >>> rows, kinds, labels, export = sabotaged_choices(frame, "flip", "x")
    >>> kinds, labels, list(export.columns)
    (['flip'], {'1': 'a · 1', '2': 'b · 2'}, ['trace_id', 'teacher', 'dataset', 'kind'])
    """
    frame = sabotaged if dataset is None else sabotaged[sabotaged["dataset"] == dataset]
    kinds = sorted(frame["kind"].unique())
    of_kind = frame[frame["kind"] == kind].sort_values(["teacher", "trace_id"])
    labels = {
        t: f"{teacher} · {t}"
        for t, teacher in zip(of_kind["trace_id"], of_kind["teacher"], strict=True)
    }
    return of_kind, kinds, labels, of_kind.drop(columns=["text"])


def verdict_text(verdicts: pd.DataFrame, variant: str) -> str:
    """What the monitor said of one variant of a trace, from its ``monitor_verdicts`` rows:
    the verdict and the blamed step, the start of a malformed reply, or "not judged".

    >>> said = pd.DataFrame({"variant": ["original", "flip"], "valid_format": [True, False],
    ...     "verdict": ["invalid", None], "blamed_step": [3.0, None], "raw": ["", "huh"]})
    >>> verdict_text(said, "original"), verdict_text(said, "flip"), verdict_text(said, "x")
    ('invalid, step 3', "malformed reply: 'huh'", 'not judged')
    """
    rows = verdicts[verdicts["variant"] == variant]
    if rows.empty:
        return "not judged"
    row = rows.iloc[0]
    if not row["valid_format"]:
        return f"malformed reply: {str(row['raw'])[:200]!r}"
    step = "" if pd.isna(row["blamed_step"]) else f", step {int(row['blamed_step'])}"
    return f"{row['verdict']}{step}"
