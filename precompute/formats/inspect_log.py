"""``--format inspect``: Inspect AI evaluation logs.

An ``.eval`` log is a zip holding ``header.json`` (the eval: task, model, …) and one
``samples/<id>_epoch_<n>.json`` per sample and epoch; a ``.json`` log is one document with the
same eval and a ``samples`` list. Read with the standard library (``inspect-ai`` need not be
installed to ingest its logs), except that ``.eval`` members are Zstandard-compressed, which
``zipfile`` reads from Python 3.14 on and, before, with the small ``zipfile-zstd`` package.

What each field of a sample becomes:

===================================================  ======================================
Inspect                                              ingest
===================================================  ======================================
``id``                                               ``problem_id``
``epoch`` (1, 2, …)                                  ``sample`` (0, 1, …)
``input`` (text, or the user messages' text)         ``prompt``
``target`` (text, or the first of a list)            ``gold``
``ContentReasoning`` blocks of the answer message    ``reasoning`` (``reasoning``; a redacted
                                                     block gives its ``summary``)
the message's text (``<think>`` split when there     ``answer`` (or ``raw`` when the text
is no reasoning block)                               carries the thinking)
``output.choices[0].stop_reason`` = ``max_tokens``   ``truncated`` (when no answer can be
/ ``model_length``                                   extracted)
``output.usage.output_tokens``                       ``tokens`` (the model's own count)
``scores[name].value`` / ``.answer`` (first scorer)  the tool's verdict (``tool_grades``)
``eval.model``                                       the teacher (``--teacher`` overrides)
===================================================  ======================================

Texts behind ``attachment://<hash>`` are replaced by ``attachments[hash]``.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from precompute.formats.base import (
    FormatUnreadableError,
    RecordError,
    SourceRow,
    TraceFormat,
    as_verdict,
    split_on_last_think,
)

__all__ = ["InspectFormat"]

_ATTACHMENT = "attachment://"
#: Stop reasons that mean the output was cut by a budget.
_CUT = {"max_tokens", "model_length"}


class InspectFormat(TraceFormat):
    """Inspect AI ``.eval`` (zip) and ``.json`` logs."""

    name: ClassVar[str] = "inspect"
    tool: ClassVar[str] = "Inspect AI"
    reads_files: ClassVar[bool] = True

    def sniff_path(self, path: Path) -> bool:
        if path.is_dir() or not path.is_file():
            return False
        if zipfile.is_zipfile(path):
            try:
                with zipfile.ZipFile(path) as archive:
                    return "header.json" in archive.namelist()
            except (OSError, zipfile.BadZipFile):
                return False
        if path.suffix.lower() != ".json":
            return False
        try:
            with path.open("rb") as handle:
                head = handle.read(4096).decode("utf-8", errors="replace")
        except OSError:
            return False
        # An Inspect JSON log opens with its version, status and eval spec.
        return head.lstrip().startswith("{") and '"eval"' in head and '"status"' in head

    def read(self, path: Path) -> Iterator[SourceRow]:
        if zipfile.is_zipfile(path):
            return self._read_zip(path)
        return self._read_json(path)

    def _read_zip(self, path: Path) -> Iterator[SourceRow]:
        try:
            archive = zipfile.ZipFile(path)
            _zstd_support(archive, path)
            header = json.loads(archive.read("header.json"))
        except (OSError, KeyError, zipfile.BadZipFile, ValueError) as err:
            raise FormatUnreadableError(
                f"{path}: not a readable Inspect .eval log ({err})"
            ) from None
        eval_spec = header.get("eval") or {}
        self.task_name = _task_name(eval_spec)

        def rows() -> Iterator[SourceRow]:
            with archive:
                names = sorted(n for n in archive.namelist() if _is_sample_file(n))
                if not names:
                    self.notes.append(f"{path.name}: the log holds no samples")
                for number, name in enumerate(names, start=1):
                    try:
                        sample = json.loads(archive.read(name))
                    except (ValueError, OSError) as err:
                        yield SourceRow(number, None, None, f"{name}: unreadable ({err})")
                        continue
                    yield from self.convert_rows(number, None, {"eval": eval_spec, **sample})

        return rows()

    def _read_json(self, path: Path) -> Iterator[SourceRow]:
        try:
            log = json.loads(path.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise FormatUnreadableError(
                f"{path}: not a readable Inspect JSON log ({err})"
            ) from None
        if not isinstance(log, dict) or not isinstance(log.get("samples", []), list):
            raise FormatUnreadableError(f"{path}: not an Inspect log (no 'samples' list)")
        eval_spec = log.get("eval") or {}
        self.task_name = _task_name(eval_spec)
        samples = log.get("samples") or []
        if not samples:
            self.notes.append(f"{path.name}: the log holds no samples (status {log.get('status')})")

        def rows() -> Iterator[SourceRow]:
            for number, sample in enumerate(samples, start=1):
                if not isinstance(sample, dict):
                    yield SourceRow(number, None, None, "a sample that is not an object")
                    continue
                yield from self.convert_rows(number, None, {"eval": eval_spec, **sample})

        return rows()

    def convert(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        sample = _resolved(record, record.get("attachments") or {})
        if sample.get("id") is None:
            raise RecordError("id", "missing")
        output = sample.get("output") or {}
        choices = output.get("choices") or []
        if not choices:
            error = sample.get("error")
            why = f" (the sample failed: {str(error.get('message', error))[:120]})" if error else ""
            raise RecordError("output.choices", "no model output" + why)
        choice = choices[0]
        message = choice.get("message") or {}
        reasoning, text = _message_parts(message.get("content"))
        row: dict[str, Any] = {
            "problem_id": sample["id"],
            "sample": max(0, int(sample.get("epoch") or 1) - 1),
            "prompt": _input_text(sample.get("input")),
            "gold": _target(sample.get("target")),
            "hit_budget": choice.get("stop_reason") in _CUT,
        }
        if reasoning is not None:
            row["reasoning"], row["answer"], row["raw"] = reasoning, text or None, None
        else:
            # No reasoning block: the thinking, if any, is inside the text (<think>…</think>).
            row["raw"] = text
            row["reasoning"], row["answer"], row["complete"] = split_on_last_think(text)
        usage = output.get("usage") or {}
        if isinstance(usage.get("output_tokens"), int):
            row["tokens"] = usage["output_tokens"]
            row["tokens_origin"] = "Inspect AI output.usage.output_tokens (the model's own count)"
        model = (record.get("eval") or {}).get("model") or output.get("model")
        if model:
            row["model"] = str(model)
        scores = sample.get("scores") or {}
        if isinstance(scores, dict) and scores:
            scorer, score = next(iter(scores.items()))
            score = score or {}
            row["tool_scorer"] = f"inspect:{scorer}"
            row["tool_correct"] = as_verdict(score.get("value"))
            answer = score.get("answer")
            row["tool_answer"] = None if answer is None else str(answer)
        return [row]


#: Zip method number of Zstandard, which Inspect writes .eval logs with.
_ZSTD = 93


def _zstd_support(archive: zipfile.ZipFile, path: Path) -> None:
    """Python's zipfile reads Zstandard members from 3.14 on; before, the ``zipfile-zstd``
    package (installed with inspect-ai) adds it when imported."""
    if not any(info.compress_type == _ZSTD for info in archive.infolist()):
        return
    try:
        import zipfile_zstd  # noqa: F401  (importing it teaches zipfile the method)
    except ImportError:
        if not hasattr(zipfile, "ZIP_ZSTANDARD"):
            raise FormatUnreadableError(
                f"{path}: Inspect compressed this log with Zstandard, which this Python's "
                "zipfile cannot read: pip install zipfile-zstd (it comes with inspect-ai)"
            ) from None


def _task_name(eval_spec: Mapping[str, Any]) -> str | None:
    """The task's name without its package (``inspect_evals/gsm8k`` → ``gsm8k``).

    >>> _task_name({"task": "inspect_evals/gsm8k"}), _task_name({})
    ('gsm8k', None)
    """
    task = eval_spec.get("task") if isinstance(eval_spec, Mapping) else None
    if not isinstance(task, str) or not task.strip("/ "):
        return None
    return task.strip("/ ").rsplit("/", 1)[-1]


def _is_sample_file(name: str) -> bool:
    return name.startswith("samples/") and name.endswith(".json")


def _resolved(value: Any, attachments: Mapping[str, Any]) -> Any:
    """``value`` with every ``attachment://<hash>`` string replaced by its attachment text."""
    if isinstance(value, str):
        if value.startswith(_ATTACHMENT):
            return attachments.get(value[len(_ATTACHMENT) :], value)
        return value
    if isinstance(value, list):
        return [_resolved(v, attachments) for v in value]
    if isinstance(value, dict):
        return {
            k: (v if k == "attachments" else _resolved(v, attachments)) for k, v in value.items()
        }
    return value


def _message_parts(content: Any) -> tuple[str | None, str]:
    """The reasoning blocks' text (None when there is none) and the visible text of one
    assistant message (``content``: a string, or a list of content blocks)."""
    if isinstance(content, str):
        return None, content
    if not isinstance(content, list):
        return None, ""
    thoughts: list[str] = []
    texts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "reasoning":
            text = block.get("reasoning") or ""
            if block.get("redacted") or not text.strip():
                text = block.get("summary") or ""  # a redacted block keeps only its summary
            if text.strip():
                thoughts.append(text.strip())
        elif kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
    return ("\n\n".join(thoughts) if thoughts else None), "\n".join(texts)


def _input_text(value: Any) -> str | None:
    """The problem text: the input string, or the text of its user messages."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return None
    parts = []
    for message in value:
        if isinstance(message, dict) and message.get("role") == "user":
            parts.append(_message_parts(message.get("content"))[1])
    return "\n\n".join(p for p in parts if p) or None


def _target(value: Any) -> str | None:
    if isinstance(value, list):
        return str(value[0]) if value else None
    return None if value is None else str(value)
