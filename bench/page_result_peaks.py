"""Peak memory of the metrics stage's whole-store page results, one result at a time.

The stage's last phase computes results that read every trace: the inspector's trace list
and, for each reward model, the reward points, four ρ tables and the teacher rewards. This
bench builds the inputs the stage hands them (the per-trace transfer means and per-student
sums its buckets merge, the step counts of ``trace_efficiency``), then calls each result as
the stage does, sampling the resident memory every 10 ms and returning freed memory between
results as the stage does. It prints, per result, its seconds, its peak and what stays after
it, so a change to one of them can be measured where it acts without the whole stage (44 min
at ten million traces on the 2-core machine).

Usage::

    python bench/page_result_peaks.py STORE
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd
from app_bench import status_mib  # bench/ is on the path of a bench script

from legival_core.metrics.page_results import RewardSelection
from legival_core.metrics.trace_list import store_trace_choices
from legival_core.oversight import oversight, selections
from legival_core.oversight.reward_partials import RewardPartial
from legival_core.published.references import store_reference_teachers
from legival_core.store.store import Store
from precompute.memory import release_freed_memory


def resident_gb() -> float:
    """This process's resident memory now (``VmRSS``), in GB."""
    return status_mib("VmRSS") * 2**20 / 1e9


@dataclass
class Step:
    """One measured call: its name, seconds, the peak while it ran and what stayed after it
    once freed memory was returned."""

    name: str
    seconds: float
    peak_gb: float
    held_after_gb: float


class PeakSampler:
    """The highest resident memory since the last :meth:`restart`, sampled every 10 ms."""

    def __init__(self) -> None:
        self.peak = resident_gb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, resident_gb())

    def restart(self) -> None:
        self.peak = resident_gb()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def measured(sampler: PeakSampler, steps: list[Step], name: str) -> Iterator[None]:
    """Time the block and record its peak; then return freed memory, as the stage does."""
    sampler.restart()
    start = time.perf_counter()
    yield
    seconds = time.perf_counter() - start
    peak = max(sampler.peak, resident_gb())
    release_freed_memory()
    steps.append(Step(name, seconds, peak, resident_gb()))


def stage_inputs(store: Store) -> tuple[RewardPartial, pd.Series]:
    """What the stage's buckets hand the page results: the reward partial (per-trace means and
    per-student sums of every trace and of the correct ones) and the step count per trace."""
    transfer = store.read(
        "trace_transfer", columns=list(oversight.REWARD_INPUT_COLUMNS["trace_transfer"])
    )
    grades = store.read("grades", columns=["trace_id", "correct"])
    merged = RewardPartial.of_chunk(transfer, grades)
    del transfer, grades
    counts = store.read("trace_efficiency", columns=["trace_id", "steps"])
    counts = counts[counts["steps"] > 0]
    steps = pd.Series(counts["steps"].to_numpy(), index=counts["trace_id"].astype(str))
    return merged, steps


def measure(store: Store) -> list[Step]:
    """Each whole-store page result of ``store`` measured as the stage computes it."""
    sampler = PeakSampler()
    steps: list[Step] = []
    try:
        with measured(sampler, steps, "inputs: the buckets' reward partial, step counts"):
            rewards_partial, counts = stage_inputs(store)
            per_trace = rewards_partial.trace_means()
        with measured(sampler, steps, "trace list"):
            listed = store_trace_choices(
                store, stored=False, steps_per_trace=counts, trace_transfer=per_trace
            )
            del listed
        if not store.has("rewards"):
            return steps
        with measured(sampler, steps, "reward inputs: rewards, grades, owners"):
            given, grades, traces = (
                store.read(name, columns=list(oversight.REWARD_INPUT_COLUMNS[name]))
                for name in ("rewards", "grades", "traces")
            )
        tables = selections.RewardTables(given, per_trace, grades, traces, rewards_partial.sums)
        references = store_reference_teachers(store)
        calls: list[tuple[str, Callable[[], Any]]] = []
        for model in sorted(given["reward_model"].unique()):
            every_trace = RewardSelection(model)
            calls.append(
                (f"{model}: reward points", partial(selections.reward_points, tables, every_trace))
            )
            for level in ("trace", "teacher"):
                for correct_only in (False, True):
                    key = RewardSelection(model, level=level, correct_only=correct_only)
                    subset = ", correct only" if correct_only else ""
                    calls.append(
                        (
                            f"{model}: rho, {level} level{subset}",
                            partial(selections.reward_rho, tables, key, references),
                        )
                    )
            calls.append(
                (
                    f"{model}: teacher rewards",
                    partial(selections.teacher_rewards, tables, every_trace, references),
                )
            )
        for name, call in calls:
            with measured(sampler, steps, name):
                call()
        return steps
    finally:
        sampler.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path, help="a results store with the metrics stage run")
    args = parser.parse_args(argv)
    steps = measure(Store.open(args.store))
    print(f"{'result':60s} {'seconds':>8s} {'peak GB':>8s} {'after GB':>9s}")
    for step in steps:
        print(f"{step.name:60s} {step.seconds:8.1f} {step.peak_gb:8.2f} {step.held_after_gb:9.2f}")
    print(f"highest peak: {max(s.peak_gb for s in steps):.2f} GB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
