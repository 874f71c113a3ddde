"""A Hugging Face Hub on 127.0.0.1: serves local model folders the way the Hub serves files.

Point ``HF_ENDPOINT`` at :attr:`LoopbackHub.url` and ``huggingface_hub`` (so transformers,
sentence-transformers, vLLM) downloads from it as from huggingface.co. What it speaks, in the
Hub's own terms:

- ``HEAD``/``GET /{repo}/resolve/{revision}/{path}``: the file, with the headers the client
  reads for its cache: ``X-Repo-Commit`` (the snapshot folder), ``ETag`` (the blob name; the
  file's SHA-256, as the Hub gives LFS files) and ``Content-Length`` (checked after download);
- ``GET /api/models/{repo}`` and ``…/revision/{revision}``: the repository's info (its commit
  and file list); ``GET /api/models/{repo}/tree/{revision}[/path]``: a folder listing;
- a missing file answers 404 with ``X-Error-Code: EntryNotFound``, an unknown repository 404
  with ``RepoNotFound``, as the Hub does, so the client tells them apart.

Every request is kept in :attr:`LoopbackHub.requests`, so a test can tell what was fetched.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

#: The commit every repository is at (40 hex digits, like a git commit id).
COMMIT = hashlib.sha1(b"legival loopback hub").hexdigest()


class LoopbackHub:
    """The server's state: ``repos`` maps a repo id (``org/name``) to its folder."""

    def __init__(self, repos: dict[str, Path]) -> None:
        self.repos = {name: Path(folder) for name, folder in repos.items()}
        self.requests: list[tuple[str, str]] = []
        self._digests: dict[Path, str] = {}
        self._lock = threading.Lock()
        self.url = ""

    def digest(self, path: Path) -> str:
        """SHA-256 of a served file (computed once)."""
        with self._lock:
            if path not in self._digests:
                sha = hashlib.sha256()
                with path.open("rb") as handle:
                    for block in iter(lambda: handle.read(1 << 20), b""):
                        sha.update(block)
                self._digests[path] = sha.hexdigest()
            return self._digests[path]

    def files(self, repo: str) -> list[str]:
        """The repository's file paths, relative, with forward slashes."""
        root = self.repos[repo]
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())

    def fetched(self) -> list[str]:
        """The paths of every ``GET`` of a file (``/{repo}/resolve/…``), in order."""
        return [path for method, path in self.requests if method == "GET" and "/resolve/" in path]


def _handler(hub: LoopbackHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            del format, args  # quiet: the requests are kept in hub.requests instead

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _answer(self, *, body: bool) -> None:
            path = unquote(urlparse(self.path).path)
            hub.requests.append((self.command, path))
            parts = [p for p in path.split("/") if p]
            if parts[:2] == ["api", "models"]:
                self._api(parts[2:])
            elif len(parts) >= 5 and parts[2] == "resolve":
                self._resolve("/".join(parts[:2]), "/".join(parts[4:]), body=body)
            else:
                self._error(404, "RepoNotFound", f"no route {path}")

        def _resolve(self, repo: str, name: str, *, body: bool) -> None:
            if repo not in hub.repos:
                self._error(404, "RepoNotFound", f"Repository {repo} not found")
                return
            file = hub.repos[repo] / name
            if not file.is_file():
                self._error(404, "EntryNotFound", f"{name} does not exist in {repo}")
                return
            size = file.stat().st_size
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.send_header("ETag", f'"{hub.digest(file)}"')
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("Accept-Ranges", "none")
            self.end_headers()
            if body:
                with file.open("rb") as handle:
                    for block in iter(lambda: handle.read(1 << 20), b""):
                        self.wfile.write(block)

        def _api(self, parts: list[str]) -> None:
            repo = "/".join(parts[:2])
            if repo not in hub.repos:
                self._error(404, "RepoNotFound", f"Repository {repo} not found")
                return
            rest = parts[2:]
            if not rest or rest[0] == "revision":
                files = hub.files(repo)
                info = {
                    "id": repo,
                    "modelId": repo,
                    "sha": COMMIT,
                    "private": False,
                    "gated": False,
                    "disabled": False,
                    "tags": [],
                    "siblings": [{"rfilename": name} for name in files],
                }
                self._json(info)
            elif rest[0] == "tree":
                folder = "/".join(rest[2:])
                inside = [n for n in hub.files(repo) if not folder or n.startswith(folder + "/")]
                if folder and not inside:
                    self._error(404, "EntryNotFound", f"{folder} does not exist in {repo}")
                    return
                root = hub.repos[repo]
                self._json(
                    [
                        {
                            "type": "file",
                            "path": name,
                            "size": (root / name).stat().st_size,
                            "oid": hub.digest(root / name),
                        }
                        for name in inside
                    ]
                )
            else:
                self._error(404, "EntryNotFound", f"no API route {'/'.join(rest)}")

        def _json(self, payload: object) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Repo-Commit", COMMIT)
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(data)

        def _error(self, status: int, code: str, message: str) -> None:
            data = json.dumps({"error": message}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(data)

    return Handler


@contextmanager
def loopback_hub(repos: dict[str, Path]) -> Iterator[LoopbackHub]:
    """Serve ``repos`` on 127.0.0.1 (a free port) for the length of the block."""
    hub = LoopbackHub(repos)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    server.daemon_threads = True
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
