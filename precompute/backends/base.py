"""The one interface every generation engine implements.

A stage hands an engine a list of :class:`GenerationRequest` and gets back one
:class:`Completion` per request and sample, in the same order. Engines never raise for one
bad request: its completion carries ``finish_reason="error"`` and the error text, and the
other requests still run.

Students in the rollout stage continue the teacher's reasoning: their messages end with an
assistant message holding the teacher prefix and ``continue_final_message=True``; engines
render that with the chat template in continue-final-message mode (no new assistant header).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from precompute.backends.engine_stats import EngineStats

FinishReason = Literal["stop", "length", "error"]
StopCheck = Callable[[str], bool]
Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each finished request."""

_ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})


@dataclass(frozen=True)
class StopCheckSpec:
    """An early-stop check that another process can rebuild: ``function(text, **kwargs)``.

    ``function`` is ``"package.module:name"``; ``kwargs`` hold only plain data (str, int,
    float, bool, None, lists and str-keyed dicts of them), so they survive vLLM's MessagePack
    transport to its engine core.
    """

    function: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def resolve(self) -> StopCheck:
        """The check as a callable on the generated text (imports the function's module)."""
        function = _import_function(self.function)
        kwargs = self.kwargs
        return lambda text: bool(function(text, **kwargs))

    def as_plain(self) -> dict[str, Any]:
        """The spec as plain data (for transports that carry no Python objects)."""
        return {"function": self.function, "kwargs": self.kwargs}

    @classmethod
    def from_plain(cls, data: dict[str, Any]) -> StopCheckSpec:
        return cls(str(data["function"]), dict(data.get("kwargs") or {}))


def _import_function(name: str) -> Callable[..., Any]:
    import importlib

    module, _, attr = name.partition(":")
    if not module or not attr:
        raise ValueError(f"stop check function must be 'module:name', got {name!r}")
    return getattr(importlib.import_module(module), attr)


def plain_data(value: Any) -> Any:
    """``value`` with numpy arrays, numpy scalars and tuples turned into plain lists and
    numbers (what a problem row read from parquet holds), for :class:`StopCheckSpec` kwargs.

    >>> plain_data({"a": (1, 2), "b": [{"c": None}]})
    {'a': [1, 2], 'b': [{'c': None}]}
    """
    if isinstance(value, dict):
        return {str(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_data(v) for v in value]
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return plain_data(value.tolist())
    return str(value)


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt to complete.

    Args:
        key: stable id of the request (e.g. ``"<trace_id>/k=6"``); copied to the completion.
        messages: chat messages ``{"role", "content"}``.
        max_tokens: budget of new tokens (≥ 1).
        continue_final_message: the last message is an assistant prefix to continue.
        temperature: 0 means greedy decoding.
        top_p, repetition_penalty, seed: sampling settings (the seed matters only when
            sampling).
        stop: strings that end the completion; the text is cut before the first one.
        n: number of samples; the engine returns ``n`` completions for this request.
        stop_when: optional early-stop check on the generated text so far (for example
            "an answer can be extracted"); generation of this request ends as soon as it
            returns True, and the text is the shortest one that satisfied it.
        stop_when_after: strings after which the check is worth running (e.g. ``"}"`` for a
            boxed answer). Empty: engines run the check after every token. Engines that cannot
            run code between tokens (vLLM offline) stop at these strings, run the check and
            resume if it fails.
        stop_check: the same check as ``stop_when``, named by an importable function and
            plain arguments (:class:`StopCheckSpec`) so that an engine whose decoding loop runs
            in another process (vLLM's engine core) can run it there, after every decoded
            token that completes a ``stop_when_after`` string, and end the sequence inside the
            engine. ``stop_when`` stays the judge of the final text.
    """

    key: str
    messages: list[dict[str, str]]
    _: KW_ONLY
    max_tokens: int
    continue_final_message: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    stop: list[str] = field(default_factory=list)
    seed: int = 0
    n: int = 1
    stop_when: StopCheck | None = field(default=None, compare=False, repr=False)
    stop_when_after: list[str] = field(default_factory=list)
    stop_check: StopCheckSpec | None = field(default=None, compare=False, repr=False)

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass(frozen=True)
class Completion:
    """What an engine produced for one request (one sample of it).

    ``completion_tokens`` counts the tokens the engine generated for the returned text
    (a stop string that was cut off still counts: it was decoded).
    """

    key: str
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: FinishReason
    error: str | None = None
    sample: int = 0

    @property
    def ok(self) -> bool:
        return self.finish_reason != "error"


@runtime_checkable
class Engine(Protocol):
    """A text generation engine (transformers, an OpenAI-compatible server, vLLM, …)."""

    name: str
    #: Whether the engine keeps the key/value cache of the last sequence it ran (llama.cpp),
    #: so a follow-up of the last request is cheap: the rollout stage then sends it one
    #: rollout at a time. False for an engine without such a cache.
    caches_last_sequence: bool
    #: Token counts summed over every ``generate`` call (benchmarks, provenance).
    stats: EngineStats

    def generate(
        self, requests: Sequence[GenerationRequest], *, progress: Progress | None = None
    ) -> list[Completion]:
        """Complete every request; one completion per request and sample, in request order."""
        ...

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        """Number of tokens of the rendered prompt of ``request``."""
        ...

    def close(self) -> None:
        """Release what the engine holds (a model, a client, worker processes); an engine
        that holds nothing beyond memory returns at once."""
        ...


class RequestError(ValueError):
    """A request that cannot be run as given (bad messages, bad settings)."""


def validate_request(request: GenerationRequest) -> None:
    """Raise :class:`RequestError` naming the field when ``request`` is malformed."""
    where = f"request {request.key!r}"
    if not isinstance(request.messages, list) or not request.messages:
        raise RequestError(f"{where}: messages must be a non-empty list")
    for index, message in enumerate(request.messages):
        if not isinstance(message, dict):
            raise RequestError(f"{where}: messages[{index}] is not a dict")
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES:
            raise RequestError(f"{where}: messages[{index}].role is {role!r}")
        if not isinstance(content, str):
            raise RequestError(f"{where}: messages[{index}].content must be a string")
    if request.continue_final_message and request.messages[-1].get("role") != "assistant":
        raise RequestError(
            f"{where}: continue_final_message needs the last message to be an assistant prefix"
        )
    if not isinstance(request.max_tokens, int) or request.max_tokens < 1:
        raise RequestError(f"{where}: max_tokens must be an integer ≥ 1, got {request.max_tokens}")
    if request.temperature < 0:
        raise RequestError(f"{where}: temperature must be ≥ 0")
    if not 0 < request.top_p <= 1:
        raise RequestError(f"{where}: top_p must be in (0, 1]")
    if request.repetition_penalty <= 0:
        raise RequestError(f"{where}: repetition_penalty must be > 0")
    if not isinstance(request.n, int) or request.n < 1:
        raise RequestError(f"{where}: n must be an integer ≥ 1")
    if any(not isinstance(s, str) or not s for s in request.stop):
        raise RequestError(f"{where}: stop strings must be non-empty strings")


def failed_completion(
    request: GenerationRequest,
    error: str,
    sample: int = 0,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
) -> Completion:
    """The completion reported for one sample of a request that failed: no text, finish reason
    "error" and the ``error`` message, with the tokens spent before the failure."""
    return Completion(request.key, "", prompt_tokens, completion_tokens, "error", error, sample)


def error_completions(request: GenerationRequest, error: str) -> list[Completion]:
    """The completions reported for a request that failed as a whole."""
    return [
        failed_completion(request, error, sample)
        for sample in range(max(1, request.n if isinstance(request.n, int) else 1))
    ]


PreparedT = TypeVar("PreparedT")


def prepare_samples(
    requests: Sequence[GenerationRequest], prepare: Callable[[GenerationRequest], PreparedT]
) -> tuple[dict[tuple[int, int], Completion], list[tuple[int, int, GenerationRequest, PreparedT]]]:
    """Prepare every request once (``prepare`` raises :class:`RequestError` for one that
    cannot run) and list the samples to decode.

    Returns ``(results, rows)``: ``results`` already holds the error completions of the
    requests ``prepare`` refused, keyed by (request index, sample); ``rows`` lists ``(index,
    sample, request, prepared)``, one row per sample, except that a greedy request gets a single
    row (its samples are identical, so engines decode once and :func:`ordered_completions`
    copies).
    """
    results: dict[tuple[int, int], Completion] = {}
    rows: list[tuple[int, int, GenerationRequest, PreparedT]] = []
    for index, request in enumerate(requests):
        try:
            prepared = prepare(request)
        except RequestError as exc:
            for completion in error_completions(request, str(exc)):
                results[(index, completion.sample)] = completion
            continue
        samples = 1 if request.greedy else request.n
        rows.extend((index, sample, request, prepared) for sample in range(samples))
    return results, rows


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` before the earliest stop string; return (text, whether one was found).

    >>> cut_at_stop("x = 4. Done. More", ["Done", "More"])
    ('x = 4. ', True)
    >>> cut_at_stop("no stop here", ["###"])
    ('no stop here', False)
    """
    positions = [pos for s in stop if (pos := text.find(s)) >= 0]
    if not positions:
        return text, False
    return text[: min(positions)], True


def shortest_satisfying(text: str, check: StopCheck, after: Sequence[str]) -> int | None:
    """Length of the shortest prefix of ``text`` ending at a trigger that passes ``check``.

    Only prefixes that end right after one of the ``after`` strings are tried (in order of
    position); with no triggers every character boundary is a candidate, so pass triggers
    for long texts. Returns None when no prefix passes.

    >>> shortest_satisfying("a } b } c", lambda t: t.count("}") == 2, ["}"])
    7
    """
    if after:
        ends = sorted(
            {m + len(s) for s in after for m in _find_all(text, s)},
        )
    else:
        ends = list(range(1, len(text) + 1))
    for end in ends:
        if check(text[:end]):
            return end
    return None


def _find_all(text: str, needle: str) -> list[int]:
    found, start = [], 0
    while (pos := text.find(needle, start)) >= 0:
        found.append(pos)
        start = pos + 1
    return found


def ordered_completions(
    requests: Sequence[GenerationRequest], results: dict[tuple[int, int], Completion]
) -> list[Completion]:
    """Completions in request order then sample order.

    A greedy request's samples are identical by definition, so engines decode sample 0 only;
    its other samples are filled here as copies of it.
    """
    for index, request in enumerate(requests):
        if request.greedy and request.n > 1 and (index, 0) in results:
            first = results[(index, 0)]
            for sample in range(1, request.n):
                results.setdefault((index, sample), dataclasses.replace(first, sample=sample))
    return [results[(i, s)] for i, r in enumerate(requests) for s in range(r.n)]


def torch_placement(device: str, dtype: str | None) -> tuple[str, Any]:
    """The device and torch dtype to load a Hugging Face model with.

    ``device="auto"`` means CUDA when torch sees a GPU, else CPU. Without a ``dtype`` name
    (``"float16"``, ``"bfloat16"``, ...) a CPU gets float32 (half-precision matmuls are slow or
    missing on many CPUs) and a GPU bfloat16. torch is imported here, on first use only.
    """
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype:
        return device, getattr(torch, dtype)
    return device, torch.float32 if device == "cpu" else torch.bfloat16


def common_prefix_length(cached: Sequence[int], prompt: Sequence[int]) -> int:
    """How many leading token ids two sequences share: the part of a new prompt an engine's
    cache already holds (the rest must be prefilled).

    >>> common_prefix_length([1, 2, 3, 4], [1, 2, 9])
    2
    """
    shared = 0
    for a, b in zip(cached, prompt, strict=False):
        if a != b:
            break
        shared += 1
    return shared


def expand_samples(requests: Sequence[GenerationRequest]) -> list[tuple[int, int]]:
    """(request index, sample index) for every completion, in output order."""
    return [(i, s) for i, r in enumerate(requests) for s in range(r.n)]
