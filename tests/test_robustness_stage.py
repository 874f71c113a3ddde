"""The opt-in ``robustness`` stage: re-segment and re-embed into side tables.

A small store made by the real CPU pipeline (``python -m precompute run --store``: grade,
segment with Punkt, embed with MiniLM, lexical judge, metrics) on traces whose reasoning has
line breaks and a display-math block, so the maths-aware segmenter (the stage's default
alternative for a store cut by Punkt) and ``lines`` cut them differently from Punkt. Checked:
the steps it writes (cut by hand) with both offline labelers' flags, that no default table
changes, that a rerun skips every trace, that a run killed between two parts resumes to the
rows of an uninterrupted run, and that the report then offers the segmenter alternative
computed from the side tables, its backtracking from the primary labeler's flags.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from legival_core.rankings.robustness_choices import Settings, load_tables, robustness_report
from legival_core.store.schema import trace_id_for
from legival_core.store.store import Store
from precompute.cli import EXIT_OK, EXIT_USAGE, main
from tests.kill_after_part import killed_after_part

# Slow: the stage runs for real (Punkt, MiniLM) through the command line, once in a
# subprocess that is killed and resumed.
pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
#: One trace per part, so a kill can land between the parts of two traces.
CONFIG = """\
[experiment]
name = "robustness-stage"
seed = 0

[segment]
mode = "paper"

[embed]
traces_per_part = 1

[judge]
labelers = ["lexical"]

[metrics]
primary_labeler = "lexical"
"""
REASONING = (
    "First I add the two numbers. Then I write the sum.\n"
    "$$\n2 + 3 = 5\n$$\n"
    "Wait, let me recount the terms.\n"
    "So the answer is \\boxed{5}."
)
#: The same text cut by ``math`` (by hand; ``lines`` cuts it the same way): every line a
#: step, the $$ block kept whole, and the first line's two sentences apart.
SIDE_STEPS = [
    "First I add the two numbers.",
    "Then I write the sum.",
    "$$\n2 + 3 = 5\n$$",
    "Wait, let me recount the terms.",
    "So the answer is \\boxed{5}.",
]
TEACHERS = ("tutor-a", "tutor-b")
PROBLEMS = {"q1": ("What is 2 + 3?", "5"), "q2": ("What is 4 + 1?", "5"), "q3": ("1 + 1?", "2")}


def _reasoning(teacher: str, problem: str) -> str:
    if (teacher, problem) == ("tutor-a", "q1"):
        return REASONING
    extra = "Hmm, I try again.\nI check it once more.\n" if teacher == "tutor-b" else ""
    return f"I look at {problem}. I work it out.\n{extra}The result is \\boxed{{5}}."


def _build(path: Path) -> Store:
    store = Store.create(path, config={"kind": "robustness stage fixture"})
    store.write(
        "problems",
        pd.DataFrame(
            {
                "problem_id": list(PROBLEMS),
                "dataset": "toy",
                "task": "math",
                "prompt": [p for p, _ in PROBLEMS.values()],
                "gold": [g for _, g in PROBLEMS.values()],
            }
        ),
        stage="fixture",
    )
    store.write(
        "traces",
        pd.DataFrame(
            [
                {
                    "trace_id": trace_id_for(t, p),
                    "problem_id": p,
                    "dataset": "toy",
                    "teacher": t,
                    "sample": 0,
                    "reasoning": _reasoning(t, p),
                    "answer_text": "5",
                    "source": "test-fixture",
                }
                for t in TEACHERS
                for p in PROBLEMS
            ]
        ),
        stage="fixture",
    )
    return store


@pytest.fixture(scope="module")
def pipeline_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store through the real CPU stages (no robustness tables yet) and its config file."""
    root = tmp_path_factory.mktemp("robustness-stage")
    config = root / "config.toml"
    config.write_text(CONFIG, encoding="utf-8")
    store = _build(root / "base")
    for stage in ("grade", "segment", "embed", "judge", "metrics"):
        code = main([stage, "--store", str(store.path), "--config", str(config), "--no-progress"])
        assert code == EXIT_OK, stage
    return store.path, config


def _copy(source: Path, target: Path) -> Path:
    return Path(shutil.copytree(source, target))


def _default_state(path: Path) -> dict[str, object]:
    """Every default table's part files (name, size) and manifest entry."""
    manifest = Store.open(path).manifest
    state: dict[str, object] = {}
    for table, entry in manifest["tables"].items():
        if table.startswith("robustness_"):
            continue
        parts = sorted((path / "tables" / table).glob("part-*.arrow"))
        state[table] = ([(p.name, p.stat().st_size) for p in parts], entry)
    return state


def _run(path: Path, config: Path, *extra: str) -> int:
    return main(
        ["robustness", "--store", str(path), "--config", str(config), "--no-progress", *extra]
    )


def test_stage_writes_the_math_steps_and_no_default_table(
    pipeline_store: tuple[Path, Path], tmp_path: Path
) -> None:
    base, config = pipeline_store
    store_path = _copy(base, tmp_path / "store")
    before = _default_state(store_path)
    assert _run(store_path, config) == EXIT_OK
    assert _default_state(store_path) == before  # the default tables are untouched
    store = Store.open(store_path)
    steps = store.read("robustness_steps")
    assert set(steps["segmenter"]) == {"math"}  # the first segmenter the store was not cut by
    one = steps[steps["trace_id"] == trace_id_for("tutor-a", "q1")].sort_values("step")
    assert one["text"].tolist() == SIDE_STEPS
    # Spans are exact: each step's text is its slice of the reasoning.
    assert [REASONING[s:e] for s, e in zip(one["start"], one["end"], strict=True)] == SIDE_STEPS
    # Both offline labelers flag the step opening with "Wait" (the fourth).
    assert one["lexical_cue"].tolist() == [False, False, False, True, False]
    assert one["context_cue"].tolist() == [False, False, False, True, False]
    # "Hmm, I try again." opens with an interruption for both; "I check it once more." for
    # neither (no cue, and the step before it voices no doubt).
    other = steps[steps["trace_id"] == trace_id_for("tutor-b", "q1")].sort_values("step")
    assert other["text"].tolist()[2:4] == ["Hmm, I try again.", "I check it once more."]
    assert other["lexical_cue"].tolist()[2:4] == [True, False]
    assert other["context_cue"].tolist()[2:4] == [True, False]
    # Punkt (the default steps) keeps the $$ block inside a longer sentence: fewer steps.
    default_steps = store.read("steps")
    assert (default_steps["trace_id"] == trace_id_for("tutor-a", "q1")).sum() < len(SIDE_STEPS)
    similarity = store.read("robustness_similarity")
    row = similarity[similarity["trace_id"] == trace_id_for("tutor-a", "q1")].sort_values("step")
    assert row["step"].tolist() == [0, 1, 2, 3, 4]
    assert pd.isna(row["max_similarity"].iloc[0])  # step 0 has no earlier step
    later = row.iloc[1:]
    assert ((later["max_similarity"] >= -1) & (later["max_similarity"] <= 1)).all()
    assert (later["matched_step"] < later["step"]).all()
    # Every trace is there, one similarity row per step.
    assert (
        similarity.groupby("trace_id").size().to_dict()
        == steps.groupby("trace_id").size().to_dict()
    )
    assert similarity["trace_id"].nunique() == len(TEACHERS) * len(PROBLEMS)
    # A rerun finds every trace done and writes nothing.
    parts = sorted((store_path / "tables" / "robustness_steps").glob("part-*.arrow"))
    assert _run(store_path, config) == EXIT_OK
    assert sorted((store_path / "tables" / "robustness_steps").glob("part-*.arrow")) == parts
    # The store's own segmenter is refused: there would be nothing to compare.
    assert _run(store_path, config, "--segmenter", "paper") == EXIT_USAGE
    # Another segmenter lands beside the first, under its own name.
    assert _run(store_path, config, "--segmenter", "lines") == EXIT_OK
    both = Store.open(store_path).read("robustness_steps")
    assert set(both["segmenter"]) == {"math", "lines"}


def test_report_reads_the_side_tables(pipeline_store: tuple[Path, Path], tmp_path: Path) -> None:
    base, config = pipeline_store
    store_path = _copy(base, tmp_path / "store")
    before = robustness_report(
        load_tables(store_path), Settings.from_manifest(Store.open(store_path).manifest)
    )
    assert {"segmenter:math", "segmenter:lines"} <= set(before.unavailable["choice"])
    assert _run(store_path, config) == EXIT_OK
    store = Store.open(store_path)
    report = robustness_report(load_tables(store), Settings.from_manifest(store.manifest))
    # The math steps are compared; lines (no side tables) is still listed as not compared.
    assert "segmenter:math" in set(report.summary["choice"])
    assert list(report.unavailable.loc[report.unavailable.family == "segmenter", "choice"]) == [
        "segmenter:lines"
    ]
    rankings = report.rankings[
        (report.rankings.metric == "redundancy") & (report.rankings.choice == "segmenter:math")
    ].set_index("teacher")
    # Redundancy under math, by the formula: per trace |{i >= 1 : r_i > 0.8}| / (m - 1)
    # (0 for one step) over the side table's r_i, then the mean over the teacher's traces.
    side = store.read("robustness_similarity")
    traces = store.read("traces", columns=["trace_id", "teacher"])
    shares = {}
    for trace_id, rows in side.groupby("trace_id"):
        r = rows.sort_values("step")["max_similarity"].to_numpy()[1:]
        shares[trace_id] = float(np.count_nonzero(r > 0.8) / len(r)) if len(r) else 0.0
    expected = (
        traces.assign(share=traces["trace_id"].map(shares)).groupby("teacher")["share"].mean()
    )
    for teacher in TEACHERS:
        assert rankings.loc[teacher, "value"] == pytest.approx(expected[teacher])
    # Backtracking under math: the primary labeler's flags over the new steps, shares per
    # trace: the lexical detector's here, the cues' when they are the primary labeler.
    flags = store.read("robustness_steps")
    for labeler, column in (("lexical", "lexical_cue"), ("cues", "context_cue")):
        settings = replace(Settings.from_manifest(store.manifest), labeler=labeler)
        chosen = robustness_report(load_tables(store), settings, families=["segmenter"])
        per_trace = flags.groupby("trace_id")[column].mean()
        expected_bt = (
            traces.assign(share=traces["trace_id"].map(per_trace))
            .groupby("teacher")["share"]
            .mean()
        )
        bt = chosen.rankings[
            (chosen.rankings.metric == "backtracking")
            & (chosen.rankings.choice == "segmenter:math")
        ].set_index("teacher")
        for teacher in TEACHERS:
            assert bt.loc[teacher, "value"] == pytest.approx(expected_bt[teacher]), labeler


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    return env


def test_a_killed_run_resumes_to_the_same_rows(
    pipeline_store: tuple[Path, Path], tmp_path: Path
) -> None:
    base, config = pipeline_store
    clean = _copy(base, tmp_path / "clean")
    assert _run(clean, config) == EXIT_OK
    killed = _copy(base, tmp_path / "killed")
    command = [sys.executable, "-m", "precompute", "robustness", "--store", str(killed)]
    command += ["--config", str(config), "--no-progress"]
    # Killed right after the third trace's steps landed, before its similarities.
    kill_run = killed_after_part(command, "robustness_steps", 3)
    first = subprocess.run(
        kill_run, cwd=REPO, env=_subprocess_env(), capture_output=True, text=True, timeout=600
    )
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    store = Store.open(killed)
    assert store.read("robustness_steps")["trace_id"].nunique() == 3
    assert store.read("robustness_similarity")["trace_id"].nunique() == 2
    assert store.verify() == []
    assert _run(killed, config) == EXIT_OK
    for table in ("robustness_steps", "robustness_similarity"):
        got = Store.open(killed).read(table)
        want = Store.open(clean).read(table)
        pd.testing.assert_frame_equal(got, want)
