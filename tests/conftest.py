"""Shared test setup: everything runs offline, on the CPU, with the project's own assets."""

from __future__ import annotations

import os

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
