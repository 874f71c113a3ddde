"""Checking a results store and acting on what the check finds.

:func:`verify` reads every part in full and compares it with the manifest (checksum, size, row
count, keys, sort flag) and names every file a reader would not trust: unlisted parts, links,
FIFOs, stray files. Its two remedies: :func:`adopt` lists an unlisted part (the explicit act of
trusting it), :func:`quarantine_part` moves a file aside and drops it from the manifest, so the
stage that wrote it redoes its rows. :class:`~legival_core.store.store.Store` offers all three.
"""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

from legival_core.store import schema
from legival_core.store.errors import StoreError, short_repr
from legival_core.store.file_safety import (
    TEMP_PREFIX,
    FileLock,
    file_kind,
    fsync_dir,
    is_plain_dir,
    is_plain_file,
    plain_dir,
)
from legival_core.store.layout import (
    CORRUPT_DIR,
    LOCK_NAME,
    LOGS_DIR,
    MANIFEST_NAME,
    PART_RE,
    TABLES_DIR,
)
from legival_core.store.manifest import (
    file_digest,
    read_manifest,
    recount,
    table_entry,
    update_manifest,
    utc_now,
)
from legival_core.store.parts import (
    META_ROWS,
    UnreadablePart,
    open_reader,
    part_rows,
    read_part,
    sort_by_keys,
)

__all__ = ["StoreProblem", "adopt", "quarantine_part", "verify"]


class StoreProblem(str):
    """One problem :func:`verify` found: its text (the path it is about, a colon, what is
    wrong), with that path kept apart as ``path`` (what :func:`quarantine_part` takes), so
    that no caller has to cut it back out of a text whose names may hold colons.

    >>> problem = StoreProblem.about(Path("/s/tables/traces/x: y"), "not a part file")
    >>> problem, problem.path.name
    ('/s/tables/traces/x: y: not a part file', 'x: y')
    """

    path: Path

    @classmethod
    def about(cls, path: Path | str, reason: str) -> StoreProblem:
        """The problem ``reason`` with the file or folder ``path``."""
        return cls.told(path, f"{path}: {reason}")

    @classmethod
    def told(cls, path: Path | str, text: str) -> StoreProblem:
        """A problem about ``path`` whose whole text is ``text`` (an error's message)."""
        problem = cls(text)
        problem.path = Path(path)
        return problem


def verify(store_path: Path) -> list[StoreProblem]:
    """The problems :meth:`Store.verify <legival_core.store.store.Store.verify>` reports for the
    store at ``store_path`` (an empty list: all good)."""
    problems: list[StoreProblem] = []
    try:
        manifest: dict[str, Any] | None = read_manifest(store_path)
    except StoreError as exc:
        problems.append(StoreProblem.told(store_path / MANIFEST_NAME, str(exc)))
        manifest = None
    problems += _special_files(store_path)
    tables_root = store_path / TABLES_DIR
    if is_plain_dir(tables_root):
        for folder in sorted(tables_root.iterdir()):
            if not (is_plain_dir(folder) or is_plain_file(folder)):
                continue  # a link or special file: reported above
            if not is_plain_dir(folder):
                problems.append(StoreProblem.about(folder, f"unexpected file in {TABLES_DIR}/"))
            elif folder.name not in schema.TABLES:
                problems.append(StoreProblem.about(folder, "folder of an unknown table"))
            else:
                problems += _verify_table(folder, manifest)
    if manifest is not None and (is_plain_dir(tables_root) or not os.path.lexists(tables_root)):
        # (A tables/ that is a file or a link is one problem, named above.)
        for name, entry in sorted(manifest["tables"].items()):
            folder = tables_root / name
            if not (is_plain_dir(tables_root) and is_plain_dir(folder)):
                if any(not p.get("pending") for p in entry["parts"]) and not os.path.lexists(
                    folder
                ):
                    problems.append(
                        StoreProblem.about(
                            folder,
                            f"listed in {MANIFEST_NAME} but missing on disk "
                            f"({entry.get('rows')} rows lost)",
                        )
                    )
                continue  # a link, file or special file in its place: reported above
            for part in entry["parts"]:
                path = folder / part["file"]
                if not os.path.lexists(path) and not part.get("pending"):
                    problems.append(
                        StoreProblem.about(
                            path,
                            f"listed in {MANIFEST_NAME} but missing on disk "
                            f"({part.get('rows')} rows lost)",
                        )
                    )
    return problems


def _special_files(store_path: Path) -> list[StoreProblem]:
    """Every symbolic link, FIFO, socket or device in the places a store reads or writes
    (its top folder, ``logs/``, ``tables/`` and each table folder), and plain files where a
    folder belongs; none of them is ever opened or followed."""
    expected_dirs = {TABLES_DIR, LOGS_DIR, CORRUPT_DIR}
    problems: list[StoreProblem] = []

    def check(path: Path, want_dir: bool) -> bool:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return False
        if stat.S_ISLNK(mode) or not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            problems.append(
                StoreProblem.about(
                    path,
                    f"is {file_kind(mode)}; the store never opens or follows it "
                    "(Store.quarantine_part moves it aside)",
                )
            )
            return False
        if want_dir and not stat.S_ISDIR(mode):
            problems.append(StoreProblem.about(path, "is a file where a folder belongs"))
            return False
        return stat.S_ISDIR(mode)

    for entry in sorted(store_path.iterdir()):
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


def _verify_table(folder: Path, manifest: dict[str, Any] | None) -> list[StoreProblem]:
    spec = schema.spec(folder.name)
    problems: list[StoreProblem] = []
    listed: dict[str, dict[str, Any]] = {}
    retired: set[str] = set()
    if manifest is not None:
        entry = manifest["tables"].get(spec.name, {})
        listed = {p["file"]: p for p in entry.get("parts", [])}
        retired = set(entry.get("retired", []))
    for path in sorted(folder.iterdir()):
        if path.name == CORRUPT_DIR or path.name.startswith(TEMP_PREFIX):
            continue
        if not is_plain_file(path):
            continue  # a link, FIFO or folder: reported by _special_files
        if not PART_RE.match(path.name):
            problems.append(StoreProblem.about(path, "not a part file (ignored by read)"))
            continue
        entry = listed.get(path.name)
        if entry is None:
            if path.name not in retired and manifest is not None:
                problems.append(
                    StoreProblem.about(
                        path,
                        f"not listed in {MANIFEST_NAME}, so never read (added by hand "
                        "or forged; a killed writer leaves none)",
                    )
                )
            continue
        try:
            table, is_sorted = read_part(path, spec, spec.columns, full_check=True)
        except UnreadablePart as exc:
            problems.append(StoreProblem.about(exc.path, str(exc.reason)))
            continue
        except FileNotFoundError:
            continue  # merged away while we looked
        _, file_schema = open_reader(path, [])
        meta_rows = (file_schema.metadata or {}).get(META_ROWS)
        if meta_rows is not None:
            try:
                declared = int(meta_rows)
            except ValueError:  # damaged or hand-made footer metadata
                problems.append(
                    StoreProblem.about(
                        path, f"footer row count {short_repr(meta_rows)} is not a number"
                    )
                )
            else:
                if declared != table.num_rows:
                    problems.append(
                        StoreProblem.about(
                            path, f"footer says {declared} rows, holds {table.num_rows}"
                        )
                    )
        recorded = entry.get("blake2b")
        if not isinstance(recorded, str):
            problems.append(
                StoreProblem.about(
                    path,
                    f"listed in {MANIFEST_NAME} without a checksum, so its content "
                    "cannot be checked",
                )
            )
        elif recorded != file_digest(path):
            problems.append(
                StoreProblem.about(
                    path,
                    f"content differs from its checksum in {MANIFEST_NAME} "
                    "(damaged on disk or edited)",
                )
            )
            continue
        if entry.get("bytes") is not None and entry["bytes"] != path.stat().st_size:
            size = path.stat().st_size
            problems.append(
                StoreProblem.about(
                    path, f"{size} bytes on disk, {entry['bytes']} in {MANIFEST_NAME}"
                )
            )
        for column in spec.required_columns():
            nulls = table.column(column).null_count
            if nulls:
                problems.append(
                    StoreProblem.about(
                        path, f"field '{column}' has {nulls} null value(s) (required)"
                    )
                )
        try:
            sort_by_keys(spec.name, spec.keys, table)
        except schema.SchemaError as exc:
            problems.append(StoreProblem.about(path, f"duplicate keys ({exc})"))
            continue
        if is_sorted and table.num_rows > 1:
            order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in spec.keys])
            if not np.array_equal(order.to_numpy(), np.arange(table.num_rows)):
                problems.append(StoreProblem.about(path, "marked sorted by keys but is not"))
    return problems


def adopt(
    store_path: Path, lock: FileLock, path: str | os.PathLike[str], reason: str | None = None
) -> None:
    """List the unlisted part file ``path`` in the manifest (see
    :meth:`Store.adopt <legival_core.store.store.Store.adopt>`)."""
    source = Path(os.path.abspath(path))
    folder = source.parent
    if folder.parent != Path(os.path.abspath(store_path / TABLES_DIR)):
        raise StoreError(f"{source}: not in a table folder of the store {store_path}")
    name = folder.name
    schema.spec(name)
    if not PART_RE.match(source.name) or not is_plain_file(source):
        raise StoreError(f"{source}: not a part file")
    plain_dir(folder.parent)
    plain_dir(folder)
    rows = part_rows(source)
    if rows is None:
        raise StoreError(f"{source}: not a readable part; not adopted")
    with lock.held():

        def add(manifest: dict[str, Any]) -> None:
            entry = table_entry(manifest, name)
            if any(p["file"] == source.name for p in entry["parts"]):
                raise StoreError(f"{source}: already listed in {MANIFEST_NAME}")
            entry["parts"].append(
                {
                    "file": source.name,
                    "rows": rows,
                    "bytes": source.stat().st_size,
                    "blake2b": file_digest(source),
                    "stage": None,
                    "time": utc_now(),
                    "adopted": True,
                }
            )
            recount(entry)
            manifest["provenance"].append(
                {
                    "time": utc_now(),
                    "stage": "adopt",
                    "table": name,
                    "part": source.name,
                    "reason": reason,
                }
            )

        update_manifest(store_path, add)


def quarantine_part(
    store_path: Path, lock: FileLock, path: str | os.PathLike[str], reason: str | None = None
) -> Path:
    """Move ``path`` aside and drop it from the manifest; returns where it went (see
    :meth:`Store.quarantine_part <legival_core.store.store.Store.quarantine_part>`)."""
    root = Path(os.path.abspath(store_path))
    source = Path(path)
    if not source.is_absolute() and not os.path.lexists(source):
        source = root / source
    source = Path(os.path.abspath(source))  # lexical: a link is the thing moved, not its target
    try:
        relative = source.relative_to(root).parts
    except ValueError:
        raise StoreError(f"{source}: not a part of the store {store_path}") from None
    if relative and relative[0] == TABLES_DIR and not os.path.lexists(source):
        return _forget_missing(store_path, lock, source, relative, reason)
    if not relative or relative[0] == CORRUPT_DIR or not os.path.lexists(source):
        raise StoreError(f"{source}: not a part of the store {store_path}")
    if relative == (MANIFEST_NAME,):
        raise StoreError(
            f"{source}: the manifest is not moved aside; replace it with a copy you trust"
        )
    for depth in range(1, len(relative)):
        above = root.joinpath(*relative[:depth])
        if not is_plain_dir(above):
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
        plain_dir(target_dir, create=True)
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
        fsync_dir(root)
        record = {"time": utc_now(), "stage": "quarantine", "path": LOCK_NAME, "reason": reason}
        with lock.held():
            update_manifest(store_path, lambda m: m["provenance"].append(record))
        return target
    with lock.held():
        target = free_target()

        def drop(manifest: dict[str, Any]) -> None:
            record: dict[str, Any] = {
                "time": utc_now(),
                "stage": "quarantine",
                "path": "/".join(relative),
                "reason": reason,
            }
            if in_table:
                entry = table_entry(manifest, relative[1])
                entry["parts"] = [p for p in entry["parts"] if p["file"] != source.name]
                recount(entry)
                record.update(table=relative[1], part=source.name)
            manifest["provenance"].append(record)

        # The manifest lets go first: a kill before the move leaves an unlisted file
        # (never read; verify reports it), never a listed part that is gone.
        update_manifest(store_path, drop)
        os.replace(source, target)
        fsync_dir(source.parent)
    return target


def _forget_missing(
    store_path: Path, lock: FileLock, source: Path, relative: tuple[str, ...], reason: str | None
) -> Path:
    """:func:`quarantine_part` of what :func:`verify` names as listed in the manifest but
    missing on disk (a part, or a whole table folder): nothing is there to move, so its
    manifest entry is dropped (the stage that wrote it redoes those rows). Returns
    ``source``."""
    is_table = len(relative) == 2 and relative[1] in schema.TABLES
    is_part = len(relative) == 3 and relative[1] in schema.TABLES and PART_RE.match(relative[2])
    if not (is_table or is_part):
        raise StoreError(f"{source}: not a part of the store {store_path}")
    for depth in range(1, len(relative)):
        above = store_path.joinpath(*relative[:depth])
        if os.path.lexists(above) and not is_plain_dir(above):
            raise StoreError(
                f"{source}: reached through {above}, which is not a plain folder; "
                "quarantine that instead"
            )
    name = relative[1]
    with lock.held():

        def drop(manifest: dict[str, Any]) -> None:
            entry = manifest["tables"].get(name)
            listed = [] if entry is None else entry["parts"]
            gone = [p for p in listed if is_table or p["file"] == relative[2]]
            if not gone:
                raise StoreError(f"{source}: not in the store and not listed in {MANIFEST_NAME}")
            assert entry is not None
            entry["parts"] = [p for p in listed if p not in gone]
            recount(entry)
            if not entry["parts"]:
                entry["rows"] = 0
            manifest["provenance"].append(
                {
                    "time": utc_now(),
                    "stage": "quarantine",
                    "path": "/".join(relative),
                    "reason": reason,
                    "table": name,
                    "missing": [p["file"] for p in gone],
                }
            )

        update_manifest(store_path, drop)
    return source
