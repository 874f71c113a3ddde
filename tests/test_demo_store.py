"""The bundled demo store: real CHAMP traces, a real small student, and every page opens on it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from legival_core.store.store import Store
from legival_core.views.app_config import BUNDLED_STORES

DEMO = BUNDLED_STORES["demo"]
APP = str(Path(__file__).resolve().parents[1] / "app.py")
TEACHERS = {"gpt-3.5", "gpt-4", "gpt-4-turbo", "palm-2-medium", "human"}
#: The two students of the default build (issue 28 item 4).
STUDENTS = {"smollm2-135m", "gemma3-270m"}
#: CHAMP's five categories, one dataset each (10 problems per category).
CATEGORIES = {"champ-combinatorics", "champ-inequality", "champ-number-theory",
              "champ-polynomial", "champ-sequence"}  # fmt: skip


@pytest.fixture(scope="module")
def demo() -> Store:
    return Store.open(DEMO)


def test_demo_store_is_complete_and_sound(demo: Store) -> None:
    assert demo.verify() == []
    problems = demo.read("problems")
    assert len(problems) >= 50
    traces = demo.read("traces", columns=["trace_id", "teacher"])
    assert set(traces["teacher"]) == TEACHERS
    for table in (
        "grades",
        "steps",
        "similarity",
        "rollouts",
        "judgments",
        "error_labels",
        "trace_efficiency",
        "trace_transfer",
        "teacher_metrics",
        "decomposition",
        "rewards",
        "monitor_verdicts",
        "sabotaged",
        "transfer_curves",
    ):
        assert demo.has(table), table
    rollouts = demo.read("rollouts", columns=["student", "trace_id", "k", "m"])
    assert set(rollouts["student"]) == STUDENTS
    # every correct trace has its whole k grid, 0, 3, 6, ..., and m, for each student
    grades = demo.read("grades", columns=["trace_id", "correct"])
    correct = set(grades.loc[grades["correct"].astype(bool), "trace_id"])
    for student, mine in rollouts.groupby("student"):
        assert set(mine["trace_id"]) == correct, student
        for trace_id, points in mine.groupby("trace_id"):
            m = int(points["m"].iloc[0])
            assert set(points["k"]) == {0, *range(3, m, 3), m}, (student, trace_id)


def test_demo_teachers_differ_and_include_the_human_reference(demo: Store) -> None:
    problems = demo.read("problems", columns=["problem_id", "dataset"])
    assert problems.groupby("dataset").size().to_dict() == dict.fromkeys(CATEGORIES, 10)
    board = demo.read("teacher_metrics")
    # One row per teacher and category: the cross-dataset views have data.
    assert set(zip(board["teacher"], board["dataset"], strict=True)) == {
        (t, d) for t in TEACHERS for d in CATEGORIES
    }
    assert (board.loc[board["teacher"] == "human", "accuracy"] == 1.0).all()
    means = board.groupby("teacher")[["fotu", "redundancy", "tokens"]].mean()
    for metric in means.columns:
        assert means[metric].nunique() == len(TEACHERS), metric
    native = demo.read("decomposition", filters={"layer": "native"})
    assert native.groupby("model")["e0"].mean().nunique() == len(TEACHERS)


@pytest.mark.slow
def test_every_page_opens_on_the_demo_store(monkeypatch: pytest.MonkeyPatch) -> None:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    monkeypatch.delenv("LEGIVAL_STORE", raising=False)
    monkeypatch.delenv("LEGIVAL_READONLY", raising=False)
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    # the home page is the leaderboard of the demo store, with all five teachers
    board = at.dataframe[0].value
    assert set(board["teacher"]) == TEACHERS
    for page in (
        "transfer",
        "pareto",
        "correlations",
        "redundancy",
        "decomposition",
        "inspector",
        "rewards",
        "monitoring",
        "published",
        "about",
    ):
        at.switch_page(f"pages/{page}.py")
        at.run()
        assert not at.exception, (page, [e.value for e in at.exception])


def test_shipped_transfer_and_redundancy_tables_match_the_stores_own_rows(demo: Store) -> None:
    """Recomputed with plain loops from the store's own rollouts and similarities (docs/metrics/):
    per-trace FOTU and baseline, teacher FOTU (mean over traces, then students) and per-trace
    redundancy at the threshold the manifest recorded."""
    from tests.plain_metrics import plain_fotu, plain_redundancy

    rollouts = demo.read("rollouts", columns=["trace_id", "student", "k", "m", "correct"])
    stored = demo.read("trace_transfer").set_index(["trace_id", "student"])
    assert len(stored) == rollouts.groupby(["trace_id", "student"]).ngroups
    for (trace_id, student), group in rollouts.groupby(["trace_id", "student"]):
        points = dict(zip(group["k"].astype(int), group["correct"].astype(float), strict=True))
        row = stored.loc[(trace_id, student)]
        assert row["baseline"] == points[0]
        assert row["fotu"] == pytest.approx(plain_fotu(points, int(group["m"].iloc[0])))
    # Teacher FOTU per dataset: the mean over its traces (one student in the demo).
    board = demo.read("teacher_metrics").set_index(["teacher", "dataset"])
    per_teacher = stored.groupby(["teacher", "dataset"])["fotu"].mean()
    assert len(per_teacher) >= 15  # most (teacher, category) cells have a correct trace
    for key, fotu in per_teacher.items():
        assert board.loc[key, "fotu"] == pytest.approx(fotu), key

    metrics = next(r for r in demo.manifest["provenance"] if r["stage"] == "metrics")
    threshold = float(metrics["threshold"])
    sims = demo.read("similarity", columns=["trace_id", "step", "max_similarity"])
    efficiency = demo.read("trace_efficiency").set_index("trace_id")
    for trace_id, group in sims.groupby("trace_id"):
        later = group.loc[group["step"] > 0, "max_similarity"].astype(float)
        expected = plain_redundancy(later, len(group), threshold)
        assert efficiency.loc[trace_id, "redundancy"] == pytest.approx(expected)


def test_shipped_compression_is_the_librarys_sigma(demo: Store) -> None:
    from legival_core.metrics.efficiency import compression_ratio

    texts = demo.read("traces", columns=["trace_id", "reasoning"]).set_index("trace_id")
    stored = demo.read("trace_efficiency", columns=["trace_id", "compression"])
    stale = [
        trace_id
        for trace_id, sigma in zip(stored["trace_id"], stored["compression"], strict=True)
        if sigma != compression_ratio(str(texts.loc[trace_id, "reasoning"] or ""))
    ]
    assert stale == []


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["paper", "release"])
def test_transfer_page_on_the_demo_shows_the_current_definitions(
    demo: Store, monkeypatch: pytest.MonkeyPatch, profile: str
) -> None:
    """The demo's stored ``transfer_curves`` predate the release profile's corrected rules
    (issue 14); the page must not show them: its per-teacher FOTU and SOTU are those of
    ``teacher_metrics`` on the store's rollouts under the chosen profile."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from legival_core.metrics.transfer import teacher_metrics

    monkeypatch.delenv("LEGIVAL_STORE", raising=False)
    monkeypatch.delenv("LEGIVAL_READONLY", raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["profile"] = profile
    at.run()
    at.switch_page("pages/transfer.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    summary = next(d.value for d in at.dataframe if "SOTU, traces pooled" in d.value.columns)
    summary = summary.set_index("teacher")
    # With every dataset selected the page pools the traces (it says so), unlike the
    # leaderboard's mean over datasets: one pseudo-dataset gives the pooled numbers.
    rollouts = demo.read("rollouts").assign(dataset="all")
    expected = teacher_metrics(rollouts, profile=profile, n_boot=0)
    expected = expected.groupby("teacher")[["fotu", "sotu"]].mean()
    for teacher, row in expected.iterrows():
        pooled = summary.loc[teacher]  # headed by their own name: "…, traces pooled"
        assert pooled["FOTU, traces pooled"] == pytest.approx(row["fotu"]), teacher
        sotu = pooled["SOTU, traces pooled"]
        if isinstance(sotu, str):  # a column with an undefined SOTU is shown as its text
            from legival_core.views.display import format_share

            assert sotu == format_share(row["sotu"]), teacher
        else:
            assert sotu == pytest.approx(row["sotu"], nan_ok=True), teacher
    # "Before the answer leaks": first solves at or after the leak, counted with plain loops.
    leaks = next(d.value for d in at.dataframe if "first solves" in d.value.columns)
    leaks = leaks.set_index("teacher")
    stored = demo.read("trace_transfer").set_index(["trace_id", "student"])
    counts: dict[str, list[int]] = {}
    for (trace_id, student), group in demo.read("rollouts").groupby(["trace_id", "student"]):
        solved = sorted(int(k) for k, c in zip(group["k"], group["correct"], strict=True) if c >= 1)
        teacher = stored.loc[(trace_id, student), "teacher"]
        leak = stored.loc[(trace_id, student), "leak_k"]
        tally = counts.setdefault(teacher, [0, 0])
        if solved:
            tally[0] += 1
            tally[1] += int(not pd.isna(leak) and solved[0] >= int(leak))
    for teacher, (first, after) in counts.items():
        assert leaks.loc[teacher, "first solves"] == first, teacher
        assert leaks.loc[teacher, "first solves at or after the leak"] == after, teacher


def test_the_correlations_page_shows_rank_stability_across_the_demos_students(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With two students the cross-student view has a table, not "One student only"."""
    from tests.app_runner import run_app_page

    at = run_app_page("correlations", monkeypatch, [DEMO])
    assert not at.exception
    assert "One student only: no cross-student stability." not in [i.value for i in at.info]
    assert "**Across students**" in [m.value for m in at.markdown]
    frames = [frame.value for frame in at.dataframe]
    across = [f for f in frames if "student" in f.columns]
    assert across and set(across[0]["student"]) == STUDENTS


def test_every_shipped_grade_and_rollout_carries_the_current_grader_stamp(demo: Store) -> None:
    """A freshly built demo reads as graded by this code's grader: no row without a stamp
    (the k = 0 baselines copied across a problem's teachers once lost theirs)."""
    from legival_core.grading.grader import GRADER_VERSION

    for table in ("grades", "rollouts"):
        stamps = demo.read(table, columns=["grader_version", "code_revision"])
        assert stamps["grader_version"].notna().all(), table
        assert set(stamps["grader_version"]) == {GRADER_VERSION}, table
        assert stamps["code_revision"].notna().all(), table
