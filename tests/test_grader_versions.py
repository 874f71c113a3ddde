"""Versioned grades (issue 37): every grade and rollout says which grader made it; a store graded
by another version says so (verify, the About page, lv.open), ``regrade`` brings it current and
lists what flipped, and a merged board or a site refuses to mix grader versions unless told to.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

import legival_core as lv
from legival_core.grading.grader import GRADER_VERSION
from legival_core.grading.stamps import GraderStatus, grader_status, mixed_grader_versions
from legival_core.store.store import Store
from legival_core.views.board_merge import MergeConflict
from legival_core.views.merged_board import merged_board
from tests.app_runner import run_app_page

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "results" / "demo"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "precompute", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def small_store(path: Path) -> Store:
    """Three graded word problems, ingested through the real CLI (graded by this code)."""
    rows = path.parent / "rows.jsonl"
    rows.write_text(
        '{"problem_id": "a", "prompt": "2+3?", "gold": "5", "reasoning": "So the answer is 5."}\n'
        '{"problem_id": "b", "prompt": "2*3?", "gold": "6", "reasoning": "The answer is not 6."}\n'
        '{"problem_id": "c", "prompt": "7-3?", "gold": "4", "reasoning": "\\\\boxed{4}"}\n',
        encoding="utf-8",
    )
    done = cli("ingest", str(rows), "--store", str(path), "--teacher", "m", "--task", "gsm8k")
    assert done.returncode == 0, done.stderr
    return Store.open(path)


def test_every_grade_carries_the_grader_version_and_code_revision(tmp_path: Path) -> None:
    store = small_store(tmp_path / "s")
    grades = store.read("grades")
    assert list(grades["grader_version"]) == [GRADER_VERSION] * 3
    assert all(isinstance(r, str) and r for r in grades["code_revision"])
    assert list(grades["correct"]) == [True, False, True]  # "not 6" is no answer 6
    assert grader_status(store) == GraderStatus({"grades": {GRADER_VERSION: 3}})


def _stamp(store: Store, version: int | None, *, flip: bool = False) -> None:
    """Make every grade and rollout look made by grader ``version`` (None: before versions, as
    stores made before issue 37); ``flip`` turns every teacher grade round (graded otherwise)."""
    for table in ("grades", "rollouts"):
        if not store.has(table):
            continue
        rows = store.read(table)
        rows["grader_version"] = pd.array([version] * len(rows), dtype="Int32")
        if flip and table == "grades":
            rows["correct"] = ~rows["correct"].astype(bool)
        store.write(table, rows, stage="test")


def _age(store: Store) -> None:
    _stamp(store, None, flip=True)


@pytest.mark.slow
def test_verify_says_an_older_grader_made_the_store_and_regrade_brings_it_current(
    tmp_path: Path,
) -> None:
    store = small_store(tmp_path / "s")
    _age(store)
    said = cli("verify", "--store", str(store.path))
    assert said.returncode == 0, said.stderr
    assert "graded by an older grader (grades: 3 rows before versions" in said.stderr
    assert "python -m precompute regrade --store DIR" in said.stderr

    regraded = cli("regrade", "--store", str(store.path), "--no-progress")
    assert regraded.returncode == 0, regraded.stderr
    assert regraded.stdout.count("flipped grades") == 3, regraded.stdout
    with (store.path / "regrade_flips.csv").open(encoding="utf-8") as f:
        flips = list(csv.DictReader(f))
    assert {f["trace_id"] for f in flips} == set(store.read("grades")["trace_id"])
    assert list(Store.open(store.path).read("grades")["correct"]) == [True, False, True]
    said = cli("verify", "--store", str(store.path))
    assert f"graded by the current grader (version {GRADER_VERSION})" in said.stderr

    again = cli("regrade", "--store", str(store.path), "--no-progress")  # resumable: nothing left
    assert again.returncode == 0 and "flipped" not in again.stdout
    assert "3 already done" in again.stderr


def test_opening_a_store_an_older_grader_made_warns(tmp_path: Path) -> None:
    store = small_store(tmp_path / "s")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lv.open(store.path).grader_status is not None  # current: no warning
    _age(store)
    with pytest.warns(UserWarning, match="graded by an older grader") as warned:
        results = lv.open(store.path)
    assert results.grader_status is not None and results.grader_status.stale
    # the warning points at the notebook's line, not at the library's wrapper
    assert [Path(w.filename).name for w in warned] == [Path(__file__).name]


def test_a_merged_board_refuses_stores_graded_by_different_versions(tmp_path: Path) -> None:
    current = tmp_path / "current"
    older = tmp_path / "older"
    shutil.copytree(DEMO, current)
    shutil.copytree(DEMO, older)
    _stamp(Store.open(current), GRADER_VERSION)
    _age(Store.open(older))
    stores = {"current": Store.open(current), "older": Store.open(older)}
    assert mixed_grader_versions([("a", stores["current"]), ("b", stores["current"])]) is None
    with pytest.raises(MergeConflict, match="different grader versions"):
        merged_board(stores, "current", include=False, n_boot=20, seed=0, low_n=5)
    board = merged_board(
        stores, "current", include=False, n_boot=20, seed=0, low_n=5, allow_mixed_graders=True
    )
    assert len(board.text)


def test_publish_refuses_stores_graded_by_different_versions(tmp_path: Path) -> None:
    current, older = tmp_path / "current", tmp_path / "older"
    shutil.copytree(DEMO, current)
    shutil.copytree(DEMO, older)
    _stamp(Store.open(current), GRADER_VERSION)
    _age(Store.open(older))
    done = cli(
        "publish", "--store", str(current), "--store", str(older), "--out", str(tmp_path / "s")
    )
    assert done.returncode == 2, done.stderr
    assert "different grader versions" in done.stderr and "--allow-mixed-graders" in done.stderr


@pytest.mark.slow
def test_the_about_page_names_an_older_grader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = tmp_path / "older"
    shutil.copytree(DEMO, older)
    _age(Store.open(older))
    at = run_app_page("about", monkeypatch, [older])
    warned = [w.value for w in at.warning]
    assert any("graded by an older grader" in w and "regrade" in w for w in warned), warned
