"""``--format legival``: rows already in our shape (the fields of :mod:`precompute.ingest`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from precompute.formats.base import TraceFormat, lookup_field

__all__ = ["LegivalFormat"]


class LegivalFormat(TraceFormat):
    """Our own rows, passed through unchanged (``--map`` and the aliases still apply)."""

    name = "legival"
    tool = "Legi-Val rows"
    names_model = False

    def sniff_record(self, keys: frozenset[str], record: Mapping[str, Any]) -> bool:
        return self.fits(record, {})

    @staticmethod
    def fits(record: Mapping[str, Any], mapping: Mapping[str, str]) -> bool:
        """Whether ``record`` has our shape: a problem id and a reasoning or raw text, under
        their own names, the names ``--map`` gives or the aliases ingest knows."""

        def given(name: str) -> Any:
            return lookup_field(record, name, mapping)

        texts = (given("reasoning"), given("raw"))
        return given("problem_id") is not None and any(isinstance(t, str) for t in texts)

    def convert(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [dict(record)]
