"""Cold-start and rerun times of the app's leaderboard and transfer-curves pages on a big store.

    python bench/app_bench.py [--store /tmp/legival-bench] [--traces 100000] [--rollouts 2000000]

Builds (once) a synthetic results store of ``--traces`` traces and ``--rollouts`` rollouts:
12 teachers x 3 datasets, 2 students, 20 prefixes per correct trace, correctness drawn from a
seeded logistic curve. The numbers are synthetic; the derived ``teacher_metrics`` and
``transfer_curves`` tables are computed from them with the code the metrics stage runs. Then
each page is run headless with ``streamlit.testing.v1.AppTest``: "cold" = a run with every
cache empty (tables read from disk, views computed; modules already imported, as in a running
server), "rerun" = the same page again (cache hits). Wall and CPU seconds (this process, all
threads) are reported side by side, since the machine may be shared. Targets: cold < 1.5 s,
rerun < 0.2 s. Streamlit's own import and the browser's drawing are not included.

``--fallback`` times the transfer page without the ``transfer_curves`` table too (it then
computes the same view from the 2M rollouts).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `python bench/x.py` puts bench/ on sys.path, not the repo root

from legival_core import schema  # noqa: E402
from legival_core.store import Store  # noqa: E402

TEACHERS = [f"teacher-{i:02d}" for i in range(12)]
DATASETS = ["bench-math", "bench-gpqa", "bench-puzzles"]
STUDENTS = ["student-a", "student-b"]


def _arrow(table: str, columns: dict[str, object]) -> pa.Table:
    spec = schema.spec(table)
    arrays = [
        pa.array(columns[f.name], type=f.type)
        if f.name in columns
        else pa.nulls(len(next(iter(columns.values()))), f.type)
        for f in spec.schema
    ]
    return pa.Table.from_arrays(arrays, schema=spec.schema)


def add_transfer_curves(store: Store) -> None:
    """Write the ``transfer_curves`` table from the store's rollouts, as the metrics stage does."""
    from legival_core.transfer import ROLLOUT_COLUMNS
    from legival_core.views import rollouts_stamp
    from precompute.stages.metrics import transfer_curves_table

    started = time.perf_counter()
    stamp = rollouts_stamp(store.manifest)
    rollouts = store.read("rollouts", columns=list(ROLLOUT_COLUMNS))
    store.write("transfer_curves", transfer_curves_table(rollouts, stamp, 0), stage="metrics")
    print(f"wrote transfer_curves in {time.perf_counter() - started:.1f} s", flush=True)


def build(path: Path, n_traces: int, n_rollouts: int, seed: int = 0) -> Store:
    """Write the synthetic store at ``path`` (reused when it is already there)."""
    if (path / "manifest.json").exists():
        store = Store.open(path)
        if not store.has("transfer_curves"):  # a store built before the table existed
            add_transfer_curves(store)
        return store
    from legival_core.transfer import teacher_metrics

    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    store = Store.create(path, config={"kind": "app benchmark", "synthetic": True})
    index = np.arange(n_traces)
    teacher = np.array(TEACHERS)[index % len(TEACHERS)]
    dataset = np.array(DATASETS)[(index // len(TEACHERS)) % len(DATASETS)]
    trace_id = np.char.add("b-", index.astype(str))
    problem_id = np.char.add(np.char.add(dataset, "/p"), (index // 36).astype(str))
    skill = (index % len(TEACHERS)) / len(TEACHERS)
    correct = rng.random(n_traces) < 0.5 + 0.4 * skill
    tokens = rng.integers(200, 8000, n_traces)
    store.write(
        "traces",
        _arrow(
            "traces",
            {
                "trace_id": trace_id,
                "problem_id": problem_id,
                "dataset": dataset,
                "teacher": teacher,
                "sample": np.zeros(n_traces, np.int32),
                "reasoning": np.full(n_traces, "synthetic"),
                "tokens": tokens,
                "truncated": np.zeros(n_traces, bool),
                "complete": np.ones(n_traces, bool),
            },
        ),
    )
    store.write(
        "grades",
        _arrow(
            "grades",
            {
                "trace_id": trace_id,
                "correct": correct,
                "status": np.full(n_traces, "ok"),
            },
        ),
    )
    store.write(
        "trace_efficiency",
        _arrow(
            "trace_efficiency",
            {
                "trace_id": trace_id,
                "teacher": teacher,
                "dataset": dataset,
                "problem_id": problem_id,
                "correct": correct,
                "tokens": tokens,
                "steps": rng.integers(10, 200, n_traces).astype(np.int32),
                "redundancy": rng.random(n_traces) * 0.4,
                "backtracking": rng.random(n_traces) * 0.2,
            },
        ),
    )
    # Rollouts: 20 prefixes (k = 0..19 of m = 19) x 2 students for as many correct traces as fit.
    per_trace = 20 * len(STUDENTS)
    chosen = np.flatnonzero(correct)[: n_rollouts // per_trace]
    rows = len(chosen) * per_trace
    pair = np.repeat(chosen, per_trace)
    k = np.tile(np.arange(20), len(chosen) * len(STUDENTS)).astype(np.int32)
    student = np.tile(np.repeat(np.array(STUDENTS), 20), len(chosen))
    m = np.full(rows, 19, np.int32)
    midpoint = 0.2 + 0.6 * skill[pair]
    p_correct = 1 / (1 + np.exp(-12 * (k / 19 - midpoint)))
    outcome = (rng.random(rows) < np.where(k == 0, 0.1, p_correct)).astype(np.float64)
    rollouts = _arrow(
        "rollouts",
        {
            "trace_id": trace_id[pair],
            "student": student,
            "k": k,
            "sample": np.zeros(rows, np.int32),
            "teacher": teacher[pair],
            "dataset": dataset[pair],
            "problem_id": problem_id[pair],
            "m": m,
            "correct": outcome,
        },
    )
    store.write("rollouts", rollouts)
    frame = rollouts.select(
        ["teacher", "dataset", "student", "trace_id", "problem_id", "k", "m", "correct"]
    ).to_pandas()
    transfer = teacher_metrics(frame, n_boot=0)
    efficiency = pd.DataFrame(
        {"teacher": teacher, "dataset": dataset, "correct": correct, "tokens": tokens}
    )
    summary = (
        efficiency.groupby(["teacher", "dataset"])
        .agg(accuracy=("correct", "mean"), tokens=("tokens", "mean"), n_traces=("correct", "size"))
        .reset_index()
    )
    summary = summary.merge(
        transfer[
            ["teacher", "dataset", "fotu", "sotu", "regression_rate", "never_solved", "baseline"]
        ],
        on=["teacher", "dataset"],
    )
    store.write("teacher_metrics", summary)
    add_transfer_curves(store)
    print(
        f"built {path}: {n_traces:,} traces, {rows:,} rollouts in "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    return store


def _timed(run: object) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    run()  # type: ignore[operator]
    return time.perf_counter() - wall, time.process_time() - cpu


def time_page(page: str, repeats: int = 5) -> tuple[tuple[float, float], tuple[float, float]]:
    """(cold, median rerun) of one page under AppTest, each as (wall, CPU) seconds."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    at.run()  # warm-up: imports (plotly, scipy, ...) are a one-off per server process
    if page != "leaderboard":
        at.query_params.clear()
        at.switch_page(f"pages/{page}.py")
        at.run()
    st.cache_data.clear()
    st.cache_resource.clear()
    cold = _timed(at.run)
    if at.exception:
        raise RuntimeError([e.value for e in at.exception])
    reruns = [_timed(at.run) for _ in range(repeats)]
    rerun = (
        statistics.median(w for w, _ in reruns),
        statistics.median(c for _, c in reruns),
    )
    return cold, rerun


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, default=Path("/tmp/legival-bench"))
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--rollouts", type=int, default=2_000_000)
    parser.add_argument(
        "--fallback",
        action="store_true",
        help="also time the transfer page on a copy of the store without transfer_curves",
    )
    args = parser.parse_args()
    build(args.store, args.traces, args.rollouts)
    import streamlit.testing.v1  # noqa: F401  (import cost kept out of the timings)

    runs = [("leaderboard", args.store), ("transfer", args.store)]
    if args.fallback:
        runs.append(("transfer", without_transfer_curves(args.store)))
    for page, store in runs:
        os.environ["LEGIVAL_STORE"] = f"bench={store}"
        (cold_wall, cold_cpu), (rerun_wall, rerun_cpu) = time_page(page)
        label = page if store == args.store else f"{page} (from rollouts)"
        print(
            f"{label:26s} cold {cold_wall:6.2f} s wall ({cold_cpu:5.2f} s CPU)   "
            f"rerun {rerun_wall:6.3f} s wall ({rerun_cpu:5.3f} s CPU)",
            flush=True,
        )
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def without_transfer_curves(path: Path) -> Path:
    """A copy of the store at ``path`` without its ``transfer_curves`` table (the page's
    fallback path); the big tables are hard links, not copies."""
    import json
    import shutil

    copy = path.with_name(path.name + "-no-curves")
    if not copy.exists():
        shutil.copytree(path, copy, copy_function=os.link)
        shutil.rmtree(copy / "tables" / "transfer_curves")
        manifest_path = copy / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        del manifest["tables"]["transfer_curves"]
        manifest_path.unlink()  # a hard link to the original's manifest: replace, not edit
        manifest_path.write_text(json.dumps(manifest, indent=1))
    return copy


if __name__ == "__main__":
    main()
