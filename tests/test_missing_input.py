"""The metrics stage's input check, :func:`precompute.stages.metrics.missing_input`, against the
rules its docstring states, read one trace at a time (any traces, any rows present)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from precompute.stages.metrics import missing_input

IDS = [f"t{i}" for i in range(6)]
ENCODINGS = ("cl100k_base", "o200k_base")


def _by_the_rules(
    traces: pd.DataFrame,
    grades: pd.DataFrame,
    counts: pd.DataFrame,
    similarity: pd.DataFrame,
    judgments: pd.DataFrame,
    with_gold: set[str],
    unchecked: list[str],
) -> tuple[str, str, int] | None:
    """The first rule a trace breaks, in pipeline order, and how many traces break it."""
    rows = traces.to_dict(orient="records")
    graded = list(grades["trace_id"])
    ungraded = [r for r in rows if r["trace_id"] not in graded and r["problem_id"] in with_gold]
    if ungraded:
        return ("grade", "grades", len(ungraded))
    pairs = list(zip(counts["trace_id"], counts["encoding"], strict=True))
    uncounted = [r for r in rows if any((r["trace_id"], e) not in pairs for e in ENCODINGS)]
    if uncounted:
        return ("segment", "trace_counts", len(uncounted))
    steps = zip(counts["trace_id"], counts["steps"], strict=True)
    with_steps = sorted({t for t, s in steps if s > 0})
    unembedded = [t for t in with_steps if t not in list(similarity["trace_id"])]
    if unembedded:
        return ("embed", "similarity", len(unembedded))
    if unchecked:
        return ("leaks", "answer_leaks", len(unchecked))
    labels = zip(judgments["trace_id"], judgments["labeler"], strict=True)
    mine = [t for t, lab in labels if lab == "rules"]
    unlabelled = [t for t in with_steps if t not in mine]
    if unlabelled:
        return ("judge", "judgments", len(unlabelled))
    return None


#: mostly present, so that every rule (the last ones too) is reached
_PRESENT = st.sampled_from([True, True, True, True, False])
_TRACE_STATE = st.fixed_dictionaries(
    {
        "graded": _PRESENT,
        "cl100k_base": _PRESENT,
        "o200k_base": _PRESENT,
        "steps": st.integers(0, 2),
        "embedded": _PRESENT,
        "rules": _PRESENT,
        "llm": st.booleans(),
    }
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    states=st.dictionaries(st.sampled_from(IDS), _TRACE_STATE, min_size=1),
    gold_of=st.sets(st.sampled_from(["p0", "p1", "p2"])),
    unchecked=st.lists(st.sampled_from(IDS), unique=True, max_size=1),
)
def test_missing_input_names_what_the_rules_name(
    states: dict[str, dict[str, bool | int]], gold_of: set[str], unchecked: list[str]
) -> None:
    traced = sorted(states)
    graded = {t for t in traced if states[t]["graded"]}
    counted = {(t, e, int(states[t]["steps"])) for t in traced for e in ENCODINGS if states[t][e]}
    embedded = {t for t in traced if states[t]["embedded"]}
    judged = {(t, lab) for t in traced for lab in ("rules", "llm") if states[t][lab]}
    traces = pd.DataFrame(
        {"trace_id": traced, "problem_id": [f"p{int(t[1:]) % 3}" for t in traced]}
    )
    grades = pd.DataFrame({"trace_id": sorted(graded)}, dtype=object)
    rows = sorted(counted)
    counts = pd.DataFrame(
        {
            "trace_id": [r[0] for r in rows],
            "encoding": [r[1] for r in rows],
            "steps": [r[2] for r in rows],
        }
    )
    similarity = pd.DataFrame({"trace_id": sorted(embedded)}, dtype=object)
    labels = sorted(judged)
    judgments = pd.DataFrame(
        {"trace_id": [j[0] for j in labels], "labeler": [j[1] for j in labels]}, dtype=object
    )
    problems = pd.DataFrame(
        {
            "problem_id": ["p0", "p1", "p2"],
            "gold": ["4", "5", "6"],
            # a problem recorded without a gold answer stays ungraded on purpose
            "meta": [None if p in gold_of else '{"gold_known": false}' for p in ("p0", "p1", "p2")],
        }
    )
    expected = _by_the_rules(
        traces, grades, counts, similarity, judgments, _known(problems), unchecked
    )
    found = missing_input(
        traces,
        grades,
        counts,
        similarity,
        judgments,
        problems,
        labeler="rules",
        encodings=ENCODINGS,
        unchecked_leaks=unchecked,
    )
    assert found == expected
    # given as functions that read them, the inputs give the same answer, each read once and
    # only up to the check that finds one lacking
    read: list[str] = []
    frames = {"grades": grades, "counts": counts, "similarity": similarity, "judgments": judgments}

    def reader(name: str) -> Callable[[], pd.DataFrame]:
        return lambda: (read.append(name), frames[name])[1]

    def leaks() -> list[str]:
        read.append("leaks")
        return unchecked

    lazily = missing_input(
        traces,
        *(reader(name) for name in frames),
        problems,
        labeler="rules",
        encodings=ENCODINGS,
        unchecked_leaks=leaks,
    )
    assert lazily == expected
    order = ["grades", "counts", "similarity", "leaks", "judgments"]
    reached = {None: 5, "grade": 1, "segment": 2, "embed": 3, "leaks": 4, "judge": 5}
    assert read == order[: reached[None if expected is None else expected[0]]]


def test_each_input_is_read_when_its_check_comes_and_none_after_one_lacks() -> None:
    traces = pd.DataFrame({"trace_id": ["a", "b"], "problem_id": ["p", "p"]})
    problems = pd.DataFrame({"problem_id": ["p"], "gold": ["4"], "meta": [None]})
    every = pd.DataFrame({"trace_id": ["a", "b"]})
    counts = pd.DataFrame(
        {"trace_id": ["a", "b", "a", "b"], "encoding": [ENCODINGS[0]] * 2 + [ENCODINGS[1]] * 2}
    )
    counts["steps"] = 1
    judged = every.assign(labeler="rules")
    read: list[str] = []

    def reader(name: str, frame: pd.DataFrame) -> Callable[[], pd.DataFrame]:
        return lambda: (read.append(name), frame)[1]

    def check(grades: pd.DataFrame, similarity: pd.DataFrame) -> tuple[str, str, int] | None:
        read.clear()
        return missing_input(
            traces,
            reader("grades", grades),
            reader("counts", counts),
            reader("similarity", similarity),
            reader("judgments", judged),
            problems,
            labeler="rules",
            encodings=ENCODINGS,
            unchecked_leaks=lambda: (read.append("leaks"), [])[1],
        )

    # b is not graded: nothing after the grades is read
    assert check(every.iloc[:1], every) == ("grade", "grades", 1)
    assert read == ["grades"]
    # b has steps but no similarity: the leaks and the judgments are not read
    assert check(every, every.iloc[:1]) == ("embed", "similarity", 1)
    assert read == ["grades", "counts", "similarity"]
    # nothing lacking: every input read once, in the pipeline's order
    assert check(every, every) is None
    assert read == ["grades", "counts", "similarity", "leaks", "judgments"]


def _known(problems: pd.DataFrame) -> set[str]:
    from precompute.stages.grade import gold_is_known

    return {
        str(p)
        for p, meta in zip(problems["problem_id"], problems["meta"], strict=True)
        if gold_is_known({"meta": meta})
    }
