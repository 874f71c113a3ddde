"""Bring your own traces, end to end (issue 13, item 7).

A user has recorded solutions with prose answers. They ingest the file and run one command,
``python -m precompute run --store DIR`` (no config): every CPU stage runs over the stored
traces and the store ends with steps, similarity, lexical judgments and the metrics tables for
every trace. A stage whose inputs are missing stops with one line naming the stage to run
first (exit 5) instead of writing rows with holes in them.

Real components throughout: CHAMP's recorded GPT-4 5-shot solutions (``champ-dataset``),
Punkt, all-MiniLM-L6-v2, math-verify through the champ task.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from legival_core.store.store import Store
from precompute.champ import champ_problems, champ_traces
from precompute.cli import EXIT_MISSING, EXIT_OK, EXIT_USAGE, main

#: Problems in the file: enough for several teachers' medians, small enough for seconds.
N_PROBLEMS = 6


def _write_user_file(path: Path) -> pd.DataFrame:
    """The recorded GPT-4 5-shot CHAMP solutions as a user would bring them: one JSON line per
    trace with the problem text, the solution as ``reasoning``, the model's one-sentence prose
    summary as ``answer`` and the gold answer (no ``correct``, no ``tokens``)."""
    traces = champ_traces("5-Shot", models=["GPT-4"], include_human=False, limit=N_PROBLEMS)
    problems = champ_problems(limit=N_PROBLEMS).set_index("problem_id")
    with path.open("w", encoding="utf-8") as out:
        for row in traces.itertuples(index=False):
            problem = problems.loc[row.problem_id]
            record = {
                "problem_id": row.problem_id.split("/", 1)[1],
                "prompt": problem["prompt"],
                "reasoning": row.reasoning,
                "answer": row.answer_text,
                "gold": problem["gold"],
            }
            out.write(json.dumps(record) + "\n")
    return traces


def _ingest(file: Path, store: Path) -> None:
    code = main(
        ["ingest", str(file), "--store", str(store), "--teacher", "gpt-4", "--task", "champ",
         "--dataset", "champ"]
    )  # fmt: skip
    assert code == 0


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.slow
def test_ingested_prose_traces_are_fully_measured_by_one_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = _write_user_file(tmp_path / "gpt4_5shot.jsonl")
    assert len(recorded) == N_PROBLEMS
    store_dir = tmp_path / "mine"
    _ingest(tmp_path / "gpt4_5shot.jsonl", store_dir)
    capsys.readouterr()

    code, err = _cli(["run", "--store", str(store_dir), "--no-progress"], capsys)
    assert code == EXIT_OK, err
    store = Store.open(store_dir)
    trace_ids = set(store.read("traces", columns=["trace_id"])["trace_id"])
    assert len(trace_ids) == N_PROBLEMS
    # Every trace graded (whatever the grade: grading of prose answers is another item's work).
    grades = store.read("grades")
    assert set(grades["trace_id"]) == trace_ids
    assert grades["correct"].notna().all()
    steps = store.read("steps")
    assert set(steps["trace_id"]) == trace_ids
    similarity = store.read("similarity")
    # one similarity row per step: the embed stage covered every step of every trace
    assert len(similarity) == len(steps)
    judgments = store.read("judgments")
    assert set(judgments.loc[judgments["labeler"] == "lexical", "trace_id"]) == trace_ids
    efficiency = store.read("trace_efficiency")
    assert set(efficiency["trace_id"]) == trace_ids
    for column in ("tokens", "steps", "redundancy", "backtracking", "compression"):
        assert efficiency[column].notna().all(), column
    teacher = store.read("teacher_metrics")
    assert teacher[["teacher", "dataset"]].values.tolist() == [["gpt-4", "champ"]]
    assert int(teacher["n_traces"].iloc[0]) == N_PROBLEMS
    assert store.has("decomposition")
    # (the metrics stage compacts the tables it wrote in chunks: bookkeeping, not a stage)
    records = store.manifest["provenance"]
    ran = [r["stage"] for r in records if r["stage"] not in ("ingest", "merge")]
    assert ran == ["grade", "segment", "embed", "leaks", "judge", "metrics"]
    judge = next(r for r in store.manifest["provenance"] if r["stage"] == "judge")
    # both offline labelers; the context-aware cues give the stored share
    assert judge["labelers"] == ["lexical", "cues"]
    assert set(judgments.loc[judgments["labeler"] == "cues", "trace_id"]) == trace_ids
    metrics = next(r for r in store.manifest["provenance"] if r["stage"] == "metrics")
    assert metrics["primary_labeler"] == "cues"

    # The same command again only finishes work: nothing new for the resumable tables.
    parts = {t: len(store.parts(t)) for t in ("steps", "similarity", "judgments", "grades")}
    code, err = _cli(["run", "--store", str(store_dir), "--no-progress"], capsys)
    assert code == EXIT_OK, err
    again = Store.open(store_dir)
    assert {t: len(again.parts(t)) for t in parts} == parts
    assert f"segment: 0 steps rows; {N_PROBLEMS} already done" in err
    assert f"embed: 0 similarity rows; {N_PROBLEMS} already done" in err


@pytest.mark.slow
def test_metrics_before_segment_stops_naming_segment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_user_file(tmp_path / "gpt4_5shot.jsonl")
    store_dir = tmp_path / "mine"
    _ingest(tmp_path / "gpt4_5shot.jsonl", store_dir)
    capsys.readouterr()

    code, err = _cli(["metrics", "--store", str(store_dir)], capsys)
    assert code == EXIT_MISSING
    assert err.count("\n") == 1
    assert "precompute segment" in err and f"{N_PROBLEMS} of {N_PROBLEMS}" in err
    assert not Store.open(store_dir).has("trace_efficiency")  # no partial rows written

    # After segment alone, metrics names the next stage, embed; after embed, judge.
    assert _cli(["segment", "--store", str(store_dir), "--no-progress"], capsys)[0] == EXIT_OK
    code, err = _cli(["metrics", "--store", str(store_dir)], capsys)
    assert code == EXIT_MISSING and "precompute embed" in err
    assert _cli(["embed", "--store", str(store_dir), "--no-progress"], capsys)[0] == EXIT_OK
    code, err = _cli(["metrics", "--store", str(store_dir)], capsys)
    assert code == EXIT_MISSING and "precompute judge" in err and "'cues'" in err
    assert not Store.open(store_dir).has("trace_efficiency")


def test_run_without_config_needs_a_store_with_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _cli(["run", "--store", str(tmp_path / "nothing")], capsys)
    assert code == EXIT_MISSING and "precompute ingest" in err and err.count("\n") == 1
    code, err = _cli(["run"], capsys)
    assert code == EXIT_USAGE and "--store" in err
    Store.create(tmp_path / "empty")
    code, err = _cli(["run", "--store", str(tmp_path / "empty"), "--stages", "rollout"], capsys)
    assert code == EXIT_USAGE and "rollout" in err and err.count("\n") == 1
    code, err = _cli(["run", "--store", str(tmp_path / "empty")], capsys)
    assert code == EXIT_MISSING and "table 'traces' is empty" in err and err.count("\n") == 1
