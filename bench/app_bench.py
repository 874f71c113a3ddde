"""Cold-start and rerun times of every page of the app, on a big store and on a long trace.

    python bench/app_bench.py [--store /tmp/legival-bench] [--copies 400] [--pages a,b]

Builds (once, then reused) two stores:

* **big**: 400 re-keyed copies of the bundled demo's tables — real CHAMP problems, traces,
  Punkt steps, MiniLM similarities, backtracking labels, rewards, monitor verdicts — so
  100,000 traces, 1.15M steps, 2,000 problems and 40 teachers (the demo's five, eight variants
  each), plus rollouts on every prefix k = 0..m of each correct trace by as many students as
  bring them to 2M, their correctness drawn from a seeded logistic curve (synthetic numbers,
  real keys). The real ``metrics`` stage then writes every derived table.
* **long**: one 30,000-token trace of 2,000 Punkt steps (running-total arithmetic with
  re-checks and corrections) through the real grade, segment, embed, judge and metrics stages,
  with synthetic rollouts of two students.

Each page is run headless with ``streamlit.testing.v1.AppTest``: "cold" = a run with every
cache empty (tables read from disk, views computed; modules already imported, as in a running
server), "rerun" = the same page again (median of 5). Wall and CPU seconds (the app's process,
all threads) are printed side by side, since the machine may be shared. Each page runs in a
Python process of its own, warmed up on the bundled demo store through ``app.py`` (every page
runs through and imports what it uses); the cold run is then a new session on the page script
itself (a new visitor: no choice left over from the warm-up, the measured store's tables first
read there). Each process reports its resident memory: "RSS" when the cold run starts
(the imports, the warm-up's leftovers) and "peak", the most it held during the cold run and
the reruns (``VmHWM``, reset after the warm-up; Linux). Targets: cold < 1 s, rerun < 0.2 s.
Streamlit's own import and the browser's drawing are not included.

``--fallback`` also times the transfer page without the ``transfer_curves`` table (it then
computes the same view from the 2M rollouts).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `python bench/x.py` puts bench/ on sys.path, not the repo root

from legival_core.store.store import Store  # noqa: E402

#: The bundled demo store: the big store is made of copies of its tables (real CHAMP text).
DEMO = REPO / "results" / "demo"
#: Per copy: the teacher variant (``gpt-4-v3``) and the problem group (``…#g12``).
TEACHER_VARIANTS = 8
#: Demo tables copied into the big store, re-keyed per copy.
TILED_TABLES = (
    "problems",
    "traces",
    "grades",
    "steps",
    # what the segment and leaks stages store for the metrics (every correct trace of the demo
    # has its leak row, so the synthetic rollouts on the correct traces find theirs)
    "trace_counts",
    "answer_leaks",
    "similarity",
    "judgments",
    "error_labels",
    "rewards",
    "sabotaged",
    "monitor_verdicts",
)


def _suffix(column: pd.Series, text: str) -> pd.Series:
    return column.astype(str) + text


def tile(frame: pd.DataFrame, copy: int) -> pd.DataFrame:
    """One copy of a demo table: trace ids get ``#c<copy>``, problem ids ``#g<group>`` and
    teachers ``-v<variant>``, so 400 copies give 2,000 problems x 40 teachers."""
    out = frame.copy()
    group, variant = copy // TEACHER_VARIANTS, copy % TEACHER_VARIANTS
    if "trace_id" in out:
        out["trace_id"] = _suffix(out["trace_id"], f"#c{copy}")
    if "problem_id" in out:
        out["problem_id"] = _suffix(out["problem_id"], f"#g{group}")
    if "teacher" in out:
        out["teacher"] = _suffix(out["teacher"], f"-v{variant}")
    return out


def synthetic_rollouts(
    traces: pd.DataFrame, steps: pd.DataFrame, students: int, rng: np.random.Generator
) -> pd.DataFrame:
    """Rollouts at every prefix k = 0..m of each correct trace for ``students`` students, with
    correctness drawn from a seeded logistic curve in k/m (numbers synthetic; keys real)."""
    m = steps.groupby("trace_id").size()
    rows = traces[["trace_id", "teacher", "dataset", "problem_id"]].merge(
        m.rename("m"), left_on="trace_id", right_index=True
    )
    repeat = (rows["m"] + 1).to_numpy()
    base = rows.loc[rows.index.repeat(repeat)].reset_index(drop=True)
    base["k"] = np.concatenate([np.arange(n) for n in repeat]).astype(np.int32)
    frames = []
    for s in range(students):
        one = base.copy()
        one["student"] = f"student-{s + 1}"
        midpoint = 0.3 + 0.4 * rng.random(len(rows))
        x = one["k"].to_numpy() / np.maximum(one["m"].to_numpy(), 1)
        p = 1 / (1 + np.exp(-10 * (x - np.repeat(midpoint, repeat))))
        p = np.where(one["k"].to_numpy() == 0, 0.05, p)
        one["correct"] = (rng.random(len(one)) < p).astype(np.float64)
        frames.append(one)
    out = pd.concat(frames, ignore_index=True)
    out["sample"] = np.int32(0)
    out["m"] = out["m"].astype(np.int32)
    out["status"] = "ok"
    return out


def build(path: Path, copies: int = 400, students: int = 0, seed: int = 0) -> Store:
    """The big store at ``path``: ``copies`` re-keyed copies of the demo's tables (250 traces
    each), synthetic rollouts on every correct trace (``students`` students; 0: as many as
    bring the total to 2M), then the real ``metrics`` stage. Reused when already built."""
    if (path / "manifest.json").exists():
        return Store.open(path)
    started = time.perf_counter()
    demo = Store.open(DEMO)
    store = Store.create(path, config={"kind": "app benchmark", "tiled_from": str(DEMO)})
    rng = np.random.default_rng(seed)
    correct_traces = None
    for table in TILED_TABLES:
        if not demo.has(table):
            continue
        frame = demo.read(table)
        tiled = pd.concat([tile(frame, c) for c in range(copies)], ignore_index=True)
        if table == "problems":
            tiled = tiled.drop_duplicates("problem_id")
        if table == "traces":
            traces = tiled
        if table == "grades":
            ok = tiled.loc[tiled["correct"].fillna(False).astype(bool), "trace_id"]
            correct_traces = traces[traces["trace_id"].isin(set(ok))]
        if table == "steps":
            all_steps = tiled[["trace_id", "step"]]
        store.write(table, tiled, stage="bench")
        print(f"  {table}: {len(tiled):,} rows", flush=True)
    assert correct_traces is not None
    if students <= 0:
        per_student = int(
            all_steps[all_steps["trace_id"].isin(set(correct_traces["trace_id"]))]
            .groupby("trace_id")
            .size()
            .add(1)
            .sum()
        )
        students = max(1, -(-2_000_000 // per_student))
    rollouts = synthetic_rollouts(correct_traces, all_steps, students, rng)
    store.write("rollouts", rollouts, stage="bench")
    print(f"  rollouts: {len(rollouts):,} rows ({students} students)", flush=True)
    run_metrics(store)
    print(f"built {path} in {time.perf_counter() - started:.0f} s", flush=True)
    return store


def run_metrics(store: Store, options: dict[str, Any] | None = None) -> None:
    """The real metrics stage (what a pipeline run leaves for the app), with the stage's
    command-line ``options`` (e.g. ``{"memory_gb": 5.0}``)."""
    from precompute.demo import DemoOptions, demo_config
    from precompute.stages import StageContext, run_stage

    ctx = StageContext(
        store=store,
        config=demo_config(DemoOptions()),
        progress=False,
        stage_options={"metrics": options or {}},
    )
    result = run_stage("metrics", ctx)
    print(f"  {result.summary()}", flush=True)


def long_trace(steps: int = 2000, seed: int = 0) -> tuple[str, str, int]:
    """A running-total problem, a ``steps``-sentence solution (true arithmetic, with re-checks
    and corrections so redundancy and backtracking have something to mark) and its answer."""
    rng = np.random.default_rng(seed)
    amounts = rng.integers(2, 40, steps).tolist()
    sentences: list[str] = []
    total, day = 0, 0
    while len(sentences) < steps - 1:
        day += 1
        n = amounts[day % len(amounts)]
        kind = day % 10
        if kind == 7:
            sentences.append(f"Wait, let me recheck day {day - 1}: the total was {total}.")
        if kind == 9:
            sentences.append(f"Actually, day {day} adds {n} again, so {total} + {n} = {total + n}.")
        else:
            sentences.append(f"Day {day}: {total} + {n} = {total + n}.")
        total += n
    sentences = sentences[: steps - 1]
    sentences.append(f"So the shop received {total} items in total.")
    problem = (
        f"A shop records one delivery a day for {day} days and keeps a running total. "
        "How many items did it receive in total?"
    )
    return problem, " ".join(sentences), total


def build_long(path: Path, steps: int = 2000, seed: int = 0) -> Store:
    """A store holding one long trace (about 30,000 tokens in ``steps`` Punkt steps): the real
    grade, segment, embed (MiniLM), judge, leaks and metrics stages, and synthetic rollouts of
    two students at k = 0, 3, 6, …, m. Reused when already built."""
    if (path / "manifest.json").exists():
        return Store.open(path)
    from legival_core.text.tokens import count_tokens
    from precompute.demo import DemoOptions, demo_config
    from precompute.stages import StageContext, run_stage
    from precompute.stages.rollout import k_grid

    started = time.perf_counter()
    problem, reasoning, total = long_trace(steps, seed)
    store = Store.create(path, config={"kind": "app benchmark, one long trace"})
    store.write(
        "problems",
        [
            {
                "problem_id": "long/0",
                "dataset": "bench-long",
                "task": "gsm8k",
                "prompt": problem,
                "gold": str(total),
            }
        ],
        stage="bench",
    )
    store.write(
        "traces",
        [
            {
                "trace_id": "long-0",
                "problem_id": "long/0",
                "dataset": "bench-long",
                "teacher": "long-teacher",
                "sample": 0,
                "reasoning": reasoning,
                "answer_text": f"The answer is {total}.",
                "complete": True,
                "truncated": False,
                "tokens": count_tokens(reasoning),
                "source": "bench",
            }
        ],
        stage="bench",
    )
    ctx = StageContext(store=store, config=demo_config(DemoOptions()), progress=False)
    for name in ("grade", "segment", "embed", "judge"):
        print(f"  {run_stage(name, ctx).summary()}", flush=True)
    m = len(store.read("steps", columns=["step"]))
    rng = np.random.default_rng(seed)
    ks = k_grid(m)
    rows = [
        {
            "trace_id": "long-0",
            "student": f"student-{s + 1}",
            "k": k,
            "sample": 0,
            "teacher": "long-teacher",
            "dataset": "bench-long",
            "problem_id": "long/0",
            "m": m,
            "correct": float(rng.random() < (0.05 if k == 0 else k / m)),
            "status": "ok",
        }
        for s in range(2)
        for k in ks
    ]
    store.write("rollouts", rows, stage="bench")
    # the answer-leak row of the trace with rollouts: the metrics stage refuses one without it
    print(f"  {run_stage('leaks', ctx).summary()}", flush=True)
    run_metrics(store)
    print(f"built {path} ({m} steps) in {time.perf_counter() - started:.0f} s", flush=True)
    return store


def _timed(run: object) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    run()  # type: ignore[operator]
    return time.perf_counter() - wall, time.process_time() - cpu


def status_mib(field: str) -> float:
    """``VmRSS``, ``VmHWM`` (peak) or another size field of this process in MiB (Linux; NaN
    elsewhere)."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return float("nan")
    for line in text.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def own_peak_gb() -> float:
    """This process's own peak resident memory in GiB, for the benches that measure each step
    in a child process: ``VmHWM`` where Linux gives it, else ``ru_maxrss``.

    ``ru_maxrss`` is the wrong reading for a child on Linux: the kernel carries the parent's
    resident size at the fork over the ``exec`` as the child's starting maximum, so a child
    started by a parent that has just built a 14 GB store reports at least 14 GB whatever it
    uses itself. ``VmHWM`` is the high-water mark of the child's own address space."""
    peak = status_mib("VmHWM")
    if peak == peak:  # not NaN
        return peak / 1024
    import resource

    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / 1024**3 if sys.platform == "darwin" else maxrss / 1024**2


def _reset_peak_rss() -> None:
    """Start this process's peak RSS (``VmHWM``) again from its current RSS (Linux)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def time_page(page: str, warm: Path, repeats: int = 5) -> dict[str, float]:
    """One page under AppTest on the store ``LEGIVAL_STORE`` names, after a warm-up run on
    the store at ``warm``: cold and median rerun, each as wall and CPU seconds, and this
    process's RSS when the cold run starts and its peak over the cold run and the reruns
    (MiB). Run it in a process of its own (:func:`measure`), so each page's peak is its own."""
    import gc

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    target = os.environ["LEGIVAL_STORE"]
    # Warm-up on the small ``warm`` store (the demo: every page runs through): imports (plotly,
    # scipy.stats, ...) are a one-off per server process, and the measured store's tables are
    # not read before the cold run.
    os.environ["LEGIVAL_STORE"] = f"bench={warm}"
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    at.run()
    if page != "leaderboard":
        at.query_params.clear()
        at.switch_page(f"pages/{page}.py")
        at.run()
    os.environ["LEGIVAL_STORE"] = target
    # The measured run: a new session on the page itself (a new visitor, nothing chosen),
    # in this warmed-up process. A server scans the installed packages for components once,
    # when it starts; AppTest does it again for each new AppTest (0.2 s here), so the
    # measured session gets the warm-up's registry, as a server's sessions share one.
    registry = at._bidi_component_manager
    at = AppTest.from_file(str(REPO / "pages" / f"{page}.py"), default_timeout=300)
    at._bidi_component_manager = registry
    st.cache_data.clear()
    st.cache_resource.clear()
    gc.collect()
    start_rss = status_mib("VmRSS")
    _reset_peak_rss()
    cold_wall, cold_cpu = _timed(at.run)
    if at.exception:
        raise RuntimeError([e.value for e in at.exception])
    reruns = [_timed(at.run) for _ in range(repeats)]
    return {
        "cold_wall": cold_wall,
        "cold_cpu": cold_cpu,
        "rerun_wall": statistics.median(w for w, _ in reruns),
        "rerun_cpu": statistics.median(c for _, c in reruns),
        "start_rss_mib": start_rss,
        "peak_rss_mib": status_mib("VmHWM"),
    }


def meets_goal(got: dict[str, float]) -> bool:
    """The page goal: cold under 1 s and reruns under 0.2 s, in wall and in CPU seconds.

    >>> meets_goal({"cold_wall": 0.9, "cold_cpu": 1.1, "rerun_wall": 0.1, "rerun_cpu": 0.1})
    False
    """
    return (
        max(got["cold_wall"], got["cold_cpu"]) < 1.0
        and max(got["rerun_wall"], got["rerun_cpu"]) < 0.2
    )


def measure(page: str, store: Path, warm: Path, repeats: int) -> dict[str, float]:
    """:func:`time_page` of ``page`` on ``store`` (warm-up on ``warm``) in a fresh Python
    process (this script with ``--child``), so that the RSS figures are this page's alone."""
    import json
    import subprocess

    env = {**os.environ, "LEGIVAL_STORE": f"bench={store}"}
    command = [sys.executable, __file__, "--child", page, "--warm", str(warm)]
    command += ["--repeats", str(repeats)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError((done.stderr or done.stdout).strip().splitlines()[-1:])
    result = json.loads(lines[-1])
    if "error" in result:
        raise RuntimeError(result["error"])
    return result


def all_pages() -> list[str]:
    """Every page of the app's navigation (the ``pages/*.py`` scripts ``app.py`` registers;
    helpers such as ``pages/common.py`` are not pages)."""
    import re

    text = (REPO / "app.py").read_text(encoding="utf-8")
    return sorted(set(re.findall(r'"pages/(\w+)\.py"', text)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument(
        "--store", type=Path, default=Path("/tmp/legival-bench"), help="folder of the stores"
    )
    parser.add_argument("--copies", type=int, default=400, help="demo copies (250 traces each)")
    parser.add_argument("--pages", default="", help="comma-separated pages (default: all)")
    parser.add_argument("--repeats", type=int, default=5, help="reruns per page (median)")
    parser.add_argument(
        "--fallback",
        action="store_true",
        help="also time the transfer page on a copy of the store without transfer_curves",
    )
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)  # one page, JSON out
    parser.add_argument("--warm", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # in a process of its own (see measure): LEGIVAL_STORE names the store
        import json

        try:
            print(json.dumps(time_page(args.child, args.warm, args.repeats)), flush=True)
        except RuntimeError as error:
            print(json.dumps({"error": str(error)[:300]}), flush=True)
        return 0
    pages = [p for p in args.pages.split(",") if p] or all_pages()
    unknown = sorted(set(pages) - set(all_pages()))
    if unknown:
        parser.error(f"unknown page(s) {unknown}; pages: {all_pages()}")
    big = build(args.store / f"big-{args.copies}", args.copies)
    long = build_long(args.store / "long-2000")

    stores = {"big": big.path, "long": long.path}
    runs = [(page, name) for page in pages for name in stores]
    if args.fallback:
        stores["big, no transfer_curves"] = without_transfer_curves(big.path)
        runs.append(("transfer", "big, no transfer_curves"))
    print(
        f"\n{'page':22} {'store':24} {'cold wall s':>11} {'cold CPU s':>10} "
        f"{'rerun wall s':>12} {'rerun CPU s':>11} {'RSS MiB':>8} {'peak MiB':>8}  goal"
    )
    missed = []
    for page, name in runs:
        try:
            got = measure(page, stores[name], DEMO, args.repeats)
        except RuntimeError as error:  # the page raised: a bug, reported with the timings
            missed.append(f"{page} on {name} (raised {error})")
            print(f"{page:22} {name:24} raised {str(error)[:200]}", flush=True)
            continue
        ok = meets_goal(got)
        if not ok:
            missed.append(f"{page} on {name}")
        print(
            f"{page:22} {name:24} {got['cold_wall']:>11.2f} {got['cold_cpu']:>10.2f} "
            f"{got['rerun_wall']:>12.3f} {got['rerun_cpu']:>11.3f} {got['start_rss_mib']:>8.0f} "
            f"{got['peak_rss_mib']:>8.0f}  {'met' if ok else 'MISSED'}",
            flush=True,
        )
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        "goal (cold < 1 s, rerun < 0.2 s, wall and CPU) missed by: " + (", ".join(missed) or "none")
    )
    return 0


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
    raise SystemExit(main())
