"""Users' files never cost memory, time or good rows (issue 40): each defect the outside probe
found in the format adapters, ``--format auto`` and the readers, reproduced small.

Every test here failed on the code before its fix. The per-adapter fuzz tests are in
tests/test_adapter_fuzz.py.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from legival_core.store.store import Store
from precompute.cli import EXIT_OK, EXIT_USAGE, main
from precompute.formats.thought_anchors import chunk_spans
from precompute.ingest import ingest
from tests.child_process import python_child

REPO = Path(__file__).resolve().parents[1]


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _traces(store: Path) -> Any:
    opened = Store.open(store)
    return opened.read("traces") if opened.has("traces") else None


def _quarantined(report: Any) -> dict[int, tuple[str | None, str]]:
    """Each quarantined row by its line (or row) number: (field, reason)."""
    return {
        (q.line if q.line is not None else q.row): (q.field, q.reason) for q in report.quarantined
    }


# --- 1. --format auto decides on the whole shape of the first rows --------------------------


def _rows_with_options() -> list[dict[str, Any]]:
    """Three documented rows of ours, each with a column of answer options stored as
    ``[{"label", "text"}]``: the shape a completion's ``choices`` was sniffed by."""
    return [
        {
            "problem_id": f"p{i}",
            "prompt": "Which option?",
            "reasoning": f"Option A, {i}.",
            "answer": "A",
            "choices": [{"label": "A", "text": str(i)}, {"label": "B", "text": "7"}],
        }
        for i in (1, 2, 3)
    ]


def test_auto_reads_our_rows_with_an_options_column_as_ours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: 3 rows became 6 traces whose reasoning was the options' texts ("1", "7", …),
    exit 0, with only a "format: openai" note at the end."""
    file = _jsonl(tmp_path / "mine.jsonl", _rows_with_options())
    code = main(["ingest", str(file), "--store", str(tmp_path / "s"), "--teacher", "t"])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    traces = _traces(tmp_path / "s")
    assert sorted(traces["reasoning"]) == ["Option A, 1.", "Option A, 2.", "Option A, 3."]
    # Which format was detected, and why, is the first line: said before anything is written.
    first = out.splitlines()[0]
    assert first.startswith("format: legival (Legi-Val rows), detected by --format auto: ")
    assert "3 of the first 3 lines have its shape" in first


def test_auto_refuses_to_guess_when_two_formats_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row of ours (id, reasoning) that also carries a real completion fits both formats; a
    file whose rows are of two formats too. Neither is guessed: exit 2, one line, no store."""
    completion = [{"index": 0, "message": {"content": "4"}, "finish_reason": "stop"}]
    both = _jsonl(
        tmp_path / "both.jsonl",
        [{"problem_id": "p", "prompt": "2+2?", "reasoning": "Two and two.", "choices": completion}],
    )
    mixed = _jsonl(
        tmp_path / "mixed.jsonl",
        [
            {"problem_id": "p", "prompt": "2+2?", "reasoning": "Two and two."},
            {"doc_id": 0, "doc": {"question": "2+2?"}, "resps": [["4"]], "target": "4"},
        ],
    )
    for file, names in ((both, ("openai", "legival")), (mixed, ("lm-eval", "legival"))):
        store = tmp_path / f"store-{file.stem}"
        code = main(["ingest", str(file), "--store", str(store), "--teacher", "t"])
        err = capsys.readouterr().err
        assert code == EXIT_USAGE and err.count("\n") == 1, err
        assert all(f"--format {n}" in err for n in names) and "not guessed" in err
        assert not store.exists()
    # Given the format, the same file is read as asked.
    code = main(
        [
            "ingest",
            str(both),
            "--store",
            str(tmp_path / "ok"),
            "--teacher",
            "t",
            "--format",
            "legival",
        ]
    )
    assert code == EXIT_OK


def test_a_completion_is_still_detected(tmp_path: Path) -> None:
    body = {
        "model": "m",
        "choices": [{"index": 0, "message": {"content": "a</think>4"}, "finish_reason": "stop"}],
    }
    file = _jsonl(tmp_path / "r.jsonl", [{"problem_id": "p", "prompt": "2+2?", "response": body}])
    report = ingest(file, tmp_path / "s", None, file_format="auto")
    assert report.kept == 1 and any("--format auto chose openai" in n for n in report.notes)


# --- 4, 11. lm-eval ----------------------------------------------------------------------------


def _lm_line(doc_id: int, **extra: Any) -> dict[str, Any]:
    line = {
        "doc_id": doc_id,
        "doc": {"question": f"What is {doc_id} + 1?"},
        "target": str(doc_id + 1),
        "arguments": {"gen_args_0": {"arg_0": "Q", "arg_1": {}}},
        "resps": [[f"So {doc_id + 1}.</think>{doc_id + 1}"]],
        "filter": "none",
        "filtered_resps": [str(doc_id + 1)],
        "metrics": ["exact_match"],
        "exact_match": 1.0,
    }
    line.update(extra)
    return line


def test_an_lm_eval_line_without_a_response_is_quarantined_not_lost(tmp_path: Path) -> None:
    """Before: ``resps: [[]]`` gave no row at all: "rows read: 2" for a 3-line file, nothing
    quarantined, nothing said."""
    file = _jsonl(
        tmp_path / "samples_x_2026-01-01T00-00-00.jsonl",
        [_lm_line(1), _lm_line(2), _lm_line(3, resps=[[]])],
    )
    report = ingest(file, tmp_path / "s", "t", file_format="lm-eval")
    assert (report.rows_read, report.kept) == (3, 2)
    assert _quarantined(report) == {3: ("resps[0]", "holds no response")}


def test_lm_eval_odd_metrics_deep_prompts_and_results_files(tmp_path: Path) -> None:
    """Before, each of these stopped the ingest with a traceback-free error and nothing kept:
    ``metrics: [["exact_match"]]`` (unhashable), a request prompt holding JSON nested 100,000
    deep (RecursionError), and a ``results_*.json`` that is a list or has a text ``config``
    beside the samples (even with --teacher given)."""
    deep = "[" * 100_000 + "]" * 100_000
    lines = [
        _lm_line(1),
        _lm_line(2, metrics=[["exact_match"]]),
        _lm_line(3, doc={}, arguments={"gen_args_0": {"arg_0": deep}}),
    ]
    for results, said in (([1, 2], True), ({"config": "model=x"}, False)):
        folder = tmp_path / f"run-{type(results).__name__}"
        folder.mkdir()
        (folder / "results_2026-01-01T00-00-00.json").write_text(json.dumps(results), "utf-8")
        file = _jsonl(folder / "samples_x_2026-01-01T00-00-00.jsonl", lines)
        report = ingest(file, folder / "s", "t", file_format="lm-eval")
        assert (report.rows_read, report.kept, report.quarantined) == (3, 3, [])
        tool = Store.open(folder / "s").read("tool_grades")
        assert len(tool) == 2  # the line whose metrics name no metric has no verdict
        # A results file that is no object is said once; one that names no model, not at all.
        assert any("not an lm-eval results object" in n for n in report.notes) is said


# --- 5, 6, 9. Inspect --------------------------------------------------------------------------


def _inspect_sample(sample_id: int | str, **extra: Any) -> dict[str, Any]:
    sample: dict[str, Any] = {
        "id": sample_id,
        "epoch": 1,
        "input": f"What is {sample_id} + 1?",
        "target": "2",
        "output": {
            "model": "m",
            "choices": [
                {
                    "message": {"role": "assistant", "content": "<think>one</think>2"},
                    "stop_reason": "stop",
                }
            ],
            "usage": {"output_tokens": 5},
        },
        "scores": {"match": {"value": "C", "answer": "2"}},
    }
    sample.update(extra)
    return sample


def _eval_log(path: Path, samples: list[Any], header: Any = None) -> Path:
    """An Inspect ``.eval`` zip (deflate: the standard library writes it without zipfile-zstd)."""
    header = {"eval": {"model": "m", "task": "t"}} if header is None else header
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps(header))
        for number, sample in enumerate(samples, start=1):
            data = sample if isinstance(sample, bytes) else json.dumps(sample).encode()
            archive.writestr(f"samples/{number}_epoch_1.json", data)
    return path


def test_an_inspect_zip_bomb_is_refused_before_it_is_unpacked(tmp_path: Path) -> None:
    """A sample that unpacks to 40 MB from 40 kB (a 2.6 MB log unpacking to 2.5 GB in the
    probe, read whole: MemoryError under a 4 GiB limit, the good sample lost). With
    --max-trace-mb 1 a member may unpack to 4 MB: the bomb is one quarantined row, refused on
    its declared size before a byte is unpacked; the good sample is kept."""
    bomb = json.dumps(_inspect_sample(2, metadata={"pad": "0" * 40_000_000})).encode()
    log = _eval_log(tmp_path / "bomb.eval", [_inspect_sample(1), bomb])
    assert log.stat().st_size < 200_000
    report = ingest(log, tmp_path / "s", None, file_format="inspect", max_trace_mb=1)
    assert report.kept == 1
    ((field, reason),) = _quarantined(report).values()
    assert field == "sample" and "unpacks to 40.0 MB, above the limit of 4.0 MB" in reason


def test_attachment_references_cannot_amplify_a_small_log(tmp_path: Path) -> None:
    """One 400 kB attachment referenced 1,000 times would resolve to 400 MB of text (the probe:
    a 5 kB log building a 4 GB prompt). The resolved size is bounded (4 x --max-trace-mb)."""
    amplified = _inspect_sample(
        2,
        attachments={"h": "x" * 400_000},
        messages=[{"role": "user", "content": "attachment://h"}] * 1_000,
    )
    log = _eval_log(tmp_path / "amp.eval", [_inspect_sample(1), amplified])
    report = ingest(log, tmp_path / "s", None, file_format="inspect", max_trace_mb=1)
    assert report.kept == 1
    ((field, reason),) = _quarantined(report).values()
    assert field == "attachments" and "resolve to more than 4.0 MB" in reason


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


INSPECT_CASES: dict[str, tuple[Any, str | None]] = {
    "output as text": (_inspect_sample(2, output="boom"), "output"),
    "message as text": (
        _inspect_sample(2, output={"choices": [{"message": "boom"}]}),
        "output.choices[0].message",
    ),
    "a scores entry as text": (_inspect_sample(2, scores={"match": "C"}), "scores.match"),
    "error as text, no output": (
        _inspect_sample(2, output={"choices": []}, error="it broke"),
        "output.choices",
    ),
    "usage as a list": (
        _inspect_sample(2, output={**_inspect_sample(0)["output"], "usage": [1]}),
        "output.usage",
    ),
    "the sample as a list": ([1, 2, 3], "sample"),
    "epoch as text": (_inspect_sample(2, epoch="one"), "epoch"),
    "nested 900 deep": (
        json.dumps(_inspect_sample(2)).replace('"epoch"', f'"metadata": {_nested(900)}, "epoch"'),
        "metadata",
    ),
    "nested 100,000 deep": (
        json.dumps(_inspect_sample(2)).replace(
            '"epoch"', f'"metadata": {_nested(100_000)}, "epoch"'
        ),
        "metadata",
    ),
}


def test_an_inspect_member_that_lies_about_its_size_is_read_no_further(tmp_path: Path) -> None:
    """A member that declares 1,000 bytes and holds 5 MB: unpacking stops at the declared size
    (the bytes are counted while streaming), and the sample is quarantined as unreadable. Before,
    the zip's "Bad CRC" error was not caught and ended the ingest with nothing kept."""
    bomb = json.dumps(_inspect_sample(2, metadata={"pad": "0" * 5_000_000})).encode()
    log = _eval_log(tmp_path / "lie.eval", [_inspect_sample(1), bomb])
    data = bytearray(log.read_bytes())
    with zipfile.ZipFile(log) as archive:
        info = archive.getinfo("samples/2_epoch_1.json")
    small = (1_000).to_bytes(4, "little")
    data[info.header_offset + 22 : info.header_offset + 26] = small  # the local header
    name = info.filename.encode()
    central = data.index(b"PK\x01\x02")  # the first central directory entry
    while data[central + 46 : central + 46 + len(name)] != name:
        central = data.index(b"PK\x01\x02", central + 4)
    data[central + 24 : central + 28] = small  # the central directory
    log.write_bytes(bytes(data))
    report = ingest(log, tmp_path / "s", None, file_format="inspect")
    assert report.kept == 1
    ((field, reason),) = _quarantined(report).values()
    assert field == "sample" and "unreadable" in reason and "CRC" in reason


@pytest.mark.parametrize("case", sorted(INSPECT_CASES))
def test_an_inspect_sample_of_the_wrong_shape_costs_only_itself(case: str, tmp_path: Path) -> None:
    """Before, each stopped the ingest with one line and exit 1: nothing kept, nothing
    quarantined. Now the sample is quarantined naming its field; the good one is kept."""
    bad, field = INSPECT_CASES[case]
    bad = bad.encode() if isinstance(bad, str) else bad
    log = _eval_log(tmp_path / "log.eval", [_inspect_sample(1), bad])
    report = ingest(log, tmp_path / "s", None, file_format="inspect")
    assert (report.rows_read, report.kept) == (2, 1), report.summary()
    ((got, reason),) = _quarantined(report).values()
    assert got == field, reason
    if case.startswith("error"):
        assert "the sample failed: it broke" in reason


def test_an_inspect_header_whose_eval_is_text_needs_only_a_teacher(tmp_path: Path) -> None:
    log = _eval_log(tmp_path / "log.eval", [_inspect_sample(1)], header={"eval": "gsm8k"})
    report = ingest(log, tmp_path / "s", "named", file_format="inspect")
    assert report.kept == 1
    assert any("'eval' is not an object" in n for n in report.notes)
    # The sample's output still names its model, so without --teacher it is taken from there.
    assert ingest(log, tmp_path / "s2", None, file_format="inspect").kept == 1


# --- 10, 19, 20. OpenAI-compatible completions -------------------------------------------------


def _completion(content: str = "Two and two.</think>4", **choice: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "choices": [
            {"index": 0, "message": {"content": content}, "finish_reason": "stop", **choice}
        ],
        "usage": {"completion_tokens": 9},
    }


def test_openai_fields_of_the_wrong_type_cost_only_their_row(tmp_path: Path) -> None:
    """Before, each of these ended the ingest (one line, exit 1, nothing kept)."""

    def row(pid: str, response: Any) -> dict[str, Any]:
        return {"problem_id": pid, "prompt": "2+2?", "response": response}

    rows = [
        row("good", _completion()),
        {"custom_id": "b1", "response": "not an object"},
        row("b2", {**_completion(), "usage": [9]}),
        row("b3", {"model": "m", "choices": [{"index": 0, "message": "4"}]}),
        row("b4", _completion(index="one")),
        row("null-index", _completion(index=None)),
    ]
    report = ingest(_jsonl(tmp_path / "r.jsonl", rows), tmp_path / "s", None, file_format="openai")
    assert {line: field for line, (field, _) in _quarantined(report).items()} == {
        2: "response",
        3: "response.usage",
        4: "response.choices[0].message",
        5: "response.choices[0].index",
    }
    traces = _traces(tmp_path / "s").set_index("problem_id")
    # A null index is the choice's position.
    assert sorted(traces.index) == ["r/good", "r/null-index"]
    assert traces.loc["r/null-index", "sample"] == 0


def test_a_completion_that_carries_its_request_takes_the_prompt_from_it(tmp_path: Path) -> None:
    """Before, both rows were quarantined for a missing prompt."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    parts = [{"role": "user", "content": [{"type": "text", "text": "3+3?"}]}]
    rows = [
        {"problem_id": "a", "request": {"messages": messages}, "response": _completion()},
        {
            "custom_id": "b",
            "body": {"messages": parts},
            "response": {"status_code": 200, "body": _completion("3 and 3.</think>6")},
        },
    ]
    report = ingest(_jsonl(tmp_path / "r.jsonl", rows), tmp_path / "s", None, file_format="auto")
    assert report.kept == 2, report.summary()
    problems = Store.open(tmp_path / "s").read("problems").set_index("problem_id")
    assert problems.loc["r/a", "prompt"] == "2+2?" and problems.loc["r/b", "prompt"] == "3+3?"


def test_batch_output_with_its_input_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A batch output file holds no prompt; the batch input file beside it does. Before,
    ``--requests`` did not exist (exit 2) and every row was quarantined for a missing
    prompt, saying only "load the dataset first"."""
    output = _jsonl(
        tmp_path / "batch_output.jsonl",
        [
            {
                "custom_id": f"q{i}",
                "response": {"status_code": 200, "body": _completion(f"Add.</think>{2 * i}")},
            }
            for i in (1, 2, 3)
        ],
    )
    requests = _jsonl(
        tmp_path / "batch_input.jsonl",
        [
            {
                "custom_id": f"q{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": "m", "messages": [{"role": "user", "content": f"{i} + {i}?"}]},
            }
            for i in (1, 2)
        ],
    )
    code = main(
        ["ingest", str(output), "--store", str(tmp_path / "s"), "--requests", str(requests)]
    )
    out = capsys.readouterr().out
    assert code == EXIT_OK
    assert "rows read: 3, kept: 2, quarantined: 1" in out
    assert "2 prompts taken from --requests" in out
    assert "1 custom_ids are not in --requests" in out
    problems = Store.open(tmp_path / "s").read("problems").set_index("problem_id")
    assert problems.loc["batch_output/q2", "prompt"] == "2 + 2?"
    # Without --requests, the quarantine reason says what to give.
    report = ingest(output, tmp_path / "s2", None, file_format="openai")
    assert report.kept == 0
    assert all("--requests" in q.reason for q in report.quarantined)
    # A --requests file that is not there is a missing input (exit 5), said in one line.
    code = main(
        [
            "ingest",
            str(output),
            "--store",
            str(tmp_path / "s4"),
            "--requests",
            str(tmp_path / "nope.jsonl"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 5 and err.count("\n") == 1 and "nope.jsonl: no such file" in err
    # --requests goes with batch output only.
    code = main(
        [
            "ingest",
            str(output),
            "--store",
            str(tmp_path / "s3"),
            "--format",
            "lm-eval",
            "--teacher",
            "t",
            "--requests",
            str(requests),
        ]
    )
    assert code == EXIT_USAGE and "--requests" in capsys.readouterr().err


# --- 7, 8, 12. Thought Anchors ------------------------------------------------------------------


def _problem_folder(root: Path, name: str, chunks: list[dict[str, Any]] | None = None) -> Path:
    folder = root / "model-x" / "temperature_0.6_top_p_0.95" / "correct_base_solution" / name
    folder.mkdir(parents=True)
    solution = "Two plus two is four. So it is 4.</think>The answer is 4."
    files = {
        "problem.json": {"problem": "What is 2 + 2?", "gt_answer": "4"},
        "base_solution.json": {"solution": solution, "answer": "4", "is_correct": True},
        "chunks_labeled.json": chunks
        if chunks is not None
        else [
            {"chunk": "Two plus two is four.", "chunk_idx": 0},
            {"chunk": "So it is 4.", "chunk_idx": 1},
        ],
    }
    for file, content in files.items():
        (folder / file).write_text(json.dumps(content), encoding="utf-8")
    return folder


def test_chunk_search_is_linear(tmp_path: Path) -> None:
    """4 MB of reasoning and a 400 kB chunk not in it: the white-space-tolerant search was a
    regular expression retried at every start, O(N·M) (0.4 MB and 40 kB ran past a minute;
    this size is a hundred times that). Run in a child with a generous limit: a hang guard,
    not a timing measurement."""
    code = (
        "from precompute.formats.thought_anchors import chunk_spans\n"
        "reasoning = 'a ' * 2_000_000\n"
        "chunk = 'a ' * 200_000 + 'b'\n"
        "print(chunk_spans(reasoning, [chunk, 'a a']))\n"
    )
    done = python_child("-c", code)
    assert done.stdout.strip() == "[None, (0, 3)]", done.stderr[-2000:]


def test_chunk_search_finds_what_the_pattern_found() -> None:
    """The linear search keeps the spans' definition: white space in a chunk stands for any
    run of it, a match may start inside a word, and chunks are found in order."""
    text = "First  line\nof it.  Then   two.\n\nDone.  ab cd"
    assert chunk_spans(text, ["First line of it.", "Then two.", "Done.", "b c", "Done."]) == [
        (0, 18),
        (20, 31),
        (33, 38),
        (41, 44),
        None,
    ]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_or_a_link_in_a_problem_folder_is_never_read(tmp_path: Path) -> None:
    """``problem.json`` as a FIFO blocked the ingest forever; as a symbolic link it was
    followed to a file outside the folder. Both folders are now quarantined naming the file and
    what it is (the store's rule for links and FIFOs); the good folder is kept. The ingest runs
    in a child with a limit so that a FIFO that blocks fails the test instead of hanging it."""
    root = tmp_path / "rollouts"
    _problem_folder(root, "problem_1")
    fifo = _problem_folder(root, "problem_2")
    (fifo / "problem.json").unlink()
    os.mkfifo(fifo / "problem.json")
    linked = _problem_folder(root, "problem_3")
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps({"problem": "a secret", "gt_answer": "4"}), "utf-8")
    (linked / "problem.json").unlink()
    (linked / "problem.json").symlink_to(outside)
    chunks_fifo = _problem_folder(root, "problem_4")
    (chunks_fifo / "chunks_labeled.json").unlink()
    os.mkfifo(chunks_fifo / "chunks_labeled.json")
    code = (
        "import json, sys\n"
        "from precompute.ingest import ingest\n"
        "r = ingest(sys.argv[1], sys.argv[2], None, file_format='thought-anchors')\n"
        "print(json.dumps([r.kept, [[q.field, q.reason] for q in r.quarantined]]))\n"
    )
    done = python_child("-c", code, str(root), str(tmp_path / "s"))
    assert done.returncode == 0, done.stderr[-2000:]
    kept, quarantined = json.loads(done.stdout)
    assert kept == 1
    reasons = sorted(quarantined)
    assert [f for f, _ in reasons] == ["chunks_labeled.json", "problem.json", "problem.json"]
    assert "chunks_labeled.json is a FIFO, not a file; not read" in reasons[0][1]
    assert "is a FIFO, not a file; not read" in reasons[1][1] + reasons[2][1]
    assert "is a symbolic link, not a file; not read" in reasons[1][1] + reasons[2][1]
    prompts = Store.open(tmp_path / "s").read("problems")["prompt"].tolist()
    assert prompts == ["What is 2 + 2?"]


def test_chunk_indices_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    """``chunk_idx`` as text crashed the ingest; 10^12 failed the chunk table's schema after
    the traces were written, so every rerun failed the same way and ``verify`` said ok. Now
    both folders are quarantined before any write, a null index is the chunk's position, and
    a rerun adds nothing."""
    root = tmp_path / "rollouts"
    _problem_folder(root, "problem_1")
    _problem_folder(root, "problem_2", [{"chunk": "Two plus two is four.", "chunk_idx": "x"}])
    _problem_folder(root, "problem_3", [{"chunk": "Two plus two is four.", "chunk_idx": 10**12}])
    _problem_folder(root, "problem_4", [{"chunk": "So it is 4.", "chunk_idx": None}])
    report = ingest(root, tmp_path / "s", None, file_format="thought-anchors")
    assert report.kept == 2
    fields = sorted(q.field or "" for q in report.quarantined)
    assert fields == ["chunks_labeled.json[0].chunk_idx"] * 2
    store = Store.open(tmp_path / "s")
    assert sorted(store.read("traces")["problem_id"]) == [
        "rollouts/problem_1",
        "rollouts/problem_4",
    ]
    chunks = store.read("chunk_importance")
    assert sorted(chunks["chunk"].tolist()) == [0, 0, 1]
    assert store.verify() == []
    again = ingest(root, tmp_path / "s", None, file_format="thought-anchors")
    assert again.already_present == 2 and len(again.quarantined) == 2


# --- 13. lone surrogates -------------------------------------------------------------------------


def test_a_lone_surrogate_in_a_sharegpt_turn_without_an_id_is_quarantined(tmp_path: Path) -> None:
    """Hashing the problem text for an id crashed on it (UnicodeEncodeError, nothing kept)."""
    lines = [
        '{"conversations": [{"from": "human", "value": "2+2?"},'
        ' {"from": "gpt", "value": "<think>two and two</think>4"}]}',
        '{"conversations": [{"from": "human", "value": "bad \\ud800"},'
        ' {"from": "gpt", "value": "<think>x</think>1"}]}',
    ]
    file = tmp_path / "chats.jsonl"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = ingest(file, tmp_path / "s", "t", file_format="sharegpt")
    assert report.kept == 1
    assert _quarantined(report) == {
        2: ("conversations[0].value", "is not valid Unicode (holds a lone surrogate)")
    }


def test_a_lone_surrogate_in_a_problems_file_skips_its_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``datasets local`` stopped with UnicodeEncodeError and loaded nothing."""
    file = tmp_path / "problems.jsonl"
    file.write_text(
        '{"id": "a", "question": "What is 1+1? \\ud800", "answer": "2"}\n'
        '{"id": "b", "question": "What is 2+2?", "answer": "4"}\n',
        encoding="utf-8",
    )
    code = main(
        [
            "datasets",
            "local",
            str(file),
            "--map",
            "problem_id=id",
            "prompt=question",
            "gold=answer",
            "--store",
            str(tmp_path / "s"),
        ]
    )
    out = capsys.readouterr().out
    assert code == EXIT_OK
    assert "1 problems loaded, 1 rows skipped" in out
    assert "row 1, field 'question': is not valid Unicode (holds a lone surrogate)" in out
    assert Store.open(tmp_path / "s").read("problems")["problem_id"].tolist() == ["problems/b"]


# --- 14. a Parquet file damaged in one row group ------------------------------------------------


def test_a_damaged_parquet_row_group_costs_only_its_rows(tmp_path: Path) -> None:
    """Three row groups of 512 rows, the second damaged: before, exit 6 "unreadable after row
    512" and none of the 512 rows read before it kept."""
    file = tmp_path / "traces.parquet"
    rows = [
        {"problem_id": f"p{i}", "prompt": "q", "reasoning": f"Step {i}. Done."} for i in range(1536)
    ]
    pq.write_table(pa.Table.from_pylist(rows), file, row_group_size=512, compression="none")
    group = pq.ParquetFile(file).metadata.row_group(1)
    data = bytearray(file.read_bytes())
    for column in range(group.num_columns):
        chunk = group.column(column)
        start = chunk.data_page_offset
        data[start : start + 64] = b"\xff" * 64  # the page headers of the second row group
    file.write_bytes(bytes(data))
    report = ingest(file, tmp_path / "s", "t")
    assert report.kept == 1024
    ((row, (_field, reason)),) = _quarantined(report).items()
    assert row == 513 and "rows 513-1024 (row group 2 of 3) are unreadable" in reason
    kept = _traces(tmp_path / "s")["problem_id"].str.removeprefix("traces/p").astype(int)
    assert sorted(kept) == [*range(512), *range(1024, 1536)]
