"""A fresh Python interpreter for a test: what must not happen in the test's own process (an
import that must stay out of ``sys.modules``, a hang guard, a changed environment, a script run
as a user runs it).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["REPO", "python_child"]

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
