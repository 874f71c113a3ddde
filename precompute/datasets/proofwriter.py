"""``proofwriter``: ProofWriter (``tasksource/proofwriter``): is a statement True, False or
Unknown given the facts and rules? Graded by exact match (task ``jsonl``), with the answer
format in ``meta.instructions``; the workload is the proof depth ``QDep`` when it is above 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from precompute.datasets.base import (
    HubSource,
    RowContext,
    integer_field,
    meta_json,
    problem_row,
    text_field,
)
from precompute.datasets.sources import hub_loader

__all__ = ["PROOFWRITER"]


_PROOFWRITER_INSTRUCTIONS = (
    "Using only the facts and rules above, decide whether the statement is True, False or "
    "Unknown. Reason step by step, then end with a line 'Answer: True', 'Answer: False' or "
    "'Answer: Unknown'."
)


def _proofwriter(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    ident = text_field(row, "id")
    depth = integer_field(row, "QDep")
    assert depth is not None
    config = text_field(row, "config", required=False)
    theory = text_field(row, "theory").strip()
    question = text_field(row, "question").strip()
    # W must be > 0 for the overhead VO = T / W; depth-0 questions (a fact look-up) get no
    # native workload [choice] rather than an invented offset.
    return problem_row(
        ctx,
        problem_id=f"{ctx.dataset}/{config + '/' if config else ''}{ident}",
        prompt=f"{theory}\n\nQuestion: {question}",
        gold=text_field(row, "answer"),
        workload=float(depth) if depth > 0 else None,
        workload_kind="proof_depth" if depth > 0 else None,
        reference_solution=text_field(row, "allProofs", required=False),
        meta=meta_json(
            {
                "proof_depth": depth,
                "max_depth": row.get("maxD"),
                "facts": row.get("NFact"),
                "rules": row.get("NRule"),
                "config": config,
                "instructions": _PROOFWRITER_INSTRUCTIONS,
            }
        ),
    )


PROOFWRITER = hub_loader(
    "proofwriter",
    "jsonl",  # exact match of True/False/Unknown; the answer format is in meta.instructions
    _proofwriter,
    HubSource("tasksource/proofwriter", (None,), "test"),
    "ProofWriter True/False/Unknown questions; workload = proof depth QDep (>0).",
    "ProofWriter (Tafjord et al.), CC BY 4.0",
)
