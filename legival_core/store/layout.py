"""Where things live in a results store: the names of its files and folders, and the folders
and part files of its tables as they are on disk (listed in the manifest or not).

See :mod:`legival_core.store.store` for the layout as a picture and the rules it keeps.
"""

from __future__ import annotations

import re
from pathlib import Path

from legival_core.store import schema
from legival_core.store.file_safety import is_plain_dir, is_plain_file

__all__ = [
    "CORRUPT_DIR",
    "LOCK_NAME",
    "LOGS_DIR",
    "MANIFEST_NAME",
    "PART_RE",
    "QUARANTINE_NAME",
    "TABLES_DIR",
    "disk_parts",
    "part_seq",
    "table_dirs",
]

MANIFEST_NAME = "manifest.json"
LOCK_NAME = ".lock"
TABLES_DIR = "tables"
LOGS_DIR = "logs"
CORRUPT_DIR = "corrupt"
QUARANTINE_NAME = "quarantine.jsonl"

PART_RE = re.compile(r"^part-(?P<seq>\d{8,})-(?P<pid>\d+)-(?P<uid>[0-9a-f]{8,32})\.arrow$")


def part_seq(path: Path) -> int:
    """The sequence number a part's file name starts with (-1 for a name that is no part's)."""
    match = PART_RE.match(path.name)
    return int(match["seq"]) if match else -1


def table_dirs(root: Path) -> list[str]:
    """Names of known tables that have a real folder (not a link) under tables/."""
    tables_root = root / TABLES_DIR
    if not is_plain_dir(tables_root):
        return []
    return sorted(
        p.name for p in tables_root.iterdir() if p.name in schema.TABLES and is_plain_dir(p)
    )


def disk_parts(root: Path, name: str) -> list[Path]:
    """Plain files named like parts in a table's real folder (listed or not)."""
    folder = root / TABLES_DIR / name
    if not (is_plain_dir(root / TABLES_DIR) and is_plain_dir(folder)):
        return []
    parts = [p for p in folder.iterdir() if PART_RE.match(p.name) and is_plain_file(p)]
    return sorted(parts, key=lambda p: (part_seq(p), p.name))
