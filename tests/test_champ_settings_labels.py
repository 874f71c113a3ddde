"""Integrity of the hand labels of CHAMP answers from settings other than 0-Shot (issue 23).

The labels (tests/fixtures/champ_settings_labels_{dev,test,heldout,fresh,unseen,last}.csv, made by
reading; how: tests/fixtures/champ_settings_labels.md) are checked against the CHAMP data itself,
never against the grader: every stated answer is a verbatim piece of the recorded text it was read
from, the halves are whole settings, the draw scripts reproduce exactly the labelled keys, no answer
is labelled in two files, and the counts in the .md are the counts of the files. Nothing here
imports the answer layer or grades anything.
"""

from __future__ import annotations

import csv
import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from precompute.champ import (
    CHAMP_MODELS,
    DEFAULT_SETTING,
    champ_first_wrong_steps,
    champ_problems,
    champ_settings,
    champ_traces,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: The files drawn with 6 items per (setting, category) and every model in every category.
HALVES = ("dev", "test", "heldout")
#: The fresh test sample (issue 23): balanced only as far as its settings allow.
FRESH_HALF = "fresh"
#: The unseen-problems test sample (issue 23): problems no other label file holds.
UNSEEN_HALF = "unseen"
#: The last sample (issue 23): the problems left after the unseen-problems sample.
LAST_HALF = "last"
#: The two samples of answers no label file held (issue 23), on problems earlier files hold.
ANSWER_HALVES = ("final", "confirm", "recheck", "recheck_b")
FILES = (*HALVES, FRESH_HALF, UNSEEN_HALF, LAST_HALF, *ANSWER_HALVES)
#: The columns of the issue-13 labels file (champ_answer_labels.csv), plus ``question``.
COLUMNS = [
    "problem_id",
    "category",
    "teacher",
    "setting",
    "gold",
    "stated_answer",
    "label",
    "where",
    "no_mistake_annotation",
    "note",
    "drawn",
    "question",
]
LABELS = {"correct", "incorrect", "no_answer"}
CATEGORIES = ("Combinatorics", "Inequality", "Number-Theory", "Polynomial", "Sequence")
QUESTIONS = {"yes_no", "count", "value", "expression", "find_all", "mod", "choice"}


def _load_draw_script(name: str = "make_champ_settings_label_sample") -> ModuleType:
    # The scripts import each other and their path helper by plain name, as when run.
    if str(FIXTURES) not in sys.path:
        sys.path.insert(0, str(FIXTURES))
    spec = importlib.util.spec_from_file_location(name, FIXTURES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


DRAW = _load_draw_script()
#: The held-out draw (issue 23, item 5); it imports the first script, loaded just above.
HELDOUT = _load_draw_script("make_champ_heldout_label_sample")
#: The fresh test sample's draw; it imports both scripts above.
FRESH = _load_draw_script("make_champ_fresh_label_sample")
#: The unseen-problems sample's draw; it imports the fresh script.
UNSEEN = _load_draw_script("make_champ_unseen_label_sample")
#: The last sample's draw; it imports the unseen script.
LAST = _load_draw_script("make_champ_last_label_sample")
#: The answer samples' draw (one script, a registry of the samples).
ANSWERS = _load_draw_script("make_champ_answer_label_sample")


def _rows(half: str) -> list[dict[str, str]]:
    with (FIXTURES / f"champ_settings_labels_{half}.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def rows() -> dict[str, list[dict[str, str]]]:
    return {half: _rows(half) for half in FILES}


@pytest.fixture(scope="module")
def recorded() -> dict[tuple[str, str, str], dict[str, str]]:
    """``(setting, problem_id, teacher) -> {"solution", "summary"}`` for all 18 settings."""
    texts: dict[tuple[str, str, str], dict[str, str]] = {}
    for setting in champ_settings():
        frame = champ_traces(setting, include_human=False, count_tokens=False)
        for pid, teacher, solution, summary in zip(
            frame["problem_id"],
            frame["teacher"],
            frame["reasoning"],
            frame["answer_text"],
            strict=True,
        ):
            base = teacher.partition("@")[0]
            texts[(setting, pid, base)] = {"solution": solution, "summary": summary or ""}
    return texts


def test_files_have_the_issue_13_columns_plus_question() -> None:
    with (FIXTURES / "champ_answer_labels.csv").open(encoding="utf-8", newline="") as f:
        old = next(csv.reader(f))
    assert [*old, "question"] == COLUMNS
    for half in FILES:
        with (FIXTURES / f"champ_settings_labels_{half}.csv").open(encoding="utf-8") as f:
            assert next(csv.reader(f)) == COLUMNS


def test_every_value_is_one_the_rules_allow(rows: dict[str, list[dict[str, str]]]) -> None:
    for half in FILES:
        for n, row in enumerate(rows[half], start=2):
            where = f"{half} line {n}"
            assert row["label"] in LABELS, where
            assert row["question"] in QUESTIONS, where
            assert row["teacher"] in CHAMP_MODELS.values(), where
            assert row["category"] in CATEGORIES, where
            assert row["drawn"] == "true", where
            # CHAMP annotated first wrong steps under "No C w/o H" and "Direct C w/ H" only;
            # only the fresh sample holds the latter (checked against CHAMP further down).
            if row["setting"] != "Direct C w/ H":
                assert row["no_mistake_annotation"] == "", where
            else:
                assert row["no_mistake_annotation"] in {"", "true", "false"}, where
            if row["label"] == "no_answer":
                assert (row["stated_answer"], row["where"]) == ("", ""), where
            else:
                assert row["stated_answer"].strip(), where
                assert row["where"] in {"summary", "solution"}, where


def test_split_is_by_whole_settings_and_matches_the_seeded_shuffle(
    rows: dict[str, list[dict[str, str]]],
) -> None:
    dev = {r["setting"] for r in rows["dev"]}
    test = {r["setting"] for r in rows["test"]}
    assert dev == set(DRAW.DEV_SETTINGS)
    assert test == set(DRAW.TEST_SETTINGS)
    assert not dev & test
    assert dev | test == set(DRAW.SETTINGS)
    assert len(DRAW.SETTINGS) == 8
    assert DRAW.split_settings() == (DRAW.DEV_SETTINGS, DRAW.TEST_SETTINGS)
    # Neither the setting the answer layer was built on nor its identical twin.
    assert DEFAULT_SETTING not in DRAW.SETTINGS
    assert "No C w/o H" not in DRAW.SETTINGS


def test_heldout_settings_are_unused_and_the_seeded_choice(
    rows: dict[str, list[dict[str, str]]],
) -> None:
    heldout = {r["setting"] for r in rows["heldout"]}
    assert heldout == set(HELDOUT.HELDOUT_SETTINGS)
    assert len(heldout) == 4
    # None is the answer layer's setting, its twin, or a setting of the first sample.
    assert not heldout & {DEFAULT_SETTING, "No C w/o H", *DRAW.SETTINGS}
    assert set(HELDOUT.USED_SETTINGS) == {DEFAULT_SETTING, "No C w/o H", *DRAW.SETTINGS}
    assert HELDOUT.chosen_now() == HELDOUT.HELDOUT_SETTINGS
    # The eight candidates: 18 settings less the ten used.
    candidates = HELDOUT.candidates(champ_settings())
    assert len(candidates) == 8 and heldout <= set(candidates)


def test_heldout_choice_skips_settings_that_cannot_fill_every_cell() -> None:
    # Two categories, two teachers; "S2" has 5 eligible problems in one cell (6 needed).
    cats, teachers = ["A", "B"], ["t1", "t2"]
    full = [f"P_{i}" for i in range(6)]
    eligible = {(s, c, t): full for s in ("S1", "S2", "S3") for c in cats for t in teachers}
    eligible[("S2", "B", "t2")] = full[:5]
    assert not HELDOUT.usable(eligible, "S2", cats, teachers)
    assert HELDOUT.usable(eligible, "S1", cats, teachers)
    chosen = HELDOUT.choose_settings(["S1", "S2", "S3"], eligible, cats, teachers, how_many=4)
    # Fewer usable than asked for: all usable ones, sorted.
    assert chosen == ("S1", "S3")
    one = HELDOUT.choose_settings(["S3", "S2", "S1"], eligible, cats, teachers, how_many=1)
    assert len(one) == 1 and one[0] in chosen


def test_stated_answers_are_verbatim_in_the_recorded_texts(
    rows: dict[str, list[dict[str, str]]], recorded: dict[tuple[str, str, str], dict[str, str]]
) -> None:
    gold = dict(zip(champ_problems()["problem_id"], champ_problems()["gold"], strict=True))
    for half in FILES:
        for n, row in enumerate(rows[half], start=2):
            key = (row["setting"], row["problem_id"], row["teacher"])
            assert key in recorded, f"{half} line {n}: no recorded answer {key}"
            assert row["gold"] == gold[row["problem_id"]], f"{half} line {n}"
            if row["label"] != "no_answer":
                text = recorded[key][row["where"]]
                assert row["stated_answer"] in text, f"{half} line {n}: {row['stated_answer']!r}"


@pytest.mark.slow
def test_no_labelled_text_was_recorded_under_another_setting(
    rows: dict[str, list[dict[str, str]]], recorded: dict[tuple[str, str, str], dict[str, str]]
) -> None:
    # CHAMP reuses one conversation for settings whose prompts coincide; the draw keeps only
    # texts recorded under their own setting alone, so none is a 0-Shot text (what the answer
    # layer was built on) and none is in both halves.
    for half in FILES:
        for row in rows[half]:
            pid, teacher = row["problem_id"], row["teacher"]
            text = recorded[(row["setting"], pid, teacher)]["solution"]
            same = [
                s
                for s in champ_settings()
                if recorded.get((s, pid, teacher), {}).get("solution") == text
            ]
            assert same == [row["setting"]], (half, pid, teacher, same)


def test_the_draw_script_reproduces_exactly_the_labelled_keys(
    rows: dict[str, list[dict[str, str]]],
) -> None:
    items = DRAW.sample() + HELDOUT.sample()
    for half in HALVES:
        drawn = [
            (i["setting"], i["problem_id"], i["teacher"], i["category"])
            for i in items
            if i["half"] == half
        ]
        labelled = [
            (r["setting"], r["problem_id"], r["teacher"], r["category"]) for r in rows[half]
        ]
        assert drawn == labelled


def test_every_setting_covers_every_model_and_category(
    rows: dict[str, list[dict[str, str]]],
) -> None:
    for half in HALVES:
        for setting in {r["setting"] for r in rows[half]}:
            mine = [r for r in rows[half] if r["setting"] == setting]
            assert len(mine) == 30
            assert Counter(r["category"] for r in mine) == dict.fromkeys(CATEGORIES, 6)
            assert {r["teacher"] for r in mine} == set(CHAMP_MODELS.values())
            # Each category: every model once plus two more (6 = 4 + 2), no problem twice.
            for category in {r["category"] for r in mine}:
                cell = [r for r in mine if r["category"] == category]
                assert {r["teacher"] for r in cell} == set(CHAMP_MODELS.values())
                assert len({r["problem_id"] for r in cell}) == 6


def _md_table(heading: str) -> dict[str, tuple[int, int, int, int]]:
    """The rows ``| name | correct | incorrect | no_answer | items |`` under ``heading``."""
    text = (FIXTURES / "champ_settings_labels.md").read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n\n", 1)[0]
    table: dict[str, tuple[int, int, int, int]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and all(re.fullmatch(r"\d+", c) for c in cells[-4:]):
            table[cells[0]] = tuple(int(c) for c in cells[-4:])  # type: ignore[assignment]
    return table


def _counts(rows: list[dict[str, str]], column: str) -> dict[str, tuple[int, int, int, int]]:
    out: dict[str, tuple[int, int, int, int]] = {}
    for name in sorted({r[column] for r in rows}):
        labels = Counter(r["label"] for r in rows if r[column] == name)
        values = (labels["correct"], labels["incorrect"], labels["no_answer"])
        out[name] = (*values, sum(values))
    return out


@pytest.mark.parametrize("half", FILES)
@pytest.mark.parametrize("column", ["setting", "teacher", "category", "question"])
def test_counts_in_the_md_are_the_counts_of_the_files(
    rows: dict[str, list[dict[str, str]]], half: str, column: str
) -> None:
    expected = _counts(rows[half], column)
    table = _md_table(f"<!-- counts: {half} by {column} -->")
    total = table.pop("all", None)
    assert table == expected
    labels = Counter(r["label"] for r in rows[half])
    assert total == (labels["correct"], labels["incorrect"], labels["no_answer"], len(rows[half]))


@settings(max_examples=40, deadline=None)
@given(
    pool=st.integers(min_value=6, max_value=12),
    drop=st.lists(st.integers(min_value=0, max_value=11), max_size=5),
)
def test_draw_fills_every_cell_for_any_large_enough_pools(pool: int, drop: list[int]) -> None:
    # Synthetic eligibility: per (setting, category, teacher) `pool` problems minus a few
    # dropped ones (at least 6 always remain, the most a cell can need).
    categories = ["A", "B", "C", "D", "E"]
    teachers = sorted(CHAMP_MODELS.values())
    eligible = {
        (s, c, t): [f"P_{c}_{i}" for i in range(1, pool + 7) if i not in drop][: pool + 6]
        for s in DRAW.SETTINGS
        for c in categories
        for t in teachers
    }
    keys = DRAW.draw_keys(eligible, categories, teachers)
    assert len(keys) == 30 * len(DRAW.SETTINGS)
    for setting in DRAW.SETTINGS:
        mine = [(pid, t) for s, pid, t in keys if s == setting]
        per_model = Counter(t for _, t in mine)
        # 10 extra slots over 4 models in turn: 3, 3, 2, 2 -> every model 7 or 8 items.
        assert sorted(per_model.values()) == [7, 7, 8, 8]
        for c in categories:
            cell = [(pid, t) for pid, t in mine if pid.startswith(f"P_{c}_")]
            assert len(cell) == 6 and len({pid for pid, _ in cell}) == 6
            assert {t for _, t in cell} == set(teachers)
            assert all(pid in eligible[(setting, c, t)] for pid, t in cell)


# --- The fresh test sample (champ_settings_labels_fresh.csv) --------------------------------


def _keys(rows: list[dict[str, str]]) -> set[tuple[str, str, str]]:
    return {(r["setting"], r["problem_id"], r["teacher"]) for r in rows}


def test_fresh_settings_are_the_four_no_sample_used(
    rows: dict[str, list[dict[str, str]]],
) -> None:
    fresh = {r["setting"] for r in rows[FRESH_HALF]}
    assert fresh == set(FRESH.FRESH_SETTINGS)
    # The eight settings left after the first sample, less the held-out half's four.
    left = set(HELDOUT.candidates(champ_settings())) - set(HELDOUT.HELDOUT_SETTINGS)
    assert set(FRESH.FRESH_SETTINGS) == left
    for half in HALVES:
        assert not fresh & {r["setting"] for r in rows[half]}, half
    # No top-up was needed: the four settings filled every slot.
    assert len(rows[FRESH_HALF]) == FRESH.TARGET == 4 * FRESH.PER_SETTING


def _other_label_files(half: str = FRESH_HALF) -> list[Path]:
    """Every label file in the fixtures folder except ``half``'s, the answer samples' and the
    sealed sample's (all drawn later, as (problem, model, setting) keys on problems the other
    files hold; the sealed sample's own exclusions are checked in test_sealed_samples.py)."""
    skip = {f"champ_settings_labels_{h}.csv" for h in (half, *ANSWER_HALVES, "sealed")}
    return sorted(p for p in FIXTURES.glob("champ_*labels*.csv") if p.name not in skip)


def test_fresh_draw_excluded_every_label_file_made_before_it() -> None:
    assert set(FRESH.EARLIER_LABEL_FILES) == {
        "champ_answer_labels.csv",
        *(f"champ_settings_labels_{half}.csv" for half in HALVES),
    }
    assert set(FRESH.EARLIER_LABEL_FILES) <= {p.name for p in _other_label_files()}
    # The unseen sample came after the fresh one: only it may exclude the fresh file.
    assert f"champ_settings_labels_{UNSEEN_HALF}.csv" not in FRESH.EARLIER_LABEL_FILES


def test_fresh_overlaps_no_other_label_file(rows: dict[str, list[dict[str, str]]]) -> None:
    fresh = _keys(rows[FRESH_HALF])
    assert len(fresh) == len(rows[FRESH_HALF])
    for path in _other_label_files():
        with path.open(encoding="utf-8", newline="") as f:
            assert not fresh & _keys(list(csv.DictReader(f))), path.name
    assert not fresh & FRESH.labelled_keys()


def test_fresh_draw_reproduces_exactly_the_labelled_keys(
    rows: dict[str, list[dict[str, str]]],
) -> None:
    items = FRESH.sample()
    assert {i["half"] for i in items} == {FRESH_HALF}
    drawn = [(i["setting"], i["problem_id"], i["teacher"], i["category"]) for i in items]
    labelled = [
        (r["setting"], r["problem_id"], r["teacher"], r["category"]) for r in rows[FRESH_HALF]
    ]
    assert drawn == labelled
    # A truncated solution has no summary, so no stated answer.
    for item, row in zip(items, rows[FRESH_HALF], strict=True):
        if item["truncated"]:
            assert row["label"] == "no_answer", row["problem_id"]


def test_fresh_counts_per_setting(rows: dict[str, list[dict[str, str]]]) -> None:
    for setting in FRESH.FRESH_SETTINGS:
        mine = [r for r in rows[FRESH_HALF] if r["setting"] == setting]
        assert len(mine) == FRESH.PER_SETTING
        assert len({r["problem_id"] for r in mine}) == len(mine)
        assert {r["category"] for r in mine} == set(CATEGORIES)
        per_model = Counter(r["teacher"] for r in mine)
        assert set(per_model) == set(CHAMP_MODELS.values())
        assert max(per_model.values()) - min(per_model.values()) <= 3
        # Only 2 Combinatorics problems are eligible in these settings; the round robin gives
        # the other four categories 6 to 8 items each.
        per_category = Counter(r["category"] for r in mine)
        assert per_category["Combinatorics"] == 2
        assert all(6 <= per_category[c] <= 8 for c in CATEGORIES if c != "Combinatorics")


def test_fresh_annotation_flags_are_champs(rows: dict[str, list[dict[str, str]]]) -> None:
    # Filled in from CHAMP's own first-wrong-step annotations after labelling, not by reading.
    flags = {}
    for setting in FRESH.FRESH_SETTINGS:
        frame = champ_first_wrong_steps(setting)
        for teacher, pid, error in zip(
            frame["teacher"], frame["problem_id"], frame["error_found"], strict=True
        ):
            flags[(setting, pid, teacher.partition("@")[0])] = "false" if error else "true"
    for row in rows[FRESH_HALF]:
        key = (row["setting"], row["problem_id"], row["teacher"])
        assert row["no_mistake_annotation"] == flags.get(key, ""), key
    # An annotation attaches to every setting that recorded the annotated text; a labelled
    # text is recorded under its own setting only, so only "Direct C w/ H" rows carry one.
    flagged = {r["setting"] for r in rows[FRESH_HALF] if r["no_mistake_annotation"]}
    assert flagged <= {"Direct C w/ H"}


def test_round_robin_balances_and_skips_short_cells() -> None:
    cats, teachers = ["A", "B", "C"], ["t1", "t2", "t3", "t4"]
    eligible = {("S", c, t): [f"P_{c}_{i}" for i in range(1, 21)] for c in cats for t in teachers}
    eligible.update({("S", "A", t): ["P_A_1", "P_A_2"] for t in teachers})
    exclude = {("S", "P_B_1", t) for t in teachers}
    keys = FRESH.round_robin_keys(eligible, cats, teachers, ["S"], exclude, per_setting=20)
    assert len(keys) == 20 == len(set(keys))
    assert len({pid for _, pid, _ in keys}) == 20  # no problem twice in a setting
    assert not set(keys) & exclude
    per_category = Counter(pid.split("_")[1] for _, pid, _ in keys)
    assert per_category == {"A": 2, "B": 9, "C": 9}
    assert all(pid in eligible[("S", pid.split("_")[1], t)] for _, pid, t in keys)
    # Within a category the models take turns: counts differ by at most one.
    for c in ("B", "C"):
        per_model = Counter(t for _, pid, t in keys if pid.startswith(f"P_{c}_"))
        assert max(per_model.values()) - min(per_model.values()) <= 1
    # Seeded: the same call gives the same keys; too few eligible gives what there is.
    assert FRESH.round_robin_keys(eligible, cats, teachers, ["S"], exclude, 20) == keys
    few = FRESH.round_robin_keys(eligible, ["A"], teachers, ["S"], frozenset(), 30)
    assert len(few) == 2


def test_top_up_draws_only_unlabelled_eligible_keys() -> None:
    eligible = {("H", "A", "t1"): ["P_1", "P_2", "P_3"], ("G", "A", "t1"): ["P_9"]}
    exclude = {("H", "P_2", "t1")}
    keys = FRESH.top_up_keys(eligible, ["H"], exclude, 5)
    assert keys == [("H", "P_1", "t1"), ("H", "P_3", "t1")]
    assert FRESH.top_up_keys(eligible, ["H"], exclude, 0) == []
    one = FRESH.top_up_keys(eligible, ["H"], exclude, 1)
    assert one == FRESH.top_up_keys(eligible, ["H"], exclude, 1) and one[0] in keys


# --- The unseen-problems sample (champ_settings_labels_unseen.csv) --------------------------


#: The two samples of problems no other label file holds, in the order they were drawn.
PROBLEM_SAMPLES = {UNSEEN_HALF: UNSEEN, LAST_HALF: LAST}


@pytest.mark.parametrize("half", list(PROBLEM_SAMPLES))
def test_problem_samples_excluded_every_label_file_made_before_them(half: str) -> None:
    earlier = set(PROBLEM_SAMPLES[half].EARLIER_LABEL_FILES)
    later = {f"champ_settings_labels_{h}.csv" for h in list(PROBLEM_SAMPLES)[1:]}
    others = {p.name for p in _other_label_files(half)}
    if half == UNSEEN_HALF:
        assert earlier == others - later
    else:
        assert earlier == others


@pytest.mark.parametrize("half", list(PROBLEM_SAMPLES))
def test_problem_samples_hold_no_problem_of_another_label_file(
    rows: dict[str, list[dict[str, str]]], half: str
) -> None:
    mine = {r["problem_id"] for r in rows[half]}
    for path in _other_label_files(half):
        with path.open(encoding="utf-8", newline="") as f:
            assert not mine & {r["problem_id"] for r in csv.DictReader(f)}, path.name


@pytest.mark.parametrize("half", list(PROBLEM_SAMPLES))
def test_problem_sample_draws_reproduce_exactly_the_labelled_keys(
    rows: dict[str, list[dict[str, str]]], half: str
) -> None:
    items = PROBLEM_SAMPLES[half].sample()
    assert {i["half"] for i in items} == {half}
    drawn = [(i["setting"], i["problem_id"], i["teacher"], i["category"]) for i in items]
    labelled = [(r["setting"], r["problem_id"], r["teacher"], r["category"]) for r in rows[half]]
    assert drawn == labelled
    for item, row in zip(items, rows[half], strict=True):
        if item["truncated"]:
            assert row["label"] == "no_answer", row["problem_id"]


def test_problem_samples_settings_and_counts(rows: dict[str, list[dict[str, str]]]) -> None:
    # Every setting but 0-Shot and its copy; the Direct / Root settings have no unique text
    # on an unlabelled problem, so twelve remain, ten items each where there are ten.
    left = set(champ_settings()) - set(UNSEEN.LEFT_OUT) - set(FRESH.FRESH_SETTINGS)
    assert len(left) == 12
    for half in PROBLEM_SAMPLES:
        settings = Counter(r["setting"] for r in rows[half])
        assert set(settings) == left
        assert max(settings.values()) == UNSEEN.PER_SETTING
        for setting in settings:
            mine = [r for r in rows[half] if r["setting"] == setting]
            assert len({r["problem_id"] for r in mine}) == len(mine)
    assert set(Counter(r["setting"] for r in rows[UNSEEN_HALF]).values()) == {10}
    assert len(rows[LAST_HALF]) == 46  # all the eligible texts the round robin could place


# --- The answer samples (champ_settings_labels_{final,confirm}.csv) -------------------------------

#: Answers per setting in each answer sample (16 settings each).
PER_SETTING = {"final": 13, "confirm": 13, "recheck": 13, "recheck_b": 17}


def test_the_answer_samples_are_the_registry_in_drawing_order() -> None:
    assert list(ANSWERS.SAMPLES) == list(ANSWER_HALVES)
    assert {half: s.per_setting for half, s in ANSWERS.SAMPLES.items()} == PER_SETTING


def _file_keys(path: Path) -> set[tuple[str, str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return {(r["setting"], r["problem_id"], r["teacher"]) for r in csv.DictReader(f)}


def test_answer_samples_excluded_every_label_file_made_before_them() -> None:
    earlier = {p.name for p in _other_label_files("final")}
    names = [f"champ_settings_labels_{half}.csv" for half in ANSWER_HALVES]
    for at, half in enumerate(ANSWER_HALVES):
        assert set(ANSWERS.earlier_label_files(half)) == earlier | set(names[:at])


@pytest.mark.parametrize("half", ANSWER_HALVES)
def test_answer_samples_hold_no_key_of_an_earlier_label_file(half: str) -> None:
    mine = _file_keys(FIXTURES / f"champ_settings_labels_{half}.csv")
    assert len(mine) == 16 * PER_SETTING[half]
    for name in ANSWERS.earlier_label_files(half):
        assert not mine & _file_keys(FIXTURES / name), name


@pytest.mark.slow
@pytest.mark.parametrize("half", ANSWER_HALVES)
def test_answer_sample_draws_reproduce_exactly_the_labelled_keys(
    rows: dict[str, list[dict[str, str]]], half: str
) -> None:
    items = ANSWERS.sample(half)
    assert {i["half"] for i in items} == {half}
    drawn = [(i["setting"], i["problem_id"], i["teacher"], i["category"]) for i in items]
    labelled = [(r["setting"], r["problem_id"], r["teacher"], r["category"]) for r in rows[half]]
    assert drawn == labelled
    # 16 settings (all but 0-Shot and its copy) x 13 = 208
    settings = Counter(r["setting"] for r in rows[half])
    assert set(settings) == set(champ_settings()) - set(UNSEEN.LEFT_OUT)
    assert set(settings.values()) == {PER_SETTING[half]}
    assert len(rows[half]) == 16 * PER_SETTING[half]
    for item, row in zip(items, rows[half], strict=True):
        if item["truncated"]:
            assert row["label"] == "no_answer", row["problem_id"]


@pytest.mark.parametrize("half", ANSWER_HALVES)
def test_answer_samples_hold_no_text_a_reader_had_labelled(
    rows: dict[str, list[dict[str, str]]],
    recorded: dict[tuple[str, str, str], dict[str, str]],
    half: str,
) -> None:
    """No drawn answer's text equals the text of a labelled key of the same model and problem
    (the eligibility rule: a text recorded under one setting only)."""
    earlier: set[tuple[str, str, str]] = set()
    for name in ANSWERS.earlier_label_files(half):
        earlier |= _file_keys(FIXTURES / name)

    def text(key: tuple[str, str, str]) -> tuple[str, str]:
        return tuple(str(recorded[key][part]) for part in ("summary", "solution"))  # type: ignore[return-value]

    seen: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for key in earlier:
        seen.setdefault(key[1:], set()).add(text(key))
    for row in rows[half]:
        key = (row["setting"], row["problem_id"], row["teacher"])
        assert text(key) not in seen.get(key[1:], set()), key
