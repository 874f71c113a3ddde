"""A received store is checked, not trusted (issue 40): every field of its manifest by type and
range, and nothing in it can write to the user's terminal.

Each test failed on the code before its fix.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import legival_core
from legival_core.store.store import Store, StoreError
from precompute.cli import EXIT_OK, EXIT_STORE, main

REPO = Path(__file__).resolve().parents[1]


def _store(path: Path) -> Path:
    store = Store.create(path)
    for score in (0.25, 0.5):
        frame = pd.DataFrame({"trace_id": [f"t{score}"], "reward_model": ["rm"], "score": [score]})
        store.write("rewards", frame, stage="reward")
    return store.path


def _edit(change: Callable[[dict[str, Any]], Any]) -> Callable[[str], str]:
    def edit(text: str) -> str:
        manifest = json.loads(text)
        change(manifest)
        return json.dumps(manifest)

    return edit


def _entry(key: str, value: Any) -> Callable[[str], str]:
    return _edit(lambda m: m["tables"]["rewards"].__setitem__(key, value))


def _part(key: str, value: Any) -> Callable[[str], str]:
    return _edit(lambda m: m["tables"]["rewards"]["parts"][0].__setitem__(key, value))


#: Manifest edits that passed verify before, then failed every later write (a raw ValueError,
#: OverflowError or AttributeError) and made lv.open(...).traces() raise: name -> (edit, the
#: field the error names).
EDITS: dict[str, tuple[Callable[[str], str], str]] = {
    "last_seq text": (_entry("last_seq", "x"), "tables.rewards.last_seq"),
    "last_seq 1e400": (
        lambda text: text.replace('"last_seq": 2', '"last_seq": 1e400'),
        "tables.rewards.last_seq",
    ),
    "last_seq negative": (_entry("last_seq", -3), "tables.rewards.last_seq"),
    "stages text": (_entry("stages", "x"), "tables.rewards.stages"),
    "rows text": (_entry("rows", "abc"), "tables.rewards.rows"),
    "part rows negative": (_part("rows", -1), "tables.rewards.parts[0].rows"),
    "part checksum a number": (_part("blake2b", 5), "tables.rewards.parts[0].blake2b"),
    "part stage a list": (_part("stage", ["x"]), "tables.rewards.parts[0].stage"),
    "part adopted text": (_part("adopted", "yes"), "tables.rewards.parts[0].adopted"),
    "updated a number": (_edit(lambda m: m.__setitem__("updated", 7)), "updated"),
    "provenance stage a list": (
        _edit(lambda m: m["provenance"].append({"stage": ["x"]})),
        "provenance[0].stage",
    ),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_verify_checks_every_manifest_field(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _store(tmp_path / "received")
    edit, field = EDITS[case]
    manifest = path / "manifest.json"
    manifest.write_text(edit(manifest.read_text(encoding="utf-8")), encoding="utf-8")
    code = main(["verify", "--store", str(path)])
    err = capsys.readouterr().err
    assert code == EXIT_STORE, err
    assert err.count("\n") == 1 and f"field '{field}'" in err and "manifest.json" in err
    # The library refuses it the same way, with a StoreError naming the field (never a raw
    # error from deep inside a write or a read).
    with pytest.raises(StoreError, match=f"field '{_escaped(field)}'"):
        legival_core.open(path).traces()
    with pytest.raises(StoreError, match=f"field '{_escaped(field)}'"):
        Store.open(path).write(
            "rewards", pd.DataFrame({"trace_id": ["n"], "reward_model": ["rm"], "score": [1.0]})
        )


def _escaped(text: str) -> str:
    import re

    return re.escape(text)


def test_a_valid_manifest_still_verifies(tmp_path: Path) -> None:
    path = _store(tmp_path / "fine")
    assert main(["verify", "--store", str(path)]) == EXIT_OK


#: A stray file name that, printed raw, erases verify's own line and writes a green "ok".
SPOOF = "x\x1b[2K\r\x1b[1A\x1b[2K\x1b[32mverify: store ok, 0 problems\x1b[0m\u202e"


def test_verify_prints_stray_names_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, the name went to the terminal raw: its escapes erased the real line and showed
    a green "verify: store ok, 0 problems" (the exit code stayed 4)."""
    path = _store(tmp_path / "received")
    (path / "tables" / SPOOF).write_text("", encoding="utf-8")
    code = main(["verify", "--store", str(path)])
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert code == EXIT_STORE
    assert "\x1b" not in printed and "\r" not in printed and "\u202e" not in printed
    assert "x\\x1b[2K\\x0d\\x1b[1A" in printed and "\\u202e" in printed
    # The same through a real process and its real standard streams.
    done = subprocess.run(
        [sys.executable, "-m", "precompute", "verify", "--store", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == EXIT_STORE
    assert "\x1b" not in done.stdout + done.stderr and "\\x1b[32m" in done.stdout


def test_names_from_files_are_escaped_in_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace file named with escapes, and a teacher name holding them, as ingest prints them
    in its summary; and an error line naming the file."""
    source = tmp_path / f"t{SPOOF}.jsonl"
    source.write_text(
        json.dumps({"problem_id": "p", "prompt": "2+2?", "reasoning": "Four."}) + "\n"
        + json.dumps({"problem_id": "q", "reasoning": 5}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    code = main(["ingest", str(source), "--store", str(tmp_path / "s"), "--teacher", SPOOF])
    captured = capsys.readouterr()
    assert code == EXIT_OK
    assert "\x1b" not in captured.out + captured.err and "\\x1b[32m" in captured.out
    code = main(["ingest", str(tmp_path / f"missing{SPOOF}.jsonl"), "--store",
                 str(tmp_path / "s"), "--teacher", "t"])  # fmt: skip
    err = capsys.readouterr().err
    assert code != EXIT_OK and "\x1b" not in err and err.count("\n") == 1


def test_verify_quarantine_moves_what_it_finds_aside_and_the_store_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The app and the stages point at ``verify --quarantine`` when a part cannot be read: it
    moves a damaged part and a stray file with a hostile name aside (names escaped in what it
    prints), and the store then verifies; the rows of the part are gone until rerun."""
    path = _store(tmp_path / "received")
    store = Store.open(path)
    victim = store.parts("rewards")[0]
    victim.write_bytes(victim.read_bytes()[:100])  # truncated
    stray = path / "tables" / SPOOF
    stray.write_text("", encoding="utf-8")
    code = main(["verify", "--store", str(path), "--quarantine"])
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert code == EXIT_OK, printed
    assert "\x1b" not in printed and "\u202e" not in printed
    assert f"moved aside: {victim} -> {victim.parent / 'corrupt' / victim.name}" in printed
    assert "2 file(s) moved aside" in printed
    assert (victim.parent / "corrupt" / victim.name).exists() and not victim.exists()
    assert not stray.exists()
    assert main(["verify", "--store", str(path)]) == EXIT_OK
    # the first part's row waits for its stage to rerun; the second part's is kept
    assert Store.open(path).read("rewards")["score"].tolist() == [0.5]
