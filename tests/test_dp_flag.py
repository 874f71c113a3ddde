"""``--dp N`` on ``run`` and on every stage (issue 28, item 5): the data-parallel flag of
docs/running-at-scale.md.

It stands for a config key: each model on the ``vllm`` engine gets ``options.dp = N`` (the
``ray-vllm`` engine calls its replicas ``concurrency``). Checked on the shipped GPU configs and
through the real command line, where the config a stage runs with is recorded in the store's
manifest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from legival_core.store.store import Store
from precompute.cli import EXIT_OK, EXIT_USAGE, main, with_data_parallel
from precompute.config import load_config
from tests.smoke_config import write_smoke_config

REPO = Path(__file__).resolve().parents[1]

#: The models of the smoke config the command-line tests run: a vLLM student and an
#: OpenAI-compatible judge (a server, which gets no replicas).
VLLM_MODELS = """
[[students]]
name = "llama"
engine = "vllm"
model = "meta-llama/Llama-3.2-1B-Instruct"
options = { gpu_memory_utilization = 0.85 }

[judge]
labelers = ["lexical", "llm"]
name = "judge"
engine = "openai"
model = "Qwen/Qwen2.5-7B-Instruct"
"""


def test_every_vllm_model_of_the_gpu_config_gets_dp_and_nothing_else_changes() -> None:
    config = load_config(REPO / "configs" / "example_gpu.toml")
    scaled = with_data_parallel(config, 4)
    for before, after in zip(
        (*config.teachers, *config.students), (*scaled.teachers, *scaled.students), strict=True
    ):
        assert before.engine == "vllm"
        assert after.options == {**before.options, "dp": 4}
        assert after.options["gpu_memory_utilization"] == 0.85  # the config's own keys stay
    assert config.judge.model is not None and scaled.judge.model is not None
    assert scaled.judge.model.engine == "openai"
    assert scaled.judge.model.options == config.judge.model.options  # a server: no replicas
    assert "dp" not in config.students[0].options  # the loaded config itself is left alone


def test_ray_vllm_models_get_the_same_count_as_their_concurrency() -> None:
    config = load_config(REPO / "configs" / "example_ray.toml")
    scaled = with_data_parallel(config, 2)
    assert [t.options["concurrency"] for t in config.teachers] == [8]
    assert [t.options["concurrency"] for t in scaled.teachers] == [2]
    assert [s.options["concurrency"] for s in scaled.students] == [2]
    assert all("dp" not in s.options for s in scaled.students)


@pytest.mark.parametrize("command", ["run", "problems"])
def test_dp_on_the_command_line_reaches_the_config_the_stages_run_with(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_smoke_config(tmp_path / "dp.toml", "dp", ["problems"], VLLM_MODELS)
    store = tmp_path / "store"
    args = [command, "--config", str(config), "--store", str(store), "--dp", "3", "--no-progress"]
    assert main(args) == EXIT_OK, capsys.readouterr().err
    recorded = Store.open(store).manifest["config"]
    assert recorded["students"][0]["options"] == {"gpu_memory_utilization": 0.85, "dp": 3}
    assert "dp" not in recorded["judge"].get("options", {})
    # the problems stage ran on that config: the three smoke problems are in the store
    assert len(Store.open(store).read("problems")) == 3


def test_dp_where_no_model_has_replicas_is_a_usage_error_naming_the_engines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    smoke = REPO / "configs" / "smoke.toml"  # every model on the transformers engine
    args = ["rollout", "--config", str(smoke), "--store", str(tmp_path / "s"), "--dp", "2"]
    assert main(args) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err == (
        f"precompute: error: --dp 2: no model in {smoke} runs on an engine with "
        "data-parallel replicas (ray-vllm, vllm)"
    )


def test_dp_below_one_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gpu = REPO / "configs" / "example_gpu.toml"
    assert main(["run", "--config", str(gpu), "--store", str(tmp_path), "--dp", "0"]) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == "precompute: error: --dp must be at least 1, got 0"
