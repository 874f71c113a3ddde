"""Trace inspector: one trace step by step — redundancy, backtracking, leak point, students."""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd
import streamlit as st

from legival_core import views
from legival_core.metrics.efficiency import REDUNDANCY_THRESHOLDS
from legival_core.metrics.redundancy_sweep_view import recorded_threshold
from legival_core.store.provenance import token_sources
from legival_core.text.safe_text import markdown_literal
from legival_core.views import reading
from legival_core.views.app_config import shorten
from legival_core.views.step_layers import (
    ATTRIBUTION_ROW,
    step_layers,
    step_layers_figure,
    student_strip_figure,
)
from pages import common

STEPS_PER_PAGE = 60
#: The columns the trace list can be sorted by.
SORTABLE = ["tokens", "m", "fotu", "fotu_before_leak", "leak_k", "redundancy", "backtracking",
            "backtracks", "top_share", "teacher", "problem_id"]  # fmt: skip
NONE = "(none)"

st.title("🔬 Trace inspector")
st.caption(
    "Steps are shaded by redundancy (their best cosine match to an earlier step; hover for the "
    "value, ↩ jumps to the matched step), their maths typeset. Every colour is in the legend "
    "above the trace."
)
common.page_setup("inspector")
common.need_tables("traces", "steps", what="The trace inspector")
#: τ of the store's redundancy figures: a step above it is redundant (and gets a ↩ link).
tau = recorded_threshold(common.load_manifest()) or REDUNDANCY_THRESHOLDS["paper"]


@common.derived("trace_bundle")
def trace_bundle(trace_id: str) -> dict[str, Any]:
    """Everything the inspector shows about one trace (:func:`reading.trace_bundle`)."""
    from legival_core.store.store import Store

    return reading.trace_bundle(Store.open(common.current_store_path()), trace_id, tau)


@common.derived("prefix_rollouts")
def prefix_rollouts(trace_id: str, k: int) -> pd.DataFrame:
    """What each student wrote after the prefix of ``k`` steps of one trace (read with filters:
    one trace and one prefix; the completions are the store's biggest column)."""
    from legival_core.store.store import Store

    store = Store.open(common.current_store_path())
    if not store.has("rollouts"):
        return pd.DataFrame()
    return reading.prefix_completions(
        store.read("rollouts", filters={"trace_id": trace_id, "k": int(k)}), int(k)
    )


@common.derived("teacher_attribution")
def teacher_attribution() -> pd.DataFrame:
    """Per teacher: how concentrated the useful steps are (the mean top-10% share of the
    per-step attribution over its traces; reading.stored_teacher_attribution)."""
    from legival_core.store.store import Store

    return reading.stored_teacher_attribution(Store.open(common.current_store_path()))


def teacher_share(teacher: str) -> dict[str, Any] | None:
    """The teacher's row of :func:`teacher_attribution`, or None."""
    shares = teacher_attribution()
    if shares.empty or "teacher" not in shares:
        return None
    row = shares[shares["teacher"].astype(str) == teacher]
    return row.iloc[0].to_dict() if len(row) else None


@common.derived("leak")
def leak(trace_id: str) -> int | None:
    """The first step whose prefix already states the gold answer (the answer layer decides).

    The metrics stage stores it as ``trace_transfer.leak_k`` for every trace with rollouts;
    that value is shown. Other traces are checked here (seconds on a trace of 2,000 steps).
    """
    return reading.bundle_leak_step(trace_bundle(trace_id))


@common.derived("trace_choices", shared=True)
def trace_choices() -> pd.DataFrame:
    """One row per trace (teacher, problem, correct, m, tokens, FOTU, leak k), most telling
    first: correct traces with rollouts (views.store_trace_choices)."""
    from legival_core.store.store import Store

    return views.store_trace_choices(Store.open(common.current_store_path()))


@common.derived("trace_values")
def trace_values(column: str) -> list[str]:
    """The sorted distinct values of one column of the trace list (a teacher or dataset
    picker's options: computed once, not from a million rows at every rerun)."""
    return sorted(trace_choices()[column].astype(str).unique())


#: Rows per page of the trace table: a grid's cells are all styled before it is drawn (2,000
#: rows were an eighth of a cold start on 100,000 traces), so only one page is styled.
TABLE_ROWS = 250


@common.derived("trace_metrics", shared=True)
def trace_metrics_table() -> pd.DataFrame:
    """The trace list with the stored per-trace metrics beside it (views.trace_search)."""
    from legival_core.store.store import Store
    from legival_core.views.trace_search import trace_metrics

    return trace_metrics(trace_choices(), Store.open(common.current_store_path()))


def find_traces(table: pd.DataFrame, query: Any) -> tuple[pd.DataFrame, Any]:
    """The filters, then the bounded text search (views.trace_search.find_traces)."""
    from legival_core.store.store import Store
    from legival_core.views.trace_search import find_traces as find

    return find(table, Store.open(common.current_store_path()), query)


def find_traces_form() -> Any:
    """The *Find traces* controls, every one kept in the URL; None while none is set."""
    from legival_core.views import trace_search

    with st.expander("Find traces: search the text, filter on metrics, sort", expanded=False):
        first = st.columns([3, 1, 1])
        text = common.url_text(
            "Search the reasoning and answers", "q", where=first[0],
            placeholder="a word, a phrase or (with Regex) a pattern",
        )  # fmt: skip
        regex = common.url_toggle("Regex", "regex", where=first[1])
        field = common.url_select("In", list(trace_search.SEARCH_FIELDS), "in", where=first[2])
        second = st.columns([1, 1, 2, 1, 1])
        correct = common.url_select("Correct", ["any", "yes", "no"], "correct", where=second[0])
        leak = common.url_select(
            "Answer leak", list(trace_search.LEAK_CHOICES), "leak", where=second[1]
        )
        where = common.url_text(
            "Thresholds", "where", where=second[2],
            placeholder="redundancy>0.3, backtracks>=2, fotu=0",
            help="Comma-separated: " + ", ".join(
                f"{name} ({what})" for name, what in trace_search.FILTER_METRICS.items()
            ),
        )  # fmt: skip
        sort = common.url_select("Sort by", [NONE, *SORTABLE], "sort", where=second[3])
        descending = common.url_toggle("Descending", "desc", where=second[4])
    try:
        ranges = trace_search.parse_where(where)
        query = trace_search.TraceQuery(
            text=text, regex=regex, field=field, leak=leak, ranges=ranges,
            correct={"any": None, "yes": True, "no": False}[correct],
            sort=None if sort == NONE else sort, descending=descending,
        )  # fmt: skip
    except ValueError as error:
        st.warning(markdown_literal(str(error)))
        return None
    return None if query == trace_search.TraceQuery() else query


choices = trace_choices()
# Every trace's ids, for the pickers: the trace list has them (no read of the traces table).
index = choices[["trace_id", "problem_id", "dataset", "teacher", "sample"]]
if (
    st.query_params.get("trace") is None
    and "_inspector_trace" not in st.session_state
    and len(choices)
):
    # First visit: open on the most telling trace (correct, with students' rollouts), so the
    # student strip and the leak marker are in view at once.
    st.query_params["trace"] = str(choices["trace_id"].iloc[0])

st.subheader("Traces")
st.caption(
    "Click a row to open its trace; click a header to sort the page. Correct traces with "
    "students' rollouts come first."
)
table_filter = st.columns(2)
only_teacher = common.url_select(
    "Show teacher", [common.ALL, *trace_values("teacher")],
    "show_teacher", where=table_filter[0],
)  # fmt: skip
listed = choices if only_teacher == common.ALL else choices[choices["teacher"] == only_teacher]
only_rollouts = common.url_toggle("Only traces with rollouts", "rollouts", where=table_filter[1])
query = find_traces_form()
if query is not None or only_rollouts:
    from legival_core.views import trace_search

    query = query or trace_search.TraceQuery()
    query = dataclasses.replace(query, rollouts=True if only_rollouts else query.rollouts)
    with_metrics = trace_metrics_table()
    if only_teacher != common.ALL:
        with_metrics = with_metrics[with_metrics["teacher"] == only_teacher]
    try:
        listed, searched = find_traces(with_metrics, query)
    except ValueError as error:
        st.warning(markdown_literal(str(error)))
    else:
        if query.text:
            st.caption(searched.summary())
        st.caption(f"{len(listed):,} traces kept by the filters.")
table_pages = views.step_page(len(listed), 1, TABLE_ROWS).pages
table_page = (
    st.number_input(f"Table page (of {table_pages}, {TABLE_ROWS} traces each)", 1, table_pages, 1)
    if table_pages > 1
    else 1
)
shown = views.step_page(len(listed), int(table_page), TABLE_ROWS)
listed = listed.iloc[shown.start : shown.stop].reset_index(drop=True)
from legival_core.views.display import tidy_table  # noqa: E402

picked_rows = st.dataframe(
    tidy_table(
        listed[
            [
                "teacher",
                "problem_id",
                "dataset",
                "sample",
                "correct",
                "m",
                "tokens",
                "fotu",
                "leak_k",
            ]
        ]
    ),
    hide_index=True,
    on_select="rerun",
    selection_mode="single-row",
    key="trace_table",
    height=240,
)
rows_picked = list(picked_rows.selection.rows) if picked_rows is not None else []
if rows_picked and rows_picked != st.session_state.get("_trace_table_pick"):
    st.session_state["_trace_table_pick"] = rows_picked
    st.query_params["trace"] = str(listed["trace_id"].iloc[rows_picked[0]])
elif not rows_picked:
    st.session_state["_trace_table_pick"] = []

wanted = st.query_params.get("trace")
if wanted is not None and wanted != st.session_state.get("_inspector_trace"):
    match = index[index["trace_id"] == wanted]
    if len(match):
        row = match.iloc[0]
        for param, column in (
            ("dataset", "dataset"),
            ("teacher", "teacher"),
            ("problem", "problem_id"),
            ("sample", "sample"),
        ):
            st.query_params[param] = str(row[column])
    else:
        st.info(
            markdown_literal(f"There is no trace {shorten(wanted)} in this store; pick one below.")
        )

by_ids = st.expander("Or pick a trace by its ids", expanded=False)
top = by_ids.columns(4)
dataset = common.url_select("Dataset", trace_values("dataset"), "dataset", where=top[0])
# Filtered with masks: a filtered copy of the whole list at each choice (a million rows)
# was a tenth of a second at every rerun.
in_dataset = index["dataset"] == dataset
teacher = common.url_select(
    "Teacher", sorted(index["teacher"][in_dataset].unique()), "teacher", where=top[1]
)
of_teacher = index[in_dataset & (index["teacher"] == teacher)]
problem_id = common.url_select(
    "Problem", sorted(of_teacher["problem_id"].unique()), "problem", where=top[2]
)
samples = sorted(of_teacher[of_teacher["problem_id"] == problem_id]["sample"].astype(int).unique())
sample = common.url_select("Sample", samples, "sample", where=top[3])
chosen = of_teacher[(of_teacher["problem_id"] == problem_id) & (of_teacher["sample"] == sample)]
trace_id = str(chosen["trace_id"].iloc[0])
st.query_params["trace"] = trace_id
st.session_state["_inspector_trace"] = trace_id

on_problem = index[index["problem_id"] == problem_id]
others = sorted(set(on_problem[on_problem["trace_id"] != trace_id]["teacher"]))
compare_teacher = common.url_select(
    "Compare with another teacher on this problem", [NONE, *others], "compare"
)
# Every colour the page draws, as swatches (constants only: no store text in it).
with st.expander("Legend: what every colour means", expanded=True):
    st.html(reading.legend_html())
    st.caption(
        f"A redundant step has r_i above τ = {tau:.2f} (none shaded up to 0.5). J / C / L / H: "
        "backtracking flagged by the LLM judge, the context-aware cues, the lexical detector or "
        "a human."
    )

shares = teacher_attribution()
if not shares.empty:
    # per teacher: how concentrated the steps that carry the solution to the students are
    with st.expander("Per teacher: how concentrated the useful steps are", expanded=False):
        st.caption(
            "Mean over each teacher's traces of the share of the positive transfer attribution "
            "that the top 10% of its measured steps carry (± its standard error over traces), "
            "beside the even share (every step helping alike) (docs: Transfer attribution)."
        )
        st.dataframe(tidy_table(shares), hide_index=True)

bundle = trace_bundle(trace_id)
problem = bundle["problem"]
if problem:
    with st.expander("Problem", expanded=False):
        st.text(str(problem.get("prompt", "")))
        st.text(f"Gold answer: {problem.get('gold', '')}")


def show_completions(trace: str, table: pd.DataFrame, strip: pd.DataFrame, slot: str) -> None:
    """The per-prefix panel: the end of the prefix a student was shown beside what each
    student wrote from it, its grade and the graded answer highlighted."""
    with st.expander("What the students wrote after each prefix", expanded=False):
        ks = sorted(int(k) for k in strip.columns)
        k = common.url_select(
            "Prefix (steps shown k)", ks, "k" if slot == "main" else f"k_{slot}",
            default=ks[-1], key=f"prefix_{slot}",
        )  # fmt: skip
        prefix, written = st.columns(2)
        prefix.markdown(f"**The prefix (k = {int(k)}), its last steps**")
        prefix.markdown(reading.prefix_markdown(table, int(k)))
        rows = prefix_rollouts(trace, int(k))
        if rows.empty:
            written.caption("No rollout stored at this prefix.")
        for row in rows.to_dict(orient="records"):
            written.markdown(reading.completion_heading(row))
            span = None
            if row["answer_start"] is not pd.NA and row["answer_start"] is not None:
                span = (int(row["answer_start"]), int(row["answer_end"]))
            written.markdown(reading.completion_markdown(row["completion"], span))


def show_trace(trace: str, where: Any, slot: str) -> None:
    data = trace_bundle(trace)
    info, table, strip = data["trace"], data["steps"], data["strip"]
    grade = data["grade"]
    with where:
        st.markdown(f"**{'Teacher' if slot == 'main' else 'Compared'}:**")
        st.text(f"{info['teacher']} · {info['trace_id']}")
        facts = st.columns(4)
        facts[0].metric("Correct", {True: "yes", False: "no"}.get(grade.get("correct"), "?"))
        facts[1].metric("Steps m", len(table))
        facts[2].metric(
            "Tokens",
            "—" if pd.isna(info.get("tokens")) else int(info["tokens"]),
            help=markdown_literal(
                "T of this trace: "
                + token_sources(common.load_manifest()).e_t_label([str(info["teacher"])])
            ),
        )
        leak_k = leak(trace)
        facts[3].metric("Answer leak k", "—" if leak_k is None else leak_k)
        labelers = ", ".join(data["labelers"]) or "none stored"
        computed = [
            name
            for name in ("cues", "lexical")
            if name not in data["labelers"] and f"flag_{name}" in table
        ]
        st.caption(
            markdown_literal(f"Backtracking labelers: {labelers}")
            + (f" (+ {' and '.join(computed)} computed here)" if computed else "")
        )
        # How far each labeler's marks can be trusted, measured against hand labels.
        st.caption(markdown_literal(views.labeler_legend([*data["labelers"], *computed])))
        for label in data["error_labels"].to_dict(orient="records"):
            # First-wrong-step labels (e.g. CHAMP's human annotations): errors, not backtracking.
            if label.get("error_found"):
                st.text(
                    f"{label['labeler']} label: first wrong step = step {label.get('step')}: "
                    f"{str(label.get('wrong_step_text') or '')[:300]}"
                )
            else:
                st.text(f"{label['labeler']} label: no mistake found in this trace")
        attribution = data["attribution"]
        if data["alignment"] is not None or len(attribution):
            # Importance, attribution, redundancy, backtracking and the students on the same steps.
            said = []
            if data["alignment"] is not None:
                said.append(
                    "resampling importance: " + data["alignment"].summary() + "; blue where "
                    "resampling the step away lowers the answer's accuracy (the step matters), "
                    "red where it raises it, blank where no chunk reaches the step"
                )
            if len(attribution):
                said.append(
                    "transfer attribution: the change in the students' solve rate between two "
                    "measured prefixes, shared by the steps added between them (blue raises it, "
                    "red lowers it; ± its standard error on hover)"
                )
            st.caption("Step layers (" + "; ".join(said) + "). Then redundancy, backtracking "
                       "and each student.")  # fmt: skip
            layers = step_layers(
                table, data["alignment"], strip, attribution if len(attribution) else None
            )
            errors = {ATTRIBUTION_ROW: attribution["se"].tolist()} if len(attribution) else None
            st.plotly_chart(step_layers_figure(layers, errors), key=f"layers_{slot}")
            teacher_row = teacher_share(str(info["teacher"]))
            concentration = reading.attribution_line(attribution, teacher_row)
            if concentration:
                st.caption(concentration)
        if not strip.empty:
            st.plotly_chart(student_strip_figure(strip, m=len(table)), key=f"strip_{slot}")
        pages = views.step_page(len(table), 1, STEPS_PER_PAGE).pages
        page = (
            st.number_input(
                f"Page (of {pages}, {STEPS_PER_PAGE} steps each)", 1, pages, 1, key=f"page_{slot}"
            )
            if pages > 1
            else 1
        )
        bounds = views.step_page(len(table), int(page), STEPS_PER_PAGE)
        body = reading.trace_markdown(
            table,
            anchor=f"lv-{slot}",
            start=bounds.start,
            stop=bounds.stop,
            leak_k=leak_k,
            strip=strip,
            wrong_steps=views.wrong_steps(data["error_labels"]),
        )
        # A scrolling box only when the page is long; a short trace shows whole. The step texts
        # are markdown_math (escaped, only checked maths kept): the HTML is reading's own.
        with st.container(height=620 if bounds.stop - bounds.start > 25 else "content"):
            st.markdown(body, unsafe_allow_html=True)
        if not strip.empty:
            show_completions(trace, table, strip, slot)
        with st.expander("Answer and raw output"):
            field = str(grade.get("answer_field") or "answer_text")
            st.text(views.graded_answer_line(grade, info.get(field)))
            st.text(str(info.get("answer_text") or ""))
        common.download_csv(table, f"steps_{slot}", label="Download steps (CSV)")


if compare_teacher == NONE:
    show_trace(trace_id, st.container(), "main")
else:
    other = on_problem[on_problem["teacher"] == compare_teacher]
    left, right = st.columns(2)
    show_trace(trace_id, left, "main")
    show_trace(str(other["trace_id"].iloc[0]), right, "compare")
