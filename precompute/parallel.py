"""A slow stage as parallel one-thread shard processes, with one progress bar for them all.

On a small CPU machine the rollouts of llama.cpp students (and the reward model) go fastest as
one single-threaded process per core, each a shard of the traces: two threads in one process
spin-wait on each other (docs/demo.md). :func:`run_in_shards` starts them ("spawn": a clean
child with no copied engine or torch state) and draws **one** bar for the whole stage: each
shard reports its total and its progress through a queue instead of drawing a bar of its own.

Each shard writes its rows into the store as it goes and skips the keys already there, so a
run stopped at any point resumes where it stopped. A shard process whose parent has gone (the
parent was killed on its own) or has stopped early (an error, an interrupt sent to it alone)
exits within a second, as if killed with it: the pool's processes would otherwise wait for work
forever, or write on beside a rerun.
"""

from __future__ import annotations

import os
import queue as queue_module
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from precompute.config import ExperimentConfig
from precompute.progress import SilentBar, progress_bar

__all__ = ["PARALLEL_STAGES", "ShardBar", "default_jobs", "run_in_shards"]

#: Stages worth splitting over processes: the slow ones, whose work splits by trace (all
#: prefixes of a trace stay in one shard, sharing its cache).
PARALLEL_STAGES = ("rollout", "reward")
#: Seconds between two looks at the queue while the shards run.
_POLL_S = 0.5
#: Seconds between two checks, in a shard process, that its parent is still there.
_WATCH_S = 1.0
#: Exit status of a shard process that stopped because its parent was gone.
EXIT_PARENT_GONE = 3


def default_jobs() -> int:
    """One process per core, at most 8."""
    return max(1, min(os.cpu_count() or 1, 8))


class ShardBar(SilentBar):
    """The bar a shard's stage draws: it reports to the parent's queue instead of the terminal.

    ``queue`` gets ``("total", n)`` once and ``("done", n)`` per update; without a queue
    (progress off) nothing is reported. The rest is the silent bar's.
    """

    def __init__(self, queue: Any | None, total: int):
        self.queue = queue
        if queue is not None:
            queue.put(("total", int(total)))

    def update(self, n: int = 1) -> None:
        if self.queue is not None:
            self.queue.put(("done", int(n)))


def _exit_with_parent(parent: int, stop: Any) -> None:
    """Watch the parent from a daemon thread; exit at once when it is gone or has set
    ``stop`` (it failed, or was interrupted, and will not wait for the shard's work).

    Rows already written stay in the store (each part is written whole); the batch in flight
    is lost, as in any hard kill, and a rerun makes it again.
    """
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent and not stop.is_set():
            time.sleep(_WATCH_S)
        os._exit(EXIT_PARENT_GONE)

    threading.Thread(target=watch, name="legival-parent-watch", daemon=True).start()


#: The queue of the parent's bar, in a shard process (set when the process starts: a queue
#: goes to a child only when the child is started, never with each task).
_REPORTS: Any | None = None


def _start_shard_process(reports: Any | None, parent: int, stop: Any) -> None:
    """Initializer of each shard process: keep the report queue, watch the parent."""
    global _REPORTS
    _REPORTS = reports
    _exit_with_parent(parent, stop)


def _shard_worker(
    store_path: str,
    config: ExperimentConfig,
    name: str,
    stage_options: Mapping[str, Mapping[str, Any]],
    index: int,
    count: int,
) -> str:
    """One shard of stage ``name`` in this child process with one CPU thread; returns its
    summary."""
    for variable in ("LEGIVAL_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = "1"
    from legival_core.store.store import Store
    from precompute.sharding import Shard
    from precompute.stages import StageContext, run_stage

    ctx = StageContext(
        store=Store(Path(store_path)),
        config=config,
        shard=Shard(index, count),
        stage_options={key: dict(value) for key, value in stage_options.items()},
        bar_factory=lambda total, desc, unit: ShardBar(_REPORTS, total),
        announce=False,
    )
    try:
        result = run_stage(name, ctx)
    finally:
        ctx.engines.close()
    return f"[shard {index + 1}/{count}] {result.summary()}"


def run_in_shards(
    name: str,
    store_path: Path,
    config: ExperimentConfig,
    stage_options: Mapping[str, Mapping[str, Any]],
    count: int,
    progress: bool | None = None,
) -> list[str]:
    """Run stage ``name`` as ``count`` shard processes; returns their summaries in shard
    order. One bar (unless progress is off) counts the work of every shard."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from precompute.progress import progress_enabled

    context = get_context("spawn")
    # A plain queue, no manager process: nothing is left behind if this process is killed.
    reports = context.Queue() if progress_enabled(progress) else None
    # Set when this process stops early (an error, Ctrl-C sent to it alone): the shards exit
    # instead of running their share to the end while the pool waits for them.
    stop = context.Event()
    bar = progress_bar(0, name, name, enabled=progress)
    with ProcessPoolExecutor(
        count,
        mp_context=context,
        initializer=_start_shard_process,
        initargs=(reports, os.getpid(), stop),
    ) as pool:
        futures = [
            pool.submit(
                _shard_worker,
                str(store_path),
                config,
                name,
                dict(stage_options),
                index,
                count,
            )
            for index in range(count)
        ]
        try:
            while not all(future.done() for future in futures):
                _drain(reports, bar, wait=_POLL_S)
            while _drain(reports, bar, wait=0.2):  # reports still on their way
                pass
        except BaseException:
            stop.set()
            raise
        finally:
            bar.close()
        return [future.result() for future in futures]


def _drain(reports: Any | None, bar: Any, *, wait: float) -> int:
    """Move the shards' reports onto ``bar``, waiting up to ``wait`` seconds for the first;
    returns how many there were."""
    if reports is None:
        import time

        time.sleep(wait)
        return 0
    moved = 0
    while True:
        try:
            kind, n = reports.get(timeout=wait) if not moved else reports.get_nowait()
        except queue_module.Empty:
            return moved
        moved += 1
        if kind == "total":
            bar.total = (getattr(bar, "total", 0) or 0) + n
            refresh = getattr(bar, "refresh", None)
            if callable(refresh):
                refresh()
        else:
            bar.update(n)
