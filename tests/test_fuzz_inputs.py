"""Hostile files: every file the precompute CLI reads, generated malformed by Hypothesis.

Inputs covered (each test states how many it tries; all seeds are fixed with
``derandomize=True``, so CI sees the same inputs every run):

* trace files for ``precompute.ingest``: JSONL, CSV and Parquet, each a mix of good rows and
  rows broken in a known way (bad JSON, bad UTF-8, lone surrogates, deep nesting, wrong types,
  out-of-range numbers, duplicates, missing fields). The ingest must keep exactly the good
  rows and quarantine exactly the bad ones, naming line/row and field;
* problem files read by the ``problems`` stage (``precompute.datasets.load_local``);
* TOML experiment configs: byte-level mutations of ``configs/smoke.toml`` and structurally
  wrong configs, also as the config recorded in a store's manifest;
* ``manifest.json`` of a store: wrong types, missing keys, garbage bytes;
* Arrow part files of a store: truncated, bit-flipped, replaced by another table's file.

Most examples call the in-process function; a fixed sample runs the real CLI in a subprocess
and checks its exit code and that stderr is one line without a traceback.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from legival_core.store.store import Store, StoreError
from precompute.cli import EXIT_UNUSABLE
from precompute.config import ConfigError, ExperimentConfig, load_config
from precompute.datasets import DatasetError, load_local
from precompute.ingest import IngestError, ingest

REPO = Path(__file__).resolve().parents[1]
SMOKE_TOML = REPO / "configs" / "smoke.toml"

#: Inputs tried per kind in this session (printed by each test; docs/reliability.md quotes the sum).
TALLY: dict[str, int] = {}


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
        ],
    )


def _record(kind: str, tried: int, wanted: int) -> None:
    TALLY[kind] = tried
    print(f"fuzz {kind}: {tried} inputs ({sum(TALLY.values())} so far)")
    # Hypothesis may stop early only if the strategy space is exhausted; ours is not.
    assert tried >= wanted, f"{kind}: only {tried} of {wanted} inputs were tried"


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """A scratch folder on tmpfs when there is one: these tests write hundreds of small
    stores, and fsync on a real disk would dominate their time (durability is not under test
    here; test_crash_safety covers it on the normal temp folder)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    folder = Path(tempfile.mkdtemp(prefix="legival-fuzz-", dir=base))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


_counter = iter(range(10**9))


def _fresh(scratch: Path, name: str) -> Path:
    folder = scratch / f"{name}-{next(_counter)}"
    folder.mkdir()
    return folder


def _one_line(message: str) -> None:
    assert message.strip(), "empty error message"
    assert "\n" not in message.strip(), f"error spans several lines: {message!r}"
    assert "Traceback" not in message


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "precompute", *args],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _assert_clean_failure(result: subprocess.CompletedProcess[str], codes: set[int]) -> None:
    assert result.returncode in codes, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, result.stderr


# --- trace rows: good ones and ones broken in a known way ------------------------------------

# Text without lone surrogates (Hypothesis' default alphabet has none) and, for CSV, without
# carriage returns (csv counts a bare CR as a line break, which would shift line numbers).
_TEXT = st.text(
    st.characters(codec="utf-8", exclude_characters="\r"), min_size=1, max_size=60
).filter(lambda s: s.strip() != "")


@dataclass(frozen=True)
class Row:
    """One generated input row: its JSON object (or raw bytes) and the expected outcome."""

    values: dict[str, Any] | None
    raw: bytes | None = None
    bad_field: str | None = None  # field named in the quarantine entry (None: whole line)
    good: bool = False


@st.composite
def good_rows(draw: st.DrawFn, ident: str) -> Row:
    values: dict[str, Any] = {
        "problem_id": ident,
        "prompt": draw(_TEXT),
        "reasoning": draw(_TEXT),
    }
    optional = {
        "answer": _TEXT,
        "tokens": st.integers(0, 2**31),
        "sample": st.integers(0, 3),
        "correct": st.sampled_from([True, False, "yes", "no", 1, 0]),
        "complete": st.booleans(),
        "truncated": st.booleans(),
    }
    for name, strategy in optional.items():
        if draw(st.booleans()):
            values[name] = draw(strategy)
    return Row(values, good=True)


_NOT_TEXT = st.one_of(
    st.integers(),
    st.booleans(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@st.composite
def bad_rows(draw: st.DrawFn, ident: str) -> Row:
    """A row that must be quarantined, and the field its quarantine entry must name."""
    base = {"problem_id": ident, "prompt": "What is 1 + 1?", "reasoning": "One and one is two."}
    kind = draw(
        st.sampled_from(
            [
                "truncated_json",
                "not_object",
                "not_utf8",
                "deep_nesting",
                "no_problem_id",
                "float_problem_id",
                "no_reasoning",
                "blank_reasoning",
                "reasoning_not_text",
                "surrogate_reasoning",
                "surrogate_prompt",
                "prompt_not_text",
                "bad_correct",
                "bad_tokens",
                "huge_tokens",
                "bad_sample",
                "huge_sample",
                "blank_teacher",
                "no_prompt",
            ]
        )
    )
    line = json.dumps(base)
    if kind == "truncated_json":
        cut = draw(st.integers(1, len(line) - 1))
        return Row(None, raw=line[:cut].encode())
    if kind == "not_object":
        value = draw(st.one_of(st.integers(), st.text(max_size=10), st.lists(st.integers())))
        return Row(None, raw=json.dumps(value).encode())
    # A line that cannot be decoded or parsed names the top-level key where it breaks (issue
    # 40): the bad bytes land inside the last value, "reasoning"; the nesting in "problem_id".
    if kind == "not_utf8":
        junk = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80abc"]))
        return Row(None, raw=line[:-2].encode() + b' "' + junk + b'"}', bad_field="reasoning")
    if kind == "deep_nesting":
        depth = draw(st.integers(2_000, 50_000))
        raw = b'{"problem_id": ' + b"[" * depth + b"]" * depth + b"}"
        return Row(None, raw=raw, bad_field="problem_id")
    values = dict(base)
    field = {
        "no_problem_id": "problem_id",
        "float_problem_id": "problem_id",
        "no_reasoning": "reasoning",
        "blank_reasoning": "reasoning",
        "reasoning_not_text": "reasoning",
        "surrogate_reasoning": "reasoning",
        "surrogate_prompt": "prompt",
        "prompt_not_text": "prompt",
        "bad_correct": "correct",
        "bad_tokens": "tokens",
        "huge_tokens": "tokens",
        "bad_sample": "sample",
        "huge_sample": "sample",
        "blank_teacher": "teacher",
        "no_prompt": "prompt",
    }[kind]
    if kind == "no_problem_id":
        del values["problem_id"]
    elif kind == "float_problem_id":
        values["problem_id"] = draw(
            st.floats(allow_nan=False).filter(lambda f: f != int(f) if abs(f) < 1e300 else True)
        )
    elif kind == "no_reasoning":
        del values["reasoning"]
    elif kind == "blank_reasoning":
        values["reasoning"] = draw(st.sampled_from(["", " ", "\n\t ", "\u3000"]))
    elif kind == "reasoning_not_text":
        values["reasoning"] = draw(_NOT_TEXT)
    elif kind == "surrogate_reasoning":
        values["reasoning"] = "half a pair: \ud83d and more"
    elif kind == "surrogate_prompt":
        values["prompt"] = "lone \udfff surrogate"
    elif kind == "prompt_not_text":
        values["prompt"] = draw(_NOT_TEXT)
    elif kind == "bad_correct":
        values["correct"] = draw(st.sampled_from(["maybe", 2, -1, 0.5, [True], {"x": 1}]))
    elif kind == "bad_tokens":
        values["tokens"] = draw(st.sampled_from([-1, -3, 1.5, "many", [3], True]))
    elif kind == "huge_tokens":
        values["tokens"] = draw(st.sampled_from([2**63, 2**70, 1e300, 10**40]))
    elif kind == "bad_sample":
        values["sample"] = draw(st.sampled_from([-2, 0.5, "first", [0]]))
    elif kind == "huge_sample":
        values["sample"] = draw(st.sampled_from([2**31, 2**40, 10**30]))
    elif kind == "blank_teacher":
        values["teacher"] = draw(st.sampled_from(["", "  ", "\t"]))
    elif kind == "no_prompt":
        del values["prompt"]
    # json.dumps escapes lone surrogates as \udXXX, which a JSON reader turns back into them.
    return Row(values, bad_field=field)


@st.composite
def trace_files(draw: st.DrawFn) -> list[Row]:
    """A file: up to 4 good rows and up to 5 bad rows, shuffled, ids unique per file."""
    n_good = draw(st.integers(0, 4))
    n_bad = draw(st.integers(0 if n_good else 1, 5))
    rows = [draw(good_rows(f"g{i}")) for i in range(n_good)]
    rows += [draw(bad_rows(f"b{i}")) for i in range(n_bad)]
    if n_good and draw(st.booleans()):  # a duplicate (same problem, sample) of a good row
        rows.append(Row(dict(rows[0].values or {}), bad_field=_TWIN))
    return _in_order(rows, draw(st.permutations(range(len(rows)))))


_TWIN = "<twin>"


def _in_order(rows: list[Row], order: list[int]) -> list[Row]:
    """Rows in file order; of a row and its twin, whichever comes first is kept and the
    other is the duplicate."""
    seen: set[str] = set()
    placed = []
    for row in (rows[i] for i in order):
        if row.good or row.bad_field == _TWIN:
            ident = str((row.values or {})["problem_id"])
            placed.append(
                Row(row.values, bad_field="problem_id")
                if ident in seen
                else Row(row.values, good=True)
            )
            seen.add(ident)
        else:
            placed.append(row)
    return placed


def _ingest_lines_and_check(
    source: Path, data: bytes, rows: list[Row], lines: list[int | None]
) -> None:
    """Write ``data`` to ``source``, ingest it into a store beside it and check the outcome
    line by line (:func:`_check_ingest`)."""
    source.write_bytes(data)
    store_dir = source.parent / "store"
    report = ingest(source, store_dir, "fuzz-teacher", task="math", dataset="fz")
    _check_ingest(report, store_dir, rows, lines, "line")


def _check_ingest(
    report: Any, store_dir: Path, rows: list[Row], lines: list[int | None], where: str
) -> None:
    """The outcome of one ingest: exactly the good rows kept, each bad one quarantined with
    its line/row and field, in one-line reasons; the store holds the kept traces."""
    good = [r for r in rows if r.good]
    expected_bad = {
        line: row.bad_field for row, line in zip(rows, lines, strict=True) if not row.good
    }
    assert report.kept == len(good), report.summary()
    got = {}
    for entry in report.quarantined:
        _one_line(entry.reason)
        position = entry.line if where == "line" else entry.row
        assert position is not None
        assert f"{where} {position}" in entry.where()
        got[position] = entry.field
    assert got == expected_bad, report.summary()
    quarantine = (store_dir / "quarantine.jsonl").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(quarantine) == len(expected_bad)
    for text in quarantine:
        json.loads(text)  # each entry is valid JSON, even for undecodable input
    if good:
        traces = Store.open(store_dir).read("traces")
        assert sorted(traces["reasoning"]) == sorted(r.values["reasoning"] for r in good)
        assert not traces["trace_id"].duplicated().any()


#: Line ends seen in the wild: Unix, Windows and classic Mac OS (a lone CR).
_LINE_ENDS = (b"\n", b"\r\n", b"\r")
_BOM = b"\xef\xbb\xbf"


def _jsonl_bytes(
    rows: list[Row], blank_every: int, line_end: bytes = b"\n", bom: bool = False
) -> tuple[bytes, list[int]]:
    out, lines, number = [], [], 0
    for i, row in enumerate(rows):
        if blank_every and i % blank_every == 0:
            out.append(b"   ")  # blank lines are skipped, but still count as lines
            number += 1
        data = row.raw if row.raw is not None else json.dumps(row.values).encode()
        out.append(data)
        number += 1
        lines.append(number)
    return (_BOM if bom else b"") + line_end.join(out) + line_end, lines


@pytest.mark.slow
def test_ingest_jsonl_fuzz(scratch: Path) -> None:
    tried = 0

    @_settings(220)
    @given(
        rows=trace_files(),
        blank_every=st.integers(0, 3),
        line_end=st.sampled_from(_LINE_ENDS),
        bom=st.booleans(),
    )
    def check(rows: list[Row], blank_every: int, line_end: bytes, bom: bool) -> None:
        nonlocal tried
        tried += 1
        data, lines = _jsonl_bytes(rows, blank_every, line_end, bom)
        _ingest_lines_and_check(_fresh(scratch, "jsonl") / "traces.jsonl", data, rows, lines)

    check()
    _record("ingest-jsonl", tried, 220)


# --- CSV: no types, so a row breaks by its text -------------------------------------------------

_CSV_FIELDS = ["problem_id", "prompt", "reasoning", "answer", "tokens", "sample", "correct"]
#: (cell overrides, field the quarantine entry names); None as field: the line itself is bad.
_CSV_BREAKS: list[tuple[dict[str, str] | str, str | None]] = [
    ("short", None),
    ("long", None),
    ("latin1", None),
    ({"problem_id": ""}, "problem_id"),
    ({"reasoning": ""}, "reasoning"),
    ({"reasoning": "  \t "}, "reasoning"),
    ({"prompt": ""}, "prompt"),
    ({"correct": "maybe"}, "correct"),
    ({"correct": "2"}, "correct"),
    ({"tokens": "-1"}, "tokens"),
    ({"tokens": "1.5"}, "tokens"),
    ({"tokens": "many"}, "tokens"),
    ({"tokens": "9223372036854775808"}, "tokens"),  # one above int64
    ({"sample": "-2"}, "sample"),
    ({"sample": "2147483648"}, "sample"),  # one above int32
]


def _csv_line(cells: list[str], line_end: str = "\n") -> bytes:
    """One CSV record. The writer quotes a cell holding its own line terminator only, so a
    ``\n`` inside a cell of a ``\r``-ended file would go out bare: a record any reader splits
    there. Such a record is written with every cell quoted, as a valid CSV file has it."""
    buffer = io.StringIO()
    breaks = any("\r" in cell or "\n" in cell for cell in cells)
    quoting = csv.QUOTE_ALL if breaks else csv.QUOTE_MINIMAL
    csv.writer(buffer, lineterminator=line_end, quoting=quoting).writerow(cells)
    return buffer.getvalue().encode()


def _line_breaks(data: bytes) -> int:
    """Physical lines ended in ``data``: CRLF, a lone CR and a lone LF each end one."""
    return len(re.findall(rb"\r\n|\r|\n", data))


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


@st.composite
def csv_files(draw: st.DrawFn) -> tuple[bytes, list[Row], list[int]]:
    n_good = draw(st.integers(0, 4))
    n_bad = draw(st.integers(0 if n_good else 1, 5))
    rows = [draw(good_rows(f"g{i}")) for i in range(n_good)]
    for i in range(n_bad):
        change, field = draw(st.sampled_from(_CSV_BREAKS))
        rows.append(
            Row(
                {"problem_id": f"b{i}", "prompt": "p", "reasoning": "r", "_": change},
                bad_field=field,
            )
        )
    if n_good and draw(st.booleans()):
        rows.append(Row(dict(rows[0].values or {}), bad_field=_TWIN))
    rows = _in_order(rows, draw(st.permutations(range(len(rows)))))
    end = draw(st.sampled_from(_LINE_ENDS)).decode()
    bom = _BOM if draw(st.booleans()) else b""
    chunks, lines, number = [bom + _csv_line(_CSV_FIELDS, end)], [], 1
    for row in rows:
        values = dict(row.values or {})
        change = values.pop("_", None)
        if change == "short":
            data = _csv_line(["a", "b"], end)
        elif change == "long":
            data = _csv_line(["a"] * 9, end)
        elif change == "latin1":
            data = f"x,caf\xe9 problem,r\xe9sum\xe9 of steps,,,,{end}".encode("latin-1")
        else:
            values.update(change or {})
            data = _csv_line([_csv_cell(values.get(f)) for f in _CSV_FIELDS], end)
        chunks.append(data)
        lines.append(number + 1)
        number += _line_breaks(data)  # a quoted newline inside a cell spans lines
    return b"".join(chunks), rows, lines


@pytest.mark.slow
def test_ingest_csv_fuzz(scratch: Path) -> None:
    tried = 0

    @_settings(120)
    @given(made=csv_files())
    def check(made: tuple[bytes, list[Row], list[int]]) -> None:
        nonlocal tried
        tried += 1
        data, rows, lines = made
        _ingest_lines_and_check(_fresh(scratch, "csv") / "traces.csv", data, rows, lines)

    check()
    _record("ingest-csv", tried, 120)


# --- Parquet: typed columns of every kind ------------------------------------------------------

_ARROW_VALUES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "string": (pa.string(), _TEXT),
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "float64": (pa.float64(), st.floats()),
    "bool": (pa.bool_(), st.booleans()),
    "binary": (pa.binary(), st.binary(max_size=8)),
    "list": (pa.list_(pa.int64()), st.lists(st.integers(-5, 5), max_size=3)),
    "list_binary": (pa.list_(pa.binary()), st.lists(st.binary(max_size=3), max_size=2)),
    "struct": (
        pa.struct([("a", pa.binary()), ("b", pa.timestamp("s"))]),
        st.fixed_dictionaries(
            {"a": st.binary(max_size=3), "b": st.datetimes(allow_imaginary=False)}
        ),
    ),
    "timestamp": (pa.timestamp("us"), st.datetimes(allow_imaginary=False)),
}
_PARQUET_COLUMNS = ["problem_id", "prompt", "reasoning", "raw", "answer", "gold", "tokens",
                    "sample", "correct", "teacher", "extra"]  # fmt: skip


@st.composite
def parquet_tables(draw: st.DrawFn) -> pa.Table:
    n_rows = draw(st.integers(1, 6))
    columns = draw(st.lists(st.sampled_from(_PARQUET_COLUMNS), min_size=1, max_size=7, unique=True))
    arrays, names = [], []
    for name in columns:
        kind = draw(st.sampled_from(sorted(_ARROW_VALUES)))
        dtype, values = _ARROW_VALUES[kind]
        cells = draw(st.lists(st.one_of(st.none(), values), min_size=n_rows, max_size=n_rows))
        arrays.append(pa.array(cells, type=dtype))
        names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


def test_ingest_parquet_fuzz(scratch: Path) -> None:
    """Arbitrary column types: every row is either kept or quarantined naming row and field,
    nothing raises, and the store holds exactly the kept traces."""
    tried = 0

    @_settings(120)
    @given(table=parquet_tables())
    def check(table: pa.Table) -> None:
        nonlocal tried
        tried += 1
        folder = _fresh(scratch, "parquet")
        source = folder / "traces.parquet"
        pq.write_table(table, source)
        report = ingest(source, folder / "store", "fuzz-teacher", task="math", dataset="fz")
        assert report.rows_read == table.num_rows
        assert report.kept + len(report.quarantined) == table.num_rows
        for entry in report.quarantined:
            _one_line(entry.reason)
            assert entry.field is not None and f"row {entry.row}" in entry.where()
        stored = Store.open(folder / "store")
        kept = len(stored.read("traces")) if stored.has("traces") else 0
        assert kept == report.kept

    check()
    _record("ingest-parquet", tried, 120)


def test_ingest_corrupt_parquet_is_one_clear_error(scratch: Path) -> None:
    tried = 0
    folder = _fresh(scratch, "pq-base")
    good = folder / "good.parquet"
    rows = [{"problem_id": f"p{i}", "prompt": "q", "reasoning": "r " * 50} for i in range(300)]
    pq.write_table(pa.Table.from_pylist(rows), good, row_group_size=50)
    original = good.read_bytes()

    @_settings(60)
    @given(
        cut=st.integers(0, len(original) - 1),
        flips=st.lists(
            st.tuples(st.integers(0, len(original) - 1), st.integers(1, 255)), max_size=4
        ),
    )
    def check(cut: int, flips: list[tuple[int, int]]) -> None:
        nonlocal tried
        tried += 1
        data = bytearray(original)
        for offset, mask in flips:
            data[offset] ^= mask
        if not flips:
            data = data[:cut]
        where = _fresh(scratch, "pq")
        source = where / "broken.parquet"
        source.write_bytes(bytes(data))
        try:
            report = ingest(source, where / "store", "t", dataset="fz")
        except IngestError as err:
            _one_line(str(err))
            assert str(source) in str(err)
            return
        assert report.kept + len(report.quarantined) == report.rows_read

    check()
    _record("ingest-parquet-bytes", tried, 60)


# --- files seen in the wild: stray quotes, whole-float ids, deeply nested gold answers ----------

_QUOTE_CASES = {
    # A quote opened in the prompt and never closed: the lenient reader ran on to the next
    # quote (g2's prompt), then on through its text, and read three lines as one bad row.
    "unclosed-in-the-middle": (
        "g1,What is 1 + 1?,One and one is two.,2\n"
        'b1,"What is 2 + 2?,Two and two,4\n'
        'g2,"What is 3 + 3?","Three and three, six",6\n'
        "g3,What is 4 + 4?,Four and four is eight.,8\n",
        [3],
        ["g1", "g2", "g3"],
    ),
    # Unclosed in the last cell: no later quote, so the file's end closed it; the record then
    # had the right number of cells and swallowed every row after it without a word.
    "unclosed-to-the-end": (
        "g1,q,r,1\n"
        'b1,q,"runs on to the end,2\n'
        'g2,q,"a cell written on\ntwo lines, kept whole",3\n'
        "g3,q,r,4\n",
        [3],
        ["g1", "g2", "g3"],
    ),
    "two-stray-quotes": (
        'b1,"q,r,1\ng1,q,r,2\nb2,q,"r,3\ng2,"q ""quoted""","r, with a comma",4\n',
        [2, 4],
        ["g1", "g2"],
    ),
}


@pytest.mark.parametrize("case", sorted(_QUOTE_CASES))
def test_a_stray_csv_quote_costs_only_its_own_line(scratch: Path, case: str) -> None:
    body, bad_lines, kept = _QUOTE_CASES[case]
    folder = _fresh(scratch, "quote")
    source = folder / "traces.csv"
    source.write_text("problem_id,prompt,reasoning,answer\n" + body, encoding="utf-8")
    report = ingest(source, folder / "store", "t", dataset="fz")
    assert sorted(q.line for q in report.quarantined) == bad_lines, report.summary()
    for entry in report.quarantined:
        _one_line(entry.reason)
        assert entry.field is None and "quote" in entry.reason
    traces = Store.open(folder / "store").read("traces")
    assert sorted(traces["problem_id"]) == [f"fz/{p}" for p in kept]
    if "g2" in kept and case == "unclosed-to-the-end":
        cell = traces.set_index("problem_id").loc["fz/g2", "reasoning"]
        assert cell == "a cell written on\ntwo lines, kept whole"


def test_a_byte_order_mark_before_a_json_array_is_not_content(scratch: Path) -> None:
    folder = _fresh(scratch, "bom-json")
    source = folder / "traces.json"
    rows = [
        {"problem_id": f"p{i}", "prompt": "What is 1 + 1?", "reasoning": "Two."} for i in range(3)
    ]
    source.write_bytes(_BOM + json.dumps(rows, indent=1).encode())
    report = ingest(source, folder / "store", "t", dataset="fz")
    assert report.kept == 3 and not report.quarantined, report.summary()


def test_whole_float_problem_ids_from_parquet_are_integers(scratch: Path) -> None:
    """pandas writes an integer column with a gap as float64: 2.0 is problem 2. Fractions,
    infinities and floats too large to be exact integers stay errors naming the field."""
    folder = _fresh(scratch, "float-ids")
    source = folder / "traces.parquet"
    ids = [2.0, 7.0, 2.5, None, 1e300, float("inf"), -3.0]
    pq.write_table(
        pa.table(
            {
                "problem_id": pa.array(ids, pa.float64()),
                "prompt": ["What is 1 + 1?"] * len(ids),
                "reasoning": ["One and one is two."] * len(ids),
            }
        ),
        source,
    )
    report = ingest(source, folder / "store", "t", dataset="fz")
    assert {q.row: q.field for q in report.quarantined} == {
        3: "problem_id",
        4: "problem_id",
        5: "problem_id",
        6: "problem_id",
    }, report.summary()
    traces = Store.open(folder / "store").read("traces")
    assert sorted(traces["problem_id"]) == ["fz/-3", "fz/2", "fz/7"]


def test_deeply_nested_gold_is_quarantined_before_grading(scratch: Path) -> None:
    """A 900-deep gold answer took 6-9 s per row to grade; it is now refused up front, as a
    JSON structure and as text alike, while a gold nested 20 deep is still graded."""
    folder = _fresh(scratch, "deep-gold")
    source = folder / "traces.jsonl"
    base = {"prompt": "What is one half?", "reasoning": "It is \\boxed{\\frac{1}{2}}."}
    rows = [
        {**base, "problem_id": "nested-list", "gold": json.loads("[" * 900 + "]" * 900)},
        {**base, "problem_id": "nested-text", "gold": "(" * 900 + "1" + ")" * 900},
        {**base, "problem_id": "twenty-deep", "gold": "(" * 20 + "1" + ")" * 20},
        {**base, "problem_id": "plain", "gold": "\\frac{1}{2}"},
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    report = ingest(source, folder / "store", "t", dataset="fz")
    assert {q.line: q.field for q in report.quarantined} == {1: "gold", 2: "gold"}
    assert all("nested more than" in q.reason for q in report.quarantined)
    grades = Store.open(folder / "store").read("grades")
    assert len(grades) == 2  # both kept rows were graded against their gold
    assert grades.set_index("trace_id")["correct"].sum() == 1  # 1/2 matches the plain gold


# --- problem files (the ``problems`` stage's ``local`` loader) ---------------------------------


@st.composite
def problem_files(draw: st.DrawFn) -> bytes:
    lines = []
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["good", "junk", "types", "workload", "nested"]))
        row: dict[str, Any] = {"problem_id": f"p{i}", "prompt": "What is 2+2?", "gold": "4"}
        if kind == "junk":
            lines.append(draw(st.binary(min_size=1, max_size=30)).replace(b"\n", b" "))
            continue
        if kind == "nested":
            lines.append(b"[" * 5000 + b"]" * 5000)
            continue
        if kind == "types":
            row[draw(st.sampled_from(["prompt", "gold", "problem_id", "choices"]))] = draw(
                _NOT_TEXT
            )
        if kind == "workload":
            row["workload"] = draw(st.one_of(st.floats(), st.text(max_size=4), st.integers()))
        lines.append(json.dumps(row).encode())
    return b"\n".join(lines) + b"\n"


def test_problem_loader_fuzz(scratch: Path) -> None:
    tried = 0

    @_settings(120)
    @given(data=problem_files())
    def check(data: bytes) -> None:
        nonlocal tried
        tried += 1
        source = _fresh(scratch, "problems") / "problems.jsonl"
        source.write_bytes(data)
        try:
            frame = load_local(source, dataset="fz")
        except DatasetError as err:
            _one_line(str(err))
            assert str(source) in str(err)
            return
        for skipped in frame.attrs.get("skipped", []):
            _one_line(skipped)
            assert str(source) in skipped
        assert frame["problem_id"].is_unique

    check()
    _record("problems-jsonl", tried, 120)


# --- TOML experiment configs -------------------------------------------------------------------


@st.composite
def mutated_toml(draw: st.DrawFn) -> bytes:
    data = bytearray(SMOKE_TOML.read_bytes())
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["delete", "insert", "replace"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "delete":
            del data[at : at + draw(st.integers(1, 40))]
        elif op == "insert":
            data[at:at] = draw(
                st.sampled_from(
                    [
                        b"=",
                        b"[",
                        b"]",
                        b'"',
                        b"\n",
                        b"\xff",
                        b"[[teachers]]\n",
                        b"x = 1\n",
                        b"max_tokens = -5\n",
                        b"{",
                        b"\x00",
                        b"'''",
                        b"1e999",
                        b"nan",
                    ]
                )
            )
        else:
            data[at] = draw(st.integers(0, 255))
    return bytes(data)


def _check_config_error(err: ConfigError, source: str) -> None:
    _one_line(str(err))
    assert str(err).startswith(source), err


def test_toml_config_fuzz(scratch: Path) -> None:
    tried = 0
    folder = _fresh(scratch, "toml")

    @_settings(200)
    @given(data=mutated_toml())
    def check(data: bytes) -> None:
        nonlocal tried
        tried += 1
        path = folder / "experiment.toml"
        path.write_bytes(data)
        try:
            load_config(path)
        except ConfigError as err:
            _check_config_error(err, str(path))

    check()
    _record("toml-bytes", tried, 200)


_TOML_SCALAR = st.one_of(
    st.text(max_size=8), st.integers(-(2**63), 2**63 - 1), st.floats(), st.booleans()
)
_TOML_VALUE = st.recursive(
    _TOML_SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
_SECTION_KEYS = {
    "experiment": ["name", "seed", "stages"],
    "problems": ["dataset", "limit", "ids", "options"],
    "teachers": ["name", "engine", "model", "max_tokens", "temperature", "samples", "options"],
    "students": ["name", "engine", "model", "forcing_tokens", "top_p"],
    "generate": ["batch_size"],
    "grade": ["timeout_s", "batch_size"],
    "segment": ["mode", "encoding", "batch_size"],
    "embed": ["batch_size", "traces_per_part", "disk_cache"],
    "rollout": ["interval", "samples", "include_full"],
    "judge": ["labelers", "engine", "model", "batch_size"],
    "metrics": ["threshold", "profile", "grid", "primary_labeler"],
}


@st.composite
def config_dicts(draw: st.DrawFn) -> dict[str, Any]:
    """Configs with known sections holding keys of the right names but arbitrary values (what
    a hand-edited TOML or a tampered manifest 'config' can hold)."""
    config: dict[str, Any] = {}
    for section in draw(st.lists(st.sampled_from(sorted(_SECTION_KEYS)), max_size=4, unique=True)):
        keys = draw(st.lists(st.sampled_from(_SECTION_KEYS[section]), max_size=3, unique=True))
        table = {key: draw(_TOML_VALUE) for key in keys}
        if section in ("teachers", "students"):
            config[section] = draw(st.sampled_from([[table], table, [table, 3]]))
        else:
            config[section] = draw(st.sampled_from([table, [table], "text"]))
    if draw(st.booleans()):
        config[draw(st.text(max_size=5))] = draw(_TOML_VALUE)
    return config


def test_config_dict_fuzz() -> None:
    tried = 0

    @_settings(200)
    @given(data=config_dicts())
    def check(data: dict[str, Any]) -> None:
        nonlocal tried
        tried += 1
        try:
            ExperimentConfig.from_dict(data, source="store/manifest.json")
        except ConfigError as err:
            _check_config_error(err, "store/manifest.json")

    check()
    _record("config-structure", tried, 200)


# --- manifest.json and Arrow part files of a store ----------------------------------------------


def _traces(n: int, offset: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "trace_id": f"t-{offset + i:04d}",
            "problem_id": f"p{(offset + i) % 3}",
            "dataset": "fz",
            "teacher": "fuzz-teacher",
            "sample": 0,
            "reasoning": f"Step {i}. We add {i} and {i}. So the answer is {2 * i}.",
            "tokens": 12,
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def base_store(scratch: Path) -> Path:
    path = scratch / "base-store"
    store = Store.create(path, config={"experiment": {"name": "fuzz"}})
    store.write("traces", _traces(40), stage="fuzz")
    store.write("traces", _traces(40, offset=40), stage="fuzz")
    store.write("rewards", [{"trace_id": "t-0001", "reward_model": "rm", "score": 0.5}])
    store.record_stage("fuzz", seeds={"a": 1})
    return path


_MANIFEST_PATHS = [
    (), ("format",), ("schema_version",), ("created",), ("config",), ("provenance",),
    ("provenance", 0), ("tables",), ("tables", "traces"), ("tables", "traces", "parts"),
    ("tables", "traces", "parts", 0), ("tables", "traces", "parts", 0, "file"),
    ("tables", "traces", "parts", 0, "rows"), ("tables", "traces", "parts", 0, "bytes"),
    ("tables", "traces", "rows"), ("tables", "traces", "last_seq"), ("config", "experiment"),
]  # fmt: skip
_JSON_VALUE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False),
        st.text(max_size=12),
        st.sampled_from(
            [
                "../../etc/passwd",
                "part-00000001-1-abcdef12.arrow",
                "/etc/passwd",
                "legival-store",
                "file:///etc/passwd",
                "<script>alert(1)</script>",
            ]
        ),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _set_path(document: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    if not path:
        return value
    node = document
    for step in path[:-1]:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return document
    with contextlib.suppress(KeyError, IndexError, TypeError):
        if delete:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return document


@st.composite
def manifest_bytes(draw: st.DrawFn, original: bytes) -> bytes:
    kind = draw(st.sampled_from(["edit", "edit", "edit", "truncate", "garbage", "table-name"]))
    if kind == "truncate":
        return original[: draw(st.integers(0, len(original) - 1))]
    if kind == "garbage":
        return draw(st.binary(max_size=200))
    document = json.loads(original)
    if kind == "table-name":
        name = draw(st.sampled_from(["../../etc", "traces/../..", "Traces", "x" * 300, ""]))
        document["tables"][name] = {"rows": 1, "parts": []}
        return json.dumps(document).encode()
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_MANIFEST_PATHS))
        document = _set_path(document, path, draw(_JSON_VALUE), draw(st.booleans()))
    return json.dumps(document).encode()


def _exercise_store(path: Path) -> None:
    """What the CLI and the app do with a store; only StoreError/ConfigError may escape."""
    store = Store.open(path)
    manifest = store.manifest
    for table in store.tables():
        store.read(table)
        store.done_keys(table)
    store.verify()
    with contextlib.suppress(ConfigError):
        ExperimentConfig.from_dict(manifest.get("config") or {}, source=f"{path}/manifest.json")


def test_manifest_fuzz(scratch: Path, base_store: Path) -> None:
    tried = 0
    original = (base_store / "manifest.json").read_bytes()

    @_settings(200)
    @given(data=manifest_bytes(original))
    def check(data: bytes) -> None:
        nonlocal tried
        tried += 1
        path = _fresh(scratch, "manifest") / "store"
        shutil.copytree(base_store, path)
        (path / "manifest.json").write_bytes(data)
        try:
            _exercise_store(path)
        except StoreError as err:
            _one_line(str(err))
            assert "manifest.json" in str(err), err

    check()
    _record("manifest", tried, 200)


@st.composite
def part_damage(draw: st.DrawFn, size: int) -> tuple[str, Any]:
    kind = draw(
        st.sampled_from(
            [
                "truncate",
                "flip",
                "flip",
                "zero-tail",
                "other-table",
                "wrong-types",
                "parquet",
                "empty",
                "bad-metadata",
            ]
        )
    )
    if kind == "truncate":
        return kind, draw(st.integers(0, size - 1))
    if kind == "flip":
        return kind, draw(
            st.lists(
                st.tuples(st.integers(0, size - 1), st.integers(1, 255)), min_size=1, max_size=6
            )
        )
    if kind == "zero-tail":
        return kind, draw(st.integers(1, size // 2))
    return kind, None


def _damage(path: Path, kind: str, detail: Any) -> None:
    data = bytearray(path.read_bytes())
    if kind == "truncate":
        path.write_bytes(bytes(data[:detail]))
    elif kind == "flip":
        for offset, mask in detail:
            data[offset] ^= mask
        path.write_bytes(bytes(data))
    elif kind == "zero-tail":  # a crash that left the tail unwritten (sparse zeros)
        data[-detail:] = bytes(detail)
        path.write_bytes(bytes(data))
    elif kind == "other-table":
        table = pa.table({"trace_id": ["t-1"], "reward_model": ["rm"], "score": [1.0]})
        table = table.replace_schema_metadata({b"legival.table": b"rewards"})
        with pa.ipc.new_file(str(path), table.schema) as writer:
            writer.write_table(table)
    elif kind == "wrong-types":
        table = pa.table({"trace_id": [1, 2], "reasoning": [[1], [2]]})
        with pa.ipc.new_file(str(path), table.schema) as writer:
            writer.write_table(table)
    elif kind == "parquet":
        pq.write_table(pa.table({"trace_id": ["t-1"]}), path)
    elif kind == "bad-metadata":  # the right rows, a footer that lies about them
        with pa.memory_map(str(path)) as source:
            table = pa.ipc.open_file(source).read_all()
        meta = {**(table.schema.metadata or {}), b"legival.rows": b"4x", b"legival.table": b"\xff"}
        table = table.replace_schema_metadata(meta)
        with pa.ipc.new_file(str(path), table.schema) as writer:
            writer.write_table(table)
    else:
        path.write_bytes(b"")


@pytest.mark.slow
def test_part_file_fuzz(scratch: Path, base_store: Path) -> None:
    """A damaged part: reading fails with a StoreError naming the part (or the damage is
    harmless), verify() names it, and after quarantining it everything reads again."""
    tried = 0
    part = sorted((base_store / "tables" / "traces").glob("part-*.arrow"))[0]
    size = part.stat().st_size
    expected = Store.open(base_store).read("traces")

    @_settings(200)
    @given(damage=part_damage(size))
    def check(damage: tuple[str, Any]) -> None:
        nonlocal tried
        tried += 1
        path = _fresh(scratch, "parts") / "store"
        shutil.copytree(base_store, path)
        target = path / "tables" / "traces" / part.name
        _damage(target, *damage)
        store = Store.open(path)
        problems = store.verify()
        for problem in problems:
            _one_line(problem)
        try:
            frame = store.read("traces")
        except StoreError as err:
            _one_line(str(err))
            assert str(target) in str(err)
            assert any(str(target) in p for p in problems), problems  # detected and reported
        else:
            if not problems:
                assert frame.equals(expected)
        for bad in {p.split(":")[0] for p in problems if p.startswith(str(target))}:
            store.quarantine_part(bad, reason="fuzz")
        remaining = store.read("traces")  # only the undamaged part's rows are left
        assert set(remaining["trace_id"]) <= set(expected["trace_id"])
        assert not remaining["trace_id"].duplicated().any()

    check()
    _record("arrow-parts", tried, 200)


# --- the real command lines, on a fixed sample of hostile files ---------------------------------


@pytest.mark.slow
def test_cli_sample_of_hostile_files(scratch: Path, base_store: Path) -> None:
    """A sample through the real CLIs: documented exit code, one error line, no traceback."""
    folder = _fresh(scratch, "cli")
    tried = 0

    # 1. ingest: a file whose rows are all bad -> exit 6; good and bad mixed -> exit 0.
    all_bad = folder / "all_bad.jsonl"
    all_bad.write_bytes(b'{"problem_id": 1}\n' + b"[" * 20000 + b"\n\xff\xfe\n")
    result = _cli("ingest", str(all_bad), "--store", str(folder / "s1"), "--teacher", "t")
    _assert_clean_failure(result, {EXIT_UNUSABLE})
    assert "line 2" in result.stdout and "line 3" in result.stdout
    tried += 1
    mixed = folder / "mixed.jsonl"
    mixed.write_text(
        json.dumps({"problem_id": "a", "prompt": "q", "reasoning": "fine"})
        + "\n"
        + json.dumps({"problem_id": "b", "prompt": "q", "reasoning": "x", "sample": 2**40})
        + "\n"
        + json.dumps({"problem_id": "c", "prompt": "q\ud800", "reasoning": "y"})
        + "\n",
        encoding="utf-8",
    )
    result = _cli("ingest", str(mixed), "--store", str(folder / "s2"), "--teacher", "t")
    assert result.returncode == 0, result.stderr
    assert "kept: 1, quarantined: 2" in result.stdout
    assert "line 2, field 'sample'" in result.stdout
    assert "line 3, field 'prompt'" in result.stdout
    tried += 1
    broken_pq = folder / "broken.parquet"
    broken_pq.write_bytes(b"PAR1" + os.urandom(64))
    result = _cli("ingest", str(broken_pq), "--store", str(folder / "s3"), "--teacher", "t")
    _assert_clean_failure(result, {EXIT_UNUSABLE})
    assert str(broken_pq) in result.stderr
    tried += 1

    # 2. experiment configs -> exit 3, the message names the file.
    store_dir = folder / "s4"
    shutil.copytree(base_store, store_dir)
    for data in [
        b'[segment\nmode = "paper"',  # invalid TOML
        b"[metrics]\nthreshold = 2\n",  # out of range
        b"[[teachers]]\nengine = 'transformers'\n",  # a required key missing
        b"\xff\xfe[segment]",  # not UTF-8
    ]:
        config = folder / "bad.toml"
        config.write_bytes(data)
        result = _cli(
            "segment", "--store", str(store_dir), "--config", str(config), "--no-progress"
        )
        _assert_clean_failure(result, {3})
        assert str(config) in result.stderr
        tried += 1

    # 3. a store with a garbled manifest, and one with a truncated part -> exit 4.
    garbled = folder / "s5"
    shutil.copytree(base_store, garbled)
    (garbled / "manifest.json").write_text('{"format": "legival-store", "tables": [')
    for command in (
        ["verify", "--store", str(garbled)],
        ["segment", "--store", str(garbled), "--no-progress"],
    ):
        result = _cli(*command)
        _assert_clean_failure(result, {4})
        assert "manifest.json" in result.stderr
        tried += 1
    truncated = folder / "s6"
    shutil.copytree(base_store, truncated)
    part = sorted((truncated / "tables" / "traces").glob("part-*.arrow"))[0]
    part.write_bytes(part.read_bytes()[:200])
    result = _cli("verify", "--store", str(truncated))
    assert result.returncode == 4 and str(part) in result.stdout, result
    tried += 1
    result = _cli("segment", "--store", str(truncated), "--no-progress")
    _assert_clean_failure(result, {4})
    assert str(part) in result.stderr
    tried += 1
    _record("cli-subprocess", tried, 11)
    print(f"fuzz total: {sum(TALLY.values())} inputs")
