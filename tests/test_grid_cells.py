"""No data grid of the demo's pages holds a gap or an infinity.

Streamlit's data grid draws a missing value as ``None`` and an infinity as ``Infinity`` on its
canvas, whatever a pandas Styler's ``na_rep`` says, and the grid's accessible cells (what the
Chromium test in ``test_page_text_browser.py`` reads) hold an empty string for them: the
browser cannot see the ``None`` a reader sees. So this test reads the frames themselves, as
each page hands them to ``st.dataframe``, under AppTest: a gap must arrive as text (an em dash,
``n/a``), never as a null.

Before this test the Robustness page showed ``None`` twice in its side-by-side table (the
reference teacher has no default rank and no default value) while the browser crawl passed.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
import streamlit as st

from legival_core.views.app_config import BUNDLED_STORES
from tests.app_runner import run_app_page

#: Every page of the menu (app.py's url_path values).
PAGES = (
    "leaderboard", "transfer", "pareto", "correlations", "redundancy", "robustness",
    "decomposition", "inspector", "rewards", "monitoring", "published", "metric_validity",
    "about",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def bad_cells(frame: pd.DataFrame) -> list[str]:
    """``column: value`` for every cell the grid would draw as None, NaN or Infinity."""
    found = []
    for column in frame.columns:
        for value in frame[column]:
            if isinstance(value, float) and math.isinf(value):
                found.append(f"{column}: {value!r}")
            elif pd.api.types.is_scalar(value) and pd.isna(value):
                found.append(f"{column}: missing")
    return found


def test_the_check_finds_what_the_grid_draws_as_none() -> None:
    frame = pd.DataFrame({"rank": [1.0, float("nan")], "value": ["0.48", None],
                          "e0": [float("-inf"), 0.0], "ok": ["—", "n/a"]})  # fmt: skip
    assert bad_cells(frame) == ["rank: missing", "value: missing", "e0: -inf"]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_no_grid_of_the_demo_holds_a_gap(page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if not (BUNDLED_STORES["demo"] / "manifest.json").exists():
        pytest.fail("the bundled demo store is missing (python -m precompute demo builds it)")
    at = run_app_page(page, monkeypatch, [BUNDLED_STORES["demo"]], timeout=300)
    problems = {}
    for index, grid in enumerate(at.dataframe):
        found = bad_cells(grid.value)
        if found:
            problems[index] = found[:6]
    assert not problems, problems
