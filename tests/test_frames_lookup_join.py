"""``legival_core.store.frames.lookup_join`` is ``left.merge(right.drop_duplicates(on), on=on)``
(Arrow's hash lookup on the store's text ids, pandas' elsewhere), and the reward results join
their trace ids with it rather than with pandas' merge."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.oversight.oversight import teacher_level_rewards, trace_level_rewards
from legival_core.store.frames import first_positions, lookup_join, text_codes, text_groups

IDS = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "", "é", "trace-1"]))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(IDS, max_size=12),
    st.lists(IDS, max_size=8),
    st.sampled_from(["str", "object"]),
)
def test_lookup_join_is_a_merge_on_the_first_right_row(
    left_ids: list[str | None], right_ids: list[str | None], dtype: str
) -> None:
    left = pd.DataFrame(
        {"trace_id": pd.Series(left_ids, dtype=dtype), "score": range(len(left_ids))}
    )
    right = pd.DataFrame(
        {
            "trace_id": pd.Series(right_ids, dtype=dtype),
            "teacher": [f"t{i}" for i in range(len(right_ids))],
        }
    )
    expected = left.merge(right.drop_duplicates("trace_id"), on="trace_id")
    got = lookup_join(left, right, "trace_id")
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    assert list(got.columns) == ["trace_id", "score", "teacher"]


def test_first_positions_by_hand() -> None:
    among = pd.Series(["t2", "t1", "t2"], dtype="str")
    assert first_positions(pd.Series(["t2", "t9", "t1"], dtype="str"), among).tolist() == [
        0, -1, 1,
    ]  # fmt: skip
    # numbers take pandas' index
    assert first_positions(pd.Series([5, 4]), pd.Series([4, 4, 5])).tolist() == [2, 0]


def test_lookup_join_refuses_a_column_in_both_frames() -> None:
    left = pd.DataFrame({"trace_id": ["a"], "teacher": ["T"]})
    with pytest.raises(ValueError, match=r"\['teacher'\] in both"):
        lookup_join(left, left.copy(), "trace_id")


def test_the_reward_results_join_trace_ids_without_a_pandas_merge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At two million traces each pandas merge on the trace ids held 0.48 GB of Python
    strings at its peak; the results must be those of the merge, by hand."""
    merge = pd.DataFrame.merge

    def refused(self: pd.DataFrame, right: Any, *args: Any, **kwargs: Any) -> pd.DataFrame:
        on = kwargs.get("on", args[1] if len(args) > 1 else None)
        if on == "trace_id" or (isinstance(on, list) and "trace_id" in on):
            raise AssertionError("a pandas merge on trace ids")
        return merge(self, right, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "merge", refused)
    rewards = pd.DataFrame(
        {"trace_id": ["b", "a", "c"], "reward_model": "rm", "score": [2.0, 1.0, 3.0]}
    )
    transfer = pd.DataFrame(
        [("a", "s1", "D", 0.2, 3), ("a", "s2", "D", 0.4, 5), ("b", "s1", "E", 0.9, 2)],
        columns=["trace_id", "student", "dataset", "fotu", "hazard_bin"],
    ).assign(teacher="T", regression_rate=0.0)
    grades = pd.DataFrame({"trace_id": ["a", "b", "c"], "correct": [True, False, True]})
    points = trace_level_rewards(rewards, transfer, grades)
    # c has no transfer row; a's FOTU is (0.2 + 0.4) / 2; sorted by trace id
    assert points[["trace_id", "score", "correct"]].values.tolist() == [
        ["a", 1.0, True], ["b", 2.0, False],
    ]  # fmt: skip
    assert points["fotu"].tolist() == pytest.approx([0.3, 0.9])
    traces = pd.DataFrame({"trace_id": ["a", "b", "c"], "teacher": "T", "dataset": ["D", "E", "D"]})
    table = teacher_level_rewards(rewards, transfer, grades, traces=traces, support="all")
    # T over D (a 1.0, c 3.0 -> 2.0) and E (b 2.0): (2.0 + 2.0) / 2 = 2.0, three rewards
    assert table["score"].tolist() == pytest.approx([2.0])
    assert table["n_traces"].tolist() == [3]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(IDS, st.integers(-3, 12)), max_size=12),
    st.sampled_from(["str", "object", "category"]),
)
def test_text_codes_give_each_row_its_text_among_sorted_distinct_labels(
    values: list[Any], dtype: str
) -> None:
    if dtype != "object":
        values = [None if v is None else str(v) for v in values]
    column = pd.Series(values, dtype=dtype)
    codes, labels = text_codes(column)
    expected = column.astype(str).to_numpy()
    got = labels[codes]
    # a null stays null, as astype(str) leaves it
    assert [None if pd.isna(v) else v for v in got] == [None if pd.isna(v) else v for v in expected]
    named = [label for label in labels if not pd.isna(label)]
    assert named == sorted(set(named))  # sorted and distinct: codes order as the text does
    assert len(labels) == len(set(map(str, labels)))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(IDS, IDS, st.sampled_from(["s", "S", "s10", "s9"])), max_size=15),
    st.sampled_from(["str", "object", "category"]),
)
def test_text_groups_are_a_group_by_of_the_texts(
    rows: list[tuple[str | None, str | None, str]], dtype: str
) -> None:
    frame = pd.DataFrame(rows, columns=["a", "b", "c"], dtype=dtype)
    texts = pd.DataFrame({name: frame[name].astype(str) for name in frame.columns})
    expected = texts.groupby(["a", "b", "c"], sort=True).indices
    got = text_groups([frame["a"], frame["b"], frame["c"]])
    assert list(got) == [tuple(key) for key in expected]
    for key, positions in expected.items():
        assert got[tuple(key)].tolist() == positions.tolist()
