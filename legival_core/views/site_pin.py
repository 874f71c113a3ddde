"""What a published site was made from: digests of a store's content, config and provenance.

A static site (``python -m precompute publish``) carries ``site.json`` with, per store it was
built from, three digests, the package version and the publish options, so that two sites can
be compared and a stale one detected (``publish --check SITE --store DIR``):

* **content digest**: BLAKE2b-128 over the store's table parts — for every table in name order,
  its name and the sorted BLAKE2b-128 digests of its part files' bytes. Part file names carry a
  process id and a random tag, so they are left out: two stores holding byte-identical parts
  have one digest, and any changed, added or removed part changes it;
* **config digest** and **provenance digest**: BLAKE2b-128 of the manifest's ``config`` and
  ``provenance`` as canonical JSON (sorted keys, no spaces).

Pure functions on paths and dicts; no store is opened for writing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "SITE_FORMAT",
    "canonical_digest",
    "content_digest",
    "file_digest",
    "mismatches",
    "store_pin",
]

#: ``site.json``'s ``format`` value; its ``version`` says which layout of the file this is.
SITE_FORMAT = "legival-site"


def file_digest(path: Path) -> str:
    """BLAKE2b-128 of a file's bytes, in hex (the digest the store's manifest records)."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def content_digest(parts: Mapping[str, Sequence[str]]) -> str:
    """The content digest of a store from its parts' digests: ``{table: [part digest, …]}``.

    Formula: BLAKE2b-128 of the lines ``table:d1,d2,…`` (tables sorted by name, each table's
    part digests sorted), joined by newlines. A table without parts contributes nothing, as a
    store that never had it.

    >>> a = content_digest({"traces": ["bb", "aa"], "steps": ["cc"]})
    >>> a == content_digest({"steps": ["cc"], "traces": ["aa", "bb"], "empty": []})
    True
    >>> a == content_digest({"steps": ["cc"], "traces": ["aa"]})
    False
    >>> len(content_digest({}))  # 16 bytes in hex
    32
    """
    lines = [
        f"{table}:{','.join(sorted(digests))}"
        for table, digests in sorted(parts.items())
        if digests
    ]
    return hashlib.blake2b("\n".join(lines).encode(), digest_size=16).hexdigest()


def canonical_digest(value: Any) -> str:
    """BLAKE2b-128 of ``value`` as canonical JSON (sorted keys, ``,``/``:`` separators, UTF-8).

    >>> canonical_digest({"b": 1, "a": [1, 2]}) == canonical_digest({"a": [1, 2], "b": 1})
    True
    >>> canonical_digest({"a": 1}) == canonical_digest({"a": 2})
    False
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def store_pin(name: str, manifest: Mapping[str, Any], parts: Mapping[str, Sequence[Path]]) -> dict:
    """``site.json``'s record of one store: its name, the three digests and its tables' rows.

    ``parts`` maps each table to its part files (:meth:`legival_core.store.store.Store.parts`);
    their bytes are hashed here, so a part changed behind the manifest's back changes the digest
    too.
    """
    digests = {table: [file_digest(p) for p in files] for table, files in parts.items()}
    tables = manifest.get("tables", {})
    return {
        "name": name,
        "content_digest": content_digest(digests),
        "config_digest": canonical_digest(manifest.get("config", {})),
        "provenance_digest": canonical_digest(manifest.get("provenance", [])),
        "tables": {t: int(tables.get(t, {}).get("rows", 0)) for t in sorted(digests) if digests[t]},
    }


def mismatches(pinned: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs between a store as ``site.json`` pinned it and as it is now: the names of
    the digests that differ (``content``, ``config``, ``provenance``), in that order.

    >>> pin = {"content_digest": "a", "config_digest": "b", "provenance_digest": "c"}
    >>> mismatches(pin, pin), mismatches(pin, {**pin, "content_digest": "x"})
    ([], ['content'])
    """
    return [
        kind
        for kind in ("content", "config", "provenance")
        if pinned.get(f"{kind}_digest") != current.get(f"{kind}_digest")
    ]
