"""The escaping helpers of ``legival_core/text/safe_text.py``, on strings worked out by hand.

What Streamlit and Plotly then draw from them is checked in Chromium by
``tests/test_hostile_names_browser.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from legival_core.text.safe_text import (
    markdown_literal,
    markdown_math,
    plotly_literal,
    without_local_paths,
)

WJ = "\u2060"  # the word joiner markdown_literal puts where an autolink would start


def cases(escape: Callable[[str], str], rows: list[tuple[str, str]]) -> list[Any]:
    """``(text, expected)`` rows of one escaping helper as parameters of
    :func:`test_each_helper_gives_the_string_worked_by_hand`, with ids naming the helper."""
    return [
        pytest.param(escape, text, expected, id=f"{escape.__name__}-{index}")
        for index, (text, expected) in enumerate(rows)
    ]


#: What ``markdown_literal`` makes of text a renderer could autolink: nothing to autolink.
NOTHING_TO_AUTOLINK = [
    # Every ASCII punctuation mark gets a backslash; "://" also gets a word joiner.
    ("![t](http://h/t.png)", "\\!\\[t\\]\\(http\\:" + WJ + "\\/\\/h\\/t\\.png\\)"),
    # "www." (any case) and an e-mail's "@" are autolinked too: a joiner after www / @.
    ("WWW.e.x", "WWW" + WJ + "\\.e\\.x"),
    ("me@e.x", "me\\@" + WJ + "e\\.x"),
]


#: What ``plotly_literal`` makes of markup: entities Plotly decodes.
ENTITIES_PLOTLY_DECODES = [
    # & < > as named entities Plotly decodes; quotes and $ as numeric ones (34, 39, 36).
    ('<a href="u">X</a>', "&lt;a href=&#34;u&#34;&gt;X&lt;/a&gt;"),
    ("it's $5 & <b>", "it&#39;s &#36;5 &amp; &lt;b&gt;"),
]


#: What ``without_local_paths`` makes of local paths: only their last part.
ONLY_THE_LAST_FOLDER = [
    ('"model": "/root/.cache/legival/models/rm"', '"model": "…/rm"'),
    ("data at ~/runs/a.jsonl, line 3", "data at …/a.jsonl, line 3"),
    ("C:\\Users\\me\\x.gguf", "…/x.gguf"),
    ("file:///srv/store", "…/store"),
    # A trailing colon or full stop is kept after the shortened path.
    ("/s/t/part-1.arrow: truncated.", "…/part-1.arrow: truncated."),
    # Not local paths: a Hugging Face id, a URL, a ratio, a relative path.
    (
        "org/model https://hf.co/org/m 3/4 results/demo",
        "org/model https://hf.co/org/m 3/4 results/demo",
    ),
    ("/", "…"),
    # Issue 24, item 13: folder names with spaces, commas and brackets were cut at the
    # first space, leaving "Project (v2), client ACME/traces of acme.jsonl" on screen.
    (
        "/home/u/Secret Project (v2), client ACME/traces of acme.jsonl",
        "…/traces of acme.jsonl",
    ),
    (
        '{"file": "/srv/Client [ACME]; 2026/a b.jsonl", "rows": 3}',
        '{"file": "…/a b.jsonl", "rows": 3}',
    ),
    # "<" and ">" are folder-name characters too: the cut stopped there and left
    # "…/Secret Project>x/t.jsonl" (a folder name) on screen.
    ('{"file": "/srv/Secret Project>x/t.jsonl"}', '{"file": "…/t.jsonl"}'),
    ('{"data": "/home/u/<ACME> runs/p.jsonl", "n": 2}', '{"data": "…/p.jsonl", "n": 2}'),
]


def test_bidi_controls_are_shown_escaped() -> None:
    """Issue 24, item 9: a name holding U+202E (right-to-left override) was shown raw, so the
    rest of it read reversed. Both renderers now get the visible escape "\\u202e"."""
    name = "model\u202eexe.txt"
    shown = markdown_literal(name)
    assert "\u202e" not in shown and shown == "model\\\\u202eexe\\.txt"
    label = plotly_literal(name)
    assert "\u202e" not in label and label == "model\\u202eexe.txt"
    from legival_core.text.safe_text import BIDI_CONTROLS, visible_bidi

    every = "".join(sorted(BIDI_CONTROLS))
    assert not set(visible_bidi(every)) & BIDI_CONTROLS
    assert visible_bidi(every).count("\\u") == len(BIDI_CONTROLS) == 12


# --- model text with its maths (markdown_math) ------------------------------------------------


#: What ``markdown_math`` makes of model text: the maths kept, the rest escaped.
MATHS_KEPT_THE_REST_ESCAPED = [
    # The four ways models write maths, each handed to KaTeX as $…$ (display in display
    # style); "<" and ">" as TeX commands, so no tag can start inside a span.
    (r"So \(x < 4\).", r"So $x \lt{} 4$\."),
    (r"\[ a \\ b \]", r"$\displaystyle a \\ b$"),
    (r"$$\sum_i i$$ done", r"$\displaystyle \sum_i i$ done"),
    ("where $f(x)=x^2$ holds", "where $f(x)=x^2$ holds"),
    # Prices stay prices (Pandoc's rule): a space after the opening $, a digit after the
    # closing one, an escaped dollar.
    ("costs $5 and $10", r"costs \$5 and \$10"),
    ("$x$2", r"\$x\$2"),
    (r"\$x$ y", r"\\\$x\$ y"),
    # A bold run and a code span are kept; their neighbours are escaped.
    ("**sure** `a<b>` <i>", r"**sure** `a<b>` \<i\>"),
]


@pytest.mark.parametrize(
    ("escape", "text", "expected"),
    [
        *cases(markdown_literal, NOTHING_TO_AUTOLINK),
        *cases(plotly_literal, ENTITIES_PLOTLY_DECODES),
        *cases(without_local_paths, ONLY_THE_LAST_FOLDER),
        *cases(markdown_math, MATHS_KEPT_THE_REST_ESCAPED),
    ],
)
def test_each_helper_gives_the_string_worked_by_hand(
    escape: Callable[[str], str], text: str, expected: str
) -> None:
    assert escape(text) == expected


@pytest.mark.parametrize(
    "payload",
    [
        r"$\href{javascript:alert('latex')}{click}$",
        r"\(\url{javascript:alert(1)}\)",
        r"$$\htmlData{onclick=alert('katex')}{x}$$",
        r"\[\includegraphics{https://evil.example/x.png}\]",
        r"$$\def\a{\a\a}\a$$",
        r"$\rule{5000em}{5000em}$",
        r"$\kern-900em x$",
        "$" + "x" * 1200 + "$",
        "$a\x00b$",
    ],
)
def test_refused_maths_is_shown_as_text(payload: str) -> None:
    """Links, HTML hooks, macro definitions, explicit sizes, overlong spans and control
    characters are never typeset: the span is escaped like any text (no unescaped $ left)."""
    shown = markdown_math(payload)
    assert re.search(r"(?<!\\)\$", shown) is None, shown
    assert shown == markdown_literal(payload)


def test_maths_cannot_close_an_element_or_open_a_tag() -> None:
    """A span holding markup is typeset with \\lt / \\gt: no "<" reaches the Markdown."""
    shown = markdown_math("$</span><img src=x onerror=alert(1)>$ and <b>x</b>")
    assert "<" not in shown.replace(r"\<", "")
    assert shown.startswith(r"$\lt{}/span\gt{}\lt{}img")


def test_paragraphs_keep_breaks_without_markdown_blocks() -> None:
    text = "# not a heading\n    not code\n\n- not a list\n1. nor this $x$"
    shown = markdown_math(text, paragraphs=True)
    assert shown == r"\# not a heading  " + "\n" + r"not code" + "\n\n" + (
        r"\- not a list  " + "\n" + r"1\. nor this $x$"
    )
    # one step: every line break is a space, nothing starts a block
    assert "\n" not in markdown_math(text)


def test_many_delimiters_cost_a_bounded_scan() -> None:
    """Only the first MAX_DELIMITERS openings are tried: the maths after them shows as text."""
    from legival_core.text.safe_text import MAX_DELIMITERS

    text = "$" * (MAX_DELIMITERS + 1) + " then $x$"
    shown = markdown_math(text)
    assert shown.endswith(r"then \$x\$")
    assert markdown_math("\\(" * 50_000) == markdown_literal("\\(" * 50_000)
