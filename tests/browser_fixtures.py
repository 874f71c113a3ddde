"""What every real-browser test shares: a Chromium found on this machine, a Streamlit server of
the app on a free loopback port, and a Chromium context.

The flags keep headless Chromium quiet and offline-friendly: no sandbox (tests often run as root
in containers), no GPU, no background or component-update traffic, no /dev/shm (small in
containers)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.engine_fixtures import free_port, stop_process_group

#: Where a Chromium is looked for, in order, when ``CHROMIUM`` is not set: Debian's package
#: (``apt-get install chromium``), then playwright's own
#: (``python -m playwright install chromium``).
DEBIAN_CHROMIUM = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
NO_CHROMIUM = (
    "no Chromium found: set CHROMIUM=/path/to/chrome, or install one with "
    "`apt-get install chromium` (Debian/Ubuntu) or `python -m playwright install chromium`"
)


def find_chromium() -> str | None:
    """The Chromium the browser tests drive: ``$CHROMIUM``, Debian's, or playwright's own."""
    named = os.environ.get("CHROMIUM")
    if named:
        return named if Path(named).is_file() else None
    for path in DEBIAN_CHROMIUM:
        if Path(path).is_file():
            return path
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            own = pw.chromium.executable_path
    except Exception:  # playwright missing or its driver cannot start: no browser either way
        return None
    return own if own and Path(own).is_file() else None


CHROMIUM = find_chromium() or ""
HAVE_CHROMIUM = bool(CHROMIUM)
REPO = Path(__file__).resolve().parents[1]


def browser_marks(timeout_s: int) -> list[pytest.MarkDecorator]:
    """A browser test module's ``pytestmark``: the ``browser`` marker, a skip where no Chromium
    is found, and the module's time limit in seconds."""
    return [
        pytest.mark.browser,
        pytest.mark.skipif(not HAVE_CHROMIUM, reason=NO_CHROMIUM),
        pytest.mark.timeout(timeout_s),
    ]


FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]  # fmt: skip


def streamlit_healthy(base: str, timeout: float) -> bool:
    """Whether the Streamlit server at ``base`` answers its health check with 200."""
    try:
        with urllib.request.urlopen(f"{base}/_stcore/health", timeout=timeout) as reply:
            return reply.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def streamlit_app(app_args: Sequence[str], *, start_timeout: float = 90) -> Iterator[str]:
    """Run ``streamlit run app.py -- <app_args>`` on 127.0.0.1 in its own process group; yield
    its base URL once ``/_stcore/health`` answers; stop the whole group afterwards."""
    port = free_port()
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
           "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    for variable in ("LEGIVAL_STORE", "LEGIVAL_READONLY"):  # the arguments say what to serve
        env.pop(variable, None)
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port),
         "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false",
         "--", *app_args],
        cwd=REPO, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        while not streamlit_healthy(base, timeout=2):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("streamlit did not come up")
            time.sleep(0.3)
        yield base
    finally:
        stop_process_group(process)


@contextlib.contextmanager
def chromium_context(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A persistent Chromium context on a fresh temporary profile, closed and removed after."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="legival-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
                viewport={"width": width, "height": height},
            )  # fmt: skip
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
