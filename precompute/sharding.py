"""Deterministic work slices: ``--shard i/n`` picks the traces whose id hashes to ``i`` mod ``n``.

Every stage shards by the *trace id* (for ``generate``, the id the trace will get), so all
rollout prefixes of one trace land in the same shard and an engine's prefix cache is reused.
The hash is BLAKE2b of the UTF-8 id: the same on every machine, Python version and run
(Python's own ``hash`` is salted per process and would not do).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Shard", "ShardError", "bucket_of", "parse_shard"]

T = TypeVar("T")

_SHARD_PATTERN = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class ShardError(ValueError):
    """A ``--shard`` value that is not ``i/n`` with ``0 <= i < n``."""


def bucket_of(key: str, count: int) -> int:
    """The shard (``0..count-1``) that ``key`` belongs to, stable across runs and machines.

    >>> bucket_of("t-6f5b8d1e0c3e4c58", 1)
    0
    >>> bucket_of("t-6f5b8d1e0c3e4c58", 4) == bucket_of("t-6f5b8d1e0c3e4c58", 4)
    True
    """
    if count < 1:
        raise ShardError(f"shard count must be at least 1, got {count}")
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


@dataclass(frozen=True)
class Shard:
    """Slice ``index`` of ``count`` (0-based). ``Shard(0, 1)`` is everything."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ShardError(f"shard count must be at least 1, got {self.count}")
        if not 0 <= self.index < self.count:
            raise ShardError(
                f"shard index must be in 0..{self.count - 1} for {self.count} shard(s), "
                f"got {self.index}"
            )

    @property
    def is_whole(self) -> bool:
        return self.count == 1

    def owns(self, trace_id: str) -> bool:
        """Does this shard process ``trace_id``?

        >>> Shard().owns("anything")
        True
        """
        return self.count == 1 or bucket_of(trace_id, self.count) == self.index

    def select(self, items: Iterable[T], trace_id: Callable[[T], str]) -> list[T]:
        """The items whose trace id this shard owns, in their original order."""
        return [item for item in items if self.owns(trace_id(item))]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str | None) -> Shard:
    """Parse ``"i/n"`` (0-based ``i``) into a :class:`Shard`; ``None`` means the whole set.

    >>> parse_shard("1/4")
    Shard(index=1, count=4)
    >>> parse_shard(None)
    Shard(index=0, count=1)
    """
    if text is None:
        return Shard()
    match = _SHARD_PATTERN.match(text)
    if match is None:
        raise ShardError(f"--shard expects 'i/n' such as 0/4 (0-based i < n), got {text!r}")
    return Shard(int(match.group(1)), int(match.group(2)))
