"""``connections``: NYT Connections (``tm21cy/NYT-Connections``): 16 words into four groups
of four; the gold is the groups as a JSON list, checked to use exactly the puzzle's words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from precompute.datasets.base import (
    HubSource,
    RowContext,
    RowError,
    list_field,
    meta_json,
    problem_row,
    text_field,
)
from precompute.datasets.sources import hub_loader

__all__ = ["CONNECTIONS"]


def _connections(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    words = [str(w) for w in list_field(row, "words")]
    groups = list_field(row, "answers")
    gold_groups: list[list[str]] = []
    categories: list[str] = []
    for number, group in enumerate(groups, start=1):
        if not isinstance(group, dict) or not isinstance(group.get("words"), list | tuple):
            raise RowError("answers", f"group {number} has no word list")
        gold_groups.append([str(w) for w in group["words"]])
        categories.append(str(group.get("answerDescription", "")))
    if len(words) != 16 or len(gold_groups) != 4 or any(len(g) != 4 for g in gold_groups):
        raise RowError("answers", "expected 16 words in 4 groups of 4")
    if sorted(w.casefold() for g in gold_groups for w in g) != sorted(w.casefold() for w in words):
        raise RowError("answers", "the groups do not use exactly the puzzle's 16 words")
    contest = text_field(row, "contest", required=False) or ""
    number_match = re.search(r"#\s*(\d+)", contest)
    key = number_match.group(1) if number_match else text_field(row, "date", required=False)
    return problem_row(
        ctx,
        problem_id=f"{ctx.dataset}/{key or ctx.number}",
        prompt=", ".join(words),
        gold=json.dumps(gold_groups, ensure_ascii=False),
        meta=meta_json(
            {
                "words": words,
                "categories": categories,
                "date": row.get("date"),
                "contest": contest or None,
                "difficulty": row.get("difficulty"),
            }
        ),
    )


CONNECTIONS = hub_loader(
    "connections",
    "connections",
    _connections,
    HubSource("tm21cy/NYT-Connections", (None,), "train"),
    "NYT Connections (652 puzzles): 16 words into 4 groups of 4; gold = JSON list of groups.",
    "tm21cy/NYT-Connections, CC BY 4.0",
)
