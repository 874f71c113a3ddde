"""The quarantine file of a results store, ``quarantine.jsonl``: the input rows an ingest
rejected, one JSON object a line, each naming its file, line and reason.

It is appended to under the store's lock; a re-ingest replaces the entries it supersedes, and
an entry whose trace has since been ingested goes (see
:meth:`Store.add_quarantine <legival_core.store.store.Store.add_quarantine>`). Not to be
confused with :meth:`Store.quarantine_part <legival_core.store.store.Store.quarantine_part>`,
which moves a damaged file of the store aside.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from legival_core.store.file_safety import fsync_dir, open_plain, temp_name

__all__ = ["add_entries"]


def add_entries(
    path: Path,
    entries: Sequence[Mapping[str, Any]],
    *,
    replacing: Mapping[str, Any] | None = None,
    resolved: Collection[str] = (),
) -> None:
    """Add ``entries`` to the quarantine file ``path`` (the caller holds the store's lock), as
    :meth:`Store.add_quarantine <legival_core.store.store.Store.add_quarantine>` describes."""
    lines = [_quarantine_line(e) for e in entries]
    resolved = set(resolved)
    superseded = _superseded(path, replacing) if replacing else []
    fixed = _any_resolved(path, resolved) if resolved else False
    if superseded or fixed:
        same = [_timeless(e) for e in superseded] == [_timeless(json.loads(line)) for line in lines]
        if same and not fixed:
            return  # the same entries again: the file stays as it is
        _rewrite(path, replacing or {}, lines, resolved)
        return
    # Created even when empty (ingest ran here); never through a link or into a FIFO.
    fd = open_plain(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    with os.fdopen(fd, "r+b") as handle:
        size = os.fstat(fd).st_size
        # A writer killed mid-line left a partial last line: start on a fresh line.
        needs_newline = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        handle.write((b"\n" if needs_newline else b"") + data)
        handle.flush()
        os.fsync(fd)


def _entries(
    path: Path, only: Mapping[str, Any] | None = None
) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """Each line of the quarantine file with its JSON object (None when it is not one).

    With ``only``, lines that cannot match it (a text value absent from the line) are
    given without parsing them: a re-ingest scans a large file in a fraction of the time.
    """
    needles = [_quarantine_line(v) for v in (only or {}).values() if isinstance(v, str)]
    if not os.path.lexists(path):
        return
    fd = open_plain(path, os.O_RDONLY)
    with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            text = line.rstrip("\n")
            if not text.strip():
                continue
            if not all(needle in text for needle in needles):
                yield text, None
                continue
            try:
                entry = json.loads(text)
            except ValueError:
                yield text, None
                continue
            yield text, entry if isinstance(entry, dict) else None


def _superseded(path: Path, replacing: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        entry
        for _, entry in _entries(path, replacing)
        if entry is not None and _matches(entry, replacing)
    ]


def _any_resolved(path: Path, resolved: Collection[str]) -> bool:
    """Whether an entry of the quarantine file names one of the ``resolved`` trace ids."""
    # Filtered on the text "trace_id": the lines without the key are not even parsed.
    lines = _entries(path, {"key": "trace_id"})
    return any(_names_trace(text, resolved) for text, _ in lines)


def _rewrite(
    path: Path, replacing: Mapping[str, Any], lines: Sequence[str], resolved: Collection[str] = ()
) -> None:
    """Copy the quarantine file without the superseded and the resolved entries, add
    ``lines``, replace it atomically (the caller holds the lock)."""
    temp = path.parent / temp_name(".jsonl")
    try:
        with open(temp, "w", encoding="utf-8") as out:
            for text, entry in _entries(path, replacing):
                if entry is not None and _matches(entry, replacing):
                    continue
                if resolved and _names_trace(text, resolved):
                    continue
                out.write(text + "\n")
            out.write("".join(line + "\n" for line in lines))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _timeless(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A quarantine entry without its time stamp (two ingests of one file compare equal)."""
    return {k: v for k, v in entry.items() if k != "time"}


def _quarantine_line(value: Any) -> str:
    """One JSON line (no newline). A lone surrogate becomes a ``\\udXXX`` escape, which keeps
    the line valid UTF-8 and valid JSON."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _matches(entry: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    return all(entry.get(k) == v for k, v in fields.items())


def _names_trace(text: str, trace_ids: Collection[str]) -> bool:
    """Whether the quarantine line ``text`` is an entry whose ``trace_id`` is in ``trace_ids``
    (parsed only when it holds the key at all: most lines of a large file do not).

    >>> _names_trace('{"line": 2, "trace_id": "t-1"}', {"t-1"})
    True
    >>> _names_trace('{"line": 2}', {"t-1"}), _names_trace('{"trace_id": "t-2"}', {"t-1"})
    (False, False)
    """
    if '"trace_id"' not in text:
        return False
    try:
        entry = json.loads(text)
    except ValueError:
        return False
    return isinstance(entry, dict) and entry.get("trace_id") in trace_ids
