"""Progress bars and per-stage log files.

A stage shows one tqdm bar on stderr (count, rate and ETA) and writes a detailed log to
``store.log_path(stage)``. Nothing here prints to stdout, so a stage's stdout stays clean
for scripts.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["LOGGER_NAME", "progress_bar", "progress_enabled", "stage_logging"]

LOGGER_NAME = "precompute"

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def progress_enabled(requested: bool | None = None) -> bool:
    """Bars are on unless turned off by the caller or ``LEGIVAL_NO_PROGRESS=1``."""
    if requested is not None:
        return requested
    return os.environ.get("LEGIVAL_NO_PROGRESS", "") not in {"1", "true", "yes"}


def progress_bar(total: int, desc: str, unit: str = "item", enabled: bool | None = None) -> Any:
    """A tqdm bar on stderr showing done/total, rate and ETA.

    Returns an object with ``update(n)``, ``set_postfix_str(s)`` and ``close()``; when bars
    are disabled a silent stand-in with the same methods.
    """
    if not progress_enabled(enabled):
        return _SilentBar()
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=0.5,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
        "[{elapsed}<{remaining}, {rate_fmt}]{postfix}",
    )


class _SilentBar:
    """Stand-in for a tqdm bar when progress display is off."""

    def update(self, n: int = 1) -> None:
        del n

    def set_postfix_str(self, text: str) -> None:
        del text

    def close(self) -> None:
        pass

    def __enter__(self) -> _SilentBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def stage_logging(log_file: Path, stage: str) -> Iterator[logging.Logger]:
    """Send the ``precompute.<stage>`` logger (and library warnings) to ``log_file``.

    The handler is removed again on exit, so running several stages in one process (the
    ``run`` command) gives each its own file.
    """
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_file, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.setLevel(logging.INFO)
    root = logging.getLogger(LOGGER_NAME)
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    # Warnings of the libraries the stages call (legival_core, transformers) go to the file too.
    core = logging.getLogger("legival_core")
    core.addHandler(handler)
    try:
        yield logging.getLogger(f"{LOGGER_NAME}.{stage}")
    finally:
        root.removeHandler(handler)
        core.removeHandler(handler)
        handler.close()
