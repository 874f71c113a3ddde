"""Crash safety: precompute stages killed with SIGKILL at seeded moments resume to exactly the
store an uninterrupted run makes; damaged part files are detected, reported and redone.

Input: real CHAMP traces (6 problems x 3 authors: GPT-4, PaLM 2 and the human reference =
18 traces, from the ``champ-dataset`` package) in a fresh store. The uninterrupted chain
grade -> segment -> judge (lexical) -> embed -> metrics runs once in this process and keeps a
copy of the store before and after each stage.

Each of the 20 seeded kill runs copies the store as it was before one stage, starts that stage
with the real CLI (``python -m precompute <stage>``) in a subprocess, waits until the n-th part
file of the stage's output appears (n drawn from the seed), waits a further seeded 0-10 ms and
sends SIGKILL to the process group. Then it checks the store (``verify()`` finds nothing: a kill
never leaves a half-written part), reruns the stage and compares every table with
``Store.read`` (which dedupes and sorts) against the uninterrupted run. For the resumable
stages it also checks that the rows written before the kill were kept rather than redone: the
parts on disk hold exactly as many rows as the final table (no key written twice).

The stores live on tmpfs when there is one: a SIGKILL leaves the kernel's page cache intact,
so what survives a process kill does not depend on the disk (fsync matters only for power loss).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from legival_core.store.schema import spec
from legival_core.store.store import Store
from precompute.cli import main
from precompute.config import load_config
from precompute.stages import STAGES, StageContext, run_stage
from tests.kill_after_part import killed_after_part

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
CHAIN = ("grade", "segment", "judge", "embed", "metrics")
#: Small batches, so each stage writes many parts and a kill can land between any two.
CONFIG = """\
[experiment]
name = "crash-safety"
seed = 7

[grade]
batch_size = 1

[segment]
batch_size = 1

[embed]
batch_size = 32
traces_per_part = 1

[judge]
labelers = ["lexical"]

[metrics]
primary_labeler = "lexical"
"""
#: (stage, seed) of the 20 kill runs.
KILLS = (
    [("segment", s) for s in range(7)]
    + [("grade", s) for s in range(5)]
    + [("embed", s) for s in range(2)]
    + [("metrics", s) for s in range(6)]
)
#: Tables whose key columns the resumable stages skip on (parts hold each key once).
RESUMED_BY_KEY = {"grade": "grades", "segment": "steps", "embed": "similarity"}


@dataclass
class Chain:
    root: Path
    config: Path
    before: dict[str, Path]
    after: dict[str, Path]
    parts_made: dict[str, int]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    # One torch thread: on a shared 2-core runner more threads only fight each other.
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _precompute(*args: str) -> list[str]:
    """``python -m precompute ARGS`` as this interpreter runs it."""
    return [sys.executable, "-m", "precompute", *args]


def _run_command(
    command: list[str], timeout: int = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    """``command`` run from the repository with the test environment (``env`` added), its
    output captured."""
    return subprocess.run(
        command, cwd=REPO, env={**_env(), **env}, capture_output=True, text=True, timeout=timeout
    )


def _run_in_process(stage: str, store_dir: Path, config: Path) -> object:
    ctx = StageContext(store=Store.open(store_dir), config=load_config(config), progress=False)
    try:
        return run_stage(stage, ctx)
    finally:
        ctx.engines.close()


def _part_names(store_dir: Path, tables: tuple[str, ...]) -> set[str]:
    names: set[str] = set()
    for table in tables:
        folder = store_dir / "tables" / table
        if folder.is_dir():
            names |= {f"{table}/{p.name}" for p in folder.glob("part-*.arrow")}
    return names


@pytest.fixture(scope="module")
def chain() -> Iterator[Chain]:
    from precompute.champ import write_champ

    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    root = Path(tempfile.mkdtemp(prefix="legival-crash-", dir=base))
    config = root / "crash.toml"
    config.write_text(CONFIG, encoding="utf-8")
    current = root / "stage-0-input"
    store = Store.create(current, config=load_config(config).to_dict())
    counts = write_champ(store, models=["GPT-4", "PaLM 2 Medium"], limit=6)
    assert counts["traces"] >= 18
    before: dict[str, Path] = {}
    after: dict[str, Path] = {}
    parts_made: dict[str, int] = {}
    for number, stage in enumerate(CHAIN, start=1):
        before[stage] = current
        following = root / f"stage-{number}-after-{stage}"
        shutil.copytree(current, following)
        seen = _part_names(following, STAGES[stage].writes)
        _run_in_process(stage, following, config)
        parts_made[stage] = len(_part_names(following, STAGES[stage].writes) - seen)
        after[stage] = following
        current = following
    yield Chain(root, config, before, after, parts_made)
    shutil.rmtree(root, ignore_errors=True)


def _tables(store_dir: Path) -> dict[str, pd.DataFrame]:
    store = Store.open(store_dir)
    return {name: store.read(name) for name in store.tables()}


def _assert_same_store(got_dir: Path, want_dir: Path) -> None:
    got, want = _tables(got_dir), _tables(want_dir)
    assert sorted(got) == sorted(want)
    if "page_results" in got:
        # A stored page result's stamp names its store's own parts (a resumed run merges its
        # tables into parts laid out differently), so the stamps differ between the stores;
        # what must agree is every result, and that each is current in its own store.
        from legival_core.metrics.page_results import INPUTS, inputs_stamp

        manifest = Store.open(got_dir).manifest
        rows = got["page_results"]
        for name, stamp in zip(rows["name"], rows["inputs_stamp"], strict=True):
            assert stamp == inputs_stamp(manifest, INPUTS[name]), f"stale page result {name}"
        got["page_results"] = rows.drop(columns=["inputs_stamp"])
        want["page_results"] = want["page_results"].drop(columns=["inputs_stamp"])
    for name, frame in want.items():
        # Float columns may differ in the last bits (embedding batches are composed differently
        # after a resume), hence assert_frame_equal's default relative tolerance of 1e-5.
        pd.testing.assert_frame_equal(got[name], frame, obj=f"table {name}")


def _raw_rows(store_dir: Path, table: str) -> int:
    store = Store.open(store_dir)
    total = 0
    for part in store.parts(table):
        with pa.memory_map(str(part)) as source:
            total += pa.ipc.open_file(source).read_all().num_rows
    return total


@pytest.mark.parametrize(("stage", "seed"), KILLS, ids=[f"{s}-{n}" for s, n in KILLS])
def test_sigkill_then_resume_equals_uninterrupted_run(chain: Chain, stage: str, seed: int) -> None:
    rng = random.Random(f"{stage}-{seed}")
    total = chain.parts_made[stage]
    assert total >= 3, f"{stage} writes too few parts ({total}) for a mid-run kill"
    # Leave a few parts of work after the kill point (metrics: its last table still to go).
    target = rng.randint(1, total - 3 if total > 6 else total - 1)
    delay = rng.uniform(0.0, 0.010)
    store_dir = chain.root / f"kill-{stage}-{seed}"
    shutil.copytree(chain.before[stage], store_dir)
    already = _part_names(store_dir, STAGES[stage].writes)

    command = [sys.executable, "-m", "precompute", stage, "--store", str(store_dir),
               "--config", str(chain.config), "--no-progress"]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    seen: set[str] = set()
    deadline = time.monotonic() + 240
    try:
        while process.poll() is None and time.monotonic() < deadline:
            seen |= _part_names(store_dir, STAGES[stage].writes) - already
            if len(seen) >= target:
                time.sleep(delay)
                os.killpg(process.pid, signal.SIGKILL)
                break
            time.sleep(0.002)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, (
        f"{stage} ended with {process.returncode} before the kill: {stderr.decode()[-1500:]}"
    )

    store = Store.open(store_dir)
    assert store.verify() == [], "a killed writer left a damaged store"
    key_table = RESUMED_BY_KEY.get(stage)
    done_before = set()
    if key_table and store.has(key_table):
        done_before = {k[0] for k in store.done_keys(key_table, ["trace_id"])}

    result = _run_in_process(stage, store_dir, chain.config)

    _assert_same_store(store_dir, chain.after[stage])
    if key_table:
        # Work finished before the kill was kept, not redone, and no key was written twice.
        assert result.skipped == len(done_before)  # type: ignore[attr-defined]
        final = Store.open(store_dir).read(key_table)
        assert _raw_rows(store_dir, key_table) == len(final)
        assert not final.duplicated(list(spec(key_table).keys)).any()
    assert Store.open(store_dir).verify() == []
    shutil.rmtree(store_dir, ignore_errors=True)


# --- damaged parts: detected, reported, redone ---------------------------------------------------


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(bytes(data[: len(data) // 2]))
    elif how == "torn-tail":  # the end of the file never reached the disk: zeros
        data[-64:] = bytes(64)
        path.write_bytes(bytes(data))
    else:  # bit rot in the middle of the column data
        middle = len(data) // 2
        for offset in range(middle, middle + 16):
            data[offset] ^= 0x5A
        path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["truncated", "torn-tail", "bit-flips"])
def test_damaged_part_is_detected_reported_and_redone(
    chain: Chain, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store_dir = chain.root / f"damaged-{how}"
    shutil.copytree(chain.after["segment"], store_dir)
    parts = Store.open(store_dir).parts("steps")
    victim = parts[len(parts) // 2]
    _damage(victim, how)

    # Detected: verify names the file.
    problems = Store.open(store_dir).verify()
    assert any(p.startswith(str(victim)) for p in problems), problems

    # Reported: a stage that cannot decode the part refuses to build on it, with one line
    # naming the file (exit 4). Flipped bits may still decode; verify's checksum found them.
    capsys.readouterr()
    code = main(["segment", "--store", str(store_dir), "--config", str(chain.config),
                 "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    if how != "bit-flips" or code != 0:
        assert code == 4
        assert len(err) == 1 and str(victim) in err[0] and "Traceback" not in err[0]

    # Redone: moved aside, the stage writes those rows again; the store equals the clean run.
    moved = Store.open(store_dir).quarantine_part(victim, reason=f"test: {how}")
    assert moved.parent.name == "corrupt" and moved.exists()
    _run_in_process("segment", store_dir, chain.config)
    assert Store.open(store_dir).verify() == []
    _assert_same_store(store_dir, chain.after["segment"])
    shutil.rmtree(store_dir, ignore_errors=True)


def test_verify_cli_names_a_truncated_part(chain: Chain) -> None:
    store_dir = chain.root / "verify-cli"
    shutil.copytree(chain.after["grade"], store_dir)
    victim = Store.open(store_dir).parts("grades")[0]
    victim.write_bytes(victim.read_bytes()[:100])
    done = _run_command(
        [sys.executable, "-m", "precompute", "verify", "--store", str(store_dir)], timeout=120
    )
    assert done.returncode == 4
    assert str(victim) in done.stdout
    assert "Traceback" not in done.stderr + done.stdout
    shutil.rmtree(store_dir, ignore_errors=True)


# --- ingest: a kill between the tables of one batch; concurrent ingests --------------------------

#: Rows of the ingest file: 5 batches of 8 (``--batch-rows 8``). Each batch writes a problems,
#: a traces and a grades part, in that order.
INGEST_ROWS = 40
INGEST_BATCH = 8


def _ingest_file(folder: Path, name: str = "traces.jsonl", bad_rows: int = 0) -> Path:
    """Real-looking math traces: every row has a prompt and an answer; most give ``correct``,
    every fourth gives only ``gold`` (graded by math-verify during the ingest)."""
    lines = []
    for i in range(INGEST_ROWS):
        a, b = i, i + 3
        row: dict[str, object] = {
            "problem_id": f"p{i:03d}",
            "prompt": f"What is {a} + {b}?",
            "reasoning": f"We add {a} and {b}. Counting on from {a} by {b} gives {a + b}.",
            "answer": f"\\boxed{{{a + b}}}",
        }
        if i % 4 == 3:
            row["gold"] = str(a + b)
        else:
            row["correct"] = i % 5 != 0
        lines.append(json.dumps(row))
    lines += ['{"problem_id": "broken", "prompt": '] * bad_rows  # invalid JSON
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _ingest_command(source: Path, store_dir: Path) -> list[str]:
    return _precompute(
        "ingest", str(source), "--store", str(store_dir), "--teacher", "adder",
        "--batch-rows", str(INGEST_BATCH),
    )  # fmt: skip


def test_ingest_killed_between_a_batchs_traces_and_grades_resumes_every_table(
    tmp_path: Path,
) -> None:
    """The test hook SIGKILLs the ingest right after its 3rd traces part lands, before that
    batch's grades part: the rerun must write the missing grades, not call the batch done."""
    source = _ingest_file(tmp_path)
    clean = tmp_path / "clean"
    done = _run_command(_ingest_command(source, clean))
    assert done.returncode == 0, done.stderr

    killed = tmp_path / "killed"
    first = _run_command(killed_after_part(_ingest_command(source, killed), "traces", 3))
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    store = Store.open(killed)
    # The kill landed in the window: three batches of traces, two of grades.
    assert len(store.read("traces")) == 3 * INGEST_BATCH
    assert len(store.read("grades")) == 2 * INGEST_BATCH
    assert store.verify() == []

    again = _run_command(_ingest_command(source, killed))
    assert again.returncode == 0, again.stderr
    assert f"already in the store: {3 * INGEST_BATCH}" in again.stdout
    assert Store.open(killed).verify() == []
    for table in ("problems", "traces", "grades"):
        got, want = Store.open(killed).read(table), Store.open(clean).read(table)
        assert len(want) == INGEST_ROWS
        pd.testing.assert_frame_equal(got, want, obj=f"table {table}")


def test_ingest_redoes_the_grades_of_a_quarantined_part(tmp_path: Path) -> None:
    """Store.quarantine_part promises that the stage redoes the rows of a part it moves
    aside; for ingest that holds for its grades too, not only for its traces."""
    from precompute.ingest import ingest

    source = _ingest_file(tmp_path)
    store = Store.create(tmp_path / "store")
    ingest(source, store, "adder", batch_rows=INGEST_BATCH)
    want = store.read("grades")
    store.quarantine_part(store.parts("grades")[1], reason="test")
    assert len(store.read("grades")) == INGEST_ROWS - INGEST_BATCH

    report = ingest(source, store, "adder", batch_rows=INGEST_BATCH)
    assert report.written == {"problems": 0, "traces": 0, "grades": INGEST_BATCH}
    assert report.already_present == INGEST_ROWS
    pd.testing.assert_frame_equal(store.read("grades"), want)
    assert store.verify() == []


def test_concurrent_ingests_keep_every_quarantine_entry(tmp_path: Path) -> None:
    """Three ingests at once, each with one bad row, into a store whose quarantine file is
    already large: all three entries are kept, and the earlier bytes are appended to in place
    (same file, same first bytes), never read and rewritten whole."""
    store_dir = tmp_path / "store"
    store = Store.create(store_dir)
    earlier = {
        "file": "/elsewhere/old.jsonl",
        "line": 1,
        "row": 1,
        "field": None,
        "reason": "invalid JSON",
        "teacher": "old",
        "excerpt": "x" * 400,
    }
    line = (json.dumps(earlier) + "\n").encode()
    before = line * (20_000_000 // len(line))  # about 20 MB of earlier entries
    store.quarantine_path.write_bytes(before)
    inode = store.quarantine_path.stat().st_ino

    sources = [_ingest_file(tmp_path, f"batch{n}.jsonl", bad_rows=1) for n in range(3)]
    processes = []
    for source in sources:
        command = _ingest_command(source, store_dir)
        processes.append(
            subprocess.Popen(
                command,
                cwd=REPO,
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        assert "quarantined: 1" in out

    assert store.quarantine_path.stat().st_ino == inode
    with store.quarantine_path.open("rb") as handle:
        assert handle.read(len(before)) == before
        added = [json.loads(text) for text in handle.read().decode().splitlines()]
    assert sorted(entry["file"] for entry in added) == sorted(str(s.resolve()) for s in sources)
    assert all(entry["line"] == INGEST_ROWS + 1 for entry in added)
    # Every file's good rows landed too (each file is its own dataset: its own problem ids).
    assert len(Store.open(store_dir).read("traces")) == 3 * INGEST_ROWS
    assert Store.open(store_dir).verify() == []


# --- stages that write more than one table: killed between two of their tables ------------------

#: Every registered stage that writes several tables, with the table after whose first part
#: the hook kills it. A new multi-table stage must get a kill-window test here.
KILL_WINDOWS = {
    "metrics": "trace_efficiency",
    "monitor": "sabotaged",
    # tests/test_robustness_stage.py::test_a_killed_run_resumes_to_the_same_rows kills it
    # right after a trace's robustness_steps part, before that trace's similarities.
    "robustness": "robustness_steps",
    "regrade": "grades",
    "segment": "steps",
}


def test_every_multi_table_stage_has_a_kill_window_test() -> None:
    several = {name for name, info in STAGES.items() if len(info.writes) > 1}
    assert several == set(KILL_WINDOWS), "add a kill-window test for the new stage"


def test_metrics_killed_between_its_tables_resumes(
    chain: Chain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """metrics writes trace_efficiency first; killed right after that part lands, the rerun
    recomputes every table and ends with the uninterrupted store. The killed run's scratch
    folders, left in its temporary folder, are removed by the rerun."""
    store_dir = chain.root / "kill-window-metrics"
    shutil.copytree(chain.before["metrics"], store_dir)
    scratch = chain.root / "kill-window-metrics-tmp"
    scratch.mkdir()
    command = [sys.executable, "-m", "precompute", "metrics", "--store", str(store_dir),
               "--config", str(chain.config), "--no-progress"]  # fmt: skip
    kill_run = killed_after_part(command, KILL_WINDOWS["metrics"], 1)
    killed = _run_command(kill_run, TMPDIR=str(scratch))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    store = Store.open(store_dir)
    assert store.has("trace_efficiency") and not store.has("teacher_metrics")
    assert store.verify() == []
    # two scratch folders, both the killed process's: the buckets' split and the per-trace
    # frames the buckets handed back
    assert [p.name.startswith("legival-buckets-") for p in scratch.iterdir()] == [True, True]

    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # the rerun's temporary folder
    _run_in_process("metrics", store_dir, chain.config)
    _assert_same_store(store_dir, chain.after["metrics"])
    assert list(scratch.iterdir()) == []
    assert Store.open(store_dir).verify() == []
    shutil.rmtree(store_dir, ignore_errors=True)


def test_monitor_killed_between_its_tables_resumes(tmp_path: Path) -> None:
    """monitor writes the sabotaged copies, then asks the weak monitor (real SmolLM2 through
    llama.cpp) about them; killed right after the sabotaged part lands, the rerun keeps that
    part and writes every verdict."""
    from tests import oversight_helpers

    store_dir = tmp_path / "store"
    oversight_helpers.build_small_store(store_dir)
    command = [sys.executable, "-m", "precompute", "monitor", "--store", str(store_dir),
               "--engine", "llamacpp", "--max-tokens", "4", "--kinds", "number",
               "--limit", "1", "--no-natural", "--no-progress"]  # fmt: skip
    kill_run = killed_after_part(command, KILL_WINDOWS["monitor"], 1)
    killed = _run_command(kill_run)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    store = Store.open(store_dir)
    sabotaged = store.read("sabotaged")
    assert len(sabotaged) and not store.has("monitor_verdicts")

    again = _run_command(command, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    store = Store.open(store_dir)
    pd.testing.assert_frame_equal(store.read("sabotaged"), sabotaged)
    assert _raw_rows(store_dir, "sabotaged") == len(sabotaged)  # kept, not written again
    verdicts = store.read("monitor_verdicts")
    wanted = {(t, "original") for t in sabotaged["trace_id"]}
    wanted |= {(t, "sabotage:number") for t in sabotaged["trace_id"]}
    assert set(zip(verdicts["trace_id"], verdicts["variant"], strict=True)) == wanted
    assert store.verify() == []


def test_regrade_killed_between_its_tables_resumes(tmp_path: Path) -> None:
    """regrade writes the grades again, then the rollouts; killed right after the first grades
    part lands, the rerun keeps those grades (the current version skips them), regrades the
    rest and every rollout, and ends with the store an uninterrupted regrade gives."""
    store_dir, reference = tmp_path / "store", tmp_path / "reference"
    for folder in (store_dir, reference):
        shutil.copytree(REPO / "results" / "demo", folder)
        for table in ("grades", "rollouts"):  # graded before grader versions were stored
            store = Store.open(folder)
            rows = store.read(table)
            rows["grader_version"] = pd.array([None] * len(rows), dtype="Int32")
            store.write(table, rows, stage="test")
    command = [sys.executable, "-m", "precompute", "regrade", "--store", str(store_dir),
               "--no-progress"]  # fmt: skip
    kill_run = killed_after_part(command, KILL_WINDOWS["regrade"], 1)
    killed = _run_command(kill_run, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    store = Store.open(store_dir)
    regraded = int(store.read("grades")["grader_version"].notna().sum())
    assert 0 < regraded < 250  # one part of grades landed, no rollouts yet
    assert store.read("rollouts")["grader_version"].isna().all()
    assert store.verify() == []

    again = _run_command(command, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{regraded} already done" in again.stderr  # the grades kept, not graded again
    whole = _run_command([*command[:-3], "--store", str(reference), "--no-progress"], timeout=600)
    assert whole.returncode == 0, whole.stderr[-2000:]
    for table in ("grades", "rollouts"):
        pd.testing.assert_frame_equal(
            Store.open(store_dir).read(table), Store.open(reference).read(table)
        )
    assert Store.open(store_dir).verify() == []


def test_segment_killed_between_its_tables_resumes(tmp_path: Path) -> None:
    """segment writes the steps, then carries Thought Anchors chunk importances onto them
    (``step_importance``); killed right after the steps part lands, the rerun keeps that part,
    writes the importances, and ends with the store of an uninterrupted run."""
    from tests.test_formats import _thought_anchors_folder

    folder = _thought_anchors_folder(tmp_path / "math_rollouts")
    store_dir, reference = tmp_path / "store", tmp_path / "reference"
    assert main(["ingest", str(folder), "--store", str(store_dir)]) == 0
    shutil.copytree(store_dir, reference)
    command = [sys.executable, "-m", "precompute", "segment", "--store", str(store_dir),
               "--no-progress"]  # fmt: skip
    kill_run = killed_after_part(command, KILL_WINDOWS["segment"], 1)
    killed = _run_command(kill_run)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    store = Store.open(store_dir)
    steps = store.read("steps")
    assert len(steps) == 3 and not store.has("step_importance")
    assert store.verify() == []

    for folder_ in (store_dir, reference):
        again = _run_command([*command[:5], str(folder_), "--no-progress"])
        assert again.returncode == 0, again.stderr[-2000:]
    store = Store.open(store_dir)
    assert _raw_rows(store_dir, "steps") == len(steps)  # kept, not written again
    # The three chunks each map onto one step: importances 0.05, 0.4 and -0.1 in step order.
    stored = store.read("step_importance").sort_values("step")
    assert stored["importance"].tolist() == [0.05, 0.4, -0.1]
    _assert_same_store(store_dir, reference)
    assert store.verify() == []


# --- page results stamped with what was read ----------------------------------------------------


def test_a_write_during_the_metrics_reads_leaves_its_page_results_stale(
    chain: Chain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40, item 2: the metrics stage took its input snapshot after reading traces,
    grades, steps, similarity and judgments, so a step a concurrent ``segment`` wrote in
    between was stamped as read: the inspector's trace list then showed 4 steps where the
    steps table has 5, until the next metrics run. The write lands here right after the last
    of those reads; the stored marker must then be stale, never current."""
    from legival_core.metrics.page_results import WholeStore, is_current
    from precompute.stages import metrics

    store_dir = tmp_path / "store"
    shutil.copytree(chain.before["metrics"], store_dir)
    store = Store.open(store_dir)
    steps = store.read("steps")
    trace = steps["trace_id"].iloc[0]
    last = steps[steps["trace_id"] == trace].sort_values("step").iloc[-1]
    extra = pd.DataFrame([{**last.to_dict(), "step": int(last["step"]) + 1,
                           "text": "One more step."}])  # fmt: skip
    real = metrics.read_or_empty

    def read_then_write(store_: object, table: str, columns: object = None) -> pd.DataFrame:
        frame = real(store_, table, columns)
        # the last whole read of the input check (judgments are read a bucket at a time)
        if table == "answer_leaks":
            Store.open(store_dir).write("steps", extra, stage="segment")
        return frame

    monkeypatch.setattr(metrics, "read_or_empty", read_then_write)
    _run_in_process("metrics", store_dir, chain.config)
    store = Store.open(store_dir)
    assert (
        len(store.read("steps", filters={"trace_id": [trace]}))
        == len(steps[steps["trace_id"] == trace]) + 1
    )
    pages = store.read("page_results", columns=["name", "selection", "inputs_stamp"])
    assert not is_current(pages, store.manifest, "trace_steps", WholeStore())
    # Without a concurrent write the same run's marker is current.
    monkeypatch.setattr(metrics, "read_or_empty", real)
    _run_in_process("metrics", store_dir, chain.config)
    store = Store.open(store_dir)
    pages = store.read("page_results", columns=["name", "selection", "inputs_stamp"])
    assert is_current(pages, store.manifest, "trace_steps", WholeStore())


# --- a full disk: one line naming the store and the stage, no tracebacks --------------------------


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 3 MB tmpfs (we run as root in CI); skipped, saying why, where mounting is refused."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount_point)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except FileNotFoundError:
        pytest.skip("no `mount` command here to make a small tmpfs")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a 3 MB tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], capture_output=True, timeout=30)


def _fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` with one file; return it (delete it to free space)."""
    stats = os.statvfs(disk)
    filler = disk / "filler"
    with filler.open("wb") as handle:
        handle.write(bytes(stats.f_bavail * stats.f_frsize))
    assert os.statvfs(disk).f_bavail == 0
    return filler


def test_full_disk_is_one_line_naming_the_store_and_the_stage(small_tmpfs: Path) -> None:
    from precompute.champ import write_champ

    store_dir = small_tmpfs / "store"
    write_champ(Store.create(store_dir), models=["GPT-4", "PaLM 2 Medium"], limit=40)
    filler = _fill(small_tmpfs)

    segment = [sys.executable, "-m", "precompute", "segment", "--store", str(store_dir),
               "--no-progress"]  # fmt: skip
    full = _run_command(segment)
    assert full.returncode == 4, full.stderr[-3000:]
    assert "Logging error" not in full.stderr and "Traceback" not in full.stderr
    lines = full.stderr.strip().splitlines()
    assert len(lines) == 1, full.stderr[-3000:]
    assert str(store_dir) in lines[0] and "'segment'" in lines[0]
    assert "No space left on device" in lines[0]

    source = small_tmpfs.parent / "more.jsonl"
    source.write_text(json.dumps({"problem_id": "x", "prompt": "1 + 1?", "reasoning": "Two."})
                      + "\n", encoding="utf-8")  # fmt: skip
    ingest = [sys.executable, "-m", "precompute", "ingest", str(source), "--store",
              str(store_dir), "--teacher", "t"]  # fmt: skip
    refused = _run_command(ingest)
    assert refused.returncode == 4  # a store problem, as for the segment stage above
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert str(store_dir) in lines[0] and "No space left on device" in lines[0]

    # Nothing was damaged: with space again the same command finishes the work.
    filler.unlink()
    again = _run_command(segment)
    assert again.returncode == 0, again.stderr[-3000:]
    store = Store.open(store_dir)
    assert store.verify() == []
    assert set(store.read("steps")["trace_id"]) == set(store.read("traces")["trace_id"])


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return _run_command(_precompute(*args))


def _one_disk_line(done: subprocess.CompletedProcess[str], names: Path) -> None:
    """Exit 4 (a store problem, as the CLI documents for a disk that refuses writes), one line
    naming what was being written, no traceback."""
    assert done.returncode == 4, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert str(names) in lines[0] and "No space left on device" in lines[0], lines[0]


def test_merge_export_and_publish_on_a_full_disk_are_exit_4_naming_what_they_write(
    small_tmpfs: Path, tmp_path: Path
) -> None:
    """Issue 40, item 17: each exited 1 with a bare OSError naming no store. The data held
    then and holds now: with space again the same commands finish."""
    from tests.test_publish import hand_store

    # merge compacts a store on the full disk.
    store_dir = small_tmpfs / "store"
    store = Store.create(store_dir)
    for part in range(4):
        rows = [{"trace_id": f"t{part}-{i}", "reward_model": "rm", "score": i / 100}
                for i in range(200)]  # fmt: skip
        store.write("rewards", pd.DataFrame(rows), stage="reward")
    before = store.read("rewards")
    filler = _fill(small_tmpfs)
    _one_disk_line(_run("merge", "--store", str(store_dir)), store_dir)
    assert Store.open(store_dir).verify() == []
    pd.testing.assert_frame_equal(Store.open(store_dir).read("rewards"), before)
    # export and publish write into a folder on the full disk, from a store elsewhere.
    source = hand_store(tmp_path / "run", {"ace": [100, 110], "bee": [200, 300]})
    exported = small_tmpfs / "export"
    _one_disk_line(_run("export", "--store", str(source), "--out", str(exported)), exported)
    site = small_tmpfs / "site"
    _one_disk_line(_run("publish", "--store", str(source), "--out", str(site),
                        "--resamples", "20"), site)  # fmt: skip
    filler.unlink()
    assert _run("merge", "--store", str(store_dir)).returncode == 0
    assert len(Store.open(store_dir).parts("rewards")) == 1
    pd.testing.assert_frame_equal(Store.open(store_dir).read("rewards"), before)
    assert _run("export", "--store", str(source), "--out", str(exported)).returncode == 0
    # A site (plotly.js inline, over 3 MB) never fits this disk: publish left nothing on it.
    assert sorted(p.name for p in small_tmpfs.iterdir()) == ["export", "store"]


def test_an_unwritable_log_is_one_warning_not_a_traceback_per_record(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """/dev/full accepts the open and fails every write with ENOSPC, like a log file on a full
    disk. A stage that otherwise succeeds says once that its log is incomplete."""
    from precompute.progress import stage_logging

    if not os.access("/dev/full", os.W_OK):
        pytest.skip("no writable /dev/full on this system")
    with stage_logging(Path("/dev/full"), "segment") as logger:
        for number in range(30):
            logger.info("record %d", number)
    err = capsys.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err[-2000:]
    assert "'segment'" in lines[0] and "No space left on device" in lines[0]


# --- publish: killed anywhere, the old site or the new one ---------------------------------------


def _site(folder: Path) -> dict[str, bytes]:
    """Every file of a published site (it has subfolders: rows/, traces/, assets/ …)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _publish_command(store: Path, out: Path) -> list[str]:
    return _precompute("publish", "--store", str(store), "--out", str(out), "--resamples", "20")


def test_publish_killed_at_every_step_leaves_the_old_site_or_the_new_one(tmp_path: Path) -> None:
    """Issue 24, item 10: publish wrote index.html, the CSV and the TeX in place, so a kill
    left a truncated page beside the previous snapshot's CSV and TeX. First a run stopped
    inside the write of index.html, at a fixed byte: under a 1 MB file-size limit
    (RLIMIT_FSIZE; Python ignores the SIGXFSZ, so the write fails with EFBIG) the page, with
    plotly.js inline (over 3 MB), cannot be finished. Then the test hook SIGKILLs it after its
    first file, its middle one and its last one, and just before the swap (the site has pages in
    subfolders, so the step numbers come from the new site's file count). Each time the folder
    is the old site, byte for byte; the run after that leaves the new site and no temporary
    folder."""
    import resource

    from tests.test_publish import hostile_store
    from tests.test_uncertainty_pages import hand_worked_efficiency

    old_store = Store.create(tmp_path / "old")
    old_store.write("trace_efficiency", hand_worked_efficiency(), stage="metrics")
    from precompute.stages.metrics import teacher_table

    teachers = teacher_table(
        old_store.read("trace_efficiency"), pd.DataFrame(), "paper", "interpolate", 0
    )
    old_store.write("teacher_metrics", teachers, stage="metrics")
    new_store = hostile_store(tmp_path / "new")
    out, reference = tmp_path / "site", tmp_path / "reference"
    for store, folder in ((old_store.path, out), (new_store, reference)):
        done = subprocess.run(_publish_command(store, folder), env=_env(), capture_output=True)
        assert done.returncode == 0, done.stderr[-2000:]
    old, new = _site(out), _site(reference)
    assert old != new and {"index.html", "leaderboard.csv", "leaderboard.tex"} <= set(old)

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    cut = subprocess.run(
        _publish_command(new_store, out), env=_env(), capture_output=True, preexec_fn=small_files
    )
    # A write the system refuses (here the file-size limit: EFBIG) is the CLI's "disk that
    # refuses writes", exit 4, since issue 40 (it was a bare OSError, exit 1).
    assert cut.returncode == 4 and b"File too large" in cut.stderr, cut.stderr[-2000:]
    assert _site(out) == old, "stopped inside index.html: the site is not the old one"

    from precompute.atomic_folder import KILL_IN_STAGING_ENV

    # kill_if_asked runs after each file written (len(new) of them), then once before the swap.
    for step in sorted({1, len(new) // 2, len(new), len(new) + 1}):
        env = {**_env(), KILL_IN_STAGING_ENV: str(step)}
        killed = subprocess.run(_publish_command(new_store, out), env=env, capture_output=True)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        assert _site(out) == old, f"killed at step {step}: the site is not the old one"
    again = subprocess.run(_publish_command(new_store, out), env=_env(), capture_output=True)
    assert again.returncode == 0, again.stderr[-2000:]
    assert _site(out) == new
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".site")) == []


def test_a_swap_killed_between_its_two_renames_is_undone(tmp_path: Path) -> None:
    """Where renameat2 cannot swap two folders, the swap is two renames; a kill between them
    leaves no site but its old copy, which the next publish (recover) puts back first."""
    from precompute.atomic_folder import recover

    target = tmp_path / "site"
    old = tmp_path / ".site.old-0123456789ab"
    old.mkdir()
    (old / "index.html").write_text("old page")
    staging = tmp_path / ".site.tmp-999999999-0123456789ab"  # its writer is dead
    staging.mkdir()
    (staging / "index.html").write_text("new page")
    recover(target)
    assert (target / "index.html").read_text() == "old page"
    assert not old.exists() and not staging.exists()
