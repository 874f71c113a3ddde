"""Which grader graded a store: the grader version stamped on its grades and rollouts.

Every row of ``grades`` and ``rollouts`` carries ``grader_version`` (the
:data:`~legival_core.grading.grader.GRADER_VERSION` that made it; 0 when the verdict came from
an ingested file; null when it was graded before versions were stored) and ``code_revision``.
:func:`grader_status` reads them; ``verify``, the app's About page and ``lv.open(...)`` say when
a store was graded by another version than the current one, ``regrade`` brings it current, and
a board or a site that merges stores refuses stores graded by different versions unless told
to (:func:`mixed_grader_versions`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from legival_core.grading.grader import GRADER_VERSION

if TYPE_CHECKING:
    from legival_core.store.store import Store

__all__ = ["FILE_VERDICT", "GraderStatus", "grader_status", "mixed_grader_versions"]

#: The grader version of a verdict an ingested file gave (no grader of ours ran).
FILE_VERDICT = 0
#: How a table's rows without a version are counted.
UNKNOWN = "before versions"
GRADED_TABLES = ("grades", "rollouts")


@dataclass(frozen=True)
class GraderStatus:
    """The grader versions of a store's grades and rollouts.

    Attributes:
        versions: per table, how many rows each version graded (``"before versions"`` for rows
            without one; 0 for verdicts an ingested file gave).
        current: the grader version of this code.
    """

    versions: Mapping[str, Mapping[int | str, int]] = field(default_factory=dict)
    current: int = GRADER_VERSION

    @property
    def graded_versions(self) -> set[int | str]:
        """The versions of our own grader that graded some row (file verdicts left out)."""
        return {v for table in self.versions.values() for v in table if v != FILE_VERDICT}

    @property
    def stale(self) -> bool:
        """True when some row was graded by another version than the current one."""
        return bool(self.graded_versions - {self.current})

    @property
    def message(self) -> str:
        """One line for a person: the versions, and what to run when the store is stale.

        >>> GraderStatus({"grades": {1: 5}}, current=1).message
        'graded by the current grader (version 1)'
        >>> print(GraderStatus({"grades": {"before versions": 3, 1: 2}}, current=1).message)
        graded by an older grader (grades: 3 rows before versions, 2 rows version 1; current \
version 1): run `python -m precompute regrade --store DIR` to bring it current
        """
        if not self.stale:
            return f"graded by the current grader (version {self.current})"
        parts = []
        for table, counts in self.versions.items():
            described = ", ".join(
                f"{n} rows {v}" if isinstance(v, str) else f"{n} rows version {v}"
                for v, n in counts.items()
            )
            parts.append(f"{table}: {described}")
        return (
            f"graded by an older grader ({'; '.join(parts)}; current version {self.current}): "
            "run `python -m precompute regrade --store DIR` to bring it current"
        )


def grader_status(store: Store) -> GraderStatus | None:
    """The :class:`GraderStatus` of ``store`` (a :class:`~legival_core.store.store.Store`), or
    None when it holds no grades and no rollouts."""
    versions: dict[str, dict[int | str, int]] = {}
    for table in GRADED_TABLES:
        if not store.has(table):
            continue
        column = store.read_arrow(table, ["grader_version"]).column("grader_version")
        counts: Counter[int | str] = Counter(
            UNKNOWN if value is None else int(value) for value in column.to_pylist()
        )
        if counts:
            versions[table] = dict(sorted(counts.items(), key=lambda kv: str(kv[0])))
    return GraderStatus(versions) if versions else None


def mixed_grader_versions(stores: Iterable[tuple[str, Any]]) -> str | None:
    """Why stores cannot be merged on one board, or None when their grades agree: the name of
    every store and the grader versions that graded it, when those differ between stores.

    Args:
        stores: ``(name, store)`` pairs.
    """
    seen: dict[str, set[int | str]] = {}
    for name, store in stores:
        status = grader_status(store)
        if status is not None:
            seen[name] = status.graded_versions
    distinct = {frozenset(v) for v in seen.values()}
    if len(distinct) <= 1 and all(len(v) <= 1 for v in seen.values()):
        return None
    described = "; ".join(
        f"{name}: {', '.join(str(v) for v in sorted(vs, key=str))}" for name, vs in seen.items()
    )
    return f"the stores were graded by different grader versions ({described})"
