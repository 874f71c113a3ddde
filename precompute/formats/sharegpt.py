"""``--format sharegpt``: OpenThoughts / ShareGPT-style ``conversations`` rows.

``conversations`` is a list of turns, ``{"from": "human"|"gpt", "value": …}`` or
``{"role": "user"|"assistant", "content": …}``. The assistant turn holds the thinking in
``<|begin_of_thought|> … <|end_of_thought|>`` then ``<|begin_of_solution|> … <|end_of_solution|>``
(OpenThoughts), or in ``<think> … </think>``.

===========================================  ====================================================
ShareGPT                                     ingest
===========================================  ====================================================
``problem_id`` / ``id`` / ``uuid``, else a   ``problem_id``
hash of the problem text
the first user turn                          ``prompt``
the thought block                            ``reasoning``
the solution block (or what follows          ``answer``
``</think>``)
the last assistant turn                      ``raw``
``answer`` / ``gold`` column, if any         ``gold``
===========================================  ====================================================

The rows name no model and hold no token counts or verdicts: give ``--teacher``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from precompute.formats.base import (
    RecordError,
    TraceFormat,
    as_list,
    split_on_last_think,
    text_or_none,
)

__all__ = ["ShareGPTFormat", "split_thought_solution"]

_USER = {"human", "user"}
_ASSISTANT = {"gpt", "assistant", "model"}
_THOUGHT = re.compile(r"<\|begin_of_thought\|>(.*?)(<\|end_of_thought\|>|$)", re.DOTALL)
_SOLUTION = re.compile(r"<\|begin_of_solution\|>(.*?)(<\|end_of_solution\|>|$)", re.DOTALL)


def split_thought_solution(text: str) -> tuple[str, str | None, bool | None]:
    """Reasoning, answer and completeness of an OpenThoughts turn (or a ``<think>`` one).

    >>> split_thought_solution("<|begin_of_thought|>a<|end_of_thought|>"
    ...                        "<|begin_of_solution|>42<|end_of_solution|>")
    ('a', '42', True)
    >>> split_thought_solution("<|begin_of_thought|>cut off")
    ('cut off', None, False)
    """
    thought = _THOUGHT.search(text)
    if thought is None:
        return split_on_last_think(text)
    solution = _SOLUTION.search(text, thought.end())
    answer = solution.group(1).strip() if solution else None
    return thought.group(1).strip(), (answer or None), bool(thought.group(2))


class ShareGPTFormat(TraceFormat):
    """Rows with a ``conversations`` list."""

    name = "sharegpt"
    tool = "ShareGPT / OpenThoughts conversations"
    names_model = False
    lacks = (
        "the rows hold no token counts: tokens are a tiktoken count of the assistant turn",
        "the rows hold no verdict: correctness comes from a gold answer, where one is given",
        "the rows record no finish reason: an unclosed thought block is marked incomplete",
    )

    def sniff_record(self, keys: frozenset[str], record: Mapping[str, Any]) -> bool:
        turns = record.get("conversations")
        if turns is not None and hasattr(turns, "tolist"):  # a numpy array from Parquet
            turns = turns.tolist()
        return isinstance(turns, list) and all(isinstance(t, Mapping) for t in turns)

    def convert(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        turns = as_list(record.get("conversations"), "conversations")
        if not turns:
            raise RecordError("conversations", "missing or empty")
        user = assistant = None
        for position, turn in enumerate(turns):
            where = f"conversations[{position}]"
            if not isinstance(turn, Mapping):
                raise RecordError(where, "a turn that is not an object")
            role = turn.get("from", turn.get("role", ""))
            role = role.lower() if isinstance(role, str) else ""
            key = "value" if "value" in turn else "content"
            text = turn.get(key)
            if not isinstance(text, str):
                continue
            if role in _USER and user is None:
                user = text_or_none(text, f"{where}.{key}")
            elif role in _ASSISTANT:
                assistant = text_or_none(text, f"{where}.{key}")
        if user is None:
            raise RecordError("conversations", "no user turn (the problem)")
        if assistant is None:
            raise RecordError("conversations", "no assistant turn (the trace)")
        reasoning, answer, complete = split_thought_solution(assistant)
        problem_id = next(
            (record[k] for k in ("problem_id", "id", "uuid") if record.get(k) is not None),
            None,
        )
        if problem_id is None:
            # Stable across reruns: the same problem text gives the same id (the text was
            # checked above to be valid Unicode, so it can be hashed).
            problem_id = "sha1-" + hashlib.sha1(user.encode("utf-8")).hexdigest()[:12]
        gold = next((record[k] for k in ("gold", "answer") if record.get(k) is not None), None)
        return [
            {
                "problem_id": problem_id,
                "prompt": user,
                "gold": gold,
                "raw": assistant,
                "reasoning": reasoning,
                "answer": answer,
                "complete": complete,
            }
        ]
