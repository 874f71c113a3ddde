"""Generation with Hugging Face transformers, on CPU or GPU.

Works on plain Hugging Face folders and on GGUF files (transformers dequantises them; needs
``gguf`` and ``accelerate``). Prompts are grouped by sampling settings, sorted by length and
run in left-padded batches. Stop strings, per-request budgets and the early-stop check run in
one stopping criterion, so a finished row stops decoding while the rest of the batch goes on.

With ``prefix_reuse=True`` requests run one at a time in lexicographic token order and each
reuses the key/value cache of the longest token prefix it shares with the previous prompt
(the rollouts of one trace share everything up to the shorter teacher prefix), so shared
prefixes are run through the model once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from precompute.backends.base import (
    Completion,
    FinishReason,
    GenerationRequest,
    Progress,
    common_prefix_length,
    cut_at_stop,
    failed_completion,
    ordered_completions,
    shortest_satisfying,
    torch_placement,
)
from precompute.backends.chat import TemplatePrompts, encode_requests
from precompute.backends.engine_stats import EngineStats
from precompute.backends.hub import load_pretrained


@dataclass
class _Row:
    """One sequence to decode: a request (or one sample of it) with its prompt ids."""

    request_index: int
    sample: int
    request: GenerationRequest
    prompt_ids: list[int]
    # Filled while decoding: how many new tokens were kept, and why decoding ended.
    stop_at: int | None = None
    reason: str | None = None
    checked_chars: int = 0


class TransformersEngine(TemplatePrompts):
    """Engine on ``transformers.AutoModelForCausalLM``.

    Args:
        model: a Hugging Face folder, a ``.gguf`` file, or a hub id (downloaded into the
            Hugging Face cache when not there, unless ``HF_HUB_OFFLINE=1``; see
            :mod:`precompute.backends.hub`).
        device: "auto" (CUDA when available), "cpu", "cuda", "cuda:1", …
        dtype: torch dtype name; default float32 on CPU, bfloat16 on GPU.
        batch_size: rows decoded together (ignored with ``prefix_reuse``).
        prefix_reuse: run requests one at a time, reusing the cached keys/values of the
            prefix shared with the previous prompt.
        threads: CPU threads for torch (process-wide: ``torch.set_num_threads``); None keeps
            torch's default. On a CPU shared with other jobs, 1 thread can be many times
            faster than an oversubscribed default (measured: 0.08 s vs 0.9 s a decode step).
    """

    name = "transformers"
    #: No key/value cache kept between requests (see ``Engine.caches_last_sequence``).
    caches_last_sequence = False

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        dtype: str | None = None,
        batch_size: int = 8,
        prefix_reuse: bool = False,
        threads: int | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads is not None:
            torch.set_num_threads(max(1, int(threads)))
        device, torch_dtype = torch_placement(device, dtype)
        model = str(model)
        if model.endswith(".gguf"):
            folder, filename = os.path.split(os.path.abspath(model))
            self.tokenizer = AutoTokenizer.from_pretrained(
                folder, gguf_file=filename, local_files_only=True
            )
            self.model = AutoModelForCausalLM.from_pretrained(
                folder, gguf_file=filename, dtype=torch_dtype, local_files_only=True
            )
        else:
            self.tokenizer = load_pretrained(AutoTokenizer.from_pretrained, model, "tokenizer")
            self.model = load_pretrained(
                AutoModelForCausalLM.from_pretrained, model, "model", dtype=torch_dtype
            )
        # Through the class: transformers' decorated ``to`` reads as unbound to type checkers.
        type(self.model).to(self.model, device)
        self.model.eval()
        self.device = device
        self.model_id = model
        self.batch_size = max(1, int(batch_size))
        self.prefix_reuse = prefix_reuse
        self.stats = EngineStats()
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self._eos_ids: set[int] = set(eos if isinstance(eos, list) else [eos])
        self._pad_id: int = int(self.tokenizer.pad_token_id)
        # prefix_reuse: the cache of the previous prompt and the token ids it holds.
        self._cache: Any = None
        self._cache_ids: list[int] = []

    def close(self) -> None:
        """Drop the cached prefix; the weights are freed with the engine (torch holds no
        other handle to release)."""
        self.clear_prefix_cache()

    def clear_prefix_cache(self) -> None:
        """Forget the cached prefix (``prefix_reuse``), e.g. between benchmark runs."""
        self._cache, self._cache_ids = None, []

    # -- generation ------------------------------------------------------------------------
    def generate(
        self, requests: Sequence[GenerationRequest], *, progress: Progress | None = None
    ) -> list[Completion]:
        # Greedy samples are identical: decoded once, then copied (see base.ordered_completions).
        results, encoded = encode_requests(self.tokenizer, requests, self.render)
        rows = [_Row(index, sample, request, ids) for index, sample, request, ids in encoded]

        total = sum(r.n for r in requests)
        done = len(results)

        def report(finished: list[_Row]) -> None:
            nonlocal done
            for row in finished:
                done += 1 if row.request.n == 1 or not row.request.greedy else row.request.n
            if progress is not None:
                progress(done, total)

        if self.prefix_reuse:
            ordered = sorted(rows, key=lambda r: (r.prompt_ids, r.sample))
            for row in ordered:
                self._run_safely([row], results, reuse=True)
                report([row])
        else:
            for batch in self._batches(rows):
                self._run_safely(batch, results, reuse=False)
                report(batch)
        out = ordered_completions(requests, results)
        self.stats.requests += len(out)
        return out

    def _batches(self, rows: list[_Row]) -> list[list[_Row]]:
        def settings(row: _Row) -> tuple[float, float, float, int]:
            r = row.request
            return (r.temperature, r.top_p, r.repetition_penalty, r.seed if not r.greedy else 0)

        groups: dict[tuple[float, float, float, int], list[_Row]] = {}
        for row in rows:
            groups.setdefault(settings(row), []).append(row)
        batches = []
        for group in groups.values():
            group.sort(key=lambda r: len(r.prompt_ids))
            for start in range(0, len(group), self.batch_size):
                batches.append(group[start : start + self.batch_size])
        return batches

    def _run_safely(
        self, batch: list[_Row], results: dict[tuple[int, int], Completion], *, reuse: bool
    ) -> None:
        try:
            completions = self._decode_batch(batch, reuse=reuse)
        except Exception as exc:
            self._cache = None  # a failed forward pass may leave the cache half written
            if len(batch) > 1:
                # One bad row (e.g. a prompt longer than the context) must not sink the others.
                for row in batch:
                    self._run_safely([row], results, reuse=reuse)
                return
            row = batch[0]
            message = f"{type(exc).__name__}: {exc}"
            completions = [failed_completion(row.request, message, row.sample, len(row.prompt_ids))]
        for row, completion in zip(batch, completions, strict=True):
            results[(row.request_index, row.sample)] = completion

    def _decode_batch(self, batch: list[_Row], *, reuse: bool) -> list[Completion]:
        import torch
        from transformers import StoppingCriteriaList

        first = batch[0].request
        width = max(len(r.prompt_ids) for r in batch)
        input_ids = torch.full((len(batch), width), self._pad_id, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for i, row in enumerate(batch):
            input_ids[i, width - len(row.prompt_ids) :] = torch.tensor(row.prompt_ids)
            attention[i, width - len(row.prompt_ids) :] = 1
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)

        kwargs: dict[str, Any] = {
            "max_new_tokens": max(r.request.max_tokens for r in batch),
            "pad_token_id": self._pad_id,
            "repetition_penalty": first.repetition_penalty,
            "stopping_criteria": StoppingCriteriaList(
                [_RowStopper(self.tokenizer, batch, width, self._eos_ids)]
            ),
        }
        if first.greedy:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            kwargs.update(do_sample=True, temperature=first.temperature, top_p=first.top_p, top_k=0)
            torch.manual_seed(first.seed)

        prefill = int(attention.sum())
        if reuse:
            from transformers import DynamicCache

            ids = batch[0].prompt_ids
            common = common_prefix_length(self._cache_ids, ids) if self._cache is not None else 0
            common = min(common, len(ids) - 1)  # at least one token must go through the model
            if common > 0:
                cache = self._cache
                surplus = cache.get_seq_length() - common
                if surplus > 0:
                    # A negative count removes that many trailing positions (transformers 4 and 5).
                    cache.crop(-surplus)
            else:
                cache = DynamicCache(config=self.model.config)
            kwargs[_cache_keyword()] = cache
            prefill = len(ids) - common
        with torch.inference_mode():
            output = self.model.generate(input_ids, attention_mask=attention, **kwargs)
        if reuse:
            self._cache, self._cache_ids = kwargs[_cache_keyword()], list(batch[0].prompt_ids)
        self.stats.prefill_tokens += prefill

        completions = []
        for i, row in enumerate(batch):
            new_ids = output[i, width:].tolist()
            completions.append(self._finish_row(row, new_ids))
        return completions

    def _finish_row(self, row: _Row, new_ids: list[int]) -> Completion:
        request = row.request
        reason: FinishReason
        kept = new_ids[: row.stop_at if row.stop_at is not None else request.max_tokens]
        end_at_eos = next((j for j, t in enumerate(kept) if t in self._eos_ids), None)
        if end_at_eos is not None:
            kept = kept[: end_at_eos + 1]
        text = self.tokenizer.decode(kept, skip_special_tokens=True)
        text, stopped = cut_at_stop(text, request.stop)
        if stopped or end_at_eos is not None:
            reason = "stop"
        elif row.reason == "check" and request.stop_when is not None:
            reason = "stop"
            if request.stop_when_after:
                end = shortest_satisfying(text, request.stop_when, request.stop_when_after)
                text = text[:end] if end is not None else text
        else:
            reason = "length"
        self.stats.prompt_tokens += len(row.prompt_ids)
        self.stats.completion_tokens += len(kept)
        return Completion(
            request.key, text, len(row.prompt_ids), len(kept), reason, None, row.sample
        )


class _RowStopper:
    """Stopping criterion deciding per row: own budget, stop strings, early-stop check."""

    def __init__(self, tokenizer: Any, rows: list[_Row], prompt_width: int, eos: set[int]):
        self.tokenizer, self.rows, self.width, self.eos = tokenizer, rows, prompt_width, eos
        self.longest_trigger = {
            id(r): max((len(s) for s in r.request.stop_when_after), default=0) for r in rows
        }
        self.longest_stop = {id(r): max((len(s) for s in r.request.stop), default=0) for r in rows}

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        n_new = input_ids.shape[1] - self.width
        finished = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for i, row in enumerate(self.rows):
            if row.stop_at is not None:
                finished[i] = True
                continue
            request = row.request
            last = int(input_ids[i, -1])
            if last in self.eos:
                row.stop_at, row.reason = n_new, "eos"
            elif n_new >= request.max_tokens:
                row.stop_at, row.reason = n_new, "length"
            elif request.stop or request.stop_when is not None:
                text = self.tokenizer.decode(input_ids[i, self.width :], skip_special_tokens=True)
                tail_from = max(0, row.checked_chars - self.longest_stop[id(row)])
                if request.stop and any(s in text[tail_from:] for s in request.stop):
                    row.stop_at, row.reason = n_new, "stop"
                elif (
                    request.stop_when is not None
                    and self._worth_checking(row, text)
                    and request.stop_when(text)
                ):
                    row.stop_at, row.reason = n_new, "check"
                row.checked_chars = len(text)
            finished[i] = row.stop_at is not None
        return finished

    def _worth_checking(self, row: _Row, text: str) -> bool:
        triggers = row.request.stop_when_after
        if not triggers:
            return True
        tail = text[max(0, row.checked_chars - self.longest_trigger[id(row)] + 1) :]
        return any(t in tail for t in triggers)


def _cache_keyword() -> str:
    """Name of generate's cache argument: ``cache`` in recent transformers, else the old one."""
    from transformers.generation import utils

    return "cache" if "cache" in getattr(utils, "ALL_CACHE_NAMES", ()) else "past_key_values"
