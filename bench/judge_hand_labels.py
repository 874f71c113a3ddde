"""Run the LLM judge stage's prompt and parser on the hand-labelled backtracking steps.

Every item of ``tests/fixtures/backtracking_labels.jsonl`` is shown to a judge model exactly as
the ``judge`` stage shows a trace (:func:`precompute.stages.judge.judge_messages`, the CHAMP
task's rubric): the problem and the item's steps numbered 1.. (up to three steps before the
labelled one, the step itself, one after). The reply is parsed by the stage's own
:func:`precompute.stages.judge.parse_verdict`; the labelled step counts as flagged when a valid
verdict lists its number. Replies are written one JSON line per item (``item``, ``half``,
``labeler``, ``raw``, ``finish``, ``seconds``) so that ``bench/label_quality.py`` scores them
with the same parser, and a rerun skips the items already in the file.

Any engine of :mod:`precompute.backends` can serve; the default is llama.cpp on the CPU::

    python bench/judge_hand_labels.py --model /path/to/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \\
        --name qwen2.5-coder-0.5b --half test --shuffle \\
        --out tests/fixtures/backtracking_judge_qwen2.5-coder-0.5b.jsonl
    python bench/judge_hand_labels.py --model smollm2-135m --name smollm2-135m --limit 20 \\
        --out /tmp/smollm2.jsonl
    python bench/judge_hand_labels.py --engine transformers --model Qwen/... --device cuda ...

The model file is an argument, not a project dependency: the measured numbers go into
``legival_core/data/label_quality.json`` through ``bench/label_quality.py --judge FILE``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `python bench/x.py` puts bench/ on sys.path, not the repo root

LABELS = REPO / "tests" / "fixtures" / "backtracking_labels.jsonl"
#: Seed of ``--shuffle``'s order.
SEED = "38judge"


def judge_request(item: dict[str, Any], prompt: str, rubric: str, max_tokens: int) -> Any:
    """The judge stage's request for one hand-labelled item (greedy decoding)."""
    from precompute.backends import GenerationRequest
    from precompute.stages.judge import judge_messages

    steps = [*item["before"], item["text"], *item["after"]]
    return GenerationRequest(
        f"item-{item['item']}",
        judge_messages(prompt, steps, rubric),
        max_tokens=max_tokens,
        temperature=0.0,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--model", required=True, help="a .gguf file, a packaged name, or a hub id")
    parser.add_argument("--name", required=True, help="the judge's name (labeler judge:<name>)")
    parser.add_argument("--out", type=Path, required=True, help="JSON lines of the replies")
    parser.add_argument("--engine", default="llamacpp", help="an engine of precompute.backends")
    parser.add_argument("--half", choices=("dev", "test", "all"), default="all")
    parser.add_argument("--limit", type=int, default=None, help="at most this many items")
    parser.add_argument(
        "--shuffle",
        action="store_true",
        help="ask in a seeded random order, so a run stopped part way has answered a random "
        "sample of the half (scored on the items answered)",
    )
    parser.add_argument("--max-tokens", type=int, default=320)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--device", default=None, help="transformers/vLLM device (cuda, cpu)")
    parser.add_argument("--n-gpu-layers", type=int, default=0, help="llama.cpp layers on a GPU")
    args = parser.parse_args(argv)

    from legival_core.tasks import get_task
    from precompute.backends.registry import make_engine
    from precompute.champ import champ_problems
    from precompute.stages.judge import labeler_name

    items = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines()]
    if args.half != "all":
        items = [item for item in items if item["half"] == args.half]
    done: set[int] = set()
    if args.out.exists():
        done = {json.loads(line)["item"] for line in args.out.read_text().splitlines() if line}
    todo = [item for item in items if item["item"] not in done]
    if args.shuffle:
        random.Random(f"{SEED}:order").shuffle(todo)
    todo = todo[: args.limit]
    if not todo:
        print(f"judge_hand_labels: every item is already in {args.out}", file=sys.stderr)
        return 0
    prompts = dict(zip(champ_problems()["problem_id"], champ_problems()["prompt"], strict=True))
    rubric = get_task("champ").backtracking_rubric
    options: dict[str, Any] = {}
    if args.engine == "llamacpp":
        options = {"n_ctx": args.n_ctx, "n_gpu_layers": args.n_gpu_layers}
    elif args.device:
        options = {"device": args.device}
    engine = make_engine(args.engine, args.model, **options)
    labeler = labeler_name(args.name)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        with args.out.open("a", encoding="utf-8") as out:
            for number, item in enumerate(todo, start=1):
                request = judge_request(item, prompts[item["problem_id"]], rubric, args.max_tokens)
                began = time.monotonic()
                (completion,) = engine.generate([request])
                row = {
                    "item": item["item"],
                    "half": item["half"],
                    "labeler": labeler,
                    "raw": completion.text if completion.ok else None,
                    "finish": completion.finish_reason,
                    "error": completion.error,
                    "seconds": round(time.monotonic() - began, 2),
                }
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                out.flush()
                elapsed = time.monotonic() - started
                print(
                    f"{number}/{len(todo)} item {item['item']} {row['seconds']} s "
                    f"({elapsed / number:.1f} s per item)",
                    file=sys.stderr,
                )
    finally:
        close = getattr(engine, "close", None)
        if close is not None:
            close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
