"""Reading one trace in the inspector: its steps as Markdown with their maths typeset, a legend
of every colour the inspector draws, and what each student wrote after each prefix.

Model text is untrusted. Every piece of it goes through
:func:`legival_core.text.safe_text.markdown_math` (escaped; only checked maths spans, bold runs
and code spans are left as Markdown) before it reaches Streamlit's Markdown, and every
attribute value through :func:`legival_core.text.safe_text.html_text`. The only HTML in the
output is this module's own: ``span``, ``a`` (in-page links to ``#<anchor>-s<n>``), one ``div``
around the steps and one ``style`` block, all built from constants and numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import pandas as pd

from legival_core.text.safe_text import html_text, markdown_literal, markdown_math
from legival_core.views.inspector import LABELER_KINDS

if TYPE_CHECKING:
    from legival_core.store.store import Store

__all__ = [
    "ATTRIBUTION_COLOURS",
    "ATTRIBUTION_COLUMNS",
    "COMPLETION_LIMIT",
    "Swatch",
    "answer_span",
    "attribution_line",
    "bundle_leak_step",
    "completion_heading",
    "completion_markdown",
    "inspector_legend",
    "legend_html",
    "prefix_completions",
    "prefix_markdown",
    "render_steps",
    "stored_teacher_attribution",
    "stored_trace_concentration",
    "teacher_attribution_table",
    "trace_bundle",
    "trace_html",
    "trace_markdown",
]

#: The colours of the transfer attribution layer: a step that raises the students' solve rate,
#: one that lowers it (docs/metrics/attribution.md).
ATTRIBUTION_COLOURS = ("#1f618d", "#c0392b")
#: The answer-leak rule's colour.
LEAK_COLOUR = "#2874a6"
#: The first-wrong-step marker's colour.
WRONG_COLOUR = "#7d3c98"
#: Characters of a student's completion shown; the rest is cut with a note.
COMPLETION_LIMIT = 20_000

_ANCHOR = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class Swatch:
    """One entry of the inspector's legend: a CSS background (or border) and what it means."""

    css: str
    label: str
    group: str


def inspector_legend() -> list[Swatch]:
    """Every colour the inspector draws, with its meaning, from the constants that draw it."""
    swatches = [
        Swatch(f"background:{_shade(0.62)}", "step r_i 0.6", "Step shading (redundancy r_i)"),
        Swatch(f"background:{_shade(0.8)}", "r_i 0.8", "Step shading (redundancy r_i)"),
        Swatch(f"background:{_shade(1.0)}", "r_i 1.0", "Step shading (redundancy r_i)"),
        Swatch("border-left:3px solid #e67e22", "redundant (r_i > τ, ↩ = its match)", "Rules"),
        Swatch(f"border-top:2px dashed {LEAK_COLOUR}", "answer leak: prefix states it", "Rules"),
    ]
    names = {
        "judge": "LLM judge",
        "cues": "context-aware cues",
        "lexical": "lexical detector",
        "human": "human",
    }
    for kind, (letter, colour) in LABELER_KINDS.items():
        name = names.get(kind, kind)
        swatches.append(Swatch(f"background:{colour}", f"{letter}: {name}", "Backtracking"))
    swatches.append(Swatch(f"background:{WRONG_COLOUR}", "✗ first wrong step", "Backtracking"))
    for value, label in ((1.0, "right (≥ 0.5)"), (0.0, "wrong"), (math.nan, "no rollout")):
        swatches.append(Swatch(f"background:{_cell(value)}", label, "Student cells after a step"))
    raises, lowers = ATTRIBUTION_COLOURS
    swatches += [
        Swatch(f"background:{raises}", "raises the solve rate / step matters", "Layers"),
        Swatch(f"background:{lowers}", "lowers it", "Layers"),
        Swatch("background:#e67e22", "redundancy r_i", "Layers"),
        Swatch("background:#7d3c98", "backtracking flagged", "Layers"),
    ]
    return swatches


def legend_html() -> str:
    """:func:`inspector_legend` as a compact HTML legend (constants only: no store text)."""
    groups: dict[str, list[Swatch]] = {}
    for swatch in inspector_legend():
        groups.setdefault(swatch.group, []).append(swatch)
    rows = []
    for group, swatches in groups.items():
        items = "".join(
            '<span style="display:inline-flex;align-items:center;margin-right:12px">'
            f'<span class="lv-swatch" style="display:inline-block;width:14px;height:12px;'
            f'margin-right:4px;border:1px solid #ccd1d1;{s.css}"></span>{html_text(s.label)}</span>'
            for s in swatches
        )
        rows.append(
            f'<div style="margin:2px 0"><b style="margin-right:8px">{html_text(group)}:</b>'
            f"{items}</div>"
        )
    return f'<div class="lv-legend" style="font-size:0.8em;line-height:1.7">{"".join(rows)}</div>'


def _attribute(text: object) -> str:
    """Text for an attribute value of this module's HTML (``$`` too, for Markdown's sake)."""
    return html_text(text).replace("$", "&#36;")


#: Styles of the step view: paragraphs flush (each step is one), long formulas scroll.
_STYLE = (
    "<style>.lv-trace p{margin:0;padding:0}.lv-trace .katex-display{margin:0}"
    ".lv-trace .lv-step{overflow-x:auto;overflow-y:hidden}</style>"
)


def _shade(similarity: float) -> str:
    """Background of a step: transparent below 0.5, then deeper orange with r_i."""
    if not math.isfinite(similarity) or similarity <= 0.5:
        return "transparent"
    alpha = min(0.55, (similarity - 0.5) * 1.1)
    return f"rgba(230,126,34,{alpha:.2f})"


def _cell(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "#d5d8dc"  # no rollout at this prefix
    return "#27ae60" if value >= 0.5 else "#e74c3c"


def _markdown_text(text: object) -> str:
    """A step's text as :func:`markdown_math`, so its maths is typeset."""
    return f'<span class="lv-text">{markdown_math(text)}</span>'


def _plain_text(text: object) -> str:
    """A step's text escaped as plain text, its line breaks kept."""
    return f'<span class="lv-text" style="white-space:pre-wrap">{html_text(str(text))}</span>'


def render_steps(
    table: pd.DataFrame,
    *,
    anchor: str,
    markdown: bool,
    start: int = 0,
    stop: int | None = None,
    leak_k: int | None = None,
    strip: pd.DataFrame | None = None,
    wrong_steps: dict[int, str] | None = None,
) -> str:
    """Steps ``start:stop`` of a :func:`legival_core.views.inspector.step_table` as the app
    draws them: each step a block shaded by its redundancy r_i (its tooltip r_i, the matched
    step and the token count), the students' cells, the backtracking and first-wrong-step
    markers, the step's text, the ↩ link to a redundant step's match and the leak rule. The one
    renderer of the inspector page (:data:`trace_markdown`) and the published site's trace
    pages (:data:`trace_html`), which differ only in ``markdown``, so the site cannot drift
    from the app.

    ``markdown``: for ``st.markdown(..., unsafe_allow_html=True)``, each step's text as
    :func:`markdown_math` (its maths typeset), with blank lines between the pieces (each step a
    Markdown paragraph that opens with its ``<span class="lv-step">``, so the text after the
    tag is read as Markdown) and the view's styles; else plain HTML, each step's text escaped
    as plain text. The ↩ link appears only on redundant steps (r_i above the table's τ): a
    link on every step would point at matches that are not repeats. ``wrong_steps`` maps a
    step number to a labeler name (a human first-wrong-step label, e.g. CHAMP's): that step
    gets a ✗ marker naming the labeler. Every name in an attribute is escaped
    (:func:`_attribute`). ``anchor`` must be a simple id (letters, digits, ``-``, ``_``); it is
    checked, not escaped.
    """
    if not _ANCHOR.fullmatch(anchor):
        raise ValueError(f"render_steps: anchor {anchor[:40]!r} is not a simple id")
    stop = len(table) if stop is None else stop
    shown = table.iloc[start:stop]
    on_page = set(shown["number"].astype(int))
    flag_columns = [c for c in table.columns if c.startswith("flag_")]
    students = list(strip.index) if strip is not None and not strip.empty else []
    parts = [f'<div class="lv-trace" id="{anchor}">', *([_STYLE] if markdown else [])]
    for row in shown.itertuples(index=False):
        number = int(row.number)
        sim = float(row.similarity) if pd.notna(row.similarity) else math.nan
        matched = None if pd.isna(row.matched_step) else int(row.matched_step) + 1
        tokens = None if pd.isna(row.tokens) else int(row.tokens)
        tip = [f"step {number}"]
        if math.isfinite(sim):
            tip.append(f"similarity {sim:.2f} to step {matched}")
        if tokens is not None:
            tip.append(f"{tokens} tokens")
        pieces = [
            f'<span class="lv-num" style="color:#7f8c8d;font-size:0.75em;margin-right:6px">'
            f"{number}{'' if tokens is None else f' · {tokens}t'}</span>"
        ]
        for student in students:
            value = strip.loc[student].get(number, math.nan)  # type: ignore[union-attr]
            value = float(value) if pd.notna(value) else math.nan
            label = "no rollout" if not math.isfinite(value) else f"correct {value:.2f}"
            pieces.append(
                f'<span class="lv-cell" title="{_attribute(student)} after step {number}: '
                f'{label}" style="display:inline-block;width:8px;height:12px;margin-right:1px;'
                f'background:{_cell(value)}"></span>'
            )
        for column in flag_columns:
            if bool(getattr(row, column)):
                kind = column.removeprefix("flag_")
                letter, colour = LABELER_KINDS[kind]
                pieces.append(
                    f'<span class="lv-bt lv-bt-{kind}" title="backtracking ({kind})" '
                    f'style="background:{colour};color:white;border-radius:3px;padding:0 3px;'
                    f'margin-right:2px;font-size:0.75em">{letter}</span>'
                )
        labeler = (wrong_steps or {}).get(number)
        if labeler:
            pieces.append(
                f'<span class="lv-wrong" title="first wrong step ({_attribute(labeler)} '
                f'label)" style="background:{WRONG_COLOUR};color:white;border-radius:3px;'
                'padding:0 3px;margin-right:2px;font-size:0.75em">'
                f"✗ first wrong step · {_attribute(labeler)}</span>"
            )
        pieces.append((_markdown_text if markdown else _plain_text)(row.text))
        if matched is not None and math.isfinite(sim) and bool(row.redundant):
            if matched in on_page:
                pieces.append(
                    f' <a class="lv-jump" href="#{anchor}-s{matched}" '
                    f'title="jump to step {matched}">↩ {matched}</a>'
                )
            else:
                pieces.append(f' <span class="lv-jump" title="on another page">↩ {matched}</span>')
        rule = "#e67e22" if bool(row.redundant) else "#eaecee"
        parts.append(
            f'<span class="lv-step" id="{anchor}-s{number}" title="{_attribute(" · ".join(tip))}" '
            f'style="display:block;background:{_shade(sim)};padding:2px 4px;margin:1px 0;'
            f'border-left:3px solid {rule}">{"".join(pieces)}</span>'
        )
        if leak_k is not None and number == leak_k:
            parts.append(
                f'<span class="lv-leak" style="display:block;border-top:2px dashed '
                f'{LEAK_COLOUR};color:{LEAK_COLOUR};font-size:0.8em;margin:2px 0">▲ the prefix '
                "up to here already states the correct answer (leak point k = "
                f"{int(leak_k)})</span>"
            )
    parts.append("</div>")
    # Markdown: blank lines between the pieces, so the div opens and closes as HTML blocks of
    # their own and each step is a paragraph of its own.
    return ("\n\n" if markdown else "").join(parts)


#: The inspector page's steps: :func:`render_steps` as Markdown, each step's maths typeset.
trace_markdown = partial(render_steps, markdown=True)
#: The published site's steps (:mod:`precompute.publish`): :func:`render_steps` as plain HTML,
#: every piece of text escaped.
trace_html = partial(render_steps, markdown=False)


def answer_span(completion: object, extracted: object) -> tuple[int, int] | None:
    """Where the graded answer stands in a student's completion: the last occurrence of
    ``extracted`` (the answer the grader took), else of it without surrounding blanks; None
    when it is not found verbatim (the grader normalised it) or either is missing.

    >>> answer_span("so 4, no wait: the answer is 4.", "4")
    (29, 30)
    >>> answer_span("answer 5", "4") is None, answer_span(None, "4") is None
    (True, True)
    """
    if not isinstance(completion, str) or extracted is None or pd.isna(extracted):
        return None
    for wanted in dict.fromkeys((str(extracted), str(extracted).strip())):
        if wanted:
            at = completion.rfind(wanted)
            if at >= 0:
                return at, at + len(wanted)
    return None


def completion_markdown(
    completion: object, span: tuple[int, int] | None, limit: int = COMPLETION_LIMIT
) -> str:
    """A student's completion as Markdown (:func:`markdown_math`, paragraphs kept) with the
    graded answer's ``span`` highlighted; cut after ``limit`` characters with a note.

    >>> text = "So $x=4$.\\n\\nAnswer: 4"
    >>> print(completion_markdown(text, answer_span(text, "4")).replace("\\u2060", "|"))
    So $x=4$\\.
    <BLANKLINE>
    Answer\\: |:orange-background[**4**]
    """
    text = "" if completion is None or (isinstance(completion, float)) else str(completion)
    cut = len(text) > limit
    shown = text[:limit]
    if span is not None and 0 <= span[0] < span[1] <= len(shown):
        before, answer, after = shown[: span[0]], shown[span[0] : span[1]], shown[span[1] :]
        body = (
            markdown_math(before, paragraphs=True)
            # a word joiner first: a directive right after a colon (an escaped one too) is not
            # read as one
            + f"\u2060:orange-background[**{markdown_literal(answer)}**]"
            + markdown_math(after, paragraphs=True)
        )
    else:
        body = markdown_math(shown, paragraphs=True)
    if cut:
        body += f"\n\n*… {len(text) - limit:,} more characters not shown*"
    return body


def prefix_markdown(table: pd.DataFrame, k: int, last: int = 3) -> str:
    """The end of the teacher's prefix of ``k`` steps as Markdown: its last ``last`` steps,
    each numbered, maths typeset (an empty prefix says so)."""
    if k <= 0:
        return "*The student saw the problem alone (k = 0).*"
    steps = table[table["number"] <= k].tail(last)
    lines = [
        f"**{int(n)}.** {markdown_math(text)}"
        for n, text in zip(steps["number"], steps["text"], strict=True)
    ]
    first = int(steps["number"].iloc[0]) if len(steps) else 1
    head = f"*… steps 1–{first - 1} before these*\n\n" if first > 1 else ""
    return head + "\n\n".join(lines)


def prefix_completions(rollouts: pd.DataFrame, k: int) -> pd.DataFrame:
    """The rollouts of one trace at prefix ``k``, one row per (student, sample), with the
    answer's span in each completion (:func:`answer_span`; ``answer_start`` / ``answer_end``,
    missing when not found). Sorted by student and sample."""
    columns: Sequence[str] = ("student", "sample", "correct", "extracted", "status", "completion")
    at_k = rollouts[rollouts["k"] == k]
    out = at_k[[c for c in columns if c in at_k]].copy()
    for column in columns:
        if column not in out:
            out[column] = None
    spans = [
        answer_span(text, answer)
        for text, answer in zip(out["completion"], out["extracted"], strict=True)
    ]
    out["answer_start"] = pd.array([s[0] if s else None for s in spans], dtype="Int64")
    out["answer_end"] = pd.array([s[1] if s else None for s in spans], dtype="Int64")
    out["student"] = out["student"].astype(str)
    return out.sort_values(["student", "sample"], kind="stable").reset_index(drop=True)


def completion_heading(row: Mapping[str, Any]) -> str:
    """The line above one student's completion, as Markdown: student, sample, grade, the
    answer the grader took and the rollout's status (store text escaped).

    >>> completion_heading({"student": "s*", "sample": 0, "correct": 1.0, "extracted": "4",
    ...                     "status": "ok"})
    '**s\\\\*** · sample 0 · ✅ right · graded answer: 4'
    """
    correct = row.get("correct")
    if correct is None or pd.isna(correct):
        grade = "not graded"
    else:
        grade = "✅ right" if float(correct) >= 0.5 else "❌ wrong"
    parts = [f"**{markdown_literal(row.get('student'))}**"]
    if row.get("sample") is not None and pd.notna(row.get("sample")):
        parts.append(f"sample {int(row['sample'])}")
    parts.append(grade)
    extracted = row.get("extracted")
    if extracted is not None and pd.notna(extracted):
        parts.append(f"graded answer: {markdown_literal(extracted)}")
    else:
        parts.append("no answer extracted")
    status = row.get("status")
    if status is not None and pd.notna(status) and str(status) != "ok":
        parts.append(f"status {markdown_literal(status)}")
    return " · ".join(parts)


def attribution_line(attribution: pd.DataFrame, teacher: Mapping[str, Any] | None = None) -> str:
    """One sentence on how concentrated a trace's useful steps are (the share of its positive
    per-step attribution the top 10% of measured steps carry), and its teacher's mean when
    ``teacher`` (a :func:`legival_core.metrics.attribution.teacher_concentration` row) is
    given. Empty when no step was measured. Numbers only: no store text."""
    from legival_core.metrics.attribution import top_share

    if attribution.empty:
        return ""
    share, top = top_share(attribution["attribution"].to_numpy(dtype="float64"))
    measured = int(attribution["attribution"].notna().sum())
    if not measured:
        return ""
    if math.isnan(share):
        line = f"No measured step raises the students' solve rate ({measured} steps measured)."
    else:
        line = (
            f"The top 10% of the measured steps ({top} of {measured}) carry {share:.0%} of the "
            f"positive transfer attribution (even share {top / measured:.0%})."
        )
    if teacher is not None and pd.notna(teacher.get("top_share")):
        se = teacher.get("top_share_se")
        spread = f" ± {float(se):.0%}" if se is not None and pd.notna(se) else ""
        line += (
            f" Its teacher's mean over {int(teacher['traces'])} traces: "
            f"{float(teacher['top_share']):.0%}{spread} (even share "
            f"{float(teacher['uniform_share']):.0%})."
        )
    return line


#: The rollouts' columns the attribution summaries read (never the completions).
ATTRIBUTION_COLUMNS = ["trace_id", "teacher", "dataset", "k", "correct"]


#: The tables :func:`trace_bundle` reads one trace's rows of (keyed reads).
_BUNDLE_TABLES = (
    "traces",
    "grades",
    "judgments",
    "steps",
    "similarity",
    "rollouts",
    "error_labels",
    "trace_transfer",
    "chunk_importance",
)
#: How many of them it reads at once.
_BUNDLE_READERS = 4


def trace_bundle(store: Store, trace_id: str, threshold: float) -> dict[str, Any]:
    """Everything the Trace inspector shows about one trace, read with filters (that trace,
    its problem; never a whole table): the ``trace`` and its ``grade`` and ``problem`` rows,
    the ``steps`` (:func:`legival_core.views.inspector.step_table` at redundancy τ =
    ``threshold``, with the offline flags of the problem's task), each step's character
    ``ends``, the students' ``strip``, the per-step transfer ``attribution``
    (docs/metrics/attribution.md), the backtracking ``labelers``, the ``error_labels``, the
    stored leak rows (``stored_leaks``) and the Thought Anchors chunk ``alignment`` (None
    without chunk importances)."""
    from legival_core.metrics.attribution import step_attribution
    from legival_core.views.inspector import step_table, student_strip, with_offline_flags
    from legival_core.views.step_layers import chunk_alignment

    one = {"trace_id": trace_id}

    def read(table: str, columns: list[str] | None = None) -> pd.DataFrame:
        if not store.has(table):
            return pd.DataFrame()
        return store.read(table, columns=columns, filters=one)

    # The keyed reads side by side: each mostly decompresses and decodes batches of its
    # table's part, which Arrow does without the GIL (at a million traces, on two busy cores:
    # 0.62 s one after another, 0.33 s side by side, best of five).
    columns: dict[str, list[str] | None] = dict.fromkeys(_BUNDLE_TABLES)
    # the strip's columns only: the rollouts are the store's biggest table
    columns["rollouts"] = ["trace_id", "student", "k", "correct"]
    with ThreadPoolExecutor(max_workers=_BUNDLE_READERS) as pool:
        pending = {name: pool.submit(read, name, wanted) for name, wanted in columns.items()}
        trace = pending["traces"].result().iloc[0].to_dict()
        problems = (
            store.read("problems", filters={"problem_id": trace["problem_id"]})
            if store.has("problems")
            else pd.DataFrame()
        )
        got = {name: future.result() for name, future in pending.items()}
    grades, judgments, steps = got["grades"], got["judgments"], got["steps"]
    problem = problems.iloc[0].to_dict() if len(problems) else {}
    table = step_table(steps, got["similarity"], judgments, threshold=threshold)
    table = with_offline_flags(table, problem.get("task"))
    rollouts = got["rollouts"]
    return {
        "trace": trace,
        "grade": grades.iloc[0].to_dict() if len(grades) else {},
        "problem": problem,
        "steps": table,
        "ends": steps.sort_values("step")["end"].tolist() if len(steps) else [],
        "strip": student_strip(rollouts),
        "attribution": (
            step_attribution(rollouts, m=len(table)) if len(rollouts) else pd.DataFrame()
        ),
        "labelers": sorted(judgments["labeler"].astype(str)) if len(judgments) else [],
        "error_labels": got["error_labels"],
        "stored_leaks": got["trace_transfer"],
        "alignment": chunk_alignment(steps, got["chunk_importance"]),
    }


def bundle_leak_step(bundle: Mapping[str, Any]) -> int | None:
    """The first step of a :func:`trace_bundle`'s trace whose prefix already states the gold
    answer: the stored ``trace_transfer.leak_k`` when the metrics stage stored one (every trace
    with rollouts), else checked here by the problem's task (its answer layer decides; seconds
    on a trace of 2,000 steps). None without a task, steps or gold answer, or when no prefix
    states it."""
    from legival_core.views.inspector import NOT_STORED, stored_leak_step

    stored = stored_leak_step(bundle["stored_leaks"])
    if stored is not NOT_STORED:
        return cast("int | None", stored)  # stored_leak_step: k, None or NOT_STORED
    problem, table = bundle["problem"], bundle["steps"]
    gold = str(problem.get("gold") or "")
    if not problem.get("task") or not len(table) or not gold:
        return None
    from legival_core.tasks import get_task

    try:
        task = get_task(str(problem["task"]))
    except KeyError:
        return None
    reasoning = str(bundle["trace"]["reasoning"])
    return task.answer_leak_step(reasoning, bundle["ends"], gold, problem=problem).k


def stored_trace_concentration(store: Store, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Every trace's :func:`legival_core.metrics.attribution.trace_concentration` as the
    metrics stage stored it (``page_results``, ``attribution_traces``) when its stamp matches
    the store's rollouts; else computed from the rollouts' grading columns. Empty without
    rollouts. ``columns``: only those (the stored ones are then the only ones decoded)."""
    from legival_core.metrics.attribution import trace_concentration
    from legival_core.metrics.page_results import WholeStore, stored_frame

    if store.has("page_results"):
        # A keyed read: the store's other results (the million-row trace list) stay on disk.
        rows = store.read("page_results", filters={"name": "attribution_traces"})
        stored = stored_frame(rows, store.manifest, "attribution_traces", WholeStore(), columns)
        if stored is not None:
            return stored
    if not store.has("rollouts"):
        return pd.DataFrame()
    computed = trace_concentration(store.read("rollouts", columns=ATTRIBUTION_COLUMNS))
    return computed if columns is None else computed[[c for c in computed if c in columns]]


#: The columns of :func:`stored_trace_concentration` that :func:`teacher_attribution_table`
#: reads.
TEACHER_ATTRIBUTION_COLUMNS = ("teacher", "top_share", "uniform_share")


def stored_teacher_attribution(store: Store) -> pd.DataFrame:
    """:func:`teacher_attribution_table` of the store's per-trace shares, only the columns it
    needs decoded (:data:`TEACHER_ATTRIBUTION_COLUMNS`)."""
    return teacher_attribution_table(stored_trace_concentration(store, TEACHER_ATTRIBUTION_COLUMNS))


def teacher_attribution_table(traces: pd.DataFrame) -> pd.DataFrame:
    """Per teacher: :func:`legival_core.metrics.attribution.teacher_concentration` of the
    per-trace shares (empty when there are none)."""
    from legival_core.metrics.attribution import teacher_concentration

    if traces.empty or "teacher" not in traces:
        return pd.DataFrame()
    return teacher_concentration(traces)
