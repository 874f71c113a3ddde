"""Shared test setup: everything runs offline, on the CPU, with the project's own assets."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from tests.engine_fixtures import gguf, llama_server, transformers_engine  # noqa: F401

# No test may reach a hub: models and data come from installed packages only.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a local Ray reports nothing home
# Two cores shared by the test process and the servers/subprocesses it starts: one thread per
# process is several times faster than OpenMP/BLAS threads spin-waiting for each other.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def _keep_main_module() -> Iterator[None]:
    """Put back ``sys.modules["__main__"]`` after each test. Streamlit's AppTest runs a page as
    ``__main__`` and leaves it there; a later test that starts a process with the "spawn" method
    would then re-run that page script in the child (a page that raises on purpose made the
    child exit 1)."""
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main


@pytest.fixture(scope="session", autouse=True)
def _run_scoped_builds(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The folder of :mod:`tests.run_scoped` (what a slow build makes once per run): one the
    run's xdist workers share (the parent of their temporary folders), so one worker builds and
    the others wait and take it."""
    from tests import run_scoped

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    run_scoped.ROOT = shared / "run-scoped"
