"""The metrics stage reads its per-row inputs one bucket of problems at a time (issue 43,
items 3-4).

``similarity``, ``judgments`` and ``rollouts`` (19M and 37M rows at a million traces) are read
from the store by each bucket's trace ids, never whole, so the stage holds one bucket's rows of
them. These tests check that the tables written equal the whole-read computation for 1, 7 and
64 buckets, that no unfiltered read of those tables happens before the per-trace tables are
written, the streamed distinct keys the input check uses, and the memory budget's rule.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from legival_core.store.store import Store, StoreError
from precompute.cli import EXIT_CONFIG, EXIT_USAGE, main
from precompute.config import ConfigError, ExperimentConfig
from precompute.stages import StageContext, run_stage
from precompute.stages import metrics as stage
from precompute.stages.base import StageError
from tests.demo_runs import BUCKET_COUNTS, demo_after_metrics, metrics_config
from tests.store_spy import StoreRead, spy_on_reads

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "results" / "demo"
PER_ROW = ("similarity", "judgments", "rollouts")


def _copy(target: Path) -> Store:
    shutil.copytree(DEMO, target)
    return Store.open(target)


def _run_metrics(
    store: Store, chunks: int, monkeypatch: pytest.MonkeyPatch | None = None
) -> set[str]:
    """Run the metrics stage on ``store`` in ``chunks`` buckets, take the test's spies off
    (``monkeypatch``) before anything is checked, and give the names of the page results the
    run stored."""
    try:
        run_stage(
            "metrics", StageContext(store=store, config=metrics_config(chunks), progress=False)
        )
    finally:
        if monkeypatch is not None:
            monkeypatch.undo()
    return set(store.read("page_results", ["name"])["name"])


def _whole_inputs(
    store: Store, config: ExperimentConfig
) -> tuple[dict[str, pd.DataFrame], stage.ChunkSettings]:
    """Every input of the chunk function read whole (one chunk), and its settings."""
    cfg = config.metrics
    labeler = stage.primary_labeler(StageContext(store=store, config=config, progress=False))
    traces = store.read("traces", list(stage.METRICS_TRACE_COLUMNS))
    counts = store.read("trace_counts", list(stage.COUNT_COLUMNS))
    rollouts = store.read("rollouts", list(stage.METRICS_ROLLOUT_COLUMNS))
    leaks = store.read("answer_leaks", ["trace_id", "leak_k"])
    leaks = leaks[leaks["trace_id"].isin(set(rollouts["trace_id"]))].reset_index(drop=True)
    leaks["leak_k"] = leaks["leak_k"].astype("Int64")
    inputs = {
        "traces": traces,
        "counts": counts[counts["encoding"] == cfg.encoding],
        "grades": store.read("grades", ["trace_id", "correct"]),
        "similarity": store.read("similarity", ["trace_id", "step", "max_similarity"]),
        "judgments": store.read("judgments", ["trace_id", "labeler", "steps", "valid"]),
        "rollouts": rollouts,
        "leaks": leaks,
    }
    return inputs, stage.ChunkSettings(cfg.threshold, labeler, cfg.profile, cfg.grid)


def _whole_read_tables(store: Store, config: ExperimentConfig) -> tuple[pd.DataFrame, ...]:
    """``trace_efficiency``, ``trace_transfer`` and ``teacher_metrics`` as the stage computed
    them before it read by bucket: every input read whole, one chunk."""
    from legival_core.metrics.teacher_partials import teacher_rows

    chunk = stage.metrics_chunk(*_whole_inputs(store, config))
    efficiency, transfer, partials = chunk.efficiency, chunk.transfer, chunk.partials
    assert transfer is not None
    return efficiency, transfer, teacher_rows(partials)


def test_a_chunk_sends_back_rows_not_resampled_sums(tmp_path: Path) -> None:
    """What a chunk gives back (from a Ray worker: what crosses the object store) grows with
    its rows, not with the resamples: the board's and the bands' sums are weighed where the
    chunks are merged (``resampled()``), where a chunk used to send (1 + resamples) x cells
    of them (764 MB a chunk at 40 teachers)."""
    import pickle

    inputs, settings = _whole_inputs(_copy(tmp_path / "s"), metrics_config())
    few = stage.metrics_chunk(inputs, dataclasses.replace(settings, board_boot=10))
    many = stage.metrics_chunk(inputs, dataclasses.replace(settings, board_boot=2_000))
    # 1,990 more resamples add nothing to what is sent but the number itself
    assert abs(len(pickle.dumps(many)) - len(pickle.dumps(few))) < 100
    resampled = many.board.resampled()
    cells = sum(len(p.cells) * p.sums.shape[2] for p in resampled.metrics.values())
    assert cells > 0 and {p.sums.shape[0] for p in resampled.metrics.values()} == {2_001}
    assert many.rollouts is not None
    rows, weighed = many.rollouts.curve_rows, many.rollouts.resampled().curves
    # the bands' pairs against their 1 + 200 replicates' sums per cell
    assert len(pickle.dumps(rows)) * 5 < len(pickle.dumps(weighed))
    assert {c.num.shape[0] for c in weighed.cells.values()} == {201}


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame.sort_values(keys).reset_index(drop=True)


@pytest.mark.slow  # the three runs of tests.demo_runs (once per test run) and a whole read
def test_bucket_reads_give_the_whole_read_tables_for_1_7_and_64_chunks(tmp_path: Path) -> None:
    reference = _copy(tmp_path / "whole")
    efficiency, transfer, teachers = _whole_read_tables(reference, metrics_config())
    # the demo's rollouts are in 184 parts: the keyed reads keep the latest row of a key too
    assert len(reference.parts("rollouts")) > 1
    for chunks in BUCKET_COUNTS:
        store = demo_after_metrics(chunks, tmp_path / f"c{chunks}").store
        pd.testing.assert_frame_equal(
            _sorted(store.read("trace_efficiency"), ["trace_id"]),
            _sorted(efficiency, ["trace_id"]),
            check_dtype=False,
            rtol=1e-12,
        )
        pd.testing.assert_frame_equal(
            _sorted(store.read("trace_transfer"), ["trace_id", "student"]),
            _sorted(transfer, ["trace_id", "student"]),
            check_dtype=False,
            rtol=1e-12,
        )
        stored = _sorted(store.read("teacher_metrics"), ["teacher", "dataset"])
        pd.testing.assert_frame_equal(
            stored[list(teachers.columns)],
            _sorted(teachers, ["teacher", "dataset"]),
            check_dtype=False,
            rtol=1e-12,
        )
        _merged_results_equal_the_whole_reads(store)


def _merged_results_equal_the_whole_reads(store: Store) -> None:
    """The transfer curves and the page results the stage merged from the buckets' partials
    equal those computed from the whole tables as they are now in ``store`` (the rollouts read
    whole, the board resampled from the stored per-trace tables)."""
    from legival_core.metrics.page_results import frame_from_bytes, page_results_rows
    from precompute.stages.metrics import (
        METRICS_ROLLOUT_COLUMNS,
        page_results_table,
        transfer_curves_table,
    )

    rollouts = store.read("rollouts", list(METRICS_ROLLOUT_COLUMNS))
    curves = store.read("transfer_curves")
    whole_curves = transfer_curves_table(rollouts, str(curves["rollouts_stamp"].iloc[0]), 0)
    keys = ["profile", "dataset", "student", "teacher", "bin"]
    pd.testing.assert_frame_equal(
        _sorted(curves, keys), _sorted(whole_curves, keys), check_dtype=False, rtol=1e-12
    )
    whole = page_results_table(store, store.manifest)
    assert whole is not None
    # and the redundancy sweep over similarity read whole, at the τ this run recorded
    sweep = page_results_rows(stage.redundancy_results(store, store.manifest), store.manifest)
    expected = {
        (n, k): frame_from_bytes(p)
        for table in (whole, sweep)
        for n, k, p in zip(
            *(table.column(c).to_pylist() for c in ("name", "selection", "payload")), strict=True
        )
    }
    _decomposition_equals_the_whole_reads(store)
    stored = store.read("page_results")
    merged = {"board_resamples", "pareto_resamples", "board_intervals", "transfer_leaks",
              "transfer_coverage", "transfer_first_measured", "attribution_traces",
              "redundancy_sweep", "reward_points", "reward_rho", "teacher_rewards",
              "trace_choices", "decomposition_audits",
              "decomposition_concentration"}  # fmt: skip
    compared = set()
    for name, key, payload in zip(
        stored["name"], stored["selection"], stored["payload"], strict=True
    ):
        if name in merged and (name, key) in expected:
            got, want = frame_from_bytes(payload), expected[(name, key)]
            if "replicates" in want:  # lists of floats: compare them as arrays
                for a, b in zip(got.pop("replicates"), want.pop("replicates"), strict=True):
                    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
            pd.testing.assert_frame_equal(got, want, check_dtype=False, rtol=1e-12)
            compared.add(name)
    assert compared == merged, merged - compared


def _decomposition_equals_the_whole_reads(store: Store) -> None:
    """The ``decomposition`` table built from the buckets' instances equals the one built
    from ``traces``, ``grades``, σ and the default encoding's counts read whole."""
    from legival_core.metrics.decomposition import decomposition_instances
    from legival_core.published.references import reference_teachers

    traces = store.read("traces", list(stage.METRICS_TRACE_COLUMNS))
    sigma = store.read("trace_efficiency", ["trace_id", "compression"])
    instances = decomposition_instances(
        traces,
        store.read("grades", ["trace_id", "correct"]),
        store.read("problems", ["problem_id", "workload"]),
        sigma=pd.Series(sigma["compression"].to_numpy(), index=sigma["trace_id"].astype(str)),
        counted=stage.stored_default_counts(store),
    )
    whole = stage.decomposition_table(instances, reference_teachers(traces))
    keys = ["model", "benchmark", "layer"]
    stored = _sorted(store.read("decomposition"), keys)
    assert len(whole) > 0
    pd.testing.assert_frame_equal(
        stored[list(whole.columns)], _sorted(whole, keys), check_dtype=False, rtol=1e-12
    )


@pytest.mark.slow  # one metrics run on a copy of the demo store
def test_the_per_trace_tables_never_read_a_per_row_input_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until the per-trace tables are written (the first merge of ``trace_efficiency``),
    similarity, judgments and rollouts are each passed over once, a batch at a time, and split
    into the buckets (``Store.scan``, precompute.bucket_spill); any other read of them is
    filtered by trace ids (a bucket without rows of a table asks the store for none)."""
    store = _copy(tmp_path / "demo")
    reads: list[tuple[str, object]] = []
    scans: list[str] = []
    done = {"tables": False}
    original_merge = Store.merge

    def record(read: StoreRead) -> None:
        if read.table in PER_ROW and not done["tables"]:
            if read.method == "scan":
                scans.append(read.table)
                return
            assert read.by_trace_ids(), f"a read of {read.table} without a trace_id filter"
            reads.append((read.table, read.filters["trace_id"]))  # type: ignore[index]

    def merge(self: Store, table: str | None = None) -> None:
        if table == "trace_efficiency":
            done["tables"] = True
        original_merge(self, table)

    spy_on_reads(monkeypatch, record)
    monkeypatch.setattr(Store, "merge", merge)
    _run_metrics(store, 7, monkeypatch)
    assert done["tables"]
    assert sorted(scans) == sorted(PER_ROW), scans  # each table passed over once
    problems = store.read("traces", ["problem_id"])["problem_id"]
    assert len(set(stage.problem_buckets(problems, 7).tolist())) > 1
    # every bucket served from the split: a keyed read, if any, asks for no trace
    assert all(len(list(ids)) == 0 for _, ids in reads), reads  # type: ignore[call-overload]


@pytest.mark.slow  # one metrics run on a copy of the demo store
def test_while_a_bucket_runs_no_frame_holds_every_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-trace inputs (traces, trace_counts, grades, answer_leaks) are read a bucket at a
    time like the per-row ones: while any of 7 buckets runs, no DataFrame in the process has
    rows of every trace (the driver held the whole frames, 0.7 GB at a million traces), and
    each of those tables is passed over once to split it, never read whole meanwhile."""
    import gc

    store = _copy(tmp_path / "demo")
    every_trace = len(store.read("traces", ["trace_id"]))
    per_trace = ["traces", "trace_counts", "grades", "answer_leaks"]
    running = {"bucket": False}
    held: list[tuple[int, list[str]]] = []
    whole: list[str] = []
    scans: list[str] = []
    chunk = stage.metrics_chunk
    # frames other tests in this process left alive (caches) are not the stage's: kept here,
    # so their ids stay theirs, and left out
    earlier = [o for o in gc.get_objects() if isinstance(o, pd.DataFrame)]
    known = {id(o) for o in earlier}

    def spied_chunk(inputs: dict[str, pd.DataFrame], settings: stage.ChunkSettings) -> object:
        running["bucket"] = True
        held.extend(
            (len(o), list(o.columns))
            for o in gc.get_objects()
            if isinstance(o, pd.DataFrame)
            and id(o) not in known
            and "trace_id" in o
            and len(o) >= every_trace
            and o["trace_id"].nunique() >= every_trace
        )
        try:
            return chunk(inputs, settings)
        finally:
            running["bucket"] = False

    def record(read: StoreRead) -> None:
        if read.table not in per_trace:
            return
        if read.method == "scan":
            scans.append(read.table)
        elif running["bucket"] and not read.by_trace_ids():
            whole.append(read.table)

    spy_on_reads(monkeypatch, record)
    monkeypatch.setattr(stage, "metrics_chunk", spied_chunk)
    _run_metrics(store, 7, monkeypatch)
    problems = store.read("traces", ["problem_id"])["problem_id"]
    assert len(set(stage.problem_buckets(problems, 7).tolist())) > 1
    assert not held, f"frames of every trace held while a bucket ran: {held}"
    assert not whole, whole
    assert sorted(scans) == sorted(per_trace), scans


@pytest.mark.slow  # one metrics run on a copy of the demo store
def test_a_bucket_runs_without_the_per_trace_frames_of_the_buckets_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-trace frames a bucket hands back (the decomposition's instances, the reward
    means, the first measured positions, the attribution concentration) are only joined after
    the last bucket: they wait in the stage's scratch folder, not in memory under the next
    buckets (about 230 MB a million traces piled up), and the folder goes with the stage."""
    import gc
    import tempfile
    import weakref

    from legival_core.store.file_safety import HOST
    from precompute.bucket_spill import SCRATCH_PREFIX

    store = _copy(tmp_path / "demo")
    handed_back: list[weakref.ref[pd.DataFrame]] = []
    alive_at_start: list[int] = []
    chunk = stage.metrics_chunk

    def spied_chunk(inputs: dict[str, pd.DataFrame], settings: stage.ChunkSettings) -> object:
        gc.collect()
        alive_at_start.append(sum(ref() is not None for ref in handed_back))
        result = chunk(inputs, settings)
        assert result.decomposition is not None and result.rewards is not None
        assert result.rollouts is not None
        for frames in (
            result.decomposition.instances,
            result.rewards.per_trace,
            result.rollouts.first,
            result.rollouts.concentration,
        ):
            handed_back.extend(weakref.ref(frame) for frame in frames)
        return result

    monkeypatch.setattr(stage, "metrics_chunk", spied_chunk)
    # this process's scratch folders only: the other test workers' stages make and remove theirs
    mine = f"{SCRATCH_PREFIX}{HOST}-{os.getpid()}-*"
    scratch = list(Path(tempfile.gettempdir()).glob(mine))
    _run_metrics(store, 7, monkeypatch)
    assert len(alive_at_start) > 2 and len(handed_back) > 8
    # with the frames held, the k-th bucket started beside the k-1 buckets' frames before it
    assert alive_at_start == [0] * len(alive_at_start), alive_at_start
    assert list(Path(tempfile.gettempdir()).glob(mine)) == scratch
    _decomposition_equals_the_whole_reads(store)


@pytest.mark.slow  # one metrics run on a copy of the demo store
def test_the_rollouts_per_trace_results_are_let_go_before_the_reward_results(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The first measured positions and the attribution concentration (a row a trace with
    rollouts, 0.8 GB at ten million traces) are written and let go before the reward results
    and the trace list run, which set the stage's peak: they were held under both."""
    import gc
    import weakref

    from legival_core.oversight import selections

    store = _copy(tmp_path / "demo")
    made: list[weakref.ref[pd.DataFrame]] = []
    alive: list[int] = []
    results, points = stage.RolloutPartials.results, selections.reward_points

    def spied_results(self: stage.RolloutPartials, stamp: str) -> stage.RolloutResults:
        out = results(self, stamp)
        made.extend(weakref.ref(f) for f in (out.first_measured, out.concentration))
        return out

    def spied_points(*args: object, **kwargs: object) -> object:
        gc.collect()
        alive.append(sum(ref() is not None for ref in made))
        return points(*args, **kwargs)

    monkeypatch.setattr(stage.RolloutPartials, "results", spied_results)
    monkeypatch.setattr(selections, "reward_points", spied_points)
    names = _run_metrics(store, 3, monkeypatch)
    assert len(made) == 2 and alive, (made, alive)
    assert alive == [0] * len(alive), alive
    # and they were written
    assert {"transfer_first_measured", "attribution_traces", "reward_points"} <= names


@pytest.mark.slow  # one metrics run on a copy of the demo store
def test_after_the_buckets_the_per_trace_tables_are_read_by_the_columns_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the buckets are done, ``trace_transfer`` and ``grades`` (2.3M and 1M rows at a
    million traces) are read only by the columns a result uses, never every column (the reward
    results read all of both: a gigabyte more at two million traces), and the decomposition's
    instances are built by the buckets only (once per bucket with grades), the workload audits
    reusing them."""
    from legival_core.metrics import decomposition

    store = _copy(tmp_path / "demo")
    assert store.has("rewards")  # the reward results run
    done = {"buckets": False}
    whole: list[str] = []
    built: list[int] = []
    original_merge = Store.merge
    original_instances = decomposition.decomposition_instances

    def merge(self: Store, table: str | None = None) -> None:
        if table == "trace_efficiency":
            done["buckets"] = True
        original_merge(self, table)

    def record(read: StoreRead) -> None:
        if done["buckets"] and read.table in ("trace_transfer", "grades") and not read.columns:
            whole.append(read.table)

    def instances(*args: object, **kwargs: object) -> pd.DataFrame:
        built.append(int(done["buckets"]))
        return original_instances(*args, **kwargs)  # type: ignore[arg-type]

    spy_on_reads(monkeypatch, record)
    monkeypatch.setattr(Store, "merge", merge)
    monkeypatch.setattr(decomposition, "decomposition_instances", instances)
    names = _run_metrics(store, 7, monkeypatch)
    assert done["buckets"]
    assert not whole, f"read with every column after the buckets: {whole}"
    graded = store.read("grades", ["trace_id"])["trace_id"]
    traces = store.read("traces", ["trace_id", "problem_id"])
    buckets = stage.problem_buckets(traces.loc[traces["trace_id"].isin(graded), "problem_id"], 7)
    assert built == [0] * len(set(buckets.tolist())), built  # one per bucket, none after
    assert {"reward_rho", "decomposition_audits"} <= names


@pytest.mark.slow  # one metrics run on a copy of the demo store
def test_the_decomposition_reads_no_per_trace_table_after_the_buckets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decomposition's instances are final inside a bucket of problems, so the buckets
    build them: between the buckets' end and the ``decomposition`` table's write the stage
    reads none of ``traces``, ``grades``, ``trace_counts`` and ``trace_efficiency`` (read whole
    again there, with the instances built from them, they took the stage's peak to 13.9 GB at
    ten million traces)."""
    store = _copy(tmp_path / "demo")
    phase = {"now": "buckets"}
    reads: list[tuple[str, object]] = []
    original_merge, original_write = Store.merge, Store.write

    def merge(self: Store, table: str | None = None) -> None:
        original_merge(self, table)
        if table == "trace_transfer":
            phase["now"] = "after"

    def write(self: Store, table: str, *args: object, **kwargs: object) -> object:
        if table == "decomposition":
            phase["now"] = "done"
        return original_write(self, table, *args, **kwargs)  # type: ignore[arg-type]

    def record(read: StoreRead) -> None:
        per_trace = ("traces", "grades", "trace_counts", "trace_efficiency")
        if phase["now"] == "after" and read.table in per_trace:
            reads.append((read.table, read.columns))

    spy_on_reads(monkeypatch, record)
    monkeypatch.setattr(Store, "merge", merge)
    monkeypatch.setattr(Store, "write", write)
    _run_metrics(store, 7, monkeypatch)
    assert phase["now"] == "done"
    assert not reads, f"per-trace tables read after the buckets: {reads}"
    assert len(store.read("decomposition")) > 0


@pytest.mark.slow  # one metrics run on a copy of the demo store
def test_after_the_buckets_no_result_reads_the_transfer_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the buckets' rows are written and merged (paper profile), ``trace_transfer``
    (2.3M rows at a million traces) is not read again: the reward results, which grouped its
    rows by trace and by (teacher, dataset, student) for each of their six results, and the
    trace list take the buckets' per-trace means and per-student sums instead
    (``legival_core.oversight.reward_partials``)."""
    store = _copy(tmp_path / "demo")
    assert store.has("rewards")  # the reward results run
    done = {"buckets": False}
    reads: list[tuple[str, object]] = []
    original_merge = Store.merge

    def merge(self: Store, table: str | None = None) -> None:
        original_merge(self, table)
        if table == "trace_transfer":  # its own compaction streams the parts: not counted
            done["buckets"] = True

    def record(read: StoreRead) -> None:
        if done["buckets"] and read.table == "trace_transfer":
            reads.append((read.method, read.columns))

    spy_on_reads(monkeypatch, record)
    monkeypatch.setattr(Store, "merge", merge)
    names = _run_metrics(store, 7, monkeypatch)
    assert done["buckets"]
    assert not reads, f"trace_transfer read after the buckets: {reads}"
    assert {"reward_points", "reward_rho", "teacher_rewards"} <= names


@pytest.mark.slow  # one metrics run on a copy of the demo store
def test_the_stage_never_reads_similarity_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the whole run, the page results included, ``similarity`` is only passed over
    once a batch at a time to split it into the buckets (or read by trace ids): the
    redundancy sweep (like the robustness report) is merged from the buckets' partials."""
    import traceback

    store = _copy(tmp_path / "demo")
    filtered: list[object] = []
    whole: list[list[str]] = []

    def record(read: StoreRead) -> None:
        if read.table != "similarity":
            return
        if read.method == "scan" or read.by_trace_ids():
            filtered.append(read.method)
        else:
            whole.append([frame.name for frame in traceback.extract_stack()])

    spy_on_reads(monkeypatch, record)
    names = _run_metrics(store, 7, monkeypatch)
    assert filtered  # the spy saw the buckets' reads
    assert not whole, f"similarity read whole from {whole[0][-6:]}"
    assert "redundancy_sweep" in names


def test_the_input_check_holds_its_trace_ids_as_arrow_text() -> None:
    """The check's distinct trace ids of similarity, judgments and rollouts (up to ten million
    each) come as one Arrow-backed text column, not a list of Python strings (~80 bytes an id),
    and are the table's distinct ids; an absent table gives none."""
    store = Store.open(DEMO)
    ids = stage._trace_ids_in(store, "similarity")
    assert isinstance(ids, pd.Series) and isinstance(ids.dtype, pd.StringDtype)
    assert ids.dtype.storage == "pyarrow"
    assert sorted(ids) == sorted(set(store.read("similarity", ["trace_id"])["trace_id"]))
    assert not store.has("tool_grades") and len(stage._trace_ids_in(store, "tool_grades")) == 0


def test_key_values_streams_the_distinct_keys_of_every_listed_part(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    first = {"trace_id": ["t1", "t2"], "labeler": ["lexical", "lexical"], "valid": True}
    store.write("judgments", pd.DataFrame(first))
    # a second part: t2/cues and t3/cues, and t1/lexical written again
    second = {"trace_id": ["t2", "t3", "t1"], "labeler": ["cues", "cues", "lexical"]}
    store.write("judgments", pd.DataFrame({**second, "valid": True}))
    assert sorted(store.key_values("judgments", "trace_id").to_pylist()) == ["t1", "t2", "t3"]
    cues = store.key_values("judgments", "trace_id", {"labeler": "cues"}).to_pylist()
    assert sorted(cues) == ["t2", "t3"]
    assert store.key_values("rollouts", "trace_id").to_pylist() == []
    with pytest.raises(ValueError, match="not a key column"):
        store.key_values("judgments", "valid")
    with pytest.raises(ValueError, match="key columns"):
        store.key_values("judgments", "trace_id", {"valid": True})
    # an unreadable listed part: the store's error naming the file
    part = store.parts("judgments")[0]
    part.write_bytes(b"not arrow")
    with pytest.raises(StoreError, match=part.name):
        store.key_values("judgments", "trace_id")


def test_the_budget_rule_by_hand() -> None:
    """chunks = ceil(in_flight * (similarity*170 + judgments*750 + rollouts*760) / (GB * 1e9))."""
    assert stage.BUCKET_BYTES_PER_ROW == {"similarity": 170, "judgments": 750, "rollouts": 760}
    rows = {"similarity": 1_000_000, "judgments": 200_000, "rollouts": 2_000_000}
    need = 1_000_000 * 170 + 200_000 * 750 + 2_000_000 * 760  # 170M + 150M + 1,520M bytes
    assert need == 1_840_000_000
    assert stage.budget_chunks(rows, 2.0) == 1  # 0.92 fits
    assert stage.budget_chunks(rows, 1.0) == 2  # 1.84 -> 2
    assert stage.budget_chunks(rows, 0.5) == 4  # 3.68 -> 4
    assert stage.budget_chunks(rows, 0.1) == 19  # 18.4 -> 19
    assert stage.budget_chunks(rows, 0.0046) == 400  # 400.0 exactly
    assert stage.budget_chunks(rows, 1.0, in_flight=4) == 8  # 7.36 -> 8
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="positive number of GB"):
            stage.budget_chunks(rows, bad)


def test_memory_gb_picks_more_chunks_for_a_smaller_budget(tmp_path: Path) -> None:
    store = _copy(tmp_path / "demo")
    tables = store.manifest["tables"]
    rows = {t: tables[t]["rows"] for t in PER_ROW}
    assert rows == {"similarity": 4853, "judgments": 500, "rollouts": 1544}
    need = 4853 * 170 + 500 * 750 + 1544 * 760  # 825,010 + 375,000 + 1,173,440 bytes
    assert need == 2_373_450
    cfg = metrics_config(16).metrics
    assert stage.metrics_chunks(store, cfg, {}) == 16  # no budget: the configured chunks
    # 2.37345 MB in 1 MB: 3 buckets, fewer than the configured 16, which stay
    assert stage.metrics_chunks(store, cfg, {"memory_gb": 0.001}) == 16
    assert stage.metrics_chunks(store, cfg, {"memory_gb": 0.001, "chunks": 1}) == 3
    # 2,373,450 / 50,000 = 47.47 -> 48; / 10,000 = 237.345 -> 238
    assert stage.metrics_chunks(store, cfg, {"memory_gb": 0.00005}) == 48
    assert stage.metrics_chunks(store, cfg, {"memory_gb": 0.00001}) == 238
    # with Ray the driver holds 4 buckets: 4 * 2,373,450 / 1e6 = 9.49 -> 10
    ray = {"memory_gb": 0.001, "chunks": 1, "engine": "ray"}
    assert stage.metrics_chunks(store, cfg, ray) == 10
    # --in-flight 8: 8 * 2,373,450 / 1e6 = 18.99 -> 19; without Ray it changes nothing
    assert stage.metrics_chunks(store, cfg, {**ray, "in_flight": 8}) == 19
    assert stage.metrics_chunks(store, cfg, {**ray, "in_flight": 8, "engine": None}) == 3
    # from the config, the same rule
    assert stage.metrics_chunks(store, metrics_config(1, 0.00005).metrics, {}) == 48
    with pytest.raises(StageError, match=r"positive number of GB, got 0\.0"):
        stage.metrics_chunks(store, cfg, {"memory_gb": 0.0})


def test_in_flight_below_one_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for value in ("0", "-1", "two"):
        with pytest.raises(SystemExit) as exited:
            main(["metrics", "--store", str(tmp_path), "--engine", "ray", "--in-flight", value])
        assert exited.value.code == EXIT_USAGE
        err = capsys.readouterr().err
        assert "--in-flight:" in err and err.count("\n") == 1


def test_a_non_positive_budget_is_refused_on_the_command_line_and_in_a_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "nowhere"
    for value in ("0", "-2", "nan"):
        with pytest.raises(SystemExit) as exited:
            main(["metrics", "--store", str(store), "--memory-gb", value])
        assert exited.value.code == EXIT_USAGE
        assert "--memory-gb: must be a positive number of GB" in capsys.readouterr().err
    config = tmp_path / "c.toml"
    config.write_text('[experiment]\nname = "x"\n\n[metrics]\nmemory_gb = 0\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[metrics\] memory_gb: must be a positive number"):
        from precompute.config import load_config

        load_config(config)
    assert main(["metrics", "--store", str(store), "--config", str(config)]) == EXIT_CONFIG
    config.write_text('[experiment]\nname = "x"\n\n[metrics]\nmemory_gb = 2.5\n', encoding="utf-8")
    from precompute.config import load_config

    assert load_config(config).metrics.memory_gb == 2.5


@pytest.mark.slow  # one metrics run on a copy of the demo store
def test_the_monitor_scores_read_the_columns_they_score(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stage reads ``monitor_verdicts`` by the columns the detection scores use, not the
    monitors' raw replies and errors (5.2M rows, 0.9 GB in pandas at ten million traces, held
    through the reward results and the trace list while the whole table was read)."""
    from legival_core.oversight.oversight import MONITOR_INPUT_COLUMNS

    store = _copy(tmp_path / "demo")
    assert store.has("monitor_verdicts")
    columns: list[object] = []

    def record(read: StoreRead) -> None:
        if read.table == "monitor_verdicts" and read.method == "read":
            columns.append(read.columns)

    spy_on_reads(monkeypatch, record)
    names = _run_metrics(store, 7, monkeypatch)
    assert columns, "the stage did not read monitor_verdicts"
    assert all(c is not None and set(c) <= set(MONITOR_INPUT_COLUMNS) for c in columns), columns
    assert {"monitor_scores", "monitor_scores_pooled"} <= names
