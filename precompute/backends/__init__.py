"""Generation engines behind one interface (see :mod:`precompute.backends.base`)."""

from precompute.backends.base import (
    Completion,
    Engine,
    GenerationRequest,
    RequestError,
    StopCheck,
)
from precompute.backends.registry import ENGINES, engine_class, make_engine

__all__ = [
    "ENGINES",
    "Completion",
    "Engine",
    "GenerationRequest",
    "RequestError",
    "StopCheck",
    "engine_class",
    "make_engine",
]
