"""Benchmark: reward scoring on the CPU, one trace per forward pass vs padded batches.

The workload is the first ``--traces`` traces of the bundled demo store (recorded CHAMP
solutions, MIT) scored by the demo's stand-in reward model (SmolLM2-135M with a seeded score
head; the cost is that of any 135M sequence classifier). Both contenders score the same
encoded sequences in the same shortest-first order, the way the ``reward`` stage does; the model
is warmed up first. The scores of the two runs must agree (padding must not change a reward).

    python bench/reward_bench.py [--traces 32] [--batch-size 8] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `python bench/x.py` puts bench/ on sys.path, not the repo root

from legival_core.store.store import Store  # noqa: E402
from precompute.models import model_cache_dir  # noqa: E402
from precompute.stages.common import chunks, is_missing  # noqa: E402
from precompute.stages.reward import (  # noqa: E402
    RewardScorer,
    build_standin_reward_model,
    response_text,
)

DEMO = REPO / "results" / "demo"


def encoded_traces(scorer: RewardScorer, count: int) -> list[list[int]]:
    """Token ids of the first ``count`` demo traces, shortest first (as the stage orders them)."""
    store = Store.open(DEMO)
    problems = store.read("problems").set_index("problem_id")["prompt"]
    traces = store.read("traces").sort_values("trace_id").head(count)
    sequences = []
    for row in traces.itertuples(index=False):
        reasoning = "" if is_missing(row.reasoning) else str(row.reasoning)
        answer = "" if is_missing(row.answer_text) else str(row.answer_text)
        sequences.append(scorer.encode(problems[row.problem_id], response_text(reasoning, answer)))
    return sorted(sequences, key=len)


def timed_scores(
    scorer: RewardScorer, sequences: list[list[int]], batch: int
) -> tuple[float, list[float]]:
    started = time.perf_counter()
    scores: list[float] = []
    for group in chunks(sequences, batch):
        scores.extend(scorer.score_ids(group))
    return time.perf_counter() - started, scores


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    model = build_standin_reward_model(model_cache_dir() / "SmolLM2-135M-reward-standin")
    scorer = RewardScorer(str(model), device="cpu")
    sequences = encoded_traces(scorer, args.traces)
    lengths = [len(s) for s in sequences]
    scorer.score_ids(sequences[:2])  # warm-up
    single_s, single = timed_scores(scorer, sequences, 1)
    batched_s, batched = timed_scores(scorer, sequences, args.batch_size)
    worst = max(abs(a - b) for a, b in zip(single, batched, strict=True))
    n = len(sequences)
    print(
        f"{n} traces, {sum(lengths):,} tokens (mean {sum(lengths) / n:.0f}, max {max(lengths)}), "
        f"{torch.get_num_threads()} torch thread(s)"
    )
    print(f"batch 1: {single_s:.1f} s ({single_s / n:.2f} s per trace)")
    print(f"batch {args.batch_size}: {batched_s:.1f} s ({batched_s / n:.2f} s per trace)")
    print(f"one at a time is {batched_s / single_s:.2f}x faster; scores agree to {worst:.1e}")


if __name__ == "__main__":
    main()
