"""Metrics written out from the formulas of docs/metrics/ with plain loops, to check stored tables
against.

Deliberately independent of ``legival_core``'s vectorised code: a stored number that agrees
with these was computed by the formula, not merely by the same function twice.
"""

from __future__ import annotations

from collections.abc import Iterable


def plain_fotu(points: dict[int, float], m: int, last_bin: int = 50) -> float:
    """FOTU written out from docs/metrics/fotu.md with loops: bin(k) = ceil(50k/m) for k >= 1, the
    mean
    correctness per bin, linear interpolation between observed bins, constant outside them, and
    the mean over the bins 1..last_bin (50). Independent of ``legival_core.metrics.transfer``'s
    vectorised code."""
    sums: dict[int, list[float]] = {}
    for k, correct in points.items():
        if k >= 1:
            sums.setdefault(-(-50 * k // m), []).append(correct)
    observed = sorted((b, sum(v) / len(v)) for b, v in sums.items())
    curve = []
    for b in range(1, last_bin + 1):
        if b <= observed[0][0]:
            curve.append(observed[0][1])
        elif b >= observed[-1][0]:
            curve.append(observed[-1][1])
        else:
            (b0, y0), (b1, y1) = next(
                (observed[i], observed[i + 1])
                for i in range(len(observed) - 1)
                if observed[i][0] <= b <= observed[i + 1][0]
            )
            curve.append(y0 + (y1 - y0) * (b - b0) / (b1 - b0))
    return sum(curve) / last_bin


def plain_fotu_before_leak(points: dict[int, float], m: int, leak_k: int | None) -> float:
    """FOTU from the prefixes k < leak_k only (all of them without a leak), averaged over the
    bins up to the last kept prefix's bin (docs/metrics/fotu-before-leak.md answer leak; the curve
    is not extended past
    it); NaN when no prefix k >= 1 comes before the leak."""
    kept = {k: c for k, c in points.items() if leak_k is None or k < leak_k}
    shown = [k for k in kept if k >= 1]
    if not shown:
        return float("nan")
    return plain_fotu(kept, m, last_bin=-(-50 * max(shown) // m))


def plain_redundancy(max_similarities: Iterable[float], m: int, threshold: float = 0.8) -> float:
    """docs/metrics/redundancy.md: #{i >= 1 : r_i > τ} / (m - 1), and 0 for a one-step trace."""
    if m <= 1:
        return 0.0
    return sum(1 for r in max_similarities if r > threshold) / (m - 1)
