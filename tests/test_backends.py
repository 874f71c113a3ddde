"""Tests of the generation engines.

Fast tests cover the pure pieces (validation, stop handling, vLLM round settling, the
registry, model lookup). Slow tests run the shared contract (``tests/backend_contract.py``)
on real engines: SmolLM2-135M GGUF through transformers on CPU, the same file behind a real
``llama_cpp.server`` on 127.0.0.1, and vLLM when it is installed.
"""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from precompute.backends import ENGINES, make_engine
from precompute.backends.base import (
    GenerationRequest,
    RequestError,
    cut_at_stop,
    shortest_satisfying,
    validate_request,
)
from precompute.backends.vllm_engine import RoundResult, settle_round
from tests.backend_contract import *  # noqa: F403 - the engine contract, run on `engine`
from tests.backend_contract import chat
from tests.child_process import python_child
from tests.engine_fixtures import LocalHTTPServer, smollm2_vllm_engine
from tests.engine_fixtures import free_port as _free_port

ROOT = Path(__file__).resolve().parent.parent
USER = [{"role": "user", "content": "hi"}]


# --------------------------------------------------------------------------- fast tests
def test_validate_request_names_the_bad_field() -> None:
    with pytest.raises(RequestError, match=r"'k'.*max_tokens"):
        validate_request(GenerationRequest("k", USER, max_tokens=0))
    with pytest.raises(RequestError, match=r"messages\[0\]\.content"):
        validate_request(GenerationRequest("k", [{"role": "user"}], max_tokens=3))
    with pytest.raises(RequestError, match="assistant prefix"):
        validate_request(GenerationRequest("k", USER, max_tokens=3, continue_final_message=True))
    with pytest.raises(RequestError, match="top_p"):
        validate_request(GenerationRequest("k", USER, max_tokens=3, top_p=0.0))
    with pytest.raises(RequestError, match="stop strings"):
        validate_request(GenerationRequest("k", USER, max_tokens=3, stop=[""]))
    validate_request(GenerationRequest("k", USER, max_tokens=3))


def test_cut_at_stop_uses_the_earliest_stop() -> None:
    # "b" sits at index 2, "c" at 4: the earliest wins whatever the list order.
    assert cut_at_stop("a b c", ["c", "b"]) == ("a ", True)
    assert cut_at_stop("abc", []) == ("abc", False)


def test_shortest_satisfying_prefix() -> None:
    text = "x=1} y=2} z=3}"
    # Prefixes ending at "}" are "x=1}" (4), "x=1} y=2}" (9), … ; the first with "2" is 9.
    assert shortest_satisfying(text, lambda t: "2" in t, ["}"]) == 9
    assert shortest_satisfying(text, lambda t: "9" in t, ["}"]) is None
    # Without triggers every character boundary counts: "x=1" has length 3.
    assert shortest_satisfying(text, lambda t: "1" in t, []) == 3


def _checked(**options: Any) -> GenerationRequest:
    return GenerationRequest("r", USER, max_tokens=20, **options)


def test_settle_round_user_stop_ends_and_cuts() -> None:
    request = _checked(stop=["###"])
    assert settle_round(request, "abc###", 5, RoundResult([], "stop", "###")) == ("stop", "abc")


def test_settle_round_trigger_check_pass_fail_and_budget() -> None:
    request = _checked(stop_when=lambda t: "42" in t, stop_when_after=["}"])
    done = settle_round(request, "boxed{42}", 6, RoundResult([], "stop", "}"))
    assert done == ("stop", "boxed{42}")
    assert settle_round(request, "{x}", 3, RoundResult([], "stop", "}"))[0] == "resume"
    # Same failed check with the whole budget (20) used: nothing left to resume with.
    assert settle_round(request, "{x}", 20, RoundResult([], "stop", "}"))[0] == "length"


def test_settle_round_without_triggers_checks_at_each_chunk() -> None:
    request = _checked(stop_when=lambda t: "done" in t)
    assert settle_round(request, "not yet", 8, RoundResult([], "length", None))[0] == "resume"
    assert settle_round(request, "done now", 8, RoundResult([], "length", None)) == (
        "stop",
        "done now",
    )


def test_settle_round_eos_and_length() -> None:
    request = _checked()
    assert settle_round(request, "hi", 2, RoundResult([], "stop", None)) == ("stop", "hi")
    assert settle_round(request, "hi", 20, RoundResult([], "length", None)) == ("length", "hi")


def test_registry_names_and_unknown_engine() -> None:
    assert {"transformers", "openai", "vllm"} <= set(ENGINES)
    with pytest.raises(ValueError, match="unknown engine 'nope'"):
        make_engine("nope", "model")


def test_every_registered_engine_has_the_protocols_close_and_cache_flag() -> None:
    """Stages call ``close`` and read ``caches_last_sequence`` on any engine, never through a
    fallback: every class in the registry has both (``stats`` is set per instance)."""
    from precompute.backends import engine_class

    for name in ENGINES:
        cls = engine_class(name)
        assert callable(getattr(cls, "close", None)), name
        assert isinstance(getattr(cls, "caches_last_sequence", None), bool), name
    # Only llama.cpp keeps the last sequence's cache (the rollout stage interleaves for it).
    assert [n for n in ENGINES if engine_class(n).caches_last_sequence] == ["llamacpp"]


def test_importing_the_backends_loads_no_heavy_module() -> None:
    code = (
        "import sys, precompute.backends, precompute.backends.vllm_engine, "
        "precompute.backends.openai_engine, precompute.backends.transformers_engine, "
        "precompute.models; "
        "heavy = [m for m in ('torch', 'transformers', 'vllm', 'httpx') if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    done = python_child("-c", code, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_model_cache_dir_follows_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from precompute import models

    # legival_core.store.assets.cache_dir() (when present) and the fallback both honour the
    # variable.
    monkeypatch.setenv("LEGIVAL_CACHE", str(tmp_path))
    assert models.model_cache_dir() == tmp_path / "models"
    assert (tmp_path / "models").is_dir()


def test_smollm2_gguf_is_shipped() -> None:
    from precompute.models import smollm2_gguf_path

    path = smollm2_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    with path.open("rb") as handle:
        assert handle.read(4) == b"GGUF"


# --------------------------------------------------------------------------- real engines
@pytest.fixture(scope="module")
def openai_engine(llama_server: str, transformers_engine: Any) -> Iterator[Any]:
    from precompute.backends.openai_engine import OpenAIEngine

    engine = OpenAIEngine(
        "smollm2",
        base_url=llama_server,
        dialect="llamacpp",
        tokenizer=transformers_engine.tokenizer,
        concurrency=2,
        timeout=60,
    )
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def vllm_engine() -> Iterator[Any]:
    yield from smollm2_vllm_engine("4")


@pytest.fixture(scope="module", params=["transformers", "openai", "vllm"])
def engine(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(f"{request.param}_engine")


@pytest.mark.slow
def test_transformers_prefix_reuse_same_text_fewer_prefill_tokens(
    transformers_engine: Any,
) -> None:
    question = "Add the numbers and give the total."
    steps = ["First, 12 plus 7 is 19.", " Next, 19 plus 5 is 24.", " Then 24 plus 6 is 30."]
    requests = [
        chat("k0", question, max_tokens=6),
        *[
            GenerationRequest(
                f"k{k}",
                [
                    {"role": "system", "content": "You answer questions clearly."},
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": "".join(steps[:k])},
                ],
                max_tokens=6,
                continue_final_message=True,
            )
            for k in (1, 2, 3)
        ],
    ]
    engine = transformers_engine
    engine.stats.reset()
    plain = engine.generate(requests)
    plain_prefill = engine.stats.prefill_tokens
    engine.prefix_reuse, engine.stats.prefill_tokens = True, 0
    try:
        reused = engine.generate(requests)
    finally:
        engine.prefix_reuse = False
    assert [c.text for c in reused] == [c.text for c in plain]
    prompt_total = sum(c.prompt_tokens for c in plain)
    assert plain_prefill == prompt_total
    # The k=1,2,3 prompts extend each other: only their new steps (plus one token) are run.
    assert engine.stats.prefill_tokens < prompt_total * 0.6


@pytest.mark.slow
def test_openai_count_prompt_tokens_asks_the_server(llama_server: str, openai_engine: Any) -> None:
    from precompute.backends.openai_engine import OpenAIEngine

    request = chat("count", "What is the capital of France?")
    bare = OpenAIEngine("smollm2", base_url=llama_server, dialect="llamacpp", max_retries=0)
    try:
        # The server renders its own chat template (from the GGUF metadata); the local one is
        # the same template, so the counts agree.
        assert bare.count_prompt_tokens(request) == openai_engine.count_prompt_tokens(request)
        [completion] = bare.generate([chat("plain", "Name a colour.", max_tokens=4)])
        assert completion.ok and completion.text
    finally:
        bare.close()


class _FaultyProxy:
    """An HTTP proxy in front of the real server that fails the first requests on purpose."""

    def __init__(self, upstream: str, faults: list[int | str]) -> None:
        import httpx

        self.faults, self.hits = list(faults), 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.hits += 1
                fault = outer.faults.pop(0) if outer.faults else None
                if isinstance(fault, int):
                    payload, status = b'{"error": "injected"}', fault
                elif fault == "garbage":
                    payload, status = b"<html>not json", 200
                else:
                    reply = httpx.post(
                        upstream + self.path.removeprefix("/v1"),
                        content=body,
                        headers={"Content-Type": "application/json"},
                        timeout=60,
                    )
                    payload, status = reply.content, reply.status_code
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.http = LocalHTTPServer(Handler)
        self.url = f"{self.http.base}/v1"

    def close(self) -> None:
        self.http.close()


def _engine_behind(proxy: _FaultyProxy, served: Any, **options: Any) -> Any:
    """An OpenAI engine on the llama.cpp server behind ``proxy`` (the ``served`` engine's
    tokenizer), retrying after a 0.01 s backoff."""
    from precompute.backends.openai_engine import OpenAIEngine

    return OpenAIEngine(
        "smollm2",
        base_url=proxy.url,
        dialect="llamacpp",
        tokenizer=served.tokenizer,
        backoff=0.01,
        **options,
    )


@pytest.mark.slow
def test_openai_retries_transient_failures_then_succeeds(
    llama_server: str, openai_engine: Any
) -> None:
    proxy = _FaultyProxy(llama_server, [503, 429, "garbage"])
    engine = _engine_behind(proxy, openai_engine, max_retries=3)
    try:
        [completion] = engine.generate([chat("retry", "Name a fruit.", max_tokens=4)])
    finally:
        engine.close()
        proxy.close()
    assert completion.ok, completion.error
    assert proxy.hits == 4 and engine.retries_made == 3


@pytest.mark.slow
def test_openai_gives_up_after_bounded_retries_and_keeps_going(
    llama_server: str, openai_engine: Any
) -> None:
    # Three 503s exhaust 1 try + 2 retries of the first request; the second request then
    # reaches the real server. One worker, so the order of hits is fixed.
    proxy = _FaultyProxy(llama_server, [503, 503, 503])
    engine = _engine_behind(proxy, openai_engine, max_retries=2, concurrency=1)
    try:
        out = engine.generate(
            [chat("doomed", "Hi.", max_tokens=3), chat("fine", "Name a fruit.", max_tokens=3)]
        )
    finally:
        engine.close()
        proxy.close()
    assert out[0].finish_reason == "error"
    assert "gave up after 3 attempts" in (out[0].error or "")
    assert out[1].ok and out[1].text
    assert proxy.hits == 4


@pytest.mark.slow
def test_openai_stream_cut_short_by_the_server_is_retried_never_kept(
    gguf: Path, transformers_engine: Any
) -> None:
    """llama.cpp's server, by default, ends the stream in flight with ``[DONE]`` and no finish
    reason as soon as another request arrives. Such a text is truncated: the engine must retry
    it (or report an error), never store it as a finished completion."""
    from precompute.backends.openai_engine import OpenAIEngine
    from tests.engine_fixtures import running_llama_server

    questions = ["Name a colour.", "Describe the sea.", "What is 2 + 2?", "Name three fruits."]
    # A check that never passes: every request streams to its budget.
    requests = [
        chat(f"s{i}", q, max_tokens=12, stop_when=lambda text: False)
        for i, q in enumerate(questions)
    ]
    with running_llama_server(gguf, interrupt_requests=True) as base:
        options = {"dialect": "llamacpp", "tokenizer": transformers_engine.tokenizer}
        concurrent = OpenAIEngine("smollm2", base_url=base, concurrency=4, max_retries=1,
                                  backoff=0.01, **options)  # fmt: skip
        serial = OpenAIEngine("smollm2", base_url=base, concurrency=1, **options)
        try:
            out = concurrent.generate(requests)
            expected = serial.generate(requests)
        finally:
            concurrent.close()
            serial.close()
    assert all(e.ok and e.completion_tokens == 12 for e in expected)
    assert concurrent.retries_made >= 1  # the server did cut streams short
    for got, want in zip(out, expected, strict=True):
        if got.ok:
            assert got.text == want.text
        else:
            assert "without a finish reason" in (got.error or "")


def test_openai_connection_refused_is_an_error_completion() -> None:
    from precompute.backends.openai_engine import OpenAIEngine

    engine = OpenAIEngine(
        "m", base_url=f"http://127.0.0.1:{_free_port()}/v1", max_retries=1, backoff=0.01, timeout=2
    )
    try:
        [completion] = engine.generate([chat("x", "hi", max_tokens=2)])
    finally:
        engine.close()
    assert completion.finish_reason == "error"
    assert "gave up after 2 attempts" in (completion.error or "")
    assert "ConnectError" in (completion.error or "")


@pytest.mark.slow
def test_gguf_converts_to_a_loadable_hf_folder(gguf: Path, tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from precompute.models import gguf_to_hf_folder

    folder = gguf_to_hf_folder(gguf, tmp_path / "smollm2")
    assert (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))
    assert not (tmp_path / "smollm2.partial").exists()
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(134.5e6, rel=0.02)
    ids = tokenizer("The capital of France is", return_tensors="pt")
    with torch.inference_mode():
        logits = model(**ids).logits
    assert torch.isfinite(logits).all()
    # A second call finds the finished folder and returns it without reading any GGUF (a
    # missing one would raise FileNotFoundError) or writing a file.
    written = {p: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert gguf_to_hf_folder(tmp_path / "absent.gguf", folder) == folder
    assert {p: p.stat().st_mtime_ns for p in folder.iterdir()} == written
