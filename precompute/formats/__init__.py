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

``auto`` (the default) picks one by sniffing (:func:`sniff_format`): a folder holding
``chunks_labeled.json`` is Thought Anchors, a zip with ``header.json`` is Inspect, and for
row files the first record's keys decide (``resps``/``doc_id`` → lm-eval, ``choices`` or
``custom_id``+``response`` → openai, …); anything else is ``legival``.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

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
    "FormatMissingError",
    "FormatUnreadableError",
    "RecordError",
    "SourceRow",
    "TraceFormat",
    "get_format",
    "register_format",
    "sniff_format",
]

AUTO = "auto"

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


def sniff_format(source: str) -> str:
    """The format of ``source`` (a file, a folder or a Hub name), by looking at it.

    A Hub name (no such path) is ``legival``: give ``--format openr1`` or ``sharegpt`` for a
    Hub dataset of traces. An unreadable file is ``legival`` too: its reader gives the error.
    """
    path = Path(source)
    if not path.exists():
        return "legival"
    for cls in FORMATS.values():
        if cls().sniff_path(path):
            return cls.name
    if path.is_dir():
        return "legival"
    record = _first_record(path)
    if record is None:
        return "legival"
    keys = frozenset(record)
    for cls in FORMATS.values():
        if cls().sniff_record(keys, record):
            return cls.name
    return "legival"


def _first_record(path: Path) -> dict | None:
    """The first row of a JSONL / JSON / Parquet file, or None (CSV and others: legival)."""
    suffix = path.suffix.lower()
    try:
        if suffix in (".jsonl", ".ndjson"):
            with path.open("rb") as handle:
                for line in handle:
                    if line.strip():
                        value = json.loads(line.decode("utf-8-sig"))
                        return value if isinstance(value, dict) else None
            return None
        if suffix == ".json":
            if zipfile.is_zipfile(path):
                return None
            text = path.read_text(encoding="utf-8-sig")
            try:
                value = json.loads(text)
            except json.JSONDecodeError:  # JSON lines under a .json name
                first = next((line for line in text.splitlines() if line.strip()), "")
                value = json.loads(first)
            if isinstance(value, list):
                value = value[0] if value else None
            return value if isinstance(value, dict) else None
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            names = pq.ParquetFile(path).schema_arrow.names
            return dict.fromkeys(names)
    except (OSError, ValueError, RecursionError):  # the ingest's reader reports it properly
        return None
    except Exception:  # pyarrow's own errors for a broken Parquet file
        return None
    return None
