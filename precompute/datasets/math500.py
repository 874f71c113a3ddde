"""``math500``: MATH-500 (``HuggingFaceH4/MATH-500``), the subset of MATH whose rows carry the
extracted answer and a ``unique_id`` (``math500/test/algebra/4410``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from precompute.datasets.base import (
    HubSource,
    RowContext,
    meta_json,
    problem_row,
    text_field,
)
from precompute.datasets.sources import hub_loader

__all__ = ["MATH500"]


def _math500(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    unique_id = text_field(row, "unique_id")
    stem = unique_id.removesuffix(".json")
    return problem_row(
        ctx,
        problem_id=f"{ctx.dataset}/{stem}",
        prompt=text_field(row, "problem"),
        gold=text_field(row, "answer"),
        reference_solution=text_field(row, "solution", required=False),
        meta=meta_json({"subject": row.get("subject"), "level": row.get("level")}),
    )


MATH500 = hub_loader(
    "math500",
    "math",
    _math500,
    HubSource("HuggingFaceH4/MATH-500", (None,), "test"),
    "MATH-500 subset of MATH with extracted answers.",
    "MATH, MIT licence",
)
