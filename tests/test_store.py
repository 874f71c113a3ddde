"""Tests of the results store (``legival_core.store.store`` and the modules it composes):
atomic parts, dedupe, crash safety, corruption, concurrency."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from legival_core.store import schema
from legival_core.store.store import (
    TEMP_MAX_AGE_S,
    Store,
    StoreError,
    pandas_dtypes,
    read_exported,
)

REPO = Path(__file__).resolve().parents[1]


# --- helpers -------------------------------------------------------------------------------------


def rollouts(
    trace_ids: list[str],
    *,
    students: tuple[str, ...] = ("student-a",),
    ks: tuple[int, ...] = (0, 3),
    correct: float = 1.0,
    status: str = "ok",
) -> pd.DataFrame:
    rows = [
        {
            "trace_id": t,
            "student": s,
            "k": k,
            "sample": 0,
            "teacher": "teacher-x",
            "dataset": "math",
            "problem_id": f"p-{t}",
            "m": 9,
            "completion": f"continuation of {t} at {k}",
            "correct": correct,
            "status": status,
        }
        for t in trace_ids
        for s in students
        for k in ks
    ]
    return pd.DataFrame(rows)


def sample_value(dtype: pa.DataType, i: int) -> Any:
    """A deterministic, non-trivial value of ``dtype`` for row ``i``."""
    if pa.types.is_boolean(dtype):
        return i % 2 == 0
    if pa.types.is_integer(dtype):
        return 7 * i - 3
    if pa.types.is_floating(dtype):
        return i / 8 + 0.1
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return f'v{i}, "quoted"\nline two é'
    if pa.types.is_list(dtype):
        return [sample_value(dtype.value_type, i + j) for j in range(i % 3)]
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return f"bytes {i}\x00é".encode()
    raise AssertionError(f"no sample value for {dtype}")


def sample_frame(name: str, n: int = 5) -> pd.DataFrame:
    """Rows for table ``name``: distinct keys, every column filled, one optional null."""
    spec = schema.spec(name)
    data: dict[str, list[Any]] = {}
    for field in spec.schema:
        values = [sample_value(field.type, i) for i in range(n)]
        if field.name in spec.keys:
            values = [
                f"{field.name}-{n - i}"
                if isinstance(v, str)
                else (n - i if not isinstance(v, bool) else v)
                for i, v in enumerate(values)
            ]
        elif field.name not in spec.required_columns():
            values[1] = None
        data[field.name] = values
    # A boolean key would collide; no table has one, and this keeps the helper honest.
    assert not any(pa.types.is_boolean(spec.schema.field(k).type) for k in spec.keys)
    return pd.DataFrame(data)


def part_files(store: Store, table: str) -> list[Path]:
    return store.parts(table)


# --- creating and opening ------------------------------------------------------------------------


def test_create_is_idempotent_and_keeps_the_first_config(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = Store.create(root, config={"seed": 1})
    again = Store.create(root, config={"seed": 2})
    assert again.manifest["config"] == {"seed": 1}
    records = [r for r in again.manifest["provenance"] if r["stage"] == "create"]
    assert records and records[-1]["config"] == {"seed": 2}
    assert store.manifest["schema_version"] == schema.SCHEMA_VERSION
    assert {"created", "config", "provenance", "tables"} <= set(store.manifest)
    assert (root / "tables").is_dir() and (root / "logs").is_dir()


def test_open_something_that_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such store"):
        Store.open(tmp_path / "absent")
    (tmp_path / "plain").mkdir()
    with pytest.raises(StoreError, match=r"manifest\.json: not found"):
        Store.open(tmp_path / "plain")
    (tmp_path / "plain" / "notes.txt").write_text("hello")
    with pytest.raises(StoreError, match="not empty and is not a store"):
        Store.create(tmp_path / "plain")


def test_manifest_copy_is_read_only_view(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    view = store.manifest
    view["config"]["x"] = 1
    assert store.manifest["config"] == {}


# --- manifest problems ---------------------------------------------------------------------------


def test_manifest_bad_json_names_the_file(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.manifest_path.write_text('{"schema_version": 1, "created": ')
    with pytest.raises(StoreError) as info:
        Store.open(tmp_path / "s")
    message = str(info.value)
    assert str(store.manifest_path) in message and "not valid JSON" in message


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda m: m.pop("created"), "created"),
        (lambda m: m.pop("schema_version"), "schema_version"),
        (lambda m: m.update(schema_version="1"), "schema_version"),
        (lambda m: m.update(provenance={}), "provenance"),
        (lambda m: m.update(tables=[]), "tables"),
        (lambda m: m.update(format="something-else"), "format"),
        (lambda m: m["tables"].update({"../evil": {"parts": []}}), "tables.'../evil'"),
        (
            lambda m: m["tables"].update({"rewards": {"parts": [{"file": "../../etc/passwd"}]}}),
            "tables.rewards.parts[0].file",
        ),
        (
            lambda m: m["tables"].update(
                {"rewards": {"parts": [{"file": "part-00000001-1-abcdef12.arrow", "rows": "9"}]}}
            ),
            "tables.rewards.parts[0].rows",
        ),
    ],
)
def test_manifest_missing_or_bad_field_is_named(tmp_path: Path, edit: Any, field: str) -> None:
    store = Store.create(tmp_path / "s")
    manifest = json.loads(store.manifest_path.read_text())
    edit(manifest)
    store.manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(StoreError) as info:
        Store.open(tmp_path / "s")
    assert str(store.manifest_path) in str(info.value)
    assert f"field '{field}'" in str(info.value)


def test_manifest_not_an_object_and_newer_schema(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.manifest_path.write_text("[1, 2]")
    with pytest.raises(StoreError, match="must be a JSON object"):
        Store.open(store.path)
    manifest = json.loads(json.dumps(Store.create(tmp_path / "t").manifest))
    manifest["schema_version"] = schema.SCHEMA_VERSION + 1
    (tmp_path / "t" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match=r"field 'schema_version' is \d+, newer than"):
        Store.open(tmp_path / "t")


# --- writing and reading -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(schema.TABLES))
def test_every_table_round_trips(tmp_path: Path, name: str) -> None:
    store = Store.create(tmp_path / "s")
    frame = sample_frame(name)
    store.write(name, frame, stage="unit")
    expected = schema.validate_frame(name, frame)
    got = store.read_arrow(name)
    assert got.schema.equals(schema.spec(name).schema)
    # Rows come back sorted by the keys; the sample keys run n..1, so the order is reversed.
    keys = [(k, "ascending") for k in schema.spec(name).keys]
    assert got.equals(expected.sort_by(keys))
    frame_back = store.read(name)
    assert {c: frame_back[c].dtype for c in frame_back.columns} == pandas_dtypes(name)
    assert store.has(name) and store.tables() == [name]
    assert store.manifest["tables"][name]["rows"] == len(frame)
    assert store.manifest["tables"][name]["stages"] == ["unit"]


def test_missing_table_reads_as_empty_frame_with_schema_dtypes(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    frame = store.read("rollouts")
    assert list(frame.columns) == schema.spec("rollouts").columns
    assert len(frame) == 0
    assert {c: frame[c].dtype for c in frame.columns} == pandas_dtypes("rollouts")
    assert str(frame["k"].dtype) == "Int32" and str(frame["forced"].dtype) == "boolean"
    assert not store.has("rollouts") and store.tables() == []
    assert store.done_keys("rollouts") == set()


def test_dtypes_do_not_depend_on_nulls(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    data = rollouts(["t1", "t2"])
    data["prompt_tokens"] = [10, None, 12, 13]
    data["forced"] = [True, None, False, False]
    store.write("rollouts", data)
    frame = store.read("rollouts")
    assert str(frame["prompt_tokens"].dtype) == "Int32"
    assert frame["prompt_tokens"].isna().sum() == 1
    assert str(frame["forced"].dtype) == "boolean"


def test_validation_error_names_table_row_and_field(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    data = rollouts(["t1", "t2", "t3"], ks=(0,))
    data["k"] = [0, 3, "three"]
    with pytest.raises(schema.SchemaError) as info:
        store.write("rollouts", data)
    assert str(info.value).startswith("table 'rollouts', row 2, field 'k': ")
    assert "'three'" in str(info.value)
    data = rollouts(["t1", "t2"], ks=(0,))
    data.loc[1, "teacher"] = None
    with pytest.raises(schema.SchemaError, match=r"table 'rollouts', row 1, field 'teacher'"):
        store.write("rollouts", data)
    # Nothing was written by the failed attempts.
    assert not store.has("rollouts")
    assert not list((store.path / "tables" / "rollouts").glob(".tmp-*"))


def test_write_rejects_a_key_twice_in_one_frame(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    data = pd.concat(
        [rollouts(["t1", "t2"], ks=(0,)), rollouts(["t1"], ks=(0,))], ignore_index=True
    )
    with pytest.raises(schema.SchemaError) as info:
        store.write("rollouts", data)
    message = str(info.value)
    assert "table 'rollouts', row 2" in message
    assert "rows 0 and 2 have the same key" in message and "'t1'" in message


def test_unknown_table_and_column_are_named(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    with pytest.raises(schema.SchemaError, match="table 'nope': unknown table"):
        store.read("nope")
    with pytest.raises(schema.SchemaError, match="field 'nope': unknown column"):
        store.read("rollouts", columns=["trace_id", "nope"])
    with pytest.raises(schema.SchemaError, match="field 'nope': unknown column in filters"):
        store.read("rollouts", filters={"nope": 1})
    with pytest.raises(schema.SchemaError, match=r"field 'k'.*does not fit int32"):
        store.read("rollouts", filters={"k": "three"})


def test_latest_part_wins_and_rows_are_sorted(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.write("rollouts", rollouts(["t3", "t1"], correct=0.0, status="first"))
    store.write("rollouts", rollouts(["t2", "t1"], correct=1.0, status="second"))
    store.write("rollouts", rollouts(["t1"], ks=(3,), correct=0.5, status="third"))
    frame = store.read("rollouts")
    assert list(zip(frame.trace_id, frame.k, strict=True)) == [
        ("t1", 0), ("t1", 3), ("t2", 0), ("t2", 3), ("t3", 0), ("t3", 3),
    ]  # fmt: skip
    by_key = {
        (t, k): (c, s)
        for t, k, c, s in zip(frame.trace_id, frame.k, frame.correct, frame.status, strict=True)
    }
    assert by_key[("t1", 0)] == (1.0, "second")  # part 2 replaced part 1
    assert by_key[("t1", 3)] == (0.5, "third")  # part 3 replaced part 2
    assert by_key[("t3", 0)] == (0.0, "first")  # never replaced
    # The manifest counts stored rows (before dedupe): 4 + 4 + 1.
    assert store.manifest["tables"]["rollouts"]["rows"] == 9


@pytest.mark.slow
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batches=st.lists(
        st.dictionaries(
            keys=st.tuples(st.sampled_from(["a", "b", "c", "é"]), st.integers(0, 3)),
            values=st.floats(0, 1, allow_nan=False),
            min_size=1,
            max_size=6,
        ),
        min_size=1,
        max_size=5,
    )
)
def test_read_equals_a_last_write_wins_dictionary(
    tmp_path_factory: Any, batches: list[dict]
) -> None:
    store = Store.create(tmp_path_factory.mktemp("prop") / "s")
    model: dict[tuple[str, int], float] = {}
    for batch in batches:
        frame = pd.DataFrame(
            [
                {"trace_id": t, "student": "s", "k": k, "sample": 0, "teacher": "x",
                 "dataset": "d", "problem_id": "p", "m": 3, "correct": c}
                for (t, k), c in batch.items()
            ]
        )  # fmt: skip
        store.write("rollouts", frame)
        model.update(batch)
    got = store.read("rollouts", columns=["trace_id", "k", "correct"])
    expected = sorted((t.encode(), k, c) for (t, k), c in model.items())
    assert [(t.encode(), k, c) for t, k, c in got.itertuples(index=False)] == expected
    assert store.done_keys("rollouts", ["trace_id", "k"]) == set(model)


def test_disjoint_sorted_parts_are_concatenated_in_key_order(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.write("rollouts", rollouts(["t5", "t6"]))
    store.write("rollouts", rollouts(["t1", "t2"]))
    frame = store.read("rollouts")
    assert list(frame.trace_id) == ["t1", "t1", "t2", "t2", "t5", "t5", "t6", "t6"]


def test_filters_equality_isin_null_and_after_dedupe(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.write("rollouts", rollouts(["t1", "t2", "t3"], status="error"))
    store.write("rollouts", rollouts(["t2"], status="ok"))  # t2 fixed by a rerun
    assert set(store.read("rollouts", filters={"trace_id": "t2"}).status) == {"ok"}
    errors = store.read("rollouts", filters={"status": "error"})
    # The superseded t2 'error' rows must not come back through the non-key filter.
    assert sorted(set(errors.trace_id)) == ["t1", "t3"]
    both = store.read("rollouts", filters={"trace_id": ["t1", "t3"], "k": 3})
    assert list(zip(both.trace_id, both.k, strict=True)) == [("t1", 3), ("t3", 3)]
    assert len(store.read("rollouts", filters={"extracted": None})) == 6
    assert len(store.read("rollouts", filters={"trace_id": ("t9",)})) == 0
    assert store.done_keys("rollouts", ["trace_id"], filters={"status": "ok"}) == {("t2",)}


def test_columns_keep_the_order_asked_for(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.write("rollouts", rollouts(["t2", "t1"]))
    frame = store.read("rollouts", columns=["correct", "trace_id"])
    assert list(frame.columns) == ["correct", "trace_id"]
    assert list(frame.trace_id) == ["t1", "t1", "t2", "t2"]


def test_done_keys_full_subset_and_empty(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.write("rollouts", rollouts(["t1"], students=("a", "b")))
    store.write("rollouts", rollouts(["t2"], students=("a",), ks=(0,)))
    assert store.done_keys("rollouts") == {
        ("t1", "a", 0, 0), ("t1", "a", 3, 0), ("t1", "b", 0, 0), ("t1", "b", 3, 0),
        ("t2", "a", 0, 0),
    }  # fmt: skip
    assert store.done_keys("rollouts", ["trace_id", "student"]) == {
        ("t1", "a"),
        ("t1", "b"),
        ("t2", "a"),
    }
    assert store.done_keys("traces") == set()
    key = next(iter(store.done_keys("rollouts")))
    assert all(type(v) in (str, int) for v in key)


# --- crash safety --------------------------------------------------------------------------------


def test_crash_leftovers_are_cleaned_and_an_unlisted_part_is_not_adopted(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.write("rollouts", rollouts(["t1"]))
    manifest_before = store.manifest_path.read_text()
    orphan = store.write("rollouts", rollouts(["t2"]))
    # A part on disk that the manifest does not list. A writer lists its part (as pending)
    # before the rename, so a kill never leaves one (see the pending test below); such a file
    # was put there by hand or forged, and the manifest is what a reader trusts.
    store.manifest_path.write_text(manifest_before)
    folder = orphan.parent
    # A writer that died mid-file (dead pid on this host), one with an unparsable name that is
    # old, and one in flight in this very process (must survive the cleanup).
    half = orphan.read_bytes()[: orphan.stat().st_size // 2]
    from legival_core.store import file_safety

    dead = folder / f".tmp-{file_safety.HOST}-999999999-{'d' * 32}.arrow"
    dead.write_bytes(half)
    stale = folder / ".tmp-crashed-long-ago"
    stale.write_bytes(half)
    old = time.time() - TEMP_MAX_AGE_S - 60
    os.utime(stale, (old, old))
    live = folder / f".tmp-{file_safety.HOST}-{os.getpid()}-{'e' * 32}.arrow"
    live.write_bytes(half)
    root_temp = store.path / f".tmp-{file_safety.HOST}-999999999-{'f' * 32}.json"
    root_temp.write_text("{")

    assert orphan.name not in {p["file"] for p in store.manifest["tables"]["rollouts"]["parts"]}
    assert sorted(set(store.read("rollouts").trace_id)) == ["t1"]
    assert store.done_keys("rollouts", ["trace_id"]) == {("t1",)}
    assert [p.split(": ")[0] for p in store.verify()] == [str(orphan)]

    store.write("rollouts", rollouts(["t3"]))
    listed = [p["file"] for p in store.manifest["tables"]["rollouts"]["parts"]]
    assert orphan.name not in listed and len(listed) == 2  # never adopted by a writer
    assert not dead.exists() and not stale.exists() and not root_temp.exists()
    assert live.exists()
    assert store.manifest["tables"]["rollouts"]["rows"] == 4  # t1 and t3, 2 rows each


def test_crash_before_first_manifest_recovers_parts(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.write(
        "rewards", pd.DataFrame({"trace_id": ["t1"], "reward_model": ["rm"], "score": [0.5]})
    )
    store.manifest_path.unlink()
    recovered = Store.create(tmp_path / "s")
    assert recovered.manifest["tables"]["rewards"]["rows"] == 1
    assert len(recovered.read("rewards")) == 1


_KILLED_WRITER = textwrap.dedent(
    """
    import sys
    import pandas as pd
    from legival_core.store.store import Store
    store = Store.open(sys.argv[1])
    run = sys.argv[2]
    for i in range(100000):
        rows = [
            {"trace_id": f"{run}-t{i:05d}-{j}", "reward_model": "rm", "score": j / 10}
            for j in range(10)
        ]
        store.write("rewards", pd.DataFrame(rows), stage="killed")
    """
)


@pytest.mark.slow
def test_a_writer_killed_at_random_moments_never_breaks_the_store(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    rng = np.random.default_rng(7)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for run in range(3):
        # Each writer writes keys of its own, so the rows read back count every part on disk
        # (a restarted writer rewriting the first writer's keys would be deduplicated by the read).
        before = len(store.parts("rewards")) if store.has("rewards") else 0
        proc = subprocess.Popen(
            [sys.executable, "-c", _KILLED_WRITER, str(store.path), f"run{run}"], env=env
        )
        # Kill only once this writer is really writing (an event, not a guessed start-up time),
        # then at a random moment while it keeps writing parts.
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if store.has("rewards") and len(store.parts("rewards")) > before:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the writer stopped before it was killed"
        assert len(store.parts("rewards")) > before, "the writer wrote no part within 120 s"
        time.sleep(float(rng.uniform(0.0, 0.3)))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert store.verify() == []
        parts = store.parts("rewards")
        frame = store.read("rewards")
        # Every part on disk is complete (10 rows) and every one of its rows is readable.
        assert len(frame) == 10 * len(parts)
        entry = store.manifest["tables"]["rewards"]
        listed = entry["rows"]
        # The manifest lists a part as pending before its file is renamed into place (Store._land):
        # killed between the two, it counts one part whose file is not there (not read; the next
        # writer drops it). Killed after the rename, every part is listed.
        landed = {p.name for p in parts}
        missing = [r for r in entry["parts"] if r.get("pending") and r["file"] not in landed]
        assert len(missing) <= 1
        assert listed == len(frame) + 10 * len(missing)
    store.write(
        "rewards", pd.DataFrame({"trace_id": ["z"], "reward_model": ["rm"], "score": [1.0]})
    )
    assert not list((store.path / "tables" / "rewards").glob(".tmp-*"))
    assert store.manifest["tables"]["rewards"]["rows"] == len(store.read("rewards"))


def test_the_crash_tests_kill_comes_right_after_the_nth_part_of_its_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/kill_after_part.py wraps Store.write for the crash tests (the store has no hook of
    its own): the kill comes after the asked-for part of the asked-for table has landed, once,
    and never for another table."""
    from tests.kill_after_part import install, killed_after_part

    monkeypatch.setattr(Store, "write", Store.write)  # restored after the test
    store = Store.create(tmp_path / "s")
    kills: list[list[str]] = []
    install("rewards", 2, kill=lambda: kills.append(store.parts("rewards")))
    rows = pd.DataFrame({"trace_id": ["t1"], "reward_model": ["rm"], "score": [0.5]})
    store.write("rewards", rows)
    store.write("rollouts", rollouts(["t1"]))
    assert kills == []
    second = store.write("rewards", rows)
    assert kills == [[store.parts("rewards")[0], second]]  # landed, listed: then killed
    store.write("rewards", rows)
    assert len(kills) == 1
    command = [sys.executable, "-m", "precompute", "segment", "--store", "s"]
    wrapped = killed_after_part(command, "steps", 3)
    assert wrapped == [sys.executable, "-m", "tests.kill_after_part", "steps:3", *command[3:]]


# --- corruption ----------------------------------------------------------------------------------


def test_truncated_part_is_reported_skipped_and_quarantined(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.write("rollouts", rollouts(["t1"]))
    bad = store.write("rollouts", rollouts(["t2", "t3"]))
    store.write("rollouts", rollouts(["t4"]))
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])

    problems = store.verify()
    assert len(problems) == 1 and problems[0].startswith(str(bad))
    with pytest.raises(StoreError) as info:
        store.read("rollouts")
    assert str(bad) in str(info.value)
    with pytest.warns(RuntimeWarning, match=bad.name):
        frame = store.read("rollouts", on_corrupt="skip")
    assert sorted(set(frame.trace_id)) == ["t1", "t4"]
    with pytest.warns(RuntimeWarning):
        done = store.done_keys("rollouts", ["trace_id"], on_corrupt="skip")
    assert done == {("t1",), ("t4",)}  # the stage will redo t2 and t3

    moved = store.quarantine_part(bad, reason="truncated")
    assert moved == bad.parent / "corrupt" / bad.name and moved.exists() and not bad.exists()
    assert store.verify() == []
    assert sorted(set(store.read("rollouts").trace_id)) == ["t1", "t4"]
    assert bad.name not in {p["file"] for p in store.manifest["tables"]["rollouts"]["parts"]}
    assert store.manifest["provenance"][-1]["reason"] == "truncated"
    # The redo lands after every earlier part, including the quarantined one's sequence number.
    redo = store.write("rollouts", rollouts(["t2", "t3"]))
    assert redo.name > bad.name
    assert sorted(set(store.read("rollouts").trace_id)) == ["t1", "t2", "t3", "t4"]


def test_quarantine_refuses_files_outside_the_store(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    outside = tmp_path / "part-00000001-1-abcdef12.arrow"
    outside.write_bytes(b"x")
    with pytest.raises(StoreError, match="not a part of the store"):
        store.quarantine_part(outside)


def test_verify_reports_garbage_missing_parts_and_unknown_folders(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    part = store.write(
        "rewards", pd.DataFrame({"trace_id": ["t"], "reward_model": ["r"], "score": [1.0]})
    )
    garbage = part.parent / "part-00000099-1-0123abcd.arrow"
    garbage.write_bytes(b"ARROW1 but not really")
    (store.path / "tables" / "mystery").mkdir()
    stray = part.parent / "notes.txt"
    stray.write_text("x")
    problems = store.verify()
    assert any(p.startswith(str(garbage)) and "not listed in manifest.json" in p for p in problems)
    assert any(p.startswith(str(store.path / "tables" / "mystery")) for p in problems)
    assert any(p.startswith(str(stray)) for p in problems)
    garbage.unlink()
    part.unlink()
    problems = store.verify()
    assert any(p.startswith(str(part)) and "missing on disk" in p for p in problems)


def test_part_with_a_wrong_type_is_reported_by_field(tmp_path: Path) -> None:
    from legival_core.store.parts import write_ipc

    store = Store.create(tmp_path / "s")
    folder = store.path / "tables" / "rewards"
    folder.mkdir(parents=True)
    bad = folder / "part-00000001-1-abcdef12.arrow"
    write_ipc(bad, pa.table({"trace_id": ["t"], "reward_model": ["r"], "score": [[1.0]]}))
    store.adopt(bad)  # listed, so verify decodes it
    problems = store.verify()
    assert len(problems) == 1 and "field 'score'" in problems[0] and str(bad) in problems[0]


def test_part_from_an_older_schema_gets_the_new_columns_as_nulls(tmp_path: Path) -> None:
    from legival_core.store.parts import write_ipc

    store = Store.create(tmp_path / "s")
    folder = store.path / "tables" / "grades"
    folder.mkdir(parents=True)
    # A grades part from an older schema: no 'score' column, and its keys are not sorted.
    old = pa.table({"trace_id": ["t2", "t1"], "correct": [True, False], "status": ["ok", "ok"]})
    write_ipc(folder / "part-00000001-1-abcdef12.arrow", old)
    store.adopt(folder / "part-00000001-1-abcdef12.arrow", reason="an older store's part")
    frame = store.read("grades")
    assert list(frame.trace_id) == ["t1", "t2"]
    assert frame["score"].isna().all() and list(frame.columns) == schema.spec("grades").columns
    assert store.verify() == []
    store.merge("grades")  # an unsorted foreign single part is rewritten
    assert len(store.parts("grades")) == 1 and store.read("grades").equals(frame)


# --- merge, provenance, logs ---------------------------------------------------------------------


def test_merge_compacts_parts_without_changing_what_is_read(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    for i in range(1, 5):
        store.write("rollouts", rollouts([f"t{i}", "t0"], correct=i / 4), stage="rollout")
    before = store.read("rollouts")
    old_parts = store.parts("rollouts")
    store.merge()
    after_parts = store.parts("rollouts")
    assert len(after_parts) == 1 and not any(p.exists() for p in old_parts)
    assert store.read("rollouts").equals(before)
    entry = store.manifest["tables"]["rollouts"]
    assert entry["rows"] == len(before) == 10 and len(entry["parts"]) == 1
    assert before.loc[before.trace_id == "t0", "correct"].eq(1.0).all()  # from the 4th part
    assert entry["stages"] == ["rollout"]
    assert store.manifest["provenance"][-1] == {
        **store.manifest["provenance"][-1],
        "stage": "merge", "table": "rollouts", "parts": 4, "rows": 10,
    }  # fmt: skip
    store.merge()  # nothing to do: one sorted part
    assert store.parts("rollouts") == after_parts
    assert store.verify() == []


@pytest.mark.parametrize(
    ("fan_in", "round_bytes"),
    [(16, 64 * 2**20), (16, 40), (2, 40), (3, 64 * 2**20)],
    ids=["one-pass", "small-rounds", "runs-of-runs", "runs"],
)
def test_merge_holds_a_batch_of_each_part_not_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fan_in: int, round_bytes: int
) -> None:
    """Parts sorted by their keys are merged a record batch of each at a time (a million-trace
    store's tables did not fit in memory whole), more parts than the fan-in through sorted runs
    first: no part and no table is read whole, and the merged part holds what was read before,
    one row per key, the latest part's, in key order, in batches of the usual size; no run is
    left behind."""
    from legival_core.store import parts
    from legival_core.store import store as store_module

    monkeypatch.setattr(parts, "_BATCH_MAX_ROWS", 7)  # parts of many batches
    monkeypatch.setattr(store_module, "MERGE_FAN_IN", fan_in)
    monkeypatch.setattr(store_module, "_MERGE_ROUND_BYTES", round_bytes)
    rng = np.random.default_rng(5)
    store = Store.create(tmp_path / "s")
    written = []
    for part in range(5):
        traces = rng.choice(12, size=5, replace=False)
        frame = pd.DataFrame(
            [
                (f"t{t:02d}", step, 0, 1, f"part {part}", 1)
                for t in traces
                for step in range(int(rng.integers(1, 6)))
            ],
            columns=["trace_id", "step", "start", "end", "text", "tokens"],
        )
        store.write("steps", frame, stage="segment")
        written.append(frame)
    assert max(pa.ipc.open_file(str(p)).num_record_batches for p in store.parts("steps")) > 2
    expected = (
        pd.concat(written, ignore_index=True)
        .drop_duplicates(["trace_id", "step"], keep="last")
        .sort_values(["trace_id", "step"])
        .reset_index(drop=True)
    )
    before = store.read("steps")
    pd.testing.assert_frame_equal(before, expected, check_dtype=False)

    def whole(*args: object, **kwargs: object) -> None:
        raise AssertionError("a part was read whole")

    monkeypatch.setattr(parts, "read_part", whole)
    monkeypatch.setattr(Store, "read_arrow", whole)
    store.merge("steps")
    monkeypatch.undo()
    (merged,) = store.parts("steps")
    assert pa.ipc.open_file(str(merged)).num_record_batches == -(-len(expected) // 7)
    pd.testing.assert_frame_equal(store.read("steps"), before)
    assert store.manifest["tables"]["steps"]["rows"] == len(expected)
    assert store.verify() == []
    assert [f.name for f in merged.parent.iterdir()] == [merged.name]


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(
        st.lists(
            st.tuples(st.sampled_from("abc"), st.integers(0, 6), st.integers(0, 9)),
            max_size=12,
        ),
        max_size=5,
    ),
    batch=st.integers(1, 4),
    round_bytes=st.one_of(st.none(), st.integers(1, 200)),
)
def test_merge_sorted_parts_gives_what_dedupe_and_sort_gives(
    parts: list[list[tuple[str, int, int]]], batch: int, round_bytes: int | None
) -> None:
    """For any parts (sorted by a two-column key, unique within each; several batches each),
    any batch size and any bytes a round: the pieces of merge_sorted_parts, joined, are the rows
    dedupe_and_sort gives for the parts whole, one row per key, the latest part's."""
    from legival_core.store.parts import dedupe_and_sort, merge_sorted_parts

    keys = ["k", "n"]
    tables = []
    for rows in parts:
        unique = {(k, n): v for k, n, v in rows}
        ordered = sorted(unique.items())
        tables.append(
            pa.table(
                {
                    "k": [k for (k, _), _ in ordered],
                    "n": pa.array([n for (_, n), _ in ordered], pa.int64()),
                    "v": pa.array([v for _, v in ordered], pa.int64()),
                }
            )
        )
    batched = [[t.slice(i, batch) for i in range(0, t.num_rows, batch)] for t in tables]
    pieces = list(merge_sorted_parts(batched, keys, round_bytes=round_bytes))
    got = pa.concat_tables(pieces).to_pylist() if pieces else []
    nonempty = [(t, True) for t in tables if t.num_rows]
    expected = dedupe_and_sort(nonempty, keys).to_pylist() if nonempty else []
    assert got == expected
    latest: dict[tuple[str, int], int] = {}
    for rows in parts:  # by hand: the last part's row of each key, in key order
        latest.update({(k, n): v for k, n, v in rows})
    by_hand = [(k, n, v) for (k, n), v in sorted(latest.items())]
    assert [(r["k"], r["n"], r["v"]) for r in got] == by_hand


def test_record_stage_keeps_kwargs_and_versions(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.record_stage(
        "rollout",
        students=["phi-3.5", "llama-1b"],
        sampling={"temperature": 0.0, "max_tokens": 1024},
        seed=np.int64(3),
        out=tmp_path / "x",
        odd={"nan": float("nan"), "set": {2, 1}},
        versions={"vllm": "0.32.0"},
    )
    record = store.manifest["provenance"][-1]
    assert record["stage"] == "rollout" and record["seed"] == 3
    assert record["students"] == ["phi-3.5", "llama-1b"]
    assert record["sampling"] == {"temperature": 0.0, "max_tokens": 1024}
    assert record["out"] == str(tmp_path / "x")
    assert record["odd"] == {"nan": "nan", "set": [1, 2]}
    assert {"python", "pyarrow", "pandas", "legival", "vllm"} <= set(record["versions"])
    assert record["versions"]["pyarrow"] == pa.__version__
    json.loads(store.manifest_path.read_text())  # still strict JSON (no NaN)


def test_log_path_and_stage_names(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    assert store.log_path("rollout") == store.path / "logs" / "rollout.log"
    for bad in ("../escape", "", "a/b"):
        with pytest.raises(ValueError, match="stage name"):
            store.log_path(bad)
    with pytest.raises(ValueError, match="stage name"):
        store.write(
            "rewards",
            pd.DataFrame({"trace_id": ["t"], "reward_model": ["r"], "score": [1.0]}),
            stage="a b",
        )


def test_reading_writes_nothing(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    store.write("rewards", pd.DataFrame({"trace_id": ["t"], "reward_model": ["r"], "score": [1.0]}))
    (store.path / ".lock").unlink()
    before = {p: p.stat().st_mtime_ns for p in store.path.rglob("*")}
    reader = Store.open(store.path)
    reader.read("rewards")
    reader.read("rollouts")
    reader.done_keys("rewards")
    reader.verify()
    assert {p: p.stat().st_mtime_ns for p in store.path.rglob("*")} == before


# --- export --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_round_trips(tmp_path: Path, fmt: str) -> None:
    store = Store.create(tmp_path / "s")
    store.write("rollouts", rollouts(["t2", "t1"]))
    store.write("rollouts", rollouts(["t1"], correct=0.25))
    tricky = rollouts(["t3", "t4"], ks=(0,))
    tricky["completion"] = ['comma, "quote"\nnewline', ""]
    tricky["extracted"] = [None, "=cmd()"]
    tricky["correct"] = [1 / 3, 0.1 + 0.2]
    store.write("rollouts", tricky)
    for name in ("judgments", "problems"):
        store.write(name, sample_frame(name))
    written = store.export(tmp_path / "out", fmt)
    assert [p.name for p in written] == [
        f"{n}.{fmt}" for n in ("judgments", "problems", "rollouts")
    ]
    assert not list((tmp_path / "out").glob(".tmp-*"))
    for path in written:
        assert read_exported(path).equals(store.read_arrow(path.stem)), path.name
    back = read_exported(tmp_path / "out" / f"rollouts.{fmt}").to_pandas()
    assert back.loc[back.trace_id == "t4", "completion"].item() == ""  # empty string, not null
    assert back.loc[back.trace_id == "t3", "extracted"].isna().item()
    assert len(back) == 6 and back.loc[(back.trace_id == "t1"), "correct"].eq(0.25).all()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_every_table_of_the_demo_store_exports_and_reads_back(tmp_path: Path, fmt: str) -> None:
    """The CSV export stopped at ``page_results`` (its payloads are bytes, not UTF-8 text:
    "Invalid UTF8 payload") and left the tables after it unwritten; binary columns now go out
    as base64 text and come back as the same bytes. It also read a long text (large_string:
    CHAMP's wrong-step texts, reasoning) that starts like a formula back with the quote the
    export put in front of it."""
    demo = Store.open(REPO / "results" / "demo")
    written = demo.export(tmp_path / "out", fmt)
    assert sorted(p.stem for p in written) == sorted(demo.tables())
    for path in written:
        assert read_exported(path).equals(demo.read_arrow(path.stem)), path.name


def test_read_exported_names_file_row_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "judgments.csv"
    bad.write_text('"trace_id","labeler","valid","steps"\n"t","lexical",true,"[1, 2"\n')
    with pytest.raises(StoreError, match=r"judgments\.csv: row 0, field 'steps'"):
        read_exported(bad)
    bad = tmp_path / "rewards.csv"
    bad.write_text('"trace_id","reward_model","score"\n"t","rm",\n')
    with pytest.raises(StoreError, match=r"rewards\.csv: table 'rewards', row 0, field 'score'"):
        read_exported(bad)
    bad = tmp_path / "page_results.csv"
    bad.write_text('"name","selection","inputs_stamp","payload"\n"x","[]","s","not base64!"\n')
    with pytest.raises(StoreError, match=r"page_results\.csv: row 0, field 'payload'"):
        read_exported(bad)


# --- concurrency ---------------------------------------------------------------------------------


def _shard_writer(root: str, shard: int, n_parts: int) -> None:
    store = Store.open(root)
    for i in range(n_parts):
        rows = [
            {"trace_id": f"s{shard}-p{i:02d}-r{j}", "reward_model": "rm", "score": shard + j / 10}
            for j in range(5)
        ]
        store.write("rewards", pd.DataFrame(rows), stage=f"shard-{shard}")
        store.record_stage(f"shard-{shard}", part=i)


@pytest.mark.slow
def test_two_processes_writing_the_same_table_lose_nothing(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_shard_writer, args=(str(store.path), s, 20)) for s in (0, 1)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=240)
        assert proc.exitcode == 0
    frame = store.read("rewards")
    assert len(frame) == 2 * 20 * 5 and frame.trace_id.is_unique
    parts = store.parts("rewards")
    assert len(parts) == 40
    seqs = sorted(int(p.name.split("-")[1]) for p in parts)
    assert seqs == list(range(1, 41))
    entry = store.manifest["tables"]["rewards"]
    assert sorted(p["file"] for p in entry["parts"]) == sorted(p.name for p in parts)
    assert entry["rows"] == 200 and sorted(entry["stages"]) == ["shard-0", "shard-1"]
    assert sum(r["stage"].startswith("shard-") for r in store.manifest["provenance"]) == 40
    assert store.verify() == []


# --- benchmark (prints timings; the only assertions are on correctness) --------------------------


@pytest.mark.slow
def test_benchmark_read_two_million_rollouts(tmp_path: Path) -> None:
    n_traces, n_k = 100_000, 20
    n = n_traces * n_k
    trace = np.repeat(np.array([f"t-{i:08x}" for i in range(n_traces)], dtype=object), n_k)
    table = pa.table(
        {
            "trace_id": pa.array(trace, pa.string()),
            "student": pa.array(np.where(np.arange(n) % 2 == 0, "phi", "llama"), pa.string()),
            "k": pa.array(np.tile(np.arange(n_k), n_traces), pa.int32()),
            "sample": pa.array(np.zeros(n, dtype=np.int32)),
            "teacher": pa.array(
                np.repeat(np.array(["qwq", "r1"], dtype=object), n // 2), pa.string()
            ),
            "dataset": pa.array(np.full(n, "math", dtype=object), pa.string()),
            "problem_id": pa.array(trace, pa.string()),
            "m": pa.array(np.full(n, 40, dtype=np.int32)),
            "completion": pa.nulls(n, pa.large_string()),
            "extracted": pa.nulls(n, pa.string()),
            "correct": pa.array(np.random.default_rng(0).random(n)),
            "forced": pa.nulls(n, pa.bool_()),
            "prompt_tokens": pa.nulls(n, pa.int32()),
            "completion_tokens": pa.nulls(n, pa.int32()),
            "status": pa.array(np.full(n, "ok", dtype=object), pa.string()),
            "grader_version": pa.array(np.ones(n, dtype=np.int32)),
            "code_revision": pa.array(np.full(n, "abc1234", dtype=object), pa.string()),
        },
        schema=schema.spec("rollouts").schema,
    )
    store = Store.create(tmp_path / "s")
    t0 = time.perf_counter()
    half = n // 2
    store.write("rollouts", table.slice(0, half))
    store.write("rollouts", table.slice(half))
    t_write = time.perf_counter() - t0
    columns = ["trace_id", "student", "k", "teacher", "correct"]
    t0 = time.perf_counter()
    two_parts = store.read("rollouts", columns=columns)
    t_two = time.perf_counter() - t0
    # Overlapping shards (hash-sharded stages): the slow path with a full sort.
    store.write("rollouts", table.slice(half - 1000, 2000))
    t0 = time.perf_counter()
    overlapping = store.read("rollouts", columns=columns)
    t_overlap = time.perf_counter() - t0
    t0 = time.perf_counter()
    store.merge("rollouts")
    t_merge = time.perf_counter() - t0
    t0 = time.perf_counter()
    merged = store.read("rollouts", columns=columns)
    t_merged = time.perf_counter() - t0
    t0 = time.perf_counter()
    keys = store.done_keys("rollouts")
    t_keys = time.perf_counter() - t0
    print(
        f"\n2M rollouts: write 2 parts {t_write:.2f}s; read 2 disjoint parts {t_two:.2f}s; "
        f"read 3 overlapping parts {t_overlap:.2f}s; merge {t_merge:.2f}s; "
        f"read merged {t_merged:.3f}s; done_keys {t_keys:.2f}s"
    )
    assert len(two_parts) == len(overlapping) == len(merged) == len(keys) == n
    assert merged.equals(overlapping)


# --- a received store stays inside itself (issue 24) ---------------------------------------------


def _rewards(score: float, ids: tuple[str, ...] = ("t1", "t2")) -> pd.DataFrame:
    return pd.DataFrame({"trace_id": list(ids), "reward_model": "rm", "score": score})


def _two_stores(tmp_path: Path) -> tuple[Store, Store]:
    """Our store (scores 0.25) and another one (scores 0.75) to point links at."""
    ours = Store.create(tmp_path / "ours")
    ours.write("rewards", _rewards(0.25))
    other = Store.create(tmp_path / "other")
    other.write("rewards", _rewards(0.75))
    return ours, other


def test_an_unlisted_part_is_never_read_and_verify_names_it(tmp_path: Path) -> None:
    """Issue 24, item 1: a higher-numbered part dropped into a table folder without touching
    the manifest changed every number (the latest part wins) while verify said ok."""
    ours, other = _two_stores(tmp_path)
    manifest_before = ours.manifest_path.read_bytes()
    forged = ours.path / "tables" / "rewards" / "part-99999999-1-0123456789ab.arrow"
    forged.write_bytes(other.parts("rewards")[0].read_bytes())

    assert ours.manifest_path.read_bytes() == manifest_before
    # 0.25 stays 0.25: the forged part's 0.75 is never read, by read or done_keys.
    assert ours.read("rewards")["score"].tolist() == [0.25, 0.25]
    assert ours.parts("rewards") != [] and forged not in ours.parts("rewards")
    problems = ours.verify()
    assert len(problems) == 1 and problems[0].startswith(f"{forged}: not listed in manifest.json")
    moved = ours.quarantine_part(forged, reason="forged")
    assert moved == forged.parent / "corrupt" / forged.name and not forged.exists()
    assert ours.verify() == []


def test_a_linked_part_or_table_folder_is_never_read(tmp_path: Path) -> None:
    """Item 2: a part, or a whole tables/<t> folder, that is a symbolic link into another
    store was read as this store's data; quarantine_part refused the link."""
    ours, other = _two_stores(tmp_path)
    theirs = other.parts("rewards")[0]
    listed = ours.parts("rewards")[0]
    listed.unlink()
    listed.symlink_to(theirs)  # the listed name now points at the other store's part

    with pytest.raises(StoreError, match="symbolic link"):
        ours.read("rewards")
    problems = ours.verify()
    assert any(p.startswith(f"{listed}: is a symbolic link") for p in problems), problems
    moved = ours.quarantine_part(listed, reason="link")
    assert moved.is_symlink() and not os.path.lexists(listed)
    assert theirs.exists() and other.read("rewards")["score"].tolist() == [0.75, 0.75]

    # The whole table folder as a link (its part still listed in our manifest): read refuses,
    # verify names it, quarantine moves the link.
    ours = Store.create(tmp_path / "ours-2")
    ours.write("rewards", _rewards(0.25))
    folder = ours.path / "tables" / "rewards"
    import shutil

    shutil.rmtree(folder)
    folder.symlink_to(other.path / "tables" / "rewards")
    with pytest.raises(StoreError, match="symbolic link"):
        ours.read("rewards")
    assert any(p.startswith(f"{folder}: is a symbolic link") for p in ours.verify())
    moved = ours.quarantine_part(folder, reason="linked folder")
    assert moved.parent == ours.path / "corrupt" and moved.is_symlink()
    assert other.read("rewards")["score"].tolist() == [0.75, 0.75]


def test_links_never_make_a_writer_write_outside_the_store(tmp_path: Path) -> None:
    """Item 3: logs/<stage>.log, tables/<t> and .lock linked outside made run append its log,
    write its parts and create its lock file there; verify said ok."""
    ours, other = _two_stores(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    log = ours.path / "logs" / "segment.log"
    log.symlink_to(outside)
    with pytest.raises(StoreError, match="symbolic link"):
        ours.log_path("segment")
    assert any(p.startswith(f"{log}: is a symbolic link") for p in ours.verify())

    # A table folder linked to the other store: the write is refused, nothing lands there.
    folder = ours.path / "tables" / "grades"
    folder.symlink_to(other.path / "tables" / "rewards", target_is_directory=True)
    before = sorted(p.name for p in (other.path / "tables" / "rewards").iterdir())
    grades = pd.DataFrame({"trace_id": ["t1"], "correct": [True], "score": [1.0], "status": "ok"})
    with pytest.raises(StoreError, match="symbolic link"):
        ours.write("grades", grades)
    assert sorted(p.name for p in (other.path / "tables" / "rewards").iterdir()) == before

    # .lock linked to a file that does not exist yet: the lock is not created there.
    lock_target = tmp_path / "made-by-the-lock"
    (ours.path / ".lock").unlink()
    (ours.path / ".lock").symlink_to(lock_target)
    with pytest.raises(StoreError, match="symbolic link"):
        ours.write("rewards", _rewards(0.5))
    assert not os.path.lexists(lock_target)
    assert outside.read_text() == "mine\n"
    problems = ours.verify()
    lock = ours.path / ".lock"
    assert [p.split(": ", 1)[0] for p in problems] == [str(lock), str(log), str(folder)]
    assert all(": is a symbolic link" in p for p in problems), problems
    for problem in problems:  # in the order verify gives them, as a user would
        ours.quarantine_part(problem.split(": ", 1)[0], reason="link")
    assert ours.verify() == []
    ours.write("rewards", _rewards(0.5))  # the store works again, inside itself
    assert ours.read("rewards")["score"].tolist() == [0.5, 0.5]


def test_a_retired_name_never_deletes_through_a_linked_table_folder(tmp_path: Path) -> None:
    """A received manifest may name any part file as ``retired`` (left behind by a merge, to be
    deleted by the next writer). With the table folder linked to another store, every writer
    deleted the other store's part through the link: a write outside the store."""
    ours, other = _two_stores(tmp_path)
    theirs = other.parts("rewards")[0]
    manifest = json.loads(ours.manifest_path.read_text())
    manifest["tables"]["grades"] = {"rows": 0, "parts": [], "retired": [theirs.name]}
    ours.manifest_path.write_text(json.dumps(manifest))
    (ours.path / "tables" / "grades").symlink_to(theirs.parent, target_is_directory=True)

    ours.write("rewards", _rewards(0.5))  # any writer settles what a killed merge left
    assert theirs.exists(), "a writer deleted a file outside the store"
    assert other.read("rewards")["score"].tolist() == [0.75, 0.75]
    # The entry stays as it was, and verify names the link for quarantine_part.
    assert ours.manifest["tables"]["grades"]["retired"] == [theirs.name]
    assert any(
        p.startswith(f"{ours.path / 'tables' / 'grades'}: is a symbolic link")
        for p in ours.verify()
    )


def test_a_listed_part_or_table_missing_on_disk_can_be_quarantined(tmp_path: Path) -> None:
    """verify names a part (or a whole table folder) the manifest lists but the disk lacks;
    quarantine_part refused it (nothing to move), so a store whose reads all failed on it
    could not be repaired without editing manifest.json by hand. Now the entry is dropped."""
    ours, _ = _two_stores(tmp_path)
    grades = {"trace_id": ["t1"], "correct": [True], "score": [1.0], "status": ["ok"]}
    ours.write("grades", pd.DataFrame(grades))
    (part,) = ours.parts("rewards")
    part.unlink()
    import shutil

    shutil.rmtree(ours.path / "tables" / "grades")
    problems = ours.verify()
    assert [p.split(": ", 1)[0] for p in problems] == [
        str(ours.path / "tables" / "grades"),
        str(part),
    ]
    with pytest.raises(StoreError, match="missing on disk"):
        ours.read("rewards")
    for problem in problems:
        ours.quarantine_part(problem.split(": ", 1)[0], reason="lost")
    assert ours.verify() == []
    assert ours.read("rewards").empty and ours.read("grades").empty
    recorded = [r for r in ours.manifest["provenance"] if r["stage"] == "quarantine"]
    assert [r["path"] for r in recorded] == ["tables/grades", f"tables/rewards/{part.name}"]


_FIFO_PROBE = textwrap.dedent(
    """
    import sys, warnings
    from legival_core.store.store import Store, StoreError
    store = Store.open(sys.argv[1])
    print(len(store.verify()))
    try:
        store.read("rewards")
    except StoreError as error:
        print("refused:", error)
    """
)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_named_like_a_part_blocks_nothing(tmp_path: Path) -> None:
    """Item 4: a FIFO named like a part made verify (and a read-only page) block forever on
    opening it. The probe runs in a child process so that the old code fails the test by
    hanging past the guard instead of hanging the suite."""
    ours, _ = _two_stores(tmp_path)
    listed = ours.parts("rewards")[0]
    listed.unlink()
    os.mkfifo(listed)  # the listed part is now a FIFO
    os.mkfifo(listed.parent / "part-99999999-1-0123456789ab.arrow")  # and an unlisted one
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        probe = subprocess.run(
            [sys.executable, "-c", _FIFO_PROBE, str(ours.path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,  # a hang guard, far above the second or two the probe takes
        )
    except subprocess.TimeoutExpired:
        pytest.fail("verify or read blocked on a FIFO")
    assert probe.returncode == 0, probe.stderr[-2000:]
    count, refusal = probe.stdout.splitlines()
    assert count == "2"  # both FIFOs reported
    assert refusal.startswith(f"refused: {listed}: is a FIFO")


def test_a_deeply_nested_manifest_is_one_store_error(tmp_path: Path) -> None:
    """Item 5: a manifest nested 100,000 levels deep let a RecursionError escape."""
    store = Store.create(tmp_path / "s")
    deep = '{"schema_version": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    store.manifest_path.write_text(deep)
    with pytest.raises(StoreError) as info:
        Store.open(store.path)
    message = str(info.value)
    assert message.startswith(str(store.manifest_path)) and "nested 100001 levels" in message
    # Deep brackets inside a string are text, not nesting: 1 (outer object) + 0.
    from legival_core.store.manifest import json_depth

    assert json_depth('{"note": "' + "[" * 500 + '"}') == 1


def test_a_tables_file_in_place_of_the_folder_is_one_store_error(tmp_path: Path) -> None:
    """Item 5: a store whose tables/ is a file failed with a bare NotADirectoryError."""
    store = Store.create(tmp_path / "s")
    store.write("rewards", _rewards(0.25))
    import shutil

    shutil.rmtree(store.path / "tables")
    (store.path / "tables").write_text("not a folder")
    with pytest.raises(StoreError, match="tables: is a regular file, not a folder"):
        store.read("rewards")
    # One problem, named once: not also every listed table "missing on disk" behind it.
    assert store.verify() == [f"{store.path / 'tables'}: is a file where a folder belongs"]


def test_a_kill_inside_the_manifest_first_write_window_is_finished_by_the_next_writer(
    tmp_path: Path,
) -> None:
    """The two moments a writer can be killed now that the manifest vouches for every part:
    after listing its part as pending and before the rename (the part is not read and the next
    writer drops the entry), and after the rename before clearing the mark (the part is read)."""
    from legival_core.store import file_safety

    store = Store.create(tmp_path / "s")
    store.write("rewards", _rewards(0.25, ("t1",)))
    manifest = json.loads(store.manifest_path.read_text())
    parts = manifest["tables"]["rewards"]["parts"]
    dead_temp = f".tmp-{file_safety.HOST}-999999999-{'d' * 32}.arrow"
    (store.path / "tables" / "rewards" / dead_temp).write_bytes(b"half a part")
    # Killed before the rename: listed as pending, only its temp file on disk.
    parts.append(
        {**parts[0], "file": "part-00000002-999999999-aaaaaaaaaaaa.arrow", "pending": True}
    )
    # Killed after the rename: listed as pending and on disk.
    landed = "part-00000003-999999999-bbbbbbbbbbbb.arrow"
    (store.path / "tables" / "rewards" / landed).write_bytes(store.parts("rewards")[0].read_bytes())
    parts.append({**parts[0], "file": landed, "pending": True, "rows": 1})
    store.manifest_path.write_text(json.dumps(manifest))

    assert [p.name for p in store.parts("rewards")] == [parts[0]["file"], landed]
    assert store.verify() == []
    store.write("rewards", _rewards(0.5, ("t2",)))
    after = store.manifest["tables"]["rewards"]["parts"]
    assert [p["file"] for p in after][:2] == [parts[0]["file"], landed]
    assert not any(p.get("pending") for p in after) and len(after) == 3
    assert not (store.path / "tables" / "rewards" / dead_temp).exists()
    assert store.read("rewards")["score"].tolist() == [0.25, 0.5]


def test_csv_export_neutralises_formulas_and_reads_them_back(tmp_path: Path) -> None:
    """Item 12: Store.export wrote =…, +…, -…, @… cells verbatim (live formulas when the CSV
    is opened in a spreadsheet). They get a leading ' and read_exported takes it off again."""
    store = Store.create(tmp_path / "s")
    hostile = ["=1+1", "+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)", "'quoted", "plain"]
    frame = pd.DataFrame(
        {"trace_id": [f"t{i}" for i in range(6)], "reward_model": hostile, "score": -0.5}
    )
    store.write("rewards", frame)
    (path,) = store.export(tmp_path / "out", fmt="csv")
    import csv

    with open(path, newline="", encoding="utf-8") as handle:
        cells = {row["trace_id"]: row["reward_model"] for row in csv.DictReader(handle)}
    assert cells == {
        "t0": "'=1+1",
        "t1": "'+cmd|' /C calc'!A0",
        "t2": "'-2+3",
        "t3": "'@SUM(1+1)",
        "t4": "''quoted",  # a leading quote is quoted too, so the round trip is exact
        "t5": "plain",
    }
    back = read_exported(path).to_pandas()
    assert back["reward_model"].tolist() == hostile and back["score"].tolist() == [-0.5] * 6


def test_the_apps_csv_downloads_neutralise_formulas(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 12, the app: every table's download button (pages.common.download_csv) wrote the
    frame verbatim. The bytes handed to Streamlit are captured; the number stays a number."""
    from pages import common

    captured: dict[str, bytes] = {}
    monkeypatch.setattr(
        common.st, "download_button", lambda label, data, **kw: captured.setdefault("csv", data)
    )
    frame = pd.DataFrame({"teacher": ['=HYPERLINK("http://e.x","x")', "ok"], "fotu": [-0.5, 1]})
    common.download_csv(frame, "board")
    # Deferred: Streamlit calls ``data`` when the button is clicked, so loading a page
    # never writes a big table's CSV (issue 28: the monitoring page spent 0.2 s on it).
    assert callable(captured["csv"])
    lines = captured["csv"]().decode().splitlines()
    assert lines == ["teacher,fotu", '"\'=HYPERLINK(""http://e.x"",""x"")",-0.5', "ok,1.0"]
