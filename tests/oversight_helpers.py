"""Shared builders for the oversight tests: a six-step trace to sabotage, a tiny reward model
and a small graded store.

The reward model is a real ``LlamaForSequenceClassification`` (2 layers, hidden size 32,
seeded random weights) with the real SmolLM2 tokenizer and chat template, saved to a folder
and loaded back by the stage's own code: it exercises the whole scoring path in seconds.

The store holds two made-up teachers answering two made-up arithmetic problems: three correct
traces and one natural failure (``tutor-b`` adds where it should subtract), with steps cut by
the real segmenter.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from legival_core.store.schema import trace_id_for
from legival_core.store.store import Store

#: A six-step trace the sabotage tests cut and edit; steps 2..3 (0-based) are its middle third
#: (6 // 3 = 2 up to 6 - 2 = 4, exclusive).
STEPS = [
    "A box holds 12 pens.",
    "There are 4 boxes.",
    "So the total is 12 * 4 = 48 pens.",
    "Then -3 pens are returned, so 48 - 3 = 45 remain.",
    "Each pen costs 2 dollars.",
    "The answer is 45.",
]
TEXT = " ".join(STEPS)


def spans_of(steps: list[str]) -> list[tuple[int, int]]:
    """The (start, end) of each step in ``" ".join(steps)``."""
    spans, cursor = [], 0
    for step in steps:
        spans.append((cursor, cursor + len(step)))
        cursor += len(step) + 1
    return spans


PROBLEMS = [
    ("mini/pens", "A box holds 12 pens. How many pens are in 4 boxes?", "48"),
    ("mini/apples", "Sam has 30 apples and gives away 12. How many apples are left?", "18"),
]
#: (teacher, problem_id) -> (reasoning, answer_text, correct)
TRACES: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("tutor-a", "mini/pens"): (
        "A box holds 12 pens. There are 4 boxes. So the total is 12 * 4 = 48 pens. "
        "Checking: 48 / 4 = 12 pens per box. The answer is 48.",
        "\\boxed{48}",
        True,
    ),
    ("tutor-a", "mini/apples"): (
        "Sam starts with 30 apples. He gives away 12 apples. So 30 - 12 = 18 apples are left. "
        "Check: 18 + 12 = 30. The answer is 18.",
        "\\boxed{18}",
        True,
    ),
    ("tutor-b", "mini/pens"): (
        "Each box has 12 pens. Four boxes means 4 groups. Then 4 * 12 = 48 in all. "
        "That matches 12 + 12 + 12 + 12 = 48. So 48 pens.",
        "\\boxed{48}",
        True,
    ),
    ("tutor-b", "mini/apples"): (
        "Sam starts with 30 apples. He gives away 12 apples. So 30 + 12 = 42 apples remain. "
        "The answer is 42.",
        "\\boxed{42}",
        False,
    ),
}


def build_small_store(path: str | Path) -> Store:
    """Problems, traces, grades and steps for the four traces of :data:`TRACES`."""
    from precompute.stages.segment import step_rows

    store = Store.create(path)  # no experiment config: the CLI falls back to the defaults
    store.write(
        "problems",
        pd.DataFrame(
            {
                "problem_id": [p for p, _, _ in PROBLEMS],
                "dataset": "mini",
                "task": "math",
                "prompt": [q for _, q, _ in PROBLEMS],
                "gold": [g for _, _, g in PROBLEMS],
            }
        ),
        stage="fixture",
    )
    traces, grades, steps = [], [], []
    for (teacher, problem_id), (reasoning, answer, correct) in TRACES.items():
        trace_id = trace_id_for(teacher, problem_id)
        traces.append(
            {
                "trace_id": trace_id,
                "problem_id": problem_id,
                "dataset": "mini",
                "teacher": teacher,
                "sample": 0,
                "reasoning": reasoning,
                "answer_text": answer,
                "source": "test-fixture",
            }
        )
        grades.append(
            {
                "trace_id": trace_id,
                "extracted": answer[7:-1],
                "correct": correct,
                "score": float(correct),
                "status": "ok",
            }
        )
        steps += step_rows(trace_id, reasoning, "paper", "cl100k_base")
    store.write("traces", pd.DataFrame(traces), stage="fixture")
    store.write("grades", pd.DataFrame(grades), stage="fixture")
    store.write("steps", pd.DataFrame(steps), stage="fixture")
    return store


def build_tiny_reward_model(folder: str | Path) -> Path:
    """Save a 2-layer Llama reward model with the SmolLM2 tokenizer under ``folder``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    from precompute.models import smollm2_gguf_path

    folder = Path(folder)
    gguf = smollm2_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(config)
    # A visible score scale: the default init (std 0.02) makes every reward nearly equal.
    with torch.no_grad():
        model.score.weight.normal_(0.0, 1.0)
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)
    return folder
