"""Run one page of the real ``app.py`` headless (Streamlit's AppTest), as a link would open it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

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
