"""The reward stage on a real (tiny) sequence-classification model, offline.

The model is a 2-layer Llama reward model with the SmolLM2 tokenizer and chat template
(tests/oversight_helpers.py), saved to a folder and loaded by the stage's own code.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from legival_core.store.store import Store
from precompute.config import ExperimentConfig
from precompute.stages import STAGES, StageContext, StageError, run_stage
from precompute.stages.reward import (
    PUBLISHED_REWARD_MODELS,
    RewardModelError,
    RewardOptions,
    RewardScorer,
    response_text,
)
from tests import oversight_helpers

pytestmark = pytest.mark.slow

PAIRS = [
    ("What is 2 + 2?", "2 + 2 = 4.\n\n\\boxed{4}"),
    ("What is 3 * 5?", "3 * 5 = 15, so the answer is 15."),
    ("Name a prime.", "7 is prime because it has no divisor other than 1 and 7."),
    ("What is 10 - 4?", "Ten minus four leaves six. \\boxed{6}"),
    ("x", "y"),
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return oversight_helpers.build_tiny_reward_model(tmp_path_factory.mktemp("rm") / "tiny-rm")


@pytest.fixture(scope="module")
def scorer(tiny_model: Path) -> RewardScorer:
    return RewardScorer(str(tiny_model), device="cpu")


def test_scores_are_deterministic_and_batching_does_not_change_them(scorer: RewardScorer) -> None:
    one_by_one = [scorer.score([pair], batch_size=1)[0] for pair in PAIRS]
    batched = scorer.score(PAIRS, batch_size=4)
    again = scorer.score(PAIRS, batch_size=2)
    assert batched == pytest.approx(one_by_one, abs=1e-5)
    assert again == pytest.approx(one_by_one, abs=1e-5)
    # Different conversations get different rewards (the head is not constant).
    assert len({round(v, 4) for v in one_by_one}) == len(PAIRS)


def test_the_model_reads_the_last_real_token_not_the_padding(scorer: RewardScorer) -> None:
    import torch

    # SmolLM2 pads with its end-of-turn token <|im_end|>, which also closes every turn. Cut the
    # template's final newline so a row *ends* with that token: the reward must still be the
    # score head applied to the hidden state of that last token, with or without padding.
    ids = scorer.encode(*PAIRS[4])[:-1]
    assert ids[-1] == scorer.tokenizer.pad_token_id
    with torch.no_grad():
        hidden = scorer.model.model(input_ids=torch.tensor([ids])).last_hidden_state
        expected = float(scorer.model.score(hidden[0, -1])[0])
    longer = scorer.encode(*PAIRS[2])
    assert scorer.score_ids([ids])[0] == pytest.approx(expected, abs=1e-5)
    assert scorer.score_ids([ids, longer])[0] == pytest.approx(expected, abs=1e-5)
    assert scorer._pad_id([ids, longer]) not in set(ids) | set(longer)


def test_chat_template_puts_problem_and_answer_in_their_turns(scorer: RewardScorer) -> None:
    text = scorer.tokenizer.decode(scorer.encode("What is 2 + 2?", "It is 4."))
    user = text.index("<|im_start|>user\nWhat is 2 + 2?")
    assistant = text.index("<|im_start|>assistant\nIt is 4.")
    assert user < assistant


def test_long_sequences_keep_their_end(tiny_model: Path) -> None:
    short = RewardScorer(str(tiny_model), device="cpu", max_length=16)
    ids = short.encode("q", "word " * 50 + "THE END")
    full = RewardScorer(str(tiny_model), device="cpu").encode("q", "word " * 50 + "THE END")
    assert ids == full[-16:] and short.truncated == 1


def test_missing_models_fail_with_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(RewardModelError, match="not in the local Hugging Face cache"):
        RewardScorer("no-such-org/no-such-reward-model", device="cpu")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RewardModelError, match="reward model folder"):
        RewardScorer(str(empty), device="cpu")


def test_options_and_arguments() -> None:
    parser = argparse.ArgumentParser()
    STAGES["reward"].add_arguments(parser)
    args = parser.parse_args(["--model", "skywork-v2", "--batch-size", "2"])
    options = RewardOptions.from_mapping(STAGES["reward"].option_values(args))
    assert options.model_id == PUBLISHED_REWARD_MODELS["skywork-v2"]
    assert options.label == "Skywork-Reward-V2-Llama-3.1-8B" and options.batch_size == 2
    with pytest.raises(StageError, match="needs a model"):
        RewardOptions.from_mapping({})
    with pytest.raises(StageError, match="batch_size"):
        RewardOptions.from_mapping({"model": "x", "batch_size": 0})
    with pytest.raises(StageError, match="unknown option"):
        RewardOptions.from_mapping({"model": "x", "temperature": 1})
    assert response_text("  a = 1.  ", "") == "a = 1."


def _context(store: Store, options: dict[str, object]) -> StageContext:
    ctx = StageContext(store=store, config=ExperimentConfig(), progress=False)
    ctx.stage_options = {"reward": options}  # type: ignore[attr-defined]
    return ctx


def test_reward_stage_scores_every_trace_and_resumes(tmp_path: Path, tiny_model: Path) -> None:
    store = oversight_helpers.build_small_store(tmp_path / "store")
    options = {"model": str(tiny_model), "batch_size": 3, "device": "cpu"}
    result = run_stage("reward", _context(store, options))
    rewards = store.read("rewards")
    traces = store.read("traces")
    assert sorted(rewards["trace_id"]) == sorted(traces["trace_id"])
    assert set(rewards["reward_model"]) == {"tiny-rm"}
    assert result.written == {"rewards": 4} and result.skipped == 0
    # Parts hold whole batches and at least 16 rows: 3 * ceil(16 / 3) = 18 rows per part, so
    # the 4 traces (batches of 3 and 1) land in one part.
    parts = store.manifest["tables"]["rewards"]["parts"]
    assert [part["rows"] for part in parts] == [4]

    # The stored scores are the scorer's scores on (user prompt, reasoning + answer).
    from legival_core.tasks import get_task

    problems = store.read("problems").set_index("problem_id")
    scorer = RewardScorer(str(tiny_model), device="cpu")
    for row in traces.itertuples():
        problem = {"problem_id": row.problem_id, **problems.loc[row.problem_id].to_dict()}
        prompt = get_task("math").user_prompt(problem)
        expected = scorer.score([(prompt, response_text(row.reasoning, row.answer_text))])[0]
        stored = rewards.set_index("trace_id").loc[row.trace_id, "score"]
        assert stored == pytest.approx(expected, abs=1e-5)

    # Rerun: every key is done, nothing new is written.
    again = run_stage("reward", _context(store, options))
    assert again.written == {"rewards": 0} and again.skipped == 4
    assert len(store.read("rewards")) == 4
    # A second label is scored separately; provenance names the model and its settings.
    run_stage("reward", _context(store, {**options, "name": "tiny-2", "batch_size": 4}))
    assert len(store.read("rewards")) == 8
    record = [r for r in store.manifest["provenance"] if r["stage"] == "reward"][-1]
    assert record["models"]["tiny-2"]["model"] == str(tiny_model)
    assert record["models"]["tiny-2"]["revision"].startswith("config-sha256:")
    assert record["reward"]["batch_size"] == 4


def test_reward_stage_without_a_model_says_what_to_pass(tmp_path: Path) -> None:
    store = oversight_helpers.build_small_store(tmp_path / "store")
    with pytest.raises(StageError, match="--model"):
        run_stage("reward", _context(store, {}))


def test_standin_reward_model_builds_and_scores(tmp_path: Path) -> None:
    from precompute.stages.reward import build_standin_reward_model

    folder = build_standin_reward_model(tmp_path / "standin", seed=0)
    assert (folder / "config.json").is_file() and not (tmp_path / "standin.partial").exists()
    scorer = RewardScorer(str(folder), device="cpu")
    values = scorer.score(PAIRS[:3], batch_size=3)
    assert len(set(values)) == 3
    # Each score is the model's one logit on the pair rendered with the chat template, computed
    # here straight through transformers, one unpadded pair at a time.
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True)
    direct = []
    for prompt, response in PAIRS[:3]:
        chat = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
        text = tokenizer.apply_chat_template(chat, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            direct.append(float(model(input_ids=ids).logits[0, 0]))
    assert values == pytest.approx(direct, abs=1e-4)
    # The same seed gives the same (untrained) head, so the same scores.
    again = RewardScorer(str(build_standin_reward_model(tmp_path / "again", seed=0)), device="cpu")
    assert again.score(PAIRS[:3], batch_size=1) == pytest.approx(values, abs=1e-4)


def test_reward_stage_records_a_standin_explicitly(tmp_path: Path, tiny_model: Path) -> None:
    """A stand-in's folder carries a marker; the stage writes its reason into the provenance,
    where legival_core.store.provenance.reward_standin (and so the Reward models page) finds it.
    The folder is not named like the demo's, so only the explicit record can tell."""
    from legival_core.store.provenance import STANDIN_FOLDER, reward_standin
    from precompute.stages.reward import STANDIN_MARKER, build_standin_reward_model

    folder = build_standin_reward_model(tmp_path / "my-rm", seed=0)
    assert folder.name != STANDIN_FOLDER and (folder / STANDIN_MARKER).is_file()
    store = oversight_helpers.build_small_store(tmp_path / "store")
    result = run_stage("reward", _context(store, {"model": str(folder), "device": "cpu"}))
    run_stage("reward", _context(store, {"model": str(tiny_model), "device": "cpu"}))
    record = next(r for r in store.manifest["provenance"] if r["stage"] == "reward")
    assert "untrained" in record["models"]["my-rm"]["standin"]
    assert any("stand-in" in note for note in result.notes)
    assert "untrained" in (reward_standin(store.manifest, "my-rm") or "")
    assert reward_standin(store.manifest, "tiny-rm") is None
