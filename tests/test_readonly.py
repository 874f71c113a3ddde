"""Hosting mode: ``--readonly`` (or ``LEGIVAL_READONLY=1``) writes nothing and opens only the
configured stores, whatever the URL says.

Checked with streamlit's AppTest on every page of the app, on the hostile store of
``tests/xss_payloads.py``:

* nothing is written: a Python audit hook records every file opened for writing, renamed,
  removed, created or truncated by this process while the pages run (it must record nothing),
  and the store, the bundled stores, the repository and the user's legival cache keep the same
  file list, sizes and mtimes;
* a URL cannot switch to a store that was not configured at launch (a real store at a path
  given in ``?store=`` is never opened), and paths in query parameters are never opened;
* no page offers a path input or a file upload in hosting mode.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core.store.store import Store
from tests.xss_payloads import PAYLOADS, build_hostile_store

# Slow: every test runs pages of the app on the hostile store, watching every file write.
pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
APP = str(REPO / "app.py")
#: Folders under the repository that test runs themselves write (not the app).
VOLATILE = {".git", ".hypothesis", ".pytest_cache", ".ruff_cache", "test-artifacts",
            "__pycache__", ".benchmarks"}  # fmt: skip


def app_pages() -> list[str]:
    """Script paths of every page registered in app.py (``pages/<name>.py``)."""
    found = re.findall(r'st\.Page\(\s*"([^"]+)"', (REPO / "app.py").read_text(encoding="utf-8"))
    assert found, "no pages found in app.py"
    return found


# --- watching the process -----------------------------------------------------------------------

_WRITE_EVENTS = {"os.rename", "os.replace", "os.remove", "os.unlink", "os.rmdir", "os.mkdir",
                 "os.truncate", "os.chmod", "os.utime", "shutil.copyfile", "shutil.rmtree",
                 "os.symlink", "os.link"}  # fmt: skip


class _Watch:
    """Records file activity of this process while ``active`` (an audit hook cannot be removed,
    so one hook is installed once and switched on and off)."""

    def __init__(self) -> None:
        self.active = False
        self.writes: list[tuple[str, str]] = []
        self.opened: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active:
            return
        if event == "open":
            path, mode, flags = [*args, None, None, None][:3]
            if not isinstance(path, str | bytes | os.PathLike):
                return
            text = os.fsdecode(path)
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int)
                and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
            )
            with self.lock:
                self.opened.append(text)
                if writing:
                    self.writes.append(("open-for-write", text))
        elif event in _WRITE_EVENTS:
            with self.lock:
                self.writes.append((event, " ".join(os.fsdecode(a) for a in args
                                                    if isinstance(a, str | bytes))))  # fmt: skip


WATCH = _Watch()
sys.addaudithook(WATCH)


@pytest.fixture
def watch() -> Iterator[_Watch]:
    WATCH.writes.clear()
    WATCH.opened.clear()
    WATCH.active = True
    try:
        yield WATCH
    finally:
        WATCH.active = False


def _snapshot(root: Path, skip: set[str] = frozenset()) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip]
        for name in filenames:
            path = Path(dirpath) / name
            try:
                stat = path.stat()
            except OSError:
                continue
            out[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return out


def _diff(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    changed = [p for p in after if p in before and after[p] != before[p]]
    return sorted(changed + [p for p in after if p not in before] +
                  [p for p in before if p not in after])  # fmt: skip


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stores() -> Iterator[dict[str, Path]]:
    folder = Path(tempfile.mkdtemp(prefix="legival-readonly-"))
    hostile = build_hostile_store(folder / "hostile")
    decoy = Store.create(folder / "decoy")  # a valid store that is NOT configured
    decoy.write("rewards", [{"trace_id": "t-decoy", "reward_model": "decoy-rm", "score": 1.0}])
    yield {"hostile": hostile, "decoy": decoy.path, "root": folder}
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _fresh_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    st.cache_data.clear()
    st.cache_resource.clear()
    # Importing page helpers may compile modules; Python's bytecode cache is not the app's doing.
    monkeypatch.setattr(sys, "dont_write_bytecode", True)


def _app(monkeypatch: pytest.MonkeyPatch, hostile: Path) -> AppTest:
    monkeypatch.setenv("LEGIVAL_STORE", f"hostile={hostile}")
    monkeypatch.setenv("LEGIVAL_READONLY", "1")
    return AppTest.from_file(APP, default_timeout=90)


def _run(at: AppTest, page: str, params: dict[str, str] | None = None) -> AppTest:
    at.query_params.clear()
    if page != app_pages()[0]:
        at.switch_page(page)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, (page, [e.value for e in at.exception])
    return at


# --- tests ---------------------------------------------------------------------------------------


def test_the_watch_sees_a_store_write(stores: dict[str, Path], watch: _Watch) -> None:
    """The detector itself: a real store write (Arrow part + manifest) is recorded."""
    scratch = Store.create(stores["root"] / "scratch")
    watch.writes.clear()
    scratch.write("rewards", [{"trace_id": "t", "reward_model": "rm", "score": 0.0}])
    kinds = {kind for kind, _ in watch.writes}
    assert {"open-for-write", "os.rename"} <= kinds, watch.writes  # os.replace audits as rename


def test_every_page_writes_nothing(
    stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch, watch: _Watch
) -> None:
    from platformdirs import user_cache_dir

    watched = {
        "store": (stores["hostile"], set()),
        "repository": (REPO, VOLATILE),
        "legival cache": (Path(user_cache_dir("legival")), set()),
        "streamlit config": (Path.home() / ".streamlit", set()),
    }
    before = {name: _snapshot(root, skip) for name, (root, skip) in watched.items()}

    at = _app(monkeypatch, stores["hostile"])
    at.run()  # the main script once, so st.navigation knows the pages
    for page in app_pages():
        _run(at, page, {"store": "hostile"})
    WATCH.active = False

    assert watch.writes == [], f"the read-only app wrote: {watch.writes[:10]}"
    for name, (root, skip) in watched.items():
        changed = _diff(before[name], _snapshot(root, skip))
        assert changed == [], f"{name} changed while the read-only app ran: {changed[:10]}"
    assert any(p.startswith(str(stores["hostile"])) for p in watch.opened), "store never read"


HOSTILE_PARAMS = [
    {"store": "../../etc/passwd"},
    {"store": "/etc/passwd"},
    {"store": "file:///etc/passwd"},
    {"store": "x" * 10_000},
    {"store": "DECOY"},  # replaced by the decoy store's absolute path
    {"store": "hostile", "teacher": "../../../etc/passwd", "dataset": "/etc/passwd"},
    {"store": "hostile", "trace": "../../etc/passwd", "student": "y" * 10_000},
    {"store": "hostile", "metric": PAYLOADS["script"], "problem": "file:///etc/passwd"},
]


@pytest.mark.parametrize("params", HOSTILE_PARAMS, ids=range(len(HOSTILE_PARAMS)))
def test_query_parameters_never_leave_the_configured_stores(
    stores: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    watch: _Watch,
    params: dict[str, str],
) -> None:
    params = {k: (str(stores["decoy"]) if v == "DECOY" else v) for k, v in params.items()}
    opened_stores: list[Path] = []
    real_init = Store.__init__

    def spy_init(self: Store, path: Any) -> None:
        opened_stores.append(Path(path).resolve())
        real_init(self, path)

    monkeypatch.setattr(Store, "__init__", spy_init)
    at = _app(monkeypatch, stores["hostile"])
    at.run()
    pages = app_pages()
    for page in pages:
        _run(at, page, params)
        if "store" in params and params["store"] != "hostile":
            messages = " ".join(str(e.value) for e in [*at.info, *at.sidebar.info])
            assert "There is no store called" in messages, (page, messages)
            assert "x" * 100 not in messages  # a 10 kB value is cut short
    WATCH.active = False

    from pages.common import CALIBRATION_STORE

    # the bundled demo/published stores are configured too; the bundled calibration store is
    # a fixed path of the code (Metric validity's fallback), never one a URL can name
    allowed = {stores["hostile"].resolve(), CALIBRATION_STORE.resolve()} | {
        p.resolve() for p in _bundled_stores()
    }
    strays = {p for p in opened_stores if p not in allowed}
    assert strays == set(), f"opened a store that was not configured: {strays}"
    assert stores["decoy"].resolve() not in opened_stores
    leaked = [p for p in watch.opened if "passwd" in p or p.startswith(str(stores["decoy"]))]
    assert leaked == [], f"opened outside the configured stores: {leaked}"


def _bundled_stores() -> list[Path]:
    from legival_core.views.app_config import BUNDLED_STORES

    return list(BUNDLED_STORES.values())


def test_hosting_mode_offers_no_path_input_or_upload(
    stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _app(monkeypatch, stores["hostile"])
    at.run()
    for page in app_pages():
        _run(at, page, {"store": "hostile"})
        assert at.get("file_uploader") == [], f"{page}: a file upload in hosting mode"
        for box in at.text_input:
            label = str(box.label).lower()
            assert not any(w in label for w in ("path", "folder", "directory", "store")), (
                f"{page}: text input {box.label!r} in hosting mode"
            )
        # the store chooser lists only configured names, never a path
        for select in at.sidebar.selectbox:
            if select.label == "Results store":
                assert all("/" not in str(o) for o in select.options), select.options
