"""Replace a whole output folder at once: a kill leaves the old folder or the new one, never a mix.

``publish`` writes several files that only make sense together (a page and the CSV and TeX it
links to). Writing them in place, a kill in the middle left a page cut inside its inline
plotly.js beside the previous run's CSV. :func:`staged_folder` gives the writer an empty
sibling folder instead; when the writer is done, every file is fsynced and the sibling takes
the target's place:

* on Linux by ``renameat2(RENAME_EXCHANGE)``, one atomic system call that swaps the two names
  (the old folder is then deleted under its temporary name);
* elsewhere (or on a file system without the call) by two renames, target → ``.<name>.old-…``
  and staging → target; a kill between them leaves no target, and the next run (or
  :func:`recover`) renames the old folder back first.

Files that the old folder holds and the new one does not (something the user put there) are
carried over by hard link before the swap, so publishing never deletes them.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from legival_core.store.file_safety import fsync_dir, pid_alive  # one definition each

__all__ = ["KILL_IN_STAGING_ENV", "kill_if_asked", "recover", "staged_folder"]

#: Test hook for the crash tests, never set in normal use: ``N`` makes the process SIGKILL itself
#: right after :func:`kill_if_asked` was called the N-th time (publish calls it after each file
#: it writes and once just before the swap).
KILL_IN_STAGING_ENV = "LEGIVAL_TEST_KILL_IN_STAGING"
_calls = 0

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def kill_if_asked() -> None:
    """The :data:`KILL_IN_STAGING_ENV` hook: count calls, SIGKILL at the one asked for."""
    global _calls
    wanted = os.environ.get(KILL_IN_STAGING_ENV, "")
    if not wanted.isdigit():
        return
    _calls += 1
    if _calls == int(wanted):
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))


def _siblings(target: Path, kind: str) -> list[Path]:
    prefix = f".{target.name}.{kind}-"
    return sorted(p for p in target.parent.iterdir() if p.name.startswith(prefix))


def recover(target: Path) -> None:
    """Undo what a killed swap left: with no ``target`` but an ``.old-`` sibling, rename that
    back; then delete every leftover ``.old-`` and ``.tmp-`` sibling of dead writers."""
    target = Path(os.path.abspath(target))
    if not target.parent.is_dir():
        return
    old = _siblings(target, "old")
    if old and not os.path.lexists(target):
        os.rename(old[-1], target)
        fsync_dir(target.parent)
        old = old[:-1]
    for leftover in old:
        shutil.rmtree(leftover, ignore_errors=True)
    for staging in _siblings(target, "tmp"):
        pid = staging.name.rsplit("-", 2)[-2]
        if not (pid.isdigit() and pid_alive(int(pid))):
            shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """An empty sibling folder of ``target`` to write into; on a clean exit its files are
    fsynced and it replaces ``target`` atomically (see the module text). On an exception the
    sibling is deleted and ``target`` is untouched."""
    target = Path(os.path.abspath(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    recover(target)
    staging = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    try:
        yield staging
        if target.is_dir():
            _carry_over(target, staging)
        _fsync_tree(staging)
        kill_if_asked()
        _swap_in(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _carry_over(old: Path, new: Path) -> None:
    """Hard-link (else copy) into ``new`` every entry of ``old`` that ``new`` lacks."""
    for entry in old.iterdir():
        destination = new / entry.name
        if os.path.lexists(destination):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, destination, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(str(entry), str(destination))


def _link_or_copy(source: str, destination: str) -> None:
    if os.path.islink(source):
        os.symlink(os.readlink(source), destination)
        return
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def _swap_in(staging: Path, target: Path) -> None:
    if not os.path.lexists(target):
        os.rename(staging, target)
    elif _exchange(staging, target):
        shutil.rmtree(staging, ignore_errors=True)  # now the old folder
    else:
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:12]}"
        os.rename(target, old)
        os.rename(staging, target)
        fsync_dir(target.parent)
        shutil.rmtree(old, ignore_errors=True)
    fsync_dir(target.parent)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with Linux's ``renameat2``; False where it is unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _fsync_tree(root: Path) -> None:
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if path.is_symlink():
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(folder))
