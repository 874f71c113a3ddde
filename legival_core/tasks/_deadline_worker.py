"""Child side of :mod:`legival_core.tasks.deadline`: a loop that runs calls sent on stdin.

Messages are length-prefixed pickles written by the parent in this same package:
``("import", [module, ...])`` imports modules ahead of a timed call, ``("call", module,
qualname, args)`` runs one function. Replies are ``("ok", value)`` or ``("error", "Type: msg")``.
The loop ends when stdin closes, so a worker never outlives its parent for long.
"""

from __future__ import annotations

import importlib
import os
import pickle
import struct
import sys
from typing import Any, BinaryIO

_HEADER = struct.Struct("<Q")


def _read_message(stream: BinaryIO) -> Any | None:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    body = stream.read(size)
    if len(body) < size:
        return None
    return pickle.loads(body)


def _write_message(stream: BinaryIO, message: tuple[Any, ...]) -> None:
    try:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as error:  # an unpicklable result is reported, not fatal
        payload = pickle.dumps(("error", f"{type(error).__name__}: {error}"))
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def _resolve(module: str, qualname: str) -> Any:
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def _handle(message: tuple[Any, ...]) -> tuple[Any, ...]:
    kind = message[0]
    try:
        if kind == "import":
            for module in message[1]:
                importlib.import_module(module)
            return ("ok", None)
        _, module, qualname, args = message
        return ("ok", _resolve(module, qualname)(*args))
    except Exception as error:  # the parent records it as the grade's status
        return ("error", f"{type(error).__name__}: {error}")


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Answer requests until ``stdin`` reaches end of file."""
    _write_message(stdout, ("ready", None))
    while (message := _read_message(stdin)) is not None:
        _write_message(stdout, _handle(message))


if __name__ == "__main__":
    # Keep the protocol channel clean: the replies go to a private copy of fd 1, and fd 1
    # itself (Python prints and C-level writes alike) is pointed at stderr.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, protocol_out)
