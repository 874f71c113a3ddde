"""Tests of legival_core.metrics.transfer: every expected number is worked out by hand in a
comment."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from legival_core.metrics.transfer import (
    PROFILES,
    TEACHER_QUANTITIES,
    TransferProfile,
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
    trace_metrics_with_leaks,
)
from legival_core.store.schema import SchemaError

LOG50 = math.log(50)


def rollouts_of(rows: list[tuple]) -> pd.DataFrame:
    """(teacher, dataset, student, trace_id, k, m, correct) tuples -> rollouts table."""
    frame = pd.DataFrame(
        rows, columns=["teacher", "dataset", "student", "trace_id", "k", "m", "correct"]
    )
    frame["problem_id"] = "p-" + frame["trace_id"]
    return frame


def one_trace(
    ks: list[int], m: int, ys: list[float], trace: str = "t1", student: str = "S"
) -> pd.DataFrame:
    """The rollouts of ``student`` on one trace of ``m`` steps (teacher "T", dataset "D"): the
    prefix of ``ks[i]`` steps scored ``ys[i]``."""
    return rollouts_of([("T", "D", student, trace, k, m, y) for k, y in zip(ks, ys, strict=True)])


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
    # release drops k = m = 9 and keeps k = 0 with the others: points k = 0, 3, 6 with 0, 0, 1.
    # Per-trace "fotu" is the release's trace score: mean correctness, unbinned = 1/3.
    row = trace_metrics(WORKED, profile="release").iloc[0]
    assert row["fotu"] == pytest.approx(1 / 3, abs=1e-12)
    # first correct k = 6: pct 66.67 -> int(33.3) = 33 -> centre 67 = bin 34
    assert row["hazard_bin"] == 34
    # credit along k = 0, 3, 6: 0, 0, 1 -> no drop
    assert row["regression_count"] == 0
    assert row["regression_rate"] == 0.0
    assert row["baseline"] == 0.0
    assert row["lift"] == pytest.approx(1 / 3, abs=1e-12)


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


def test_interpolate_curve_in_blocks_equals_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # Large inputs are filled block by block (memory at a million traces); with blocks of 4
    # rows, 11 random rows span three blocks and every value equals the one-call result.
    # the block size is read where interpolate_curve lives, so it is patched there
    from legival_core.metrics import transfer_grid

    rng = np.random.default_rng(7)
    values = np.where(rng.random((11, 50)) < 0.1, rng.random((11, 50)), np.nan)
    values[3] = np.nan  # a row with nothing observed, inside a block
    whole = interpolate_curve(values)
    monkeypatch.setattr(transfer_grid, "INTERPOLATE_BLOCK", 4)
    np.testing.assert_array_equal(interpolate_curve(values), whole)


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
    # release divides by log(curve centres) and puts 1e-12 inside the log
    h_eps = -(2 / 3 * math.log(2 / 3 + 1e-12) + 1 / 3 * math.log(1 / 3 + 1e-12))
    got = sotu([3, 3, 40], profile="release", curve_centres=7)
    assert got == pytest.approx(h_eps / math.log(7), abs=1e-15)
    assert math.isnan(sotu([None, None]))
    with pytest.raises(ValueError, match="curve_centres"):
        sotu([3], profile="release")


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


TWO_STUDENTS = pd.concat(
    [
        # trace t1, m = 2, k = 0, 1, 2
        one_trace([0, 1, 2], 2, [0.0, 1.0, 1.0], trace="t1", student="A"),
        one_trace([0, 1, 2], 2, [0.0, 0.0, 0.0], trace="t1", student="B"),
        # trace t2, m = 4, k = 1, 2, 3
        one_trace([1, 2, 3], 4, [1.0, 0.0, 1.0], trace="t2", student="A"),
        one_trace([1, 2, 3], 4, [0.0, 0.0, 1.0], trace="t2", student="B"),
    ],
    ignore_index=True,
)


def test_release_teacher_metrics_on_two_students():
    # release centres (pct = k/m*100, centre = int(pct/2)*2+1, bin = (centre+1)/2):
    #   t1 (m=2): k=0 -> centre 1 (bin 1), k=1 -> 51 (bin 26), k=2 = m dropped;
    #   t2 (m=4): k=1 -> 25 (bin 13), k=2 -> 51 (bin 26), k=3 -> 75 (bin 38).
    # student A pooled over traces: bin 1 -> 0, 13 -> 1, 26 -> (1 + 0)/2 = 0.5, 38 -> 1
    # student B:                    bin 1 -> 0, 13 -> 0, 26 -> (0 + 0)/2 = 0,   38 -> 1
    # average per bin: 0, 0.5, 0.25, 1; FOTU = 1.75 / 4 = 0.4375
    row = teacher_metrics(TWO_STUDENTS, profile="release", n_boot=0).iloc[0]
    assert row["fotu"] == pytest.approx(0.4375, abs=1e-12)
    # hazards (first correct k, k = 0 included) A: t1 -> bin 26, t2 -> bin 13; B: t2 -> 38.
    # The curve has data in C = 4 centres: A -log(1/2 + 1e-12) / log 4 = 0.5 (to 1e-12);
    # B: -log(1 + 1e-12) / log 4 = -7e-13.  SOTU = mean = 0.25
    assert row["sotu"] == pytest.approx(0.25, abs=1e-11)
    # never solved: A 0/2, B 1/2 -> 0.25; baseline: only t1 has k=0, both 0 -> 0
    assert row["never_solved"] == 0.25
    assert row["baseline"] == 0.0
    assert row["lift"] == pytest.approx(0.4375)
    # regression = share of traces with a drop along k = 0, 1, ...: A t1 0,1 no; t2 1,0,1 yes
    # -> 1/2; B t1 0,0 no; t2 0,0,1 no -> 0.  Mean over students = 0.25
    assert row["regression_rate"] == 0.25
    traces = trace_metrics(TWO_STUDENTS, profile="release")
    # trace scores: A t1 (0+1)/2, B t1 0, A t2 2/3, B t2 1/3
    assert traces["fotu"].tolist() == pytest.approx([0.5, 0.0, 2 / 3, 1 / 3], abs=1e-12)
    assert traces["regression_rate"].tolist() == [0.0, 0.0, 1.0, 0.0]
    assert traces["hazard_bin"].tolist() == [26, pd.NA, 13, 38]


# ---------------------------------------------------------------------------------------------
# The release profile, rule by rule, each on its smallest case (docs/profiles.md)
# ---------------------------------------------------------------------------------------------


def test_release_pools_k0_into_centre_1():
    # m = 2, k = 0, 1 with 1, 0: k = 0 -> centre 1 (value 1), k = 1 -> pct 50 -> centre 51
    # (value 0). Release FOTU = (1 + 0) / 2 = 0.5.  Paper keeps k = 0 apart: only bin 25 (0),
    # interpolated flat -> 0.
    r = one_trace([0, 1], 2, [1.0, 0.0])
    assert teacher_metrics(r, profile="release", n_boot=0).iloc[0]["fotu"] == 0.5
    assert teacher_metrics(r, n_boot=0).iloc[0]["fotu"] == 0.0
    c = curve(r, n_boot=0, profile="release").dropna(subset=["mean"])
    assert c["bin"].tolist() == [1, 26] and c["mean"].tolist() == [1.0, 0.0]
    # the baseline is still the k = 0 rollout, and the hazard may be k = 0 (centre 1 = bin 1)
    row = trace_metrics(r, profile="release").iloc[0]
    assert row["baseline"] == 1.0 and row["hazard_bin"] == 1


def test_release_bins_in_floating_point():
    # 87/150*100 = 57.99999999999999 -> int(29.0 - eps) = 28 -> centre 57 (exact: 58 -> 59);
    # 28/50*100 = 56.00000000000001 -> 28 -> centre 57; 59/100*100 = 59.0 -> 29 -> centre 59.
    assert 87 / 150 * 100 < 58 and int(87 / 150 * 100 / 2) * 2 + 1 == 57
    rows = rollouts_of(
        [
            ("T", "D", "S", "a", 87, 150, 1.0),
            ("T", "D", "S", "b", 28, 50, 1.0),
            ("T", "D", "S", "c", 59, 100, 0.0),
        ]
    )
    # float: centre 57 -> (1 + 1)/2 = 1, centre 59 -> 0: FOTU 0.5.
    # exact bins would give centre 57 -> 1 (b), centre 59 -> (1 + 0)/2 (a, c): 0.75.
    assert teacher_metrics(rows, profile="release", n_boot=0).iloc[0]["fotu"] == 0.5
    c = curve(rows, n_boot=0, profile="release").dropna(subset=["mean"])
    assert c["bin"].tolist() == [29, 30]  # centres 57, 59
    assert release_bin(np.array([87, 28, 59]), np.array([150, 50, 100])).tolist() == [29, 29, 30]


def test_release_regression_is_share_of_traces_with_a_drop_from_k0():
    # m = 4, k = 0, 3 with 1, 0: the drop 1 -> 0 from k = 0 counts -> trace regressed -> 1.0.
    # Paper: drops / (K - 1) over k >= 1 has one prefix only -> undefined (NaN).
    r = one_trace([0, 3], 4, [1.0, 0.0])
    assert teacher_metrics(r, profile="release", n_boot=0).iloc[0]["regression_rate"] == 1.0
    assert math.isnan(teacher_metrics(r, n_boot=0).iloc[0]["regression_rate"])
    # a drop needs credit before and none after: partial credit 0.25 -> 0 is a drop,
    # 1 -> 0.25 is not (score > 0 counts as correct there), and two drops still count once
    r2 = rollouts_of(
        [("T", "D", "S", "a", k, 9, y) for k, y in zip([0, 3, 6], [1.0, 0.25, 0.0], strict=True)]
        + [("T", "D", "S", "b", k, 9, y) for k, y in zip([0, 3, 6], [1.0, 0.0, 1.0], strict=True)]
        + [("T", "D", "S", "c", k, 9, y) for k, y in zip([0, 3, 6], [0.0, 0.0, 0.0], strict=True)]
        + [("T", "D", "S", "d", k, 9, y) for k, y in zip([0, 3, 6, 8], [1, 0, 1, 0], strict=True)]
    )
    traces = trace_metrics(r2, profile="release")
    assert traces["regression_count"].tolist() == [1, 1, 0, 2]
    assert traces["regression_rate"].tolist() == [1.0, 1.0, 0.0, 1.0]
    assert teacher_metrics(r2, profile="release", n_boot=0).iloc[0]["regression_rate"] == 0.75


def test_release_sotu_divides_by_log_of_curve_centres():
    # m = 100, k = 0, 50, 60, 74, 80 -> centres 1, 51, 61, 75, 81 (C = 5).
    # trace a first correct at k = 50 (centre 51 = bin 26), b at k = 74 (centre 75 = bin 38):
    # q = (1/2, 1/2), H = -log(1/2 + 1e-12) = log 2, SOTU = log 2 / log 5 = 0.4307
    # (the old normaliser, log(non-empty hazard bins) = log 2, gave 1.0).
    ks = [0, 50, 60, 74, 80]
    r = pd.concat(
        [
            one_trace(ks, 100, [0, 1, 1, 1, 1], trace="a"),
            one_trace(ks, 100, [0, 0, 0, 1, 1], trace="b"),
        ]
    )
    assert trace_metrics(r, profile="release")["hazard_bin"].tolist() == [26, 38]
    c = curve(r, n_boot=0, profile="release").dropna(subset=["mean"])
    assert (2 * c["bin"] - 1).tolist() == [1, 51, 61, 75, 81]
    want = -math.log(0.5 + 1e-12) / math.log(5)
    assert want == pytest.approx(math.log(2) / math.log(5), abs=1e-11)
    assert round(want, 3) == 0.431
    row = teacher_metrics(r, profile="release", n_boot=0).iloc[0]
    assert row["sotu"] == pytest.approx(want, abs=1e-15)
    assert sotu([26, 38], "release", curve_centres=5) == pytest.approx(want, abs=1e-15)
    # per student, then the plain mean over students; a student with no solved trace is left out
    other = r.assign(student="U", correct=0.0)
    both = teacher_metrics(pd.concat([r, other]), profile="release", n_boot=0).iloc[0]
    assert both["sotu"] == pytest.approx(want, abs=1e-15)


def test_release_keeps_the_last_sample_of_a_prefix():
    # k = 1 of m = 3 written twice, 1 then 0: the release keeps the later row (0).
    # Paper averages the two samples (0.5).
    r = one_trace([0, 1, 1, 2], 3, [0.0, 1.0, 0.0, 1.0])
    release = trace_metrics(r, profile="release").iloc[0]
    # points k = 0, 1, 2: 0, 0, 1 -> trace score 1/3; first correct k = 2 -> pct 66.7 -> bin 34
    assert release["fotu"] == pytest.approx(1 / 3)
    assert release["hazard_bin"] == 34
    # in the other order the later row is the 1: k = 1 solved (pct 33.3 -> centre 33 = bin 17)
    swapped = r.iloc[[0, 2, 1, 3]]
    again = trace_metrics(swapped, profile="release").iloc[0]
    assert again["fotu"] == pytest.approx(2 / 3) and again["hazard_bin"] == 17
    paper_curve = curve(r, n_boot=0)
    assert paper_curve["mean"].iloc[16] == pytest.approx(0.5)  # bin ceil(50/3) = 17: mean 0.5


def test_release_fotu_per_trace_is_the_trace_score_whatever_the_grid():
    r = one_trace([0, 3, 6, 8], 9, [1.0, 0.0, 0.5, 1.0])
    for grid in ("observed", "interpolate"):
        assert trace_metrics(r, profile="release", grid=grid).iloc[0]["fotu"] == 0.625


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
    # release: the pooled curve has values only on bins 1, 13, 26, 38 (0, 0.5, 0.25, 1), and
    # its mean is the release teacher FOTU (0.4375 above)
    r = curve(TWO_STUDENTS, n_boot=0, profile="release")
    observed = r.dropna(subset=["mean"])
    assert observed["bin"].tolist() == [1, 13, 26, 38]
    assert observed["mean"].tolist() == pytest.approx([0.0, 0.5, 0.25, 1.0])
    assert observed["mean"].mean() == pytest.approx(0.4375)


# ---------------------------------------------------------------------------------------------
# Answer leak
# ---------------------------------------------------------------------------------------------


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
    """FOTU as docs/metrics/fotu.md defines it, written as directly as possible: (fotu, hazard bin
    or 0, drops)."""
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
        # (the release SOTU of a one-centre curve is -log(1 + 1e-12), about -1e-12, as released)
        assert ((finite >= -2e-12) & (finite <= 1 + 1e-12)).all()


@PROPERTY_SETTINGS
@given(random_rollouts(all_correct=True), st.sampled_from(["paper", "release"]))
def test_property_all_correct_teacher_has_fotu_one(rollouts, profile):
    teachers = teacher_metrics(rollouts, profile=profile, n_boot=0)
    finite = teachers["fotu"].dropna()
    assert np.allclose(finite, 1.0)
    # release pools k = 0 into the first bin and drops k = m
    has_prefix = rollouts["k"] >= 1 if profile == "paper" else rollouts["k"] < rollouts["m"]
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
@given(random_rollouts(), st.sampled_from(["interpolate", "observed"]))
def test_property_closed_form_fotu_equals_mean_of_the_dense_curve(rollouts, grid):
    # trace_metrics integrates the curve in closed form from the observed bins; trace_curves
    # builds the 50 bins explicitly. Their means must agree. (Only for the paper profile: the
    # release's per-trace number is its unbinned trace score, tested against the oracle below.)
    profile = "paper"
    fotu = trace_metrics(rollouts, profile=profile, grid=grid)["fotu"].to_numpy()
    _, curves = trace_curves(rollouts, profile=profile, grid=grid)
    with np.errstate(invalid="ignore"):
        dense = np.array([np.nan if np.isnan(c).all() else np.nanmean(c) for c in curves])
    assert np.allclose(fotu, dense, atol=1e-12, equal_nan=True)


# ---------------------------------------------------------------------------------------------
# The release profile against a plain-Python rendering of the released pipeline
# ---------------------------------------------------------------------------------------------


def released_pipeline(rows: list[tuple]) -> dict[str, dict]:
    """The authors' released pipeline (commit 921eedd), restated with loops and dicts.

    ``rows`` are (teacher, dataset, student, trace_id, k, m, correct) in insertion order, as
    ``db_backend.insert_pedagogical_utility`` receives them. It stores one row per (dataset,
    student, teacher, trace, k), a later insert replacing an earlier one, with
    pct = k / m * 100. ``migrate_database.py`` bins pct as int(pct / 2) * 2 + 1 and takes the
    mean score per (dataset, teacher, student, centre); its regression cache counts, per
    trace, steps from a mean of (score > 0) >= 0.5 to one < 0.5 along k. The leaderboard
    (``db_backend.get_pu_leaderboard_stats`` / ``get_pu_leaderboard_regressions``) averages
    the student curves per centre, takes the mean over centres (FOTU), the mean over students
    of the regressed share, and the SOTU formula over the curve centres, here fed with the
    first fully correct k of each trace (the release leaves that input empty).
    """
    table: dict[tuple, tuple[int, float]] = {}
    for teacher, dataset, student, trace, k, m, score in rows:
        table[(dataset, student, teacher, trace, k)] = (m, score)

    centre_scores: dict[tuple, dict[str, dict[int, list[float]]]] = {}
    by_trace: dict[tuple, list[tuple[int, int, float]]] = {}
    for (dataset, student, teacher, trace, k), (m, score) in table.items():
        pct = k / m * 100
        centre = int(pct / 2.0) * 2 + 1
        group = centre_scores.setdefault((teacher, dataset), {})
        group.setdefault(student, {}).setdefault(centre, []).append(score)
        by_trace.setdefault((teacher, dataset, student, trace), []).append((k, centre, score))

    out: dict[str, dict] = {"fotu": {}, "curve": {}, "regression": {}, "sotu": {}}
    out["trace_score"] = {}
    out["hazard_centre"] = {}
    for key, steps in by_trace.items():
        steps.sort()
        out["trace_score"][key] = sum(s for _, _, s in steps) / len(steps)
        out["hazard_centre"][key] = next((c for _, c, s in steps if s == 1.0), None)

    for (teacher, dataset), per_student in centre_scores.items():
        student_means: dict[int, list[float]] = {}
        for centres in per_student.values():
            for centre, scores in centres.items():
                student_means.setdefault(centre, []).append(sum(scores) / len(scores))
        points = sorted(student_means)
        curve_values = {c: sum(v) / len(v) for c, v in student_means.items()}
        out["curve"][(teacher, dataset)] = curve_values
        out["fotu"][(teacher, dataset)] = sum(curve_values.values()) / len(curve_values)

        shares, entropies = [], []
        for student in sorted(per_student):
            traces = [
                key[3]
                for key in by_trace
                if key[0] == teacher and key[1] == dataset and key[2] == student
            ]
            regressed = 0
            masses = dict.fromkeys(points, 0.0)
            for trace in traces:
                steps = by_trace[(teacher, dataset, student, trace)]
                hits = [1.0 if score > 0 else 0.0 for _, _, score in steps]
                drops = 0
                for i in range(1, len(hits)):  # LAG over the k order
                    if hits[i - 1] >= 0.5 and hits[i] < 0.5:
                        drops += 1
                if drops > 0:
                    regressed += 1
                hazard = out["hazard_centre"][(teacher, dataset, student, trace)]
                if hazard is not None:
                    masses[hazard] += 1.0
            shares.append(regressed / len(traces))
            total = sum(masses.values())
            if total > 0:
                h = 0.0
                for c in points:
                    q = masses[c] / total
                    h -= q * math.log(q + 1e-12)
                denominator = math.log(len(points)) if len(points) > 1 else 1.0
                entropies.append(h / denominator)
        out["regression"][(teacher, dataset)] = sum(shares) / len(shares)
        out["sotu"][(teacher, dataset)] = sum(entropies) / len(entropies) if entropies else None
    return out


@st.composite
def release_design(draw) -> list[tuple]:
    """Synthetic rollouts as the release makes them: two students, k on the grid 0, 3, 6, ...
    and m - 1 (or any k < m), one sample per prefix, some prefixes written twice, rows in
    any order."""
    rows = []
    for teacher in ("A", "B"):
        for i in range(draw(st.integers(1, 4))):
            dataset = draw(st.sampled_from(["math", "connections"]))
            # m a multiple of 50 allows k/m = 0.58, whose float pct 57.99... bins one centre
            # lower than exact arithmetic (the only such k/m for m <= 400)
            m = draw(st.one_of(st.integers(1, 400), st.sampled_from(range(50, 401, 50))))
            if draw(st.booleans()):
                ks = set(range(0, m, 3)) | {m - 1}
            else:
                drawn = st.lists(st.integers(0, m - 1), min_size=1, max_size=10, unique=True)
                ks = set(draw(drawn))
            if m % 50 == 0 and draw(st.booleans()):
                ks.add(m * 29 // 50)
            ks = sorted(ks)
            for student in ("s1", "s2"):
                for k in ks:
                    for _ in range(draw(st.sampled_from([1, 1, 1, 2]))):
                        y = draw(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]))
                        rows.append((teacher, dataset, student, f"{teacher}-{i}", k, m, y))
    return draw(st.permutations(rows)) if draw(st.booleans()) else rows


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(release_design())
def test_property_release_equals_the_released_pipeline(rows):
    want = released_pipeline(rows)
    rollouts = rollouts_of(rows)
    teachers = teacher_metrics(rollouts, profile="release", n_boot=0)
    assert len(teachers) == len(want["fotu"])
    for row in teachers.itertuples():
        key = (row.teacher, row.dataset)
        assert abs(row.fotu - want["fotu"][key]) < 1e-9
        assert abs(row.regression_rate - want["regression"][key]) < 1e-9
        if want["sotu"][key] is None:
            assert math.isnan(row.sotu)
        else:
            assert abs(row.sotu - want["sotu"][key]) < 1e-9
    curves = curve(rollouts, by=["teacher", "dataset"], n_boot=0, profile="release")
    for (teacher, dataset), group in curves.groupby(["teacher", "dataset"]):
        expected = want["curve"][(teacher, dataset)]
        got = {int(2 * b - 1): v for b, v in zip(group["bin"], group["mean"], strict=True)}
        assert {c for c, v in got.items() if not math.isnan(v)} == set(expected)
        for centre, value in expected.items():
            assert abs(got[centre] - value) < 1e-9
    traces = trace_metrics(rollouts, profile="release")
    for row in traces.itertuples():
        key = (row.teacher, row.dataset, row.student, row.trace_id)
        assert abs(row.fotu - want["trace_score"][key]) < 1e-9
        centre = want["hazard_centre"][key]
        hazard = None if pd.isna(row.hazard_bin) else int(row.hazard_bin)
        assert hazard == (None if centre is None else (centre + 1) // 2)


def _dense_before_leak(rollouts: pd.DataFrame, leaks: pd.DataFrame, profile: str) -> np.ndarray:
    """FOTU before the leak the long way: each pair's dense 50-bin curve from the prefixes
    shown before its leak (filled as the profile's grid fills it), averaged over bins 1..its
    last kept bin."""
    from legival_core.metrics.transfer import _pair_leaks
    from legival_core.metrics.transfer_grid import GRIDS
    from legival_core.metrics.transfer_prefixes import _collapse
    from legival_core.metrics.transfer_traces import _curves

    prof = get_profile(profile)
    pre = _collapse(rollouts, prof)
    kept = pre.points(pre.k < _pair_leaks(pre.pairs, leaks)[pre.pair])
    curves = _curves(kept, GRIDS[prof.grid])
    last_bin = np.zeros(kept.n_pairs, dtype=np.int64)
    np.maximum.at(last_bin, kept.pair, kept.bin)
    within = np.arange(1, 51)[None, :] <= last_bin[:, None]
    with np.errstate(invalid="ignore"):
        chosen = np.where(within, curves, np.nan)
        counts = (~np.isnan(chosen)).sum(axis=1)
        return np.where(counts > 0, np.nansum(chosen, axis=1) / np.maximum(counts, 1), np.nan)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(1, 9),  # m
            # per k = 0..9: whether that prefix was rolled out (gaps), and its score
            st.lists(
                st.tuples(st.booleans(), st.sampled_from([0.0, 0.5, 1.0])),
                min_size=10,
                max_size=10,
            ),
            st.one_of(st.none(), st.integers(0, 10), st.just(-1)),  # leak; -1: not in leaks
        ),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from(sorted(PROFILES)),
)
def test_fotu_before_leak_is_the_dense_curves_mean_up_to_the_last_kept_bin(
    traces: list[tuple[int, list[tuple[bool, float]], int | None]], profile: str
) -> None:
    # the closed form (area of the observed bins up to each pair's last kept bin) against the
    # dense curves it replaced, on traces with gaps, partial credit and any leak step
    parts, leak_rows = [], []
    for i, (m, shown, leak) in enumerate(traces):
        ks = [k for k in range(m + 1) if shown[k][0]] or [m]
        parts.append(one_trace(ks, m, [shown[k][1] for k in ks], trace=f"t{i}"))
        if leak != -1:
            leak_rows.append((f"t{i}", leak))
    rollouts = pd.concat(parts, ignore_index=True)
    leaks = pd.DataFrame(leak_rows, columns=["trace_id", "leak_k"]).astype({"leak_k": "Int64"})
    before = fotu_before_leak(rollouts, leaks, profile)
    got = before["fotu_before_leak"].to_numpy()
    expected = _dense_before_leak(rollouts, leaks, profile)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    # the stage's one-collapse form: trace_metrics' rows with fotu_before_leak's two columns
    both = trace_metrics_with_leaks(rollouts, leaks, profile)
    alone = trace_metrics(rollouts, profile)
    pd.testing.assert_frame_equal(both[list(alone.columns)], alone, check_exact=True)
    pd.testing.assert_series_equal(both["leak_k"], before["leak_k"], check_exact=True)
    np.testing.assert_array_equal(both["fotu_before_leak"].to_numpy(), got)
