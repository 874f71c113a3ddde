"""The rollout stage on llama.cpp prefills each distinct prefix token about once.

A trace's rollouts (k = 0, 3, 6, …, m) share their prompt prefixes, and a forcing pass shares
its rollout's whole first pass. llama.cpp keeps the cache of the last sequence it ran, so the
stage sends one rollout at a time with its forcing pass right after its first pass
(``caches_last_sequence``). The limit an ideal cache reaches is, per (trace, student), the
longest first-pass prompt plus each forcing pass's own suffix (bench/rollout_bench.py,
``prefill_limit``, checked by hand in test_benches.py). Counted by the engine, not timed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import rollout_bench  # noqa: E402

from precompute.backends import make_engine  # noqa: E402
from precompute.demo import DemoOptions, demo_config  # noqa: E402
from precompute.stages.base import resolve_model  # noqa: E402

DEMO = REPO / "results" / "demo"


@pytest.fixture(scope="module")
def engine() -> rollout_bench.RecordingEngine:
    return rollout_bench.RecordingEngine(
        make_engine("llamacpp", resolve_model("smollm2-135m"), n_threads=1)
    )


def _config() -> object:
    # Short budgets keep the test quick; the prompts (and so the prefixes) are the demo's.
    # SmolLM2 alone: the recording engine above serves every student the stage runs.
    options = DemoOptions(out=Path("unused"), max_tokens=24, forcing_tokens=12)
    return demo_config(options.replace(students=options.students[:1]))


@pytest.mark.slow
def test_the_stage_prefills_within_a_fifth_of_the_limit_and_matches_batched_forcing(
    engine: rollout_bench.RecordingEngine, tmp_path: Path
) -> None:
    config = _config()
    runs = {}
    for mode, interleave in (("interleaved", True), ("batched", False)):
        store, _steps = rollout_bench.demo_subset_store(tmp_path / mode, DEMO, 4)
        _result, _seconds, stats, calls = rollout_bench.run_stage_recorded(
            engine, store, config, interleave
        )
        runs[mode] = (stats, rollout_bench.prefill_limit(calls), store)
    stats, limit, store = runs["interleaved"]
    forced = store.read("rollouts", columns=["forced"])["forced"]
    assert forced.sum() > 0  # forcing passes ran (24 tokens rarely reach an answer)
    assert stats["prefill_tokens"] <= 1.2 * limit, (stats, limit)
    # Sent together, each batch's forcing prompts prefill their prefixes again: well over.
    batched_stats, batched_limit, batched_store = runs["batched"]
    assert batched_limit == limit
    assert batched_stats["prefill_tokens"] > stats["prefill_tokens"]
    # The order of the requests changes what is cached, so the same requests are sent; the
    # greedy text itself may differ where prefills of other lengths round differently in
    # llama.cpp (docs/demo.md: 77 of 436 texts between two builds), so most, not all, agree.
    columns = ["trace_id", "k", "completion", "correct", "forced"]
    ours = store.read("rollouts", columns=columns).sort_values(["trace_id", "k"])
    theirs = batched_store.read("rollouts", columns=columns).sort_values(["trace_id", "k"])
    ours, theirs = ours.reset_index(drop=True), theirs.reset_index(drop=True)
    keys = ["trace_id", "k", "forced"]
    assert ours[keys].equals(theirs[keys])
    assert (ours["completion"] == theirs["completion"]).mean() >= 0.5
