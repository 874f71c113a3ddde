"""``--format legival``: rows already in our shape (the fields of :mod:`precompute.ingest`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from precompute.formats.base import TraceFormat

__all__ = ["LegivalFormat"]


class LegivalFormat(TraceFormat):
    """Our own rows, passed through unchanged (``--map`` and the aliases still apply)."""

    name: ClassVar[str] = "legival"
    tool: ClassVar[str] = "Legi-Val rows"
    names_model: ClassVar[bool] = False

    def sniff_record(self, keys: frozenset[str], record: Mapping[str, Any]) -> bool:
        return True  # the fallback: asked last

    def convert(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [dict(record)]
