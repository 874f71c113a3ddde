"""Which out-of-core engine for the metrics stage's joins and group-bys: pandas as today, Polars
streaming, or DuckDB with a memory limit — measured on the scale bench's store before choosing
(issue 43, item 4).

Two aggregations the metrics stage makes over its two largest tables, each engine reading the
store's Arrow IPC parts (the ones the manifest lists) itself:

* ``rollouts``: per (trace, student), the rollouts, the solved ones and the largest prefix k —
  the shape of the per-trace transfer curves' input;
* ``similarity``: per trace, the steps and the steps with r_i > 0.8 — the redundancy share.

Each (engine, aggregation) runs in a child process of its own, so that its peak resident memory
(``VmHWM``) is its own; the results are checked equal across engines. Polars and DuckDB are
not project dependencies: ``pip install polars duckdb`` to run this. Usage::

    python bench/scale_bench.py --copies 4000 --build-only      # the 1M-trace store
    python bench/engine_choice.py --store /tmp/legival-scale/copies-4000 [--memory-gb 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.app_bench import own_peak_gb  # noqa: E402

ENGINES = ("pandas", "polars", "duckdb")
TASKS = ("rollouts", "similarity")
#: The redundancy threshold of the ``paper`` profile.
TAU = 0.8


def _parts(store: Path, table: str) -> list[str]:
    manifest = json.loads((store / "manifest.json").read_text(encoding="utf-8"))
    entry = manifest["tables"][table]
    return [str(store / "tables" / table / p["file"]) for p in entry["parts"]]


def run_pandas(store: Path, task: str, memory_gb: float) -> pd.DataFrame:
    from legival_core.store.store import Store

    opened = Store.open(store)
    if task == "rollouts":
        frame = opened.read("rollouts", columns=["trace_id", "student", "k", "correct"])
        grouped = frame.groupby(["trace_id", "student"], observed=True)
        return grouped.agg(
            n=("k", "size"), solved=("correct", "sum"), k_max=("k", "max")
        ).reset_index()
    frame = opened.read("similarity", columns=["trace_id", "max_similarity"])
    frame["above"] = frame["max_similarity"] > TAU
    grouped = frame.groupby("trace_id", observed=True)
    return grouped.agg(n=("above", "size"), above=("above", "sum")).reset_index()


def run_polars(store: Path, task: str, memory_gb: float) -> pd.DataFrame:
    import polars as pl

    scan = pl.scan_ipc(_parts(store, task))
    if task == "rollouts":
        query = scan.group_by("trace_id", "student").agg(
            pl.len().alias("n"), pl.col("correct").sum().alias("solved"), pl.col("k").max()
        )
        query = query.rename({"k": "k_max"})
    else:
        query = scan.group_by("trace_id").agg(
            pl.len().alias("n"), (pl.col("max_similarity") > TAU).sum().alias("above")
        )
    return query.collect(engine="streaming").to_pandas()


def run_duckdb(store: Path, task: str, memory_gb: float) -> pd.DataFrame:
    import duckdb
    import pyarrow.dataset as ds

    connection = duckdb.connect()
    connection.execute(f"SET memory_limit = '{memory_gb}GB'")
    connection.execute("SET threads = 2")
    parts = ds.dataset(_parts(store, task), format="ipc")  # noqa: F841 (read by the query)
    if task == "rollouts":
        sql = (
            "SELECT trace_id, student, count(*) AS n, sum(correct) AS solved, max(k) AS k_max "
            "FROM parts GROUP BY trace_id, student"
        )
    else:
        sql = (
            f"SELECT trace_id, count(*) AS n, count_if(max_similarity > {TAU}) AS above "
            "FROM parts GROUP BY trace_id"
        )
    return connection.execute(sql).df()


RUN = {"pandas": run_pandas, "polars": run_polars, "duckdb": run_duckdb}


def child(store: Path, engine: str, task: str, memory_gb: float, out: Path) -> None:
    started = time.perf_counter()
    result = RUN[engine](store, task, memory_gb)
    wall = time.perf_counter() - started
    keys = ["trace_id", "student"] if task == "rollouts" else ["trace_id"]
    result = result.astype({k: str for k in keys}).sort_values(keys).reset_index(drop=True)
    result.to_parquet(out)
    peak = own_peak_gb()
    print(json.dumps({"wall_s": wall, "peak_gb": peak, "rows": len(result)}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--memory-gb", type=float, default=4.0, help="DuckDB's memory limit")
    parser.add_argument("--out", type=Path, default=Path("/tmp/legival-engine-choice"))
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.child:
        engine, task = args.child
        child(args.store, engine, task, args.memory_gb, args.out / f"{engine}-{task}.parquet")
        return 0
    for task in TASKS:
        if len(_parts(args.store, task)) > 1:
            # Polars and DuckDB read the parts as they are; the store keeps the latest row of
            # a key written twice, which only a store of one part per table gives them too.
            print(f"{args.store}: table {task} has several parts; compact it first with "
                  f"`python -m precompute merge --store {args.store}`")  # fmt: skip
            return 2
    print(f"store {args.store}; DuckDB memory limit {args.memory_gb} GB")
    for task in TASKS:
        results: dict[str, pd.DataFrame] = {}
        for engine in ENGINES:
            command = [
                sys.executable, __file__, "--store", str(args.store), "--memory-gb",
                str(args.memory_gb), "--out", str(args.out), "--child", engine, task,
            ]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"{task:10s} {engine:7s} FAILED: {done.stderr.strip().splitlines()[-1:]}")
                continue
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            results[engine] = pd.read_parquet(args.out / f"{engine}-{task}.parquet")
            print(
                f"{task:10s} {engine:7s} {figures['wall_s']:7.1f} s wall, peak "
                f"{figures['peak_gb']:5.2f} GB, {figures['rows']:,} groups",
                flush=True,
            )
        first = next(iter(results.values()), None)
        for engine, frame in results.items():
            if first is not None:
                numbers = [c for c in frame.columns if c not in ("trace_id", "student")]
                same = frame[numbers].astype(float).equals(first[numbers].astype(float))
                print(f"{task:10s} {engine:7s} equal to {next(iter(results))}: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
