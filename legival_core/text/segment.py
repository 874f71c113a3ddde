"""Reasoning text → steps (sentences) with exact character spans.

A *step* is one sentence of a trace's reasoning (docs/metrics/index.md#steps). Every splitter
returns spans
that

* are in order and do not overlap,
* satisfy ``text[step.start:step.end] == step.text``,
* start and end on a non-whitespace character, and
* together cover every non-whitespace character of the text.

The spans are made so by construction: a splitter only proposes *cut points*; the text
between consecutive cuts becomes a step after trimming whitespace, and empty pieces are
dropped. Nothing of the text is ever lost or rewritten, so rollout prefixes can be taken
as exact character slices of the original reasoning.

Modes (a registry, :data:`SEGMENTERS`):

``paper`` **[default]**
    NLTK's Punkt sentence tokenizer for English, as in Legi-Val (arXiv 2603.20508).
    A line break alone never ends a sentence for Punkt.
``lines``
    Punkt within each line, plus a cut at every newline — except inside display maths
    (``$$…$$``, ``\\[…\\]``) and fenced code blocks, which are never cut.
    A list number at the start of a line ("2.", "b)") stays with its item.

Punkt's tables come from :func:`legival_core.store.assets.ensure_punkt` (no download).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SEGMENTERS",
    "Step",
    "register_segmenter",
    "split_steps",
    "step_texts",
]


@dataclass(frozen=True)
class Step:
    """One step of a trace: its text and its half-open char span ``[start, end)``."""

    text: str
    start: int
    end: int


#: A segmenter maps the text to sorted cut points in ``0..len(text)``.
Segmenter = Callable[[str], Iterable[int]]

SEGMENTERS: dict[str, Segmenter] = {}


def register_segmenter(name: str) -> Callable[[Segmenter], Segmenter]:
    """Decorator: make a cut-point function available as ``split_steps(mode=name)``."""

    def add(func: Segmenter) -> Segmenter:
        SEGMENTERS[name] = func
        return func

    return add


@functools.lru_cache(maxsize=4)
def _punkt(language: str = "english") -> Any:
    """NLTK's Punkt tokenizer, loaded once per process from the offline tables."""
    from nltk.tokenize.punkt import PunktTokenizer

    from legival_core.store.assets import ensure_punkt

    ensure_punkt(language)
    return PunktTokenizer(language)


def _punkt_cuts(text: str, offset: int = 0) -> list[int]:
    """Start offsets of Punkt's sentences (after the first) in ``text``, shifted by offset."""
    if not text.strip():
        return []
    return [offset + start for start, _ in _punkt().span_tokenize(text)][1:]


@register_segmenter("paper")
def _paper_cuts(text: str) -> list[int]:
    return _punkt_cuts(text)


# Openers of blocks that the `lines` mode never splits, and their closers.
_BLOCK_DELIMITERS = {"```": "```", "$$": "$$", "\\[": "\\]"}
_BLOCK_OPENER = re.compile("|".join(re.escape(opener) for opener in _BLOCK_DELIMITERS))


def _protected_blocks(text: str) -> list[tuple[int, int]]:
    """Spans of fenced code and display-maths blocks, left to right, non-overlapping.

    An unclosed code fence runs to the end of the text (as in Markdown); an unclosed
    ``$$`` or ``\\[`` is plain text. Linear time: once a closer is known to be absent
    after some position, later openers of the same kind are not searched again.
    """
    blocks: list[tuple[int, int]] = []
    no_closer_after: dict[str, int] = {}
    position = 0
    while True:
        match = _BLOCK_OPENER.search(text, position)
        if match is None:
            return blocks
        opener = match.group()
        closer = _BLOCK_DELIMITERS[opener]
        if match.end() >= no_closer_after.get(opener, len(text) + 1):
            position = match.start() + 1
            continue
        close_at = text.find(closer, match.end())
        if close_at < 0:
            no_closer_after[opener] = match.end()
            if opener == "```":
                blocks.append((match.start(), len(text)))
                return blocks
            position = match.start() + 1
            continue
        blocks.append((match.start(), close_at + len(closer)))
        position = close_at + len(closer)


@register_segmenter("lines")
def _lines_cuts(text: str) -> list[int]:
    blocks = _protected_blocks(text)
    inside = _inside_any(blocks)
    # Regions between newlines that lie outside every protected block.
    newlines = [i for i in _newline_positions(text) if not inside(i)]
    cuts: list[int] = []
    region_start = 0
    for end in [*newlines, len(text)]:
        region = text[region_start:end]
        # Punkt ends a sentence after a list number ("1."); keep "1. Compute x." together.
        marker = _LIST_MARKER.match(region)
        after_marker = region_start + marker.end() if marker else -1
        cuts.append(region_start)
        cuts.extend(
            c for c in _punkt_cuts(region, region_start) if not inside(c) and c != after_marker
        )
        region_start = end + 1
    return cuts


_LIST_MARKER = re.compile(r"\s*(?:\d{1,3}|[A-Za-z])[.)]\s+")


def _newline_positions(text: str) -> list[int]:
    return [match.start() for match in re.finditer("\n", text)]


def _inside_any(blocks: list[tuple[int, int]]) -> Callable[[int], bool]:
    """Predicate: is a cut at ``position`` strictly inside one of the sorted blocks?"""
    starts = [start for start, _ in blocks]

    def inside(position: int) -> bool:
        index = bisect.bisect_right(starts, position) - 1
        return index >= 0 and blocks[index][0] < position < blocks[index][1]

    return inside


def split_steps(text: str, mode: str = "paper") -> list[Step]:
    """Split reasoning text into steps with exact character spans.

    Args:
        text: the reasoning text of one trace (untrusted model output; any size).
        mode: a key of :data:`SEGMENTERS` — ``"paper"`` (Punkt) or ``"lines"``.

    Returns:
        The steps in order; ``[]`` for empty or whitespace-only text.

    Reference: Legi-Val, arXiv 2603.20508, §efficiency (steps = Punkt sentences).

    >>> [s.text for s in split_steps("x = 3.14 here. Wait. Is that right?")]
    ['x = 3.14 here.', 'Wait.', 'Is that right?']
    >>> split_steps("  Hi there.  ")
    [Step(text='Hi there.', start=2, end=11)]
    >>> [s.text for s in split_steps("a\\n$$x\\ny$$\\nb", mode="lines")]
    ['a', '$$x\\ny$$', 'b']
    """
    if not isinstance(text, str):
        raise TypeError(f"split_steps expects str, got {type(text).__name__}")
    try:
        segmenter = SEGMENTERS[mode]
    except KeyError:
        raise ValueError(
            f"unknown segmentation mode {mode!r}; choose one of {sorted(SEGMENTERS)}"
        ) from None
    cuts = sorted({0, len(text), *(c for c in segmenter(text) if 0 <= c <= len(text))})
    steps: list[Step] = []
    for left, right in itertools.pairwise(cuts):
        piece = text[left:right]
        stripped = piece.strip()
        if stripped:
            start = left + (len(piece) - len(piece.lstrip()))
            steps.append(Step(stripped, start, start + len(stripped)))
    return steps


def step_texts(text: str, mode: str = "paper") -> list[str]:
    """Just the texts of :func:`split_steps` (what embedding and judging need).

    >>> step_texts("One. Two.")
    ['One.', 'Two.']
    """
    return [step.text for step in split_steps(text, mode)]
