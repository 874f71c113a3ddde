"""Where a model's files come from: a local path, the local Hugging Face cache, or the Hub.

A model named by a path (a folder, a ``.gguf`` file, a packaged model) is read from disk and
never looked up on the Hub. A model named by a hub id (``Qwen/Qwen3-8B``) is downloaded into
the Hugging Face cache the first time, unless the user asked for offline mode with
``HF_HUB_OFFLINE=1`` (or ``TRANSFORMERS_OFFLINE=1``); the test suite asks for it in its
``tests/conftest.py``.

The choice goes into each load as ``local_files_only=``. The process environment is never
changed: setting ``HF_HUB_OFFLINE`` from library code would silently turn every later hub
load in the process into an offline one, which is how a user naming a hub model on a node
with a network used to get an offline error instead of a download.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

from precompute.errors import InputMissingError

__all__ = [
    "OFFLINE_VARIABLES",
    "HubModelError",
    "hub_endpoint",
    "hub_unreachable",
    "is_local_model",
    "load_pretrained",
    "local_files_only",
    "offline_requested",
]

#: Environment variables by which a user (or the test suite) asks for no hub access at all.
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_TRUE = {"1", "true", "yes", "on"}
_DEFAULT_ENDPOINT = "https://huggingface.co"

Loaded = TypeVar("Loaded")


class HubModelError(InputMissingError):
    """A model named by a hub id could not be loaded: offline and not cached, the Hub
    unreachable, or no such (or no accessible) repository. The message is one line."""


def offline_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the user asked for offline mode (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``
    set to 1/true/yes/on).

    >>> offline_requested({"HF_HUB_OFFLINE": "1"}), offline_requested({"HF_HUB_OFFLINE": "0"})
    (True, False)
    >>> offline_requested({})
    False
    """
    env = os.environ if environ is None else environ
    return any(env.get(name, "").strip().lower() in _TRUE for name in OFFLINE_VARIABLES)


def is_local_model(model: str | os.PathLike[str]) -> bool:
    """Whether ``model`` names something on disk (a folder or a file) rather than a hub id.

    >>> is_local_model("."), is_local_model("no-such-org/no-such-model")
    (True, False)
    """
    return Path(model).expanduser().exists()


def local_files_only(
    model: str | os.PathLike[str], environ: Mapping[str, str] | None = None
) -> bool:
    """The ``local_files_only=`` to load ``model`` with: True for a path on disk or when
    offline mode was asked for, False (download when not cached) for a hub id otherwise.

    >>> local_files_only(".", {}), local_files_only("Qwen/Qwen3-8B", {})
    (True, False)
    >>> local_files_only("Qwen/Qwen3-8B", {"HF_HUB_OFFLINE": "1"})
    True
    """
    return is_local_model(model) or offline_requested(environ)


def hub_endpoint(environ: Mapping[str, str] | None = None) -> str:
    """The Hub the client talks to: ``$HF_ENDPOINT`` or huggingface.co.

    >>> hub_endpoint({}), hub_endpoint({"HF_ENDPOINT": "http://127.0.0.1:9/"})
    ('https://huggingface.co', 'http://127.0.0.1:9')
    """
    env = os.environ if environ is None else environ
    return (env.get("HF_ENDPOINT") or _DEFAULT_ENDPOINT).rstrip("/")


def hub_unreachable(timeout_s: float = 3.0, environ: Mapping[str, str] | None = None) -> str | None:
    """Why no TCP connection to the Hub opens within ``timeout_s`` (None when one does)."""
    endpoint = urlparse(hub_endpoint(environ))
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as error:
        return f"{host}:{port}: {error.strerror or type(error).__name__}"


def load_pretrained(
    loader: Callable[..., Loaded], model: str, what: str = "model", **options: Any
) -> Loaded:
    """``loader(model, local_files_only=…, **options)``, with a hub failure as one line.

    ``loader`` is a ``from_pretrained`` (``AutoTokenizer.from_pretrained``,
    ``AutoModelForCausalLM.from_pretrained``, …). A path on disk is loaded from disk only and
    its errors pass through unchanged. A hub id is downloaded when not cached (see
    :func:`local_files_only`); when the Hub cannot be reached the cached copy is used at once
    (the hub client would first retry each file for about half a minute). When that fails a
    :class:`HubModelError` says why in one line: offline mode and not cached, the Hub
    unreachable and not cached, or a repository that does not exist or is gated.

    Args:
        loader: the ``from_pretrained`` to call.
        model: a folder, a file, or a hub id.
        what: what is being loaded, for the message (``"tokenizer"``, ``"model"``).
        options: passed to ``loader``.
    """
    if is_local_model(model):
        return loader(model, local_files_only=True, **options)
    offline = offline_requested()
    unreachable = None if offline else hub_unreachable()
    try:
        return loader(model, local_files_only=offline or unreachable is not None, **options)
    except Exception as error:
        if not _hub_failure(error):
            raise
        raise HubModelError(_explain(model, what, error, offline, unreachable)) from None


def _hub_failure(error: BaseException) -> bool:
    """Whether ``error`` is the Hub client (or transformers on its behalf) failing to get a
    file: a missing file, a refused or failed connection, an HTTP error."""
    if isinstance(error, OSError | ValueError):  # transformers wraps hub errors in OSError
        return True
    try:
        from huggingface_hub.errors import HfHubHTTPError
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return False
    return isinstance(error, HfHubHTTPError)


def _explain(
    model: str, what: str, error: BaseException, offline: bool, unreachable: str | None
) -> str:
    detail = " ".join(str(error).split())[:240] or type(error).__name__
    head = f"{what} {model!r}"
    if offline:
        return (
            f"{head} is not in the local Hugging Face cache and offline mode is on "
            f"({_offline_variable()}=1): unset it to download the model, or name a local "
            f"folder ({type(error).__name__}: {detail})"
        )
    if unreachable is not None:
        return (
            f"{head} is not in the local Hugging Face cache and the Hub at {hub_endpoint()} "
            f"cannot be reached ({unreachable}): connect this machine (or set HF_ENDPOINT to a "
            "mirror), or download the model where there is a network and name its folder"
        )
    lowered = detail.lower()
    if any(word in lowered for word in ("401", "403", "gated", "restricted", "authenticat")):
        return (
            f"{head}: the Hub refused access (a gated or private repository): accept its "
            f"terms on the model page and log in (hf auth login, or set HF_TOKEN) ({detail})"
        )
    return f"{head} could not be loaded ({type(error).__name__}: {detail})"


def _offline_variable() -> str:
    return next(
        (name for name in OFFLINE_VARIABLES if offline_requested({name: os.environ.get(name, "")})),
        OFFLINE_VARIABLES[0],
    )
