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

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "BIDI_CONTROLS",
    "html_text",
    "markdown_literal",
    "plotly_literal",
    "plotly_literals",
    "visible_bidi",
    "without_local_paths",
    "without_local_paths_in",
]

#: Unicode's bidirectional formatting characters (embeddings, overrides, isolates, marks). One of
#: them in a name reorders what follows it on screen: "abc\u202eexe.txt" shows as "abctxt.exe".
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_BIDI_ESCAPES = {ord(c): f"\\u{ord(c):04x}" for c in BIDI_CONTROLS}

# Every ASCII punctuation character may be backslash-escaped in CommonMark, and an escaped one
# is always shown literally. Escaping all of them (not only today's special ones) also covers
# Streamlit's own syntax: ``$`` (KaTeX), ``:`` (directives and short codes), ``[``/``]``.
_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# Line breaks would start new blocks (headings, lists, quotes); shown as a visible space instead.
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")
# Where GitHub-style autolink literals start: "://", "www." and an e-mail's "@" (the joiner
# goes at the empty match).
_AUTOLINK_START = re.compile(r"(?<=:)(?=//)|(?i:(?<=www)(?=\.))|(?<=@)")
# An absolute local path (POSIX, home-relative, Windows drive or file: URL). It must not follow a
# character that would make it the middle of a word, URL or relative path ("org/model" and
# "https://host/x" are not local paths). Folder names may hold any character (spaces, commas,
# brackets), so a path runs to the end of its line or JSON string: only a double quote that is
# not escaped, a line break or an angle bracket ends it.
_LOCAL_PATH = re.compile(r"(?<![\w.:/\\~-])(?:file://)?(?:~?/|[A-Za-z]:[\\/])(?:\\.|[^\"\n\r\\])*")
# The same start, in one raw string (not JSON text): the path runs to the end of its line.
_LOCAL_PATH_RAW = re.compile(r"(?<![\w.:/\\~-])(?:file://)?(?:~?/|[A-Za-z]:[\\/])[^\n\r]*")
_SEPARATORS = re.compile(r"[\\/]")
_PLOTLY_ENTITIES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;", "$": "&#36;"}
)


def markdown_literal(text: object) -> str:
    r"""``text`` escaped so that Streamlit's Markdown shows it literally, on one line.

    Formula: bidi controls become their ``\uXXXX`` escape (:func:`visible_bidi`); every run of
    line breaks becomes one space; an invisible word joiner (U+2060) goes
    into ``://``, after ``www`` before ``.`` and after ``@``; then every ASCII punctuation
    character ``c`` becomes ``\c`` (CommonMark backslash escapes). The word joiner is needed
    because GitHub-style autolinks (``https://…``, ``www.…``, ``a@b.org``) are found in the text
    *after* escapes are resolved, so no escape stops them.

    Args:
        text: anything; ``str(text)`` is escaped.

    Returns:
        A string to embed in Markdown (inside ``**…**`` too).

    >>> print(markdown_literal("$x^2$ :red[hi]"))
    \$x\^2\$ \:red\[hi\]
    >>> print(markdown_literal("![t](http://h/t.png) a@b.org").replace("\u2060", "|"))
    \!\[t\]\(http\:|\/\/h\/t\.png\) a\@|b\.org
    >>> print(markdown_literal("a\n# b"))
    a \# b
    """
    one_line = _LINE_BREAKS.sub(" ", visible_bidi(text))
    unlinked = _AUTOLINK_START.sub("\u2060", one_line)
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", unlinked)


def plotly_literal(text: object) -> str:
    """``text`` escaped so that a Plotly label shows it literally.

    Plotly parses a small HTML subset in every label and decodes numeric entities but only a
    handful of named ones (``&amp;``, ``&lt;``, ``&gt;`` among them; not ``&quot;``). So ``&``,
    ``<`` and ``>`` become named entities, quotes and ``$`` (a label between ``$`` is typeset
    as LaTeX where MathJax is loaded) numeric ones.

    Formula: bidi controls → ``\\uXXXX`` (:func:`visible_bidi`); ``&`` → ``&amp;``,
    ``<`` → ``&lt;``, ``>`` → ``&gt;``, ``"`` → ``&#34;``, ``'`` → ``&#39;``, ``$`` → ``&#36;``;
    every other character is kept.

    >>> plotly_literal('<a href="https://e.x/p">X</a>')
    '&lt;a href=&#34;https://e.x/p&#34;&gt;X&lt;/a&gt;'
    >>> plotly_literal("R&D costs $5")
    'R&amp;D costs &#36;5'
    """
    return visible_bidi(text).translate(_PLOTLY_ENTITIES)


def visible_bidi(text: object) -> str:
    r"""``str(text)`` with every bidirectional control (:data:`BIDI_CONTROLS`) written as its
    ``\uXXXX`` escape, so that a name cannot reorder what is shown after it.

    >>> visible_bidi("report\u202egpj.exe")
    'report\\u202egpj.exe'
    """
    return str(text).translate(_BIDI_ESCAPES)


def html_text(text: object) -> str:
    r"""``str(text)`` for HTML text or an attribute value: :func:`html.escape` (``& < > " '``)
    of :func:`visible_bidi`, so a name neither becomes markup nor reorders what follows it.

    >>> html_text('<b class="x">R&D\u202e</b>')
    '&lt;b class=&quot;x&quot;&gt;R&amp;D\\u202e&lt;/b&gt;'
    """
    import html

    return html.escape(visible_bidi(text))


def plotly_literals(values: object) -> list[str]:
    """:func:`plotly_literal` of every element of an iterable (a column of names, say).

    >>> plotly_literals(["<b>a</b>", 3])
    ['&lt;b&gt;a&lt;/b&gt;', '3']
    """
    return [plotly_literal(v) for v in values]  # type: ignore[attr-defined]


def without_local_paths(text: object) -> str:
    r"""``text`` with every absolute local path cut to its last component, for a hosted app.

    Formula: each absolute path (``/…``, ``~/…``, ``C:\…``, ``file:///…``) not preceded by a
    word, URL or path character runs to the next unescaped double quote or line break (a
    folder name may hold any other character: spaces, commas, brackets, ``<`` and ``>``) and
    becomes ``…/`` + what follows its last ``/`` or ``\``; trailing separators and spaces are
    dropped. The text it is given is JSON (the About page's config and provenance), where a
    quote or line break inside a name is escaped.

    >>> without_local_paths('{"model": "/root/.cache/legival/models/rm-standin"}')
    '{"model": "…/rm-standin"}'
    >>> without_local_paths("org/model at https://hf.co/org/model, not ~/data/x.jsonl")
    'org/model at https://hf.co/org/model, not …/x.jsonl'
    >>> without_local_paths('"/srv/Secret Project (v2), client ACME/traces of acme.jsonl"')
    '"…/traces of acme.jsonl"'
    """
    return _LOCAL_PATH.sub(_last_component, str(text))


def without_local_paths_in(value: Any) -> Any:
    r"""``value`` (JSON-like: mappings, lists, strings, numbers) with every absolute local path
    in a string — keys included — cut to its last component, before it is turned into text.

    Formula: in each string, a path starts as in :func:`without_local_paths` and runs to the end
    of its line, so a folder name may hold any character (quotes, backslashes, non-ASCII
    letters, ``<``, ``>``); it becomes ``…/`` + what follows its last ``/`` or ``\``. Cut before
    ``json.dumps``, no JSON escape is ever mistaken for a separator.

    >>> without_local_paths_in({"file": '/srv/a "b"/café.jsonl', "n": [1, "C:\\x\\y.gguf"]})
    {'file': '…/café.jsonl', 'n': [1, '…/y.gguf']}
    """
    if isinstance(value, str):
        return _LOCAL_PATH_RAW.sub(_last_component, value)
    if isinstance(value, Mapping):
        return {without_local_paths_in(k): without_local_paths_in(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_local_paths_in(v) for v in value]
    return value


def _last_component(match: re.Match[str]) -> str:
    path = match.group(0)
    body = path.rstrip()
    parts = [p for p in _SEPARATORS.split(body) if p.strip() and p not in ("~", "file:")]
    last = parts[-1] if parts and not re.fullmatch(r"[A-Za-z]:", parts[-1]) else ""
    return ("…/" + last if last else "…") + path[len(body) :]
