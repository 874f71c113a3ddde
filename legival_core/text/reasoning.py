"""Split a model's raw output into its reasoning and its final answer text.

Reasoning models mark their thinking in different ways; each way is a registered
:class:`ReasoningFormat`:

- ``think``: ``<think>…</think>`` then the answer (DeepSeek-R1, Qwen3, QwQ). When the chat
  template already opened ``<think>``, the output starts inside the block and only the closing
  tag appears.
- ``harmony``: gpt-oss channels, ``<|channel|>analysis<|message|>…<|end|>`` then
  ``<|start|>assistant<|channel|>final<|message|>…``. Decoding with special tokens skipped turns
  this into ``analysis…assistantfinal…``, which is read too.
- ``magistral``: ``[THINK]…[/THINK]`` then the answer (Mistral's Magistral).
- ``none``: no think block; the reasoning is the whole output and so is the answer text.

A block that was opened and never closed (the budget ran out) gives ``complete=False`` with the
reasoning = everything after the opening tag and an empty answer. The caller keeps the raw
output (``traces.raw``); this module only reads it.

Reference: Legi-Val, arXiv 2603.20508 (docs/grading.md: reasoning is parsed out of the think block).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

AUTO = "auto"


@dataclass(frozen=True)
class ParsedOutput:
    """Reasoning and answer parts of one raw model output.

    Attributes:
        reasoning: the thinking text (stripped of surrounding whitespace).
        answer_text: what the model wrote after its reasoning ("" if it never got there).
        complete: False when a reasoning block was opened and never closed.
        family: the name of the format that parsed it.
    """

    reasoning: str
    answer_text: str
    complete: bool
    family: str


class ReasoningFormat(ABC):
    """One way of marking reasoning in model output."""

    name: ClassVar[str]

    @abstractmethod
    def detect(self, raw: str) -> bool:
        """True when ``raw`` clearly uses this format (used by ``family="auto"``)."""

    @abstractmethod
    def parse(self, raw: str) -> ParsedOutput:
        """Split ``raw``; must accept any text, including text without this format's markers."""


class TagPairFormat(ReasoningFormat):
    """Reasoning between an opening and a closing tag, the answer after the closing tag."""

    open_tag: ClassVar[str]
    close_tag: ClassVar[str]

    def detect(self, raw: str) -> bool:
        return self.open_tag in raw or self.close_tag in raw

    def parse(self, raw: str) -> ParsedOutput:
        open_at = raw.find(self.open_tag)
        close_at = raw.find(self.close_tag, open_at + len(self.open_tag) if open_at >= 0 else 0)
        if open_at >= 0 and close_at >= 0:
            reasoning = raw[open_at + len(self.open_tag) : close_at]
            return self._parsed(reasoning, raw[close_at + len(self.close_tag) :], True)
        if open_at >= 0:
            return self._parsed(raw[open_at + len(self.open_tag) :], "", False)
        if close_at >= 0:
            # The template opened the block, so the output begins inside it.
            return self._parsed(raw[:close_at], raw[close_at + len(self.close_tag) :], True)
        # Asked for explicitly but no tag at all: the output started inside a block the
        # template opened and never left it.
        return self._parsed(raw, "", False)

    def _parsed(self, reasoning: str, answer: str, complete: bool) -> ParsedOutput:
        return ParsedOutput(reasoning.strip(), answer.strip(), complete, self.name)


class ThinkTagFormat(TagPairFormat):
    name: ClassVar[str] = "think"
    open_tag: ClassVar[str] = "<think>"
    close_tag: ClassVar[str] = "</think>"


class MagistralFormat(TagPairFormat):
    name: ClassVar[str] = "magistral"
    open_tag: ClassVar[str] = "[THINK]"
    close_tag: ClassVar[str] = "[/THINK]"


# One harmony message: channel name (plus optional recipient / constraint), then its content up
# to an end marker or the end of the text.
_HARMONY_MESSAGE = re.compile(
    r"<\|channel\|>(?P<channel>\w+)[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>"
    r"(?P<content>.*?)(?P<end><\|end\|>|<\|return\|>|<\|call\|>|<\|start\|>|$)",
    re.DOTALL,
)
# The same output decoded without special tokens: "analysis…assistantfinal…".
_HARMONY_PLAIN = re.compile(r"^\s*analysis(?P<analysis>.*?)(?:assistantfinal(?P<final>.*))?$", re.S)


class HarmonyFormat(ReasoningFormat):
    name: ClassVar[str] = "harmony"

    def detect(self, raw: str) -> bool:
        if "<|channel|>" in raw:
            return True
        return raw.lstrip().startswith("analysis") and "assistantfinal" in raw

    def parse(self, raw: str) -> ParsedOutput:
        if "<|channel|>" not in raw:
            return self._parse_plain(raw)
        analysis: list[str] = []
        finals: list[str] = []
        analysis_closed = True
        for message in _HARMONY_MESSAGE.finditer(raw):
            channel, content = message.group("channel"), message.group("content")
            if channel == "final":
                finals.append(content)
            elif channel == "analysis":
                analysis.append(content.strip())
                analysis_closed = message.group("end") != ""
        complete = bool(finals) or (bool(analysis) and analysis_closed)
        return ParsedOutput(
            "\n\n".join(part for part in analysis if part),
            "\n\n".join(final.strip() for final in finals),
            complete,
            self.name,
        )

    def _parse_plain(self, raw: str) -> ParsedOutput:
        match = _HARMONY_PLAIN.match(raw)
        if match is None:
            return ParsedOutput(raw.strip(), "", False, self.name)
        final = match.group("final")
        return ParsedOutput(
            match.group("analysis").strip(),
            (final or "").strip(),
            final is not None,
            self.name,
        )


class NoReasoningBlockFormat(ReasoningFormat):
    """Models without a think block: the whole output is both the reasoning and the answer."""

    name: ClassVar[str] = "none"

    def detect(self, raw: str) -> bool:
        return True

    def parse(self, raw: str) -> ParsedOutput:
        text = raw.strip()
        return ParsedOutput(text, text, True, self.name)


REASONING_FORMATS: dict[str, ReasoningFormat] = {}
# Other names people use for a format (model families).
REASONING_FORMAT_ALIASES: dict[str, str] = {
    "deepseek-r1": "think",
    "qwen3": "think",
    "qwq": "think",
    "gpt-oss": "harmony",
    "mistral": "magistral",
}
# Auto-detection order: most specific markers first; "none" always matches, so it comes last.
_DETECTION_ORDER: list[str] = []


def register_reasoning_format(fmt: ReasoningFormat) -> ReasoningFormat:
    """Add a format to the registry (and to auto-detection, before ``none``)."""
    REASONING_FORMATS[fmt.name] = fmt
    if fmt.name not in _DETECTION_ORDER:
        position = _DETECTION_ORDER.index("none") if "none" in _DETECTION_ORDER else None
        if position is None:
            _DETECTION_ORDER.append(fmt.name)
        else:
            _DETECTION_ORDER.insert(position, fmt.name)
    return fmt


for _format in (HarmonyFormat(), MagistralFormat(), ThinkTagFormat(), NoReasoningBlockFormat()):
    register_reasoning_format(_format)


def detect_reasoning_format(raw: str) -> str:
    """The name of the first registered format whose markers appear in ``raw``.

    Example:
        >>> detect_reasoning_format("plan</think>42")
        'think'
    """
    return next(name for name in _DETECTION_ORDER if REASONING_FORMATS[name].detect(raw))


def parse_reasoning(raw: str, family: str = AUTO) -> ParsedOutput:
    """Split ``raw`` model output into reasoning and answer text.

    Args:
        raw: the model's output, special tokens kept where the format needs them (harmony).
        family: a format name (``think``, ``harmony``, ``magistral``, ``none``), an alias
            (``deepseek-r1``, ``qwen3``, ``qwq``, ``gpt-oss``) or ``"auto"`` to detect it.

    Returns:
        A :class:`ParsedOutput`; ``complete`` is False when a block was left open.

    Example:
        >>> parsed = parse_reasoning("<think>2+2 is 4</think>The answer is 4.")
        >>> parsed.reasoning, parsed.answer_text, parsed.complete, parsed.family
        ('2+2 is 4', 'The answer is 4.', True, 'think')
        >>> parse_reasoning("<think>still going", family="qwen3").complete
        False
    """
    if not isinstance(raw, str):
        raise TypeError(f"raw model output must be a string, got {type(raw).__name__}")
    key = family.lower()
    name = detect_reasoning_format(raw) if key == AUTO else REASONING_FORMAT_ALIASES.get(key, key)
    try:
        fmt = REASONING_FORMATS[name]
    except KeyError:
        known = ", ".join([AUTO, *sorted(REASONING_FORMATS), *sorted(REASONING_FORMAT_ALIASES)])
        raise ValueError(f"unknown reasoning format {family!r}; known: {known}") from None
    return fmt.parse(raw)
