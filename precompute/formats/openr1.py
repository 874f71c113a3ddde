"""``--format openr1``: OpenR1-Math-style trace datasets (a Hub dataset or a file of its rows).

One row per problem: ``problem``, ``answer`` (the gold answer), ``generations`` (a list: several
traces per problem) and, per generation, ``correctness_math_verify`` and ``finish_reasons``
(lists of the same length); ``uuid`` names the problem.

=================================  =============================================================
OpenR1                             ingest
=================================  =============================================================
``uuid`` (else the row number)     ``problem_id``
``problem``                        ``prompt``
``answer``                         ``gold``
``generations[i]``                 ``raw``, split on its last ``</think>``; ``i`` → ``sample``
``finish_reasons[i] == "length"``  ``truncated`` (when no answer can be extracted)
``correctness_math_verify[i]``     the tool's verdict (``tool_grades``)
=================================  =============================================================

The rows name no model and hold no token counts: give ``--teacher`` (the dataset card names the
model, e.g. DeepSeek-R1); tokens are tiktoken counts (said once in the summary).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from precompute.formats.base import (
    RecordError,
    TraceFormat,
    as_list,
    as_verdict,
    generation_rows,
)

__all__ = ["OpenR1Format"]


class OpenR1Format(TraceFormat):
    """Rows with a ``generations`` list per problem."""

    name = "openr1"
    tool = "OpenR1-Math-style dataset"
    names_model = False
    lacks = ("the rows hold no token counts: tokens are a tiktoken count of each generation",)

    def __init__(self) -> None:
        super().__init__()
        self._row = 0

    def sniff_record(self, keys: frozenset[str], record: Mapping[str, Any]) -> bool:
        generations = record.get("generations")
        return "problem" in keys and (
            isinstance(generations, list | tuple) or hasattr(generations, "tolist")
        )

    def convert(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        self._row += 1
        generations = as_list(record.get("generations"), "generations")
        if not generations:
            raise RecordError("generations", "missing or empty")
        verdicts = as_list(record.get("correctness_math_verify"), "correctness_math_verify")
        finishes = as_list(record.get("finish_reasons"), "finish_reasons")
        problem_id = record.get("uuid") or record.get("problem_id") or f"row-{self._row}"
        rows = generation_rows(
            generations,
            field_name="generations",
            path="generations",
            item="generation",
            problem_id=problem_id,
            prompt=record.get("problem"),
            gold=record.get("answer"),
        )
        for index, row in enumerate(rows):
            row["hit_budget"] = (finishes[index] == "length") if index < len(finishes) else None
            if index < len(verdicts):
                row["tool_scorer"] = "openr1:correctness_math_verify"
                row["tool_correct"] = as_verdict(verdicts[index])
        return rows
