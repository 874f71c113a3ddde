"""A user's file of recorded CHAMP replies, ingested as ``python -m precompute ingest`` would.

The answer-grading tests write hand-labelled CHAMP replies to a JSONL file in the bring-your-own
format and ingest it with ``--task champ``, then compare the grades with the labels.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd


def ingest_labelled_replies(
    labels: pd.DataFrame,
    trace_of: Callable[[Any], Mapping[str, Any]],
    source: Path,
    store: Path,
) -> int:
    """Write one JSONL record per row of ``labels`` (problem, gold, teacher and the recorded
    reasoning and answer ``trace_of(row)`` gives) to ``source`` and ingest it into ``store``
    under the CHAMP task; returns the command's exit code."""
    from precompute.champ import champ_problems
    from precompute.cli import main

    problems = champ_problems().set_index("problem_id")
    with source.open("w", encoding="utf-8") as out:
        for row in labels.itertuples():
            trace = trace_of(row)
            record = {
                "problem_id": row.problem_id.removeprefix("champ/"),
                "prompt": problems.loc[row.problem_id, "prompt"],
                "gold": row.gold,
                "teacher": row.teacher,
                "reasoning": trace["reasoning"],
                "answer": trace["answer_text"],
            }
            out.write(json.dumps(record) + "\n")
    return main(
        ["ingest", str(source), "--store", str(store), "--teacher", "x", "--task", "champ",
         "--dataset", "champ"]
    )  # fmt: skip
