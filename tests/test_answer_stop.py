"""The in-engine early stop, without vLLM: the per-sequence watch, the picklable check spec
the rollout stage sends, and how the vLLM engine settles a round the engine ended itself.

The watch is fed one token at a time as vLLM's logits processor feeds it; it must fire on
exactly the token that completes the answer (a ``\\boxed{…}`` whose braces balance, a closed
JSON grouping, an option letter), never inside nested braces, and never re-read the whole
text per token. The real vLLM run is in ``tests/test_vllm_answer_stop.py``.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence

import pytest

from precompute.backends.answer_stop import AnswerWatch
from precompute.backends.base import GenerationRequest, StopCheckSpec, plain_data
from precompute.backends.vllm_engine import RoundResult, settle_round
from precompute.stages.rollout import (
    RolloutJob,
    _first_pass_request,
    _forcing_request,
    _triggers,
    answer_extractable_in,
)


class CharTokens:
    """A tokenizer stand-in: each token id is one character's code point, plus a counter of
    the characters decoded (to see that the watch's work per token does not grow)."""

    def __init__(self) -> None:
        self.decoded_chars = 0

    def __call__(self, ids: Sequence[int]) -> str:
        self.decoded_chars += len(ids)
        return "".join(chr(i) for i in ids)


def _first_firing(text: str, check_task: str, triggers: Sequence[str], **problem: object) -> int:
    """Feed ``text`` one character-token at a time; the length of text when the watch fires
    (-1: never)."""
    prob = {"task": check_task, "problem_id": "p", **problem}
    watch = AnswerWatch(
        CharTokens(),
        lambda t: answer_extractable_in(t, task=check_task, problem=prob),
        triggers,
    )
    for n, char in enumerate(text, start=1):
        if watch.push([ord(char)]):
            return n
    return -1


@pytest.mark.parametrize(
    ("text", "closes_at"),
    [
        # Nested braces: the inner "}" close \frac's groups, not the box.
        (r"so x = \boxed{\frac{1}{2}} and then more", len(r"so x = \boxed{\frac{1}{2}}")),
        (r"\boxed{3\sqrt{2}}.", len(r"\boxed{3\sqrt{2}}")),
        (r"set {1, 2} then \boxed{{7}} ok", len(r"set {1, 2} then \boxed{{7}}")),
        # Braces before any box, and a box never closed: no stop.
        (r"{a}{b} \boxed{\frac{1}{2}", -1),
    ],
)
def test_watch_fires_exactly_when_a_boxed_answer_closes(text: str, closes_at: int) -> None:
    assert _first_firing(text, "math", ["}", "]", "\n"]) == closes_at


def test_watch_on_a_json_grouping_and_an_option_letter() -> None:
    grouping = '[["a","b","c","d"],["e","f","g","h"],["i","j","k","l"],["m","n","o","p"]]'
    text = f"Final grouping:\n```json\n{grouping}\n```\nmore words"
    triggers = _triggers(_task("connections"))
    assert _first_firing(text, "connections", triggers) == text.index(grouping) + len(grouping)
    text = "B is tempting; no.\nAnswer: (C)\nsince"
    assert _first_firing(text, "gpqa", _triggers(_task("gpqa")), choices=["w", "x", "y", "z"]) == (
        text.index("(C)") + 3
    )


def _task(name: str) -> object:
    from legival_core.tasks import get_task

    return get_task(name)


def test_watch_counts_earlier_rounds_and_splits_nothing_between_tokens() -> None:
    decode = CharTokens()
    # "\boxed{4" came in an earlier round (``before``): this round's "}" closes it.
    watch = AnswerWatch(
        decode,
        lambda t: answer_extractable_in(t, task="gsm8k", problem={"task": "gsm8k"}),
        ["}"],
        before=[ord(c) for c in r"so \boxed{4"],
    )
    assert not watch.push([ord(" ")])
    assert watch.push([ord("}"), ord(".")])  # several tokens in one step: fires on the "}"
    assert watch.generated == 2  # the "." after the answer is never read
    # A trigger string spread over two tokens is still seen.
    two = AnswerWatch(CharTokens(), lambda t: t.endswith("]\n```"), ["]\n```"])
    assert not two.push([ord(c) for c in "x]\n`"])
    assert two.push([ord("`"), ord("`")])


def test_watch_work_per_token_does_not_grow_with_the_text() -> None:
    decode = CharTokens()
    watch = AnswerWatch(decode, lambda t: False, ["}"])
    for _ in range(2000):
        watch.push([ord("a")])
    # Two window decodes of at most WINDOW + 1 tokens per token; no check without a trigger.
    assert decode.decoded_chars <= 2000 * 2 * 5
    assert watch.checks == 0


def test_stop_check_spec_is_plain_data_and_equals_the_python_check() -> None:
    import numpy as np

    from precompute.config import ModelConfig

    problem = {
        "task": "gpqa",
        "problem_id": "p",
        "dataset": "d",
        "prompt": "?",
        "choices": np.array(["w", "x", "y", "z"], dtype=object),
        "gold": "C",
    }
    job = RolloutJob(
        "t", problem, "teacher", ModelConfig(name="s", engine="vllm", model="m"), 3, 9, 0, "pre"
    )
    first = _first_pass_request(job)
    forced = _forcing_request(job, "so far")
    for request in (first, forced):
        spec = request.stop_check
        assert isinstance(spec, StopCheckSpec)
        # Survives a trip through pickle (and holds nothing MessagePack cannot carry).
        assert pickle.loads(pickle.dumps(spec.as_plain())) == spec.as_plain()
        assert plain_data(spec.kwargs) == spec.kwargs
        rebuilt = StopCheckSpec.from_plain(spec.as_plain()).resolve()
        for text in ["no answer yet", "Answer: (C)\n", "(C)", r"\boxed{B}", "Answer: (E)"]:
            assert rebuilt(text) == request.stop_when(text), (request.key, text)


def test_settle_round_after_an_engine_side_stop() -> None:
    request = GenerationRequest(
        "r",
        [{"role": "user", "content": "?"}],
        max_tokens=20,
        stop_when=lambda t: "{42}" in t,
        stop_when_after=["}"],
    )
    # The engine forced EOS after the token "}." : judged, and trimmed after the answer.
    stopped = RoundResult([], "stop", None)
    assert settle_round(request, "x {42}.", 5, stopped, in_engine=True) == ("stop", "x {42}")
    # The model's own EOS before any answer ends it as usual, without a resume.
    assert settle_round(request, "x {4}", 5, stopped, in_engine=True) == ("stop", "x {4}")
    # Out of budget without an answer.
    out = RoundResult([], "length", None)
    assert settle_round(request, "x {4}", 20, out, in_engine=True) == ("length", "x {4}")
