"""The precompute stages, one module each, collected in the :data:`STAGES` registry.

Importing this package registers every stage; ``python -m precompute list`` shows them in
pipeline order: problems → generate → grade → segment → embed → rollout → judge → metrics.
"""

from __future__ import annotations

from precompute.stages import (  # noqa: F401  (each import registers a stage)
    embed,
    generate,
    grade,
    judge,
    metrics,
    monitor,
    problems,
    reward,
    rollout,
    segment,
)
from precompute.stages.base import (
    STAGES,
    BatchWriter,
    EnginePool,
    StageContext,
    StageError,
    StageInfo,
    StageOption,
    StageResult,
    package_versions,
    register_stage,
    run_stage,
)

__all__ = [
    "STAGES",
    "BatchWriter",
    "EnginePool",
    "StageContext",
    "StageError",
    "StageInfo",
    "StageOption",
    "StageResult",
    "package_versions",
    "register_stage",
    "run_stage",
]
