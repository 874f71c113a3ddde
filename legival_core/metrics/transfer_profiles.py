"""Transfer profiles: the named sets of rules that turn rollouts into transfer numbers.

A :class:`TransferProfile` says how prefixes are binned, which grid a curve's area is taken on,
how regressions are counted and how SOTU is normalised. ``"paper"`` follows the paper and
``"release"`` the authors' released code (docs/profiles.md); both live in :data:`PROFILES`, and
:func:`register_profile` adds more. :func:`sotu` applies a profile's SOTU to a list of hazard bins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
import pandas as pd

from legival_core.metrics.transfer_grid import (
    GRIDS,
    N_BINS,
    CurveGrid,
    Grid,
    _paper_sotu,
    _release_sotu,
    paper_bin,
    release_bin,
)

Regression = Literal["drop_rate", "any_drop"]
TraceFotu = Literal["curve", "trace_score"]


@dataclass(frozen=True)
class TransferProfile:
    """How rollouts become transfer-utility numbers.

    Attributes:
        name: registry key.
        description: one line for the app and the docs.
        bin_of: ``(k, m) -> bin index 1..50`` for the binned prefixes (``k >= 1``, and ``k = 0``
            too when ``pool_baseline``).
        keep_full_trace: keep the prefix ``k = m`` (the whole trace); the release drops it.
        grid: default per-trace grid, a key of :data:`GRIDS`.
        pooled_student_curves: teacher curve / FOTU from each student's bin means pooled over
            all traces, then a plain average over students per bin (release), instead of the
            mean of per-trace curves (paper).
        pool_baseline: the ``k = 0`` rollout (no prefix) is binned like any other prefix
            (``bin_of(0, m)``, the first bin) and counts in the curve, FOTU, hazard and
            regression (release); otherwise it is kept apart as the baseline only (paper).
        last_sample_wins: one sample per (trace, student, k): a later row replaces an earlier
            one (release); otherwise the samples are averaged (paper).
        regression: ``"drop_rate"`` = drops / (K - 1) over the binned prefixes (paper);
            ``"any_drop"`` = 1 if the trace has at least one drop from a prefix whose score is
            > 0 to one whose score is 0, else 0, so its mean is the share of traces with a drop
            (release).
        trace_fotu: per-trace ``fotu``: ``"curve"`` = mean of the trace's curve (paper);
            ``"trace_score"`` = mean correctness over all its rollouts, unbinned (release:
            it has no per-trace FOTU).
        sotu_entropy: ``(histograms [..., 50], curve_centres [...]) -> SOTU``: the normalised
            entropy of hazard histograms; ``curve_centres`` is the number of bins the
            teacher's curve has data in.
    """

    name: str
    description: str
    bin_of: Callable[[np.ndarray, np.ndarray], np.ndarray]
    keep_full_trace: bool
    grid: Grid
    pooled_student_curves: bool
    pool_baseline: bool = False
    last_sample_wins: bool = False
    regression: Regression = "drop_rate"
    trace_fotu: TraceFotu = "curve"
    sotu_entropy: Callable[[np.ndarray, np.ndarray | None], np.ndarray] = _paper_sotu


PROFILES: dict[str, TransferProfile] = {}


def register_profile(profile: TransferProfile) -> TransferProfile:
    """Add a profile to :data:`PROFILES` (the name must be new)."""
    if profile.name in PROFILES:
        raise ValueError(f"transfer profile {profile.name!r} is already registered")
    if profile.grid not in GRIDS:
        raise ValueError(f"transfer profile {profile.name!r}: unknown grid {profile.grid!r}")
    if profile.regression not in ("drop_rate", "any_drop"):
        raise ValueError(f"transfer profile {profile.name!r}: unknown regression rule")
    if profile.trace_fotu not in ("curve", "trace_score"):
        raise ValueError(f"transfer profile {profile.name!r}: unknown per-trace FOTU rule")
    PROFILES[profile.name] = profile
    return profile


register_profile(
    TransferProfile(
        name="paper",
        description=(
            "Paper: bin = ceil(50k/m), k = 0 kept apart as the baseline, k = m kept, samples "
            "averaged, interpolated curves, SOTU / log 50, regression = drops / (K - 1)."
        ),
        bin_of=paper_bin,
        keep_full_trace=True,
        grid="interpolate",
        pooled_student_curves=False,
    )
)
register_profile(
    TransferProfile(
        name="release",
        description=(
            "Authors' released code: centre = int(pct/2)*2+1 with float pct = k/m*100, k = 0 "
            "pooled into centre 1, last prefix m-1, last sample per prefix wins, student bin "
            "means averaged per bin, SOTU / log(curve centres), regression = share of traces "
            "with a drop; per-trace 'fotu' is the trace score (mean correctness, unbinned)."
        ),
        bin_of=release_bin,
        keep_full_trace=False,
        grid="observed",
        pooled_student_curves=True,
        pool_baseline=True,
        last_sample_wins=True,
        regression="any_drop",
        trace_fotu="trace_score",
        sotu_entropy=_release_sotu,
    )
)


def get_profile(profile: str | TransferProfile) -> TransferProfile:
    """Look a profile up by name (or pass one through)."""
    if isinstance(profile, TransferProfile):
        return profile
    try:
        return PROFILES[profile]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown transfer profile {profile!r} (known: {known})") from None


def as_grid(name: str | None) -> Grid | None:
    """A grid name read from a config or a table as a :data:`Grid` (None stays None), with a
    clear error for an unknown one.

    >>> as_grid("observed")
    'observed'
    """
    if name is None:
        return None
    if name not in GRIDS:
        known = ", ".join(sorted(GRIDS))
        raise ValueError(f"unknown grid {name!r} (known: {known})")
    return cast(Grid, name)


def _grid_of(profile: TransferProfile, grid: Grid | None) -> CurveGrid:
    name = profile.grid if grid is None else grid
    try:
        return GRIDS[name]
    except KeyError:
        known = ", ".join(sorted(GRIDS))
        raise ValueError(f"unknown grid {name!r} (known: {known})") from None


def sotu(
    hazard_bins: Sequence[float | None] | np.ndarray,
    profile: str | TransferProfile = "paper",
    *,
    curve_centres: int | None = None,
) -> float:
    """SOTU of a set of traces: normalised entropy of their hazard histogram.

    ``SOTU = -sum_b p_b log p_b / log 50`` with ``p_b`` the share of solved traces whose hazard
    falls in bin ``b`` (1..50); never-solved traces (None / NaN / 0) are left out. The
    ``release`` profile computes ``-sum_b p_b log(p_b + 1e-12) / log C`` instead, with ``C`` =
    ``curve_centres``, the number of bins the teacher's curve has data in (not the number of
    non-empty hazard bins; ``/ 1`` when ``C <= 1``). NaN when no trace was solved.

    Reference: Legi-Val (arXiv 2603.20508), second-order transfer utility; docs/metrics/fotu.md
    and 7 (``src/viz/db_backend.py`` of the released scripts for ``release``).

    >>> sotu([7, 7, 7, None])
    0.0
    >>> round(sotu(list(range(1, 51))), 6)
    1.0
    >>> # two hazard centres among five curve centres: log 2 / log 50 (paper), log 2 / log 5
    >>> round(sotu([1, 2]), 4), round(sotu([1, 2], "release", curve_centres=5), 4)
    (0.1772, 0.4307)
    """
    return sotu_of_histogram(hazard_histogram(hazard_bins), profile, curve_centres=curve_centres)


def hazard_histogram(hazard_bins: Sequence[float | None] | np.ndarray | pd.Series) -> np.ndarray:
    """How many of the hazard bins fall in each bin 1..50 (``int64``, length 50); never-solved
    traces (None / NaN / 0) are left out. Histograms of disjoint sets of traces add up, so
    :func:`sotu_of_histogram` of their sum is the SOTU of all of them.

    >>> hazard_histogram([3, 3, None, 0, 50])[[2, 49]].tolist()
    [2, 1]
    """
    solved, bins = solved_hazard_bins(hazard_bins)
    return np.bincount(bins[solved] - 1, minlength=N_BINS)


def solved_hazard_bins(
    hazard_bins: Sequence[float | None] | np.ndarray | pd.Series,
) -> tuple[np.ndarray, np.ndarray]:
    """Which rows were solved (a hazard bin of at least 1) and each row's bin as ``int64``
    (0 where not solved); a bin past 50 is an error.

    >>> solved, bins = solved_hazard_bins([3, None, 0])
    >>> solved.tolist(), bins.tolist()
    ([True, False, False], [3, 0, 0])
    """
    if not isinstance(hazard_bins, pd.Series):
        hazard_bins = pd.Series(list(hazard_bins), dtype=object)
    values = pd.to_numeric(hazard_bins, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    solved = ~np.isnan(values) & (values >= 1)
    if np.any(values[solved] > N_BINS):
        raise ValueError(f"hazard bins must be in 1..{N_BINS}, got {int(values[solved].max())}")
    return solved, np.where(solved, values, 0).astype(np.int64)


def sotu_of_histogram(
    histogram: np.ndarray,
    profile: str | TransferProfile = "paper",
    *,
    curve_centres: int | None = None,
) -> float:
    """:func:`sotu` of the traces whose :func:`hazard_histogram` is ``histogram``.

    >>> round(sotu_of_histogram(hazard_histogram([1, 2])), 4)
    0.1772
    """
    hist = np.asarray(histogram, dtype=np.float64)
    centres = None if curve_centres is None else np.array([curve_centres])
    return float(get_profile(profile).sotu_entropy(hist[None, :], centres)[0])
