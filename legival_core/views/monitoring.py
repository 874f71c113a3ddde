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

import numpy as np
import pandas as pd

__all__ = [
    "HEADLINE_MIN_SPREAD",
    "HEADLINE_MIN_TEACHERS",
    "NOT_DEFINED",
    "headline_blocker",
    "monitor_intervals",
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
