"""Run the precompute command line and SIGKILL it right after its N-th part of one table lands.

``python -m tests.kill_after_part TABLE:N <precompute arguments>`` is ``python -m precompute
<precompute arguments>`` with :meth:`Store.write` wrapped in this process: once the N-th part it
writes to TABLE has landed (renamed into place and listed in the manifest), the process kills
itself with SIGKILL. A crash test stops a writer exactly between two parts this way, without a
timed kill; the store's own code has no hook for it. (The stages killed this way write from the
process that runs the command; a shard process of ``rollout`` or ``reward`` would not be
wrapped.)

:func:`killed_after_part` turns a ``[python, -m, precompute, ...]`` command into this one.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from legival_core.store.store import Store

__all__ = ["install", "killed_after_part"]


def killed_after_part(command: Sequence[str], table: str, count: int) -> list[str]:
    """``command`` (``[python, "-m", "precompute", ...]``) run through this module: killed
    right after its ``count``-th part of ``table`` lands."""
    python, flag, module, *arguments = command
    if (flag, module) != ("-m", "precompute"):
        raise ValueError(f"not a `python -m precompute` command: {list(command)!r}")
    return [python, "-m", __name__, f"{table}:{count}", *arguments]


def install(table: str, count: int, kill: Callable[[], None] | None = None) -> None:
    """Wrap :meth:`Store.write` so that ``kill`` (default: SIGKILL this process) runs right
    after the ``count``-th part of ``table`` written in this process has landed."""
    original = Store.write
    landed = 0

    def kill_self() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    @functools.wraps(original)
    def write(self: Store, table_name: str, *args: Any, **kwargs: Any) -> Path:
        nonlocal landed
        path = original(self, table_name, *args, **kwargs)
        if table_name == table:
            landed += 1
            if landed == count:
                (kill or kill_self)()
        return path

    Store.write = write  # type: ignore[method-assign]


def main(argv: Sequence[str]) -> int:
    target, _, count = argv[0].partition(":")
    if not (target and count.isdigit() and int(count) > 0):
        raise SystemExit("usage: python -m tests.kill_after_part TABLE:N <precompute arguments>")
    install(target, int(count))
    from precompute.cli import main as precompute_main

    return precompute_main(list(argv[1:]))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
