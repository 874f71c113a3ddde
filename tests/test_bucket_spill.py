"""The metrics stage's per-row inputs split into buckets in one pass (precompute.bucket_spill)
give every bucket exactly the rows the store's keyed read gives: the latest part winning per
key, sorted by the keys, the same dtypes; an unreadable part is named; the scratch goes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.store.errors import StoreError
from legival_core.store.file_safety import HOST
from legival_core.store.store import Store
from precompute import bucket_spill
from precompute.bucket_spill import spilled_bucket_reader
from precompute.stages import metrics as stage

DEMO = Path(__file__).resolve().parents[1] / "results" / "demo"
CHUNKS = 7


def _store(tmp_path: Path) -> Store:
    shutil.copytree(DEMO, tmp_path / "demo")
    return Store.open(tmp_path / "demo")


def _buckets(store: Store) -> pd.Series:
    traces = store.read("traces", ["trace_id", "problem_id"])
    buckets = stage.problem_buckets(traces["problem_id"], CHUNKS)
    return pd.Series(buckets, index=traces["trace_id"].astype(str).to_numpy())


def _ids(bucket_of_trace: pd.Series, bucket: int) -> list[str]:
    return bucket_of_trace.index[bucket_of_trace.to_numpy() == bucket].tolist()


# one flush size in the fast lane; the other two in the full lane (a few seconds each)
@pytest.mark.parametrize(
    "pending_bytes",
    [
        1,
        pytest.param(50_000, marks=pytest.mark.slow),
        pytest.param(bucket_spill.PENDING_BYTES, marks=pytest.mark.slow),
    ],
)
def test_every_bucket_gets_the_keyed_reads_rows_with_a_later_part_winning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pending_bytes: int
) -> None:
    """Whether the split writes a bucket's rows after every batch read, after a few or once."""
    monkeypatch.setattr(bucket_spill, "PENDING_BYTES", pending_bytes)
    store = _store(tmp_path)
    # a later part replaces some rows (the store's "latest part wins per key") and adds rows of
    # a trace that is not in ``traces`` (no bucket's: a keyed read of a bucket never sees them)
    similarity = store.read("similarity")
    later = similarity.iloc[::50].copy()
    later["max_similarity"] = 0.123
    stranger = similarity.iloc[:3].copy()
    stranger["trace_id"] = "not-a-trace"
    store.write("similarity", pd.concat([later, stranger], ignore_index=True), stage="test")
    bucket_of_trace = _buckets(store)
    keyed = stage.store_bucket_reader(store)
    replaced = 0
    with spilled_bucket_reader(store, bucket_of_trace, stage.BUCKET_COLUMNS, keyed) as read:
        for bucket in sorted(set(bucket_of_trace.tolist())):
            ids = _ids(bucket_of_trace, bucket)
            for table in stage.BUCKET_COLUMNS:
                got, expected = read(table, ids), keyed(table, ids)
                pd.testing.assert_frame_equal(got, expected, check_exact=True)
                if table == "similarity":
                    replaced += int((got["max_similarity"] == 0.123).sum())
    assert replaced == len(later)  # every replaced row came from the later part


@pytest.mark.slow
def test_a_bucket_s_files_read_in_another_process_give_the_keyed_reads_rows(
    tmp_path: Path,
) -> None:
    """``--engine processes``: a worker reads its bucket from the scratch files named in a
    pickled :class:`BucketFiles` and gets what the keyed read gives, for every table the stage
    reads by bucket: a later part winning, a table absent from the store (the robustness
    report's, not run on the demo), and a bucket with no rows of a table."""
    import pickle

    store = _store(tmp_path)
    similarity = store.read("similarity")
    later = similarity.iloc[::50].copy()
    later["max_similarity"] = 0.123
    store.write("similarity", later, stage="test")
    # a bucket of its own for two traces without rollouts: it has no rows of that table
    bucket_of_trace = _buckets(store)
    rolled = set(store.read("rollouts", ["trace_id"])["trace_id"].astype(str))
    unrolled = [one for one in bucket_of_trace.index if one not in rolled][:2]
    assert len(unrolled) == 2
    bucket_of_trace[unrolled] = CHUNKS
    keyed = stage.store_bucket_reader(store)
    assert keyed("rollouts", unrolled).empty
    # a table the store lacks: the keyed read's frame for it, whatever the ids
    absent = "step_importance"  # a known table the demo has no rows of
    assert not store.has(absent)
    columns = {**stage.BUCKET_READS, absent: ("trace_id",)}
    lacking = pd.DataFrame({"trace_id": pd.Series([], dtype="str")})

    def keyed_or_lacking(table: str, ids: list[str]) -> pd.DataFrame:
        return lacking if table == absent else keyed(table, ids)

    replaced = 0
    with spilled_bucket_reader(store, bucket_of_trace, columns, keyed_or_lacking) as read:
        for bucket in sorted(set(bucket_of_trace.tolist())):
            files = pickle.loads(pickle.dumps(read.files_of(bucket)))
            ids = _ids(bucket_of_trace, bucket)
            for table in columns:
                got, expected = files.read(table), keyed_or_lacking(table, ids)
                pd.testing.assert_frame_equal(got, expected, check_exact=True)
                if table == "similarity":
                    replaced += int((got["max_similarity"] == 0.123).sum())
    assert replaced == len(later)


@pytest.mark.slow
def test_other_requests_are_the_keyed_read(tmp_path: Path) -> None:
    """Traces of two buckets, part of a bucket, none: the reader hands them to the keyed read
    (and never splits a table for them)."""
    store = _store(tmp_path)
    bucket_of_trace = _buckets(store)
    keyed = stage.store_bucket_reader(store)
    asked: list[int] = []

    def counting(table: str, ids: list[str]) -> pd.DataFrame:
        asked.append(len(ids))
        return keyed(table, ids)

    two = _ids(bucket_of_trace, 0)[:2] + _ids(bucket_of_trace, 1)[:2]
    first = _ids(bucket_of_trace, 0)
    # as many ids as the bucket holds, but one unknown or one of another bucket
    unknown = [*first[:-1], "no-such-trace"]
    mixed = first[:-1] + _ids(bucket_of_trace, 1)[:1]
    with spilled_bucket_reader(store, bucket_of_trace, stage.BUCKET_COLUMNS, counting) as read:
        for ids in (two, first[:-1], [], unknown, mixed):
            pd.testing.assert_frame_equal(read("rollouts", ids), keyed("rollouts", ids))
    assert asked == [4, len(first) - 1, 0, len(first), len(first)]


def test_an_unreadable_part_is_named_and_the_scratch_is_removed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    bucket_of_trace = _buckets(store)
    part = store.parts("rollouts")[0]
    part.write_bytes(part.read_bytes()[:100])  # truncated
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    keyed = stage.store_bucket_reader(store)
    with (
        pytest.raises(StoreError, match=part.name),
        spilled_bucket_reader(
            store, bucket_of_trace, stage.BUCKET_COLUMNS, keyed, folder=scratch
        ) as read,
    ):
        read("rollouts", _ids(bucket_of_trace, 0))
    assert list(scratch.iterdir()) == []


def test_a_bucket_read_does_not_convert_the_traces_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request is looked up without converting the traces' index (one string per trace in
    the store) on every read, which made each bucket's reads grow with the store (a bucket of
    60k traces read in ~2.5 s at a million traces, ~7 s at ten million), and without the
    index's hash table held for the whole stage."""
    store = _store(tmp_path)
    bucket_of_trace = _buckets(store)
    whole = len(bucket_of_trace)
    converted: list[str] = []
    looked_up: list[int] = []
    astype, positions = pd.Index.astype, bucket_spill.IdPositions.positions

    def counting_astype(self: pd.Index, dtype: object, copy: bool = True) -> pd.Index:
        if len(self) == whole:
            converted.append(str(dtype))
        return astype(self, dtype, copy=copy)

    def counting_positions(self: bucket_spill.IdPositions, wanted: Any) -> Any:
        looked_up.append(len(wanted))
        return positions(self, wanted)

    keyed = stage.store_bucket_reader(store)
    buckets = sorted(set(bucket_of_trace.tolist()))
    with spilled_bucket_reader(store, bucket_of_trace, stage.BUCKET_COLUMNS, keyed) as read:
        monkeypatch.setattr(pd.Index, "astype", counting_astype)
        for table in stage.BUCKET_COLUMNS:  # every table split (the split looks ids up too)
            read(table, _ids(bucket_of_trace, buckets[-1]))
        monkeypatch.setattr(bucket_spill.IdPositions, "positions", counting_positions)
        for bucket in buckets:
            for table in stage.BUCKET_COLUMNS:
                read(table, _ids(bucket_of_trace, bucket))
    assert converted == []
    # nor is the index's own hash table built (1.3 GB at ten million traces: one Python
    # string per trace), by the split or the reads (precompute.bucket_spill.IdPositions)
    assert "_engine" not in bucket_of_trace.index._cache
    # a bucket's tables are asked for with the same ids: looked up once a bucket
    assert looked_up == [len(_ids(bucket_of_trace, bucket)) for bucket in buckets]


def test_an_id_that_is_not_text_goes_to_the_keyed_read(tmp_path: Path) -> None:
    """A trace id ``"5"`` is not the number 5: a request naming 5 is not the bucket of "5"."""
    store = _store(tmp_path)
    bucket_of_trace = pd.Series([0, 0], index=pd.Index(["5", "6"]).astype(str))
    asked: list[list[object]] = []

    def keyed(table: str, ids: list[object]) -> pd.DataFrame:
        asked.append(list(ids))
        return stage.store_bucket_reader(store)(table, [str(i) for i in ids])

    with spilled_bucket_reader(store, bucket_of_trace, stage.BUCKET_COLUMNS, keyed) as read:
        read("rollouts", [5, "6"])
        read("rollouts", [None, "6"])
    assert asked == [[5, "6"], [None, "6"]]


_KILLED_READER = """
import os, signal, sys
import pandas as pd
from legival_core.store.store import Store
from precompute.bucket_spill import spilled_bucket_reader
from precompute.stages import metrics as stage

store = Store.open(sys.argv[1])
traces = store.read("traces", ["trace_id", "problem_id"])
buckets = stage.problem_buckets(traces["problem_id"], 7)
bucket_of_trace = pd.Series(buckets, index=traces["trace_id"].astype(str).to_numpy())
ids = bucket_of_trace.index[bucket_of_trace.to_numpy() == bucket_of_trace.iloc[0]].tolist()
keyed = stage.store_bucket_reader(store)
with spilled_bucket_reader(store, bucket_of_trace, stage.BUCKET_COLUMNS, keyed,
                           folder=sys.argv[2]) as read:
    read("similarity", ids)
    os.kill(os.getpid(), signal.SIGKILL)  # killed mid-stage: no exit handler runs
"""


def test_a_killed_stages_scratch_is_removed_by_the_next_reader(tmp_path: Path) -> None:
    """A SIGKILL'd stage cannot remove its scratch (at ten million traces about 11 GB); the
    next reader removes the scratch of a process of this host that is gone, and keeps a live
    process's and another host's."""
    store = _store(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_READER, str(store.path), str(scratch)],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = list(scratch.iterdir())
    assert len(left) == 1 and any(left[0].iterdir())  # the killed reader's split files
    # a live process's scratch (this one's, a reader open elsewhere in it) and another host's
    live = scratch / f"legival-buckets-{HOST}-{os.getpid()}-0123abcd"
    foreign = scratch / f"legival-buckets-{HOST}x-{killed_pid(left[0])}-0123abcd"
    for folder in (live, foreign):
        folder.mkdir()
        (folder / "similarity-0.arrow").write_bytes(b"rows")
    bucket_of_trace = _buckets(store)
    keyed = stage.store_bucket_reader(store)
    with spilled_bucket_reader(store, bucket_of_trace, stage.BUCKET_COLUMNS, keyed, folder=scratch):
        assert not left[0].exists()
        assert live.exists() and foreign.exists()
    assert sorted(p.name for p in scratch.iterdir()) == sorted([live.name, foreign.name])


def killed_pid(folder: Path) -> str:
    """The process id in a scratch folder's name (``legival-buckets-<host>-<pid>-<uid>``)."""
    return folder.name.rsplit("-", 2)[-2]


@settings(max_examples=60, deadline=None)
@given(
    ids=st.lists(st.text(min_size=0, max_size=6), unique=True, max_size=40),
    others=st.lists(st.text(min_size=0, max_size=6), max_size=20),
    picks=st.lists(st.integers(0, 1000), max_size=20),
)
def test_id_positions_are_pandas_get_indexer(
    ids: list[str], others: list[str], picks: list[int]
) -> None:
    """Every id's position, -1 for one that is absent; repeated, empty and non-ASCII ids too."""
    wanted = [ids[p % len(ids)] for p in picks] if ids else []
    wanted += others
    index = pd.Index(ids, dtype="str")
    expected = index.get_indexer(pd.Index(wanted, dtype="str")).tolist()
    assert bucket_spill.IdPositions(index).positions(wanted).tolist() == expected


def test_ids_sharing_a_hash_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """A query sharing a hash with an id but not its text is absent; ids sharing a hash among
    themselves still get their own positions (pandas' lookup then)."""
    ids = pd.Index([f"trace-{i}" for i in range(50)], dtype="str")
    few = bucket_spill._text_hashes

    def colliding(values: np.ndarray) -> Any:  # 50 ids, 3 hashes: every id shares one
        return few(values) % 3

    lookup = bucket_spill.IdPositions(ids)  # built with the real hashes
    monkeypatch.setattr(bucket_spill, "_text_hashes", colliding)
    shared = bucket_spill.IdPositions(ids)
    assert shared._index is not None  # the ids share hashes: pandas' table
    wanted = ["trace-7", "nope", "trace-49", "trace-0"]
    assert shared.positions(wanted).tolist() == [7, -1, 49, 0]
    # every query now shares a hash with some id: a hash alone must not be taken for the id
    lookup._hashes = np.sort(lookup._hashes % 3)
    assert set(lookup.positions(["nope", "also-not"]).tolist()) == {-1}
