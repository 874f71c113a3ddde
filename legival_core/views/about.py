"""The about page's data: what a store holds, its provenance and its config."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd


def store_overview(manifest: Mapping[str, Any]) -> pd.DataFrame:
    """What a store holds, from its manifest: per table the rows, parts, bytes and meaning."""
    from legival_core.store.schema import TABLES

    rows = []
    for name, entry in sorted((manifest.get("tables") or {}).items()):
        parts = entry.get("parts") or []
        size = sum(int(p.get("bytes") or 0) for p in parts if isinstance(p, Mapping))
        spec = TABLES.get(name)
        rows.append(
            {
                "table": name,
                "rows": int(entry.get("rows") or 0),
                "parts": len(parts),
                "bytes": size,
                "description": spec.description if spec else "(unknown table)",
            }
        )
    return pd.DataFrame(rows, columns=["table", "rows", "parts", "bytes", "description"])


def provenance_table(manifest: Mapping[str, Any], *, hide_paths: bool = False) -> pd.DataFrame:
    """The manifest's provenance records as rows: time, stage, and the rest as JSON text.

    With ``hide_paths`` (a hosted app) every absolute local path in the details is cut to its
    last component (:func:`legival_core.text.safe_text.without_local_paths_in`).

    >>> record = {"time": "t0", "stage": "reward", "model": "/home/me/models/rm"}
    >>> provenance_table({"provenance": [record]}, hide_paths=True)["details"].iloc[0]
    '{"model": "…/rm"}'
    """
    from legival_core.text.safe_text import without_local_paths_in

    rows = []
    for record in manifest.get("provenance") or []:
        if not isinstance(record, Mapping):
            continue
        rest = {k: v for k, v in record.items() if k not in ("time", "stage")}
        # Cut in the values themselves, before they become JSON text (no escape is mistaken
        # for a path separator, no quote or bracket in a folder name ends a path early).
        details = _json_text(without_local_paths_in(rest) if hide_paths else rest)
        rows.append(
            {
                "time": str(record.get("time", "")),
                "stage": str(record.get("stage", "")),
                "details": details[:2000],
            }
        )
    return pd.DataFrame(rows, columns=["time", "stage", "details"])


def config_text(manifest: Mapping[str, Any], *, hide_paths: bool = False) -> str:
    """The store's experiment config as indented JSON; ``hide_paths`` as in
    :func:`provenance_table`.

    >>> print(config_text({"config": {"data": "/srv/x/problems.jsonl"}}, hide_paths=True))
    {
      "data": "…/problems.jsonl"
    }
    """
    from legival_core.text.safe_text import without_local_paths_in

    config = manifest.get("config") or {}
    if hide_paths:
        config = without_local_paths_in(config)
    return _json_text(config, indent=2)


def _json_text(value: Any, indent: int | None = None) -> str:
    r"""``value`` as JSON text for the screen: letters as they are (``café``, ``…``), control
    characters JSON-escaped and bidirectional controls as their visible ``\u202e`` escape.

    >>> _json_text({"name": "caf\u00e9\u202e"})
    '{"name": "café\\u202e"}'
    """
    from legival_core.text.safe_text import visible_bidi

    text = json.dumps(value, indent=indent, sort_keys=True, default=str, ensure_ascii=False)
    return visible_bidi(text)
