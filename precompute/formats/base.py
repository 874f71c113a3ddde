"""What every trace-format adapter is: a :class:`TraceFormat` turns the files one evaluation tool
writes into the rows ``python -m precompute ingest`` accepts.

An adapter never writes to a store. It reads (or is handed) the tool's records and returns, per
record, zero or more *rows*: dicts with ingest's field names (``problem_id``, ``prompt``,
``reasoning`` or ``raw``, ``answer``, ``gold``, ``tokens``, ``sample``, ``truncated``, …) plus
the extra keys of :data:`EXTRA_KEYS`, which ingest keeps beside the trace:

* ``model`` — the model name the file records (the teacher, unless ``--teacher`` overrides it);
* ``tool_correct``, ``tool_scorer``, ``tool_answer`` — the tool's own verdict, kept beside our
  grade (``tool_grades``), never instead of it;
* ``tokens_origin`` — where a given ``tokens`` count comes from, in words (the provenance);
* ``chunks`` — resampling importances of chunks of the reasoning (Thought Anchors);
* ``hit_budget`` — the output stopped at its token budget. Ingest marks such a trace
  ``truncated`` when no final answer can be extracted from it, the generate stage's rule
  (docs/metrics/decomposition.md: a truncated output has no extractable answer).

A record the adapter cannot use raises :class:`RecordError` naming the field; ingest quarantines
it with the file and line, and goes on. Every field an adapter reads is checked for its type
(the helpers :func:`as_object`, :func:`as_list`, :func:`whole_number`, :func:`text_or_none`),
and a record nested deeper than :data:`MAX_RECORD_DEPTH` is refused before it is looked at, so
that no value of a field, however wrong, costs the other records of the file.
"""

from __future__ import annotations

import json
import math
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from precompute.errors import FieldError, InputMissingError, InputUnusableError

__all__ = [
    "EXTRA_KEYS",
    "MAX_RECORD_DEPTH",
    "FormatMissingError",
    "FormatUnreadableError",
    "RecordError",
    "SourceRow",
    "TraceFormat",
    "as_list",
    "as_object",
    "as_verdict",
    "deepest_field",
    "field_at",
    "generation_rows",
    "read_plain_file",
    "split_on_last_think",
    "text_or_none",
    "whole_number",
]

#: Deepest nesting of lists and objects accepted in one record of a tool's file. Real records
#: nest a few levels (an Inspect sample's events about fifteen); a deeper one is refused before
#: any code walks it, so no walk can run out of stack.
MAX_RECORD_DEPTH = 128
#: The largest sample number and chunk index the store's int32 columns hold.
LARGEST_INT32 = 2**31 - 1

#: Keys an adapter may add to a row beyond ingest's own fields (see the module docstring).
EXTRA_KEYS = (
    "model",
    "tool_correct",
    "tool_scorer",
    "tool_answer",
    "tokens_origin",
    "chunks",
    "hit_budget",
)


class FormatMissingError(InputMissingError):
    """The file or folder the format needs is not there (exit 5)."""


class FormatUnreadableError(InputUnusableError):
    """The file is there but is not a file of this format (exit 6)."""


class RecordError(FieldError):
    """One record of the tool's file cannot be used; ``field`` names the tool's field."""


@dataclass
class SourceRow:
    """One row for ingest: where it is in the file (``row``, 1-based; ``line`` for line-based
    files) and its ``values``, or ``error`` (with ``field``) when it could not be made."""

    row: int
    line: int | None
    values: dict[str, Any] | None
    error: str | None = None
    field: str | None = None
    excerpt: str | None = None


class TraceFormat(ABC):
    """One tool's file format. Subclasses set the class attributes and implement
    :meth:`convert` (one record → rows) and, when the tool's files are not rows of JSONL /
    JSON / Parquet / CSV, :meth:`read`.
    """

    # Declared here once: an adapter assigns values only (``name = "openr1"``) and the type
    # checker holds each value to the type declared here.

    #: The ``--format`` name.
    name: ClassVar[str]
    #: The tool or dataset family, in words ("Inspect AI", "lm-evaluation-harness").
    tool: ClassVar[str]
    #: True when the files name the model that wrote the traces (else ``--teacher`` is needed).
    names_model: ClassVar[bool] = True
    #: What the format never records, each said once in the ingest summary.
    lacks: ClassVar[tuple[str, ...]] = ()
    #: True when :meth:`read` reads the file itself (a zip, one JSON document, a folder).
    reads_files: ClassVar[bool] = False

    #: What a row without a prompt can do to get one, said in its quarantine reason.
    prompt_hint: ClassVar[str] = ""

    def __init__(self) -> None:
        #: Things this ingest noticed about the file, said once in the summary.
        self.notes: list[str] = []
        #: The task the tool ran, as the file names it (set by :meth:`rows`): the dataset
        #: name when ``--dataset`` is not given, instead of the file's time-stamped name.
        self.task_name: str | None = None
        #: The largest text ingest keeps (``--max-trace-mb``, in bytes): adapters that unpack
        #: or assemble their records bound what they build by it.
        self.max_bytes: int = 50_000_000

    def sniff_record(self, keys: frozenset[str], record: Mapping[str, Any]) -> bool:
        """True when the whole shape of ``record`` is this format's (auto-detection): the
        fields that make it one, with the types the format gives them, not a key alone."""
        return False

    def sniff_path(self, path: Path) -> bool:
        """True when the file or folder itself is clearly of this format (zip, folder)."""
        return False

    def read(self, path: Path) -> Iterator[SourceRow]:
        """The rows of a file this format reads itself (only when :attr:`reads_files`)."""
        raise NotImplementedError

    @abstractmethod
    def convert(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The ingest rows of one record of the tool's file (several for a record that holds
        several generations). Raises :class:`RecordError` for a record it cannot use."""

    def rows(self, path: Path | None, generic: Callable[[], Iterator[Any]]) -> Iterator[SourceRow]:
        """Every row of the source: :meth:`read` for a file this format reads itself, else
        ingest's ``generic`` reader (its rows have ``row``, ``line``, ``values``, ``error``,
        ``excerpt``) with each record passed through :meth:`convert`; once the last row is
        read, :meth:`closing_notes` join :attr:`notes`."""
        if self.reads_files:
            assert path is not None
            return self._then_noted(self.read(path))
        return self._then_noted(self._converted(generic()))

    def closing_notes(self) -> list[str]:
        """What reading the whole source noticed (lines skipped, prompts found elsewhere),
        said in the summary once its last row is read; none by default."""
        return []

    def _then_noted(self, rows: Iterator[SourceRow]) -> Iterator[SourceRow]:
        yield from rows
        self.notes.extend(self.closing_notes())

    def _converted(self, source: Iterator[Any]) -> Iterator[SourceRow]:
        for raw in source:
            if raw.values is None:
                yield SourceRow(
                    raw.row, raw.line, None, raw.error, getattr(raw, "field", None), raw.excerpt
                )
                continue
            yield from self.convert_rows(raw.row, raw.line, raw.values)

    def convert_rows(
        self, row: int, line: int | None, record: Mapping[str, Any]
    ) -> Iterator[SourceRow]:
        """:meth:`convert` with a bad record turned into one error row (never an exception)."""
        try:
            too_deep = deepest_field(record, MAX_RECORD_DEPTH)
            if too_deep is not None:
                raise RecordError(
                    too_deep, f"nested more than {MAX_RECORD_DEPTH} levels deep; not read"
                )
            converted = self.convert(record)
        except RecordError as err:
            yield SourceRow(row, line, None, str(err), err.field, _excerpt(record))
            return
        except (TypeError, ValueError, AttributeError, LookupError, RecursionError) as err:
            # A check an adapter lacks must cost this record only, never the file: the reason
            # says it is unexpected, and no field is named because none was checked.
            reason = f"unexpected {type(err).__name__} reading the record: {_one_line(err)}"
            yield SourceRow(row, line, None, reason, None, _excerpt(record))
            return
        for values in converted:
            yield SourceRow(row, line, values)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:200]


def _excerpt(record: Any) -> str:
    """The start of a record as JSON for the quarantine file, safe for any record: long texts
    cut first, and a record too deep or odd for JSON shown by its keys."""
    if isinstance(record, Mapping):
        short: Any = {k: (v[:200] if isinstance(v, str) else v) for k, v in record.items()}
    else:
        short = record
    try:
        if deepest_field({"record": short}, MAX_RECORD_DEPTH) is not None:
            raise ValueError("too deep")
        text = json.dumps(short, default=str, ensure_ascii=False)[:300]
    except (TypeError, ValueError, RecursionError):
        keys = list(record)[:20] if isinstance(record, Mapping) else []
        text = f"(a {type(record).__name__} with keys {keys})"[:300]
    return text.encode("utf-8", errors="replace").decode("utf-8")


def deepest_field(record: Any, limit: int) -> str | None:
    """The top-level key under which ``record`` nests lists and objects more than ``limit``
    levels deep (``"record"`` for a list, or a record that is itself too deep), or None.
    Walked with a stack, never by recursion, and stopped at the first such place.

    >>> deepest_field({"a": 1, "b": [[[[]]]]}, 3), deepest_field({"b": [[]]}, 3)
    ('b', None)
    """
    if not isinstance(record, Mapping):
        tops: list[tuple[str, Any]] = [("record", record)]
    else:
        tops = [(str(key), value) for key, value in record.items()]
    for name, value in tops:
        stack = [(value, 2)]  # the record itself is level 1
        while stack:
            item, depth = stack.pop()
            if not isinstance(item, list | tuple | dict):
                continue
            if depth > limit:
                return name
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return None


#: JSON strings and the structural characters, in linear time (a string is one match).
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}:,]')


def field_at(text: str, position: int | None = None, deeper_than: int | None = None) -> str | None:
    """The top-level key of the JSON object ``text`` whose value holds ``position`` (an
    undecodable byte), or where the nesting first goes deeper than ``deeper_than``; None when
    the place is not inside a top-level value. For naming the field of a line that cannot be
    parsed at all. One scan of the text's tokens, no parsing.

    >>> text = '{"a": 1, "b": [[[[1]]]], "c": "x"}'
    >>> field_at(text, position=text.index("x")), field_at(text, deeper_than=3)
    ('c', 'b')
    """
    depth = 0
    key: str | None = None
    pending: str | None = None  # a string at depth 1 that may be a key
    for token in _JSON_TOKEN.finditer(text):
        if position is not None and token.start() > position:
            break
        value = token.group()
        if value.startswith('"'):
            if position is not None and token.end() > position:
                break  # the place is inside this string
            pending = value if depth == 1 else None
        elif value == ":":
            if depth == 1 and pending is not None:
                try:
                    key = json.loads(pending)
                except ValueError:
                    key = pending.strip('"')
            pending = None
        elif value in "[{":
            depth += 1
            if deeper_than is not None and depth > deeper_than:
                return key
        elif value in "]}":
            depth -= 1
        elif value == ",":
            if depth == 1:
                key = None
            pending = None
    return key if position is not None and depth >= 1 else None


def as_object(value: Any, field_name: str, *, required: bool = False) -> dict[str, Any]:
    """``value`` when it is a JSON object; ``{}`` for null (unless ``required``); else a
    :class:`RecordError` naming ``field_name``.

    >>> as_object(None, "usage"), as_object({"a": 1}, "usage")
    ({}, {'a': 1})
    """
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise RecordError(field_name, f"expected an object, got {_kind_of(value)}")
    return value


def as_list(value: Any, field_name: str, *, required: bool = False) -> list[Any]:
    """``value`` when it is a list (a numpy array from Parquet becomes one); ``[]`` for null
    (unless ``required``); else a :class:`RecordError` naming ``field_name``."""
    if value is None and not required:
        return []
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise RecordError(field_name, f"expected a list, got {_kind_of(value)}")
    return list(value)


def whole_number(
    value: Any, field_name: str, *, minimum: int = 0, maximum: int = LARGEST_INT32
) -> int:
    """``value`` when it is a whole number in ``[minimum, maximum]`` (a whole float such as
    ``2.0`` counts); else a :class:`RecordError` naming ``field_name``.

    >>> whole_number(3, "epoch"), whole_number(2.0, "epoch")
    (3, 2)
    """
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if number is None:
        raise RecordError(field_name, f"expected a whole number, got {_kind_of(value)}")
    if not minimum <= number <= maximum:
        raise RecordError(
            field_name, f"{_short(value)} is outside the allowed range {minimum}..{maximum}"
        )
    return number


def text_or_none(value: Any, field_name: str) -> str | None:
    """``value`` when it is text that can be written as UTF-8 (no lone surrogate), None for
    null; else a :class:`RecordError` naming ``field_name``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecordError(field_name, f"expected text, got {_kind_of(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RecordError(field_name, "is not valid Unicode (holds a lone surrogate)") from None
    return value


def _kind_of(value: Any) -> str:
    """A value's JSON kind and a short look at it, for a reason."""
    kinds = {str: "text", bool: "true/false", int: "a number", float: "a number"}
    name = next((k for t, k in kinds.items() if type(value) is t), None)
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return f"{name or type(value).__name__} {_short(value)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


#: Flags that keep an open from following a symbolic link or waiting on a FIFO (the store's).
_SAFE_FLAGS = (
    getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)


def read_plain_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of a file inside an input folder, under the store's rule for what it opens: a
    symbolic link is never followed and a FIFO, socket or device is never read (each raises
    :class:`RecordError` naming the file and what it is), and a file larger than ``max_bytes``
    is refused before it is read. :class:`FileNotFoundError` for a missing file."""
    import stat

    from legival_core.store.file_safety import file_kind

    try:
        found = os.lstat(path)
    except FileNotFoundError:
        raise
    if not stat.S_ISREG(found.st_mode):
        kind = file_kind(found.st_mode)
        raise RecordError(path.name, f"{path.name} is {kind}, not a file; not read")
    fd = os.open(path, os.O_RDONLY | _SAFE_FLAGS)
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):  # swapped for something else after the lstat
            raise RecordError(path.name, f"{path.name} is {file_kind(mode)}, not a file; not read")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise RecordError(
            path.name,
            f"{path.name} is larger than {max_bytes / 1e6:.1f} MB (raise it with --max-trace-mb)",
        )
    return data


def split_on_last_think(text: str) -> tuple[str, str | None, bool | None]:
    """Reasoning, answer and completeness of one output, split on its last ``</think>``.

    Chat templates that open ``<think>`` in the prompt leave only the closing tag in the
    completion, and a model may quote the tag inside its thinking; the last one ends it. Without
    a closing tag the ingest's own parser (:func:`legival_core.text.reasoning.parse_reasoning`)
    decides (an opened, never closed block is incomplete).

    >>> split_on_last_think("a </think> b </think> 42")
    ('a </think> b', '42', True)
    >>> split_on_last_think("<think>x</think>y")
    ('x', 'y', True)
    """
    head, marker, tail = text.rpartition("</think>")
    if not marker:
        from legival_core.text.reasoning import parse_reasoning

        parsed = parse_reasoning(text)
        return parsed.reasoning, (parsed.answer_text or None), parsed.complete
    reasoning = head.strip()
    if reasoning.startswith("<think>"):
        reasoning = reasoning[len("<think>") :].strip()
    return reasoning, (tail.strip() or None), True


def generation_rows(
    texts: list[Any],
    *,
    field_name: str,
    path: str,
    item: str,
    problem_id: Any,
    prompt: Any,
    gold: Any,
) -> list[dict[str, Any]]:
    """One row per generation of a problem (``sample`` its place in ``texts``), each text
    checked and split on its last ``</think>``; the adapter adds what its tool records per
    generation. ``field_name``/``path``/``item`` name a bad text in the :class:`RecordError`
    (``"resps"``, ``"resps[0]"``, ``"response"`` -> ``response 1 is not text`` in ``resps``;
    lone surrogates in ``resps[0][1]``).

    >>> rows = generation_rows(["a</think>1", "b</think>2"], field_name="g", path="g",
    ...     item="generation", problem_id="p", prompt=None, gold="1")
    >>> [(r["sample"], r["reasoning"], r["answer"]) for r in rows]
    [(0, 'a', '1'), (1, 'b', '2')]
    """
    rows = []
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise RecordError(field_name, f"{item} {index} is not text")
        text_or_none(text, f"{path}[{index}]")
        reasoning, answer, complete = split_on_last_think(text)
        rows.append(
            {
                "problem_id": problem_id,
                "sample": index,
                "prompt": prompt,
                "gold": gold,
                "raw": text,
                "reasoning": reasoning,
                "answer": answer,
                "complete": complete,
            }
        )
    return rows


_CORRECT = {"c", "correct", "true", "yes", "y", "t", "pass", "passed"}
_INCORRECT = {"i", "incorrect", "false", "no", "n", "f", "fail", "failed"}


def as_verdict(value: Any) -> bool | None:
    """A tool's correctness value as true/false, or None when it is no yes/no verdict.

    Inspect writes ``"C"``/``"I"`` (``"P"`` partial is no verdict; ``"N"``, no answer, counts
    as wrong, as in Inspect's own accuracy), lm-eval a metric value (1.0/0.0), datasets
    booleans.

    >>> [as_verdict(v) for v in ("C", "I", "P", 1.0, 0, True, None, 0.5)]
    [True, False, None, True, False, True, None, None]
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if isinstance(value, float) and math.isnan(value):
            return None
        return True if value == 1 else False if value == 0 else None
    if isinstance(value, str):
        word = value.strip().lower()
        return True if word in _CORRECT else False if word in _INCORRECT else None
    return None


#: Other names the fields of our own rows go by in files people bring (ingest reads them).
ALIASES: dict[str, tuple[str, ...]] = {
    "problem_id": ("id", "pid", "question_id", "unique_id"),
    "prompt": ("question", "problem", "input"),
    "reasoning": ("trace", "thinking", "reasoning_content", "reasoning_text"),
    "raw": ("output", "response", "completion", "generation"),
    "answer": ("answer_text", "final_answer", "prediction"),
    "correct": ("is_correct",),
    "gold": ("gold_answer", "target", "reference_answer"),
    "tokens": ("n_tokens", "output_tokens", "completion_tokens"),
}


def lookup_field(values: Mapping[str, Any], name: str, mapping: Mapping[str, str]) -> Any:
    """The value of ingest field ``name`` in a row: its ``--map`` column, its own name, or the
    first of its :data:`ALIASES` the row has."""
    if name in mapping:
        return values.get(mapping[name])
    if name in values:
        return values[name]
    for alias in ALIASES.get(name, ()):
        if alias in values:
            return values[alias]
    return None
