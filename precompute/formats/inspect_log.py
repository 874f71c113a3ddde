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

Nothing in a log costs more than the limits ingest sets: a member of an ``.eval`` log may
unpack to at most :data:`SAMPLE_FACTOR` times ``--max-trace-mb`` (its declared size is checked
first, then the bytes actually unpacked while streaming), and so may the text a sample's
attachment references resolve to; a sample above either is one quarantined row. A field of the
wrong type (an ``output`` that is text, an ``epoch`` of ``"one"``, a sample that is a list)
quarantines its sample naming the field, and the other samples are kept.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from precompute.formats.base import (
    FormatUnreadableError,
    RecordError,
    SourceRow,
    TraceFormat,
    as_list,
    as_object,
    as_verdict,
    field_at,
    split_on_last_think,
    text_or_none,
    whole_number,
)

__all__ = ["InspectFormat"]

_ATTACHMENT = "attachment://"
#: One member of an ``.eval`` log, and the text a sample's attachment references resolve to,
#: may be this many times ``--max-trace-mb``: a sample holds its output again in its messages
#: and events, so a trace at the limit still fits.
SAMPLE_FACTOR = 4
#: Stop reasons that mean the output was cut by a budget.
_CUT = {"max_tokens", "model_length"}


class InspectFormat(TraceFormat):
    """Inspect AI ``.eval`` (zip) and ``.json`` logs."""

    name = "inspect"
    tool = "Inspect AI"
    reads_files = True

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

    @property
    def member_limit(self) -> int:
        """The most bytes one member of an ``.eval`` log may unpack to, and the most text a
        sample's ``attachment://`` references may resolve to: :data:`SAMPLE_FACTOR` times
        ``--max-trace-mb`` (a sample repeats its output in its messages and events)."""
        return SAMPLE_FACTOR * self.max_bytes

    def _read_zip(self, path: Path) -> Iterator[SourceRow]:
        try:
            archive = zipfile.ZipFile(path)
            _zstd_support(archive, path)
            header = json.loads(_member_bytes(archive, "header.json", self.member_limit))
        except _MemberTooLarge as err:
            raise FormatUnreadableError(f"{path}: header.json {err}") from None
        except (OSError, KeyError, zipfile.BadZipFile, ValueError, RecursionError) as err:
            raise FormatUnreadableError(
                f"{path}: not a readable Inspect .eval log ({_one_line(err)})"
            ) from None
        # A header that is not an object says nothing usable: treated as an odd 'eval'.
        eval_spec = self._eval_spec(header.get("eval") if isinstance(header, dict) else header)
        self.task_name = _task_name(eval_spec)

        def rows() -> Iterator[SourceRow]:
            with archive:
                names = sorted(n for n in archive.namelist() if _is_sample_file(n))
                if not names:
                    self.notes.append(f"{path.name}: the log holds no samples")
                for number, name in enumerate(names, start=1):
                    try:
                        data = _member_bytes(archive, name, self.member_limit)
                    except _MemberTooLarge as err:
                        yield SourceRow(number, None, None, f"{name}: {err}", "sample")
                        continue
                    except (ValueError, OSError, zipfile.BadZipFile) as err:
                        unreadable = f"{name}: unreadable ({_one_line(err)})"
                        yield SourceRow(number, None, None, unreadable, "sample")
                        continue
                    sample, reason, field_name = _parsed(data)
                    if reason is not None:
                        yield SourceRow(number, None, None, f"{name}: {reason}", field_name)
                        continue
                    yield from self._sample_rows(number, sample, eval_spec)

        return rows()

    def _read_json(self, path: Path) -> Iterator[SourceRow]:
        try:
            log = json.loads(path.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
            raise FormatUnreadableError(
                f"{path}: not a readable Inspect JSON log ({_one_line(err)})"
            ) from None
        if not isinstance(log, dict) or not isinstance(log.get("samples", []), list):
            raise FormatUnreadableError(f"{path}: not an Inspect log (no 'samples' list)")
        eval_spec = self._eval_spec(log.get("eval"))
        self.task_name = _task_name(eval_spec)
        samples = log.get("samples") or []
        if not samples:
            status = log.get("status")
            self.notes.append(f"{path.name}: the log holds no samples (status {_short(status)})")

        def rows() -> Iterator[SourceRow]:
            for number, sample in enumerate(samples, start=1):
                yield from self._sample_rows(number, sample, eval_spec)

        return rows()

    def _eval_spec(self, value: Any) -> dict[str, Any]:
        """The log's eval spec; one that is not an object is left out, and said once (its
        model then cannot name the teacher: give ``--teacher``)."""
        if value is None or isinstance(value, dict):
            return value or {}
        self.notes.append(
            "the log's 'eval' is not an object: left out (the model it names is unknown; "
            "give --teacher)"
        )
        return {}

    def _sample_rows(
        self, number: int, sample: Any, eval_spec: dict[str, Any]
    ) -> Iterator[SourceRow]:
        if not isinstance(sample, dict):
            reason = f"a sample that is not an object (got {type(sample).__name__})"
            yield SourceRow(number, None, None, reason, "sample")
            return
        yield from self.convert_rows(number, None, {**sample, "eval": eval_spec})

    def convert(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        attachments = as_object(record.get("attachments"), "attachments")
        sample = _resolved(record, attachments, self.member_limit)
        if sample.get("id") is None:
            raise RecordError("id", "missing")
        if not isinstance(sample["id"], str | int) or isinstance(sample["id"], bool):
            raise RecordError("id", f"expected text or a whole number, got {_short(sample['id'])}")
        output = as_object(sample.get("output"), "output")
        choices = as_list(output.get("choices"), "output.choices")
        if not choices:
            raise RecordError("output.choices", "no model output" + _failure(sample.get("error")))
        choice = as_object(choices[0], "output.choices[0]", required=True)
        message = as_object(choice.get("message"), "output.choices[0].message")
        reasoning, text = _message_parts(
            message.get("content"), "output.choices[0].message.content"
        )
        epoch = sample.get("epoch")
        row: dict[str, Any] = {
            "problem_id": sample["id"],
            "sample": 0 if epoch is None else whole_number(epoch, "epoch", minimum=1) - 1,
            "prompt": _input_text(sample.get("input")),
            "gold": _target(sample.get("target")),
            "hit_budget": isinstance(choice.get("stop_reason"), str)
            and choice["stop_reason"] in _CUT,
        }
        if reasoning is not None:
            row["reasoning"], row["answer"], row["raw"] = reasoning, text or None, None
        else:
            # No reasoning block: the thinking, if any, is inside the text (<think>…</think>).
            row["raw"] = text
            row["reasoning"], row["answer"], row["complete"] = split_on_last_think(text)
        usage = as_object(output.get("usage"), "output.usage")
        tokens = usage.get("output_tokens")
        if tokens is not None:
            row["tokens"] = whole_number(tokens, "output.usage.output_tokens", maximum=2**62)
            row["tokens_origin"] = "Inspect AI output.usage.output_tokens (the model's own count)"
        model = text_or_none(as_object(record.get("eval"), "eval").get("model"), "eval.model")
        model = model or text_or_none(output.get("model"), "output.model")
        if model:
            row["model"] = model
        scores = as_object(sample.get("scores"), "scores")
        if scores:
            scorer, score = next(iter(scores.items()))
            score = as_object(score, f"scores.{scorer}")
            row["tool_scorer"] = text_or_none(f"inspect:{scorer}", "scores")
            row["tool_correct"] = as_verdict(score.get("value"))
            answer = score.get("answer")
            row["tool_answer"] = None if answer is None else _as_answer(answer, scorer)
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


class _MemberTooLarge(ValueError):
    """A member of an ``.eval`` log unpacks to more than it may."""


def _member_bytes(archive: zipfile.ZipFile, name: str, limit: int) -> bytes:
    """A member's bytes, refused above ``limit``: its declared size is checked before a byte
    is unpacked, and the bytes actually unpacked are counted while streaming (a zip can lie
    about its sizes), so a small log that unpacks to gigabytes costs nothing."""
    info = archive.getinfo(name)
    if info.file_size > limit:
        raise _MemberTooLarge(
            f"unpacks to {info.file_size / 1e6:.1f} MB, above the limit of {limit / 1e6:.1f} MB "
            f"({SAMPLE_FACTOR} x --max-trace-mb)"
        )
    pieces: list[bytes] = []
    size = 0
    with archive.open(info) as member:
        while piece := member.read(1 << 20):
            size += len(piece)
            if size > limit:
                raise _MemberTooLarge(
                    f"unpacks to more than {limit / 1e6:.1f} MB ({SAMPLE_FACTOR} x "
                    "--max-trace-mb), more than its declared size"
                )
            pieces.append(piece)
    return b"".join(pieces)


def _parsed(data: bytes) -> tuple[Any, str | None, str | None]:
    """A sample member parsed: (sample, None, None), or (None, why not, the field where it
    fails: the top-level key holding a bad byte or the too-deep nesting; ``sample`` for a
    syntax error)."""
    text = data.decode("utf-8", errors="surrogateescape")
    bad_byte = next((i for i, c in enumerate(text) if "\udc80" <= c <= "\udcff"), None)
    if bad_byte is not None:
        return None, "not UTF-8", field_at(text, position=bad_byte) or "sample"
    try:
        return json.loads(text), None, None
    except json.JSONDecodeError as err:
        # Where the parser stopped is not where the syntax went wrong: the sample is bad whole.
        return None, f"invalid JSON: {err.msg} (column {err.colno})", "sample"
    except RecursionError:
        return None, "nested too deeply to read", field_at(text, deeper_than=500) or "sample"


def _resolved(record: Mapping[str, Any], attachments: Mapping[str, Any], limit: int) -> Any:
    """``record`` with every ``attachment://<hash>`` string replaced by its attachment text.

    Walked with a stack (the record's depth is bounded before, but no walk here recurses), and
    the text the references resolve to is counted: one attachment referenced a thousand times
    would otherwise build gigabytes from a file of kilobytes, so above ``limit`` characters the
    record is refused (field ``attachments``)."""
    resolved_chars = 0

    def resolve(text: str) -> Any:
        nonlocal resolved_chars
        if not text.startswith(_ATTACHMENT):
            return text
        key = text[len(_ATTACHMENT) :]
        if key not in attachments:
            return text
        # Named where it is, not where it is used (Inspect's attachments are texts).
        found = text_or_none(attachments[key], f"attachments.{key}") or ""
        resolved_chars += len(found)
        if resolved_chars > limit:
            raise RecordError(
                "attachments",
                f"its attachment:// references resolve to more than {limit / 1e6:.1f} MB "
                f"of text ({SAMPLE_FACTOR} x --max-trace-mb)",
            )
        return found

    top: dict[str, Any] = {}
    # (container to fill, key or index, value to copy)
    stack: list[tuple[Any, Any, Any]] = [
        (top, key, value) for key, value in record.items() if key != "attachments"
    ]
    while stack:
        into, key, value = stack.pop()
        if isinstance(value, str):
            into[key] = resolve(value)
        elif isinstance(value, list):
            copy: list[Any] = [None] * len(value)
            into[key] = copy
            stack.extend((copy, i, item) for i, item in enumerate(value))
        elif isinstance(value, dict):
            mapping: dict[Any, Any] = dict.fromkeys(value)
            into[key] = mapping
            stack.extend((mapping, k, v) for k, v in value.items())
        else:
            into[key] = value
    if "attachments" in record:
        top["attachments"] = record["attachments"]
    return top


def _failure(error: Any) -> str:
    """Why a sample has no output, from its ``error`` (an object with a message, or text)."""
    if not error:
        return ""
    message = error.get("message", error) if isinstance(error, dict) else error
    return f" (the sample failed: {_one_line(message)[:120]})"


def _as_answer(answer: Any, scorer: str) -> str:
    if isinstance(answer, str):
        return text_or_none(answer, f"scores.{scorer}.answer") or ""
    if isinstance(answer, int | float | bool):
        return str(answer)
    raise RecordError(f"scores.{scorer}.answer", f"expected text, got {type(answer).__name__}")


def _message_parts(content: Any, field_name: str) -> tuple[str | None, str]:
    """The reasoning blocks' text (None when there is none) and the visible text of one
    assistant message (``content``: a string, or a list of content blocks)."""
    if content is None:
        return None, ""
    if isinstance(content, str):
        return None, text_or_none(content, field_name) or ""
    blocks = as_list(content, field_name)
    thoughts: list[str] = []
    texts: list[str] = []
    for position, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        where = f"{field_name}[{position}]"
        if kind == "reasoning":
            text = text_or_none(block.get("reasoning"), f"{where}.reasoning") or ""
            if block.get("redacted") or not text.strip():
                # A redacted block keeps only its summary.
                text = text_or_none(block.get("summary"), f"{where}.summary") or ""
            if text.strip():
                thoughts.append(text.strip())
        elif kind == "text" and block.get("text") is not None:
            texts.append(text_or_none(block["text"], f"{where}.text") or "")
    return ("\n\n".join(thoughts) if thoughts else None), "\n".join(texts)


def _input_text(value: Any) -> str | None:
    """The problem text: the input string, or the text of its user messages."""
    if value is None or isinstance(value, str):
        return text_or_none(value, "input")
    parts = []
    for position, message in enumerate(as_list(value, "input")):
        if isinstance(message, dict) and message.get("role") == "user":
            parts.append(_message_parts(message.get("content"), f"input[{position}].content")[1])
    return "\n\n".join(p for p in parts if p) or None


def _target(value: Any) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    if value is None or isinstance(value, str):
        return text_or_none(value, "target")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise RecordError("target", f"expected text or a list of texts, got {type(value).__name__}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _one_line(value: Any) -> str:
    return " ".join(str(value).split())[:200]
