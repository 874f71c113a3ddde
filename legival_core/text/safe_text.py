"""Text from a store or a URL is data, never markup: the one escaping helper of the app.

Two renderers interpret text the app shows:

- Streamlit's Markdown (``st.markdown``, ``st.write`` of a string, captions, info boxes, widget
  labels and help): CommonMark plus KaTeX between ``$``, colour and icon directives
  (``:red[...]``, ``:material/warning:``), emoji short codes and raw HTML.
- Plotly's labels (axis ticks, legends, hover, annotations): a subset of HTML (``<a>``, ``<b>``,
  ``<br>``, ``<span style>`` …) and entities.

:func:`markdown_literal` makes any string show as itself in the first, :func:`plotly_literal` in
the second. Neither module imports streamlit or plotly: they are pure string functions.

Model text (reasoning, answers, students' completions) is shown with its mathematics typeset:
:func:`markdown_math` escapes it as :func:`markdown_literal` does and lets through only the maths
spans it recognises and checks (KaTeX typesets them in the browser), a bold run, an inline code
span and paragraph breaks. Nothing else of the text can become markup.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "BIDI_CONTROLS",
    "MATH_REFUSED_COMMANDS",
    "html_text",
    "markdown_literal",
    "markdown_math",
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


#: TeX commands a maths span may not hold: links and HTML hooks (KaTeX refuses them without its
#: ``trust`` option; refused here as well), macro definitions (expansion bombs) and explicit
#: sizes and shifts (a ``\\rule{5000em}{5000em}`` would paint over the page). A span holding one
#: is shown as text.
MATH_REFUSED_COMMANDS = frozenset(
    {
        "href", "url", "includegraphics", "htmlClass", "htmlId", "htmlStyle", "htmlData",
        "def", "gdef", "edef", "xdef", "let", "futurelet", "newcommand", "renewcommand",
        "providecommand", "newenvironment", "renewenvironment", "rule", "kern", "mkern",
        "mskip", "hskip", "hspace", "vspace", "raisebox", "lower", "raise", "vcenter",
    }
)  # fmt: skip
#: The longest maths span typeset, in characters of TeX; a longer one is shown as text.
MATH_MAX_CHARS = 1000
#: The longest bold run or code span kept as such.
_RUN_MAX = 500
#: At most this many places where a span may open are tried per text; the rest of a text with
#: more (no model writes thousands of formulas in one step) is shown as plain text.
MAX_DELIMITERS = 4000
#: What display maths starts with: it is typeset in display style, inline in its line.
DISPLAY_STYLE = "\\displaystyle "
# Where a kept span of markdown_math may start or end. The scan finds every one once and then
# looks each closer up by bisection, so a text full of unclosed delimiters costs n log n, not n
# times the longest span (a regex with a bounded lazy span took 3.5 s on 50,000 "\\(").
_DELIMITERS = re.compile(
    r"(?P<tick>`)|(?P<dollar>\$)|(?P<ob>\\\[)|(?P<cb>\\\])|(?P<op>\\\()|(?P<cp>\\\))|(?P<star>\*)"
    r"|(?P<nl>[\r\n\u2028\u2029\x0b\x0c\x85])"
)
_TEX_COMMAND = re.compile(r"\\([A-Za-z]+)")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_PARAGRAPH_BREAK = re.compile(r"(?:[ \t]*(?:\r\n|[\r\n\u2028\u2029\x0b\x0c\x85])){2,}")


def _tex(source: str) -> str | None:
    """The TeX of a maths span as it is handed to KaTeX, or None when it is refused (too long,
    a control character, a :data:`MATH_REFUSED_COMMANDS` command). Line breaks become spaces;
    ``<`` and ``>`` become ``\\lt`` and ``\\gt``, so the span holds no character that could
    start an HTML tag whatever parses it."""
    tex = " ".join(_LINE_BREAKS.sub(" ", source).split())
    if not tex or len(tex) > MATH_MAX_CHARS or _CONTROL.search(tex):
        return None
    if any(
        name in MATH_REFUSED_COMMANDS or name.startswith("html")
        for name in _TEX_COMMAND.findall(tex)
    ):
        return None
    return tex.replace("<", "\\lt{}").replace(">", "\\gt{}")


def _literal_run(text: str, paragraphs: bool, line_start: bool) -> str:
    """A stretch of model text between the kept spans, escaped (:func:`markdown_literal`).

    With ``paragraphs``, blank lines stay paragraph breaks and single line breaks become hard
    breaks; each line loses its leading blanks (four of them would start a code block)."""
    if not paragraphs:
        return markdown_literal(text)
    out = []
    for p, paragraph in enumerate(_PARAGRAPH_BREAK.split(text)):
        lines = _LINE_BREAKS.split(paragraph)
        shown = [
            markdown_literal(line.lstrip() if (i or p or line_start) else line)
            for i, line in enumerate(lines)
        ]
        out.append("  \n".join(shown))
    return "\n\n".join(out)


def markdown_math(text: object, *, paragraphs: bool = False) -> str:
    r"""Model text for Streamlit's Markdown: shown as written, with its maths typeset.

    The text is cut into the spans kept and the stretches between them. Kept:

    - maths: ``$$…$$``, ``\[…\]`` and ``\(…\)``, and ``$…$`` by Pandoc's rule (no space after
      the opening ``$`` or before the closing one, no digit after it, on one line; so "costs
      $5 and $10" stays text). Each becomes ``$…$`` (display maths ``$\displaystyle …$``,
      so that it sits inline in a step) for KaTeX, after :func:`_tex`'s checks; a refused span
      (a command of :data:`MATH_REFUSED_COMMANDS`, a ``$`` inside, longer than
      :data:`MATH_MAX_CHARS`) is shown as text;
    - an inline code span ```…``` (no line break, no backtick inside), shown as code;
    - a bold run ``**…**``, its inside escaped.

    Only the first :data:`MAX_DELIMITERS` places where a span may open are tried (a bound on the
    time a hostile text costs). Every stretch between the spans is :func:`markdown_literal`: no
    character of it is markup. With ``paragraphs`` (a completion, an answer), blank lines
    separate paragraphs and single line breaks are kept; without (one step), every line break
    is a space. Bidirectional controls are shown escaped (:func:`visible_bidi`) everywhere.

    >>> print(markdown_math(r"So \(x^2 < 4\) and $y$, for $5 or **more** <b>"))
    So $x^2 \lt{} 4$ and $y$\, for \$5 or **more** \<b\>
    >>> print(markdown_math(r"$\href{javascript:alert(1)}{x}$"))
    \$\\href\{javascript\:alert\(1\)\}\{x\}\$
    """
    source = visible_bidi(text)
    out: list[str] = []
    position = 0
    for start, end, shown in _kept_spans(source):
        out.append(_literal_run(source[position:start], paragraphs, position == 0))
        out.append(shown)
        position = end
    out.append(_literal_run(source[position:], paragraphs, position == 0))
    return "".join(out)


class _Delimiters:
    """The positions of every delimiter of one text, by kind, for :func:`_kept_spans`."""

    def __init__(self, source: str) -> None:
        self.at: dict[str, list[int]] = {kind: [] for kind in _DELIMITERS.groupindex}
        for match in _DELIMITERS.finditer(source):
            self.at[match.lastgroup or ""].append(match.start())

    def next(self, kind: str, after: int) -> int | None:
        """The first position of ``kind`` at or after ``after``, or None."""
        found = self.at[kind]
        index = bisect.bisect_left(found, after)
        return found[index] if index < len(found) else None

    def none_between(self, kind: str, start: int, end: int) -> bool:
        """Whether no ``kind`` stands in ``[start, end)``."""
        found = self.next(kind, start)
        return found is None or found >= end


def _kept_spans(source: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, Markdown) of each span :func:`markdown_math` keeps, left to right; a span
    that fails its checks is not kept (its characters stay in the text around it)."""
    marks = _Delimiters(source)
    starts = sorted({*marks.at["tick"], *marks.at["dollar"], *marks.at["ob"], *marks.at["op"],
                     *marks.at["star"]})  # fmt: skip
    position = 0
    for start in starts[:MAX_DELIMITERS]:
        if start < position:
            continue
        kept = _span_at(source, start, marks)
        if kept is not None:
            yield start, kept[0], kept[1]
            position = kept[0]


def _span_at(source: str, start: int, marks: _Delimiters) -> tuple[int, str] | None:
    """(end, Markdown) of the span kept at ``start``, or None: a code span, then display maths,
    then \\[…\\] and \\(…\\), then $…$, then a bold run."""
    char = source[start]
    if char == "`":
        close = marks.next("tick", start + 1)
        if close is None or not 1 <= close - start - 1 <= _RUN_MAX:
            return None
        inner = source[start + 1 : close]
        if not inner.strip() or not marks.none_between("nl", start, close):
            return None
        return close + 1, f"`{inner}`"
    if char == "$":
        return _dollar_span(source, start, marks)
    if char == "\\":
        closer = "cb" if source[start + 1] == "[" else "cp"
        close = marks.next(closer, start + 2)
        if close is None or not marks.none_between("dollar", start, close):
            return None
        return _math(source[start + 2 : close], close + 2, display=closer == "cb", source=source)
    # a bold run: "**", no star, line break or blank at either end inside, "**"
    close = marks.next("star", start + 2)
    if (
        source[start + 1 : start + 2] != "*"
        or close is None
        or source[close + 1 : close + 2] != "*"
    ):
        return None
    inner = source[start + 2 : close]
    if not 1 <= len(inner) <= _RUN_MAX or inner != inner.strip():
        return None
    if not marks.none_between("nl", start, close):
        return None
    return close + 2, f"**{markdown_literal(inner)}**"


def _dollar_span(source: str, start: int, marks: _Delimiters) -> tuple[int, str] | None:
    """The maths span opening at the ``$`` at ``start``: ``$$…$$`` (no ``$`` inside), else
    ``$…$`` by Pandoc's rule (see :func:`markdown_math`)."""
    if source[start + 1 : start + 2] == "$":
        close = marks.next("dollar", start + 2)
        if close is None or source[close + 1 : close + 2] != "$":
            return None
        return _math(source[start + 2 : close], close + 2, display=True, source=source)
    if start and source[start - 1] in "\\$":
        return None
    close = marks.next("dollar", start + 1)
    if close is None or close == start + 1 or not marks.none_between("nl", start, close):
        return None
    inner = source[start + 1 : close]
    after = source[close + 1 : close + 2]
    if inner[0].isspace() or inner[-1].isspace() or inner[-1] == "\\" or after.isdigit():
        return None
    if after == "$":
        return None
    return _math(inner, close + 1, display=False, source=source)


def _math(inner: str, end: int, *, display: bool, source: str) -> tuple[int, str] | None:
    """(end, ``$…$``) of a maths span whose TeX passes :func:`_tex`, else None."""
    tex = _tex(inner)
    if tex is None:
        return None
    shown = f"${'' if not display else DISPLAY_STYLE}{tex}$"
    if source[end : end + 1].isdigit():
        shown += "\u2060"  # Streamlit loads KaTeX only for a $…$ not followed by a digit
    return end, shown


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
