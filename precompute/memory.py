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

The opposite cost is paid inside a phase: glibc gives each large block (128 KiB and up) its
own ``mmap`` and unmaps it when freed, so a stage that makes and drops arrays of millions of
rows faults in zeroed pages again for every one of them. :func:`freed_blocks_kept` serves
every block from the heap and keeps freed ones there for the next; the phases' trims above
still hand them back. At a million traces it took 9% of the metrics stage's CPU and half its
kernel time (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
from collections.abc import Callable, Iterator

import pyarrow as pa

__all__ = ["freed_blocks_kept", "keep_freed_blocks", "release_freed_memory"]

# mallopt's parameter numbers and glibc's own defaults for them (malloc.h, mallopt(3))
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_DEFAULT_TRIM_THRESHOLD = 128 * 1024
_DEFAULT_MMAP_MAX = 65536
#: the heap's free top is given back only past this (mallopt takes an int: 2 GiB at most);
#: between phases :func:`release_freed_memory` trims whatever is free
_KEPT_TRIM_THRESHOLD = 2**31 - 1


@functools.cache
def _libc_function(name: str) -> Callable[..., int] | None:
    """A function of the C library this process runs on (None where it has no such name)."""
    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # no process symbol table to open (Windows)
        return None
    return getattr(libc, name, None)


def _set_heap(mmap_max: int, trim_threshold: int) -> bool:
    mallopt = _libc_function("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 where it took the value
    return bool(mallopt(_M_MMAP_MAX, mmap_max) and mallopt(_M_TRIM_THRESHOLD, trim_threshold))


def keep_freed_blocks() -> bool:
    """From now on, this process's large blocks come from glibc's heap and freed ones stay
    there for reuse (no ``mmap`` per block, no trim of the heap's top below 2 GiB). For a
    process that ends with its work, such as the metrics stage's workers; elsewhere use
    :func:`freed_blocks_kept`. False where the C library is not glibc (nothing changes).
    """
    return _set_heap(0, _KEPT_TRIM_THRESHOLD)


@contextlib.contextmanager
def freed_blocks_kept() -> Iterator[bool]:
    """:func:`keep_freed_blocks` for the block's length, then glibc's defaults again and the
    free pages handed back (:func:`release_freed_memory`): a process that goes on after the
    block (the app, a test run, a pipeline of stages) is left as it was. Yields whether the
    setting took.

    >>> with freed_blocks_kept() as kept:
    ...     isinstance(kept, bool)
    True
    """
    kept = keep_freed_blocks()
    try:
        yield kept
    finally:
        if kept:
            _set_heap(_DEFAULT_MMAP_MAX, _DEFAULT_TRIM_THRESHOLD)
            release_freed_memory()


def release_freed_memory() -> None:
    """Collect garbage, then return the C heap's and Arrow's free pages to the system. Live
    objects are untouched; only pages no object uses are given back.

    >>> release_freed_memory()
    """
    gc.collect()
    pa.default_memory_pool().release_unused()
    trim = _libc_function("malloc_trim")
    if trim is not None:
        trim.argtypes = [ctypes.c_size_t]
        trim.restype = ctypes.c_int
        trim(0)
