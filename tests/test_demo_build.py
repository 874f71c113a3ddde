"""Building the demo: the rollout stage split over one-thread processes does the whole job once.

The committed store (``results/demo``) is checked in ``test_demo_store.py``; here a two-problem
demo is built from scratch with ``jobs=2``, so the parallel path (spawned shard processes
writing into one store) runs for real with the packaged SmolLM2 and Gemma through llama.cpp.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from precompute.demo import DemoOptions, build_demo
from precompute.stages.rollout import k_grid


@pytest.mark.slow
@pytest.mark.timeout(1500)  # rollouts of two real students, and two more segmentations
def test_a_demo_built_in_two_shard_processes_has_every_rollout_once(tmp_path: Path) -> None:
    # Prefixes every 6 steps (the demo's 3 on its maths-aware steps would ask twice as many
    # rollouts of the two students): the same paths, half the decoding.
    options = DemoOptions(problems=2, out=tmp_path / "demo", jobs=2, oversight=False, interval=6)
    store = build_demo(options, progress=False)
    assert store.verify() == []
    grades = store.read("grades", columns=["trace_id", "correct"])
    correct = set(grades.loc[grades["correct"].astype(bool), "trace_id"])
    # Two problems, five teachers: the two human references at least are graded correct.
    assert len(correct) >= 2
    steps = store.read("steps", columns=["trace_id", "step"])
    m_of = steps.groupby("trace_id")["step"].count().to_dict()
    wanted = {
        (t, s, k)
        for t in correct
        for s in options.students
        for k in k_grid(m_of[t], options.interval)
    }
    assert options.students == ("smollm2-135m", "gemma3-270m")
    rollouts = store.read("rollouts", columns=["trace_id", "student", "k", "sample"])
    got = list(zip(rollouts["trace_id"], rollouts["student"], rollouts["k"], strict=True))
    # Each (trace, student, k) exactly once: the shards split the traces, none is done twice
    # or missed.
    assert sorted(got) == sorted(wanted)
    # Every rollout carries the grader stamp, the k = 0 baselines copied across a problem's
    # teachers too (they were copied without it, so the fresh demo read as graded by an older
    # grader).
    stamps = store.read("rollouts", columns=["grader_version", "code_revision"])
    assert stamps["grader_version"].notna().all() and stamps["code_revision"].notna().all()
    # Both shards ran and are on record (the manifest keeps one record per stage run).
    records = store.manifest["provenance"]
    assert [r["jobs"] for r in records if r["stage"] == "demo"] == [2]
    shards = {r["shard"] for r in records if r["stage"] == "rollout"}
    assert shards == {"0/2", "1/2"}
    # The metrics stage, run once after the shards, covers every correct trace.
    transfer = store.read("trace_transfer", columns=["trace_id"])
    assert correct <= set(transfer["trace_id"])

    # Issue 38: steps by the maths-aware segmenter, both offline backtracking labelers with
    # the context-aware cues giving the stored share, and every other segmenter in the side
    # tables, so the robustness report compares labelers and segmenters on the demo itself.
    from legival_core.rankings.robustness_choices import (
        Settings,
        load_tables,
        robustness_report,
    )
    from legival_core.views.robustness import survival_table

    segment = [r for r in records if r["stage"] == "segment"]
    assert segment[-1]["mode"] == "math"
    judged = store.read("judgments", columns=["trace_id", "labeler"])
    assert set(judged["labeler"]) == {"lexical", "cues"}
    metrics = [r for r in records if r["stage"] == "metrics"]
    assert metrics[-1]["primary_labeler"] == "cues"
    side = store.read("robustness_steps", columns=["segmenter", "trace_id"])
    assert set(side["segmenter"]) == {"paper", "lines"}
    assert set(side["trace_id"]) == set(steps["trace_id"])
    report = robustness_report(load_tables(store), Settings.from_manifest(store.manifest))
    assert set(report.unavailable["family"]) <= {"references", "student"}
    assert {"labeler:lexical", "segmenter:paper", "segmenter:lines"} <= set(report.summary.choice)
    for row in survival_table(report).itertuples(index=False):
        if row.verdict.startswith("survives"):
            assert row.verdict.startswith("survives every choice compared: ")
