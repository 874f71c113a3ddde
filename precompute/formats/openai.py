"""``--format openai``: OpenAI-compatible chat completions (vLLM ``serve``, DeepSeek,
OpenRouter, llama.cpp's server) and batch-API output files.

A row is one of:

* a batch-API output line ``{"custom_id": …, "response": {"status_code": 200, "body": {…}}}``
  — ``custom_id`` is the caller's row key and becomes ``problem_id``;
* a completion ``{"id": …, "model": …, "choices": [...], "usage": {...}}`` next to our own
  fields (``problem_id``, ``prompt``, ``gold``) in the same row, or wrapped as
  ``{"problem_id": …, "response": {completion}}``.

A completion holds no prompt: give it in the row, or load the problems into the store first
(``python -m precompute datasets``) so that ``custom_id`` refers to them.

====================================================  ========================================
completion                                            ingest
====================================================  ========================================
``choices[i].message.reasoning`` (vLLM since early    ``reasoning``
2026) or ``.reasoning_content`` (older vLLM,
DeepSeek)
``choices[i].message.content``                        ``answer``; without a reasoning field it
                                                      is ``raw``, split on its last
                                                      ``</think>`` (templates that open
                                                      ``<think>`` in the prompt leave only the
                                                      closing tag)
``choices[i].index``                                  ``sample``
``finish_reason == "length"``                         ``truncated`` (when no answer can be
                                                      extracted, as the generate stage does)
``usage.completion_tokens``                           ``tokens`` (the model's own count; with
                                                      several choices, none is split off)
``model``                                             the teacher (``--teacher`` overrides)
====================================================  ========================================

A completion carries no verdict: grades come from ``gold`` only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from precompute.formats.base import RecordError, TraceFormat, split_on_last_think

__all__ = ["OpenAIFormat"]

_OWN_FIELDS = ("problem_id", "id", "prompt", "gold")


class OpenAIFormat(TraceFormat):
    """Chat-completion responses and batch-API output lines."""

    name: ClassVar[str] = "openai"
    tool: ClassVar[str] = "OpenAI-compatible chat completions"
    lacks: ClassVar[tuple[str, ...]] = (
        "a chat completion records no verdict: correctness comes from the gold answer only",
    )

    def sniff_record(self, keys: frozenset[str], record: Mapping[str, Any]) -> bool:
        if {"custom_id", "response"} <= keys:
            return True
        response = record.get("response")
        body = response if isinstance(response, dict) else record
        # "choices" alone is no sign (GPQA rows have a list of options): a completion's
        # choices are objects with a message (or the completions API's text).
        choices = body.get("choices")
        return (
            isinstance(choices, list)
            and bool(choices)
            and isinstance(choices[0], dict)
            and ("message" in choices[0] or "text" in choices[0])
        )

    def convert(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        own: dict[str, Any] = {}
        if "custom_id" in record:
            if record.get("error"):
                raise RecordError("error", f"the request failed: {_short(record['error'])}")
            response = record.get("response") or {}
            status = response.get("status_code")
            if status not in (None, 200):
                raise RecordError("response.status_code", f"the request failed with {status}")
            body = response.get("body")
            own["problem_id"] = record["custom_id"]
        elif isinstance(record.get("response"), dict):
            body = record["response"]
        else:
            body = record
        if isinstance(body, str):
            try:
                body = json.loads(body)
            except ValueError:
                raise RecordError("response.body", "not JSON") from None
        if not isinstance(body, dict):
            raise RecordError("response.body", "missing")
        for key in _OWN_FIELDS:
            target = "problem_id" if key == "id" else key
            if key == "id" and record is body:
                continue  # a completion's own id names the response, not the problem
            if key in record and target not in own:
                own[target] = record[key]
        if "problem_id" not in own:
            raise RecordError(
                "custom_id",
                "no row key: give custom_id (batch output) or problem_id beside "
                "the completion (a completion's own id names the response, not the problem)",
            )
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices:
            raise RecordError("choices", "missing or empty")
        usage = body.get("usage") or {}
        completion_tokens = usage.get("completion_tokens")
        rows = []
        for position, choice in enumerate(choices):
            if not isinstance(choice, dict):
                raise RecordError("choices", f"choice {position} is not an object")
            message = choice.get("message") or {}
            content = message.get("content")
            if content is None and isinstance(choice.get("text"), str):
                content = choice["text"]  # the completions API
            content = content if isinstance(content, str) else ""
            thinking = message.get("reasoning")
            if not isinstance(thinking, str) or not thinking.strip():
                thinking = message.get("reasoning_content")
            row: dict[str, Any] = dict(own)
            row["sample"] = int(choice.get("index", position))
            row["hit_budget"] = choice.get("finish_reason") == "length"
            if isinstance(thinking, str) and thinking.strip():
                row["reasoning"], row["answer"] = thinking, content or None
                row["raw"] = None
            else:
                row["raw"] = content
                row["reasoning"], row["answer"], row["complete"] = split_on_last_think(content)
            if isinstance(completion_tokens, int) and len(choices) == 1:
                row["tokens"] = completion_tokens
                row["tokens_origin"] = (
                    "usage.completion_tokens of the response (the model's own count)"
                )
            if body.get("model"):
                row["model"] = str(body["model"])
            rows.append(row)
        return rows


def _short(value: Any) -> str:
    return json.dumps(value, default=str)[:120]
