"""Every field a format adapter reads, given a wrong type, a wrong depth or a wrong encoding
(issue 40): the good records of the file are kept, and the bad one is kept or quarantined
with its file, its line (or row) and the field, never a failed ingest.

One test per adapter. Each builds a file of three records in the tool's own layout, the middle
one changed at one field drawn from the fields the adapter reads: replaced by a value of
another JSON kind, by text holding a lone surrogate, by numbers out of range, by lists and
objects nested 300 or 5,000 levels deep; or its bytes made invalid UTF-8. Examples are few and
seeded (``derandomize``), so each test takes a few seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from legival_core.store.store import Store
from precompute.ingest import FIELDS, ingest

EXAMPLES = 40
_PLACEHOLDER = "__fuzzed_value__"

#: Values as JSON text: every JSON kind, text with a lone surrogate, numbers beyond every
#: column's range, and nesting far past any real record (5,000 levels: Python's JSON parser
#: gives up near 1,000).
_JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
_BAD_VALUES = st.one_of(
    st.recursive(
        _JSON_LEAF,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=6,
    ).map(json.dumps),
    st.sampled_from(
        [
            '"\\ud800"',
            '"a\\udfffb"',
            '["\\ud83d"]',
            '{"text": "\\udc80"}',
            "1e400",
            "-1e400",
            "NaN",
            "-1",
            "2.5",
            str(2**63),
            str(10**12),
            '""',
            "[]",
            "{}",
            "[" * 300 + "]" * 300,
            '{"a":' * 300 + "1" + "}" * 300,
            "[" * 5_000 + "]" * 5_000,
        ]
    ),
)


@dataclass(frozen=True)
class Case:
    """One adapter's record and where its fuzzed copy goes."""

    adapter: str
    #: The good record number ``i`` (0, 1, 2), as the tool writes it.
    good: Callable[[int], dict[str, Any]]
    #: The fields the adapter reads, as paths into the record.
    paths: tuple[tuple[Any, ...], ...]
    #: Writes the three records (JSON texts) where ingest reads them; returns the source.
    write: Callable[[Path, list[Any]], Path]
    #: The problem ids the two good records become in the store.
    kept_ids: tuple[str, str]


def _name(path: tuple[Any, ...]) -> str:
    """A path as the adapters name fields: ``output.choices[0].message``."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


def _with_value(record: dict[str, Any], path: tuple[Any, ...], value: str) -> str:
    """``record`` as JSON text with the value at ``path`` replaced by the JSON text ``value``
    (a placeholder is put there, then swapped for the text, so that texts no Python object
    gives, such as 5,000 levels of brackets, can be written)."""
    copy = json.loads(json.dumps(record))
    node = copy
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = _PLACEHOLDER
    return json.dumps(copy).replace(json.dumps(_PLACEHOLDER), value, 1)


def _bad_encoding(text: str) -> bytes:
    """The record's bytes with one invalid UTF-8 byte inside its first text value."""
    at = text.index('": "') + 4
    return text[:at].encode() + b"\xff" + text[at:].encode()


def _jsonl_writer(name: str) -> Callable[[Path, list[Any]], Path]:
    def write(folder: Path, records: list[Any]) -> Path:
        path = folder / name
        path.write_bytes(
            b"".join((r if isinstance(r, bytes) else r.encode()) + b"\n" for r in records)
        )
        return path

    return write


def _eval_writer(folder: Path, records: list[Any]) -> Path:
    path = folder / "log.eval"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps({"eval": {"model": "m", "task": "t"}}))
        for number, record in enumerate(records, start=1):
            archive.writestr(f"samples/{number}_epoch_1.json", record)
    return path


_TA_FILES = ("problem.json", "base_solution.json", "chunks_labeled.json")


def _folder_writer(folder: Path, records: list[Any]) -> Path:
    """Thought Anchors: each record is one problem folder, given as its three files' texts
    (:func:`_files`)."""
    root = folder / "rollouts"
    for number, files in enumerate(records, start=1):
        problem = root / "model-x" / "temperature_0.6_top_p_0.95" / f"problem_{number}"
        problem.mkdir(parents=True)
        for file, text in files.items():
            (problem / file).write_bytes(text if isinstance(text, bytes) else text.encode())
    return root


def _files(
    record: dict[str, Any], path: tuple[Any, ...] | None, value: str | None
) -> dict[str, Any]:
    """A Thought Anchors record's three files as texts, the one ``path`` starts with changed
    (the whole file when ``path`` names only the file)."""
    texts: dict[str, Any] = {}
    for file in _TA_FILES:
        if path is None or path[0] != file:
            texts[file] = json.dumps(record[file])
        elif len(path) == 1:
            texts[file] = value
        else:
            texts[file] = _with_value(record[file], path[1:], value or "")
    return texts


def _lm_eval(i: int) -> dict[str, Any]:
    return {
        "doc_id": i,
        "doc": {"question": f"What is {i} + 1?"},
        "target": str(i + 1),
        "arguments": {"gen_args_0": {"arg_0": "Q", "arg_1": {}}},
        "resps": [[f"Add one.</think>{i + 1}"]],
        "filtered_resps": [str(i + 1)],
        "filter": "none",
        "metrics": ["exact_match"],
        "exact_match": 1.0,
    }


def _openai(i: int) -> dict[str, Any]:
    choice = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"content": f"{i}</think>{i}", "reasoning": f"It is {i}."},
    }
    return {
        "problem_id": f"p{i}",
        "prompt": f"Say {i}.",
        "gold": str(i),
        "response": {"model": "m", "choices": [choice], "usage": {"completion_tokens": 4}},
    }


def _openai_batch(i: int) -> dict[str, Any]:
    body = {
        "model": "m",
        "usage": {"completion_tokens": 4},
        "choices": [{"index": 0, "message": {"content": f"Say {i}.</think>{i}"}}],
    }
    return {
        "custom_id": f"p{i}",
        "error": None,
        "body": {"messages": [{"role": "user", "content": f"Say {i}."}]},
        "response": {"status_code": 200, "body": body},
    }


def _openr1(i: int) -> dict[str, Any]:
    return {
        "uuid": f"u{i}",
        "problem": f"What is {i}?",
        "answer": str(i),
        "generations": [f"<think>It is {i}.</think>{i}"],
        "correctness_math_verify": [True],
        "finish_reasons": ["stop"],
    }


def _sharegpt(i: int) -> dict[str, Any]:
    return {
        "id": f"c{i}",
        "answer": str(i),
        "conversations": [
            {"from": "human", "value": f"What is {i}?"},
            {"from": "gpt", "value": f"<think>It is {i}.</think>{i}"},
        ],
    }


def _inspect(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "epoch": 1,
        "input": [{"role": "user", "content": f"What is {i}?"}],
        "target": [str(i)],
        "output": {
            "model": "m",
            "usage": {"output_tokens": 5},
            "choices": [
                {
                    "stop_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {"type": "reasoning", "reasoning": "attachment://a"},
                            {"type": "text", "text": str(i)},
                        ],
                    },
                }
            ],
        },
        "scores": {"match": {"value": "C", "answer": str(i)}},
        "attachments": {"a": f"It is {i}."},
    }


def _thought_anchors(i: int) -> dict[str, Any]:
    return {
        "problem.json": {"problem": f"What is {i}?", "gt_answer": str(i)},
        "base_solution.json": {
            "solution": f"It is {i}. Sure.</think>{i}",
            "answer": str(i),
            "is_correct": True,
        },
        "chunks_labeled.json": [
            {
                "chunk": f"It is {i}.",
                "chunk_idx": 0,
                "function_tags": ["result"],
                "counterfactual_importance_accuracy": 0.5,
                "accuracy": 1.0,
            },
            {"chunk": "Sure.", "chunk_idx": 1},
        ],
    }


CASES = {
    "lm-eval": Case(
        "lm-eval",
        _lm_eval,
        (
            ("doc_id",),
            ("doc",),
            ("doc", "question"),
            ("target",),
            ("arguments",),
            ("arguments", "gen_args_0"),
            ("arguments", "gen_args_0", "arg_0"),
            ("resps",),
            ("resps", 0),
            ("resps", 0, 0),
            ("filtered_resps",),
            ("metrics",),
            ("metrics", 0),
            ("exact_match",),
        ),
        _jsonl_writer("samples_fz_2026-01-01T00-00-00.jsonl"),
        ("fz/0", "fz/2"),
    ),
    "openai": Case(
        "openai",
        _openai,
        (
            ("problem_id",),
            ("prompt",),
            ("gold",),
            ("response",),
            ("response", "model"),
            ("response", "choices"),
            ("response", "choices", 0),
            ("response", "choices", 0, "index"),
            ("response", "choices", 0, "message"),
            ("response", "choices", 0, "message", "content"),
            ("response", "choices", 0, "message", "reasoning"),
            ("response", "choices", 0, "finish_reason"),
            ("response", "usage"),
            ("response", "usage", "completion_tokens"),
        ),
        _jsonl_writer("replies.jsonl"),
        ("replies/p0", "replies/p2"),
    ),
    "openai-batch": Case(
        "openai",
        _openai_batch,
        (
            ("custom_id",),
            ("error",),
            ("body",),
            ("body", "messages"),
            ("body", "messages", 0),
            ("body", "messages", 0, "content"),
            ("response",),
            ("response", "status_code"),
            ("response", "body"),
            ("response", "body", "choices"),
            ("response", "body", "choices", 0, "message", "content"),
            ("response", "body", "usage"),
        ),
        _jsonl_writer("batch.jsonl"),
        ("batch/p0", "batch/p2"),
    ),
    "openr1": Case(
        "openr1",
        _openr1,
        (
            ("uuid",),
            ("problem",),
            ("answer",),
            ("generations",),
            ("generations", 0),
            ("correctness_math_verify",),
            ("correctness_math_verify", 0),
            ("finish_reasons",),
        ),
        _jsonl_writer("r1.jsonl"),
        ("r1/u0", "r1/u2"),
    ),
    "sharegpt": Case(
        "sharegpt",
        _sharegpt,
        (
            ("id",),
            ("answer",),
            ("conversations",),
            ("conversations", 0),
            ("conversations", 0, "from"),
            ("conversations", 0, "value"),
            ("conversations", 1, "value"),
        ),
        _jsonl_writer("chats.jsonl"),
        ("chats/c0", "chats/c2"),
    ),
    "inspect": Case(
        "inspect",
        _inspect,
        (
            ("id",),
            ("epoch",),
            ("input",),
            ("input", 0, "content"),
            ("target",),
            ("output",),
            ("output", "choices"),
            ("output", "choices", 0),
            ("output", "choices", 0, "message"),
            ("output", "choices", 0, "message", "content"),
            ("output", "choices", 0, "message", "content", 0, "reasoning"),
            ("output", "choices", 0, "stop_reason"),
            ("output", "usage"),
            ("output", "usage", "output_tokens"),
            ("output", "model"),
            ("scores",),
            ("scores", "match"),
            ("scores", "match", "value"),
            ("scores", "match", "answer"),
            ("attachments",),
            ("attachments", "a"),
        ),
        _eval_writer,
        ("t/0", "t/2"),
    ),
    "thought-anchors": Case(
        "thought-anchors",
        _thought_anchors,
        (
            ("problem.json",),
            ("problem.json", "problem"),
            ("problem.json", "gt_answer"),
            ("base_solution.json",),
            ("base_solution.json", "solution"),
            ("base_solution.json", "answer"),
            ("base_solution.json", "is_correct"),
            ("chunks_labeled.json",),
            ("chunks_labeled.json", 0),
            ("chunks_labeled.json", 0, "chunk"),
            ("chunks_labeled.json", 0, "chunk_idx"),
            ("chunks_labeled.json", 0, "function_tags"),
            ("chunks_labeled.json", 0, "counterfactual_importance_accuracy"),
        ),
        _folder_writer,
        ("rollouts/problem_1", "rollouts/problem_3"),
    ),
}


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """Stores on tmpfs where there is one (fsync on a disk would dominate the time)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    folder = Path(tempfile.mkdtemp(prefix="legival-adapter-fuzz-", dir=base))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _fuzz(case: Case, scratch: Path) -> int:
    tried = 0

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(path=st.sampled_from(case.paths), value=_BAD_VALUES, encoding=st.integers(0, 9))
    def check(path: tuple[Any, ...], value: str, encoding: int) -> None:
        nonlocal tried
        tried += 1
        folder = Path(tempfile.mkdtemp(dir=scratch))
        folders = case.adapter == "thought-anchors"
        good = [
            _files(case.good(i), None, None) if folders else json.dumps(case.good(i))
            for i in (0, 2)
        ]
        wrong_encoding = encoding == 0  # one example in ten: invalid UTF-8 instead
        if folders:
            bad: Any = _files(case.good(1), None if wrong_encoding else path, value)
            if wrong_encoding:
                bad["problem.json"] = _bad_encoding(bad["problem.json"])
        elif wrong_encoding:
            bad = _bad_encoding(json.dumps(case.good(1)))
        else:
            bad = _with_value(case.good(1), path, value)
        source = case.write(folder, [good[0], bad, good[1]])
        file_key = str(source.resolve())
        report = ingest(
            source,
            folder / "store",
            "fuzz-teacher",
            file_format=case.adapter,
            dataset="fz" if case.adapter == "lm-eval" else None,
        )
        # The two good records are kept, whatever the middle one held.
        store = Store.open(folder / "store")
        kept = set(store.read("traces")["problem_id"]) if store.has("traces") else set()
        assert set(case.kept_ids) <= kept, (report.summary(), _name(path), value[:80])
        assert report.kept + len(report.quarantined) == report.rows_read
        for entry in report.quarantined:
            # Only the middle record can be bad: line 2 of a file, or its second record.
            where = entry.line if entry.line is not None else entry.row
            assert where == 2, (entry, _name(path))
            assert entry.file == file_key
            assert "\n" not in entry.reason and entry.reason.strip()
            assert not entry.reason.startswith("unexpected"), (entry, _name(path), value[:80])
            if wrong_encoding:
                # The field is the top-level key (or file) whose text holds the bad byte.
                assert "UTF-8" in entry.reason or "utf-8" in entry.reason, entry
                assert entry.field is not None, entry
                continue
            # The field named is the one changed, a field inside it, or the ingest field it
            # feeds; a record refused whole for its depth names the top-level key.
            fuzzed = _name(path)
            named = entry.field or ""
            related = (
                named.startswith(fuzzed)
                or fuzzed.startswith(named)
                or named in FIELDS
                or named.split(".")[0].split("[")[0] == fuzzed.split(".")[0].split("[")[0]
            )
            assert entry.field is not None and related, (entry, fuzzed, value[:80])
        # Whatever was kept fits the store: the tables written read back.
        for table in ("traces", "grades", "tool_grades", "chunk_importance"):
            if store.has(table):
                store.read(table)
        shutil.rmtree(folder, ignore_errors=True)

    check()
    return tried


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_adapter_fuzz(name: str, scratch: Path) -> None:
    tried = _fuzz(CASES[name], scratch)
    assert tried >= EXAMPLES
