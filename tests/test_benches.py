"""The benches' own arithmetic: the prefill limit, the re-keyed demo copies, the long trace.

The benches print measured figures (docs/benchmarks.md); what they compute from those
measurements is checked here by hand, so a wrong limit or a store of the wrong shape cannot
hide behind a good-looking ratio.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import app_bench  # noqa: E402
import rollout_bench  # noqa: E402

from precompute.backends.base import Completion, GenerationRequest  # noqa: E402


def _call(*rows: tuple[str, int]) -> tuple[list[GenerationRequest], list[Completion], float]:
    requests = [GenerationRequest(key, [], max_tokens=1) for key, _ in rows]
    completions = [Completion(key, "", prompt, 1, "stop", None, 0) for key, prompt in rows]
    return requests, completions, 0.0


def test_prefill_limit_by_hand() -> None:
    # Trace a (student s): first passes k=0,3,6 with prompts of 40, 90, 130 tokens; k=3 and
    # k=6 were forced with prompts of 90+25 = 115 and 130+12 = 142 tokens.
    # Trace b: k=0 (40) and k=2 (70), k=0 forced (40+30 = 70).
    first = _call(
        ("a|s|k=0|s=0", 40),
        ("a|s|k=3|s=0", 90),
        ("a|s|k=6|s=0", 130),
        ("b|s|k=0|s=0", 40),
        ("b|s|k=2|s=0", 70),
    )
    forced = _call(
        ("a|s|k=3|s=0|forced", 115), ("a|s|k=6|s=0|forced", 142), ("b|s|k=0|s=0|forced", 70)
    )
    # longest first-pass prompts 130 + 70 = 200; suffixes 25 + 12 + 30 = 67; limit 267
    assert rollout_bench.prefill_limit([first, forced]) == 267


def test_bare_requests_decode_exactly_what_the_stage_decoded() -> None:
    request = GenerationRequest(
        "t|s|k=3|s=0",
        [{"role": "user", "content": "q"}],
        max_tokens=192,
        stop_when=lambda text: True,
        stop_when_after=["}"],
    )
    bare = rollout_bench.bare_request(request, Completion(request.key, "x", 10, 57, "stop", None))
    assert (bare.max_tokens, bare.stop_when, bare.stop_when_after) == (57, None, [])
    assert bare.messages == request.messages and bare.key == request.key
    # a completion that ended at once still asks for one token (budgets are >= 1)
    empty = rollout_bench.bare_request(request, Completion(request.key, "", 10, 0, "stop", None))
    assert empty.max_tokens == 1


def test_demo_copies_are_rekeyed_into_problem_groups_and_teacher_variants() -> None:
    frame = pd.DataFrame({"trace_id": ["t1"], "problem_id": ["p1"], "teacher": ["gpt-4"], "x": [1]})
    # copy 19: group 19 // 8 = 2, variant 19 % 8 = 3
    out = app_bench.tile(frame, 19)
    assert out.iloc[0].to_dict() == {
        "trace_id": "t1#c19",
        "problem_id": "p1#g2",
        "teacher": "gpt-4-v3",
        "x": 1,
    }
    assert frame["trace_id"].tolist() == ["t1"]  # the source frame is left alone


def test_synthetic_rollouts_cover_every_prefix_of_every_trace() -> None:
    traces = pd.DataFrame(
        {
            "trace_id": ["a", "b"],
            "teacher": ["t", "t"],
            "dataset": ["d", "d"],
            "problem_id": ["p", "q"],
        }
    )
    steps = pd.DataFrame({"trace_id": ["a", "a", "a", "b"], "step": [1, 2, 3, 1]})
    out = app_bench.synthetic_rollouts(traces, steps, 2, np.random.default_rng(0))
    # (3 + 1) + (1 + 1) = 6 prefixes per student, 2 students: 12 rows
    assert len(out) == 12
    keys = sorted(zip(out["trace_id"], out["student"], out["k"], strict=True))
    assert keys[:4] == [("a", "student-1", k) for k in range(4)]
    assert set(out.loc[out["trace_id"] == "a", "m"]) == {3}
    assert set(out["correct"]) <= {0.0, 1.0}


def test_the_long_trace_is_2000_punkt_steps_of_about_30000_tokens() -> None:
    from legival_core.text.segment import split_steps
    from legival_core.text.tokens import count_tokens

    _problem, reasoning, total = app_bench.long_trace(2000)
    assert len(split_steps(reasoning)) == 2000
    assert 30_000 <= count_tokens(reasoning) <= 34_000
    # every "a + n = b" in it is true arithmetic, and the closing sentence states the total
    import re

    sums = re.findall(r"(\d+) \+ (\d+) = (\d+)", reasoning)
    assert len(sums) > 1500
    assert all(int(a) + int(n) == int(b) for a, n, b in sums)
    assert reasoning.endswith(f"So the shop received {total} items in total.")


def test_the_scale_bench_store_is_built_in_parts_and_compacted_to_one_per_table(
    tmp_path: Path,
) -> None:
    """The scale bench writes its store a chunk of copies at a time (one part per chunk and
    table), then merges it as a user would after a sharded run: one part per table, every row
    still there."""
    import scale_bench

    store = scale_bench.build(tmp_path / "scale", copies=2, chunk=1, students=1)
    from legival_core.store.schema import spec

    built = json.loads((tmp_path / "scale" / "built.json").read_text())
    for table, rows in built["rows"].items():
        assert len(store.parts(table)) == 1, table
        assert len(store.read(table, columns=[spec(table).keys[0]])) == rows, table


@pytest.mark.slow
def test_a_bench_child_reports_its_own_peak_memory_not_its_parents() -> None:
    """The benches measure each step in a child process. On Linux a child's ru_maxrss starts
    at the parent's resident size at the fork (kept over the exec): a metrics stage started
    by the bench that had just built a million-trace store reported 13.8 GB, the build's
    memory, not its own. ``own_peak_gb`` reads the child's own high-water mark."""
    import subprocess

    held = np.ones(2**30 // 8)  # 1 GiB resident in this process before the child starts
    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
        "import resource\n"
        "from bench.app_bench import own_peak_gb\n"
        "print(own_peak_gb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    own, inherited = map(float, run.stdout.split())
    assert held.sum() == len(held)
    assert inherited > 1.0  # what ru_maxrss says: at least the parent's 1 GiB
    assert own < 0.75  # the child itself: an interpreter, pandas and the store's modules


@pytest.mark.slow
def test_the_page_result_bench_measures_each_whole_store_result_of_the_demo() -> None:
    """One row for the inputs, the trace list, the reward inputs and the six results of each
    reward model (points, ρ at two levels on all and correct traces, teacher rewards)."""
    import page_result_peaks

    from legival_core.store.store import Store

    store = Store.open(REPO / "results" / "demo")
    steps = page_result_peaks.measure(store)
    models = sorted(store.read("rewards", columns=["reward_model"])["reward_model"].unique())
    assert [s.name for s in steps[:3]] == [
        "inputs: the buckets' reward partial, step counts",
        "trace list",
        "reward inputs: rewards, grades, owners",
    ]
    assert len(steps) == 3 + 6 * len(models) and len(models) >= 1
    assert all(s.seconds >= 0 and s.peak_gb > 0 and s.held_after_gb > 0 for s in steps)


def test_the_scale_bench_counts_the_memory_of_its_worker_processes() -> None:
    """With ``--workers`` the stage's peak is the sum over the process and its descendants: a
    child holding 300 MB adds about 300 MB to the reading (each process's own peak would not
    show it)."""
    import subprocess

    import scale_bench

    holds = "import time; b = bytearray(300_000_000); print('ready', flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", holds], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        with_child = scale_bench.tree_resident_gb(os.getpid())
        own = scale_bench.tree_resident_gb(child.pid)
    finally:
        child.kill()
        child.wait()
    without = scale_bench.tree_resident_gb(os.getpid())
    assert own >= 0.3  # the child's 300 MB, resident (bytearray zero-fills every page)
    assert with_child - without >= 0.29
