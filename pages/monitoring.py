"""Monitoring: can a weak model tell sound traces from flawed ones, and is that easier for
more legible teachers? (docs/metrics/oversight.md, weak monitoring)."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from legival_core.metrics.page_results import MonitorSelection
from legival_core.oversight import oversight, selections
from legival_core.text.safe_text import markdown_literal
from legival_core.views import figures
from legival_core.views.monitoring import (
    HEADLINE_MIN_SPREAD,
    HEADLINE_MIN_TEACHERS,
    MEASURES,
    NOT_DEFINED,
    legibility_headlines,
    monitor_intervals,
    reference_bars,
    sabotaged_choices,
    score_table,
    verdict_text,
)
from pages import common

st.title("🛡️ Monitoring")
st.caption(
    "A weak monitor reads each trace as numbered steps and answers `VERDICT: valid` or "
    "`VERDICT: invalid, step N`. Negatives are natural failures (the teacher was wrong) and "
    "sabotaged copies of correct traces; scores treat *invalid* as the positive class, and "
    "malformed verdicts count as abstentions (misses). The paper (Legi-Val, arXiv 2603.20508) "
    "reports ρ(FOTU, precision) = +0.90 on MATH sabotage."
)
common.store_or_stop()
if not common.has_table("monitor_verdicts"):
    st.info(
        f"The store '{common.store_label()}' has no monitor verdicts yet. Run the "
        "weak-monitor study with `python -m precompute monitor --store DIR` (needs graded and "
        "segmented traces)."
    )
    st.stop()
include = common.include_references()
support = common.support_choice()

#: The page's selection: the bootstrap resamples of the default, the sidebar's switches.
CHOSEN = MonitorSelection(include_references=include, support=support)
#: How a reference teacher's bars are labelled (the chart draws them as grey outlines).
REFERENCE_LABEL = "reference (not compared)"
STYLE = (
    "<style>.lv-trace{white-space:pre-wrap;font-family:monospace;font-size:0.85rem;"
    "border:1px solid #ddd;border-radius:6px;padding:0.6rem;}"
    ".lv-old{background:#fdd;text-decoration:line-through;}"
    ".lv-new{background:#dfd;font-weight:bold;}</style>"
)


@common.derived("monitor_scores", stored=True)
def scores(chosen: MonitorSelection) -> pd.DataFrame:
    """Scores per (monitor, teacher, dataset) (stored by the metrics stage for the default)."""
    verdicts = common.load_table("monitor_verdicts")
    return oversight.monitor_scores(verdicts, n_boot=chosen.n_boot, seed=0)


@common.derived("monitor_scores_pooled", stored=True)
def pooled_scores(chosen: MonitorSelection) -> pd.DataFrame:
    """The scores of every verdict of a teacher whatever its dataset (``dataset`` = "All")."""
    return selections.pooled_monitor_scores(common.load_table("monitor_verdicts"), chosen.n_boot)


def _teachers(chosen: MonitorSelection) -> pd.DataFrame:
    """``teacher_metrics`` without the reference teachers unless the selection includes them."""
    from legival_core.published.references import keep_teachers

    return keep_teachers(
        common.load_table("teacher_metrics"),
        common.reference_teachers(),
        chosen.include_references,
    )


@common.derived("monitor_legibility", stored=True)
def legibility(chosen: MonitorSelection) -> pd.DataFrame:
    """ρ(FOTU, P/R/F1) across teachers; reference teachers add no point unless included;
    the pooled row averages each teacher over the datasets the selection's support names."""
    if not common.has_table("teacher_metrics"):
        return pd.DataFrame()
    return oversight.monitor_legibility_correlation(
        scores(chosen), _teachers(chosen), support=chosen.support
    )


@common.derived("monitor_legibility_points")
def legibility_points(chosen: MonitorSelection) -> pd.DataFrame:
    """The (teacher, FOTU, score) points behind :func:`legibility`, the same teachers and
    the same pooling, for the small table shown when a ρ cannot be a headline."""
    return oversight.monitor_legibility_points(
        scores(chosen), _teachers(chosen), support=chosen.support
    )


table = scores(CHOSEN)
monitors = sorted(table["monitor"].unique())
left, middle, right = st.columns(3)
monitor = common.url_select("Monitor", monitors, "monitor", where=left)
datasets = sorted(table.loc[table["monitor"] == monitor, "dataset"].unique())
dataset = common.url_select("Dataset", [common.ALL, *datasets], "dataset", where=middle)
# "All": every verdict of a teacher counted once, whatever its dataset
source = pooled_scores(CHOSEN) if dataset == common.ALL else table
chosen = source[(source["monitor"] == monitor) & (source["dataset"] == dataset)]
negatives = list(dict.fromkeys(chosen["negative_type"]))
negative = common.url_select(
    "Negatives",
    negatives,
    "negatives",
    where=right,
    default="sabotage" if "sabotage" in negatives else None,
)
view = monitor_intervals(chosen[chosen["negative_type"] == negative].sort_values("teacher"))

# Reference teachers (a human solution) stay out of the comparison: drawn as grey outlines
# and labelled, unless the sidebar switch includes them.
apart = [] if include else common.reference_teachers()
bar_labels, is_reference = reference_bars(view["teacher"].tolist(), apart, REFERENCE_LABEL)
figure = figures.monitor_scores_figure(view, bar_labels, is_reference, negative)
st.plotly_chart(figure, key="monitor_chart")
st.caption(
    "Precision (tp of the traces called invalid) and recall (tp of the invalid traces) are "
    "proportions: their bars carry Wilson intervals, which stay wide when they rest on one or "
    "two traces. F1 carries a bootstrap interval over traces, left out below two traces. "
    f"“{NOT_DEFINED}”: the score is undefined (e.g. no trace called invalid: no precision)."
    + (
        f" Grey outlines marked “{REFERENCE_LABEL}” are reference teachers (a human solution): "
        "shown for scale, not one of the models compared."
        if any(is_reference)
        else ""
    )
)
common.table(
    score_table(view),
    f"monitor_scores_{negative}",
    formats={m: (lambda v: NOT_DEFINED if pd.isna(v) else f"{v:.3f}") for m in MEASURES},
)

st.subheader("Is a more legible teacher easier to monitor?")
correlation = legibility(CHOSEN)
if correlation.empty:
    st.info("The store has no teacher_metrics table, so FOTU per teacher is unknown.")
else:
    mine = correlation[
        (correlation["monitor"] == monitor) & (correlation["negative_type"] == negative)
    ]
    # "All" reads the pooled row: each teacher averaged over datasets first
    row_dataset = oversight.POOLED_DATASETS if dataset == common.ALL else dataset
    here = mine[mine["dataset"] == row_dataset]
    # a ρ across teachers is a headline only where n and the spread of the score carry one
    points = legibility_points(CHOSEN)
    points = points[
        (points["monitor"] == monitor)
        & (points["negative_type"] == negative)
        & (points["dataset"] == row_dataset)
    ]
    headlines = legibility_headlines(here, points)
    counts = [h.n for h in headlines]
    blocked = [h.measure for h in headlines if h.blocker is not None]
    for column, h in zip(st.columns(3), headlines, strict=True):
        if h.blocker is None:
            shown_rho = NOT_DEFINED if pd.isna(h.rho) else f"{h.rho:+.3f}"
            column.metric(f"ρ(FOTU, {h.measure})", shown_rho)
        else:
            column.markdown(f"**ρ(FOTU, {h.measure})** not shown: {h.blocker}.")
    st.caption(
        "Spearman ρ across teachers (n = "
        + (
            f"{counts[0]} teachers"
            if len(set(counts)) == 1
            else " / ".join(f"{n} teachers" for n in counts) + " for precision / recall / F1"
        )
        + f"). A ρ is shown large only from {HEADLINE_MIN_TEACHERS} teachers up and when the "
        f"score spans at least {HEADLINE_MIN_SPREAD:.2f} across them; otherwise it is a hint, "
        "not a finding, and its value and p are only in the table below. Partial "
        "ρ holds the mean token length fixed. The pooled row "
        f"'{oversight.POOLED_DATASETS}' averages each teacher over datasets first."
    )
    if blocked:
        st.markdown("**The teachers' values** (too few / too little spread for a correlation)")
        common.table(
            points[["teacher", "fotu", "precision", "recall", "f1"]].sort_values("fotu"),
            "monitor_legibility_points",
            # pooled over the datasets this monitor scored, which may be fewer than the
            # leaderboard's: the header says so
            labels={"fotu": "FOTU (over the scored datasets)"},
            formats={
                m: (lambda v: NOT_DEFINED if pd.isna(v) else f"{v:.3f}")
                for m in ("fotu", "precision", "recall", "f1")
            },
        )
    common.table(mine, "monitor_legibility")

st.subheader("Sabotaged traces")
if not common.has_table("sabotaged"):
    st.info("The store has no sabotaged traces (the monitor ran on natural failures only).")
    st.stop()


@st.cache_resource(show_spinner=False, max_entries=16)
def sabotaged_of(
    path: str, stamp: float, kind: str | None, dataset: str | None
) -> tuple[pd.DataFrame, list[str], dict[str, str], pd.DataFrame]:
    """The sabotaged copies of ``dataset`` (None: all): the injections they hold and, for
    ``kind``, its rows by teacher, the trace labels and the rows to export (shared, read-only:
    built once per store state, not on every rerun)."""
    return sabotaged_choices(common.load_table("sabotaged"), kind, dataset)


@common.derived("monitor_original")
def original_reasoning(trace_id: str) -> str:
    """The reasoning of one original trace (read alone: not every trace's text)."""
    from legival_core.store.store import Store

    store = Store.open(common.current_store_path())
    rows = store.read("traces", columns=["trace_id", "reasoning"], filters={"trace_id": trace_id})
    return str(rows["reasoning"].iloc[0])


chosen_set = None if dataset == common.ALL else dataset
_rows, kinds, _labels, _export = sabotaged_of(*common.store_key(), None, chosen_set)
if not kinds:
    st.info("No sabotaged trace in this dataset.")
    st.stop()
left, middle = st.columns(2)
kind = common.url_select("Injection", kinds, "kind", where=left)
of_kind, _kinds, labels, export = sabotaged_of(*common.store_key(), kind, chosen_set)
trace_id = common.url_select(
    "Trace", list(labels), "trace", where=middle, format_func=lambda t: labels[t]
)
record = of_kind[of_kind["trace_id"] == trace_id].iloc[0]
reasoning = original_reasoning(trace_id)
st.text(f"What changed: {record['description']}")
before, after = oversight.highlight_edits(reasoning, json.loads(record["edits"]))
verdicts = common.load_table("monitor_verdicts")
said = verdicts[(verdicts["trace_id"] == trace_id) & (verdicts["monitor"] == monitor)]


one, two = st.columns(2)
with one:
    st.markdown("**Original** (correct)")
    st.html(f'{STYLE}<div class="lv-trace">{before}</div>')
    st.text(f"Monitor: {verdict_text(said, oversight.ORIGINAL)}")
with two:
    st.markdown(f"**Sabotaged** ({markdown_literal(kind)})")
    st.html(f'{STYLE}<div class="lv-trace">{after}</div>')
    st.text(f"Monitor: {verdict_text(said, oversight.sabotage_variant(str(kind)))}")
common.download_csv(export, f"sabotaged_{kind}")
