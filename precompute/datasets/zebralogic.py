"""``zebralogic``: ZebraLogic grid puzzles (``allenai/ZebraLogicBench``, ``grid_mode``): the
gold is the solution grid as JSON, the workload the number of clues (:func:`count_zebra_clues`).
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
    meta_json,
    object_field,
    problem_row,
    text_field,
)
from precompute.datasets.sources import hub_loader

__all__ = ["ZEBRALOGIC", "count_zebra_clues"]


def count_zebra_clues(puzzle: str) -> int | None:
    """Number of numbered clues after the ``Clues`` heading of a ZebraLogic puzzle.

    >>> count_zebra_clues("Houses...\\n\\n## Clues:\\n1. A is left of B.\\n2. C is in house 2.\\n")
    2
    >>> count_zebra_clues("no clue section") is None
    True
    """
    match = re.search(r"^\s*#*\s*clues\s*:?\s*$", puzzle, flags=re.IGNORECASE | re.MULTILINE)
    if match is None:
        return None
    clues = re.findall(r"^\s*\d+\s*[.)]\s+\S", puzzle[match.end() :], flags=re.MULTILINE)
    return len(clues) or None


def _zebralogic(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    puzzle = text_field(row, "puzzle")
    solution = object_field(row, "solution")
    if not isinstance(solution.get("header"), list | tuple) or not isinstance(
        solution.get("rows"), list | tuple
    ):
        raise RowError("solution", "expected an object with 'header' and 'rows'")
    gold = {
        "header": [str(h) for h in solution["header"]],
        "rows": [[str(cell) for cell in r] for r in solution["rows"]],
    }
    clues = count_zebra_clues(puzzle)
    return problem_row(
        ctx,
        problem_id=f"{ctx.dataset}/{text_field(row, 'id')}",
        prompt=puzzle,
        gold=json.dumps(gold, ensure_ascii=False),
        workload=float(clues) if clues else None,
        workload_kind="clues" if clues else None,
        meta=meta_json({"size": row.get("size"), "clues": clues}),
    )


ZEBRALOGIC = hub_loader(
    "zebralogic",
    "zebralogic",
    _zebralogic,
    HubSource("allenai/ZebraLogicBench", ("grid_mode",), "test"),
    "ZebraLogic grid puzzles; gold = solution grid JSON; workload = number of clues.",
    "ZebraLogic (Lin et al.), see the dataset card",
)
