"""Leaderboard: the rank table of docs/rankings.md, with filters, CIs, a composite and exports."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from legival_core import views
from legival_core.rankings.selection import Selection
from legival_core.text.safe_text import (
    markdown_literal,
    visible_bidi,
)
from legival_core.views import board as board_layout
from legival_core.views import figures, model_info
from pages import common, merged_board, robustness_report

st.title("🏆 Leaderboard")
st.caption(
    "Rank 1 = best. Values are averaged over the chosen datasets first; Δ is each rank's change "
    "against the accuracy rank (▲ = better than its accuracy suggests)."
)
common.page_setup("leaderboard")
if merged_board.chosen():  # several stores given at launch: their board as one
    merged_board.show(common.include_references())
    st.stop()
common.need_tables("teacher_metrics", what="The leaderboard")
include = common.include_references()
support = common.support_choice()


@common.derived("intervals")
def intervals(student: str | None, n_boot: int) -> pd.DataFrame:
    """Per (teacher, dataset) values with bootstrap CIs (:func:`views.dataset_intervals`)."""
    return views.dataset_intervals(
        common.load_table("trace_efficiency") if common.has_table("trace_efficiency") else None,
        views.filter_rows(common.load_rollouts(), student=student)
        if common.has_table("rollouts")
        else None,
        views.metrics_profile(common.load_manifest()),
        n_boot,
    )


def student_options() -> list[str]:
    """Students with rollouts: from the small transfer_curves table when it is current, so a
    cold start does not read a column of the (possibly millions of rows) rollouts table."""
    if common.has_table("transfer_curves"):
        table = views.fresh_transfer_curves(
            common.load_table("transfer_curves", ["dataset", "student", "rollouts_stamp"]),
            common.load_manifest(),
        )
        if table is not None:
            return views.transfer_options(table)[1]
    return common.distinct("rollouts", "student")


datasets = common.distinct("teacher_metrics", "dataset")
left, middle, right = st.columns(3)
dataset = common.url_select("Dataset", [common.ALL, *datasets], "dataset", where=left)
students = student_options()
student = (
    common.url_select("Student", [common.ALL, *students], "student", where=middle)
    if students
    else common.ALL
)
chosen_dataset = None if dataset == common.ALL else dataset
chosen_student = None if student == common.ALL else student
frame, metrics = common.board_rows(chosen_dataset, chosen_student)
metric = common.url_select(
    "Metric",
    metrics,
    "metric",
    where=right,
    format_func=common.metric_label,
    default="fotu" if "fotu" in metrics else "accuracy",
)

WEIGHTS_PARAM = "weights"


def url_weights(metrics: list[str]) -> dict[str, float]:
    """The composite's weights, bound to ``?weights=fotu:1,accuracy:2`` (metric names have no
    comma or colon): a shared link reopens the same composite."""
    wanted = st.query_params.get(WEIGHTS_PARAM)
    if wanted is not None and wanted != st.session_state.get("_weights_url"):
        parsed: dict[str, float] = {}
        for part in wanted.split(","):
            name, _, number = part.partition(":")
            try:
                weight = float(number)
            except ValueError:
                continue
            if math.isfinite(weight):
                parsed[name] = min(10.0, max(0.0, weight))
        for m in metrics:
            st.session_state[f"weight_{m}"] = parsed.get(m, 0.0)
    for m in metrics:
        st.session_state.setdefault(f"weight_{m}", 0.0)
    with st.expander("Composite score (weights per metric)"):
        st.caption(
            "composite = Σ w·s / Σ w, where s = (n − rank) / (n − 1) is each metric's rank "
            "score (1 = best of n teachers). Leave every weight at 0 for no composite."
        )
        weight_columns = st.columns(len(metrics))
        chosen = {
            m: column.number_input(
                common.metric_label(m),
                min_value=0.0,
                max_value=10.0,
                step=0.5,
                key=f"weight_{m}",
            )
            for m, column in zip(metrics, weight_columns, strict=True)
        }
    chosen = {m: w for m, w in chosen.items() if w > 0}
    text = ",".join(f"{m}:{w:g}" for m, w in chosen.items())
    if text:
        st.query_params[WEIGHTS_PARAM] = text
    elif WEIGHTS_PARAM in st.query_params:
        del st.query_params[WEIGHTS_PARAM]
    st.session_state["_weights_url"] = text or None
    return chosen


weights = url_weights(metrics)
config = common.get_config()
# What the board is computed for: the one key of every cached and stored result below.
selection = Selection(
    dataset=chosen_dataset,
    student=chosen_student,
    weights=weights,
    n_boot=config.rank_resamples,
    seed=config.resample_seed,
    include_references=include,
    support=support,
)
board = common.board_table(selection)
interval_rows = common.board_intervals(selection)
has_intervals = not interval_rows.empty
if has_intervals:
    st.caption(
        f"Each value shows its 95% interval [lo–hi] from {config.rank_resamples:,} resamples of "
        "the problems (the same draw for every teacher, so comparisons are paired) and n, the "
        "traces behind it (× students for transfer metrics). Each rank shows its 95% rank "
        f"interval in brackets. {board_layout.LOW_N_MARK} marks fewer than "
        f"{config.low_n_traces} traces."
    )
else:
    st.caption(
        "This store has no per-trace tables to resample (the published store holds the papers' "
        f"averages only), so every value says “{board_layout.NO_INTERVAL}”."
    )


def models_stamp() -> float:
    """The models.csv's mtime (0 without one): its facts are read again when it changes."""
    try:
        return (common.current_store_path() / model_info.MODELS_FILE).stat().st_mtime
    except OSError:
        return 0.0


@st.cache_data(show_spinner=False, max_entries=8)
def model_facts(path: str, stamp: float) -> model_info.ModelInfo:
    """The store's models.csv (:mod:`legival_core.views.model_info`), read once per change."""
    return model_info.read_models(Path(path))


DETAIL_LABELS = model_info.DETAIL_LABELS


def column_label(name: str) -> str:
    return DETAIL_LABELS.get(name) or common.metric_label(name)


OPEN_CHOICES = {"any": "any", "open": "open weights", "closed": "closed weights"}


def model_filters(teachers: list[str], models: pd.DataFrame) -> list[bool]:
    """The search box and the filters on the models' facts (each kept in the URL); which of
    ``teachers`` they keep. The facts' filters show only when models.csv gives that fact."""
    parts = st.columns(5)
    search = common.url_text(
        "Search teachers",
        "search",
        where=parts[0],
        max_chars=100,
        placeholder="part of a name",
        help="Shows the teachers whose name holds this text (any case).",
    )
    families: list[str] = []
    open_weights: bool | None = None
    low = high = None
    if "family" in models and models["family"].notna().any():
        families = common.url_multiselect(
            "Family",
            sorted({str(f) for f in models["family"].dropna()}),
            "family",
            default=[],
            where=parts[1],
            format_func=visible_bidi,
        )
    if "open_weights" in models and models["open_weights"].notna().any():
        choice = common.url_select(
            "Weights",
            list(OPEN_CHOICES),
            "open_weights",
            where=parts[2],
            format_func=OPEN_CHOICES.__getitem__,
        )
        open_weights = None if choice == "any" else choice == "open"
    if "parameters" in models and models["parameters"].notna().any():
        low = parameter_bound("Parameters from", "params_min", parts[3])
        high = parameter_bound("Parameters up to", "params_max", parts[4])
    return model_info.filter_models(
        teachers,
        models,
        search=search,
        families=families,
        open_weights=open_weights,
        parameters=(low, high),
    )


def parameter_bound(label: str, param: str, where: Any) -> float | None:
    """A parameter count typed as in models.csv (7B, 350M), kept in the URL; a count that does
    not parse says so and filters nothing."""
    text = common.url_text(label, param, where=where, max_chars=20, placeholder="e.g. 7B")
    if not text:
        return None
    try:
        return model_info.parse_parameters(text)
    except ValueError as error:
        where.info(markdown_literal(f"{label}: {error}; not applied."))
        return None


#: The columns a first look needs beside the chosen metric; the chooser adds the others. With
#: the chosen metric's rank and Δ they fit the grid of a 1,400 px wide window, so FOTU before
#: leak, the column the leak warning points to, is on screen without scrolling.
DEFAULT_COLUMNS = ("fotu_before_leak",)
facts = model_facts(*common.store_key()[:1], models_stamp())
for problem in facts.problems:  # a bad row of models.csv: named, the good rows are shown
    st.warning(markdown_literal(problem))
detail_columns = [
    c for c in model_info.MODEL_COLUMNS[1:] if c in facts.frame and facts.frame[c].notna().any()
]
columns_shown = common.url_multiselect(
    "More columns",
    [*[m for m in metrics if m != metric], *detail_columns],
    "columns",
    default=[m for m in DEFAULT_COLUMNS if m in metrics and m != metric],
    format_func=column_label,
    help="The metrics the table shows beside the chosen one (FOTU before the leak by default)"
    + (", and the models' facts from models.csv" if detail_columns else "")
    + ". The exports always hold every metric.",
)
every_rank = common.url_toggle(
    "Rank and Δ of every column",
    "all_ranks",
    help="Off: only the metric the table is sorted by shows its rank and its change against "
    "the accuracy rank, so the first screen fits; on: every metric shown does.",
)
sort_by = "composite" if weights else metric
# The chosen metric's columns come first, so they are on screen without scrolling.
in_order = [metric, *[m for m in metrics if m in columns_shown and m != metric]]
shown = board_layout.uncertainty_board(
    board,
    interval_rows,
    in_order,
    config.low_n_traces,
    with_composite=bool(weights),
    ranked=None if every_rank else [sort_by, metric],
)
shown = model_info.with_model_columns(
    shown, facts.frame, [c for c in detail_columns if c in columns_shown]
)
# Rows best first on the metric the table is sorted by, reference teachers last.
order = board_layout.rank_order(board, sort_by)
shown = shown.iloc[order].reset_index(drop=True)
shown = robustness_report.leaderboard_marker(shown, metrics)  # ⇅: see the Robustness page
kept = model_filters(shown["teacher"].astype(str).tolist(), facts.frame)
if not all(kept):
    st.caption(
        f"Showing {sum(kept)} of {len(kept)} teachers (the filters above); ranks are among all "
        "of them."
    )
shown = shown[kept].reset_index(drop=True)
change_columns = [c for c in shown.columns if c.endswith(" Δ")]
st.markdown(
    f"Sorted by **{markdown_literal(common.metric_label(sort_by))}** "
    f"(rank 1 first{', reference teachers last' if 'reference' in board else ''})."
)
if "reference" in board and board["reference"].any() and not include:
    st.caption(
        f"Rows ranked “{board_layout.REFERENCE_MARK}” are reference teachers (a human solution, "
        "a gold rationale): shown with their values and intervals for comparison, left out of "
        "the ranks and of everyone's rank intervals. Switch on *Include reference teachers* in "
        "the sidebar to rank them too."
    )
support_text = board_layout.support_note(
    frame,
    metrics,
    support,
    () if include else common.reference_teachers(),
)
if support_text:  # whose mean rests on which datasets (Average teachers over, in the sidebar)
    st.caption(markdown_literal("Teacher-level values are means over datasets. " + support_text))


value_columns = [c for c in shown.columns if c != "teacher" and not c.endswith((" rank", " Δ"))]
# A teacher's name is drawn as it is in a grid cell: its bidi controls are shown escaped.
on_screen = shown.assign(teacher=shown["teacher"].astype(str).map(visible_bidi))
styled = on_screen.style.map(board_layout.change_style, subset=change_columns).map(
    board_layout.low_n_style, subset=value_columns
)
headline = common.leak_headline()
backtracking_note = common.backtracking_note()


def header_help(name: str) -> str:
    """A metric header's tooltip: what it measures; for FOTU, how much of it comes after the
    answer leak (the warning under the table, at the header a reader hovers)."""
    text = board_layout.as_sentence(views.METRICS[name].description)
    if name == "fotu" and headline:
        text += " " + headline.removeprefix("⚠ ")
    if name == "backtracking":
        text += " " + backtracking_note
    return text


# the teacher stays in view while the metric columns scroll; each metric's header explains it
column_config: dict[str, object] = {"teacher": st.column_config.TextColumn("teacher", pinned=True)}
for name in in_order:
    if name in views.METRICS and common.metric_label(name) in shown.columns:
        label = common.metric_label(name)
        column_config[label] = st.column_config.TextColumn(label, help=header_help(name))
if DETAIL_LABELS["link"] in shown.columns:  # http(s) only: model_info.safe_link refused the rest
    column_config[DETAIL_LABELS["link"]] = st.column_config.LinkColumn(
        DETAIL_LABELS["link"], display_text=r"https?://([^/?#]+)"
    )
st.dataframe(styled, hide_index=True, key="leaderboard_table", column_config=column_config)
tied = [m for m in in_order if board_layout.is_tied(board, m)]
if tied:
    st.caption(
        f"“{board_layout.TIED_MARK}”: every ranked teacher has the same "
        + ", ".join(common.metric_label(m) for m in tied)
        + ", so it has no rank and no Δ."
    )
st.caption(
    "n differs between columns because each metric rests on different traces: accuracy, tokens, "
    "redundancy and backtracking on every trace; the transfer metrics (FOTU, SOTU, regression, "
    "FOTU before leak) on the correct traces that have rollouts, once per student."
)
if "fotu" in in_order and headline:
    st.warning(markdown_literal(headline) + " *FOTU before leak* keeps the prefixes before it.")
if "backtracking" in in_order:
    st.caption(backtracking_note)
if "tokens" in metrics:
    st.caption(common.tokens_caption())
numbers = board_layout.board_numbers(board, interval_rows, metrics, support)
numbers = model_info.with_facts(numbers, facts.frame, shown["teacher"].astype(str).tolist())
export_left, export_right = st.columns(2)
with export_left:
    common.download_csv(numbers, "leaderboard")
with export_right:
    st.download_button(
        "Download LaTeX",
        views.latex_rank_tables(
            board_layout.ascii_cells(shown),
            caption=views.LATEX_CAPTION,
            notes=views.latex_notes(shown, common.load_manifest()),
        ),
        file_name="leaderboard.tex",
        mime="text/x-tex",
        key="latex_leaderboard",
        on_click="ignore",
    )

focus_options = (["composite"] if weights else []) + metrics
# A new metric above shows its own intervals; the URL keeps the choice for a shared link.
if st.session_state.get("_focus_metric") not in (None, sort_by):
    st.query_params["focus"] = sort_by
st.session_state["_focus_metric"] = sort_by
focus = common.url_select(
    "Rank intervals of",
    focus_options,
    "focus",
    default=sort_by,
    format_func=common.metric_label,
)
detail = board_layout.metric_detail(board, interval_rows, focus, config.low_n_traces)
st.markdown(f"**{markdown_literal(board_layout.verdict(board, interval_rows, focus))}**")
st.caption(
    "Teachers whose 95% rank intervals overlap are not separated: the data cannot tell their "
    "order apart. A teacher is ahead of another when its whole rank interval is better."
)
common.table(
    detail.drop(columns=["rank (upper bound)"]),
    "leaderboard_rank_intervals",
    formats={
        "value": lambda v: board_layout.format_value(v, focus),
        "95% lo": lambda v: board_layout.format_value(v, focus),
        "95% hi": lambda v: board_layout.format_value(v, focus),
    },
)


def ci_rows(dataset: str | None, student: str | None, metric: str) -> pd.DataFrame:
    ci = views.filter_rows(intervals(student, 200), dataset=dataset)
    return views.without_one_trace_intervals(ci[ci["metric"] == metric] if not ci.empty else ci)


@st.cache_resource(show_spinner=False, max_entries=32)
def chart(path: str, stamp: float, chosen: Selection, low_n: int, metric: str) -> go.Figure:
    """The bars of one metric per teacher (:func:`legival_core.views.figures.metric_bars_figure`)
    of the rank-interval table below them (shared, read-only: drawing it does not change it)."""
    detail = board_layout.metric_detail(
        common.board_table(chosen), common.board_intervals(chosen), metric, low_n
    )
    return figures.metric_bars_figure(detail, metric)


st.plotly_chart(
    chart(*common.store_key(), selection, config.low_n_traces, focus), key="leaderboard_chart"
)
what = (
    board_layout.as_sentence(views.METRICS[focus].description) + " "
    if focus in views.METRICS
    else ""
)
st.caption(
    f"{what}Error bars: 95% intervals over problem resamples. Pale hatched bars rest on fewer "
    f"than {config.low_n_traces} traces."
    + (f" {backtracking_note}" if focus == "backtracking" else "")
)

show_ci = common.url_toggle(
    "Per dataset: values with 95% bootstrap intervals over traces", "per_dataset"
)
if show_ci:
    chosen = ci_rows(chosen_dataset, chosen_student, metric)
    if chosen.empty:
        st.info(
            "This store has no per-trace tables to bootstrap from (e.g. the published store), "
            "so no intervals can be shown."
        )
    else:
        common.table(chosen, "leaderboard_intervals")
