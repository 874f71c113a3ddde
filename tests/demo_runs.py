"""The demo store after a real metrics run in 1, 7 or 64 buckets, run once per test run.

Three test files check the stage's chunking against these runs (``test_metrics_buckets``: the
whole-read tables; ``test_robustness_buckets``: the robustness report; ``test_text_free_metrics``:
the tables equal for every bucket count). Each used to run the stage three times itself (155,
146 and 131 s for the three tests in a CI on two cores), nine runs where three do
(:mod:`tests.run_scoped`).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from legival_core.store.store import Store
from precompute.config import ExperimentConfig
from precompute.demo import DemoOptions, demo_config
from precompute.stages import StageContext, run_stage
from tests.run_scoped import built_once
from tests.store_spy import StoreRead, spy_on_reads

DEMO = Path(__file__).resolve().parents[1] / "results" / "demo"
#: The bucket counts the chunking tests compare.
BUCKET_COUNTS = (1, 7, 64)


def metrics_config(chunks: int = 16, memory_gb: float | None = None) -> ExperimentConfig:
    """The demo's configuration with the metrics stage in ``chunks`` buckets."""
    config = demo_config(DemoOptions())
    metrics = dataclasses.replace(config.metrics, chunks=chunks, memory_gb=memory_gb)
    return dataclasses.replace(config, metrics=metrics)


@dataclasses.dataclass(frozen=True)
class MetricsRun:
    """A copy of the demo store after a metrics run, and the tables that run read whole with
    ``Store.read`` (no trace-id filter), in order."""

    store: Store
    whole_reads: tuple[str, ...]


def demo_after_metrics(chunks: int, path: Path) -> MetricsRun:
    """The run of ``chunks`` buckets (made once per test run), its store copied to ``path``."""

    def run(folder: Path) -> None:
        shutil.copytree(DEMO, folder / "store")
        store = Store.open(folder / "store")
        whole: list[str] = []

        def record(read: StoreRead) -> None:
            if read.method == "read" and not read.by_trace_ids():
                whole.append(read.table)

        with pytest.MonkeyPatch.context() as monkeypatch:
            spy_on_reads(monkeypatch, record)
            context = StageContext(store=store, config=metrics_config(chunks), progress=False)
            run_stage("metrics", context)
        (folder / "whole_reads.json").write_text(json.dumps(whole))

    built = built_once(f"demo-metrics-{chunks}-buckets", run)
    shutil.copytree(built / "store", path)
    whole_reads = json.loads((built / "whole_reads.json").read_text())
    return MetricsRun(Store.open(path), tuple(whole_reads))
