"""The evidence pages of a static leaderboard site: per teacher, per (teacher, dataset) row,
per trace.

* a **teacher page** lists the teacher's (teacher, dataset) rows with their stored values;
* a **row page** holds the per-trace table of one row — every per-trace metric (the
  ``trace_efficiency`` columns and, per student, the ``trace_transfer`` ones), sortable, with the
  same numbers as CSV beside it — each trace linking to its page;
* a **trace page** is the trace inspector's view as static HTML: the steps shaded by
  redundancy with a link to the matched step, the backtracking marks, the leak step and each
  student's correctness per prefix aligned to the steps (``TraceEvidence.steps_html``, which
  the publisher makes with :func:`legival_core.views.trace_html`, the very function the app
  renders with, so the text is escaped exactly as in the app), then the student's answers at
  every prefix.

Pure functions from DataFrames to HTML strings; every piece of store text goes through
:func:`legival_core.text.safe_text.html_text` (directly or via
:func:`legival_core.views.snapshot.html_table`).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from legival_core.text.safe_text import html_text
from legival_core.views.snapshot import html_table, page_html

__all__ = [
    "EFFICIENCY_COLUMNS",
    "TRANSFER_COLUMNS",
    "TraceEvidence",
    "choose_traces",
    "page_name",
    "row_page",
    "shown",
    "teacher_page",
    "teacher_rows_table",
    "trace_metrics_table",
    "trace_page",
]

#: Per-trace metrics of ``trace_efficiency`` shown on a row page, in this order.
EFFICIENCY_COLUMNS = (
    "correct",
    "tokens",
    "steps",
    "tokens_norm",
    "steps_norm",
    "redundancy",
    "backtracking",
    "compression",
)
#: Per-(trace, student) metrics of ``trace_transfer`` shown on a row page, per student.
TRANSFER_COLUMNS = (
    "fotu",
    "hazard_bin",
    "regression_count",
    "regression_rate",
    "baseline",
    "lift",
    "leak_k",
    "fotu_before_leak",
)


def page_name(*parts: object) -> str:
    """A file stem for the page of ``parts`` (a teacher, a dataset, a trace id …): the parts'
    letters, digits, ``.``, ``_`` and ``-`` (others as ``-``), cut to 60 characters, then 8 hex
    digits of a BLAKE2b digest of the exact parts, so that two names that read alike (or a
    hostile name) never share a file.

    >>> page_name("gpt-4", "champ-sequence")
    'gpt-4--champ-sequence-370325f0'
    >>> page_name("<script>", "x") != page_name("-script-", "x")
    True
    """
    readable = "--".join(re.sub(r"[^A-Za-z0-9._-]+", "-", str(p)).strip("-.") for p in parts)
    tag = hashlib.blake2b("\x1f".join(map(str, parts)).encode("utf-8"), digest_size=4)
    return f"{readable[:60] or 'page'}-{tag.hexdigest()}"


def choose_traces(trace_ids: Sequence[str], n: int | None, seed: int = 0) -> list[str]:
    """The traces of a row that get a page: all (``n`` None) or ``n`` of them, chosen by the
    BLAKE2b digest of ``"<seed>:<trace id>"`` (smallest first), returned in id order.

    Keyed on each trace alone, so the choice does not depend on the order of the rows, and a
    trace added to a store later takes a place only if its digest is among the smallest.

    >>> ids = [f"t{i}" for i in range(10)]
    >>> choose_traces(ids, 3) == choose_traces(list(reversed(ids)), 3)
    True
    >>> len(choose_traces(ids, 3)), choose_traces(ids, None) == sorted(ids)
    (3, True)
    >>> choose_traces(ids, 3, seed=1) != choose_traces(ids, 3, seed=0)
    True
    """
    unique = sorted(set(map(str, trace_ids)))
    if n is None or n >= len(unique):
        return unique

    def rank(trace_id: str) -> str:
        return hashlib.blake2b(f"{seed}:{trace_id}".encode(), digest_size=8).hexdigest()

    return sorted(sorted(unique, key=rank)[: max(0, n)])


def shown(value: object) -> str:
    """A number as a table shows it: integers whole, others to 4 significant digits, booleans
    ``yes`` / ``no``, missing ``–``.

    >>> [shown(v) for v in (3, 0.123456, True, None, float("nan"), "x")]
    ['3', '0.1235', 'yes', '–', '–', 'x']
    """
    if value is None or value is pd.NA:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.4g}"
    try:
        if pd.isna(value):
            return "–"
    except (TypeError, ValueError):
        pass
    if hasattr(value, "item"):  # numpy scalars
        return shown(value.item())
    return str(value)


def trace_metrics_table(efficiency: pd.DataFrame, transfer: pd.DataFrame) -> pd.DataFrame:
    """One row per trace of one (teacher, dataset) row: ``trace_id``, ``problem_id``, the
    :data:`EFFICIENCY_COLUMNS` and, per student ``s``, ``<metric> [s]`` for each of
    :data:`TRANSFER_COLUMNS` (a trace without rollouts has them missing). Sorted by problem,
    then trace id.

    >>> eff = pd.DataFrame({"trace_id": ["b", "a"], "problem_id": ["p", "p"], "tokens": [5, 7]})
    >>> tr = pd.DataFrame({"trace_id": ["a"], "student": ["s"], "fotu": [0.5]})
    >>> trace_metrics_table(eff, tr).to_dict("list")
    {'trace_id': ['a', 'b'], 'problem_id': ['p', 'p'], 'tokens': [7, 5], 'fotu [s]': [0.5, nan]}
    """
    keep = ["trace_id", "problem_id", *[c for c in EFFICIENCY_COLUMNS if c in efficiency]]
    table = efficiency[keep].copy()
    table["trace_id"] = table["trace_id"].astype(str)
    if transfer is not None and len(transfer):
        metrics = [c for c in TRANSFER_COLUMNS if c in transfer]
        for student in sorted(transfer["student"].astype(str).unique()):
            rows = transfer[transfer["student"].astype(str) == student]
            wide = rows.set_index(rows["trace_id"].astype(str))[metrics]
            wide.columns = [f"{c} [{student}]" for c in metrics]
            table = table.join(wide, on="trace_id")
    return table.sort_values(["problem_id", "trace_id"], kind="stable").reset_index(drop=True)


#: Per metric of ``teacher_metrics``: the per-trace table and column whose non-missing rows
#: the stored value averages (SOTU: the traces a student solves, which have a hazard bin;
#: never solved: every correct trace with rollouts, which has a FOTU).
_VALUE_SOURCES = {
    "accuracy": ("efficiency", "correct"),
    "tokens": ("efficiency", "tokens"),
    "redundancy": ("efficiency", "redundancy"),
    "backtracking": ("efficiency", "backtracking"),
    "fotu": ("transfer", "fotu"),
    "sotu": ("transfer", "hazard_bin"),
    "regression_rate": ("transfer", "regression_rate"),
    "never_solved": ("transfer", "fotu"),
    "baseline": ("transfer", "baseline"),
    "lift": ("transfer", "lift"),
    "fotu_before_leak": ("transfer", "fotu_before_leak"),
}


def _value_support(frame: pd.DataFrame | None, column: str) -> tuple[int, int] | None:
    """(traces, students) with a value of ``column`` in ``frame``; None without the column."""
    if frame is None or column not in frame:
        return None
    rows = frame[frame[column].notna()]
    students = rows["student"].nunique() if "student" in rows else 1
    return int(rows["trace_id"].nunique()), int(students)


def teacher_rows_table(
    rows: pd.DataFrame,
    efficiency: Sequence[pd.DataFrame | None],
    transfer: Sequence[pd.DataFrame | None],
) -> pd.DataFrame:
    """A teacher's stored (teacher, dataset) rows as text, under the app's column names
    (:func:`legival_core.views.display.column_label`, shares in %): every stored value with
    the n of the per-trace rows it averages and their coverage of the row's traces, e.g.
    ``36.7% · n 3 of 10 traces × 2 students``. ``efficiency`` and ``transfer`` hold each
    row's ``trace_efficiency`` and ``trace_transfer`` rows, in the order of ``rows`` (None: the
    store has no such table, and the value stands alone).

    >>> rows = pd.DataFrame({"dataset": ["d"], "fotu": [0.36667], "n_traces": [10]})
    >>> eff = pd.DataFrame({"trace_id": [f"t{i}" for i in range(10)], "correct": [True] * 10})
    >>> tr = pd.DataFrame({"trace_id": ["t0", "t0", "t1", "t1", "t2", "t2"],
    ...                    "student": ["a", "b"] * 3, "fotu": [0.3] * 6})
    >>> teacher_rows_table(rows, [eff], [tr]).iloc[0].to_dict()
    {'dataset': 'd', 'FOTU': '36.7% · n 3 of 10 traces × 2 students', 'n traces': '10'}
    """
    from legival_core.views.display import column_label, number_formatter

    out: dict[str, list[str]] = {}
    for column in rows.columns:
        if column == "teacher":
            continue
        write = number_formatter(str(column), rows[column])
        cells = []
        for index, value in enumerate(rows[column].tolist()):
            text = write(value)
            source = _VALUE_SOURCES.get(str(column))
            if source is not None and text != "—":
                frame = (efficiency if source[0] == "efficiency" else transfer)[index]
                support = _value_support(frame, source[1])
                of = efficiency[index]
                if support is not None and of is not None:
                    traces, students = support
                    text += f" · n {traces} of {of['trace_id'].nunique()} traces"
                    text += f" × {students} students" if students > 1 else ""
            cells.append(text)
        out[column_label(str(column))] = cells
    return pd.DataFrame(out)


def _text_table(table: pd.DataFrame) -> pd.DataFrame:
    return table.map(shown) if len(table) else table.astype(str)


def teacher_page(
    teacher: str,
    rows: pd.DataFrame,
    row_pages: Sequence[str],
    *,
    footer: str,
    source: str = "",
    notes: Sequence[str] = (),
) -> str:
    """The page of one teacher: its (teacher, dataset) rows as stored in ``teacher_metrics``,
    as :func:`teacher_rows_table` writes them (``rows``, one per dataset), each dataset linking
    to its row page (``row_pages``, relative addresses in the order of ``rows``); ``notes``
    (plain text) under the first note, e.g. how far the Backtracking column can be trusted."""
    table = rows
    body = [
        '<p class="note">The stored per-dataset values behind the leaderboard row (the board '
        "averages them over datasets). Beside each value, n: the per-trace values it averages "
        "(× students for the transfer metrics), of all the row's traces (accuracy, tokens, "
        "redundancy and backtracking rest on every trace; the transfer metrics on the correct "
        "traces with rollouts; SOTU on those a student solves). Each dataset opens the "
        "per-trace table of that row.</p>",
        *(f'<p class="note">{html_text(note)}</p>' for note in notes),
    ]
    if source:
        body.append(f'<p class="note">{html_text(source)}</p>')
    body.append(html_table(table, "teacher-rows", links={"dataset": list(row_pages)}))
    return page_html(
        f"Teacher {teacher}",
        body,
        root="../",
        footer=footer,
        crumbs=[("Leaderboard", "../index.html")],
    )


def row_page(
    teacher: str,
    dataset: str,
    table: pd.DataFrame,
    trace_pages: Mapping[str, str],
    *,
    csv_name: str,
    teacher_href: str,
    footer: str,
    chosen_note: str,
    source: str = "",
    notes: Sequence[str] = (),
) -> str:
    """The page of one (teacher, dataset) row: the per-trace table (:func:`trace_metrics_table`,
    sortable, each trace with a page linking to it via ``trace_pages``: trace id -> relative
    address), a link to the same table as CSV (``csv_name``), ``chosen_note`` saying which
    traces have pages and ``notes`` (plain text, e.g. how far the Backtracking column can be
    trusted)."""
    text = _text_table(table)
    links = [trace_pages.get(t) for t in table["trace_id"].astype(str)]
    body = [
        f'<p class="note">{len(table)} traces. Click a column header to sort. '
        f'<a href="{html_text(csv_name)}" download>CSV</a> (the same numbers, unrounded).</p>',
        f'<p class="note">{html_text(chosen_note)}</p>',
        *(f'<p class="note">{html_text(note)}</p>' for note in notes),
    ]
    if source:
        body.append(f'<p class="note">{html_text(source)}</p>')
    body.append(html_table(text, "trace-table", links={"trace_id": links}, sortable=True))
    return page_html(
        f"{teacher} on {dataset}",
        body,
        root="../",
        footer=footer,
        crumbs=[("Leaderboard", "../index.html"), (f"Teacher {teacher}", teacher_href)],
    )


@dataclass(frozen=True)
class TraceEvidence:
    """What a trace page shows about one trace, read from the store by the publisher."""

    trace: Mapping[str, object]  # its ``traces`` row
    problem: Mapping[str, object]  # its ``problems`` row (empty when unknown)
    grade: Mapping[str, object]  # its ``grades`` row (empty when ungraded)
    steps: pd.DataFrame  # :func:`legival_core.views.step_table`
    strip: pd.DataFrame  # :func:`legival_core.views.student_strip`
    rollouts: pd.DataFrame  # its ``rollouts`` rows
    error_labels: pd.DataFrame  # its ``error_labels`` rows
    leak_k: int | None
    #: The steps as the inspector draws them (:func:`legival_core.views.trace_html`).
    steps_html: str
    #: Whether ``leak_k`` was stored by the metrics stage (traces with rollouts); False: not
    #: looked for.
    leak_stored: bool = True
    #: The backtracking labelers whose marks the page shows (stored, or computed offline).
    labelers: tuple[str, ...] = ()


def _pre(label: str, text: object) -> str:
    return f'<h3>{html_text(label)}</h3><pre class="text">{html_text(str(text))}</pre>'


def trace_page(
    evidence: TraceEvidence,
    *,
    row_href: str,
    teacher_href: str,
    footer: str,
) -> str:
    """The static trace inspector of one trace (see the module docstring)."""
    trace, grade, problem = evidence.trace, evidence.grade, evidence.problem
    teacher, dataset = str(trace.get("teacher")), str(trace.get("dataset"))
    graded = grade.get("correct")  # a bool, or missing / NA when the trace is not graded
    correct = ("yes" if graded else "no") if isinstance(graded, bool | np.bool_) else "not graded"
    facts = pd.DataFrame(
        {
            "trace": [str(trace.get("trace_id"))],
            "problem": [str(trace.get("problem_id"))],
            "sample": [shown(trace.get("sample"))],
            "correct": [correct],
            "steps m": [str(len(evidence.steps))],
            "tokens": [shown(trace.get("tokens"))],
            "answer leak k": [
                shown(evidence.leak_k) if evidence.leak_stored else "not stored (no rollouts)"
            ],
        }
    )
    from legival_core.views.inspector import labeler_legend

    body = [
        '<p class="note">Steps are shaded by redundancy (their best cosine match to an earlier '
        "step; hover a step for the value, ↩ jumps to the matched step). ✗ = a human's first "
        "wrong step. The small cells after a step's number: each student's correctness after "
        "seeing the trace up to that step (green right, red wrong, grey no rollout). A dashed "
        "rule marks the answer-leak point.</p>",
        f'<p class="note">{html_text(labeler_legend(list(evidence.labelers)))}</p>',
        html_table(facts, "trace-facts"),
    ]
    if problem:
        body.append(_pre("Problem", problem.get("prompt", "")))
        body.append(f"<p>Gold answer: <code>{html_text(str(problem.get('gold', '')))}</code></p>")
    for label in evidence.error_labels.to_dict(orient="records"):
        if label.get("error_found"):
            text = (
                f"{label['labeler']} label: first wrong step = step {label.get('step')}: "
                f"{str(label.get('wrong_step_text') or '')[:300]}"
            )
        else:
            text = f"{label['labeler']} label: no mistake found in this trace"
        body.append(f'<p class="note">{html_text(text)}</p>')
    body.append("<h2>Steps</h2>")
    body.append(evidence.steps_html)
    if not evidence.strip.empty and 0 in evidence.strip.columns:
        alone = ", ".join(f"{s} {v:.2f}" for s, v in evidence.strip[0].items())
        body.append(f'<p class="note">{html_text("Student alone (k = 0): " + alone)}</p>')
    body.append(_pre("Answer", trace.get("answer_text") or ""))
    if len(evidence.rollouts):
        answers = evidence.rollouts.sort_values(["student", "k", "sample"])[
            [c for c in ("student", "k", "sample", "extracted", "correct", "completion")
             if c in evidence.rollouts]
        ]  # fmt: skip
        body.append("<h2>The students' answers at each prefix</h2>")
        body.append(
            '<p class="note">k = the number of the teacher\'s steps the student saw (0: the '
            "problem alone); its completion, the answer extracted from it and whether that is "
            "correct.</p>"
        )
        body.append(html_table(_text_table(answers), "student-answers", sortable=True))
    return page_html(
        f"Trace {trace.get('trace_id')}",
        body,
        root="../",
        footer=footer,
        crumbs=[
            ("Leaderboard", "../index.html"),
            (f"Teacher {teacher}", teacher_href),
            (f"{teacher} on {dataset}", row_href),
        ],
    )
