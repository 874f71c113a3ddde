"""Text from a store or a URL is data, never markup: the one escaping helper of the app.

Two renderers interpret text the app shows:

- Streamlit's Markdown (``st.markdown``, ``st.write`` of a string, captions, info boxes, widget
  labels and help): CommonMark plus KaTeX between ``$``, colour and icon directives
  (``:red[...]``, ``:material/warning:``), emoji short codes and raw HTML.
- Plotly's labels (axis ticks, legends, hover, annotations): a subset of HTML (``<a>``, ``<b>``,
  ``<br>``, ``<span style>`` …) and entities.

:func:`markdown_literal` makes any string show as itself in the first, :func:`plotly_literal` in
the second. Neither module imports streamlit or plotly: they are pure string functions.
"""

from __future__ import annotations

import html
import re

__all__ = ["markdown_literal", "plotly_literal", "plotly_literals"]

# Every ASCII punctuation character may be backslash-escaped in CommonMark, and an escaped one
# is always shown literally. Escaping all of them (not only today's special ones) also covers
# Streamlit's own syntax: ``$`` (KaTeX), ``:`` (directives and short codes), ``[``/``]``.
_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# Line breaks would start new blocks (headings, lists, quotes); shown as a visible space instead.
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")


def markdown_literal(text: object) -> str:
    r"""``text`` escaped so that Streamlit's Markdown shows it literally, on one line.

    Formula: every ASCII punctuation character ``c`` becomes ``\c`` (CommonMark backslash
    escapes), and every run of line breaks becomes one space.

    Args:
        text: anything; ``str(text)`` is escaped.

    Returns:
        A string to embed in Markdown (inside ``**…**`` too).

    >>> print(markdown_literal("![t](http://h/t.png)"))
    \!\[t\]\(http\:\/\/h\/t\.png\)
    >>> print(markdown_literal("$x^2$ :red[hi]"))
    \$x\^2\$ \:red\[hi\]
    >>> print(markdown_literal("a\n# b"))
    a \# b
    """
    one_line = _LINE_BREAKS.sub(" ", str(text))
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", one_line)


def plotly_literal(text: object) -> str:
    """``text`` escaped so that a Plotly label shows it literally.

    Plotly parses a small HTML subset in every label; entities are decoded. So ``&``, ``<``,
    ``>`` and quotes become entities (:func:`html.escape`), which Plotly shows as the characters.

    >>> plotly_literal('<a href="https://e.x/p">X</a>')
    '&lt;a href=&quot;https://e.x/p&quot;&gt;X&lt;/a&gt;'
    >>> plotly_literal("R&D")
    'R&amp;D'
    """
    return html.escape(str(text), quote=True)


def plotly_literals(values: object) -> list[str]:
    """:func:`plotly_literal` of every element of an iterable (a column of names, say).

    >>> plotly_literals(["<b>a</b>", 3])
    ['&lt;b&gt;a&lt;/b&gt;', '3']
    """
    return [plotly_literal(v) for v in values]  # type: ignore[attr-defined]
