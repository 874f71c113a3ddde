"""How the browser tests find a Chromium: ``$CHROMIUM`` first, then Debian's, then playwright's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import browser_fixtures
from tests.browser_fixtures import NO_CHROMIUM, find_chromium


def test_a_named_chromium_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "my-chrome"
    fake.write_bytes(b"")  # only its existence is checked here; nothing launches it
    monkeypatch.setenv("CHROMIUM", str(fake))
    assert find_chromium() == str(fake)


def test_a_named_chromium_that_is_missing_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A wrong CHROMIUM is not silently replaced by another browser: the tests skip and say why.
    monkeypatch.setenv("CHROMIUM", str(tmp_path / "nowhere"))
    assert find_chromium() is None


def test_without_debian_chromium_playwright_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.setattr(browser_fixtures, "DEBIAN_CHROMIUM", (str(tmp_path / "none"),))
    found = find_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        own = pw.chromium.executable_path
    assert found == (own if os.path.isfile(own) else None)


def test_the_skip_message_says_how_to_get_one() -> None:
    assert "CHROMIUM=" in NO_CHROMIUM
    assert "apt-get install chromium" in NO_CHROMIUM
    assert "playwright install chromium" in NO_CHROMIUM
