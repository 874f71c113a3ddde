"""The decomposition's instances and reference teachers built a bucket at a time
(precompute.decomposition_partials), checked by hand and against the whole-table build."""

from __future__ import annotations

import pandas as pd

from legival_core.metrics.decomposition import decomposition_instances, problem_workload
from legival_core.published.references import reference_teachers
from precompute.decomposition_partials import DecompositionPartial


def _traces() -> pd.DataFrame:
    """Problem p (bucket 0) and q (bucket 1); "human" writes a reference on p but an ordinary
    trace on q, "ref" writes references only."""
    return pd.DataFrame(
        {
            "trace_id": ["a", "b", "c", "d", "e"],
            "problem_id": ["p", "p", "q", "q", "p"],
            "dataset": "D",
            "teacher": ["m", "human", "m", "human", "ref"],
            "sample": [0, 0, 1, 0, 0],
            "tokens": [10, None, 30, 40, 50],
            "truncated": [False, False, True, False, False],
            "source": ["run", "champ:reference", "run", "ingest:x.jsonl", "champ:reference"],
        }
    )


def _grades() -> pd.DataFrame:
    return pd.DataFrame(
        {"trace_id": ["a", "b", "c", "d", "e"], "correct": [True, False, True, None, True]}
    )


def _efficiency() -> pd.DataFrame:
    return pd.DataFrame({"trace_id": list("abcde"), "compression": [2.0, 3.0, 4.0, 5.0, 6.0]})


def _problems() -> pd.DataFrame:
    return pd.DataFrame({"problem_id": ["p", "q"], "workload": [5.0, None]})


def _chunk(rows: list[str]) -> DecompositionPartial:
    traces = _traces()
    traces = traces[traces["trace_id"].isin(rows)]
    grades = _grades()
    return DecompositionPartial.of_chunk(
        traces,
        grades[grades["trace_id"].isin(rows)],
        pd.Series({"b": 20.0}),  # b has no stored T: counted in the default encoding
        _efficiency()[_efficiency()["trace_id"].isin(rows)],
        problem_workload(_problems()),
    )


def test_two_buckets_by_hand() -> None:
    merged = _chunk(["a", "b", "e"]).merge(_chunk(["c", "d"]))
    instances, references = merged.joined()
    # d is ungraded: not an instance; b's T is its counted 20; c is sample 1 of q
    assert instances["instance_id"].tolist() == ["p", "p", "p", "q#1"]
    assert instances["model"].tolist() == ["m", "human", "ref", "m"]
    assert instances["tokens"].tolist() == [10.0, 20.0, 50.0, 30.0]
    assert instances["correct"].tolist() == [True, False, True, True]
    assert instances["truncated"].tolist() == [False, False, False, True]
    assert instances["sigma"].tolist() == [2.0, 3.0, 6.0, 4.0]
    assert instances["workload"].tolist()[:3] == [5.0, 5.0, 5.0]
    assert pd.isna(instances["workload"].iloc[3])
    # "human" has an ordinary trace in the other bucket: not a reference; "ref" is one
    assert references == ["ref"]
    assert merged.instances == []  # moved out, held once


def test_any_bucketing_gives_the_whole_table_build() -> None:
    whole = decomposition_instances(
        _traces(),
        _grades(),
        _problems(),
        sigma=pd.Series(_efficiency()["compression"].to_numpy(), index=list("abcde")),
        counted=pd.Series({"b": 20.0}),
    )
    for buckets in (["abcde"], ["a", "b", "c", "d", "e"], ["ce", "abd"]):
        merged = DecompositionPartial()
        for rows in buckets:
            merged = merged.merge(_chunk(list(rows)))
        instances, references = merged.joined()
        keys = ["model", "instance_id"]
        pd.testing.assert_frame_equal(
            instances.sort_values(keys, ignore_index=True),
            whole.sort_values(keys, ignore_index=True),
        )
        assert references == reference_teachers(_traces())


def test_a_bucket_without_source_or_grades() -> None:
    traces = _traces().drop(columns="source").iloc[:1]
    part = DecompositionPartial.of_chunk(
        traces, _grades().iloc[:1], pd.Series(dtype=float), _efficiency().iloc[:1]
    )
    instances, references = part.joined()
    assert references == [] and "workload" not in instances
    assert DecompositionPartial().joined()[0].empty
