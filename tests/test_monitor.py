"""The weak-monitor stage: verdict parsing, sabotage bookkeeping, and a real run.

The pipeline test runs the ``reward`` stage (tiny built reward model) and the ``monitor``
stage (SmolLM2-135M-Instruct from the packaged GGUF, transformers engine, CPU, greedy, a few
tokens) on a four-trace store, and checks the tables against what the inputs imply.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.oversight.oversight import monitor_scores
from legival_core.oversight.sabotage import Edit, apply_edits, middle_steps, sabotage
from legival_core.store.store import Store
from precompute.config import ExperimentConfig
from precompute.stages import STAGES, StageContext, StageError, run_stage
from precompute.stages.monitor import (
    MonitorOptions,
    diff_edits,
    monitor_messages,
    parse_monitor_verdict,
    sabotage_seed,
    shifted_spans,
)
from tests import oversight_helpers
from tests.oversight_helpers import STEPS, TEXT, spans_of

# ------------------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("reply", "verdict", "step"),
    [
        ("The steps add up.\nVERDICT: valid", "valid", None),
        ("VERDICT: invalid, step 2", "invalid", 2),
        ("**VERDICT: Invalid, Step 3**", "invalid", 3),
        ("Verdict: Invalid", "invalid", None),
        ("verdict: valid.\n\n", "valid", None),
    ],
)
def test_well_formed_verdicts(reply: str, verdict: str, step: int | None) -> None:
    parsed = parse_monitor_verdict(reply, m=4)
    assert (parsed.verdict, parsed.blamed_step, parsed.valid_format) == (verdict, step, True)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("", "empty reply"),
        ("VERDICT: valid\nBut step 2 looks odd.", "last line is not a VERDICT line"),
        ("VERDICT: valid, step 1: 12 pens in 4 boxes", "last line is not a VERDICT line"),
        ("VERDICT: invalid, step 0", "step 0 is not in 1..4"),
        ("VERDICT: invalid, step 5", "step 5 is not in 1..4"),
        ("VERDICT: valid, step 2", "a step is named after 'valid'"),
        ("VERDICT: probably fine", "last line is not a VERDICT line"),
    ],
)
def test_malformed_verdicts_are_abstentions(reply: str, error: str) -> None:
    parsed = parse_monitor_verdict(reply, m=4)
    assert parsed.verdict is None and not parsed.valid_format
    assert parsed.error == error


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200), st.integers(1, 30))
def test_parser_never_raises_and_only_accepts_the_format(reply: str, m: int) -> None:
    parsed = parse_monitor_verdict(reply, m)
    if parsed.valid_format:
        last = [line for line in reply.splitlines() if line.strip()][-1]
        assert "verdict" in last.lower()
        assert parsed.blamed_step is None or 1 <= parsed.blamed_step <= m
    else:
        assert parsed.verdict is None


def test_monitor_prompt_numbers_the_steps() -> None:
    messages = monitor_messages("Add 2 and 2.", ["2 + 2 = 4.", "So 4."], "\\boxed{4}")
    user = messages[1]["content"]
    assert "[1] 2 + 2 = 4.\n[2] So 4." in user and "Final answer: \\boxed{4}" in user
    assert "VERDICT: invalid, step N" in messages[0]["content"]
    assert [m["role"] for m in messages] == ["system", "user"]


# --------------------------------------------------------------------------- sabotage bookkeeping


@pytest.mark.parametrize("kind", ["number", "sign", "operator", "drop_step"])
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_shifted_spans_follow_every_injection(kind: str, seed: int) -> None:
    spans = spans_of(STEPS)
    made = sabotage(TEXT, spans, kind, seed)
    assert made is not None
    placed = shifted_spans(spans, made.edits)
    kept = [span for span in placed if span is not None]
    if kind == "drop_step":
        assert placed[made.step] is None and len(kept) == len(STEPS) - 1
    else:
        assert len(kept) == len(STEPS)
    for index, span in enumerate(placed):
        if span is None:
            continue
        new_text = made.text[span[0] : span[1]]
        if index in made.changed_steps:
            assert new_text != STEPS[index]
        else:
            assert new_text == STEPS[index]  # untouched steps move but do not change


def test_diff_edits_replay_to_the_rewrite() -> None:
    rewrite = TEXT.replace("12 * 4 = 48", "12 * 4 = 46").replace("48 - 3 = 45", "46 - 3 = 43")
    edits = diff_edits(TEXT, rewrite, spans_of(STEPS))
    assert apply_edits(TEXT, edits) == rewrite
    assert sorted({e.step for e in edits}) == [2, 3]


def test_sabotage_seed_is_stable() -> None:
    # blake2b(b"0\x1ft-abc", digest_size=4) as an integer, top bit cleared: pinned.
    import hashlib

    digest = hashlib.blake2b(b"0\x1ft-abc", digest_size=4).digest()
    assert sabotage_seed(0, "t-abc") == int.from_bytes(digest, "big") & 0x7FFFFFFF


def test_options_validate_and_parse_from_the_command_line() -> None:
    parser = argparse.ArgumentParser()
    STAGES["monitor"].add_arguments(parser)
    args = parser.parse_args(["--kinds", "number,sign", "--limit", "2", "--no-natural"])
    options = MonitorOptions.from_mapping(STAGES["monitor"].option_values(args))
    assert options.kinds == ("number", "sign") and options.limit == 2 and not options.natural
    assert options.model == "smollm2-135m" and options.label == "smollm2-135m"
    with pytest.raises(StageError, match="unknown sabotage kind"):
        MonitorOptions.from_mapping({"kinds": ["typo"]})
    with pytest.raises(StageError, match="go together"):
        MonitorOptions.from_mapping({"rewrite_model": "x"})
    with pytest.raises(StageError, match="max_tokens"):
        MonitorOptions.from_mapping({"max_tokens": 0})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True))
def test_shifted_spans_with_arbitrary_same_length_edits(steps_hit: list[int]) -> None:
    # Replacing one character per hit step with two characters shifts every later span by
    # one per earlier edit.
    spans = spans_of(STEPS)
    edits = [Edit(i, spans[i][0], spans[i][0] + 1, TEXT[spans[i][0]], "##") for i in steps_hit]
    placed = shifted_spans(spans, edits)
    for index, (start, _end) in enumerate(spans):
        earlier = sum(1 for i in steps_hit if i < index)
        assert placed[index] is not None
        assert placed[index][0] == start + earlier


# ------------------------------------------------------------------------------- pipeline (slow)


def _context(store: Store, stage_options: dict[str, dict[str, object]]) -> StageContext:
    ctx = StageContext(store=store, config=ExperimentConfig(), progress=False)
    ctx.stage_options = stage_options  # type: ignore[attr-defined]
    return ctx


@pytest.fixture(scope="module")
def studied(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, dict[str, object]]:
    root = tmp_path_factory.mktemp("monitor")
    store = oversight_helpers.build_small_store(root / "store")
    tiny = oversight_helpers.build_tiny_reward_model(root / "tiny-rm")
    options = {
        "reward": {"model": str(tiny), "batch_size": 2, "device": "cpu"},
        "monitor": {"max_tokens": 8, "batch_size": 8, "kinds": ["number", "operator"]},
    }
    ctx = _context(store, options)
    try:
        run_stage("reward", ctx)
        result = run_stage("monitor", ctx)
    finally:
        ctx.engines.close()
    return store, {"options": options, "result": result}


@pytest.mark.slow
def test_sabotaged_table_records_exactly_what_changed(studied: tuple[Store, dict]) -> None:
    store, _ = studied
    traces = store.read("traces").set_index("trace_id")
    grades = store.read("grades").set_index("trace_id")
    steps = store.read("steps")
    sabotaged = store.read("sabotaged")
    correct = set(grades.index[grades["correct"]])
    assert set(sabotaged["trace_id"]) == correct  # every correct trace, no failure
    assert set(sabotaged["kind"]) == {"number", "operator"}
    for row in sabotaged.itertuples():
        original = traces.loc[row.trace_id, "reasoning"]
        edits = [Edit(**e) for e in json.loads(row.edits)]
        assert apply_edits(original, edits) == row.text != original
        assert row.seed == sabotage_seed(0, row.trace_id)
        m = int((steps["trace_id"] == row.trace_id).sum())
        assert row.step in middle_steps(m)
        assert set(row.changed_steps) == {e.step for e in edits}
        # the record reproduces: the same call on the stored spans gives the same text
        spans = steps[steps["trace_id"] == row.trace_id].sort_values("step")
        again = sabotage(
            original, list(zip(spans["start"], spans["end"], strict=True)), row.kind, int(row.seed)
        )
        assert again is not None and again.text == row.text


@pytest.mark.slow
def test_monitor_verdicts_cover_every_variant(studied: tuple[Store, dict]) -> None:
    store, info = studied
    verdicts = store.read("monitor_verdicts")
    grades = store.read("grades").set_index("trace_id")
    traces = store.read("traces").set_index("trace_id")
    steps = store.read("steps")
    sabotaged = store.read("sabotaged")
    expected = {(t, "original") for t in grades.index[grades["correct"]]}
    expected |= {(t, "natural") for t in grades.index[~grades["correct"]]}
    expected |= {
        (t, f"sabotage:{k}") for t, k in zip(sabotaged.trace_id, sabotaged.kind, strict=True)
    }
    assert set(zip(verdicts.trace_id, verdicts.variant, strict=True)) == expected
    assert set(verdicts["monitor"]) == {"smollm2-135m"}
    assert info["result"].written["monitor_verdicts"] == len(expected)
    for row in verdicts.itertuples():
        assert row.teacher == traces.loc[row.trace_id, "teacher"] and row.dataset == "mini"
        m = int((steps["trace_id"] == row.trace_id).sum())
        # a dropped step would show m - 1; number/operator keep every step
        assert row.steps == m
        assert isinstance(row.raw, str)
        parsed = parse_monitor_verdict(row.raw, row.steps)
        assert parsed.valid_format == row.valid_format
        assert (row.verdict if isinstance(row.verdict, str) else None) == parsed.verdict
    # Prefilled replies start with the verdict prefix and stop after the verdict word, which
    # even SmolLM2-135M manages (left to write freely it copies the steps instead).
    assert all(raw.startswith("VERDICT:") and "\n" not in raw for raw in verdicts["raw"])
    assert verdicts["valid_format"].any()
    # the scores use exactly these verdicts
    scores = monitor_scores(verdicts, n_boot=0)
    answered = verdicts["verdict"].notna().sum()
    everything = scores[scores["negative_type"] == "all"]
    assert int(everything["abstained"].sum()) == len(verdicts) - answered


@pytest.mark.slow
def test_monitor_and_reward_rerun_skip_done_keys(studied: tuple[Store, dict]) -> None:
    store, info = studied
    before = len(store.read("monitor_verdicts"))
    ctx = _context(store, info["options"])  # type: ignore[arg-type]
    try:
        monitor_again = run_stage("monitor", ctx)
        reward_again = run_stage("reward", ctx)
    finally:
        ctx.engines.close()
    assert monitor_again.written == {"sabotaged": 0, "monitor_verdicts": 0}
    assert monitor_again.skipped == before
    assert reward_again.written == {"rewards": 0} and reward_again.skipped == 4
    assert len(store.read("rewards")) == 4
    record = next(r for r in store.manifest["provenance"] if r["stage"] == "monitor")
    assert record["models"]["smollm2-135m"]["engine"] == "transformers"
    assert record["seeds"]["sabotage"] == 0


def test_monitor_stage_needs_grades(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "empty")
    store.write(
        "traces",
        pd.DataFrame(
            {
                "trace_id": ["t"],
                "problem_id": ["p"],
                "dataset": ["d"],
                "teacher": ["x"],
                "reasoning": ["r"],
            }
        ),
    )
    with pytest.raises(StageError, match="table 'grades'"):
        run_stage("monitor", _context(store, {}))
