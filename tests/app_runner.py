"""Run one page of the real ``app.py`` headless (Streamlit's AppTest), as a link would open it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from legival_core.store.store import Store

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def run_app_page(
    page: str,
    monkeypatch: pytest.MonkeyPatch,
    stores: Sequence[Path],
    params: dict[str, str] | None = None,
    *,
    readonly: bool = False,
    timeout: float = 120,
) -> AppTest:
    """``app.py`` on ``pages/<page>.py`` with ``stores`` configured at launch and the URL
    parameters ``params``; fails on any exception the page raised."""
    monkeypatch.setenv("LEGIVAL_STORE", ":".join(str(p) for p in stores))
    if readonly:
        monkeypatch.setenv("LEGIVAL_READONLY", "1")
    else:
        monkeypatch.delenv("LEGIVAL_READONLY", raising=False)
    at = AppTest.from_file(APP, default_timeout=timeout)
    if page != "leaderboard":
        # AppTest needs one run of the main script before it can switch to a page that
        # st.navigation registered; then the URL is set as a link to that page would set it.
        at.run()
        at.query_params.clear()
        at.switch_page(f"pages/{page}.py")
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


#: Seconds a page may take on the bundled demo store: its first run resamples every teacher of
#: every dataset, well past :func:`run_app_page`'s default on a slow machine.
DEMO_PAGE_TIMEOUT_S = 300


def run_demo_page(
    page: str,
    monkeypatch: pytest.MonkeyPatch,
    demo: Store,
    params: dict[str, str] | None = None,
) -> AppTest:
    """:func:`run_app_page` on the bundled demo store ``demo`` alone, with its longer time limit."""
    return run_app_page(page, monkeypatch, [demo.path], params, timeout=DEMO_PAGE_TIMEOUT_S)


def leaderboard_detail(at: AppTest) -> pd.DataFrame:
    """The leaderboard's per-metric table (value, interval, n, ranks) for the chosen metric."""
    return next(d.value for d in at.dataframe if "rank 95% interval" in d.value.columns)


def rank_the_composite(at: AppTest, weights: Mapping[str, float]) -> pd.DataFrame:
    """Give the leaderboard's composite these metric weights, check that the composite becomes
    the metric whose rank intervals show, show them, and return the detail table."""
    *before, (last, last_weight) = weights.items()
    for metric, weight in before:
        next(n for n in at.number_input if n.key == f"weight_{metric}").set_value(weight)
    next(n for n in at.number_input if n.key == f"weight_{last}").set_value(last_weight).run()
    focus = next(s for s in at.selectbox if s.label == "Rank intervals of")
    assert focus.value == "composite"
    focus.select("composite").run()
    return leaderboard_detail(at)
