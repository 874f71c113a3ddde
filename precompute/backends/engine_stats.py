"""Counters an engine keeps about the work it did (for benchmarks and provenance)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class EngineStats:
    """Token counts summed over every ``generate`` call of one engine.

    ``prompt_tokens`` counts the prompts as sent; ``prefill_tokens`` counts the prompt tokens
    the engine actually ran through the model (fewer when a prefix cache skipped some);
    ``completion_tokens`` counts generated tokens; ``requests`` the completions produced.
    """

    requests: int = 0
    prompt_tokens: int = 0
    prefill_tokens: int = 0
    completion_tokens: int = 0

    def reset(self) -> None:
        self.requests = self.prompt_tokens = self.prefill_tokens = self.completion_tokens = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
