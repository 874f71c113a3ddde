"""Store and URL text is data, never markup: every page, headless (streamlit's AppTest).

The store is the app's toy store (tests/app_fixtures.py) with every name replaced by Markdown,
KaTeX, a Streamlit directive or HTML (``app_fixtures.hostile_names``): a teacher named
``![t](http://127.0.0.1:8765/t.png)``, another ``<a href="https://evil.example/p">X</a>``, a
third ``$x^2$ :red[x] :material/warning: <b>b</b>``, and likewise datasets, students, the
judge's labeler, reward models, the monitor and sabotage kinds. Every page is run three ways:
as opened, with hostile values in every query parameter, and with the hostile names chosen
through the URL. On each run:

* every field Streamlit renders as Markdown (bodies of markdown, captions, headings and alert
  boxes; labels and help of widgets and metrics; expander and tab labels; radio options) shows
  the hostile text escaped: no Markdown, KaTeX or directive character of it is left unescaped,
  and no ``http://``/``www.`` is left for GitHub-style autolinking;
* every string in every Plotly figure holds the names HTML-escaped, never as tags.

The browser side (what Chromium really draws, and that no image is fetched) is
``tests/test_hostile_names_browser.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core.text.safe_text import markdown_literal, plotly_literal
from tests import app_fixtures

REPO = Path(__file__).resolve().parents[1]
APP = str(REPO / "app.py")
NAMES = app_fixtures.hostile_names()
TEACHERS = [NAMES[t] for t in app_fixtures.TEACHERS]

#: A hostile value for every query parameter a page reads.
URL_VALUES = {
    "store": "[Login here](https://evil.example/x)",
    "dataset": f"![i]({app_fixtures.PIXEL}/u.png)",
    "trace": f"![i]({app_fixtures.PIXEL}/v.png) $x^2$",
    "teacher": '<a href="https://evil.example/t">T</a>',
    "student": ":red[x] :material/warning:",
    "metric": "$x^2$",
    "x": "<b>b</b>",
    "y": "www.evil.example",
    "monitor": "[m](https://evil.example/m)",
    "negatives": ":material/warning:",
    "kind": "$$x$$",
    "rm": f"![r]({app_fixtures.PIXEL}/r.png)",
    "subset": "<b>s</b>",
    "level": ":red[l]",
    "profile": "[p](https://evil.example/p)",
    "compare": "$c$",
    "problem": f"![p]({app_fixtures.PIXEL}/p.png)",
    "sample": "<b>1</b>",
    "reference": ":red[r]",
    "layer": "[l](https://evil.example/l)",
    # the inspector's Find traces and per-prefix panel
    "q": "[q](https://evil.example/q) $x^2$",
    "where": "<b>redundancy</b>>0.3",
    "leak": ":red[leak]",
    "sort": '<a href="https://evil.example/s">s</a>',
    "k": "$$x$$",
}
#: The hostile names themselves, chosen through the URL (so selections and titles show them).
URL_CHOICES = {
    "dataset": NAMES["toy-logic"],
    "teacher": NAMES["beta-large"],
    "reference": NAMES["gamma-r1"],
    "compare": NAMES["gamma-r1"],
    "student": NAMES["stu-tiny"],
    "rm": NAMES["rm-b"],
    "monitor": NAMES["weak-m"],
    "kind": NAMES["llm_rewrite"],
}

#: Pieces of the hostile texts that would become markup if their punctuation were unescaped.
MARKUP_PIECES = ("![", "](", "$x^2$", "$$x$$", "$c$", ":red[", ":material/", "<a ", "<b>", "</")
#: What GitHub-style autolinking would turn into a link to a hostile host, in the text left
#: after escapes are resolved (the app's own links, e.g. to arXiv, are fine).
AUTOLINK = re.compile(r"(?i)(?:https?://|www\.)(?:evil\.example|127\.0\.0\.1)")
_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")
#: Proto types whose strings are not Markdown (plain text, sanitised HTML, data, figures).
NOT_MARKDOWN = {"Text", "Html", "Code", "Dataframe", "Arrow", "PlotlyChart", "Exception", "Json"}
#: Fields Streamlit renders as Markdown; radio options too (selectbox options are plain text).
MARKDOWN_FIELDS = {"body", "label", "help", "caption", "captions", "placeholder"}


def _unescaped(piece: str) -> re.Pattern[str]:
    """A pattern for ``piece`` with each of its punctuation characters not backslash-escaped."""
    return re.compile(
        "".join(
            r"(?<!\\)" + re.escape(c) if _PUNCTUATION.fullmatch(c) else re.escape(c) for c in piece
        )
    )


UNESCAPED = [(piece, _unescaped(piece)) for piece in MARKUP_PIECES]


def shown_text(markdown: str) -> str:
    """The text CommonMark leaves of ``markdown`` once backslash escapes are resolved.

    >>> shown_text(r"\\$x\\^2\\$ a\\\\b")
    '$x^2$ a\\\\b'
    """
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


#: The inspector's own HTML around the Markdown of the steps (legival_core/views/reading.py):
#: exactly these tags, with attribute values HTML-escaped (no ``<``, ``>`` or ``"`` inside),
#: in-page links only. What is left once they are removed is checked like any Markdown.
OWN_MARKUP = re.compile(
    r'<div class="lv-trace" id="lv-[a-z]+">|</div>|<style>[^<>]*</style>'
    r'|<span class="lv-[a-z -]+"(?: (?:id|title|style)="[^"<>]*")*>|</span>'
    r'|<a class="lv-jump" href="#lv-[a-z]+-s\d+" title="[^"<>]*">|</a>'
)


def markup_problems(markdown: str) -> list[str]:
    """What in a Markdown string would render as markup (empty when it is all literal)."""
    if 'class="lv-trace"' in markdown:
        markdown = OWN_MARKUP.sub(" ", markdown)
    found = [piece for piece, pattern in UNESCAPED if pattern.search(markdown)]
    found += AUTOLINK.findall(shown_text(markdown))
    return found


def test_the_checks_catch_raw_names() -> None:
    """The detectors themselves: each raw hostile name trips them, its escaped form does not."""
    for name in [*NAMES.values(), *URL_VALUES.values()]:
        assert markup_problems(name), name
        assert markup_problems(markdown_literal(name)) == [], name
    assert markup_problems("see https\\:\\/\\/evil\\.example") == ["https://evil.example"]
    # inside the inspector's steps only its own tags are set aside: a raw name still trips them
    for name in NAMES.values():
        steps = f'<div class="lv-trace" id="lv-main"><span class="lv-text">{name}</span></div>'
        assert markup_problems(steps), name
        escaped = steps.replace(name, markdown_literal(name))
        assert markup_problems(escaped) == [], name


def _markdown_strings(proto: Any, kind: str) -> Iterator[tuple[str, str]]:
    """(field, text) of every string of ``proto`` (nested messages included) that Streamlit
    renders as Markdown."""
    for field, value in proto.ListFields():
        # A field holds one value or a repeated container of them.
        single = isinstance(value, str | bytes | int | float) or hasattr(value, "ListFields")
        values = [value] if single else list(value)
        if field.message_type is not None:
            for message in values:
                yield from _markdown_strings(message, kind)
        elif field.name in MARKDOWN_FIELDS or (kind == "Radio" and field.name == "options"):
            yield from ((field.name, text) for text in values if isinstance(text, str))


def markdown_fields(at: AppTest) -> list[tuple[str, str, str]]:
    """(element type, field, text) of every Markdown-rendered string on the page."""
    out = []
    for node in at._tree:
        proto = getattr(node, "proto", None)
        if proto is None or proto.DESCRIPTOR.name in NOT_MARKDOWN:
            continue
        kind = proto.DESCRIPTOR.name
        out += [(kind, field, text) for field, text in _markdown_strings(proto, kind)]
    return out


def plotly_strings(at: AppTest) -> list[str]:
    """Every string of every Plotly figure on the page (labels, names, hover text, titles)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for chart in at.get("plotly_chart"):
        walk(json.loads(chart.proto.spec))
    return found


def app_pages() -> list[str]:
    found = re.findall(r'st\.Page\(\s*"([^"]+)"', (REPO / "app.py").read_text(encoding="utf-8"))
    assert found, "no pages found in app.py"
    return found


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return app_fixtures.build_hostile_name_store(tmp_path_factory.mktemp("names") / "hostile").path


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.mark.slow
@pytest.mark.parametrize(
    "params", [{}, URL_VALUES, URL_CHOICES], ids=["as-opened", "hostile-url", "names-by-url"]
)
def test_no_page_renders_store_or_url_text_as_markup(
    hostile_store: Path, monkeypatch: pytest.MonkeyPatch, params: dict[str, str]
) -> None:
    monkeypatch.setenv("LEGIVAL_STORE", f"hostile={hostile_store}")
    monkeypatch.delenv("LEGIVAL_READONLY", raising=False)
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    charts: dict[str, list[str]] = {}
    markdown: dict[str, list[str]] = {}
    problems: list[tuple[str, str, object]] = []  # (page, what, evidence), over all pages
    for page in app_pages():
        at.query_params.clear()
        at.switch_page(page)
        for key, value in params.items():
            at.query_params[key] = value
        at.run()
        assert not at.exception, (page, [e.value for e in at.exception])
        fields = markdown_fields(at)
        problems += [
            (page, f"Markdown in {kind}.{field}", text[:100])
            for kind, field, text in fields
            if markup_problems(text)
        ]
        markdown[page] = [text for _, _, text in fields]
        charts[page] = plotly_strings(at)
        problems += [
            (page, "HTML tag in a Plotly string", s[:100])
            for s in charts[page]
            if re.search(r"<(a|img)\b", s)
        ]
        problems += [
            (page, "raw name in a Plotly string", name)
            for name in NAMES.values()
            if plotly_literal(name) != name and any(name in s for s in charts[page])
        ]
    assert problems == [], "store or URL text rendered as markup:\n" + "\n".join(map(str, problems))

    # The names are on screen (escaped), so the checks above had something to check.
    for page in (
        "leaderboard",
        "pareto",
        "redundancy",
        "decomposition",
        "transfer",
        "monitoring",
        "rewards",
    ):
        text = " ".join(charts[f"pages/{page}.py"])
        assert any(plotly_literal(t) in text for t in TEACHERS), f"{page}: no teacher drawn"
    if params is URL_VALUES:
        for page, texts in markdown.items():
            store_message = markdown_literal(f"There is no store called {URL_VALUES['store']!r}")
            assert any(store_message in t for t in texts), f"{page}: no store message"
    if not params:
        pareto = " ".join(markdown["pages/pareto.py"])
        assert any(markdown_literal(t) in pareto for t in TEACHERS), pareto
        inspector = " ".join(markdown["pages/inspector.py"])
        assert markdown_literal(NAMES["judge:toy-judge"]) in inspector, inspector
