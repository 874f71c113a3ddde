"""Steps: Punkt sentences with exact spans, and the `lines` mode."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.text import segment
from legival_core.text.segment import SEGMENTERS, Step, split_steps, step_texts


def assert_valid_spans(text: str, steps: list[Step]) -> None:
    """The contract of every mode: exact, ordered, disjoint, trimmed, covering."""
    covered = bytearray(len(text))
    previous_end = 0
    for step in steps:
        assert text[step.start : step.end] == step.text
        assert step.start >= previous_end  # in order, no overlap
        assert step.text and not step.text[0].isspace() and not step.text[-1].isspace()
        covered[step.start : step.end] = b"\x01" * (step.end - step.start)
        previous_end = step.end
    uncovered = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert uncovered == [], f"characters outside every step: {uncovered[:10]}"


# ------------------------------------------------------------------------------ paper mode


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a decimal point is not a sentence end
        (
            "The radius is 3.14 cm. The area follows.",
            ["The radius is 3.14 cm.", "The area follows."],
        ),
        # NLTK's English model (trained on news text) does not list "e.g" as an
        # abbreviation, so the paper's splitter cuts after it; we reproduce that faithfully
        (
            "Use a bound, e.g. the triangle inequality. Then conclude.",
            ["Use a bound, e.g.", "the triangle inequality.", "Then conclude."],
        ),
        # "Dr." is in the model's abbreviation list: no cut
        ("Dr. Smith checked it. Fine.", ["Dr. Smith checked it.", "Fine."]),
        # short self-interruptions are steps of their own
        (
            "So x = 2. Wait. That fails. Hmm, x = 3?",
            ["So x = 2.", "Wait.", "That fails.", "Hmm, x = 3?"],
        ),
        # inline LaTeX with periods inside stays in its sentence
        (
            "We get $x = 1.5$ and $\\frac{a}{b} = 0.5$. Done!",
            ["We get $x = 1.5$ and $\\frac{a}{b} = 0.5$.", "Done!"],
        ),
    ],
)
def test_paper_mode_on_hard_reasoning_text(text, expected):
    steps = split_steps(text)
    assert [s.text for s in steps] == expected
    assert_valid_spans(text, steps)


def test_paper_mode_spans_are_offsets_into_the_original_text():
    text = "  First.\n\n   Second one.  "
    assert split_steps(text) == [Step("First.", 2, 8), Step("Second one.", 13, 24)]


def test_paper_mode_does_not_split_at_a_bare_newline():
    # Punkt needs a sentence-ending mark; a line break alone is not one
    assert step_texts("no period here\nnext line") == ["no period here\nnext line"]


def test_numbered_lists():
    text = "Plan:\n1. Compute the sum.\n2. Divide by 4. Then round."
    # Punkt reads "1." as a sentence of its own and does not cut at the line breaks
    assert step_texts(text) == [
        "Plan:\n1.",
        "Compute the sum.",
        "2.",
        "Divide by 4.",
        "Then round.",
    ]
    # lines mode: one step per line, the list number stays with its item
    assert step_texts(text, "lines") == [
        "Plan:",
        "1. Compute the sum.",
        "2. Divide by 4.",
        "Then round.",
    ]
    assert_valid_spans(text, split_steps(text, "lines"))


@pytest.mark.parametrize("text", ["", " ", "\n\n\t  ", "\u2003\xa0"])
@pytest.mark.parametrize("mode", ["paper", "lines", "math"])
def test_empty_and_whitespace_only_give_no_steps(text, mode):
    assert split_steps(text, mode=mode) == []


def test_punkt_tokenizer_is_loaded_once():
    assert segment._punkt() is segment._punkt()


def test_unknown_mode_and_non_text_are_clear_errors():
    with pytest.raises(ValueError, match=r"unknown segmentation mode 'words'.*'lines', 'math'"):
        split_steps("x.", mode="words")
    with pytest.raises(TypeError, match="expects str, got bytes"):
        split_steps(b"x.")  # type: ignore[arg-type]


def test_registering_a_mode_makes_it_available(monkeypatch):
    monkeypatch.setitem(
        SEGMENTERS, "commas", lambda t: [i + 1 for i, c in enumerate(t) if c == ","]
    )
    assert step_texts("a, b,c", mode="commas") == ["a,", "b,", "c"]


# ------------------------------------------------------------------------------ lines mode


def test_lines_mode_splits_on_newlines_and_sentences():
    text = "Step one. Step two\nstep three\n\nStep four."
    assert step_texts(text, "lines") == ["Step one.", "Step two", "step three", "Step four."]


def test_lines_mode_keeps_display_maths_and_code_whole():
    text = (
        "Expand the square:\n"
        "$$\n(a+b)^2 = a^2 + 2ab + b^2.\nSo it holds.\n$$\n"
        "Equivalently \\[\nx = 1.\ny = 2.\n\\]\n"
        "Check with code:\n"
        "```python\nprint(1)\n\nprint(2)  # Done. Next.\n```\n"
        "All good."
    )
    steps = split_steps(text, "lines")
    assert_valid_spans(text, steps)
    assert [s.text for s in steps] == [
        "Expand the square:",
        "$$\n(a+b)^2 = a^2 + 2ab + b^2.\nSo it holds.\n$$",
        "Equivalently \\[\nx = 1.\ny = 2.\n\\]",
        "Check with code:",
        "```python\nprint(1)\n\nprint(2)  # Done. Next.\n```",
        "All good.",
    ]


def test_lines_mode_inline_display_maths_stays_inside_its_sentence():
    text = "We have $$x = 1. y = 2.$$ as claimed. Next."
    assert step_texts(text, "lines") == ["We have $$x = 1. y = 2.$$ as claimed.", "Next."]


def test_lines_mode_unclosed_blocks():
    # an unclosed fence runs to the end (as in Markdown) ...
    text = "Code:\n```\na = 1.\nb = 2."
    assert step_texts(text, "lines") == ["Code:", "```\na = 1.\nb = 2."]
    # ... an unclosed $$ is ordinary text
    assert step_texts("Cost $$5.\nDone.", "lines") == ["Cost $$5.", "Done."]


def test_protected_block_scan_is_linear_on_many_unclosed_openers():
    # 200,000 "\\[" openers and one "$$", none closed: a naive scan would search the rest
    # of the text from every opener (quadratic, ~10^11 steps)
    text = "\\[ a " * 200_000 + "$$ end"
    searches: list[int] = []

    class CountedText(str):
        """The text, counting the closer searches (each one reads the rest of the text)."""

        def find(self, sub: str, start: int | None = None, end: int | None = None) -> int:
            searches.append(1)
            # a search per opener would go on for hours: stop at the tenth
            assert len(searches) < 10, "the closer is searched for again after each opener"
            return super().find(sub, start, end)

    assert segment._protected_blocks(CountedText(text)) == []
    # one search per kind of opener that has no closer ("\\[" and "$$"), not one per opener
    assert len(searches) == 2


# ------------------------------------------------------------------------------- math mode


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a factorial is not a sentence end (Punkt cuts after "n!" and "5!": 6 pieces)
        (
            "C(n, r) = n! / (r!(n-r)!) ways. Then 5! ways remain. Done!",
            ["C(n, r) = n! / (r!(n-r)!) ways.", "Then 5! ways remain.", "Done!"],
        ),
        # nor is a decimal point
        ("x = 3.14 here. The area is 0.5.", ["x = 3.14 here.", "The area is 0.5."]),
        # the known abbreviations never end a sentence
        (
            "Use a bound, e.g. the triangle inequality. Then stop, i.e. halt. "
            "See Fig. 2 and Eq. 3 etc. and more.",
            [
                "Use a bound, e.g. the triangle inequality.",
                "Then stop, i.e. halt.",
                "See Fig. 2 and Eq. 3 etc. and more.",
            ],
        ),
        # inline maths holds full stops that are not sentence ends
        (
            "We get $x = 1. Y = 2$ here. Done \\(a. B\\) now. End.",
            ["We get $x = 1. Y = 2$ here.", "Done \\(a. B\\) now.", "End."],
        ),
        # an environment is one piece, blank lines and full stops inside included
        (
            "Then\n\n\\begin{align*}\nx &= 1 \\\\\n\n&= 2. Y\n\\end{align*}\n\nSo done.",
            ["Then", "\\begin{align*}\nx &= 1 \\\\\n\n&= 2. Y\n\\end{align*}", "So done."],
        ),
        # a line that opens with a relation continues the formula above it
        (
            "C(10, 3) = 10! / [3!(10-3)!]\n= (10*9*8) / (3*2*1)\n= 120.\nSo 120 ways.",
            ["C(10, 3) = 10! / [3!(10-3)!]\n= (10*9*8) / (3*2*1)\n= 120.", "So 120 ways."],
        ),
        # a colon at a line end introduces the formula on the next line ...
        ("Adding, we get:\nx + y = 3\nThus x = 1.", ["Adding, we get:\nx + y = 3", "Thus x = 1."]),
        # ... but a blank line always cuts
        ("Adding, we get:\n\nx + y = 3", ["Adding, we get:", "x + y = 3"]),
        # a line complete on its own (a heading) ends a step; a comma or operator does not
        ("Step 1: Count the cases\nThere are 3.", ["Step 1: Count the cases", "There are 3."]),
        ("We have a,\nb and c. Sum = 1 +\n2.", ["We have a,\nb and c.", "Sum = 1 +\n2."]),
        # a sentence may end on a one-letter variable (English Punkt reads "p." as an initial)
        (
            "Consider the prime p. Since p is odd, stop.",
            ["Consider the prime p.", "Since p is odd, stop."],
        ),
        # list items start steps and keep their enumerators
        (
            "Plan:\n1. Compute the sum.\n2. Divide by 4. Then round.\n(a) First.\n- Last item",
            [
                "Plan:",
                "1. Compute the sum.",
                "2. Divide by 4.",
                "Then round.",
                "(a) First.",
                "- Last item",
            ],
        ),
        # a word that is also an abbreviation elsewhere ("No. 5") still ends a sentence
        (
            "Is there such an n? The answer is no. So we stop.",
            ["Is there such an n?", "The answer is no.", "So we stop."],
        ),
        # a stray dollar (no closer in its paragraph) is plain text
        ("Cost $5 and\n\nthen $6. Next.", ["Cost $5 and", "then $6.", "Next."]),
    ],
)
def test_math_mode_on_hard_maths_text(text, expected):
    steps = split_steps(text, "math")
    assert [s.text for s in steps] == expected
    assert_valid_spans(text, steps)


def test_math_mode_splits_an_overlong_step_at_its_best_sentence_boundary():
    # one 1,169-character sentence of clauses joined by ";": split near its middle
    text = "; ".join(f"a_{i} + b_{i} = c_{i}" for i in range(60)) + "."
    steps = split_steps(text, "math")
    assert_valid_spans(text, steps)
    assert [len(s.text) for s in steps] == [589, 579]
    assert all(len(s.text) <= segment.MAX_STEP_CHARS for s in steps)
    assert steps[0].text.endswith("a_30 + b_30 = c_30;")
    # one long formula has no sentence boundary: it stays whole
    formula = "$" + " + ".join(f"x_{i}; y" for i in range(200)) + "$ done."
    assert step_texts(formula, "math") == [formula]


_MATHS_TEXT = st.lists(
    st.sampled_from(["a", "B", " ", ". ", "! ", "5!", "\n", "\n\n", "$", "\\(", "\\)", "x = 1. Y"]),
    max_size=60,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(_MATHS_TEXT)
def test_math_mode_never_cuts_inside_maths(text):
    steps = split_steps(text, "math")
    assert_valid_spans(text, steps)
    inside = segment._inside_any(segment._maths_spans(text))
    assert not [s.start for s in steps if inside(s.start)]


def test_math_mode_on_the_demo_store_never_cuts_maths_or_after_a_factorial():
    """Every trace of the bundled demo store: no step starts inside TeX maths, and no step
    starts right after a factorial on the same line (the paper mode does both)."""
    from legival_core.store.store import Store

    traces = Store.open("results/demo").read("traces", columns=["trace_id", "reasoning"])
    found = {"paper": [0, 0], "math": [0, 0]}
    for mode, counts in found.items():
        for text in traces["reasoning"].fillna("").astype(str):
            inside = segment._inside_any(segment._maths_spans(text))
            for step in split_steps(text, mode)[1:]:
                end = segment._run_start(text, step.start)
                counts[0] += inside(step.start)
                on_one_line = "\n" not in text[end : step.start]
                counts[1] += on_one_line and segment._after_factorial(text, end)
    assert found["math"] == [0, 0]
    assert found["paper"][0] > 0 and found["paper"][1] > 60  # what the issue saw


# ---------------------------------------------------------------------- properties and size

# Text made of the characters that matter to the splitters: sentence marks, digits,
# newlines and odd whitespace, LaTeX and fence delimiters, capitals after periods.
_ALPHABET = st.sampled_from(
    [*"aA bB.?!\n\t3,$`\\[]()e", "\u2003", "\xa0", "\r\n", "Dr.", "e.g.", "Wait. ", "```", "$$"]
)
_TEXT = st.lists(_ALPHABET, max_size=120).map("".join)


@settings(max_examples=150, deadline=None)
@given(_TEXT, st.sampled_from(sorted(SEGMENTERS)))
def test_spans_cover_the_text_for_any_input(text, mode):
    assert_valid_spans(text, split_steps(text, mode))


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=200), st.sampled_from(sorted(SEGMENTERS)))
def test_spans_cover_arbitrary_unicode(text, mode):
    assert_valid_spans(text, split_steps(text, mode))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["paper", "lines", "math"])
def test_one_megabyte_trace_finishes_and_is_covered(mode):
    unit = (
        "Let me compute 3.14 * 2 = 6.28. Wait, that is the diameter, e.g. for r = 1.\n"
        "$$\nA = \\pi r^2.\n$$\n"
        "Hmm. So the answer is 3.14!\n"
    )
    text = unit * (1_000_000 // len(unit) + 1)
    assert len(text) >= 1_000_000
    # No clock here: the run's time limit (pytest-timeout, 600 s) is the bound. A split that
    # went back over the text per step (~25,000 steps of 1 MB) would not finish inside it; the
    # linear one takes seconds.
    steps = split_steps(text, mode)
    assert_valid_spans(text, steps)
    assert len(steps) > 20_000


@pytest.mark.parametrize("mode", ["paper", "math"])
def test_a_long_trace_is_not_cut_short_by_nltks_regex_time_limit(mode, monkeypatch):
    # NLTK 3.10+ stops a regular-expression scan after nltk.redos.DEFAULT_TIMEOUT seconds, and
    # Punkt scans a whole text at once: a 1 MB trace failed with TimeoutError in CI on a busy
    # 2-core machine. With the limit at 1 ms (a stand-in for a machine slow enough), 200,000
    # characters take Punkt far longer; the segmenter raises the limit to 60 s a million
    # characters of what Punkt scans at once (the whole text in paper mode: 12 s here; a
    # stretch between line cuts in maths mode) and the trace is split.
    redos = pytest.importorskip("nltk.redos", reason="NLTK before 3.10 has no time limit")
    monkeypatch.setattr(redos, "DEFAULT_TIMEOUT", 0.001)
    unit = "Let me compute 3.14 * 2 = 6.28. Wait, that is the diameter.\nSo the answer is 3.14!\n"
    text = unit * (200_000 // len(unit) + 1)
    steps = split_steps(text, mode)
    assert_valid_spans(text, steps)
    assert len(steps) >= 200_000 // len(unit)
    raised = redos.DEFAULT_TIMEOUT
    assert raised > 0.001
    if mode == "paper":
        assert pytest.approx(60.0 * len(text) / 1e6) == raised
