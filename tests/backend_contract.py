"""The contract every generation engine keeps, as tests over an ``engine`` fixture.

``tests/test_backends.py`` imports these functions and provides ``engine`` (module scope,
parametrised over the engines that can run here: real SmolLM2-135M on CPU through
transformers, the same GGUF behind a real llama.cpp OpenAI-compatible server, and vLLM when
it is installed). Budgets are tiny (≤ 24 new tokens) to keep the suite fast.
"""

from __future__ import annotations

import pytest

from precompute.backends.base import Completion, Engine, GenerationRequest

#: What a test module collects with ``from tests.backend_contract import *``: the contract.
__all__ = [
    "test_bad_request_fails_alone",
    "test_completions_come_back_in_request_order",
    "test_continue_final_message_continues_the_assistant_text",
    "test_early_stop_check_ends_generation_early",
    "test_early_stop_with_trigger_strings_cuts_after_the_trigger",
    "test_greedy_decoding_is_deterministic",
    "test_max_tokens_is_respected",
    "test_n_samples_give_one_completion_each",
    "test_stop_strings_cut_the_text",
]

SYSTEM = "You answer questions clearly."


def chat(key: str, question: str, **options: object) -> GenerationRequest:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    options.setdefault("max_tokens", 16)
    return GenerationRequest(key, messages, **options)  # type: ignore[arg-type]


def continuation(
    key: str, question: str, prefix: str, *, system: str | None = SYSTEM, **options: object
) -> GenerationRequest:
    """A request that continues the assistant's ``prefix`` to ``question`` (a teacher's trace
    cut short), after the system message ``system`` (none when None)."""
    messages = [{"role": "system", "content": system}] if system is not None else []
    messages += [
        {"role": "user", "content": question},
        {"role": "assistant", "content": prefix},
    ]
    options.setdefault("max_tokens", 16)
    return GenerationRequest(key, messages, continue_final_message=True, **options)  # type: ignore[arg-type]


def one(engine: Engine, request: GenerationRequest) -> Completion:
    [completion] = engine.generate([request])
    assert completion.ok, completion.error
    return completion


QUESTIONS = [
    "Name a colour.",
    "Write one sentence about the sea and the wind and the boats in the harbour at night.",
    "What is 2 + 2?",
    "List three fruits, then explain which one you like best and why, in detail.",
]


@pytest.mark.slow
def test_completions_come_back_in_request_order(engine: Engine) -> None:
    # Prompts of different lengths, so an engine that sorts by length must un-sort.
    requests = [chat(f"q{i}", q, max_tokens=6) for i, q in enumerate(QUESTIONS)]
    seen: list[tuple[int, int]] = []
    completions = engine.generate(requests, progress=lambda done, total: seen.append((done, total)))
    assert [c.key for c in completions] == [r.key for r in requests]
    assert seen and seen[-1] == (4, 4) and all(total == 4 for _, total in seen)
    expected_lengths = [engine.count_prompt_tokens(r) for r in requests]
    assert len(set(expected_lengths)) == len(requests)
    assert [c.prompt_tokens for c in completions] == expected_lengths
    assert all(c.ok and c.text for c in completions)


@pytest.mark.slow
def test_greedy_decoding_is_deterministic(engine: Engine) -> None:
    request = chat("same", "Describe a cat in one sentence.", max_tokens=12)
    first, second = engine.generate([request, request])
    [third] = engine.generate([request])
    assert first.text == second.text == third.text
    assert first.completion_tokens == third.completion_tokens


@pytest.mark.slow
def test_max_tokens_is_respected(engine: Engine) -> None:
    completion = one(engine, chat("long", "Tell me a long story about a dragon.", max_tokens=5))
    assert completion.completion_tokens <= 5
    assert completion.finish_reason == "length"
    assert completion.text


@pytest.mark.slow
def test_n_samples_give_one_completion_each(engine: Engine) -> None:
    request = chat("n", "Say hello.", max_tokens=4, n=3)
    completions = engine.generate([request, chat("after", "Say bye.", max_tokens=4)])
    assert [(c.key, c.sample) for c in completions] == [("n", 0), ("n", 1), ("n", 2), ("after", 0)]
    assert len({c.text for c in completions[:3]}) == 1  # greedy: all samples equal


@pytest.mark.slow
def test_stop_strings_cut_the_text(engine: Engine) -> None:
    request = chat("free", "Tell me about the moon.", max_tokens=24)
    full = one(engine, request).text
    words = [w.strip(".,;:!?") for w in full.split()]
    word = next((w for w in words[2:] if len(w) >= 3), None)
    assert word is not None, f"output too short to pick a stop word: {full!r}"
    cut = one(engine, chat("cut", "Tell me about the moon.", max_tokens=24, stop=[word]))
    assert cut.finish_reason == "stop"
    assert word not in cut.text
    assert cut.text == full[: full.find(word)]
    assert cut.completion_tokens < 24


@pytest.mark.slow
def test_continue_final_message_continues_the_assistant_text(engine: Engine) -> None:
    prefix = "Counting from one to ten: 1, 2, 3, 4,"
    request = continuation("cont", "Count from 1 to 10.", prefix, max_tokens=6)
    render = getattr(engine, "render", None)
    if render is not None:
        prompt = render(request)
        assert prompt.endswith(prefix)
        # One assistant turn opened (the teacher's), none appended after it.
        assert prompt.count("assistant") == 1
        fresh = render(chat("fresh", "Count from 1 to 10."))
        assert not fresh.endswith(prefix)
    completion = one(engine, request)
    assert completion.text.lstrip().startswith("5"), completion.text


@pytest.mark.slow
def test_early_stop_check_ends_generation_early(engine: Engine) -> None:
    question = "Explain why the sky is blue."
    full = one(engine, chat("full", question, max_tokens=24))
    assert full.completion_tokens == 24

    def three_words(text: str) -> bool:
        return len(text.split()) >= 3

    early = one(engine, chat("early", question, max_tokens=24, stop_when=three_words))
    assert early.finish_reason == "stop"
    assert three_words(early.text)
    assert early.completion_tokens < full.completion_tokens
    assert full.text.startswith(early.text)
    # The check passed as soon as it could: dropping the last word breaks it.
    assert not three_words(" ".join(early.text.split()[:-1]))


@pytest.mark.slow
def test_early_stop_with_trigger_strings_cuts_after_the_trigger(engine: Engine) -> None:
    question = "Explain why the sky is blue."
    full = one(engine, chat("full", question, max_tokens=24)).text
    words = [w.strip(".,;:!?") for w in full.split()]
    word = next((w for w in words[3:] if len(w) >= 4), None)
    assert word is not None, f"output too short to pick a trigger: {full!r}"
    early = one(
        engine,
        chat(
            "early", question, max_tokens=24, stop_when=lambda t: word in t, stop_when_after=[word]
        ),
    )
    assert early.finish_reason == "stop"
    assert early.text == full[: full.find(word) + len(word)]


@pytest.mark.slow
def test_bad_request_fails_alone(engine: Engine) -> None:
    bad_continue = GenerationRequest(
        "bad-continue",
        [{"role": "user", "content": "hi"}],
        max_tokens=4,
        continue_final_message=True,
    )
    bad_budget = chat("bad-budget", "hi", max_tokens=0)
    bad_role = GenerationRequest("bad-role", [{"role": "wizard", "content": "hi"}], max_tokens=4)
    good = [
        chat("good-1", "Name a fruit.", max_tokens=4),
        chat("good-2", "Name a tree.", max_tokens=4),
    ]
    out = engine.generate([good[0], bad_continue, bad_budget, bad_role, good[1]])
    assert [c.key for c in out] == ["good-1", "bad-continue", "bad-budget", "bad-role", "good-2"]
    assert [c.finish_reason == "error" for c in out] == [False, True, True, True, False]
    assert "continue_final_message" in (out[1].error or "")
    assert "max_tokens" in (out[2].error or "")
    assert "role" in (out[3].error or "")
    assert out[0].text and out[4].text
