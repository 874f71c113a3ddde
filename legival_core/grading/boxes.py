"""Find ``\\boxed{...}`` answers in model text, with nested braces handled.

Models write the final answer of a math problem as ``\\boxed{...}``; the content can itself
contain braces (``\\boxed{\\frac{1}{2}}``), so a regular expression cannot find the end. We scan
and count braces instead. ``\\fbox{...}`` and ``\\boxed {...}`` are accepted too; a box that is
never closed (a cut-off generation) is not an answer.
"""

from __future__ import annotations

import re

# "\boxed" or "\fbox", optional spaces, then the opening brace.
_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")


def box_content_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the content of every closed box, outermost boxes only, in order.

    One pass with a stack of open braces (linear time even on adversarial text such as
    thousands of unclosed boxes); each stack entry remembers whether it opened a box.
    """
    box_starts = {match.end() - 1: match.end() for match in _BOX_OPEN.finditer(text)}
    stack: list[int | None] = []  # content start for a box brace, None for a plain brace
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2  # an escaped character such as \{ or \} never counts
            continue
        if char == "{":
            stack.append(box_starts.get(index))
        elif char == "}" and stack:
            content_start = stack.pop()
            if content_start is not None:
                spans.append((content_start, index))
        index += 1
    spans.sort()
    outermost: list[tuple[int, int]] = []
    for start, end in spans:
        if outermost and start < outermost[-1][1]:
            continue  # nested inside the previous box
        outermost.append((start, end))
    return outermost


def boxed_contents(text: str) -> list[str]:
    """Contents of every closed ``\\boxed{...}`` in ``text``, in order of appearance.

    A box inside another box is part of the outer box's content, not a separate answer.

    Example:
        >>> boxed_contents(r"first \\boxed{1}, then \\boxed{\\frac{1}{2}}")
        ['1', '\\\\frac{1}{2}']
    """
    return [text[start:end].strip() for start, end in box_content_spans(text)]


def last_boxed(text: str) -> str | None:
    """The last closed ``\\boxed{...}`` content in ``text``, or ``None`` when there is none.

    Example:
        >>> last_boxed(r"so \\boxed{3\\sqrt{2}}")
        '3\\\\sqrt{2}'
        >>> last_boxed(r"cut off \\boxed{\\frac{1}{") is None
        True
    """
    contents = boxed_contents(text)
    return contents[-1] if contents else None
