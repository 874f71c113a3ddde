"""Bring your own traces, then transfer utility with one flag: ``run --students default``
(issue 41, item 3).

A store of ingested traces has no experiment config and so no students; ``run --store DIR``
measures everything but transfer utility and says how to get it. ``--students default`` adds
the rollouts of the demo's two students, SmolLM2-135M and Gemma 3 270M (packaged GGUFs,
llama.cpp, on the CPU): the number of rollouts and the minutes they take are printed before
the first starts, and a run killed half-way resumes where it stopped.

Real components throughout: the packaged students through llama.cpp, Punkt, MiniLM,
math-verify. The file is three tiny problems with two-step solutions, so each student has two
prefixes (k = 0 and k = 2) per trace: 12 rollouts in all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from legival_core.store.store import Store
from precompute.cli import EXIT_MISSING, EXIT_OK, EXIT_USAGE, _build_parser, main
from precompute.config import ExperimentConfig, RolloutConfig
from precompute.stages.rollout import k_grid
from precompute.students import DEFAULT_STUDENTS, no_students_message
from tests.child_process import wait_for_a_part

ROOT = Path(__file__).resolve().parent.parent
KEYS = ["trace_id", "student", "k", "sample"]

#: A user's own file: three problems, each solved in two sentences (two steps).
TRACES = [
    {
        "problem_id": "add",
        "prompt": "What is 17 + 25?",
        "reasoning": "Add the tens: 10 + 20 = 30. Add the ones: 7 + 5 = 12, so the total is "
        "30 + 12 = 42.",
        "answer": "42",
        "gold": "42",
    },
    {
        "problem_id": "mul",
        "prompt": "What is 6 times 7?",
        "reasoning": "Six sevens are 7 + 7 + 7 + 7 + 7 + 7. That sum is 42.",
        "answer": "42",
        "gold": "42",
    },
    {
        "problem_id": "sub",
        "prompt": "What is 100 - 36?",
        "reasoning": "Take away 30 first: 100 - 30 = 70. Then take away 6: 70 - 6 = 64.",
        "answer": "64",
        "gold": "64",
    },
]


def _write(path: Path) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in TRACES), encoding="utf-8")
    return path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


def _run(store: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "precompute", "run", "--store", str(store), *extra]


def _rollouts(store: Path) -> pd.DataFrame:
    path = Store.open(store)
    if not path.has("rollouts"):
        return pd.DataFrame(columns=KEYS)
    return path.read("rollouts").sort_values(KEYS).reset_index(drop=True)


def _session_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
@pytest.mark.timeout(1800)  # about 30 rollouts of two small models on two busy cores
def test_own_traces_reach_fotu_with_one_flag_and_resume_after_a_kill(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "run1"
    # One rollout per store part (the store's recorded [rollout] batch_size, which `run`
    # keeps): a kill then always lands between two written rollouts.
    config = ExperimentConfig(rollout=RolloutConfig(batch_size=1))
    Store.create(store, config=config.to_dict())
    file = _write(tmp_path / "traces.jsonl")
    ingest = ["ingest", str(file), "--store", str(store), "--teacher", "me", "--task", "math"]
    assert main(ingest) == EXIT_OK
    capsys.readouterr()

    # The README's second command, as written: everything but FOTU, and how to get it.
    plain = subprocess.run(
        _run(store, "--no-progress"), env=_env(), cwd=ROOT, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert plain.returncode == EXIT_OK, plain.stderr[-2000:]
    assert not Store.open(store).has("rollouts")
    hint = plain.stderr.strip().splitlines()[-1]
    assert f"python -m precompute run --store {store} --students default" in hint
    assert "12 rollouts to run" in hint and "min" in hint

    steps = Store.open(store).read("steps", columns=["trace_id", "step"])
    m_of = steps.groupby("trace_id")["step"].count().to_dict()
    assert sorted(m_of.values()) == [2, 2, 2]
    expected = {
        (trace, student, k, 0)
        for trace, m in m_of.items()
        for student in DEFAULT_STUDENTS
        for k in k_grid(m)
    }
    assert len(expected) == 12

    # The flag, killed as soon as its first rollout is in the store: only the parent dies,
    # as when a terminal is closed; its shard processes must notice and stop by themselves.
    started = subprocess.Popen(
        _run(store, "--students", "default"),
        env=_env(),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    parts = store / "tables" / "rollouts"
    deadline = time.monotonic() + 900
    try:
        wait_for_a_part(started, parts, deadline)
        os.kill(started.pid, signal.SIGKILL)
        started.wait(timeout=60)
        while time.monotonic() < deadline and not _session_gone(started.pid):
            time.sleep(0.2)
        assert _session_gone(started.pid), "shard processes kept running without their run"
    finally:
        if not _session_gone(started.pid):
            os.killpg(started.pid, signal.SIGKILL)
    before = started.stderr.read() if started.stderr else ""
    # Before the first rollout: how many, and about how long, at the measured rates.
    assert "rollout: 12 rollouts to run" in before
    assert "min on" in before and "measured" in before
    interrupted = _rollouts(store)
    assert 0 < len(interrupted) < len(expected)
    assert Store.open(store).verify() == []

    again = subprocess.run(
        _run(store, "--students", "default", "--no-progress"),
        env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert again.returncode == EXIT_OK, again.stderr[-2000:]
    assert f"({len(interrupted)} already done)" in again.stderr
    final = _rollouts(store)
    keys = list(zip(*(final[c] for c in KEYS), strict=True))
    assert sorted(keys) == sorted(expected)  # every rollout once, none twice
    assert Store.open(store).verify() == []

    done = Store.open(store)
    transfer = done.read("trace_transfer")
    assert set(transfer["trace_id"]) == set(m_of)
    board = done.read("teacher_metrics")
    assert board["fotu"].notna().all()
    assert ((board["fotu"] >= 0) & (board["fotu"] <= 1)).all()

    # Nothing left to add: a plain rerun says nothing more about FOTU.
    last = subprocess.run(
        _run(store, "--no-progress", "--stages", "metrics"),
        env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert last.returncode == EXIT_OK, last.stderr[-2000:]
    assert "--students default" not in last.stderr


def test_rollout_without_students_names_the_option_and_its_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s"
    Store.create(store)
    code = main(["rollout", "--store", str(store), "--no-progress"])
    err = capsys.readouterr().err
    assert code == EXIT_MISSING
    assert "--students default" in err
    assert "SmolLM2-135M and Gemma 3 270M" in err
    assert "Traceback" not in err
    assert no_students_message("x").startswith("x: no [[students]] configured")


def test_run_and_rollout_take_the_flag_and_refuse_unknown_students(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = _build_parser()
    args = parser.parse_args(["run", "--store", "s", "--students", "default"])
    assert args.students == "default"
    args = parser.parse_args(["rollout", "--store", "s", "--students", "gemma3-270m"])
    assert args.students == "gemma3-270m"
    store = tmp_path / "s"
    Store.create(store)
    assert main(["run", "--store", str(store), "--students", "gpt-4"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "'gpt-4' is not a packaged student" in err and "--students default" in err
    # Without students the rollout stage has nothing to run: the usage error names the flag.
    assert main(["run", "--store", str(store), "--stages", "rollout"]) == EXIT_USAGE
    assert "--students default" in capsys.readouterr().err
