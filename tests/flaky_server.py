"""A deliberately unreliable OpenAI-compatible server for tests, on 127.0.0.1 only.

It speaks ``POST /v1/chat/completions`` and ``POST /v1/completions`` (plain JSON, or
server-sent events when the body asks for ``"stream": true``) and answers each request with a
canned completion that depends only on the request body, so a retried request gets the same
text. Before answering it may fail, following a seeded schedule:

=============  ===========================================================================
fault          what the client sees
=============  ===========================================================================
``429``        HTTP 429 with a ``Retry-After`` header
``500``        HTTP 500 with a JSON error body
``timeout``    nothing until the client's read timeout has passed (the server sleeps)
``drop``       the connection closes mid-response (headers promise more bytes than come)
``malformed``  HTTP 200 with a body that is not JSON
=============  ===========================================================================

The schedule is per request body: :meth:`FaultSchedule.faults_before_success` draws, from the
seed and a hash of the body, how many attempts of that request fail (0 for most) and which fault
each one gets. Attempts are counted across the server's life, so a client that gave up can
rerun and will eventually be served. Every attempt is logged (:attr:`FlakyServer.log`).

Only the standard library is used; the server binds 127.0.0.1 and refuses other addresses.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FAULTS", "Attempt", "FaultSchedule", "FlakyServer", "canned_text"]

FAULTS = ("429", "500", "timeout", "drop", "malformed")
LOOPBACK = "127.0.0.1"


def body_key(body: dict[str, Any]) -> str:
    """Stable fingerprint of a request body (what the schedule and the canned text key on)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def canned_text(body: dict[str, Any]) -> str:
    """The completion the server gives for ``body``: short, deterministic, with an answer."""
    key = body_key({k: v for k, v in body.items() if k != "stream"})
    number = int(key[:4], 16) % 97
    return f"Reply {key}. Adding the parts step by step gives {number}. \\boxed{{{number}}}"


@dataclass(frozen=True)
class FaultSchedule:
    """Which attempts of which request fail, drawn from ``seed``.

    Args:
        seed: the schedule's seed.
        fault_rate: share of requests whose first attempts fail.
        max_faults: at most this many failing attempts per request (a client with more
            retries than this always gets through within one run).
        faults: the fault kinds to draw from.
    """

    seed: int = 0
    fault_rate: float = 0.5
    max_faults: int = 3
    faults: tuple[str, ...] = FAULTS

    def faults_before_success(self, key: str) -> list[str]:
        rng = random.Random(f"{self.seed}:{key}")
        if rng.random() >= self.fault_rate:
            return []
        count = rng.randint(1, self.max_faults)
        return [rng.choice(self.faults) for _ in range(count)]


@dataclass(frozen=True)
class Attempt:
    """One request as the server saw it."""

    key: str
    number: int  # 0-based attempt of this body
    path: str
    fault: str | None
    time: float
    body: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass
class _State:
    schedule: FaultSchedule
    stall_s: float
    retry_after: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    seen: Counter[str] = field(default_factory=Counter)
    log: list[Attempt] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    server_version = "FlakyServer/1"
    state: _State  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        del format, args

    def do_POST(self) -> None:
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        stream = bool(body.get("stream"))
        key = body_key({k: v for k, v in body.items() if k != "stream"})
        with self.state.lock:
            number = self.state.seen[key]
            self.state.seen[key] += 1
            planned = self.state.schedule.faults_before_success(key)
            fault = planned[number] if number < len(planned) else None
            self.state.log.append(Attempt(key, number, self.path, fault, time.monotonic(), body))
        if fault is not None:
            self._fail(fault)
            return
        text = canned_text(body)
        if stream:
            self._stream(text, chat=self.path.endswith("chat/completions"))
            return
        self._json(200, self._payload(text, body, chat=self.path.endswith("chat/completions")))

    # -- replies ------------------------------------------------------------------------------
    def _payload(self, text: str, body: dict[str, Any], *, chat: bool) -> dict[str, Any]:
        tokens = len(text.split())
        limit = int(body.get("max_tokens") or 10**6)
        finish = "length" if tokens > limit else "stop"
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        prompt = json.dumps(body.get("messages") or body.get("prompt") or "")
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": tokens}
        return {"id": "flaky", "object": "completion", "choices": [choice], "usage": usage}

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, text: str, *, chat: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for word in text.split(" "):
            piece = word + " "
            delta = {"delta": {"content": piece}} if chat else {"text": piece}
            event = {"choices": [{"index": 0, **delta, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        done = {"choices": [{"index": 0, "finish_reason": "stop", **(
            {"delta": {}} if chat else {"text": ""})}]}  # fmt: skip
        self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())

    def _fail(self, fault: str) -> None:
        if fault == "429":
            self._json(429, {"error": {"message": "rate limited"}},
                       {"Retry-After": self.state.retry_after})  # fmt: skip
        elif fault == "500":
            self._json(500, {"error": {"message": "internal error (injected)"}})
        elif fault == "timeout":
            time.sleep(self.state.stall_s)  # past the client's timeout; it has hung up
            with contextlib.suppress(OSError):
                self._json(504, {"error": {"message": "too late"}})
        elif fault == "drop":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "4096")
            self.end_headers()
            self.wfile.write(b'{"choices": [{"text": "cut off he')
            self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        elif fault == "malformed":
            data = b'{"choices": [{"text": "unterminated'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:  # pragma: no cover - FAULTS is closed
            raise ValueError(fault)


class FlakyServer:
    """Run the unreliable server in a background thread; use as a context manager.

    Args:
        schedule: which attempts fail (default: half the requests, up to 3 faults each).
        stall_s: how long a ``timeout`` fault keeps the client waiting; set it above the
            client's timeout.
        retry_after: the ``Retry-After`` value sent with 429 (seconds, as text).
    """

    def __init__(
        self,
        schedule: FaultSchedule | None = None,
        *,
        stall_s: float = 1.0,
        retry_after: str = "0",
        host: str = LOOPBACK,
    ) -> None:
        if host != LOOPBACK:
            raise ValueError("the flaky test server binds 127.0.0.1 only")
        self.state = _State(schedule or FaultSchedule(), stall_s, retry_after)
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.httpd = ThreadingHTTPServer((host, 0), handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """Base URL including ``/v1``."""
        host, port = self.address
        return f"http://{host}:{port}/v1"

    @property
    def log(self) -> list[Attempt]:
        with self.state.lock:
            return list(self.state.log)

    def fault_counts(self) -> Counter[str]:
        return Counter(a.fault or "ok" for a in self.log)

    def __enter__(self) -> FlakyServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=10)
