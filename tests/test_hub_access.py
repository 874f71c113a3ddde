"""Hub access as a user on a GPU node gets it (issue 28, item 5).

A model named by a hub id is downloaded when it is not cached; offline mode only when asked
for (``HF_HUB_OFFLINE=1``: this suite's ``conftest.py`` asks, the user may); no code changes
the variable for the rest of the process; the packaged models load from their folders without
asking any hub anything; an unreachable hub is one line from the command line.

The download is real: ``HF_ENDPOINT`` points at a Hub on 127.0.0.1 (``tests/loopback_hub.py``)
serving SmolLM2-135M-Instruct as a Hugging Face folder under a hub id, and huggingface_hub
fetches it into an empty cache as it would from huggingface.co. Each check runs in a fresh
process whose environment has no offline variable, as a user's shell would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.child_process import python_child
from tests.engine_fixtures import free_port
from tests.loopback_hub import COMMIT, loopback_hub
from tests.smoke_config import write_smoke_config

REPO = Path(__file__).resolve().parents[1]
REPO_ID = "legival-test/SmolLM2-135M-Instruct"
#: Variables that would make the fresh process offline or send it to another cache.
_DROPPED = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "TRANSFORMERS_CACHE",
    "HF_ENDPOINT",
)

pytestmark = pytest.mark.slow


def online_env(hf_home: Path, endpoint: str, **extra: str) -> dict[str, str]:
    """The environment of a user's shell with a network: no offline flag, ``HF_ENDPOINT`` at
    ``endpoint`` and an empty Hugging Face cache under ``hf_home``."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    env.update(
        HF_ENDPOINT=endpoint,
        HF_HOME=str(hf_home),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        PYTHONPATH=str(REPO),
        **extra,
    )
    return env


def run_python(code: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; it prints one JSON object as its last line."""
    result = python_child("-c", textwrap.dedent(code), *args, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


#: Greedy text of an engine named by hub id (argv[1]) and, when given, of one on a folder
#: (argv[2]); and the offline variable as the process holds it after both loads.
GENERATE = """
    import json, os, sys
    from precompute.backends.base import GenerationRequest
    from precompute.backends.transformers_engine import TransformersEngine

    question = [{"role": "user", "content": "What is 12 times 11? Answer with a number."}]
    request = GenerationRequest("q", question, max_tokens=12)
    texts = [
        TransformersEngine(model, device="cpu", threads=1).generate([request])[0].text
        for model in sys.argv[1:]
    ]
    print(json.dumps({"texts": texts, "offline": os.environ.get("HF_HUB_OFFLINE")}))
"""


@pytest.fixture(scope="module")
def smollm2_folder() -> Path:
    from precompute.models import smollm2_hf_folder

    return smollm2_hf_folder()


def test_a_model_named_by_hub_id_is_downloaded_and_decodes_as_its_folder(
    smollm2_folder: Path, tmp_path: Path
) -> None:
    hf_home = tmp_path / "hf-home"
    with loopback_hub({REPO_ID: smollm2_folder}) as hub:
        out = run_python(GENERATE, online_env(hf_home, hub.url), REPO_ID, str(smollm2_folder))
        fetched = hub.fetched()
    by_name, from_folder = out["texts"]
    # The same weights and tokenizer, fetched through the hub client: the same greedy text.
    assert by_name == from_folder and by_name.strip()
    assert out["offline"] is None  # loading changed nothing in the process's environment
    # Files came through the Hub's resolve/ URLs (at "main", then at the commit it answered).
    assert all(path.startswith(f"/{REPO_ID}/resolve/") for path in fetched)
    names = {path.rsplit("/", 1)[1] for path in fetched}
    assert {"config.json", "tokenizer.json", "model.safetensors"} <= names, fetched
    snapshot = hf_home / "hub" / f"models--{REPO_ID.replace('/', '--')}" / "snapshots" / COMMIT
    weights = snapshot / "model.safetensors"
    assert weights.stat().st_size == (smollm2_folder / "model.safetensors").stat().st_size

    # The user now asks for offline mode, the hub gone: the cached copy loads, same text.
    offline = online_env(hf_home, f"http://127.0.0.1:{free_port()}", HF_HUB_OFFLINE="1")
    again = run_python(GENERATE, offline, REPO_ID)
    assert again["texts"] == [by_name] and again["offline"] == "1"


def test_packaged_models_load_from_their_folders_and_ask_the_hub_nothing(
    smollm2_folder: Path, tmp_path: Path
) -> None:
    code = """
        import json, os
        from legival_core.text.embedding import embed_sentences, load_minilm
        from precompute.backends.chat import load_tokenizer
        from precompute.backends.transformers_engine import TransformersEngine
        from precompute.models import smollm2_gguf_path, smollm2_hf_folder

        vectors = embed_sentences(["Wait, let me check."], load_minilm("cpu"))
        gguf = str(smollm2_gguf_path())
        engine = TransformersEngine(gguf, device="cpu", threads=1)
        tokenizer = load_tokenizer(gguf)
        folder_tokenizer = load_tokenizer(str(smollm2_hf_folder()))  # what vLLM is given
        print(json.dumps({
            "dim": int(vectors.shape[1]),
            "same_vocab": len(engine.tokenizer) == len(tokenizer) == len(folder_tokenizer),
            "offline": [os.environ.get(v) for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")],
        }))
    """
    with loopback_hub({REPO_ID: smollm2_folder}) as hub:
        out = run_python(code, online_env(tmp_path / "hf-home", hub.url))
        requests = list(hub.requests)
    assert out == {"dim": 384, "same_vocab": True, "offline": [None, None]}
    assert requests == []  # every packaged model came from disk, with the hub reachable


#: The one teacher of the smoke config: a transformers model named ``{model}``.
TEACHER = """
[[teachers]]
name = "not-cached"
engine = "transformers"
model = "{model}"
max_tokens = 8
"""


def run_cli(tmp_path: Path, model: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    stages = ["problems", "generate"]
    config = write_smoke_config(tmp_path / "hub.toml", "hub", stages, TEACHER.format(model=model))
    command = [sys.executable, "-m", "precompute", "run", "--config", str(config)]
    command += ["--store", str(tmp_path / "store"), "--no-progress"]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The command's one error line; every other stderr line is a finished stage's summary
    (no traceback, no retry chatter from the hub client)."""
    *summaries, last = result.stderr.strip().splitlines()
    assert summaries == [line for line in summaries if line.startswith("problems: ")], (
        result.stderr[-3000:]
    )
    assert last.startswith("precompute: error: "), result.stderr[-3000:]
    return last


def test_an_unreachable_hub_is_one_line_naming_the_model_and_the_hub(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = run_cli(tmp_path, "legival-test/not-cached", online_env(tmp_path / "hf", endpoint))
    line = error_line(result)
    assert result.returncode == 5  # missing input
    assert line.startswith("precompute: error: HubModelError: tokenizer 'legival-test/not-cached'")
    assert f"the Hub at {endpoint} cannot be reached" in line
    assert result.stderr.startswith("problems: 3 problems rows")  # the stage before it ran


def test_offline_mode_and_an_empty_cache_say_so_and_how_to_download(tmp_path: Path) -> None:
    env = online_env(tmp_path / "hf", f"http://127.0.0.1:{free_port()}", HF_HUB_OFFLINE="1")
    result = run_cli(tmp_path, "legival-test/not-cached", env)
    line = error_line(result)
    assert result.returncode == 5
    assert "not in the local Hugging Face cache and offline mode is on (HF_HUB_OFFLINE=1)" in line
    assert "unset it to download" in line


def test_a_repository_the_hub_does_not_have_is_one_line(
    smollm2_folder: Path, tmp_path: Path
) -> None:
    absent = "legival-test/no-such-model"
    with loopback_hub({REPO_ID: smollm2_folder}) as hub:
        result = run_cli(tmp_path, absent, online_env(tmp_path / "hf", hub.url))
    line = error_line(result)
    assert result.returncode == 5
    assert line.startswith(f"precompute: error: HubModelError: tokenizer '{absent}'")
    assert "could not be loaded" in line
