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

:class:`Store` is the one door; the work is done in the modules beside this one, each of one
concern: ``file_safety`` (opening without links, temp files, fsync, the lock), ``layout`` (the
names above), ``parts`` (writing and reading part files, keyed reads), ``frames`` (the pandas
dtypes), ``manifest`` (the manifest and checksums), ``quarantine_file``, ``verify`` (verify,
adopt, quarantine a part) and ``export``.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import time
import uuid
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from legival_core.store import schema, verify
from legival_core.store.errors import NotPlainFile, StoreError, short_repr
from legival_core.store.export import export_tables, read_exported
from legival_core.store.file_safety import (
    TEMP_MAX_AGE_S,
    TEMP_PREFIX,
    FileLock,
    fsync_dir,
    is_plain_dir,
    is_plain_file,
    plain_dir,
    plain_file,
    temp_is_stale,
    temp_name,
)
from legival_core.store.frames import arrow_to_frame, pandas_dtypes, to_pandas
from legival_core.store.layout import (
    CORRUPT_DIR,
    LOCK_NAME,
    LOGS_DIR,
    MANIFEST_NAME,
    QUARANTINE_NAME,
    TABLES_DIR,
    disk_parts,
    part_seq,
    table_dirs,
)
from legival_core.store.manifest import (
    STORE_FORMAT,
    adopt_disk_parts,
    file_digest,
    jsonable,
    new_manifest,
    package_versions,
    read_manifest,
    reconcile,
    recount,
    table_entry,
    update_manifest,
    utc_now,
    write_manifest,
)
from legival_core.store.parts import (
    META_SORTED,
    META_TABLE,
    Filters,
    KeyFilter,
    OnCorrupt,
    UnreadablePart,
    check_columns,
    dedupe_and_sort,
    filter_expressions,
    merge_sorted_parts,
    open_reader,
    part_batches,
    part_distinct,
    part_metadata,
    read_part,
    read_part_keyed,
    sort_by_keys,
    unique_rows,
    write_ipc_pieces,
)
from legival_core.store.quarantine_file import add_entries
from legival_core.store.verify import StoreProblem

# The store's public names, wherever they are defined: ``from legival_core.store.store import
# Store, StoreError, ...`` is how the rest of the project reaches them.
__all__ = [
    "MANIFEST_NAME",
    "STORE_FORMAT",
    "TEMP_MAX_AGE_S",
    "OnCorrupt",
    "Store",
    "StoreError",
    "arrow_to_frame",
    "pandas_dtypes",
    "read_exported",
]

_STAGE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


_Opened = TypeVar("_Opened")


class _ManifestMoved(Exception):
    """Internal: a listed part vanished because the manifest changed meanwhile (a merge)."""


#: Parts a merge reads at once, each a record batch at a time (up to 64 MB decoded); a table
#: in more parts is merged a group at a time into sorted runs first, so a merge's memory does
#: not grow with the number of parts (a sharded run at ten million traces writes hundreds).
MERGE_FAN_IN = 16
#: What one round of a merge gives, about, shared among the parts it reads (a batch's worth).
_MERGE_ROUND_BYTES = 64 * 2**20


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
        self._lock = FileLock(self.path / LOCK_NAME)

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
        plain_dir(root / TABLES_DIR, create=True)
        plain_dir(root / LOGS_DIR, create=True)
        store = cls(root)
        with store._locked():
            if not (root / MANIFEST_NAME).exists():
                manifest = new_manifest(config)
                adopt_disk_parts(root, manifest)  # a tables/ folder without manifest: recover it
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
        config = jsonable(config)
        with self._locked():
            manifest = self._load_manifest()
            if manifest["config"] == config:
                return
            if not manifest["config"]:
                manifest["config"] = config
            else:
                manifest["provenance"].append(
                    {
                        "time": utc_now(),
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
        return read_manifest(self.path)

    def _save_manifest(self, manifest: dict[str, Any]) -> None:
        write_manifest(self.path, manifest)

    def _update_manifest(self, change: Callable[[dict[str, Any]], None]) -> None:
        """Load, reconcile with the disk, apply ``change`` and save; the caller holds the lock."""
        update_manifest(self.path, change)

    def _reconcile(self, manifest: dict[str, Any]) -> None:
        """Finish what a killed writer left (see :func:`~legival_core.store.manifest.reconcile`;
        the caller holds the lock)."""
        reconcile(self.path, manifest)

    # -- locking and temp files ---------------------------------------------------------------

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        """Exclusive advisory lock on ``<store>/.lock``; re-entrant within one thread."""
        return self._lock.held()

    def _cleanup_temp_files(self) -> list[Path]:
        """Delete temp files left by writers that crashed (caller holds the lock)."""
        now = time.time()
        removed = []
        folders = [self.path, *(self.path / TABLES_DIR / n for n in table_dirs(self.path))]
        for folder in folders:
            for path in folder.glob(TEMP_PREFIX + "*"):
                if is_plain_file(path) and temp_is_stale(path, now):
                    path.unlink(missing_ok=True)
                    removed.append(path)
        return removed

    # -- listing ------------------------------------------------------------------------------

    def _table_dir(self, name: str) -> Path:
        schema.spec(name)  # unknown names fail here, before any path is built from them
        return self.path / TABLES_DIR / name

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
        return sorted(listed, key=lambda item: (part_seq(item[0]), item[0].name))

    def _part_paths(self, name: str) -> list[Path]:
        """Part files of a table that :meth:`read` combines, in sequence order."""
        return [path for path, _ in self._listed(name)]

    def _next_seq(self, name: str, manifest: dict[str, Any]) -> int:
        folder = self._table_dir(name)
        seen = [part_seq(p) for p in disk_parts(self.path, name)]
        corrupt = folder / CORRUPT_DIR
        if is_plain_dir(corrupt):
            seen += [part_seq(p) for p in corrupt.iterdir()]
        entry = manifest["tables"].get(name, {})
        seen.append(int(entry.get("last_seq", 0)))
        seen += [part_seq(Path(p["file"])) for p in entry.get("parts", [])]
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
        arrow = sort_by_keys(table, spec.keys, arrow)
        _, _, _, final = self._add_part(table, arrow.schema, [arrow], arrow.num_rows, stage=stage)
        return final

    def _add_part(
        self,
        table: str,
        file_schema: pa.Schema,
        pieces: Iterable[pa.Table],
        rows: int,
        *,
        stage: str | None,
        merged_from: int | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Path]:
        """Add the ``rows`` rows of ``pieces`` (valid, of ``file_schema``, sorted by the keys
        across pieces) to ``table`` as one new part: serialised to a temp file outside the lock
        a piece at a time, then numbered, listed and renamed into place under it
        (:meth:`_land`). Returns the manifest as saved, the table's entry in it, the part's
        record and the part's path.

        A write lists ``stage`` among the table's stages and first deletes the temp files that
        crashed writers left. A merge passes ``merged_from`` (how many parts it compacts, kept
        in the record) and neither: it holds the lock from before its first read."""
        file_schema = file_schema.with_metadata(part_metadata(table, rows, stage))
        folder = self._writable_table_dir(table)
        temp = folder / temp_name(".arrow")
        try:
            write_ipc_pieces(temp, file_schema, pieces)
            digest = file_digest(temp)
            with self._locked():
                if merged_from is None:
                    self._cleanup_temp_files()
                manifest = self._load_manifest()
                self._reconcile(manifest)
                seq = self._next_seq(table, manifest)
                final = folder / f"part-{seq:08d}-{os.getpid()}-{uuid.uuid4().hex[:12]}.arrow"
                entry = table_entry(manifest, table)
                record: dict[str, Any] = {
                    "file": final.name,
                    "rows": rows,
                    "bytes": temp.stat().st_size,
                    "blake2b": digest,
                    "stage": stage,
                    "time": utc_now(),
                }
                if merged_from is not None:
                    record["merged_from"] = merged_from
                entry["parts"].append(record)
                if merged_from is None and stage and stage not in entry.setdefault("stages", []):
                    entry["stages"].append(stage)
                self._land(manifest, entry, record, temp, final)
        finally:
            temp.unlink(missing_ok=True)
        return manifest, entry, record, final

    def _writable_table_dir(self, name: str) -> Path:
        """``tables/<name>/``, made if absent; a link or a file there is refused (a write must
        not land outside the store)."""
        folder = self._table_dir(name)
        plain_dir(folder.parent, create=True)
        plain_dir(folder, create=True)
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
        recount(entry)
        self._save_manifest(manifest)
        os.replace(temp, final)
        fsync_dir(final.parent)
        del record["pending"]
        recount(entry)
        self._save_manifest(manifest)

    def record_stage(self, stage: str, **provenance: Any) -> None:
        """Append a provenance record: time, stage, the keyword arguments given (config, model
        ids and revisions, sampling, seeds, ...) and the versions of python/pyarrow/pandas/numpy/
        legival (merged with a ``versions`` mapping if one is passed)."""
        _check_stage_name(stage)
        given_versions = provenance.pop("versions", None) or {}
        record = {"time": utc_now(), "stage": stage, **jsonable(provenance)}
        record["versions"] = {**package_versions(), **jsonable(dict(given_versions))}
        with self._locked():
            self._update_manifest(lambda m: m["provenance"].append(record))

    def log_path(self, stage: str) -> Path:
        """``<store>/logs/<stage>.log`` (the folder is created).

        A ``logs`` folder or log file that is a symbolic link, a FIFO or a device raises
        :class:`NotPlainFile`: a stage's log is written inside the store or not at all."""
        _check_stage_name(stage)
        folder = self.path / LOGS_DIR
        plain_dir(folder, create=True)
        path = folder / f"{stage}.log"
        plain_file(path)
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
        with self._locked():
            add_entries(self.quarantine_path, entries, replacing=replacing, resolved=resolved)
        return self.quarantine_path

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
        wanted = check_columns(spec, columns)
        if on_corrupt not in ("raise", "skip"):
            raise ValueError(f"on_corrupt must be 'raise' or 'skip', not {on_corrupt!r}")
        key_filter, other_filter = filter_expressions(spec, filters)
        filter_columns = list((filters or {}).keys())
        needed = list(dict.fromkeys([*spec.keys, *wanted, *filter_columns]))
        pieces = self._read_listed(spec, needed, key_filter, on_corrupt)
        if not pieces:
            return pa.schema([spec.schema.field(c) for c in wanted]).empty_table()
        result = dedupe_and_sort(pieces, spec.keys)
        if other_filter is not None:
            result = result.filter(other_filter)
        return result.select(wanted)

    def _read_listed(
        self,
        spec: schema.TableSpec,
        needed: list[str],
        key_filter: KeyFilter | None,
        on_corrupt: OnCorrupt,
        *,
        distinct: str | None = None,
    ) -> list[tuple[pa.Table, bool]]:
        """:meth:`_read_pieces` of the parts the manifest lists now; a merge that removes
        parts between the manifest's reading and a part's opening makes it read again."""
        for attempt in range(8):
            manifest = self._load_manifest()
            try:
                return self._read_pieces(
                    spec, needed, key_filter, on_corrupt, manifest, distinct=distinct
                )
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
        key_filter: KeyFilter | None,
        on_corrupt: OnCorrupt,
        manifest: Mapping[str, Any],
        *,
        distinct: str | None = None,
    ) -> list[tuple[pa.Table, bool]]:
        """Each listed part's rows (``distinct``: the distinct values of that column only)."""

        def read(path: Path) -> tuple[pa.Table, bool]:
            if distinct is not None:
                return part_distinct(path, spec, distinct, key_filter)
            if key_filter is None:
                return read_part(path, spec, needed)
            return read_part_keyed(path, spec, needed, key_filter)

        pieces = []
        for _, (piece, is_sorted) in self._opened_parts(spec, manifest, on_corrupt, read):
            if piece.num_rows:
                pieces.append((piece, is_sorted))
        return pieces

    def _opened_parts(
        self,
        spec: schema.TableSpec,
        manifest: Mapping[str, Any],
        on_corrupt: OnCorrupt,
        open_part: Callable[[Path], _Opened],
    ) -> Iterator[tuple[int, _Opened]]:
        """``open_part`` of each part ``manifest`` lists, with its position in sequence order,
        from real folders inside the store only. A part that cannot be read, or has vanished
        while the manifest still lists it, is reported through :meth:`_unreadable` (skipped
        or raised, by ``on_corrupt``); one that vanished because a merge rewrote the manifest
        raises :class:`_ManifestMoved`, for the caller to read the new listing."""
        listed = self._listed(spec.name, manifest)
        folder = self._table_dir(spec.name)
        try:
            if listed:
                plain_dir(folder.parent)
                plain_dir(folder)
        except NotPlainFile as exc:
            self._unreadable(UnreadablePart(exc.path, exc.reason), on_corrupt)
            return
        for position, (path, _) in enumerate(listed):
            try:
                opened = open_part(path)
            except FileNotFoundError:
                if self._listed(spec.name) != self._listed(spec.name, manifest):
                    raise _ManifestMoved() from None
                gone = UnreadablePart(path, f"listed in {MANIFEST_NAME} but missing on disk")
                self._unreadable(gone, on_corrupt)
                continue
            except UnreadablePart as exc:
                self._unreadable(exc, on_corrupt)
                continue
            yield position, opened

    @staticmethod
    def _unreadable(exc: UnreadablePart, on_corrupt: OnCorrupt) -> None:
        """Warn (``on_corrupt="skip"``) or raise the :class:`StoreError` naming the file."""
        if on_corrupt == "skip":
            # Attributed to the caller of read/read_arrow: through _opened_parts,
            # _read_pieces, _read_listed and read_arrow.
            warnings.warn(
                f"skipping unreadable part {exc.path}: {exc.reason}", RuntimeWarning, stacklevel=6
            )
            return
        raise StoreError(
            f"{exc.path}: {exc.reason}. `python -m precompute verify --store DIR --quarantine` "
            "(Store.verify, Store.quarantine_part) moves it aside; the stage that wrote it then "
            "redoes its rows"
        ) from None

    def scan(
        self, table: str, columns: Sequence[str] | None = None
    ) -> Iterator[tuple[int, Iterator[pa.Table], bool]]:
        """Every part of ``table`` the manifest lists now, in sequence order, as ``(its
        position, its record batches of ``columns`` and the key columns, whether it is sorted
        by its keys)``: one pass over a table of any size, one batch held at a time. Rows are
        as stored (not deduplicated across parts): :func:`dedupe_and_sort` of a selection's
        pieces, one per part in this order, gives the rows :meth:`read_arrow` gives for that
        selection. An unreadable or vanished part raises the :class:`StoreError` naming it."""
        spec = schema.spec(table)
        needed = list(dict.fromkeys([*spec.keys, *check_columns(spec, columns)]))

        def checked(batches: Iterator[pa.Table]) -> Iterator[pa.Table]:
            try:
                yield from batches
            except UnreadablePart as exc:
                self._unreadable(exc, "raise")

        def opened(path: Path) -> tuple[Iterator[pa.Table], bool]:
            return part_batches(path, spec, needed)

        try:
            for position, (batches, is_sorted) in self._opened_parts(
                spec, self._load_manifest(), "raise", opened
            ):
                yield position, checked(batches), is_sorted
        except _ManifestMoved:
            raise StoreError(
                f"{self.manifest_path}: table '{spec.name}' was merged while it was scanned; "
                "scan it again"
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
        return to_pandas(self.read_arrow(table, columns, filters, on_corrupt=on_corrupt))

    def rows_per(self, table: str, column: str, *, on_corrupt: OnCorrupt = "raise") -> pd.Series:
        """How many rows of ``table`` (the latest part winning) hold each non-null value of
        ``column``: a Series indexed by the value, named ``count`` (as pandas' value_counts).

        Counted in Arrow: the inspector's steps per trace come out as 100,000 numbers instead
        of 1.1M step ids turned into pandas strings, counted there and cached."""
        spec = schema.spec(table)
        (name,) = check_columns(spec, [column])
        found = self.read_arrow(table, [name], on_corrupt=on_corrupt).column(name)
        counts = pc.value_counts(found)
        values, numbers = counts.field("values"), counts.field("counts")
        present = pc.is_valid(values)
        values, numbers = values.filter(present), numbers.filter(present)
        index = to_pandas(pa.table({name: values}))[name]
        return pd.Series(
            numbers.to_numpy(zero_copy_only=False).astype(np.int64),
            index=pd.Index(index, name=name),
            name="count",
        )

    def key_values(
        self,
        table: str,
        column: str,
        filters: Filters | None = None,
        *,
        on_corrupt: OnCorrupt = "raise",
    ) -> pa.Array:
        """The distinct values of the key column ``column`` among the rows of ``table`` that
        ``filters`` (on key columns only) selects, unordered, read one record batch at a time:
        the memory held is the distinct values and one batch, never a whole column (the metrics
        stage asks which of a million traces have any of 37M rollouts this way).

        A key present in any listed part is present in :meth:`read` (a later part replaces a
        row, never removes it), so no deduplication is needed; a filter on another column
        would have to wait for it, and is refused.
        """
        spec = schema.spec(table)
        (name,) = check_columns(spec, [column])
        if name not in spec.keys:
            raise ValueError(f"key_values: {name!r} is not a key column of table {table!r}")
        key_filter, other_filter = filter_expressions(spec, filters)
        if other_filter is not None:
            raise ValueError(f"key_values: filters on key columns of {table!r} only")
        pieces = self._read_listed(spec, [name], key_filter, on_corrupt, distinct=name)
        if not pieces:
            return pa.array([], type=spec.schema.field(name).type)
        return pc.unique(pa.concat_arrays([p.column(0).combine_chunks() for p, _ in pieces]))

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
        key_columns = check_columns(spec, keys if keys is not None else spec.keys)
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
            found = unique_rows(found, key_columns)  # shrink before the slow Python conversion
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
                    _, file_schema = open_reader(old[0], [])
                    meta = file_schema.metadata or {}
                    if meta.get(META_SORTED) == b"keys" and meta.get(META_TABLE) == name.encode():
                        continue
                # Landed beside the old parts first: it supersedes every row of theirs, so
                # reading old + merged gives the same rows as either alone.
                with self._merged_rows(name) as (file_schema, pieces, rows):
                    manifest, entry, record, final = self._add_part(
                        name, file_schema, pieces, rows, stage="merge", merged_from=len(old)
                    )
                folder = final.parent
                retired = [p["file"] for p in entry["parts"] if p is not record]
                entry["parts"] = [record]
                # The old files are deleted after the manifest drops them; a kill in between
                # leaves them named here, and the next writer deletes them.
                entry["retired"] = retired
                recount(entry)
                manifest["provenance"].append(
                    {
                        "time": utc_now(),
                        "stage": "merge",
                        "table": name,
                        "parts": len(old),
                        "rows": rows,
                    }
                )
                self._save_manifest(manifest)
                for file in retired:
                    if is_plain_file(folder / file):
                        (folder / file).unlink(missing_ok=True)
                fsync_dir(folder)

    @contextlib.contextmanager
    def _merged_rows(self, name: str) -> Iterator[tuple[pa.Schema, Iterable[pa.Table], int]]:
        """The rows :meth:`read_arrow` gives for table ``name`` (its schema, the rows, their
        count), for :meth:`merge`. Parts sorted by their keys (every part this class writes)
        are merged a batch of each at a time (:func:`merge_sorted_parts`), counted in a first
        pass over their key columns, so a merge holds batches, not the table; more than
        :data:`MERGE_FAN_IN` parts are first merged a group at a time into sorted runs (temp
        files in the table's folder, deleted at the end), as an external sort does. A part
        without the flag (written by hand, or adopted) makes it read the table whole."""
        spec = schema.spec(name)
        columns = check_columns(spec, None)
        file_schema = pa.schema([spec.schema.field(c) for c in columns])
        if not all(is_sorted for _, _, is_sorted in self.scan(name, spec.keys)):
            whole = self.read_arrow(name)
            yield file_schema, [whole], whole.num_rows
            return
        runs: list[Path] = []

        def sources(wanted: list[str]) -> list[Iterator[pa.Table]]:
            if not runs:
                return [batches for _, batches, _ in self.scan(name, wanted)]
            return [self._run_batches(run, spec, wanted) for run in runs]

        def merged(wanted: list[str]) -> Iterator[pa.Table]:
            parts = sources(wanted)
            for piece in merge_sorted_parts(parts, spec.keys, round_bytes=_MERGE_ROUND_BYTES):
                yield piece.select(wanted)

        run_schema = file_schema.with_metadata({META_TABLE: name.encode(), META_SORTED: b"keys"})
        try:
            while len(parts := sources(columns)) > MERGE_FAN_IN:
                level = []
                for first in range(0, len(parts), MERGE_FAN_IN):
                    level.append(self._table_dir(name) / temp_name(".arrow"))
                    group = parts[first : first + MERGE_FAN_IN]
                    pieces = merge_sorted_parts(group, spec.keys, round_bytes=_MERGE_ROUND_BYTES)
                    write_ipc_pieces(level[-1], run_schema, (p.select(columns) for p in pieces))
                for run in runs:  # the level before, now merged into this one
                    run.unlink(missing_ok=True)
                runs[:] = level
            count = sum(piece.num_rows for piece in merged(list(spec.keys)))
            yield file_schema, merged(columns), count
        finally:
            for run in runs:
                run.unlink(missing_ok=True)

    def _run_batches(
        self, path: Path, spec: schema.TableSpec, columns: list[str]
    ) -> Iterator[pa.Table]:
        """The batches of one of :meth:`_merged_rows`' sorted runs; an unreadable one raises
        the :class:`StoreError` naming it."""
        try:
            batches, _ = part_batches(path, spec, columns)
            yield from batches
        except UnreadablePart as exc:
            self._unreadable(exc, "raise")

    def verify(self) -> list[StoreProblem]:
        """Check every part and the manifest; return the problems found (empty list: all good).

        Each problem is a :class:`~legival_core.store.verify.StoreProblem`: its text starts
        with the path it is about, kept apart as ``.path``, which :meth:`quarantine_part` accepts:
        truncated or corrupt parts, parts whose columns do not fit the schema, parts with repeated
        keys or unsorted rows despite their flag, row counts that differ from the part's footer,
        content that differs from the checksum in the manifest, parts listed without a checksum,
        parts the manifest lists but the disk lacks, part files the manifest does not list (never
        read: added by hand, or forged), symbolic links, FIFOs and other special files anywhere
        in the store (never opened), folders of unknown tables and stray files. Temp files of
        writers in progress, and the files of a merge that its writer had no time to delete, are
        not problems.
        """
        return verify.verify(self.path)

    def adopt(self, path: str | os.PathLike[str], reason: str | None = None) -> None:
        """List a part file that is in its table's folder but not in the manifest, with its
        rows, size and checksum: the explicit act of trusting a file :meth:`verify` reported
        as unlisted (one a hand made, or that a writer from before manifest-first listing left
        behind). A link, a FIFO, a part of no table or one the manifest lists is refused."""
        verify.adopt(self.path, self._lock, path, reason)

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
        return verify.quarantine_part(self.path, self._lock, path, reason)

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
        return export_tables(self, out_dir, fmt, tables)


def _check_stage_name(stage: str) -> None:
    if not isinstance(stage, str) or not _STAGE_NAME_RE.match(stage):
        raise ValueError(
            f"stage name {short_repr(stage)} must be letters, digits, '_', '.', '-' (at most 128)"
        )
