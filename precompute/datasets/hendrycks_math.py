"""``math``: MATH (Hendrycks et al.), all seven subjects, from ``EleutherAI/hendrycks_math``.

The gold answer is the last ``\\boxed{}`` of the reference solution (:func:`boxed_answer`); a
row whose solution has none is skipped. The hub rows carry no id, so a problem is named by its
subject and its place among that subject's rows (``math/test/algebra/12``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from precompute.datasets.base import (
    HubSource,
    RowContext,
    RowError,
    meta_json,
    problem_row,
    slug,
    text_field,
)
from precompute.datasets.sources import hub_loader

__all__ = ["MATH", "boxed_answer"]


_MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)


def boxed_answer(solution: str) -> str | None:
    r"""Content of the last closed ``\boxed{...}`` (or ``\fbox{...}``) of a reference solution:
    the gold answer of a MATH-style problem. The same extractor as a model's box
    (:func:`legival_core.grading.boxes.last_boxed`), so gold and answer are read alike: escaped
    braces never count, a box nested in another is part of it, an unclosed box is no box.

    >>> boxed_answer(r"so $x = \boxed{\frac{1}{2}}$.")
    '\\frac{1}{2}'
    >>> boxed_answer(r"first \boxed{1}, then \boxed{2}")
    '2'
    >>> boxed_answer("no box") is None
    True
    """
    from legival_core.grading.boxes import last_boxed

    return last_boxed(solution)


def _math_full(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    solution = text_field(row, "solution")
    gold = boxed_answer(solution)
    if gold is None:
        raise RowError("solution", "no \\boxed{...} answer in the solution")
    subject = text_field(row, "type", required=False) or ctx.config or "unknown"
    index = ctx.next_index(subject)
    return problem_row(
        ctx,
        problem_id=f"{ctx.dataset}/{ctx.split}/{slug(subject)}/{index}",
        prompt=text_field(row, "problem"),
        gold=gold,
        reference_solution=solution,
        meta=meta_json({"subject": subject, "level": row.get("level"), "index": index}),
    )


MATH = hub_loader(
    "math",
    "math",
    _math_full,
    HubSource("EleutherAI/hendrycks_math", _MATH_SUBJECTS, "test"),
    "MATH (Hendrycks et al.), all 7 subjects; gold = last \\boxed{} of the solution.",
    "MATH, MIT licence",
)
