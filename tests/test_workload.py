"""Workloads (docs/metrics/decomposition.md): native workloads, solver-derived workload and its
audits, by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.metrics.decomposition import decompose
from legival_core.metrics.workload import (
    AUDIT_COLUMNS,
    AUDIT_MIN_PAIRS,
    attach_workload,
    champ_solution_steps,
    gsm8k_operation_count,
    gsm8k_solution_steps,
    held_out_pools,
    leave_self_out,
    leave_top_k,
    native_workload,
    solver_concentration,
    solver_workload,
)
from legival_core.stats.stats import spearman_rho


def _rows(model: str, correct: list[int], tokens: list[float]) -> pd.DataFrame:
    n = len(correct)
    return pd.DataFrame(
        {
            "model": [model] * n,
            "benchmark": ["b"] * n,
            "instance_id": [f"i{k}" for k in range(1, n + 1)],
            "correct": correct,
            "tokens": tokens,
            "truncated": [0] * n,
        }
    )


# Pool of three models on instances i1..i4 (✓ = correct):
#   P1: ✓100  ✗100  ✓200  ✗100   acc 1/2, E[T] 125, E0 = 1000·0.5/125 = 4.0
#   P2: ✓300  ✓400  ✗600  ✗200   acc 1/2, E[T] 375, E0 = 1000·0.5/375 = 1.33
#   P3: ✗500  ✓150  ✗200  ✗450   acc 1/4, E[T] 325, E0 = 1000·0.25/325 = 0.77
# E0 ranking P1 > P2 > P3. Nobody solves i4.
POOL = ["P1", "P2", "P3"]
INSTANCES = pd.concat(
    [
        _rows("P1", [1, 0, 1, 0], [100, 100, 200, 100]),
        _rows("P2", [1, 1, 0, 0], [300, 400, 600, 200]),
        _rows("P3", [0, 1, 0, 0], [500, 150, 200, 450]),
    ],
    ignore_index=True,
)


def test_solver_workload_falls_through_and_drops_unsolved():
    w = solver_workload(INSTANCES, POOL).set_index("instance_id")
    # i1: P1 solved it -> 100. i2: P1 wrong, falls through to P2 -> 400 (P3 also solved it with
    # fewer tokens, but ranks lower by E0). i3: P1 -> 200. i4: nobody -> dropped.
    assert w["workload"].to_dict() == {"i1": 100.0, "i2": 400.0, "i3": 200.0}
    assert w["solver"].to_dict() == {"i1": "P1", "i2": "P2", "i3": "P1"}
    assert w["solver_rank"].to_dict() == {"i1": 1, "i2": 2, "i3": 1}
    full = solver_workload(INSTANCES, POOL)
    assert full.attrs["coverage"]["b"] == {
        "n_instances": 4,
        "n_covered": 3,
        "n_dropped": 1,
        "coverage": 0.75,
    }
    assert full.attrs["pool_ranking"]["b"] == ["P1", "P2", "P3"]


def test_solver_workload_ignores_models_outside_the_pool_and_zero_token_answers():
    outsider = _rows("Q", [1, 1, 1, 1], [1, 1, 1, 1])  # best E0 by far, but not in the pool
    zero = _rows("P0", [1, 1, 1, 1], [0, 0, 0, 0])  # correct with 0 tokens: no workload
    table = pd.concat([INSTANCES, outsider, zero])
    w = solver_workload(table, [*POOL, "P0"]).set_index("instance_id")
    assert w["workload"].to_dict() == {"i1": 100.0, "i2": 400.0, "i3": 200.0}
    with pytest.raises(ValueError, match=r"pool: model\(s\) \['nobody'\]"):
        solver_workload(INSTANCES, ["nobody"])
    with pytest.raises(ValueError, match="non-empty list"):
        solver_workload(INSTANCES, "P1")


def test_attach_workload_then_decompose_gives_solver_vo_by_hand():
    table = attach_workload(INSTANCES, solver_workload(INSTANCES, POOL))
    assert sorted(set(table["instance_id"])) == ["i1", "i2", "i3"]  # i4 dropped for everyone
    vo = decompose(table, n_boot=0).set_index("model")["vo"]
    # W = 100, 400, 200.  P1: (100/100 + 100/400 + 200/200)/3 = 2.25/3 = 0.75
    # P2: (3 + 1 + 3)/3 = 7/3.  P3: (5 + 0.375 + 1)/3 = 2.125
    assert vo.to_dict() == pytest.approx({"P1": 0.75, "P2": 7 / 3, "P3": 2.125})


def test_leave_top_k_by_hand():
    table = leave_top_k(INSTANCES, POOL, k=(1, 2, 3))
    assert list(table.columns) == list(AUDIT_COLUMNS)
    audit = table.set_index("k")
    # Full VŌ ranks: P1 0.75 (1), P3 2.125 (2), P2 2.333 (3).
    # Without P1: W = i1 300 (P2), i2 400 (P2), i3 unsolved -> coverage 2/4.
    #   P1 (1/3 + 1/4)/2 = 0.2917 (1), P2 (1 + 1)/2 = 1 (2), P3 (5/3 + 3/8)/2 = 1.0208 (3)
    #   rank differences 0, 1, 1 -> ρ = 1 − 6·2/(3·8) = 0.5
    assert audit.loc[1.0, "rho"] == pytest.approx(0.5)
    assert audit.loc[1.0, "coverage"] == 0.5
    # Without P1, P2: W = i2 150 (P3) only, coverage 1/4. P1 2/3, P2 8/3, P3 1 -> ranks 1, 3, 2
    # = the full ranks -> ρ = 1
    assert audit.loc[2.0, "rho"] == pytest.approx(1.0)
    assert audit.loc[2.0, "coverage"] == 0.25
    # Without all three: no workload at all
    assert np.isnan(audit.loc[3.0, "rho"]) and audit.loc[3.0, "coverage"] == 0
    with pytest.raises(ValueError, match="k must be"):
        leave_top_k(INSTANCES, POOL, k=(0,))


def test_leave_self_out_by_hand():
    row = leave_self_out(INSTANCES, POOL).iloc[0]
    # P1 out: P1's VŌ = 0.2917 (as above). P2 out: pool P1, P3 -> W = 100, 150 (P3), 200:
    # P2 = (3 + 400/150 + 3)/3 = 2.889. P3 out: same W as the full pool -> P3 = 2.125.
    # Ranks 1, 3, 2 = full ranks -> ρ = 1. Coverage of the reduced pools: 2/4, 3/4, 3/4.
    assert row["rho"] == pytest.approx(1.0)
    assert row["coverage"] == pytest.approx((0.5 + 0.75 + 0.75) / 3)
    assert row["audit"] == "leave_self_out" and row["n_models"] == 3


def test_held_out_pools_by_hand():
    # Three models split 1 | 2. The three possible splits give (see the comments above):
    #  {P1}|{P2,P3}: W_A = i1 100, i3 200 -> P1 1, P2 3, P3 3 (tie: ranks 1, 2.5, 2.5);
    #     W_B -> ranks 1, 2, 3; ρ = Pearson((1, 2.5, 2.5), (1, 2, 3)) = 1.5/√3 = 0.866
    #  {P2}|{P1,P3}: ranks 1, 2, 3 vs 1, 3, 2 -> ρ = 0.5
    #  {P3}|{P1,P2}: ranks 1, 3, 2 vs 1, 3, 2 -> ρ = 1
    row = held_out_pools(INSTANCES, POOL, n=200, seed=0).iloc[0]
    allowed = [0.5, np.sqrt(3) / 2, 1.0]
    assert min(abs(row["rho"] - a) for a in allowed) < 1e-12
    assert row["rho_p05"] == pytest.approx(0.5) and row["rho_p95"] == pytest.approx(1.0)
    again = held_out_pools(INSTANCES, POOL, n=200, seed=0).iloc[0]
    assert row.equals(again)
    lone = held_out_pools(INSTANCES, ["P1"], n=5).iloc[0]
    assert np.isnan(lone["rho"])


def test_solver_concentration_by_hand():
    w = solver_workload(INSTANCES, POOL)
    row = solver_concentration(w).iloc[0]
    # solvers P1, P2, P1: shares 2/3, 1/3; effective number = exp(−(2/3 ln 2/3 + 1/3 ln 1/3))
    assert row["top1_solver"] == "P1" and row["top1_share"] == pytest.approx(2 / 3)
    expected = np.exp(-(2 / 3 * np.log(2 / 3) + 1 / 3 * np.log(1 / 3)))
    assert row["effective_solvers"] == pytest.approx(expected)  # ≈ 1.8899
    assert row["n_solvers"] == 2 and row["n_covered"] == 3


def test_native_workload_column_and_validation():
    table = INSTANCES.assign(gold_steps=[2, 5, 3, 4] * 3)
    out = native_workload(table, "gold_steps")
    assert out["workload"].tolist() == [2.0, 5.0, 3.0, 4.0] * 3
    with pytest.raises(ValueError, match="no column 'nope'"):
        native_workload(table, "nope")
    with pytest.raises(ValueError, match=r"row 1 .* field 'workload'"):
        native_workload(table.assign(gold_steps=[2, -1, 3, 4] * 3), "gold_steps")


def test_gsm8k_steps_and_operations():
    solution = (
        "A box holds 6 eggs, so 4 boxes hold 4*6=<<4*6=24>>24 eggs.\n"
        "After breaking 3 and buying 10 more: 24-3+10=<<24-3+10=31>>31.\n"
        "\n"
        "#### 31"
    )
    # two non-empty lines before ####
    assert gsm8k_solution_steps(solution) == 2
    # 4*6 has 1 operator, 24-3+10 has 2 -> 3
    assert gsm8k_operation_count(solution) == 3
    assert gsm8k_operation_count("no annotations here\n#### 5") == 0
    assert gsm8k_operation_count("<<(-4)*(2+1)=-12>>") == 2  # the sign after '(' is not an op


def test_champ_native_workload_counts_gold_steps():
    w = champ_solution_steps().set_index("instance_id")["workload"]
    assert len(w) == 270
    # P_Combinatorics_1's gold solution is written in 6 steps
    assert w["P_Combinatorics_1"] == 6
    assert w.min() >= 1 and w.max() == 18


def test_spearman_by_hand():
    # ranks (1,2,3,4) vs (1,2,4,3): d² = 0,0,1,1 -> 1 − 6·2/(4·15) = 0.8
    assert spearman_rho([1, 2, 3, 4], [10, 20, 40, 30]) == pytest.approx(0.8)
    assert spearman_rho([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(spearman_rho([1, 1, 1], [1, 2, 3]))  # no variation
    assert np.isnan(spearman_rho([1, np.nan], [2, 3]))  # one pair left
    with pytest.raises(ValueError, match="differ in length"):
        spearman_rho([1, 2], [1, 2, 3])
    # two pairs: no ρ by default, ±1 under the audits' two-pair rule
    assert np.isnan(spearman_rho([1, 2], [2, 1]))
    assert spearman_rho([1, 2], [2, 1], min_pairs=AUDIT_MIN_PAIRS) == -1.0
    assert spearman_rho([1, 2, np.inf], [2, 1, 5], min_pairs=AUDIT_MIN_PAIRS) == -1.0  # inf out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=3, max_size=30), st.randoms())
def test_spearman_matches_pandas(values, rnd):
    other = list(values)
    rnd.shuffle(other)
    # reference: Pearson correlation of pandas' average ranks
    expected = pd.Series(values).rank().corr(pd.Series(other).rank())
    got = spearman_rho(values, other)
    assert (np.isnan(got) and np.isnan(expected)) or got == pytest.approx(expected, abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_solver_workload_properties(data):
    n_models = data.draw(st.integers(2, 5))
    n = data.draw(st.integers(1, 12))
    frames = []
    for m in range(n_models):
        correct = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
        tokens = data.draw(st.lists(st.integers(1, 1000), min_size=n, max_size=n))
        frames.append(_rows(f"M{m}", [int(c) for c in correct], tokens))
    table = pd.concat(frames, ignore_index=True)
    pool = [f"M{m}" for m in range(n_models)]
    w = solver_workload(table, pool)
    cov = w.attrs["coverage"]["b"]
    solved_by_someone = table.groupby("instance_id")["correct"].any()
    assert cov["n_covered"] == int(solved_by_someone.sum()) == len(w)
    assert cov["n_dropped"] == n - cov["n_covered"]
    # each instance's solver answered it correctly with exactly the workload's token count
    merged = w.merge(table, left_on=["instance_id", "solver"], right_on=["instance_id", "model"])
    assert merged["correct"].astype(bool).all()
    assert (merged["tokens"] == merged["workload"]).all()
    # and no better-ranked pool model solved it
    rank = {m: r for r, m in enumerate(w.attrs["pool_ranking"]["b"])}
    for _, row in w.iterrows():
        solvers = table[(table["instance_id"] == row["instance_id"]) & (table["correct"] == 1)]
        assert min(rank[m] for m in solvers["model"]) == rank[row["solver"]]


def test_instance_and_model_order_is_code_point_order_whatever_the_text_dtype():
    # The solver table lists instances in code point order ("Z" < "a" < "é" < "😀") with each
    # instance's own tokens, whether the ids arrive as Python objects or as Arrow strings.
    ids = ["é", "a", "Z", "😀"]
    table = pd.concat(
        [
            _rows("m2", [1, 1, 1, 1], [10, 20, 30, 40]).assign(instance_id=ids),
            _rows("m1", [0, 0, 0, 0], [50, 60, 70, 80]).assign(instance_id=ids),
        ],
        ignore_index=True,
    )
    for dtype in (object, "str", "string[pyarrow]"):
        typed = table.astype({"instance_id": dtype, "model": dtype})
        w = solver_workload(typed, ["m1", "m2"])
        assert w["instance_id"].tolist() == ["Z", "a", "é", "😀"]
        assert w["workload"].tolist() == [30.0, 20.0, 10.0, 40.0]  # m2's tokens, the one solver
        assert w.attrs["pool_ranking"] == {"b": ["m2", "m1"]}  # m1 solved nothing: E0 = 0
