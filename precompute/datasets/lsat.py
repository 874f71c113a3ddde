"""``lsat``: AR-LSAT analytical reasoning (``tasksource/lsat-ar``): five options A-E, graded
by the ``gpqa`` task family, which reads the letters from the choices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from precompute.datasets.base import (
    HubSource,
    RowContext,
    RowError,
    integer_field,
    list_field,
    meta_json,
    problem_row,
    text_field,
)
from precompute.datasets.sources import hub_loader

__all__ = ["LSAT"]


_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _lsat(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    options = [str(o) for o in list_field(row, "answers")]
    label = integer_field(row, "label")
    assert label is not None
    if not 0 <= label < len(options):
        raise RowError("label", f"{label} is not an index into {len(options)} options")
    ident = text_field(row, "id_string", required=False) or str(ctx.number)
    context = text_field(row, "context").strip()
    question = text_field(row, "question").strip()
    return problem_row(
        ctx,
        problem_id=f"{ctx.dataset}/{ctx.split}/{ident}",
        prompt=f"{context}\n\n{question}",
        gold=_LETTERS[label],
        choices=options,
        meta=meta_json({"id_string": ident}),
    )


LSAT = hub_loader(
    "lsat",
    "gpqa",  # lettered multiple choice; the gpqa family reads the letters from the choices
    _lsat,
    HubSource("tasksource/lsat-ar", (None,), "test"),
    "AR-LSAT analytical reasoning, five options A-E.",
    "AR-LSAT (Zhong et al.), MIT licence",
)
