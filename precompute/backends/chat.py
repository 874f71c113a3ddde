"""Rendering chat messages into a prompt string with a tokenizer's chat template.

Shared by every engine that holds a local tokenizer (transformers, vLLM, llama.cpp, and the
OpenAI engine when given one), so that all of them feed the model the same text.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from precompute.backends.base import (
    Completion,
    GenerationRequest,
    RequestError,
    prepare_samples,
    validate_request,
)


def render_prompt(tokenizer: Any, request: GenerationRequest) -> str:
    """The prompt text for ``request`` under the tokenizer's chat template.

    With ``continue_final_message`` the final assistant message is left open: the text ends
    with the teacher prefix (modulo trailing whitespace the template trims), not with an
    end-of-turn marker or a fresh assistant header. Otherwise a generation prompt (the
    assistant header) is appended.
    """
    try:
        text = tokenizer.apply_chat_template(
            request.messages,
            tokenize=False,
            add_generation_prompt=not request.continue_final_message,
            continue_final_message=request.continue_final_message,
        )
    except Exception as exc:  # template errors are the request's fault, not the engine's
        raise RequestError(f"request {request.key!r}: chat template failed: {exc}") from exc
    if not isinstance(text, str):
        raise RequestError(f"request {request.key!r}: chat template did not return text")
    return text


def encode_prompt(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a rendered prompt.

    The chat template already wrote the special tokens it wants, so none are added here
    (adding them would double a BOS on templates that spell it out).
    """
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def encode_requests(
    tokenizer: Any,
    requests: Sequence[GenerationRequest],
    render: Callable[[GenerationRequest], str],
) -> tuple[dict[tuple[int, int], Completion], list[tuple[int, int, GenerationRequest, list[int]]]]:
    """Render and encode every request for an engine holding a local tokenizer:
    :func:`~precompute.backends.base.prepare_samples` with the prompt ids as what is prepared
    (a request the template refuses gets error completions)."""
    return prepare_samples(requests, lambda request: encode_prompt(tokenizer, render(request)))


class TemplatePrompts:
    """The prompt half of an engine that holds a Hugging Face tokenizer as ``self.tokenizer``:
    :meth:`render` applies its chat template, :meth:`count_prompt_tokens` counts that text's
    tokens. The engines inherit it, so every one of them feeds a model the same prompt."""

    tokenizer: Any

    def render(self, request: GenerationRequest) -> str:
        """The prompt text this engine feeds the model for ``request``."""
        validate_request(request)
        return render_prompt(self.tokenizer, request)

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        return len(encode_prompt(self.tokenizer, self.render(request)))


def load_tokenizer(model: str) -> Any:
    """A Hugging Face tokenizer from a local folder, a ``.gguf`` file, or a hub id (downloaded
    when not cached, unless offline mode is on: :mod:`precompute.backends.hub`)."""
    from transformers import AutoTokenizer

    from precompute.backends.hub import load_pretrained

    if str(model).endswith(".gguf"):
        folder, filename = os.path.split(os.path.abspath(model))
        return AutoTokenizer.from_pretrained(folder, gguf_file=filename, local_files_only=True)
    return load_pretrained(AutoTokenizer.from_pretrained, str(model), "tokenizer")


def as_tokenizer(tokenizer: Any) -> Any:
    """The tokenizer an engine was given: a path or hub id (text or ``os.PathLike``) is loaded
    with :func:`load_tokenizer`; an object, or None, is returned as it is."""
    if isinstance(tokenizer, str | os.PathLike):
        return load_tokenizer(str(tokenizer))
    return tokenizer
