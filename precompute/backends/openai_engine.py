"""Generation through any OpenAI-compatible HTTP server (vLLM, llama.cpp, hosted APIs).

Requests run on a thread pool of ``concurrency`` workers sharing one ``httpx.Client``.
Transient failures (429, 408, 5xx, timeouts, connection errors, malformed JSON) are retried
with exponential backoff and jitter, a bounded number of times; every other failure becomes
an error completion for that request only.

Prompts: with a local ``tokenizer`` the engine renders the chat template itself and calls
``/completions``, so the server sees exactly the text the other engines feed their models
(and continue-final-message works on any server). Without one it calls ``/chat/completions``
and, for continue-final-message, adds the extra fields vLLM understands
(``continue_final_message``, ``add_generation_prompt``).

Early stop: a request with ``stop_when`` is streamed; the check runs as text arrives and the
stream is closed once it passes (servers stop decoding a request whose client went away).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from precompute.backends.base import (
    Completion,
    FinishReason,
    GenerationRequest,
    Progress,
    RequestError,
    cut_at_stop,
    failed_completion,
    ordered_completions,
    prepare_samples,
    shortest_satisfying,
    validate_request,
)
from precompute.backends.engine_stats import EngineStats


def _vllm_fields(request: GenerationRequest) -> dict[str, Any]:
    return {"repetition_penalty": request.repetition_penalty}


def _llamacpp_fields(request: GenerationRequest) -> dict[str, Any]:
    # llama.cpp's server defaults to repeat_penalty 1.1, top_k 40 and min_p 0.05: send
    # neutral values so a request means the same thing as on the other engines.
    return {"repeat_penalty": request.repetition_penalty, "top_k": 0, "min_p": 0.0}


def _plain_openai_fields(request: GenerationRequest) -> dict[str, Any]:
    if request.repetition_penalty != 1.0:
        raise RequestError(
            f"request {request.key!r}: the plain OpenAI API has no repetition_penalty"
        )
    return {}


DIALECTS: dict[str, Callable[[GenerationRequest], dict[str, Any]]] = {
    "vllm": _vllm_fields,
    "llamacpp": _llamacpp_fields,
    "openai": _plain_openai_fields,
}
"""Server-specific request fields, by server family."""


def check_dialect(dialect: str) -> None:
    """Refuse a server family that :data:`DIALECTS` does not know."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; known: {sorted(DIALECTS)}")


def server_base_url(base_url: str | None = None) -> str:
    """A server's URL up to and including ``/v1``, without a trailing slash: ``base_url``,
    else ``$OPENAI_BASE_URL``, else a local server on port 8000."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or "http://127.0.0.1:8000/v1"
    return url.rstrip("/")


def auth_headers(api_key: str | None = None) -> dict[str, str]:
    """The bearer-token header for ``api_key`` (default ``$OPENAI_API_KEY``); none when
    neither is set."""
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def sampling_body(
    model: str, request: GenerationRequest, sample: int, dialect: str
) -> dict[str, Any]:
    """The JSON fields of a completion request other than the prompt: model, budget,
    sampling, stop strings and the dialect's extras (raises RequestError for a setting the
    dialect cannot express)."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "seed": request.seed + sample,
    }
    if request.stop:
        body["stop"] = list(request.stop)
    body.update(DIALECTS[dialect](request))
    return body


_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class TransientError(RuntimeError):
    """A failure worth retrying (overload, timeout, dropped connection, garbled reply).

    ``retry_after``: seconds the server asked the client to wait (HTTP ``Retry-After``), if any.
    """

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class _Reply:
    text: str
    prompt_tokens: int | None
    completion_tokens: int
    finish_reason: FinishReason
    cached_tokens: int = 0  # prompt tokens the server took from its prefix cache, if reported


class OpenAIEngine:
    """Engine on an OpenAI-compatible server.

    Args:
        model: the model name the server knows.
        base_url: up to and including ``/v1``; default ``$OPENAI_BASE_URL`` or
            ``http://127.0.0.1:8000/v1``.
        api_key: bearer token; default ``$OPENAI_API_KEY`` (none sent when unset).
        tokenizer: a local tokenizer (folder, ``.gguf`` file or tokenizer object) whose chat
            template renders prompts; then ``/completions`` is used.
        dialect: "vllm", "llamacpp" or "openai" (which extra sampling fields to send).
        concurrency: requests in flight at once.
        timeout: seconds for one HTTP attempt (connect, read and write each).
        max_retries: retries after the first attempt for transient failures.
        backoff, max_backoff: first retry delay and its cap, in seconds (doubled each retry,
            times a random factor in [0.5, 1.5)).
    """

    name = "openai"
    #: No key/value cache kept between requests (see ``Engine.caches_last_sequence``).
    caches_last_sequence = False

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        tokenizer: Any = None,
        dialect: str = "vllm",
        concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        import httpx

        check_dialect(dialect)
        self.model_id = model
        self.base_url = server_base_url(base_url)
        headers = auth_headers(api_key)
        self.dialect = dialect
        self.concurrency = max(1, int(concurrency))
        self.max_retries = max(0, int(max_retries))
        self.backoff, self.max_backoff = backoff, max_backoff
        self.client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            headers=headers,
            limits=httpx.Limits(max_connections=self.concurrency),
        )
        from precompute.backends.chat import as_tokenizer

        self.tokenizer = as_tokenizer(tokenizer)
        self.stats = EngineStats()
        self.retries_made = 0

    def close(self) -> None:
        self.client.close()

    # -- prompts ---------------------------------------------------------------------------
    def render(self, request: GenerationRequest) -> str:
        """The prompt text sent to ``/completions`` (needs a local tokenizer)."""
        if self.tokenizer is None:
            raise NotImplementedError("the server renders the prompt: no local tokenizer given")
        from precompute.backends.chat import render_prompt

        validate_request(request)
        return render_prompt(self.tokenizer, request)

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        if self.tokenizer is not None:
            from precompute.backends.chat import encode_prompt

            return len(encode_prompt(self.tokenizer, self.render(request)))
        # Ask the server: one generated token, then read the usage it reports.
        probe = GenerationRequest(
            request.key,
            request.messages,
            max_tokens=1,
            continue_final_message=request.continue_final_message,
        )
        reply = self._with_retries(self._body(probe, 0), stream=False)
        if reply.prompt_tokens is None:
            raise RuntimeError("server reported no usage.prompt_tokens")
        return reply.prompt_tokens

    # -- generation ------------------------------------------------------------------------
    def generate(
        self, requests: Sequence[GenerationRequest], *, progress: Progress | None = None
    ) -> list[Completion]:
        results, rows = prepare_samples(requests, validate_request)
        jobs = [(index, sample) for index, sample, _, _ in rows]
        total = sum(r.n for r in requests)
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = {pool.submit(self._complete, requests[i], s): (i, s) for i, s in jobs}
            for future in as_completed(futures):
                index, sample = futures[future]
                results[(index, sample)] = future.result()
                if progress is not None:
                    progress(len(results), total)
        out = ordered_completions(requests, results)
        self.stats.requests += len(out)
        return out

    def _complete(self, request: GenerationRequest, sample: int) -> Completion:
        """One request, one sample; never raises."""
        try:
            body = self._body(request, sample)
            reply = self._with_retries(body, stream=request.stop_when is not None, request=request)
            prompt_tokens = reply.prompt_tokens
            if prompt_tokens is None:
                prompt_tokens = self.count_prompt_tokens(request)
        except Exception as exc:
            return failed_completion(request, f"{type(exc).__name__}: {exc}", sample)
        self.stats.prompt_tokens += prompt_tokens
        # Servers that report cache hits (vLLM: usage.prompt_tokens_details) let us count
        # the prefill actually computed; others count the whole prompt.
        self.stats.prefill_tokens += prompt_tokens - reply.cached_tokens
        self.stats.completion_tokens += reply.completion_tokens
        return Completion(
            request.key,
            reply.text,
            prompt_tokens,
            reply.completion_tokens,
            reply.finish_reason,
            None,
            sample,
        )

    def _body(self, request: GenerationRequest, sample: int) -> tuple[str, dict[str, Any]]:
        body = sampling_body(self.model_id, request, sample, self.dialect)
        if self.tokenizer is not None:
            body["prompt"] = self.render(request)
            return "/completions", body
        body["messages"] = request.messages
        if request.continue_final_message:
            body["continue_final_message"] = True
            body["add_generation_prompt"] = False
        return "/chat/completions", body

    def _with_retries(
        self,
        endpoint_body: tuple[str, dict[str, Any]],
        *,
        stream: bool,
        request: GenerationRequest | None = None,
    ) -> _Reply:
        endpoint, body = endpoint_body
        attempt = 0
        while True:
            try:
                if stream and request is not None:
                    return self._post_stream(endpoint, body, request)
                return self._post(endpoint, body)
            except TransientError as exc:
                if attempt >= self.max_retries:
                    raise RuntimeError(f"gave up after {attempt + 1} attempts: {exc}") from exc
                delay = min(self.max_backoff, self.backoff * 2**attempt)
                delay *= 0.5 + random.random()
                if exc.retry_after is not None:  # the server said when; never sooner
                    delay = max(delay, min(exc.retry_after, self.max_backoff))
                time.sleep(delay)
                attempt += 1
                self.retries_made += 1

    def _post(self, endpoint: str, body: dict[str, Any]) -> _Reply:
        import httpx

        try:
            response = self.client.post(self.base_url + endpoint, json=body)
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise TransientError(f"{type(exc).__name__}: {exc}") from exc
        _raise_for_status(response.status_code, response.text, response.headers.get("retry-after"))
        try:
            payload = response.json()
            choice = payload["choices"][0]
            text = choice["text"] if "text" in choice else choice["message"]["content"]
            usage = payload.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise TransientError(f"malformed reply: {response.text[:200]!r}") from exc
        text = text or ""
        tokens = usage.get("completion_tokens")
        finish: FinishReason = "length" if choice.get("finish_reason") == "length" else "stop"
        details = usage.get("prompt_tokens_details") or {}
        return _Reply(
            text,
            usage.get("prompt_tokens"),
            int(tokens or 0),
            finish,
            int(details.get("cached_tokens") or 0),
        )

    def _post_stream(
        self, endpoint: str, body: dict[str, Any], request: GenerationRequest
    ) -> _Reply:
        import httpx

        assert request.stop_when is not None
        body = {**body, "stream": True}
        pieces: list[str] = []
        chunks = 0
        finish: FinishReason | None = None
        usage: dict[str, Any] = {}
        checked = 0
        longest = max((len(s) for s in request.stop_when_after), default=0)
        try:
            with self.client.stream("POST", self.base_url + endpoint, json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for_status(
                        response.status_code, response.text, response.headers.get("retry-after")
                    )
                for event in _sse_events(response.iter_lines()):
                    usage = event.get("usage") or usage
                    choices = event.get("choices") or []
                    if not choices:
                        continue
                    choice = choices[0]
                    piece = choice.get("text")
                    if piece is None:
                        piece = (choice.get("delta") or {}).get("content") or ""
                    if piece:
                        pieces.append(piece)
                        chunks += 1
                        text = "".join(pieces)
                        tail = text[max(0, checked - longest + 1) :]
                        worth = not request.stop_when_after or any(
                            t in tail for t in request.stop_when_after
                        )
                        checked = len(text)
                        if worth and request.stop_when(text):
                            finish = "stop"
                            text = _shortest(text, request)
                            return _Reply(text, None, chunks, finish)
                    if choice.get("finish_reason"):
                        finish = "length" if choice["finish_reason"] == "length" else "stop"
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise TransientError(f"{type(exc).__name__}: {exc}") from exc
        if finish is None:
            # A stream that ends without saying why was cut short: llama.cpp's server, for one,
            # ends a stream with [DONE] when another request arrives (`interrupt_requests`).
            # Keeping the text would store a truncated completion as if it were finished.
            raise TransientError(
                f"stream ended after {chunks} chunk(s) without a finish reason (cut short)"
            )
        text, _ = cut_at_stop("".join(pieces), request.stop)
        tokens = int(usage.get("completion_tokens") or chunks)
        return _Reply(text, usage.get("prompt_tokens"), tokens, finish)


def _shortest(text: str, request: GenerationRequest) -> str:
    assert request.stop_when is not None
    if request.stop_when_after:
        end = shortest_satisfying(text, request.stop_when, request.stop_when_after)
        return text[:end] if end is not None else text
    return text


def _raise_for_status(status: int, text: str, retry_after: str | None = None) -> None:
    if status in _RETRY_STATUS:
        raise TransientError(f"HTTP {status}: {text[:200]}", _retry_after_seconds(retry_after))
    if status >= 400:
        raise RequestError(f"HTTP {status}: {text[:500]}")


def _retry_after_seconds(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delay in seconds or an HTTP date); None if absent
    or unreadable.

    >>> _retry_after_seconds("3"), _retry_after_seconds("soon"), _retry_after_seconds(None)
    (3.0, None, None)
    """
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if seconds == seconds else None


def _sse_events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """JSON payloads of a server-sent-events stream, until ``[DONE]``."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            return
        try:
            yield json.loads(data)
        except ValueError as exc:
            raise TransientError(f"malformed stream event: {data[:200]!r}") from exc
