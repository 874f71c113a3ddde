"""The robustness report (legival_core.rankings.robustness,
legival_core.rankings.robustness_choices).

* τ_b, ρ, flipped pairs and their verdicts on rankings small enough to check by hand, and
  hypothesis properties: an alternative equal to the default (or any order-keeping change of
  its values) gives τ_b = 1 and no flip; τ_b agrees with scipy's; without ties
  τ_b = 1 − 2·flips / n_0.
* A store ranked by hand: three teachers, two problems, two students. The redundancy threshold
  0.80 vs 0.85 flips one pair (within noise: every resample ranks them the same, but from two
  traces whose redundancy never varies, so the Wilson intervals the table shows overlap and no
  rank is certain; issue 39), the second
  labeler flips one pair within noise, and no student, prefix grid or profile flips any.
  Every τ_b, ρ and flip of its report is asserted with the arithmetic beside it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.metrics.backtracking import lexical_backtracking
from legival_core.rankings import robustness_choices
from legival_core.rankings.robustness import (
    NO_INTERVAL,
    REAL_FLIP,
    WITHIN_NOISE,
    compare_rankings,
    flipped_pairs,
    kendall_tau_b,
    noise_verdict,
)
from legival_core.rankings.robustness_choices import (
    Alternative,
    Settings,
    Variant,
    load_tables,
    robustness_report,
)
from legival_core.stats.stats import spearman_rho
from legival_core.store.schema import trace_id_for
from legival_core.store.store import Store
from tests.app_fixtures import step_rows

# --- rank agreement by hand -----------------------------------------------------------------


def test_kendall_tau_b_by_hand() -> None:
    # x = 1 2 3 4, y = 1 3 2 4: of the 6 pairs only (2,3) is discordant -> (5 - 1) / 6
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    # reversed: all 3 pairs discordant -> -3 / 3
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == -1.0
    # ties in both: x = 1 1 2, y = 1 2 2; n0 = 3, n1 = 1 (pair 0-1), n2 = 1 (pair 1-2);
    # (0,1): tied in x -> 0; (0,2): concordant; (1,2): tied in y -> 0: 1 / sqrt(2 * 2)
    assert kendall_tau_b([1, 1, 2], [1, 2, 2]) == pytest.approx(0.5)
    # a NaN drops its pair: x = 1 2, y = 2 1 -> -1
    assert kendall_tau_b([1, 2, math.nan], [2, 1, 5]) == -1.0
    # undefined: one teacher, or everyone tied in one ranking (denominator 0)
    assert math.isnan(kendall_tau_b([1], [1]))
    assert math.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))


def test_spearman_rho_by_hand() -> None:
    # d = 0, 1, 1, 0: 1 - 6 * 2 / (4 * 15) = 0.8
    assert spearman_rho([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)


def test_noise_verdicts() -> None:
    assert noise_verdict(2, 3, 1, 2) == WITHIN_NOISE  # 2..3 and 1..2 share rank 2
    assert noise_verdict(3, 3, 1, 2) == REAL_FLIP  # 3..3 lies below 1..2
    assert noise_verdict(None, None, 1, 2) == NO_INTERVAL


def test_flipped_pairs_by_hand() -> None:
    # default a 1, b 2, c 3, d 4; the alternative puts d first and swaps b and c:
    # flips (a,d), (b,c), (b,d), (c,d); (a,b), (a,c) keep their order.
    default = pd.Series({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    alternative = pd.Series({"a": 2.0, "b": 4.0, "c": 3.0, "d": 1.0})
    intervals = pd.DataFrame(
        {"teacher": ["a", "b", "c", "d"], "rank_lo": [1, 2, 2, 4], "rank_hi": [1, 3, 3, 4]}
    )
    flips = flipped_pairs(default, alternative, intervals)
    assert flips[["above", "below", "verdict"]].values.tolist() == [
        ["a", "d", REAL_FLIP],  # 1..1 vs 4..4
        ["b", "c", WITHIN_NOISE],  # 2..3 vs 2..3
        ["b", "d", REAL_FLIP],  # 2..3 vs 4..4
        ["c", "d", REAL_FLIP],
    ]
    assert flips["alternative_rank_above"].tolist() == [2, 4, 4, 3]
    # A pair that becomes a tie is not a flip: b and c tied at 2 under the alternative.
    tied = flipped_pairs(default[["b", "c"]], pd.Series({"b": 2.0, "c": 2.0}))
    assert tied.empty


def test_compare_rankings_by_hand() -> None:
    # FOTU-like (higher is better): default a 0.9 > b 0.5 > c 0.4 > d 0.1; the alternative
    # a 0.8 > c 0.6 > b 0.3 > d 0.2 swaps b and c only: n0 = 6, n_d = 1 -> tau_b = 4/6;
    # rank differences 0, 1, 1, 0 -> rho = 1 - 6 * 2 / (4 * 15) = 0.8
    default = pd.Series({"a": 0.9, "b": 0.5, "c": 0.4, "d": 0.1})
    alternative = pd.Series({"a": 0.8, "b": 0.3, "c": 0.6, "d": 0.2})
    result = compare_rankings(default, alternative, higher_is_better=True)
    assert result.tau_b == pytest.approx(4 / 6)
    assert result.rho == pytest.approx(0.8)
    assert result.n_teachers == 4 and result.n_flips == 1 and result.n_real_flips == 0
    assert result.flips[["above", "below", "verdict"]].values.tolist() == [["b", "c", NO_INTERVAL]]
    # Lower is better (tokens): the same numbers rank the other way round, the same pair flips.
    lower = compare_rankings(default, alternative, higher_is_better=False)
    assert lower.tau_b == pytest.approx(4 / 6)
    assert lower.flips[["above", "below"]].values.tolist() == [["c", "b"]]
    # A teacher missing under the alternative is left out of tau_b: 3 teachers, 1 flip of 3.
    partial = compare_rankings(default, alternative.drop("a"), higher_is_better=True)
    assert partial.n_teachers == 3 and partial.tau_b == pytest.approx(1 / 3)


def test_pairs_an_alternative_ties_are_counted_not_flipped() -> None:
    # default a 1, b 2, c 3; the alternative ties b and c (0.5 each) and keeps a first:
    # n0 = 3, n1 = 0, n2 = 1 (b, c); (a,b), (a,c) concordant -> tau_b = 2 / sqrt(3 * 2)
    default = pd.Series({"a": 0.9, "b": 0.6, "c": 0.3})
    result = compare_rankings(default, pd.Series({"a": 0.9, "b": 0.5, "c": 0.5}), True)
    assert (result.n_flips, result.n_ties) == (0, 1)
    assert result.tau_b == pytest.approx(2 / math.sqrt(6))


# --- properties -----------------------------------------------------------------------------

# Values on a 1e-3 grid: ties are exact and other values stay far apart under 3x + 7. With any
# float, two values 2e-10 apart tie at the ranks' 1e-9 rounding while 3x + 7 parts them
# (hypothesis found 0 and 2.4e-10), so "the same order" would not hold of the test's own data.
values = (
    st.lists(st.integers(-(10**9), 10**9), min_size=2, max_size=12)
    .map(lambda v: [x / 1000 for x in v])
    .filter(lambda v: len(set(v)) > 1)
)


@settings(max_examples=150, deadline=None)
@given(values, st.booleans())
def test_a_choice_equal_to_the_default_gives_tau_one_and_no_flip(
    numbers: list[float], higher: bool
) -> None:
    teachers = [f"t{i}" for i in range(len(numbers))]
    default = pd.Series(numbers, index=teachers)
    for same in (default, default * 3.0 + 7.0):  # the same values, or the same order
        result = compare_rankings(default, same, higher_is_better=higher)
        assert result.tau_b == pytest.approx(1.0)
        assert result.n_flips == 0


@settings(max_examples=150, deadline=None)
@given(st.permutations(list(range(8))), st.integers(min_value=2, max_value=8))
def test_tau_b_counts_the_flips_when_nothing_ties(order: list[int], n: int) -> None:
    from scipy.stats import kendalltau

    ranks = [r for r in order if r < n]
    default = pd.Series(np.arange(1.0, n + 1), index=[f"t{i}" for i in range(n)])
    alternative = pd.Series(np.asarray(ranks, dtype=float) + 1, index=default.index)
    result = compare_rankings(default, alternative, higher_is_better=False)
    n0 = n * (n - 1) / 2
    assert result.tau_b == pytest.approx(1 - 2 * result.n_flips / n0)
    assert result.tau_b == pytest.approx(kendalltau(default, alternative).statistic)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=3), min_size=3, max_size=10),
    st.lists(st.integers(min_value=0, max_value=3), min_size=3, max_size=10),
)
def test_tau_b_with_ties_agrees_with_scipy(x: list[int], y: list[int]) -> None:
    from scipy.stats import kendalltau

    n = min(len(x), len(y))
    expected = kendalltau(x[:n], y[:n]).statistic  # tau-b is scipy's default variant
    got = kendall_tau_b(x[:n], y[:n])
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


# --- a store ranked by hand -----------------------------------------------------------------

TEACHERS = ("A", "B", "C")
PROBLEMS = ("p1", "p2")
STUDENTS = ("s1", "s2")
M = 9  # steps per trace
#: r_1..r_8 of every trace of a teacher (r_0 has no earlier step).
SIMILARITY = {
    "A": [0.9, 0.9, 0.9, 0.82, 0.82, 0.82, 0.1, 0.1],  # > 0.80: 6 of 8; > 0.85: 3 of 8
    "B": [0.9, 0.9, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1],  # 4 of 8 at either τ
    "C": [0.9, 0.9, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1],  # 2 of 8 at either τ
}
#: 1-based steps that open with a revision cue (the lexical labeler), per (teacher, problem).
LEXICAL = {
    ("A", "p1"): [],
    ("A", "p2"): [2, 4, 6, 8],
    ("B", "p1"): [3],
    ("B", "p2"): [3, 6],
    ("C", "p1"): [2, 4, 6],
    ("C", "p2"): [2, 4, 6],
}
#: A second labeler's flags (a made-up judge), per teacher, the same on both problems.
JUDGE = {"A": [5], "B": [3, 6], "C": [2, 4, 6]}
#: Each student's (partial-credit) grade on every prefix k >= 1 of a teacher's traces.
CREDIT = {("A", "s1"): 0.75, ("A", "s2"): 0.5, ("B", "s1"): 0.5, ("B", "s2"): 0.25}
CREDIT |= {("C", "s1"): 0.25, ("C", "s2"): 0.0}


def _steps(teacher: str, problem: str) -> list[str]:
    flagged = set(LEXICAL[(teacher, problem)])
    return [
        f"Wait, {teacher} looks again at part {chr(97 + i)}."
        if i + 1 in flagged
        else f"Then {teacher} thinks about part {chr(97 + i)}."
        for i in range(M)
    ]


def build_hand_store(path: Path) -> Store:
    """Write the hand-ranked store; derived tables by the metrics stage's own functions."""
    from precompute.stages.common import problem_rows
    from precompute.stages.leaks import leak_table
    from precompute.stages.metrics import (
        efficiency_table,
        teacher_table,
        transfer_table,
    )

    store = Store.create(path, config={"kind": "hand-ranked robustness fixture"})
    problems = pd.DataFrame(
        {"problem_id": list(PROBLEMS), "dataset": "toy", "task": "math", "prompt": "Seven?"}
    ).assign(gold="7")
    traces, grades, steps, similarity, judgments, rollouts = [], [], [], [], [], []
    for teacher in TEACHERS:
        for problem in PROBLEMS:
            trace_id = trace_id_for(teacher, problem)
            texts = _steps(teacher, problem)
            assert lexical_backtracking(texts, "math") == LEXICAL[(teacher, problem)]
            reasoning = " ".join(texts)
            traces.append(
                {
                    "trace_id": trace_id,
                    "problem_id": problem,
                    "dataset": "toy",
                    "teacher": teacher,
                    "sample": 0,
                    "reasoning": reasoning,
                    "source": "test-fixture",
                }
            )
            grades.append({"trace_id": trace_id, "correct": True, "status": "ok"})
            steps += step_rows(trace_id, texts)
            sims = [None, *SIMILARITY[teacher]]
            similarity += [
                {
                    "trace_id": trace_id,
                    "step": i,
                    "max_similarity": r,
                    "matched_step": 0 if i else None,
                }
                for i, r in enumerate(sims)
            ]
            judgments += [
                {
                    "trace_id": trace_id,
                    "labeler": "lexical",
                    "steps": LEXICAL[(teacher, problem)],
                    "valid": True,
                },
                {
                    "trace_id": trace_id,
                    "labeler": "judge:toy",
                    "steps": JUDGE[teacher],
                    "valid": True,
                },
            ]
            for student in STUDENTS:
                for k in (0, 3, 6, 9):
                    rollouts.append(
                        {
                            "trace_id": trace_id,
                            "student": student,
                            "k": k,
                            "sample": 0,
                            "teacher": teacher,
                            "dataset": "toy",
                            "problem_id": problem,
                            "m": M,
                            "correct": 0.0 if k == 0 else CREDIT[(teacher, student)],
                        }
                    )
    for name, rows in (
        ("problems", problems),
        ("traces", pd.DataFrame(traces)),
        ("grades", pd.DataFrame(grades)),
        ("steps", pd.DataFrame(steps)),
        ("similarity", pd.DataFrame(similarity)),
        ("judgments", pd.DataFrame(judgments)),
        ("rollouts", pd.DataFrame(rollouts)),
    ):
        store.write(name, rows, stage="fixture")
    from tests.app_fixtures import write_trace_counts

    write_trace_counts(store)
    efficiency = efficiency_table(
        store.read("traces"),
        store.read("grades"),
        store.read("steps"),
        store.read("similarity"),
        store.read("judgments"),
        threshold=0.8,
        labeler="lexical",
        encoding="cl100k_base",
    )
    store.write("trace_efficiency", efficiency, stage="metrics")
    rollout_frame = store.read("rollouts")
    leaks = leak_table(
        rollout_frame, store.read("traces"), store.read("steps"), problem_rows(store), 10.0
    )
    transfer = transfer_table(rollout_frame, "paper", "interpolate", leaks)
    store.write("trace_transfer", transfer, stage="metrics")
    store.write(
        "teacher_metrics",
        teacher_table(efficiency, rollout_frame, "paper", "interpolate", 0, transfer),
        stage="metrics",
    )
    store.record_stage(
        "metrics",
        threshold=0.8,
        profile="paper",
        grid="interpolate",
        primary_labeler="lexical",
        encoding="cl100k_base",
    )
    return store


@pytest.fixture(scope="module")
def hand_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return build_hand_store(tmp_path_factory.mktemp("robustness") / "hand")


FAMILIES = ("threshold", "grid", "profile", "student", "labeler", "references", "segmenter")


@pytest.fixture(scope="module")
def hand_report(hand_store: Store) -> robustness_choices.RobustnessReport:
    return robustness_report(
        load_tables(hand_store),
        Settings.from_manifest(hand_store.manifest),
        n_boot=400,
        seed=0,
        families=FAMILIES,
    )


def _row(report: robustness_choices.RobustnessReport, metric: str, choice: str) -> pd.Series:
    rows = report.summary[(report.summary.metric == metric) & (report.summary.choice == choice)]
    assert len(rows) == 1, (metric, choice, report.summary)
    return rows.iloc[0]


def _ranking(report: robustness_choices.RobustnessReport, metric: str, choice: str) -> dict:
    rows = report.rankings[(report.rankings.metric == metric) & (report.rankings.choice == choice)]
    return dict(zip(rows.teacher, zip(rows.value.round(6), rows["rank"], strict=True), strict=True))


def test_hand_store_default_is_the_stored_teacher_table(hand_store: Store, hand_report) -> None:
    stored = hand_store.read("teacher_metrics").set_index("teacher")
    for metric in ("redundancy", "backtracking", "fotu", "regression_rate", "fotu_before_leak"):
        ranking = _ranking(hand_report, metric, "default")
        for teacher in TEACHERS:
            assert ranking[teacher][0] == pytest.approx(stored.loc[teacher, metric], abs=1e-6)


#: (metric, choice, the teachers in rank order with their values) of the hand store.
RANKINGS_BY_HAND = [
    # Redundancy (lower is better) at τ = 0.80: A 6/8 = 0.75, B 4/8 = 0.5, C 2/8 = 0.25
    # -> C 1, B 2, A 3. At τ = 0.85 A drops to 3/8 = 0.375 -> C 1, A 2, B 3.
    ("redundancy", "default", [("C", 2 / 8), ("B", 4 / 8), ("A", 6 / 8)]),
    ("redundancy", "threshold:0.85", [("C", 2 / 8), ("A", 3 / 8), ("B", 4 / 8)]),
    # Lexical backtracking (lower is better), shares of m = 9 steps:
    # A p1 0, p2 4/9 -> 2/9; B p1 1/9, p2 2/9 -> 1.5/9; C 3/9 on both -> B 1, A 2, C 3.
    ("backtracking", "default", [("B", 1.5 / 9), ("A", 2 / 9), ("C", 3 / 9)]),
    # The judge flags A 1/9, B 2/9, C 3/9 on both problems -> A 1, B 2, C 3.
    ("backtracking", "labeler:judge:toy", [("A", 1 / 9), ("B", 2 / 9), ("C", 3 / 9)]),
    # Every prefix k >= 1 gets the same credit c, so each curve is flat at c and FOTU = c:
    # A (0.75 + 0.5) / 2 = 0.625, B (0.5 + 0.25) / 2 = 0.375, C (0.25 + 0) / 2 = 0.125.
    ("fotu", "default", [("A", 0.625), ("B", 0.375), ("C", 0.125)]),
    # Each student alone keeps A > B > C: s1 0.75, 0.5, 0.25; s2 0.5, 0.25, 0.
    ("fotu", "student:s1", [("A", 0.75), ("B", 0.5), ("C", 0.25)]),
    ("fotu", "student:s2", [("A", 0.5), ("B", 0.25), ("C", 0.0)]),
    # Release profile: k = 0 (credit 0) pooled into centre 1, k = 3, 6 in centres 33 and 67,
    # k = m dropped: FOTU = (0 + c + c) / 3 -> A 1.25/3, B 0.75/3, C 0.25/3; same order.
    ("fotu", "profile:release", [("A", 1.25 / 3), ("B", 0.75 / 3), ("C", 0.25 / 3)]),
]


@pytest.mark.parametrize(
    ("metric", "choice", "in_order"),
    RANKINGS_BY_HAND,
    ids=[f"{metric}-{choice}" for metric, choice, _ in RANKINGS_BY_HAND],
)
def test_rankings_by_hand(
    hand_report, metric: str, choice: str, in_order: list[tuple[str, float]]
) -> None:
    """Each choice's ranking of the hand store: every teacher's value (to 6 places) and rank."""
    expected = {
        teacher: (round(value, 6), rank) for rank, (teacher, value) in enumerate(in_order, 1)
    }
    assert _ranking(hand_report, metric, choice) == expected


def test_threshold_085_flips_one_pair_within_noise(hand_report) -> None:
    # The rankings: test_rankings_by_hand (redundancy); C 1, B 2, A 3 -> C 1, A 2, B 3.
    row = _row(hand_report, "redundancy", "threshold:0.85")
    # pairs (A,B) discordant, (A,C) and (B,C) concordant: (2 - 1) / sqrt(3 * 3) = 1/3;
    # rank differences A 1, B 1, C 0: rho = 1 - 6 * 2 / (3 * (9 - 1)) = 0.5
    assert row.tau_b == pytest.approx(1 / 3)
    assert row.rho == pytest.approx(0.5)
    assert (row.n_teachers, row.flips, row.real_flips, row.ties) == (3, 1, 0, 0)
    flips = hand_report.flips[hand_report.flips.choice == "threshold:0.85"]
    # Every trace of a teacher has the same redundancy, so every resample of the two problems
    # gives the same three values: the bootstrap collapses. (Before issue 39 that read as rank
    # intervals B 2–2 and A 3–3, a real flip.) From 2 traces the shown Wilson intervals
    # (A 2 of 2: [0.34, 1]; B 1 of 2: [0.09, 0.91]; C 0 of 2: [0, 0.66]) all overlap, so each
    # teacher may take any rank, 1–3: the flip is within noise.
    assert flips[["above", "below", "verdict"]].values.tolist() == [["B", "A", WITHIN_NOISE]]
    assert flips[["default_rank_above", "default_rank_below"]].values.tolist() == [[2, 3]]
    assert flips[["alternative_rank_above", "alternative_rank_below"]].values.tolist() == [[3, 2]]


def test_second_labeler_flips_one_pair_within_noise(hand_report) -> None:
    # The rankings: test_rankings_by_hand (backtracking); B 1, A 2, C 3 -> A 1, B 2, C 3.
    row = _row(hand_report, "backtracking", "labeler:judge:toy")
    # (A,B) discordant, (A,C), (B,C) concordant: tau_b = 1/3, rho = 0.5 (as above)
    assert row.tau_b == pytest.approx(1 / 3) and row.rho == pytest.approx(0.5)
    assert (row.flips, row.real_flips) == (1, 0)
    # Resampling the two problems: {p1, p1} (prob 1/4) gives A 0, B 1/9, C 3/9 -> A rank 1;
    # {p2, p2} (1/4) gives A 4/9, B 2/9, C 3/9 -> A rank 3; B stays within 1–2, so the
    # intervals A 1–3 and B 1–2 overlap: within noise.
    flips = hand_report.flips[hand_report.flips.choice == "labeler:judge:toy"]
    assert flips[["above", "below", "verdict"]].values.tolist() == [["B", "A", WITHIN_NOISE]]


def test_students_grids_and_profile_flip_nothing(hand_report) -> None:
    # The default, per-student and release rankings: test_rankings_by_hand (fotu), all A > B > C.
    # A coarser grid keeps k = 0, 6, 9 or k = 0, 9: still flat at c.
    for grid in ("grid:6", "grid:9"):
        assert _ranking(hand_report, "fotu", grid) == _ranking(hand_report, "fotu", "default")
    # Same order everywhere: all 3 pairs concordant -> tau_b = 3/3 = 1, rho = 1 - 0 = 1.
    # FOTU before the leak equals FOTU (no trace states the gold 7 before its end).
    for metric in ("fotu", "fotu_before_leak"):
        for choice in ("grid:6", "grid:9", "profile:release", "student:s1", "student:s2"):
            row = _row(hand_report, metric, choice)
            assert (row.tau_b, row.rho, row.flips, row.real_flips, row.ties) == (1.0, 1.0, 0, 0, 0)


def test_tied_rankings_have_no_tau(hand_report) -> None:
    # No prefix ever drops (0 at k = 0, then c, c, c): every regression rate is 0, all three
    # teachers tie under every choice, so n_0 - n_1 = 3 - 3 = 0: tau_b and rho undefined.
    row = _row(hand_report, "regression_rate", "student:s1")
    assert math.isnan(row.tau_b) and math.isnan(row.rho) and row.flips == 0


def test_survival_and_unavailable_choices(hand_report) -> None:
    survival = hand_report.survival().set_index("metric")
    columns = ["ordered_pairs", "choices", "flips", "real_flips", "ties", "flipped_by"]
    # Three teachers order 3 pairs; redundancy: 1 alternative, 1 flip, within noise (two
    # traces each: see test_threshold_085_flips_one_pair_within_noise), no tie.
    assert survival.loc["redundancy", columns].tolist() == [
        3, 1, 1, 0, 0, "redundancy τ = 0.85 (release)"
    ]  # fmt: skip
    assert survival.loc["backtracking", columns].tolist() == [
        3, 1, 1, 0, 0, "backtracking labeler judge:toy"
    ]  # fmt: skip
    assert survival.loc["fotu", columns].tolist() == [3, 5, 0, 0, 0, ""]
    # Every regression rate is 0: the default orders no pair, so nothing can flip or tie.
    assert survival.loc["regression_rate", ["ordered_pairs", "flips", "ties"]].tolist() == [0, 0, 0]
    assert hand_report.changing_teachers("redundancy") == {"A", "B"}
    assert hand_report.changing_teachers("fotu") == set()
    reasons = dict(zip(hand_report.unavailable.family, hand_report.unavailable.reason, strict=True))
    assert reasons["references"] == "no reference teacher"
    # The side tables were never built: 0 of the 6 traces re-segmented.
    assert reasons["segmenter"].startswith("0 of 6 traces re-segmented with lines")
    assert "python -m precompute robustness --store DIR --segmenter lines" in reasons["segmenter"]


def test_a_survival_verdict_names_the_choices_that_were_compared(hand_report) -> None:
    """Issue 38: "survives every choice" must say which choices: the ones computed for that
    metric, never one the store could not give (they are listed apart, with the reason)."""
    from legival_core.views.robustness import survival_table

    table = survival_table(hand_report).set_index("metric")
    compared = hand_report.summary.loc[hand_report.summary.metric == "fotu", "label"].tolist()
    assert compared == [
        "prefix grid every 6 steps",
        "prefix grid every 9 steps",
        "transfer profile release",
        "student s1 alone",
        "student s2 alone",
    ]
    assert table.loc["FOTU", "verdict"] == "survives every choice compared: " + ", ".join(compared)
    assert table.loc["FOTU", "choices compared"] == 5
    for label in hand_report.unavailable["label"]:
        assert label not in table.loc["FOTU", "verdict"]


def test_segmenter_backtracking_needs_the_primary_labelers_flags(hand_store: Store) -> None:
    """Side tables built before the cues labeler hold no ``context_cue``: with cues as the
    primary labeler the segmenter alternative moves redundancy only, and says why."""
    tables = load_tables(hand_store)
    efficiency = tables.trace_efficiency
    steps = pd.DataFrame(
        [
            {"segmenter": "lines", "trace_id": t, "step": k, "lexical_cue": k == 1}
            for t in efficiency["trace_id"]
            for k in range(3)
        ]
    )
    similarity = steps[["segmenter", "trace_id", "step"]].assign(max_similarity=0.1)
    tables = replace(tables, robustness_steps=steps, robustness_similarity=similarity)
    base = replace(Settings.from_manifest(hand_store.manifest), segmenter="paper")
    (lines,) = [
        a
        for a in robustness_choices.CHOICE_FAMILIES["segmenter"](
            tables, replace(base, labeler="cues")
        )
        if a.key == "segmenter:lines"
    ]
    assert lines.variant is not None
    assert "hold no cues flags" in lines.note
    kept = lines.variant.efficiency.set_index("trace_id")["backtracking"]
    assert kept.equals(efficiency.set_index("trace_id")["backtracking"].astype("float64"))
    # The lexical detector's flags are there: one step of three flagged in every trace.
    (lexical,) = [
        a
        for a in robustness_choices.CHOICE_FAMILIES["segmenter"](
            tables, replace(base, labeler="lexical")
        )
        if a.key == "segmenter:lines"
    ]
    assert lexical.note == ""
    assert lexical.variant.efficiency["backtracking"].tolist() == pytest.approx([1 / 3] * 6)


def test_an_alternative_equal_to_the_default_changes_nothing(hand_store: Store) -> None:
    def same(tables, settings) -> list[Alternative]:
        metrics = ("redundancy", "backtracking", "fotu", "fotu_before_leak")
        return [Alternative("same", "same", "the default again", metrics, Variant())]

    with mock.patch.dict(robustness_choices.CHOICE_FAMILIES, {"same": same}):
        report = robustness_report(
            load_tables(hand_store), Settings.from_manifest(hand_store.manifest), families=["same"]
        )
    assert len(report.summary) == 4
    assert (report.summary.tau_b == 1.0).all() and (report.summary.flips == 0).all()
    assert report.flips.empty


def test_settings_follow_the_latest_metrics_record() -> None:
    manifest = {
        "config": {"metrics": {"threshold": 0.8, "profile": "paper"}, "segment": {"mode": "paper"}},
        "provenance": [
            {"stage": "segment", "mode": "lines"},
            {
                "stage": "metrics",
                "threshold": 0.85,
                "profile": "release",
                "primary_labeler": "lexical",
            },
        ],
    }
    assert Settings.from_manifest(manifest) == Settings(
        threshold=0.85, profile="release", labeler="lexical", segmenter="lines"
    )
