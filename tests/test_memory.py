"""precompute.memory.release_freed_memory gives the C heap's free pages back to the system:
blocks freed in the middle of the heap (a live block above them keeps ``free`` from trimming)
stay in the process until it is called."""

from __future__ import annotations

import ctypes
import platform

import pytest

from precompute.memory import _malloc_trim, release_freed_memory


def _rss_anon_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon line in /proc/self/status")


def _glibc() -> bool:
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def test_the_c_heaps_freed_middle_goes_back_to_the_system() -> None:
    if not _glibc():
        pytest.skip("malloc_trim is glibc's; elsewhere the call is a no-op (next test)")
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallopt(ctypes.c_int(-1), ctypes.c_int(1 << 30))  # M_TRIM_THRESHOLD: free never trims
    # 200 MB in 4 KB blocks (below the mmap threshold: they come from the heap), every block
    # touched; then all but every 256th freed, so live blocks pin the heap's top
    blocks = [libc.malloc(4096) for _ in range(51_200)]
    for block in blocks:
        ctypes.memset(block, 1, 4096)
    before_free = _rss_anon_mb()
    for i, block in enumerate(blocks):
        if i % 256:
            libc.free(block)
    after_free = _rss_anon_mb()
    release_freed_memory()
    after_release = _rss_anon_mb()
    for block in blocks[::256]:
        libc.free(block)
    libc.mallopt(ctypes.c_int(-1), ctypes.c_int(128 * 1024))  # glibc's default again
    # 199 MB freed: free() kept nearly all of it, the release gave most of it back
    assert before_free - after_free < 50, (before_free, after_free)
    assert after_free - after_release > 150, (after_free, after_release)


def test_without_malloc_trim_the_release_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the C library has no malloc_trim (musl, macOS, Windows) the call only collects
    garbage and releases Arrow's cache, without an error."""
    _malloc_trim.cache_clear()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: object())  # a C library without it
    try:
        assert _malloc_trim() is None
        release_freed_memory()
    finally:
        _malloc_trim.cache_clear()
