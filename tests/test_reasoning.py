"""Reasoning / answer split for every registered model output format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legival_core.text.reasoning import (
    REASONING_FORMATS,
    ParsedOutput,
    detect_reasoning_format,
    parse_reasoning,
)

HARMONY = (
    "<|channel|>analysis<|message|>We need 2+2. That is 4.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>The answer is 4.<|return|>"
)


def test_think_block_then_answer() -> None:
    parsed = parse_reasoning("<think>\nAdd them: 4.\n</think>\n\nThe answer is \\boxed{4}.")
    assert parsed == ParsedOutput("Add them: 4.", "The answer is \\boxed{4}.", True, "think")


def test_think_opened_by_the_template_has_only_the_closing_tag() -> None:
    parsed = parse_reasoning("Let me add: 4.\n</think>\nFinal: 4", family="deepseek-r1")
    assert parsed == ParsedOutput("Let me add: 4.", "Final: 4", True, "think")
    assert parse_reasoning("Let me add: 4.\n</think>\nFinal: 4").family == "think"


def test_unclosed_think_is_incomplete_and_keeps_everything_after_the_tag() -> None:
    parsed = parse_reasoning("<think>Step one. Step two, wait", family="qwen3")
    assert parsed == ParsedOutput("Step one. Step two, wait", "", False, "think")


def test_think_family_without_any_tag_started_inside_and_never_closed() -> None:
    parsed = parse_reasoning("Budget ran out mid-thought", family="qwq")
    assert parsed == ParsedOutput("Budget ran out mid-thought", "", False, "think")


def test_closing_tag_is_searched_after_the_opening_one() -> None:
    parsed = parse_reasoning("</think> stray <think>real</think>answer", family="think")
    assert (parsed.reasoning, parsed.answer_text, parsed.complete) == ("real", "answer", True)


def test_harmony_analysis_then_final() -> None:
    parsed = parse_reasoning(HARMONY)
    assert parsed == ParsedOutput("We need 2+2. That is 4.", "The answer is 4.", True, "harmony")


def test_harmony_several_analysis_messages_and_a_tool_call_channel() -> None:
    raw = (
        "<|channel|>analysis<|message|>First idea.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.calc <|constrain|>json"
        '<|message|>{"x": 1}<|call|>'
        "<|start|>assistant<|channel|>analysis<|message|>Second idea.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Done.<|return|>"
    )
    parsed = parse_reasoning(raw, family="gpt-oss")
    assert parsed == ParsedOutput("First idea.\n\nSecond idea.", "Done.", True, "harmony")


def test_harmony_cut_off_inside_analysis_is_incomplete() -> None:
    parsed = parse_reasoning("<|channel|>analysis<|message|>Still thinking about")
    assert parsed == ParsedOutput("Still thinking about", "", False, "harmony")


def test_harmony_closed_analysis_without_final_is_complete() -> None:
    parsed = parse_reasoning("<|channel|>analysis<|message|>Thought.<|end|>", family="harmony")
    assert (parsed.reasoning, parsed.answer_text, parsed.complete) == ("Thought.", "", True)


def test_harmony_decoded_without_special_tokens() -> None:
    parsed = parse_reasoning("analysisWe need 2+2 = 4.assistantfinalThe answer is 4.")
    assert parsed == ParsedOutput("We need 2+2 = 4.", "The answer is 4.", True, "harmony")
    cut = parse_reasoning("analysisWe need 2+2", family="harmony")
    assert (cut.reasoning, cut.complete) == ("We need 2+2", False)


def test_magistral_think_tags() -> None:
    parsed = parse_reasoning("[THINK]Try x=2. Works.[/THINK]\\boxed{2}")
    assert parsed == ParsedOutput("Try x=2. Works.", "\\boxed{2}", True, "magistral")
    unclosed = parse_reasoning("[THINK]Try x=2", family="magistral")
    assert unclosed == ParsedOutput("Try x=2", "", False, "magistral")


def test_no_think_block_reasoning_is_the_whole_output() -> None:
    parsed = parse_reasoning("  First 2+2=4.\nSo \\boxed{4}.  ")
    assert parsed == ParsedOutput(
        "First 2+2=4.\nSo \\boxed{4}.", "First 2+2=4.\nSo \\boxed{4}.", True, "none"
    )
    assert parse_reasoning("<think>x</think>y", family="none").reasoning == "<think>x</think>y"


@pytest.mark.parametrize(
    ("raw", "family"),
    [
        (HARMONY, "harmony"),
        ("[THINK]a[/THINK]b", "magistral"),
        ("<think>a</think>b", "think"),
        ("a</think>b", "think"),
        ("plain text", "none"),
    ],
)
def test_auto_detection(raw: str, family: str) -> None:
    assert detect_reasoning_format(raw) == family
    assert parse_reasoning(raw).family == family


def test_unknown_family_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown reasoning format 'llama'; known: auto, "):
        parse_reasoning("x", family="llama")


def test_non_string_output_is_rejected_clearly() -> None:
    with pytest.raises(TypeError, match="must be a string, got NoneType"):
        parse_reasoning(None)  # type: ignore[arg-type]


_MARKUP = st.sampled_from(
    [
        "<think>",
        "</think>",
        "[THINK]",
        "[/THINK]",
        "<|channel|>",
        "analysis",
        "final",
        "<|message|>",
        "<|end|>",
        "<|start|>",
        "assistantfinal",
        "<|return|>",
        " ",
        "x",
        "\n",
    ]
)


@given(
    pieces=st.lists(_MARKUP | st.text(max_size=5), max_size=20),
    family=st.sampled_from(["auto", *REASONING_FORMATS]),
)
def test_parse_never_raises_and_parts_come_from_the_raw_text(
    pieces: list[str], family: str
) -> None:
    raw = "".join(pieces)
    parsed = parse_reasoning(raw, family=family)
    assert isinstance(parsed.complete, bool)
    if parsed.family != "harmony":  # harmony joins several analysis messages
        assert parsed.reasoning in raw
    assert parsed.answer_text in raw or "\n\n" in parsed.answer_text
