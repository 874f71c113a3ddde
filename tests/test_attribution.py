"""Per-step transfer attribution (legival_core/metrics/attribution.py,
docs/metrics/attribution.md), each number worked out by hand in the comments first.

The running example: a correct trace of m = 10 steps; two students, two samples each, were shown
the prefixes k = 0, 3, 6, 9, 10 (four rollouts per prefix). Correct rollouts per prefix:
1, 1, 3, 4, 4 of 4, so r = 0.25, 0.25, 0.75, 1.0, 1.0.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from legival_core.metrics import attribution

#: correct rollouts (of four) after each measured prefix of the running example
SOLVED = {0: 1, 3: 1, 6: 3, 9: 4, 10: 4}


def example(trace_id: str = "t", teacher: str = "T", solved: dict[int, int] = SOLVED):
    rows = []
    for k, right in solved.items():
        for i in range(4):
            student, sample = ("s", "u")[i // 2], i % 2
            rows.append(
                {"trace_id": trace_id, "teacher": teacher, "dataset": "D", "student": student,
                 "sample": sample, "k": k, "m": 10, "correct": float(i < right)}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_intervals_of_the_running_example() -> None:
    intervals = attribution.interval_attribution(attribution.prefix_rates(example()))
    # a_1 = r(3) - r(0) = 0.25 - 0.25 = 0; a_2 = 0.75 - 0.25 = 0.5; a_3 = 1 - 0.75 = 0.25;
    # a_4 = 1 - 1 = 0. Widths 3, 3, 3, 1.
    assert intervals[["k_prev", "k", "width"]].values.tolist() == [
        [0, 3, 3], [3, 6, 3], [6, 9, 3], [9, 10, 1]
    ]  # fmt: skip
    np.testing.assert_allclose(intervals["attribution"], [0.0, 0.5, 0.25, 0.0])
    # se of a_2: sqrt(0.75*0.25/4 + 0.25*0.75/4) = sqrt(0.09375) = 0.306186;
    # a_1: sqrt(2 * 0.25*0.75/4) = 0.306186 too; a_3: sqrt(0 + 0.75*0.25/4) = 0.216506;
    # a_4: both ends at 1.0, binomial variance 0: se 0.
    np.testing.assert_allclose(intervals["se"], [0.306186, 0.306186, 0.216506, 0.0], atol=1e-6)
    # per step: a_i / width = 0, 0.166667, 0.083333, 0
    np.testing.assert_allclose(intervals["per_step"], [0.0, 0.5 / 3, 0.25 / 3, 0.0])
    np.testing.assert_allclose(intervals["per_step_se"].iloc[1], 0.306186 / 3, atol=1e-6)


def test_step_attribution_spreads_each_change_over_its_steps() -> None:
    steps = attribution.step_attribution(example())
    assert steps["step"].tolist() == list(range(1, 11))
    # steps 1-3: 0; 4-6: 0.5/3; 7-9: 0.25/3; 10: 0. They add up to r(10) - r(0) = 0.75.
    expected = [0.0] * 3 + [0.5 / 3] * 3 + [0.25 / 3] * 3 + [0.0]
    np.testing.assert_allclose(steps["attribution"], expected)
    assert steps["attribution"].sum() == pytest.approx(0.75)
    assert steps.loc[steps["step"] == 5, ["k_prev", "k"]].values.tolist() == [[3.0, 6.0]]


def test_steps_outside_the_grid_have_no_attribution() -> None:
    # no k = 0 rollouts (student never run alone) and the last prefix k = 9 < m = 10:
    # steps 1-3 lie before the first measured prefix, step 10 after the last.
    rows = example(solved={3: 1, 6: 3, 9: 4})
    steps = attribution.step_attribution(rows)
    assert steps["attribution"].isna().tolist() == [True] * 3 + [False] * 6 + [True]
    # (3, 6]: (0.75 - 0.25) / 3; (6, 9]: (1.0 - 0.75) / 3
    np.testing.assert_allclose(steps["attribution"].iloc[3:9], [0.5 / 3] * 3 + [0.25 / 3] * 3)


def test_top_share_of_the_running_example() -> None:
    # ten measured steps: the top ceil(0.1 * 10) = 1 step carries 0.5/3 = 0.16667 of the
    # positive total 3 * 0.5/3 + 3 * 0.25/3 = 0.75: share 0.16667 / 0.75 = 0.22222. Spread
    # evenly it would be 1 / 10 = 0.1.
    table = attribution.trace_concentration(example())
    row = table.iloc[0]
    assert (row["teacher"], row["dataset"]) == ("T", "D")
    assert (row["steps_measured"], row["top_steps"]) == (10, 1)
    assert row["positive"] == pytest.approx(0.75)
    assert row["top_share"] == pytest.approx(2 / 9)
    assert row["uniform_share"] == pytest.approx(0.1)


def test_top_share_ranks_steps_not_intervals() -> None:
    # 25 steps in one interval gaining 0.5 and 5 steps in another gaining 0.5: per step 0.02
    # and 0.1. Top ceil(0.1 * 30) = 3 steps, all from the short interval: 0.3 of a total 1.0.
    share, top = attribution.top_share(np.array([0.02, 0.1]), np.array([25, 5]))
    assert (top, share) == (3, pytest.approx(0.3))
    # Negative steps (a longer prefix solved less) count in no total: [-0.2, 0.1, 0.1] with
    # one step each: top ceil(0.3) = 1 step, 0.1 of a positive total 0.2: 0.5.
    assert attribution.top_share(np.array([-0.2, 0.1, 0.1])) == (pytest.approx(0.5), 1)
    # No step helps: undefined.
    share, top = attribution.top_share(np.array([0.0, -0.1]))
    assert math.isnan(share) and top == 1


def test_teacher_summary_averages_traces() -> None:
    # Teacher T: the running example (2/9) and a trace solved only by the whole trace
    # (r = 0 up to k = 9, 1 at k = 10: all 1.0 on step 10, the top step: share 1.0);
    # teacher U: a trace never helped (always 1 of 4): undefined, counted apart.
    late = example("late", solved={0: 0, 3: 0, 6: 0, 9: 0, 10: 4})
    flat = example("flat", "U", solved={0: 1, 3: 1, 6: 1, 9: 1, 10: 1})
    traces = attribution.trace_concentration(pd.concat([example(), late, flat]))
    summary = attribution.teacher_concentration(traces).set_index("teacher")
    # mean(2/9, 1.0) = 0.61111; its se = sd / sqrt(2) = |1 - 2/9| / 2 = 0.38889
    assert summary.loc["T", "top_share"] == pytest.approx((2 / 9 + 1.0) / 2)
    assert summary.loc["T", "top_share_se"] == pytest.approx((1 - 2 / 9) / 2)
    assert (summary.loc["T", "traces"], summary.loc["T", "traces_without_help"]) == (2, 0)
    assert (summary.loc["U", "traces"], summary.loc["U", "traces_without_help"]) == (0, 1)
    assert math.isnan(summary.loc["U", "top_share"])


def _plain_attribution(rollouts: pd.DataFrame) -> dict[tuple[str, int], float]:
    """The same per-step numbers with plain loops: step -> a_i / width."""
    out: dict[tuple[str, int], float] = {}
    for trace_id in sorted(set(rollouts["trace_id"])):
        mine = rollouts[rollouts["trace_id"] == trace_id]
        ks = sorted(set(int(k) for k in mine["k"]))
        rate = {k: float(mine[mine["k"] == k]["correct"].mean()) for k in ks}
        for before, after in itertools.pairwise(ks):
            for step in range(before + 1, after + 1):
                out[(trace_id, step)] = (rate[after] - rate[before]) / (after - before)
    return out


def test_vectorised_equals_plain_loops_on_random_rollouts() -> None:
    rng = np.random.default_rng(7)
    rows = []
    for t in range(6):
        m = int(rng.integers(3, 15))
        ks = sorted({0, m, *rng.integers(1, m, size=3).tolist()})
        for k in ks:
            for sample in range(int(rng.integers(1, 4))):
                rows.append({"trace_id": f"t{t}", "k": k, "m": m, "sample": sample,
                             "correct": float(rng.random() < k / m)})  # fmt: skip
    rollouts = pd.DataFrame(rows)
    plain = _plain_attribution(rollouts)
    for trace_id, group in rollouts.groupby("trace_id"):
        steps = attribution.step_attribution(group)
        for step, value in zip(steps["step"], steps["attribution"], strict=True):
            assert value == pytest.approx(plain[(str(trace_id), int(step))])
    # the per-trace concentration (vectorised over traces) against top_share trace by trace
    table = attribution.trace_concentration(rollouts).set_index("trace_id")
    for trace_id, group in rollouts.groupby("trace_id"):
        steps = attribution.step_attribution(group)
        share, top = attribution.top_share(steps["attribution"].to_numpy())
        assert table.loc[str(trace_id), "top_steps"] == top
        if math.isnan(share):
            assert math.isnan(table.loc[str(trace_id), "top_share"])
        else:
            assert table.loc[str(trace_id), "top_share"] == pytest.approx(share)
