"""The part files of a results store: Arrow IPC files (Feather v2, zstd) written once, read
memory-mapped, and combined into one row per key.

A part carries its table name, row count and a "sorted by keys, no duplicate keys" flag in its
schema metadata. :func:`read_part` reads the columns a read asks for, conformed to the table's
declared types; :func:`read_part_keyed` decodes only the record batches that may hold the keys
a filter asks for (a binary search on a sorted part's batches); :func:`dedupe_and_sort` keeps the
latest part's row of each key. :func:`read_stats` counts the batches decoded, for tests.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from legival_core.store import schema
from legival_core.store.errors import NotPlainFile, short_repr
from legival_core.store.file_safety import fsync_file, open_plain

__all__ = [
    "Filters",
    "KeyFilter",
    "OnCorrupt",
    "ReadStats",
    "UnreadablePart",
    "check_columns",
    "dedupe_and_sort",
    "filter_expressions",
    "merge_sorted_parts",
    "open_reader",
    "part_distinct",
    "part_metadata",
    "part_rows",
    "read_part",
    "read_part_keyed",
    "read_stats",
    "sort_by_keys",
    "unique_rows",
    "write_ipc",
    "write_ipc_pieces",
]

#: Rows per record batch aim at about this many bytes before compression.
_BATCH_TARGET_BYTES = 64 * 1024 * 1024
_BATCH_MAX_ROWS = 1 << 17

META_TABLE = b"legival.table"
META_ROWS = b"legival.rows"
META_SORTED = b"legival.sorted"  # b"keys": sorted by the key columns, keys unique
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


class UnreadablePart(Exception):
    """One part file cannot be read or does not fit its table (a read turns it into a
    :class:`~legival_core.store.errors.StoreError`, :meth:`Store.verify` into a problem)."""

    def __init__(self, path: Path, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def _key_tuple(table: pa.Table, keys: Sequence[str], row: int) -> tuple:
    return tuple(table.column(k)[row].as_py() for k in keys)


def sort_by_keys(name: str, keys: Sequence[str], table: pa.Table) -> pa.Table:
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
            f"rows {first} and {second} have the same key {short_repr(key)} (one row per key)",
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


def unique_rows(table: pa.Table, columns: Sequence[str]) -> pa.Table:
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


def write_ipc(path: Path, table: pa.Table) -> None:
    """Write an Arrow IPC file (zstd) and fsync it."""
    write_ipc_pieces(path, table.schema, [table])


def write_ipc_pieces(path: Path, file_schema: pa.Schema, pieces: Iterable[pa.Table]) -> None:
    """Write the rows of ``pieces`` (each of ``file_schema``), in order, as one Arrow IPC file
    (zstd) and fsync it, holding about one record batch of them at a time: pieces are gathered
    and cut into batches of :func:`_batch_rows` rows (a whole table given as one piece is cut
    as it is, without a copy)."""
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    held: pa.Table | None = None
    with (
        pa.OSFile(str(path), "wb") as sink,
        pa.ipc.new_file(sink, file_schema, options=options) as w,
    ):
        for piece in pieces:
            piece = piece.replace_schema_metadata(file_schema.metadata)
            held = piece if held is None else pa.concat_tables([held, piece])
            size = _batch_rows(held)
            if held.num_rows >= size:
                whole = held.num_rows - held.num_rows % size
                # one chunk (no copy when it is one already): write_table cuts each chunk of
                # a table into batches apart
                w.write_table(held.slice(0, whole).combine_chunks(), max_chunksize=size)
                held = held.slice(whole)
        if held is not None and held.num_rows:
            w.write_table(held.combine_chunks(), max_chunksize=_batch_rows(held))
    fsync_file(path)


def merge_sorted_parts(
    parts: Sequence[Iterable[pa.Table]], keys: Sequence[str], *, round_bytes: int | None = None
) -> Iterator[pa.Table]:
    """The rows of ``parts`` — each given as its batches, sorted by ``keys`` with unique keys,
    the parts in sequence order — as :func:`dedupe_and_sort` of them all gives them (one row
    per key, the latest part's, sorted by the keys), a piece at a time, holding one batch of
    each part.

    Each round takes a bound: the smallest of the keys each part offers, the last of as many
    of its batch's first rows as make ``round_bytes`` shared among the parts (None: of its
    whole batch). Every part's rows up to it are in its batch already (its later batches hold
    larger keys), so those rows are final once deduplicated, and a round gives about
    ``round_bytes`` of rows; a batch used up is replaced by the part's next one.

    >>> a = [pa.table({"k": [1, 3]}), pa.table({"k": [5]})]
    >>> b = [pa.table({"k": [2, 3, 6]})]
    >>> [t["k"].to_pylist() for t in merge_sorted_parts([a, b], ["k"])]
    [[1, 2, 3], [5], [6]]
    """
    sources = [iter(batches) for batches in parts]
    held: list[pa.Table | None] = [_next_rows(source) for source in sources]
    share = None if round_bytes is None else max(1, round_bytes // max(1, len(parts)))
    while any(batch is not None for batch in held):
        bound = min(_key_tuple(b, keys, _offered(b, share) - 1) for b in held if b is not None)
        pieces: list[tuple[pa.Table, bool]] = []
        for i, batch in enumerate(held):
            if batch is None:
                continue
            upto = _rows_up_to(batch, keys, bound)
            if upto:
                pieces.append((batch.slice(0, upto), True))
            held[i] = batch.slice(upto) if upto < batch.num_rows else _next_rows(sources[i])
        yield dedupe_and_sort(pieces, keys)


def _offered(batch: pa.Table, share: int | None) -> int:
    """How many of ``batch``'s first rows fill ``share`` bytes (None: all), at least one."""
    if share is None or batch.nbytes <= share:
        return batch.num_rows
    return max(1, share * batch.num_rows // batch.nbytes)


def _rows_up_to(batch: pa.Table, keys: Sequence[str], bound: tuple) -> int:
    """How many of ``batch``'s first rows (sorted by ``keys``) have a key at most ``bound``."""
    return _first_index(batch.num_rows, lambda row: _key_tuple(batch, keys, row) > bound)


def _next_rows(batches: Iterator[pa.Table]) -> pa.Table | None:
    """The next batch of ``batches`` that holds a row (None: none left)."""
    return next((batch for batch in batches if batch.num_rows), None)


def part_metadata(name: str, rows: int, stage: str | None) -> dict[bytes, bytes]:
    meta = {
        META_TABLE: name.encode(),
        META_ROWS: str(rows).encode(),
        META_SORTED: b"keys",
        _META_SCHEMA_VERSION: str(schema.SCHEMA_VERSION).encode(),
    }
    if stage:
        meta[_META_STAGE] = stage.encode()
    return meta


def open_reader(
    path: Path, fields: Sequence[str] | None
) -> tuple[pa.ipc.RecordBatchFileReader, pa.Schema]:
    """Open a part memory-mapped; ``fields`` limits which columns get decoded.

    The file is opened by :func:`open_plain` (no symbolic link, no FIFO) and mapped from that
    descriptor, so what is checked is what is read."""
    (reader,), file_schema, _ = _open_readers(path, [fields])
    return reader, file_schema


def _open_readers(
    path: Path, field_sets: Sequence[Sequence[str] | None]
) -> tuple[list[pa.ipc.RecordBatchFileReader], pa.Schema, mmap.mmap]:
    """:func:`open_reader` with one reader per set of fields, all on one mapping of the file
    (a keyed read decodes the key columns of a batch with one, its other columns with
    another), and that mapping."""
    try:
        fd = open_plain(path, os.O_RDONLY)
    except NotPlainFile as exc:
        raise UnreadablePart(exc.path, exc.reason) from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnreadablePart(path, f"cannot be opened ({exc.strerror or exc})") from None
    try:
        if os.fstat(fd).st_size == 0:
            raise UnreadablePart(path, "not a readable Arrow IPC file (empty)")
        mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise UnreadablePart(path, f"cannot be mapped ({exc})") from None
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
        raise UnreadablePart(path, f"not a readable Arrow IPC file ({exc})") from None
    return readers, file_schema, mapped


def release_mapped_pages(mapped: mmap.mmap) -> None:
    """Take the pages of ``mapped`` that were read out of this process's resident set.

    A pass over a part touches every page of the columns it decodes, and the mapping keeps
    them resident until the file is closed: a scan of a ten-million-trace store's rollouts
    held 6.7 GB of them. The pages stay in the page cache, and the file never changes under
    a mapping (parts are written whole and renamed into place), so a batch still held reads
    the same bytes from the file again when it is next touched.

    >>> import tempfile
    >>> with tempfile.TemporaryFile() as f:
    ...     _ = f.write(b"x" * mmap.PAGESIZE)
    ...     f.flush()
    ...     m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    ...     before = m[:3]
    ...     release_mapped_pages(m)
    ...     (before, m[:3])
    (b'xxx', b'xxx')
    """
    if len(mapped) and hasattr(mmap, "MADV_DONTNEED"):
        mapped.madvise(mmap.MADV_DONTNEED)


def _check_part_table(path: Path, spec: schema.TableSpec, file_schema: pa.Schema) -> bool:
    """Raise if the part says it belongs to another table; return whether it is flagged as
    sorted by the keys with unique keys."""
    meta = file_schema.metadata or {}
    declared_table = meta.get(META_TABLE)
    if declared_table is not None and declared_table != spec.name.encode():
        raise UnreadablePart(
            path, f"part belongs to table {short_repr(declared_table.decode(errors='replace'))}"
        )
    return meta.get(META_SORTED) == b"keys"


def read_part(
    path: Path, spec: schema.TableSpec, fields: Sequence[str], *, full_check: bool = False
) -> tuple[pa.Table, bool]:
    """Read the columns ``fields`` of one part, conformed to the table's declared types.

    Returns the table and whether the part is sorted by keys with unique keys.
    Raises :class:`UnreadablePart` (truncated, corrupt, or incompatible) or FileNotFoundError.
    """
    reader, file_schema = open_reader(path, fields)
    _count_decoded(batches=reader.num_record_batches)
    try:
        table = reader.read_all()
        if full_check:
            table.validate(full=True)
        else:
            table.validate()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise UnreadablePart(path, f"corrupt Arrow data ({exc})") from None
    is_sorted = _check_part_table(path, spec, file_schema)
    return _conform(path, spec, table, fields), is_sorted


def part_batches(
    path: Path, spec: schema.TableSpec, fields: Sequence[str], *, keys_only: bool = False
) -> tuple[Iterator[pa.Table], bool]:
    """The columns ``fields`` of one part one record batch at a time, each conformed to the
    declared types as :func:`read_part` conforms the whole part, and whether the part is sorted
    by its keys: one pass over a part of any size holding one batch. Raises
    :class:`UnreadablePart` (at once for a part that cannot be opened or lacks a key column,
    while iterating for a corrupt batch) or FileNotFoundError. ``keys_only``: the batches are
    counted as key batches in :func:`read_stats` (a read of key columns, not of rows)."""
    (reader,), file_schema, mapped = _open_readers(path, [fields])
    is_sorted = _check_part_table(path, spec, file_schema)
    _conform(path, spec, file_schema.empty_table(), fields)

    def batches() -> Iterator[pa.Table]:
        for i in range(reader.num_record_batches):
            try:
                batch = reader.get_batch(i)
                batch.validate()
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise UnreadablePart(path, f"corrupt Arrow data ({exc})") from None
            _count_decoded(**{"key_batches" if keys_only else "batches": 1})
            yield _conform(path, spec, pa.Table.from_batches([batch]), fields)
            release_mapped_pages(mapped)

    return batches(), is_sorted


@dataclasses.dataclass(frozen=True)
class KeyFilter:
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


def read_part_keyed(
    path: Path, spec: schema.TableSpec, fields: Sequence[str], key_filter: KeyFilter
) -> tuple[pa.Table, bool]:
    """The rows of one part that ``key_filter`` selects, decoding only the batches that hold them.

    The same rows in the same order as :func:`read_part` then filtering: a batch's key columns
    are decoded first, and its other columns only if a row matches (a column is compressed per
    batch, so a batch is the smallest unit to decode). In a part sorted by its keys, the batches
    that may hold the first key column's wanted values are found by a binary search on the
    batches' key ranges; an unsorted part has each batch's key columns looked at.
    """
    (reader, keys_reader), file_schema, _ = _open_readers(path, [fields, key_filter.columns])
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
            raise UnreadablePart(path, f"corrupt Arrow data ({exc})") from None
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
        # each batch's keys let go once looked at: a filter that matches rows all over a big
        # part (a bucket of traces) would otherwise hold the part's whole key columns
        matched = keys_of(i).filter(key_filter.expression).num_rows
        keys.pop(i, None)
        if not matched:
            continue
        _count_decoded(batches=1)
        pieces.append(decode(reader, i, fields).filter(key_filter.expression))
    if not pieces:
        return pa.schema([spec.schema.field(n) for n in fields]).empty_table(), is_sorted
    return pa.concat_tables(pieces), is_sorted


def part_distinct(
    path: Path, spec: schema.TableSpec, column: str, key_filter: KeyFilter | None
) -> tuple[pa.Table, bool]:
    """The distinct values of ``column`` among the rows of one part that ``key_filter`` selects
    (every row without one), decoding one batch at a time: what is held is the distinct values
    and one batch, never the part's whole column."""
    fields = list(dict.fromkeys([column, *(key_filter.columns if key_filter else ())]))
    batches, is_sorted = part_batches(path, spec, fields, keys_only=True)
    found: list[pa.Array] = []
    held = 0
    for table in batches:
        if key_filter is not None:
            table = table.filter(key_filter.expression)
        found.append(pc.unique(table.column(column).combine_chunks()))
        held += len(found[-1])
        if len(found) > 1 and held > 4 * max(len(found[0]), 1 << 16):
            found = [pc.unique(pa.concat_arrays(found))]
            held = len(found[0])
    target = spec.schema.field(column)
    values = pc.unique(pa.concat_arrays(found)) if found else pa.array([], type=target.type)
    return pa.Table.from_arrays([values], schema=pa.schema([target])), is_sorted


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
                raise UnreadablePart(path, f"key field '{name}' is missing")
            arrays.append(pa.nulls(table.num_rows, target.type))
            continue
        column = table.column(index)
        if not column.type.equals(target.type):
            try:
                column = column.cast(target.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                raise UnreadablePart(
                    path,
                    f"field '{name}' holds {column.type}, which does not convert to {target.type}",
                ) from None
        arrays.append(column)
    out_schema = pa.schema([spec.schema.field(n) for n in fields])
    return pa.Table.from_arrays(arrays, schema=out_schema)


def part_rows(path: Path) -> int | None:
    """Row count of a part from its footer metadata (cheap), else by reading it.

    None if the part is unreadable."""
    try:
        reader, file_schema = open_reader(path, [])
        meta = file_schema.metadata or {}
        if META_ROWS in meta:
            return int(meta[META_ROWS])
        return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    except (UnreadablePart, FileNotFoundError, ValueError, pa.ArrowException, OSError):
        return None


# --- filters -------------------------------------------------------------------------------------


def filter_expressions(
    spec: schema.TableSpec, filters: Filters | None
) -> tuple[KeyFilter | None, pc.Expression | None]:
    """(the terms on key columns, expression on other columns) for ``filters``.

    Key-column terms can be applied to each part before deduplication, and decide which of a
    part's batches are decoded (:func:`read_part_keyed`); terms on other columns must wait
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
                spec.name, f"filter value {short_repr(wanted)} does not fit {dtype}", column=column
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
        else KeyFilter(key_expression, tuple(dict.fromkeys(key_columns)), first)
    )
    return key_filter, combine(other_terms)


def check_columns(spec: schema.TableSpec, columns: Sequence[str] | None) -> list[str]:
    if columns is None:
        return spec.columns
    if isinstance(columns, str):
        columns = [columns]
    for column in columns:
        if column not in spec.columns:
            raise schema.SchemaError(spec.name, "unknown column", column=str(column))
    return list(dict.fromkeys(columns))


def dedupe_and_sort(pieces: list[tuple[pa.Table, bool]], keys: Sequence[str]) -> pa.Table:
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
