"""Reading a trace in the inspector (issue 42, items 1 and 3): steps as Markdown with their
maths typeset and never raw HTML from a model, a swatch for every colour, the students' strip
as points at their k with the values written, what each student wrote after each prefix, and
the per-step transfer attribution as a layer with its standard error.

The Markdown is rendered with markdown-it (CommonMark, raw HTML on, as Streamlit's
``unsafe_allow_html`` does) and every tag and attribute of the result is checked against the
few this module writes itself; the page is run with Streamlit's AppTest on the app's fixture
store (its reasoning carries XSS payloads).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from markdown_it import MarkdownIt

from legival_core.store.schema import trace_id_for
from legival_core.views.reading import (
    answer_span,
    completion_heading,
    completion_markdown,
    inspector_legend,
    legend_html,
    prefix_completions,
    prefix_markdown,
    trace_markdown,
)
from legival_core.views.step_layers import (
    ATTRIBUTION_ROW,
    step_layers,
    step_layers_figure,
    student_strip_figure,
)
from tests import app_fixtures
from tests.app_runner import run_app_page

#: Model text that tries HTML, Markdown links and images, and maths commands that KaTeX would
#: turn into links, HTML or styles.
PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1)) ![x](http://evil.example/x.png)",
    r"$\href{javascript:alert(1)}{x}$ and \(\url{javascript:alert(2)}\)",
    r"$\htmlClass{x}{y}$ $\htmlStyle{color:red}{y}$ $\htmlData{a=b}{y}$ $\htmlId{i}{y}$",
    r"$$x</span><script>alert(3)</script>$$",
    r"\(a<b\) and $<img src=x onerror=alert(4)>$",
    '<span class="lv-step" id="lv-main-s1" style="position:fixed">fake step</span>',
    "</div></span><a href='javascript:alert(5)'>x</a>",
    "$x$</span><style>body{display:none}</style>",
]

#: The tags and attributes the inspector's own HTML uses (reading.trace_markdown) and what
#: Markdown itself makes of text (paragraphs, emphasis, code).
TAGS = {"div", "span", "a", "style", "p", "strong", "em", "code"}
ATTRIBUTES = {"class", "id", "title", "style", "href"}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, attrs))


def rendered_tags(markdown: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every start tag of ``markdown`` rendered as CommonMark with raw HTML allowed."""
    parser = _Tags()
    parser.feed(MarkdownIt("commonmark", {"html": True}).render(markdown))
    return parser.seen


def step_frame(texts: list[str]) -> pd.DataFrame:
    """A step table (views.inspector.step_table's columns) of ``texts``, step 2 redundant."""
    n = len(texts)
    return pd.DataFrame(
        {
            "step": range(n),
            "number": range(1, n + 1),
            "text": texts,
            "similarity": [np.nan] + [0.95] * (n - 1),
            "matched_step": [np.nan] + [0.0] * (n - 1),
            "redundant": [False] + [True] * (n - 1),
            "tokens": [5] * n,
            "flag_lexical": [i == 1 for i in range(n)],
        }
    )


def test_hostile_and_maths_payloads_are_text_in_the_rendered_steps() -> None:
    table = step_frame(PAYLOADS)
    strip = pd.DataFrame({0: [0.0], 2: [1.0]}, index=["<b>stu</b>"])
    body = trace_markdown(table, anchor="lv-main", leak_k=2, strip=strip, wrong_steps={1: "<i>"})
    tags = rendered_tags(body)
    assert {tag for tag, _ in tags} <= TAGS, {tag for tag, _ in tags}
    for tag, attrs in tags:
        assert {name for name, _ in attrs} <= ATTRIBUTES, (tag, attrs)
        for name, value in attrs:
            if name == "href":
                assert re.fullmatch(r"#lv-main-s\d+", str(value)), value
            if name == "id":
                assert re.fullmatch(r"lv-main(-s\d+)?", str(value)), value
            assert "javascript" not in str(value).lower()
    # exactly one step element per step: the fake step in the text is not one
    assert sum(1 for tag, attrs in tags if ("class", "lv-step") in attrs) == len(PAYLOADS)
    # one style block, the module's own
    assert sum(1 for tag, _ in tags if tag == "style") == 1
    # maths that KaTeX could turn into links or HTML is left as text, not as a maths span
    assert r"$\href" not in body and r"\htmlClass{" not in body


def test_checked_maths_is_handed_to_katex() -> None:
    body = trace_markdown(step_frame([r"So \(x^2 < 4\) and $$\frac{1}{2}$$."]), anchor="t")
    assert r"$x^2 \lt{} 4$" in body and r"$\displaystyle \frac{1}{2}$" in body


def test_every_colour_the_steps_draw_has_a_swatch() -> None:
    table = step_frame(["a", "b", "c"])
    table["flag_judge"] = [False, False, True]
    table["flag_human"] = [True, False, False]
    strip = pd.DataFrame({1: [1.0], 2: [0.0]}, index=["s"])
    body = trace_markdown(table, anchor="t", leak_k=1, strip=strip, wrong_steps={2: "human"})
    legend = " ".join(s.css for s in inspector_legend())
    drawn = set(re.findall(r"(?:background|border-left:3px solid|border-top:2px dashed) ?:?"
                           r"\s*(#[0-9a-fA-F]{6}|rgb\([^)]*\))", body))  # fmt: skip
    # white is the text of a marker, #eaecee the rule of a plain step: both are "no colour"
    assert drawn - {"#eaecee"}
    for colour in drawn - {"#eaecee"}:
        assert colour in legend, colour
    assert "lv-swatch" in legend_html() and "<script" not in legend_html()


def test_the_strip_draws_measured_prefixes_as_points_with_their_values() -> None:
    """Measured at k = 0, 3, 6, 9, 10 of 10 steps: five points at those k (not cells spread
    over the steps between), each value written."""
    strip = pd.DataFrame({0: [0.0], 3: [0.25], 6: [0.5], 9: [1.0], 10: [1.0]}, index=["smol"])
    figure = student_strip_figure(strip, m=10)
    (trace,) = figure.data
    assert trace.type == "scatter" and "markers" in trace.mode and "text" in trace.mode
    assert list(trace.x) == [0, 3, 6, 9, 10]
    assert list(trace.text) == ["0.00", "0.25", "0.50", "1.00", "1.00"]
    assert tuple(figure.layout.xaxis.range) == (-0.5, 10.5)


def test_the_attribution_layer_and_its_standard_error() -> None:
    """Hand-worked: 2 samples at k = 0 (0 right), 2 at k = 2 (both right) on 2 steps: the two
    steps share a = 1 - 0, so 0.5 each; se = sqrt(0·1/2 + 1·0/2) / 2 = 0."""
    from legival_core.metrics.attribution import step_attribution

    rollouts = pd.DataFrame({"trace_id": "t", "k": [0, 0, 2, 2], "correct": [0, 0, 1, 1]})
    attribution = step_attribution(rollouts, m=2)
    table = pd.DataFrame({"step": [0, 1], "number": [1, 2], "similarity": [np.nan, 0.1]})
    layers = step_layers(table, None, None, attribution)
    assert layers.loc[ATTRIBUTION_ROW].tolist() == [0.5, 0.5]
    figure = step_layers_figure(layers, {ATTRIBUTION_ROW: attribution["se"].tolist()})
    row = next(t for t in figure.data if t.y[0] == ATTRIBUTION_ROW)
    assert "(se)" in row.hovertemplate and list(row.customdata[0]) == [0.0, 0.0]
    assert (row.zmin, row.zmax) == (-0.5, 0.5)


def test_a_completion_is_escaped_and_its_answer_marked() -> None:
    text = "<img src=x onerror=alert(1)> so $x=4$, [l](javascript:x)\n\nAnswer: 4"
    span = answer_span(text, "4")
    assert span == (len(text) - 1, len(text))
    shown = completion_markdown(text, span)
    assert ":orange-background[**4**]" in shown and "$x=4$" in shown
    tags = rendered_tags(shown)
    assert {tag for tag, _ in tags} <= {"p", "strong"}, tags
    heading = completion_heading(
        {"student": "<b>x</b>", "sample": 1, "correct": 0.0, "extracted": "[a](b)", "status": "ok"}
    )
    assert {tag for tag, _ in rendered_tags(heading)} <= {"p", "strong"}
    assert "❌ wrong" in heading
    long = completion_markdown("y" * 30, None, limit=10)
    assert "20 more characters not shown" in long


def test_prefix_completions_and_the_prefix_shown_beside_them() -> None:
    rollouts = pd.DataFrame(
        {
            "student": ["b", "a", "a"],
            "sample": [0, 1, 0],
            "k": [2, 2, 0],
            "correct": [1.0, 0.0, 0.0],
            "extracted": ["4", None, "1"],
            "completion": ["it is 4", "no idea", "1"],
        }
    )
    rows = prefix_completions(rollouts, 2)
    assert rows[["student", "sample"]].values.tolist() == [["a", 1], ["b", 0]]
    assert rows["answer_start"].tolist()[1] == 6 and pd.isna(rows["answer_start"].iloc[0])
    table = step_frame(["one", "two <b>", "three"])
    assert prefix_markdown(table, 2) == "**1.** one\n\n**2.** two \\<b\\>"
    assert "alone" in prefix_markdown(table, 0)


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.mark.slow
def test_the_inspector_page_reads_a_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page on the app's fixture store, on the trace whose reasoning holds the payloads:
    the legend, the steps as Markdown (the payloads as text), the attribution layer and the
    students' completions at the prefix the URL names."""
    store = app_fixtures.build_store(tmp_path / "store")
    teacher, problem = app_fixtures.XSS_TRACE
    trace = trace_id_for(teacher, problem)
    at = run_app_page(
        "inspector", monkeypatch, [store.path], {"trace": trace, "k": "2"}, timeout=120
    )
    assert not at.exception, [e.value for e in at.exception]
    assert any("lv-swatch" in h.proto.body for h in at.get("html"))
    (steps,) = [m.value for m in at.markdown if 'class="lv-trace"' in m.value]
    assert "<script>" not in steps and "\\<script\\>" in steps
    charts = [c.proto.spec for c in at.get("plotly_chart")]
    assert any(ATTRIBUTION_ROW in spec for spec in charts)
    assert any("attribution" in c.value for c in at.caption)
    assert at.query_params["k"] == "2"
    texts = [m.value for m in at.markdown]
    assert any("stu\\-small" in t or "stu-small" in t for t in texts if "sample" in t), texts
    assert any(t.startswith("answer ") for t in texts), texts
    assert any(e.label.startswith("Per teacher: how concentrated") for e in at.expander)


@pytest.mark.slow
def test_results_give_the_attribution_per_trace_and_per_teacher(tmp_path: Path) -> None:
    """The notebook view equals the metric functions on the same rollouts."""
    import legival_core as lv
    from legival_core.metrics.attribution import (
        step_attribution,
        teacher_concentration,
        trace_concentration,
    )

    store = app_fixtures.build_store(tmp_path / "store")
    teacher, problem = app_fixtures.XSS_TRACE
    trace = trace_id_for(teacher, problem)
    results = lv.open(store.path)
    rollouts = store.read("rollouts")
    m = len(results.trace(trace))
    expected = step_attribution(rollouts[rollouts["trace_id"] == trace], m=m)
    pd.testing.assert_frame_equal(results.step_attribution(trace), expected)
    shares = teacher_concentration(trace_concentration(rollouts))
    pd.testing.assert_frame_equal(results.attribution(), shares)


def test_the_per_teacher_shares_decode_three_stored_columns_and_match_the_rollouts() -> None:
    """The inspector's per-teacher table from the bundled demo's stored per-trace shares,
    only the three columns it needs decoded, equals the metric functions on the rollouts
    (and the stored result is used: the full per-trace frame is what the stage stored)."""
    from legival_core.metrics.attribution import teacher_concentration, trace_concentration
    from legival_core.metrics.page_results import WholeStore, stored_frame
    from legival_core.store.store import Store
    from legival_core.views.reading import (
        ATTRIBUTION_COLUMNS,
        TEACHER_ATTRIBUTION_COLUMNS,
        stored_teacher_attribution,
        stored_trace_concentration,
    )

    store = Store.open(Path(__file__).resolve().parents[1] / "results" / "demo")
    rows = store.read("page_results", filters={"name": "attribution_traces"})
    stored = stored_frame(rows, store.manifest, "attribution_traces", WholeStore())
    assert stored is not None and len(stored.columns) > len(TEACHER_ATTRIBUTION_COLUMNS)
    narrow = stored_trace_concentration(store, TEACHER_ATTRIBUTION_COLUMNS)
    assert list(narrow.columns) == ["teacher", "top_share", "uniform_share"]
    pd.testing.assert_frame_equal(narrow, stored[list(TEACHER_ATTRIBUTION_COLUMNS)])
    rollouts = store.read("rollouts", columns=ATTRIBUTION_COLUMNS)
    expected = teacher_concentration(trace_concentration(rollouts))
    pd.testing.assert_frame_equal(stored_teacher_attribution(store), expected)


#: A trace with typeset maths and the maths payloads: (problem, reasoning).
MATHS_TRACE = (
    "sq",
    r"We need \(x^2 = 16\), so $x = 4$ or $x = -4$. "
    + " ".join(f"Step {i}: {payload}" for i, payload in enumerate(PAYLOADS))
    + r" Hence $$x \in \{-4, 4\}$$ and the answer is \boxed{4}.",
)


@pytest.mark.slow
def test_chromium_typesets_the_maths_and_shows_payloads_as_text(tmp_path: Path) -> None:
    """In a real Chromium: the checked maths of the steps is typeset by KaTeX, every payload
    is on screen as text, and the steps hold no script, image, style of the model's or
    outside link (KaTeX's \\href and \\html… are never handed to it)."""
    import json

    from precompute.cli import EXIT_OK, main
    from tests.browser_fixtures import chromium_context, streamlit_app

    problem, reasoning = MATHS_TRACE
    rows = tmp_path / "traces.jsonl"
    row = {"problem_id": problem, "prompt": "Solve x^2 = 16.", "gold": "4",
           "reasoning": reasoning, "answer": "4"}  # fmt: skip
    rows.write_text(json.dumps(row) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    assert main(["ingest", str(rows), "--store", str(store), "--teacher", "t"]) == EXIT_OK
    assert main(["segment", "--store", str(store), "--no-progress"]) == EXIT_OK
    with (
        streamlit_app(["--store", f"maths={store}"]) as base,
        chromium_context(1400, 1400) as context,
    ):
        page = context.new_page()
        errors: list[str] = []
        dialogs: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(f"{base}/inspector?store=maths", timeout=120_000)
        page.wait_for_selector("#lv-main .lv-step", state="attached", timeout=120_000)
        page.wait_for_selector("#lv-main .katex", state="attached", timeout=60_000)
        assert page.locator("#lv-main .katex").count() >= 3
        bad = "#lv-main script, #lv-main img, #lv-main iframe, #lv-main a[href^='javascript']"
        assert page.locator(bad).count() == 0
        hrefs = page.eval_on_selector_all("#lv-main a", "a => a.map(e => e.getAttribute('href'))")
        assert all(str(h).startswith("#lv-main-s") for h in hrefs), hrefs
        assert page.locator("#lv-main style").count() == 1  # the inspector's own
        text = page.locator("#lv-main").inner_text()
        assert "<script>alert(1)</script>" in text and "<img src=x onerror=alert(1)>" in text
        assert "javascript:alert(1)" in text
        assert page.locator(".lv-legend .lv-swatch").count() >= 10
        assert not errors and not dialogs
