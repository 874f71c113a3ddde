"""Trace-format adapters for ``python -m precompute ingest --format NAME``: one module per tool's
file format, collected in the :data:`FORMATS` registry (like the tasks).

==================  ==================================================================
``--format``        files
==================  ==================================================================
``legival``         our own rows (JSONL / JSON / Parquet / CSV / a Hub dataset)
``inspect``         Inspect AI logs: ``.eval`` (a zip) or ``.json``
``lm-eval``         lm-evaluation-harness ``samples_<task>_<date>.jsonl`` (``--log_samples``)
``openai``          OpenAI-compatible chat completions: responses, or batch-API output lines
``openr1``          OpenR1-Math-style rows (``problem``, ``answer``, ``generations`` …)
``sharegpt``        OpenThoughts / ShareGPT ``conversations`` rows
``thought-anchors`` Thought Anchors problem folders (``chunks_labeled.json`` …)
==================  ==================================================================

``auto`` (the default) picks one by looking at the source (:func:`detect_format`): a folder
holding ``chunks_labeled.json`` is Thought Anchors, a zip with ``header.json`` is Inspect, and
for row files the whole shape of the first :data:`SNIFF_ROWS` rows together decides, never one
key: lm-eval needs ``doc_id`` with a list of ``resps`` beside lm-eval's other fields, openai a
batch line (``custom_id`` + ``response``) or completion choices that carry a message (or the
completions API's text beside an ``index`` or ``finish_reason``; a list of answer options
``[{"label": "A", "text": …}]`` is no completion), our own rows an id with a reasoning or raw
text. When rows of the sample fit two formats the detection refuses to guess
(:class:`FormatAmbiguousError`: give ``--format``); when none fits, the rows are ours (and
their reader says what is wrong with them). Ingest says which format it detected, and why,
before it writes anything.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from precompute.errors import UsageError
from precompute.formats.base import (
    EXTRA_KEYS,
    FormatMissingError,
    FormatUnreadableError,
    RecordError,
    SourceRow,
    TraceFormat,
)
from precompute.formats.inspect_log import InspectFormat
from precompute.formats.legival import LegivalFormat
from precompute.formats.lm_eval import LmEvalFormat
from precompute.formats.openai import OpenAIFormat
from precompute.formats.openr1 import OpenR1Format
from precompute.formats.sharegpt import ShareGPTFormat
from precompute.formats.thought_anchors import ThoughtAnchorsFormat

__all__ = [
    "AUTO",
    "EXTRA_KEYS",
    "FORMATS",
    "SNIFF_ROWS",
    "Detection",
    "FormatAmbiguousError",
    "FormatMissingError",
    "FormatUnreadableError",
    "RecordError",
    "SourceRow",
    "TraceFormat",
    "detect_format",
    "get_format",
    "register_format",
    "sniff_format",
]

AUTO = "auto"
#: How many rows of a file ``--format auto`` looks at together.
SNIFF_ROWS = 50
#: How many bytes of a JSON lines file it reads to find them.
_SNIFF_BYTES = 8_000_000


class FormatAmbiguousError(UsageError):
    """The rows fit two formats: which one is meant is not guessed (exit 2: give --format)."""


@dataclass(frozen=True)
class Detection:
    """What ``--format auto`` found: the format's name and why, in words."""

    name: str
    why: str


#: ``--format`` name → adapter class. Sniffing asks them in this order; ``legival`` is last
#: because any row file is a legival file when nothing more specific matches.
FORMATS: dict[str, type[TraceFormat]] = {}


def register_format(cls: type[TraceFormat]) -> type[TraceFormat]:
    """Add an adapter class to :data:`FORMATS` (usable as a decorator)."""
    FORMATS[cls.name] = cls
    return cls


for _cls in (
    ThoughtAnchorsFormat,
    InspectFormat,
    LmEvalFormat,
    OpenAIFormat,
    OpenR1Format,
    ShareGPTFormat,
    LegivalFormat,
):
    register_format(_cls)


def get_format(name: str) -> TraceFormat:
    """A fresh adapter for ``--format name`` (it keeps the notes of one ingest).

    >>> get_format("lm-eval").tool
    'lm-evaluation-harness'
    """
    try:
        return FORMATS[name]()
    except KeyError:
        known = ", ".join([AUTO, *FORMATS])
        raise KeyError(f"--format: unknown format {name!r}; formats are {known}") from None


def sniff_format(source: str, mapping: Mapping[str, str] | None = None) -> str:
    """The format of ``source`` (a file, a folder or a Hub name): :func:`detect_format`'s
    name."""
    return detect_format(source, mapping).name


def detect_format(source: str, mapping: Mapping[str, str] | None = None) -> Detection:
    """The format of ``source`` (a file, a folder or a Hub name), by looking at it, and why.

    A Hub name (no such path) is ``legival``: give ``--format openr1`` or ``sharegpt`` for a
    Hub dataset of traces. An unreadable file is ``legival`` too: its reader gives the error.
    ``mapping`` is ingest's ``--map``: the columns it names count as our fields.

    Raises :class:`FormatAmbiguousError` when rows among the first :data:`SNIFF_ROWS` fit two
    formats (one row that fits both, or rows of two formats in one file).
    """
    path = Path(source)
    if not path.exists():
        return Detection("legival", "no such file or folder here: a Hub dataset of our rows")
    for cls in FORMATS.values():
        if cls().sniff_path(path):
            kind = "folder" if path.is_dir() else "file"
            return Detection(cls.name, f"the {kind} is laid out as {cls.tool} writes it")
    if path.is_dir():
        return Detection("legival", "a folder of no tool's layout")
    records = _first_records(path)
    fits: dict[str, list[int]] = {}
    for number, record in records:
        for cls in FORMATS.values():
            if cls.name == "legival":
                fitting = LegivalFormat.fits(record, mapping or {})
            else:
                fitting = cls().sniff_record(frozenset(record), record)
            if fitting:
                fits.setdefault(cls.name, []).append(number)
    unit = "line" if path.suffix.lower() in (".jsonl", ".ndjson") else "row"
    first = f"the first {unit}" if len(records) == 1 else f"the first {len(records)} {unit}s"
    if len(fits) > 1:
        both = " and ".join(f"{name} ({unit} {_numbers(rows)})" for name, rows in fits.items())
        choices = " or ".join(f"--format {name}" for name in fits)
        raise FormatAmbiguousError(
            f"--format auto: {source}: {first} fit both {both}; which is meant is not "
            f"guessed: give {choices}"
        )
    if not fits:
        why = f"no row of {first} has a tool's shape"
        return Detection("legival", why if records else "no row to look at")
    ((name, rows),) = fits.items()
    return Detection(name, f"{len(rows)} of {first} have its shape, none another's")


def _numbers(rows: list[int]) -> str:
    shown = ", ".join(str(r) for r in rows[:3])
    return shown + (" …" if len(rows) > 3 else "")


def _first_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Up to :data:`SNIFF_ROWS` objects from the start of a JSONL / JSON / Parquet file, with
    their line (JSONL) or row numbers; lines that are no JSON object are passed over. Empty
    for CSV and other files (they are ours) and for a file that cannot be read (its reader
    reports it)."""
    suffix = path.suffix.lower()
    try:
        if suffix in (".jsonl", ".ndjson"):
            return _first_lines(path)
        if suffix == ".json":
            if zipfile.is_zipfile(path):
                return []
            text = path.read_text(encoding="utf-8-sig")
            try:
                value = json.loads(text)
            except json.JSONDecodeError:  # JSON lines under a .json name
                return _first_lines(path)
            values = value if isinstance(value, list) else [value]
            return [(n, v) for n, v in enumerate(values[:SNIFF_ROWS], 1) if isinstance(v, dict)]
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            batch = next(pq.ParquetFile(path).iter_batches(batch_size=SNIFF_ROWS), None)
            rows = batch.to_pylist() if batch is not None else []
            return list(enumerate(rows, start=1))
    except (OSError, ValueError, RecursionError):  # the ingest's reader reports it properly
        return []
    except Exception:  # pyarrow's own errors for a broken Parquet file
        return []
    return []


def _first_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    found: list[tuple[int, dict[str, Any]]] = []
    read = 0
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            read += len(line)
            if len(found) >= SNIFF_ROWS or read > _SNIFF_BYTES:
                break
            if not line.strip():
                continue
            try:
                value = json.loads(line.decode("utf-8-sig"))
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                found.append((number, value))
    return found
