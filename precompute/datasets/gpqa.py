"""``gpqa``: GPQA main (``Idavidrein/gpqa``, gated), 448 four-option science questions.

The four options are shuffled with a seed recorded per problem (``choice_seed``); the task
family (:mod:`legival_core.tasks.gpqa`) owns the shuffle, so grading reads the same order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from legival_core.tasks.gpqa import choice_seed_for, shuffle_choices
from precompute.datasets.base import (
    HubSource,
    RowContext,
    meta_json,
    problem_row,
    text_field,
)
from precompute.datasets.sources import hub_loader

__all__ = ["GPQA"]


def _gpqa(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    record = text_field(row, "Record ID")
    correct = text_field(row, "Correct Answer").strip()
    wrong = [text_field(row, f"Incorrect Answer {i}").strip() for i in (1, 2, 3)]
    pid = f"{ctx.dataset}/{record}"
    # The task family owns the shuffle convention; we record the seed it used.
    choice_seed = choice_seed_for(pid, ctx.seed)
    shuffled, gold_letter = shuffle_choices(correct, wrong, choice_seed)
    return problem_row(
        ctx,
        problem_id=pid,
        prompt=text_field(row, "Question").strip(),
        gold=gold_letter,
        choices=shuffled,
        choice_seed=choice_seed,
        reference_solution=text_field(row, "Explanation", required=False),
        meta=meta_json(
            {
                "correct_answer": correct,
                "subdomain": row.get("Subdomain"),
                "domain": row.get("High-level domain"),
                "run_seed": ctx.seed,
                "config": ctx.config or None,
            }
        ),
    )


GPQA = hub_loader(
    "gpqa",
    "gpqa",
    _gpqa,
    HubSource(
        "Idavidrein/gpqa",
        ("gpqa_main",),
        "train",
        gated=True,
        access_hint=(
            "log in at https://huggingface.co, accept the terms on "
            "https://huggingface.co/datasets/Idavidrein/gpqa, create a read token at "
            "https://huggingface.co/settings/tokens and export HF_TOKEN=<token> "
            "(or pass a local CSV with the same columns)"
        ),
    ),
    "GPQA (main, 448 questions); the four options shuffled with a recorded per-problem seed.",
    "GPQA, CC BY 4.0; do not republish the questions in plain text",
)
