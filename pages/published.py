"""Published: the papers' tables, with this store's teachers beside them where names match."""

from __future__ import annotations

import streamlit as st

from legival_core import views
from legival_core.published import published
from legival_core.views import figures
from pages import common

st.title("📚 Published numbers")
st.caption(
    "Legi-Val Table 7 (arXiv 2603.20508) and the CogniLoad efficiency results of Kaiser et al. "
    "(arXiv 2602.09805), as printed; shares are shown as fractions."
)

common.page_setup("published", needs_store=False)
table7 = published.legival_table7()
cogniload = published.cogniload_efficiency()
SHARES = ["accuracy", "redundancy", "backtracking", "fotu", "sotu", "regression_rate"]

st.subheader("Legi-Val, Table 7")
dataset = common.url_select("Dataset", [common.ALL, *sorted(table7["dataset"].unique())], "dataset")
shown = views.filter_rows(table7, dataset=None if dataset == common.ALL else dataset)
common.table(shown[["dataset", "model", "hf_id", "tokens", *SHARES]], "legival_table7")
metric = common.url_select(
    "Metric", ["tokens", *SHARES], "metric", format_func=common.metric_label, default="fotu"
)
figure = figures.published_bars_figure(shown, metric, common.metric_label(metric))
st.plotly_chart(figure, key="published_chart")

st.subheader("Your teachers beside the paper")
if common.current_store_name() == "published":
    st.caption("The current store is the published one; pick your own store to compare.")
elif (mine := common.table_or_problem("teacher_metrics")) is None:
    pass  # the store's problem is shown; the published tables below need no store
elif mine.empty:
    st.info("The current store has no teacher_metrics table to compare.")
else:
    beside = views.published_beside(table7, mine, ["accuracy", "tokens", *SHARES[1:]])
    if beside.empty:
        st.info(
            "No teacher of this store matches a published model (by short name or "
            "Hugging Face id) on a published dataset."
        )
    else:
        common.table(beside, "published_beside")

st.subheader("CogniLoad efficiency (Kaiser et al.)")
common.table(
    cogniload[["model", *published.COGNILOAD_MEASURES]],
    "cogniload_efficiency",
)
st.caption(f"Sources: {table7.attrs['source']}; {cogniload.attrs['source']}.")
