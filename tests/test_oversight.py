"""Oversight analyses (legival_core.oversight.oversight): values worked out by hand from the
formulas.

Spearman without ties: rho = 1 - 6 * sum(d^2) / (n (n^2 - 1)), d = rank difference.
"""

from __future__ import annotations

import html
import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.oversight.oversight import (
    POOLED_DATASETS,
    _boot_scores,
    detection_scores,
    highlight_edits,
    monitor_legibility_correlation,
    monitor_scores,
    negative_types,
    reward_correlations,
    teacher_level_rewards,
    trace_level_rewards,
    variant_label,
)
from legival_core.oversight.sabotage import apply_edits, sabotage
from legival_core.stats.stats import percentile_interval, seeded_stream

# ----------------------------------------------------------------------------- detection scores


def test_detection_scores_on_a_confusion_table_by_hand() -> None:
    # 4 invalid traces: called invalid, invalid, valid, (abstained) -> TP 2, FN 2 (1 said valid,
    # 1 abstention counted as a miss).
    # 4 valid traces: called invalid, valid, valid, (abstained) -> FP 1, TN 2.
    truth = ["invalid"] * 4 + ["valid"] * 4
    pred = ["invalid", "invalid", "valid", None, "invalid", "valid", "valid", None]
    d = detection_scores(truth, pred)
    assert (d.tp, d.fp, d.fn, d.tn, d.abstained, d.n) == (2, 1, 2, 2, 2, 8)
    assert d.precision == pytest.approx(2 / 3)  # TP / (TP + FP) = 2 / 3
    assert d.recall == pytest.approx(0.5)  # TP / #invalid = 2 / 4
    # F1 = 2TP / (2TP + FP + FN) = 4 / 7; also 2PR/(P+R) = (2/3) / (7/6) = 4/7
    assert d.f1 == pytest.approx(4 / 7)
    assert d.coverage == pytest.approx(6 / 8)


def test_detection_scores_undefined_cases() -> None:
    # Nothing called invalid: precision 0/0 -> NaN; recall 0/2 = 0; F1 = 0 / (0 + 0 + 2) = 0.
    d = detection_scores(["invalid", "invalid", "valid"], ["valid", None, "valid"])
    assert math.isnan(d.precision) and d.recall == 0.0 and d.f1 == 0.0
    # No invalid trace at all and nothing flagged: every ratio is 0/0.
    d = detection_scores(["valid"], ["valid"])
    assert math.isnan(d.precision) and math.isnan(d.recall) and math.isnan(d.f1)


def test_detection_scores_rejects_bad_labels() -> None:
    with pytest.raises(ValueError, match=r"y_pred\[1\]"):
        detection_scores(["valid", "invalid"], ["valid", "maybe"])
    with pytest.raises(ValueError, match="2 labels but 1 verdicts"):
        detection_scores(["valid", "invalid"], ["valid"])


LABELS = st.sampled_from(["valid", "invalid"])
VERDICTS = st.sampled_from(["valid", "invalid", None])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(LABELS, VERDICTS), min_size=1, max_size=40))
def test_detection_scores_properties(pairs: list[tuple[str, str | None]]) -> None:
    truth = [t for t, _ in pairs]
    pred = [p for _, p in pairs]
    d = detection_scores(truth, pred)
    assert d.tp + d.fn == truth.count("invalid")
    assert d.tp + d.fp + d.tn + d.abstained <= d.n
    for value in (d.precision, d.recall, d.f1):
        assert math.isnan(value) or 0.0 <= value <= 1.0
    # F1 is the harmonic mean of precision and recall whenever both are defined and positive.
    if d.precision > 0 and d.recall > 0:
        harmonic = 2 * d.precision * d.recall / (d.precision + d.recall)
        assert d.f1 == pytest.approx(harmonic)
    # Turning an abstention on an invalid trace into "invalid" never lowers recall.
    if None in pred:
        index = pred.index(None)
        better = pred.copy()
        better[index] = "invalid"
        after = detection_scores(truth, better)
        if truth[index] == "invalid":
            assert after.recall >= d.recall


# ------------------------------------------------------------------------------ monitor scores


def _verdicts() -> pd.DataFrame:
    rows = [
        # teacher A: 3 originals (valid, valid, invalid), 2 natural (invalid, None),
        # 2 sabotage:number (invalid, valid), 1 sabotage:sign (invalid)
        ("A", "o1", "original", "valid"),
        ("A", "o2", "original", "valid"),
        ("A", "o3", "original", "invalid"),
        ("A", "n1", "natural", "invalid"),
        ("A", "n2", "natural", None),
        ("A", "o1", "sabotage:number", "invalid"),
        ("A", "o2", "sabotage:number", "valid"),
        ("A", "o3", "sabotage:sign", "invalid"),
        # teacher B: 1 original called invalid, 1 natural called invalid
        ("B", "q1", "original", "invalid"),
        ("B", "m1", "natural", "invalid"),
    ]
    return pd.DataFrame(rows, columns=["teacher", "trace_id", "variant", "verdict"]).assign(
        monitor="weak", dataset="D"
    )


def test_monitor_scores_by_hand() -> None:
    scores = monitor_scores(_verdicts(), n_boot=0).set_index(["teacher", "negative_type"])
    a_natural = scores.loc[("A", "natural")]
    # originals: FP 1 (o3), TN 2; natural: TP 1 (n1), FN 1 (n2 abstained)
    assert (a_natural.tp, a_natural.fp, a_natural.fn, a_natural.tn) == (1, 1, 1, 2)
    assert a_natural.precision == pytest.approx(0.5)  # 1 / (1 + 1)
    assert a_natural.recall == pytest.approx(0.5)  # 1 / 2
    assert a_natural.abstained == 1 and a_natural.coverage == pytest.approx(4 / 5)
    # sabotage pooled: number (TP 1, FN 1) + sign (TP 1) -> TP 2, FN 1; FP 1
    pooled = scores.loc[("A", "sabotage")]
    assert pooled.precision == pytest.approx(2 / 3) and pooled.recall == pytest.approx(2 / 3)
    assert pooled.f1 == pytest.approx(4 / 6)  # 2*2 / (2*2 + 1 + 1)
    one_kind = scores.loc[("A", "sabotage:sign")]
    assert one_kind.precision == pytest.approx(0.5) and one_kind.recall == 1.0
    # all: TP 3 (n1, o1#, o3#), FN 2 (n2, o2#), FP 1 -> P 3/4, R 3/5, F1 6/9
    everything = scores.loc[("A", "all")]
    assert (everything.n_valid, everything.n_invalid) == (3, 5)
    assert everything.precision == pytest.approx(0.75) and everything.recall == pytest.approx(0.6)
    assert everything.f1 == pytest.approx(6 / 9)
    # teacher B has natural failures only: no sabotage rows
    assert set(scores.loc["B"].index) == {"natural", "all"}
    assert scores.loc[("B", "natural")].precision == pytest.approx(0.5)


def test_monitor_scores_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    verdicts = pd.concat([_verdicts()] * 5, ignore_index=True)
    first = monitor_scores(verdicts, n_boot=300, seed=3)
    again = monitor_scores(verdicts, n_boot=300, seed=3)
    other = monitor_scores(verdicts, n_boot=300, seed=4)
    pd.testing.assert_frame_equal(first, again)
    assert not first["precision_lo"].equals(other["precision_lo"])
    row = first.set_index(["teacher", "negative_type"]).loc[("A", "all")]
    for measure in ("precision", "recall", "f1"):
        assert row[f"{measure}_lo"] <= row[measure] <= row[f"{measure}_hi"]
        assert row[f"{measure}_lo"] < row[f"{measure}_hi"]


def test_monitor_scores_errors_name_the_field() -> None:
    bad = _verdicts()
    bad.loc[2, "verdict"] = "probably"
    with pytest.raises(ValueError, match=r"row 2, field 'verdict'"):
        monitor_scores(bad, n_boot=0)
    with pytest.raises(ValueError, match="unknown monitor variant"):
        variant_label("rewritten")


def test_the_bootstrap_counts_the_drawn_traces_by_hand() -> None:
    # traces: 0 invalid and called invalid (TP), 1 invalid and called valid (FN), 2 valid and
    # called invalid (FP); seeded_stream(0) draws [2, 1, 1] and [0, 0, 0] (resample_indices)
    invalid = np.array([True, True, False])
    called = np.array([True, False, True])
    boot = _boot_scores(invalid, called, 2, seeded_stream(0))
    # replicate 0: FP once, FN twice -> TP 0, FP 1, #invalid 2: P 0/1, R 0/2, F1 0/(0+1+2)
    # replicate 1: trace 0 three times -> TP 3, FP 0, #invalid 3: P 3/3, R 3/3, F1 6/6
    assert boot["precision"].tolist() == [0.0, 1.0]
    assert boot["recall"].tolist() == [0.0, 1.0]
    assert boot["f1"].tolist() == [0.0, 1.0]
    # a replicate that draws only valid traces called valid has no precision nor recall
    none_found = _boot_scores(np.array([False]), np.array([False]), 1, seeded_stream(0))
    assert math.isnan(none_found["precision"][0]) and math.isnan(none_found["recall"][0])


def reference_monitor_scores(
    verdicts: pd.DataFrame, by: tuple[str, ...], n_boot: int, seed: int
) -> pd.DataFrame:
    """monitor_scores as it was before it worked column-wise (commit 0894bf3): every verdict
    turned into a label and a prediction one by one and scored by detection_scores. The
    replicates are _boot_scores' (test_boot_scores_are_the_resampled_counts_definition holds
    them to the counts of the same draws)."""
    columns = list(by)
    frame = verdicts.reset_index(drop=True)
    labels = [variant_label(str(v)) for v in frame["variant"]]

    def missing(v: object) -> bool:
        return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))

    frame = frame.assign(
        _invalid=np.array([label == "invalid" for label in labels], dtype=bool),
        _called=frame["verdict"].map(lambda v: v == "invalid").astype(bool).to_numpy(),
        _answered=frame["verdict"].map(lambda v: not missing(v)).astype(bool).to_numpy(),
    )
    names = [*columns, "negative_type", "n_valid", "n_invalid"]
    names += ["tp", "fp", "fn", "tn", "abstained", "coverage"]
    for measure in ("precision", "recall", "f1"):
        names += [measure, f"{measure}_lo", f"{measure}_hi"]
    records = []
    groups = (
        frame.groupby(columns, sort=True, observed=True, dropna=False) if columns else [((), frame)]
    )
    for key, group in groups:
        key_tuple = key if isinstance(key, tuple) else (key,)
        variants = group["variant"].astype(str).to_numpy()
        for negative in negative_types(list(variants)):
            keep = (
                np.ones(len(variants), dtype=bool)
                if negative == "all"
                else (variants == "original")
                | (
                    np.char.startswith(variants.astype(str), "sabotage:")
                    if negative == "sabotage"
                    else variants == negative
                )
            )
            chosen = group[keep]
            truth = ["invalid" if x else "valid" for x in chosen["_invalid"]]
            pred = [
                ("invalid" if c else "valid") if a else None
                for c, a in zip(chosen["_called"], chosen["_answered"], strict=True)
            ]
            det = detection_scores(truth, pred)
            record: dict[str, object] = dict(zip(columns, key_tuple, strict=True))
            n_invalid = int(chosen["_invalid"].sum())
            record.update(negative_type=negative, n_valid=det.n - n_invalid, n_invalid=n_invalid)
            for name in ("tp", "fp", "fn", "tn", "abstained", "coverage"):
                record[name] = getattr(det, name)
            boot = (
                _boot_scores(
                    chosen["_invalid"].to_numpy(bool),
                    chosen["_called"].to_numpy(bool),
                    n_boot,
                    seeded_stream(seed, repr((*key_tuple, negative))),
                )
                if n_boot
                else None
            )
            for measure in ("precision", "recall", "f1"):
                record[measure] = getattr(det, measure)
                lo, hi = percentile_interval(boot[measure], 0.05) if boot else (math.nan, math.nan)
                record[f"{measure}_lo"], record[f"{measure}_hi"] = lo, hi
            records.append(record)
    return pd.DataFrame.from_records(records, columns=names)


def _many_verdicts(seed: int, string_dtype: bool) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 600
    variants = np.array(["original", "original", "natural", "sabotage:sign", "sabotage:number"])
    verdicts = np.array(["valid", "invalid", None, float("nan")], dtype=object)
    frame = pd.DataFrame(
        {
            "monitor": rng.choice(["m1", "m2"], n),
            "teacher": rng.choice(["A", "B", "C"], n),
            "dataset": rng.choice(["D", "E"], n),
            "variant": rng.choice(variants, n),
            "verdict": verdicts[rng.choice(4, n, p=[0.45, 0.4, 0.1, 0.05])],
            "trace_id": [f"t{i}" for i in range(n)],
        }
    )
    # teacher C of dataset E has no sabotage rows: its groups have fewer negative types
    frame = frame[~((frame["teacher"] == "C") & frame["variant"].str.startswith("sabotage"))]
    # the store's string columns: NaN for a missing value (pandas' "str" dtype)
    return frame.astype(pd.StringDtype(na_value=np.nan)) if string_dtype else frame


@pytest.mark.parametrize("string_dtype", [False, True])
@pytest.mark.parametrize("by", [("monitor", "teacher", "dataset"), ("teacher",), ()])
def test_monitor_scores_equal_the_verdict_by_verdict_definition(
    by: tuple[str, ...], string_dtype: bool
) -> None:
    verdicts = _many_verdicts(7, string_dtype)
    expected = reference_monitor_scores(verdicts, by, n_boot=60, seed=5)
    pd.testing.assert_frame_equal(
        monitor_scores(verdicts, by=by, n_boot=60, seed=5), expected, check_exact=True
    )


def test_a_missing_verdict_is_an_abstention_whatever_kind_of_missing_it_is() -> None:
    # None in an object column, NaN in the store's strings, pd.NA in pandas' "string" dtype
    # (a notebook's convert_dtypes()): the last one made the verdict-by-verdict code fail
    # ("boolean value of NA is ambiguous")
    kinds = {
        "object": _verdicts(),
        "str": _verdicts().astype(pd.StringDtype(na_value=np.nan)),
        "string": _verdicts().astype("string"),
    }
    scores = {k: monitor_scores(v, n_boot=20, seed=1) for k, v in kinds.items()}
    natural = scores["string"].set_index(["teacher", "negative_type"]).loc[("A", "natural")]
    assert natural.abstained == 1 and natural.fn == 1  # n2's missing verdict
    for kind in ("str", "string"):
        pd.testing.assert_frame_equal(scores[kind], scores["object"], check_dtype=False)


def test_monitor_scores_name_the_first_unknown_variant_in_row_order() -> None:
    bad = _verdicts()
    bad.loc[4, "variant"], bad.loc[6, "variant"] = "zebra", "aardvark"
    with pytest.raises(ValueError, match="unknown monitor variant 'zebra'"):
        monitor_scores(bad, n_boot=0)


def test_negative_types_order() -> None:
    assert negative_types(["original", "natural"]) == ["natural", "all"]
    assert negative_types(["original"]) == []


# --------------------------------------------------------------------------- reward correlations


def _reward_inputs() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    # Correct traces c1..c4: rewards 5..8, FOTU 0.6, 0.8, 0.5, 0.7.
    # Incorrect traces w1..w4 (transfer rows exist, e.g. ingested): rewards 1..4, FOTU .1...4.
    ids = ["c1", "c2", "c3", "c4", "w1", "w2", "w3", "w4"]
    rewards = pd.DataFrame(
        {"trace_id": ids, "reward_model": "rm", "score": [5, 6, 7, 8, 1, 2, 3, 4]}
    )
    transfer = pd.DataFrame(
        {
            "trace_id": ids,
            "student": "s",
            "teacher": "T",
            "dataset": "D",
            "fotu": [0.6, 0.8, 0.5, 0.7, 0.1, 0.2, 0.3, 0.4],
            "regression_rate": 0.0,
            "hazard_bin": 10,
        }
    )
    grades = pd.DataFrame({"trace_id": ids, "correct": [True] * 4 + [False] * 4})
    return rewards, transfer, grades


def test_reward_correlation_vanishes_on_correct_only_traces() -> None:
    rewards, transfer, grades = _reward_inputs()
    every = reward_correlations(rewards, transfer, grades).set_index("metric")
    # All 8: reward ranks w1..w4 = 1..4, c1..c4 = 5..8; FOTU ranks w = 1..4,
    # c1 .6 -> 6, c2 .8 -> 8, c3 .5 -> 5, c4 .7 -> 7; d = 0,0,0,0,-1,-2,2,1; sum d^2 = 10
    # rho = 1 - 6 * 10 / (8 * 63) = 1 - 60/504 = 37/42
    assert every.loc["fotu", "rho"] == pytest.approx(37 / 42)
    assert every.loc["fotu", "n"] == 8 and every.loc["fotu", "pvalue"] < 0.01
    correct = reward_correlations(rewards, transfer, grades, correct_only=True).set_index("metric")
    # Correct only: reward ranks 1,2,3,4; FOTU ranks 2,4,1,3; d = -1,-2,2,1; sum d^2 = 10
    # rho = 1 - 6 * 10 / (4 * 15) = 0
    assert correct.loc["fotu", "rho"] == pytest.approx(0.0, abs=1e-12)
    assert correct.loc["fotu", "subset"] == "correct" and correct.loc["fotu", "n"] == 4
    # A constant metric has no rank correlation.
    assert math.isnan(every.loc["regression_rate", "rho"])


def test_trace_level_averages_students() -> None:
    rewards, transfer, grades = _reward_inputs()
    second = transfer.assign(student="s2", fotu=transfer["fotu"] + 0.1)
    points = trace_level_rewards(rewards, pd.concat([transfer, second]), grades)
    # c1: (0.6 + 0.7) / 2 = 0.65
    assert points.set_index("trace_id").loc["c1", "fotu"] == pytest.approx(0.65)


def _teacher_inputs() -> tuple[pd.DataFrame, ...]:
    rows = [
        # trace, teacher, dataset, student, fotu, hazard
        ("a1", "A", "D1", "s1", 0.2, 5),
        ("a1", "A", "D1", "s2", 0.4, 5),
        ("a2", "A", "D1", "s1", 0.4, 10),
        ("a2", "A", "D1", "s2", 0.6, 10),
        ("a3", "A", "D2", "s1", 0.8, 7),
        ("a3", "A", "D2", "s2", 0.8, 7),
        ("b1", "B", "D1", "s1", 0.1, 3),
        ("b1", "B", "D1", "s2", 0.3, 3),
        ("c1", "C", "D1", "s1", 0.9, 2),
        ("c1", "C", "D1", "s2", 0.7, 2),
    ]
    transfer = pd.DataFrame(
        rows, columns=["trace_id", "teacher", "dataset", "student", "fotu", "hazard_bin"]
    ).assign(regression_rate=0.0)
    rewards = pd.DataFrame(
        {
            "trace_id": ["a1", "a2", "a3", "b1", "b2", "c1"],
            "reward_model": "rm",
            "score": [1.0, 3.0, 5.0, 2.0, 10.0, 4.0],
        }
    )
    traces = pd.DataFrame(
        {
            "trace_id": ["a1", "a2", "a3", "b1", "b2", "c1"],
            "teacher": ["A", "A", "A", "B", "B", "C"],
            "dataset": ["D1", "D1", "D2", "D1", "D1", "D1"],
        }
    )
    grades = pd.DataFrame(
        {"trace_id": traces["trace_id"], "correct": [True, True, True, True, False, True]}
    )
    return rewards, transfer, grades, traces


def test_teacher_level_values_by_hand() -> None:
    rewards, transfer, grades, traces = _teacher_inputs()
    table = teacher_level_rewards(
        rewards, transfer, grades, traces=traces, support="all"
    ).set_index("teacher")
    # support="all", each teacher over every dataset it has:
    # A: D1 fotu = mean over students of trace means: s1 (0.2+0.4)/2 = 0.3, s2 0.5 -> 0.4;
    #    D2 fotu 0.8; averaged over datasets: 0.6.
    #    D1 sotu: each student's hazards {5, 10} -> log 2 / log 50; D2: one bin -> 0; mean.
    #    reward: D1 (1 + 3) / 2 = 2, D2 5 -> 3.5
    assert table.loc["A", "fotu"] == pytest.approx(0.6)
    assert table.loc["A", "sotu"] == pytest.approx(math.log(2) / math.log(50) / 2)
    assert table.loc["A", "score"] == pytest.approx(3.5)
    # B over all traces: (2 + 10) / 2 = 6 (b2 is incorrect and has no transfer row)
    assert table.loc["B", "score"] == pytest.approx(6.0)
    assert table.loc["B", "fotu"] == pytest.approx(0.2)  # (0.1 + 0.3) / 2


def test_teacher_level_values_default_to_the_common_support() -> None:
    """B and C have D1 only, so by default A is averaged over D1 alone, like them: FOTU 0.4,
    SOTU log 2 / log 50, reward (1 + 3) / 2 = 2, from its 2 D1 traces."""
    rewards, transfer, grades, traces = _teacher_inputs()
    table = teacher_level_rewards(rewards, transfer, grades, traces=traces).set_index("teacher")
    assert table.loc["A", "fotu"] == pytest.approx(0.4)
    assert table.loc["A", "sotu"] == pytest.approx(math.log(2) / math.log(50))
    assert table.loc["A", "score"] == pytest.approx(2.0)
    assert int(table.loc["A", "n_traces"]) == 2  # the rewards behind the score, D1's
    assert (table["fotu_datasets"] == 1).all() and (table["score_datasets"] == 1).all()
    assert table.loc["B", "score"] == pytest.approx(6.0)


def test_teacher_level_correlations_all_vs_correct() -> None:
    rewards, transfer, grades, traces = _teacher_inputs()
    every = reward_correlations(
        rewards, transfer, grades, level="teacher", traces=traces, support="all"
    ).set_index("metric")
    # rewards A 3.5, B 6, C 4 -> ranks 1, 3, 2; FOTU A .6, B .2, C .8 -> ranks 2, 1, 3
    # d = -1, 2, -1; sum d^2 = 6; rho = 1 - 36 / (3 * 8) = -0.5
    assert every.loc["fotu", "rho"] == pytest.approx(-0.5)
    correct = reward_correlations(
        rewards, transfer, grades, level="teacher", correct_only=True, traces=traces, support="all"
    ).set_index("metric")
    # correct only: B's reward is 2 -> ranks 2, 1, 3 = the FOTU ranks -> rho 1
    assert correct.loc["fotu", "rho"] == pytest.approx(1.0)
    assert set(every.index) == {"fotu", "sotu", "regression_rate"}


def test_reward_correlations_errors() -> None:
    rewards, transfer, grades = _reward_inputs()
    with pytest.raises(ValueError, match="level"):
        reward_correlations(rewards, transfer, grades, level="model")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="table 'rewards'"):
        reward_correlations(rewards.drop(columns="score"), transfer, grades)


# ----------------------------------------------------------------- monitorability vs legibility


def _legibility_inputs() -> tuple[pd.DataFrame, pd.DataFrame]:
    scores = pd.DataFrame(
        {
            "monitor": "weak",
            "teacher": list("abcd") * 2,
            "dataset": ["D1"] * 4 + ["D2"] * 4,
            "negative_type": "sabotage",
            "precision": [0.2, 0.4, 0.3, 0.9, 0.6, 0.2, 0.5, 0.1],
            "recall": 0.5,
            "f1": [0.1, 0.2, 0.3, 0.4, 0.1, 0.2, 0.3, 0.4],
        }
    )
    teacher_metrics = pd.DataFrame(
        {
            "teacher": list("abcd") * 2,
            "dataset": ["D1"] * 4 + ["D2"] * 4,
            "fotu": [0.1, 0.2, 0.3, 0.4] * 2,
            "tokens": [40, 10, 30, 20] * 2,
        }
    )
    return scores, teacher_metrics


def test_monitor_legibility_correlation_by_hand() -> None:
    scores, teacher_metrics = _legibility_inputs()
    out = monitor_legibility_correlation(scores, teacher_metrics)
    d1 = out[(out.dataset == "D1")].set_index("measure")
    # FOTU ranks 1,2,3,4; precision .2,.4,.3,.9 -> ranks 1,3,2,4; d = 0,-1,1,0 -> rho = 1-12/60
    assert d1.loc["precision", "rho"] == pytest.approx(0.8)
    # Partial given tokens (ranks 4,1,3,2): r_xz = 1 - 6*14/60 = -0.4 (d = -3,1,0,2);
    # r_yz = 1 - 6*18/60 = -0.8 (d = -3,2,-1,2);
    # partial = (0.8 - 0.32) / sqrt((1 - 0.16)(1 - 0.64)) = 0.48 / sqrt(0.3024)
    assert d1.loc["precision", "partial_rho"] == pytest.approx(0.48 / math.sqrt(0.3024))
    assert d1.loc["f1", "rho"] == pytest.approx(1.0)
    assert math.isnan(d1.loc["recall", "rho"])  # constant recall
    pooled = out[out.dataset == POOLED_DATASETS].set_index("measure")
    # Mean precision per teacher: a .4, b .3, c .4, d .5 -> ranks 2.5, 1, 2.5, 4.
    # Pearson on ranks vs 1..4: dx = -1.5,-.5,.5,1.5; dy = 0,-1.5,0,1.5;
    # sum dx dy = 3, sum dx^2 = 5, sum dy^2 = 4.5 -> 3 / sqrt(22.5)
    assert pooled.loc["precision", "rho"] == pytest.approx(3 / math.sqrt(22.5))
    assert pooled.loc["precision", "n"] == 4


# ------------------------------------------------------------------------------------ highlight

PAYLOAD = "<script>alert(1)</script>"


def _strip(markup: str) -> str:
    """Visible text of the highlight HTML (tags and the removal marker dropped)."""
    text = re.sub(r'<mark class="lv-new" title="removed">∅</mark>', "", markup)
    return html.unescape(re.sub(r"</?(?:del|mark)[^>]*>", "", text))


def test_highlight_escapes_model_text_and_marks_the_change() -> None:
    original = f"We have 3 apples {PAYLOAD}. Doubling gives 3 * 2 = 6 apples. So it is 6."
    spans = [(0, 43), (44, 80), (81, len(original))]
    made = sabotage(original, spans, "operator", seed=0)
    assert made is not None
    before, after = highlight_edits(original, made.edits)
    assert "<script" not in before and "<script" not in after
    assert "&lt;script&gt;" in before
    assert '<del class="lv-old">*</del>' in before
    assert '<mark class="lv-new">+</mark>' in after
    assert _strip(before) == original
    assert _strip(after) == made.text


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["2 + 3 = 5.", "<b>x</b> = 4 - 1.", "Then 7 * 2 = 14 & done."]),
        min_size=3,
        max_size=8,
    ),
    st.sampled_from(["number", "sign", "operator", "drop_step"]),
    st.integers(0, 50),
)
def test_highlight_round_trips_every_injection(steps: list[str], kind: str, seed: int) -> None:
    text = " ".join(steps)
    spans, cursor = [], 0
    for step in steps:
        spans.append((cursor, cursor + len(step)))
        cursor += len(step) + 1
    made = sabotage(text, spans, kind, seed=seed)
    if made is None:
        return
    before, after = highlight_edits(text, made.edits)
    assert _strip(before) == text
    assert _strip(after) == made.text == apply_edits(text, made.edits)
    assert "<b>" not in before.replace('<del class="lv-old">', "")


def test_highlight_rejects_edits_that_do_not_match() -> None:
    with pytest.raises(ValueError, match="does not match"):
        highlight_edits("1 + 2", [{"start": 0, "end": 1, "old": "9", "new": "8"}])


def test_import_stays_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, legival_core.oversight.oversight; "
        "print(','.join(m for m in ('torch', 'streamlit', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60),
    st.integers(min_value=1, max_value=40),
    st.integers(min_value=0, max_value=2**31),
)
def test_boot_scores_are_the_resampled_counts_definition(
    rows: list[tuple[bool, bool]], n_boot: int, seed: int
) -> None:
    """Each replicate's tp, fp and invalid count are the counts of the traces it drew times
    their indicators (``resample_counts @ values``), bit for bit, the same seed's draws."""
    from legival_core.oversight.oversight import _boot_scores
    from legival_core.stats.stats import resample_counts, seeded_stream

    invalid = np.array([r[0] for r in rows], dtype=bool)
    called = np.array([r[1] for r in rows], dtype=bool)
    got = _boot_scores(invalid, called, n_boot, seeded_stream(seed, "group"))
    counts = resample_counts(len(rows), n_boot, seeded_stream(seed, "group"))
    tp, fp, n_inv = counts @ (invalid & called), counts @ (~invalid & called), counts @ invalid
    fn = n_inv - tp
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = {
            "precision": np.where(tp + fp > 0, tp / (tp + fp), np.nan),
            "recall": np.where(n_inv > 0, tp / n_inv, np.nan),
            "f1": np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan),
        }
    for name, values in expected.items():
        np.testing.assert_array_equal(got[name], values, err_msg=name)


def _joined_then_grouped(
    rewards: pd.DataFrame, owners: pd.DataFrame, keep: pd.Index | None
) -> pd.DataFrame:
    """The teacher-level mean rewards as teacher_level_rewards computed them before
    mean_rewards (commit 2948863): the rewards joined to their owners, then grouped by text."""
    from legival_core.store.frames import is_in, lookup_join

    scored = lookup_join(rewards[["trace_id", "reward_model", "score"]], owners, "trace_id")
    if keep is not None:
        scored = scored[is_in(scored["trace_id"].astype(str), keep)]
    return (
        scored.groupby(["reward_model", "teacher", "dataset"], sort=True, observed=True)
        .agg(score=("score", "mean"), n_traces=("score", "size"))
        .reset_index()
    )


_KEY = st.one_of(st.none(), st.sampled_from(["T", "U", "ç", "", "t 2"]))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d", "é", "z"]),
            st.sampled_from(["rm", "rm2", "Rm"]),
            st.one_of(st.none(), st.floats(-1e6, 1e6)),
        ),
        max_size=25,
    ),
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "é"]), _KEY, _KEY), max_size=8),
    st.one_of(st.none(), st.sets(st.sampled_from(["a", "b", "é", "q"]))),
)
def test_mean_rewards_are_the_join_grouped_by_text(rewards, owners, keep) -> None:
    """Rewards without an owner, an owner twice (its first row counts), missing teachers
    and datasets (no group), missing scores (counted, not averaged), a subset kept: the
    codes give the joined frame's group-by, to the last bit."""
    from legival_core.oversight.oversight import mean_rewards

    given_rewards = pd.DataFrame(
        {
            "trace_id": pd.array([r[0] for r in rewards], dtype="str"),
            "reward_model": pd.array([r[1] for r in rewards], dtype="str"),
            "score": np.array([np.nan if r[2] is None else r[2] for r in rewards], dtype=float),
        }
    )
    given_owners = pd.DataFrame(
        {
            "trace_id": pd.array([o[0] for o in owners], dtype="str"),
            "teacher": pd.array([o[1] for o in owners], dtype="str"),
            "dataset": pd.array([o[2] for o in owners], dtype="str"),
        }
    )
    kept = None if keep is None else pd.Index(sorted(keep), dtype="str")
    got = mean_rewards(given_rewards, given_owners, kept)
    want = _joined_then_grouped(given_rewards, given_owners, kept)
    if want.empty:
        assert got.empty and got.columns.tolist() == want.columns.tolist()
        return
    pd.testing.assert_frame_equal(got, want, check_exact=True)
