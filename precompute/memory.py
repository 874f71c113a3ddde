"""Freed memory handed back to the system between the phases of a long stage.

A stage that builds and drops frames of millions of rows frees far more than it keeps, but
freeing does not shrink the process: glibc's ``malloc`` keeps freed blocks in its heap for
reuse unless they sit at its very top, and Arrow's allocator keeps freed pages cached. The
next phase then starts from the last one's high-water mark whenever it allocates through a
different allocator (Arrow reads after pandas' joins), and the machine's other processes see
that memory as taken. :func:`release_freed_memory` collects garbage, then asks both
allocators to return their free pages (``malloc_trim(0)``, where the C library has it, and
Arrow's ``release_unused``). At a million traces this started the metrics stage's page results
1.1 GB lower (docs/benchmarks.md).
"""

from __future__ import annotations

import ctypes
import functools
import gc
from collections.abc import Callable

import pyarrow as pa

__all__ = ["release_freed_memory"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (None where the C library has none: musl, macOS, Windows)."""
    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # no process symbol table to open (Windows)
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_freed_memory() -> None:
    """Collect garbage, then return the C heap's and Arrow's free pages to the system. Live
    objects are untouched; only pages no object uses are given back.

    >>> release_freed_memory()
    """
    gc.collect()
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
