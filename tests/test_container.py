"""The app's image, run by a real container runtime (issue 27, item 3).

``.ci/run`` builds the repository's ``Dockerfile`` with podman where one runs, and names the
image in ``LEGIVAL_APP_IMAGE``; this test starts it (nothing is downloaded at test time) and
checks what the Dockerfile promises: the health check on ``/_stcore/health`` passes, the app
serves the demo leaderboard read-only (no Deploy button), as a non-root user, and the image
holds none of the full install's heavy packages. ``LEGIVAL_CONTAINER`` is the runtime's
command (default ``podman``); ``LEGIVAL_CONTAINER_RUN_ARGS`` adds arguments to ``run`` (with
``--network=host``, where the runtime has no network backend, the app is reached on the host's
port 8501 instead of a published one).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.browser_fixtures import CHROMIUM, FLAGS, HAVE_CHROMIUM, NO_CHROMIUM, streamlit_healthy
from tests.engine_fixtures import free_port

IMAGE = os.environ.get("LEGIVAL_APP_IMAGE", "")
RUNTIME = shlex.split(os.environ.get("LEGIVAL_CONTAINER", "podman"))
RUN_ARGS = shlex.split(os.environ.get("LEGIVAL_CONTAINER_RUN_ARGS", ""))
pytestmark = [
    pytest.mark.skipif(
        not IMAGE, reason="LEGIVAL_APP_IMAGE is not set (.ci/run builds it where podman runs)"
    ),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]


def runtime(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUNTIME, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def container() -> Iterator[tuple[str, str]]:
    """The image running with port 8501 published on a free loopback port: (id, base URL)."""
    if "--network=host" in RUN_ARGS:
        port, publish = 8501, []
    else:
        port = free_port()
        publish = ["-p", f"127.0.0.1:{port}:8501"]
    started = runtime("run", "-d", "--rm", *publish, *RUN_ARGS, IMAGE)
    assert started.returncode == 0, started.stderr
    name = started.stdout.strip().splitlines()[-1]
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while not streamlit_healthy(base, timeout=3):
            assert time.monotonic() < deadline, runtime("logs", name).stdout[-2000:]
            time.sleep(0.5)
        yield name, base
    finally:
        runtime("rm", "-f", name)


def test_the_image_is_healthy_and_runs_as_a_user(container: tuple[str, str]) -> None:
    name, _ = container
    # the Dockerfile's HEALTHCHECK command, run by the runtime inside the container
    check = runtime("healthcheck", "run", name)
    assert check.returncode == 0, check.stdout + check.stderr
    user = runtime("exec", name, "id", "-u")
    assert user.returncode == 0 and user.stdout.strip() == "1000"
    heavy = runtime(
        "exec", name, "python", "-c",
        "import importlib.util, json; print(json.dumps([m for m in ('torch', 'transformers', "
        "'llama_cpp', 'sentence_transformers') if importlib.util.find_spec(m)]))",
    )  # fmt: skip
    assert heavy.returncode == 0 and json.loads(heavy.stdout) == [], heavy.stderr
    readonly = runtime("exec", name, "printenv", "LEGIVAL_READONLY")
    assert readonly.stdout.strip() == "1"


@pytest.mark.browser
@pytest.mark.skipif(not HAVE_CHROMIUM, reason=NO_CHROMIUM)
def test_the_image_serves_the_demo_leaderboard(container: tuple[str, str]) -> None:
    from playwright.sync_api import sync_playwright

    from tests.test_browser import wait_idle

    _, base = container
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{base}/leaderboard?store=demo")
            page.wait_for_selector('[data-testid="stApp"]', timeout=60_000)
            wait_idle(page, 90_000)
            page.wait_for_selector('[data-testid="stDataFrame"]', timeout=60_000)
            assert page.locator('[data-testid="stException"]').count() == 0
            assert page.locator('[data-testid="stAppDeployButton"]').count() == 0
            assert page.get_by_text("95% interval [lo–hi] from 1,000 resamples").count() == 1
        finally:
            browser.close()
