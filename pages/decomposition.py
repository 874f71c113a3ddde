"""Efficiency decomposition: Kaiser et al.'s E0 board, Δlog waterfall, VŌ vs κ, failure modes and
solver-workload audits (not the efficiency axis of ``legival_core.metrics.efficiency``)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from legival_core import views
from legival_core.metrics.page_results import DecompositionSelection
from legival_core.store.provenance import token_sources
from legival_core.text.safe_text import markdown_literal
from legival_core.views import efficiency as efficiency_view
from legival_core.views import figures
from pages import common

st.title("⏱️ Efficiency decomposition")
st.caption(
    "E0 = 1000 · P(correct) / E[T] correct answers per 1,000 tokens = 1000 · r_ctx · r_logic / "
    "E[T], and E[T] = E[W] · VŌ · κ (Kaiser et al., arXiv 2602.09805)."
)
common.page_setup("decomposition")
common.need_tables("decomposition", what="The efficiency decomposition page")
include = common.include_references()


def stored_sigma() -> pd.Series | None:
    """σ per trace as the metrics stage stored it (``trace_efficiency.compression``), so the
    audits need not compress every reasoning text again; None when not stored."""
    if not common.has_table("trace_efficiency"):
        return None
    frame = common.load_table("trace_efficiency")
    if "compression" not in frame:
        return None
    return pd.Series(frame["compression"].to_numpy(), index=frame["trace_id"].astype(str))


def benchmark_instances(benchmark: str, sigma: bool = True) -> pd.DataFrame:
    """The decomposition's instances of one benchmark, built as the metrics stage builds them
    (``sigma``: with the stored σ per trace, for the trace layer)."""
    instances = views.decomposition_instances(
        common.load_table("traces", columns=list(views.INSTANCE_TRACE_COLUMNS)),
        common.load_table("grades", columns=["trace_id", "correct"]),
        sigma=stored_sigma() if sigma else None,
    )
    return instances[instances["benchmark"] == benchmark]


@common.derived("audits")
def audits(benchmark: str, include: bool) -> dict[str, pd.DataFrame]:
    """Solver-workload audits; the pool leaves reference teachers out unless ``include``
    (stored by the metrics stage for each benchmark, reference teachers left out)."""
    chosen = DecompositionSelection(benchmark, include)
    stored = common.stored_parts("decomposition", ("audits", "concentration"), chosen)
    if stored is not None:
        return stored
    return views.workload_audits(
        benchmark_instances(benchmark),
        references=common.reference_teachers(),
        include_references=include,
    )


@common.derived("e0_intervals")
def e0_intervals(benchmark: str) -> pd.DataFrame:
    """E0 per model with its 95% interval over resamples of the benchmark's problems."""
    config = common.get_config()
    return efficiency_view.e0_intervals(
        benchmark_instances(benchmark, sigma=False), config.rank_resamples, config.resample_seed
    )


def waterfall_terms(benchmark: str, layer: str, model: str, reference: str) -> pd.DataFrame:
    """The Δlog E0 bars of ``model`` against ``reference`` from the stored rows."""
    stored = common.load_table("decomposition")
    return efficiency_view.waterfall_terms(stored, benchmark, layer, model, reference)


@common.derived("waterfall_intervals")
def waterfall_intervals(benchmark: str, layer: str, model: str, reference: str) -> pd.DataFrame:
    """The waterfall's bars with their paired problem-bootstrap intervals and n."""
    config = common.get_config()
    return efficiency_view.waterfall_intervals(
        waterfall_terms(benchmark, layer, model, reference),
        benchmark_instances(benchmark, sigma=False),
        model,
        reference,
        config.rank_resamples,
        config.resample_seed,
    )


has_instances = common.has_table("traces") and common.has_table("grades")
decomposition = common.load_table("decomposition")
benchmarks = sorted(decomposition["benchmark"].unique())
left, middle = st.columns(2)
benchmark = common.url_select(
    "Benchmark",
    benchmarks,
    "dataset",
    where=left,
    help='Decomposed one benchmark at a time, with no "All": W is each benchmark\'s own '
    "workload and the solver layer's best model is chosen per benchmark, so pooled "
    "benchmarks would not make one decomposition.",
)
rows = decomposition[decomposition["benchmark"] == benchmark]
layers = sorted(rows["layer"].unique())
layer = common.url_select(
    "Workload layer",
    layers,
    "layer",
    where=middle,
    default="native",
    help="native: the benchmark's own workload W; solver: W from the best-E0 model that solved "
    "each instance; trace: compressed-signal tokens σ·T in place of T.",
)
rows = rows[rows["layer"] == layer]

board = views.e0_board(rows, common.reference_teachers(), include)
st.subheader("E0 board")
if has_instances:
    # every E0 with its 95% interval over resamples of the problems, and n beside it
    board = efficiency_view.board_with_intervals(board, e0_intervals(benchmark))
    st.caption(
        "E0 95% lo–hi: percentile interval over resamples of this benchmark's problems; "
        "n: the problems behind each E0. Ranks from a few problems are fragile: read them "
        "with the intervals."
    )
common.table(board, "e0_board", labels=efficiency_view.E0_BOARD_LABELS)
# What T counts differs by where a trace came from: say it, from the store's provenance.
sources = token_sources(common.load_manifest())
tokens_words = sources.e_t_label(board["model"])
st.caption(markdown_literal(f"T (tokens per output, so E[T] and E0) is {tokens_words}."))
if len(sources.kinds(board["model"])) > 1:
    st.warning(
        "These models' token counts were obtained in different ways, so their E0 and E[T] "
        "are not on one scale."
    )
with st.expander("Where each model's T comes from"):
    st.dataframe(
        pd.DataFrame(
            {"model": board["model"], "T from": board["model"].map(sources.teacher_label)}
        ),
        hide_index=True,
    )
# Model names come from the store: charts get them escaped (Plotly reads HTML in labels).
# Reference teachers are not models: drawn as a line, so a human E0 far above every model
# does not flatten the model bars.
apart = set() if include else set(common.reference_teachers())
figure = figures.e0_bars_figure(board, apart, tokens_words)
if figure.layout.yaxis.range is not None:  # the scale stops above the models' bars
    off = efficiency_view.off_scale(board, apart, figure.layout.yaxis.range[1])
    if off:
        note = f"Off the scale of this chart (reference, not a model): {', '.join(off)}."
        st.caption(markdown_literal(note))
st.plotly_chart(figure, key="e0_chart")

st.subheader("Δlog waterfall")
models = list(board["model"])
# between models by default: the runner-up against the best non-reference model
default_model, default_reference = efficiency_view.default_comparison(
    models, common.reference_teachers()
)
pick_left, pick_right = st.columns(2)
model = common.url_select("Model", models, "teacher", where=pick_left, default=default_model)
reference = common.url_select(
    "Compared with", models, "reference", where=pick_right, default=default_reference
)
terms = (
    waterfall_intervals(benchmark, layer, str(model), str(reference))
    if has_instances
    else waterfall_terms(benchmark, layer, str(model), str(reference))
)
waterfall = figures.waterfall_figure(terms, str(model), str(reference))
st.plotly_chart(waterfall, key="waterfall_chart")
st.caption(
    "Terms from the stored rows; 'rounding' is what the stored terms leave over (non-zero for "
    "published tables, which are rounded)."
)
if "n_paired" in terms and terms["n_paired"].notna().any():
    n_paired = int(terms["n_paired"].dropna().iloc[0])
    st.caption(
        f"Error bars: 95% intervals over resamples of the {n_paired} problems both models "
        "answered (n); the workload bars (E[W], VŌ, κ) have none, their W depending on the layer."
    )
common.download_csv(efficiency_view.waterfall_csv(terms), "waterfall")

if rows["vo"].notna().any() and rows["kappa"].notna().any():
    st.subheader("Overhead VŌ vs coupling κ")
    is_reference = rows["model"].astype(str).isin(apart).to_numpy()
    scatter = figures.overhead_coupling_figure(rows, is_reference)
    st.plotly_chart(scatter, key="vo_kappa_chart")

st.subheader("Failure modes (against the benchmark's best-E0 model)")
# against the best model, never a reference teacher (a human E0 of 5 would make every model
# "limited" by everything); reference rows are left out unless the sidebar includes them
modes = views.failure_mode_table(rows, () if include else common.reference_teachers())
modes = efficiency_view.failure_mode_cells(modes)  # −∞ reads "no correct answer"
common.table(
    modes[
        [
            "model",
            "reference",
            "failure_mode",
            "dlog_e0",
            "dlog_r_ctx",
            "dlog_r_logic",
            "dlog_tokens",
            "dlog_vo",
            "dlog_kappa",
        ]
    ],
    "failure_modes",
    labels=efficiency_view.FAILURE_MODE_LABELS,
)

st.subheader("Solver-derived workload audits")
if has_instances:
    result = audits(benchmark, include)
    st.caption(
        "ρ between VŌ rankings under the full pool and under reduced pools (leave-self-out, "
        "leave-top-k) or between two random half pools (median and 5–95% over 200 splits)."
    )
    shown, left_out = efficiency_view.audit_rows(result["audits"])
    common.table(shown, "workload_audits", labels=efficiency_view.AUDIT_LABELS)
    if left_out:
        st.caption(
            markdown_literal(
                "Left out: leave out the best "
                + ", ".join(left_out)
                + " (k is at least the pool's size, so no model is left to audit)."
            )
        )
    common.table(
        result["concentration"],
        "solver_concentration",
        labels=efficiency_view.CONCENTRATION_LABELS,
    )
else:
    st.info("Audits need the per-instance tables (traces, grades), which this store lacks.")
