"""The metrics stage reads numbers only (issue 43, item 2).

What the metrics need from a trace's text is counted once where the text is read anyway: the
segment stage writes ``trace_counts`` (tokens per encoding, blank, steps, σ) and the ``leaks``
stage writes ``answer_leaks``. These tests check the counts by hand, that the stage never asks
the store for a text column, that its tables equal the ones computed from the texts, that a
store segmented before the table existed is counted without being cut again, and that a stale
leak row (another gold) is checked again.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import pandas as pd
import pytest

from legival_core.store.store import Store
from precompute.cli import EXIT_MISSING, main
from precompute.demo import DemoOptions, demo_config
from precompute.stages import StageContext, run_stage
from precompute.stages.metrics import efficiency_table, primary_labeler
from precompute.stages.segment import count_encodings, trace_count_rows
from tests.demo_runs import BUCKET_COUNTS, demo_after_metrics
from tests.store_spy import spy_on_reads

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "results" / "demo"
#: The columns of ``traces`` that hold text.
TEXT_COLUMNS = {"reasoning", "raw", "answer_text"}


def test_trace_count_rows_by_hand() -> None:
    text = "ab" * 1000  # 2000 bytes; zlib level 9 gives 24 bytes: σ = 24 / 2000
    texts = ["hello world", " \n ", text]
    rows = trace_count_rows(["a", "b", "c"], texts, [1, 0, 3], ["cl100k_base"])
    assert rows["tokens"].tolist()[:1] == [2]  # cl100k_base: "hello", " world"
    assert rows["blank"].tolist() == [False, True, False]
    assert rows["steps"].tolist() == [1, 0, 3]
    assert rows["compression"].iloc[2] == pytest.approx(24 / 2000)
    assert len(zlib.compress(text.encode(), 9)) == 24
    assert rows["compression"].iloc[1] == 1.0  # 3 bytes compress to more: capped at 1
    # a blank text keeps its count here (the release profile's 0 is applied from ``blank``)
    assert rows["tokens"].iloc[1] >= 1
    both = trace_count_rows(["a"], ["hello world"], [1], count_encodings("cl100k_base"))
    assert both["encoding"].tolist() == ["cl100k_base", "o200k_base"]


def test_release_profile_counts_a_blank_trace_as_zero_from_the_stored_flag() -> None:
    from precompute.stages.metrics import efficiency_from_counts

    traces = pd.DataFrame(
        {"trace_id": ["a", "b"], "teacher": "T", "dataset": "d", "problem_id": ["p", "q"]}
    )
    counts = pd.DataFrame(
        {
            "trace_id": ["a", "b"],
            "tokens": [7, 2],
            "blank": [False, True],
            "steps": [2, 0],
            "compression": [0.5, 1.0],
        }
    )
    grades = pd.DataFrame({"trace_id": ["a", "b"], "correct": [True, True]})
    empty = pd.DataFrame({"trace_id": [], "step": [], "max_similarity": []})
    none = pd.DataFrame({"trace_id": [], "labeler": [], "steps": [], "valid": []})
    kwargs = {"threshold": 0.8, "labeler": "lexical"}
    paper = efficiency_from_counts(traces, counts, grades, empty, none, **kwargs)
    release = efficiency_from_counts(
        traces, counts, grades, empty, none, **kwargs, profile="release"
    )
    assert paper["tokens"].tolist() == [7, 2]
    assert release["tokens"].tolist() == [7, 0]
    # b has no steps: nothing to repeat or flag (0); a has steps but no similarity rows: NaN
    assert paper["redundancy"].iloc[1] == 0.0 and pd.isna(paper["redundancy"].iloc[0])
    assert paper["compression"].tolist() == [0.5, 1.0]


@pytest.fixture()
def demo_copy(tmp_path: Path) -> Store:
    path = tmp_path / "demo"
    shutil.copytree(DEMO, path)
    return Store.open(path)


@pytest.mark.slow  # runs real stages on a copy of the demo store
def test_the_metrics_stage_reads_no_text_and_equals_the_tables_from_the_texts(
    demo_copy: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str, object]] = []
    spy_on_reads(monkeypatch, lambda read: asked.append((read.table, read.columns)))

    def rows_per(self: Store, table: str, *args: object, **kwargs: object) -> object:
        raise AssertionError(f"the stage counted the rows of {table} per key again")

    # the stored trace list takes its step counts from the stage's own (trace_counts)
    monkeypatch.setattr(Store, "rows_per", rows_per)
    config = demo_config(DemoOptions())
    ctx = StageContext(store=demo_copy, config=config, progress=False)
    run_stage("metrics", ctx)
    monkeypatch.undo()
    for table, columns in asked:
        if table in ("traces", "steps", "rollouts"):
            # a read of every column (None) would carry the texts along
            assert columns is not None, table
            text = {"steps": {"text"}, "rollouts": {"completion"}}.get(table, TEXT_COLUMNS)
            assert isinstance(columns, list | tuple)
            assert not set(columns) & text, (table, columns)

    # The stored efficiency equals the one computed from the texts themselves.
    stored = demo_copy.read("trace_efficiency").sort_values("trace_id").reset_index(drop=True)
    from_text = efficiency_table(
        demo_copy.read("traces"),
        demo_copy.read("grades"),
        demo_copy.read("steps"),
        demo_copy.read("similarity"),
        demo_copy.read("judgments"),
        threshold=config.metrics.threshold,
        labeler=primary_labeler(ctx),
        encoding=config.metrics.encoding,
        profile=config.metrics.profile,
    )
    from_text = from_text.sort_values("trace_id").reset_index(drop=True)
    for column in ("tokens", "steps", "redundancy", "backtracking", "compression", "tokens_norm"):
        pd.testing.assert_series_equal(
            stored[column].astype("float64"), from_text[column].astype("float64"), rtol=1e-12
        )


@pytest.mark.slow  # runs real stages on a copy of the demo store
def test_a_store_segmented_before_the_counts_is_counted_without_cutting_again(
    demo_copy: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    steps_before = demo_copy.manifest["tables"]["steps"]
    # the store as a version before the table existed left it: no folder, no manifest entry
    shutil.rmtree(demo_copy.path / "tables" / "trace_counts")
    manifest_path = demo_copy.path / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    del manifest["tables"]["trace_counts"]
    manifest_path.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    fresh = Store.open(demo_copy.path)
    assert not fresh.has("trace_counts")
    # the metrics stage names the stage to run
    assert main(["metrics", "--store", str(fresh.path), "--no-progress"]) == EXIT_MISSING
    assert "trace_counts" in capsys.readouterr().err
    assert main(["segment", "--store", str(fresh.path), "--no-progress"]) == 0
    again = Store.open(fresh.path)
    assert again.manifest["tables"]["steps"] == steps_before  # not cut again
    counts = again.read("trace_counts")
    traces = again.read("traces", columns=["trace_id", "reasoning"])
    assert len(counts) == 2 * len(traces)
    per_trace = again.rows_per("steps", "trace_id")
    cl100k = counts[counts["encoding"] == "cl100k_base"].set_index("trace_id")
    for trace_id in traces["trace_id"].head(5):
        assert int(cl100k.loc[trace_id, "steps"]) == int(per_trace.get(trace_id, 0))


@pytest.mark.slow  # runs real stages on a copy of the demo store
def test_a_leak_row_checked_against_another_gold_is_checked_again(
    demo_copy: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    leaks = demo_copy.read("answer_leaks")
    first = leaks.iloc[0]
    # as if the gold had been corrected since this row was written
    demo_copy.write(
        "answer_leaks",
        pd.DataFrame(
            {
                "trace_id": [first["trace_id"]],
                "leak_k": pd.array([None], dtype="Int32"),
                "gold": ["an old gold"],
                "grader_version": [int(first["grader_version"])],
            }
        ),
        stage="test",
    )
    stale = Store.open(demo_copy.path)
    assert main(["metrics", "--store", str(stale.path), "--no-progress"]) == EXIT_MISSING
    err = capsys.readouterr().err
    assert "answer_leaks" in err and "precompute leaks" in err
    assert main(["leaks", "--store", str(stale.path), "--no-progress"]) == 0
    redone = Store.open(stale.path).read("answer_leaks").set_index("trace_id")
    assert redone.loc[first["trace_id"], "gold"] == first["gold"]
    assert redone.loc[first["trace_id"], "leak_k"] == first["leak_k"] or (
        pd.isna(redone.loc[first["trace_id"], "leak_k"]) and pd.isna(first["leak_k"])
    )
    # a rerun has nothing left to check
    capsys.readouterr()
    assert main(["leaks", "--store", str(stale.path), "--no-progress"]) == 0
    assert "0 answer_leaks rows" in capsys.readouterr().err


# --- chunks that merge exactly (issue 43, item 3) ----------------------------------------------


@pytest.mark.slow  # the three runs of tests.demo_runs (once per test run)
def test_one_seven_and_sixty_four_chunks_give_the_same_tables(tmp_path: Path) -> None:
    """The per-trace tables are computed one bucket of problems at a time and the teacher table
    from the buckets' merged partial sums: the tables do not depend on the bucket count (sums
    merged in another order may differ in the last bit: 1e-12), and equal the whole-table
    teacher computation (:func:`precompute.stages.metrics.teacher_table`)."""
    from precompute.stages.metrics import teacher_table

    stores = {n: demo_after_metrics(n, tmp_path / f"c{n}").store for n in BUCKET_COUNTS}
    for table in ("trace_efficiency", "trace_transfer", "teacher_metrics", "decomposition"):
        frames = {n: s.read(table).reset_index(drop=True) for n, s in stores.items()}
        for n in (7, 64):
            pd.testing.assert_frame_equal(frames[n], frames[1], rtol=1e-12, check_exact=False)
    one = stores[1]
    whole = teacher_table(
        one.read("trace_efficiency"),
        one.read("rollouts"),
        "paper",
        "interpolate",
        0,
        one.read("trace_transfer"),
    )
    chunked = one.read("teacher_metrics").set_index(["teacher", "dataset"])
    whole = whole.set_index(["teacher", "dataset"]).loc[chunked.index]
    for column in ("accuracy", "tokens", "fotu", "sotu", "never_solved", "fotu_before_leak"):
        pd.testing.assert_series_equal(
            chunked[column].astype("float64"), whole[column].astype("float64"), rtol=1e-12
        )
    assert (chunked["n_traces"] == whole["n_traces"]).all()
