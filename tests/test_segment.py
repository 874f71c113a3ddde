"""Steps: Punkt sentences with exact spans, and the `lines` mode."""

from __future__ import annotations

import time

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
def test_empty_and_whitespace_only_give_no_steps(text):
    assert split_steps(text) == []
    assert split_steps(text, mode="lines") == []


def test_punkt_tokenizer_is_loaded_once():
    assert segment._punkt() is segment._punkt()


def test_unknown_mode_and_non_text_are_clear_errors():
    with pytest.raises(ValueError, match=r"unknown segmentation mode 'words'.*'lines', 'paper'"):
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
    started = time.perf_counter()
    assert segment._protected_blocks(text) == []
    assert time.perf_counter() - started < 5


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


@pytest.mark.parametrize("mode", ["paper", "lines"])
def test_one_megabyte_trace_finishes_and_is_covered(mode):
    unit = (
        "Let me compute 3.14 * 2 = 6.28. Wait, that is the diameter, e.g. for r = 1.\n"
        "$$\nA = \\pi r^2.\n$$\n"
        "Hmm. So the answer is 3.14!\n"
    )
    text = unit * (1_000_000 // len(unit) + 1)
    assert len(text) >= 1_000_000
    started = time.perf_counter()
    steps = split_steps(text, mode)
    elapsed = time.perf_counter() - started
    assert_valid_spans(text, steps)
    assert len(steps) > 20_000
    assert elapsed < 120, f"{mode}: {elapsed:.1f} s for 1 MB"
