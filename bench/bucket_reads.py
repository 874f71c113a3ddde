"""How to read one bucket of traces' rows from the store: the store's keyed read, or a Polars
lazy scan of the table's parts — measured before choosing (issue 43, items 3-4).

For each per-row input of the metrics stage (``similarity``, ``judgments``, ``rollouts``) every
bucket's rows are read in turn, as the stage does (:func:`precompute.stages.metrics.
problem_buckets` of the problem ids), with the stage's columns:

* ``store`` — ``Store.read_arrow(table, columns, filters={"trace_id": ids})``: the manifest's
  parts, the latest part winning per key, an unreadable part a ``StoreError`` naming it;
* ``polars`` — ``pl.scan_ipc`` of each part the manifest lists, filtered by ``is_in(ids)``,
  the latest part winning per key (a part number, then ``unique(keep="last")``), collected by
  the streaming engine.

Each engine runs in a child process of its own, so its peak resident memory (``VmHWM``) is
its own; the row counts are checked equal. Polars is not a project dependency
(``pip install polars`` to run this)::

    python bench/scale_bench.py --copies 400 --build-only --store /tmp/scale
    python bench/bucket_reads.py --store /tmp/scale/copies-400 --chunks 16
    python bench/bucket_reads.py --store /tmp/scale/copies-400 --bytes-per-row
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.app_bench import own_peak_gb  # noqa: E402

ENGINES = ("store", "polars")


def child(store_path: Path, engine: str, chunks: int) -> dict[str, object]:
    from legival_core.store import schema
    from legival_core.store.store import Store
    from precompute.stages.metrics import BUCKET_COLUMNS, problem_buckets

    store = Store.open(store_path)
    traces = store.read("traces", ["trace_id", "problem_id"])
    buckets = problem_buckets(traces["problem_id"], chunks)
    ids = [traces["trace_id"][buckets == b].astype(str).tolist() for b in sorted(set(buckets))]
    rows: dict[str, int] = {}
    started = time.perf_counter()
    for table, columns in BUCKET_COLUMNS.items():
        rows[table] = 0
        keys = list(schema.spec(table).keys)
        wanted = list(dict.fromkeys([*keys, *columns]))
        for bucket in ids:
            if engine == "store":
                found = store.read_arrow(table, list(columns), {"trace_id": bucket})
                rows[table] += found.num_rows
                continue
            import polars as pl

            scans = [
                pl.scan_ipc(path).select(wanted).with_columns(pl.lit(i).alias("__part"))
                for i, path in enumerate(store.parts(table))
            ]
            query = pl.concat(scans).filter(pl.col("trace_id").is_in(bucket))
            query = query.sort("__part").unique(subset=keys, keep="last", maintain_order=True)
            frame = query.select(list(columns)).collect(engine="streaming")
            rows[table] += frame.height
    wall = time.perf_counter() - started
    peak = own_peak_gb()
    return {"wall_s": round(wall, 1), "peak_gb": round(peak, 2), "rows": rows}


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as status:
        return int(status.read().split()[1]) * resource.getpagesize()


def bytes_per_row(store_path: Path, table: str) -> dict[str, object]:
    """One bucket holding every trace, only ``table`` of the per-row inputs filled: the peak
    resident memory while it is read and computed (:func:`precompute.stages.metrics.
    metrics_chunk`), sampled every 5 ms, less the memory before, per row of ``table``."""
    import gc
    import threading

    import precompute.stages.metrics as stage
    from legival_core.store.store import Store
    from precompute.demo import DemoOptions, demo_config

    store = Store.open(store_path)
    labeler = "cues"
    inputs = {
        "traces": store.read("traces", list(stage.METRICS_TRACE_COLUMNS)),
        "counts": store.read("trace_counts", list(stage.COUNT_COLUMNS)),  # every encoding's
        "grades": store.read("grades", ["trace_id", "correct"]),
        "leaks": store.read("answer_leaks", ["trace_id", "leak_k"]),
    }
    read_rows = stage.store_bucket_reader(store)
    for name in stage.BUCKET_COLUMNS:
        inputs[name] = read_rows(name, [])
    # as the stage sets them (the demo's config: τ 0.8, paper, interpolate, cl100k_base): the
    # robustness report's and the redundancy sweep's partials too
    problems = store.read("problems", ["problem_id", "workload"])
    settings = stage.chunk_settings(
        demo_config(DemoOptions()).metrics, labeler, store.manifest, problems
    )
    warm = stage.metrics_chunk(inputs, settings)  # imports and the per-trace work first
    del warm
    gc.collect()
    before, top, done = _rss(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            top[0] = max(top[0], _rss())
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    inputs[table] = store.read(table, list(stage.BUCKET_COLUMNS[table]))  # every labeler's
    rows = len(inputs[table])
    stage.metrics_chunk(inputs, settings)
    done.set()
    sampler.join()
    return {"table": table, "rows": rows, "bytes_per_row": round((top[0] - before) / rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument(
        "--bytes-per-row", action="store_true", help="measure the stage's bytes per bucket row"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.table:
        print(json.dumps(bytes_per_row(args.store, args.table)))
        return 0
    if args.child:
        print(json.dumps(child(args.store, args.child, args.chunks)))
        return 0
    if args.bytes_per_row:
        for table in ("similarity", "judgments", "rollouts"):
            command = [sys.executable, __file__, "--store", str(args.store), "--table", table]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            print(done.stdout.strip().splitlines()[-1] if done.returncode == 0 else done.stderr)
        return 0
    results = {}
    for engine in ENGINES:
        command = [
            sys.executable, __file__, "--store", str(args.store), "--chunks", str(args.chunks),
            "--child", engine,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"{engine:7s} FAILED: {done.stderr.strip().splitlines()[-1:]}")
            continue
        results[engine] = json.loads(done.stdout.strip().splitlines()[-1])
        figures = results[engine]
        print(
            f"{engine:7s} {args.chunks} buckets: {figures['wall_s']:6.1f} s wall, peak "
            f"{figures['peak_gb']:5.2f} GB, rows {figures['rows']}",
            flush=True,
        )
    if len(results) == len(ENGINES):
        same = results["store"]["rows"] == results["polars"]["rows"]
        print(f"same rows: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
