"""The trace-format adapters (issue 26): each tool's documented fields onto our rows, sniffing,
the tool's verdict beside our grade, token provenance, chunk importances on steps.

End to end with files the tools wrote themselves: tests/test_bring_your_traces.py.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.store.provenance import TOKEN_KINDS, token_sources
from legival_core.store.store import Store
from legival_core.text.chunk_alignment import align_chunks
from precompute import formats
from precompute.cli import EXIT_MISSING, EXIT_OK, EXIT_USAGE, main
from precompute.formats.base import as_verdict, split_on_last_think
from precompute.formats.extras import agreement_note
from precompute.formats.sharegpt import split_thought_solution
from precompute.formats.thought_anchors import chunk_spans
from precompute.ingest import ingest
from tests.optional import requires_eval_zips

# --- one record of each tool onto our rows ------------------------------------------------------


def _convert(name: str, record: dict) -> list[dict]:
    return formats.get_format(name).convert(record)


def test_inspect_sample_reasoning_blocks_attachments_epoch_and_budget() -> None:
    """A sample as Inspect writes it: the reasoning in a ContentReasoning block (its text
    behind an attachment), the answer in a text block, epoch 2, cut by max_tokens."""
    sample = {
        "eval": {"model": "openai-api/vllm/qwen3"},
        "id": 7,
        "epoch": 2,
        "input": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}],
        "target": ["2"],
        "output": {
            "model": "qwen3",
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": [
                            {"type": "reasoning", "reasoning": "attachment://abc"},
                            {"type": "text", "text": "2"},
                        ],
                    },
                    "stop_reason": "max_tokens",
                }
            ],
            "usage": {"input_tokens": 12, "output_tokens": 31, "reasoning_tokens": 29},
        },
        "scores": {"match": {"value": "C", "answer": "2"}},
        "attachments": {"abc": "One and one make two."},
    }
    (row,) = _convert("inspect", sample)
    assert row["problem_id"] == 7 and row["sample"] == 1  # epoch 2 is our sample 1
    assert row["prompt"] == "1+1?"  # the user message, not the system one
    assert row["gold"] == "2"
    assert row["reasoning"] == "One and one make two." and row["answer"] == "2"
    assert row["hit_budget"] is True  # truncated if no answer can be extracted (ingest)
    assert row["tokens"] == 31 and "output.usage.output_tokens" in row["tokens_origin"]
    assert row["model"] == "openai-api/vllm/qwen3"  # the eval's model, as the user named it
    assert (row["tool_scorer"], row["tool_correct"], row["tool_answer"]) == (
        "inspect:match",
        True,
        "2",
    )


def test_inspect_redacted_block_and_think_tags_in_text() -> None:
    redacted = {
        "id": "a",
        "output": {
            "choices": [
                {
                    "message": {
                        "content": [
                            {"type": "reasoning", "reasoning": "", "redacted": True,
                             "summary": "Summed the digits."},
                            {"type": "text", "text": "9"},
                        ]
                    },
                    "stop_reason": "stop",
                }
            ]
        },
    }  # fmt: skip
    (row,) = _convert("inspect", redacted)
    assert row["reasoning"] == "Summed the digits." and row["hit_budget"] is False
    assert "tokens" not in row and "tool_scorer" not in row
    plain = {"id": "b", "output": {"choices": [{"message": {"content": "<think>hm</think>4"}}]}}
    (row,) = _convert("inspect", plain)
    assert (row["reasoning"], row["answer"], row["raw"]) == ("hm", "4", "<think>hm</think>4")


def test_inspect_sample_without_output_is_one_bad_record() -> None:
    with pytest.raises(formats.RecordError, match=r"no model output.*failed: boom"):
        _convert("inspect", {"id": 1, "output": {"choices": []}, "error": {"message": "boom"}})


def test_lm_eval_lines_first_filter_only_with_the_metric_as_verdict() -> None:
    adapter = formats.get_format("lm-eval")
    base = {
        "doc_id": 3,
        "doc": {"question": "What is 6 * 7?", "answer": "42"},
        "target": "42",
        "arguments": {"gen_args_0": {"arg_0": "Q: What is 6 * 7?\nA:", "arg_1": {}}},
        "resps": [["Let me think.</think> It is 42."]],
        "metrics": ["exact_match"],
    }
    (row,) = adapter.convert(
        {**base, "filter": "strict", "filtered_resps": ["42"], "exact_match": 1.0}
    )
    assert (row["problem_id"], row["sample"], row["prompt"], row["gold"]) == (
        3,
        0,
        "What is 6 * 7?",
        "42",
    )
    assert (row["reasoning"], row["answer"]) == ("Let me think.", "It is 42.")
    assert (row["tool_scorer"], row["tool_correct"], row["tool_answer"]) == (
        "lm-eval:exact_match", True, "42"
    )  # fmt: skip
    # The same document under a second filter repeats the response: skipped, and said once.
    assert adapter.convert({**base, "filter": "flexible", "exact_match": 0.0}) == []
    assert adapter.convert({**base, "filter": "flexible", "exact_match": 0.0}) == []
    assert adapter._skipped_filters == 2
    assert adapter.closing_notes() == [
        "2 lines of filters other than 'strict' were skipped (they repeat the same responses)"
    ]
    # Without a question in the doc, a chat request's last user message is the prompt.
    chat = json.dumps([{"role": "user", "content": "Add 1 and 1."}])
    (row,) = adapter.convert(
        {**base, "doc": {}, "filter": "strict", "arguments": {"gen_args_0": {"arg_0": chat}}}
    )
    assert row["prompt"] == "Add 1 and 1."


def test_openai_batch_lines_reasoning_fields_budget_and_usage() -> None:
    def line(message: dict, finish: str = "stop", n_tokens: int = 20) -> dict:
        body = {
            "model": "deepseek-reasoner",
            "choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "finish_reason": finish}],
            "usage": {"completion_tokens": n_tokens,
                      "completion_tokens_details": {"reasoning_tokens": 15}},
        }  # fmt: skip
        return {"custom_id": "p1", "response": {"status_code": 200, "body": body}}

    (new_vllm,) = _convert("openai", line({"content": "4", "reasoning": "2+2=4"}))
    (old_vllm,) = _convert("openai", line({"content": "4", "reasoning_content": "2+2=4"}))
    for row in (new_vllm, old_vllm):
        assert (row["problem_id"], row["reasoning"], row["answer"]) == ("p1", "2+2=4", "4")
        assert row["tokens"] == 20 and row["model"] == "deepseek-reasoner"
    # A template that opened <think> in the prompt leaves only the closing tag in the content.
    (closing_only,) = _convert("openai", line({"content": "so 4</think>The answer is 4."}))
    assert (closing_only["reasoning"], closing_only["answer"]) == ("so 4", "The answer is 4.")
    (cut,) = _convert("openai", line({"content": "2+2 is"}, finish="length"))
    assert cut["hit_budget"] is True
    with pytest.raises(formats.RecordError, match="failed with 500"):
        _convert("openai", {"custom_id": "p", "response": {"status_code": 500, "body": {}}})
    # A bare completion has no row key: its own id names the response, not the problem.
    with pytest.raises(formats.RecordError, match="no row key"):
        _convert("openai", line({"content": "4"})["response"]["body"] | {"id": "chatcmpl-1"})


def test_openai_several_choices_are_samples_without_a_split_token_count() -> None:
    body = {
        "model": "m",
        "choices": [
            {"index": 0, "message": {"content": "a</think>1"}, "finish_reason": "stop"},
            {"index": 1, "message": {"content": "b</think>2"}, "finish_reason": "length"},
        ],
        "usage": {"completion_tokens": 50},
    }
    rows = _convert("openai", {"problem_id": "q", "prompt": "?", "response": body})
    assert [(r["sample"], r["answer"], r["hit_budget"]) for r in rows] == [
        (0, "1", False),
        (1, "2", True),
    ]
    # 50 tokens for both choices together: no per-trace count can be read off, so none is.
    assert all("tokens" not in r for r in rows)


def test_openr1_generations_are_samples_with_their_own_verdict_and_finish() -> None:
    record = {
        "uuid": "u-1",
        "problem": "Find x if x + 1 = 3.",
        "answer": "2",
        "generations": ["<think>x = 3 - 1</think>x = 2", "<think>x is 3 - 1 = 2, or"],
        "correctness_math_verify": [True, False],
        "finish_reasons": ["stop", "length"],
    }
    rows = _convert("openr1", record)
    assert [(r["problem_id"], r["sample"]) for r in rows] == [("u-1", 0), ("u-1", 1)]
    assert [r["hit_budget"] for r in rows] == [False, True]
    assert [r["tool_correct"] for r in rows] == [True, False]
    assert rows[0]["reasoning"] == "x = 3 - 1" and rows[0]["answer"] == "x = 2"
    assert rows[1]["complete"] is False  # an opened, never closed think block


def test_sharegpt_both_turn_styles_and_a_stable_id() -> None:
    thoughts = (
        "<|begin_of_thought|>Two plus two.<|end_of_thought|>"
        "<|begin_of_solution|>4<|end_of_solution|>"
    )
    sharegpt = {
        "conversations": [{"from": "human", "value": "2+2?"}, {"from": "gpt", "value": thoughts}]
    }
    openai_style = {
        "conversations": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "<think>2+2</think>4"},
        ]
    }
    (a,) = _convert("sharegpt", sharegpt)
    (b,) = _convert("sharegpt", openai_style)
    assert (a["reasoning"], a["answer"], a["complete"]) == ("Two plus two.", "4", True)
    assert (b["reasoning"], b["answer"]) == ("2+2", "4")
    # No id column: the same problem text gives the same id, in both files.
    assert a["problem_id"] == b["problem_id"] and a["problem_id"].startswith("sha1-")
    assert split_thought_solution("<|begin_of_thought|>cut") == ("cut", None, False)


def test_verdicts_and_the_last_think_split() -> None:
    # Inspect: C correct, I incorrect, P partial (no yes/no), N no answer (wrong, as Inspect's
    # accuracy counts it); lm-eval metric values 1.0 / 0.0; 0.5 is no verdict.
    assert [as_verdict(v) for v in ("C", "I", "P", "N", 1.0, 0.0, 0.5)] == [
        True, False, None, False, True, False, None,
    ]  # fmt: skip
    assert split_on_last_think("x</think>y</think>z") == ("x</think>y", "z", True)


# --- sniffing -----------------------------------------------------------------------------------


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_sniffing_picks_each_format_and_leaves_our_rows_alone(tmp_path: Path) -> None:
    lm = _jsonl(tmp_path / "samples_x.jsonl", [{"doc_id": 0, "resps": [["a"]], "doc": {}}])
    batch = _jsonl(tmp_path / "batch.jsonl", [{"custom_id": "1", "response": {"body": {}}}])
    completion = tmp_path / "reply.json"
    completion.write_text(json.dumps({"choices": [{"message": {"content": "4"}}]}), "utf-8")
    r1 = _jsonl(tmp_path / "r1.jsonl", [{"problem": "p", "generations": ["g"], "answer": "1"}])
    chats = _jsonl(tmp_path / "ot.jsonl", [{"conversations": []}])
    # GPQA-like rows of ours have a "choices" list of option texts: still ours.
    ours = _jsonl(
        tmp_path / "ours.jsonl", [{"problem_id": 1, "reasoning": "r", "choices": ["A", "B"]}]
    )
    zipped = tmp_path / "log.eval"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("header.json", json.dumps({"eval": {"model": "m"}}))
    folder = tmp_path / "ta" / "problem_1"
    folder.mkdir(parents=True)
    (folder / "chunks_labeled.json").write_text("[]", "utf-8")
    found = {p.name: formats.sniff_format(str(p)) for p in
             (lm, batch, completion, r1, chats, ours, zipped, tmp_path / "ta")}  # fmt: skip
    assert found == {
        "samples_x.jsonl": "lm-eval",
        "batch.jsonl": "openai",
        "reply.json": "openai",
        "r1.jsonl": "openr1",
        "ot.jsonl": "sharegpt",
        "ours.jsonl": "legival",
        "log.eval": "inspect",
        "ta": "thought-anchors",
    }
    assert formats.sniff_format("owner/name") == "legival"  # a Hub name: --format says more


# --- Thought Anchors: spans, steps ----------------------------------------------------------------


def _thought_anchors_folder(root: Path, model: str = "r1-distill-8b") -> Path:
    """One problem folder in the layout of the Thought Anchors rollouts: three chunks, the
    second with a doubled space where the solution has one."""
    folder = root / model / "temperature_0.6_top_p_0.95" / "correct_base_solution" / "problem_4"
    folder.mkdir(parents=True)
    solution = "Let me add. Two plus two is four. So the sum is 4.</think>The answer is 4."
    files = {
        "problem.json": {"problem": "What is 2 + 2?", "gt_answer": "4", "level": "Level 1"},
        "base_solution.json": {
            "prompt": "What is 2 + 2? <think>\n",
            "solution": solution,
            "full_cot": "What is 2 + 2? <think>\n" + solution,
            "answer": "4",
            "is_correct": True,
        },
        "chunks_labeled.json": [
            {
                "chunk": "Let me add.",
                "chunk_idx": 0,
                "function_tags": ["plan_generation"],
                "accuracy": 0.9,
                "counterfactual_importance_accuracy": 0.05,
                "resampling_importance_accuracy": 0.02,
            },
            {
                "chunk": "Two  plus two is four.",
                "chunk_idx": 1,
                "function_tags": ["active_computation"],
                "accuracy": 0.6,
                "counterfactual_importance_accuracy": 0.4,
            },
            {
                "chunk": "So the sum is 4.",
                "chunk_idx": 2,
                "function_tags": ["result_consolidation"],
                "accuracy": 1.0,
                "counterfactual_importance_accuracy": -0.1,
            },
        ],
    }
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content), encoding="utf-8")
    return root


def test_chunk_spans_are_found_in_order() -> None:
    text = "a. b. a. c."
    # The second "a." is found after "b.", not at 0 again.
    assert chunk_spans(text, ["a.", "b.", "a.", "zz", "c."]) == [
        (0, 2),
        (3, 5),
        (6, 8),
        None,
        (9, 11),
    ]


def test_chunk_spans_allow_for_the_splitters_whitespace() -> None:
    """Thought Anchors' splitter strips each chunk and may turn a line break into a space or
    keep a doubled one: a chunk that differs from the reasoning only in its runs of white
    space is found, with the span of the reasoning's own characters."""
    text = "First line\nof it.  Then   two.\n\nDone."
    assert chunk_spans(text, ["First line of it.", "Then two.", "Done."]) == [
        (0, 17),
        (19, 30),
        (32, 37),
    ]
    # Only white space is forgiven: other characters must match.
    assert chunk_spans(text, ["First lines of it."]) == [None]


def test_thought_anchors_folder_to_chunk_rows_and_tool_verdict(tmp_path: Path) -> None:
    root = _thought_anchors_folder(tmp_path / "rollouts")
    report = ingest(root, tmp_path / "store", None, file_format="auto")
    assert report.kept == 1 and report.teacher == "r1-distill-8b"  # from the folder layout
    store = Store.open(tmp_path / "store")
    trace = store.read("traces").iloc[0]
    assert trace["reasoning"] == "Let me add. Two plus two is four. So the sum is 4."
    assert trace["answer_text"] == "The answer is 4."
    chunks = store.read("chunk_importance").sort_values("chunk")
    # "Let me add." is [0, 11); chunk 1's doubled space is the splitter's, so it is found as
    # the reasoning's "Two plus two is four." (21 characters) at 12: [12, 33); "So the sum
    # is 4." (16 characters) starts after "Let me add. Two plus two is four. ", which is
    # 11 + 1 + 21 + 1 = 34 characters long: [34, 50).
    assert chunks["start"].notna().all()
    spans = list(zip(chunks["start"].astype(int), chunks["end"].astype(int), strict=True))
    assert spans == [(0, 11), (12, 33), (34, 34 + 16)]
    assert chunks["importance"].tolist() == [0.05, 0.4, -0.1]
    tool = store.read("tool_grades")
    assert tool[["tool", "correct", "answer"]].values.tolist() == [
        ["thought-anchors:is_correct", True, "4"]
    ]
    summary = report.summary()
    assert "3 of 3 chunks found in the reasoning" in summary
    # Our grade (math-verify of "The answer is 4." against 4) agrees with theirs: 1 of 1.
    assert "agrees with Thought Anchors's verdict on 1 of 1 traces (100.0%)" in summary
    # Each thing the format lacks is said once.
    assert summary.count("no token count of the base solution") == 1

    # Ingesting the folder again adds nothing: no chunk or verdict written twice.
    again = ingest(root, tmp_path / "store", None, file_format="thought-anchors")
    assert again.already_present == 1
    store = Store.open(tmp_path / "store")
    assert len(store.read("chunk_importance")) == 3 and len(store.read("tool_grades")) == 1


def test_chunks_on_steps_by_character_span() -> None:
    """Steps of "Let me add. Two plus two is four. So the sum is 4." as Punkt cuts them:
    [0, 11), [12, 33), [34, 50). Chunk 0 = [0, 11) is step 0 exactly; chunk 2 = [34, 50) is
    step 2; chunk 1 has no span. Both found chunks map cleanly; step 1 gets no importance."""
    steps = pd.DataFrame({"step": [0, 1, 2], "start": [0, 12, 34], "end": [11, 33, 50]})
    chunks = pd.DataFrame(
        {"chunk": [0, 1, 2], "start": [0, None, 34], "end": [11, None, 50],
         "importance": [0.05, 0.4, -0.1], "function_tags": [["plan"], ["calc"], ["result"]]}
    )  # fmt: skip
    aligned = align_chunks(steps, chunks)
    assert (aligned.chunks, aligned.placed, aligned.clean) == (3, 2, 2)
    values = aligned.steps["importance"].tolist()
    assert values[0] == 0.05 and pd.isna(values[1]) and values[2] == -0.1
    assert aligned.steps["function_tags"].tolist() == ["plan", "", "result"]


def test_two_chunks_in_one_step_keep_the_larger_importance() -> None:
    """One step [0, 20) holding chunks [0, 9) (importance 0.1) and [10, 20) (-0.3): each
    shares all of its characters with the step (9 >= 9 / 2, 10 >= 10 / 2), so both reach it;
    the step shows -0.3 (|-0.3| > |0.1|). Chunk 0 ends at 9 and chunk 1 starts at 10, neither
    a step boundary: no chunk is clean."""
    steps = pd.DataFrame({"step": [0], "start": [0], "end": [20]})
    chunks = pd.DataFrame(
        {"chunk": [0, 1], "start": [0, 10], "end": [9, 20], "importance": [0.1, -0.3]}
    )
    aligned = align_chunks(steps, chunks)
    assert aligned.steps["importance"].tolist() == [-0.3]
    assert aligned.steps["n_chunks"].tolist() == [2]
    assert (aligned.placed, aligned.clean) == (2, 0)


@settings(deadline=None, max_examples=50)  # shared CPUs: no timing assertions
@given(st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=12), st.data())
def test_chunks_equal_to_steps_map_cleanly_one_to_one(
    lengths: list[int], data: st.DataObject
) -> None:
    """When the chunks are exactly the steps (one space between steps), every chunk is placed,
    clean, and its step carries its importance."""
    starts, position = [], 0
    for length in lengths:
        starts.append(position)
        position += length + 1
    ends = [s + n for s, n in zip(starts, lengths, strict=True)]
    values = data.draw(st.lists(st.floats(-1, 1), min_size=len(lengths), max_size=len(lengths)))
    steps = pd.DataFrame({"step": range(len(lengths)), "start": starts, "end": ends})
    chunks = pd.DataFrame(
        {"chunk": range(len(lengths)), "start": starts, "end": ends, "importance": values}
    )
    aligned = align_chunks(steps, chunks)
    assert aligned.placed == aligned.clean == len(lengths)
    assert aligned.steps["importance"].tolist() == values
    assert aligned.steps["n_chunks"].tolist() == [1] * len(lengths)


# --- ingest: teacher, notes, provenance ---------------------------------------------------------


def _lm_eval_file(folder: Path, n_docs: int, model: str | None = "smollm2") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if model is not None:
        (folder / "results_2026-01-01T00-00-00.json").write_text(
            json.dumps({"model_name": model, "config": {"model_args": f"model={model}"}}), "utf-8"
        )
    rows = [
        {"doc_id": i, "doc": {"question": f"What is {i} + {i}?"}, "target": str(2 * i),
         "resps": [[f"Double {i}.</think>{2 * i if i % 2 == 0 else 0}"]], "filter": "none",
         "filtered_resps": [str(2 * i)], "metrics": ["exact_match"],
         "exact_match": 1.0 if i < 2 else 0.0}
        for i in range(1, n_docs + 1)
    ]  # fmt: skip
    return _jsonl(folder / "samples_arith_2026-01-01T00-00-00.jsonl", rows)


def test_lm_eval_ingest_teacher_agreement_and_once_only_notes(tmp_path: Path) -> None:
    """Four documents: the answers 0, 4, 0, 8 against golds 2, 4, 6, 8, so our grade is
    wrong, right, wrong, right; the file's exact_match is 1.0 for doc 1 only (i < 2), so
    lm-eval says right, wrong, wrong, wrong. Agreement: doc 1 (F vs T) no, doc 2 (T vs F) no,
    doc 3 (F vs F) yes, doc 4 (T vs F) no: 1 of 4 = 25.0%; we say correct 2, lm-eval 1."""
    file = _lm_eval_file(tmp_path / "out" / "smollm2", 4)
    report = ingest(file, tmp_path / "store", None, file_format="auto")
    assert report.kept == 4 and report.teacher == "smollm2"
    summary = report.summary()
    assert "agrees with lm-evaluation-harness's verdict on 1 of 4 traces (25.0%)" in summary
    assert "we say correct 2, it says 1" in summary
    assert summary.count("records no token counts") == 1  # once, not per row
    grades = Store.open(tmp_path / "store").read("grades").sort_values("trace_id")
    assert grades["correct"].sum() == 2  # our grade, not the tool's, is the grade
    # --teacher overrides the model the file names.
    report = ingest(file, tmp_path / "store2", "renamed", file_format="lm-eval")
    assert set(Store.open(tmp_path / "store2").read("traces")["teacher"]) == {"renamed"}


def test_a_file_that_names_no_model_needs_a_teacher(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = _lm_eval_file(tmp_path / "bare", 2, model=None)
    report = ingest(file, tmp_path / "store", None, file_format="lm-eval")
    assert report.kept == 0 and {q.field for q in report.quarantined} == {"teacher"}
    assert "give --teacher" in report.quarantined[0].reason
    # Formats whose files never name a model refuse at once, on the command line.
    r1 = _jsonl(tmp_path / "r1.jsonl", [{"problem": "p", "answer": "1", "generations": ["g"]}])
    code = main(["ingest", str(r1), "--store", str(tmp_path / "s"), "--format", "openr1"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and "--teacher" in err and err.count("\n") == 1


def test_the_hub_path_gives_one_line_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["ingest", "open-r1/OpenR1-Math-220k", "--format", "openr1", "--teacher",
                 "deepseek-r1", "--store", str(tmp_path / "s")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == EXIT_MISSING and err.count("\n") == 1 and "Traceback" not in err
    assert "open-r1/OpenR1-Math-220k" in err


def test_recorded_token_counts_say_where_they_come_from(tmp_path: Path) -> None:
    message = {"content": "4", "reasoning": "2+2"}
    body = {
        "model": "qwen3",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"completion_tokens": 7},
    }
    file = _jsonl(
        tmp_path / "replies.jsonl",
        [{"problem_id": "p", "prompt": "2+2?", "gold": "4", "response": body}],
    )
    report = ingest(file, tmp_path / "store", None, file_format="auto")
    assert report.kept == 1
    store = Store.open(tmp_path / "store")
    assert store.read("traces")["tokens"].tolist() == [7]
    sources = token_sources(store.manifest)
    assert sources.by_teacher == {"qwen3": "recorded"}
    assert sources.teacher_label("qwen3").startswith(TOKEN_KINDS["recorded"])
    assert "usage.completion_tokens" in sources.teacher_label("qwen3")
    # A rerun writes no trace and changes nothing about where the counts came from.
    ingest(file, tmp_path / "store", None, file_format="auto")
    assert token_sources(Store.open(tmp_path / "store").manifest).by_teacher == {
        "qwen3": "recorded"
    }


def test_agreement_note_arithmetic() -> None:
    # 5 pairs (ours, theirs), agreeing on pairs 1 and 3 only: 2 of 5 = 40.0%; we say correct
    # in pairs 1, 2, 4 (3), they in pairs 1 and 5 (2).
    pairs = [(True, True), (True, False), (False, False), (True, False), (False, True)]
    note = agreement_note(pairs, "Inspect AI")
    assert note.startswith("our grade agrees with Inspect AI's verdict on 2 of 5")
    assert "(40.0%)" in note and "we say correct 3, it says 2" in note


def test_cli_ingest_of_a_tool_file_exits_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = _lm_eval_file(tmp_path / "o" / "m", 2)
    code = main(["ingest", str(file), "--store", str(tmp_path / "s")])
    out = capsys.readouterr().out
    assert code == EXIT_OK and "format: lm-eval (lm-evaluation-harness)" in out


def test_a_budget_cut_is_truncated_only_without_an_answer(tmp_path: Path) -> None:
    """Three completions: one stopped normally, two at their budget. Of those two, the
    first had already written its boxed answer (4, the gold), the second stops mid-sentence
    before any number:
    only the second is truncated (docs/metrics/decomposition.md), and it is graded wrong."""

    def reply(content: str, finish: str) -> dict:
        choice = {"index": 0, "message": {"content": content}, "finish_reason": finish}
        return {"model": "m", "choices": [choice], "usage": {"completion_tokens": 9}}

    rows = [
        {"problem_id": "a", "prompt": "2+2?", "gold": "4", "response": reply("4", "stop")},
        {"problem_id": "b", "prompt": "2+2?", "gold": "4",
         "response": reply("so the answer is \\boxed{4} and", "length")},
        {"problem_id": "c", "prompt": "2+2?", "gold": "4",
         "response": reply("Adding two and two gives", "length")},
    ]  # fmt: skip
    report = ingest(_jsonl(tmp_path / "r.jsonl", rows), tmp_path / "s", None, file_format="openai")
    store = Store.open(tmp_path / "s")
    traces = store.read("traces").sort_values("problem_id")
    assert traces["truncated"].tolist() == [False, False, True]
    grades = store.read("grades").set_index("trace_id")
    assert not grades.loc[traces["trace_id"].iloc[2], "correct"]
    assert "2 traces stopped at their output budget; 1 of them hold no extractable answer" in (
        report.summary()
    )


def test_a_generation_cut_inside_its_thinking_is_truncated(tmp_path: Path) -> None:
    """OpenR1 rows: both generations stopped at their budget ("length"). The first closed its
    think block and wrote \\boxed{81}; the second stopped inside its thinking, after "90 - 9",
    so it wrote no final answer at all: truncated (r_ctx) and graded as giving no answer,
    whatever a phrase of the unfinished reasoning would be graded as (a truncated trace is
    never correct: the decomposition refuses the pair). Then we agree with math-verify's
    verdicts (True, False) on both."""
    rows = [
        {
            "uuid": "nine",
            "problem": "Compute 9 times 9.",
            "answer": "81",
            "generations": [
                "<think>9 * 9 = 81.</think>\\boxed{81} and",
                "<think>\n9 * 9 is 9 * 10 - 9 = 90 - 9 which is",
            ],
            "correctness_math_verify": [True, False],
            "finish_reasons": ["length", "length"],
        }
    ]
    report = ingest(_jsonl(tmp_path / "r1.jsonl", rows), tmp_path / "s", "r1", file_format="auto")
    store = Store.open(tmp_path / "s")
    traces = store.read("traces").sort_values("sample")
    assert traces["truncated"].tolist() == [False, True]
    grades = store.read("grades").set_index("trace_id").loc[traces["trace_id"]]
    assert grades["correct"].tolist() == [True, False]
    assert grades["status"].tolist()[1] == "no_answer" and pd.isna(grades["extracted"].iloc[1])
    summary = report.summary()
    assert "2 traces stopped at their output budget; 1 of them" in summary
    assert "verdict on 2 of 2 traces (100.0%)" in summary


TOOL_LOGS = Path(__file__).resolve().parent / "fixtures" / "tool_logs"


def test_batch_output_finds_the_problems_loaded_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/bring-your-traces.md's two commands for chat completions, as written: the problems
    (llama.cpp's server answered them) go in as dataset 'problems', the batch output file is
    ingested without --dataset, and each custom_id names its problem by the id it was loaded
    with. A custom_id two datasets share is refused with both names."""
    store = tmp_path / "s"
    problems = TOOL_LOGS / "openai" / "problems.jsonl"
    batch = TOOL_LOGS / "openai" / "batch_output.jsonl"
    code = main(["datasets", "local", str(problems), "--map", "problem_id=id",
                 "prompt=question", "gold=answer", "--store", str(store)])  # fmt: skip
    assert code == EXIT_OK
    capsys.readouterr()
    assert main(["ingest", str(batch), "--store", str(store)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "rows read: 3, kept: 3, quarantined: 0" in out
    assert "3 rows named their problem by the id it has in dataset 'problems'" in out
    traces = Store.open(store).read("traces")
    assert sorted(traces["problem_id"]) == ["problems/add-1", "problems/add-2", "problems/mul-1"]
    assert set(traces["dataset"]) == {"problems"}

    # The same ids in a second dataset: which one is meant is not guessed.
    code = main(["datasets", "local", str(problems), "--map", "problem_id=id",
                 "prompt=question", "gold=answer", "--dataset", "again",
                 "--store", str(store)])  # fmt: skip
    assert code == EXIT_OK
    report = ingest(batch, tmp_path / "s", "other-model", file_format="auto")
    assert report.kept == 0
    assert "('again/add-1', 'problems/add-1'): give --dataset" in report.quarantined[0].reason


def test_a_tools_task_names_the_dataset(tmp_path: Path) -> None:
    """Without --dataset the dataset is the task the tool ran, not the log's file name (which
    carries a time stamp): two runs of one task, by two models, share their problems and are
    compared on one benchmark. Inspect names the task in the log's eval spec (the committed
    logs ran a task called "task"); lm-eval in the samples file's name."""
    (eval_log,) = sorted((TOOL_LOGS / "inspect").glob("*.eval"))
    (json_log,) = sorted((TOOL_LOGS / "inspect").glob("*.json"))
    requires_eval_zips()  # also for reading the header here
    if sys.version_info < (3, 14):
        import zipfile_zstd  # noqa: F401  (teaches zipfile Inspect's Zstandard members)

    with zipfile.ZipFile(eval_log) as archive:
        task = json.loads(archive.read("header.json"))["eval"]["task"]
    store = tmp_path / "s"
    first = ingest(eval_log, store, None, file_format="auto")
    second = ingest(json_log, store, "smollm2-4-tokens", file_format="auto")
    assert first.dataset == second.dataset == task
    traces = Store.open(store).read("traces")
    assert set(traces["dataset"]) == {task} and len(traces) == 6 + 3
    assert len(Store.open(store).read("problems")) == 3  # the same three problems
    samples = _lm_eval_file(tmp_path / "out" / "smollm2", 2)  # samples_arith_<date>.jsonl
    assert ingest(samples, store, None, file_format="auto").dataset == "arith"


def test_outputs_without_a_reasoning_part_are_said_once(tmp_path: Path) -> None:
    """SmolLM2 thinks in no block of its own: each of the 6 outputs in the committed Inspect
    log is both the reasoning and the answer, which the summary says once (a reasoning model's
    trace, split on its </think>, is not counted)."""
    requires_eval_zips()
    (eval_log,) = sorted((TOOL_LOGS / "inspect").glob("*.eval"))
    summary = ingest(eval_log, tmp_path / "s", None, file_format="auto").summary()
    wanted = "6 of 6 traces have no reasoning apart from the answer"
    assert summary.count(wanted) == 1, summary
    rows = [{"problem_id": "p", "prompt": "2+2?", "gold": "4",
             "response": {"model": "m", "choices": [{"index": 0, "finish_reason": "stop",
                          "message": {"content": "2 and 2 make 4.</think>4"}}]}}]  # fmt: skip
    report = ingest(_jsonl(tmp_path / "r.jsonl", rows), tmp_path / "t", None, file_format="auto")
    assert report.kept == 1 and "no reasoning apart" not in report.summary()
