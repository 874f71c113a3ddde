"""The hosted app needs only ``requirements-app.txt`` (issue 27, item 3).

* Always: ``requirements-app.txt`` names exactly the six packages the README promises, with the
  pins of ``requirements.txt`` (so the hosted app runs what the suite tests), and the
  Dockerfile installs that file and nothing else, runs as a non-root user in read-only mode on
  port 8501 and checks ``/_stcore/health``.
* With ``LEGIVAL_APP_PYTHON`` (the Python of a fresh venv built by
  ``python -m venv .venv-app && .venv-app/bin/pip install -r requirements-app.txt``, which
  ``.ci/run`` prepares; nothing is downloaded at test time): the venv holds no heavy package
  of the full install, every page runs read-only on the demo store under AppTest in it, and
  the Dockerfile's own start command and health check, run in it, serve every page to a real
  Chromium with no exception shown.

No container runtime can run an image here (see docs/sharing.md), so the
image's install and start commands are checked in that clean venv instead.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser_fixtures import CHROMIUM, FLAGS, HAVE_CHROMIUM, NO_CHROMIUM, REPO
from tests.engine_fixtures import free_port, stop_process_group

APP_PYTHON = os.environ.get("LEGIVAL_APP_PYTHON", "")
needs_app_venv = pytest.mark.skipif(
    not APP_PYTHON,
    reason="LEGIVAL_APP_PYTHON is not set (.ci/run builds the requirements-app.txt venv)",
)
#: What the README says the hosted app needs, and nothing else.
APP_PACKAGES = {"streamlit", "plotly", "pandas", "pyarrow", "numpy", "scipy"}
#: Packages of the full install that the hosted app must do without.
HEAVY = ("torch", "transformers", "sentence_transformers", "llama_cpp", "nltk", "tiktoken",
         "math_verify", "sklearn", "pytest")  # fmt: skip


def requirement_lines(path: Path) -> list[str]:
    lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line]


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (keyword, arguments), continuation lines joined."""
    text = (REPO / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), " ".join(rest.split())))
    return found


def instruction(keyword: str) -> list[str]:
    return [rest for key, rest in dockerfile() if key == keyword]


def docker_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for rest in instruction("ENV"):
        for word in shlex.split(rest):
            name, _, value = word.partition("=")
            env[name] = value
    return env


def test_requirements_app_is_the_readme_list_with_the_tested_pins() -> None:
    app = requirement_lines(REPO / "requirements-app.txt")
    names = {re.split(r"[<>=!~\[ ]", line, maxsplit=1)[0].lower() for line in app}
    assert names == APP_PACKAGES
    full = set(requirement_lines(REPO / "requirements.txt"))
    assert [line for line in app if line not in full] == []


def test_dockerfile_installs_the_app_requirements_only_and_serves_readonly() -> None:
    (base,) = instruction("FROM")
    assert base.startswith("python:3.11") and "slim" in base
    assert instruction("RUN")[-1] == "pip install -r requirements-app.txt"
    assert [r for r in instruction("RUN") if "pip" in r] == ["pip install -r requirements-app.txt"]
    copied = [rest.split()[-2] for rest in instruction("COPY")]
    assert "requirements.txt" not in copied and "requirements-app.txt" in copied
    (user,) = instruction("USER")
    assert user not in ("root", "0")
    assert docker_env()["LEGIVAL_READONLY"] == "1"
    assert instruction("EXPOSE") == ["8501"]
    (health,) = instruction("HEALTHCHECK")
    assert "/_stcore/health" in health and "8501" in health
    (start,) = instruction("CMD")
    command = json.loads(start)
    assert command[:3] == ["streamlit", "run", "app.py"] and "--server.port=8501" in command
    assert command[-1] == "--readonly"


def app_run(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [APP_PYTHON, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
@needs_app_venv
def test_the_app_venv_holds_only_the_app_requirements() -> None:
    probe = app_run(
        "import importlib.util, json, sys\n"
        f"heavy = {list(HEAVY)!r}\n"
        "print(json.dumps({'venv': sys.prefix != sys.base_prefix,"
        " 'found': [m for m in heavy if importlib.util.find_spec(m) is not None]}))"
    )
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    assert seen["venv"] and seen["found"] == []
    config = (Path(APP_PYTHON).parent.parent / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in config
    # every line of requirements-app.txt is satisfied there
    lines = requirement_lines(REPO / "requirements-app.txt")
    check = subprocess.run(
        [APP_PYTHON, "-c",
         "import sys\nfrom importlib.metadata import version\n"
         "from packaging.requirements import Requirement\n"
         "print([r for r in sys.argv[1:] if not Requirement(r).specifier.contains("
         "version(Requirement(r).name), prereleases=True)])", *lines],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert check.returncode == 0 and check.stdout.strip() == "[]", check.stderr


@pytest.mark.slow
@needs_app_venv
def test_every_page_runs_readonly_in_the_app_venv() -> None:
    result = subprocess.run(
        [APP_PYTHON, str(REPO / "tests" / "app_venv_pages.py")],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    pages = re.findall(r'st\.Page\(\s*"([^"]+)"', (REPO / "app.py").read_text(encoding="utf-8"))
    # the menu's 13 pages and the hidden one that forwards the old /efficiency address
    assert sorted(seen) == sorted(pages) and len(pages) == 14
    for page, shown in seen.items():
        assert shown["exceptions"] == [] and shown["errors"] == [], (page, shown)
        assert len(shown["titles"]) >= 1, page  # the page drew, not just the store chooser
        missing = [n for n in shown["notes"] if re.search(r"install|No module", n)]
        assert missing == [], (page, missing)


def url_paths() -> list[str]:
    """Every page address of the app's menu (the hidden redirect left out)."""
    text = (REPO / "app.py").read_text(encoding="utf-8")
    return [
        m.group(1) for m in re.finditer(r'url_path="([^"]+)"(?![^)]*visibility="hidden")', text)
    ]


@pytest.fixture(scope="module")
def docker_started_app() -> Iterator[str]:
    """The Dockerfile's CMD with its ENV, run by the app venv (its port swapped for a free one
    on loopback); yields the base URL once the Dockerfile's HEALTHCHECK command passes."""
    port = free_port()
    (start,) = instruction("CMD")
    command = [
        {"--server.port=8501": f"--server.port={port}",
         "--server.address=0.0.0.0": "--server.address=127.0.0.1"}.get(word, word)
        for word in json.loads(start)
    ]  # fmt: skip
    assert command[0] == "streamlit"
    executable = str(Path(APP_PYTHON).parent / "streamlit")
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEGIVAL_")}
    env.update(docker_env())
    env["PATH"] = f"{Path(APP_PYTHON).parent}{os.pathsep}{env.get('PATH', '')}"
    process = subprocess.Popen(
        [executable, *command[1:4], "--server.fileWatcherType=none", *command[4:]],
        cwd=REPO, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    (health,) = instruction("HEALTHCHECK")
    probe = json.loads(health.split("CMD", 1)[1].strip())
    probe = [APP_PYTHON if w == "python" else w.replace("8501", str(port)) for w in probe]
    try:
        deadline = time.monotonic() + 120
        while subprocess.run(probe, capture_output=True, timeout=30).returncode != 0:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the Dockerfile's start command did not come up healthy")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process_group(process)


@needs_app_venv
@pytest.mark.browser
@pytest.mark.skipif(not HAVE_CHROMIUM, reason=NO_CHROMIUM)
@pytest.mark.timeout(600)
def test_the_docker_start_command_serves_every_page_to_chromium(docker_started_app: str) -> None:
    from playwright.sync_api import sync_playwright

    from tests.test_browser import wait_idle

    with urllib.request.urlopen(f"{docker_started_app}/_stcore/health", timeout=5) as reply:
        assert reply.read() == b"ok"
    paths = url_paths()
    assert len(paths) == 13
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page: Any = browser.new_page(viewport={"width": 1400, "height": 900})
            for path in paths:
                page.goto(f"{docker_started_app}/{path}?store=demo")
                page.wait_for_selector('[data-testid="stApp"]', timeout=60_000)
                wait_idle(page, 90_000)
                page.wait_for_selector("h1", timeout=30_000)
                assert page.locator('[data-testid="stException"]').count() == 0, path
                # read-only: the viewer's toolbar, no Deploy button
                assert page.locator('[data-testid="stAppDeployButton"]').count() == 0, path
        finally:
            browser.close()
