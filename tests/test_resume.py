"""A rollout stage killed with SIGKILL mid-run resumes to exactly the uninterrupted result.

One store is prepared up to the rollout stage (real SmolLM2 teacher, greedy). The rollout
config is the smoke config with a prefix at every step and one rollout per part. Two copies:
the first runs ``rollout`` to the end; the second runs it in a subprocess that is killed as
soon as its first part file appears, then runs it again. Greedy decoding makes the outputs
deterministic, so the two final tables must be equal row for row, with no duplicate keys.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from legival_core.store.store import Store
from precompute.cli import main
from tests.child_process import wait_for_a_part

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "configs" / "smoke.toml"
KEYS = ["trace_id", "student", "k", "sample"]


def _resume_config(folder: Path) -> Path:
    """The smoke config with one rollout per part and a prefix at every step (more parts)."""
    text = SMOKE.read_text()
    problems = SMOKE.parent / "smoke_problems.jsonl"
    text = text.replace('source = "smoke_problems.jsonl"', f'source = "{problems}"')
    head, rollout = text.split("[rollout]")
    section, rest = rollout.split("[judge]")
    section = section.replace("interval = 3", "interval = 1")
    section = section.replace("batch_size = 4", "batch_size = 1")
    path = folder / "resume.toml"
    path.write_text(head + "[rollout]" + section + "[judge]" + rest)
    return path


def _rollout_command(store: Path, config: Path) -> list[str]:
    return [
        sys.executable, "-m", "precompute", "rollout", "--store", str(store),
        "--config", str(config), "--no-progress", "--threads", "1",
    ]  # fmt: skip


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with problems, traces, grades and steps: rollout's inputs."""
    path = tmp_path_factory.mktemp("resume") / "base"
    code = main(
        [
            "run",
            "--config",
            str(SMOKE),
            "--store",
            str(path),
            "--no-progress",
            "--stages",
            "problems,generate,grade,segment",
        ]
    )
    assert code == 0
    grades = Store.open(path).read("grades")
    assert grades["correct"].any(), "no correct trace: nothing to roll out"
    return path


def _table(path: Path) -> pd.DataFrame:
    frame = Store.open(path).read("rollouts")
    return frame.sort_values(KEYS).reset_index(drop=True)


def _rollout_to_the_end(store: Path, config: Path) -> None:
    """Run the rollout stage on ``store`` in a subprocess and require it to succeed."""
    done = subprocess.run(
        _rollout_command(store, config),
        env=_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_killed_rollout_resumes_to_the_same_table(prepared: Path, tmp_path: Path) -> None:
    config = _resume_config(tmp_path)
    full = tmp_path / "full"
    killed = tmp_path / "killed"
    shutil.copytree(prepared, full)
    shutil.copytree(prepared, killed)

    _rollout_to_the_end(full, config)
    expected = _table(full)
    assert len(expected) >= 3  # one part per rollout, so a kill can land mid-run

    parts = killed / "tables" / "rollouts"
    process = subprocess.Popen(
        _rollout_command(killed, config),
        env=_env(),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_a_part(process, parts, time.monotonic() + 600)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL

    interrupted = _table(killed)
    assert 0 < len(interrupted) < len(expected)  # the kill really landed mid-run
    assert Store.open(killed).verify() == []  # no half-written part survived the kill

    _rollout_to_the_end(killed, config)
    resumed = _table(killed)
    assert not resumed.duplicated(KEYS).any()
    # the rows written before the kill were kept, not regenerated
    raw_rows = sum(len(pd.read_feather(p)) for p in Store.open(killed).parts("rollouts"))
    assert raw_rows == len(resumed)
    pd.testing.assert_frame_equal(resumed, expected)
