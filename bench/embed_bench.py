"""Benchmark: Legi-Val's redundancy embedding path against a bare SentenceTransformer.encode.

The workload is 5,000 steps of which 30% repeat an earlier step, the way real reasoning
traces repeat themselves. Steps are real sentences: the recorded model solutions shipped
in the ``champ-dataset`` package (MIT), split with :func:`legival_core.text.segment.split_steps`.

Both contenders get the same list and the same MiniLM object; the model is warmed up first
and our caches start empty, so the comparison is a cold first pass for both.

    python bench/embed_bench.py [--steps 5000] [--repeat-share 0.3] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from importlib import resources
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `python bench/x.py` puts bench/ on sys.path, not the repo root

from legival_core.text.embedding import clear_memory_cache, embed_sentences, load_minilm  # noqa: E402
from legival_core.text.segment import split_steps  # noqa: E402


def champ_sentences(limit: int, seed: int) -> list[str]:
    """Distinct sentences from CHAMP's recorded model solutions, shuffled with ``seed``."""
    raw = resources.files("champ_dataset").joinpath("dataset_files/v0.json").read_text()
    problems = json.loads(raw)["problems"]
    seen: dict[str, None] = {}
    for problem in problems.values():
        for conversation in (problem.get("conversations") or {}).values():
            for message in conversation.get("messages") or []:
                if str(message.get("role", "")).startswith("Model.") and message.get("text"):
                    for step in split_steps(message["text"]):
                        if len(step.text) >= 8:
                            seen.setdefault(step.text, None)
    sentences = list(seen)
    random.Random(seed).shuffle(sentences)
    if len(sentences) < limit:
        raise SystemExit(f"champ-dataset gave only {len(sentences)} distinct sentences")
    return sentences[:limit]


def workload(n_steps: int, repeat_share: float, seed: int) -> list[str]:
    """``n_steps`` steps; ``repeat_share`` of them copy an earlier, distinct step."""
    n_distinct = round(n_steps * (1 - repeat_share))
    distinct = champ_sentences(n_distinct, seed)
    rng = random.Random(seed + 1)
    steps = distinct + [rng.choice(distinct) for _ in range(n_steps - n_distinct)]
    rng.shuffle(steps)
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--repeat-share", type=float, default=0.3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="cpu / cuda (default: cuda if present)")
    args = parser.parse_args()

    steps = workload(args.steps, args.repeat_share, args.seed)
    model = load_minilm(args.device)
    model.encode(steps[:128], batch_size=args.batch_size, show_progress_bar=False)  # warm-up
    clear_memory_cache(model)  # our path starts cold, like the bare one

    started = time.perf_counter()
    bare = model.encode(
        steps,
        batch_size=args.batch_size,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=False,
    )
    bare_s = time.perf_counter() - started

    started = time.perf_counter()
    ours = embed_sentences(steps, model=model, batch_size=args.batch_size)
    ours_s = time.perf_counter() - started

    started = time.perf_counter()
    embed_sentences(steps, model=model, batch_size=args.batch_size)
    warm_s = time.perf_counter() - started

    max_diff = float(np.max(np.abs(ours - bare)))
    n = len(steps)
    print(f"device            {model.device}")
    print(f"steps             {n} ({len(set(steps))} distinct, {args.repeat_share:.0%} repeats)")
    print(f"bare encode       {n / bare_s:9.1f} sentences/s  ({bare_s:.2f} s)")
    print(f"embed_sentences   {n / ours_s:9.1f} sentences/s  ({ours_s:.2f} s, cold cache)")
    print(f"speed-up          {bare_s / ours_s:9.2f}x")
    print(f"warm cache        {n / warm_s:9.1f} sentences/s  ({warm_s:.3f} s)")
    print(f"max |ours - bare| {max_diff:.2e}")


if __name__ == "__main__":
    main()
