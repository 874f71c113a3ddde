"""Legi-Val app: explore a results store in the browser.

    streamlit run app.py                       # bundled demo results
    streamlit run app.py -- --store PATH       # your own store (also: LEGIVAL_STORE=PATH)
    streamlit run app.py -- --readonly         # hosting mode: nothing written, no store paths

Pages are short scripts under ``pages/``; the numbers come from ``legival_core``.
"""

from __future__ import annotations

import os
import sys

import streamlit as st

from legival_core.views.app_config import parse_app_args
from pages import common

st.set_page_config(page_title="Legi-Val", page_icon="🔎", layout="wide")

config = parse_app_args(sys.argv[1:], os.environ)
common.set_config(config)


def _home() -> None:
    """The root address opens the leaderboard at its own address, ``/leaderboard``.

    Streamlit serves the default page at ``/`` only: a default page's ``url_path`` is not an
    address, so ``/leaderboard`` (the address the page declares, in shared links) opened behind
    a "Page not found" dialog. The leaderboard is therefore an ordinary page, and the default
    page only forwards to it with the query parameters it was given.
    """
    st.switch_page("pages/leaderboard.py", query_params=common.forwarded_query_params())


PAGES = [
    st.Page(_home, title="Legi-Val", url_path="home", default=True, visibility="hidden"),
    st.Page("pages/leaderboard.py", title="Leaderboard", icon="🏆", url_path="leaderboard"),
    st.Page("pages/transfer.py", title="Transfer curves", icon="📈", url_path="transfer"),
    st.Page("pages/pareto.py", title="Pareto", icon="⚖️", url_path="pareto"),
    st.Page("pages/correlations.py", title="Correlations", icon="🧮", url_path="correlations"),
    st.Page("pages/redundancy.py", title="Redundancy threshold", icon="🔁", url_path="redundancy"),
    st.Page("pages/robustness.py", title="Robustness", icon="🧭", url_path="robustness"),
    st.Page(
        "pages/decomposition.py",
        title="Efficiency decomposition",
        icon="⏱️",
        url_path="decomposition",
    ),
    st.Page("pages/inspector.py", title="Trace inspector", icon="🔬", url_path="inspector"),
    st.Page("pages/rewards.py", title="Reward models", icon="🎯", url_path="rewards"),
    st.Page("pages/monitoring.py", title="Monitoring", icon="🛡️", url_path="monitoring"),
    st.Page("pages/published.py", title="Published", icon="📚", url_path="published"),
    st.Page(
        "pages/metric_validity.py", title="Metric validity", icon="🧪", url_path="metric_validity"
    ),
    st.Page("pages/about.py", title="About", icon="ℹ️", url_path="about"),
]


# Hidden: not in the menu, only there so that old links keep working. /efficiency was the
# decomposition page's address until it was renamed; its page forwards a bookmark to the new
# address. It is a file, not a function: until a run has called st.navigation, the browser
# knows the pages by the files in pages/, and a first visit to an address with no file there
# opened behind a "Page not found" dialog.
PAGES.append(
    st.Page(
        "pages/efficiency.py",
        title="Efficiency decomposition",
        url_path="efficiency",
        visibility="hidden",
    )
)


#: Client options the app sets itself, whatever the host's config.toml says. Streamlit's own
#: CSV export of a dataframe writes each cell verbatim (a name like =HYPERLINK(…) would be a
#: live formula in a spreadsheet), so it is off: every table has its own "Download CSV" button
#: with neutralised cells (pages.common.download_csv). Hosted, the viewer's toolbar (no Deploy
#: button, no developer menu). The menu itself is switched on here: ``.streamlit/config.toml``
#: beside this script starts the server with it off (see below).
CLIENT_OPTIONS = {"client.disableDataExport": True, "client.showSidebarNavigation": True}
if config.readonly:
    CLIENT_OPTIONS["client.toolbarMode"] = "viewer"


def _differs(key: str, value: object) -> bool:
    """Whether option ``key`` is not ``value`` now (False where this Streamlit lacks it:
    ``client.disableDataExport`` came after the oldest version the app supports)."""
    try:
        return st.get_option(key) != value
    except RuntimeError:
        return False


# Each page draws the store chooser itself (common.page_setup), so it works run on its own too.
# 13 pages: without expanded=True the menu would hide the last three behind "View more".
#
# Called before anything else can stop the run. Until some run has called st.navigation,
# Streamlit treats the `pages/` folder beside this script as the old automatic multipage app
# and sends a menu of every file in it ("app", "common", ...): the server starts with the menu
# hidden (.streamlit/config.toml), this call ends that mode for good, and only then is the
# menu switched on (CLIENT_OPTIONS), so no browser ever sees the files as pages.
page = st.navigation(PAGES, expanded=True)

_changed = [key for key, value in CLIENT_OPTIONS.items() if _differs(key, value)]
for _key in _changed:
    st.set_option(_key, CLIENT_OPTIONS[_key])
if _changed:
    # These options reach the browser with each run's start message, so the run that
    # changes them starts over once.
    st.rerun()

common.run_page(page)
