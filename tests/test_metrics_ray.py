"""The metrics stage's chunks as Ray tasks on a cluster of two nodes (issue 43, item 5).

The test starts a real two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``: a
head and a second node, one CPU each), runs ``python -m precompute metrics --engine ray
--address …`` on a copy of the demo store and checks that the tables equal those of the run in
this process with the same chunks. Ray comes with the cluster extra (requirements-cluster.txt),
which CI installs; without it the test is skipped, as the other Ray tests are.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from legival_core.store.store import Store
from precompute.cli import EXIT_OK, EXIT_USAGE, main

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "results" / "demo"
TABLES = ("trace_efficiency", "trace_transfer", "teacher_metrics", "decomposition")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[str]:
    """The address of a two-node Ray cluster on this machine (workers import this checkout)."""
    cluster_utils = pytest.importorskip("ray.cluster_utils", reason="Ray: requirements-cluster")
    import os

    import ray

    saved = os.environ.get("PYTHONPATH")
    # Both nodes' workers are processes of this machine: they import this checkout.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), saved]))
    small = {"num_cpus": 1, "object_store_memory": 150 * 1024**2}
    cluster = cluster_utils.Cluster(
        initialize_head=True, head_node_args={**small, "include_dashboard": False}
    )
    cluster.add_node(**small)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        ray.shutdown()
        yield cluster.address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _copy(target: Path) -> Path:
    shutil.copytree(DEMO, target)
    return target


def test_the_chunks_on_a_two_node_cluster_give_the_local_tables(
    two_nodes: str, tmp_path: Path
) -> None:
    local, remote = _copy(tmp_path / "local"), _copy(tmp_path / "ray")
    common = ["--no-progress", "--chunks", "7"]
    assert main(["metrics", "--store", str(local), *common]) == EXIT_OK
    assert (
        main(["metrics", "--store", str(remote), *common, "--engine", "ray",
              "--address", two_nodes]) == EXIT_OK
    )  # fmt: skip
    for table in TABLES:
        pd.testing.assert_frame_equal(
            Store.open(remote).read(table), Store.open(local).read(table), check_exact=True
        )


def test_the_driver_takes_in_flight_buckets_ahead_of_the_result_it_awaits(
    two_nodes: str,
) -> None:
    """``--in-flight`` bounds the buckets read and submitted ahead (the nodes busy at once);
    the results still come in the buckets' order."""
    from precompute.chunk_runner import run_ray

    log: list[str] = []

    def power(base: int, exponent: int) -> int:  # (Ray takes Python functions, not builtins)
        return int(base**exponent)

    def buckets() -> Iterator[int]:
        for i in range(5):
            log.append(f"read {i}")
            yield i

    for square in run_ray(power, buckets(), 2, address=two_nodes, in_flight=2):
        log.append(f"got {square}")
    assert log == ["read 0", "read 1", "got 0", "read 2", "got 1", "read 3", "got 4",
                   "read 4", "got 9", "got 16"]  # fmt: skip
    with pytest.raises(ValueError, match="in_flight must be at least 1, got 0"):
        next(run_ray(power, [1], 2, address=two_nodes, in_flight=0))


def test_an_unknown_engine_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _copy(tmp_path / "s")
    with pytest.raises(SystemExit) as stopped:
        main(["metrics", "--store", str(store), "--engine", "spark"])
    assert stopped.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "invalid choice: 'spark'" in err and err.count("\n") == 1
