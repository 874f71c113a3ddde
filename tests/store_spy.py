"""A spy on the store's reads, for the tests that check what a stage reads (which tables, which
columns, filtered by which keys) during a real run.

``Store.read`` calls ``Store.read_arrow``, so one DataFrame read is reported twice: once as
``read`` and once as ``read_arrow``; tests that count reads count both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pytest

from legival_core.store.store import Store


@dataclass(frozen=True)
class StoreRead:
    """One read: the method (``read``, ``read_arrow`` or ``scan``), the table, the columns asked for
    (None: every column) and the filters (None: every row)."""

    method: str
    table: str
    columns: Sequence[str] | None
    filters: Mapping[str, object] | None

    def by_trace_ids(self) -> bool:
        """Whether the read is limited to some traces (a bucket's keyed read)."""
        return isinstance(self.filters, Mapping) and "trace_id" in self.filters


def spy_on_reads(monkeypatch: pytest.MonkeyPatch, seen: Callable[[StoreRead], None]) -> None:
    """Report every ``Store.read``/``read_arrow``/``scan`` to ``seen`` before it runs, until
    ``monkeypatch.undo()`` (or the test's end)."""
    originals = {"read": Store.read, "read_arrow": Store.read_arrow}

    def wrap(method: str) -> Callable[..., object]:
        original = originals[method]

        def spied(self: Store, table: str, *args: object, **kwargs: object) -> object:
            columns = kwargs.get("columns", args[0] if args else None)
            filters = kwargs.get("filters", args[1] if len(args) > 1 else None)
            seen(StoreRead(method, table, columns, filters))  # type: ignore[arg-type]
            return original(self, table, *args, **kwargs)  # type: ignore[arg-type]

        return spied

    for method in originals:
        monkeypatch.setattr(Store, method, wrap(method))
    scan = Store.scan

    def scanned(self: Store, table: str, *args: object, **kwargs: object) -> object:
        # one pass over a table's parts, a batch at a time (the metrics stage's bucket split)
        columns = kwargs.get("columns", args[0] if args else None)
        seen(StoreRead("scan", table, columns, None))  # type: ignore[arg-type]
        return scan(self, table, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Store, "scan", scanned)
