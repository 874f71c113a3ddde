"""Bring-your-own-traces ingest: good rows land in the store, each bad row is quarantined with
its line and field, exit codes hold, no traceback ever reaches stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from legival_core.store.schema import trace_id_for
from legival_core.store.store import Store
from legival_core.text.tokens import count_tokens
from precompute.cli import EXIT_MISSING, EXIT_STORE, EXIT_UNUSABLE, EXIT_USAGE
from precompute.ingest import IngestError, IngestUsageError, ingest

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]
FIVE_MB = 5 * 1024 * 1024


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "precompute", "ingest", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def mixed_file(tmp_path: Path) -> Path:
    """The mixed fixture plus one good row whose reasoning is 5 MB (line 14)."""
    path = tmp_path / "mixed.jsonl"
    sentence = "We add the numbers step by step and check each partial sum. "
    huge = (sentence * (FIVE_MB // len(sentence) + 1))[:FIVE_MB]
    big_row = {"problem_id": "big", "prompt": "A long one.", "reasoning": huge, "sample": 0}
    path.write_text(
        (FIXTURES / "traces_mixed.jsonl").read_text() + json.dumps(big_row) + "\n",
        encoding="utf-8",
    )
    return path


# line -> field of each bad row in the mixed file (None = the line itself is unreadable)
EXPECTED_BAD = {
    3: None,  # malformed JSON
    4: "problem_id",  # missing id
    5: "reasoning",  # no trace at all
    6: "reasoning",  # a number, not text
    7: "correct",  # 'maybe'
    8: "tokens",  # -3
    9: "reasoning",  # whitespace only
    10: None,  # a JSON array, not an object
    13: "problem_id",  # duplicate of line 1
}


@pytest.mark.slow
def test_cli_keeps_good_rows_and_quarantines_bad_ones(mixed_file: Path, tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    result = run_cli(str(mixed_file), "--store", str(store_dir), "--teacher", "my-model")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    # 14 lines, one blank: 13 rows read; p1, p2, p4 and the 5 MB row kept; 9 quarantined
    assert "rows read: 13, kept: 4, quarantined: 9" in result.stdout
    assert "line 3: invalid JSON" in result.stdout  # first errors, with line numbers

    store = Store.open(store_dir)
    traces = store.read("traces").set_index("problem_id")
    assert sorted(traces.index) == ["mixed/big", "mixed/p1", "mixed/p2", "mixed/p4"]
    assert len(traces.loc["mixed/big", "reasoning"]) == FIVE_MB
    assert traces.loc["mixed/p1", "trace_id"] == trace_id_for("my-model", "mixed/p1", 0)
    assert traces.loc["mixed/p1", "tokens"] == 12  # given in the row
    # absent: tiktoken count of reasoning + answer (p4 has no answer)
    assert traces.loc["mixed/p4", "tokens"] == count_tokens(traces.loc["mixed/p4", "reasoning"])
    assert set(traces["source"]) == {"ingest:mixed.jsonl"}
    assert set(traces["teacher"]) == {"my-model"}

    grades = store.read("grades").set_index("trace_id")
    p1 = trace_id_for("my-model", "mixed/p1", 0)
    assert bool(grades.loc[p1, "correct"]) is True  # 'correct' given: written as is
    assert set(grades.index) <= {p1, trace_id_for("my-model", "mixed/p2", 0)}

    problems = store.read("problems").set_index("problem_id")
    assert problems.loc["mixed/p1", "gold"] == "4"
    assert json.loads(problems.loc["mixed/p4", "meta"])["gold_known"] is False

    entries = [json.loads(line) for line in store.quarantine_path.read_text().splitlines()]
    assert {e["line"]: e["field"] for e in entries} == EXPECTED_BAD
    by_line = {e["line"]: e for e in entries}
    assert "invalid JSON" in by_line[3]["reason"]
    assert by_line[9]["reason"] == "empty"
    assert "duplicate of line 1" in by_line[13]["reason"]
    assert all(e["file"] == str(mixed_file.resolve()) for e in entries)


def test_reingest_is_idempotent(mixed_file: Path, tmp_path: Path) -> None:
    store = Store.create(tmp_path / "store")
    first = ingest(mixed_file, store, "my-model")
    before = store.read("traces")
    second = ingest(mixed_file, store, "my-model")
    assert first.kept == second.kept == 4
    assert second.written["traces"] == 0 and second.already_present == 4
    pd.testing.assert_frame_equal(before, store.read("traces"))
    lines = store.quarantine_path.read_text().splitlines()
    assert len(lines) == 9  # the file's earlier entries were replaced, not duplicated
    third = ingest(mixed_file, store, "my-model", overwrite=True)
    assert third.written["traces"] == 4
    pd.testing.assert_frame_equal(before, store.read("traces"))


def test_nothing_kept_exits_6_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem_id": "a", "prompt": "x"}\nnot json\n')
    result = run_cli(str(bad), "--store", str(tmp_path / "s"), "--teacher", "t")
    assert result.returncode == EXIT_UNUSABLE
    assert "Traceback" not in result.stderr
    assert "no row could be kept" in result.stderr
    assert "rows read: 2, kept: 0, quarantined: 2" in result.stdout
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = run_cli(str(empty), "--store", str(tmp_path / "s"), "--teacher", "t")
    assert result.returncode == EXIT_UNUSABLE


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["missing.jsonl"], EXIT_MISSING, "no such file"),
        (["FIXTURE", "--task", "no-such-task"], EXIT_USAGE, "unknown task"),
        (["FIXTURE", "--map", "prompt"], EXIT_USAGE, "FIELD=COLUMN"),
        (["FIXTURE", "--map", "colour=question"], EXIT_USAGE, "unknown field"),
    ],
)
def test_cannot_run_exits_with_its_own_code_and_one_line(
    tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    args = [str(FIXTURES / "traces_mixed.jsonl") if a == "FIXTURE" else a for a in args]
    result = run_cli(*args, "--store", str(tmp_path / "s"), "--teacher", "t")
    assert result.returncode == code
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr


def test_unusable_store_exits_4(tmp_path: Path) -> None:
    not_a_store = tmp_path / "file.txt"
    not_a_store.write_text("x")
    result = run_cli(
        str(FIXTURES / "traces_mixed.jsonl"), "--store", str(not_a_store), "--teacher", "t"
    )
    assert result.returncode == EXIT_STORE
    assert "Traceback" not in result.stderr and result.stderr.startswith("precompute: error:")


def test_csv_with_mapping_strings_and_a_broken_row(tmp_path: Path) -> None:
    big_cell = "A long but fine trace. " * 50_000  # ~1.1 MB: beyond csv's default cell limit
    frame = pd.DataFrame(
        {
            "qid": ["a", "b", "c", "d"],
            "question": ["Q a", "Q b", "Q c", "Q d"],
            "output": ["Reasoning a.", big_cell, "", "Reasoning d."],
            "ok": ["true", "0", "true", "perhaps"],
        }
    )
    path = tmp_path / "traces.csv"
    frame.to_csv(path, index=False)
    with path.open("a") as handle:
        handle.write('e,"Q e","Reasoning e.",true,EXTRA\n')  # one field too many
    store = Store.create(tmp_path / "store")
    report = ingest(
        path,
        store,
        "csv-model",
        task="math",
        mapping={"problem_id": "qid", "prompt": "question", "reasoning": "output", "correct": "ok"},
        dataset="mine",
    )
    assert (report.rows_read, report.kept) == (5, 2)
    problems = {q.row: q for q in report.quarantined}
    assert problems[3].field == "reasoning"  # empty cell
    assert problems[4].field == "correct" and "'perhaps'" in problems[4].reason
    assert problems[5].field is None and "fields" in problems[5].reason
    assert problems[5].line == 6  # header is line 1, data rows 1..5 are lines 2..6
    grades = store.read("grades").set_index("trace_id")
    assert bool(grades.loc[trace_id_for("csv-model", "mine/a", 0), "correct"]) is True
    assert bool(grades.loc[trace_id_for("csv-model", "mine/b", 0), "correct"]) is False
    traces = store.read("traces").set_index("problem_id")
    assert traces.loc["mine/b", "reasoning"] == big_cell


def test_parquet_rows_and_the_size_limit(tmp_path: Path) -> None:
    rows = [
        {"problem_id": 1, "prompt": "One", "reasoning": "Short.", "tokens": 3},
        {"problem_id": 2, "prompt": "Two", "reasoning": None, "tokens": 4},
        {"problem_id": 3, "prompt": "Three", "reasoning": "x" * 2_000_000, "tokens": 5},
    ]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    store = Store.create(tmp_path / "store")
    report = ingest(path, store, "pq-model", max_trace_mb=1.0)
    assert report.kept == 1
    reasons = {q.row: (q.field, q.reason) for q in report.quarantined}
    assert reasons[2][0] == "reasoning" and reasons[2][1].startswith("missing")
    assert reasons[3][0] == "reasoning" and "above the limit of 1.0 MB" in reasons[3][1]
    assert store.read("traces")["problem_id"].tolist() == ["t/1"]
    # the default limit (50 MB) accepts it
    assert ingest(path, store, "pq-model").kept == 2


def test_rows_may_refer_to_problems_already_in_the_store(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "store")
    store.write(
        "problems",
        pd.DataFrame(
            [
                {
                    "problem_id": "bench/7",
                    "dataset": "bench",
                    "task": "math",
                    "prompt": "2+5?",
                    "gold": "7",
                }
            ]
        ),
    )
    path = tmp_path / "refs.jsonl"
    path.write_text(
        json.dumps({"problem_id": "bench/7", "reasoning": "Two plus five.", "answer": "7"})
        + "\n"
        + json.dumps({"problem_id": "nowhere", "reasoning": "No prompt and no problem."})
        + "\n"
    )
    report = ingest(path, store, "ref-model")
    assert report.kept == 1
    assert (
        report.quarantined[0].field == "prompt"
        and "not in the store" in report.quarantined[0].reason
    )
    traces = store.read("traces")
    assert traces["dataset"].tolist() == ["bench"]  # taken from the stored problem
    assert store.read("problems")["problem_id"].tolist() == ["bench/7"]  # not rewritten


def test_raw_output_is_split_into_reasoning_and_answer(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    path.write_text(
        json.dumps({"id": "r1", "question": "2+2?", "output": "<think>2 and 2 make 4</think>4"})
        + "\n"
        + json.dumps({"id": "r2", "question": "3+3?", "output": "<think>3 and 3 make"})
        + "\n"
    )
    store = Store.create(tmp_path / "store")
    assert ingest(path, store, "thinker").kept == 2  # aliases: id, question, output
    traces = store.read("traces").set_index("problem_id")
    assert traces.loc["raw/r1", "reasoning"] == "2 and 2 make 4"
    assert traces.loc["raw/r1", "answer_text"] == "4"
    assert bool(traces.loc["raw/r1", "complete"]) is True
    assert bool(traces.loc["raw/r2", "complete"]) is False
    assert traces.loc["raw/r1", "raw"] == "<think>2 and 2 make 4</think>4"


def test_function_errors_are_ingest_errors(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="no such file"):
        ingest(tmp_path / "nope.jsonl", tmp_path / "s", "t")
    with pytest.raises(IngestError, match="teacher"):
        ingest(FIXTURES / "traces_mixed.jsonl", tmp_path / "s", " ")


def test_grade_stage_leaves_traces_without_a_gold_answer_ungraded(
    mixed_file: Path, tmp_path: Path
) -> None:
    from precompute.config import ExperimentConfig
    from precompute.stages import StageContext, run_stage

    store = Store.create(tmp_path / "store")
    ingest(mixed_file, store, "my-model")
    result = run_stage("grade", StageContext(store=store, config=ExperimentConfig()))
    grades = store.read("grades").set_index("trace_id")
    # p1 ("4") and p2 ("9") have golds and are graded; p4 and the 5 MB row have none: no
    # grades row (counting them wrong would lower accuracy for want of a gold answer).
    with_gold = {trace_id_for("my-model", p, 0) for p in ("mixed/p1", "mixed/p2")}
    assert set(grades.index) == with_gold
    assert bool(grades.loc[trace_id_for("my-model", "mixed/p2", 0), "correct"]) is True
    assert result.notes == ["2 trace(s) left ungraded: their problem has no gold answer"]
    assert result.provenance["no_gold"] == 2


def test_both_command_lines_refuse_a_field_mapped_twice_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ingest`` and ``datasets`` read ``--map`` with one parser (datasets.parse_mapping)."""
    from precompute.cli import main

    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"q": "1+1?", "a": "2", "out": "2"}\n')
    twice = ["--map", "prompt=q", "prompt=a"]
    message = "precompute: error: --map gives field 'prompt' twice ('q' and 'a'); give it once\n"
    code = main(["ingest", str(rows), "--store", str(tmp_path / "s"), "--teacher", "t", *twice])
    assert (code, capsys.readouterr().err) == (2, message)
    assert not (tmp_path / "s").exists()  # refused before anything was written
    code = main(["datasets", "local", str(rows), *twice])
    assert (code, capsys.readouterr().err) == (2, message)


# --- one problem, one prompt and one gold; ids that cannot collide (issue 24) --------------------


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def _trace(
    prompt: str, gold: str | None, reasoning: str, answer: str, sample: int | None = None
) -> dict[str, object]:
    """A JSONL row of one trace of problem "q"; a gold or sample of None leaves that field out
    (the row then relies on the stored gold, or is sample 0)."""
    row: dict[str, object] = {"problem_id": "q", "prompt": prompt}
    if gold is not None:
        row["gold"] = gold
    row |= {"reasoning": reasoning, "answer": answer}
    return row if sample is None else row | {"sample": sample}


def test_a_second_gold_for_one_problem_is_refused_and_grades_use_the_stored_one(
    tmp_path: Path,
) -> None:
    """Item 6: the first gold was stored, nothing was said, and each later row was graded
    against its own gold (here "5": the second trace, answering 5, came out correct)."""
    path = _jsonl(
        tmp_path / "g.jsonl",
        [
            _trace("2+2?", "4", "2+2=4", "4"),
            _trace("2+2?", "5", "It is 5", "5", sample=1),
            _trace("2+3?", None, "Two and three", "5", sample=2),
        ],
    )
    store = Store.create(tmp_path / "store")
    report = ingest(path, store, "m")
    assert report.kept == 1
    bad = {q.line: q for q in report.quarantined}
    assert bad[2].field == "gold" and "stored gold of problem 'g/q' (line 1: '4')" in bad[2].reason
    assert bad[3].field == "prompt" and "(line 1: '2+2?')" in bad[3].reason
    assert store.read("problems")["gold"].tolist() == ["4"]
    # Across files too: the store's gold is the stored one.
    other = _jsonl(
        tmp_path / "g2.jsonl",
        [{"problem_id": "g/q", "gold": "5", "reasoning": "5", "answer": "5"}],
    )
    report = ingest(other, store, "m2")
    assert report.kept == 0 and "(the store: '4')" in report.quarantined[0].reason


def test_overwrite_replaces_the_gold_and_regrades_every_trace_of_the_problem(
    tmp_path: Path,
) -> None:
    """With --overwrite the later gold replaces the stored one and every graded trace of the
    problem is graded again against it: never one verdict per gold."""
    store = Store.create(tmp_path / "store")
    first = _jsonl(
        tmp_path / "a.jsonl",
        [_trace("2+2?", "5", "2+2=4", "4"), _trace("2+2?", "5", "five", "5", sample=1)],
    )
    ingest(first, store, "m", dataset="d")
    grades = store.read("grades").set_index("trace_id")["correct"].to_dict()
    four, five = trace_id_for("m", "d/q", 0), trace_id_for("m", "d/q", 1)
    assert grades == {four: False, five: True}  # against the gold "5"
    fix = _jsonl(
        tmp_path / "fix.jsonl",
        [{"problem_id": "d/q", "gold": "4", "reasoning": "4", "answer": "4", "sample": 2}],
    )
    report = ingest(fix, store, "m", overwrite=True)
    assert store.read("problems")["gold"].tolist() == ["4"]
    grades = store.read("grades").set_index("trace_id")["correct"].to_dict()
    # Every trace now graded against "4": answers 4, 5, 4 -> correct, wrong, correct.
    assert grades == {four: True, five: False, trace_id_for("m", "d/q", 2): True}
    # Graded again: the two earlier traces and this file's own (graded once on the way in).
    assert report.kept == 1 and report.regraded == 3


def test_trace_ids_of_look_alike_field_splits_do_not_collide(tmp_path: Path) -> None:
    """Item 7: ids joined the fields with U+001F, which names may hold; teacher "m" on problem
    "ds/p␟ds/q" and teacher "m␟ds/p" on "ds/q" got one id and the second trace was dropped."""
    assert trace_id_for("m", "ds/p\x1fds/q") != trace_id_for("m\x1fds/p", "ds/q")
    store = Store.create(tmp_path / "store")
    a = _jsonl(tmp_path / "a.jsonl", [{"problem_id": "p\x1fds/q", "prompt": "A", "reasoning": "a"}])
    b = _jsonl(tmp_path / "b.jsonl", [{"problem_id": "q", "prompt": "B", "reasoning": "b"}])
    assert ingest(a, store, "m", dataset="ds").kept == 1
    report = ingest(b, store, "m\x1fds/p", dataset="ds")
    assert report.kept == 1 and report.already_present == 0
    assert sorted(store.read("traces")["reasoning"]) == ["a", "b"]


def test_the_demo_stores_trace_ids_are_unchanged_by_the_new_encoding() -> None:
    """No name in the bundled demo holds U+001F, so each stored id is still
    trace_id_for(teacher, problem_id, sample): nothing to migrate."""
    traces = Store.open(REPO / "results" / "demo").read(
        "traces", columns=["trace_id", "teacher", "problem_id", "sample"]
    )
    assert len(traces) > 0
    recomputed = [
        trace_id_for(t, p, s)
        for t, p, s in zip(traces["teacher"], traces["problem_id"], traces["sample"], strict=True)
    ]
    assert recomputed == traces["trace_id"].tolist()


def test_correct_as_a_float_column_from_parquet_is_kept(tmp_path: Path) -> None:
    """Item 8: a 0/1 Parquet column with a gap is a float column (1.0, NaN, 0.0); its rows
    were quarantined on 'correct'."""
    rows = [
        {"problem_id": 1, "prompt": "One", "reasoning": "a", "correct": 1.0},
        {"problem_id": 2, "prompt": "Two", "reasoning": "b", "correct": None},
        {"problem_id": 3, "prompt": "Three", "reasoning": "c", "correct": 0.0},
        {"problem_id": 4, "prompt": "Four", "reasoning": "d", "correct": 0.5},
    ]
    path = tmp_path / "f.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert pa.Table.from_pylist(rows).schema.field("correct").type == pa.float64()
    store = Store.create(tmp_path / "store")
    report = ingest(path, store, "fm")
    assert report.kept == 3
    assert [(q.row, q.field) for q in report.quarantined] == [(4, "correct")]
    grades = store.read("grades").set_index("trace_id")["correct"].to_dict()
    assert grades == {trace_id_for("fm", "f/1"): True, trace_id_for("fm", "f/3"): False}


def test_correct_as_float_text_from_a_csv_is_kept(tmp_path: Path) -> None:
    """Item 8 through a CSV: pandas writes the same 0/1 column with a gap as 1.0, (empty),
    0.0, and those cells are text; they were quarantined on 'correct' like the floats."""
    frame = pd.DataFrame(
        {
            "problem_id": ["1", "2", "3"],
            "prompt": ["One", "Two", "Three"],
            "reasoning": ["a", "b", "c"],
            "correct": [1.0, None, 0.0],
        }
    )
    path = tmp_path / "f.csv"
    frame.to_csv(path, index=False)
    assert "1.0" in path.read_text() and "0.0" in path.read_text()
    store = Store.create(tmp_path / "store")
    report = ingest(path, store, "fm")
    assert report.kept == 3 and report.quarantined == []
    grades = store.read("grades").set_index("trace_id")["correct"].to_dict()
    assert grades == {trace_id_for("fm", "f/1"): True, trace_id_for("fm", "f/3"): False}


def test_nfc_and_nfd_spellings_are_one_problem_and_one_teacher(tmp_path: Path) -> None:
    """Item 9: "é" as one code point (NFC) and as e + U+0301 (NFD) made two entries."""
    import unicodedata

    nfc, nfd = "caf\u00e9", "cafe\u0301"
    assert nfc != nfd and unicodedata.normalize("NFC", nfd) == nfc
    store = Store.create(tmp_path / "store")
    a = _jsonl(tmp_path / "a.jsonl", [{"problem_id": nfc, "prompt": "P", "reasoning": "r"}])
    b = _jsonl(tmp_path / "b.jsonl", [{"problem_id": nfd, "prompt": "P", "reasoning": "r"}])
    assert ingest(a, store, f"model-{nfc}", dataset="d").kept == 1
    report = ingest(b, store, f"model-{nfd}", dataset="d")
    assert report.already_present == 1  # the same trace, not a look-alike second one
    traces = store.read("traces")
    assert traces["problem_id"].tolist() == [f"d/{nfc}"]
    assert traces["teacher"].tolist() == [f"model-{nfc}"]


def test_a_rows_own_teacher_and_sample_win_over_the_command_line(tmp_path: Path) -> None:
    """As docs/bring-your-traces.md says: a row's ``teacher`` wins over ``--teacher``, which
    names the teacher of the rows without one; ``sample`` keeps repeated samples apart."""
    rows = [
        {"problem_id": "p", "prompt": "P", "reasoning": "r1", "teacher": "model-a"},
        {"problem_id": "p", "prompt": "P", "reasoning": "r2", "teacher": "model-a", "sample": 1},
        {"problem_id": "p", "prompt": "P", "reasoning": "r3"},
    ]
    store = Store.create(tmp_path / "store")
    assert ingest(_jsonl(tmp_path / "rows.jsonl", rows), store, "fallback", dataset="d").kept == 3
    traces = store.read("traces").sort_values(["teacher", "sample"])
    assert traces[["teacher", "sample", "reasoning"]].values.tolist() == [
        ["fallback", 0, "r3"],
        ["model-a", 0, "r1"],
        ["model-a", 1, "r2"],
    ]


def test_rows_that_name_their_teacher_need_no_teacher_option(tmp_path: Path) -> None:
    """Rows that each name a teacher ingest without ``--teacher``; a row that names none is
    quarantined with its line and the field (the other rows kept); a blank ``--teacher`` is
    still a usage error."""
    rows = [
        {"problem_id": "p", "prompt": "P", "reasoning": "r1", "teacher": "model-a"},
        {"problem_id": "p", "prompt": "P", "reasoning": "r2", "teacher": "model-b"},
        {"problem_id": "q", "prompt": "Q", "reasoning": "r3"},
    ]
    path = _jsonl(tmp_path / "rows.jsonl", rows)
    result = run_cli(str(path), "--store", str(tmp_path / "s"), "--dataset", "d")
    assert result.returncode == 0, result.stderr
    assert "rows read: 3, kept: 2, quarantined: 1" in result.stdout
    traces = Store.open(tmp_path / "s").read("traces").sort_values("teacher")
    assert traces[["teacher", "reasoning"]].values.tolist() == [
        ["model-a", "r1"],
        ["model-b", "r2"],
    ]
    (entry,) = [json.loads(line) for line in (tmp_path / "s" / "quarantine.jsonl").open()]
    assert (entry["line"], entry["field"]) == (3, "teacher")
    assert "--teacher" in entry["reason"]
    with pytest.raises(IngestUsageError, match="--teacher"):
        ingest(path, tmp_path / "s2", " ")


# --- a quarantined line, fixed and ingested later, leaves the quarantine (issue 41) -----------


def test_a_quarantined_line_is_cleared_once_its_fix_is_ingested(tmp_path: Path) -> None:
    """Line 2 had no reasoning; its fix came in a second file (the first is left as it was).
    The fixed trace is kept, so its entry goes; the entry of a line with no problem id (which
    no later row can be said to fix) and a duplicate's entry (keeping its trace does not fix a
    second copy) stay. A fix already in the store clears its entry too."""
    store = Store.create(tmp_path / "store")
    first = _jsonl(
        tmp_path / "mine.jsonl",
        [
            {"problem_id": "a", "prompt": "2+3?", "gold": "5", "reasoning": "2+3=5", "answer": "5"},
            {"problem_id": "b", "prompt": "4+4?", "gold": "8", "answer": "8"},
            {"prompt": "no id", "reasoning": "r"},
            {"problem_id": "a", "prompt": "2+3?", "gold": "5", "reasoning": "again", "answer": "5"},
            {"problem_id": "c", "prompt": "1+1?", "gold": "2", "answer": "2"},
        ],
    )
    report = ingest(first, store, "me", dataset="mine")
    assert [(q.line, q.field) for q in report.quarantined] == [
        (2, "reasoning"),
        (3, "problem_id"),
        (4, "problem_id"),
        (5, "reasoning"),
    ]

    def lines() -> list[int]:
        entries = [json.loads(t) for t in store.quarantine_path.read_text().splitlines()]
        return sorted(e["line"] for e in entries)

    assert lines() == [2, 3, 4, 5]
    fix = _jsonl(
        tmp_path / "fix.jsonl",
        [{"problem_id": "b", "prompt": "4+4?", "gold": "8", "reasoning": "4+4=8", "answer": "8"}],
    )
    fixed = ingest(fix, store, "me", dataset="mine")
    assert fixed.kept == 1 and fixed.quarantined == []
    assert trace_id_for("me", "mine/b", 0) in set(store.read("traces")["trace_id"])
    assert lines() == [3, 4, 5]  # line 2 is fixed; the others are still bad
    # Line 5's trace reaches the store by another file; ingesting that file again (already
    # present, nothing written) is a kept row all the same.
    other = _jsonl(
        tmp_path / "c.jsonl",
        [{"problem_id": "c", "prompt": "1+1?", "gold": "2", "reasoning": "1+1=2", "answer": "2"}],
    )
    ingest(other, store, "me", dataset="mine")
    assert lines() == [3, 4]
    again = ingest(other, store, "me", dataset="mine")
    assert again.already_present == 1 and lines() == [3, 4]


def test_a_batch_output_is_summarised_under_the_dataset_its_traces_join(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The problems are loaded first (dataset "problems"); the batch output's rows name them
    by custom_id and are stored with them. The header said dataset 'batch_output' (the file's
    name), which no stored trace is under; it now names the dataset the traces are in."""
    from precompute.cli import main

    logs = Path(__file__).parent / "fixtures" / "tool_logs" / "openai"
    store = tmp_path / "store"
    load = ["datasets", "local", str(logs / "problems.jsonl"), "--map", "prompt=question",
            "gold=answer", "problem_id=id", "--store", str(store)]  # fmt: skip
    assert main(load) == 0
    capsys.readouterr()
    assert main(["ingest", str(logs / "batch_output.jsonl"), "--store", str(store)]) == 0
    # The first line says which format --format auto chose (issue 40); the summary follows.
    header = next(
        line for line in capsys.readouterr().out.splitlines() if not line.startswith("format:")
    )
    assert header.endswith("dataset 'problems')"), header
    opened = Store.open(store)
    assert set(opened.read("traces")["dataset"]) == {"problems"}
    (record,) = [r for r in opened.manifest["provenance"] if r["stage"] == "ingest"]
    assert record["dataset"] == "problems"
