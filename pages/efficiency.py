"""/efficiency: the decomposition page's address until it was renamed. A bookmark of it opens
the page under its new address, /decomposition, with the bookmark's query parameters."""

from __future__ import annotations

import streamlit as st

from pages import common

st.switch_page("pages/decomposition.py", query_params=common.forwarded_query_params())
