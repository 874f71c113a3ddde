"""Telling a full (or read-only) disk apart from other I/O errors, for one-line messages."""

from __future__ import annotations

import errno
import os

__all__ = ["DISK_ERRNOS", "describe_os_error", "disk_error"]

#: errno values that mean "the disk will not take more", whatever the file.
DISK_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG", "EROFS") if hasattr(errno, name)
)


def disk_error(error: BaseException) -> bool:
    """Whether ``error`` says the disk is full, over quota or read-only (pyarrow's write
    errors carry the reason in their text, not always in ``errno``)."""
    if not isinstance(error, OSError):
        return False
    if error.errno in DISK_ERRNOS:
        return True
    text = str(error)
    return any(os.strerror(code) in text for code in DISK_ERRNOS)


def describe_os_error(error: OSError) -> str:
    """The reason of an OSError in a few words, without the file name it may repeat."""
    if error.errno is not None and error.errno in DISK_ERRNOS:
        return os.strerror(error.errno)
    for code in DISK_ERRNOS:
        if os.strerror(code) in str(error):
            return os.strerror(code)
    return error.strerror or " ".join(str(error).split())[:200]
