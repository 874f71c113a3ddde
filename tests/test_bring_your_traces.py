"""Bring the traces people already have (issue 26): every format, from the tool's own file to
a fully measured store with ``ingest FILE`` + ``run`` (no ``--map``).

The Inspect AI logs, the lm-evaluation-harness ``--log_samples`` file and the chat completions
in ``tests/fixtures/tool_logs`` were written by the tools themselves: ``python -m
tests.tool_logs all OUT`` runs a small Inspect task and a small lm-eval task against a loopback
``llama_cpp.server`` serving SmolLM2-135M and keeps the server's own chat-completion replies as a
batch-API output file. They are committed rather than written in each test session because on
the shared 2-core test machine SmolLM2 ran at well under one token per second under load: the
three runs took 355 s, 311 s and 152 s.
:func:`test_the_installed_tools_still_write_what_the_adapters_read` keeps them honest: it runs
both tools again on one problem with a short budget and ingests what they write, so a tool
upgrade that changes its layout fails here.

The Hub-dataset formats (OpenR1, OpenThoughts) cannot be downloaded here: their rows are built
through ``datasets`` with the documented columns and written as the Hub stores them (Parquet,
JSON lines); the Thought Anchors folder is written in its documented layout.

Real components throughout: the tools, the server and model, Punkt, all-MiniLM-L6-v2 and
math-verify through the math task.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from legival_core.store.provenance import token_sources
from legival_core.store.store import Store
from precompute.cli import EXIT_OK, main
from precompute.ingest import ingest
from tests import tool_logs
from tests.optional import requires, requires_eval_zips
from tests.test_formats import _thought_anchors_folder

pytestmark = pytest.mark.slow

TOOL_LOGS = Path(__file__).resolve().parent / "fixtures" / "tool_logs"
#: The model name Inspect records for the task run against the local server.
INSPECT_MODEL = "openai-api/llama/smollm2"
#: format -> (its file, the ingest options beyond --store, the dataset name, the teacher).
Ingested = dict[str, tuple[Path, list[str], str, str]]


@pytest.fixture(scope="module")
def tool_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every format's file (see the module docstring), in a fresh folder."""
    requires("datasets")  # writes the OpenR1 and OpenThoughts files as the Hub's tool does
    requires_eval_zips()  # reads Inspect's .eval log
    root = tmp_path_factory.mktemp("tool_files")
    shutil.copytree(TOOL_LOGS, root / "tool_logs")
    logs = root / "tool_logs"
    (eval_log,) = sorted((logs / "inspect").glob("*.eval"))
    (json_log,) = sorted((logs / "inspect").glob("*.json"))
    (samples,) = sorted((logs / "lm_eval").rglob("samples_legival_arith_*.jsonl"))
    return {
        "inspect_eval": eval_log,
        "inspect_json": json_log,
        "lm_eval": samples,
        "problems": logs / "openai" / "problems.jsonl",
        "batch": logs / "openai" / "batch_output.jsonl",
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
    # Chat completions: the problems first (a completion holds no prompt), then the batch,
    # whose custom_id is the problem's id. Its model is also lm-eval's ("smollm2"): renamed.
    code = main(["datasets", "local", str(tool_files["problems"]), "--map", "prompt=question",
                 "gold=answer", "problem_id=id", "--dataset", "chat_arith",
                 "--store", str(store_dir)])  # fmt: skip
    assert code == EXIT_OK
    batch = tool_files["batch"]
    code = main(["ingest", str(batch), "--store", str(store_dir), "--dataset", "chat_arith",
                 "--teacher", "smollm2-chat"])  # fmt: skip
    assert code == EXIT_OK
    ingested["openai"] = (batch, [], "chat_arith", "smollm2-chat")
    assert main(["run", "--store", str(store_dir), "--no-progress"]) == EXIT_OK
    return Store.open(store_dir), ingested


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
    requires("inspect_ai")
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
            # Truncated: stopped at the budget and no answer to extract
            # (docs/metrics/decomposition.md).
            if row["truncated"]:
                assert sample.output.stop_reason == "max_tokens"
            (score,) = sample.scores.values()
            assert tool.loc[row["trace_id"], "correct"] == (score.value == "C")
            assert tool.loc[row["trace_id"], "tool"] == "inspect:match"
    # The 4-token run stopped at its budget every time; the outputs with no answer in them
    # ("10 + ", "To find 3") are truncated, and a truncated trace is never graded correct.
    _, _, dataset, teacher = ingested["inspect (.json)"]
    cut = _traces_of(store, teacher, dataset)
    assert cut["truncated"].sum() >= 2
    grades = store.read("grades").set_index("trace_id")
    assert not grades.loc[cut.loc[cut["truncated"], "trace_id"], "correct"].any()
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

    batch, _, dataset, teacher = ingested["openai"]
    replies = [json.loads(line) for line in batch.read_text(encoding="utf-8").splitlines()]
    traces = _traces_of(store, teacher, dataset).set_index("problem_id")
    assert len(traces) == len(replies)
    for reply in replies:
        body = reply["response"]["body"]
        row = traces.loc[f"{dataset}/{reply['custom_id']}"]  # the problem loaded beforehand
        assert int(row["tokens"]) == body["usage"]["completion_tokens"]
        if row["truncated"]:
            assert body["choices"][0]["finish_reason"] == "length"
        assert row["raw"] == body["choices"][0]["message"]["content"]
    # Only the first request had a 4-token budget: the only one that can be truncated.
    assert traces["truncated"].sum() <= 1
    assert sources.by_teacher[teacher] == "recorded"


def test_thought_anchors_importances_reach_the_stored_steps(
    measured: tuple[Store, Ingested],
) -> None:
    """On the steps the segment stage stored: the three chunks ("Let me add.", "Two  plus two
    is four." found with its doubled space taken as one, "So the sum is 4.") are Punkt
    sentences of their own, so all three map cleanly, each step with its chunk's importance."""
    from legival_core.text.chunk_alignment import align_chunks

    store, ingested = measured
    _, _, dataset, teacher = ingested["thought-anchors"]
    (trace_id,) = _traces_of(store, teacher, dataset)["trace_id"]
    steps = store.read("steps", filters={"trace_id": trace_id})
    chunks = store.read("chunk_importance", filters={"trace_id": trace_id})
    aligned = align_chunks(steps, chunks)
    assert (aligned.chunks, aligned.placed, aligned.clean) == (3, 3, 3)
    assert aligned.steps["importance"].tolist() == [0.05, 0.4, -0.1]
    # run's segment stage stored the same per step.
    stored = store.read("step_importance", filters={"trace_id": trace_id}).sort_values("step")
    assert stored["importance"].tolist() == [0.05, 0.4, -0.1]


@pytest.fixture(scope="module")
def evaluation_tools() -> None:
    """Inspect AI and lm-eval installed (the ingest extra), checked before the server starts."""
    requires("inspect_ai")
    requires("lm_eval")
    requires_eval_zips()


def test_the_installed_tools_still_write_what_the_adapters_read(
    evaluation_tools: None, llama_server: str, tmp_path: Path
) -> None:
    """Inspect and lm-eval, as installed, run again on one problem with an 8-token budget;
    their files go through the adapters (sniffed) with every trace kept."""
    for tool in ("inspect", "lm-eval"):
        tool_logs.run_tool(tool, llama_server, tmp_path / tool, problems=1, max_tokens=8)
    logs = [*sorted((tmp_path / "inspect").glob("*.eval")), *(tmp_path / "inspect").glob("*.json")]
    (samples,) = sorted((tmp_path / "lm-eval").rglob("samples_*.jsonl"))
    kept = {}
    for number, file in enumerate([*logs, samples]):
        report = ingest(file, tmp_path / f"store{number}", None, file_format="auto")
        assert not report.quarantined, [q.reason for q in report.quarantined]
        kept[file.suffix] = report.kept
    # One problem: two epochs in the .eval log, one in the .json log, one lm-eval document.
    assert kept == {".eval": 2, ".json": 1, ".jsonl": 1}
