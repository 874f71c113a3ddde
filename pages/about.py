"""About: what the store holds (manifest, provenance, sizes), the method in brief, citations."""

from __future__ import annotations

import streamlit as st

from legival_core import views
from legival_core.published.published import PUBLISHED_SOURCES
from pages import common

st.title("ℹ️ About")
common.page_setup("about")

manifest = common.load_manifest()
readonly = common.get_config().readonly
st.subheader(f"Store '{common.store_label()}'")
st.text(f"schema version {manifest.get('schema_version')} · created {manifest.get('created', '?')}")
if readonly:
    st.caption("Read-only mode: the app writes nothing and opens only the configured stores.")
else:
    st.text(f"folder: {common.current_store_path()}")
grading = common.grader_status()
if grading is not None:
    # Grades say which grader made them; an older one is named with the command that fixes it.
    (st.warning if grading.stale else st.caption)(f"Grades: {grading.message}")
overview = views.store_overview(manifest)
common.table(overview, "store_tables")
st.caption(f"{overview['rows'].sum():,} rows, {overview['bytes'].sum() / 1e6:,.1f} MB on disk.")
with st.expander("Configuration"):
    st.code(views.config_text(manifest, hide_paths=readonly), language="json")
st.markdown("**Provenance** (which stage wrote what, with which settings)")
# A hosted app shows no local paths (a model folder, a data file) from the provenance records.
common.table(views.provenance_table(manifest, hide_paths=readonly), "provenance")

st.subheader("The method in brief")
st.markdown(
    """
- **Efficiency**: a trace is split into sentences (steps). Its length is counted in tokens and
  steps; **redundancy** is the share of steps whose best cosine match (MiniLM embeddings) to an
  earlier step exceeds τ = 0.8; **backtracking** is the share of steps an LLM judge (or the
  lexical cue detector) flags as revisions.
- **Transfer utility**: a weak student continues the first k of m steps of a correct teacher
  trace. The student's accuracy against the position x = k/m, on 50 bins, is the transfer curve;
  **FOTU** is its area, **SOTU** the normalised entropy of where students first succeed,
  **regression** the share of steps after which a right student turns wrong.
- **Rankings**: teachers are ranked on every metric (averaged over datasets), with the change
  against their accuracy rank; Spearman correlations, partial correlations given length, rank
  stability and Pareto frontiers compare the metrics.
- **Efficiency decomposition**: E0 = 1000 · P(correct) / E[T] splits into completion rate
  r_ctx, accuracy when complete r_logic, workload E[W], overhead VŌ and coupling κ; Δlog E0
  between two models is the sum of the Δlog of the factors.
"""
)
st.subheader("Cite")
for source in PUBLISHED_SOURCES.values():
    st.text(f"{source['title']}. arXiv {source['arxiv']} ({source['url']})")
