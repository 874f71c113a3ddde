"""Everything a command prints is escaped for the terminal.

Names a command prints (stray files in a received store, teachers, datasets, files, quarantine
reasons) come from other people's files. Printed raw, an ANSI escape in a file name can erase
the line above it and write a green "store ok" in its place, a carriage return can overwrite
the start of a line, and a bidirectional control can reverse what follows. :func:`terminal_text`
writes every such character as its visible escape (``\\x1b``, ``\\x0d``, ``\\u202e``); line breaks
and tabs stay. :func:`escaped_output` puts both standard streams of a command behind it, so that
no print of any command can forget it; the progress bars, whose carriage returns are the
program's own, write to the stream underneath (:func:`unescaped`).
"""

from __future__ import annotations

import contextlib
import sys
import unicodedata
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["TerminalStream", "escaped_output", "terminal_text", "unescaped"]

#: Characters that change what a terminal shows without being shown: C0 and C1 controls (ESC
#: starts every ANSI sequence; CSI is C1), bidirectional controls, line and paragraph
#: separators, and lone surrogates (which cannot even be written as UTF-8).
_KEEP = {"\n", "\t"}
_BIDI = {
    "\u061c", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
    "\u2066", "\u2067", "\u2068", "\u2069", "\u2028", "\u2029",
}  # fmt: skip


def _visible(char: str) -> str:
    if char in _KEEP:
        return char
    if char in _BIDI or unicodedata.category(char) in ("Cc", "Cs"):
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return char


def terminal_text(text: str) -> str:
    """``text`` with every control, bidirectional control and lone surrogate written as its
    visible escape; line breaks and tabs kept.

    >>> print(terminal_text("a\\x1b[2K\\r\\x1b[32mok\\u202e"))
    a\\x1b[2K\\x0d\\x1b[32mok\\u202e
    >>> terminal_text("two\\nlines\\tand a tab")
    'two\\nlines\\tand a tab'
    """
    if text.isprintable():  # the common case: nothing to look at one by one
        return text
    return "".join(_visible(c) for c in text)


class TerminalStream:
    """A text stream that escapes what it is given (:func:`terminal_text`) before writing it
    to the stream underneath; everything else is the underlying stream's."""

    def __init__(self, stream: TextIO):
        self.unescaped = stream

    def write(self, text: str) -> int:
        self.unescaped.write(terminal_text(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.unescaped, name)


def unescaped(stream: Any) -> Any:
    """The stream under a :class:`TerminalStream` (the stream itself otherwise): for output
    that is the program's own, such as a progress bar's carriage returns."""
    return getattr(stream, "unescaped", stream)


@contextlib.contextmanager
def escaped_output() -> Iterator[None]:
    """Run the block with ``sys.stdout`` and ``sys.stderr`` escaped for the terminal."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalStream(out), TerminalStream(err)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
