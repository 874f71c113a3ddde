"""``gsm8k``: GSM8K (``openai/gsm8k``): the gold is the text after ``####``.

Its workload is the number of solution lines (``gold_steps``, the default) or, with the option
``workload="arith_ops"``, the arithmetic operations of the calculator annotations
(:func:`gsm8k_parts`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from precompute.datasets.base import (
    DatasetUsageError,
    HubSource,
    RowContext,
    RowError,
    meta_json,
    problem_row,
    text_field,
)
from precompute.datasets.sources import hub_loader

__all__ = ["GSM8K", "count_arithmetic_ops", "gsm8k_parts"]


_CALC = re.compile(r"<<([^<>]*?)=([^<>]*?)>>")


def count_arithmetic_ops(expression: str) -> int:
    """Number of binary arithmetic operators (+ - * / ** and ×, ÷) in an expression.

    A minus sign with no operand before it (at the start, after an operator or after an
    opening parenthesis) is a sign, not an operation.

    >>> count_arithmetic_ops("48/2")
    1
    >>> count_arithmetic_ops("48+24+10")
    2
    >>> count_arithmetic_ops("-3*(-2)")
    1
    >>> count_arithmetic_ops("2**3")
    1
    """
    operations = 0
    previous = "start"
    index = 0
    while index < len(expression):
        char = expression[index]
        if char.isspace():
            index += 1
            continue
        if char in "+-*/×÷":
            step = 2 if expression.startswith("**", index) else 1
            if previous in ("operand", ")"):
                operations += 1
            previous = "operator"
            index += step
            continue
        previous = "(" if char == "(" else ")" if char == ")" else "operand"
        index += 1
    return operations


def gsm8k_parts(answer: str) -> tuple[str, list[str], int, int]:
    """Split a GSM8K answer into (gold, solution lines, calculator annotations, operations).

    The gold is the text after ``####``. Solution lines are the non-empty lines before it
    with the ``<<expr=value>>`` calculator annotations removed; operations counts binary
    operators in the annotations' left-hand sides (:func:`count_arithmetic_ops`).

    >>> gold, lines, calls, ops = gsm8k_parts(
    ...     "She has 3*4 = <<3*4=12>>12.\\nThen 12+5+1 = <<12+5+1=18>>18.\\n#### 18")
    >>> gold, len(lines), calls, ops
    ('18', 2, 2, 3)
    """
    if "####" not in answer:
        raise RowError("answer", "no '####' marker before the final answer")
    body, _, tail = answer.rpartition("####")
    gold = tail.strip()
    if not gold:
        raise RowError("answer", "empty final answer after '####'")
    annotations = _CALC.findall(body)
    operations = sum(count_arithmetic_ops(lhs) for lhs, _ in annotations)
    lines = [_CALC.sub("", line).strip() for line in body.splitlines()]
    return gold, [line for line in lines if line], len(annotations), operations


def _gsm8k(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    answer = text_field(row, "answer")
    gold, lines, calls, operations = gsm8k_parts(answer)
    kind = ctx.options.get("workload", "gold_steps")
    native = {"gold_steps": len(lines), "arith_ops": operations}
    if kind not in native:
        raise DatasetUsageError(
            f"gsm8k: unknown workload {kind!r} (choose gold_steps or arith_ops)"
        )
    workload = native[kind]
    return problem_row(
        ctx,
        problem_id=f"{ctx.dataset}/{ctx.split}/{ctx.number - 1}",
        prompt=text_field(row, "question"),
        gold=gold,
        workload=float(workload) if workload > 0 else None,
        workload_kind=kind if workload > 0 else None,
        reference_solution="\n".join(lines),
        meta=meta_json({"gold_steps": len(lines), "arith_ops": operations, "calc_calls": calls}),
    )


GSM8K = hub_loader(
    "gsm8k",
    "gsm8k",
    _gsm8k,
    HubSource("openai/gsm8k", ("main",), "test"),
    "GSM8K; gold after '####'; workload = gold solution lines (or arith_ops).",
    "GSM8K, MIT licence",
)
