"""``--format lm-eval``: the per-sample logs of lm-evaluation-harness (``--log_samples``).

One JSON line per document and filter: ``doc_id``, ``doc`` (the dataset row), ``target``,
``arguments`` (the request: prompt and generation settings), ``resps`` (the raw responses),
``filtered_resps``, ``filter`` and one key per metric (``exact_match: 1.0``), the metric names
listed in ``metrics``.

==================================================  ==========================================
lm-eval                                             ingest
==================================================  ==========================================
``doc_id``                                          ``problem_id``
``doc``'s question (``question``, ``problem``, …),  ``prompt``
else the request's prompt (``arguments``)
``target``                                          ``gold``
``resps[0][i]``, split on the last ``</think>``     ``reasoning``, ``answer``, ``raw``
(repeats ``i`` = 0, 1, …)                           ``sample``
the first metric of ``metrics`` (1.0 / 0.0)         the tool's verdict (``tool_grades``)
``model_name`` of ``results_*.json`` beside the     the teacher (``--teacher`` overrides)
file
==================================================  ==========================================

lm-eval records neither token counts nor why generation stopped: ``tokens`` is a tiktoken
count and ``truncated`` stays unknown (both said once in the summary). Only the first filter's
lines are read (the others repeat the same responses).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from precompute.formats.base import (
    RecordError,
    SourceRow,
    TraceFormat,
    as_list,
    as_verdict,
    generation_rows,
    read_plain_file,
    text_or_none,
)

__all__ = ["LmEvalFormat"]

#: ``doc`` keys that hold the problem text, in the order they are tried.
_QUESTION_KEYS = ("question", "problem", "prompt", "input", "query", "Question")
#: The largest ``results_*.json`` read beside a samples file (lm-eval's are kilobytes).
_RESULTS_MAX_BYTES = 64_000_000


class LmEvalFormat(TraceFormat):
    """lm-evaluation-harness ``samples_<task>_<date>.jsonl``."""

    name = "lm-eval"
    tool = "lm-evaluation-harness"
    lacks = (
        "lm-eval records no token counts: tokens are a tiktoken count of the response",
        "lm-eval records no finish reason: whether a response was cut by its budget is unknown",
    )

    def __init__(self) -> None:
        super().__init__()
        self._model: str | None = None
        self._filter: str | None = None
        self._skipped_filters = 0

    def sniff_record(self, keys: frozenset[str], record: Mapping[str, Any]) -> bool:
        # doc_id and a list of responses, beside what lm-eval always writes with them.
        return (
            record.get("doc_id") is not None
            and isinstance(record.get("resps"), list)
            and bool({"doc", "arguments", "target", "filtered_resps"} & keys)
        )

    def rows(self, path: Path | None, generic: Callable[[], Iterator[Any]]) -> Iterator[SourceRow]:
        if path is not None:
            self._model = self._model_name(path)
            self.task_name = _task_of(path)
        return super().rows(path, generic)

    def closing_notes(self) -> list[str]:
        if not self._skipped_filters:
            return []
        return [
            f"{self._skipped_filters} lines of filters other than '{self._filter}' were "
            "skipped (they repeat the same responses)"
        ]

    def convert(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        doc_id = record.get("doc_id")
        if doc_id is None:
            raise RecordError("doc_id", "missing")
        if isinstance(doc_id, bool) or not isinstance(doc_id, str | int):
            raise RecordError("doc_id", f"expected text or a whole number, got {_short(doc_id)}")
        name = record.get("filter")
        if name is not None:
            name = text_or_none(name, "filter")
            if self._filter is None:
                self._filter = name
            elif name != self._filter:
                self._skipped_filters += 1
                return []
        responses = as_list(record.get("resps"), "resps")
        if not responses:
            raise RecordError("resps", "missing or empty")
        first = responses[0]
        texts = as_list(first, "resps[0]") if isinstance(first, list) else [first]
        if not texts:
            # An empty list of responses is a document without output, not a document to
            # skip in silence: it is counted and quarantined like any bad line.
            raise RecordError("resps[0]", "holds no response")
        given = record.get("doc")
        doc: dict[str, Any] = given if isinstance(given, dict) else {}
        key = next((k for k in _QUESTION_KEYS if isinstance(doc.get(k), str)), None)
        if key is not None:
            prompt = text_or_none(doc[key], f"doc.{key}")
        else:
            prompt = text_or_none(_request_prompt(record), "arguments")
        verdict_key, verdict = _verdict(record)
        rows = generation_rows(
            texts,
            field_name="resps",
            path="resps[0]",
            item="response",
            problem_id=doc_id,
            prompt=prompt,
            gold=_gold(record.get("target")),
        )
        for row in rows:
            if self._model:
                row["model"] = self._model
            if verdict_key is not None and len(texts) == 1:
                # A metric scores the filtered response of the document, so it is one trace's
                # verdict only when the document has one response.
                row["tool_scorer"] = f"lm-eval:{verdict_key}"
                row["tool_correct"] = verdict
                filtered = record.get("filtered_resps")
                if isinstance(filtered, list) and filtered:
                    row["tool_answer"] = _text(filtered[0], "filtered_resps")
        return rows

    def _model_name(self, samples_file: Path) -> str | None:
        """The model lm-eval ran: ``model_name`` (or ``model_args``' ``model=`` /
        ``pretrained=``) of the ``results_*.json`` lm-eval writes in the same folder; None
        without one. A results file that cannot be read, or is not an object of lm-eval's
        shape, is said once and passed over (``--teacher`` still names the model)."""
        folder = samples_file.parent
        for results in sorted(folder.glob("results_*.json"), reverse=True):
            try:
                data = json.loads(read_plain_file(results, _RESULTS_MAX_BYTES))
            except (OSError, ValueError, RecursionError, RecordError) as err:
                self.notes.append(f"{results.name}: unreadable, not used ({_one_line(err)})")
                continue
            named = _named_model(data)
            if named is not None:
                return named
            if not isinstance(data, dict):
                self.notes.append(f"{results.name}: not an lm-eval results object, not used")
        return None


#: ``samples_<task>_<date>.jsonl``: lm-eval's name for a task's samples file.
_SAMPLES_FILE = re.compile(r"^samples_(?P<task>.+)_\d{4}-\d{2}-\d{2}T[\d.:-]+$")


def _task_of(samples_file: Path) -> str | None:
    """The task of a ``samples_<task>_<date>.jsonl`` file (None for another name).

    >>> _task_of(Path("samples_gsm8k_cot_2026-01-01T00-00-00.123456.jsonl"))
    'gsm8k_cot'
    """
    found = _SAMPLES_FILE.match(samples_file.stem)
    return found.group("task") if found else None


def _text(value: Any, field_name: str) -> str:
    """A value lm-eval may wrap in lists (``[["42"]]``) as text: the first text inside, or the
    value as JSON."""
    while isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, str):
        return text_or_none(value, field_name) or ""
    try:
        return json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        raise RecordError(field_name, f"cannot be read as text: {_short(value)}") from None


def _gold(target: Any) -> str | None:
    return None if target is None else _text(target, "target")


def _verdict(record: Mapping[str, Any]) -> tuple[str | None, bool | None]:
    """The first listed metric and its value as a verdict (None when it is no 0/1 value).
    Only text names count: ``metrics`` of another shape names no metric."""
    names = record.get("metrics")
    listed = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    candidates = [n for n in listed if n in record]
    if not candidates:
        return None, None
    return text_or_none(candidates[0], "metrics"), as_verdict(record[candidates[0]])


def _request_prompt(record: Mapping[str, Any]) -> str | None:
    """The prompt lm-eval sent: ``arguments`` is ``{"gen_args_0": {"arg_0": prompt, …}}``
    (older versions: ``[[prompt, settings]]``); a chat request's ``arg_0`` is a list holding
    the messages as JSON."""
    arguments = record.get("arguments")
    prompt: Any = None
    if isinstance(arguments, dict) and arguments:
        first = next(iter(arguments.values()))
        prompt = first.get("arg_0") if isinstance(first, dict) else None
        if isinstance(prompt, list) and prompt:  # chat requests: a list holding the JSON
            prompt = prompt[0]
    elif isinstance(arguments, list) and arguments and isinstance(arguments[0], list):
        prompt = arguments[0][0] if arguments[0] else None
    if not isinstance(prompt, str):
        return None
    try:
        messages = json.loads(prompt)
    except (ValueError, RecursionError):  # plain text, or JSON too deep to be messages
        return prompt
    if isinstance(messages, list):
        users = [
            m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"
        ]
        texts = [u for u in users if isinstance(u, str)]
        if texts:
            return texts[-1]
    return prompt


def _named_model(data: Any) -> str | None:
    """The model a results object names (``model_name``, else ``config.model_args``)."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("model_name"), str) and data["model_name"]:
        return data["model_name"]
    config = data.get("config")
    args = config.get("model_args") if isinstance(config, dict) else None
    if isinstance(args, dict):
        named = args.get("model") or args.get("pretrained")
        if isinstance(named, str):
            return named
    if isinstance(args, str):
        pairs = dict(p.split("=", 1) for p in args.split(",") if "=" in p)
        named = pairs.get("model") or pairs.get("pretrained")
        if named:
            return named
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:160]
