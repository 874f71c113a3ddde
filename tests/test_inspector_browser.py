"""The inspector's way in, in real Chromium on the bundled demo: it opens on the trace table's
first row (a correct trace with students' rollouts), and clicking another row opens that trace,
its id in the URL for a shared link. AppTest cannot click a grid row, so this is a browser test.

The rows are those of the front door's ``traces()`` (the page's own function and order,
compared in full by ``tests/test_front_door.py``).
"""

from __future__ import annotations

import re

import pytest

import legival_core as lv
from legival_core.views.app_config import BUNDLED_STORES
from tests.browser_fixtures import browser_marks, chromium_context, streamlit_app
from tests.test_browser import wait_idle

pytestmark = browser_marks(900)

#: The grid's geometry (Streamlit's data grid): a 35 px header, 35 px rows, the row-selection
#: markers in the first ~30 px.
HEADER, ROW, MARKER = 35, 35, 15


def test_first_view_and_a_click_in_the_trace_table() -> None:
    if not (BUNDLED_STORES["demo"] / "manifest.json").exists():
        pytest.fail("the bundled demo store is missing (python -m precompute demo builds it)")
    rows = lv.open(BUNDLED_STORES["demo"]).traces()
    first, third = rows.iloc[0], rows.iloc[2]
    assert bool(first["correct"]) and bool(first["rollouts"])
    with streamlit_app([]) as base, chromium_context() as browser:
        tab = browser.new_page()
        tab.goto(f"{base}/inspector?store=demo")
        tab.wait_for_selector('[data-testid="stApp"]', timeout=60_000)
        wait_idle(tab, timeout=300_000)
        assert f"trace={first['trace_id']}" in tab.url
        tab.get_by_text(f"{first['teacher']} · {first['trace_id']}").wait_for(timeout=60_000)
        box = tab.locator('[data-testid="stDataFrame"]').first.bounding_box()
        tab.mouse.click(box["x"] + MARKER, box["y"] + HEADER + ROW * 2 + ROW / 2)
        wanted = re.escape(f"trace={third['trace_id']}")
        tab.wait_for_url(re.compile(wanted), timeout=120_000)
        wait_idle(tab, timeout=300_000)
        tab.get_by_text(f"{third['teacher']} · {third['trace_id']}").wait_for(timeout=60_000)
