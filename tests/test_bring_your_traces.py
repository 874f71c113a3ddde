"""Bring the traces people already have (issue 26): every format, from the tool's own file to
a fully measured store with ``ingest FILE`` + ``run`` (no ``--map``).

The files are written by the tools themselves, in this test session (a module fixture, about a
minute): Inspect AI runs a small task and lm-evaluation-harness ``--log_samples`` runs a small
task against a loopback ``llama_cpp.server`` serving SmolLM2-135M; the chat completions are that
server's own replies, written as a batch-API output file. Generating them here rather than
committing them keeps the fixtures in step with the installed tools' versions (a committed log
would silently test an old layout). The Hub-dataset formats (OpenR1, OpenThoughts) cannot be
downloaded here: their rows are built through ``datasets`` with the documented columns and
written as the Hub stores them (Parquet, JSON lines); the Thought Anchors folder is written in
its documented layout.

Real components throughout: the tools, the server and model, Punkt, all-MiniLM-L6-v2 and
math-verify through the math task.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from legival_core.provenance import token_sources
from legival_core.store import Store
from precompute.cli import EXIT_OK, main
from tests import tool_logs
from tests.test_formats import _thought_anchors_folder

pytestmark = pytest.mark.slow

#: The model name Inspect records for the task run against the local server.
INSPECT_MODEL = "openai-api/llama/smollm2"
#: format -> (its file, the ingest options beyond --store, the dataset name, the teacher).
Ingested = dict[str, tuple[Path, list[str], str, str]]


@pytest.fixture(scope="module")
def tool_files(llama_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every format's file, written by its tool (see the module docstring)."""
    root = tmp_path_factory.mktemp("tool_files")
    tool_logs.run_tool("inspect", llama_server, root / "inspect")
    tool_logs.run_tool("lm-eval", llama_server, root / "lm_eval")
    eval_logs = sorted((root / "inspect").glob("*.eval"))
    json_logs = sorted((root / "inspect").glob("*.json"))
    assert len(eval_logs) == 1 and len(json_logs) == 1, list((root / "inspect").iterdir())
    (samples,) = sorted((root / "lm_eval" / "results").rglob("samples_legival_arith_*.jsonl"))
    problems = tool_logs.problems_file(root)
    return {
        "server": llama_server,
        "root": root,
        "inspect_eval": eval_logs[0],
        "inspect_json": json_logs[0],
        "lm_eval": samples,
        "problems": problems,
        "openr1": _openr1_parquet(root / "openr1_math.parquet"),
        "sharegpt": _openthoughts_jsonl(root / "openthoughts.jsonl"),
        "thought_anchors": _thought_anchors_folder(root / "math_rollouts"),
    }


def _openr1_parquet(path: Path) -> Path:
    """Two OpenR1-Math rows with the dataset's documented columns, written by ``datasets``."""
    import datasets

    rows = {
        "problem": ["What is 12 + 30?", "Compute 9 times 9."],
        "solution": ["12 + 30 = 42", "9 * 9 = 81"],
        "answer": ["42", "81"],
        "uuid": ["r1-a", "r1-b"],
        "generations": [
            [
                "<think>\n12 + 30: add the tens, 10 + 30 = 40, then 2 more is 42.\n</think>\n"
                "\\boxed{42}",
                "<think>\n12 and 30. Wait, 12 + 30 is 42. Let me check: 42 - 30 = 12. Yes.\n"
                "</think>\nThe sum is \\boxed{42}.",
            ],
            [
                "<think>\nNine nines. 9 * 9 = 81. Hmm, or is it 72? No: 9 * 8 = 72, so "
                "9 * 9 = 81.\n</think>\n\\boxed{81}",
                "<think>\n9 * 9 is 9 * 10 - 9 = 90 - 9 which is",
            ],
        ],
        "correctness_math_verify": [[True, True], [True, False]],
        "finish_reasons": [["stop", "stop"], ["stop", "length"]],
        "is_reasoning_complete": [[True, True], [True, False]],
    }
    datasets.Dataset.from_dict(rows).to_parquet(str(path))
    return path


def _openthoughts_jsonl(path: Path) -> Path:
    """Two OpenThoughts-style rows (``system`` and ``conversations`` of ``from``/``value``),
    written by ``datasets`` as JSON lines."""
    import datasets

    def turn(thought: str, solution: str) -> str:
        return (
            f"<|begin_of_thought|>\n\n{thought}\n\n<|end_of_thought|>\n\n"
            f"<|begin_of_solution|>\n\n{solution}\n\n<|end_of_solution|>"
        )

    rows = {
        "system": ["Your role as an assistant involves thoroughly exploring questions."] * 2,
        "conversations": [
            [
                {"from": "user", "value": "What is 7 + 8?"},
                {
                    "from": "assistant",
                    "value": turn(
                        "7 + 8: 7 + 3 = 10, and 5 more is 15. Let me verify: 15 - 8 = 7. Correct.",
                        "15",
                    ),
                },
            ],
            [
                {"from": "user", "value": "What is 100 - 1?"},
                {
                    "from": "assistant",
                    "value": turn("100 - 1 = 99. Wait, is it 99? Yes, 99.", "The answer is 99."),
                },
            ],
        ],
        "answer": ["15", "99"],
    }
    datasets.Dataset.from_dict(rows).to_json(str(path), lines=True)
    return path


@pytest.fixture(scope="module")
def measured(
    tool_files: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Store, Ingested]:
    """One store with every format ingested by ``ingest FILE`` (no --map, --format sniffed),
    then measured by one ``run --store``."""
    store_dir = tmp_path_factory.mktemp("measured") / "store"
    r1 = ["--teacher", "deepseek-r1"]
    ingested: Ingested = {
        "inspect (.eval)": (tool_files["inspect_eval"], [], "inspect_arith", INSPECT_MODEL),
        # The cut-short run: same model and problems, so a teacher of its own (--teacher wins).
        "inspect (.json)": (
            tool_files["inspect_json"], ["--teacher", "smollm2-4-tokens"], "inspect_arith",
            "smollm2-4-tokens",
        ),
        "lm-eval": (tool_files["lm_eval"], [], "lm_eval_arith", "smollm2"),
        "openr1": (tool_files["openr1"], r1, "openr1_math", "deepseek-r1"),
        "sharegpt": (tool_files["sharegpt"], r1, "openthoughts", "deepseek-r1"),
        "thought-anchors": (tool_files["thought_anchors"], [], "thought_anchors", "r1-distill-8b"),
    }  # fmt: skip
    for file, options, dataset, _ in ingested.values():
        code = main(
            ["ingest", str(file), "--store", str(store_dir), "--dataset", dataset, *options]
        )
        assert code == EXIT_OK, file
    # Chat completions: the problems first (a completion holds no prompt), then the batch.
    code = main(["datasets", "local", str(tool_files["problems"]), "--map", "prompt=question",
                 "gold=answer", "problem_id=id", "--dataset", "chat_arith",
                 "--store", str(store_dir)])  # fmt: skip
    assert code == EXIT_OK
    problems = Store.open(store_dir).read("problems")
    ids = {p.split("/", 1)[1]: p for p in problems["problem_id"] if p.startswith("chat_arith/")}
    batch = tool_logs.openai_batch(tool_files["server"], tool_files["root"], ids)
    assert main(["ingest", str(batch), "--store", str(store_dir)]) == EXIT_OK
    ingested["openai"] = (batch, [], "chat_arith", _served_model(batch))
    assert main(["run", "--store", str(store_dir), "--no-progress"]) == EXIT_OK
    return Store.open(store_dir), ingested


def _served_model(batch: Path) -> str:
    first = json.loads(batch.read_text(encoding="utf-8").splitlines()[0])
    return str(first["response"]["body"]["model"])


def _traces_of(store: Store, teacher: str, dataset: str) -> pd.DataFrame:
    traces = store.read("traces")
    return traces[(traces["teacher"] == teacher) & (traces["dataset"] == dataset)]


FORMATS = ["inspect (.eval)", "inspect (.json)", "lm-eval", "openai", "openr1", "sharegpt",
           "thought-anchors"]  # fmt: skip


@pytest.mark.parametrize("name", FORMATS)
def test_each_format_is_fully_measured(measured: tuple[Store, Ingested], name: str) -> None:
    store, ingested = measured
    _, _, dataset, teacher = ingested[name]
    traces = _traces_of(store, teacher, dataset)
    assert len(traces), (name, sorted(set(store.read("traces")["teacher"])))
    ids = set(traces["trace_id"])
    grades = store.read("grades")
    assert ids <= set(grades["trace_id"])
    assert grades[grades["trace_id"].isin(ids)]["correct"].notna().all()
    steps = store.read("steps")
    steps = steps[steps["trace_id"].isin(ids)]
    assert set(steps["trace_id"]) == ids
    similarity = store.read("similarity")
    assert len(similarity[similarity["trace_id"].isin(ids)]) == len(steps)
    judgments = store.read("judgments")
    assert ids <= set(judgments.loc[judgments["labeler"] == "lexical", "trace_id"])
    efficiency = store.read("trace_efficiency")
    efficiency = efficiency[efficiency["trace_id"].isin(ids)]
    assert set(efficiency["trace_id"]) == ids
    for column in ("tokens", "steps", "redundancy", "backtracking", "compression"):
        assert efficiency[column].notna().all(), (name, column)
    teachers = store.read("teacher_metrics")
    assert len(teachers[(teachers["teacher"] == teacher) & (teachers["dataset"] == dataset)]) == 1


def test_inspect_fields_match_the_log_as_inspect_reads_it(measured: tuple[Store, Ingested]) -> None:
    """Inspect's own reader gives the reference: tokens, epochs, stop reasons, verdicts."""
    from inspect_ai.log import read_eval_log

    store, ingested = measured
    tool = store.read("tool_grades").set_index("trace_id")
    for name in ("inspect (.eval)", "inspect (.json)"):
        file, _, dataset, teacher = ingested[name]
        log = read_eval_log(str(file))
        traces = _traces_of(store, teacher, dataset).set_index(["problem_id", "sample"])
        assert len(traces) == len(log.samples)
        for sample in log.samples:
            row = traces.loc[(f"{dataset}/{sample.id}", sample.epoch - 1)]
            assert int(row["tokens"]) == sample.output.usage.output_tokens
            assert bool(row["truncated"]) == (sample.output.stop_reason == "max_tokens")
            (score,) = sample.scores.values()
            assert tool.loc[row["trace_id"], "correct"] == (score.value == "C")
            assert tool.loc[row["trace_id"], "tool"] == "inspect:match"
    # The 4-token run was cut: every output stopped at the budget.
    _, _, dataset, teacher = ingested["inspect (.json)"]
    assert _traces_of(store, teacher, dataset)["truncated"].all()
    sources = token_sources(store.manifest)
    assert sources.by_teacher[INSPECT_MODEL] == "recorded"
    assert "Inspect AI output.usage.output_tokens" in sources.teacher_label(INSPECT_MODEL)


def test_lm_eval_and_chat_completions_keep_their_tools_facts(
    measured: tuple[Store, Ingested],
) -> None:
    store, ingested = measured
    file, _, dataset, teacher = ingested["lm-eval"]
    lines = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line]
    traces = _traces_of(store, teacher, dataset).set_index("problem_id")
    tool = store.read("tool_grades").set_index("trace_id")
    first_filter = lines[0]["filter"]
    for line in (x for x in lines if x["filter"] == first_filter):
        trace_id = traces.loc[f"{dataset}/{line['doc_id']}", "trace_id"]
        assert tool.loc[trace_id, "correct"] == (line["exact_match"] == 1.0)
        assert traces.loc[f"{dataset}/{line['doc_id']}", "raw"] == line["resps"][0][0]
    sources = token_sources(store.manifest)
    assert sources.by_teacher[teacher] == "counted"  # lm-eval keeps no token counts

    batch, _, _, model = ingested["openai"]
    replies = [json.loads(line) for line in batch.read_text(encoding="utf-8").splitlines()]
    traces = store.read("traces").set_index("problem_id")
    for reply in replies:
        body = reply["response"]["body"]
        row = traces.loc[reply["custom_id"]]
        row = row[row["teacher"] == model].iloc[0] if isinstance(row, pd.DataFrame) else row
        assert int(row["tokens"]) == body["usage"]["completion_tokens"]
        assert bool(row["truncated"]) == (body["choices"][0]["finish_reason"] == "length")
    assert sources.by_teacher[model] == "recorded"


def test_thought_anchors_importances_reach_the_stored_steps(
    measured: tuple[Store, Ingested],
) -> None:
    """On the steps the segment stage stored: chunk 0 ("Let me add.") and chunk 2 ("So the
    sum is 4.") are Punkt sentences of their own, so both map cleanly; chunk 1 has no span."""
    from legival_core.chunk_alignment import align_chunks

    store, ingested = measured
    _, _, dataset, teacher = ingested["thought-anchors"]
    (trace_id,) = _traces_of(store, teacher, dataset)["trace_id"]
    steps = store.read("steps", filters={"trace_id": trace_id})
    chunks = store.read("chunk_importance", filters={"trace_id": trace_id})
    aligned = align_chunks(steps, chunks)
    assert (aligned.chunks, aligned.placed, aligned.clean) == (3, 2, 2)
    assert aligned.steps["importance"].tolist()[0] == 0.05
    assert aligned.steps["importance"].tolist()[-1] == -0.1
