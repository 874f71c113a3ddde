"""``--no-progress`` leaves stderr without a single progress bar (issue 41).

The stages' own bars obeyed the flag, but transformers draws one of its own while it loads a
model ("Loading weights", when MiniLM is loaded by the embed stage), and it still appeared.
Here a real store is embedded with real MiniLM in a subprocess, as a user runs it, and stderr
must hold no bar at all, the flag given or ``LEGIVAL_NO_PROGRESS=1`` set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from precompute.cli import EXIT_OK, main

ROOT = Path(__file__).resolve().parent.parent
#: What any tqdm bar writes: "desc:  40%|████      | 2/5 [...]"; and transformers' own.
BAR_MARKS = ("Loading weights", "%|", "it/s]")


def _segmented_store(folder: Path) -> Path:
    """Two ingested traces, segmented: the embed stage's input."""
    file = folder / "mine.jsonl"
    rows = [
        {"problem_id": "a", "prompt": "What is 2 + 3?", "reasoning": "Two plus three. It is 5.",
         "answer": "5", "gold": "5"},
        {"problem_id": "b", "prompt": "What is 4 + 4?", "reasoning": "Four and four. It is 8.",
         "answer": "8", "gold": "8"},
    ]  # fmt: skip
    file.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    store = folder / "store"
    ingest = ["ingest", str(file), "--store", str(store), "--teacher", "me", "--task", "math"]
    assert main(ingest) == EXIT_OK
    assert main(["segment", "--store", str(store), "--no-progress"]) == EXIT_OK
    return store


def _embed(store: Path, *flags: str, env: dict[str, str] | None = None) -> str:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    environment.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)  # the library's own switch: unset
    environment.pop("LEGIVAL_NO_PROGRESS", None)
    environment.update(env or {})
    done = subprocess.run(
        [sys.executable, "-m", "precompute", "embed", "--store", str(store), *flags],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == EXIT_OK, done.stderr[-2000:]
    return done.stderr


@pytest.mark.slow
def test_no_progress_silences_the_bar_transformers_draws_while_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The in-process `segment --no-progress` below switches the libraries' bars off for this
    # process by setting the variable; put it back as it was afterwards.
    monkeypatch.setenv(
        "HF_HUB_DISABLE_PROGRESS_BARS", os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS", "")
    )
    store = _segmented_store(tmp_path)
    quiet = _embed(store, "--no-progress")
    assert "embed: 4 similarity rows" in quiet  # it ran, and loaded MiniLM to do it
    assert [mark for mark in BAR_MARKS if mark in quiet] == [], quiet
    # The environment switch is the same promise (a second store: the first is done).
    (tmp_path / "again").mkdir()
    other = _segmented_store(tmp_path / "again")
    quiet = _embed(other, env={"LEGIVAL_NO_PROGRESS": "1"})
    assert "similarity rows" in quiet
    assert [mark for mark in BAR_MARKS if mark in quiet] == [], quiet
