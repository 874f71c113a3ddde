"""Bring your own traces: load reasoning traces from a file into a results store.

::

    python -m precompute ingest FILE --store DIR --teacher NAME --task math \\
        [--format auto] [--dataset NAME] [--map COLUMN_FIELD=COLUMN ...] [--max-trace-mb 50] \\
        [--overwrite] [--batch-rows 2000] [--reference] [--requests BATCH_INPUT]

``--format`` reads the files evaluation tools write (Inspect AI logs, lm-eval samples, chat
completions, OpenR1 / OpenThoughts rows, Thought Anchors folders): an adapter of
:mod:`precompute.formats` turns each into the rows below, keeps the tool's own verdict beside
our grade (``tool_grades``) and chunk importances (``chunk_importance``), and takes the teacher
from the model the file names unless ``--teacher`` is given. ``auto`` (the default) decides on
the shape of the first rows (:func:`precompute.formats.detect_format`), prints what it chose
and why before writing anything, and refuses (exit 2) when rows fit two formats.
``--requests`` gives the batch input file beside an OpenAI batch output file: each row's
prompt is its ``custom_id``'s last user message there.

``--reference`` marks the file as reference solutions (a human write-up, a gold rationale):
their teacher is a reference teacher (:mod:`legival_core.published.references`).

``FILE`` is JSONL (read line by line), JSON (an array of rows), Parquet, CSV/TSV, or the name
of a Hugging Face dataset (``owner/name``; ``--split``/``--config`` pick the part).

One row is one trace. Fields (another column name can be mapped with ``--map field=column``;
a few common names are recognised without a mapping, see :data:`ALIASES`):

============  ========  ====================================================================
field         needed    meaning
============  ========  ====================================================================
problem_id    yes       the problem's id (text or integer); new ids become ``<dataset>/<id>``
prompt        see note  the problem text. May be left out when the problem is already in the
                        store (the row then refers to it).
reasoning     yes*      the reasoning text (non-empty). *Or ``raw``: the full model output,
                        split into reasoning and answer by ``legival_core.text.reasoning``.
answer        no        the final answer text
correct       no        true/false (also 1/0, yes/no) — written to ``grades`` as given
gold          no        the gold answer; without ``correct`` the task grades ``answer``
tokens        no        generated tokens; else the tiktoken (cl100k_base) count of ``raw``, or
                        of reasoning + answer
sample        no        sample number (default 0), for several traces per problem
teacher       no        overrides ``--teacher`` for this row (rows that all name one need no
                        ``--teacher``)
complete,     no        true/false flags as in the traces table
truncated
============  ========  ====================================================================

Good rows are written to the ``problems`` (new problems only), ``traces`` and — where
``correct`` or ``gold`` is given — ``grades`` tables. Bad rows go to ``quarantine.jsonl`` in
the store with the file, line (JSONL/CSV) or row number, field and reason; a malformed line is
one bad row, never a failed file. Trace ids are ``schema.trace_id_for(teacher, problem_id,
sample)``, so ingesting the same file again changes nothing: rows whose trace is already in the
store are skipped (``--overwrite`` rewrites them) and the file's earlier quarantine entries are
replaced; an earlier entry (of any file) whose trace this ingest keeps is cleared, its line
having been fixed. Problem ids, teacher and dataset names are normalised to Unicode NFC. One
problem has one prompt and one gold: a row whose prompt or gold differs from the stored one (in
the store, or from this file's first row of the problem) is quarantined naming the stored
value; with ``--overwrite`` it replaces it and every graded trace of the problem is regraded
against the new gold. A gold for a problem stored without one fills it in. Resuming is per
table: when an earlier ingest of the same file was killed after a batch's traces part landed
but before its grades (or problems) part, the rerun writes the missing rows and keeps the
traces.

Exit codes are those of every ``python -m precompute`` command (``precompute.cli.EXIT_CODES``):
0 at least one row kept (some may be quarantined) · 2 a bad argument (unknown task or field) ·
4 the store cannot be created, opened or written · 5 the file is not there · 6 the file cannot
be read, or no row of it could be kept · 1 any other error · 130 interrupted; errors are one
line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from legival_core.store.schema import TABLES, trace_id_for
from legival_core.store.store import Store, StoreError
from legival_core.tasks.base import Grade, GraderCodeError, TextGrade
from precompute.errors import FieldError, InputMissingError, InputUnusableError, UsageError
from precompute.formats.base import ALIASES, EXTRA_KEYS, SourceRow, field_at, lookup_field
from precompute.formats.extras import ExtraTables

__all__ = [
    "ALIASES",
    "DEFAULT_MAX_TRACE_MB",
    "FIELDS",
    "MAX_GOLD_DEPTH",
    "IngestError",
    "IngestMissingError",
    "IngestReport",
    "IngestStoreError",
    "IngestUnreadableError",
    "IngestUsageError",
    "Quarantined",
    "add_arguments",
    "ingest",
    "ingest_from_args",
]

DEFAULT_MAX_TRACE_MB = 50.0
#: Deepest nesting of brackets (or of JSON lists and objects) accepted in a gold answer.
MAX_GOLD_DEPTH = 64
#: Floats are exact integers up to 2**53; a whole float beyond that is no reliable id.
_LARGEST_EXACT_FLOAT = 2**53
FIELDS = (
    "problem_id",
    "prompt",
    "reasoning",
    "raw",
    "answer",
    "correct",
    "gold",
    "tokens",
    "sample",
    "teacher",
    "complete",
    "truncated",
)
#: Column names recognised without a ``--map`` (only when the field's own name is absent).
_EXCERPT_CHARS = 300
# "1.0" / "0.0": a 0/1 column with gaps is a float column, and a CSV writes it so.
_TRUE = {"true", "1", "1.0", "yes", "y", "t"}
_FALSE = {"false", "0", "0.0", "no", "n", "f"}
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class IngestError(RuntimeError):
    """The ingest cannot run at all. The message is one line; the subclass says why."""


class IngestUsageError(IngestError, UsageError):
    """A bad argument: no teacher, an unknown task or field, a value out of range (exit 2)."""


class IngestStoreError(IngestError, StoreError):
    """The store cannot be created or opened (exit 4)."""


class IngestMissingError(IngestError, InputMissingError):
    """The file is not there, or the hub dataset cannot be reached (exit 5)."""


class IngestUnreadableError(IngestError, InputUnusableError):
    """The file is there but cannot be read as rows (exit 6)."""


class _FieldError(FieldError):
    """One ingest row does not fit; ``field`` names the offending column."""


@dataclass(frozen=True)
class Quarantined:
    """One rejected row: where it is and why."""

    file: str
    row: int
    reason: str
    line: int | None = None
    field: str | None = None
    excerpt: str | None = None
    #: The trace the row would have made, when its problem id could be read: a later ingest
    #: that keeps that trace (the line fixed, in this file or another) clears the entry.
    trace_id: str | None = None

    def where(self) -> str:
        place = f"line {self.line}" if self.line is not None else f"row {self.row}"
        return place + (f", field '{self.field}'" if self.field else "")

    def to_record(self, teacher: str) -> dict[str, Any]:
        record: dict[str, Any] = {
            "file": self.file,
            "line": self.line,
            "row": self.row,
            "field": self.field,
            "reason": self.reason,
            "teacher": teacher,
            "excerpt": self.excerpt,
        }
        if self.trace_id is not None:
            record["trace_id"] = self.trace_id
        record["time"] = datetime.now(UTC).isoformat(timespec="seconds")
        return record


@dataclass
class IngestReport:
    """What one ingest did."""

    file: str
    store: str
    teacher: str
    task: str
    dataset: str
    rows_read: int = 0
    kept: int = 0
    already_present: int = 0
    quarantined: list[Quarantined] = field(default_factory=list)
    written: dict[str, int] = field(default_factory=dict)
    #: Traces regraded because an ``--overwrite`` row replaced their problem's gold.
    regraded: int = 0
    quarantine_path: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 when at least one row was kept, else 1."""
        return 0 if self.kept > 0 else 1

    def summary(self, max_errors: int = 5) -> str:
        lines = [
            f"ingest {self.file} -> {self.store} (teacher '{self.teacher}', task '{self.task}', "
            f"dataset '{self.dataset}')",
            f"rows read: {self.rows_read}, kept: {self.kept}, quarantined: "
            f"{len(self.quarantined)}"
            + (f" (details in {self.quarantine_path})" if self.quarantined else ""),
            "written: "
            + ", ".join(f"{t} {n}" for t, n in self.written.items())
            + f"; already in the store: {self.already_present}",
        ]
        lines += [f"note: {n}" for n in self.notes]
        if self.quarantined:
            lines.append(f"first {min(max_errors, len(self.quarantined))} errors:")
            lines += [f"  {q.where()}: {q.reason}" for q in self.quarantined[:max_errors]]
        return "\n".join(lines)


# --- reading ------------------------------------------------------------------------------------


def _excerpt(text: str | bytes) -> str:
    if isinstance(text, bytes):
        text = text[: _EXCERPT_CHARS * 4].decode("utf-8", errors="replace")
    # Lone surrogates (from JSON escapes like "\ud800") cannot be written as UTF-8.
    return text[:_EXCERPT_CHARS].encode("utf-8", errors="replace").decode("utf-8")


def _row_excerpt(values: Mapping[str, Any] | None) -> str | None:
    """The start of a row as JSON, each long text cut first (rows can hold MBs of text)."""
    if values is None:
        return None
    short = {k: (v[:_EXCERPT_CHARS] if isinstance(v, str) else v) for k, v in values.items()}
    return _excerpt(json.dumps(short, default=str, ensure_ascii=False))


_LINE_END = re.compile(rb"\r\n|\r|\n")
#: Python's JSON parser gives up somewhat below this depth; the field of a line too deep to
#: parse is where its nesting first passes it.
_PARSER_DEPTH = 500
_UTF8_BOM = b"\xef\xbb\xbf"


def _byte_lines(handle: BinaryIO, chunk_size: int = 1 << 20) -> Iterator[bytes]:
    """The lines of a binary file, without their ends. ``\\n``, ``\\r\\n`` and a lone ``\\r``
    each end a line, as in Python's text mode: a file saved with old Mac line ends is not one
    long row. (JSON text never holds a raw CR inside a string, so no row is split wrongly.)"""
    pending: list[bytes] = []  # pieces of a line longer than one chunk
    after_cr = False
    while chunk := handle.read(chunk_size):
        if after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the \n of a \r\n split between two chunks
        start = 0
        for end in _LINE_END.finditer(chunk):
            pending.append(chunk[start : end.start()])
            yield b"".join(pending)
            pending = []
            start = end.end()
        if start < len(chunk):
            pending.append(chunk[start:])
        after_cr = chunk.endswith(b"\r")
    if pending:
        yield b"".join(pending)


def _jsonl(path: Path) -> Iterator[SourceRow]:
    row = 0
    with path.open("rb") as handle:
        for line_number, data in enumerate(_byte_lines(handle), start=1):
            if line_number == 1 and data.startswith(_UTF8_BOM):
                data = data[len(_UTF8_BOM) :]  # written by some Windows tools; not content
            if not data.strip():
                continue
            row += 1
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as err:
                # The field is the top-level key whose value holds the first bad byte.
                decoded = data.decode("utf-8", errors="surrogateescape")
                bad_at = next(i for i, c in enumerate(decoded) if "\udc80" <= c <= "\udcff")
                yield SourceRow(
                    row,
                    line_number,
                    None,
                    f"not UTF-8 ({err.reason})",
                    excerpt=_excerpt(data),
                    field=field_at(decoded, position=bad_at),
                )
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as err:
                # No field: where a parser stops is not where a line's syntax went wrong (a
                # quote missed early shifts everything after it), so the line is bad whole.
                yield SourceRow(
                    row,
                    line_number,
                    None,
                    f"invalid JSON: {err.msg} (column {err.colno})",
                    excerpt=_excerpt(text),
                )
                continue
            except RecursionError:
                reason = "invalid JSON: nested too deeply"
                field_name = field_at(text, deeper_than=_PARSER_DEPTH)
                yield SourceRow(row, line_number, None, reason, field=field_name)
                continue
            if not isinstance(value, dict):
                yield SourceRow(
                    row,
                    line_number,
                    None,
                    f"expected a JSON object, got {type(value).__name__}",
                    excerpt=_excerpt(text),
                )
                continue
            yield SourceRow(row, line_number, value)


def _json_array(path: Path) -> Iterator[SourceRow]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))  # a BOM is not content
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        yield from _jsonl(path)  # JSON lines under a .json name
        return
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise IngestUnreadableError(f"{path}: expected a JSON array of rows")
    for number, value in enumerate(data, start=1):
        if isinstance(value, dict):
            yield SourceRow(number, None, value)
        else:
            yield SourceRow(number, None, None, f"expected an object, got {type(value).__name__}")


class _LineFeed:
    """Physical lines of a text file for :mod:`csv`, with the lines of the record being read
    kept, so that a broken record can be given back and read again from its second line."""

    def __init__(self, handle: Iterator[str]):
        self._handle = handle
        self._given_back: list[str] = []  # a stack: the next line is last
        self.taken: list[str] = []
        self.next_line = 1  # physical line number of the next line handed out

    def __iter__(self) -> _LineFeed:
        return self

    def __next__(self) -> str:
        line = self._given_back.pop() if self._given_back else next(self._handle)
        self.taken.append(line)
        self.next_line += 1
        return line

    def start_record(self) -> None:
        self.taken = []

    def give_back(self, lines: Sequence[str]) -> None:
        self._given_back.extend(reversed(lines))
        self.next_line -= len(lines)
        self.taken = []


def _csv(path: Path, delimiter: str) -> Iterator[SourceRow]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # a long trace is one big cell
    # utf-8-sig: a byte order mark is not part of the first column's name.
    with path.open(newline="", encoding="utf-8-sig", errors="surrogateescape") as handle:
        feed = _LineFeed(handle)
        reader = csv.reader(feed, delimiter=delimiter)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise IngestUnreadableError(f"{path}: cannot read the CSV header ({err})") from None
        row = 0
        while True:
            feed.start_record()
            line = feed.next_line
            try:
                cells: list[str] = next(reader)
                error = None
            except StopIteration:
                return
            except csv.Error as err:
                cells, error = [], f"malformed CSV ({err})"
            if error is None and (not cells or all(not c.strip() for c in cells)):
                continue
            joined = delimiter.join(cells)
            if error is None and len(cells) != len(header):
                error = f"has {len(cells)} fields, the header has {len(header)}"
            if error is None and len(feed.taken) > 1:
                error = _strict_error(feed.taken, delimiter)
            row += 1
            if error is not None and len(feed.taken) > 1:
                # A stray quote made the reader run on into the next lines. Only the line
                # where the record began is bad; the lines it swallowed are read again.
                first = feed.taken[0]
                feed.give_back(feed.taken[1:])
                reader = csv.reader(feed, delimiter=delimiter)
                yield SourceRow(
                    row,
                    line,
                    None,
                    f"malformed CSV: a quote opened on this line is not closed on it ({error}); "
                    "the lines after it are read on their own",
                    excerpt=_excerpt(first.rstrip("\r\n").encode(errors="replace")),
                )
                continue
            if any("\udc80" <= ch <= "\udcff" for ch in joined):
                yield SourceRow(
                    row, line, None, "not UTF-8", excerpt=_excerpt(joined.encode(errors="replace"))
                )
                continue
            if error is not None:
                yield SourceRow(row, line, None, error, excerpt=_excerpt(joined) if cells else None)
                continue
            yield SourceRow(
                row, line, {k: (None if v == "" else v) for k, v in zip(header, cells, strict=True)}
            )


def _strict_error(lines: Sequence[str], delimiter: str) -> str | None:
    """Why a record that spans several lines is not one well-formed CSV record (None: it is).

    A CSV writer quotes a cell that holds a line break, so such a record parses under
    :mod:`csv`'s strict rules. A stray quote instead makes the lenient reader run on until
    the next quote in the file (or its end) and return everything in between as one cell,
    which the strict rules reject: text right after the closing quote, or no closing quote.
    """
    try:
        records = list(csv.reader(iter(lines), delimiter=delimiter, strict=True))
    except csv.Error as err:
        return str(err)
    return None if len(records) == 1 else "the record breaks apart under strict rules"


def _parquet(path: Path) -> Iterator[SourceRow]:
    """The rows of a Parquet file, one row group at a time: a damaged row group is one bad
    row naming the rows it held, and the row groups before and after it are kept (before, the
    first damaged group ended the ingest and took every row read so far with it)."""
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        groups = parquet.metadata.num_row_groups
    except Exception as err:  # pyarrow's own error types
        raise IngestUnreadableError(
            f"{path}: not a readable Parquet file ({_one_line(err)})"
        ) from None
    row = 0
    for group in range(groups):
        end = row + parquet.metadata.row_group(group).num_rows
        try:
            for batch in parquet.iter_batches(batch_size=512, row_groups=[group]):
                for values in batch.to_pylist():
                    row += 1
                    yield SourceRow(row, None, values)
        except Exception as err:  # a corrupt page or column chunk in this row group
            first, row = row + 1, max(end, row + 1)
            yield SourceRow(
                first,
                None,
                None,
                f"rows {first}-{row} (row group {group + 1} of {groups}) are unreadable "
                f"({_one_line(err)}); the other row groups are read",
            )


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:300]


def _hub(name: str, split: str | None, config: str | None) -> Iterator[SourceRow]:
    from precompute.datasets import DatasetError, HubSource, hub_rows

    try:
        for _, number, values in hub_rows(
            HubSource(name, (config,), split or "train"), config=config, split=split
        ):
            yield SourceRow(number, None, values)
    except DatasetError as err:  # offline, gated, unknown or not installed: not reachable here
        raise IngestMissingError(str(err)) from None


def _rows(source: str, split: str | None, config: str | None) -> Iterator[SourceRow]:
    path = Path(source)
    if not path.exists():
        if _HUB_NAME.match(source) and not path.suffix:
            return _hub(source, split, config)
        raise IngestMissingError(f"{source}: no such file")
    if path.is_dir():
        raise IngestMissingError(f"{source}: is a folder, not a file")
    suffix = path.suffix.lower()
    readers = {
        ".jsonl": _jsonl,
        ".ndjson": _jsonl,
        ".json": _json_array,
        ".parquet": _parquet,
        ".pq": _parquet,
        ".csv": lambda p: _csv(p, ","),
        ".tsv": lambda p: _csv(p, "\t"),
    }
    if suffix not in readers:
        raise IngestUnreadableError(
            f"{source}: unknown file type {suffix!r} (JSONL, JSON, Parquet, CSV)"
        )
    return readers[suffix](path)


# --- validating one row -------------------------------------------------------------------------


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _as_text(name: str, value: Any, *, allow_numbers: bool = False) -> str | None:
    if _missing(value):
        return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _FieldError(name, "is not valid Unicode (holds a lone surrogate)") from None
        return value
    if allow_numbers and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise _FieldError(name, f"expected text, got {type(value).__name__} {_short(value)}")


def _as_bool(name: str, value: Any) -> bool | None:
    if _missing(value):
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        # 1.0/0.0 too: Parquet and pandas store a 0/1 column with gaps as floats.
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise _FieldError(name, f"expected true/false, got {_short(value)}")


def _as_count(name: str, value: Any, maximum: int = 2**63 - 1) -> int | None:
    if _missing(value):
        return None
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value)
    ):
        number = int(value)
    if number is None or number < 0:
        raise _FieldError(name, f"expected a whole number >= 0, got {_short(value)}")
    if number > maximum:  # the store's integer columns are int32/int64
        raise _FieldError(name, f"{_short(value)} is above the largest allowed, {maximum}")
    return number


def _structure_depth(value: Any) -> int:
    """How deeply lists and dicts nest in ``value`` (iterative: no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, list | dict):
            deepest = max(deepest, depth)
            if depth > MAX_GOLD_DEPTH:
                return depth  # deep enough to refuse; no need to walk the rest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _bracket_depth(text: str) -> int:
    """The deepest nesting of (), [] and {} in ``text`` (closers without an opener ignored)."""
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}" and depth:
            depth -= 1
    return deepest


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _nfc(text: str) -> str:
    """Unicode NFC form of an id or a name (one spelling for look-alike code point sequences).

    >>> _nfc("cafe\u0301") == "caf\u00e9"
    True
    """
    return unicodedata.normalize("NFC", text)


def _split_raw(raw: str) -> tuple[str, str | None, bool | None]:
    """Reasoning, answer and completeness of a raw model output (``parse_reasoning``)."""
    from legival_core.text.reasoning import parse_reasoning

    parsed = parse_reasoning(raw)
    return parsed.reasoning, (parsed.answer_text or None), parsed.complete


@dataclass
class _Record:
    line: int | None
    row: int
    problem_id: str
    teacher: str
    sample: int
    reasoning: str
    raw: str | None
    answer: str | None
    prompt: str | None
    gold: str | None
    correct: bool | None
    tokens: int | None
    complete: bool | None
    truncated: bool | None
    #: What a format adapter adds beside the fields (precompute.formats.base.EXTRA_KEYS).
    extras: dict[str, Any] = field(default_factory=dict)


def _record(
    raw_row: SourceRow, mapping: Mapping[str, str], teacher: str, max_bytes: int
) -> _Record:
    values = raw_row.values or {}
    problem = lookup_field(values, "problem_id", mapping)
    if _missing(problem) or (isinstance(problem, str) and not problem.strip()):
        raise _FieldError("problem_id", "missing")
    if isinstance(problem, float):
        # Parquet and pandas store an integer column with gaps as floats: 2.0 is problem 2.
        if not (problem.is_integer() and abs(problem) <= _LARGEST_EXACT_FLOAT):
            raise _FieldError("problem_id", f"expected text or a whole number, got {problem!r}")
        problem = int(problem)
    problem_text = _as_text("problem_id", problem, allow_numbers=True)
    assert problem_text is not None

    raw = _as_text("raw", lookup_field(values, "raw", mapping))
    reasoning = _as_text("reasoning", lookup_field(values, "reasoning", mapping))
    answer = _as_text("answer", lookup_field(values, "answer", mapping), allow_numbers=True)
    complete = _as_bool("complete", lookup_field(values, "complete", mapping))
    if reasoning is None and raw is not None:
        reasoning, parsed_answer, parsed_complete = _split_raw(raw)
        answer = answer if answer is not None else parsed_answer
        complete = complete if complete is not None else parsed_complete
    if reasoning is None:
        raise _FieldError("reasoning", "missing (give 'reasoning' or the raw output 'raw')")
    if not reasoning.strip():
        raise _FieldError("reasoning", "empty")
    # Every text that is stored and graded is bounded, not only the reasoning.
    for name, text in (("raw", raw), ("answer", answer), ("reasoning", reasoning)):
        size = 0 if text is None else len(text.encode("utf-8", errors="surrogatepass"))
        if size > max_bytes:
            raise _FieldError(
                name,
                f"{size / 1e6:.1f} MB is above the limit of {max_bytes / 1e6:.1f} MB "
                "(raise it with --max-trace-mb)",
            )
    gold = lookup_field(values, "gold", mapping)
    if isinstance(gold, list | dict) and _structure_depth(gold) > MAX_GOLD_DEPTH:
        raise _FieldError("gold", f"nested more than {MAX_GOLD_DEPTH} levels deep")
    if isinstance(gold, list | dict):
        try:
            gold = json.dumps(gold, ensure_ascii=False)
        except (TypeError, ValueError):  # e.g. bytes or timestamps inside a Parquet struct
            raise _FieldError("gold", f"cannot be stored as JSON text: {_short(gold)}") from None
    if isinstance(gold, str) and _bracket_depth(gold) > MAX_GOLD_DEPTH:
        # Grading parses the gold answer; its cost grows steeply with the nesting (a
        # 900-deep gold took 6-9 s per row), and no real answer comes near this depth.
        raise _FieldError(
            "gold", f"brackets nested more than {MAX_GOLD_DEPTH} levels deep (too costly to grade)"
        )
    row_teacher = _as_text("teacher", lookup_field(values, "teacher", mapping))
    if row_teacher is not None and not row_teacher.strip():
        raise _FieldError("teacher", "empty")
    if row_teacher is None and not teacher:
        raise _FieldError("teacher", "missing: give --teacher, or a teacher field on the row")
    sample = _as_count("sample", lookup_field(values, "sample", mapping), maximum=2**31 - 1)
    return _Record(
        line=raw_row.line,
        row=raw_row.row,
        # Ids and names in NFC: "é" typed as one code point or as e + U+0301 is one problem.
        problem_id=_nfc(problem_text.strip()),
        teacher=_nfc((row_teacher or teacher).strip()),
        sample=sample or 0,
        reasoning=reasoning,
        raw=raw,
        answer=answer,
        prompt=_as_text("prompt", lookup_field(values, "prompt", mapping)),
        gold=_as_text("gold", gold, allow_numbers=True),
        correct=_as_bool("correct", lookup_field(values, "correct", mapping)),
        tokens=_as_count("tokens", lookup_field(values, "tokens", mapping)),
        complete=complete,
        truncated=_as_bool("truncated", lookup_field(values, "truncated", mapping)),
        extras=_extras(values),
    )


def _extras(values: Mapping[str, Any]) -> dict[str, Any]:
    """What a format adapter adds beside the fields (:data:`EXTRA_KEYS`), each text in it
    checked to be writable as UTF-8: a lone surrogate in a tool's verdict or in a chunk must
    quarantine its row here, not fail a table's write after the trace has landed."""
    extras = {k: values[k] for k in EXTRA_KEYS if values.get(k) is not None}
    for name, value in extras.items():
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                _as_text(name, item)
            elif isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list | tuple):
                stack.extend(item)
    return extras


# --- writing ------------------------------------------------------------------------------------


def _open_store(store: Store | str | os.PathLike[str]) -> Store:
    if isinstance(store, Store):
        return store
    try:
        return Store.create(Path(store))
    except StoreError as err:
        raise IngestStoreError(str(err)) from None
    except OSError as err:
        raise IngestStoreError(f"{store}: cannot create or open the store ({err})") from None


def _task(name: str) -> Any | None:
    """The task family, or None when the tasks package is not importable."""
    try:
        from legival_core.tasks import get_task

        return get_task(name)
    except ImportError:
        return None
    except KeyError as err:
        raise IngestUsageError(str(err).strip("\"'")) from None


def _existing_problems(store: Store) -> dict[str, dict[str, Any]]:
    if not store.has("problems"):
        return {}
    frame = store.read("problems")
    return {str(r["problem_id"]): r for r in frame.to_dict("records")}


class _Writer:
    """Collects good records and writes them to the store in batches."""

    def __init__(
        self,
        store: Store,
        report: IngestReport,
        task: Any | None,
        existing: dict[str, dict[str, Any]],
        source_name: str,
        overwrite: bool,
        batch_rows: int,
        reference: bool = False,
    ):
        from legival_core.published.references import reference_source

        self.store = store
        self.report = report
        self.task = task
        self.existing = existing
        # A reference teacher's traces say so in their source (legival_core.published.references).
        self.source = f"ingest:{source_name}"
        if reference:
            self.source = reference_source(self.source)
        self.overwrite = overwrite
        self.batch_rows = batch_rows
        self.pending: list[_Record] = []
        # Resume per table: a kill between a batch's traces part and its grades part must
        # leave the grades to the rerun, so each table's own keys are looked up.
        self.trace_sources: dict[str, str | None] = _trace_sources(store)
        self.done_grades: set[str] = (
            {k[0] for k in store.done_keys("grades", ["trace_id"])}
            if store.has("grades")
            else set()
        )
        self.new_problems: set[str] = set()
        #: The first row of this file for each problem not in the store (its prompt and gold
        #: are the stored ones for the rows after it).
        self.first_rows: dict[str, _Record] = {}
        #: Problems whose prompt or gold an ``--overwrite`` row replaced: their rows to write,
        #: and the problems whose every graded trace is regraded against the new gold.
        self.replaced: dict[str, dict[str, Any]] = {}
        self.regrade: set[str] = set()
        #: Traces of this ingest whose file gave ``correct`` (their verdict stands).
        self.given_verdicts: set[str] = set()
        #: Traces written with the file's own token count / with a tiktoken count (provenance).
        self.tokens_given = 0
        self.tokens_counted = 0
        #: The same per teacher, with where a given count comes from (a format's words).
        self.tokens_by_teacher: dict[str, dict[str, Any]] = {}
        #: The tool's verdicts and chunk importances a format adapter brings.
        self.extra = ExtraTables.for_store(store)
        self.truncated = 0
        #: Traces written, and those among them whose reasoning is their answer (no part of
        #: the output was set apart as reasoning).
        self.fresh = 0
        self.unsplit = 0
        self.hit_budget = 0
        for table in ("problems", "traces", "grades"):
            report.written.setdefault(table, 0)

    def add(self, record: _Record) -> None:
        self.pending.append(record)
        if len(self.pending) >= self.batch_rows:
            self.flush()

    def flush(self) -> None:
        records, self.pending = self.pending, []
        if not records:
            return
        from legival_core.text.tokens import count_tokens_many

        problems, traces, grades = [], [], []
        fresh = [
            r for r in records if self.overwrite or self._trace_id(r) not in self.trace_sources
        ]
        # A trace this file wrote earlier may still lack its problem or grade row (the
        # ingest was killed between parts): those rows are completed, the trace is kept.
        resumed = [
            r
            for r in records
            if not self.overwrite and self.trace_sources.get(self._trace_id(r), "") == self.source
        ]
        self.report.already_present += len(records) - len(fresh)
        needs_count = [r for r in fresh if r.tokens is None]
        counts = count_tokens_many(
            [r.raw if r.raw is not None else _joined(r.reasoning, r.answer) for r in needs_count]
        )
        for record, count in zip(needs_count, counts, strict=True):
            record.tokens = count
        self.tokens_counted += len(needs_count)
        self.tokens_given += len(fresh) - len(needs_count)
        counted = {id(r) for r in needs_count}
        for record in fresh:
            self._count_tokens(record, id(record) in counted)
        for record in records:
            # No gold to grade against: the tool's own verdict is the grade (said in the summary).
            verdict = record.extras.get("tool_correct")
            if record.correct is None and record.gold is None and verdict is not None:
                record.correct = bool(verdict)
                record.extras["graded_by_tool"] = True
        for record in resumed:
            known = self.existing.get(record.problem_id)
            problem = self._new_problem(record, known)
            if problem is not None:
                problems.append(problem)
            trace_id = self._trace_id(record)
            grade = None
            if trace_id not in self.done_grades:
                grade = self._grade_row(trace_id, record, known)
                if grade is not None:
                    grades.append(grade)
                    self.done_grades.add(trace_id)
            self._add_extras(trace_id, record, grade)
        for record in fresh:
            dataset = self.report.dataset
            known = self.existing.get(record.problem_id)
            if known is not None:
                dataset = str(known.get("dataset") or dataset)
            problem = self._new_problem(record, known)
            if problem is not None:
                problems.append(problem)
            trace_id = self._trace_id(record)
            grade = self._grade_row(trace_id, record, known)
            self._budget(record, grade, known)
            self.fresh += 1
            self.unsplit += bool(record.answer) and record.reasoning == record.answer
            traces.append(
                {
                    "trace_id": trace_id,
                    "problem_id": record.problem_id,
                    "dataset": dataset,
                    "teacher": record.teacher,
                    "sample": record.sample,
                    "reasoning": record.reasoning,
                    "answer_text": record.answer,
                    "raw": record.raw,
                    "complete": record.complete,
                    "tokens": record.tokens,
                    "truncated": record.truncated,
                    "source": self.source,
                    "sampling": None,
                }
            )
            if grade is not None:
                grades.append(grade)
                self.done_grades.add(trace_id)
            self._add_extras(trace_id, record, grade)
            self.truncated += bool(record.truncated)
            self.trace_sources[trace_id] = self.source
        stage = "ingest"
        # One row per problem: a replacement made in this batch supersedes the first row.
        problems += self.replaced.values()
        self.replaced = {}
        problems = list({row["problem_id"]: row for row in problems}.values())
        # The tool's verdicts and chunk importances come last: a kill before them leaves the
        # traces, and the rerun (those traces are then "resumed") writes what is missing.
        tables = [("problems", problems), ("traces", traces), ("grades", grades)]
        tables += list(self.extra.take().items())
        for table, rows in tables:
            if rows:
                frame = pd.DataFrame(rows, columns=TABLES[table].columns)
                self.store.write(table, frame, stage=stage)
                self.report.written[table] = self.report.written.get(table, 0) + len(rows)

    def _budget(
        self, record: _Record, grade: dict[str, Any] | None, known: Mapping[str, Any] | None
    ) -> None:
        """A format's "stopped at the budget" becomes ``truncated`` as
        docs/metrics/decomposition.md defines it: cut
        by the budget *and* without an extractable answer, the task's own test (the generate
        stage's rule). A trace graded correct has an answer by definition, so it is never
        truncated (our grade, or the tool's verdict where there is no gold) — unless it stopped
        inside its thinking (a ``<think>`` block opened and never closed) and is graded here:
        then it wrote no final answer at all, so it is truncated and our grade is "no answer",
        whatever a phrase of the unfinished reasoning would be graded as (a trace both truncated
        and correct is refused by the decomposition)."""
        hit = record.extras.get("hit_budget")
        if record.truncated is not None or hit is None:
            return
        self.hit_budget += bool(hit)
        record.truncated = False
        if hit and record.complete is False and grade is not None and record.correct is None:
            record.truncated = True
            grade.update(_ungraded_row(), correct=False, score=0.0, status="no_answer")
            return
        if not hit or (grade is not None and grade.get("correct")):
            return
        problem = dict(known) if known is not None else self._problem_row(record)
        gold = (known or {}).get("gold")
        # A problem already in the store: the grade stage will grade it against its gold.
        already = grade is None and self.task is not None and bool(gold)
        if already and self._graded(record, str(gold), problem).grade.correct:
            return
        text = record.raw if record.raw is not None else _joined(record.reasoning, record.answer)
        try:
            extractable = self.task is not None and bool(
                self.task.answer_extractable(text, problem=problem)
            )
        except Exception:  # untrusted text must never stop an ingest
            extractable = False
        record.truncated = not extractable

    def _count_tokens(self, record: _Record, counted: bool) -> None:
        """Per teacher: traces with the file's own token count, and with a tiktoken count."""
        entry = self.tokens_by_teacher.setdefault(
            record.teacher, {"given": 0, "counted": 0, "given_by": []}
        )
        entry["counted" if counted else "given"] += 1
        origin = record.extras.get("tokens_origin")
        if not counted and origin and origin not in entry["given_by"]:
            entry["given_by"].append(str(origin))

    def _add_extras(self, trace_id: str, record: _Record, grade: Mapping[str, Any] | None) -> None:
        if not record.extras:
            return
        ours = None
        if grade is not None and not record.extras.get("graded_by_tool"):
            # Our grade only when our grader made it (the file gave a gold, not a verdict).
            ours = grade.get("correct") if record.extras.get("tool_correct") is not None else None
        self.extra.tool_only += bool(record.extras.get("graded_by_tool")) and grade is not None
        self.extra.add(trace_id, record.extras, ours)

    def _trace_id(self, record: _Record) -> str:
        return trace_id_for(record.teacher, record.problem_id, record.sample)

    def replace_problem(self, record: _Record, known: Mapping[str, Any] | None) -> None:
        """``--overwrite`` with a prompt or gold that differs from the stored one: the row's
        values become the stored problem, and every graded trace of it is regraded."""
        row = self._problem_row(record)
        if known is not None:
            row["dataset"] = known.get("dataset") or row["dataset"]
            row["task"] = known.get("task") or row["task"]
            if record.prompt is None:
                row["prompt"] = known.get("prompt")
            if record.gold is None:
                row["gold"], row["meta"] = known.get("gold", ""), known.get("meta", row["meta"])
        self.existing[record.problem_id] = row
        self.replaced[record.problem_id] = row
        self.regrade.add(record.problem_id)

    def regrade_replaced(self) -> None:
        """Grade every trace of each replaced problem again, against the gold now stored (a
        trace of this ingest whose file gave ``correct`` keeps that verdict)."""
        if not self.regrade or self.task is None or not self.store.has("traces"):
            return
        columns = ["trace_id", "problem_id", "answer_text", "raw", "reasoning"]
        traces = self.store.read(
            "traces", columns=columns, filters={"problem_id": sorted(self.regrade)}
        )
        graded_before = (
            {k[0] for k in self.store.done_keys("grades", ["trace_id"])}
            if self.store.has("grades")
            else set()
        )
        rows = []
        for trace in traces.to_dict("records"):
            trace_id = trace["trace_id"]
            if trace_id not in graded_before or trace_id in self.given_verdicts:
                continue
            problem = dict(self.existing[trace["problem_id"]])
            if not problem.get("gold"):
                continue
            texts = {c: None if pd.isna(trace[c]) else str(trace[c]) for c in columns[2:]}
            try:
                graded = self.task.grade_text(texts, problem["gold"], problem=problem)
            except GraderCodeError:
                raise  # broken grading code is no grade of the text
            except Exception as err:  # untrusted text must never stop an ingest
                status = f"error: {type(err).__name__}: {err}"[:200]
                graded = TextGrade(Grade(False, 0.0, status), None, None, None, None)
            rows.append({"trace_id": trace_id, **_grade_columns(graded)})
        if rows:
            frame = pd.DataFrame(rows, columns=TABLES["grades"].columns)
            self.store.write("grades", frame, stage="ingest")
            self.report.written["grades"] += len(rows)
        self.report.regraded = len(rows)

    def _new_problem(
        self, record: _Record, known: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        """The problems row this record adds: only for a problem neither in the store nor
        already added by this ingest, and only when the row gives its prompt."""
        if known is not None or record.prompt is None or record.problem_id in self.new_problems:
            return None
        self.new_problems.add(record.problem_id)
        return self._problem_row(record)

    def _problem_row(self, record: _Record) -> dict[str, Any]:
        meta = {"source": self.source, "gold_known": record.gold is not None}
        return {
            "problem_id": record.problem_id,
            "dataset": self.report.dataset,
            "task": self.report.task,
            "prompt": record.prompt,
            # The problems table requires a gold answer; "" marks "not given" (meta says so).
            "gold": record.gold if record.gold is not None else "",
            "meta": json.dumps(meta, sort_keys=True),
        }

    def _grade_row(
        self, trace_id: str, record: _Record, known: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        if record.correct is None and record.gold is None:
            return None
        # Graded against the stored gold: a row whose gold differs was refused (or, with
        # --overwrite, replaced the stored one) before it got here.
        problem = dict(known) if known is not None else self._problem_row(record)
        if record.gold is not None and not problem.get("gold"):
            problem["gold"] = record.gold
        if record.correct is not None:
            self.given_verdicts.add(trace_id)
            # The file's own verdict stands; the answer it states is still located and kept.
            located = None
            if self.task is not None and record.gold is not None:
                located = self._graded(record, record.gold, problem)
            row = _grade_columns(located) if located is not None else _ungraded_row()
            row.update(correct=record.correct, score=1.0 if record.correct else 0.0, status="ok")
            # The verdict is the file's, not our grader's (grader version 0 says so).
            row.update(grader_version=0)
            return {"trace_id": trace_id, **row}
        if self.task is None:
            if "no task grader" not in " ".join(self.report.notes):
                self.report.notes.append(
                    "no task grader available (legival_core.tasks): rows with only 'gold' "
                    "were not graded"
                )
            return None
        assert record.gold is not None
        graded = self._graded(record, record.gold, problem)
        return {"trace_id": trace_id, **_grade_columns(graded)}

    def _graded(self, record: _Record, gold: str, problem: dict[str, Any]) -> TextGrade:
        """The record's stated answer graded through the answer layer (answer, then reasoning)."""
        assert self.task is not None
        texts = {"answer_text": record.answer, "reasoning": record.reasoning}
        try:
            return self.task.grade_text(texts, gold, problem=problem)
        except GraderCodeError:
            raise  # broken grading code is no grade of the text
        except Exception as err:  # untrusted text must never stop an ingest
            status = f"error: {type(err).__name__}: {err}"[:200]
            return TextGrade(Grade(False, 0.0, status), None, None, None, None)


def _grade_columns(graded: TextGrade) -> dict[str, Any]:
    from precompute.stages.grade import grade_row

    return grade_row(graded)


def _ungraded_row() -> dict[str, Any]:
    from precompute.stages.base import code_revision

    return {
        "extracted": None,
        "answer_kind": None,
        "answer_field": None,
        "answer_start": None,
        "answer_end": None,
        "question_type": None,
        "grader_version": 0,  # no grader of ours ran: the verdict is the file's
        "code_revision": code_revision(),
    }


def _trace_sources(store: Store) -> dict[str, str | None]:
    """trace_id -> ``source`` of every trace already in the store."""
    if not store.has("traces"):
        return {}
    frame = store.read_arrow("traces", columns=["trace_id", "source"])
    return dict(
        zip(frame.column("trace_id").to_pylist(), frame.column("source").to_pylist(), strict=True)
    )


def _joined(reasoning: str, answer: str | None) -> str:
    return reasoning if not answer else f"{reasoning}\n{answer}"


# --- the ingest ---------------------------------------------------------------------------------


def ingest(
    path: str | os.PathLike[str],
    store: Store | str | os.PathLike[str],
    teacher: str | None,
    task: str = "math",
    mapping: Mapping[str, str] | None = None,
    dataset: str | None = None,
    *,
    max_trace_mb: float = DEFAULT_MAX_TRACE_MB,
    split: str | None = None,
    config: str | None = None,
    overwrite: bool = False,
    batch_rows: int = 2000,
    reference: bool = False,
    file_format: str = "legival",
    requests: str | os.PathLike[str] | None = None,
    announce: Callable[[str], None] | None = None,
) -> IngestReport:
    """Ingest a file (or a Hugging Face dataset) of traces into ``store``.

    Args:
        path: JSONL / JSON / Parquet / CSV file, or a hub dataset name ``owner/name``.
        store: a :class:`legival_core.store.store.Store` or the folder of one (created if needed).
        teacher: teacher name for every row (a row's own ``teacher`` field wins); None: our
            own rows name theirs (a row that names none is quarantined). With a
            ``file_format`` whose files name their model, None takes the teacher from the file
            (and a name given here overrides the file's).
        task: task family (``legival_core.tasks``) of new problems and for grading by gold.
        mapping: field -> column of the file, e.g. ``{"prompt": "question"}``.
        dataset: dataset name of new problems (default: the task the tool ran, for formats
            whose files name it (Inspect AI, lm-eval), else the file's stem).
        max_trace_mb: largest accepted reasoning, answer or raw text in MB (10^6 bytes of UTF-8).
        split, config: for hub datasets.
        overwrite: rewrite traces already in the store (default: skip them).
        batch_rows: rows per written part.
        reference: the file holds reference solutions (a human write-up, a gold rationale):
            its traces get the source ``reference:ingest:<file>``, which makes their teacher a
            reference teacher (:mod:`legival_core.published.references`), shown apart and left out
            of ranks, frontiers, teacher-level correlations and solver pools by default.
        file_format: a :data:`precompute.formats.FORMATS` name, or ``"auto"`` to detect it
            (:func:`precompute.formats.detect_format`; rows that fit two formats are refused
            with :class:`IngestUsageError`); ``"legival"`` (the default) reads our own rows.
        requests: with ``file_format`` openai, the batch *input* file beside a batch output
            file: each row's prompt is its ``custom_id``'s last user message there.
        announce: called with one line saying which format ``auto`` detected, and why, before
            anything is written (the command line prints it).

    Returns:
        An :class:`IngestReport`; bad rows are in ``report.quarantined`` and in the store's
        ``quarantine.jsonl``.

    Raises:
        IngestError: the ingest cannot run; the subclass names the kind: a bad argument
            (:class:`IngestUsageError`), an unusable store (:class:`IngestStoreError`), a
            missing file (:class:`IngestMissingError`) or an unreadable one
            (:class:`IngestUnreadableError`).
    """
    adapter, detection = _adapter(file_format, os.fspath(path), dict(mapping or {}))
    if detection is not None and announce is not None:
        announce(detection_line(os.fspath(path), detection))
    if requests is not None:
        if adapter is None or not hasattr(adapter, "load_requests"):
            raise IngestUsageError(
                "--requests: the batch input file goes with --format openai (batch output), "
                f"not with {adapter.name if adapter is not None else 'legival'} rows"
            )
        from precompute.formats import FormatMissingError, FormatUnreadableError

        try:
            adapter.load_requests(Path(requests))
        except FormatMissingError as err:
            raise IngestMissingError(str(err)) from None
        except FormatUnreadableError as err:
            raise IngestUnreadableError(str(err)) from None
    if teacher is not None and not str(teacher).strip():
        raise IngestUsageError("--teacher: empty; give a model name, or leave it out")
    # Our own rows may each name their teacher: one that names none is quarantined (_record).
    if teacher is None and adapter is not None and not adapter.names_model:
        raise IngestUsageError(
            f"--teacher: a teacher name is required ({adapter.tool} files do not name their model)"
        )
    teacher = _nfc(str(teacher)) if teacher is not None else None
    dataset = _nfc(dataset) if dataset else dataset
    if max_trace_mb <= 0:
        raise IngestUsageError(f"--max-trace-mb must be > 0, got {max_trace_mb}")
    if batch_rows < 1:
        raise IngestUsageError(f"--batch-rows must be >= 1, got {batch_rows}")
    mapping = dict(mapping or {})
    unknown = sorted(set(mapping) - set(FIELDS))
    if unknown:
        raise IngestUsageError(f"--map: unknown field(s) {unknown}; fields are {', '.join(FIELDS)}")
    source = os.fspath(path)
    source_path = Path(source)
    is_file = source_path.exists()
    task_impl = _task(task)
    max_bytes = int(max_trace_mb * 1e6)
    if adapter is not None:
        adapter.max_bytes = max_bytes  # what the adapter unpacks or assembles is bounded too
    rows = (
        _rows(source, split, config)
        if adapter is None
        else _adapted_rows(adapter, source, split, config, teacher)
    )
    # A tool's log is named after when it ran; the task it ran names the problems better (two
    # models' runs of one task then share them). Known once the adapter has opened the file.
    own_name = getattr(adapter, "task_name", None) or (source_path.stem if is_file else source)
    name = dataset or re.sub(r"[^A-Za-z0-9_.-]+", "_", own_name)
    the_store = _open_store(store)
    store_path = the_store.path
    file_key = str(source_path.resolve()) if is_file else f"hub:{source}"
    # Without --teacher the file names the teachers; "(from the file)" keys its quarantine.
    teacher_label = teacher if teacher is not None else "(from the file)"
    report = IngestReport(
        file=source, store=str(store_path), teacher=teacher_label, task=task, dataset=name
    )
    existing = _existing_problems(the_store)
    writer = _Writer(
        the_store, report, task_impl, existing, source_path.name, overwrite, batch_rows, reference
    )
    first_seen: dict[tuple[str, str, int], str] = {}
    #: The trace of every row kept (written now or already stored), and its dataset.
    kept_traces: set[str] = set()
    kept_in: set[str] = set()
    #: Where each problem's stored prompt and gold come from: "the store" or this file's line.
    origin: dict[str, str] = {}
    #: Stored problems by the id they were loaded with (built when first needed) and the
    #: datasets that rows without a prompt were found in that way (without --dataset).
    by_own_id: dict[str, list[str]] | None = None
    found_in: dict[str, int] = {}
    for raw_row in rows:
        report.rows_read += 1
        if raw_row.values is None:
            report.quarantined.append(
                Quarantined(
                    file=file_key,
                    row=raw_row.row,
                    reason=raw_row.error or "unreadable row",
                    line=raw_row.line,
                    field=raw_row.field,
                    excerpt=raw_row.excerpt,
                )
            )
            continue
        try:
            record = _record(raw_row, mapping, teacher or "", max_bytes)
            own_id = record.problem_id
            record.problem_id = _resolve_problem_id(own_id, name, existing)
            if record.prompt is None and record.problem_id not in existing:
                # A row that only names its problem (a batch output's custom_id): without
                # --dataset, the one stored problem loaded with that id is meant.
                if by_own_id is None:
                    by_own_id = _problems_by_own_id(existing)
                candidates = by_own_id.get(own_id, []) if dataset is None else []
                if len(candidates) > 1:
                    raise _FieldError(
                        "problem_id",
                        f"'{own_id}' names several stored problems ("
                        + ", ".join(f"'{c}'" for c in candidates)
                        + "): give --dataset",
                    )
                if not candidates:
                    hint = getattr(adapter, "prompt_hint", "") if adapter is not None else ""
                    raise _FieldError(
                        "prompt",
                        f"missing, and problem '{record.problem_id}' is not in the store "
                        f"(give the prompt, or load the dataset first{hint})",
                    )
                record.problem_id = candidates[0]
                stored_in = str(existing[record.problem_id].get("dataset"))
                found_in[stored_in] = found_in.get(stored_in, 0) + 1
            key = (record.teacher, record.problem_id, record.sample)
            if key in first_seen:
                raise _FieldError(
                    "problem_id",
                    f"duplicate of {first_seen[key]} (same teacher, problem_id and sample)",
                )
            _check_problem(record, writer, origin, raw_row, overwrite)
            first_seen[key] = (
                f"line {raw_row.line}" if raw_row.line is not None else f"row {raw_row.row}"
            )
        except _FieldError as err:
            identity = _row_identity(raw_row, mapping, teacher or "", name, existing)
            report.quarantined.append(
                Quarantined(
                    file=file_key,
                    row=raw_row.row,
                    reason=str(err),
                    line=raw_row.line,
                    field=err.field,
                    excerpt=_row_excerpt(raw_row.values),
                    # A duplicate is bad as a second copy: keeping its trace does not fix it.
                    trace_id=None if identity in first_seen else _trace_of(identity),
                )
            )
            continue
        report.kept += 1
        kept_traces.add(trace_id_for(record.teacher, record.problem_id, record.sample))
        known = existing.get(record.problem_id)
        kept_in.add(str(known.get("dataset") or name) if known is not None else name)
        writer.add(record)
    writer.flush()
    writer.regrade_replaced()
    if kept_in:
        # The summary and the record name the dataset(s) the traces are stored under: rows
        # that only name their problem (a batch output's custom_id) join the problems' own.
        report.dataset = ", ".join(sorted(kept_in))
    # Under the store lock, appended: concurrent ingests keep every entry, this file's entries
    # from an earlier ingest are replaced rather than repeated, and an earlier entry of a line
    # whose trace this ingest kept (the line fixed) is cleared.
    report.quarantine_path = str(
        the_store.add_quarantine(
            [q.to_record(teacher_label) for q in report.quarantined],
            replacing={"file": file_key, "teacher": teacher_label},
            resolved=kept_traces,
        )
    )
    for stored_in, count in sorted(found_in.items()):
        report.notes.append(
            f"{count} rows named their problem by the id it has in dataset '{stored_in}' "
            "(they hold no prompt; --dataset chooses the dataset)"
        )
    if detection is not None:
        report.notes.append(f"--format auto chose {detection.name}: {detection.why}")
    if adapter is not None:
        report.notes += _format_notes(adapter, writer)
    teachers = sorted(writer.tokens_by_teacher)
    if teacher is None and teachers:
        report.teacher = ", ".join(teachers)
    if report.kept:
        the_store.record_stage(
            "ingest",
            file=file_key,
            teacher=teacher
            if teacher is not None
            else (teachers[0] if len(teachers) == 1 else None),
            format=adapter.name if adapter is not None else "legival",
            task=task,
            dataset=report.dataset,
            mapping=mapping,
            rows_read=report.rows_read,
            kept=report.kept,
            quarantined=len(report.quarantined),
            # E[T]'s origin for this teacher (legival_core.store.provenance.token_sources): traces
            # written with the file's own count, and with a tiktoken count of the text.
            tokens={
                "given": writer.tokens_given,
                "counted": writer.tokens_counted,
                "counted_with": "tiktoken cl100k_base",
            },
            # The same per teacher, with the tool field a given count was read from.
            teachers=writer.tokens_by_teacher,
        )
    return report


def _check_problem(
    record: _Record, writer: _Writer, origin: dict[str, str], raw_row: SourceRow, overwrite: bool
) -> None:
    """Refuse a row whose prompt or gold differs from its problem's stored one (the store's,
    or the first row of this file that gave the problem); with ``overwrite`` the row's values
    replace the stored ones instead. Either way one problem has one prompt and one gold, and
    every grade is made against it."""
    here = f"line {raw_row.line}" if raw_row.line is not None else f"row {raw_row.row}"
    known = writer.existing.get(record.problem_id)
    if known is None:
        first = writer.first_rows.get(record.problem_id)
        if first is None:
            writer.first_rows[record.problem_id] = record
            origin[record.problem_id] = here
            return
        stored = {"prompt": first.prompt, "gold": first.gold}
    else:
        origin.setdefault(record.problem_id, "the store")
        # "" is the problems table's "no gold given" (its meta says gold_known: false).
        stored = {"prompt": known.get("prompt"), "gold": known.get("gold") or None}
    for name in ("prompt", "gold"):
        value = getattr(record, name)
        if value is None or value == stored[name]:
            continue
        if overwrite or (name == "gold" and stored["gold"] is None):
            # --overwrite replaces; a gold for a problem stored without one fills it in.
            if known is None:  # the file's first row of it is not in the store yet
                writer.first_rows[record.problem_id] = record
                writer.replace_problem(record, None)
            else:
                writer.replace_problem(record, known)
            origin[record.problem_id] = here
            return
        was = "none" if stored[name] is None else _short(stored[name])
        raise _FieldError(
            name,
            f"differs from the stored {name} of problem '{record.problem_id}' "
            f"({origin[record.problem_id]}: {was}); one problem has one {name} "
            "(--overwrite replaces it and regrades the problem's traces)",
        )


def detect(source: str, mapping: Mapping[str, str] | None = None) -> Any:
    """What ``--format auto`` makes of ``source``
    (:func:`precompute.formats.detect_format`); two formats that fit are a usage error."""
    from precompute import formats

    try:
        return formats.detect_format(source, mapping)
    except formats.FormatAmbiguousError as err:
        raise IngestUsageError(str(err)) from None


def detection_line(source: str, detection: Any) -> str:
    """The line ingest prints before it writes anything when ``--format auto`` chose."""
    from precompute import formats

    tool = formats.FORMATS[detection.name].tool
    return (
        f"format: {detection.name} ({tool}), detected by --format auto: {detection.why} "
        "(give --format to choose another)"
    )


def _adapter(file_format: str, source: str, mapping: Mapping[str, str]) -> tuple[Any, Any]:
    """The format adapter for ``file_format`` (``auto``: detected), or None for our own rows,
    with what the detection found (None when the format was given)."""
    from precompute import formats

    detection = detect(source, mapping) if file_format == formats.AUTO else None
    name = detection.name if detection is not None else file_format
    if name == "legival":
        return None, detection
    try:
        return formats.get_format(name), detection
    except KeyError as err:
        raise IngestUsageError(str(err).strip("\"'")) from None


def _adapted_rows(
    adapter: Any, source: str, split: str | None, config: str | None, teacher: str | None
) -> Iterator[SourceRow]:
    """The rows a format adapter makes of ``source``, each with its teacher: ``teacher`` when
    given, else the model the file names (a row without one is quarantined)."""
    from precompute.formats import FormatMissingError, FormatUnreadableError

    path = Path(source)
    if adapter.reads_files and not path.exists():
        raise IngestMissingError(f"{source}: no such file or folder")
    try:
        rows = adapter.rows(path if path.exists() else None, lambda: _rows(source, split, config))
    except FormatMissingError as err:
        raise IngestMissingError(str(err)) from None
    except FormatUnreadableError as err:
        raise IngestUnreadableError(str(err)) from None
    return _with_teacher(rows, teacher, adapter.tool)


def _with_teacher(rows: Iterator[SourceRow], teacher: str | None, tool: str) -> Iterator[SourceRow]:
    for row in rows:
        if row.values is None:
            yield row
            continue
        values = row.values
        model = values.get("model")
        if teacher is None and not model:
            yield SourceRow(
                row.row, row.line, None, f"this {tool} record names no model: give --teacher",
                excerpt=_row_excerpt(values), field="teacher",
            )  # fmt: skip
            continue
        values["teacher"] = teacher if teacher is not None else str(model)
        yield SourceRow(row.row, row.line, values)


def _format_notes(adapter: Any, writer: _Writer) -> list[str]:
    """The summary lines of a format: what it lacks (once), what it noticed, the verdicts'
    agreement with our grades, chunk spans, and how many traces were cut by their budget."""
    notes = [f"format: {adapter.name} ({adapter.tool})"]
    notes += [f"{adapter.tool}: {line}" for line in adapter.lacks]
    notes += list(adapter.notes)
    notes += writer.extra.notes(adapter.tool)
    for name, entry in sorted(writer.tokens_by_teacher.items()):
        if entry["given"]:
            origin = "; ".join(entry["given_by"]) or "the file"
            notes.append(f"teacher '{name}': {entry['given']} token counts from {origin}")
    if writer.unsplit:
        notes.append(
            f"{writer.unsplit} of {writer.fresh} traces have no reasoning apart from the answer "
            "(no reasoning field or block, no </think>): the whole output is measured as the "
            "reasoning"
        )
    if writer.hit_budget:
        notes.append(
            f"{writer.hit_budget} traces stopped at their output budget; {writer.truncated} of "
            "them hold no extractable answer and are marked truncated"
        )
    return notes


def _problems_by_own_id(existing: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Stored problem ids by the id they were loaded with (``<dataset>/<id>`` → ``<id>``).

    >>> _problems_by_own_id({"a/1": {"dataset": "a"}, "b/1": {"dataset": "b"}, "c": {}})
    {'1': ['a/1', 'b/1']}
    """
    found: dict[str, list[str]] = {}
    for problem_id, row in sorted(existing.items()):
        prefix = f"{row.get('dataset')}/"
        if row.get("dataset") and problem_id.startswith(prefix):
            found.setdefault(problem_id[len(prefix) :], []).append(problem_id)
    return found


def _row_identity(
    raw_row: SourceRow,
    mapping: Mapping[str, str],
    teacher: str,
    dataset: str,
    existing: Mapping[str, Any],
) -> tuple[str, str, int] | None:
    """(teacher, problem id, sample) of a rejected row, read as :func:`_record` reads them;
    None when they cannot be read (the problem id itself missing or bad, no teacher)."""
    values = raw_row.values or {}
    try:
        problem = lookup_field(values, "problem_id", mapping)
        if isinstance(problem, float) and problem.is_integer():
            problem = int(problem)
        problem_text = _as_text("problem_id", problem, allow_numbers=True)
        row_teacher = _as_text("teacher", lookup_field(values, "teacher", mapping)) or teacher
        sample = _as_count("sample", lookup_field(values, "sample", mapping), maximum=2**31 - 1)
    except _FieldError:
        return None
    if problem_text is None or not problem_text.strip() or not row_teacher.strip():
        return None
    problem_id = _resolve_problem_id(_nfc(problem_text.strip()), dataset, existing)
    return (_nfc(row_teacher.strip()), problem_id, sample or 0)


def _trace_of(identity: tuple[str, str, int] | None) -> str | None:
    return trace_id_for(*identity) if identity is not None else None


def _resolve_problem_id(raw_id: str, dataset: str, existing: Mapping[str, Any]) -> str:
    """An id already in the store is used as is; others are namespaced by the dataset."""
    if raw_id in existing or raw_id.startswith(f"{dataset}/"):
        return raw_id
    return f"{dataset}/{raw_id}"


# --- command line -------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m precompute ingest`` (the CLI builds its parser from these)."""
    from precompute.formats import AUTO, FORMATS

    parser.add_argument(
        "file",
        help="JSONL, JSON, Parquet or CSV file, a tool's log (Inspect .eval/.json, lm-eval "
        "samples, chat completions), a Thought Anchors folder, or owner/name on the Hub",
    )
    parser.add_argument("--store", required=True, help="results store folder (created if needed)")
    parser.add_argument(
        "--format",
        dest="file_format",
        default=AUTO,
        choices=[AUTO, *FORMATS],
        help="the file's format (default: auto, by sniffing); see docs/bring-your-traces.md",
    )
    parser.add_argument(
        "--teacher",
        default=None,
        help="name of the model that wrote the traces (required unless the file names it or "
        "every row has a teacher field; overrides the file's model name, not a row's field)",
    )
    parser.add_argument("--task", default="math", help="task family (default: math)")
    parser.add_argument(
        "--dataset",
        default=None,
        help="dataset name (default: the task an Inspect or lm-eval log ran, else the file's stem)",
    )
    parser.add_argument(
        "--map",
        nargs="*",
        default=None,
        metavar="FIELD=COLUMN",
        help="read FIELD from COLUMN, e.g. --map prompt=question reasoning=output",
    )
    parser.add_argument("--max-trace-mb", type=float, default=DEFAULT_MAX_TRACE_MB)
    parser.add_argument("--split", default=None, help="hub datasets: the split")
    parser.add_argument("--config", default=None, help="hub datasets: the config")
    parser.add_argument("--overwrite", action="store_true", help="rewrite traces already stored")
    parser.add_argument(
        "--reference",
        action="store_true",
        help="the file holds reference solutions (human, gold rationale): its teacher is shown "
        "apart and left out of ranks, frontiers, correlations and solver pools by default",
    )
    parser.add_argument(
        "--requests",
        default=None,
        metavar="FILE",
        help="--format openai: the batch input file beside a batch output file; each row's "
        "prompt is the last user message of its custom_id's request",
    )
    parser.add_argument(
        "--batch-rows",
        type=int,
        default=2000,
        help="rows per written part (default: 2000); smaller parts lose less to a kill",
    )


def ingest_from_args(args: argparse.Namespace) -> IngestReport:
    """Run :func:`ingest` with the options :func:`add_arguments` parsed; print its summary.

    Raises :class:`precompute.errors.InputUnusableError` when no row could be kept (an empty
    file, or every row quarantined) and :class:`IngestStoreError` when the disk refuses a
    write, so that the command line gives each its own exit code.
    """
    from precompute.datasets import DatasetError, parse_mapping

    try:
        mapping = parse_mapping(args.map)
    except DatasetError as err:  # a bad --map is a bad command line
        raise IngestUsageError(str(err)) from None
    file_format = getattr(args, "file_format", "legival")
    try:
        report = ingest(
            args.file,
            args.store,
            args.teacher,
            args.task,
            mapping,
            args.dataset,
            max_trace_mb=args.max_trace_mb,
            split=args.split,
            config=args.config,
            overwrite=args.overwrite,
            batch_rows=args.batch_rows,
            reference=args.reference,
            file_format=file_format,
            requests=getattr(args, "requests", None),
            # Which format auto chose is said before anything is written.
            announce=print,
        )
    except OSError as err:
        from precompute.disk import describe_os_error, disk_error

        if not disk_error(err):
            raise
        raise IngestStoreError(
            f"ingest cannot write to the store {args.store}: {describe_os_error(err)} "
            "(parts already written are kept; rerun once the disk takes writes again)"
        ) from None
    print(report.summary())
    if not report.kept:
        raise InputUnusableError(
            f"{args.file}: no row could be kept ({report.rows_read} read, "
            f"{len(report.quarantined)} quarantined)"
        )
    return report
