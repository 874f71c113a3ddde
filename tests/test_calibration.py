"""The calibration suite (issue 18): planted traces, the rule-based student, the report, the page.

* A small seed is built through the real CLI (``python -m precompute calibrate``) with the real
  stages (Punkt, MiniLM, the rule student through the rollout stage, the lexical detector, the
  metrics stage); every enforced row of its report must stay within its tolerance.
* Closed forms worked out by hand, and the library's own transfer code on the same rollouts.
* The rule student runs the shared engine contract (``tests/backend_contract.py``).
* The "Metric validity" page, AppTest, on the built store and on a copy with hostile text.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core.calibration.calibration import (
    FRAMED_QUESTIONS,
    closed_form_curve,
    closed_form_fotu,
    closed_form_hazard_bin,
    closed_form_sotu,
    plant_traces,
    rule_student_correct,
)
from legival_core.store.store import Store
from precompute.backends import make_engine
from precompute.backends.base import GenerationRequest
from precompute.backends.rule_student import RuleStudent, load_answer_key

# The engine contract, run on the rule student below. The continuation test is left out on
# purpose: it expects a language model to go on counting ("1, 2, 3, 4," → "5"), which an
# answer-key instrument does not do; its own continuation rule is tested further down.
from tests.backend_contract import (  # noqa: F401 - collected by pytest
    chat,
    test_bad_request_fails_alone,
    test_completions_come_back_in_request_order,
    test_early_stop_check_ends_generation_early,
    test_early_stop_with_trigger_strings_cuts_after_the_trigger,
    test_greedy_decoding_is_deterministic,
    test_max_tokens_is_respected,
    test_n_samples_give_one_completion_each,
    test_stop_strings_cut_the_text,
)

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "pages" / "metric_validity.py"


# --- the small build -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def calibration_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from precompute.cli import main

    out = tmp_path_factory.mktemp("calibration") / "store"
    assert main(["calibrate", "--store", str(out), "--seed", "0", "--size", "small"]) == 0
    return out


@pytest.fixture(scope="module")
def report(calibration_store: Path) -> pd.DataFrame:
    return Store.open(calibration_store).read("calibration_report")


def _row(report: pd.DataFrame, **where: str) -> pd.Series:
    rows = report
    for column, value in where.items():
        rows = rows[rows[column] == value]
    assert len(rows) == 1, (where, rows)
    return rows.iloc[0]


@pytest.mark.slow
def test_every_enforced_row_is_within_its_tolerance(report: pd.DataFrame) -> None:
    enforced = report[report["within_tolerance"].notna()]
    failing = enforced[~enforced["within_tolerance"].astype(bool)]
    assert failing.empty, failing[["property", "measure", "template_set", "case", "note"]]
    # What the issue asks to enforce is among them.
    properties = set(enforced["property"])
    assert {"transfer", "leak", "redundancy", "backtracking", "decomposition"} <= properties


@pytest.mark.slow
def test_another_seed_into_a_built_store_is_refused_in_one_line(
    calibration_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from precompute.cli import main

    key = (calibration_store / "rule_student_answer_key.json").read_text(encoding="utf-8")
    assert main(["calibrate", "--store", str(calibration_store), "--seed", "1"]) == 4
    err = capsys.readouterr().err
    assert "holds other traces than this seed and size would plant" in err
    assert "Traceback" not in err
    # The answer key of the stored traces is left as it was.
    assert (calibration_store / "rule_student_answer_key.json").read_text() == key


@pytest.mark.slow
def test_fotu_hazard_and_sotu_are_exact_on_the_rule_student(report: pd.DataFrame) -> None:
    for measure in ("FOTU (rule-student)", "hazard bin (rule-student)", "SOTU (rule-student)"):
        row = _row(report, property="transfer", measure=measure)
        assert row["max_error"] <= 1e-9, row
    assert _row(report, measure="FOTU (rule-student)")["n"] == 48  # every trace has rollouts
    # Punkt keeps every planted sentence a step of its own, so positions are the planted ones.
    assert _row(report, property="segmentation")["recovered"] == 1.0


@pytest.mark.slow
def test_the_noisy_student_flips_at_its_known_rate(report: pd.DataFrame) -> None:
    row = _row(report, measure="flip rate (rule-student-noisy)")
    # 48 traces x 5 grid points (k = 0, 3, 6, 9, m for m = 10..11 steps) = 240 rollouts.
    assert row["n"] == 240 and row["planted"] == 0.1
    # 3 binomial standard errors: 3 * sqrt(0.1 * 0.9 / 240) = 0.0581.
    assert row["tolerance"] == pytest.approx(3 * math.sqrt(0.09 / 240))
    assert abs(row["recovered"] - 0.1) <= row["tolerance"]


@pytest.mark.slow
def test_leak_step_is_exact_for_every_style_the_answer_layer_claims(
    report: pd.DataFrame,
) -> None:
    # Issue 23's phrasings, read in the question's frame: a yes/no answered by a concluding
    # declarative, "at least one" for a count, a residue, a value with a trailing clause.
    framed = ("yes_no_statement", "at_least_one", "residue", "trailing_clause")
    for style in ("boxed", "answer_is", "prose", "equation", *framed):
        row = _row(report, property="leak", template_set="dev", case=style)
        assert row["n"] > 0 and row["recall"] == 1.0 and row["max_error"] == 0.0, row
    for style in ("boxed", "answer_is", "equation", *framed[:3]):
        row = _row(report, property="leak", template_set="held_out", case=style)
        assert row["n"] > 0 and row["recall"] == 1.0, row
    # Traces that never state the gold get no leak point.
    assert _row(report, property="leak", case="none")["recovered"] == 0.0


@pytest.mark.slow
def test_detectors_are_reported_on_both_template_sets(report: pd.DataFrame) -> None:
    for measure, cases in (
        ("minilm τ=0.8", ("repeat", "paraphrase", "near_miss")),
        ("minilm τ=0.85", ("repeat", "paraphrase", "near_miss")),
        ("lexical", ("wait", "recheck", "hmm", "actually", "wait_time", "check_box")),
    ):
        for template_set in ("dev", "held_out"):
            for case in cases:
                assert _row(report, measure=measure, template_set=template_set, case=case)["n"] > 0
            summary = _row(report, measure=measure, template_set=template_set, case="summary")
            assert 0.0 <= summary["precision"] <= 1.0 and 0.0 <= summary["recall"] <= 1.0
    # Exact repeats have cosine 1 > τ, and explicit cues open their step: recall ≥ 0.95.
    for template_set in ("dev", "held_out"):
        assert (
            _row(report, measure="minilm τ=0.8", template_set=template_set, case="repeat")["recall"]
            >= 0.95
        )
        for cue in ("wait", "recheck", "hmm", "actually"):
            assert (
                _row(report, measure="lexical", template_set=template_set, case=cue)["recall"]
                >= 0.95
            )


@pytest.mark.slow
def test_decomposition_terms_match_their_closed_forms(report: pd.DataFrame) -> None:
    # growing: T_i = 50 W_i^2 / 3 on W = 1..5 (four each): E[W^2] = (1+4+9+16+25)/5 = 11,
    # E[T] = 50 * 11 / 3 = 183.33, VO = 50 * E[W] / 3 = 50, kappa = 183.33 / (3 * 50) = 11/9;
    # accuracy = 12/20 = 0.6, E0 = 1000 * 0.6 / 183.33 = 36/11.
    assert _row(report, measure="kappa", case="growing")["recovered"] == pytest.approx(11 / 9)
    assert _row(report, measure="e0", case="growing")["recovered"] == pytest.approx(36 / 11)
    # flat: T_i = 50 W_i: VO = 50, kappa = 150 / (3 * 50) = 1, E0 = 600 / 150 = 4.
    assert _row(report, measure="kappa", case="flat")["recovered"] == pytest.approx(1.0)
    assert _row(report, measure="e0", case="flat")["recovered"] == pytest.approx(4.0)


# --- closed forms, by hand ------------------------------------------------------------------


def test_closed_form_of_a_nine_step_trace_with_the_key_at_step_four() -> None:
    ks = [0, 3, 6, 9]
    # The key fact is in the prefix from k = 4 on: correctness 0, 0, 1, 1.
    assert [rule_student_correct(k, 4) for k in ks] == [0, 0, 1, 1]
    # Bins ceil(50k/9): k=3 -> ceil(16.67) = 17, k=6 -> ceil(33.33) = 34, k=9 -> 50.
    curve = closed_form_curve(9, 4, ks)
    assert curve[:17].tolist() == [0.0] * 17  # bins 1..17
    assert curve[25] == pytest.approx(9 / 17)  # bin 26: (26 - 17) / (34 - 17)
    assert curve[33:].tolist() == [1.0] * 17  # bins 34..50
    # Sum: bins 17..33 give (0 + 1 + ... + 16) / 17 = 136/17 = 8, bins 34..50 give 17: 25/50.
    assert closed_form_fotu(9, 4, ks) == pytest.approx(0.5)
    assert closed_form_hazard_bin(9, 4, ks) == 34
    # Two traces in bin 34, two in bin 50, one never solved: entropy log 2 over log 50.
    assert closed_form_sotu([34, 34, 50, 50, None]) == pytest.approx(math.log(2) / math.log(50))


def test_the_library_transfer_code_agrees_with_the_hand_worked_trace() -> None:
    from legival_core.metrics.transfer import trace_metrics

    rollouts = pd.DataFrame(
        {
            "trace_id": "t",
            "student": "rule-student",
            "k": [0, 3, 6, 9],
            "sample": 0,
            "teacher": "planted",
            "dataset": "calibration",
            "problem_id": "p",
            "m": 9,
            "correct": [0.0, 0.0, 1.0, 1.0],
        }
    )
    row = trace_metrics(rollouts).iloc[0]
    assert row["fotu"] == pytest.approx(0.5)  # (8 + 17) / 50, as above
    assert row["hazard_bin"] == 34
    assert row["baseline"] == 0.0 and row["regression_count"] == 0


def test_planted_traces_are_seeded_and_cover_every_case() -> None:
    first, again = plant_traces(48, seed=5), plant_traces(48, seed=5)
    assert first == again
    assert plant_traces(48, seed=6) != first
    cases = {(i.prop, i.case, i.template_set) for t in first for i in t.items}
    for template_set in ("dev", "held_out"):
        for case in ("repeat", "paraphrase", "near_miss"):
            assert ("redundancy", case, template_set) in cases
        for case in ("wait", "recheck", "hmm", "actually", "wait_time", "check_box"):
            assert ("backtracking", case, template_set) in cases
    # A repeat copies a sentence that comes before it (so r_i = 1 at the repeat), in the
    # full build's traces too.
    for trace in plant_traces(240, seed=0):
        for item in trace.items:
            if item.case == "repeat":
                assert trace.sentences[item.index] in trace.sentences[: item.index]
    for trace in first:
        leak = trace.item("leak")
        assert leak is not None
        if leak.case in ("yes_no_statement", "at_least_one"):
            # "No" and "1" are stated in words, in a question of their own
            assert (trace.question, trace.gold) == FRAMED_QUESTIONS[leak.case]
            continue
        # The gold appears in the text exactly when a leak is planted, and only at its step.
        holding = [i for i, s in enumerate(trace.sentences) if trace.gold in s]
        assert holding == ([leak.index] if leak.positive else [])
    framed = {i.case for t in first for i in t.items if i.case in FRAMED_QUESTIONS}
    assert framed == set(FRAMED_QUESTIONS)


def test_backtracking_flags_count_only_valid_judgments() -> None:
    from legival_core.calibration.calibration import backtracking_flags

    [trace] = plant_traces(1, seed=0)
    ends = [end for _, end in trace.sentence_spans()]
    steps = pd.DataFrame({"trace_id": trace.trace_id, "step": range(len(ends)), "end": ends})
    cue = next(i for i in trace.items if i.prop == "backtracking" and i.positive)
    decoy = next(i for i in trace.items if i.prop == "backtracking" and not i.positive)
    named = [cue.index + 1, decoy.index + 1]  # judges number steps from 1
    judgments = pd.DataFrame(
        {
            "trace_id": trace.trace_id,
            "labeler": ["judge:a", "judge:b"],
            "steps": [named, named],
            "valid": [True, False],
        }
    )
    flags = backtracking_flags([trace], steps, judgments, "judge:a")
    planted = flags[flags["case"] != "unplanted"].set_index("case")["flagged"]
    assert planted.to_dict() == {cue.case: True, decoy.case: True}
    assert not flags.loc[flags["case"] == "unplanted", "flagged"].any()
    # An unparsed reply (valid = False) names nothing, whatever its steps column holds.
    assert not backtracking_flags([trace], steps, judgments, "judge:b")["flagged"].any()


# --- the rule student -------------------------------------------------------------------------

KEY_FACT = "The lid of the crate is stamped QXVB."


@pytest.fixture(scope="module")
def answer_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rule_student") / "key.json"
    entries = [{"marker": "calib-0001", "key_fact": KEY_FACT, "answer": "239"}]
    path.write_text(json.dumps({"problems": entries}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def engine(answer_key: Path) -> RuleStudent:
    return make_engine("rule-student", str(answer_key))  # type: ignore[return-value]


def _rollout(prefix: str, key: str = "r") -> GenerationRequest:
    messages = [
        {"role": "system", "content": "Solve it."},
        {"role": "user", "content": "Problem calib-0001: how many marbles?"},
        {"role": "assistant", "content": prefix},
    ]
    return GenerationRequest(key, messages, max_tokens=64, continue_final_message=True)


def test_rule_student_is_right_exactly_when_the_prefix_holds_the_key_fact(
    engine: RuleStudent,
) -> None:
    without, partial, holding = engine.generate(
        [
            _rollout("The crate is heavy.", "a"),
            _rollout("The lid of the crate is stamped", "b"),
            _rollout(f"The crate is heavy. {KEY_FACT} So we count.", "c"),
        ]
    )
    assert without.text.endswith("\\boxed{-1}.") and partial.text.endswith("\\boxed{-1}.")
    assert holding.text.endswith("\\boxed{239}.")
    # Through the math task's grader, as the rollout stage grades it.
    from legival_core.tasks import get_task

    task = get_task("math")
    assert task.grade(task.extract_answer(holding.text), "239").correct
    assert not task.grade(task.extract_answer(without.text), "239").correct
    # No assistant prefix (k = 0): the fact cannot be there.
    assert engine.generate([chat("k0", "Problem calib-0001: how many?", max_tokens=64)])[
        0
    ].text.endswith("\\boxed{-1}.")


def test_rule_student_is_an_engine_and_counts_its_tokens(answer_key: Path) -> None:
    from precompute.backends.base import Engine

    student = RuleStudent(str(answer_key))
    assert isinstance(student, Engine)
    sampled = chat("s", "Problem calib-0001?", max_tokens=64, n=2, temperature=1.0)
    completions = student.generate([_rollout(KEY_FACT, "a"), sampled])
    assert student.stats.requests == len(completions) == 3
    assert student.stats.prompt_tokens == sum(c.prompt_tokens for c in completions) > 0
    assert student.stats.prefill_tokens == student.stats.prompt_tokens  # no cache
    assert student.stats.completion_tokens == sum(c.completion_tokens for c in completions) > 0
    student.close()


def test_noisy_rule_student_flips_at_its_seeded_rate(answer_key: Path) -> None:
    noisy = RuleStudent(str(answer_key), error_rate=0.2, seed=7)
    requests = [_rollout(f"Step {i}. {KEY_FACT}", f"r{i}") for i in range(500)]
    wrong = sum(c.text.endswith("\\boxed{-1}.") for c in noisy.generate(requests))
    # Binomial(500, 0.2): mean 100, SD sqrt(500 * 0.2 * 0.8) = 8.9; 4 SD either side.
    assert 64 <= wrong <= 136
    # Seeded: the same engine settings flip the same requests.
    again = RuleStudent(str(answer_key), error_rate=0.2, seed=7).generate(requests)
    assert [c.text for c in again] == [c.text for c in noisy.generate(requests)]


def test_a_bad_answer_key_is_named_with_its_entry_and_field(tmp_path: Path) -> None:
    path = tmp_path / "key.json"
    path.write_text(json.dumps({"problems": [{"marker": "m", "key_fact": "", "answer": "1"}]}))
    with pytest.raises(ValueError, match=r"key\.json: problems\[0\], field 'key_fact'"):
        load_answer_key(path)
    with pytest.raises(ValueError, match="answer key not found"):
        RuleStudent(str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="error_rate"):
        RuleStudent(str(path.with_name("none.json")), error_rate=0.7)


# --- the page -----------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def _page(monkeypatch: pytest.MonkeyPatch, store: Path) -> AppTest:
    monkeypatch.setenv("LEGIVAL_STORE", str(store))
    at = AppTest.from_file(str(PAGE), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.slow
def test_metric_validity_page_shows_the_report(
    calibration_store: Path, report: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _page(monkeypatch, calibration_store)
    shown = at.dataframe[0].value
    assert len(shown) == len(report)
    assert shown["property"].iloc[0] == "transfer"  # reading order: transfer first
    detectors = at.dataframe[1].value
    # One row per detector measured, no empty (property, measure) crossings.
    assert sorted(detectors["measure"]) == [
        "answer layer leak step",
        "lexical",
        "minilm τ=0.8",
        "minilm τ=0.85",
    ]
    lexical = detectors[detectors["measure"] == "lexical"].iloc[0]
    summary = _row(report, measure="lexical", template_set="held_out", case="summary")
    from legival_core.views.display import column_label

    # The page shows labelled headers ("recall held out"); the values stay numbers.
    assert lexical[column_label("recall_held_out")] == summary["recall"]
    assert not at.warning  # nothing enforced is outside its tolerance
    # Two charts: recall on planted positives, flagged share of planted negatives.
    alarms = json.loads(at.get("plotly_chart")[1].proto.spec)
    labels = {label for trace in alarms["data"] for label in trace["x"]}
    assert "lexical · wait_time" in labels and "minilm τ=0.8 · near_miss" in labels
    at.selectbox[0].select("leak").run()
    assert set(at.dataframe[0].value["property"]) == {"leak"}


@pytest.mark.slow
def test_metric_validity_page_shows_store_text_as_text(
    calibration_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(calibration_store, copy)
    store = Store.open(copy)
    hostile = "<script>alert(1)</script> :red[x] $y$"
    row = {
        "property": "leak",
        "measure": hostile,
        "template_set": "dev",
        "case": "boxed",
        "n": 1,
        "within_tolerance": False,
    }
    store.write("calibration_report", pd.DataFrame([row]), stage="test")
    at = _page(monkeypatch, copy)
    [warning] = at.warning
    assert "\\<script\\>" in warning.value and "\\:red\\[x\\]" in warning.value
    assert "\\$y\\$" in warning.value
