"""Dataset loaders: every hub format on small local fixtures, the offline/gated hub paths, and
CHAMP from the real ``champ-dataset`` package."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from legival_core.store.schema import TABLES, validate_frame
from legival_core.tasks.gpqa import choice_seed_for, shuffle_choices
from precompute.cli import EXIT_MISSING
from precompute.datasets import (
    DATASETS,
    DatasetError,
    boxed_answer,
    count_arithmetic_ops,
    count_zebra_clues,
    gsm8k_parts,
    load_problems,
    parse_mapping,
)

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]


def _check_schema(frame: pd.DataFrame) -> None:
    assert list(frame.columns) == TABLES["problems"].columns
    validate_frame("problems", frame)  # raises on any mismatch
    assert frame["problem_id"].is_unique


# --- every hub format, from fixtures -------------------------------------------------------------


def test_math500_fixture() -> None:
    frame = load_problems("math500", FIXTURES / "math500.jsonl")
    _check_schema(frame)
    assert frame["problem_id"].tolist() == [
        "math500/test/prealgebra/901",
        "math500/test/algebra/4410",
        "math500/test/prealgebra/77",
    ]
    assert frame["gold"].tolist() == ["50", "5", "\\frac{3}{4}"]
    assert set(frame["task"]) == {"math"}
    assert json.loads(frame["meta"][0])["subject"] == "Prealgebra"


def test_math_full_takes_last_box_and_skips_rows_without_one() -> None:
    frame = load_problems("math", FIXTURES / "hendrycks_math.jsonl")
    _check_schema(frame)
    # \boxed{6}, \fbox{8}, \boxed{2}; the fourth solution has no box and is skipped.
    assert frame["gold"].tolist() == ["6", "8", "2"]
    # ids count within each subject: number theory 0 and 1, prealgebra 0
    assert frame["problem_id"].tolist() == [
        "math/test/number_theory/0",
        "math/test/prealgebra/0",
        "math/test/number_theory/1",
    ]
    skipped = frame.attrs["skipped"]
    assert len(skipped) == 1
    assert "row 4" in skipped[0] and "field 'solution'" in skipped[0]


def test_gpqa_shuffles_with_recorded_seed() -> None:
    frame = load_problems("gpqa", FIXTURES / "gpqa.csv", seed=7)
    _check_schema(frame)
    first = frame.iloc[0]
    meta = json.loads(first["meta"])
    options = ["About 20 m", "About 10 m", "About 40 m", "About 5 m"]  # stripped, correct first
    assert sorted(first["choices"]) == sorted(options)
    # the gold letter points at the correct option after the shuffle
    assert first["choices"]["ABCD".index(first["gold"])] == "About 20 m" == meta["correct_answer"]
    # the recorded seed reproduces the order with the gpqa task's own shuffle
    choices, letter = shuffle_choices(options[0], options[1:], int(first["choice_seed"]))
    assert choices == list(first["choices"]) and letter == first["gold"]
    assert int(first["choice_seed"]) == choice_seed_for("gpqa/recFixtureA1", 7)
    again = load_problems("gpqa", FIXTURES / "gpqa.csv", seed=7)
    assert again["choice_seed"].tolist() == frame["choice_seed"].tolist()
    other = load_problems("gpqa", FIXTURES / "gpqa.csv", seed=8)
    assert other["choice_seed"].tolist() != frame["choice_seed"].tolist()
    assert frame["problem_id"].tolist() == ["gpqa/recFixtureA1", "gpqa/recFixtureB2"]
    assert frame["reference_solution"][1].startswith("tRNA")


def test_connections_gold_is_the_four_groups() -> None:
    frame = load_problems("connections", FIXTURES / "connections.json")
    _check_schema(frame)
    assert frame["problem_id"].tolist() == ["connections/900", "connections/901"]
    groups = json.loads(frame["gold"][1])
    assert groups[0] == ["OAK", "PINE", "ELM", "ASH"] and len(groups) == 4
    meta = json.loads(frame["meta"][1])
    assert meta["categories"][3] == "PRECIPITATION"
    assert frame["prompt"][1].split(", ")[:3] == ["OAK", "PINE", "ELM"]


def test_connections_rejects_groups_that_do_not_match_the_words(tmp_path: Path) -> None:
    puzzle = json.loads((FIXTURES / "connections.json").read_text())[0]
    puzzle["answers"][0]["words"][0] = "PLUTO"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([puzzle]))
    frame = load_problems("connections", path)
    assert len(frame) == 0
    assert "field 'answers'" in frame.attrs["skipped"][0]


def test_gsm8k_gold_and_both_native_workloads() -> None:
    frame = load_problems("gsm8k", FIXTURES / "gsm8k.jsonl")
    _check_schema(frame)
    assert frame["gold"].tolist() == ["19", "200", "13"]
    # solution lines before '####': 2, 3 and 1
    assert frame["workload"].tolist() == [2.0, 3.0, 1.0]
    assert set(frame["workload_kind"]) == {"gold_steps"}
    ops = load_problems("gsm8k", FIXTURES / "gsm8k.jsonl", workload="arith_ops")
    # row 1: 4*6 (1) + 24-5 (1) = 2;  row 2: 60*3 (1) + 180+20 (1) = 2;
    # row 3: 2*2 (1) + 10-4+7 (2) = 3
    assert ops["workload"].tolist() == [2.0, 2.0, 3.0]
    assert set(ops["workload_kind"]) == {"arith_ops"}
    assert "<<" not in frame["reference_solution"][0]
    assert frame["problem_id"].tolist() == ["gsm8k/test/0", "gsm8k/test/1", "gsm8k/test/2"]


def test_lsat_letters_and_options() -> None:
    frame = load_problems("lsat", FIXTURES / "lsat_ar.jsonl")
    _check_schema(frame)
    assert frame["gold"].tolist() == ["A", "E"]  # labels 0 and 4
    assert set(frame["task"]) == {"gpqa"}  # lettered multiple choice
    assert [len(c) for c in frame["choices"]] == [5, 5]
    assert frame["prompt"][1].startswith("Five runners") and frame["prompt"][1].endswith("finish?")


def test_proofwriter_depth_is_the_workload() -> None:
    frame = load_problems("proofwriter", FIXTURES / "proofwriter.jsonl")
    _check_schema(frame)
    assert frame["gold"].tolist() == ["True", "True", "Unknown"]
    # QDep 0, 1, 2: depth 0 has no positive workload, so none is recorded
    assert frame["workload"].isna().tolist() == [True, False, False]
    assert frame["workload"].tolist()[1:] == [1.0, 2.0]
    assert frame["workload_kind"].tolist()[1:] == ["proof_depth", "proof_depth"]
    assert json.loads(frame["meta"][0])["proof_depth"] == 0
    assert (
        set(frame["task"]) == {"jsonl"}
        and "Answer: Unknown" in json.loads(frame["meta"][0])["instructions"]
    )


def test_zebralogic_clues_are_the_workload() -> None:
    frame = load_problems("zebralogic", FIXTURES / "zebralogic.jsonl")
    _check_schema(frame)
    assert frame["workload"].tolist() == [3.0]  # three numbered clues
    assert frame["workload_kind"].tolist() == ["clues"]
    gold = json.loads(frame["gold"][0])
    assert gold["header"] == ["House", "Name", "Pet"] and gold["rows"][1] == ["2", "Ana", "dog"]


def test_parquet_and_csv_rows_load_like_jsonl(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (FIXTURES / "lsat_ar.jsonl").read_text().splitlines()]
    parquet = tmp_path / "lsat.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    from_jsonl = load_problems("lsat", FIXTURES / "lsat_ar.jsonl")
    from_parquet = load_problems("lsat", parquet)
    pd.testing.assert_frame_equal(
        from_jsonl.drop(columns="meta"), from_parquet.drop(columns="meta")
    )
    # CSV cells carry lists and objects as JSON text
    csv_path = tmp_path / "zebra.csv"
    zebra = [json.loads(line) for line in (FIXTURES / "zebralogic.jsonl").read_text().splitlines()]
    pd.DataFrame([{**r, "solution": json.dumps(r["solution"])} for r in zebra]).to_csv(
        csv_path, index=False
    )
    from_csv = load_problems("zebralogic", csv_path)
    assert (
        from_csv["gold"].tolist()
        == load_problems("zebralogic", FIXTURES / "zebralogic.jsonl")["gold"].tolist()
    )


def test_limit_and_errors(tmp_path: Path) -> None:
    assert len(load_problems("gsm8k", FIXTURES / "gsm8k.jsonl", limit=2)) == 2
    with pytest.raises(DatasetError, match="unknown dataset"):
        load_problems("nope")
    with pytest.raises(DatasetError, match="no such file"):
        load_problems("gsm8k", tmp_path / "missing.jsonl")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question": "x", "answer": "#### 1"}\n{"question": \n')
    with pytest.raises(DatasetError, match=r"broken.jsonl, line 2: invalid JSON"):
        load_problems("gsm8k", broken)


def test_local_file_with_a_column_mapping() -> None:
    mapping = parse_mapping(
        ["problem_id=qid", "prompt=question", "gold=answer", "workload=difficulty"]
    )
    frame = load_problems(
        "local", FIXTURES / "custom_problems.csv", mapping=mapping, dataset="quiz", task="jsonl"
    )
    _check_schema(frame)
    assert frame["problem_id"].tolist() == ["quiz/q1", "quiz/q2"]
    assert frame["gold"].tolist() == ["4", "9"]
    assert frame["workload"].tolist() == [1.0, 2.0]
    assert set(frame["task"]) == {"jsonl"}
    assert json.loads(frame["meta"][0])["topic"] == "arithmetic"
    # row 3 has no answer: skipped, with the file's column named
    assert frame.attrs["skipped"] == [
        f"{FIXTURES / 'custom_problems.csv'}, row 3, field 'answer': missing"
    ]
    with pytest.raises(DatasetError, match="FIELD=COLUMN"):
        parse_mapping(["prompt"])


def test_every_registered_loader_has_a_fixture_test() -> None:
    assert set(DATASETS) == {
        "champ",
        "math",
        "math500",
        "gpqa",
        "connections",
        "gsm8k",
        "lsat",
        "proofwriter",
        "zebralogic",
        "local",
    }


# --- helpers: worked examples and properties ------------------------------------------------------


def test_helpers_worked_examples() -> None:
    assert boxed_answer(r"$\boxed{\frac{1}{\sqrt{2}}}$") == r"\frac{1}{\sqrt{2}}"
    assert boxed_answer(r"\boxed{unclosed") is None
    assert count_arithmetic_ops("(5-3)*-2/4") == 3  # '-', '*', '/'; '-2' is a sign
    assert count_arithmetic_ops("") == 0
    gold, lines, calls, ops = gsm8k_parts("a <<1+2=3>>3\n\nb <<3*3*3=27>>27\n#### 27")
    assert (gold, len(lines), calls, ops) == ("27", 2, 2, 3)
    with pytest.raises(ValueError, match="####"):
        gsm8k_parts("no marker")
    assert count_zebra_clues("## Clues:\n1. x.\n2. y.\n10. z.\n") == 3


@given(st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=12), st.data())
def test_ops_count_is_terms_minus_one(numbers: list[int], data: st.DataObject) -> None:
    operators = data.draw(
        st.lists(st.sampled_from("+-*/"), min_size=len(numbers) - 1, max_size=len(numbers) - 1)
    )
    expression = str(numbers[0]) + "".join(
        f" {op} {n}" for op, n in zip(operators, numbers[1:], strict=True)
    )
    assert count_arithmetic_ops(expression) == len(numbers) - 1


@given(st.text(alphabet=st.sampled_from("ab1{}+ "), max_size=30))
def test_boxed_answer_returns_balanced_content(inner: str) -> None:
    depth = 0
    balanced = True
    for char in inner:
        depth += {"{": 1, "}": -1}.get(char, 0)
        balanced &= depth >= 0
    balanced &= depth == 0
    result = boxed_answer("x \\boxed{" + inner + "} y")
    if balanced:
        assert result == inner.strip()


# --- the hub path, without a network ------------------------------------------------------------


def test_hub_offline_is_one_clear_line() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "precompute", "datasets", "gsm8k", "--limit", "1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == EXIT_MISSING  # the hub dataset cannot be reached
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("precompute: error:")]
    assert len(lines) == 1
    try:
        import datasets  # noqa: F401  (an optional extra: both outcomes are one clear line)
    except ImportError:
        assert "pip install datasets" in lines[0]
    else:
        assert "not reachable" in lines[0] and "local file" in lines[0]


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A local TCP listener posing as the hub endpoint: reachable, but never spoken to."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no stored token
    yield
    stop.set()
    thread.join(timeout=2)
    server.close()


def test_gpqa_without_a_token_says_how_to_get_access(fake_hub: None) -> None:
    with pytest.raises(DatasetError) as info:
        load_problems("gpqa", limit=1)
    message = str(info.value)
    assert "\n" not in message
    assert "gated" in message and "HF_TOKEN" in message
    assert "huggingface.co/datasets/Idavidrein/gpqa" in message


def test_unreachable_hub_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    # a port on the loopback interface where nothing listens: refused at once
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(DatasetError, match="not reachable"):
        load_problems("gsm8k", limit=1)


# --- CHAMP from the real package ----------------------------------------------------------------


@pytest.fixture(scope="module")
def champ() -> dict[str, pd.DataFrame]:
    from precompute.champ import champ_first_wrong_steps, champ_problems, champ_traces

    return {
        "problems": champ_problems(),
        "traces": champ_traces(),
        "fws": champ_first_wrong_steps(),
    }


def test_champ_problems(champ: dict[str, pd.DataFrame]) -> None:
    problems = champ["problems"]
    _check_schema(problems)
    assert len(problems) == 270
    assert problems["gold"].str.strip().ne("").all()
    assert problems["reference_solution"].str.strip().ne("").all()
    # workload = number of human solution steps = lines of the reference solution
    steps = problems["reference_solution"].str.split("\n").map(len)
    assert (problems["workload"] == steps).all() and set(problems["workload_kind"]) == {
        "gold_steps"
    }
    first = problems.set_index("problem_id").loc["champ/P_Combinatorics_1"]
    assert first["gold"] == "239" and first["workload"] == 6.0
    assert DATASETS["champ"].load(limit=5).shape[0] == 5
    assert set(problems["task"]) == {"champ"}


def test_champ_traces_four_models_and_human(champ: dict[str, pd.DataFrame]) -> None:
    traces = champ["traces"]
    validate_frame("traces", traces)
    counts = traces["teacher"].value_counts().to_dict()
    assert counts == {
        "gpt-3.5": 270,
        "gpt-4": 270,
        "gpt-4-turbo": 270,
        "palm-2-medium": 270,
        "human": 270,
    }
    assert traces["reasoning"].str.len().gt(0).all()
    assert traces["tokens"].gt(0).all()
    models = traces[traces["teacher"] != "human"]
    assert set(models["source"]) == {"champ:0-Shot"}
    # a solution cut by the length limit has no summary answer
    truncated = models[models["truncated"]]
    assert len(truncated) > 0 and truncated["answer_text"].isna().all()
    assert models.loc[~models["truncated"], "answer_text"].notna().all()
    human = traces[traces["teacher"] == "human"].set_index("problem_id")
    assert human.loc["champ/P_Combinatorics_1", "answer_text"] == "239"


def test_champ_first_wrong_step_labels(champ: dict[str, pd.DataFrame]) -> None:
    fws = champ["fws"]
    traces = champ["traces"].set_index("trace_id")
    # every problem has one annotated model solution in "No C w/o H", identical to 0-Shot
    assert len(fws) == 270 and fws["trace_id"].is_unique
    assert set(fws["labeler"]) == {"human"}
    assert fws["annotated"].str.endswith("|No C w/o H").all()
    assert int((~fws["error_found"]).sum()) == 32  # "No mistake"
    for row in fws[fws["error_found"]].itertuples():
        reasoning = traces.loc[row.trace_id, "reasoning"]
        assert reasoning[row.start : row.end] == row.wrong_step_text
        assert row.step >= 1
    assert fws.loc[~fws["error_found"], "step"].isna().all()


def test_champ_counts_and_store(tmp_path: Path) -> None:
    from legival_core.store.store import Store
    from precompute.champ import champ_counts, write_champ

    counts = champ_counts()
    assert counts["problems"] == 270 and counts["conversations"] == 270 * 4 * 18
    assert counts["fws_annotations"] == 540
    store = Store.create(tmp_path / "store")
    written = write_champ(store, limit=3)
    assert written == {"problems": 3, "traces": 15}
    assert len(store.read("traces")) == 15 and len(store.read("problems")) == 3
