"""Task families: prompts, answer extraction, grading (with a real deadline) and the registry."""

from __future__ import annotations

import importlib.util
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from legival_core.grading.boxes import boxed_contents, last_boxed
from legival_core.tasks.base import (
    TASKS,
    Grade,
    Task,
    get_task,
    problem_meta,
    register_task,
    task_names,
)
from legival_core.tasks.champ import champ_accepted_answers, champ_ascii_to_latex
from legival_core.tasks.connections import ConnectionsTask, groups_right
from legival_core.tasks.deadline import run_with_deadline
from legival_core.tasks.gpqa import GPQATask, choice_seed_for, shuffle_choices
from legival_core.tasks.gsm8k import gsm8k_gold_number

BUILTIN = ("math", "champ", "gsm8k", "gpqa", "connections", "jsonl")
GOLD_GROUPS = [
    ["bass", "flounder", "salmon", "trout"],
    ["ant", "drill", "island", "opal"],
    ["are", "why", "you", "queue"],
    ["bud", "don", "wok", "elm"],
]


# --- registry and shared interface ------------------------------------------------------------


def test_every_builtin_task_is_registered_with_its_family() -> None:
    assert set(BUILTIN) <= set(task_names())
    families = {name: get_task(name).family for name in BUILTIN}
    assert families == {
        "math": "math",
        "champ": "math",
        "gsm8k": "math",
        "gpqa": "science",
        "connections": "puzzles",
        "jsonl": "math",
    }


def test_get_task_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match=r"registered tasks: .*gpqa"):
        get_task("no-such-task")


def test_register_task_refuses_a_second_class_under_a_taken_name() -> None:
    class Impostor(GPQATask):
        name: ClassVar[str] = "math"

    with pytest.raises(ValueError, match="'math' is taken by MathTask"):
        register_task(Impostor)
    assert type(TASKS["math"]).__name__ == "MathTask"


@pytest.mark.parametrize("name", BUILTIN)
def test_build_messages_are_system_then_user_with_the_problem(name: str) -> None:
    problem = {"problem_id": "p1", "prompt": "QUESTION-TEXT", "choices": ["x", "y", "z", "w"]}
    messages = get_task(name).build_messages(problem)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "QUESTION-TEXT" in messages[1]["content"]
    assert "step by step" in (messages[0]["content"] + messages[1]["content"]).lower()


@pytest.mark.parametrize("name", BUILTIN)
def test_missing_prompt_names_row_field_and_task(name: str) -> None:
    with pytest.raises(ValueError, match=r"problems row 'p9': field 'prompt'.*task '" + name):
        get_task(name).build_messages({"problem_id": "p9", "prompt": "  "})


@pytest.mark.parametrize("name", BUILTIN)
def test_every_task_has_a_rubric_and_a_forcing_cue(name: str) -> None:
    task = get_task(name)
    assert len(task.backtracking_rubric.split()) > 40
    assert task.forcing_cue.strip()
    assert isinstance(task.stop_strings, tuple)


@pytest.mark.parametrize("name", BUILTIN)
def test_no_answer_grades_wrong_without_running_a_check(name: str) -> None:
    assert get_task(name).grade(None, "1") == Grade(False, 0.0, "no_answer")


def test_problem_meta_accepts_json_text_and_rejects_other_json() -> None:
    assert problem_meta({"meta": '{"match": "regex"}'}) == {"match": "regex"}
    assert problem_meta({"meta": None}) == {}
    with pytest.raises(ValueError, match="row 'q3': field 'meta' is not a JSON object"):
        problem_meta({"problem_id": "q3", "meta": "[1, 2]"})


# --- boxed answers ---------------------------------------------------------------------------


def test_nested_braces_in_a_box_are_kept_whole() -> None:
    assert last_boxed(r"so \boxed{\frac{1}{2}}.") == r"\frac{1}{2}"


def test_multiple_boxes_give_the_last_one() -> None:
    text = r"first \boxed{4}, wait, that is wrong: \boxed{5}"
    assert boxed_contents(text) == ["4", "5"]
    assert get_task("math").extract_answer(text) == "5"


def test_unclosed_and_empty_boxes_are_not_answers() -> None:
    math = get_task("math")
    assert math.extract_answer(r"\boxed{\frac{1}{") is None
    assert math.extract_answer(r"\boxed{}") is None
    assert not math.answer_extractable("no box yet")


def test_box_inside_a_box_belongs_to_the_outer_one() -> None:
    assert boxed_contents(r"\boxed{\boxed{1}+2} and \fbox{x^{2}}") == [r"\boxed{1}+2", "x^{2}"]


# --- math (math-verify) ----------------------------------------------------------------------


def test_math_boxed_root_is_right_against_a_bare_gold() -> None:
    math = get_task("math")
    extracted = math.extract_answer(r"Therefore the length is \boxed{3\sqrt{2}}.")
    assert extracted == r"3\sqrt{2}"
    assert math.grade(extracted, r"3\sqrt{2}") == Grade(True, 1.0, "ok")


def test_math_bare_gold_is_wrapped_so_three_is_wrong() -> None:
    # Unwrapped, math-verify would read the gold 3\sqrt{2} as 3 and accept this answer.
    assert get_task("math").grade("3", r"3\sqrt{2}") == Grade(False, 0.0, "ok")


def test_math_equivalent_forms_are_right() -> None:
    math = get_task("math")
    assert math.grade(r"\frac{1}{2}", "0.5").correct
    assert math.grade(r"\frac12", r"$\frac{1}{2}$").correct
    assert not math.grade(r"\frac{1}{3}", "0.5").correct


def test_math_forcing_cue_then_continuation_is_extractable() -> None:
    math = get_task("math")
    text = "I ran out of budget" + math.forcing_cue + r"\frac{7}{2}}."
    assert math.extract_answer(text) == r"\frac{7}{2}"


def test_math_adversarial_power_tower_times_out_and_counts_wrong() -> None:
    # sympy evaluates 9^(9^(9^9)) as an exact integer inside C code, where even signal.alarm
    # cannot interrupt it; only killing the worker process stops it.
    started = time.monotonic()
    grade = get_task("math").grade(r"9^{9^{9^{9}}}", "1", timeout_s=1.0)
    assert grade == Grade(False, 0.0, "timeout")
    assert time.monotonic() - started < 60  # start-up may be slow; the check itself is cut


# --- champ -----------------------------------------------------------------------------------


def test_champ_gold_conventions() -> None:
    assert champ_accepted_answers("@@sqrt(3)/3@@, or equivalently @@1/sqrt(3)@@") == [
        "sqrt(3)/3",
        "1/sqrt(3)",
    ]
    assert champ_accepted_answers("100 (i.e., all numbers)") == ["100"]
    assert champ_accepted_answers("-3 is the only possible value") == ["-3"]
    nested = "@@((-1)^(n+1)+n+1)/(n+2)@@ (i.e., 1 for odd @@n@@, and @@n/(n+2)@@ for even @@n@@)"
    assert champ_accepted_answers(nested) == ["((-1)^(n+1)+n+1)/(n+2)"]
    assert champ_ascii_to_latex("C(n+1, 2m+1)") == r"\binom{n+1}{2m+1}"
    assert champ_ascii_to_latex("sum_(i=1)^n i^2") == r"\sum_{i=1}^{n} i^2"


def test_champ_grades_alternatives_words_and_ascii_math() -> None:
    champ = get_task("champ")
    gold_root = "@@sqrt(3)/3@@, or equivalently @@1/sqrt(3)@@"
    assert champ.grade(r"\frac{1}{\sqrt{3}}", gold_root).correct
    assert not champ.grade(r"\sqrt{3}", gold_root).correct
    assert champ.grade(r"\text{No}", "No").correct
    # "on" is n*o to math-verify, like "No"; word answers must not go through it.
    assert not champ.grade("on", "No").correct
    assert champ.grade("900", "900 (i.e., all values)").correct
    assert champ.grade(r"\binom{n+1}{2m+1}", "@@C(n+1, 2m+1)@@").correct
    assert champ.grade("2^{n-1}", "@@2^(n-1)@@").correct
    assert not champ.grade("2^{n}", "@@2^(n-1)@@").correct


def test_champ_floor_gold_is_not_matched_by_its_leading_number() -> None:
    # CHAMP P_Combinatorics gold "2^floor(n/2)*floor(n/2)!": before floor/ceil were translated
    # the parser read only the leading "2", so the answer "2" was graded correct.
    gold = "@@2^floor(n/2)*floor(n/2)!@@"
    assert champ_ascii_to_latex("2^floor(n/2)") == r"2^{\lfloor n/2 \rfloor}"
    assert champ_ascii_to_latex("ceil(n/3)") == r"{\lceil n/3 \rceil}"
    champ = get_task("champ")
    assert not champ.grade("2", gold).correct
    assert champ.grade(r"2^{\lfloor n/2 \rfloor} \cdot \lfloor n/2 \rfloor!", gold).correct
    # n = 4 gives 2^2 * 2! = 8; a constant is still not the formula.
    assert not champ.grade("8", gold).correct


def test_every_real_champ_gold_accepts_its_own_answer_written_in_latex() -> None:
    # All 270 gold answers shipped by champ-dataset (MIT): the first accepted form, turned
    # into LaTeX the way a model would box it, must grade correct, and no gold may error.
    package = importlib.util.find_spec("champ_dataset")
    assert package is not None and package.submodule_search_locations
    data_file = Path(package.submodule_search_locations[0]) / "dataset_files" / "v0.json"
    golds = [p["_raw_answer"] for p in json.loads(data_file.read_text())["problems"].values()]
    assert len(golds) == 270
    champ = get_task("champ")
    grades = [
        champ.grade(champ_ascii_to_latex(champ_accepted_answers(gold)[0]), gold) for gold in golds
    ]
    assert [g.status for g in grades] == ["ok"] * 270
    assert all(g.correct for g in grades)


# --- gpqa ------------------------------------------------------------------------------------


def test_gpqa_answer_line_with_parentheses() -> None:
    gpqa = get_task("gpqa")
    text = "Option (B) looks plausible but the spin is wrong.\nAnswer: (C)"
    assert gpqa.extract_answer(text) == "C"
    assert gpqa.grade("C", "C") == Grade(True, 1.0, "ok")
    assert gpqa.grade("C", "(B)") == Grade(False, 0.0, "ok")


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("The answer is B.", "B"),
        (r"so \boxed{D}", "D"),
        (r"\boxed{\text{(A)}}", "A"),
        ("Answer: A\nWait, no. Final answer: (D)", "D"),
        ("**Answer:** C", "C"),
        ("A is wrong and B is wrong", None),
        ("Answer: E", None),  # only four options
    ],
)
def test_gpqa_letter_forms(text: str, letter: str | None) -> None:
    assert get_task("gpqa").extract_answer(text) == letter


def test_gpqa_letters_follow_the_number_of_choices() -> None:
    problem = {"choices": ["a", "b", "c", "d", "e"]}
    assert get_task("gpqa").extract_answer("Answer: E", problem=problem) == "E"


def test_gpqa_forcing_cue_and_stop_strings_make_the_answer_extractable() -> None:
    gpqa = get_task("gpqa")
    assert gpqa.extract_answer("hmm" + gpqa.forcing_cue + "B}") == "B"
    for stop in gpqa.stop_strings:
        assert gpqa.answer_extractable("reasoning...\n" + stop), stop


def test_gpqa_bad_gold_is_an_error_status() -> None:
    grade = get_task("gpqa").grade("A", "banana")
    assert not grade.correct
    assert grade.status.startswith("error: ValueError: GPQA gold must be an option letter")


def test_seeded_shuffle_is_reproducible_and_records_the_gold_letter() -> None:
    wrong = ["w1", "w2", "w3"]
    first = shuffle_choices("right", wrong, seed=123)
    assert first == shuffle_choices("right", wrong, seed=123)
    choices, letter = first
    assert sorted(choices) == ["right", "w1", "w2", "w3"]
    assert choices["ABCD".index(letter)] == "right"
    # Different seeds must move the right option around (all four positions over 40 seeds).
    letters = {shuffle_choices("right", wrong, seed=s)[1] for s in range(40)}
    assert letters == set("ABCD")


def test_shuffle_tracks_position_when_a_wrong_option_repeats_the_right_text() -> None:
    choices, letter = shuffle_choices("same", ["same", "other", "x"], seed=5)
    assert choices["ABCD".index(letter)] == "same"
    assert choice_seed_for("gpqa-7", 1) != choice_seed_for("gpqa-7", 2)


def test_gpqa_prompt_lists_lettered_choices() -> None:
    choices, _ = shuffle_choices("4 eV", ["1 eV", "2 eV", "3 eV"], seed=0)
    prompt = get_task("gpqa").user_prompt({"prompt": "Which energy?", "choices": choices})
    for letter, choice in zip("ABCD", choices, strict=True):
        assert f"({letter}) {choice}" in prompt


def test_gpqa_prompt_without_choices_names_the_field() -> None:
    with pytest.raises(ValueError, match="field 'choices'"):
        get_task("gpqa").user_prompt({"problem_id": "g1", "prompt": "Q?"})


# --- connections -----------------------------------------------------------------------------


def _fenced(groups: list[list[str]]) -> str:
    return (
        "Let me think... bass could be a fish.\n```json\n" + json.dumps(groups, indent=2) + "\n```"
    )


def test_connections_one_wrong_group_scores_three_quarters() -> None:
    # One group carries a misspelt word, so 3 of the 4 gold groups are matched: 3 / 4 = 0.75.
    predicted = [list(g) for g in GOLD_GROUPS]
    predicted[3] = ["bud", "don", "wok", "elk"]
    connections = get_task("connections")
    extracted = connections.extract_answer(_fenced(predicted))
    assert extracted is not None and json.loads(extracted) == predicted
    assert connections.grade(extracted, json.dumps(GOLD_GROUPS)) == Grade(False, 0.75, "ok")


def test_connections_swapped_words_break_two_groups() -> None:
    # Swapping "trout" and "opal" spoils groups 1 and 2; groups 3 and 4 remain: 2 / 4 = 0.5.
    predicted = [list(g) for g in GOLD_GROUPS]
    predicted[0][3], predicted[1][3] = "opal", "trout"
    grade = get_task("connections").grade(json.dumps(predicted), json.dumps(GOLD_GROUPS))
    assert grade == Grade(False, 0.5, "ok")


def test_connections_all_groups_in_any_order_and_case_are_correct() -> None:
    predicted = [[w.upper() for w in reversed(g)] for g in reversed(GOLD_GROUPS)]
    grade = get_task("connections").grade(json.dumps(predicted), json.dumps(GOLD_GROUPS))
    assert grade == Grade(True, 1.0, "ok")


def test_connections_tolerates_single_quotes_trailing_commas_and_objects() -> None:
    task = ConnectionsTask()
    loose = "Final:\n[['a','b','c','d'], ['e','f','g','h'],]"
    assert json.loads(task.extract_answer(loose) or "null") == [list("abcd"), list("efgh")]
    objects = json.dumps({"groups": [{"category": "letters", "words": list("abcd")}]})
    assert json.loads(task.extract_answer(objects) or "null") == [list("abcd")]


def test_connections_last_grouping_wins() -> None:
    text = '[["x","y"],["z","w"]] no wait ```json\n[["a","b"],["c","d"]]\n```'
    assert get_task("connections").extract_answer(text) == '[["a", "b"], ["c", "d"]]'


def test_connections_extra_groups_earn_nothing() -> None:
    # Only the first len(gold) = 2 predicted groups count: ["p","q"] and ["a","b"] -> 1 right.
    assert groups_right([["p", "q"], ["a", "b"], ["c", "d"]], [["a", "b"], ["c", "d"]]) == 1


def test_connections_forcing_cue_then_stop_string_completes_the_grouping() -> None:
    task = get_task("connections")
    rest = '", "b", "c", "d"],\n  ["e", "f", "g", "h"],\n  ["i", "j", "k", "l"],\n'
    rest += '  ["m", "n", "o", "p"]\n]\n```\nextra'
    text = "thinking" + task.forcing_cue + rest
    cut = min(text.find(stop) + len(stop) for stop in task.stop_strings if stop in text)
    assert task.answer_extractable(text[:cut])
    assert not task.answer_extractable(text[: cut - 6])
    assert len(json.loads(task.extract_answer(text[:cut]) or "[]")) == 4


def test_connections_bad_gold_is_an_error_status() -> None:
    grade = get_task("connections").grade('[["a"]]', "not json")
    assert grade.status.startswith("error: ValueError: Connections gold is not JSON")


# --- gsm8k -----------------------------------------------------------------------------------


def test_gsm8k_commas_and_trailing_zeros() -> None:
    gsm8k = get_task("gsm8k")
    extracted = gsm8k.extract_answer(r"Total: \boxed{1,234.00} dollars")
    assert extracted == "1,234.00"  # the box's content; its value is read when graded
    assert gsm8k.grade("1,234.00", "1234") == Grade(True, 1.0, "ok")
    assert gsm8k.grade(extracted, "She earns 1000 + 234 = 1234.\n#### 1234").correct
    assert not gsm8k.grade("1,235", "#### 1,234").correct


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("so the answer is $18.", "18"),
        ("#### 72", "72"),
        ("She pays $0.50 per egg, so 3 eggs cost $1.50 in total", "1.5"),
        (r"\boxed{-4}", "-4"),
        ("no digits here", None),
    ],
)
def test_gsm8k_number_forms(text: str, number: str | None) -> None:
    # Graded as the grade stage does: a box or "####" by the task, prose by the answer layer.
    graded = get_task("gsm8k").grade_text({"answer_text": text}, number or "0")
    if number is None:
        assert not graded.grade.correct
    else:
        assert graded.grade.correct, graded


def test_gsm8k_only_explicit_answers_stop_early() -> None:
    gsm8k = get_task("gsm8k")
    assert not gsm8k.answer_extractable("First 3 apples, then 4 more")
    assert gsm8k.answer_extractable("First 3 apples, then 4 more. The answer is 7")


def test_gsm8k_gold_without_number_is_an_error() -> None:
    with pytest.raises(ValueError, match="no number after '####'"):
        gsm8k_gold_number("#### none")


# --- jsonl -----------------------------------------------------------------------------------


def test_jsonl_exact_match_after_normalisation() -> None:
    jsonl = get_task("jsonl")
    assert jsonl.extract_answer("blah\n**Final answer:** Paris.") == "Paris."
    assert jsonl.grade("Paris.", "paris") == Grade(True, 1.0, "ok")
    assert jsonl.grade(r"\text{Paris}", "Paris").correct
    assert not jsonl.grade("Lyon", "Paris").correct


def test_jsonl_regex_from_meta() -> None:
    jsonl = get_task("jsonl")
    problem = {
        "problem_id": "j1",
        "prompt": "Name a prime above 10.",
        "meta": json.dumps({"answer_pattern": r"PRIME=(\d+)", "match": "regex"}),
    }
    text = "PRIME=9 no... PRIME=13"
    extracted = jsonl.extract_answer(text, problem=problem)
    assert extracted == "13"
    assert jsonl.grade(extracted, r"1[137]", problem=problem).correct
    assert not jsonl.grade("19", r"1[137]", problem=problem).correct


def test_jsonl_bad_meta_names_the_row() -> None:
    jsonl = get_task("jsonl")
    with pytest.raises(ValueError, match=r"row 'j2': meta\.match must be one of"):
        jsonl.grade("a", "a", problem={"problem_id": "j2", "meta": '{"match": "fuzzy"}'})
    with pytest.raises(ValueError, match=r"row 'j3': meta\.answer_pattern is not a valid"):
        jsonl.extract_answer("x", problem={"problem_id": "j3", "meta": '{"answer_pattern": "("}'})


# --- the deadline itself ---------------------------------------------------------------------


def hanging_score(extracted: str, gold: str, options: Any) -> float:
    """A checker that never finishes in time (module level, so the worker can import it)."""
    time.sleep(60)
    return 1.0


class HangingTask(GPQATask):
    """GPQA with a checker that hangs; not registered."""

    score_answer = staticmethod(hanging_score)


def test_grader_that_hangs_times_out_and_counts_wrong() -> None:
    started = time.monotonic()
    grade = HangingTask().grade("A", "A", timeout_s=0.3)
    assert grade == Grade(False, 0.0, "timeout")
    assert time.monotonic() - started < 30  # not the 60 s the checker wanted


def test_deadline_worker_recovers_after_a_timeout() -> None:
    assert run_with_deadline(time.sleep, 30, timeout_s=0.2).status == "timeout"
    outcome = run_with_deadline(abs, -7, timeout_s=30)
    assert (outcome.status, outcome.value) == ("ok", 7)


def test_deadline_reports_exceptions_and_rejects_local_functions() -> None:
    outcome = run_with_deadline(int, "x", timeout_s=30)
    assert outcome.status == "error" and outcome.detail.startswith("ValueError")
    with pytest.raises(ValueError, match="module-level function"):
        run_with_deadline(lambda: 1, timeout_s=1)
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        run_with_deadline(abs, 1, timeout_s=0)


def test_grading_works_from_threads() -> None:
    # math-verify's own signal-based timeout refuses to run outside the main thread.
    math = get_task("math")
    with ThreadPoolExecutor(max_workers=2) as pool:
        grades = list(pool.map(lambda pair: math.grade(*pair), [("2", "2"), ("3", "2")]))
    assert [g.correct for g in grades] == [True, False]


# --- properties ------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(
        alphabet=st.sampled_from(list("{}[]()\\\"',:$#.-0123456789 abcABCDx\n`")) | st.characters(),
        max_size=300,
    ),
    name=st.sampled_from(BUILTIN),
)
def test_extractors_never_raise_on_arbitrary_text(text: str, name: str) -> None:
    task: Task = get_task(name)
    for candidate in (text, r"\boxed{" + text, text + task.forcing_cue + text):
        answer = task.extract_answer(candidate)
        assert answer is None or isinstance(answer, str)
        assert isinstance(task.answer_extractable(candidate), bool)


@given(st.text(max_size=200))
def test_boxed_contents_are_substrings(text: str) -> None:
    for content in boxed_contents(text):
        assert content in text


@given(
    groups=st.lists(
        st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=4), min_size=1, max_size=4
    )
)
def test_connections_roundtrip_any_words(groups: list[list[str]]) -> None:
    text = "reasoning [not json\n```json\n" + json.dumps(groups) + "\n```"
    assert json.loads(ConnectionsTask().extract_answer(text) or "null") == groups


@pytest.mark.parametrize(
    ("text", "content"),
    [
        # an escaped brace is a character of the answer, never the box's end
        (r"\boxed{a\}b}", r"a\}b"),
        # a second box left open: the last closed box is the answer
        (r"\boxed{1} then \boxed{2", "1"),
        # a box inside a box is part of the outer box
        (r"\boxed{\boxed{3}}", r"\boxed{3}"),
    ],
)
def test_one_box_extractor_reads_gold_and_model_alike(text: str, content: str) -> None:
    """The gold side (a MATH solution's box) and the model side read boxes with one extractor
    (issue 37: the two disagreed on each of these)."""
    from precompute.datasets import boxed_answer

    assert last_boxed(text) == content
    assert boxed_answer(text) == content
