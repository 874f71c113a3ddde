"""``grade --explain`` / ``grade --labels``: the loop a person uses to check the grader on their
own store (issue 23, item 7), run from the command line as docs/reliability.md documents it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from legival_core.calibration.grade_review import label_agreement, spreadsheet_safe
from precompute import cli

ROWS = [
    # (problem_id, prompt, gold, answer) — the question types differ on purpose
    ("p1", "Are there integer solutions to x^2 = 3y^2 + 2?", "No",
     "There are no integer solutions to the equation."),
    ("p2", "How many strings of length 6 have no two consecutive 1s?", "21",
     "So there are 21 or 34 strings."),
    ("p3", "Find the minimum of m + n.", "11", "The minimum is 11, achieved when m = 1."),
    ("p4", "What is 2 + 2?", "4", "=HYPERLINK(\"x\") The answer is 5."),
]  # fmt: skip


@pytest.fixture
def store(tmp_path: Path) -> Path:
    source = tmp_path / "mine.jsonl"
    with source.open("w", encoding="utf-8") as out:
        for problem_id, prompt, gold, answer in ROWS:
            record = {"problem_id": problem_id, "prompt": prompt, "gold": gold,
                      "reasoning": "We work it out.", "answer": answer}  # fmt: skip
            out.write(json.dumps(record) + "\n")
    path = tmp_path / "store"
    assert cli.main(["ingest", str(source), "--store", str(path), "--teacher", "me",
                     "--task", "champ"]) == 0  # fmt: skip
    return path


def test_explain_then_labels_round_trip(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["grade", "--store", str(store), "--explain", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    review = pd.read_csv(store / "grade_review.csv", dtype=str, keep_default_na=False)
    assert len(review) == 4
    review["short_id"] = review["problem_id"].str.rsplit("/", n=1).str[-1]  # "mine/p1" -> "p1"
    by_problem = review.set_index("short_id")
    # the question type, the answer taken and every candidate with its reason
    assert by_problem.loc["p1", "question_type"] == "yes_no"
    assert by_problem.loc["p1", "answer_kind"] == "polarity"
    assert by_problem.loc["p1", "graded"] == "correct"
    assert by_problem.loc["p2", "graded"] == "incorrect"  # "21 or 34" is a list, gold 21
    candidates = json.loads(by_problem.loc["p2", "candidates"])
    assert any(c["kind"] == "list" and "several values" in c["why"] for c in candidates)
    assert by_problem.loc["p3", "answer"] == "11"
    # the model's text starting with "=" is not a formula in a spreadsheet
    assert by_problem.loc["p4", "context"].startswith("'=")
    assert "[yes_no] correct" in printed and "[count] incorrect" in printed
    # A person labels the file: agrees on p1, p2, p4, disagrees on p3 (says no answer).
    labels = {"p1": "correct", "p2": "incorrect", "p3": "no_answer", "p4": "incorrect"}
    review["label"] = [labels[p] for p in review["short_id"]]
    labelled = store.parent / "labelled.csv"
    review.to_csv(labelled, index=False)
    assert cli.main(["grade", "--store", str(store), "--labels", str(labelled),
                     "--no-progress"]) == 0  # fmt: skip
    report = capsys.readouterr().out
    # 3 of the 4 labelled traces agree: 3 / 4 = 75.0%
    assert "agreement: 75.0% of 4 labelled traces" in report
    assert "disagreements: 1" in report
    p3 = by_problem.loc["p3", "trace_id"]
    assert f"{p3}: label no_answer, graded correct" in report


def test_a_bad_labels_file_is_one_line_naming_the_row(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("trace_id,label\nt-1,correct\nt-2,maybe\n", encoding="utf-8")
    code = cli.main(["grade", "--store", str(store), "--labels", str(bad), "--no-progress"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_UNUSABLE
    assert "row 3: label 'maybe' is not one of correct, incorrect, no_answer" in err
    assert "Traceback" not in err


def test_label_agreement_by_hand() -> None:
    labels = pd.DataFrame(
        {
            "trace_id": ["a", "b", "c", "d", "e"],
            "label": ["correct", "incorrect", "no_answer", "correct", ""],
        }
    )
    grades = pd.DataFrame({"trace_id": ["a", "b", "c", "d", "e"],
                           "correct": [True, True, False, False, True],
                           "extracted": ["1", "2", None, "4", "5"],
                           "answer_kind": ["boxed"] * 5})  # fmt: skip
    result = label_agreement(labels, grades)
    # e has no label; a (right/right) and c (no answer/wrong) agree; b and d do not: 2 / 4
    assert result.compared == 4 and result.agreement == 0.5
    assert sorted(result.disagreements["trace_id"]) == ["b", "d"]
    assert result.confusion.loc["correct", "graded wrong"] == 1
    assert spreadsheet_safe("+1") == "'+1" and spreadsheet_safe("1") == "1"


def test_explain_never_writes_through_a_link_in_the_store(store: Path, tmp_path: Path) -> None:
    """A received store may hold ``grade_review.csv`` as a symbolic link to any file of the
    user's; ``--explain`` wrote its review through the link (a write outside the store). The
    review now replaces the link with a file of its own; the link's target is untouched."""
    outside = tmp_path / "notes.txt"
    outside.write_text("mine\n", encoding="utf-8")
    (store / "grade_review.csv").symlink_to(outside)
    assert cli.main(["grade", "--store", str(store), "--explain", "--no-progress"]) == 0
    assert outside.read_text(encoding="utf-8") == "mine\n"
    review = store / "grade_review.csv"
    assert not review.is_symlink()
    assert len(pd.read_csv(review, dtype=str, keep_default_na=False)) == 4
