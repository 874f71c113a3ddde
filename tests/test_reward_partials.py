"""The reward results' transfer inputs as partials (legival_core.oversight.reward_partials):
values worked by hand, and the same numbers however the traces are split into chunks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.metrics.transfer_profiles import sotu
from legival_core.oversight.reward_partials import (
    HAZARD_COLUMNS,
    RewardPartial,
    merge_student_sums,
    student_sums,
    sums_without,
    teacher_transfer,
    trace_means,
)


def _rows() -> pd.DataFrame:
    """Two teachers on one dataset; T has traces a, b (students s, u), V has trace c."""
    return pd.DataFrame(
        {
            "trace_id": ["a", "a", "b", "b", "c"],
            "student": ["s", "u", "s", "u", "s"],
            "teacher": ["T", "T", "T", "T", "V"],
            "dataset": "D",
            "fotu": [0.5, 1.0, 0.25, None, 0.75],
            "regression_rate": [0.0, 0.5, 0.0, 0.0, 1.0],
            "hazard_bin": pd.array([10, 20, 10, None, 50], dtype="Int32"),
        }
    )


def test_teacher_transfer_by_hand() -> None:
    out = teacher_transfer(student_sums(_rows())).set_index("teacher")
    # T: student s has fotu (0.5 + 0.25) / 2 = 0.375, student u has 1.0 (b's is missing);
    # the teacher's FOTU is the mean over students: (0.375 + 1.0) / 2 = 0.6875
    assert out.loc["T", "fotu"] == (0.375 + 1.0) / 2
    # regression: s (0 + 0) / 2 = 0, u (0.5 + 0) / 2 = 0.25 -> 0.125
    assert out.loc["T", "regression_rate"] == 0.125
    # SOTU: s solved both traces in bin 10 (entropy 0); u one trace in bin 20 (entropy 0)
    assert out.loc["T", "sotu"] == 0.0
    # V: one row each
    assert (out.loc["V", "fotu"], out.loc["V", "regression_rate"]) == (0.75, 1.0)


def test_sotu_of_two_bins_by_hand() -> None:
    rows = _rows().assign(hazard_bin=pd.array([10, 20, 20, 10, 50], dtype="Int32"))
    out = teacher_transfer(student_sums(rows)).set_index("teacher")
    # each of T's students solved one trace in bin 10 and one in bin 20: p = (1/2, 1/2),
    # H = log 2, normalised by log 50
    assert math.isclose(out.loc["T", "sotu"], math.log(2) / math.log(50), rel_tol=1e-15)


def test_the_histogram_and_the_counts() -> None:
    sums = student_sums(_rows()).set_index(["teacher", "student"])
    assert sums.loc[("T", "s"), "hazard_10"] == 2
    assert sums.loc[("T", "u"), "hazard_20"] == 1
    assert int(sums.loc[("T", "u"), list(HAZARD_COLUMNS)].sum()) == 1  # the missing one: none
    assert (sums.loc[("T", "u"), "fotu_sum"], sums.loc[("T", "u"), "fotu_n"]) == (1.0, 1)


def test_a_hazard_bin_past_the_last_is_refused() -> None:
    rows = _rows().assign(hazard_bin=pd.array([10, 20, 51, None, 50], dtype="Int32"))
    try:
        student_sums(rows)
    except ValueError as err:
        assert "1..50" in str(err)
    else:
        raise AssertionError("a hazard bin of 51 was counted")


def test_trace_means_of_trace_means_are_the_same() -> None:
    """The stage passes one row per trace where the pages pass the rows: the mean of one value
    is that value, so the reward results are the same."""
    once = trace_means(_rows())
    assert once["fotu"].tolist()[:2] == [0.75, 0.25]  # a: (0.5 + 1.0) / 2; b: its one value
    pd.testing.assert_frame_equal(trace_means(once), once)


def test_rows_already_one_per_trace_are_not_grouped_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stage's merged means (one row per trace, sorted by id) go into three of each reward
    model's results: they are taken as they are, with no group-by of their ids (ten million
    text ids at 10M traces); whole numbers come back as floats, as a mean would give them."""
    from legival_core.oversight.oversight import trace_level_rewards

    means = pd.DataFrame(
        {
            "trace_id": ["a", "b", "c"],
            "teacher": ["T", "T", "V"],
            "dataset": "D",
            "fotu": [0.75, 0.25, 0.75],
            "regression_rate": [0, 1, 0],
        }
    )
    rewards = pd.DataFrame({"trace_id": ["c", "a"], "reward_model": "rm", "score": [2.0, 1.0]})
    grades = pd.DataFrame({"trace_id": ["a", "b", "c"], "correct": [True, True, False]})

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("grouped again")

    monkeypatch.setattr(pd.DataFrame, "groupby", refused)
    out = trace_means(means)
    assert out["regression_rate"].tolist() == [0.0, 1.0, 0.0]
    assert out["regression_rate"].dtype == np.float64
    points = trace_level_rewards(rewards, means, grades)
    assert points[["trace_id", "score", "fotu", "correct"]].values.tolist() == [
        ["a", 1.0, 0.75, True],
        ["c", 2.0, 0.75, False],
    ]
    monkeypatch.undo()
    # rows out of order, or a trace twice, are grouped: b's two rows average to 0.5
    twice = pd.concat([means, means.iloc[[1]].assign(fotu=0.75)], ignore_index=True)
    assert trace_means(twice)["fotu"].tolist() == [0.75, 0.5, 0.75]
    assert trace_means(means.iloc[::-1])["trace_id"].tolist() == ["a", "b", "c"]


def test_the_correct_subset_keeps_the_correct_traces_only() -> None:
    grades = pd.DataFrame(
        {"trace_id": ["a", "b", "c"], "correct": pd.array([True, None, False], "boolean")}
    )
    partial = RewardPartial.of_chunk(_rows(), grades)
    correct = partial.sums["correct"]
    assert set(correct["teacher"]) == {"T"}
    assert correct["fotu_n"].sum() == 2  # trace a's two students
    assert partial.sums["all"]["fotu_n"].sum() == 4  # b's missing FOTU is not counted


def test_sums_without_leaves_teachers_and_datasets_out() -> None:
    sums = student_sums(_rows())
    assert set(sums_without(sums, ["V"])["teacher"]) == {"T"}
    assert sums_without(sums, [], "other").empty
    assert sums_without(sums) is sums


def _pandas_teacher_transfer(rows: pd.DataFrame) -> pd.DataFrame:
    """The definition written plainly: per student the mean over its rows and SOTU of its
    hazard bins, then the mean over students."""
    per_student = (
        rows.groupby(["teacher", "dataset", "student"], sort=True)
        .agg(
            fotu=("fotu", "mean"),
            regression_rate=("regression_rate", "mean"),
            sotu=("hazard_bin", lambda bins: sotu(bins.tolist())),
        )
        .reset_index()
    )
    return (
        per_student.groupby(["teacher", "dataset"], sort=True)[["fotu", "sotu", "regression_rate"]]
        .mean()
        .reset_index()
    )


@st.composite
def _transfer_rows(draw: st.DrawFn) -> tuple[pd.DataFrame, list[int]]:
    n_traces = draw(st.integers(1, 12))
    rows = []
    for t in range(n_traces):
        teacher = draw(st.sampled_from(["T", "V", "W"]))
        dataset = draw(st.sampled_from(["D", "E"]))
        students = st.lists(st.sampled_from(["s", "u", "v"]), min_size=1, max_size=3, unique=True)
        for student in draw(students):
            fotu = draw(st.one_of(st.none(), st.floats(0, 1)))
            rows.append(
                {
                    "trace_id": f"t{t}",
                    "student": student,
                    "teacher": teacher,
                    "dataset": dataset,
                    "fotu": fotu,
                    "regression_rate": draw(st.floats(0, 1)),
                    "hazard_bin": draw(st.one_of(st.none(), st.integers(0, 50))),
                }
            )
    frame = pd.DataFrame(rows)
    frame["fotu"] = frame["fotu"].astype(float)
    frame["hazard_bin"] = frame["hazard_bin"].astype("Int32")
    chunk_of_trace = [draw(st.integers(0, 3)) for _ in range(n_traces)]
    return frame, chunk_of_trace


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_transfer_rows())
def test_any_chunking_gives_the_definition(drawn: tuple[pd.DataFrame, list[int]]) -> None:
    """Split the traces into chunks at random: the merged sums give the per-(teacher,
    dataset) means of the plain definition (SOTU exactly, the means to rounding), and the
    per-trace means of the chunks are those of all rows."""
    rows, chunk_of_trace = drawn
    chunk = rows["trace_id"].str[1:].astype(int).map(dict(enumerate(chunk_of_trace)))
    grades = pd.DataFrame({"trace_id": rows["trace_id"].unique(), "correct": True})
    partial = RewardPartial()
    for c in sorted(set(chunk)):
        part = rows[(chunk == c).to_numpy()]
        partial = partial.merge(
            RewardPartial.of_chunk(part, grades[grades["trace_id"].isin(part["trace_id"])])
        )
    got = teacher_transfer(partial.sums["all"])
    want = _pandas_teacher_transfer(rows)
    want["sotu"] = want["sotu"].astype(float)  # the lambda over a masked column gives Float64
    pd.testing.assert_frame_equal(
        got[["teacher", "dataset", "sotu"]],
        want[["teacher", "dataset", "sotu"]],
        rtol=0,
    )
    np.testing.assert_allclose(
        got[["fotu", "regression_rate"]].to_numpy(float),
        want[["fotu", "regression_rate"]].to_numpy(float),
        rtol=1e-12,
        atol=1e-15,
    )
    pd.testing.assert_frame_equal(
        merge_student_sums([partial.sums["all"]]), partial.sums["all"].reset_index(drop=True)
    )
    means = partial.trace_means()
    whole = trace_means(rows)
    pd.testing.assert_frame_equal(
        means[whole.columns].reset_index(drop=True), whole, check_dtype=False
    )
    # joined in place: asking again gives the same means, not what the first join left
    pd.testing.assert_frame_equal(partial.trace_means(), means)
