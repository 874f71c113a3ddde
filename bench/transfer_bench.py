"""Benchmark: transfer-utility metrics on ~2M synthetic rollouts, vectorised vs a plain loop.

Builds a seeded synthetic rollouts table (12 teachers x 3 datasets x 2 students; prefixes
k = 0, 3, 6, ..., m), times :func:`legival_core.metrics.transfer.trace_metrics` and
:func:`legival_core.metrics.transfer.teacher_metrics` (with and without the bootstrap), then
recomputes the same per-trace and per-teacher numbers with a straightforward per-trace Python loop
and checks that both agree to 1e-9. Wall and CPU seconds (this process, all threads) are printed
side by side: on a shared machine the wall time says as much about the neighbours as about
the code.

    python bench/transfer_bench.py                  # 2,000,000 rollouts, full loop
    python bench/transfer_bench.py --loop-traces 20000   # loop on a subset, extrapolated
    python bench/transfer_bench.py --against 5246650     # also time that git revision's
                                                         # transfer.py, in the same run, and
                                                         # check its tables are bit-identical

The loop is an independent implementation of docs/metrics/fotu.md (paper profile): it shares no code
with the library.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `python bench/x.py` puts bench/ on sys.path, not the repo root

from legival_core.metrics import transfer  # noqa: E402
from legival_core.metrics.transfer import teacher_metrics, trace_metrics  # noqa: E402

N_BINS = 50


def synthetic_rollouts(n_rows: int, seed: int = 0) -> pd.DataFrame:
    """Seeded rollouts: 12 teachers x 3 datasets, 2 students, one sample per prefix.

    Each trace has m ~ U{3..80} steps and prefixes k in {0} U {3, 6, ...} U {m}. A student
    solves prefix k with probability sigmoid(a_teacher + b_student + 4 (k/m - c_dataset)), so
    curves rise with k, differ by teacher, and have regressions. Trimmed to exactly ``n_rows``.
    """
    rng = np.random.default_rng(seed)
    teachers = [f"teacher-{i:02d}" for i in range(12)]
    datasets = ["MATH", "GPQA", "Connections"]
    students = ["phi-3.5-mini", "llama-3.2-1b"]
    teacher_skill = rng.normal(0.0, 1.0, len(teachers))
    student_skill = np.array([0.3, -0.3])
    dataset_shift = np.array([0.3, 0.6, 0.5])

    mean_points = (1 + 80 // 3 + 1) / 2 * len(students) + 1
    n_traces = int(n_rows / mean_points * 1.2) + 10
    m = rng.integers(3, 81, n_traces)
    teacher = rng.integers(0, len(teachers), n_traces)
    dataset = rng.integers(0, len(datasets), n_traces)
    # Prefix points per trace: 0, 3, 6, ..., and m when m is not a multiple of 3.
    n_points = 1 + m // 3 + (m % 3 != 0)
    per_trace = n_points * len(students)
    keep_traces = np.searchsorted(np.cumsum(per_trace), n_rows) + 1
    m, teacher, dataset = m[:keep_traces], teacher[:keep_traces], dataset[:keep_traces]
    n_points, per_trace = n_points[:keep_traces], per_trace[:keep_traces]

    trace = np.repeat(np.arange(keep_traces), per_trace)
    start = np.repeat(np.cumsum(per_trace) - per_trace, per_trace)
    offset = np.arange(len(trace)) - start
    student = offset // np.repeat(n_points, per_trace)
    j = offset % np.repeat(n_points, per_trace)
    mm = m[trace]
    k = np.minimum(3 * j, mm)
    logit = (
        teacher_skill[teacher[trace]]
        + student_skill[student]
        + 4.0 * (k / mm - dataset_shift[dataset[trace]])
    )
    correct = (rng.random(len(trace)) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float64)

    trace_ids = np.array([f"tr-{i:07d}" for i in range(keep_traces)], dtype=object)
    frame = pd.DataFrame(
        {
            "teacher": pd.Series(np.array(teachers, dtype=object)[teacher[trace]], dtype="str"),
            "dataset": pd.Series(np.array(datasets, dtype=object)[dataset[trace]], dtype="str"),
            "student": pd.Series(np.array(students, dtype=object)[student], dtype="str"),
            "trace_id": pd.Series(trace_ids[trace], dtype="str"),
            "problem_id": pd.Series(trace_ids[trace], dtype="str").str.replace("tr-", "p-"),
            "k": k.astype(np.int32),
            "m": mm.astype(np.int32),
            "correct": correct,
        }
    )
    return frame.iloc[:n_rows].reset_index(drop=True)


# ----------------------------------------------------------------------------------------------
# The straightforward reference: one Python loop per (trace, student)
# ----------------------------------------------------------------------------------------------


def loop_trace_metrics(rollouts: pd.DataFrame) -> dict[tuple[str, str], dict[str, float]]:
    """Per (trace_id, student): fotu, hazard (0 = never), regression count/rate, baseline."""
    by_pair: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    info: dict[tuple[str, str], tuple[str, str, int]] = {}
    columns = [rollouts[c].tolist() for c in ("trace_id", "student", "teacher", "dataset")]
    for tid, stu, tea, dat, k, m, y in zip(
        *columns,
        rollouts["k"].tolist(),
        rollouts["m"].tolist(),
        rollouts["correct"].tolist(),
        strict=True,
    ):
        by_pair[(tid, stu)][k].append(y)
        info[(tid, stu)] = (tea, dat, m)

    out = {}
    for key, points in by_pair.items():
        teacher, dataset, m = info[key]
        means = {k: sum(v) / len(v) for k, v in points.items()}
        later = sorted(k for k in means if k >= 1)
        bins: dict[int, list[float]] = defaultdict(list)
        for k in later:
            bins[-((-N_BINS * k) // m)].append(means[k])
        observed = sorted(bins)
        values = {b: sum(v) / len(v) for b, v in bins.items()}
        if observed:
            curve = []
            for b in range(1, N_BINS + 1):
                left = [o for o in observed if o <= b]
                right = [o for o in observed if o >= b]
                if not left:
                    curve.append(values[right[0]])
                elif not right:
                    curve.append(values[left[-1]])
                else:
                    a, c = left[-1], right[0]
                    t = 0.0 if a == c else (b - a) / (c - a)
                    curve.append(values[a] + (values[c] - values[a]) * t)
            fotu = sum(curve) / N_BINS
        else:
            fotu = math.nan
        hazard = 0
        for k in later:
            # at least half of the samples fully correct (partial credit does not count)
            if sum(1 for y in points[k] if y >= 1.0) / len(points[k]) >= 0.5:
                hazard = -((-N_BINS * k) // m)
                break
        ys = [means[k] for k in later]
        drops = sum(1 for a, b in itertools.pairwise(ys) if b < a)
        out[key] = {
            "teacher": teacher,
            "dataset": dataset,
            "fotu": fotu,
            "hazard": hazard,
            "n_later": len(later),
            "regression_count": drops,
            "regression_rate": drops / (len(ys) - 1) if len(ys) >= 2 else math.nan,
            "baseline": means.get(0, math.nan),
        }
    return out


def _mean(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan


def loop_teacher_metrics(per_pair: dict) -> dict[tuple[str, str], dict[str, float]]:
    """Average over traces per student, then over students; SOTU from hazard histograms."""
    groups: dict[tuple[str, str], dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for (_, student), row in per_pair.items():
        groups[(row["teacher"], row["dataset"])][student].append(row)
    out = {}
    for key, by_student in groups.items():
        per_student: dict[str, list[float]] = defaultdict(list)
        for rows in by_student.values():
            for name in ("fotu", "regression_rate", "baseline"):
                per_student[name].append(_mean([r[name] for r in rows]))
            per_student["never_solved"].append(
                _mean([float(r["hazard"] == 0) for r in rows if r["n_later"] > 0])
            )
            counts: dict[int, int] = defaultdict(int)
            for r in rows:
                if r["hazard"]:
                    counts[r["hazard"]] += 1
            total = sum(counts.values())
            entropy = -sum(c / total * math.log(c / total) for c in counts.values())
            per_student["sotu"].append(entropy / math.log(N_BINS) if total else math.nan)
        out[key] = {name: _mean(values) for name, values in per_student.items()}
        out[key]["lift"] = out[key]["fotu"] - out[key]["baseline"]
    return out


def _close(a: float, b: float, tol: float = 1e-9) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol


def compare(rollouts: pd.DataFrame) -> tuple[tuple[float, float], int, int]:
    """Run the loop on ``rollouts`` and assert agreement with the library.

    Returns the loop's (wall, CPU) seconds, the number of pairs and of teacher values checked.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    loop_pairs = loop_trace_metrics(rollouts)
    loop_teachers = loop_teacher_metrics(loop_pairs)
    loop_seconds = (time.perf_counter() - wall, time.process_time() - cpu)

    vec_pairs = trace_metrics(rollouts)
    vec_teachers = teacher_metrics(rollouts, n_boot=0)
    assert len(vec_pairs) == len(loop_pairs), (len(vec_pairs), len(loop_pairs))
    vec = {
        "fotu": vec_pairs["fotu"].tolist(),
        "hazard": vec_pairs["hazard_bin"].fillna(0).astype(int).tolist(),
        "regression_count": vec_pairs["regression_count"].tolist(),
        "regression_rate": vec_pairs["regression_rate"].tolist(),
        "baseline": vec_pairs["baseline"].tolist(),
    }
    keys = zip(vec_pairs["trace_id"].tolist(), vec_pairs["student"].tolist(), strict=True)
    for i, key in enumerate(keys):
        ref = loop_pairs[key]
        for name, values in vec.items():
            assert _close(float(values[i]), float(ref[name])), (key, name, values[i], ref[name])
    checked = 0
    for _, row in vec_teachers.iterrows():
        ref = loop_teachers[(row["teacher"], row["dataset"])]
        for name in ("fotu", "sotu", "regression_rate", "never_solved", "baseline", "lift"):
            assert _close(float(row[name]), ref[name]), (row["teacher"], row["dataset"], name)
            checked += 1
    return loop_seconds, len(vec_pairs), checked


def revision_module(revision: str) -> ModuleType:
    """``legival_core/metrics/transfer.py`` as it was at git ``revision``, loaded as its own
    module."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{revision}:legival_core/metrics/transfer.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    folder = Path(tempfile.mkdtemp(prefix="transfer-rev-"))
    path = folder / "transfer_at_revision.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("transfer_at_revision", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def assert_identical(old: pd.DataFrame, new: pd.DataFrame, what: str) -> None:
    """Same columns, dtypes and values, bit for bit (NaN where NaN)."""
    assert list(old.columns) == list(new.columns), (what, list(old.columns), list(new.columns))
    assert len(old) == len(new), (what, len(old), len(new))
    for column in old.columns:
        a, b = old[column], new[column]
        assert a.dtype == b.dtype, (what, column, a.dtype, b.dtype)
        if pd.api.types.is_float_dtype(a.dtype):
            same = np.array_equal(a.to_numpy(), b.to_numpy(), equal_nan=True)
        else:
            same = a.astype(str).tolist() == b.astype(str).tolist()
        assert same, (what, column)


def timed(call: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--against",
        default="",
        help="a git revision whose transfer.py is timed alongside (same run) and must give "
        "bit-identical tables",
    )
    parser.add_argument(
        "--loop-traces",
        type=int,
        default=0,
        help="run the loop on the first N traces only and extrapolate (0 = all)",
    )
    args = parser.parse_args()

    t0 = time.perf_counter()
    rollouts = synthetic_rollouts(args.rows, args.seed)
    n_traces = rollouts["trace_id"].nunique()
    print(
        f"synthetic rollouts: {len(rollouts):,} rows, {n_traces:,} traces, "
        f"{rollouts['teacher'].nunique()} teachers x {rollouts['dataset'].nunique()} datasets x "
        f"{rollouts['student'].nunique()} students (built in {time.perf_counter() - t0:.1f} s)"
    )

    modules = {"now": transfer}
    if args.against:
        modules = {args.against: revision_module(args.against), "now": transfer}
    # Warm-up: the first call imports scipy.sparse (about 0.1-0.2 s once per process).
    for module in modules.values():
        module.teacher_metrics(rollouts.iloc[:1000], n_boot=10)
    # Best of --repeats runs (the machine may be shared), the revisions taking turns so that
    # both see the same load; CPU seconds of the best run alongside.
    calls: dict[str, Callable[[ModuleType], object]] = {
        "trace_metrics": lambda m: m.trace_metrics(rollouts),
        "teacher_metrics n_boot=0": lambda m: m.teacher_metrics(rollouts, n_boot=0),
        f"teacher_metrics n_boot={args.n_boot}": lambda m: m.teacher_metrics(
            rollouts, n_boot=args.n_boot, seed=args.seed
        ),
    }
    timings: dict[str, tuple[float, float]] = {}
    for label, call in calls.items():
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in modules}
        for _ in range(args.repeats):
            for name, module in modules.items():
                runs[name].append(timed(lambda call=call, module=module: call(module)))
        timings[label] = min(runs["now"])
        line = "   ".join(
            f"{name}: {min(r)[0]:5.2f} s wall ({min(r)[1]:.2f} s CPU)" for name, r in runs.items()
        )
        print(f"{label:<28s} {line}   best of {args.repeats}")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        # The bootstrap's products are small: a second BLAS thread mostly spins. One thread
        # saves CPU; the float32 sums then run in another order (CI bounds move in the 7th
        # decimal), as they always did with OPENBLAS_NUM_THREADS=1.
        with threadpool_limits(1, user_api="blas"):
            runs_one = [
                timed(lambda: teacher_metrics(rollouts, n_boot=args.n_boot, seed=args.seed))
                for _ in range(args.repeats)
            ]
        print(
            f"{'  same, BLAS on one thread':<28s} now: {min(runs_one)[0]:5.2f} s wall "
            f"({min(runs_one)[1]:.2f} s CPU)   best of {args.repeats}"
        )
    if args.against:
        old = modules[args.against]
        assert_identical(old.trace_metrics(rollouts), trace_metrics(rollouts), "trace_metrics")
        for by in (("teacher", "dataset"), ("teacher", "dataset", "student")):
            assert_identical(
                old.teacher_metrics(rollouts, n_boot=args.n_boot, seed=args.seed, by=by),
                teacher_metrics(rollouts, n_boot=args.n_boot, seed=args.seed, by=by),
                f"teacher_metrics by {by}",
            )
        assert_identical(
            old.curve(rollouts, n_boot=200), transfer.curve(rollouts, n_boot=200), "curve"
        )
        print(
            f"bit-identical to {args.against}: trace_metrics, teacher_metrics with "
            f"{args.n_boot} resamples (by teacher x dataset, and x student), curve with 200"
        )
    full_wall, full_cpu = timings[f"teacher_metrics n_boot={args.n_boot}"]
    print(
        f"all teacher metrics incl. per-trace work and {args.n_boot} bootstrap resamples: "
        f"{full_wall:.2f} s wall, {full_cpu:.2f} s CPU (target < 2 s on 2 cores)"
    )
    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"load average now: {load} on {os.cpu_count()} CPUs")

    if args.loop_traces and args.loop_traces < n_traces:
        chosen = rollouts["trace_id"].drop_duplicates().iloc[: args.loop_traces]
        subset = rollouts[rollouts["trace_id"].isin(chosen)].reset_index(drop=True)
        (loop_wall, loop_cpu), n_pairs, checked = compare(subset)
        scale = len(rollouts) / len(subset)
        loop_wall, loop_cpu = loop_wall * scale, loop_cpu * scale
        print(
            f"python loop on a SUBSET of {args.loop_traces:,} traces ({len(subset):,} rows), "
            f"EXTRAPOLATED x{scale:.1f}: {loop_wall:.1f} s wall ({loop_cpu:.1f} s CPU)"
        )
    else:
        (loop_wall, loop_cpu), n_pairs, checked = compare(rollouts)
        print(f"python loop on all rows: {loop_wall:.2f} s wall ({loop_cpu:.2f} s CPU)")
    print(
        f"agreement to 1e-9: {n_pairs:,} (trace, student) pairs x 5 fields and "
        f"{checked} teacher values"
    )
    # the same numbers as the loop: the per-trace table plus the teacher point estimates
    vec_wall = timings["trace_metrics"][0] + timings["teacher_metrics n_boot=0"][0]
    vec_cpu = timings["trace_metrics"][1] + timings["teacher_metrics n_boot=0"][1]
    print(
        f"speed-up on the same numbers (per-trace table + teacher point estimates): "
        f"wall {loop_wall:.2f} / {vec_wall:.2f} s = {loop_wall / vec_wall:.1f}x, "
        f"CPU {loop_cpu:.2f} / {vec_cpu:.2f} s = {loop_cpu / vec_cpu:.1f}x"
    )


if __name__ == "__main__":
    main()
