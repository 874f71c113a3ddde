"""How the metrics stage's chunks scale with the nodes of a Ray cluster (issue 43, item 5: "k
nodes give identical tables; chunk throughput scales >= 0.8 k").

For each k in ``--nodes`` a child process starts a local Ray cluster of k nodes with one CPU
each (``ray.cluster_utils.Cluster``, as tests/test_metrics_ray.py does: every node a set of
processes on this machine) and measures, on the scale bench's store (``python
bench/scale_bench.py --copies 400``: 100,000 traces, 3.70M rollouts; built here once, then
reused):

* **the chunks** — the stage's chunk function (:func:`precompute.stages.metrics.metrics_chunk`)
  as one Ray task per bucket over every bucket at once, the buckets' inputs read by the stage's
  own reader and put in the object store, and each node's worker started on an empty bucket,
  *before* the clock starts: chunks per second of the Ray part and of the driver's resampling
  of what comes back (as the stage batches it), and each task's own compute seconds (so the
  busy share of the k CPUs says how much is Ray's overhead or idling);
* **the stage** — the real ``metrics`` stage with ``--engine ray --address <the cluster>`` on a
  copy of the store (the demo's config, as ``bench/app_bench.py`` runs it), whole, and its
  bucketed part (:func:`precompute.stages.metrics.compute_in_chunks`: the driver reads each
  bucket, the workers compute, the driver writes the rows and merges the partials) timed by a
  wrapper.

The tables the stage stored (and the chunks' efficiency rows) are checked identical across k.
Peak memory: the driver's own peak (``VmHWM``) and the sum of the Ray workers' resident memory
(``ray::`` processes) sampled every 0.2 s. The load average before and after each k is printed:
on a shared machine the other jobs take CPU from the nodes. ::

    python bench/ray_scaling.py [--nodes 1 2] [--copies 400] [--chunks 16] [--no-stage]
    python bench/ray_scaling.py --smoke          # 4 demo copies, 4 buckets: checks it runs

Ray comes with the cluster extra (``pip install -r requirements-cluster.txt``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.app_bench import own_peak_gb  # noqa: E402

#: The tables the stage stores from its buckets and their merged partials, compared across k.
TABLES = ("trace_efficiency", "trace_transfer", "teacher_metrics", "decomposition",
          "transfer_curves")  # fmt: skip


def timed_chunk(inputs: dict[str, pd.DataFrame], settings: Any) -> tuple[Any, float, str]:
    """On a worker: the stage's chunk function, its own wall seconds and the node it ran on."""
    import ray

    from precompute.stages.metrics import metrics_chunk

    started = time.perf_counter()
    result = metrics_chunk(inputs, settings)
    return result, time.perf_counter() - started, ray.get_runtime_context().get_node_id()


class Sampler:
    """The peak of the summed resident memory of this process's ``ray::`` descendants (the
    workers), sampled every ``every`` seconds in a thread."""

    def __init__(self, every: float = 0.2) -> None:
        self.every, self.peak, self._stop = every, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil  # type: ignore[import-untyped]

        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for child in me.children(recursive=True):
                try:
                    if child.name().startswith("ray::") or "default_worker" in " ".join(
                        child.cmdline()[:3]
                    ):
                        total += child.memory_info().rss
                except psutil.Error:
                    continue
            self.peak = max(self.peak, total)
            self._stop.wait(self.every)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def stage_context(store_path: Path, options: dict[str, Any]) -> Any:
    """The stage's context as ``bench/app_bench.py`` runs it: the demo's config."""
    from legival_core.store.store import Store
    from precompute.demo import DemoOptions, demo_config
    from precompute.stages import StageContext

    return StageContext(
        store=Store.open(store_path),
        config=demo_config(DemoOptions()),
        progress=False,
        stage_options={"metrics": options},
    )


def bucket_items(store_path: Path, chunks: int) -> tuple[list[dict[str, pd.DataFrame]], Any]:
    """Every bucket's inputs, as the stage prepares and reads them, and the chunk settings."""
    from precompute.stages import metrics as m
    from precompute.stages.common import read_or_empty

    ctx = stage_context(store_path, {})
    cfg, store = ctx.config.metrics, ctx.store
    traces = read_or_empty(store, "traces", list(m.METRICS_TRACE_COLUMNS))
    grades = read_or_empty(store, "grades", ["trace_id", "correct"])
    counts = read_or_empty(store, "trace_counts", list(m.COUNT_COLUMNS))
    leaks = read_or_empty(store, "answer_leaks", ["trace_id", "leak_k"])
    with_rollouts = set(m._trace_ids_in(store, "rollouts"))
    leaks = leaks[leaks["trace_id"].isin(with_rollouts)][["trace_id", "leak_k"]]
    leaks = leaks.reset_index(drop=True).astype({"leak_k": "Int64"})
    labeler = m.primary_labeler(ctx)
    buckets = m.problem_buckets(traces["problem_id"], chunks)
    per_trace = {
        "traces": traces,
        "counts": counts,  # every encoding's: the robustness report's other encoding
        "grades": grades,
        "leaks": leaks,
    }
    of_trace = pd.Series(buckets, index=traces["trace_id"].astype(str).to_numpy())
    reader = m.store_bucket_reader(store)
    problems = store.read("problems", ["problem_id", "workload"])
    settings = m.chunk_settings(cfg, labeler, store.manifest, problems)  # as the stage runs them
    return list(m._bucket_inputs(per_trace, of_trace, reader)), settings


def warm_workers(function: Any, bucket: Any, shared: Any) -> float:
    """Seconds to run ``function`` on an empty bucket once on every node, before the clock: a
    node's first task starts its worker process and imports the stage (about 3 s), a cost
    paid once per node and run, not per chunk."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def emptied(inputs: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
        return {name: frame.iloc[:0] for name, frame in inputs.items()}

    empty = ray.put(emptied(ray.get(bucket)))
    started = time.perf_counter()
    on_node = [
        ray.remote(function)
        .options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
        .remote(empty, shared)
        for n in ray.nodes()
        if n["Alive"]
    ]
    ray.get(on_node)
    return time.perf_counter() - started


def measure_chunks(store_path: Path, chunks: int) -> tuple[dict[str, Any], pd.DataFrame]:
    """The chunk function as Ray tasks over every bucket, inputs already in the object store;
    the driver resamples the results' rows as the stage does."""
    import ray

    from precompute.stages import metrics as m

    started = time.perf_counter()
    items, settings = bucket_items(store_path, chunks)
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    refs = []
    while items:  # put and drop each bucket: the driver holds one bucket's frames at a time
        refs.append(ray.put(items.pop(0)))
    shared = ray.put(settings)
    put_s = time.perf_counter() - started
    task = ray.remote(timed_chunk).options(scheduling_strategy="SPREAD")
    warm_s = warm_workers(timed_chunk, refs[0], shared)
    started = time.perf_counter()
    position = {ref: i for i, ref in enumerate(task.remote(ref, shared) for ref in refs)}
    pending, parts = list(position), [pd.DataFrame()] * len(refs)
    compute, nodes, get_s, resample_s = [], set(), 0.0, 0.0
    board, board_rows, rollouts = None, [], None
    while pending:  # each result as it is done, then dropped
        done, pending = ray.wait(pending, num_returns=1)
        got = time.perf_counter()
        result, seconds, node = ray.get(done[0])
        get_s += time.perf_counter() - got
        # what the stage's driver does with a chunk's rows (compute_in_chunks): they wait
        # in one batch, resampled together once the batch passes RESAMPLE_BATCH_BYTES
        got = time.perf_counter()
        board_rows.append(result.board)
        if result.rollouts is not None:
            rollouts = result.rollouts if rollouts is None else rollouts.merge(result.rollouts)
        board, rollouts = m._weigh_if_due(board, board_rows, rollouts)
        resample_s += time.perf_counter() - got
        parts[position[done[0]]] = result.efficiency
        compute.append(seconds)
        nodes.add(node)
        del result
    got = time.perf_counter()
    m._weigh_board(board, board_rows)
    if rollouts is not None:
        rollouts.resampled()
    resample_s += time.perf_counter() - got
    map_s = time.perf_counter() - started
    efficiency = pd.concat(parts, ignore_index=True)
    return {
        "buckets": len(refs),
        "read_s": read_s,
        "put_s": put_s,
        "map_s": map_s,
        "get_s": get_s,
        "resample_s": resample_s,
        "warm_s": warm_s,
        "task_s": sum(compute),
        "task_max_s": max(compute),
        "nodes_used": len(nodes),
    }, efficiency


def measure_stage(store_path: Path, address: str, chunks: int) -> dict[str, float]:
    """The real stage with ``--engine ray --address``; its bucketed part timed by a wrapper."""
    from precompute.stages import metrics as m
    from precompute.stages import run_stage

    inner = m.compute_in_chunks
    part: dict[str, float] = {}

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            part["bucketed_s"] = time.perf_counter() - started

    m.compute_in_chunks = timed  # type: ignore[assignment]
    try:
        ctx = stage_context(store_path, {"engine": "ray", "address": address, "chunks": chunks})
        started = time.perf_counter()
        run_stage("metrics", ctx)
        return {"stage_s": time.perf_counter() - started, **part}
    finally:
        m.compute_in_chunks = inner  # type: ignore[assignment]


def child(k: int, built: Path, work: Path, chunks: int, stage: bool, object_gb: float) -> None:
    """Run in a child process: a k-node local cluster, the two measures, one line of JSON."""
    import ray
    from ray.cluster_utils import Cluster

    load_before = os.getloadavg()[0]
    # The nodes' workers are processes of this machine: they import this checkout.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get(
        "PYTHONPATH")]))  # fmt: skip
    node: dict[str, Any] = {"num_cpus": 1, "object_store_memory": int(object_gb * 1024**3)}
    started = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    for _ in range(k - 1):
        cluster.add_node(**node)
    figures: dict[str, Any] = {"k": k}
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        alive = [n for n in ray.nodes() if n["Alive"]]
        figures["nodes"] = len(alive)
        figures["start_s"] = time.perf_counter() - started
        with Sampler() as sampler:
            chunk_figures, efficiency = measure_chunks(built, chunks)
            figures.update(chunk_figures)
            efficiency.to_pickle(work / f"chunks-k{k}.pkl")
            del efficiency
            if stage:
                copy = work / f"store-k{k}"
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(built, copy)
                figures.update(measure_stage(copy, cluster.address, chunks))
        figures["workers_peak_gb"] = sampler.peak / 1e9
    finally:
        ray.shutdown()
        cluster.shutdown()
    figures["driver_peak_gb"] = own_peak_gb()
    figures["load"] = [load_before, os.getloadavg()[0]]
    print(json.dumps(figures), flush=True)


def same_tables(work: Path, ks: list[int], stage: bool) -> list[str]:
    """What differs between the first k's results and each other k's (empty: identical)."""
    from legival_core.store.store import Store

    differences = []
    first = pd.read_pickle(work / f"chunks-k{ks[0]}.pkl")
    for k in ks[1:]:
        other = pd.read_pickle(work / f"chunks-k{k}.pkl")
        try:
            pd.testing.assert_frame_equal(other, first, check_exact=True)
        except AssertionError as error:
            differences.append(f"chunks' trace_efficiency k={k}: {str(error)[:200]}")
        if not stage:
            continue
        base, store = Store.open(work / f"store-k{ks[0]}"), Store.open(work / f"store-k{k}")
        for table in TABLES:
            if not base.has(table):
                continue
            try:
                pd.testing.assert_frame_equal(store.read(table), base.read(table), check_exact=True)
            except AssertionError as error:
                differences.append(f"{table} k={k}: {str(error)[:200]}")
    return differences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument(
        "--store", type=Path, default=Path("/tmp/legival-ray-scaling"), help="built store, copies"
    )
    parser.add_argument("--copies", type=int, default=400, help="demo copies (250 traces each)")
    parser.add_argument("--chunks", type=int, default=16, help="buckets (Ray tasks)")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2], help="k, one CPU each")
    parser.add_argument("--no-stage", action="store_true", help="the chunks alone, not the stage")
    parser.add_argument("--object-gb", type=float, default=2.0, help="object store per node")
    parser.add_argument("--smoke", action="store_true", help="4 copies, 4 buckets")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.copies, args.chunks = 4, 4
    from bench.scale_bench import build

    built = args.store / f"copies-{args.copies}"
    work = args.store / "runs"
    if args.child:
        child(args.child, built, work, args.chunks, not args.no_stage, args.object_gb)
        return 0
    build(built, args.copies, chunk=250, students=5)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in args.nodes:
        command = [sys.executable, __file__, "--store", str(args.store), "--copies",
                   str(args.copies), "--chunks", str(args.chunks), "--object-gb",
                   str(args.object_gb), "--child", str(k)]  # fmt: skip
        if args.no_stage:
            command.append("--no-stage")
        run = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
        lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
        if run.returncode or not lines:
            print(f"k={k} FAILED (exit {run.returncode}): {(run.stderr or run.stdout)[-1500:]}")
            return 1
        rows.append(json.loads(lines[-1]))
        print(f"  k={k} done: {rows[-1]}", flush=True)
    base = rows[0]
    print(f"\n{args.copies * 250:,} traces, {base['buckets']} buckets; one CPU per node")
    head = ("k | start s | read+put s | warm s | chunks: map s | driver get s | driver "
            "resample s | chunks/s | speed-up | "
            "efficiency | "
            "busy | task mean/max s | stage: bucketed s | speed-up | whole s | speed-up | "
            "driver GB | "
            "workers GB | load before/after")  # fmt: skip
    print(head)
    for row in rows:
        k = row["k"]
        speed = base["map_s"] / row["map_s"] * base["k"]
        busy = row["task_s"] / (row["map_s"] * k)
        stage = "– | – | – | –"
        if "stage_s" in row:
            part = base["bucketed_s"] / row["bucketed_s"] * base["k"]
            whole = base["stage_s"] / row["stage_s"] * base["k"]
            stage = f"{row['bucketed_s']:.1f} | {part:.2f}× | {row['stage_s']:.1f} | {whole:.2f}×"
        print(
            f"{k} | {row['start_s']:.1f} | {row['read_s']:.1f}+{row['put_s']:.1f} | "
            f"{row['warm_s']:.1f} | {row['map_s']:.1f} | {row['get_s']:.1f} | "
            f"{row['resample_s']:.1f} | {row['buckets'] / row['map_s']:.3f} | "
            f"{speed:.2f}× | "
            f"{speed / k:.2f} | {busy:.0%} | {row['task_s'] / row['buckets']:.2f}/"
            f"{row['task_max_s']:.2f} | {stage} | {row['driver_peak_gb']:.2f} | "
            f"{row['workers_peak_gb']:.2f} | {row['load'][0]:.1f}/{row['load'][1]:.1f}"
        )
    differences = same_tables(work, [r["k"] for r in rows], not args.no_stage)
    print("tables identical across k" if not differences else "DIFFER: " + "; ".join(differences))
    print(f"{os.cpu_count()} cores on this machine")
    return 1 if differences else 0


if __name__ == "__main__":
    raise SystemExit(main())
