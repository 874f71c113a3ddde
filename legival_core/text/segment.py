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

``paper``
    NLTK's Punkt sentence tokenizer for English, as in Legi-Val (arXiv 2603.20508).
    A line break alone never ends a sentence for Punkt. The default of :func:`split_steps`
    and of the ``release`` profile (the authors' released scripts).
``lines``
    Punkt within each line, plus a cut at every newline — except inside display maths
    (``$$…$$``, ``\\[…\\]``) and fenced code blocks, which are never cut.
    A list number at the start of a line ("2.", "b)") stays with its item.
``math`` **[the pipeline's default under the paper profile]**
    Steps as a reader of maths cuts them (the rubric of ``tests/fixtures/
    segmentation_labels.md``, docs/metrics/steps.md): sentences (Punkt with maths
    abbreviations), every blank line, every list item, and a line break after a line
    complete on its own; never inside ``$…$``, ``$$…$$``, ``\\(…\\)``, ``\\[…\\]``,
    ``\\begin…\\end`` or code, never after a factorial, an abbreviation or a list number,
    and not before a line that continues a formula ("= 120") or after one that introduces it
    ("we get:"). A step longer than :data:`MAX_STEP_CHARS` is split at its best sentence
    boundary.

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
    "MATH_ABBREVIATIONS",
    "MAX_STEP_CHARS",
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


#: NLTK 3.10 and later stop each of their regular-expression scans after a wall-clock limit
#: (``nltk.redos.DEFAULT_TIMEOUT``, 5 s) against catastrophic backtracking; Punkt scans the whole
#: text in one such scan, so a long trace on a slow or busy machine failed although its time
#: grows only linearly (1 MB: 2.5 s alone on a 2-core AMD EPYC, over 5 s beside other work).
#: The limit is raised to this many seconds a million characters for Punkt's scans (never
#: lowered): still a bound, but one that grows with the text.
PUNKT_SECONDS_PER_MILLION_CHARACTERS = 60.0


def punkt_spans(tokenizer: Any, text: str) -> list[tuple[int, int]]:
    """``tokenizer.span_tokenize(text)`` with NLTK's regular-expression time limit at least
    :data:`PUNKT_SECONDS_PER_MILLION_CHARACTERS` per million characters of ``text``.

    >>> punkt_spans(_punkt(), "One. Two.")
    [(0, 4), (5, 9)]
    """
    try:
        from nltk import redos
    except ImportError:  # NLTK before 3.10 has no time limit
        return list(tokenizer.span_tokenize(text))
    needed = PUNKT_SECONDS_PER_MILLION_CHARACTERS * len(text) / 1e6
    current = redos.DEFAULT_TIMEOUT
    if current is not None and current < needed:
        # raised for the process, never put back: another thread's scan may be under way
        redos.DEFAULT_TIMEOUT = needed
    return list(tokenizer.span_tokenize(text))


def _punkt_cuts(text: str, offset: int = 0) -> list[int]:
    """Start offsets of Punkt's sentences (after the first) in ``text``, shifted by offset."""
    if not text.strip():
        return []
    return [offset + start for start, _ in punkt_spans(_punkt(), text)][1:]


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


# ---------------------------------------------------------------------------------- math mode

#: Longest step the ``math`` mode leaves whole, in characters (about 200 cl100k tokens of
#: English, fewer of LaTeX): a longer step is split at its best sentence boundary
#: (:func:`_cap_cuts`). Steps of the hand-segmented passages are at most 264 characters.
MAX_STEP_CHARS = 800

#: Abbreviations after which the ``math`` mode never ends a sentence (lowercase, no final dot).
#: Only forms that are not also ordinary words at a sentence end ("the answer is no."): "no"
#: for "number" is left out.
MATH_ABBREVIATIONS = (
    "e.g",
    "i.e",
    "etc",
    "vs",
    "cf",
    "resp",
    "fig",
    "figs",
    "eq",
    "eqs",
    "approx",
    "thm",
    "lem",
    "prop",
    "def",
    "cor",
    "sec",
    "ch",
    "w.r.t",
    "s.t",
    "et al",
    "ca",
    "viz",
)
_ABBREVIATION_END = re.compile(
    r"(?<![^\s(\[{\"'“‘])(?:"
    + "|".join(re.escape(a).replace(r"\ ", r"\s+") for a in MATH_ABBREVIATIONS)
    + r")\.$",
    re.IGNORECASE,
)
# Delimiters of inline and display maths and of code, scanned left to right by
# :func:`_maths_spans`: each opener's closer, and whether the span may hold a blank line.
_MATH_OPENER = re.compile(r"```|\$\$|\\\[|\\\(|\\begin\{([^{}\n]{1,40})\}|(?<!\\)\$")
#: A line that continues the formula above it opens with a relation ("= 120", "≥ 0", "&= x").
_RELATION_START = re.compile(
    r"\s*&?\s*(?:=|≠|≤|≥|<|>|≈|≡|∼|~|→|⇒|⟹|⇔|⟺|\\(?:le|ge|leq|geq|neq|approx|equiv|sim|to|"
    r"implies|iff|Rightarrow|Longrightarrow|Leftrightarrow|cdot|times)\b)"
)
#: A list item at the start of a line: "1.", "2)", "(a)", "b)", "-", "*", "•".
_ITEM_START = re.compile(r"\s*(?:\(?(?:\d{1,3}|[A-Za-z]|[ivx]{1,4})[.)]|[-*•+])\s+\S")
#: A line that cannot end a step: it ends with a colon introducing a formula, an opening
#: bracket, a comma or a binary operator (the formula or sentence goes on on the next line).
_OPEN_LINE_END = re.compile(r"(?:[:,({\[]|[-+*/=<>≤≥≈&]|\\\\|\\(?:cdot|times))\s*$")


@functools.lru_cache(maxsize=1)
def _math_punkt() -> Any:
    """Punkt with the maths abbreviations added and single letters removed.

    English Punkt reads single letters ("c.", "d.", "e." …) as initials, so a sentence that
    ends on a variable ("… the prime factorization of p. Since …") is not cut; in maths
    text a single letter before a full stop is a variable far more often than an initial.
    A separate instance, so the ``paper`` mode's Punkt stays the paper's.
    """
    from nltk.tokenize.punkt import PunktTokenizer

    from legival_core.store.assets import ensure_punkt

    ensure_punkt("english")
    tokenizer = PunktTokenizer("english")
    params = tokenizer._params
    params.abbrev_types = {a for a in params.abbrev_types if len(a) > 1} | {
        a for a in MATH_ABBREVIATIONS if " " not in a
    }
    return tokenizer


def _maths_spans(text: str) -> list[tuple[int, int]]:
    """Spans of maths and code that no step boundary may fall inside, left to right.

    ``$…$`` and ``\\(…\\)`` end at their closer within the paragraph (a blank line before
    the closer means the opener was a stray dollar or an unclosed bracket: plain text);
    ``$$…$$``, ``\\[…\\]`` and ``\\begin{env}…\\end{env}`` may hold blank lines; an unclosed
    code fence runs to the end (as in Markdown), any other unclosed opener is plain text.
    Linear time: the next closer of each kind is searched for once and reused until the scan
    passes it, and blank lines are looked up by bisection.

    >>> text = "So $x = 1. y$ and \\[a. b\\] end."
    >>> [text[a:b] for a, b in _maths_spans(text)]
    ['$x = 1. y$', '\\\\[a. b\\\\]']
    """
    spans: list[tuple[int, int]] = []
    blanks = [match.start() for match in re.finditer(r"\n[ \t\r\f\v]*\n", text)]
    # closer -> (searched from, found at or -1): a later search from a position in between
    # finds the same closer.
    found: dict[str, tuple[int, int]] = {}

    def next_closer(closer: str, start: int) -> int:
        searched_from, at = found.get(closer, (-1, -1))
        if searched_from != -1 and searched_from <= start and (at == -1 or start <= at):
            return at
        at = text.find(closer, start)
        found[closer] = (start, at)
        return at

    position = 0
    while True:
        match = _MATH_OPENER.search(text, position)
        if match is None:
            return spans
        opener = match.group()
        if match.group(1) is not None:
            closer = f"\\end{{{match.group(1)}}}"
        else:
            closer = {"```": "```", "$$": "$$", "\\[": "\\]", "\\(": "\\)", "$": "$"}[opener]
        close_at = next_closer(closer, match.end())
        if close_at >= 0 and closer in ("$", "\\)"):
            first_blank = bisect.bisect_left(blanks, match.end())
            if first_blank < len(blanks) and blanks[first_blank] < close_at:
                close_at = -1  # not closed within its paragraph
        if close_at < 0:
            if opener == "```":
                spans.append((match.start(), len(text)))
                return spans
            position = match.end()
            continue
        spans.append((match.start(), close_at + len(closer)))
        position = close_at + len(closer)


def _is_factorial(text: str, bang: int) -> bool:
    """Is the "!" at ``bang`` a factorial ("5!", "n!", "(n-r)!", "k!!") rather than an
    exclamation? A factorial follows a digit, a closing bracket, another "!" or a lone letter."""
    if bang <= 0:
        return False
    before = text[bang - 1]
    if before.isdigit() or before in ")]}!":
        return True
    lone = before.isalpha() and (bang < 2 or not text[bang - 2].isalpha())
    return lone


def _line_break_cuts(text: str, inside: Callable[[int], bool]) -> list[int]:
    """Cuts at line breaks: always at a blank line; at a single line break when the line
    above is complete on its own (not ending on a colon, comma, bracket or operator) and the
    line below does not continue a formula (opens with a relation); a list item always
    starts a step. Never inside maths or code."""
    cuts: list[int] = []
    for match in re.finditer(r"\n[ \t\r\f\v]*", text):
        start, after = match.start(), match.end()
        if after >= len(text) or text[after] == "\n" or inside(start):
            continue  # the next break of the run decides
        blank = text.count("\n", _run_start(text, start), after) >= 2
        line_end = text.rfind("\n", 0, start)
        above = text[line_end + 1 : start]
        below_end = text.find("\n", after)
        below = text[after : below_end if below_end >= 0 else len(text)]
        complete = not _OPEN_LINE_END.search(above) and not _RELATION_START.match(below)
        if blank or _ITEM_START.match(below) or complete:
            cuts.append(after)
    return cuts


def _run_start(text: str, position: int) -> int:
    """Start of the whitespace run that holds ``position``."""
    while position > 0 and text[position - 1].isspace():
        position -= 1
    return position


def _after_factorial(text: str, end: int) -> bool:
    """Does ``text[:end]`` end on a factorial, maybe followed by closing brackets ("n!", "5!)")?"""
    position = end - 1
    while position > 0 and text[position] in ")]}":
        position -= 1
    return text[position] == "!" and _is_factorial(text, position)


#: Longest stretch of text handed to Punkt at once by the ``math`` mode: whole lines are
#: packed into windows up to this size, and a longer line is cut after a ". " near the limit
#: (NLTK bounds each regular-expression scan by a wall-clock limit, which a megabyte of dense
#: sentences can exceed; one call per line would be slow on many short lines).
PUNKT_WINDOW = 20_000


def _punkt_windows(text: str, lines: list[int]) -> Iterable[tuple[int, int]]:
    """``(start, end)`` of the stretches Punkt reads: consecutive lines (between line-break
    cuts) packed up to :data:`PUNKT_WINDOW` characters, a longer line split after a ". "."""
    left = 0
    for cut in [*lines, len(text)]:
        if cut - left <= PUNKT_WINDOW:
            continue
        # Close the window at the last line cut that keeps it short enough, if any.
        index = bisect.bisect_right(lines, left + PUNKT_WINDOW) - 1
        if index >= 0 and lines[index] > left:
            yield left, lines[index]
            left = lines[index]
        while cut - left > PUNKT_WINDOW:
            stop = text.rfind(". ", left + PUNKT_WINDOW // 2, left + PUNKT_WINDOW)
            stop = stop + 2 if stop >= 0 else left + PUNKT_WINDOW
            yield left, stop
            left = stop
    if left < len(text):
        yield left, len(text)


def _sentence_cuts(text: str, inside: Callable[[int], bool], lines: list[int]) -> list[int]:
    """Punkt's sentence starts (maths Punkt, within each stretch between line-break cuts)
    that are not inside maths, not right after a factorial, an abbreviation or a list number
    opening its line."""
    starts: list[int] = []
    for left, right in _punkt_windows(text, lines):
        piece = text[left:right]
        if piece.strip():
            starts += [left + start for start, _ in punkt_spans(_math_punkt(), piece)[1:]]
    cuts = []
    for start in starts:
        end = _run_start(text, start)
        if end == 0 or inside(start) or inside(end - 1) or _after_factorial(text, end):
            continue
        # An abbreviation and a list number are short: look back a bounded stretch only, so
        # a megabyte-long line stays linear.
        if _ABBREVIATION_END.search(text, max(0, end - 24), end):
            continue
        lo = max(0, end - 12)
        newline = text.rfind("\n", lo, end)
        line_start = newline + 1 if newline >= 0 else 0 if lo == 0 else end
        if line_start < end and _LIST_MARKER.fullmatch(text[line_start:end] + " "):
            continue  # "1." opening a line belongs to its item
        cuts.append(start)
    return cuts


#: Where a step that is too long may be split (:func:`_cap_cuts`): after ".", "?", "!" or ";"
#: and a space, or at a line break.
_CAP_CANDIDATE = re.compile(r"(?<=[.?!;])[ \t]+(?=\S)|\n\s*(?=\S)")


def _cap_cuts(text: str, left: int, right: int, inside: Callable[[int], bool]) -> list[int]:
    """Cuts that split the step ``text[left:right]`` into pieces of at most
    :data:`MAX_STEP_CHARS` characters where it can: at its best sentence boundary, the
    candidate (:data:`_CAP_CANDIDATE`, never inside maths nor after a factorial) nearest
    its middle, then each half again. A piece with no candidate (one long formula) stays
    whole."""
    if right - left <= MAX_STEP_CHARS:
        return []
    candidates = [
        match.end()
        for match in _CAP_CANDIDATE.finditer(text, left, right)
        if not inside(match.end())
        and not inside(match.start())
        and not _after_factorial(text, match.start())
    ]
    cuts: list[int] = []

    def split(lo: int, hi: int) -> None:
        if hi - lo <= MAX_STEP_CHARS:
            return
        first = bisect.bisect_right(candidates, lo + 1)
        last = bisect.bisect_left(candidates, hi - 1)
        if first >= last:
            return
        middle = (lo + hi) // 2
        at = bisect.bisect_left(candidates, middle, first, last)
        nearest = [i for i in (at - 1, at) if first <= i < last]
        best = min((candidates[i] for i in nearest), key=lambda c: abs(c - middle))
        split(lo, best)
        cuts.append(best)
        split(best, hi)

    split(left, right)
    return cuts


@register_segmenter("math")
def _math_cuts(text: str) -> list[int]:
    inside = _inside_any(_maths_spans(text))
    lines = _line_break_cuts(text, inside)
    cuts = sorted({0, *lines, *_sentence_cuts(text, inside, lines), len(text)})
    capped: list[int] = []
    for left, right in itertools.pairwise(cuts):
        capped += [left, *_cap_cuts(text, left, right, inside)]
    return capped


def split_steps(text: str, mode: str = "paper") -> list[Step]:
    """Split reasoning text into steps with exact character spans.

    Args:
        text: the reasoning text of one trace (untrusted model output; any size).
        mode: a key of :data:`SEGMENTERS` — ``"paper"`` (Punkt), ``"lines"`` or ``"math"``.

    Returns:
        The steps in order; ``[]`` for empty or whitespace-only text.

    Reference: Legi-Val, arXiv 2603.20508, §efficiency (steps = Punkt sentences).

    >>> [s.text for s in split_steps("x = 3.14 here. Wait. Is that right?")]
    ['x = 3.14 here.', 'Wait.', 'Is that right?']
    >>> split_steps("  Hi there.  ")
    [Step(text='Hi there.', start=2, end=11)]
    >>> [s.text for s in split_steps("a\\n$$x\\ny$$\\nb", mode="lines")]
    ['a', '$$x\\ny$$', 'b']
    >>> step_texts("C(5, 2) = 5! / (2! 3!) = 10 ways. So 10.", mode="math")
    ['C(5, 2) = 5! / (2! 3!) = 10 ways.', 'So 10.']
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
