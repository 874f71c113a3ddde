"""The CHAMP grader against answers labelled by reading from settings it was not built on
(issue 23). How the labels were made, and the split by whole settings into a development and a
test half: tests/fixtures/champ_settings_labels.md. The grader was tuned on the development half;
the test half was scored once, with the code final, and has been read since while the grader was
fixed, so both are development data now. The held-out half (four further settings, labelled by
reading before it was scored) was scored twice untouched (112 / 120, then 115 / 120 with the
code final), then read, and four of its five disagreements fixed as classes: it is development
data too. So are the three samples labelled after it, each scored once and then read: a fresh
half (four more settings, 115 / 120), two samples on problems no earlier file held (110 / 120
and 42 / 46) and two samples of replies no reader had seen (198 / 208 and 201 / 208). Those first
scores are the measurements (docs/reliability.md); none met 97%. The ninth sample (replies no
reader had seen, 30 per setting in two parts) was scored once with the code after those fixes:
470 / 480 (97.9%), every setting at least 28 / 30, no false positive from a restated condition:
the issue's goals, met on untouched data. One class was fixed from it after that (471 / 480).

Goals (issue 23): at least 97% agreement on the test half, no setting below 93%, and no wrong
answer graded right because a candidate restated the problem's own condition. On the tuned
samples the goals only guard against regressions.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from legival_core.tasks import get_task
from tests.champ_fixtures import ingest_labelled_replies

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HALVES = {
    "dev": "champ_settings_labels_dev.csv",
    "test": "champ_settings_labels_test.csv",
    "heldout": "champ_settings_labels_heldout.csv",
    "fresh": "champ_settings_labels_fresh.csv",
    "unseen": "champ_settings_labels_unseen.csv",
    "last": "champ_settings_labels_last.csv",
    "final": "champ_settings_labels_final.csv",
    "confirm": "champ_settings_labels_confirm.csv",
    "recheck": "champ_settings_labels_recheck.csv",
    "recheck_b": "champ_settings_labels_recheck_b.csv",
}
TEST_GOAL = 0.97
SETTING_GOAL = 0.93


def _labels(half: str) -> pd.DataFrame:
    return pd.read_csv(FIXTURES / HALVES[half], dtype=str, keep_default_na=False)


def _recorded(labels: pd.DataFrame) -> dict[tuple[str, str, str], dict]:
    """(setting, problem_id, model) -> the recorded trace (answer and reasoning)."""
    from precompute.champ import champ_traces

    found = {}
    for setting in sorted(set(labels["setting"])):
        traces = champ_traces(setting, include_human=False, count_tokens=False)
        for trace in traces.to_dict(orient="records"):
            model = trace["teacher"].split("@")[0]
            found[(setting, trace["problem_id"], model)] = trace
    return found


def _graded(half: str) -> pd.DataFrame:
    """Each labelled answer graded as the grade stage does: answer part, then the reasoning,
    with the problem (so the question type comes from its prompt)."""
    from precompute.champ import champ_problems

    labels = _labels(half)
    problems = champ_problems().set_index("problem_id")
    recorded = _recorded(labels)
    champ = get_task("champ")
    graded = []
    for row in labels.itertuples():
        trace = recorded[(row.setting, row.problem_id, row.teacher)]
        problem = {"problem_id": row.problem_id, **problems.loc[row.problem_id].to_dict()}
        texts = {"answer_text": trace["answer_text"], "reasoning": trace["reasoning"]}
        result = champ.grade_text(texts, row.gold, problem=problem)
        graded.append((result.grade.correct, result.kind, result.answer))
    labels["graded"] = [g[0] for g in graded]
    labels["kind"] = [g[1] for g in graded]
    labels["answer"] = [g[2] for g in graded]
    labels["agree"] = labels["graded"] == (labels["label"] == "correct")
    return labels


def _report(labels: pd.DataFrame) -> str:
    table = labels.groupby("setting")["agree"].agg(["sum", "count", "mean"])
    wrong = labels.loc[~labels["agree"], ["setting", "problem_id", "teacher", "label", "kind",
                                          "answer"]]  # fmt: skip
    return f"{table.to_string()}\n{wrong.to_string()}"


#: The first test half measured 114 / 120 once (1/3 Soln 27/30, 5-Shot 29/30, Problem C w/ H
#: 29/30, Problem C w/o H 29/30; one wrong answer graded right, a reply labelled no_answer).
#: Its six disagreements were then fixed as classes (tests/test_answer_frames.py, "the six
#: disagreements"), which makes it development data: 120 / 120 on each of the first two
#: halves now, tuned, so those floors only guard against regressions.
MEASURED_FLOOR = {
    "dev": (120, 30, 0),
    "test": (120, 30, 0),
    # Scored untouched twice: with the code at 2eb6da8 (112 / 120) and with the code final
    # (115 / 120, two wrong answers graded right; the same at 0b60535). Then read, and four
    # disagreements fixed as classes (tests/test_answer_frames.py, "the held-out half's
    # disagreements"): 119 / 120 (Example C w/ H, Example C w/o H and Name C w/o H 30/30,
    # Misleading C w/o H 29/30), no wrong answer graded right. Tuned now: the floor only
    # guards against regressions.
    "heldout": (120, 30, 0),
    # The fresh half (Direct C w/ H, Direct C w/o H, Root C w/ H, Root C w/o H), labelled by
    # reading before any grader ran on it, scored once: 115 / 120 (28, 30, 28, 29 of 30), one
    # wrong answer graded right. Then read, and four classes fixed: 119 / 120. Tuned now.
    "fresh": (119, 29, 0),
    # Twelve settings, 10 answers each, on the 35 problems no earlier label file held; scored
    # once: 110 / 120 (91.7%), one reply labelled no_answer graded right. Then read, and four
    # classes fixed: 119 / 120, the one left a judgement call of the reader. Tuned now.
    "unseen": (119, 9, 0),
    # The 46 answers on the last 20 problems, scored once: 42 / 46 (91.3%), one wrong answer
    # graded right ("exactly one root …, which is z = 0" for gold "0 roots"). Then read, and
    # four classes fixed: 45 / 46, the one left a judgement call of the reader. Tuned now.
    "last": (45, 1, 0),
    # Answers no reader had seen (16 settings, 13 each), scored once: 198 / 208 (95.2%), then
    # read, and seven classes fixed: 205 / 208. Tuned now.
    "final": (205, 12, 0),
    # The same, drawn after it and scored once with the code then final: 201 / 208 (96.6%);
    # then read, and six classes fixed: 207 / 208. Tuned now.
    "confirm": (207, 12, 0),
    # The ninth sample, in two parts scored once each by the same code (fdde17e), never tuned
    # on: 203 / 208 and 267 / 272, together 470 / 480 (97.9%), every setting at least 28 / 30
    # (docs/reliability.md). These are the measurement; one class was fixed after it was
    # recorded (a gold statement matched across a reason clause): 268 / 272 and one false
    # positive in the second part since.
    "recheck": (203, 12, 1),
    "recheck_b": (268, 15, 1),
}  # agree, worst setting, false positives


@pytest.fixture(scope="module", params=list(HALVES))
def graded_half(request: pytest.FixtureRequest) -> tuple[str, pd.DataFrame]:
    return request.param, _graded(request.param)


def _restated_givens_false_positives(labels: pd.DataFrame) -> pd.DataFrame:
    """Wrong answers graded right whose accepted candidate holds a relation of the prompt."""
    from legival_core.grading.frames import AnswerFrame, restates_given
    from precompute.champ import champ_problems

    prompts = champ_problems().set_index("problem_id")["prompt"]
    wrong = labels[labels["graded"] & (labels["label"] != "correct")]
    restating = [
        restates_given(str(r.answer), AnswerFrame(prompt=prompts[r.problem_id]))
        for r in wrong.itertuples()
    ]
    return wrong[restating] if len(wrong) else wrong


@pytest.mark.slow
def test_grader_holds_its_measured_agreement_on_unseen_settings(
    graded_half: tuple[str, pd.DataFrame],
) -> None:
    half, labels = graded_half
    sizes = {"unseen": 120, "last": 46, "final": 208, "confirm": 208, "recheck": 208}
    assert len(labels) == {**sizes, "recheck_b": 272}.get(half, 120)
    settings = {"unseen": 12, "last": 12, "final": 16, "confirm": 16, "recheck": 16}
    assert labels["setting"].nunique() == {**settings, "recheck_b": 16}.get(half, 4)
    # Held-out half: 119 agree of 120 = 99.2%; worst setting 29 of 30 = 96.7%.
    per_setting = labels.groupby("setting")["agree"].sum()
    false_positives = labels[labels["graded"] & (labels["label"] != "correct")]
    agree, worst, positives = MEASURED_FLOOR[half]
    assert labels["agree"].sum() >= agree, _report(labels)
    assert per_setting.min() >= worst, _report(labels)
    assert len(false_positives) <= positives, _report(labels)
    # Issue 23: zero false positives from restated givens, on both halves.
    assert _restated_givens_false_positives(labels).empty, _report(labels)


#: The halves drawn 30 to a setting, where "no setting below 93%" can be checked.
WHOLE_SETTING_HALVES = ("dev", "test", "heldout", "fresh")
#: The two parts of the ninth sample: measured before any fix from them (one class since), so
#: their remaining wrong answers graded right stay.
UNTOUCHED_HALVES = ("recheck", "recheck_b")


@pytest.mark.slow
def test_the_halves_meet_the_issue_goals(graded_half: tuple[str, pd.DataFrame]) -> None:
    """Every half has been scored once and then tuned on, so the goals only guard against
    regressions here; the measurements are the first scores, in docs/reliability.md (the
    last two samples, on problems no other file held: 110 / 120 and 42 / 46)."""
    half, labels = graded_half
    per_setting = labels.groupby("setting")["agree"].mean()
    false_positives = labels[labels["graded"] & (labels["label"] != "correct")]
    if half not in UNTOUCHED_HALVES:
        assert false_positives.empty, _report(labels)
    assert labels["agree"].mean() >= TEST_GOAL, _report(labels)
    if half in WHOLE_SETTING_HALVES:
        assert (per_setting >= SETTING_GOAL).all(), _report(labels)


@pytest.mark.slow
def test_the_untouched_ninth_sample_meets_the_issue_goals() -> None:
    """The ninth sample's two parts, both scored once by the same code, hold 30 replies per
    setting: 470 / 480 (97.9%) overall at that score, each setting at least 28 / 30 (93.3%),
    three wrong answers graded right, none restating a condition of the problem (one class
    fixed since: 471 / 480, two)."""
    labels = pd.concat([_graded(half) for half in UNTOUCHED_HALVES], ignore_index=True)
    per_setting = labels.groupby("setting")["agree"].agg(["sum", "count"])
    assert (per_setting["count"] == 30).all() and len(per_setting) == 16
    # 470 / 480 = 0.979 >= 0.97; 28 / 30 = 0.933 >= 0.93
    assert labels["agree"].sum() >= 470, _report(labels)
    assert labels["agree"].mean() >= TEST_GOAL
    assert (per_setting["sum"] / per_setting["count"] >= SETTING_GOAL).all(), _report(labels)
    assert _restated_givens_false_positives(labels).empty, _report(labels)
    assert (labels["graded"] & (labels["label"] != "correct")).sum() <= 3, _report(labels)


@pytest.mark.slow
def test_a_bring_your_own_file_of_a_new_setting_shows_the_hand_labelled_accuracy(
    tmp_path: Path,
) -> None:
    """The user path of issue 23: a non-0-Shot setting's recorded answers as a JSONL file,
    ``ingest --task champ`` then ``run``; the accuracy shown is within 3 points of the one
    read by hand. "Problem C w/ H" is the setting the issue measured at 77% agreement."""
    from legival_core.store.store import Store
    from precompute import cli

    labels = _labels("test")
    labels = labels[labels["setting"] == "Problem C w/ H"]
    recorded = _recorded(labels)
    store = tmp_path / "store"
    source = tmp_path / "problem-c-w-h.jsonl"
    code = ingest_labelled_replies(
        labels, lambda row: recorded[(row.setting, row.problem_id, row.teacher)], source, store
    )
    assert code == 0
    assert cli.main(["run", "--store", str(store), "--stages", "grade", "--no-progress"]) == 0
    grades = Store.open(store).read("grades")
    assert len(grades) == len(labels) == 30
    shown = int(grades["correct"].astype(bool).sum())
    by_reading = int((labels["label"] == "correct").sum())
    # Measured: 10 of 30 shown (33.3%) against 10 of 30 by reading (33.3%), 0 points apart
    # (11 shown before the off-topic polarity rule: the one false positive of the test half,
    # a reply labelled no_answer). 3 points of 30 is 0.9 answers, so the two counts must be
    # equal. Before issue 23 the issue measured 47% shown against 63% by reading on its own 30
    # answers of this setting.
    assert shown == by_reading == 10, (shown, by_reading)
