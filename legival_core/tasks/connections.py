"""NYT Connections word puzzles: sort 16 words into 4 groups of 4.

The model ends with its grouping as JSON (a list of four lists of words, usually in a code
fence). We read the last JSON grouping in the text, tolerating code fences, trailing commas and
Python-style single quotes, and also accept ``{"groups": [...]}`` or a list of
``{"words": [...]}`` objects. Credit = gold groups found exactly (as sets of words, case and
spacing ignored) / number of gold groups; "correct" means all four (docs/profiles.md).

Reference: Legi-Val, arXiv 2603.20508 (NYT Connections, §2 puzzle rubric, partial credit).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from legival_core.tasks.base import Task, register_task

GROUP_COUNT = 4
GROUP_SIZE = 4
MAX_CANDIDATES = 200  # bracket positions tried from the end; bounds the work on hostile text
MAX_CANDIDATE_CHARS = 20_000  # a grouping of 16 words is far shorter
_GROUP_KEYS = ("words", "members", "items", "group")
_WRAPPER_KEYS = ("groups", "answer", "groupings", "solution")
_TRAILING_COMMA = re.compile(r",\s*([\]}])")

PUZZLE_BACKTRACKING_RUBRIC = """\
Count a step as backtracking when the solver undoes or reworks part of its grouping instead of \
extending it. Typical signs: it gives up a group it had proposed ("Wait", "Actually", "No, that \
doesn't work"); it realises a word is a red herring that fits more than one category and moves \
it; it recounts or re-lists the words still left after a change; or it changes the theme of a \
category it had settled on. Do not count listing candidate words for the first time, checking \
that a finished group has four members, or simply moving on to the next category."""

Grouping = list[list[str]]


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the bracket that closes ``text[start]``, honouring quoted strings."""
    closing = {"[": "]", "{": "}"}
    stack = [closing[text[start]]]
    quote: str | None = None
    index = start + 1
    limit = min(len(text), start + MAX_CANDIDATE_CHARS)
    while index < limit:
        char = text[index]
        if quote is not None:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char in closing:
            stack.append(closing[char])
        elif char in "]}":
            if char != stack.pop():
                return None
            if not stack:
                return index + 1
        index += 1
    return None


def _load_lenient(snippet: str) -> Any:
    """JSON, else JSON without trailing commas, else a Python literal; ``None`` if none parse."""
    for candidate in (snippet, _TRAILING_COMMA.sub(r"\1", snippet)):
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):
            pass
    try:
        return ast.literal_eval(snippet)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def as_grouping(value: Any) -> Grouping | None:
    """A list of word groups from the accepted JSON shapes, else ``None``.

    Example:
        >>> as_grouping({"groups": [{"category": "fish", "words": ["cod", "eel"]}]})
        [['cod', 'eel']]
    """
    if isinstance(value, Mapping):
        for key in _WRAPPER_KEYS:
            if key in value:
                return as_grouping(value[key])
        # {"category name": [words], ...}
        if value and all(isinstance(v, list) for v in value.values()):
            return as_grouping(list(value.values()))
        return None
    if not isinstance(value, list) or not value:
        return None
    groups: Grouping = []
    for item in value:
        if isinstance(item, Mapping):
            words = next((item[k] for k in _GROUP_KEYS if k in item), None)
        else:
            words = item
        if not isinstance(words, list) or not words:
            return None
        if not all(isinstance(word, str | int | float) for word in words):
            return None
        groups.append([str(word) for word in words])
    return groups


def find_last_grouping(text: str) -> Grouping | None:
    """The last JSON word grouping in ``text`` (code fences are just text around it).

    Example:
        >>> find_last_grouping('Groups:\\n```json\\n[["a","b"],["c","d"]]\\n```')
        [['a', 'b'], ['c', 'd']]
    """
    starts = [match.start() for match in re.finditer(r"[\[{]", text)][-MAX_CANDIDATES:]
    # From the end: a group's own word list is not a grouping (its items are strings), so the
    # first grouping met going backwards is the outermost structure of the last answer.
    for start in reversed(starts):
        end = _balanced_end(text, start)
        if end is None:
            continue
        value = _load_lenient(text[start:end])
        grouping = None if value is None else as_grouping(value)
        if grouping is not None:
            return grouping
    return None


def normalise_word(word: str) -> str:
    """Case-folded, inner whitespace collapsed: ``" New  York "`` -> ``"new york"``."""
    return " ".join(word.split()).casefold()


def parse_gold_grouping(gold: str) -> Grouping:
    """The gold grouping from its JSON text.

    Raises:
        ValueError: the gold is not a JSON grouping.
    """
    try:
        value = json.loads(gold)
    except ValueError as error:
        raise ValueError(f"Connections gold is not JSON: {error}") from None
    grouping = as_grouping(value)
    if grouping is None:
        raise ValueError(f"Connections gold is not a list of word groups: {gold[:120]!r}")
    return grouping


def groups_right(predicted: Grouping, gold: Grouping) -> int:
    """How many gold groups the prediction reproduces exactly (as sets of normalised words).

    Only the first ``len(gold)`` predicted groups count, so listing extra groups cannot earn
    credit.

    Example:
        >>> groups_right([["A", "b"], ["c", "x"]], [["a", "B"], ["c", "d"]])
        1
    """
    remaining = [frozenset(map(normalise_word, group)) for group in gold]
    right = 0
    for group in predicted[: len(gold)]:
        words = frozenset(map(normalise_word, group))
        if words in remaining:
            remaining.remove(words)
            right += 1
    return right


@register_task
class ConnectionsTask(Task):
    """NYT Connections: group 16 words into 4 themed groups of 4; credit per group."""

    name = "connections"
    family = "puzzles"
    system_prompt = (
        "You are an expert at word puzzles. Think aloud step by step, weighing which words "
        "could belong together, before you commit to a final grouping."
    )
    forcing_cue = '\n\nFinal grouping:\n```json\n[\n  ["'
    stop_strings = ("]\n```", "]```", "] ```")
    backtracking_rubric = PUZZLE_BACKTRACKING_RUBRIC
    reads_prose_answers = False  # groupings come as JSON, never in prose
    fixed_question_type = "grouping"
    answer_instructions = (
        f"Sort these words into {GROUP_COUNT} groups of {GROUP_SIZE} that each share a "
        "hidden connection; every word belongs to exactly one group. Reason step by step. "
        "Finish with the groups as JSON, a list of four lists of four words, in a code block:"
        '\n```json\n[["word", "word", "word", "word"], ...]\n```'
    )

    def extract_answer(self, text: str, *, problem: Mapping[str, Any] | None = None) -> str | None:
        """The last JSON grouping in ``text``, re-serialised as compact JSON.

        Example:
            >>> ConnectionsTask().extract_answer("```json\\n[['a','b'],['c','d'],]\\n```")
            '[["a", "b"], ["c", "d"]]'
        """
        grouping = find_last_grouping(text)
        return None if grouping is None else json.dumps(grouping, ensure_ascii=False)

    def answer_extractable(self, text: str, *, problem: Mapping[str, Any] | None = None) -> bool:
        """True once a grouping with four groups has been written."""
        grouping = find_last_grouping(text)
        return grouping is not None and len(grouping) >= GROUP_COUNT

    @staticmethod
    def score_answer(extracted: str, gold: str, options: Mapping[str, Any]) -> float:
        gold_grouping = parse_gold_grouping(gold)
        parsed = _load_lenient(extracted)
        predicted = (None if parsed is None else as_grouping(parsed)) or []
        return groups_right(predicted, gold_grouping) / len(gold_grouping)
