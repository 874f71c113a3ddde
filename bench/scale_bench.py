"""A first look at a million traces: the metrics stage and the two heaviest pages at 10x the
app benchmark's big store.

    python bench/scale_bench.py [--store /tmp/legival-scale] [--copies 4000] [--chunk 250]
    python bench/scale_bench.py --build-only      # the store alone (then rerun for the rest)
    python bench/scale_bench.py --pages-only      # the two pages on a store the stage has run on
    python bench/scale_bench.py --pages-only --pages inspector   # one of them
    python bench/scale_bench.py --memory-gb 4 --workers 2 --pages ""  # the stage, two workers

Builds (once, then reused) ``copies`` re-keyed copies of the bundled demo's tables, as
``bench/app_bench.py`` does (4,000 copies: 1,000,000 real CHAMP traces, 11.5M Punkt steps,
20,000 problems, 40 teachers), written ``chunk`` copies at a time so that the build itself
never holds the whole store; plus synthetic rollouts on every prefix of each correct trace by
``students`` students (5: about 20M rollouts); then compacts every table into one part
(``Store.merge``, as ``python -m precompute merge`` does after a sharded run). Then, each in its
own process so that its peak memory is its own:

* the real ``metrics`` stage: wall seconds and peak resident memory (``VmHWM``);
* the leaderboard and the inspector, cold (every cache empty) under Streamlit's AppTest: wall
  and CPU seconds, and the process's peak memory;
* the store's size on disk, per table.

A step that fails (out of memory, a page raising) is reported with what it reached, so the
figures say where the pipeline breaks. Goals (issue 43): metrics stage <= 8 min and <= 6 GB,
leaderboard and inspector cold <= 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.app_bench import (  # noqa: E402
    DEMO,
    TILED_TABLES,
    own_peak_gb,
    run_metrics,
    synthetic_rollouts,
    tile,
)
from legival_core.store.store import Store  # noqa: E402

#: Pages timed at this scale: the two the issue sets a goal for.
PAGES = ("leaderboard", "inspector")


def build(path: Path, copies: int, chunk: int, students: int, seed: int = 0) -> Store:
    """The store at ``path`` (reused when complete): tiled demo tables and synthetic
    rollouts, one store part per ``chunk`` copies and table; no metrics."""
    done = path / "built.json"
    if done.exists():
        return Store.open(path)
    if path.exists():
        raise SystemExit(f"{path} holds an unfinished build: remove it and run again")
    started = time.perf_counter()
    demo = Store.open(DEMO)
    frames = {t: demo.read(t) for t in TILED_TABLES if demo.has(t)}
    store = Store.create(path, config={"kind": "scale benchmark", "tiled_from": str(DEMO)})
    rng = np.random.default_rng(seed)
    rows = dict.fromkeys(frames, 0) | {"rollouts": 0}
    for first in range(0, copies, chunk):
        block = range(first, min(first + chunk, copies))
        tiled = {
            t: pd.concat([tile(f, c) for c in block], ignore_index=True) for t, f in frames.items()
        }
        if first > 0:
            # each problem group spans TEACHER_VARIANTS copies; keep one row per problem id
            known = set(store.read("problems", columns=["problem_id"])["problem_id"])
            tiled["problems"] = tiled["problems"][~tiled["problems"]["problem_id"].isin(known)]
        tiled["problems"] = tiled["problems"].drop_duplicates("problem_id")
        for table, frame in tiled.items():
            if len(frame):
                store.write(table, frame, stage="bench")
                rows[table] += len(frame)
        ok = tiled["grades"].loc[tiled["grades"]["correct"].fillna(False).astype(bool), "trace_id"]
        correct = tiled["traces"][tiled["traces"]["trace_id"].isin(set(ok))]
        rollouts = synthetic_rollouts(correct, tiled["steps"][["trace_id", "step"]], students, rng)
        store.write("rollouts", rollouts, stage="bench")
        rows["rollouts"] += len(rollouts)
        print(
            f"  copies {block.start}-{block.stop - 1}: {rows['traces']:,} traces, "
            f"{rows['rollouts']:,} rollouts, {time.perf_counter() - started:.0f} s",
            flush=True,
        )
    seconds = time.perf_counter() - started
    # One part per table, as a user compacts a store after a sharded run (``python -m
    # precompute merge``) and before the metrics stage: a keyed read of one trace then searches
    # one part per table instead of one per written chunk (16 at the defaults).
    store.merge()
    merge_seconds = time.perf_counter() - started - seconds
    done.write_text(
        json.dumps(
            {
                "rows": rows,
                "seconds": round(seconds),
                "merge_seconds": round(merge_seconds),
                "copies": copies,
            }
        )
    )
    print(f"built {path} in {seconds:.0f} s, merged in {merge_seconds:.0f} s: {rows}", flush=True)
    return store


def child_metrics(path: Path, memory_gb: float | None = None, workers: int | None = None) -> None:
    """Run in a child process: the metrics stage on the store (with ``--memory-gb`` when
    given; in ``workers`` worker processes, ``--engine processes``, when given), then print
    its figures. With workers the peak is the highest sum of every process's resident memory,
    sampled every 0.5 s: each process's own peak would leave out the others."""
    import threading

    options: dict[str, object] = {} if memory_gb is None else {"memory_gb": memory_gb}
    if workers is not None:
        options.update(engine="processes", in_flight=workers)
    tree_peak = [0.0]

    def sample() -> None:
        while True:
            tree_peak[0] = max(tree_peak[0], tree_resident_gb(os.getpid()))
            time.sleep(0.5)

    if workers is not None:
        threading.Thread(target=sample, daemon=True).start()
    started = time.perf_counter()
    run_metrics(Store.open(path), options)
    wall = time.perf_counter() - started
    peak = own_peak_gb() if workers is None else max(tree_peak[0], own_peak_gb())
    print(json.dumps({"wall_s": round(wall, 1), "peak_gb": round(peak, 2)}))


def tree_resident_gb(pid: int) -> float:
    """The resident memory of process ``pid`` and all its descendants, in GB (Linux's
    ``/proc``; a process gone while being read counts 0)."""
    total_kb = 0
    pending = [pid]
    while pending:
        one = pending.pop()
        try:
            with open(f"/proc/{one}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total_kb += int(line.split()[1])
            for task in os.listdir(f"/proc/{one}/task"):
                with open(f"/proc/{one}/task/{task}/children") as children:
                    pending.extend(int(child) for child in children.read().split())
        except (OSError, ValueError):
            continue
    return total_kb * 1024 / 1e9


def child_page(path: Path, page: str) -> None:
    """Run in a child process: one page cold under AppTest, then print its figures."""
    from bench.app_bench import DEMO, time_page

    os.environ["LEGIVAL_STORE"] = f"scale={path}"
    # Warmed up on the demo store first, as app_bench does (imports are a server's one-off).
    figures = time_page(page, DEMO, repeats=3)
    print(
        json.dumps(
            {
                "cold_wall_s": round(figures["cold_wall"], 2),
                "cold_cpu_s": round(figures["cold_cpu"], 2),
                "rerun_wall_s": round(figures["rerun_wall"], 3),
                "peak_gb": round(figures["peak_rss_mib"] / 1024, 2),
            }
        )
    )


def _child(*args: str) -> tuple[dict | None, str]:
    """Run this script with ``args`` in a new process; its last line of JSON, or its error."""
    run = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, cwd=REPO
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode == 0 and lines:
        return json.loads(lines[-1]), ""
    return None, f"exit {run.returncode}: {(run.stderr or run.stdout).strip()[-600:]}"


def size_on_disk(path: Path) -> dict[str, float]:
    """GB on disk per table folder of the store."""
    sizes = {}
    root = path / "tables" if (path / "tables").is_dir() else path
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        files = (f for f in folder.rglob("*") if f.is_file())
        sizes[folder.name] = sum(f.stat().st_size for f in files) / 1e9
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, default=Path("/tmp/legival-scale"))
    parser.add_argument("--copies", type=int, default=4000, help="demo copies (250 traces each)")
    parser.add_argument("--chunk", type=int, default=250, help="copies per written part")
    parser.add_argument("--students", type=int, default=5)
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument(
        "--pages-only", action="store_true", help="skip the metrics stage (already run)"
    )
    parser.add_argument(
        "--pages", default=",".join(PAGES), help="comma-separated pages to time (default: both)"
    )
    parser.add_argument(
        "--memory-gb", type=float, help="the stage's memory budget (its --memory-gb option)"
    )
    parser.add_argument(
        "--workers", type=int, help="run the stage's buckets in this many worker processes"
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    path = args.store / f"copies-{args.copies}"
    if args.child:
        if args.child[0] == "metrics":
            child_metrics(path, args.memory_gb, args.workers)
        else:
            child_page(path, args.child[1])
        return 0
    build(path, args.copies, args.chunk, args.students)
    if args.build_only:
        return 0
    common = ["--store", str(args.store), "--copies", str(args.copies)]
    if not args.pages_only:
        budget = [] if args.memory_gb is None else ["--memory-gb", str(args.memory_gb)]
        if args.workers is not None:
            budget += ["--workers", str(args.workers)]
        figures, error = _child(*common, *budget, "--child", "metrics")
        if figures is None:
            print(f"metrics stage FAILED ({error})")
            return 1
        print(
            f"metrics stage: {figures['wall_s']:.0f} s wall, peak {figures['peak_gb']:.1f} GB "
            f"(goal 480 s, 6 GB, issue 43)",
            flush=True,
        )
    for page in [p for p in args.pages.split(",") if p]:
        figures, error = _child(*common, "--child", "page", page)
        if figures is None:
            print(f"{page}: FAILED ({error})")
            continue
        print(
            f"{page}: cold {figures['cold_wall_s']:.2f} s wall / {figures['cold_cpu_s']:.2f} s "
            f"CPU, rerun {figures['rerun_wall_s']:.3f} s, peak {figures['peak_gb']:.2f} GB "
            f"(goal cold 1 s, issue 43)",
            flush=True,
        )
    sizes = size_on_disk(path)
    print(
        f"store on disk: {sum(sizes.values()):.2f} GB; "
        + ", ".join(f"{t} {gb:.2f}" for t, gb in sorted(sizes.items(), key=lambda x: -x[1])[:6])
    )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
