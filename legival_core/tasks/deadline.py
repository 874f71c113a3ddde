"""Run a grading check in a separate worker process and give up after a deadline.

Why a worker process and not ``signal.alarm``: math-verify (through sympy) can spin for minutes
on adversarial LaTeX such as towers of powers. ``signal.alarm`` only works in the main thread
(math-verify's own timeout raises ``ValueError`` in threaded callers, e.g. a grading thread pool
or Streamlit), it cannot interrupt a C call that never returns to the interpreter, and a
``SIGALRM`` handler is process-global state that other libraries may also use. A child process
can always be killed. We start it with :mod:`subprocess` (``python -m
legival_core.tasks._deadline_worker``) rather than :mod:`multiprocessing`: no ``fork`` of a
process that may hold threads and locks, and no re-import of the caller's ``__main__`` (which
``spawn``/``forkserver`` do). Workers are reused, so the start-up and the import of math-verify
are paid once per worker, not per check; the import happens before the clock starts.

The callable is named by module and qualified name, so it must be a module-level function that
the worker can import (the worker gets the caller's ``sys.path``). Requests and replies are
length-prefixed pickles on the worker's stdin/stdout; both ends are this package, so nothing
untrusted is unpickled.
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

_HEADER = struct.Struct("<Q")
STARTUP_TIMEOUT_S = 120.0  # worker start + warm imports; generous because CI machines are slow
MAX_IDLE_WORKERS = 4

OutcomeStatus = Literal["ok", "timeout", "error"]


@dataclass(frozen=True)
class DeadlineOutcome:
    """What came back from :func:`run_with_deadline`.

    Attributes:
        status: ``"ok"`` (``value`` holds the result), ``"timeout"`` (the worker was killed at
            the deadline) or ``"error"`` (the call raised, or the worker died; see ``detail``).
        value: the callable's return value when ``status == "ok"``, else ``None``.
        detail: for errors, ``"ExceptionType: message"``; empty otherwise.
        elapsed_s: wall time of the timed call (excludes worker start-up and warm imports).
    """

    status: OutcomeStatus
    value: Any = None
    detail: str = ""
    elapsed_s: float = 0.0


class _WorkerDied(RuntimeError):
    pass


def _worker_env() -> dict[str, str]:
    # The worker must import whatever the caller can import (tests, editable checkouts).
    paths = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return env


class _Worker:
    """One long-lived child process that runs calls sent over a pipe."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "legival_core.tasks._deadline_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_worker_env(),
            start_new_session=True,  # a Ctrl-C in the terminal should not kill it mid-reply
        )
        self.imported: set[str] = set()
        self._buffer = b""
        try:
            hello = self._receive(time.monotonic() + STARTUP_TIMEOUT_S)
        except _WorkerDied:
            hello = None
        if hello is None or hello[0] != "ready":
            self.kill()
            raise _WorkerDied(f"grading worker did not start within {STARTUP_TIMEOUT_S:.0f} s")

    def _send(self, message: tuple[Any, ...]) -> None:
        assert self.process.stdin is not None
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.process.stdin.write(_HEADER.pack(len(payload)) + payload)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise _WorkerDied(f"worker pipe closed: {error}") from error

    def _read_exactly(self, size: int, deadline: float) -> bytes | None:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while len(self._buffer) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, max(65536, size - len(self._buffer)))
            if not chunk:
                code = self.process.poll()
                raise _WorkerDied(f"grading worker exited (code {code})")
            self._buffer += chunk
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def _receive(self, deadline: float) -> tuple[Any, ...] | None:
        header = self._read_exactly(_HEADER.size, deadline)
        if header is None:
            return None
        (size,) = _HEADER.unpack(header)
        body = self._read_exactly(size, deadline)
        if body is None:
            return None
        return pickle.loads(body)

    def ensure_imported(self, modules: Sequence[str]) -> None:
        missing = [m for m in modules if m not in self.imported]
        if not missing:
            return
        self._send(("import", missing))
        reply = self._receive(time.monotonic() + STARTUP_TIMEOUT_S)
        if reply is None:
            raise _WorkerDied(f"importing {missing} took over {STARTUP_TIMEOUT_S:.0f} s")
        if reply[0] != "ok":
            raise _WorkerDied(f"worker could not import {missing}: {reply[1]}")
        self.imported.update(missing)

    def call(self, module: str, qualname: str, args: tuple[Any, ...], timeout_s: float):
        self._send(("call", module, qualname, args))
        return self._receive(time.monotonic() + timeout_s)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


class _WorkerPool:
    """Idle workers shared by all threads; a busy worker belongs to exactly one call."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def acquire(self) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.process.poll() is None:
                    return worker
                worker.kill()
        return _Worker()

    def release(self, worker: _Worker) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE_WORKERS and worker.process.poll() is None:
                self._idle.append(worker)
                return
        worker.kill()

    def shutdown(self) -> None:
        with self._lock:
            workers, self._idle = self._idle, []
        for worker in workers:
            worker.kill()


_POOL = _WorkerPool()
atexit.register(_POOL.shutdown)


def _callable_address(func: Callable[..., Any]) -> tuple[str, str]:
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        raise ValueError(
            f"run_with_deadline needs a module-level function importable by name; got {func!r}"
        )
    return module, qualname


def run_with_deadline(
    func: Callable[..., Any],
    *args: Any,
    timeout_s: float,
    warm_imports: Sequence[str] = (),
) -> DeadlineOutcome:
    """Call ``func(*args)`` in a worker process; kill the worker if it overruns ``timeout_s``.

    Args:
        func: a module-level function (it is imported by name in the worker).
        *args: picklable arguments.
        timeout_s: wall-clock budget of the call in seconds (> 0). Worker start-up and
            ``warm_imports`` are not counted: a slow import must not turn into a wrong answer.
        warm_imports: modules to import in the worker before the clock starts.

    Returns:
        A :class:`DeadlineOutcome`; this function itself never raises for a failing or
        hanging ``func``.

    Example:
        >>> run_with_deadline(abs, -3, timeout_s=30).value
        3
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
    module, qualname = _callable_address(func)
    try:
        worker = _POOL.acquire()
    except (_WorkerDied, OSError) as error:
        return DeadlineOutcome("error", detail=f"grading worker failed to start: {error}")
    try:
        worker.ensure_imported([*warm_imports, module])
    except _WorkerDied as error:
        worker.kill()
        return DeadlineOutcome("error", detail=str(error))
    started = time.monotonic()
    try:
        reply = worker.call(module, qualname, args, timeout_s)
    except _WorkerDied as error:
        worker.kill()
        return DeadlineOutcome("error", detail=str(error), elapsed_s=time.monotonic() - started)
    elapsed = time.monotonic() - started
    if reply is None:
        worker.kill()  # the only safe way to stop a hung sympy call
        return DeadlineOutcome("timeout", elapsed_s=elapsed)
    _POOL.release(worker)
    kind, payload = reply
    if kind == "ok":
        return DeadlineOutcome("ok", value=payload, elapsed_s=elapsed)
    return DeadlineOutcome("error", detail=str(payload), elapsed_s=elapsed)
