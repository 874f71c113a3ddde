"""Safe files for a results store: nothing opened through a link, temp names, fsync, the lock.

Files are opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked to be regular files (a FIFO would
block, a device or a link would reach outside), folders are checked to be real folders, and a
temp file is named after its host and process (``.tmp-<host>-<pid>-<uid>``) so that the next
writer can tell a crashed writer's leftovers (:func:`temp_is_stale`) from a live one's.
:class:`FileLock` is the writers' advisory lock (``fcntl.flock``), re-entrant within a thread.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from legival_core.store.errors import NotPlainFile

try:  # POSIX; Windows falls back to msvcrt below
    import fcntl
except ImportError:  # pragma: no cover - not reached on Linux/macOS
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "HOST",
    "TEMP_MAX_AGE_S",
    "TEMP_PREFIX",
    "FileLock",
    "file_kind",
    "fsync_dir",
    "fsync_file",
    "is_plain_dir",
    "is_plain_file",
    "open_plain",
    "owner_is_gone",
    "pid_alive",
    "plain_dir",
    "plain_file",
    "temp_is_stale",
    "temp_name",
]


#: A temp file older than this is deleted by the next writer even if its owner looks alive
#: (e.g. it came from another host sharing the disk).
TEMP_MAX_AGE_S = 6 * 3600
TEMP_PREFIX = ".tmp-"
_TEMP_RE = re.compile(r"^\.tmp-(?P<host>[A-Za-z0-9.]*)-(?P<pid>\d+)-(?P<uid>[0-9a-f]+)(\.\w+)?$")
HOST = re.sub(r"[^A-Za-z0-9.]", "", socket.gethostname())[:40]


def temp_name(suffix: str) -> str:
    return f"{TEMP_PREFIX}{HOST}-{os.getpid()}-{uuid.uuid4().hex}{suffix}"


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    # Makes a rename durable on POSIX; directories cannot be opened this way on Windows.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


#: Flags that keep an open from following a symbolic link or waiting on a FIFO.
_SAFE_FLAGS = (
    getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)


def file_kind(mode: int) -> str:
    """What a file is, in words, from its ``st_mode``."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def open_plain(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that refuses anything but a regular file: a symbolic link as the last
    component fails (``O_NOFOLLOW``), a FIFO opens without blocking (``O_NONBLOCK``) and is then
    refused after ``fstat``. Raises :class:`NotPlainFile` naming the path and what it is."""
    try:
        fd = os.open(path, flags | _SAFE_FLAGS, mode)
    except OSError as exc:
        try:
            found = os.lstat(path)
        except OSError:
            raise exc from None
        if not stat.S_ISREG(found.st_mode):
            kind = file_kind(found.st_mode)
            raise NotPlainFile(path, f"is {kind}, not a file; not opened") from None
        raise
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        os.close(fd)
        raise NotPlainFile(path, f"is {file_kind(found.st_mode)}, not a file; not opened")
    return fd


def plain_dir(path: Path, *, create: bool = False) -> bool:
    """Whether ``path`` is a real folder (not a symbolic link to one); ``create`` makes it when
    absent. Anything else at ``path`` raises :class:`NotPlainFile`."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return False
        with contextlib.suppress(FileExistsError):
            os.mkdir(path)
        found = os.lstat(path)
    if not stat.S_ISDIR(found.st_mode):
        raise NotPlainFile(path, f"is {file_kind(found.st_mode)}, not a folder; not used")
    return True


def plain_file(path: Path) -> bool:
    """Whether ``path`` is a regular file itself (False: nothing is there, or it cannot be
    looked at). Anything else there, a symbolic link, a FIFO, a folder or a device, raises
    :class:`NotPlainFile`, as :func:`plain_dir` does for what is not a folder."""
    try:
        found = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(found.st_mode):
        raise NotPlainFile(path, f"is {file_kind(found.st_mode)}, not a file; not used")
    return True


def is_plain_file(path: Path) -> bool:
    """Whether ``path`` is a regular file itself (``lstat``: a link to one is not)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def is_plain_dir(path: Path) -> bool:
    """Whether ``path`` is a folder itself (``lstat``: a link to one is not)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return pid < (1 << 22)  # exists but not ours (or an odd platform): treat as alive
    return True


def owner_is_gone(host: str, pid: int) -> bool:
    """Whether the process named in a leftover's name (``host``, ``pid``) is known to be gone:
    a process of this host that no longer runs. Another host's process cannot be seen from
    here, so it is never known to be gone.

    >>> owner_is_gone(HOST, os.getpid()), owner_is_gone(HOST + "x", os.getpid())
    (False, False)
    """
    return host == HOST and not pid_alive(pid)


def temp_is_stale(path: Path, now: float) -> bool:
    try:
        age = now - path.stat().st_mtime
    except FileNotFoundError:
        return False
    if age > TEMP_MAX_AGE_S:
        return True
    match = _TEMP_RE.match(path.name)
    return bool(match and owner_is_gone(match["host"], int(match["pid"])))


def _lock_fd(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    import msvcrt  # pragma: no cover - Windows only

    while True:  # pragma: no cover
        try:
            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
            return
        except OSError:
            time.sleep(0.1)


def _unlock_fd(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return
    import msvcrt  # pragma: no cover - Windows only

    os.lseek(fd, 0, os.SEEK_SET)  # pragma: no cover
    msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # pragma: no cover


class FileLock:
    """An exclusive advisory lock on the file ``path`` (made if absent, never through a link),
    re-entrant within one thread: :meth:`held` inside :meth:`held` only counts the depth."""

    def __init__(self, path: Path):
        self.path = path
        self._local = threading.local()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth -= 1
            return
        fd = open_plain(self.path, os.O_RDWR | os.O_CREAT)  # never through a link
        try:
            _lock_fd(fd)
            self._local.depth = 1
            try:
                yield
            finally:
                self._local.depth = 0
                _unlock_fd(fd)
        finally:
            os.close(fd)
