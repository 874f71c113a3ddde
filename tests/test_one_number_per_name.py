"""One name, one number: a teacher's FOTU (redundancy, accuracy, …) is the same on every page.

Every page of the bundled demo runs under Streamlit's AppTest with its default selection
("All" datasets, every student). From each table that has a ``teacher`` column, every column
whose header is a metric's label (``FOTU``, ``Redundancy``, …) gives one value per teacher; the
leaderboard's text cells ("19.2% [12.0–31.0] · n 43") give theirs by their leading number. A
value computed another way must carry another name ("FOTU, traces pooled"), so equal names
must hold equal values, to the leaderboard's printed precision.

Before this test the demo showed gpt-4's FOTU as 0.252 on the Transfer page (pooled over
traces) and 0.192 on the Leaderboard (mean over datasets), both headed "fotu" / "FOTU".
"""

from __future__ import annotations

import re
from collections import defaultdict

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core.metrics.metric_catalog import LEADERBOARD_METRICS, METRICS
from legival_core.views.app_config import BUNDLED_STORES
from tests.app_runner import APP

#: Pages whose tables show teacher-level metrics.
PAGES = ("leaderboard", "transfer", "pareto", "redundancy", "rewards")
LABELS = {m.label: name for name, m in METRICS.items()}
NUMBER = re.compile(r"^\s*([0-9][0-9,]*(?:\.[0-9]+)?)(%?)")


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def leading_number(cell: object) -> float | None:
    """The number a text cell starts with ("19.2% [..]" -> 0.192, "1,653 [..]" -> 1653)."""
    if isinstance(cell, int | float):
        return None if pd.isna(cell) else float(cell)
    match = NUMBER.match(str(cell))
    if not match:
        return None
    value = float(match.group(1).replace(",", ""))
    return value / 100 if match.group(2) else value


def page_values(at: AppTest) -> dict[tuple[str, str], float]:
    """(metric label, teacher) -> value, from every table of the page with a teacher column."""
    found: dict[tuple[str, str], float] = {}
    for frame in at.dataframe:
        table = frame.value
        if "teacher" not in table.columns:
            continue
        for column in table.columns:
            # a header that is a metric's label, or its bare field name (which names it too)
            label = (
                column if column in LABELS else METRICS[column].label if column in METRICS else None
            )
            if label is None:
                continue
            for teacher, cell in zip(table["teacher"], table[column], strict=True):
                value = leading_number(cell)
                if value is not None:
                    found.setdefault((label, str(teacher)), value)
    return found


def run(page: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.delenv("LEGIVAL_STORE", raising=False)
    monkeypatch.delenv("LEGIVAL_READONLY", raising=False)
    at = AppTest.from_file(APP, default_timeout=180)
    if page == "leaderboard":  # every metric's column, not only the first look's few
        at.query_params["columns"] = list(LEADERBOARD_METRICS)
    at.run()
    if page != "leaderboard":
        at.switch_page(f"pages/{page}.py")
        at.run()
    assert not at.exception, (page, [e.value for e in at.exception])
    return at


def test_leading_number_reads_the_leaderboards_cells() -> None:
    assert leading_number("19.2% [12.0–31.0] · n 43") == pytest.approx(0.192)
    assert leading_number("1,653 [1,200–2,100] · n 80") == 1653.0
    assert leading_number("—") is None and leading_number(0.25) == 0.25


@pytest.mark.slow
def test_equal_names_hold_equal_values_across_the_demo_pages(monkeypatch) -> None:
    if not (BUNDLED_STORES["demo"] / "manifest.json").exists():
        pytest.fail("the bundled demo store is missing (python -m precompute demo builds it)")
    seen: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for page in PAGES:
        for key, value in page_values(run(page, monkeypatch)).items():
            seen[key][page] = value

    def pages_of(label: str) -> set[str]:
        return {page for (name, _), pages in seen.items() if name == label for page in pages}

    # the names several pages show: the check has something to compare for each (the
    # leaderboard's redundancy went unread while its first look hid that column)
    assert {"leaderboard", "transfer", "pareto"} <= pages_of("FOTU"), pages_of("FOTU")
    assert {"leaderboard", "pareto", "redundancy"} <= pages_of("Redundancy")
    assert {"leaderboard", "pareto"} <= pages_of("Accuracy")
    differ = {}
    for (label, teacher), by_page in seen.items():
        # the leaderboard prints shares to 0.1 percentage point, other numbers to 3 decimals
        tolerance = 0.0005 + 1e-9 if METRICS[LABELS[label]].share else 0.5
        low, high = min(by_page.values()), max(by_page.values())
        if high - low > tolerance:
            differ[(label, teacher)] = by_page
    assert not differ, differ
