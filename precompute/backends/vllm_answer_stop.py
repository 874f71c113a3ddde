"""vLLM logits processor that ends a sequence, inside the engine, once its answer is complete.

Loaded by vLLM in its engine core (``LLM(logits_processors=[FQCN])``, see
:data:`PROCESSOR`). The class subclasses vLLM's ``LogitsProcessor``, so it is built on first
access to ``AnswerStopProcessor`` (a module ``__getattr__``): the module itself imports without
vLLM, as every engine module here does (the test suite imports them all for doctests). A
request opts in with ``SamplingParams.extra_args[EXTRA_KEY]``:

- ``check``: a :class:`~precompute.backends.base.StopCheckSpec` as plain data;
- ``after``: the trigger strings (``stop_when_after``);
- ``before``: token ids generated in earlier rounds of the request (usually none).

Before each decoding step vLLM hands the processor the tokens decoded since the last one
(``update_state``); each opted-in sequence's :class:`AnswerWatch` runs the check at trigger
points. Once it passes, ``apply`` masks every logit of that row but the EOS token's, so the
next step samples EOS and vLLM finishes the sequence as it finishes any other (finish reason
"stop", no stop string). The caller's ``stop_when`` then judges the text (and trims it just
after the answer, as before); the one EOS token costs one more decoding step per stopped
sequence, against a new engine round per trigger string in the round-based path.
"""

from __future__ import annotations

import functools
from typing import Any

from precompute.backends.answer_stop import EXTRA_KEY, PROCESSOR, AnswerWatch
from precompute.backends.base import StopCheckSpec

__all__ = ["EXTRA_KEY", "PROCESSOR"]  # and AnswerStopProcessor, built on first access


class _Sequence:
    """One opted-in sequence: its watch and vLLM's live list of its output token ids."""

    def __init__(self, watch: AnswerWatch, output_ids: list[int]) -> None:
        self.watch = watch
        self.output_ids = output_ids  # vLLM appends to this list in place
        self.seen = 0

    def catch_up(self) -> bool:
        """Push the tokens vLLM appended since the last step; True once the answer is done."""
        new = self.output_ids[self.seen :]
        # Placeholders (negative ids) stand for tokens still being sampled under async
        # scheduling; they are read on a later step, once filled in.
        valid = 0
        while valid < len(new) and new[valid] >= 0:
            valid += 1
        self.seen += valid
        return self.watch.push(new[:valid]) if valid else self.watch.done


def __getattr__(name: str) -> Any:
    if name == "AnswerStopProcessor":
        return _processor_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _processor_class() -> type:
    """``AnswerStopProcessor``, defined on first use (it needs vLLM and torch)."""
    import torch
    from vllm import SamplingParams
    from vllm.config import VllmConfig
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
    from vllm.v1.sample.logits_processor.builtin import process_dict_updates

    class AnswerStopProcessor(LogitsProcessor):
        """Forces EOS on the sequences whose early-stop check has passed (see the module doc)."""

        def __init__(
            self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool
        ) -> None:
            from precompute.backends.chat import load_tokenizer

            model_config = vllm_config.model_config
            self.tokenizer = load_tokenizer(model_config.tokenizer or model_config.model)
            eos = self.tokenizer.eos_token_id
            if eos is None:
                raise ValueError(f"{model_config.model}: the tokenizer names no EOS token")
            # vLLM ends a sequence on the tokenizer's EOS id (unless ignore_eos), so that is the
            # token forced here.
            self.eos = int(eos)
            self.sequences: dict[int, _Sequence] = {}  # batch row -> sequence
            self.stopping: list[int] = []

        @classmethod
        def validate_params(cls, sampling_params: SamplingParams) -> None:
            spec = (sampling_params.extra_args or {}).get(EXTRA_KEY)
            if spec is None:
                return
            if sampling_params.ignore_eos:
                raise ValueError(f"{EXTRA_KEY} ends sequences with EOS; it needs ignore_eos=False")
            if not isinstance(spec, dict) or not isinstance(spec.get("check"), dict):
                raise ValueError(f"{EXTRA_KEY} must be a dict with a 'check' spec")

        def is_argmax_invariant(self) -> bool:
            # Forcing EOS changes the argmax, so greedy requests need this processor too.
            return False

        def _decode(self, ids: Any) -> str:
            return self.tokenizer.decode(list(ids), skip_special_tokens=True)

        def _new_sequence(
            self, params: SamplingParams, _prompt_ids: list[int] | None, output_ids: list[int]
        ) -> _Sequence | None:
            spec = (params.extra_args or {}).get(EXTRA_KEY)
            if spec is None:
                return None
            watch = AnswerWatch(
                self._decode,
                StopCheckSpec.from_plain(spec["check"]).resolve(),
                list(spec.get("after") or []),
                before=list(spec.get("before") or []),
            )
            return _Sequence(watch, output_ids)

        def update_state(self, batch_update: BatchUpdate | None) -> None:
            process_dict_updates(self.sequences, batch_update, self._new_sequence)
            self.stopping = [row for row, seq in self.sequences.items() if seq.catch_up()]

        def apply(self, logits: torch.Tensor) -> torch.Tensor:
            if not self.stopping:
                return logits
            rows = torch.tensor(self.stopping, dtype=torch.long, device=logits.device)
            eos = logits[rows, self.eos].clone()
            logits[rows] = float("-inf")
            # Any finite value works: EOS is the only token left with a non-zero probability.
            logits[rows, self.eos] = torch.where(torch.isfinite(eos), eos, torch.zeros_like(eos))
            return logits

    # Named as the module-level attribute vLLM loads it by (for logs and pickling).
    AnswerStopProcessor.__module__ = __name__
    AnswerStopProcessor.__qualname__ = "AnswerStopProcessor"
    return AnswerStopProcessor
