"""What a results store raises: :class:`StoreError` (a file of the store is wrong; the message
names it) and :class:`NotPlainFile` (a link, FIFO or device where a plain file or folder
belongs), and :func:`short_repr`, which cuts an untrusted value for those messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["NotPlainFile", "StoreError", "short_repr"]


class StoreError(Exception):
    """Something about a store on disk is wrong; the message names the file (and field or row)."""


class NotPlainFile(StoreError):
    """A path inside a store is a symbolic link, a FIFO, a device or a folder where a plain
    file (or a plain folder) belongs; the store never opens or writes through it."""

    def __init__(self, path: Path, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def short_repr(value: Any, limit: int = 80) -> str:
    """repr() of an untrusted value, cut to ``limit`` characters for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
