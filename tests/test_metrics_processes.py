"""The metrics stage's chunks in worker processes of this machine (``--engine processes``).

On one machine the chunks are what takes the stage's time (two thirds of it at a million
traces), and one process computes them on one CPU. Worker processes compute several buckets at
once while the driver reads the next bucket and merges the results; the tables must be those
of the run in this process with the same buckets, whatever the workers.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from legival_core.store.store import Store
from precompute.chunk_runner import ChunkRunnerError, run_processes
from precompute.cli import EXIT_OK, main
from precompute.stages import metrics as stage
from precompute.stages.base import STAGES

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "results" / "demo"
#: every table the stage writes
TABLES = STAGES["metrics"].writes


@pytest.mark.slow
def test_the_chunks_in_two_worker_processes_give_the_local_tables(tmp_path: Path) -> None:
    local, workers = tmp_path / "local", tmp_path / "processes"
    shutil.copytree(DEMO, local)
    shutil.copytree(DEMO, workers)
    common = ["--no-progress", "--chunks", "7"]
    assert main(["metrics", "--store", str(local), *common]) == EXIT_OK
    assert (
        main(["metrics", "--store", str(workers), *common, "--engine", "processes",
              "--in-flight", "2"]) == EXIT_OK
    )  # fmt: skip
    for table in TABLES:
        pd.testing.assert_frame_equal(
            Store.open(workers).read(table), Store.open(local).read(table), check_exact=True
        )


def test_the_driver_reads_one_bucket_ahead_of_the_workers() -> None:
    """Two workers: buckets 0 and 1 go to them and bucket 2 is read while they compute; each
    result is handed over after the next bucket is submitted and the one after it read, so
    the driver holds at most three buckets' inputs. Results come in the buckets' order."""
    log: list[str] = []

    def buckets() -> Iterator[int]:
        for i in range(5):
            log.append(f"read {i}")
            yield i

    for square in run_processes(pow, buckets(), 2, in_flight=2):
        log.append(f"got {square}")
    assert log == ["read 0", "read 1", "read 2", "read 3", "got 0", "read 4", "got 1",
                   "got 4", "got 9", "got 16"]  # fmt: skip
    with pytest.raises(ValueError, match="in_flight must be at least 1, got 0"):
        next(run_processes(pow, [1], 2, in_flight=0))


def test_a_chunk_s_error_reaches_the_driver_as_itself() -> None:
    with pytest.raises(ZeroDivisionError):
        list(run_processes(divmod, [1, 0, 2], 0, in_flight=2))


def test_a_worker_killed_mid_bucket_is_a_clear_error() -> None:
    """A worker that dies (the kernel's out-of-memory killer, a kill) ends the run with one
    line that says what happened and what to do, not the pool's own error."""
    with pytest.raises(ChunkRunnerError, match=r"worker process stopped.*--in-flight"):
        list(run_processes(os._exit, [3], in_flight=1))


def test_the_budget_counts_a_bucket_a_worker(tmp_path: Path) -> None:
    """Each worker reads and holds its own bucket (the driver sends file names): with two
    workers the need is doubled (see tests/test_metrics_buckets.py for the rule by hand)."""
    store = Store.open(shutil.copytree(DEMO, tmp_path / "demo"))
    need = 4853 * 170 + 500 * 750 + 1544 * 760  # 2,373,450 bytes, the demo's rows
    options = {"memory_gb": 0.001, "chunks": 1, "engine": "processes", "in_flight": 2}
    assert stage.chunks_in_flight(options) == 2
    # 2 * 2,373,450 / 1e6 = 4.75 -> 5
    assert -(-2 * need // 1_000_000) == 5
    assert stage.budget_chunks(_rows(store), 0.001, stage.chunks_in_flight(options)) == 5
    # no --in-flight: one worker a CPU
    default = {"engine": "processes"}
    assert stage.chunks_in_flight(default) == len(os.sched_getaffinity(0))


def _rows(store: Store) -> dict[str, int]:
    tables = store.manifest["tables"]
    return {t: tables[t]["rows"] for t in ("similarity", "judgments", "rollouts")}


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def _blas_threads_of_worker(_: int) -> list[int]:
    import numpy  # noqa: F401  (its BLAS is what the chunks' sums use)

    return _blas_threads()


def test_the_workers_and_the_driver_use_one_blas_thread_each_while_they_run() -> None:
    """With as many workers as CPUs, a second BLAS thread per process only waits for a CPU,
    spinning: the driver's weighing took as long as the workers' chunks with two each. The
    driver's own limit is given back when the items are done."""
    import numpy  # noqa: F401

    before = _blas_threads()
    seen_by_driver: list[list[int]] = []
    for found in run_processes(_blas_threads_of_worker, [0, 1, 2], in_flight=2):
        assert found and set(found) == {1}  # in the worker
        seen_by_driver.append(_blas_threads())
    assert seen_by_driver == [[1] * len(before)] * 3
    assert _blas_threads() == before


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as children:
            found += [int(one) for one in children.read().split()]
    return found


def _is_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as command:
            return b"spawn_main" in command.read()
    except FileNotFoundError:
        return False


def _gone(pid: int) -> bool:
    """No such process, or only its exit status left (a zombie nobody has reaped)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return any(line.startswith("State:\tZ") for line in status)
    except FileNotFoundError:
        return True


def test_the_workers_end_when_the_stage_is_killed_outright(tmp_path: Path) -> None:
    """SIGKILL to the stage (the out-of-memory killer, ``kill -9``) leaves no worker behind:
    each one watches for its parent and ends itself within a second or so of it. Before the
    watch they lived on, idle, for ever."""
    import subprocess
    import sys
    import time

    script = tmp_path / "driver.py"
    script.write_text(
        "import time\n"
        "from precompute.chunk_runner import run_processes\n"
        "if __name__ == '__main__':\n"
        "    for _ in run_processes(time.sleep, [120, 120, 120], in_flight=2):\n"
        "        pass\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    driver = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env)
    try:
        workers: list[int] = []
        for _ in range(600):  # the two workers started (spawned: a few seconds at most)
            workers = [pid for pid in _children(driver.pid) if _is_worker(pid)]
            if len(workers) == 2:
                break
            time.sleep(0.1)
        assert len(workers) == 2, "the driver did not start its workers"
    finally:
        driver.kill()
        driver.wait()
    for _ in range(300):  # waited for, up to 30 s: each checks its parent every second
        if all(_gone(pid) for pid in workers):
            break
        time.sleep(0.1)
    left = [pid for pid in workers if not _gone(pid)]
    for pid in left:  # not left running after a failure either
        os.kill(pid, 9)
    assert left == []
