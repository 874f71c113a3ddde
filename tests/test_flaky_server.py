"""The OpenAI-compatible engine against a server that fails on purpose (``tests/flaky_server.py``).

The server runs on 127.0.0.1 in this process and injects, by a seeded schedule, HTTP 429 with
Retry-After, HTTP 500, stalls past the client's timeout, connections dropped mid-response and
malformed JSON. Checked here:

* retries are bounded: no request is tried more than ``max_retries + 1`` times in one run;
* backoff grows, has jitter and is capped; a 429's Retry-After is respected (up to the cap);
* a request that still fails is recorded as an error completion for that request only, and a
  rerun retries it: in the end every request has exactly its canned answer (nothing lost);
* the same through the ``generate`` stage and the store: failed traces are left out, logged, and
  filled in by the next run, with no duplicate keys.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from legival_core.store.schema import trace_id_for
from legival_core.store.store import Store
from precompute.backends import GenerationRequest
from precompute.backends import openai_engine as engine_module
from precompute.backends.openai_engine import OpenAIEngine
from precompute.config import ExperimentConfig
from precompute.stages import StageContext, run_stage
from tests.flaky_server import FAULTS, FaultSchedule, FlakyServer, canned_text

CLIENT_TIMEOUT_S = 0.4
STALL_S = 0.9  # a "timeout" fault answers only after the client gave up


class _SleepRecorder:
    """Stands in for the ``time`` module inside the engine only: records each backoff sleep
    (and still sleeps it); everything else is the real ``time``."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        time.sleep(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    recorder = _SleepRecorder()
    monkeypatch.setattr(engine_module, "time", recorder)
    return recorder.slept


def _requests(n: int) -> list[GenerationRequest]:
    return [
        GenerationRequest(
            f"q{i}",
            [{"role": "user", "content": f"Question {i}: what is {i} + {i}?"}],
            max_tokens=64,
        )
        for i in range(n)
    ]


def _attempts_by_prompt(server: FlakyServer) -> dict[str, list[Any]]:
    by_key: dict[str, list[Any]] = {}
    for attempt in server.log:
        by_key.setdefault(attempt.key, []).append(attempt)
    return by_key


def test_server_listens_on_loopback_only() -> None:
    with pytest.raises(ValueError, match=r"127\.0\.0\.1"):
        FlakyServer(host="0.0.0.0")
    with FlakyServer() as server:
        assert server.address[0] == "127.0.0.1"
        assert server.url.startswith("http://127.0.0.1:")


def test_engine_retries_are_bounded_and_a_rerun_loses_nothing(sleeps: list[float]) -> None:
    max_retries = 2
    schedule = FaultSchedule(seed=20, fault_rate=0.6, max_faults=4)
    requests = _requests(36)
    with FlakyServer(schedule, stall_s=STALL_S) as server:
        engine = OpenAIEngine(
            "canned-model", base_url=server.url, dialect="openai", concurrency=6,
            timeout=CLIENT_TIMEOUT_S, max_retries=max_retries, backoff=0.01, max_backoff=0.08,
        )  # fmt: skip
        try:
            first = engine.generate(requests)
            first_log = _attempts_by_prompt(server)
            failed = [r for r, c in zip(requests, first, strict=True) if not c.ok]
            second = engine.generate(failed)
        finally:
            engine.close()
        counts = server.fault_counts()

    # every fault kind was injected; what bounds the exercise is the attempts counted below
    assert set(FAULTS) <= set(counts), counts

    # one attempt log per request body; first-run attempts never exceed max_retries + 1
    assert len(first_log) == len(requests)
    expected_failures = 0
    for attempts in first_log.values():
        planned = schedule.faults_before_success(attempts[0].key)
        assert len(attempts) == min(len(planned), max_retries) + 1
        expected_failures += len(planned) > max_retries
    assert 0 < len(failed) == expected_failures

    # a failure is recorded per request: the others still carry their answers
    for request, completion in zip(requests, first, strict=True):
        if completion.ok:
            assert completion.text.startswith("Reply ")
        else:
            assert completion.finish_reason == "error"
            assert f"gave up after {max_retries + 1} attempts" in (completion.error or "")
            assert completion.key == request.key

    # the rerun gets the rest; together every request has its canned answer exactly once
    assert all(c.ok for c in second)
    answers = {c.key: c.text for c in first if c.ok} | {c.key: c.text for c in second}
    assert sorted(answers) == sorted(r.key for r in requests)
    body_of = {a.body["messages"][-1]["content"]: a.body for a in server.log}
    for request in requests:
        assert answers[request.key] == canned_text(body_of[request.messages[-1]["content"]])

    # backoff: bounded by the cap (times the jitter's 1.5), never below half the first delay,
    # and jittered (the same base delay gives different sleeps)
    assert sleeps, "no retry slept"
    assert all(0.005 <= s < 0.08 * 1.5 for s in sleeps), sleeps
    assert len({round(s, 6) for s in sleeps}) > len(sleeps) // 2


def test_retry_after_of_a_429_is_respected(sleeps: list[float]) -> None:
    schedule = FaultSchedule(seed=1, fault_rate=1.0, max_faults=1, faults=("429",))
    with FlakyServer(schedule, retry_after="1") as server:
        engine = OpenAIEngine(
            "canned-model", base_url=server.url, dialect="openai",
            timeout=5.0, max_retries=3, backoff=0.01, max_backoff=5.0,
        )  # fmt: skip
        try:
            [completion] = engine.generate(_requests(1))
        finally:
            engine.close()
        attempts = server.log
    assert completion.ok
    assert [a.fault for a in attempts] == ["429", None]
    assert len(sleeps) == 1 and sleeps[0] >= 1.0  # the server asked for 1 s; backoff was 0.01
    assert attempts[1].time - attempts[0].time >= 1.0


@pytest.mark.slow
def test_generate_stage_records_failures_and_fills_them_on_rerun(tmp_path: Path) -> None:
    """Through the stage and the store: run 1 leaves out the traces whose requests failed,
    run 2 fills exactly those in; nothing is duplicated or lost."""
    problems = [
        {"problem_id": f"flaky/p{i}", "dataset": "flaky", "task": "math",
         "prompt": f"What is {i} + {i}?", "gold": str(2 * i)}
        for i in range(16)
    ]  # fmt: skip
    schedule = FaultSchedule(seed=5, fault_rate=0.7, max_faults=3)
    with FlakyServer(schedule, stall_s=STALL_S) as server:
        config = ExperimentConfig.from_dict(
            {
                "teachers": [
                    {
                        "name": "flaky-teacher", "engine": "openai", "model": "canned-model",
                        "max_tokens": 64, "samples": 2, "temperature": 0.7,
                        "options": {"base_url": server.url, "dialect": "openai",
                                    "timeout": CLIENT_TIMEOUT_S, "max_retries": 1,
                                    "backoff": 0.01, "max_backoff": 0.05, "concurrency": 4},
                    }
                ],
                "generate": {"batch_size": 8},
            },
            source="flaky-test",
        )  # fmt: skip
        store = Store.create(tmp_path / "store")
        store.write("problems", problems, stage="test")
        wanted = {trace_id_for("flaky-teacher", p["problem_id"], s) for p in problems
                  for s in range(2)}  # fmt: skip

        first = _generate(store, config)
        after_first = set(store.read("traces")["trace_id"])
        second = _generate(store, config)
        after_second = set(store.read("traces")["trace_id"])
        third = _generate(store, config)
        counts = server.fault_counts()

    assert sum(counts[f] for f in FAULTS) > 0
    missing = wanted - after_first
    assert missing, "the schedule should make some requests fail in the first run"
    assert after_first < wanted
    assert first.written["traces"] == len(after_first)
    assert any("failed in the engine" in note for note in first.notes)
    # The rerun asked only for what was missing, and got all of it: a request fails at most
    # 3 times (max_faults) and two runs give it 2 x (max_retries + 1) = 4 attempts.
    assert second.skipped == len(after_first)
    assert second.written["traces"] == len(missing)
    assert after_second == wanted
    assert third.written["traces"] == 0 and third.skipped == len(wanted)
    final = store.read("traces")
    assert not final["trace_id"].duplicated().any()
    assert final["raw"].str.startswith("Reply ").all()
    assert store.verify() == []
    log_text = store.log_path("generate").read_text()
    assert "generation failed for" in log_text


def _generate(store: Store, config: ExperimentConfig) -> Any:
    ctx = StageContext(store=store, config=config, progress=False)
    try:
        return run_stage("generate", ctx)
    finally:
        ctx.engines.close()


def test_fault_schedule_is_seeded() -> None:
    a = FaultSchedule(seed=3)
    b = FaultSchedule(seed=3)
    c = FaultSchedule(seed=4)
    keys = [f"k{i}" for i in range(200)]
    assert [a.faults_before_success(k) for k in keys] == [b.faults_before_success(k) for k in keys]
    assert [a.faults_before_success(k) for k in keys] != [c.faults_before_success(k) for k in keys]
    drawn = Counter(f for k in keys for f in a.faults_before_success(k))
    assert set(drawn) == set(FAULTS)
