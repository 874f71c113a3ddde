"""Tests of legival_core.stats.stats; expected numbers are worked out by hand in the comments."""

from __future__ import annotations

import math
from importlib import resources

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.stats.stats import (
    bootstrap_ci,
    pareto_front,
    partial_spearman,
    rank_stability,
    rank_table,
    significance_marks,
    spearman,
    spearman_matrix,
    spearman_permutation_p,
    wilson_interval,
)

PUBLISHED_METRICS = {
    "tokens": False,
    "redundancy_pct": False,
    "backtracking_pct": False,
    "fotu_pct": True,
    "sotu_pct": True,
    "regression_rate_pct": False,
}


def published_table() -> pd.DataFrame:
    path = resources.files("legival_core") / "data/published/legival_table7_published.csv"
    with path.open() as handle:
        return pd.read_csv(handle)


# ---------------------------------------------------------------------------------------------
# rank_table on the published per-dataset table
# ---------------------------------------------------------------------------------------------


def test_published_overall_ranking_accuracy_and_fotu():
    table = rank_table(published_table(), PUBLISHED_METRICS, by="model", accuracy="accuracy_pct")
    assert len(table) == 12 and (table["n_dataset"] == 3).all()
    row = table.set_index("model")
    # Means of the three datasets (Connections, GPQA, MATH), by hand:
    #   gpt-oss-120b  accuracy (81 + 70 + 96) / 3 = 82.33   FOTU (28.4 + 50.3 + 34.7) / 3 = 37.80
    #   deep-r1-0528  accuracy (90 + 55 + 85) / 3 = 76.67   FOTU (44.2 + 63.3 + 54.9) / 3 = 54.13
    #   openreas-32b  accuracy (42 + 29 + 81) / 3 = 50.67   FOTU (37.5 + 67.4 + 57.7) / 3 = 54.20
    #   llama-nano    accuracy (28 + 37 + 84) / 3 = 49.67   FOTU (47.5 + 84.4 + 40.7) / 3 = 57.53
    assert row.loc["gpt-oss-120b", "accuracy_pct"] == pytest.approx(247 / 3)
    assert row.loc["deep-r1-0528", "fotu_pct"] == pytest.approx(162.4 / 3)
    assert row.loc["openreas-32b", "fotu_pct"] == pytest.approx(162.6 / 3)
    assert row.loc["llama-nano", "accuracy_pct"] == pytest.approx(149 / 3)

    # Accuracy, best first. qwen3-4b (71+42+89 = 202) and gemma-3-27b-it (76+42+84 = 202) tie at
    # 67.33 and share rank 7 ("min" ties); the next model is 9th.
    accuracy_ranks = dict(zip(table["model"], table["accuracy_pct_rank"], strict=True))
    assert accuracy_ranks == {
        "gpt-oss-120b": 1,  # 82.33
        "deep-r1-0528": 2,  # 76.67
        "r1-distill": 3,  # (91 + 59 + 79) / 3 = 76.33
        "magistral-s": 4,  # (86 + 48 + 85) / 3 = 73.00
        "qwen3-8b": 5,  # (76 + 50 + 90) / 3 = 72.00
        "gpt-oss-20b": 6,  # (55 + 62 + 94) / 3 = 70.33
        "gemma-3-27b-it": 7,  # 67.33
        "qwen3-4b": 7,  # 67.33
        "gemma-3-12b-it": 9,  # (69 + 37 + 83) / 3 = 63.00
        "qwq-32b": 10,  # (90 + 50 + 40) / 3 = 60.00
        "openreas-32b": 11,  # 50.67
        "llama-nano": 12,  # 49.67
    }
    # FOTU, higher is better; change = accuracy rank - FOTU rank.
    fotu_order = table.sort_values("fotu_pct_rank")["model"].tolist()
    assert fotu_order == [
        "llama-nano",  # 57.53
        "openreas-32b",  # 54.20
        "deep-r1-0528",  # 54.13
        "qwq-32b",  # (43.4 + 54.4 + 50.1) / 3 = 49.30
        "qwen3-8b",  # (43.0 + 56.0 + 43.0) / 3 = 47.33
        "r1-distill",  # (53.2 + 47.3 + 40.6) / 3 = 47.03
        "gemma-3-27b-it",  # (52.1 + 47.4 + 40.2) / 3 = 46.57
        "qwen3-4b",  # (41.7 + 52.7 + 41.6) / 3 = 45.33
        "gemma-3-12b-it",  # (45.1 + 50.1 + 39.1) / 3 = 44.77
        "magistral-s",  # (49.4 + 50.5 + 34.2) / 3 = 44.70
        "gpt-oss-120b",  # 37.80
        "gpt-oss-20b",  # (22.1 + 50.9 + 35.9) / 3 = 36.30
    ]
    assert table["fotu_pct_rank"].tolist() == [11, 3, 6, 10, 5, 12, 7, 8, 9, 4, 2, 1]
    # llama-nano: 12 - 1 = +11 (far better at teaching than at solving); gpt-oss-120b: 1 - 11
    assert row.loc["llama-nano", "fotu_pct_change"] == 11
    assert row.loc["gpt-oss-120b", "fotu_pct_change"] == -10
    assert row.loc["openreas-32b", "fotu_pct_change"] == 9


def test_published_overall_ranking_tokens():
    table = rank_table(published_table(), PUBLISHED_METRICS, by="model", accuracy="accuracy_pct")
    # Mean tokens, lower is better:
    #   gemma-3-27b-it (524 + 766 + 610) / 3 = 633.33
    #   gemma-3-12b-it (559 + 757 + 593) / 3 = 636.33
    #   magistral-s    (1075 + 735 + 684) / 3 = 831.33
    #   llama-nano     (267 + 854 + 1977) / 3 = 1032.67
    #   gpt-oss-120b   (3117 + 1262 + 581) / 3 = 1653.33
    #   r1-distill     (1808 + 3535 + 1318) / 3 = 2220.33
    #   gpt-oss-20b    (5614 + 1847 + 748) / 3 = 2736.33
    #   qwen3-4b       (2947 + 4211 + 2092) / 3 = 3083.33
    #   qwen3-8b       (3010 + 4354 + 2377) / 3 = 3247.00
    #   qwq-32b        (3863 + 4611 + 1311) / 3 = 3261.67
    #   deep-r1-0528   (3779 + 5552 + 3456) / 3 = 4262.33
    #   openreas-32b   (7159 + 6816 + 4471) / 3 = 6148.67
    assert table.sort_values("tokens_rank")["model"].tolist() == [
        "gemma-3-27b-it",
        "gemma-3-12b-it",
        "magistral-s",
        "llama-nano",
        "gpt-oss-120b",
        "r1-distill",
        "gpt-oss-20b",
        "qwen3-4b",
        "qwen3-8b",
        "qwq-32b",
        "deep-r1-0528",
        "openreas-32b",
    ]
    row = table.set_index("model")
    # gemma-3-12b-it: accuracy rank 9, token rank 2 -> change +7
    assert row.loc["gemma-3-12b-it", "tokens_change"] == 7
    # redundancy: gpt-oss-120b (17.1 + 4.3 + 4.7) / 3 and gpt-oss-20b (15.6 + 4.9 + 5.6) / 3 both
    # 26.1 / 3 = 8.70: a tie, both rank 5 (lowest: llama-nano 6.57, gemma-12b 7.13, gemma-27b 7.27,
    # magistral 8.13)
    assert row.loc["gpt-oss-120b", "redundancy_pct_rank"] == 5
    assert row.loc["gpt-oss-20b", "redundancy_pct_rank"] == 5
    assert row.loc["qwq-32b", "redundancy_pct_rank"] == 7


def test_rank_table_rounding_keeps_float_noise_from_splitting_ties():
    df = pd.DataFrame({"teacher": ["a", "b", "c"], "accuracy": [1.0, 2.0, 3.0]})
    df["x"] = [0.1 + 0.2, 0.3, 0.5]  # 0.30000000000000004 vs 0.3
    tied = rank_table(df, {"x": False}, average_over=None).set_index("teacher")
    assert tied.loc["a", "x_rank"] == tied.loc["b", "x_rank"] == 1
    split = rank_table(df, {"x": False}, average_over=None, decimals=None).set_index("teacher")
    assert (split.loc["b", "x_rank"], split.loc["a", "x_rank"]) == (1, 2)


def test_rank_table_errors_name_the_problem():
    df = pd.DataFrame({"teacher": ["a", "a"], "dataset": ["X", "X"], "accuracy": [1, 2]})
    with pytest.raises(ValueError, match=r"row 1: more than one row for teacher='a', dataset='X'"):
        rank_table(df, {})
    with pytest.raises(ValueError, match=r"missing column\(s\) \['fotu'\]"):
        rank_table(df, {"fotu": True})
    bad = pd.DataFrame({"teacher": ["a", "b"], "dataset": ["X", "X"], "accuracy": [1, "high"]})
    with pytest.raises(ValueError, match=r"row 1, field 'accuracy': 'high' is not a number"):
        rank_table(bad, {})


# ---------------------------------------------------------------------------------------------
# Correlations
# ---------------------------------------------------------------------------------------------


def test_spearman_matrix_by_hand_with_pairwise_nan():
    # a = 1..5, b = 2,1,4,3,5: d = -1,1,-1,1,0, sum d^2 = 4, rho = 1 - 6*4/(5*24) = 0.8
    # c = a reversed: rho(a, c) = -1; rho(b, c) = -0.8
    # d has a NaN in row 4: pairs with a use rows 0..3: a = 1..4, d = 1,2,4,3: sum d^2 = 2,
    # rho = 1 - 6*2/(4*15) = 0.8
    df = pd.DataFrame(
        {
            "a": [1, 2, 3, 4, 5],
            "b": [2, 1, 4, 3, 5],
            "c": [5, 4, 3, 2, 1],
            "d": [1, 2, 4, 3, np.nan],
        }
    )
    rho, p = spearman_matrix(df, ["a", "b", "c", "d"])
    assert rho.loc["a", "b"] == pytest.approx(0.8)
    assert rho.loc["a", "c"] == pytest.approx(-1.0)
    assert rho.loc["b", "c"] == pytest.approx(-0.8)
    assert rho.loc["a", "d"] == pytest.approx(0.8)
    assert (np.diag(rho.to_numpy()) == 1.0).all()
    # n <= 10: exact permutation p. n = 5: rho = 1 - sum d^2 / 20, |rho| >= 0.8 <=> sum d^2 <= 4
    # or >= 36. sum d^2 = 0: the identity (1); = 2: one adjacent swap (4); = 4: two disjoint
    # adjacent swaps (12)(34), (12)(45), (23)(45) (3); a 3-cycle already gives 6. Reversing
    # maps sum d^2 to 40 - sum d^2, so 8 more at >= 36: p = 16 / 120.
    assert p.loc["a", "b"] == pytest.approx(16 / 120, abs=1e-12)
    # rho = -1 at n = 5: only the reversal and the identity are as extreme, 2 / 120
    assert p.loc["a", "c"] == pytest.approx(2 / 120, abs=1e-12)
    # a, d on rows 0..3 (n = 4): rho = 1 - sum d^2 / 10, |rho| >= 0.8 <=> sum d^2 <= 2 or
    # >= 18: identity 1, adjacent swaps 3, and their reversals 3 + 1: p = 8 / 24
    assert p.loc["a", "d"] == pytest.approx(8 / 24, abs=1e-12)
    assert spearman([1, 2], [2, 1]).n == 2 and math.isnan(spearman([1, 2], [2, 1]).rho)


def test_exact_spearman_p_at_four_teachers_by_hand():
    # n = 4, rho = 1: of the 4! = 24 pairings only the identity (rho = 1) and the reversal
    # (rho = -1) have |rho| >= 1, so the two-sided p is 2 / 24 = 0.0833, never 0.
    result = spearman([0.1, 0.2, 0.3, 0.4], [10, 20, 30, 40])
    assert result.rho == 1.0 and result.n == 4
    assert result.pvalue == pytest.approx(2 / 24, abs=1e-12)
    assert result.method == "exact permutation"
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]).pvalue == pytest.approx(2 / 24, abs=1e-12)
    # No star at n = 4, however small p is; from n = 5 the usual thresholds.
    assert significance_marks(result.pvalue, result.n) == ""
    assert significance_marks(0.0001, 4) == ""
    assert significance_marks(0.0001, 5) == "***" and significance_marks(0.04, 5) == "*"


def test_exact_spearman_p_with_ties_by_hand():
    # x = 1, 2, 3; y = 1, 1, 2 (ranks 1.5, 1.5, 3). The 3! = 6 pairings give S = sum x_i y_i
    # (doubled ranks 2,4,6 and 3,3,6): y-orders (3,3,6) -> 6+12+36 = 54 twice, (3,6,3) -> 6+24+18
    # = 48 twice, (6,3,3) -> 12+12+18 = 42 twice. E[S] = 48, observed 54: |54-48| >= 6 for the
    # four pairings at 54 or 42, so p = 4 / 6.
    assert spearman_permutation_p([1, 2, 3], [1.5, 1.5, 3]) == pytest.approx(4 / 6, abs=1e-12)
    result = spearman([1, 2, 3], [1, 1, 2])
    assert result.rho == pytest.approx(math.sqrt(3) / 2)  # cov 1.5 / sqrt(2 * 1.5)
    assert result.pvalue == pytest.approx(4 / 6, abs=1e-12)


def test_spearman_above_ten_uses_the_stated_t_approximation():
    # n = 11, y = x with the first two swapped: sum d^2 = 2, rho = 1 - 12 / (11 * 120)
    x = list(range(1, 12))
    y = [2, 1, *range(3, 12)]
    result = spearman(x, y)
    rho = 1 - 12 / 1320
    assert result.rho == pytest.approx(rho, abs=1e-12) and result.method == "t"
    from scipy import stats as scipy_stats

    t = rho * math.sqrt(9 / (1 - rho * rho))
    assert result.pvalue == pytest.approx(2 * scipy_stats.t.sf(t, 9), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=3, max_size=6), st.integers(0, 1000))
def test_property_exact_spearman_p_is_the_enumerated_share(ys, seed):
    """The counted p equals listing every pairing (ties included) for n <= 6."""
    import itertools

    from scipy import stats as scipy_stats

    xs = np.random.default_rng(seed).permutation(len(ys)).astype(float)
    x_ranks = scipy_stats.rankdata(xs)
    y_ranks = scipy_stats.rankdata(ys)
    observed = abs(float(x_ranks @ y_ranks) - x_ranks.sum() * y_ranks.sum() / len(ys))
    extreme = [
        abs(float(x_ranks @ np.array(order)) - x_ranks.sum() * y_ranks.sum() / len(ys))
        >= observed - 1e-9
        for order in itertools.permutations(y_ranks)
    ]
    assert spearman_permutation_p(x_ranks, y_ranks) == pytest.approx(np.mean(extreme), abs=1e-12)


def test_wilson_interval_by_hand():
    # z = 1.959964, z^2 = 3.841459. k = 0, n = 1: p = 0, scale = 1 + z^2 = 4.841459,
    # centre = (z^2 / 2) / scale = 0.396725, half = z sqrt(z^2 / 4) / scale = 0.396725
    # -> [0, 0.793451]: one failure is far from "certainly 0".
    ci = wilson_interval(0, 1)
    assert ci.estimate == 0.0 and ci.lo == 0.0 and ci.n == 1
    assert ci.hi == pytest.approx(3.841459 / 4.841459, abs=1e-6)
    # k = 1, n = 1: the mirror image, [0.206549, 1]
    assert wilson_interval(1, 1).lo == pytest.approx(1 / 4.841459, abs=1e-6)
    assert wilson_interval(1, 1).hi == 1.0
    # k = 5, n = 10: p = 0.5, scale = 1.3841459, centre = 0.5,
    # half = 1.959964 sqrt(0.025 + 3.841459 / 400) / 1.3841459 = 1.959964 * 0.186021 / 1.384146
    #      = 0.263407 -> [0.236593, 0.763407]
    ci = wilson_interval(5, 10)
    assert ci.lo == pytest.approx(0.5 - 0.263407, abs=1e-5)
    assert ci.hi == pytest.approx(0.5 + 0.263407, abs=1e-5)
    # undefined (a precision with no positive prediction): NaN, not 0
    assert all(math.isnan(v) for v in wilson_interval(0, 0)[:3])
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(3, 2)


def test_partial_spearman_by_hand():
    # ranks x = 1..5, y = 2,1,4,3,5, z = 1,3,2,5,4
    # r_xy = 0.8 (sum d^2 = 4); r_xz = 1 - 6*4/120 = 0.8; r_yz: d = 1,-2,2,-2,1, sum 14,
    # 1 - 84/120 = 0.3.  partial = (0.8 - 0.8*0.3) / sqrt((1 - 0.64)(1 - 0.09))
    #                            = 0.56 / sqrt(0.3276) = 0.978400
    df = pd.DataFrame({"x": [1, 2, 3, 4, 5], "y": [2, 1, 4, 3, 5], "tokens": [1, 3, 2, 5, 4]})
    result = partial_spearman(df, "x", "y")
    expected = 0.56 / math.sqrt(0.3276)
    assert result.rho == pytest.approx(expected, abs=1e-12)
    # n - 3 = 2 dof: t = r sqrt(2 / (1 - r^2)) and for 2 dof the two-sided p is
    # 1 - t / sqrt(t^2 + 2) = 1 - |r|  ->  0.021600
    assert result.pvalue == pytest.approx(1 - expected, abs=1e-12)
    assert result.n == 5
    # monotone transforms of any column change nothing (ranks)
    df2 = df.assign(x=np.exp(df["x"]), tokens=df["tokens"] ** 3)
    assert partial_spearman(df2, "x", "y").rho == pytest.approx(expected, abs=1e-12)


def test_rank_stability_across_datasets_and_students():
    # X ranks a<b<c<d; Y reverses it (rho -1); Z repeats X (rho 1)
    df = pd.DataFrame(
        {
            "teacher": list("abcd") * 3,
            "dataset": ["X"] * 4 + ["Y"] * 4 + ["Z"] * 4,
            "fotu": [0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.7, 0.6, 0.5, 0.6, 0.7, 0.8],
        }
    )
    rho, _ = rank_stability(df, "fotu")
    assert list(rho.index) == ["X", "Y", "Z"]
    assert rho.loc["X", "Y"] == pytest.approx(-1.0)
    assert rho.loc["X", "Z"] == pytest.approx(1.0)
    # across students: per-(teacher, dataset, student) rows are averaged over datasets first.
    per_student = pd.DataFrame(
        {
            "teacher": ["a", "a", "b", "b", "c", "c"] * 2,
            "dataset": ["X", "Y"] * 6,
            "student": ["s"] * 6 + ["u"] * 6,
            "fotu": [1, 3, 2, 4, 3, 5, 6, 6, 5, 5, 1, 1],
        }
    )
    # s: a (1+3)/2 = 2, b (2+4)/2 = 3, c (3+5)/2 = 4; u: a 6, b 5, c 1 -> opposite, rho -1
    rho, _ = rank_stability(per_student, "fotu", across="student")
    assert rho.loc["s", "u"] == pytest.approx(-1.0)


# ---------------------------------------------------------------------------------------------
# Bootstrap
# ---------------------------------------------------------------------------------------------


def test_bootstrap_ci_by_hand_and_seeded():
    # Resampling [0, 1] twice gives means 0 (p 1/4), 0.5 (1/2), 1 (1/4): with 4000 replicates
    # the 2.5% quantile is 0 and the 97.5% one is 1.
    assert bootstrap_ci([0.0, 1.0], n_boot=4000, seed=1) == (0.5, 0.0, 1.0)
    # a constant sample has a zero-width interval
    assert bootstrap_ci([0.3] * 7, n_boot=100) == pytest.approx((0.3, 0.3, 0.3))
    values = np.random.default_rng(0).normal(size=50)
    first = bootstrap_ci(values, n_boot=500, seed=4)
    assert bootstrap_ci(values, n_boot=500, seed=4) == first
    assert bootstrap_ci(values, n_boot=500, seed=5) != first
    assert first.lo < first.estimate < first.hi
    # a statistic without an axis argument sees the very same samples
    plain = bootstrap_ci(values, stat=lambda v: float(np.mean(v)), n_boot=500, seed=4)
    assert plain == pytest.approx(first)
    # median of 1..5 is 3; NaNs are dropped
    assert bootstrap_ci([1, 2, np.nan, 3, 4, 5], stat=np.median, n_boot=200).estimate == 3.0
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_ci([1.0], n_boot=0)


# ---------------------------------------------------------------------------------------------
# Pareto front
# ---------------------------------------------------------------------------------------------


def brute_force_front(xs: list[float], ys: list[float]) -> list[bool]:
    front = []
    for i in range(len(xs)):
        dominated = any(
            xs[j] >= xs[i] and ys[j] >= ys[i] and (xs[j] > xs[i] or ys[j] > ys[i])
            for j in range(len(xs))
        )
        front.append(not dominated)
    return front


def test_pareto_front_by_hand():
    # (tokens, fotu): lower tokens and higher FOTU are better.
    #   a (100, 0.4)  b (200, 0.6)  c (300, 0.5) dominated by b  d (100, 0.3) dominated by a
    #   e (200, 0.6) duplicates b: neither dominates the other   f (NaN, 0.9) never on the front
    df = pd.DataFrame(
        {"tokens": [100, 200, 300, 100, 200, np.nan], "fotu": [0.4, 0.6, 0.5, 0.3, 0.6, 0.9]},
        index=list("abcdef"),
    )
    mask = pareto_front(df, "tokens", "fotu", maximize=(False, True))
    assert mask.to_dict() == {"a": True, "b": True, "c": False, "d": False, "e": True, "f": False}
    # maximising both: (300, 0.5) is now best on x; (200, 0.6) on y; (100, *) dominated
    both = pareto_front(df, "tokens", "fotu")
    assert both[both].index.tolist() == ["b", "c", "e"]


points = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=25)


@settings(max_examples=200, deadline=None)
@given(points, st.tuples(st.booleans(), st.booleans()))
def test_property_pareto_matches_brute_force_and_holds_each_axis_best(pts, maximize):
    df = pd.DataFrame(pts, columns=["x", "y"]).astype(float)
    mask = pareto_front(df, "x", "y", maximize=maximize).to_numpy()
    sx = df["x"].to_numpy() * (1 if maximize[0] else -1)
    sy = df["y"].to_numpy() * (1 if maximize[1] else -1)
    assert mask.tolist() == brute_force_front(sx.tolist(), sy.tolist())
    # The best row on each axis (ties broken by the other axis) is always on the front.
    best_x = np.lexsort((-sy, -sx))[0]
    best_y = np.lexsort((-sx, -sy))[0]
    assert mask[best_x] and mask[best_y]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=3, max_size=30), st.integers(0, 10))
def test_property_spearman_is_bounded_and_symmetric(xs, seed):
    ys = np.random.default_rng(seed).permutation(xs)
    a = spearman(xs, ys)
    b = spearman(ys, xs)
    if math.isnan(a.rho):
        assert math.isnan(b.rho)
    else:
        assert -1.0 <= a.rho <= 1.0 and a.rho == pytest.approx(b.rho)
        assert 0.0 <= a.pvalue <= 1.0


# --------------------------------------------------------------------- one seeded bootstrap


def test_resample_counts_and_percentile_interval_by_hand() -> None:
    from legival_core.stats.stats import percentile_interval, resample_counts, seeded_stream

    # seed 0 draws the positions [2, 1, 1] and [0, 0, 0] (resample_indices' doctest)
    counts = resample_counts(3, 2, seeded_stream(0))
    assert counts.tolist() == [[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]]
    # means of values (10, 20, 40) per resample: (2*20 + 40) / 3 = 26.67 and 3*10 / 3 = 10
    assert (counts @ np.array([10.0, 20.0, 40.0]) / 3).round(2).tolist() == [26.67, 10.0]
    # alpha 0.5 -> quantiles 0.25 and 0.75 of (0, 1, 2, 3): positions 0.75 and 2.25
    assert percentile_interval(np.array([3.0, np.nan, 0.0, 2.0, 1.0]), alpha=0.5) == (0.75, 2.25)


def test_the_decompositions_interval_is_the_shared_bootstrap_with_alpha() -> None:
    """decompose takes ``alpha`` like every other bootstrap, and its accuracy interval is the
    shared draw (seeded by model and benchmark) put through the shared percentile interval."""
    from legival_core.metrics.decomposition import decompose
    from legival_core.stats.stats import percentile_interval, resample_counts, seeded_stream

    correct = np.array([1, 0, 1, 1, 0, 0, 1, 0], dtype=float)
    instances = pd.DataFrame(
        {
            "model": "m",
            "benchmark": "b",
            "instance_id": [str(i) for i in range(8)],
            "correct": correct.astype(bool),
            "tokens": 100.0,
            "truncated": False,
        }
    )
    row = decompose(instances, n_boot=400, seed=7, alpha=0.2).iloc[0]
    draws = resample_counts(8, 400, seeded_stream(7, "terms", "m", "b")) @ correct / 8
    assert (row["accuracy_lo"], row["accuracy_hi"]) == percentile_interval(draws, alpha=0.2)
    # an 80% interval of a mean of 8 coin flips with p = 1/2 lies inside (0, 1)
    assert 0.0 < row["accuracy_lo"] < 0.5 < row["accuracy_hi"] < 1.0
