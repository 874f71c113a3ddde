"""The precompute stages, one module each, collected in the :data:`STAGES` registry.

Importing this package registers every stage; ``python -m precompute list`` shows them in
pipeline order: problems → generate → grade → segment → embed → rollout → leaks → judge →
metrics.
"""

from __future__ import annotations

from precompute.stages import base as _base
from precompute.stages import (  # noqa: F401  (each import registers a stage)
    embed,
    generate,
    grade,
    judge,
    leaks,
    metrics,
    monitor,
    problems,
    regrade,
    reward,
    robustness,
    rollout,
    segment,
)
from precompute.stages.base import *  # noqa: F403  (base's public names, as listed in its __all__)

# The package's public names are exactly those of ``base``; one list, kept there.
__all__ = list(_base.__all__)
