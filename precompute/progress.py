"""Progress bars and per-stage log files.

A stage shows one tqdm bar on stderr (count, rate and ETA) and writes a detailed log to
``store.log_path(stage)``. Nothing here prints to stdout, so a stage's stdout stays clean
for scripts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

__all__ = [
    "LOGGER_NAME",
    "QuietFileHandler",
    "SilentBar",
    "progress_bar",
    "progress_enabled",
    "silence_library_bars",
    "stage_logging",
]

LOGGER_NAME = "precompute"

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def progress_enabled(requested: bool | None = None) -> bool:
    """Bars are on unless turned off by the caller or ``LEGIVAL_NO_PROGRESS=1``."""
    if requested is not None:
        return requested
    return os.environ.get("LEGIVAL_NO_PROGRESS", "") not in {"1", "true", "yes"}


def silence_library_bars() -> None:
    """Turn off the bars the libraries draw themselves (transformers' "Loading weights",
    huggingface_hub's downloads), here and in the processes started from here.

    ``--no-progress`` promises no bar at all, but those bars are not ours: transformers reads
    ``HF_HUB_DISABLE_PROGRESS_BARS`` when it is imported (the variable reaches shard processes
    too), and a library already imported is told directly.
    """
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()


def progress_bar(total: int, desc: str, unit: str = "item", enabled: bool | None = None) -> Any:
    """A tqdm bar on stderr showing done/total, rate and ETA.

    Returns an object with ``update(n)``, ``set_postfix_str(s)`` and ``close()``; when bars
    are disabled a silent stand-in with the same methods.
    """
    if not progress_enabled(enabled):
        return SilentBar()
    from tqdm import tqdm

    from precompute.terminal import unescaped

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        # The bar's carriage returns are its own: they go past the command's terminal escaping.
        file=unescaped(sys.stderr),
        dynamic_ncols=True,
        mininterval=0.5,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
        "[{elapsed}<{remaining}, {rate_fmt}]{postfix}",
    )


class SilentBar:
    """Stand-in for a tqdm bar when progress display is off: the methods the stages call, doing
    nothing (:class:`precompute.parallel.ShardBar` reports its updates instead)."""

    def update(self, n: int = 1) -> None:
        del n

    def set_postfix_str(self, text: str) -> None:
        del text

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class QuietFileHandler(logging.FileHandler):
    """A log file that stops at its first write error instead of printing a traceback.

    The standard handler prints ``--- Logging error ---`` and a traceback to stderr for every
    record it cannot write: on a full disk that buried the stage's one-line error under dozens
    of tracebacks. This one remembers the first error (:attr:`failure`), closes the file and
    drops the records after it; the caller decides whether to say so.
    """

    def __init__(self, filename: Path, encoding: str = "utf-8"):
        super().__init__(filename, encoding=encoding, delay=True)
        self.failure: OSError | None = None

    def _open(self):  # type: ignore[no-untyped-def]
        # Never through a symbolic link, never waiting on a FIFO: a received store's
        # logs/<stage>.log linked elsewhere must not make a stage append outside the store.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(self.baseFilename, flags, 0o644)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)

    def emit(self, record: logging.LogRecord) -> None:
        if self.failure is None:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handleError(record)  # a bad log call is a bug: report it as usual
            return
        self.failure = self.failure or error
        self._drop_stream()

    def flush(self) -> None:
        try:
            super().flush()
        except OSError as error:
            self.failure = self.failure or error
            self._drop_stream()

    def close(self) -> None:
        try:
            super().close()
        except OSError as error:  # the final flush on a full disk
            self.failure = self.failure or error
        finally:
            self.stream = None  # type: ignore[assignment]

    def _drop_stream(self) -> None:
        stream, self.stream = self.stream, None  # type: ignore[assignment]
        if stream is not None:
            # Its buffered lines cannot reach the disk either.
            with contextlib.suppress(OSError):
                stream.close()


@contextmanager
def stage_logging(log_file: Path, stage: str) -> Iterator[logging.Logger]:
    """Send the ``precompute.<stage>`` logger (and library warnings) to ``log_file``.

    The handler is removed again on exit, so running several stages in one process (the
    ``run`` command) gives each its own file. A log that cannot be written (a full disk) never
    prints tracebacks: when the stage itself succeeds, one warning line on stderr says the
    log is incomplete; when it fails, its own error says what went wrong.
    """
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = QuietFileHandler(log_file, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.setLevel(logging.INFO)
    root = logging.getLogger(LOGGER_NAME)
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    # Warnings of the libraries the stages call (legival_core, transformers) go to the file too.
    core = logging.getLogger("legival_core")
    core.addHandler(handler)
    failed = False
    try:
        yield logging.getLogger(f"{LOGGER_NAME}.{stage}")
    except BaseException:
        failed = True
        raise
    finally:
        root.removeHandler(handler)
        core.removeHandler(handler)
        handler.close()
        if handler.failure is not None and not failed:
            reason = handler.failure.strerror or str(handler.failure)
            print(
                f"precompute: warning: stage '{stage}': the log {log_file} is incomplete "
                f"({reason})",
                file=sys.stderr,
            )
