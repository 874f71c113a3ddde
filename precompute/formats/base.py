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
it with the file and line, and goes on.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from precompute.errors import InputMissingError, InputUnusableError

__all__ = [
    "EXTRA_KEYS",
    "FormatMissingError",
    "FormatUnreadableError",
    "RecordError",
    "SourceRow",
    "TraceFormat",
    "as_verdict",
    "split_on_last_think",
]

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


class RecordError(ValueError):
    """One record of the tool's file cannot be used; ``field`` names the tool's field."""

    def __init__(self, field_name: str | None, message: str):
        self.field = field_name
        super().__init__(message)


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

    def __init__(self) -> None:
        #: Things this ingest noticed about the file, said once in the summary.
        self.notes: list[str] = []
        #: The task the tool ran, as the file names it (set by :meth:`rows`): the dataset
        #: name when ``--dataset`` is not given, instead of the file's time-stamped name.
        self.task_name: str | None = None

    def sniff_record(self, keys: frozenset[str], record: Mapping[str, Any]) -> bool:
        """True when a record with these keys is clearly of this format (auto-detection)."""
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
        ``excerpt``) with each record passed through :meth:`convert`."""
        if self.reads_files:
            assert path is not None
            return self.read(path)
        return self._converted(generic())

    def _converted(self, source: Iterator[Any]) -> Iterator[SourceRow]:
        for raw in source:
            if raw.values is None:
                yield SourceRow(raw.row, raw.line, None, raw.error, None, raw.excerpt)
                continue
            yield from self.convert_rows(raw.row, raw.line, raw.values)

    def convert_rows(
        self, row: int, line: int | None, record: Mapping[str, Any]
    ) -> Iterator[SourceRow]:
        """:meth:`convert` with a bad record turned into one error row (never an exception)."""
        try:
            converted = self.convert(record)
        except RecordError as err:
            yield SourceRow(row, line, None, str(err), err.field, _excerpt(record))
            return
        for values in converted:
            yield SourceRow(row, line, values)


def _excerpt(record: Mapping[str, Any]) -> str:
    short = {k: (v[:200] if isinstance(v, str) else v) for k, v in record.items()}
    text = json.dumps(short, default=str, ensure_ascii=False)[:300]
    return text.encode("utf-8", errors="replace").decode("utf-8")


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
