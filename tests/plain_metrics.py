"""Metrics written out from SPEC's formulas with plain loops, to check stored tables against.

Deliberately independent of ``legival_core``'s vectorised code: a stored number that agrees
with these was computed by the formula, not merely by the same function twice.
"""

from __future__ import annotations

from collections.abc import Iterable


def plain_fotu(points: dict[int, float], m: int) -> float:
    """FOTU written out from SPEC §3 with loops: bin(k) = ceil(50k/m) for k >= 1, the mean
    correctness per bin, linear interpolation between observed bins, constant outside them, and
    the mean over the 50 bins. Independent of ``legival_core.transfer``'s vectorised code."""
    sums: dict[int, list[float]] = {}
    for k, correct in points.items():
        if k >= 1:
            sums.setdefault(-(-50 * k // m), []).append(correct)
    observed = sorted((b, sum(v) / len(v)) for b, v in sums.items())
    curve = []
    for b in range(1, 51):
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
    return sum(curve) / 50


def plain_redundancy(max_similarities: Iterable[float], m: int, threshold: float = 0.8) -> float:
    """SPEC §2: #{i >= 1 : r_i > τ} / (m - 1), and 0 for a one-step trace."""
    if m <= 1:
        return 0.0
    return sum(1 for r in max_similarities if r > threshold) / (m - 1)
