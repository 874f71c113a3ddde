"""A results store: the folder every precompute stage writes and the app reads.

Layout of a store ``<root>/``::

    manifest.json                     schema_version, created, config, provenance, per-table parts
    tables/<name>/part-<seq>-<pid>-<uid>.arrow   Arrow IPC file (Feather v2), zstd-compressed
    tables/<name>/corrupt/            parts moved aside by :meth:`Store.quarantine_part`
    corrupt/                          anything else it moved aside (a linked folder or log)
    logs/<stage>.log                  stage logs (:meth:`Store.log_path`)
    quarantine.jsonl                  input rows an ingest rejected (appended under the lock)
    .lock                             advisory lock taken by writers (``fcntl.flock``)

Rules that make the store safe to interrupt, to share between processes, and to receive:

* **Parts are immutable and appear atomically.** A part is written to ``.tmp-<host>-<pid>-<uid>``
  in its table folder and fsynced; under the lock the manifest lists it as ``pending`` with its
  checksum, the temp file is renamed to its final name, and the manifest is saved again without
  the mark (:meth:`Store._land`). A crash leaves at worst a temp file, which readers ignore and
  the next writer deletes once its owner is gone (same host, dead pid) or it is older than
  :data:`TEMP_MAX_AGE_S`, and a pending entry, which the next writer settles.
* **The manifest is the truth.** :meth:`Store.read` combines exactly the parts the manifest
  lists (a pending one once its file is there); a file the manifest does not list is never
  read and :meth:`Store.verify` reports it. A store is something people receive, and the
  manifest, with a BLAKE2b checksum per part, is the one file to compare through a trusted
  channel.
* **Nothing is opened through a link.** Files are opened with ``O_NOFOLLOW | O_NONBLOCK`` and
  checked to be regular files (a FIFO would block, a device or a link would reach outside), and
  the folders on the way are checked to be real folders; parts are memory-mapped from the
  checked descriptor. Logs, the lock, temp files and parts are only created inside the store.
* **Latest part wins.** Each part's name starts with a sequence number that a writer draws, under
  the lock, one above every part the table ever had. Reading concatenates the parts, keeps for each
  key the row of the highest-numbered part, and sorts by the key columns, so the result does not
  depend on how a stage was interrupted, resumed or sharded.
* **Writers lock, readers do not.** Writers serialise only the rename + manifest update (the heavy
  serialisation happens before, outside the lock), so shards of one stage in separate processes can
  write the same table. Readers never write, so a store on a read-only disk opens and reads.

The manifest's per-table ``rows`` counts rows *stored* in parts: a key rewritten by a later part is
counted twice until :meth:`Store.merge` compacts the table (then it is the exact row count).

Parts are memory-mapped when read; with zstd the column buffers are decompressed, so reading asks
for only the columns it needs. Part files carry their table name, row count and a "sorted by keys,
no duplicate keys" flag in the schema metadata; reading a single sorted part, or parts whose key
ranges do not overlap, needs no sort.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime as _dt
import enum
import json
import math
import mmap
import os
import re
import signal
import socket
import stat
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from legival_core.store import schema
from legival_core.store.safe_export import csv_arrow, csv_uncell

try:  # POSIX; Windows falls back to msvcrt below
    import fcntl
except ImportError:  # pragma: no cover - not reached on Linux/macOS
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "STORE_FORMAT",
    "TEMP_MAX_AGE_S",
    "OnCorrupt",
    "Store",
    "StoreError",
    "arrow_to_frame",
    "pandas_dtypes",
    "read_exported",
]

MANIFEST_NAME = "manifest.json"
LOCK_NAME = ".lock"
TABLES_DIR = "tables"
LOGS_DIR = "logs"
CORRUPT_DIR = "corrupt"
QUARANTINE_NAME = "quarantine.jsonl"
STORE_FORMAT = "legival-store"

#: A temp file older than this is deleted by the next writer even if its owner looks alive
#: (e.g. it came from another host sharing the disk).
TEMP_MAX_AGE_S = 6 * 3600

#: Test hook for the crash tests, never set in normal use: ``TABLE:N`` makes the process SIGKILL
#: itself right after the N-th part it writes to TABLE has landed (renamed into place and listed
#: in the manifest), so a test can stop a writer exactly between two parts without a timed kill.
KILL_AFTER_PART_ENV = "LEGIVAL_TEST_KILL_AFTER_PART"
_parts_landed: dict[str, int] = {}

#: Rows per record batch aim at about this many bytes before compression.
_BATCH_TARGET_BYTES = 64 * 1024 * 1024
_BATCH_MAX_ROWS = 1 << 17

_PART_RE = re.compile(r"^part-(?P<seq>\d{8,})-(?P<pid>\d+)-(?P<uid>[0-9a-f]{8,32})\.arrow$")
_TEMP_PREFIX = ".tmp-"
_TEMP_RE = re.compile(r"^\.tmp-(?P<host>[A-Za-z0-9.]*)-(?P<pid>\d+)-(?P<uid>[0-9a-f]+)(\.\w+)?$")
_TABLE_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_DIGEST_RE = re.compile(r"^[0-9a-f]{32}$")
_STAGE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_HOST = re.sub(r"[^A-Za-z0-9.]", "", socket.gethostname())[:40]

_META_TABLE = b"legival.table"
_META_ROWS = b"legival.rows"
_META_SORTED = b"legival.sorted"  # b"keys": sorted by the key columns, keys unique
_META_SCHEMA_VERSION = b"legival.schema_version"
_META_STAGE = b"legival.stage"

OnCorrupt = Literal["raise", "skip"]
Filters = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class ReadStats:
    """Record batches this process's reads have decoded so far.

    What a keyed read saves is a count a test can check (a timing would depend on the machine):
    ``batches`` counts batches decoded with the columns a read asked for, ``key_batches`` those
    of which only a filter's key columns were decoded to find the rows.
    """

    batches: int = 0
    key_batches: int = 0


_read_counts = {"batches": 0, "key_batches": 0}
_read_counts_lock = threading.Lock()


def read_stats() -> ReadStats:
    """A snapshot of the batches decoded so far in this process (see :class:`ReadStats`)."""
    with _read_counts_lock:
        return ReadStats(**_read_counts)


def _count_decoded(*, batches: int = 0, key_batches: int = 0) -> None:
    with _read_counts_lock:
        _read_counts["batches"] += batches
        _read_counts["key_batches"] += key_batches


class StoreError(Exception):
    """Something about a store on disk is wrong; the message names the file (and field or row)."""


class _UnreadablePart(Exception):
    """Internal: one part file cannot be read or does not fit its table."""

    def __init__(self, path: Path, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class _ManifestMoved(Exception):
    """Internal: a listed part vanished because the manifest changed meanwhile (a merge)."""


# --- small helpers -------------------------------------------------------------------------------


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _short(value: Any, limit: int = 80) -> str:
    """repr() of an untrusted value, cut to ``limit`` characters for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _temp_name(suffix: str) -> str:
    return f"{_TEMP_PREFIX}{_HOST}-{os.getpid()}-{uuid.uuid4().hex}{suffix}"


def _digest(path: Path) -> str:
    """BLAKE2b-128 of a file's bytes: Arrow IPC and zstd carry no checksums, so without this a
    flipped bit that still decodes would go unnoticed by :meth:`Store.verify`."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    with os.fdopen(_open_plain(path, os.O_RDONLY), "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _kill_if_asked(table: str) -> None:
    """The :data:`KILL_AFTER_PART_ENV` test hook: count this process's parts of ``table`` and
    SIGKILL the process when the count reaches the one asked for."""
    wanted = os.environ.get(KILL_AFTER_PART_ENV)
    if not wanted:
        return
    target, _, count = wanted.partition(":")
    if target != table:
        return
    _parts_landed[table] = _parts_landed.get(table, 0) + 1
    if count.isdigit() and _parts_landed[table] == int(count):
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))


def _timeless(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A quarantine entry without its time stamp (two ingests of one file compare equal)."""
    return {k: v for k, v in entry.items() if k != "time"}


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    # Makes a rename durable on POSIX; directories cannot be opened this way on Windows.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class NotPlainFile(StoreError):
    """A path inside a store is a symbolic link, a FIFO, a device or a folder where a plain
    file (or a plain folder) belongs; the store never opens or writes through it."""

    def __init__(self, path: Path, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


#: Flags that keep an open from following a symbolic link or waiting on a FIFO.
_SAFE_FLAGS = (
    getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)


def _kind(mode: int) -> str:
    """What a file is, in words, from its ``st_mode``."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def _open_plain(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that refuses anything but a regular file: a symbolic link as the last
    component fails (``O_NOFOLLOW``), a FIFO opens without blocking (``O_NONBLOCK``) and is then
    refused after ``fstat``. Raises :class:`NotPlainFile` naming the path and what it is."""
    try:
        fd = os.open(path, flags | _SAFE_FLAGS, mode)
    except OSError as exc:
        try:
            found = os.lstat(path)
        except OSError:
            raise exc from None
        if not stat.S_ISREG(found.st_mode):
            raise NotPlainFile(path, f"is {_kind(found.st_mode)}, not a file; not opened") from None
        raise
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        os.close(fd)
        raise NotPlainFile(path, f"is {_kind(found.st_mode)}, not a file; not opened")
    return fd


def _plain_dir(path: Path, *, create: bool = False) -> bool:
    """Whether ``path`` is a real folder (not a symbolic link to one); ``create`` makes it when
    absent. Anything else at ``path`` raises :class:`NotPlainFile`."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return False
        with contextlib.suppress(FileExistsError):
            os.mkdir(path)
        found = os.lstat(path)
    if not stat.S_ISDIR(found.st_mode):
        raise NotPlainFile(path, f"is {_kind(found.st_mode)}, not a folder; not used")
    return True


def _is_plain_file(path: Path) -> bool:
    """Whether ``path`` is a regular file itself (``lstat``: a link to one is not)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_plain_dir(path: Path) -> bool:
    """Whether ``path`` is a folder itself (``lstat``: a link to one is not)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return pid < (1 << 22)  # exists but not ours (or an odd platform): treat as alive
    return True


def _temp_is_stale(path: Path, now: float) -> bool:
    try:
        age = now - path.stat().st_mtime
    except FileNotFoundError:
        return False
    if age > TEMP_MAX_AGE_S:
        return True
    match = _TEMP_RE.match(path.name)
    return bool(match and match["host"] == _HOST and not _pid_alive(int(match["pid"])))


def _jsonable(value: Any) -> Any:
    """Turn provenance values (paths, numpy scalars, sets, dataclasses, NaN) into plain JSON."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, enum.Enum):
        return _jsonable(value.value)
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat()
    return str(value)


def _versions() -> dict[str, str]:
    from legival_core import __version__

    return {
        "python": sys.version.split()[0],
        "pyarrow": pa.__version__,
        "pandas": pd.__version__,
        "numpy": np.__version__,
        "legival": __version__,
    }


def pandas_dtypes(table: str) -> dict[str, Any]:
    """The pandas dtypes :meth:`Store.read` gives each column of ``table``.

    Integers and booleans become pandas' nullable dtypes (``Int32``, ``boolean``) so that a column
    keeps its dtype whether or not it holds nulls, and an empty table has the same dtypes as a full
    one; floats are ``float64`` (null -> NaN); strings are pandas' ``str``; lists are ``object``.
    """
    spec = schema.spec(table)
    return {f.name: _pandas_dtype(f.type) for f in spec.schema}


def _pandas_dtype(dtype: pa.DataType) -> Any:
    mapped = _types_mapper(dtype)
    if mapped is not None:
        return mapped
    return pa.schema([pa.field("x", dtype)]).empty_table().to_pandas()["x"].dtype


def _types_mapper(dtype: pa.DataType) -> Any:
    if pa.types.is_integer(dtype):
        prefix = "UInt" if pa.types.is_unsigned_integer(dtype) else "Int"
        return pd.api.types.pandas_dtype(f"{prefix}{dtype.bit_width}")
    if pa.types.is_boolean(dtype):
        return pd.BooleanDtype()
    return None


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    return table.to_pandas(types_mapper=_types_mapper)


def _key_tuple(table: pa.Table, keys: Sequence[str], row: int) -> tuple:
    return tuple(table.column(k)[row].as_py() for k in keys)


# --- part files ----------------------------------------------------------------------------------


def _sort_by_keys(name: str, keys: Sequence[str], table: pa.Table) -> pa.Table:
    """Sort rows by the key columns; a frame with a repeated key is rejected (ambiguous row)."""
    if table.num_rows < 2:
        return table
    order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in keys])
    ordered = table.take(order)
    same = _same_as_previous(ordered, keys)
    if same is not None and pc.any(same).as_py():
        position = int(pc.index(same, True).as_py())
        first, second = int(order[position].as_py()), int(order[position + 1].as_py())
        key = dict(zip(keys, _key_tuple(ordered, keys, position), strict=True))
        raise schema.SchemaError(
            name,
            f"rows {first} and {second} have the same key {_short(key)} (one row per key)",
            row=second,
            column=",".join(keys),
        )
    return ordered


def _same_as_previous(table: pa.Table, keys: Sequence[str]) -> pa.Array | None:
    """Boolean array of length n-1: row i+1 has the same key values as row i."""
    n = table.num_rows
    if n < 2:
        return None
    same: Any = None
    for key in keys:
        column = table.column(key)
        equal = pc.equal(column.slice(1), column.slice(0, n - 1))
        same = equal if same is None else pc.and_(same, equal)
    if isinstance(same, pa.ChunkedArray):
        same = same.combine_chunks()
    return same


def _unique_rows(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """Distinct rows of ``table`` over ``columns`` (sort + neighbour compare: faster than a
    multi-column hash group-by in Arrow for millions of rows)."""
    projected = table.select(list(columns))
    order = pc.sort_indices(projected, sort_keys=[(c, "ascending") for c in columns])
    ordered = projected.take(order)
    same = _same_as_previous(ordered, columns)
    if same is None:
        return ordered
    return ordered.filter(pa.concat_arrays([pa.array([True]), pc.invert(same)]))


def _batch_rows(table: pa.Table) -> int:
    if table.num_rows == 0:
        return _BATCH_MAX_ROWS
    per_row = max(1, table.nbytes // table.num_rows)
    return int(min(_BATCH_MAX_ROWS, max(1024, _BATCH_TARGET_BYTES // per_row)))


def _write_ipc(path: Path, table: pa.Table) -> None:
    """Write an Arrow IPC file (zstd) and fsync it."""
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with (
        pa.OSFile(str(path), "wb") as sink,
        pa.ipc.new_file(sink, table.schema, options=options) as w,
    ):
        w.write_table(table, max_chunksize=_batch_rows(table))
    _fsync_file(path)


def _part_metadata(name: str, table: pa.Table, stage: str | None) -> dict[bytes, bytes]:
    meta = {
        _META_TABLE: name.encode(),
        _META_ROWS: str(table.num_rows).encode(),
        _META_SORTED: b"keys",
        _META_SCHEMA_VERSION: str(schema.SCHEMA_VERSION).encode(),
    }
    if stage:
        meta[_META_STAGE] = stage.encode()
    return meta


def _open_reader(
    path: Path, fields: Sequence[str] | None
) -> tuple[pa.ipc.RecordBatchFileReader, pa.Schema]:
    """Open a part memory-mapped; ``fields`` limits which columns get decoded.

    The file is opened by :func:`_open_plain` (no symbolic link, no FIFO) and mapped from that
    descriptor, so what is checked is what is read."""
    (reader,), file_schema = _open_readers(path, [fields])
    return reader, file_schema


def _open_readers(
    path: Path, field_sets: Sequence[Sequence[str] | None]
) -> tuple[list[pa.ipc.RecordBatchFileReader], pa.Schema]:
    """:func:`_open_reader` with one reader per set of fields, all on one mapping of the file
    (a keyed read decodes the key columns of a batch with one, its other columns with another)."""
    try:
        fd = _open_plain(path, os.O_RDONLY)
    except NotPlainFile as exc:
        raise _UnreadablePart(exc.path, exc.reason) from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _UnreadablePart(path, f"cannot be opened ({exc.strerror or exc})") from None
    try:
        if os.fstat(fd).st_size == 0:
            raise _UnreadablePart(path, "not a readable Arrow IPC file (empty)")
        mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise _UnreadablePart(path, f"cannot be mapped ({exc})") from None
    finally:
        os.close(fd)
    try:
        source = pa.BufferReader(pa.py_buffer(mapped))
        first = pa.ipc.open_file(source)
        file_schema = first.schema
        readers = []
        for fields in field_sets:
            if fields is None:
                readers.append(first)
                continue
            wanted = [i for i, f in enumerate(file_schema) if f.name in set(fields)]
            options = pa.ipc.IpcReadOptions(included_fields=wanted)
            readers.append(pa.ipc.open_file(source, options=options))
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _UnreadablePart(path, f"not a readable Arrow IPC file ({exc})") from None
    return readers, file_schema


def _check_part_table(path: Path, spec: schema.TableSpec, file_schema: pa.Schema) -> bool:
    """Raise if the part says it belongs to another table; return whether it is flagged as
    sorted by the keys with unique keys."""
    meta = file_schema.metadata or {}
    declared_table = meta.get(_META_TABLE)
    if declared_table is not None and declared_table != spec.name.encode():
        raise _UnreadablePart(
            path, f"part belongs to table {_short(declared_table.decode(errors='replace'))}"
        )
    return meta.get(_META_SORTED) == b"keys"


def _read_part(
    path: Path, spec: schema.TableSpec, fields: Sequence[str], *, full_check: bool = False
) -> tuple[pa.Table, bool]:
    """Read the columns ``fields`` of one part, conformed to the table's declared types.

    Returns the table and whether the part is sorted by keys with unique keys.
    Raises :class:`_UnreadablePart` (truncated, corrupt, or incompatible) or FileNotFoundError.
    """
    reader, file_schema = _open_reader(path, fields)
    _count_decoded(batches=reader.num_record_batches)
    try:
        table = reader.read_all()
        if full_check:
            table.validate(full=True)
        else:
            table.validate()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _UnreadablePart(path, f"corrupt Arrow data ({exc})") from None
    is_sorted = _check_part_table(path, spec, file_schema)
    return _conform(path, spec, table, fields), is_sorted


@dataclasses.dataclass(frozen=True)
class _KeyFilter:
    """The key-column terms of a read's filters: ``expression`` selects the rows, ``columns``
    are the key columns it reads, ``first`` the values wanted in the first key column (None:
    no such term), by which the batches of a part sorted by its keys are searched."""

    expression: pc.Expression
    columns: tuple[str, ...]
    first: pa.Array | None


def _searchable(dtype: pa.DataType) -> bool:
    """Whether Python orders this type's values as Arrow sorts them (a string by its UTF-8
    bytes, which is its code points' order), so batches can be searched by Python compares."""
    return bool(
        pa.types.is_integer(dtype) or pa.types.is_string(dtype) or pa.types.is_large_string(dtype)
    )


def _read_part_keyed(
    path: Path, spec: schema.TableSpec, fields: Sequence[str], key_filter: _KeyFilter
) -> tuple[pa.Table, bool]:
    """The rows of one part that ``key_filter`` selects, decoding only the batches that hold them.

    The same rows in the same order as :func:`_read_part` then filtering: a batch's key columns
    are decoded first, and its other columns only if a row matches (a column is compressed per
    batch, so a batch is the smallest unit to decode). In a part sorted by its keys, the batches
    that may hold the first key column's wanted values are found by a binary search on the
    batches' key ranges; an unsorted part has each batch's key columns looked at.
    """
    (reader, keys_reader), file_schema = _open_readers(path, [fields, key_filter.columns])
    is_sorted = _check_part_table(path, spec, file_schema)
    # A key column missing or a type that does not convert is reported as a full read would,
    # whether or not a batch is decoded.
    _conform(path, spec, file_schema.empty_table(), fields)
    count = reader.num_record_batches
    keys: dict[int, pa.Table] = {}

    def decode(source: pa.ipc.RecordBatchFileReader, i: int, columns: Sequence[str]) -> pa.Table:
        try:
            batch = source.get_batch(i)
            batch.validate()
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _UnreadablePart(path, f"corrupt Arrow data ({exc})") from None
        return _conform(path, spec, pa.Table.from_batches([batch]), columns)

    def keys_of(i: int) -> pa.Table:
        if i not in keys:
            keys[i] = decode(keys_reader, i, key_filter.columns)
            _count_decoded(key_batches=1)
        return keys[i]

    if count == 1:  # nothing to skip: looking at the keys first would only decode them twice
        _count_decoded(batches=1)
        return decode(reader, 0, fields).filter(key_filter.expression), is_sorted
    candidates = range(count)
    first = key_filter.first
    key = spec.keys[0]
    if is_sorted and first is not None and _searchable(first.type):
        if first.null_count == len(first):  # no value wanted (an empty list): no row matches
            candidates = range(0)
        else:
            wanted = pc.min_max(first)
            low, high = wanted["min"].as_py(), wanted["max"].as_py()

            def bounds(i: int) -> tuple[Any, Any]:
                found = pc.min_max(keys_of(i).column(key))
                smallest, largest = found["min"].as_py(), found["max"].as_py()
                if smallest is None or largest is None:
                    raise _NoKeyRange()
                return smallest, largest

            # The batches are in key order: the first whose largest key reaches ``low`` (a
            # binary search), up to the last whose smallest key is at most ``high`` (a walk on:
            # the batches it passes are candidates, whose keys are looked at anyway). A batch
            # without keys (empty) gives no order to search by: every batch is then looked at.
            try:
                start = _first_index(count, lambda i: bounds(i)[1] >= low)
                stop = start
                while stop < count and bounds(stop)[0] <= high:
                    stop += 1
                candidates = range(start, stop)
            except _NoKeyRange:
                candidates = range(count)
    pieces = []
    for i in candidates:
        if not keys_of(i).filter(key_filter.expression).num_rows:
            continue
        _count_decoded(batches=1)
        pieces.append(decode(reader, i, fields).filter(key_filter.expression))
    if not pieces:
        return pa.schema([spec.schema.field(n) for n in fields]).empty_table(), is_sorted
    return pa.concat_tables(pieces), is_sorted


class _NoKeyRange(Exception):
    """A batch of a sorted part has no key values to search by."""


def _first_index(count: int, reached: Callable[[int], bool]) -> int:
    """The first i in 0..count-1 where ``reached(i)`` (monotone: false, then true), else count."""
    low, high = 0, count
    while low < high:
        middle = (low + high) // 2
        if reached(middle):
            high = middle
        else:
            low = middle + 1
    return low


def _conform(
    path: Path, spec: schema.TableSpec, table: pa.Table, fields: Sequence[str]
) -> pa.Table:
    """Bring a part to the current declared types: add columns it predates (as nulls), cast
    widened types; a key column that is absent or a type that does not cast is an error."""
    arrays = []
    for name in fields:
        target = spec.schema.field(name)
        index = table.schema.get_field_index(name)
        if index < 0:
            if name in spec.keys:
                raise _UnreadablePart(path, f"key field '{name}' is missing")
            arrays.append(pa.nulls(table.num_rows, target.type))
            continue
        column = table.column(index)
        if not column.type.equals(target.type):
            try:
                column = column.cast(target.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                raise _UnreadablePart(
                    path,
                    f"field '{name}' holds {column.type}, which does not convert to {target.type}",
                ) from None
        arrays.append(column)
    out_schema = pa.schema([spec.schema.field(n) for n in fields])
    return pa.Table.from_arrays(arrays, schema=out_schema)


def _part_rows(path: Path) -> int | None:
    """Row count of a part from its footer metadata (cheap), else by reading it.

    None if the part is unreadable."""
    try:
        reader, file_schema = _open_reader(path, [])
        meta = file_schema.metadata or {}
        if _META_ROWS in meta:
            return int(meta[_META_ROWS])
        return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    except (_UnreadablePart, FileNotFoundError, ValueError, pa.ArrowException, OSError):
        return None


def _seq_of(path: Path) -> int:
    match = _PART_RE.match(path.name)
    return int(match["seq"]) if match else -1


# --- filters -------------------------------------------------------------------------------------


def _filter_expressions(
    spec: schema.TableSpec, filters: Filters | None
) -> tuple[_KeyFilter | None, pc.Expression | None]:
    """(the terms on key columns, expression on other columns) for ``filters``.

    Key-column terms can be applied to each part before deduplication, and decide which of a
    part's batches are decoded (:func:`_read_part_keyed`); terms on other columns must wait
    until after it (a superseded row must not match in place of the row that replaced it).
    """
    key_terms: list[pc.Expression] = []
    key_columns: list[str] = []
    first: pa.Array | None = None
    other_terms: list[pc.Expression] = []
    for column, wanted in (filters or {}).items():
        if column not in spec.columns:
            raise schema.SchemaError(spec.name, "unknown column in filters", column=str(column))
        dtype = spec.schema.field(column).type
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            raise schema.SchemaError(spec.name, "cannot filter on a list column", column=column)
        field = pc.field(column)
        try:
            values: pa.Array | None = None
            if wanted is None:
                term = field.is_null()
            elif isinstance(
                wanted, list | tuple | set | frozenset | np.ndarray | pd.Series | pd.Index
            ):
                values = pa.array(list(wanted), type=dtype)
                term = field.isin(values)
            else:
                scalar = pa.scalar(wanted, type=dtype)
                values = pa.array([scalar.as_py()], type=dtype)
                term = field == scalar
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            raise schema.SchemaError(
                spec.name, f"filter value {_short(wanted)} does not fit {dtype}", column=column
            ) from None
        if column in spec.keys:
            key_terms.append(term)
            key_columns.append(column)
            if column == spec.keys[0]:
                first = values
        else:
            other_terms.append(term)

    def combine(terms: list[pc.Expression]) -> pc.Expression | None:
        if not terms:
            return None
        expr = terms[0]
        for term in terms[1:]:
            expr = expr & term
        return expr

    key_expression = combine(key_terms)
    key_filter = (
        None
        if key_expression is None
        else _KeyFilter(key_expression, tuple(dict.fromkeys(key_columns)), first)
    )
    return key_filter, combine(other_terms)


def _check_columns(spec: schema.TableSpec, columns: Sequence[str] | None) -> list[str]:
    if columns is None:
        return spec.columns
    if isinstance(columns, str):
        columns = [columns]
    for column in columns:
        if column not in spec.columns:
            raise schema.SchemaError(spec.name, "unknown column", column=str(column))
    return list(dict.fromkeys(columns))


def _dedupe_and_sort(pieces: list[tuple[pa.Table, bool]], keys: Sequence[str]) -> pa.Table:
    """Concatenate parts (in sequence order), keep the last row of each key, sort by keys."""
    tables = [t for t, _ in pieces]
    if len(pieces) == 1 and pieces[0][1]:
        return tables[0]
    if all(is_sorted for _, is_sorted in pieces):
        # Sorted parts whose key ranges do not overlap only need to be put in order.
        ranges = sorted(
            (_key_tuple(t, keys, 0), _key_tuple(t, keys, t.num_rows - 1), i)
            for i, t in enumerate(tables)
        )
        if all(ranges[i][1] < ranges[i + 1][0] for i in range(len(ranges) - 1)):
            return pa.concat_tables([tables[i] for _, _, i in ranges])
    combined = pa.concat_tables(tables)
    order_column = "__legival_order__"
    numbered = combined.append_column(order_column, pa.array(np.arange(combined.num_rows)))
    order = pc.sort_indices(
        numbered, sort_keys=[*((k, "ascending") for k in keys), (order_column, "descending")]
    )
    ordered = combined.take(order)
    same = _same_as_previous(ordered, keys)
    if same is None or not pc.any(same).as_py():
        return ordered
    keep = pa.concat_arrays([pa.array([True]), pc.invert(same)])
    return ordered.filter(keep)


# --- manifest ------------------------------------------------------------------------------------


def _new_manifest(config: Mapping[str, Any] | None) -> dict[str, Any]:
    now = _now()
    return {
        "format": STORE_FORMAT,
        "schema_version": schema.SCHEMA_VERSION,
        "created": now,
        "updated": now,
        "config": _jsonable(dict(config or {})),
        "provenance": [],
        "tables": {},
    }


def _check_manifest(data: Any, path: Path) -> dict[str, Any]:
    """Validate a manifest read from disk; every string in it is untrusted."""

    def fail(field: str, problem: str) -> StoreError:
        return StoreError(f"{path}: field '{field}' {problem}")

    if not isinstance(data, dict):
        raise StoreError(f"{path}: the manifest must be a JSON object, got {type(data).__name__}")
    if "format" in data and data["format"] != STORE_FORMAT:
        raise fail("format", f"is {_short(data['format'])}, expected {STORE_FORMAT!r}")
    expected: dict[str, type | tuple[type, ...]] = {
        "schema_version": int,
        "created": str,
        "config": dict,
        "provenance": list,
        "tables": dict,
    }
    for field, kind in expected.items():
        if field not in data:
            raise fail(field, "is missing")
        value = data[field]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise fail(field, f"must be a JSON {_JSON_KIND[kind]}, got {_short(value, 40)}")
    version = data["schema_version"]
    if version > schema.SCHEMA_VERSION:
        raise fail(
            "schema_version",
            f"is {version}, newer than this legival understands ({schema.SCHEMA_VERSION}); "
            "upgrade legival to read this store",
        )
    if version < 1:
        raise fail("schema_version", f"is {version}; versions start at 1")
    if not isinstance(data.get("updated", ""), str):
        raise fail("updated", f"must be a JSON string, got {_short(data['updated'], 40)}")
    for i, record in enumerate(data["provenance"]):
        if not isinstance(record, dict):
            raise fail(f"provenance[{i}]", "must be a JSON object")
        for key in ("stage", "time"):
            if record.get(key) is not None and not isinstance(record[key], str):
                raise fail(f"provenance[{i}].{key}", "must be a JSON string")
    for name, entry in data["tables"].items():
        if not _TABLE_NAME_RE.match(name):
            raise fail(f"tables.{_short(name, 40)}", "is not a valid table name")
        _check_table_entry(entry, f"tables.{name}", fail)
    return data


#: The largest row or byte count, and part sequence number, a manifest may record: what the
#: store's int64 bookkeeping holds (a sequence number is far below it in any real store).
_LARGEST_COUNT = 2**63 - 1
_LARGEST_SEQ = 10**15


def _check_table_entry(entry: Any, where: str, fail: Callable[[str, str], StoreError]) -> None:
    """Every field of one table's manifest entry, by type and range: what a writer later
    computes with (``rows``, ``last_seq``, ``stages``, the parts' counts, flags and checksums)
    must never fail it with a raw ``ValueError`` or ``OverflowError`` after ``verify`` said ok."""

    def count(value: Any, field: str, largest: int = _LARGEST_COUNT) -> None:
        if value is None:
            return
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= largest:
            raise fail(
                field, f"must be a whole number from 0 to {largest}, got {_short(value, 40)}"
            )

    if not isinstance(entry, dict) or not isinstance(entry.get("parts"), list):
        raise fail(f"{where}.parts", "must be a JSON list")
    count(entry.get("rows"), f"{where}.rows")
    count(entry.get("last_seq"), f"{where}.last_seq", _LARGEST_SEQ)
    stages = entry.get("stages", [])
    if not isinstance(stages, list) or not all(isinstance(s, str) for s in stages):
        raise fail(f"{where}.stages", "must be a list of stage names")
    for i, part in enumerate(entry["parts"]):
        at = f"{where}.parts[{i}]"
        if not isinstance(part, dict):
            raise fail(at, "must be a JSON object")
        file = part.get("file")
        if not isinstance(file, str) or not _PART_RE.match(file):
            raise fail(f"{at}.file", f"is not a part file name: {_short(file, 60)}")
        if int(_PART_RE.match(file)["seq"]) > _LARGEST_SEQ:
            raise fail(f"{at}.file", f"has a sequence number above {_LARGEST_SEQ}")
        for field in ("rows", "bytes", "merged_from"):
            count(part.get(field), f"{at}.{field}")
        for flag in ("pending", "adopted"):
            if not isinstance(part.get(flag, False), bool):
                raise fail(f"{at}.{flag}", "must be true or false")
        digest = part.get("blake2b")
        if digest is not None and not (isinstance(digest, str) and _DIGEST_RE.match(digest)):
            raise fail(f"{at}.blake2b", f"is not a BLAKE2b-128 hex digest: {_short(digest, 40)}")
        for text in ("stage", "time"):
            if part.get(text) is not None and not isinstance(part[text], str):
                raise fail(f"{at}.{text}", "must be a JSON string")
    retired = entry.get("retired", [])
    if not isinstance(retired, list) or not all(
        isinstance(f, str) and _PART_RE.match(f) for f in retired
    ):
        raise fail(f"{where}.retired", "must be a list of part file names")


#: How deeply a manifest may nest lists and objects. A manifest this legival writes nests about
#: six levels (config sections inside a provenance record); Python's JSON parser gives up with a
#: RecursionError somewhere near a thousand, which must never be what a received store meets.
MANIFEST_MAX_DEPTH = 64

# A JSON string, written so that the regular expression runs in linear time.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_OPENERS = np.zeros(256, dtype=np.int64)
_OPENERS[[ord("["), ord("{")]] = 1
_OPENERS[[ord("]"), ord("}")]] = -1


def json_depth(text: str) -> int:
    """Deepest nesting of lists and objects in JSON ``text``, counted without parsing it.

    Formula: strings are removed, then depth = max over positions of (``[`` and ``{`` seen) −
    (``]`` and ``}`` seen); valid or not, the count costs one pass and no recursion.

    >>> json_depth('{"a": [1, {"b": "[[["}]}')
    3
    >>> json_depth("[]"), json_depth("7")
    (1, 0)
    """
    bare = _JSON_STRING.sub("", text).encode("utf-8", "replace")
    steps = _OPENERS[np.frombuffer(bare, dtype=np.uint8)]
    return int(np.cumsum(steps).max(initial=0))


_JSON_KIND = {int: "integer", str: "string", dict: "object", list: "list"}


def _table_entry(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    entry = manifest["tables"].setdefault(name, {"rows": 0, "parts": []})
    entry.setdefault("parts", [])
    entry.setdefault("rows", 0)
    return entry


def _recount(entry: dict[str, Any]) -> None:
    entry["parts"].sort(key=lambda p: (int(_PART_RE.match(p["file"])["seq"]), p["file"]))
    entry["rows"] = sum(int(p.get("rows") or 0) for p in entry["parts"])
    if entry["parts"]:
        entry["last_seq"] = max(
            int(entry.get("last_seq", 0)), int(_PART_RE.match(entry["parts"][-1]["file"])["seq"])
        )


# --- the store -----------------------------------------------------------------------------------


class Store:
    """A results store on disk. Make one with :meth:`create` or :meth:`open`.

    >>> import tempfile, pandas as pd
    >>> folder = tempfile.TemporaryDirectory()
    >>> store = Store.create(folder.name + "/demo", config={"experiment": "doctest"})
    >>> _ = store.write("rewards", pd.DataFrame(
    ...     {"trace_id": ["t-b", "t-a"], "reward_model": ["rm", "rm"], "score": [0.5, 0.25]}))
    >>> _ = store.write("rewards", pd.DataFrame(
    ...     {"trace_id": ["t-b"], "reward_model": ["rm"], "score": [0.75]}))   # t-b again: wins
    >>> store.read("rewards")
      trace_id reward_model  score
    0      t-a           rm   0.25
    1      t-b           rm   0.75
    >>> sorted(store.done_keys("rewards"))
    [('t-a', 'rm'), ('t-b', 'rm')]
    >>> folder.cleanup()
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def create(
        cls, path: str | os.PathLike[str], *, config: Mapping[str, Any] | None = None
    ) -> Store:
        """Create a store at ``path``, or open it if one is there already.

        When the store exists with a different non-empty ``config``, the original config is kept
        and the new one is appended to the provenance (as a ``create`` record), so nothing is lost.
        A folder that is neither empty nor a store is refused.
        """
        root = Path(path)
        if (root / MANIFEST_NAME).exists():
            store = cls.open(root)
            if config:
                store._adopt_config(dict(config))
            return store
        if root.exists() and not root.is_dir():
            raise StoreError(f"{root}: exists and is not a folder")
        if root.exists() and any(root.iterdir()) and not (root / TABLES_DIR).is_dir():
            raise StoreError(
                f"{root}: folder is not empty and is not a store; not creating one there"
            )
        root.mkdir(parents=True, exist_ok=True)
        _plain_dir(root / TABLES_DIR, create=True)
        _plain_dir(root / LOGS_DIR, create=True)
        store = cls(root)
        with store._locked():
            if not (root / MANIFEST_NAME).exists():
                manifest = _new_manifest(config)
                store._adopt_parts(manifest)  # a tables/ folder without manifest: recover it
                store._save_manifest(manifest)
        if config:
            store._adopt_config(dict(config))
        return store

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Store:
        """Open an existing store; :class:`StoreError` naming the file if it is not one."""
        root = Path(path)
        if not root.is_dir():
            raise StoreError(f"{root}: no such store (folder not found)")
        manifest_path = root / MANIFEST_NAME
        if not manifest_path.is_file():
            raise StoreError(f"{manifest_path}: not found; {root} is not a results store")
        store = cls(root)
        store._load_manifest()
        return store

    def _adopt_config(self, config: dict[str, Any]) -> None:
        config = _jsonable(config)
        with self._locked():
            manifest = self._load_manifest()
            if manifest["config"] == config:
                return
            if not manifest["config"]:
                manifest["config"] = config
            else:
                manifest["provenance"].append(
                    {
                        "time": _now(),
                        "stage": "create",
                        "config": config,
                        "note": "store existed with another config; the original is kept",
                    }
                )
            self._save_manifest(manifest)

    # -- manifest -----------------------------------------------------------------------------

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_NAME

    @property
    def manifest(self) -> dict[str, Any]:
        """A copy of the manifest as it is on disk now (changing it changes nothing)."""
        return copy.deepcopy(self._load_manifest())

    def _load_manifest(self) -> dict[str, Any]:
        path = self.manifest_path
        try:
            with os.fdopen(_open_plain(path, os.O_RDONLY), "rb") as handle:
                text = handle.read().decode("utf-8")
        except FileNotFoundError:
            raise StoreError(f"{path}: not found; {self.path} is not a results store") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"{path}: cannot be read ({exc})") from None
        depth = json_depth(text)
        if depth > MANIFEST_MAX_DEPTH:
            raise StoreError(
                f"{path}: lists and objects nested {depth} levels deep (at most "
                f"{MANIFEST_MAX_DEPTH}); not a manifest legival wrote"
            )
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StoreError(
                f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
            ) from None
        return _check_manifest(data, path)

    def _save_manifest(self, manifest: dict[str, Any]) -> None:
        manifest["updated"] = _now()
        text = json.dumps(_jsonable(manifest), indent=1, allow_nan=False) + "\n"
        temp = self.path / _temp_name(".json")
        try:
            with open(temp, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(temp, self.manifest_path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.path)

    def _update_manifest(self, change: Callable[[dict[str, Any]], None]) -> None:
        """Load, reconcile with the disk, apply ``change`` and save; the caller holds the lock."""
        manifest = self._load_manifest()
        self._reconcile(manifest)
        change(manifest)
        self._save_manifest(manifest)

    def _reconcile(self, manifest: dict[str, Any]) -> None:
        """Finish what a killed writer left (the caller holds the lock, so no writer is between
        its manifest update and its rename now): a ``pending`` part whose file landed becomes
        an ordinary part, one whose file never landed is dropped (its rows were not written),
        and the files a merge retired are deleted. Parts the manifest does not list are never
        adopted here: the manifest is what a reader trusts, and an unlisted file may come from
        anyone; :meth:`verify` reports it. A table whose folder (or ``tables/``) is not a real
        folder is left as it is: a name the manifest retires is never deleted through a link
        into another store."""
        tables_root = self.path / TABLES_DIR
        for name, entry in manifest["tables"].items():
            if name not in schema.TABLES:
                continue
            folder = tables_root / name
            if os.path.lexists(folder) and not (
                _is_plain_dir(tables_root) and _is_plain_dir(folder)
            ):
                continue  # a link, file or FIFO in its place: verify names it
            kept = []
            for part in entry["parts"]:
                if part.get("pending"):
                    if not _is_plain_file(folder / part["file"]):
                        continue  # never renamed into place; its temp file is cleaned as stale
                    del part["pending"]
                kept.append(part)
            entry["parts"] = kept
            listed = {p["file"] for p in kept}
            for file in entry.pop("retired", []):
                if file not in listed and _is_plain_file(folder / file):
                    (folder / file).unlink(missing_ok=True)
            _recount(entry)

    def _adopt_parts(self, manifest: dict[str, Any]) -> None:
        """List the parts on disk in a manifest made for a ``tables/`` folder that has none
        (:meth:`create` over a store whose manifest was deleted): an explicit recovery."""
        for name in self._table_dirs():
            entry = _table_entry(manifest, name)
            listed = {p["file"] for p in entry["parts"]}
            for path in self._disk_parts(name):
                if path.name in listed:
                    continue
                rows = _part_rows(path)
                if rows is None:
                    continue  # unreadable: read()/verify() report it, quarantine_part() moves it
                entry["parts"].append(
                    {
                        "file": path.name,
                        "rows": rows,
                        "bytes": path.stat().st_size,
                        "blake2b": _digest(path),
                        "stage": None,
                        "time": _now(),
                        "adopted": True,
                    }
                )
            _recount(entry)

    # -- locking and temp files ---------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Exclusive advisory lock on ``<store>/.lock``; re-entrant within one thread."""
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth -= 1
            return
        fd = _open_plain(self.path / LOCK_NAME, os.O_RDWR | os.O_CREAT)  # never through a link
        try:
            _lock_fd(fd)
            self._local.depth = 1
            try:
                yield
            finally:
                self._local.depth = 0
                _unlock_fd(fd)
        finally:
            os.close(fd)

    def _cleanup_temp_files(self) -> list[Path]:
        """Delete temp files left by writers that crashed (caller holds the lock)."""
        now = time.time()
        removed = []
        folders = [self.path, *(self.path / TABLES_DIR / n for n in self._table_dirs())]
        for folder in folders:
            for path in folder.glob(_TEMP_PREFIX + "*"):
                if _is_plain_file(path) and _temp_is_stale(path, now):
                    path.unlink(missing_ok=True)
                    removed.append(path)
        return removed

    # -- listing ------------------------------------------------------------------------------

    def _table_dir(self, name: str) -> Path:
        schema.spec(name)  # unknown names fail here, before any path is built from them
        return self.path / TABLES_DIR / name

    def _table_dirs(self) -> list[str]:
        """Names of known tables that have a real folder (not a link) under tables/."""
        root = self.path / TABLES_DIR
        if not _is_plain_dir(root):
            return []
        return sorted(
            p.name for p in root.iterdir() if p.name in schema.TABLES and _is_plain_dir(p)
        )

    def _disk_parts(self, name: str) -> list[Path]:
        """Plain files named like parts in a table's real folder (listed or not)."""
        folder = self.path / TABLES_DIR / name
        if not (_is_plain_dir(self.path / TABLES_DIR) and _is_plain_dir(folder)):
            return []
        parts = [p for p in folder.iterdir() if _PART_RE.match(p.name) and _is_plain_file(p)]
        return sorted(parts, key=lambda p: (_seq_of(p), p.name))

    def _listed(
        self, name: str, manifest: Mapping[str, Any] | None = None
    ) -> list[tuple[Path, dict[str, Any]]]:
        """The parts of a table that the manifest lists, with their entries, in sequence order
        (the order in which 'latest wins' applies). A ``pending`` part whose file has not landed
        is left out: its writer is between its manifest update and its rename, or was killed
        there."""
        folder = self._table_dir(name)
        manifest = self._load_manifest() if manifest is None else manifest
        entry = manifest["tables"].get(name) or {}
        listed = []
        for part in entry.get("parts", []):
            path = folder / part["file"]
            if part.get("pending") and not os.path.lexists(path):
                continue
            listed.append((path, part))
        return sorted(listed, key=lambda item: (_seq_of(item[0]), item[0].name))

    def _part_paths(self, name: str) -> list[Path]:
        """Part files of a table that :meth:`read` combines, in sequence order."""
        return [path for path, _ in self._listed(name)]

    def _next_seq(self, name: str, manifest: dict[str, Any]) -> int:
        folder = self._table_dir(name)
        seen = [_seq_of(p) for p in self._disk_parts(name)]
        corrupt = folder / CORRUPT_DIR
        if _is_plain_dir(corrupt):
            seen += [_seq_of(p) for p in corrupt.iterdir()]
        entry = manifest["tables"].get(name, {})
        seen.append(int(entry.get("last_seq", 0)))
        seen += [_seq_of(Path(p["file"])) for p in entry.get("parts", [])]
        return max(seen) + 1

    def tables(self) -> list[str]:
        """Known tables that the manifest lists at least one part of."""
        manifest = self._load_manifest()
        names = sorted(n for n in manifest["tables"] if n in schema.TABLES)
        return [n for n in names if self._listed(n, manifest)]

    def has(self, table: str) -> bool:
        """Whether the manifest lists at least one part of ``table``."""
        return bool(self._part_paths(table))

    def parts(self, table: str) -> list[Path]:
        """The part files of ``table`` in sequence order (what :meth:`read` combines)."""
        return self._part_paths(table)

    # -- writing ------------------------------------------------------------------------------

    def write(
        self,
        table: str,
        data: pd.DataFrame | pa.Table | Sequence[Mapping[str, Any]],
        *,
        stage: str | None = None,
    ) -> Path:
        """Validate ``data`` against the table's schema and add it as one new part.

        Rows whose keys already exist replace the old rows (for :meth:`read`); a ``data`` with the
        same key twice is rejected. Raises :class:`~legival_core.store.schema.SchemaError` naming
        table, row and field for data that does not fit. Returns the new part's path.
        """
        spec = schema.spec(table)
        if stage is not None:
            _check_stage_name(stage)
        arrow = schema.validate_frame(table, data)
        arrow = _sort_by_keys(table, spec.keys, arrow)
        arrow = arrow.replace_schema_metadata(_part_metadata(table, arrow, stage))
        folder = self._writable_table_dir(table)
        temp = folder / _temp_name(".arrow")
        try:
            _write_ipc(temp, arrow)
            digest = _digest(temp)
            with self._locked():
                self._cleanup_temp_files()
                manifest = self._load_manifest()
                self._reconcile(manifest)
                seq = self._next_seq(table, manifest)
                final = folder / f"part-{seq:08d}-{os.getpid()}-{uuid.uuid4().hex[:12]}.arrow"
                entry = _table_entry(manifest, table)
                record = {
                    "file": final.name,
                    "rows": arrow.num_rows,
                    "bytes": temp.stat().st_size,
                    "blake2b": digest,
                    "stage": stage,
                    "time": _now(),
                }
                entry["parts"].append(record)
                if stage and stage not in entry.setdefault("stages", []):
                    entry["stages"].append(stage)
                self._land(manifest, entry, record, temp, final)
        finally:
            temp.unlink(missing_ok=True)
        _kill_if_asked(table)
        return final

    def _writable_table_dir(self, name: str) -> Path:
        """``tables/<name>/``, made if absent; a link or a file there is refused (a write must
        not land outside the store)."""
        folder = self._table_dir(name)
        _plain_dir(folder.parent, create=True)
        _plain_dir(folder, create=True)
        return folder

    def _land(
        self,
        manifest: dict[str, Any],
        entry: dict[str, Any],
        record: dict[str, Any],
        temp: Path,
        final: Path,
    ) -> None:
        """Put a new part in place, the manifest first (the caller holds the lock).

        The manifest lists the part as ``pending`` with its checksum before the temp file is
        renamed to its final name, then without the mark. Readers follow the manifest, so a
        kill before the rename leaves a pending entry with no file (not read; the next writer
        drops it) and a kill after it a pending entry with its file (read; the next writer
        clears the mark): no moment shows a part the manifest does not vouch for."""
        record["pending"] = True
        _recount(entry)
        self._save_manifest(manifest)
        os.replace(temp, final)
        _fsync_dir(final.parent)
        del record["pending"]
        _recount(entry)
        self._save_manifest(manifest)

    def record_stage(self, stage: str, **provenance: Any) -> None:
        """Append a provenance record: time, stage, the keyword arguments given (config, model
        ids and revisions, sampling, seeds, ...) and the versions of python/pyarrow/pandas/numpy/
        legival (merged with a ``versions`` mapping if one is passed)."""
        _check_stage_name(stage)
        given_versions = provenance.pop("versions", None) or {}
        record = {"time": _now(), "stage": stage, **_jsonable(provenance)}
        record["versions"] = {**_versions(), **_jsonable(dict(given_versions))}
        with self._locked():
            self._update_manifest(lambda m: m["provenance"].append(record))

    def log_path(self, stage: str) -> Path:
        """``<store>/logs/<stage>.log`` (the folder is created).

        A ``logs`` folder or log file that is a symbolic link, a FIFO or a device raises
        :class:`NotPlainFile`: a stage's log is written inside the store or not at all."""
        _check_stage_name(stage)
        folder = self.path / LOGS_DIR
        _plain_dir(folder, create=True)
        path = folder / f"{stage}.log"
        if os.path.lexists(path) and not _is_plain_file(path):
            raise NotPlainFile(path, f"is {_kind(os.lstat(path).st_mode)}, not a file; not used")
        return path

    @property
    def quarantine_path(self) -> Path:
        """``<store>/quarantine.jsonl``: where an ingest puts input rows it rejected."""
        return self.path / QUARANTINE_NAME

    def add_quarantine(
        self,
        entries: Sequence[Mapping[str, Any]],
        *,
        replacing: Mapping[str, Any] | None = None,
        resolved: Collection[str] = (),
    ) -> Path:
        """Add ``entries`` (JSON objects) to :attr:`quarantine_path`, under the store lock.

        ``replacing`` names the earlier entries these supersede: those whose fields equal every
        item of it (an ingest passes its file and teacher, so a re-ingest does not repeat
        them). ``resolved`` are trace ids now in the store: an earlier entry whose
        ``trace_id`` is one of them was a line that has since been ingested and kept (fixed,
        perhaps in another file), and goes too. The file is only appended to, which keeps a
        large quarantine file cheap and leaves every earlier byte in place, unless earlier
        entries must go: when the superseded ones equal the new ones (time stamps aside) and
        none is resolved nothing is written; otherwise the file is copied line by line without
        them and replaced atomically. Concurrent ingests lose no entry: each holds the lock
        from reading the file to its last write.
        """
        lines = [_quarantine_line(e) for e in entries]
        target = self.quarantine_path
        resolved = set(resolved)
        with self._locked():
            superseded = self._superseded_quarantine(replacing) if replacing else []
            fixed = self._resolved_quarantine(resolved) if resolved else False
            if superseded or fixed:
                same = [_timeless(e) for e in superseded] == [
                    _timeless(json.loads(line)) for line in lines
                ]
                if same and not fixed:
                    return target  # the same entries again: the file stays as it is
                self._rewrite_quarantine(replacing or {}, lines, resolved)
                return target
            # Created even when empty (ingest ran here); never through a link or into a FIFO.
            fd = _open_plain(target, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            with os.fdopen(fd, "r+b") as handle:
                size = os.fstat(fd).st_size
                # A writer killed mid-line left a partial last line: start on a fresh line.
                needs_newline = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
                data = "".join(line + "\n" for line in lines).encode("utf-8")
                handle.write((b"\n" if needs_newline else b"") + data)
                handle.flush()
                os.fsync(fd)
        return target

    def _quarantine_entries(
        self, only: Mapping[str, Any] | None = None
    ) -> Iterator[tuple[str, dict[str, Any] | None]]:
        """Each line of the quarantine file with its JSON object (None when it is not one).

        With ``only``, lines that cannot match it (a text value absent from the line) are
        given without parsing them: a re-ingest scans a large file in a fraction of the time.
        """
        needles = [_quarantine_line(v) for v in (only or {}).values() if isinstance(v, str)]
        if not os.path.lexists(self.quarantine_path):
            return
        fd = _open_plain(self.quarantine_path, os.O_RDONLY)
        with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                text = line.rstrip("\n")
                if not text.strip():
                    continue
                if not all(needle in text for needle in needles):
                    yield text, None
                    continue
                try:
                    entry = json.loads(text)
                except ValueError:
                    yield text, None
                    continue
                yield text, entry if isinstance(entry, dict) else None

    def _superseded_quarantine(self, replacing: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [
            entry
            for _, entry in self._quarantine_entries(replacing)
            if entry is not None and _matches(entry, replacing)
        ]

    def _resolved_quarantine(self, resolved: Collection[str]) -> bool:
        """Whether an entry of the quarantine file names one of the ``resolved`` trace ids."""
        # Filtered on the text "trace_id": the lines without the key are not even parsed.
        lines = self._quarantine_entries({"key": "trace_id"})
        return any(_names_trace(text, resolved) for text, _ in lines)

    def _rewrite_quarantine(
        self, replacing: Mapping[str, Any], lines: Sequence[str], resolved: Collection[str] = ()
    ) -> None:
        """Copy the quarantine file without the superseded and the resolved entries, add
        ``lines``, replace it atomically (the caller holds the lock)."""
        temp = self.path / _temp_name(".jsonl")
        try:
            with open(temp, "w", encoding="utf-8") as out:
                for text, entry in self._quarantine_entries(replacing):
                    if entry is not None and _matches(entry, replacing):
                        continue
                    if resolved and _names_trace(text, resolved):
                        continue
                    out.write(text + "\n")
                out.write("".join(line + "\n" for line in lines))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self.quarantine_path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.path)

    # -- reading ------------------------------------------------------------------------------

    def read_arrow(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        filters: Filters | None = None,
        *,
        on_corrupt: OnCorrupt = "raise",
    ) -> pa.Table:
        """All rows of ``table`` as a pyarrow Table: one row per key (the latest part wins),
        sorted by the key columns, columns in the order asked for.

        ``filters`` maps a column to a value (equality), a list/tuple/set of values (isin) or
        None (is null). A corrupt or truncated part raises :class:`StoreError` naming it, unless
        ``on_corrupt="skip"``: then it warns and leaves that part's rows out. A table without parts
        gives an empty table with the declared columns.
        """
        spec = schema.spec(table)
        wanted = _check_columns(spec, columns)
        if on_corrupt not in ("raise", "skip"):
            raise ValueError(f"on_corrupt must be 'raise' or 'skip', not {on_corrupt!r}")
        key_filter, other_filter = _filter_expressions(spec, filters)
        filter_columns = list((filters or {}).keys())
        needed = list(dict.fromkeys([*spec.keys, *wanted, *filter_columns]))
        pieces = self._read_listed(spec, needed, key_filter, on_corrupt)
        if not pieces:
            return pa.schema([spec.schema.field(c) for c in wanted]).empty_table()
        result = _dedupe_and_sort(pieces, spec.keys)
        if other_filter is not None:
            result = result.filter(other_filter)
        return result.select(wanted)

    def _read_listed(
        self,
        spec: schema.TableSpec,
        needed: list[str],
        key_filter: _KeyFilter | None,
        on_corrupt: OnCorrupt,
    ) -> list[tuple[pa.Table, bool]]:
        """:meth:`_read_pieces` of the parts the manifest lists now; a merge that removes
        parts between the manifest's reading and a part's opening makes it read again."""
        for attempt in range(8):
            manifest = self._load_manifest()
            try:
                return self._read_pieces(spec, needed, key_filter, on_corrupt, manifest)
            except _ManifestMoved:
                time.sleep(0.05 * (attempt + 1))
        raise StoreError(
            f"{self.manifest_path}: changed on every one of 8 reads of table '{spec.name}' "
            "(a writer merging it over and over); try again"
        )

    def _read_pieces(
        self,
        spec: schema.TableSpec,
        needed: list[str],
        key_filter: _KeyFilter | None,
        on_corrupt: OnCorrupt,
        manifest: Mapping[str, Any],
    ) -> list[tuple[pa.Table, bool]]:
        pieces = []
        listed = self._listed(spec.name, manifest)
        folder = self._table_dir(spec.name)
        try:
            if listed:  # the parts are read only from real folders inside the store
                _plain_dir(folder.parent)
                _plain_dir(folder)
        except NotPlainFile as exc:
            listed = []
            self._unreadable(_UnreadablePart(exc.path, exc.reason), on_corrupt)
        for path, _ in listed:
            try:
                if key_filter is None:
                    piece, is_sorted = _read_part(path, spec, needed)
                else:
                    piece, is_sorted = _read_part_keyed(path, spec, needed, key_filter)
            except FileNotFoundError:
                if self._listed(spec.name) != self._listed(spec.name, manifest):
                    raise _ManifestMoved() from None
                gone = _UnreadablePart(path, f"listed in {MANIFEST_NAME} but missing on disk")
                self._unreadable(gone, on_corrupt)
                continue
            except _UnreadablePart as exc:
                self._unreadable(exc, on_corrupt)
                continue
            if piece.num_rows:
                pieces.append((piece, is_sorted))
        return pieces

    @staticmethod
    def _unreadable(exc: _UnreadablePart, on_corrupt: OnCorrupt) -> None:
        """Warn (``on_corrupt="skip"``) or raise the :class:`StoreError` naming the file."""
        if on_corrupt == "skip":
            warnings.warn(
                f"skipping unreadable part {exc.path}: {exc.reason}", RuntimeWarning, stacklevel=5
            )
            return
        raise StoreError(
            f"{exc.path}: {exc.reason}. Run Store.verify(); Store.quarantine_part() moves "
            "the file aside so the stage can redo its rows"
        ) from None

    def read(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        filters: Filters | None = None,
        *,
        on_corrupt: OnCorrupt = "raise",
    ) -> pd.DataFrame:
        """:meth:`read_arrow` as a DataFrame with stable dtypes (see :func:`pandas_dtypes`)."""
        return _to_pandas(self.read_arrow(table, columns, filters, on_corrupt=on_corrupt))

    def rows_per(self, table: str, column: str, *, on_corrupt: OnCorrupt = "raise") -> pd.Series:
        """How many rows of ``table`` (the latest part winning) hold each non-null value of
        ``column``: a Series indexed by the value, named ``count`` (as pandas' value_counts).

        Counted in Arrow: the inspector's steps per trace come out as 100,000 numbers instead
        of 1.1M step ids turned into pandas strings, counted there and cached."""
        spec = schema.spec(table)
        (name,) = _check_columns(spec, [column])
        found = self.read_arrow(table, [name], on_corrupt=on_corrupt).column(name)
        counts = pc.value_counts(found)
        values, numbers = counts.field("values"), counts.field("counts")
        present = pc.is_valid(values)
        values, numbers = values.filter(present), numbers.filter(present)
        index = _to_pandas(pa.table({name: values}))[name]
        return pd.Series(
            numbers.to_numpy(zero_copy_only=False).astype(np.int64),
            index=pd.Index(index, name=name),
            name="count",
        )

    def done_keys(
        self,
        table: str,
        keys: Sequence[str] | None = None,
        *,
        filters: Filters | None = None,
        on_corrupt: OnCorrupt = "raise",
    ) -> set[tuple]:
        """The set of key tuples present in ``table`` (default: its key columns), for resuming.

        ``keys`` may name a subset or other columns (e.g. ``("trace_id",)``); ``filters`` restricts
        the rows (applied after deduplication, e.g. ``{"status": "ok"}``). With
        ``on_corrupt="skip"`` the rows of unreadable parts are simply not done.
        """
        spec = schema.spec(table)
        key_columns = _check_columns(spec, keys if keys is not None else spec.keys)
        if filters:
            found = self.read_arrow(table, key_columns, filters, on_corrupt=on_corrupt)
        else:
            # Without filters the union of all parts' keys is the answer: no dedupe needed.
            pieces = [p for p, _ in self._read_listed(spec, key_columns, None, on_corrupt)]
            if not pieces:
                return set()
            found = pa.concat_tables(pieces)
        if len(key_columns) == 1:
            return {(value,) for value in found.column(0).unique().to_pylist()}
        if tuple(key_columns) != spec.keys:
            found = _unique_rows(found, key_columns)  # shrink before the slow Python conversion
        columns = [found.column(k).to_pylist() for k in key_columns]
        return set(zip(*columns, strict=True))

    # -- maintenance --------------------------------------------------------------------------

    def merge(self, table: str | None = None) -> None:
        """Compact each table's parts into one (deduplicated, sorted), atomically.

        The merged part is renamed in first, then the manifest is updated, then the old parts are
        deleted: a crash at any point leaves either the old parts, or old parts plus a merged part
        that supersedes them; :meth:`read` gives the same rows in every case.
        """
        names = [table] if table is not None else self.tables()
        with self._locked():
            for name in names:
                old = self._part_paths(name)
                if not old:
                    continue
                if len(old) == 1:
                    _, file_schema = _open_reader(old[0], [])
                    meta = file_schema.metadata or {}
                    if meta.get(_META_SORTED) == b"keys" and meta.get(_META_TABLE) == name.encode():
                        continue
                merged = self.read_arrow(name)
                merged = merged.replace_schema_metadata(_part_metadata(name, merged, "merge"))
                folder = self._writable_table_dir(name)
                temp = folder / _temp_name(".arrow")
                try:
                    _write_ipc(temp, merged)
                    digest = _digest(temp)
                    manifest = self._load_manifest()
                    self._reconcile(manifest)
                    seq = self._next_seq(name, manifest)
                    final = folder / f"part-{seq:08d}-{os.getpid()}-{uuid.uuid4().hex[:12]}.arrow"
                    entry = _table_entry(manifest, name)
                    record = {
                        "file": final.name,
                        "rows": merged.num_rows,
                        "bytes": temp.stat().st_size,
                        "blake2b": digest,
                        "stage": "merge",
                        "time": _now(),
                        "merged_from": len(old),
                    }
                    # Landed beside the old parts first: it supersedes every row of theirs, so
                    # reading old + merged gives the same rows as either alone.
                    entry["parts"].append(record)
                    self._land(manifest, entry, record, temp, final)
                finally:
                    temp.unlink(missing_ok=True)
                retired = [p["file"] for p in entry["parts"] if p is not record]
                entry["parts"] = [record]
                # The old files are deleted after the manifest drops them; a kill in between
                # leaves them named here, and the next writer deletes them.
                entry["retired"] = retired
                _recount(entry)
                manifest["provenance"].append(
                    {
                        "time": _now(),
                        "stage": "merge",
                        "table": name,
                        "parts": len(old),
                        "rows": merged.num_rows,
                    }
                )
                self._save_manifest(manifest)
                for file in retired:
                    if _is_plain_file(folder / file):
                        (folder / file).unlink(missing_ok=True)
                _fsync_dir(folder)

    def verify(self) -> list[str]:
        """Check every part and the manifest; return the problems found (empty list: all good).

        Each problem starts with the path it is about, which :meth:`quarantine_part` accepts:
        truncated or corrupt parts, parts whose columns do not fit the schema, parts with repeated
        keys or unsorted rows despite their flag, row counts that differ from the part's footer,
        content that differs from the checksum in the manifest, parts listed without a checksum,
        parts the manifest lists but the disk lacks, part files the manifest does not list (never
        read: added by hand, or forged), symbolic links, FIFOs and other special files anywhere
        in the store (never opened), folders of unknown tables and stray files. Temp files of
        writers in progress, and the files of a merge that its writer had no time to delete, are
        not problems.
        """
        problems: list[str] = []
        try:
            manifest: dict[str, Any] | None = self._load_manifest()
        except StoreError as exc:
            problems.append(str(exc))
            manifest = None
        problems += self._special_files()
        tables_root = self.path / TABLES_DIR
        if _is_plain_dir(tables_root):
            for folder in sorted(tables_root.iterdir()):
                if not (_is_plain_dir(folder) or _is_plain_file(folder)):
                    continue  # a link or special file: reported above
                if not _is_plain_dir(folder):
                    problems.append(f"{folder}: unexpected file in {TABLES_DIR}/")
                elif folder.name not in schema.TABLES:
                    problems.append(f"{folder}: folder of an unknown table")
                else:
                    problems += self._verify_table(folder, manifest)
        if manifest is not None and (
            _is_plain_dir(tables_root) or not os.path.lexists(tables_root)
        ):
            # (A tables/ that is a file or a link is one problem, named above.)
            for name, entry in sorted(manifest["tables"].items()):
                folder = tables_root / name
                if not (_is_plain_dir(tables_root) and _is_plain_dir(folder)):
                    if any(not p.get("pending") for p in entry["parts"]) and not os.path.lexists(
                        folder
                    ):
                        problems.append(
                            f"{folder}: listed in {MANIFEST_NAME} but missing on disk "
                            f"({entry.get('rows')} rows lost)"
                        )
                    continue  # a link, file or special file in its place: reported above
                for part in entry["parts"]:
                    path = folder / part["file"]
                    if not os.path.lexists(path) and not part.get("pending"):
                        problems.append(
                            f"{path}: listed in {MANIFEST_NAME} but missing on disk "
                            f"({part.get('rows')} rows lost)"
                        )
        return problems

    def _special_files(self) -> list[str]:
        """Every symbolic link, FIFO, socket or device in the places a store reads or writes
        (its top folder, ``logs/``, ``tables/`` and each table folder), and plain files where a
        folder belongs; none of them is ever opened or followed."""
        expected_dirs = {TABLES_DIR, LOGS_DIR, CORRUPT_DIR}
        problems = []

        def check(path: Path, want_dir: bool) -> bool:
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                return False
            if stat.S_ISLNK(mode) or not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                problems.append(
                    f"{path}: is {_kind(mode)}; the store never opens or follows it "
                    "(Store.quarantine_part moves it aside)"
                )
                return False
            if want_dir and not stat.S_ISDIR(mode):
                problems.append(f"{path}: is a file where a folder belongs")
                return False
            return stat.S_ISDIR(mode)

        for entry in sorted(self.path.iterdir()):
            is_dir = check(entry, want_dir=entry.name in expected_dirs)
            if not is_dir or entry.name == CORRUPT_DIR:
                continue
            if entry.name == LOGS_DIR:
                for log in sorted(entry.iterdir()):
                    check(log, want_dir=False)
            elif entry.name == TABLES_DIR:
                for folder in sorted(entry.iterdir()):
                    if check(folder, want_dir=False) and folder.name in schema.TABLES:
                        for item in sorted(folder.iterdir()):
                            check(item, want_dir=item.name == CORRUPT_DIR)
        return problems

    def _verify_table(self, folder: Path, manifest: dict[str, Any] | None) -> list[str]:
        spec = schema.spec(folder.name)
        problems = []
        listed: dict[str, dict[str, Any]] = {}
        retired: set[str] = set()
        if manifest is not None:
            entry = manifest["tables"].get(spec.name, {})
            listed = {p["file"]: p for p in entry.get("parts", [])}
            retired = set(entry.get("retired", []))
        for path in sorted(folder.iterdir()):
            if path.name == CORRUPT_DIR or path.name.startswith(_TEMP_PREFIX):
                continue
            if not _is_plain_file(path):
                continue  # a link, FIFO or folder: reported by _special_files
            if not _PART_RE.match(path.name):
                problems.append(f"{path}: not a part file (ignored by read)")
                continue
            entry = listed.get(path.name)
            if entry is None:
                if path.name not in retired and manifest is not None:
                    problems.append(
                        f"{path}: not listed in {MANIFEST_NAME}, so never read (added by hand "
                        "or forged; a killed writer leaves none)"
                    )
                continue
            try:
                table, is_sorted = _read_part(path, spec, spec.columns, full_check=True)
            except _UnreadablePart as exc:
                problems.append(f"{exc.path}: {exc.reason}")
                continue
            except FileNotFoundError:
                continue  # merged away while we looked
            _, file_schema = _open_reader(path, [])
            meta_rows = (file_schema.metadata or {}).get(_META_ROWS)
            if meta_rows is not None:
                try:
                    declared = int(meta_rows)
                except ValueError:  # damaged or hand-made footer metadata
                    problems.append(f"{path}: footer row count {_short(meta_rows)} is not a number")
                else:
                    if declared != table.num_rows:
                        problems.append(
                            f"{path}: footer says {declared} rows, holds {table.num_rows}"
                        )
            recorded = entry.get("blake2b")
            if not isinstance(recorded, str):
                problems.append(
                    f"{path}: listed in {MANIFEST_NAME} without a checksum, so its content "
                    "cannot be checked"
                )
            elif recorded != _digest(path):
                problems.append(
                    f"{path}: content differs from its checksum in {MANIFEST_NAME} "
                    "(damaged on disk or edited)"
                )
                continue
            if entry.get("bytes") is not None and entry["bytes"] != path.stat().st_size:
                size = path.stat().st_size
                problems.append(
                    f"{path}: {size} bytes on disk, {entry['bytes']} in {MANIFEST_NAME}"
                )
            for column in spec.required_columns():
                nulls = table.column(column).null_count
                if nulls:
                    problems.append(
                        f"{path}: field '{column}' has {nulls} null value(s) (required)"
                    )
            try:
                _sort_by_keys(spec.name, spec.keys, table)
            except schema.SchemaError as exc:
                problems.append(f"{path}: duplicate keys ({exc})")
                continue
            if is_sorted and table.num_rows > 1:
                order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in spec.keys])
                if not np.array_equal(order.to_numpy(), np.arange(table.num_rows)):
                    problems.append(f"{path}: marked sorted by keys but is not")
        return problems

    def adopt(self, path: str | os.PathLike[str], reason: str | None = None) -> None:
        """List a part file that is in its table's folder but not in the manifest, with its
        rows, size and checksum: the explicit act of trusting a file :meth:`verify` reported
        as unlisted (one a hand made, or that a writer from before manifest-first listing left
        behind). A link, a FIFO, a part of no table or one the manifest lists is refused."""
        source = Path(os.path.abspath(path))
        folder = source.parent
        if folder.parent != Path(os.path.abspath(self.path / TABLES_DIR)):
            raise StoreError(f"{source}: not in a table folder of the store {self.path}")
        name = folder.name
        schema.spec(name)
        if not _PART_RE.match(source.name) or not _is_plain_file(source):
            raise StoreError(f"{source}: not a part file")
        _plain_dir(folder.parent)
        _plain_dir(folder)
        rows = _part_rows(source)
        if rows is None:
            raise StoreError(f"{source}: not a readable part; not adopted")
        with self._locked():

            def add(manifest: dict[str, Any]) -> None:
                entry = _table_entry(manifest, name)
                if any(p["file"] == source.name for p in entry["parts"]):
                    raise StoreError(f"{source}: already listed in {MANIFEST_NAME}")
                entry["parts"].append(
                    {
                        "file": source.name,
                        "rows": rows,
                        "bytes": source.stat().st_size,
                        "blake2b": _digest(source),
                        "stage": None,
                        "time": _now(),
                        "adopted": True,
                    }
                )
                _recount(entry)
                manifest["provenance"].append(
                    {
                        "time": _now(),
                        "stage": "adopt",
                        "table": name,
                        "part": source.name,
                        "reason": reason,
                    }
                )

            self._update_manifest(add)

    def quarantine_part(self, path: str | os.PathLike[str], reason: str | None = None) -> Path:
        """Move what :meth:`verify` reports aside and drop it from the manifest.

        A file in a table folder (a damaged or unlisted part, a stray file, a link or a FIFO)
        goes to ``tables/<name>/corrupt/``; anything else in the store (a linked table folder,
        a linked ``logs/`` or log file, ``.lock``, ``quarantine.jsonl``) to the store's own
        ``corrupt/`` folder. Links are moved, never followed; the manifest itself is refused
        (replace it with a copy you trust). A listed part's rows disappear from :meth:`read` and
        :meth:`done_keys`, so the stage that wrote them will produce them again. Returns the new
        location. A part or table folder the manifest lists but the disk lacks has nothing to
        move: its entry is dropped from the manifest and ``path`` is returned."""
        root = Path(os.path.abspath(self.path))
        source = Path(path)
        if not source.is_absolute() and not os.path.lexists(source):
            source = root / source
        source = Path(os.path.abspath(source))  # lexical: a link is the thing moved, not its target
        try:
            relative = source.relative_to(root).parts
        except ValueError:
            raise StoreError(f"{source}: not a part of the store {self.path}") from None
        if relative and relative[0] == TABLES_DIR and not os.path.lexists(source):
            return self._forget_missing(source, relative, reason)
        if not relative or relative[0] == CORRUPT_DIR or not os.path.lexists(source):
            raise StoreError(f"{source}: not a part of the store {self.path}")
        if relative == (MANIFEST_NAME,):
            raise StoreError(
                f"{source}: the manifest is not moved aside; replace it with a copy you trust"
            )
        for depth in range(1, len(relative)):
            above = root.joinpath(*relative[:depth])
            if not _is_plain_dir(above):
                raise StoreError(
                    f"{source}: reached through {above}, which is not a plain folder; "
                    "quarantine that instead"
                )
        in_table = (
            len(relative) == 3
            and relative[0] == TABLES_DIR
            and relative[1] in schema.TABLES
            and relative[2] != CORRUPT_DIR
        )
        target_dir = source.parent / CORRUPT_DIR if in_table else root / CORRUPT_DIR
        target_name = source.name if in_table else "__".join(relative)

        def free_target() -> Path:
            _plain_dir(target_dir, create=True)
            target = target_dir / target_name
            if os.path.lexists(target):
                stem, dot, suffix = target_name.partition(".")
                target = target_dir / f"{stem}-{uuid.uuid4().hex[:8]}{dot}{suffix}"
            return target

        if relative == (LOCK_NAME,):
            # A linked .lock cannot be locked: it is moved first, then the next lock is a
            # fresh file inside the store.
            target = free_target()
            os.replace(source, target)
            _fsync_dir(root)
            record = {"time": _now(), "stage": "quarantine", "path": LOCK_NAME, "reason": reason}
            with self._locked():
                self._update_manifest(lambda m: m["provenance"].append(record))
            return target
        with self._locked():
            target = free_target()

            def drop(manifest: dict[str, Any]) -> None:
                record: dict[str, Any] = {
                    "time": _now(),
                    "stage": "quarantine",
                    "path": "/".join(relative),
                    "reason": reason,
                }
                if in_table:
                    entry = _table_entry(manifest, relative[1])
                    entry["parts"] = [p for p in entry["parts"] if p["file"] != source.name]
                    _recount(entry)
                    record.update(table=relative[1], part=source.name)
                manifest["provenance"].append(record)

            # The manifest lets go first: a kill before the move leaves an unlisted file
            # (never read; verify reports it), never a listed part that is gone.
            self._update_manifest(drop)
            os.replace(source, target)
            _fsync_dir(source.parent)
        return target

    def _forget_missing(self, source: Path, relative: tuple[str, ...], reason: str | None) -> Path:
        """:meth:`quarantine_part` of what :meth:`verify` names as listed in the manifest but
        missing on disk (a part, or a whole table folder): nothing is there to move, so its
        manifest entry is dropped (the stage that wrote it redoes those rows). Returns
        ``source``."""
        is_table = len(relative) == 2 and relative[1] in schema.TABLES
        is_part = (
            len(relative) == 3 and relative[1] in schema.TABLES and _PART_RE.match(relative[2])
        )
        if not (is_table or is_part):
            raise StoreError(f"{source}: not a part of the store {self.path}")
        for depth in range(1, len(relative)):
            above = self.path.joinpath(*relative[:depth])
            if os.path.lexists(above) and not _is_plain_dir(above):
                raise StoreError(
                    f"{source}: reached through {above}, which is not a plain folder; "
                    "quarantine that instead"
                )
        name = relative[1]
        with self._locked():

            def drop(manifest: dict[str, Any]) -> None:
                entry = manifest["tables"].get(name)
                listed = [] if entry is None else entry["parts"]
                gone = [p for p in listed if is_table or p["file"] == relative[2]]
                if not gone:
                    raise StoreError(
                        f"{source}: not in the store and not listed in {MANIFEST_NAME}"
                    )
                assert entry is not None
                entry["parts"] = [p for p in listed if p not in gone]
                _recount(entry)
                if not entry["parts"]:
                    entry["rows"] = 0
                manifest["provenance"].append(
                    {
                        "time": _now(),
                        "stage": "quarantine",
                        "path": "/".join(relative),
                        "reason": reason,
                        "table": name,
                        "missing": [p["file"] for p in gone],
                    }
                )

            self._update_manifest(drop)
        return source

    # -- export -------------------------------------------------------------------------------

    def export(
        self,
        out_dir: str | os.PathLike[str],
        fmt: Literal["parquet", "csv"] = "parquet",
        tables: Sequence[str] | None = None,
    ) -> list[Path]:
        """Write one ``<table>.parquet`` or ``<table>.csv`` per table (deduplicated, sorted).

        CSV keeps nulls apart from empty strings (empty field vs ``""``) and writes list columns as
        JSON arrays; :func:`read_exported` reads either format back into the table's schema.
        """
        if fmt not in ("parquet", "csv"):
            raise ValueError(f"export format must be 'parquet' or 'csv', not {fmt!r}")
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name in tables if tables is not None else self.tables():
            data = self.read_arrow(name)
            target = out / f"{name}.{fmt}"
            temp = out / _temp_name(f".{fmt}")
            try:
                if fmt == "parquet":
                    import pyarrow.parquet as pq

                    pq.write_table(data, temp, compression="zstd")
                else:
                    import pyarrow.csv as pacsv

                    # Quoted where a spreadsheet would run a cell (safe_export.csv_cell).
                    pacsv.write_csv(csv_arrow(_lists_to_json(data)), temp)
                _fsync_file(temp)
                os.replace(temp, target)
            finally:
                temp.unlink(missing_ok=True)
            written.append(target)
        return written


def _quarantine_line(value: Any) -> str:
    """One JSON line (no newline). A lone surrogate becomes a ``\\udXXX`` escape, which keeps
    the line valid UTF-8 and valid JSON."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _matches(entry: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    return all(entry.get(k) == v for k, v in fields.items())


def _names_trace(text: str, trace_ids: Collection[str]) -> bool:
    """Whether the quarantine line ``text`` is an entry whose ``trace_id`` is in ``trace_ids``
    (parsed only when it holds the key at all: most lines of a large file do not).

    >>> _names_trace('{"line": 2, "trace_id": "t-1"}', {"t-1"})
    True
    >>> _names_trace('{"line": 2}', {"t-1"}), _names_trace('{"trace_id": "t-2"}', {"t-1"})
    (False, False)
    """
    if '"trace_id"' not in text:
        return False
    try:
        entry = json.loads(text)
    except ValueError:
        return False
    return isinstance(entry, dict) and entry.get("trace_id") in trace_ids


def _check_stage_name(stage: str) -> None:
    if not isinstance(stage, str) or not _STAGE_NAME_RE.match(stage):
        raise ValueError(
            f"stage name {_short(stage)} must be letters, digits, '_', '.', '-' (at most 128)"
        )


def _lock_fd(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    import msvcrt  # pragma: no cover - Windows only

    while True:  # pragma: no cover
        try:
            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
            return
        except OSError:
            time.sleep(0.1)


def _unlock_fd(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return
    import msvcrt  # pragma: no cover - Windows only

    os.lseek(fd, 0, os.SEEK_SET)  # pragma: no cover
    msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # pragma: no cover


# --- export helpers ------------------------------------------------------------------------------


def _is_list(dtype: pa.DataType) -> bool:
    return pa.types.is_list(dtype) or pa.types.is_large_list(dtype)


def _lists_to_json(table: pa.Table) -> pa.Table:
    for i, field in enumerate(table.schema):
        if _is_list(field.type):
            values = [None if v is None else json.dumps(v) for v in table.column(i).to_pylist()]
            table = table.set_column(
                i, pa.field(field.name, pa.string()), pa.array(values, pa.string())
            )
    return table


def read_exported(path: str | os.PathLike[str], table: str | None = None) -> pa.Table:
    """Read a file written by :meth:`Store.export` back into its table's schema.

    ``table`` defaults to the file's stem (``rollouts.csv`` -> ``rollouts``). Errors name the file,
    and the row and field where a value does not fit.
    """
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    source = Path(path)
    name = table or source.stem
    spec = schema.spec(name)
    try:
        if source.suffix == ".parquet":
            data = pq.read_table(source)
        elif source.suffix == ".csv":
            # Types for columns absent from the file are ignored by the CSV reader.
            column_types = {
                f.name: pa.string() if _is_list(f.type) else f.type for f in spec.schema
            }
            data = pacsv.read_csv(
                source,
                parse_options=pacsv.ParseOptions(newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(
                    column_types=column_types,
                    strings_can_be_null=True,
                    quoted_strings_can_be_null=False,
                    null_values=[""],
                ),
            )
            for i, field in enumerate(data.schema):
                if pa.types.is_string(field.type):  # undo export's formula quoting
                    unquoted = [csv_uncell(v) for v in data.column(i).to_pylist()]
                    data = data.set_column(i, field, pa.array(unquoted, type=field.type))
                spec_field = spec.schema.field(field.name) if field.name in spec.columns else None
                if spec_field is not None and _is_list(spec_field.type):
                    texts = data.column(i).to_pylist()
                    parsed = []
                    for row, text in enumerate(texts):
                        try:
                            parsed.append(None if text is None else json.loads(text))
                        except json.JSONDecodeError:
                            raise StoreError(
                                f"{source}: row {row}, field '{field.name}': not a JSON list"
                            ) from None
                    data = data.set_column(i, spec_field, pa.array(parsed, type=spec_field.type))
        else:
            raise StoreError(f"{source}: unknown export format (expected .parquet or .csv)")
    except (pa.ArrowException, OSError) as exc:
        raise StoreError(f"{source}: cannot be read ({exc})") from None
    try:
        return schema.validate_frame(name, data)
    except schema.SchemaError as exc:
        raise StoreError(f"{source}: {exc}") from None


def arrow_to_frame(table: Any, categorical: Sequence[str] = ()) -> pd.DataFrame:
    """A pyarrow table as pandas, with the ``categorical`` string columns dictionary-encoded.

    Repeated ids (teacher, student, trace_id in a rollouts table) become pandas categoricals,
    which group and factorize several times faster than plain strings.
    """
    columns = {}
    for name in table.column_names:
        column = table.column(name)
        if name in categorical and (
            pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        ):
            column = pc.dictionary_encode(column)
        columns[name] = column
    return pa.table(columns).to_pandas()
