"""Things the tests build once per test run and then copy or read: a folder made by a slow
build (a toy store whose leak steps math-verify checks, the demo store after a metrics run) is
built by the first test that asks for it, under a lock that every xdist worker of the run
shares, and the other tests wait for it and take it as it is.

The folder lives for the run only (the session sets :data:`ROOT` in ``tests/conftest.py``:
under pytest's temporary folders, which pytest removes a few runs later), so a change of code
is always built again on the next run.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

#: The run's shared folder; None outside a test session (a script importing a fixture module),
#: where a folder of this process's own is made on first use.
ROOT: Path | None = None


def built_once(name: str, build: Callable[[Path], object]) -> Path:
    """The folder ``name`` of this run, made by ``build(folder)`` the first time any worker
    asks for it (in a scratch folder renamed into place once complete, so a failed build
    leaves nothing a later call could take for finished). Callers must not change it: copy it
    first (:func:`copy_of`)."""
    global ROOT
    if ROOT is None:
        ROOT = Path(tempfile.mkdtemp(prefix="legival-tests-"))
    ROOT.mkdir(parents=True, exist_ok=True)
    target = ROOT / name
    with open(ROOT / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if not target.exists():
            building = ROOT / f"{name}.building-{os.getpid()}"
            shutil.rmtree(building, ignore_errors=True)
            build(building)
            os.rename(building, target)
    return target


def copy_of(name: str, build: Callable[[Path], object], path: str | Path) -> Path:
    """:func:`built_once`'s folder copied to ``path`` (the caller's to change)."""
    shutil.copytree(built_once(name, build), path)
    return Path(path)
