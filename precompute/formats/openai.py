"""``--format openai``: OpenAI-compatible chat completions (vLLM ``serve``, DeepSeek,
OpenRouter, llama.cpp's server) and batch-API output files.

A row is one of:

* a batch-API output line ``{"custom_id": …, "response": {"status_code": 200, "body": {…}}}``
  — ``custom_id`` is the caller's row key and becomes ``problem_id``;
* a completion ``{"id": …, "model": …, "choices": [...], "usage": {...}}`` next to our own
  fields (``problem_id``, ``prompt``, ``gold``) in the same row, or wrapped as
  ``{"problem_id": …, "response": {completion}}``.

A completion holds no prompt. A row that carries its request (``{"request": {"messages":
[…]}, "response": {…}}``, or a batch input line's ``body.messages`` beside its response) takes
the prompt from the request's last user message. A batch output file holds no request: give the
batch input file beside it (``--requests batch_input.jsonl``, joined by ``custom_id``), or load
the problems into the store first (``python -m precompute datasets``) so that ``custom_id``
refers to them; a row with neither is quarantined, saying so.

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
from pathlib import Path
from typing import Any

from precompute.formats.base import (
    FormatMissingError,
    FormatUnreadableError,
    RecordError,
    TraceFormat,
    as_list,
    as_object,
    split_on_last_think,
    text_or_none,
    whole_number,
)

__all__ = ["OpenAIFormat", "request_prompt"]

_OWN_FIELDS = ("problem_id", "id", "prompt", "gold")
#: Keys a completion's choice has beside its message or text (a list of answer options, such as
#: ``[{"label": "A", "text": …}]``, has none of them).
_CHOICE_KEYS = {"index", "finish_reason", "logprobs", "stop_reason"}


class OpenAIFormat(TraceFormat):
    """Chat-completion responses and batch-API output lines."""

    name = "openai"
    tool = "OpenAI-compatible chat completions"
    lacks = ("a chat completion records no verdict: correctness comes from the gold answer only",)
    prompt_hint = (
        "; a batch output line holds no prompt: give the batch input file with --requests FILE"
    )

    def __init__(self) -> None:
        super().__init__()
        #: custom_id -> prompt, from the batch input file (``--requests``), when given.
        self.requests: dict[str, str] | None = None
        self.requests_file: str | None = None
        self._from_requests = 0
        self._not_in_requests = 0

    def sniff_record(self, keys: frozenset[str], record: Mapping[str, Any]) -> bool:
        if {"custom_id", "response"} <= keys:
            return record.get("response") is None or isinstance(record.get("response"), dict)
        response = record.get("response")
        body = response if isinstance(response, dict) else record
        # "choices" alone is no sign (GPQA rows have a list of options, often objects with a
        # "text"): a completion's choices are objects with a message, or with the completions
        # API's text beside the index or finish reason every completion choice carries.
        choices = body.get("choices")
        return (
            isinstance(choices, list)
            and bool(choices)
            and all(_is_completion_choice(c) for c in choices)
        )

    def load_requests(self, path: Path) -> None:
        """Read a batch *input* file (``--requests``): one request a line, ``{"custom_id",
        "body": {"messages": […]}}``; each custom_id's prompt is its last user message. Lines
        without one are counted and said once."""
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            raise FormatMissingError(f"--requests {path}: no such file") from None
        except OSError as err:
            raise FormatUnreadableError(f"--requests {path}: cannot be read ({err})") from None
        requests: dict[str, str] = {}
        unusable: list[int] = []
        with handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line.decode("utf-8-sig"))
                    custom_id = value.get("custom_id") if isinstance(value, dict) else None
                    prompt = request_prompt(value) if isinstance(custom_id, str) else None
                except (ValueError, RecursionError, RecordError):
                    custom_id = prompt = None
                if not isinstance(custom_id, str) or prompt is None:
                    unusable.append(number)
                    continue
                requests[custom_id] = prompt
        if not requests:
            raise FormatUnreadableError(
                f"--requests {path}: no line holds a custom_id and a user message "
                "(expected the batch input file: custom_id, body.messages)"
            )
        self.requests, self.requests_file = requests, str(path)
        if unusable:
            shown = ", ".join(str(n) for n in unusable[:5])
            self.notes.append(
                f"--requests {path.name}: {len(unusable)} lines hold no custom_id and user "
                f"message (lines {shown}{' …' if len(unusable) > 5 else ''}); not used"
            )

    def closing_notes(self) -> list[str]:
        notes = []
        if self._from_requests:
            notes.append(
                f"{self._from_requests} prompts taken from --requests {self.requests_file} "
                "by custom_id"
            )
        if self._not_in_requests:
            notes.append(
                f"{self._not_in_requests} custom_ids are not in --requests "
                f"{self.requests_file}: those rows have no prompt"
            )
        return notes

    def convert(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        own: dict[str, Any] = {}
        if "custom_id" in record:
            if record.get("error"):
                raise RecordError("error", f"the request failed: {_short(record['error'])}")
            response = as_object(record.get("response"), "response")
            status = response.get("status_code")
            if status not in (None, 200):
                raise RecordError(
                    "response.status_code", f"the request failed with {_short(status)}"
                )
            body = response.get("body")
            custom_id = record["custom_id"]
            if isinstance(custom_id, bool) or not isinstance(custom_id, str | int):
                raise RecordError("custom_id", f"expected text, got {_short(custom_id)}")
            own["problem_id"] = custom_id
            at = "response.body."
        elif record.get("response") is not None:
            body = as_object(record["response"], "response")
            at = "response."
        else:
            body, at = record, ""
        # ``at`` names where the completion is in the row, so that a field is named as the
        # file has it ("response.choices[0].message").
        if isinstance(body, str):
            try:
                body = json.loads(body)
            except (ValueError, RecursionError):
                raise RecordError("response.body", "not JSON") from None
        if not isinstance(body, dict):
            raise RecordError("response.body", "missing" if body is None else "not an object")
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
        if own.get("prompt") is None:
            prompt = self._prompt_of(record)
            if prompt is not None:
                own["prompt"] = prompt
        choices = as_list(body.get("choices"), f"{at}choices")
        if not choices:
            raise RecordError(f"{at}choices", "missing or empty")
        usage = as_object(body.get("usage"), f"{at}usage")
        completion_tokens = usage.get("completion_tokens")
        if completion_tokens is not None:
            completion_tokens = whole_number(
                completion_tokens, f"{at}usage.completion_tokens", maximum=2**62
            )
        model = text_or_none(body.get("model"), f"{at}model") if body.get("model") else None
        rows = []
        for position, choice in enumerate(choices):
            where = f"{at}choices[{position}]"
            if not isinstance(choice, dict):
                raise RecordError(where, "not an object")
            message = as_object(choice.get("message"), f"{where}.message")
            content = text_or_none(message.get("content"), f"{where}.message.content")
            if content is None and isinstance(choice.get("text"), str):
                content = text_or_none(choice["text"], f"{where}.text")  # the completions API
            content = content or ""
            thinking = text_or_none(message.get("reasoning"), f"{where}.message.reasoning")
            if thinking is None or not thinking.strip():
                thinking = text_or_none(
                    message.get("reasoning_content"), f"{where}.message.reasoning_content"
                )
            index = choice.get("index")
            row: dict[str, Any] = dict(own)
            row["sample"] = position if index is None else whole_number(index, f"{where}.index")
            row["hit_budget"] = choice.get("finish_reason") == "length"
            if thinking is not None and thinking.strip():
                row["reasoning"], row["answer"] = thinking, content or None
                row["raw"] = None
            else:
                row["raw"] = content
                row["reasoning"], row["answer"], row["complete"] = split_on_last_think(content)
            if completion_tokens is not None and len(choices) == 1:
                row["tokens"] = completion_tokens
                row["tokens_origin"] = (
                    "usage.completion_tokens of the response (the model's own count)"
                )
            if model:
                row["model"] = model
            rows.append(row)
        return rows

    def _prompt_of(self, record: Mapping[str, Any]) -> str | None:
        """The prompt of a row that gives none itself: the last user message of the request it
        carries (``request.messages``, ``request.body.messages``, or a batch input line's
        ``body.messages`` beside its response), else its custom_id's request in
        ``--requests``."""
        prompt = request_prompt(record)
        if prompt is not None:
            return prompt
        if self.requests is None or "custom_id" not in record:
            return None
        found = self.requests.get(str(record["custom_id"]))
        if found is None:
            self._not_in_requests += 1
        else:
            self._from_requests += 1
        return found


def _is_completion_choice(choice: Any) -> bool:
    if not isinstance(choice, dict):
        return False
    if isinstance(choice.get("message"), dict):
        return True
    return isinstance(choice.get("text"), str) and bool(_CHOICE_KEYS & set(choice))


def request_prompt(record: Mapping[str, Any]) -> str | None:
    """The last user message of the request a row carries: ``request.messages``,
    ``request.body.messages`` or ``body.messages`` (a batch input line); None without one.

    >>> request_prompt({"body": {"messages": [{"role": "user", "content": "2+2?"}]}})
    '2+2?'
    """
    places: list[tuple[str, Any]] = []
    request = record.get("request")
    if isinstance(request, dict):
        places.append(("request.messages", request.get("messages")))
        inner = request.get("body")
        if isinstance(inner, dict):
            places.append(("request.body.messages", inner.get("messages")))
    body = record.get("body")
    if isinstance(body, dict):
        places.append(("body.messages", body.get("messages")))
    for field_name, messages in places:
        if messages is None:
            continue
        users = [
            (i, m)
            for i, m in enumerate(as_list(messages, field_name))
            if isinstance(m, dict) and m.get("role") == "user"
        ]
        if users:
            position, last = users[-1]
            return _content_text(last.get("content"), f"{field_name}[{position}].content")
    return None


def _content_text(content: Any, field_name: str) -> str | None:
    """A message's text: a string, or the text parts of a list of content parts."""
    if content is None or isinstance(content, str):
        return text_or_none(content, field_name)
    parts = [
        text_or_none(part.get("text"), f"{field_name}[{i}].text")
        for i, part in enumerate(as_list(content, field_name))
        if isinstance(part, dict) and part.get("type") in ("text", "input_text")
    ]
    return "\n".join(p for p in parts if p) or None


def _short(value: Any) -> str:
    return json.dumps(value, default=str)[:120]
