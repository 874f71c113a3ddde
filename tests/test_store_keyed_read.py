"""Tests of the store's keyed read: a filter on a key column decodes only the record batches
that hold its rows, and gives exactly the rows (and order) of a full read filtered after.

Batch counts come from :func:`legival_core.store.parts.read_stats`, never from timings."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from legival_core.store import parts, schema
from legival_core.store.frames import to_pandas
from legival_core.store.parts import read_stats
from legival_core.store.store import Store, StoreError

#: Rows per record batch in these tests (the store's default is 131,072).
BATCH = 20
TRACES = 30
STEPS = 7

HOSTILE = [
    "",
    "\x00",
    "t05\x00",
    "t05 ",
    " t05",
    "T05",
    "é",
    "🙂",
    "'; DROP TABLE steps; --",
    "*",
    "t0" + "9" * 5000,
    "\uffff",
]


def trace_name(i: int) -> str:
    return f"t{i:02d}"


def steps_frame(traces: list[str], *, text: str = "step") -> pd.DataFrame:
    rows = [
        {
            "trace_id": t,
            "step": s,
            "start": 10 * s,
            "end": 10 * s + 9,
            "text": f"{text} {s} of {t}",
            "tokens": s + 1,
        }
        for t in traces
        for s in range(1, STEPS + 1)
    ]
    return pd.DataFrame(rows)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts written with BATCH rows per record batch, so a small table has many batches."""
    monkeypatch.setattr(parts, "_BATCH_MAX_ROWS", BATCH)


def sorted_store(tmp_path: Path) -> Store:
    store = Store.create(tmp_path / "s")
    store.write("steps", steps_frame([trace_name(i) for i in range(TRACES)]), stage="segment")
    return store


def unsorted_part(store: Store, frame: pd.DataFrame, name: str) -> Path:
    """A hand-made part of ``steps`` with shuffled rows and no sorted flag, in BATCH-row
    batches, listed with :meth:`Store.adopt` (as a part from an older writer would be)."""
    folder = store.path / "tables" / "steps"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    shuffled = frame.sample(frac=1.0, random_state=7).reset_index(drop=True)
    table = pa.Table.from_pandas(shuffled, schema=schema.spec("steps").schema, preserve_index=False)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=BATCH)
    store.adopt(path, reason="test: an unsorted part")
    return path


def reference(store: Store, table: str, filters: dict[str, Any]) -> pa.Table:
    """What a filtered read gave before keyed reads: every row read, then filtered."""
    full = store.read_arrow(table)
    mask = None
    for column, wanted in filters.items():
        values = wanted if isinstance(wanted, list | tuple | set) else [wanted]
        term = pc.is_in(full.column(column), pa.array(list(values), full.schema.field(column).type))
        mask = term if mask is None else pc.and_(mask, term)
    return full.filter(mask)


def decoded(action: Any) -> tuple[Any, int, int]:
    """``action()``'s result, and the batches (asked-for columns, key columns) it decoded."""
    before = read_stats()
    result = action()
    after = read_stats()
    return result, after.batches - before.batches, after.key_batches - before.key_batches


def part_batches(path: Path) -> int:
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).num_record_batches


# --- how much is decoded ---------------------------------------------------------------------


def test_keyed_read_decodes_only_the_batches_holding_the_key(
    tmp_path: Path, small_batches: None
) -> None:
    store = sorted_store(tmp_path)
    (part,) = store.parts("steps")
    batches = part_batches(part)
    assert batches == TRACES * STEPS // BATCH + 1  # many batches, as the test needs
    for i in range(TRACES):
        wanted = trace_name(i)
        got, full, keys = decoded(
            lambda wanted=wanted: store.read_arrow("steps", filters={"trace_id": wanted})
        )
        assert got.equals(reference(store, "steps", {"trace_id": wanted}))
        assert got.num_rows == STEPS
        assert full <= 2, f"{wanted}: decoded {full} of {batches} batches"  # 7 rows: 1 or 2
        # a binary search over the sorted part: far fewer key decodes than batches
        assert keys <= 2 * batches.bit_length() + 2, (wanted, keys, batches)


def test_a_missing_key_decodes_no_batch_of_a_sorted_part(
    tmp_path: Path, small_batches: None
) -> None:
    store = sorted_store(tmp_path)
    for missing in ["a", "t05x", "t15a", "zzz", *HOSTILE]:
        got, full, _ = decoded(
            lambda missing=missing: store.read("steps", filters={"trace_id": missing})
        )
        assert full == 0, missing
        assert got.empty and list(got.columns) == schema.spec("steps").columns
        assert dict(got.dtypes) == dict(store.read("steps").dtypes)


def test_an_unsorted_part_decodes_only_its_matching_batches(
    tmp_path: Path, small_batches: None
) -> None:
    store = Store.create(tmp_path / "s")
    part = unsorted_part(
        store, steps_frame([trace_name(i) for i in range(TRACES)]), "part-00000001-1-abcdef12.arrow"
    )
    batches = part_batches(part)
    wanted = trace_name(11)
    got, full, keys = decoded(lambda: store.read_arrow("steps", filters={"trace_id": wanted}))
    assert got.equals(reference(store, "steps", {"trace_id": wanted}))
    assert list(got.column("step").to_pylist()) == list(range(1, STEPS + 1))  # sorted by keys
    holding = sum(
        wanted in pa.ipc.open_file(pa.memory_map(str(part))).get_batch(i)["trace_id"].to_pylist()
        for i in range(batches)
    )
    assert keys == batches  # no order to search: every batch's keys are looked at
    assert full == holding < batches


# --- the same rows as a full read filtered after ----------------------------------------------


@pytest.mark.parametrize(
    "filters",
    [
        {"trace_id": "t00"},
        {"trace_id": "t29"},
        {"trace_id": "t14"},
        {"trace_id": ["t29", "t00", "t14"]},
        {"trace_id": ("t03", "nope")},
        {"trace_id": []},
        {"step": 3},
        {"trace_id": "t07", "step": [1, 7]},
        {"trace_id": HOSTILE},
    ],
)
def test_keyed_read_equals_full_read_then_filter(
    tmp_path: Path, small_batches: None, filters: dict[str, Any]
) -> None:
    store = sorted_store(tmp_path)
    unsorted_part(
        store,
        steps_frame([trace_name(i) for i in range(5, 40, 3)], text="newer"),
        "part-00000002-1-abcdef12.arrow",
    )  # overlapping keys: the newer part's rows win
    store.write("steps", steps_frame(["t14", "t16", "t50"], text="newest"), stage="segment")
    got = store.read_arrow("steps", filters=filters)
    assert got.equals(reference(store, "steps", filters))
    assert store.read("steps", filters=filters).equals(
        to_pandas(reference(store, "steps", filters))
    )


def test_the_latest_part_wins_in_a_keyed_read(tmp_path: Path, small_batches: None) -> None:
    store = sorted_store(tmp_path)
    store.write("steps", steps_frame(["t14"], text="newer"), stage="segment")
    got = store.read("steps", filters={"trace_id": "t14"})
    assert got["text"].str.startswith("newer").all() and len(got) == STEPS


def test_hostile_key_values_are_stored_and_read_by_key(tmp_path: Path, small_batches: None) -> None:
    store = Store.create(tmp_path / "s")
    names = [name for name in HOSTILE if name] + [trace_name(i) for i in range(10)]
    store.write("steps", steps_frame(names), stage="segment")
    for name in [*HOSTILE, "t05"]:
        got = store.read_arrow("steps", filters={"trace_id": name})
        assert got.equals(reference(store, "steps", {"trace_id": name}))
        assert got.num_rows == (STEPS if name else 0)
        assert set(got.column("trace_id").to_pylist()) <= {name}


def test_rollouts_filtered_by_key_and_column(tmp_path: Path, small_batches: None) -> None:
    """A key term finds the batches; a term on another column still applies after the
    deduplication (a superseded row must not match in place of its replacement)."""
    store = Store.create(tmp_path / "s")
    rows = [
        {
            "trace_id": trace_name(t),
            "student": f"s{s}",
            "k": k,
            "sample": 0,
            "teacher": "T",
            "dataset": "D",
            "problem_id": f"p{t}",
            "m": 5,
            "correct": float(k % 2),
        }
        for t in range(12)
        for s in range(2)
        for k in range(6)
    ]
    store.write("rollouts", pd.DataFrame(rows), stage="rollout")
    newer = [{**r, "correct": 1.0 - r["correct"]} for r in rows if r["trace_id"] == "t04"]
    store.write("rollouts", pd.DataFrame(newer), stage="rollout")
    for filters in (
        {"trace_id": "t04"},
        {"trace_id": "t04", "correct": 1.0},
        {"trace_id": ["t04", "t11"], "student": "s1"},
    ):
        expected = reference(store, "rollouts", filters)
        assert store.read_arrow("rollouts", filters=filters).equals(expected), filters


# --- errors a full read reports are still reported --------------------------------------------


def test_a_part_missing_its_key_column_is_reported_by_a_keyed_read(
    tmp_path: Path, small_batches: None
) -> None:
    store = Store.create(tmp_path / "s")
    folder = store.path / "tables" / "steps"
    folder.mkdir(parents=True)
    bad = folder / "part-00000001-1-abcdef12.arrow"
    table = pa.table({"trace_id": [f"t{i}" for i in range(50)], "text": ["x"] * 50})
    with pa.OSFile(str(bad), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=BATCH)
    store.adopt(bad)
    with pytest.raises(StoreError, match="key field 'step' is missing"):
        store.read("steps", filters={"trace_id": "nowhere"})


def test_a_truncated_part_is_reported_by_a_keyed_read(tmp_path: Path, small_batches: None) -> None:
    store = sorted_store(tmp_path)
    (part,) = store.parts("steps")
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    with pytest.raises(StoreError, match="not a readable Arrow IPC file"):
        store.read("steps", filters={"trace_id": "t03"})
    with pytest.warns(RuntimeWarning, match="skipping unreadable part"):
        assert store.read("steps", filters={"trace_id": "t03"}, on_corrupt="skip").empty


def mapped_resident_bytes(path: Path) -> int:
    """The bytes of ``path``'s mappings resident in this process (Linux's smaps)."""
    resident, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5:  # a mapping's header line
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            resident += int(head[1]) * 1024
    return resident


def test_a_scan_holds_one_batch_of_a_part_resident_not_every_page_read(
    tmp_path: Path, small_batches: None
) -> None:
    # 210 steps of 16 KiB hex text in batches of 20 rows: a 1.7 MB part (compressed), 11 batches.
    # A pass over it touches every page; held resident until the file is closed, they made a
    # ten-million-trace store's split hold 6.7 GB of pages it had finished with.
    store = Store.create(tmp_path / "s")
    frame = steps_frame([trace_name(i) for i in range(TRACES)])
    noise = random.Random(0)  # text that does not compress away: parts are compressed
    frame["text"] = [noise.randbytes(8_192).hex() for _ in range(len(frame))]
    store.write("steps", frame, stage="segment")
    (part,) = (tmp_path / "s" / "tables" / "steps").glob("*.arrow")
    size = part.stat().st_size
    assert size > 1_500_000
    seen, rows = [], 0
    for _, batches, _ in store.scan("steps", ["text"]):
        for batch in batches:
            rows += batch.num_rows
            seen.append(mapped_resident_bytes(part))
    assert rows == TRACES * STEPS and len(seen) == 11
    # the mapping is alive at every batch (so the numbers measure it) ...
    assert min(seen) > 0
    # ... and holds about the batch being read (with the pages the kernel maps around it),
    # never the whole part: with every page kept, the last batches saw all of it
    assert max(seen) < size / 2, (seen, size)
    # what was read stays right after its pages are let go
    back = store.read("steps", ["trace_id", "step", "text"])
    assert back["text"].tolist() == frame["text"].tolist()


# --- the inspector's trace list ----------------------------------------------------------------


def test_rows_per_counts_the_rows_a_read_gives(tmp_path: Path, small_batches: None) -> None:
    store = sorted_store(tmp_path)
    unsorted_part(
        store,
        steps_frame([trace_name(i) for i in range(25, 35)]),
        "part-00000002-1-abcdef12.arrow",
    )  # overlaps the first part's last traces: each (trace, step) is counted once
    expected = store.read("steps", ["trace_id"])["trace_id"].astype(str).value_counts()
    got = store.rows_per("steps", "trace_id")
    assert got.sort_index().equals(expected.sort_index())
    assert got.name == "count" and got.index.name == "trace_id" and got.sum() == 35 * STEPS
    assert store.rows_per("steps", "step").to_dict() == dict.fromkeys(range(1, STEPS + 1), 35)
    assert Store.create(tmp_path / "empty").rows_per("steps", "trace_id").empty
    with pytest.raises(schema.SchemaError):
        store.rows_per("steps", "nope")


def old_trace_choices(store: Store) -> pd.DataFrame:
    """The inspector's trace list as the page assembled it before ``store_trace_choices``."""
    from legival_core import views

    traces = store.read(
        "traces", ["trace_id", "problem_id", "dataset", "teacher", "sample", "tokens"]
    )
    grades = store.read("grades", ["trace_id", "correct"]) if store.has("grades") else None
    transfer = store.read("trace_transfer") if store.has("trace_transfer") else None
    per_trace = store.read("steps", ["trace_id"])["trace_id"].astype(str).value_counts()
    return views.trace_choices(traces, grades, transfer, per_trace)


def test_store_trace_choices_equal_the_old_assembly_on_the_demo() -> None:
    from legival_core import views

    demo = Store.open(Path(__file__).resolve().parents[1] / "results" / "demo")
    got = views.store_trace_choices(demo)
    pd.testing.assert_frame_equal(got, old_trace_choices(demo))
    assert len(got) and got["m"].notna().all()
