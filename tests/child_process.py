"""A fresh Python interpreter for a test: what must not happen in the test's own process (an
import that must stay out of ``sys.modules``, a hang guard, a changed environment, a script run
as a user runs it).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["REPO", "python_child", "wait_for_a_part"]

REPO = Path(__file__).resolve().parents[1]


def python_child(
    *args: str,
    cwd: Path = REPO,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a new interpreter (this one's executable), in ``cwd`` (the repository
    by default), its output captured as text; ``timeout`` is a hang guard, not a measurement.

    >>> python_child("-c", "print(6 * 7)").stdout
    '42\\n'
    """
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def wait_for_a_part(process: subprocess.Popen[Any], parts: Path, deadline: float) -> None:
    """Wait until the first part of a table lands in the folder ``parts`` (or ``deadline``, a
    :func:`time.monotonic` time, passes) while ``process`` writes it; then it must still be
    running, so that a kill lands half-way (an event, not a guessed start-up time).
    """
    while time.monotonic() < deadline and process.poll() is None:
        if parts.is_dir() and any(parts.glob("part-*.arrow")):
            break
        time.sleep(0.05)
    assert process.poll() is None, "the process finished before it could be killed"
