"""The metrics stage's per-row inputs split into its buckets in one pass over each table.

A bucket is a hash of problem ids, so its traces are spread over every part of ``rollouts``,
``similarity`` and ``judgments``: a keyed read of one bucket decodes every batch of every part
and keeps a sixteenth of it, and sixteen buckets decode each table sixteen times (at a million
traces that was 43% of the bucketed part of the stage, about 200 s). Here each table is read
once, batch by batch (:meth:`legival_core.store.store.Store.scan`), and every row is appended
to its bucket's scratch Arrow file, tagged with the position of the part it came from; a
bucket's rows are then read back from its own file and combined per part as the store
combines a keyed read's pieces (:func:`legival_core.store.parts.dedupe_and_sort`: the latest
part wins per key, sorted by the keys), so the frame is the one
``store.read(table, columns, filters={"trace_id": ids})`` gives.

What is held at once is one batch while splitting and one bucket's rows while reading back;
the scratch files (compressed) live in a temporary folder removed when the reader closes. A
stage killed outright (SIGKILL, out of memory) cannot remove it, so the folder is named after
its host and process, and the next reader removes those of this host's processes that are gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from legival_core.store import schema
from legival_core.store.file_safety import HOST, is_plain_dir, owner_is_gone
from legival_core.store.frames import to_pandas
from legival_core.store.parts import dedupe_and_sort
from legival_core.store.store import Store

__all__ = [
    "PART_COLUMN",
    "SCRATCH_PREFIX",
    "BucketFile",
    "BucketFiles",
    "IdPositions",
    "SpilledBuckets",
    "remove_stale_scratch",
    "scratch_folder",
    "spilled_bucket_reader",
]

#: The scratch files' extra column: the position of the part a row came from.
PART_COLUMN = "__legival_part__"
_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
#: The batches' bytes held before every bucket's rows of them are written: what the split
#: holds beyond the batch being read.
PENDING_BYTES = 64 << 20
#: The scratch folders' names start with this, then ``<host>-<pid>-``: a folder of this host
#: whose process is gone is a killed stage's (at ten million traces about 11 GB).
SCRATCH_PREFIX = "legival-buckets-"
_SCRATCH_RE = re.compile(rf"^{SCRATCH_PREFIX}(?P<host>[A-Za-z0-9.]*)-(?P<pid>\d+)-[a-z0-9_]+$")


def remove_stale_scratch(folder: Path) -> list[str]:
    """Remove the scratch folders in ``folder`` that a process of this host left and that is
    gone; return their names. Another host's folders are kept (whether their process lives
    cannot be seen from here), as is one whose process id is alive again (kept, never lost).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     (Path(tmp) / f"{SCRATCH_PREFIX}{HOST}-{os.getpid()}-abc").mkdir()
    ...     remove_stale_scratch(Path(tmp))
    []
    """
    removed = []
    for path in sorted(folder.glob(f"{SCRATCH_PREFIX}*")):
        match = _SCRATCH_RE.match(path.name)
        if (
            not match
            or not is_plain_dir(path)
            or not owner_is_gone(match["host"], int(match["pid"]))
        ):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path.name)
    return removed


@contextlib.contextmanager
def scratch_folder(folder: str | Path | None = None) -> Iterator[Path]:
    """A new folder in ``folder`` (default: the system's temporary folder) that only this
    user can open, named after this host and process and removed on exit; a killed stage's
    scratch found there is removed first (:func:`remove_stale_scratch`).

    >>> with scratch_folder() as scratch:
    ...     scratch.name.startswith(f"{SCRATCH_PREFIX}{HOST}-{os.getpid()}-"), scratch.is_dir()
    (True, True)
    >>> scratch.exists()
    False
    """
    parent = Path(folder) if folder is not None else Path(tempfile.gettempdir())
    remove_stale_scratch(parent)
    prefix = f"{SCRATCH_PREFIX}{HOST}-{os.getpid()}-"
    with tempfile.TemporaryDirectory(prefix=prefix, dir=parent) as scratch:
        yield Path(scratch)


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each run of equal adjacent values (none for no value).

    >>> _runs(np.array([4, 4, 7, 4]))
    [(0, 2), (2, 3), (3, 4)]
    """
    if not len(values):
        return []
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    ends = np.r_[starts[1:], len(values)]
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


#: Ids hashed this many at a time while the lookup is built (bounds the text copied at once).
_HASH_CHUNK = 1 << 20


def _text_hashes(ids: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each id's text (``ids``: an array of ``str``; pandas' ``hash_array``:
    equal texts, equal hashes), computed :data:`_HASH_CHUNK` ids at a time."""
    if not len(ids):
        return np.empty(0, np.uint64)
    return np.concatenate(
        [
            pd.util.hash_array(
                np.asarray(ids[start : start + _HASH_CHUNK], dtype=object), categorize=False
            )
            for start in range(0, len(ids), _HASH_CHUNK)
        ]
    )


class IdPositions:
    """Each id's position among ``ids`` (unique text), -1 for an id not among them: the
    ``get_indexer`` of a pandas index of ``ids``, without its hash table.

    pandas builds that table from one Python string per id: 1.3 GB at ten million trace ids,
    held for the whole metrics stage. Here the ids are kept as the one text column they are,
    beside their 64-bit hashes sorted (8 bytes an id) and the positions in that order (4 or 8
    bytes). A query's hashes are searched in the sorted ones, and every hit is confirmed by
    comparing its text, so two texts sharing a hash never match. Should two of ``ids`` share
    a hash (about one chance in 370,000 at ten million ids), the lookup is pandas' own.

    >>> ids = IdPositions(pd.Index(["t1", "t2", "t3"], dtype="str"))
    >>> ids.positions(["t3", "x", "t1"]).tolist()
    [2, -1, 0]
    """

    def __init__(self, ids: pd.Index) -> None:
        text = ids if isinstance(ids.dtype, pd.StringDtype) else ids.astype(str)
        self._text = text.array
        self._index: pd.Index | None = None
        hashes = _text_hashes(self._text)
        order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[order]
        self._order = order.astype(np.int32 if len(order) < 2**31 else np.int64)
        if len(hashes) > 1 and (self._hashes[1:] == self._hashes[:-1]).any():
            self._index = pd.Index(text)  # two ids share a hash: pandas' table instead

    def positions(self, wanted: Sequence[str] | np.ndarray) -> np.ndarray:
        """The position of each of ``wanted`` (text) among the ids, -1 where it is absent."""
        query = np.asarray(wanted, dtype=object)
        if self._index is not None:
            return self._index.get_indexer(pd.Index(query, dtype=self._index.dtype)).astype(
                np.int64
            )
        found = np.full(len(query), -1, dtype=np.int64)
        if not len(query) or not len(self._hashes):
            return found
        hashes = _text_hashes(query)
        # searched in increasing order: each search starts where the last one ended
        by_hash = np.argsort(hashes)
        at = np.empty(len(hashes), dtype=np.int64)
        at[by_hash] = np.searchsorted(self._hashes, hashes[by_hash])
        np.minimum(at, len(self._hashes) - 1, out=at)
        hit = np.flatnonzero(self._hashes[at] == hashes)
        candidates = self._order[at[hit]].astype(np.int64)
        same = np.asarray(self._text.take(candidates), dtype=object) == query[hit]
        found[hit[same]] = candidates[same]
        return found


class _SpilledTable:
    """One table's rows split by bucket into ``folder``, read back one bucket at a time."""

    def __init__(
        self,
        store: Store,
        table: str,
        columns: Sequence[str],
        trace_ids: IdPositions,
        buckets: np.ndarray,
        folder: Path,
    ) -> None:
        self.table = table
        self.keys = schema.spec(table).keys
        self.columns = list(columns)
        self.sorted: dict[int, bool] = {}
        self.files: dict[int, Path] = {}
        self._trace_ids = trace_ids
        self._buckets = buckets
        self._folder = folder
        self._writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}
        # each bucket's rows of the batches read since the last flush (slices of them)
        self._pending: dict[int, list[pa.Table]] = {}
        self._pending_bytes = 0
        try:
            for position, batches, is_sorted in store.scan(table, columns):
                self.sorted[position] = is_sorted
                for batch in batches:
                    self._split(batch, position)
            self._flush()
        finally:
            for writer in self._writers.values():
                writer.close()
            self._writers.clear()

    def _split(self, batch: pa.Table, position: int) -> None:
        """Append each row of ``batch`` (from the part at ``position``) to its bucket's file."""
        ids = batch.column("trace_id").combine_chunks()
        if not ids.type.equals(pa.string()):
            ids = ids.cast(pa.string())
        # Each batch's distinct ids are looked up in the traces' index, whose hash table is
        # built once: ``pc.index_in`` builds one of every trace id per batch, which made the
        # split grow with the square of the store (28 of its 30 s on similarity at a million
        # traces, four times that at two million).
        encoded = pc.dictionary_encode(ids)
        found = self._trace_ids.positions(encoded.dictionary.to_numpy(zero_copy_only=False))
        # a null id (code -1) takes the -1 appended last: like a trace outside ``traces``
        # (-1 from the lookup), it belongs to no bucket
        found = np.append(found, -1)
        codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        where = found[codes]
        row_bucket = np.where(where >= 0, self._buckets[np.maximum(where, 0)], -1)
        if not len(row_bucket):
            return
        order = np.argsort(row_bucket, kind="stable")  # a part's order kept within a bucket
        in_order = row_bucket[order]
        tagged = batch.append_column(PART_COLUMN, pa.array(np.full(len(where), position, np.int32)))
        # one take per batch, then a zero-copy slice per bucket: a take per bucket and batch
        # was 667k takes at ten million traces (165 buckets), a minute of the split
        grouped = tagged.take(pa.array(order))
        for start, end in _runs(in_order):
            bucket = int(in_order[start])
            if bucket >= 0:
                self._pending.setdefault(bucket, []).append(grouped.slice(start, end - start))
        self._pending_bytes += grouped.nbytes
        if self._pending_bytes >= PENDING_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Write each bucket's pending rows to its file as one record batch. Written a batch at
        a time, the files took one tiny record batch per bucket and batch read (a few hundred
        rows each at ten million traces), and the split grew with the square of the store."""
        for bucket, pieces in sorted(self._pending.items()):
            rows = pa.concat_tables(pieces).combine_chunks()
            if bucket not in self._writers:
                self.files[bucket] = self._folder / f"{self.table}-{bucket}.arrow"
                self._writers[bucket] = pa.ipc.new_file(
                    self.files[bucket], rows.schema, options=_OPTIONS
                )
            self._writers[bucket].write_table(rows)
        self._pending.clear()
        self._pending_bytes = 0

    def rows(self, bucket: int) -> pa.Table | None:
        """The bucket's rows as a keyed read of its traces gives them (None: no row)."""
        return self.bucket_file(bucket).rows()

    def bucket_file(self, bucket: int) -> BucketFile:
        """The bucket's file of this table and how to read it back, in a value another
        process of this machine can read it with (:class:`BucketFile`)."""
        return BucketFile(
            self.files.get(bucket), dict(self.sorted), tuple(self.keys), tuple(self.columns)
        )


@dataclass(frozen=True)
class BucketFile:
    """One table's rows of one bucket in the scratch folder (``path`` None: it has none), with
    what combining them as a keyed read needs: whether each part (by position) was stored
    sorted, the table's keys and the columns read. Plain values: a worker process of this
    machine reads the bucket itself instead of being sent its rows."""

    path: Path | None
    sorted_parts: dict[int, bool]
    keys: tuple[str, ...]
    columns: tuple[str, ...]

    def rows(self) -> pa.Table | None:
        """The rows as a keyed read of the bucket's traces gives them (None: no row)."""
        if self.path is None:
            return None
        with pa.memory_map(str(self.path)) as source:
            spilled = pa.ipc.open_file(source).read_all()
        parts = spilled.column(PART_COLUMN).to_numpy()
        plain = spilled.drop_columns([PART_COLUMN])
        pieces = [
            (plain.slice(start, end - start), self.sorted_parts[int(parts[start])])
            for start, end in _runs(parts)
        ]
        return dedupe_and_sort(pieces, list(self.keys)).select(list(self.columns))


class SpilledBuckets:
    """A bucket reader (``(table, trace ids) -> rows``) over the tables of ``columns`` split
    into the buckets of ``bucket_of_trace`` (:func:`spilled_bucket_reader` makes it)."""

    def __init__(
        self,
        store: Store,
        bucket_of_trace: pd.Series,
        columns: Mapping[str, Sequence[str]],
        fallback: Callable[[str, Sequence[str]], pd.DataFrame],
        scratch: Path,
    ) -> None:
        self._store = store
        self._columns = columns
        self._fallback = fallback
        self._scratch = scratch
        self._trace_ids = IdPositions(bucket_of_trace.index)  # unique: the traces table's key
        self._buckets = bucket_of_trace.to_numpy(dtype=np.int64)
        self._sizes = pd.Series(self._buckets).value_counts().to_dict()
        self._spilled: dict[str, _SpilledTable] = {}
        self._empty: dict[str, pd.DataFrame] = {}
        # the last request's ids and their bucket: a bucket's tables are asked for with the
        # same ids one after another, and a lookup of 60k ids among ten million takes 0.08 s
        self._last: list[tuple[tuple[str, ...], int | None]] = []

    def __call__(self, table: str, wanted: Sequence[str]) -> pd.DataFrame:
        if table not in self._columns or not self._store.has(table) or not len(wanted):
            return self._fallback(table, wanted)
        first = self._bucket_of(tuple(wanted))
        if first is None:
            return self._fallback(table, wanted)
        rows = self._table(table).rows(int(first))
        if rows is None or rows.num_rows == 0:  # the keyed read's empty frame and dtypes
            return self._fallback(table, [])
        return to_pandas(rows)

    def files_of(self, bucket: int) -> BucketFiles:
        """Every table's rows of ``bucket`` as files (each table split first if it is not
        yet), with the frames the reader gives for a table the bucket has no rows of: what
        a worker process of this machine needs to read the bucket as this reader would."""
        files: dict[str, BucketFile] = {}
        empty: dict[str, pd.DataFrame] = {}
        for table in self._columns:
            if self._store.has(table):
                files[table] = self._table(table).bucket_file(bucket)
            # the fallback's frame for no ids (for an absent table: its empty frame)
            if table not in self._empty:
                self._empty[table] = self._fallback(table, [])
            empty[table] = self._empty[table]
        return BucketFiles(bucket, files, empty)

    def _table(self, table: str) -> _SpilledTable:
        if table not in self._spilled:
            self._spilled[table] = _SpilledTable(
                self._store,
                table,
                self._columns[table],
                self._trace_ids,
                self._buckets,
                self._scratch,
            )
        return self._spilled[table]

    def _bucket_of(self, wanted: tuple[str, ...]) -> int | None:
        """The bucket whose traces are exactly ``wanted`` (None: no such bucket)."""
        if self._last and self._last[0][0] == wanted:
            return self._last[0][1]
        self._last.clear()
        self._last.append((wanted, self._one_bucket(wanted)))
        return self._last[0][1]

    def _one_bucket(self, wanted: tuple[str, ...]) -> int | None:
        # An id that is not text matches no trace (5 is not "5"): no bucket's, as any id
        # outside the buckets. The rest are looked up by IdPositions, built once: nothing of
        # the store's size is converted or hashed per read (a read then grows with the store).
        if not all(isinstance(one, str) for one in wanted):
            return None
        found = self._trace_ids.positions(wanted)
        if (found < 0).any():
            return None
        mine = self._buckets[found]
        first = int(mine[0])
        if len(wanted) != self._sizes.get(first, -1) or not (mine == first).all():
            return None
        return first


@dataclass(frozen=True)
class BucketFiles:
    """One bucket's rows of every split table, as :meth:`SpilledBuckets.files_of` gives
    them: read in the process that computes the bucket."""

    bucket: int
    files: dict[str, BucketFile]
    empty: dict[str, pd.DataFrame]

    def read(self, table: str) -> pd.DataFrame:
        """The bucket's rows of ``table``, as :class:`SpilledBuckets` reads them."""
        found = self.files.get(table)
        rows = found.rows() if found is not None else None
        if rows is None or rows.num_rows == 0:
            return self.empty[table]
        return to_pandas(rows)


@contextlib.contextmanager
def spilled_bucket_reader(
    store: Store,
    bucket_of_trace: pd.Series,
    columns: Mapping[str, Sequence[str]],
    fallback: Callable[[str, Sequence[str]], pd.DataFrame],
    folder: str | Path | None = None,
) -> Iterator[SpilledBuckets]:
    """A bucket reader (``(table, trace ids) -> rows``) that splits each of the tables of
    ``columns`` into the buckets of ``bucket_of_trace`` (trace id -> bucket) the first time one
    of its buckets is asked for, then serves every bucket from its scratch file.

    Asked for exactly one bucket's traces it gives what ``fallback`` (the store's keyed read)
    would; asked for anything else (no trace, traces of several buckets, a table not in
    ``columns`` or not in the store) it calls ``fallback``. The scratch folder is created in
    ``folder`` (default: the system's temporary folder) and removed on exit; a killed stage's
    scratch found there is removed first (:func:`remove_stale_scratch`)."""
    with scratch_folder(folder) as scratch:
        yield SpilledBuckets(store, bucket_of_trace, columns, fallback, scratch)
