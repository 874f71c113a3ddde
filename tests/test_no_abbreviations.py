"""No option is taken from a prefix of its name (issue 41).

argparse accepts any unambiguous prefix of a long option by default: ``--stor`` was silently
read as ``--store`` and ``--thread`` as ``--threads``, so a typo ran with a value the user never
meant, and adding an option later could change what an old command line means. Every parser
of the project is built with ``allow_abbrev=False``; these tests check each one, by its
construction (every ``ArgumentParser(...)`` and ``add_parser(...)`` call in the source) and by
what it does with a prefix.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from precompute.cli import EXIT_USAGE, _build_parser, main

ROOT = Path(__file__).resolve().parent.parent
#: The folders whose scripts and modules build parsers (the tests' own parsers are exempt).
SOURCES = ("precompute", "legival_core", "bench", "app.py", "pages", "examples")
BENCH_SCRIPTS = sorted(p.name for p in (ROOT / "bench").glob("*.py"))


def _sources() -> list[Path]:
    files: list[Path] = []
    for name in SOURCES:
        path = ROOT / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def _parser_calls(tree: ast.AST) -> list[ast.Call]:
    """Every ``ArgumentParser(...)``, ``_Parser(...)`` and ``….add_parser(...)`` call."""
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in {"ArgumentParser", "_Parser", "add_parser"}:
            calls.append(node)
    return calls


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


@pytest.mark.slow
def test_every_parser_in_the_source_refuses_abbreviations() -> None:
    missing = []
    calls = 0
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for call in _parser_calls(tree):
            calls += 1
            keywords = {k.arg: k.value for k in call.keywords}
            value = keywords.get("allow_abbrev")
            if not (isinstance(value, ast.Constant) and value.value is False):
                missing.append(f"{path.relative_to(ROOT)}:{call.lineno}")
    # The CLI's top parser and its sub-parsers, calibrate, the app's options and seven benches.
    assert calls >= 11
    assert missing == [], f"parsers that take abbreviations: {missing}"


def test_every_command_of_the_cli_refuses_abbreviations() -> None:
    parser = _build_parser()
    commands = _subparsers(parser)
    assert {"run", "ingest", "rollout", "segment", "publish", "demo"} <= set(commands)
    assert parser.allow_abbrev is False
    taking = sorted(name for name, sub in commands.items() if sub.allow_abbrev is not False)
    assert taking == []


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--stor", "{store}"],  # was read as --store
        ["segment", "--store", "{store}", "--thread", "1"],  # was read as --threads
        ["ingest", "{store}/x.jsonl", "--stor", "{store}", "--teacher", "t"],
    ],
    ids=["run --stor", "segment --thread", "ingest --stor"],
)
def test_a_prefix_of_an_option_is_a_usage_error(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [a.replace("{store}", str(tmp_path / "store")) for a in argv]
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "unrecognized arguments" in err or "required" in err
    assert "Traceback" not in err
    assert not (tmp_path / "store").exists()  # nothing ran


def test_the_app_ignores_a_prefix_of_readonly() -> None:
    """The app's own options: ``--read`` is not ``--readonly`` (a hosted app must be started
    with the flag it documents, not a prefix that happens to match today)."""
    from legival_core.views.app_config import parse_app_args

    assert parse_app_args(["--readonly"], {}).readonly is True
    assert parse_app_args(["--read"], {}).readonly is False


@pytest.mark.slow
@pytest.mark.parametrize("script", BENCH_SCRIPTS)
def test_each_bench_script_refuses_a_prefix_of_help(script: str) -> None:
    """``--hel`` was ``--help`` (exit 0); now it is an unknown option (exit 2)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--hel"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-500:])
    # Refused as unknown, or (a script with required options) for the options it lacks: never
    # the help text.
    assert "--hel" in done.stderr or "arguments are required" in done.stderr
    assert "show this help message" not in done.stdout
