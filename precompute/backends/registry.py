"""Engines by name, built lazily so that naming one never imports another's heavy deps."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from precompute.backends.base import Engine

if TYPE_CHECKING:
    # Seen by the type checker only (the modules load heavy or optional packages): every
    # registered class must satisfy the Engine protocol.
    from precompute.backends.llamacpp_engine import LlamaCppEngine
    from precompute.backends.openai_engine import OpenAIEngine
    from precompute.backends.ray_engine import RayHTTPEngine, RayVLLMEngine
    from precompute.backends.rule_student import RuleStudent
    from precompute.backends.transformers_engine import TransformersEngine
    from precompute.backends.vllm_engine import VLLMEngine

    _PROTOCOL_CHECK: tuple[type[Engine], ...] = (
        TransformersEngine,
        OpenAIEngine,
        VLLMEngine,
        LlamaCppEngine,
        RuleStudent,
        RayVLLMEngine,
        RayHTTPEngine,
    )

ENGINES: dict[str, str] = {
    "transformers": "precompute.backends.transformers_engine:TransformersEngine",
    "openai": "precompute.backends.openai_engine:OpenAIEngine",
    "vllm": "precompute.backends.vllm_engine:VLLMEngine",
    "llamacpp": "precompute.backends.llamacpp_engine:LlamaCppEngine",
    # A calibration instrument (answers from an answer key), never a results engine.
    "rule-student": "precompute.backends.rule_student:RuleStudent",
    # Ray Data LLM (optional extra, requirements-cluster.txt): the cluster path.
    "ray-vllm": "precompute.backends.ray_engine:RayVLLMEngine",
    "ray-http": "precompute.backends.ray_engine:RayHTTPEngine",
}
"""Engine name → ``module:Class`` of its implementation."""

#: Engine name → the option that sets its number of data-parallel replicas (what the command
#: line's ``--dp N`` writes into each such model's ``options``).
DATA_PARALLEL_OPTIONS: dict[str, str] = {"vllm": "dp", "ray-vllm": "concurrency"}


def engine_class(name: str) -> Callable[..., Engine]:
    """The class registered under ``name`` (called with the model and its options)."""
    try:
        target = ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; known engines: {sorted(ENGINES)}") from None
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def make_engine(name: str, model: str, **options: Any) -> Engine:
    """Build the engine ``name`` for ``model`` with engine-specific ``options``.

    >>> make_engine("nope", "m")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown engine 'nope'; known engines: ['llamacpp', 'openai', 'ray-http', ...]
    """
    return engine_class(name)(model, **options)
