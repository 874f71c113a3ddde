"""The sealed samples of issue 37, scored once by the rebuilt grader.

Two samples were labelled by reading without any grader run on them, committed, and scored
**once**, with the code at b9d46f6 (the rebuilt answer layer):

- ``champ_settings_labels_sealed.csv``: 306 recorded CHAMP replies, 17 from each of the 18
  settings (tests/fixtures/champ_settings_labels.md, "The sealed sample");
- ``sealed_boxed/``: 140 answers of two small models to word problems (``gsm8k``) and short
  maths questions (``math``), ingested as a user would (tests/fixtures/sealed_boxed/README.md).

The first scores are the measurements (docs/grading.md, the README). Since then both samples are
development data: the floors below only guard against regressions, and the next claim about
the grader needs a fresh sample.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from legival_core.store.store import Store
from tests.test_champ_settings_answers import HALVES, _graded

ROOT = Path(__file__).resolve().parents[1]
BOXED = ROOT / "tests" / "fixtures" / "sealed_boxed"

#: The first scores, taken once at b9d46f6 (agreements, wrong answers graded right): the
#: measurement. CHAMP 299 / 306 (97.7%), every setting at least 16 / 17, one wrong answer
#: graded right (an incomplete factorization equal to the gold as a polynomial); boxed 137 / 140
#: (97.9%), two wrong answers graded right (a cut-off loop of digits, the question given back
#: unevaluated) and one right answer graded wrong (a negation inside the subject).
FIRST_CHAMP = (299, 1)  # of 306
FIRST_BOXED = (137, 2)  # of 140
#: After the five classes read from their disagreements were fixed (tests/test_grading_policy.py):
#: development data now, so these floors only guard against regressions.
FLOOR_CHAMP = (301, 0)
FLOOR_BOXED = (140, 0)
GOAL = 0.97


def champ_sealed_scores() -> pd.DataFrame:
    """The sealed CHAMP sample graded as the grade stage does (answer part, then solution)."""
    HALVES.setdefault("sealed", "champ_settings_labels_sealed.csv")
    return _graded("sealed")


def boxed_grades(work: Path) -> pd.DataFrame:
    """The boxed sample ingested as a user would, one file per task, and its grades beside the
    labels: ``label``, ``correct`` (the store's grade), ``agree``."""
    rows = [json.loads(line) for line in (BOXED / "answers.jsonl").read_text().splitlines()]
    store = work / "store"
    for task in sorted({r["task"] for r in rows}):
        path = work / f"{task}.jsonl"
        path.write_text(
            "".join(json.dumps(r) + "\n" for r in rows if r["task"] == task), encoding="utf-8"
        )
        done = subprocess.run(
            [sys.executable, "-m", "precompute", "ingest", str(path), "--store", str(store),
             "--task", task, "--dataset", f"sealed-{task}"],
            cwd=ROOT, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    opened = Store.open(store)
    traces = opened.read("traces", columns=["trace_id", "problem_id", "teacher"])
    grades = opened.read("grades", columns=["trace_id", "correct", "extracted", "answer_kind"])
    graded = traces.merge(grades, on="trace_id")
    with (BOXED / "labels.csv").open(encoding="utf-8", newline="") as f:
        labels = pd.DataFrame(list(csv.DictReader(f)))
    labels["key"] = labels["problem_id"]
    graded["key"] = graded["problem_id"].str.split("/").str[-1]
    merged = labels.merge(
        graded, left_on=["key", "model"], right_on=["key", "teacher"], suffixes=("", "_store")
    )
    assert len(merged) == len(labels) == 140
    merged["agree"] = merged["correct"].astype(bool) == (merged["label"] == "correct")
    return merged


@pytest.mark.slow
def test_the_sealed_champ_sample_keeps_its_first_score() -> None:
    graded = champ_sealed_scores()
    agree = int(graded["agree"].sum())
    false_positives = int((graded["graded"] & (graded["label"] != "correct")).sum())
    assert agree >= FLOOR_CHAMP[0], graded[~graded["agree"]]
    assert false_positives <= FLOOR_CHAMP[1]
    assert agree / len(graded) >= GOAL
    assert graded.groupby("setting")["agree"].sum().min() >= 16


@pytest.mark.slow
def test_the_sealed_boxed_sample_keeps_its_first_score(tmp_path: Path) -> None:
    graded = boxed_grades(tmp_path)
    agree = int(graded["agree"].sum())
    false_positives = int((graded["correct"].astype(bool) & (graded["label"] != "correct")).sum())
    assert agree >= FLOOR_BOXED[0] and false_positives <= FLOOR_BOXED[1], graded[~graded["agree"]][
        ["problem_id", "model", "label", "correct", "extracted"]
    ]


def test_the_sealed_champ_sample_holds_no_key_of_an_earlier_label_file() -> None:
    """Drawn after every other CHAMP label file, from (problem, model, setting) keys none holds."""
    sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    import make_champ_sealed_label_sample as sealed

    fixtures = ROOT / "tests" / "fixtures"
    others = {p.name for p in fixtures.glob("champ_*labels*.csv")} - {
        "champ_settings_labels_sealed.csv"
    }
    assert set(sealed.EARLIER_LABEL_FILES) == others

    def keys(path: Path) -> set[tuple[str, str, str]]:
        with path.open(encoding="utf-8", newline="") as f:
            return {(r["setting"], r["problem_id"], r["teacher"]) for r in csv.DictReader(f)}

    mine = keys(fixtures / "champ_settings_labels_sealed.csv")
    assert len(mine) == 306
    for name in sorted(others):
        path = fixtures / name
        with path.open(encoding="utf-8", newline="") as f:
            header = next(csv.reader(f))
        if {"setting", "problem_id", "teacher"} <= set(header):
            assert not mine & keys(path), name
