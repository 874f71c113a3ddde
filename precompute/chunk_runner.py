"""Where the metrics stage's chunks run: in this process, in worker processes of this machine,
or as Ray tasks on a cluster.

A runner takes a pure function and the per-chunk inputs and yields the function's results in
the order of the inputs; the caller (the stage's driver) writes each chunk's rows and merges the
partial sums, so the tables do not depend on the runner. ``ray`` submits one task per chunk,
spread over the cluster's nodes (never a Ray ``groupby`` of whole tables), to the cluster at
``address`` (``$RAY_ADDRESS`` when not given; a Ray started for this process when neither is):
``python -m precompute metrics --store DIR --engine ray --address HOST:PORT``. Every node must
be able to import ``legival_core`` and ``precompute`` (docs/running-at-scale.md).
``processes`` runs ``--in-flight`` worker processes of this machine (one a CPU by default),
which read their buckets from the stage's scratch files (:data:`WORKERS_READ_FILES`).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = [
    "RAY_IN_FLIGHT",
    "RUNNERS",
    "WORKERS_READ_FILES",
    "ChunkRunnerError",
    "default_workers",
    "run_local",
    "run_processes",
    "run_ray",
]

ChunkFunction = Callable[..., Any]
#: Ray tasks submitted ahead of the one awaited, unless told otherwise (``--in-flight``): the
#: driver holds at most this many chunks' inputs at once (the metrics stage's memory budget
#: counts them), and at most this many nodes' CPUs are busy.
RAY_IN_FLIGHT = 4


class ChunkRunnerError(RuntimeError):
    """A runner that cannot start: Ray not installed, or its cluster not reachable."""


def run_local(
    function: ChunkFunction,
    items: Iterable[Any],
    *extra: Any,
    address: str | None = None,
    in_flight: int = 1,
) -> Iterator[Any]:
    """``function(item, *extra)`` for each item, one after the other, in this process (one
    item at a time whatever ``in_flight``; ``address`` is a cluster's, unused here).

    >>> list(run_local(pow, [2, 3], 2))
    [4, 9]
    """
    for item in items:
        result = function(item, *extra)
        del item  # a chunk's inputs are freed before its result is merged, not after
        yield result


#: What ``next`` gives when the items are done (an item may be None).
_DONE = object()


def default_workers() -> int:
    """``--engine processes``' worker processes unless told otherwise (``--in-flight``): one a
    CPU this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _start_worker(parent: int) -> None:
    """A worker's start: one BLAS and OpenMP thread, as many workers as CPUs already keep every
    CPU busy (a second thread each only contends for them); and a watch that ends the worker
    once ``parent``, the stage's process, is gone. A stage killed outright cannot stop its
    workers, and they do not notice on their own: they waited on the task queue for ever,
    holding their memory."""
    import threading

    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    threading.Thread(target=_exit_without, args=(parent,), daemon=True).start()


def _exit_without(parent: int) -> None:
    """Return never: end this process once its parent is no longer ``parent`` (it died, and
    the process was handed to another)."""
    import time

    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def run_processes(
    function: ChunkFunction,
    items: Iterable[Any],
    *extra: Any,
    address: str | None = None,
    in_flight: int | None = None,
) -> Iterator[Any]:
    """``function(item, *extra)`` for each item in ``in_flight`` worker processes of this
    machine (default :func:`default_workers`), results in the order of ``items``; ``address``
    is a cluster's, unused here.

    Each worker computes one item at a time; the next item is read while they compute, so the
    caller holds at most ``in_flight + 1`` items' inputs, and merges each result while the
    workers go on. The workers are started fresh (``spawn``: nothing of this process's memory
    is shared or copied) and stopped when the items are done or the caller stops early.

    >>> list(run_processes(pow, [2, 3, 4], 2, in_flight=2))
    [4, 9, 16]
    """
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    workers = default_workers() if in_flight is None else in_flight
    if workers < 1:
        raise ValueError(f"run_processes: in_flight must be at least 1, got {workers}")
    from threadpoolctl import threadpool_limits

    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(os.getpid(),),
    )
    # The driver too: while the workers keep the CPUs busy, a BLAS thread of its own spins
    # waiting for a CPU (its merging took as long as the workers' chunks with two of them)
    limits = threadpool_limits(1)
    try:
        source = iter(items)
        pending: deque[Future[Any]] = deque()
        for item in source:
            pending.append(pool.submit(function, item, *extra))
            del item
            if len(pending) >= workers:
                break
        ahead = next(source, _DONE)  # read while the workers compute
        while pending:
            try:
                result = pending.popleft().result()
            except BrokenProcessPool:
                raise ChunkRunnerError(
                    "a worker process stopped before its bucket was done (killed, e.g. out of "
                    "memory); rerun to resume, with fewer workers (--in-flight) or a smaller "
                    "--memory-gb"
                ) from None
            if ahead is not _DONE:
                pending.append(pool.submit(function, ahead, *extra))
                # let go before the next is read (the pool holds it until a worker has it)
                ahead = None
                ahead = next(source, _DONE)
            yield result
            del result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        limits.restore_original_limits()


def run_ray(
    function: ChunkFunction,
    items: Iterable[Any],
    *extra: Any,
    address: str | None = None,
    in_flight: int = RAY_IN_FLIGHT,
) -> Iterator[Any]:
    """``function(item, *extra)`` for each item as a Ray task, spread over the nodes; results
    in the order of ``items``, with at most ``in_flight`` items taken and submitted ahead of
    the result awaited (so at most that many tasks run at once: give at least the cluster's
    CPUs to keep every node busy). Connects to ``address`` (else ``$RAY_ADDRESS``, else a
    local Ray) unless Ray is already connected, and disconnects afterwards if it connected
    here."""
    if in_flight < 1:
        raise ValueError(f"run_ray: in_flight must be at least 1, got {in_flight}")
    try:
        import ray
    except ImportError as error:
        raise ChunkRunnerError(
            "--engine ray needs Ray: pip install -r requirements-cluster.txt "
            f"(or run without --engine) ({error})"
        ) from None
    connected_here = not ray.is_initialized()
    if connected_here:
        target = address or os.environ.get("RAY_ADDRESS") or None
        try:
            ray.init(address=target, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise ChunkRunnerError(f"cannot connect to Ray at {target!r}: {error}") from None
    try:
        # (Ray's types cannot follow a function given at run time: Any)
        task: Any = ray.remote(function).options(scheduling_strategy="SPREAD")
        shared = [ray.put(value) for value in extra]
        # At most in_flight items submitted ahead: each is read when submitted (the metrics
        # stage reads a bucket's rows then) and held in the object store until done.
        pending: deque[Any] = deque()
        for item in items:
            pending.append(task.remote(item, *shared))
            if len(pending) >= in_flight:
                yield ray.get(pending.popleft())
        while pending:
            yield ray.get(pending.popleft())
    finally:
        if connected_here:
            ray.shutdown()


#: The runners whose workers are processes of this machine: they can read the stage's
#: scratch files themselves, where a cluster's nodes are sent the rows.
WORKERS_READ_FILES = frozenset({"processes"})

#: The runners ``--engine`` accepts.
RUNNERS: dict[str, Callable[..., Iterator[Any]]] = {
    "local": run_local,
    "processes": run_processes,
    "ray": run_ray,
}
