"""A rule-based student: a calibration instrument, never a source of results.

The engine answers from an *answer key*, not from a language model. Its rule is one line:

    correct  ⇔  the assistant prefix contains the problem's planted key fact.

So on a trace whose key fact stands at step s (1-based), the rollout at prefix size k is correct
exactly when k ≥ s, and every trace's true transfer curve, FOTU, hazard bin and SOTU follow in
closed form (:mod:`legival_core.calibration.calibration`). The calibration build
(:mod:`precompute.calibrate`) runs the real rollout stage with this engine and compares what
the metrics stage recovers against those closed forms. Numbers it produces say how well the
*metrics* work; they say nothing about any model, so never put it in a results config.

``model`` is the path of the answer key, a JSON file::

    {"problems": [{"marker": "calib-0007", "key_fact": "The lid is stamped QXV.",
                   "answer": "239"}, ...]}

A request belongs to the entry whose ``marker`` occurs in its system or user messages; a
request that matches none is answered as if the fact were missing. Answers are written in the
math task's format (``\\boxed{…}``; ``answer_template`` changes it).

Noise: with ``error_rate`` ε > 0 each completion's correctness is flipped with probability ε,
decided by a hash of ``seed`` and the rendered prompt (and, when sampling, the request's seed
and sample number), so the flips are reproducible and their rate is known: the expected
observed correctness at a point whose true value is y is ε + (1 − 2ε)·y.

Text is cut into "tokens" by a fixed rule (a word or one punctuation mark, with the spaces
before it), so ``max_tokens``, stop strings and early-stop checks behave as in any engine.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from precompute.backends.base import (
    Completion,
    FinishReason,
    GenerationRequest,
    Progress,
    cut_at_stop,
    ordered_completions,
    prepare_samples,
    shortest_satisfying,
    validate_request,
)
from precompute.backends.engine_stats import EngineStats

__all__ = ["AnswerKeyEntry", "RuleStudent", "load_answer_key", "split_tokens"]

_TOKEN = re.compile(r"\s*(?:\w+|[^\w\s])")

#: What the student says before its answer; long enough (≥ 24 tokens) that budgets bite.
_FOUND = (
    "I read the work so far and look for the one fact this problem turns on. "
    "The fact is there, so the result follows from it directly. "
)
_MISSING = (
    "I read the work so far and look for the one fact this problem turns on. "
    "The fact is not there, so I fall back on my fixed guess. "
)


def split_tokens(text: str) -> list[str]:
    """The student's tokens: a word or one punctuation mark, with the spaces before it.

    Joining them gives ``text`` back (trailing spaces aside).

    >>> split_tokens("The answer is \\\\boxed{12}.")
    ['The', ' answer', ' is', ' \\\\', 'boxed', '{', '12', '}', '.']
    """
    return _TOKEN.findall(text)


@dataclass(frozen=True)
class AnswerKeyEntry:
    """One problem of the answer key: how to recognise it, its key fact, its right answer."""

    marker: str
    key_fact: str
    answer: str


def load_answer_key(path: str | Path) -> list[AnswerKeyEntry]:
    """Read an answer key; a malformed one raises ValueError naming the file, entry and field."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: answer key not found (the rule student's model)") from None
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a readable JSON answer key ({err})") from None
    entries = data.get("problems") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected an object with a list 'problems'")
    key: list[AnswerKeyEntry] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"{path}: problems[{index}] is not an object")
        for field in ("marker", "key_fact", "answer"):
            value = entry.get(field)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{path}: problems[{index}], field '{field}': a non-empty string")
        key.append(AnswerKeyEntry(entry["marker"], entry["key_fact"], entry["answer"]))
    return key


def _unit_draw(*parts: object) -> float:
    """A reproducible number in [0, 1) from ``parts`` (SHA-256, first 8 bytes)."""
    digest = hashlib.sha256(json.dumps(parts, default=str).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class RuleStudent:
    """Answers right exactly when the prefix holds the planted key fact (see the module doc).

    Args:
        model: path of the JSON answer key.
        error_rate: probability ε of flipping a completion's correctness (0 = exact).
        seed: seed of the flips.
        wrong_answer: the fixed answer given when the fact is missing (never a gold).
        answer_template: how the answer is written; ``{answer}`` is replaced.
    """

    name = "rule-student"
    #: No key/value cache kept between requests (see ``Engine.caches_last_sequence``).
    caches_last_sequence = False

    def __init__(
        self,
        model: str,
        *,
        error_rate: float = 0.0,
        seed: int = 0,
        wrong_answer: str = "-1",
        answer_template: str = "The answer is \\boxed{{{answer}}}.",
    ) -> None:
        if not 0.0 <= float(error_rate) <= 0.5:
            raise ValueError(f"rule-student: error_rate must be in [0, 0.5], got {error_rate}")
        self.key = load_answer_key(model)
        self.error_rate = float(error_rate)
        self.seed = int(seed)
        self.wrong_answer = wrong_answer
        self.answer_template = answer_template
        self.stats = EngineStats()

    def render(self, request: GenerationRequest) -> str:
        """The prompt as one text: ``role: content`` lines; a continued prefix ends it."""
        lines = [f"{m['role']}: {m['content']}" for m in request.messages]
        if not request.continue_final_message:
            lines.append("assistant: ")
        return "\n".join(lines)

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        return len(split_tokens(self.render(request)))

    def _entry(self, request: GenerationRequest) -> AnswerKeyEntry | None:
        context = " ".join(
            m["content"] for m in request.messages if m["role"] in {"system", "user"}
        )
        return next((e for e in self.key if e.marker in context), None)

    def knows(self, request: GenerationRequest) -> bool:
        """Whether the assistant prefix holds the key fact of the request's problem."""
        entry = self._entry(request)
        if entry is None or not request.continue_final_message:
            return False
        return entry.key_fact in request.messages[-1]["content"]

    def _flipped(self, request: GenerationRequest, sample: int) -> bool:
        if self.error_rate <= 0.0:
            return False
        # Greedy samples are identical by definition; sampled ones get their own draw.
        salt = (request.seed, sample) if not request.greedy else ()
        return _unit_draw(self.seed, self.render(request), *salt) < self.error_rate

    def answer_text(self, request: GenerationRequest, sample: int = 0) -> str:
        """The full completion before budgets, stop strings and early stops."""
        entry = self._entry(request)
        correct = self.knows(request) != self._flipped(request, sample)
        answer = entry.answer if (entry is not None and correct) else self.wrong_answer
        lead = _FOUND if correct and entry is not None else _MISSING
        return lead + self.answer_template.format(answer=answer)

    def _complete(self, request: GenerationRequest, sample: int) -> Completion:
        tokens = split_tokens(self.answer_text(request, sample))[: request.max_tokens + 1]
        finish: FinishReason = "stop" if len(tokens) <= request.max_tokens else "length"
        tokens = tokens[: request.max_tokens]
        text = "".join(tokens)
        text, stopped = cut_at_stop(text, request.stop)
        if stopped:
            finish = "stop"
        if request.stop_when is not None:
            # Token boundaries are the candidate ends when no trigger strings are given.
            ends = _token_ends(text)
            end = (
                shortest_satisfying(text, request.stop_when, request.stop_when_after)
                if request.stop_when_after
                else next((e for e in ends if request.stop_when(text[:e])), None)
            )
            if end is not None:
                text, finish = text[:end], "stop"
        # A token counts once any of it was written (a cut-off stop string was decoded too).
        starts = [
            end - len(token)
            for token, end in zip(tokens, _token_ends("".join(tokens)), strict=True)
        ]
        used = sum(1 for start in starts if start < len(text))
        return Completion(
            request.key, text, self.count_prompt_tokens(request), used, finish, None, sample
        )

    def generate(
        self, requests: Sequence[GenerationRequest], *, progress: Progress | None = None
    ) -> list[Completion]:
        results, rows = prepare_samples(requests, validate_request)
        total = len(results) + len(rows)
        for index, sample, request, _ in rows:
            results[(index, sample)] = self._complete(request, sample)
            if progress is not None:
                progress(len(results), total)
        out = ordered_completions(requests, results)
        for completion in out:
            self.stats.prompt_tokens += completion.prompt_tokens
            # Nothing is cached: every prompt token is read again.
            self.stats.prefill_tokens += completion.prompt_tokens
            self.stats.completion_tokens += completion.completion_tokens
        self.stats.requests += len(out)
        return out

    def close(self) -> None:
        """Nothing to release (no model is loaded)."""


def _token_ends(text: str) -> list[int]:
    """Character offsets at which each of ``text``'s tokens ends."""
    ends, position = [], 0
    for token in split_tokens(text):
        position += len(token)
        ends.append(position)
    return ends
