"""Tests of legival_core.transfer: every expected number is worked out by hand in a comment."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from legival_core.schema import SchemaError
from legival_core.transfer import (
    PROFILES,
    TEACHER_QUANTITIES,
    TransferProfile,
    answer_leak_points,
    curve,
    fotu_before_leak,
    get_profile,
    interpolate_curve,
    paper_bin,
    register_profile,
    release_bin,
    sotu,
    teacher_metrics,
    trace_curves,
    trace_metrics,
)

LOG50 = math.log(50)


def rollouts_of(rows: list[tuple]) -> pd.DataFrame:
    """(teacher, dataset, student, trace_id, k, m, correct) tuples -> rollouts table."""
    frame = pd.DataFrame(
        rows, columns=["teacher", "dataset", "student", "trace_id", "k", "m", "correct"]
    )
    frame["problem_id"] = "p-" + frame["trace_id"]
    return frame


def one_trace(ks: list[int], m: int, ys: list[float], trace: str = "t1") -> pd.DataFrame:
    return rollouts_of([("T", "D", "S", trace, k, m, y) for k, y in zip(ks, ys, strict=True)])


# ---------------------------------------------------------------------------------------------
# Bins
# ---------------------------------------------------------------------------------------------


def test_paper_bins_use_exact_integer_ceiling():
    # m = 9: 50*3/9 = 16.67 -> 17; 50*6/9 = 33.3 -> 34; 50*9/9 = 50 -> 50.
    assert paper_bin(np.array([3, 6, 9]), np.array([9, 9, 9])).tolist() == [17, 34, 50]
    # x = 7/25 = 0.28 sits exactly on the edge of bin 14 (0.26, 0.28]; in floats
    # 0.28 / 0.02 = 14.000000000000002 and a naive ceil gives 15.
    assert math.ceil((7 / 25) / 0.02) == 15
    assert paper_bin(np.array([7]), np.array([25])).tolist() == [14]
    # k = 1 of m = 100 -> x = 0.01 -> bin 1; k = m -> bin 50.
    assert paper_bin(np.array([1, 100]), np.array([100, 100])).tolist() == [1, 50]


def test_release_bins_are_floor_of_half_percent_plus_one():
    # pct = 100k/m; centre = floor(pct/2)*2+1; index = (centre+1)/2 = floor(pct/2)+1.
    # k=3,m=9: pct 33.3 -> floor 16 -> centre 33 -> index 17 (paper: 17 too)
    # k=3,m=6: pct 50 -> floor 25 -> centre 51 -> index 26 (paper: ceil(25) = 25)
    # k=8,m=9: pct 88.9 -> floor 44 -> centre 89 -> index 45 (paper: ceil(44.4) = 45)
    # k=0: pct 0 -> centre 1 -> index 1
    got = release_bin(np.array([3, 3, 8, 0]), np.array([9, 6, 9, 9])).tolist()
    assert got == [17, 26, 45, 1]
    assert paper_bin(np.array([3]), np.array([6])).tolist() == [25]


# ---------------------------------------------------------------------------------------------
# The worked trace: m = 9, k = 0, 3, 6, 9 with correctness 0, 0, 1, 1
# ---------------------------------------------------------------------------------------------

WORKED = one_trace([0, 3, 6, 9], 9, [0.0, 0.0, 1.0, 1.0])


def test_worked_trace_curve_is_interpolated_between_bins_17_and_34():
    index, curves = trace_curves(WORKED)
    assert index["trace_id"].tolist() == ["t1"]
    f = curves[0]
    # bins 1..17 -> 0 (constant before bin 17 whose value is 0)
    assert np.all(f[:17] == 0.0)
    # bins 18..33: linear from 0 at bin 17 to 1 at bin 34 -> f(b) = (b - 17) / 17
    for b in (18, 26, 33):
        assert f[b - 1] == pytest.approx((b - 17) / 17, abs=1e-12)
    # bins 34..50 -> 1
    assert np.all(f[33:] == 1.0)


def test_worked_trace_metrics_paper():
    row = trace_metrics(WORKED).iloc[0]
    # FOTU = (17 * 0 + sum_{b=18}^{33} (b-17)/17 + 17 * 1) / 50
    #      = (0 + (1 + 2 + ... + 16)/17 + 17) / 50 = (136/17 + 17) / 50 = (8 + 17) / 50 = 0.5
    assert row["fotu"] == pytest.approx(0.5, abs=1e-12)
    # first correct prefix k = 6 -> bin ceil(300/9) = 34
    assert row["hazard_bin"] == 34
    # prefixes k >= 1: 0, 1, 1 -> no drop; rate 0 / (3 - 1) = 0
    assert row["regression_count"] == 0
    assert row["regression_rate"] == 0.0
    # baseline = correctness at k = 0 = 0; lift = 0.5 - 0 = 0.5
    assert row["baseline"] == 0.0
    assert row["lift"] == pytest.approx(0.5, abs=1e-12)
    assert row[["teacher", "dataset", "problem_id", "m"]].tolist() == ["T", "D", "p-t1", 9]


def test_worked_trace_observed_grid_averages_observed_bins_only():
    # observed bins 17 (0), 34 (1), 50 (1): FOTU = (0 + 1 + 1) / 3 = 2/3
    row = trace_metrics(WORKED, grid="observed").iloc[0]
    assert row["fotu"] == pytest.approx(2 / 3, abs=1e-12)
    _, curves = trace_curves(WORKED, grid="observed")
    assert np.isnan(curves[0]).sum() == 47


def test_worked_trace_release_profile():
    # release drops k = m = 9; k=3 -> floor(150/9)+1 = 17, k=6 -> floor(300/9)+1 = 34;
    # no interpolation: FOTU = mean of observed bins = (0 + 1) / 2 = 0.5
    row = trace_metrics(WORKED, profile="release").iloc[0]
    assert row["fotu"] == pytest.approx(0.5, abs=1e-12)
    assert row["hazard_bin"] == 34
    # prefixes 0, 1 -> no drop, rate 0 / (2 - 1) = 0
    assert row["regression_count"] == 0
    assert row["regression_rate"] == 0.0
    assert row["baseline"] == 0.0


def test_regression_one_drop_in_three_prefixes():
    # m = 3, k = 1, 2, 3 with 1, 0, 1: one drop (1 -> 0); rate = 1 / (3 - 1) = 0.5
    row = trace_metrics(one_trace([1, 2, 3], 3, [1.0, 0.0, 1.0])).iloc[0]
    assert row["regression_count"] == 1
    assert row["regression_rate"] == 0.5
    # first correct prefix k = 1 -> bin ceil(50/3) = 17
    assert row["hazard_bin"] == 17
    # bins 17 (1), 34 (0), 50 (1): 1..17 -> 1 (17); 18..33 -> 1 - (b-17)/17, sum 16 - 8 = 8;
    # 34 -> 0; 35..49 -> (b-34)/16, sum 120/16 = 7.5; 50 -> 1. FOTU = 33.5 / 50 = 0.67
    assert row["fotu"] == pytest.approx(0.67, abs=1e-12)
    # no k = 0 rollout: baseline and lift are NaN
    assert math.isnan(row["baseline"]) and math.isnan(row["lift"])


def test_regression_rate_is_nan_with_fewer_than_two_prefixes():
    row = trace_metrics(one_trace([0, 4], 4, [1.0, 0.0])).iloc[0]
    assert row["regression_count"] == 0
    assert math.isnan(row["regression_rate"])
    assert pd.isna(row["hazard_bin"])  # never solved at k >= 1
    assert row["fotu"] == 0.0
    assert row["lift"] == -1.0  # 0 - baseline 1


def test_samples_are_averaged_and_hazard_needs_half():
    # k = 1 of m = 2 (bin 25) has samples 1, 0 -> mean 0.5 >= 0.5 -> solved at bin 25;
    # k = 2 (bin 50) samples 0, 0, 1 -> 1/3.
    r = one_trace([1, 1, 2, 2, 2], 2, [1, 0, 0, 0, 1])
    row = trace_metrics(r).iloc[0]
    assert row["hazard_bin"] == 25
    # one drop 0.5 -> 1/3; FOTU: bins 1..25 -> 0.5 (25 bins), 26..49 -> 0.5 + (1/3-0.5)(b-25)/25,
    # sum = 24 * 0.5 - (1/6)(300/25) = 12 - 2 = 10, bin 50 -> 1/3:
    # (12.5 + 10 + 1/3) / 50 = 22.8333 / 50
    assert row["regression_count"] == 1
    assert row["fotu"] == pytest.approx((12.5 + 10 + 1 / 3) / 50, abs=1e-12)
    # three samples 1, 0, 0 at k = 1 -> 1/3 < 0.5 -> not solved there
    r2 = one_trace([1, 1, 1, 2], 2, [1, 0, 0, 1])
    assert trace_metrics(r2).iloc[0]["hazard_bin"] == 50


def test_partial_credit_counts_in_the_curve_but_not_in_the_hazard():
    # Connections-style grades (groups right / 4): k = 1 of m = 2 scores 0.5, k = 2 scores 1.
    # curve: bins 1..25 -> 0.5, 26..49 -> 0.5 + 0.5 (b-25)/25 (sum 12 + 6 = 18), 50 -> 1:
    # FOTU = (12.5 + 18 + 1) / 50 = 0.63.  The hazard needs all four groups: k = 2 -> bin 50.
    row = trace_metrics(one_trace([1, 2], 2, [0.5, 1.0])).iloc[0]
    assert row["fotu"] == pytest.approx(0.63, abs=1e-12)
    assert row["hazard_bin"] == 50
    # two samples at k = 1, one fully correct and one at 0.75: half the samples solved -> bin 25
    row = trace_metrics(one_trace([1, 1, 2], 2, [1.0, 0.75, 1.0])).iloc[0]
    assert row["hazard_bin"] == 25


def test_interpolate_curve_rows_are_independent():
    values = np.full((3, 50), np.nan)
    values[0, [9, 19]] = [0.2, 0.4]  # bins 10 and 20
    values[1, 49] = 0.7  # only the last bin
    out = interpolate_curve(values)
    # row 0: bins 1..10 -> 0.2, bin 15 -> 0.2 + 0.2 * 5/10 = 0.3, bins 20..50 -> 0.4
    assert out[0, 0] == pytest.approx(0.2)
    assert out[0, 14] == pytest.approx(0.3)
    assert out[0, 49] == pytest.approx(0.4)
    assert np.all(out[1] == 0.7)  # constant before the only observed bin
    assert np.all(np.isnan(out[2]))  # nothing observed


# ---------------------------------------------------------------------------------------------
# SOTU
# ---------------------------------------------------------------------------------------------


def test_sotu_extremes_and_never_solved():
    # all hazards in one bin: p = (1), H = 0
    assert sotu([12, 12, 12]) == 0.0
    # one trace per bin: p_b = 1/50, H = log 50, / log 50 = 1
    assert sotu(range(1, 51)) == pytest.approx(1.0, abs=1e-12)
    # never-solved traces (None / NaN) do not enter the histogram
    assert sotu([12, 12, None, float("nan")]) == 0.0
    # two bins, 2 and 1 traces: H = -(2/3 log 2/3 + 1/3 log 1/3) = 0.6365; / log 50 = 0.1627
    expected = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3)) / LOG50
    assert sotu([3, 3, 40, None]) == pytest.approx(expected, abs=1e-12)
    # release divides by log(non-empty bins) = log 2
    assert sotu([3, 3, 40], profile="release") == pytest.approx(expected * LOG50 / math.log(2))
    assert sotu([3, 3, 3], profile="release") == 0.0
    assert math.isnan(sotu([None, None]))


def test_teacher_sotu_uniform_hazards_is_one_and_never_solved_is_excluded():
    # 50 traces of m = 50 steps, prefixes k = 1..50; trace i is correct from k = i on, so its
    # hazard is bin ceil(50 i / 50) = i: one trace per bin -> SOTU = log 50 / log 50 = 1.
    rows = [
        ("T", "D", "S", f"t{i:02d}", k, 50, float(k >= i))
        for i in range(1, 51)
        for k in range(1, 51)
    ]
    # plus one trace never solved: excluded from the histogram, counted in never_solved
    rows += [("T", "D", "S", "never", k, 50, 0.0) for k in range(1, 51)]
    row = teacher_metrics(rollouts_of(rows), n_boot=0).iloc[0]
    assert row["sotu"] == pytest.approx(1.0, abs=1e-12)
    assert row["never_solved"] == pytest.approx(1 / 51)
    assert row["n_traces"] == 51


def test_teacher_sotu_all_in_one_bin_is_zero():
    rows = [("T", "D", "S", f"t{i}", k, 4, float(k >= 2)) for i in range(5) for k in (1, 2, 3, 4)]
    # every trace first correct at k = 2 of 4 -> bin 25 -> histogram in one bin -> 0
    assert teacher_metrics(rollouts_of(rows), n_boot=0).iloc[0]["sotu"] == 0.0


# ---------------------------------------------------------------------------------------------
# Teacher level
# ---------------------------------------------------------------------------------------------


def test_teacher_average_is_over_traces_then_students():
    # student A: traces a (all correct, FOTU 1) and b (all wrong, FOTU 0) -> mean 0.5
    # student B: trace a only, all correct -> 1.   Teacher FOTU = (0.5 + 1) / 2 = 0.75
    # (a pooled mean over the three pairs would give 2/3).
    rows = [("T", "D", "A", "a", k, 2, 1.0) for k in (1, 2)]
    rows += [("T", "D", "A", "b", k, 2, 0.0) for k in (1, 2)]
    rows += [("T", "D", "B", "a", k, 2, 1.0) for k in (1, 2)]
    row = teacher_metrics(rollouts_of(rows), n_boot=0).iloc[0]
    assert row["fotu"] == 0.75
    # never solved: A 1/2, B 0/1 -> 0.25; SOTU: A one hazard (bin 25) -> 0, B -> 0
    assert row["never_solved"] == 0.25
    assert row["sotu"] == 0.0
    assert (row["n_traces"], row["n_students"]) == (2, 2)
    assert math.isnan(row["baseline"])  # no k = 0 rollouts


TWO_STUDENTS = rollouts_of(
    [
        # trace t1, m = 2, k = 0, 1, 2
        ("T", "D", "A", "t1", 0, 2, 0.0),
        ("T", "D", "A", "t1", 1, 2, 1.0),
        ("T", "D", "A", "t1", 2, 2, 1.0),
        ("T", "D", "B", "t1", 0, 2, 0.0),
        ("T", "D", "B", "t1", 1, 2, 0.0),
        ("T", "D", "B", "t1", 2, 2, 0.0),
        # trace t2, m = 4, k = 1, 2, 3
        ("T", "D", "A", "t2", 1, 4, 1.0),
        ("T", "D", "A", "t2", 2, 4, 0.0),
        ("T", "D", "A", "t2", 3, 4, 1.0),
        ("T", "D", "B", "t2", 1, 4, 0.0),
        ("T", "D", "B", "t2", 2, 4, 0.0),
        ("T", "D", "B", "t2", 3, 4, 1.0),
    ]
)


def test_release_teacher_fotu_is_plain_average_of_student_bin_means():
    # release bins: t1 k=1 (of 2) -> floor(25)+1 = 26 (k=2 = m dropped);
    #               t2 k=1,2,3 (of 4) -> floor(12.5)+1 = 13, floor(25)+1 = 26, floor(37.5)+1 = 38
    # student A bin means pooled over traces: 13 -> 1, 26 -> (1 + 0)/2 = 0.5, 38 -> 1
    # student B:                              13 -> 0, 26 -> (0 + 0)/2 = 0,   38 -> 1
    # plain average: 13 -> 0.5, 26 -> 0.25, 38 -> 1; FOTU = (0.5 + 0.25 + 1) / 3 = 0.58333
    row = teacher_metrics(TWO_STUDENTS, profile="release", n_boot=0).iloc[0]
    assert row["fotu"] == pytest.approx(1.75 / 3, abs=1e-12)
    # hazards A: t1 -> 26, t2 -> 13: two bins, H = log 2, / log 2 = 1;
    #         B: t1 never, t2 -> 38: one bin -> 0.  SOTU = (1 + 0) / 2 = 0.5
    assert row["sotu"] == pytest.approx(0.5, abs=1e-12)
    # never solved: A 0/2, B 1/2 -> 0.25; baseline: only t1 has k=0, both 0 -> 0
    assert row["never_solved"] == 0.25
    assert row["baseline"] == 0.0
    assert row["lift"] == pytest.approx(1.75 / 3)
    # regression: A t1 (k=1 only) NaN, t2 1,0,1 -> 1/2; B t1 NaN, t2 0,0,1 -> 0 -> (0.5 + 0) / 2
    assert row["regression_rate"] == 0.25


def test_paper_teacher_metrics_on_two_students():
    # paper bins: t1 (m=2) k=1 -> 25, k=2 -> 50; t2 (m=4) k=1 -> 13, 2 -> 25, 3 -> 38
    # A t1: 1, 1 -> FOTU 1.  A t2: 1 at 13, 0 at 25, 1 at 38, constant 1 after:
    #   1..13 -> 13; 14..24: 1 - (b-13)/12, sum 11 - 66/12 = 5.5; 25 -> 0;
    #   26..37: (b-25)/13, sum 78/13 = 6; 38..50 -> 13.  FOTU = 37.5 / 50 = 0.75
    # B t1: all 0 -> 0. B t2: 0 at 13, 25; 1 at 38: 26..37 sum 6, 38..50 -> 13 -> 19/50 = 0.38
    # teacher FOTU = ((1 + 0.75)/2 + (0 + 0.38)/2) / 2 = (0.875 + 0.19) / 2 = 0.5325
    row = teacher_metrics(TWO_STUDENTS, n_boot=0).iloc[0]
    assert row["fotu"] == pytest.approx(0.5325, abs=1e-12)
    # hazards A: 25, 13 -> log 2 / log 50; B: 38 only -> 0
    assert row["sotu"] == pytest.approx(math.log(2) / LOG50 / 2, abs=1e-12)
    # baseline: t1 only, 0 for both; lift = 0.5325 - 0
    assert row["lift"] == pytest.approx(0.5325, abs=1e-12)


def test_per_student_table_and_per_trace_table_match_the_hand_values():
    per_student = teacher_metrics(TWO_STUDENTS, n_boot=0, by=("teacher", "dataset", "student"))
    assert per_student["student"].tolist() == ["A", "B"]
    # from the previous test: A (1 + 0.75)/2 = 0.875, B (0 + 0.38)/2 = 0.19
    assert per_student["fotu"].tolist() == pytest.approx([0.875, 0.19], abs=1e-12)
    traces = trace_metrics(TWO_STUDENTS)
    assert list(zip(traces["trace_id"], traces["student"], strict=True)) == [
        ("t1", "A"),
        ("t1", "B"),
        ("t2", "A"),
        ("t2", "B"),
    ]
    assert traces["fotu"].tolist() == pytest.approx([1.0, 0.0, 0.75, 0.38], abs=1e-12)
    assert traces["hazard_bin"].tolist()[:3] == [25, pd.NA, 13]


def test_bootstrap_is_seeded_and_independent_of_other_groups():
    rng = np.random.default_rng(3)
    rows = [
        (t, "D", s, f"{t}-{i}", k, 6, float(rng.random() < k / 6))
        for t in ("T1", "T2")
        for i in range(30)
        for s in ("A", "B")
        for k in range(7)
    ]
    both = rollouts_of(rows)
    a = teacher_metrics(both, n_boot=300, seed=7)
    b = teacher_metrics(both, n_boot=300, seed=7)
    pd.testing.assert_frame_equal(a, b)
    alone = teacher_metrics(both[both["teacher"] == "T1"], n_boot=300, seed=7)
    pd.testing.assert_frame_equal(alone.iloc[[0]], a.iloc[[0]])
    other = teacher_metrics(both, n_boot=300, seed=8)
    assert not np.allclose(other["fotu_lo"], a["fotu_lo"])
    for name in TEACHER_QUANTITIES:
        assert np.all(a[f"{name}_lo"] <= a[f"{name}_hi"])
        assert np.all((a[f"{name}_lo"] <= a[name] + 1e-12) & (a[name] <= a[f"{name}_hi"] + 1e-12))
    assert np.all(a["fotu_hi"] - a["fotu_lo"] > 0.01)


def test_bootstrap_interval_collapses_when_every_trace_is_the_same():
    rows = [("T", "D", "S", f"t{i}", k, 3, float(k >= 2)) for i in range(10) for k in range(4)]
    row = teacher_metrics(rollouts_of(rows), n_boot=200).iloc[0]
    assert row["fotu_lo"] == pytest.approx(row["fotu"]) and row["fotu_hi"] == pytest.approx(
        row["fotu"]
    )
    assert teacher_metrics(rollouts_of(rows), n_boot=0)[["fotu_lo", "fotu_hi"]].isna().all().all()


def test_curve_mean_matches_teacher_fotu_and_baseline():
    c = curve(TWO_STUDENTS, by=["teacher", "dataset"], n_boot=50, seed=1)
    assert len(c) == 50
    assert c["x"].iloc[0] == pytest.approx(0.01) and c["x"].iloc[-1] == pytest.approx(0.99)
    # the area under mu_T equals the teacher FOTU of the paper profile (0.5325 above)
    assert c["mean"].mean() == pytest.approx(0.5325, abs=1e-12)
    assert c["baseline"].iloc[0] == 0.0
    assert np.all((c["lo"] <= c["mean"] + 1e-12) & (c["mean"] <= c["hi"] + 1e-12))
    # release: the pooled curve has values only on bins 13, 26, 38 (0.5, 0.25, 1)
    r = curve(TWO_STUDENTS, n_boot=0, profile="release")
    observed = r.dropna(subset=["mean"])
    assert observed["bin"].tolist() == [13, 26, 38]
    assert observed["mean"].tolist() == pytest.approx([0.5, 0.25, 1.0])


# ---------------------------------------------------------------------------------------------
# Answer leak
# ---------------------------------------------------------------------------------------------

STEP_TEXTS = {
    "a": ["Let x = 2.", "Then 2x = \\boxed{4}.", "Check: x+x = 4.", "So it is 4."],
    "b": ["Consider.", "Think more"],
}
REASONING = {trace: " ".join(texts) for trace, texts in STEP_TEXTS.items()}


def steps_table() -> pd.DataFrame:
    rows = []
    for trace, texts in STEP_TEXTS.items():
        start = 0
        for step, text in enumerate(texts):
            # exact character spans into the reasoning (steps separated by one space)
            assert REASONING[trace][start : start + len(text)] == text
            rows.append((trace, step, start, start + len(text), text))
            start += len(text) + 1
    return pd.DataFrame(rows, columns=["trace_id", "step", "start", "end", "text"])


STEPS = steps_table()
GOLD = {"a": "4", "b": "7"}


def boxed_correct(trace_id: str, text: str) -> bool:
    return f"\\boxed{{{GOLD[trace_id]}}}" in text


def test_answer_leak_points_from_step_texts_and_from_spans():
    seen: list[tuple[str, int]] = []

    def spy(trace_id: str, text: str) -> bool:
        seen.append((trace_id, len(text)))
        return boxed_correct(trace_id, text)

    leaks = answer_leak_points(STEPS, spy)
    # trace a: the boxed answer appears in step 2 (k = 2); b never states 7
    assert leaks["trace_id"].tolist() == ["a", "b"]
    assert leaks["leak_k"].tolist() == [2, pd.NA]
    assert leaks["m"].tolist() == [4, 2]
    # the callable stops at the first hit: a is asked for k = 1, 2; b for k = 1, 2
    assert [t for t, _ in seen] == ["a", "a", "b", "b"]
    spans = answer_leak_points(STEPS, boxed_correct, reasoning=REASONING)
    assert spans["leak_k"].tolist() == [2, pd.NA]


def test_answer_leak_rejects_gaps_in_step_numbers():
    broken = STEPS.drop(index=1)
    with pytest.raises(SchemaError, match=r"steps.*not numbered 0..m-1"):
        answer_leak_points(broken, boxed_correct)


def test_fotu_before_leak_by_hand():
    # m = 4, k = 1..4 correct 0, 1, 1, 1: bins ceil(12.5)=13 (0), 25 (1), ceil(37.5)=38, 50.
    # full curve: 1..13 -> 0, 14..24 -> (b-13)/12 (sum 66/12 = 5.5), 25..50 -> 1 (26 bins)
    # FOTU = 31.5 / 50 = 0.63.  Leak at k = 3: keep k = 1, 2 -> last bin 25;
    # mean over bins 1..25 = (0 + 5.5 + 1) / 25 = 0.26
    r = pd.concat(
        [
            one_trace([1, 2, 3, 4], 4, [0, 1, 1, 1], trace="t"),
            one_trace([1, 2], 2, [1, 1], trace="never"),
            one_trace([1, 2], 2, [1, 1], trace="early"),
            one_trace([1, 2], 2, [1, 1], trace="unknown"),
        ]
    )
    leaks = pd.DataFrame({"trace_id": ["t", "never", "early"], "leak_k": [3, None, 1]})
    out = fotu_before_leak(r, leaks).set_index("trace_id")
    assert out.loc["t", "fotu"] == pytest.approx(0.63, abs=1e-12)
    assert out.loc["t", "fotu_before_leak"] == pytest.approx(0.26, abs=1e-12)
    assert out.loc["never", "fotu_before_leak"] == 1.0  # no leak: the ordinary FOTU
    assert math.isnan(out.loc["early", "fotu_before_leak"])  # nothing shown before k = 1
    assert math.isnan(out.loc["unknown", "fotu_before_leak"])  # not in the leak table
    assert out["leak_k"].tolist() == [1, pd.NA, 3, pd.NA]  # sorted by trace_id


# ---------------------------------------------------------------------------------------------
# Validation and profiles
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (lambda r: r.drop(columns="m"), r"rollouts.*missing column.*'m'"),
        (lambda r: r.assign(k=[0, 3, 10, 9]), r"rollouts', row 2, field 'k': k must be in 0..m"),
        (lambda r: r.assign(correct=[0, 0, 1.5, 1]), r"row 2, field 'correct'"),
        (lambda r: r.assign(k=[0, 3, 6.5, 9]), r"row 2, field 'k': k must be a whole number"),
        (lambda r: r.assign(m=[9, 9, 8, 9]), r"row 2, field 'm'.*more than one m"),
        (lambda r: r.assign(teacher=["T", None, "T", "T"]), r"row 1, field 'teacher'.*missing"),
        (lambda r: r.assign(correct=["0", "no", "1", "1"]), r"field 'correct'.*not a number"),
    ],
)
def test_bad_rollouts_name_table_row_and_field(change, pattern):
    with pytest.raises(SchemaError, match=pattern):
        trace_metrics(change(WORKED.copy()))


def test_unknown_profile_grid_and_grouping_are_clear_errors():
    with pytest.raises(ValueError, match="unknown transfer profile 'nope'"):
        trace_metrics(WORKED, profile="nope")
    with pytest.raises(ValueError, match="unknown grid 'cubic'"):
        trace_metrics(WORKED, grid="cubic")
    with pytest.raises(ValueError, match="cannot group"):
        teacher_metrics(WORKED, by="colour")
    with pytest.raises(ValueError, match="n_boot"):
        teacher_metrics(WORKED, n_boot=-1)


def test_profiles_are_a_registry():
    assert set(PROFILES) >= {"paper", "release"}
    assert get_profile("paper").keep_full_trace and not get_profile("release").keep_full_trace
    custom = TransferProfile(
        name="test-observed-paper",
        description="paper bins without interpolation",
        bin_of=paper_bin,
        keep_full_trace=True,
        grid="observed",
        sotu_normaliser=get_profile("paper").sotu_normaliser,
        pooled_student_curves=False,
    )
    register_profile(custom)
    try:
        assert trace_metrics(WORKED, profile="test-observed-paper").iloc[0][
            "fotu"
        ] == pytest.approx(2 / 3)
        with pytest.raises(ValueError, match="already registered"):
            register_profile(custom)
    finally:
        PROFILES.pop("test-observed-paper")


def test_empty_rollouts_give_empty_tables():
    empty = WORKED.iloc[0:0]
    assert trace_metrics(empty).empty
    assert teacher_metrics(empty, n_boot=10).empty
    assert curve(empty, n_boot=0).empty


# ---------------------------------------------------------------------------------------------
# Properties (hypothesis) and a plain-Python oracle
# ---------------------------------------------------------------------------------------------


def oracle_trace(points: dict[int, list[float]], m: int) -> tuple[float, int, int]:
    """SPEC section 3 written as directly as possible: (fotu, hazard bin or 0, drops)."""
    means = {k: sum(v) / len(v) for k, v in points.items()}
    later = sorted(k for k in means if k >= 1)
    if not later:
        return math.nan, 0, 0
    by_bin: dict[int, list[float]] = {}
    for k in later:
        by_bin.setdefault(math.ceil(50 * k / m), []).append(means[k])
    obs = sorted(by_bin)
    val = {b: sum(v) / len(v) for b, v in by_bin.items()}
    curve_values = []
    for b in range(1, 51):
        if b <= obs[0]:
            curve_values.append(val[obs[0]])
        elif b >= obs[-1]:
            curve_values.append(val[obs[-1]])
        else:
            lo = max(o for o in obs if o <= b)
            hi = min(o for o in obs if o >= b)
            w = 0.0 if hi == lo else (b - lo) / (hi - lo)
            curve_values.append(val[lo] + (val[hi] - val[lo]) * w)
    full = {k: sum(y == 1.0 for y in v) / len(v) for k, v in points.items()}
    hazard = next((math.ceil(50 * k / m) for k in later if full[k] >= 0.5), 0)
    ys = [means[k] for k in later]
    drops = sum(b < a for a, b in itertools.pairwise(ys))
    return sum(curve_values) / 50, hazard, drops


@st.composite
def random_rollouts(draw, all_correct: bool = False) -> pd.DataFrame:
    rows = []
    n_traces = draw(st.integers(1, 6))
    students = draw(
        st.lists(st.sampled_from(["s1", "s2", "s3"]), min_size=1, max_size=3, unique=True)
    )
    for i in range(n_traces):
        teacher = draw(st.sampled_from(["A", "B"]))
        m = draw(st.integers(1, 60))
        ks = draw(st.lists(st.integers(0, m), min_size=1, max_size=8, unique=True))
        for student in students:
            for k in ks:
                for _ in range(draw(st.integers(1, 2))):
                    y = 1.0 if all_correct else draw(st.sampled_from([0.0, 0.25, 0.5, 1.0]))
                    rows.append((teacher, "D", student, f"t{i}", k, m, y))
    return rollouts_of(rows)


PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(random_rollouts())
def test_property_matches_plain_python_oracle(rollouts):
    got = trace_metrics(rollouts)
    for row in got.itertuples():
        mine = rollouts[(rollouts.trace_id == row.trace_id) & (rollouts.student == row.student)]
        points: dict[int, list[float]] = {}
        for k, y in zip(mine.k, mine.correct, strict=True):
            points.setdefault(int(k), []).append(float(y))
        fotu, hazard, drops = oracle_trace(points, int(row.m))
        assert (math.isnan(fotu) and math.isnan(row.fotu)) or abs(fotu - row.fotu) < 1e-9
        assert (0 if pd.isna(row.hazard_bin) else row.hazard_bin) == hazard
        assert row.regression_count == drops


@PROPERTY_SETTINGS
@given(random_rollouts(), st.sampled_from(["paper", "release"]))
def test_property_fotu_and_sotu_are_in_unit_interval(rollouts, profile):
    traces = trace_metrics(rollouts, profile=profile)
    teachers = teacher_metrics(rollouts, profile=profile, n_boot=20)
    for values in (traces["fotu"], teachers["fotu"], teachers["sotu"], teachers["fotu_lo"]):
        finite = values.dropna()
        assert ((finite >= -1e-12) & (finite <= 1 + 1e-12)).all()


@PROPERTY_SETTINGS
@given(random_rollouts(all_correct=True), st.sampled_from(["paper", "release"]))
def test_property_all_correct_teacher_has_fotu_one(rollouts, profile):
    teachers = teacher_metrics(rollouts, profile=profile, n_boot=0)
    finite = teachers["fotu"].dropna()
    assert np.allclose(finite, 1.0)
    has_prefix = (
        rollouts["k"] >= 1
        if profile == "paper"
        else (rollouts["k"] >= 1) & (rollouts["k"] < rollouts["m"])
    )
    assert len(finite) == rollouts[has_prefix]["teacher"].nunique()


@PROPERTY_SETTINGS
@given(random_rollouts(), st.sampled_from(["paper", "release"]))
def test_property_all_wrong_student_never_raises_teacher_fotu(rollouts, profile):
    # Teacher FOTU is a mean over students; a student with FOTU 0 on every trace can only pull
    # it down (or leave it, when it is already 0).
    before = teacher_metrics(rollouts, profile=profile, n_boot=0).set_index("teacher")["fotu"]
    shown = rollouts.drop_duplicates(["trace_id", "k"]).assign(student="all-wrong", correct=0.0)
    after = teacher_metrics(pd.concat([rollouts, shown]), profile=profile, n_boot=0)
    after = after.set_index("teacher")["fotu"]
    for teacher, value in before.dropna().items():
        assert after[teacher] <= value + 1e-12


@PROPERTY_SETTINGS
@given(
    random_rollouts(),
    st.sampled_from(["paper", "release"]),
    st.sampled_from(["interpolate", "observed"]),
)
def test_property_closed_form_fotu_equals_mean_of_the_dense_curve(rollouts, profile, grid):
    # trace_metrics integrates the curve in closed form from the observed bins; trace_curves
    # builds the 50 bins explicitly. Their means must agree.
    fotu = trace_metrics(rollouts, profile=profile, grid=grid)["fotu"].to_numpy()
    _, curves = trace_curves(rollouts, profile=profile, grid=grid)
    with np.errstate(invalid="ignore"):
        dense = np.array([np.nan if np.isnan(c).all() else np.nanmean(c) for c in curves])
    assert np.allclose(fotu, dense, atol=1e-12, equal_nan=True)
