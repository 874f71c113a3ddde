"""The manifest of a results store: ``manifest.json``, the one file a reader trusts.

It holds the schema version, the config, the provenance of each stage and, per table, the parts
with their row counts and BLAKE2b checksums (:func:`file_digest`). :func:`read_manifest` checks
every field of a manifest read from disk (a received store is untrusted, down to its nesting
depth: :func:`json_depth`); :func:`write_manifest` replaces it atomically; :func:`reconcile`
finishes what a killed writer left in it. The callers hold the store's lock to change it.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import json
import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from legival_core.store import schema
from legival_core.store.errors import StoreError, short_repr
from legival_core.store.file_safety import (
    fsync_dir,
    is_plain_dir,
    is_plain_file,
    open_plain,
    temp_name,
)
from legival_core.store.layout import (
    MANIFEST_NAME,
    PART_RE,
    TABLES_DIR,
    disk_parts,
    part_seq,
    table_dirs,
)
from legival_core.store.parts import part_rows

__all__ = [
    "MANIFEST_MAX_DEPTH",
    "STORE_FORMAT",
    "adopt_disk_parts",
    "file_digest",
    "json_depth",
    "jsonable",
    "new_manifest",
    "package_versions",
    "read_manifest",
    "reconcile",
    "recount",
    "table_entry",
    "update_manifest",
    "utc_now",
    "write_manifest",
]

STORE_FORMAT = "legival-store"
_TABLE_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_DIGEST_RE = re.compile(r"^[0-9a-f]{32}$")


def utc_now() -> str:
    """The time now in UTC to the second, as the manifest's time stamps are written."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def file_digest(path: Path) -> str:
    """BLAKE2b-128 of a file's bytes: Arrow IPC and zstd carry no checksums, so without this a
    flipped bit that still decodes would go unnoticed by :meth:`Store.verify`."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    with os.fdopen(open_plain(path, os.O_RDONLY), "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def jsonable(value: Any) -> Any:
    """Turn provenance values (paths, numpy scalars, sets, dataclasses, NaN) into plain JSON."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((jsonable(v) for v in value), key=repr)
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat()
    return str(value)


def package_versions() -> dict[str, str]:
    from legival_core import __version__

    return {
        "python": sys.version.split()[0],
        "pyarrow": pa.__version__,
        "pandas": pd.__version__,
        "numpy": np.__version__,
        "legival": __version__,
    }


def new_manifest(config: Mapping[str, Any] | None) -> dict[str, Any]:
    now = utc_now()
    return {
        "format": STORE_FORMAT,
        "schema_version": schema.SCHEMA_VERSION,
        "created": now,
        "updated": now,
        "config": jsonable(dict(config or {})),
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
        raise fail("format", f"is {short_repr(data['format'])}, expected {STORE_FORMAT!r}")
    expected: dict[str, type] = {
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
            raise fail(field, f"must be a JSON {_JSON_KIND[kind]}, got {short_repr(value, 40)}")
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
        raise fail("updated", f"must be a JSON string, got {short_repr(data['updated'], 40)}")
    for i, record in enumerate(data["provenance"]):
        if not isinstance(record, dict):
            raise fail(f"provenance[{i}]", "must be a JSON object")
        for key in ("stage", "time"):
            if record.get(key) is not None and not isinstance(record[key], str):
                raise fail(f"provenance[{i}].{key}", "must be a JSON string")
    for name, entry in data["tables"].items():
        if not _TABLE_NAME_RE.match(name):
            raise fail(f"tables.{short_repr(name, 40)}", "is not a valid table name")
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
                field, f"must be a whole number from 0 to {largest}, got {short_repr(value, 40)}"
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
        named = PART_RE.match(file) if isinstance(file, str) else None
        if named is None:
            raise fail(f"{at}.file", f"is not a part file name: {short_repr(file, 60)}")
        if int(named["seq"]) > _LARGEST_SEQ:
            raise fail(f"{at}.file", f"has a sequence number above {_LARGEST_SEQ}")
        for field in ("rows", "bytes", "merged_from"):
            count(part.get(field), f"{at}.{field}")
        for flag in ("pending", "adopted"):
            if not isinstance(part.get(flag, False), bool):
                raise fail(f"{at}.{flag}", "must be true or false")
        digest = part.get("blake2b")
        if digest is not None and not (isinstance(digest, str) and _DIGEST_RE.match(digest)):
            shown = short_repr(digest, 40)
            raise fail(f"{at}.blake2b", f"is not a BLAKE2b-128 hex digest: {shown}")
        for text in ("stage", "time"):
            if part.get(text) is not None and not isinstance(part[text], str):
                raise fail(f"{at}.{text}", "must be a JSON string")
    retired = entry.get("retired", [])
    if not isinstance(retired, list) or not all(
        isinstance(f, str) and PART_RE.match(f) for f in retired
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


def table_entry(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    """The manifest's entry of table ``name``, added (no parts, no rows) when it has none."""
    entry = manifest["tables"].setdefault(name, {"rows": 0, "parts": []})
    entry.setdefault("parts", [])
    entry.setdefault("rows", 0)
    return entry


def recount(entry: dict[str, Any]) -> None:
    """Put a table entry's parts in sequence order and recount its ``rows`` and ``last_seq``."""
    entry["parts"].sort(key=lambda p: (part_seq(Path(p["file"])), p["file"]))
    entry["rows"] = sum(int(p.get("rows") or 0) for p in entry["parts"])
    if entry["parts"]:
        entry["last_seq"] = max(
            int(entry.get("last_seq", 0)), part_seq(Path(entry["parts"][-1]["file"]))
        )


def read_manifest(root: Path) -> dict[str, Any]:
    """The manifest of the store at ``root``, checked field by field; :class:`StoreError` naming
    the file if it is missing, unreadable, nested too deeply, not JSON or not a manifest."""
    path = root / MANIFEST_NAME
    try:
        with os.fdopen(open_plain(path, os.O_RDONLY), "rb") as handle:
            text = handle.read().decode("utf-8")
    except FileNotFoundError:
        raise StoreError(f"{path}: not found; {root} is not a results store") from None
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


def write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    """Save ``manifest`` as the store's at ``root``: a temp file, fsync, rename (the caller holds
    the lock). Sets its ``updated`` time."""
    manifest["updated"] = utc_now()
    text = json.dumps(jsonable(manifest), indent=1, allow_nan=False) + "\n"
    temp = root / temp_name(".json")
    try:
        with open(temp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, root / MANIFEST_NAME)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(root)


def update_manifest(root: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Load, reconcile with the disk, apply ``change`` and save; the caller holds the lock."""
    manifest = read_manifest(root)
    reconcile(root, manifest)
    change(manifest)
    write_manifest(root, manifest)


def reconcile(root: Path, manifest: dict[str, Any]) -> None:
    """Finish what a killed writer left (the caller holds the lock, so no writer is between
    its manifest update and its rename now): a ``pending`` part whose file landed becomes
    an ordinary part, one whose file never landed is dropped (its rows were not written),
    and the files a merge retired are deleted. Parts the manifest does not list are never
    adopted here: the manifest is what a reader trusts, and an unlisted file may come from
    anyone; :meth:`Store.verify` reports it. A table whose folder (or ``tables/``) is not a real
    folder is left as it is: a name the manifest retires is never deleted through a link
    into another store."""
    tables_root = root / TABLES_DIR
    for name, entry in manifest["tables"].items():
        if name not in schema.TABLES:
            continue
        folder = tables_root / name
        if os.path.lexists(folder) and not (is_plain_dir(tables_root) and is_plain_dir(folder)):
            continue  # a link, file or FIFO in its place: verify names it
        kept = []
        for part in entry["parts"]:
            if part.get("pending"):
                if not is_plain_file(folder / part["file"]):
                    continue  # never renamed into place; its temp file is cleaned as stale
                del part["pending"]
            kept.append(part)
        entry["parts"] = kept
        listed = {p["file"] for p in kept}
        for file in entry.pop("retired", []):
            if file not in listed and is_plain_file(folder / file):
                (folder / file).unlink(missing_ok=True)
        recount(entry)


def adopt_disk_parts(root: Path, manifest: dict[str, Any]) -> None:
    """List the parts on disk in a manifest made for a ``tables/`` folder that has none
    (:meth:`Store.create` over a store whose manifest was deleted): an explicit recovery."""
    for name in table_dirs(root):
        entry = table_entry(manifest, name)
        listed = {p["file"] for p in entry["parts"]}
        for path in disk_parts(root, name):
            if path.name in listed:
                continue
            rows = part_rows(path)
            if rows is None:
                continue  # unreadable: read()/verify() report it, quarantine_part() moves it
            entry["parts"].append(
                {
                    "file": path.name,
                    "rows": rows,
                    "bytes": path.stat().st_size,
                    "blake2b": file_digest(path),
                    "stage": None,
                    "time": utc_now(),
                    "adopted": True,
                }
            )
        recount(entry)
