"""One command line (issue 16, item 3): every command is a subcommand of ``python -m precompute``
with one set of exit codes, and a stage's own options are declared where it is registered.

Real components: the real parser and handlers, real stores on disk, the real bundled CSVs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from legival_core.store.store import Store
from precompute import cli, stages
from precompute.cli import EXIT_CODES, EXIT_MISSING, EXIT_OK, EXIT_STORE, EXIT_USAGE, main
from precompute.stages import STAGES, StageContext, StageResult, register_stage

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``main(args)`` in-process: its exit code and stderr, which is never a traceback."""
    code = main(args)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def test_help_lists_the_new_subcommands_and_prints_the_exit_code_table() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "precompute", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for name in ("ingest", "datasets", "published", "demo", "run", "list", "publish", "segment"):
        assert f"\n    {name}" in result.stdout, name
    # One line per code, as the module-level table has it.
    for code, meaning in EXIT_CODES.items():
        assert f"{code:>5}  {meaning}\n" in result.stdout, code
    assert len(set(EXIT_CODES)) == len(EXIT_CODES) == 8


@pytest.mark.parametrize("name", ["ingest", "datasets", "published"])
def test_former_entry_points_are_registered_commands(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert name in cli.COMMANDS and name not in STAGES
    with pytest.raises(SystemExit) as exited:
        main([name, "--help"])
    assert exited.value.code == EXIT_OK
    assert f"usage: python -m precompute {name}" in capsys.readouterr().out


@pytest.fixture
def echo_stage() -> Iterator[list[dict[str, object]]]:
    """A real registered stage with two declared options; it records the options it gets."""
    seen: list[dict[str, object]] = []

    @register_stage(
        "echo-options",
        writes=(),
        help="test stage: records its options",
        options=(
            stages.StageOption("--colour", "colour", {"help": "a colour to echo"}),
            stages.StageOption("--count", "count", {"type": int, "help": "how many"}),
            stages.StageOption("--loud", "loud", {"action": "store_true", "help": "shout"}),
        ),
    )
    def echo(ctx: StageContext) -> StageResult:
        seen.append(dict(ctx.stage_options["echo-options"]))
        return StageResult("echo-options")

    yield seen
    del STAGES["echo-options"]


def test_a_stage_option_is_declared_at_registration_shown_and_passed_through(
    echo_stage: list[dict[str, object]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["echo-options", "--help"])
    assert exited.value.code == EXIT_OK
    shown = capsys.readouterr().out
    assert "--colour COLOUR" in shown and "a colour to echo" in shown and "--loud" in shown

    store = str(tmp_path / "store")
    args = ["echo-options", "--store", store, "--no-progress"]
    assert _run([*args, "--colour", "red", "--count", "3", "--loud"], capsys)[0] == EXIT_OK
    assert _run(args, capsys)[0] == EXIT_OK  # options not given are left out, not None
    assert echo_stage == [{"colour": "red", "count": 3, "loud": True}, {}]
    with pytest.raises(SystemExit) as exited:  # argparse's own check, one line, code 2
        main([*args, "--count", "three"])
    assert exited.value.code == EXIT_USAGE and "--count" in capsys.readouterr().err


def test_the_reward_and_monitor_options_come_from_their_registration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert {o.flag for o in STAGES["reward"].options} >= {"--model", "--batch-size"}
    assert {o.flag for o in STAGES["monitor"].options} >= {"--kinds", "--no-natural"}
    with pytest.raises(SystemExit):
        main(["monitor", "--help"])
    assert "--no-natural" in capsys.readouterr().out


def test_each_exit_code_means_one_kind_of_failure_in_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "store")
    all_bad = tmp_path / "bad.jsonl"
    all_bad.write_text('{"problem_id": "a"}\nnot json\n', encoding="utf-8")
    broken_json = tmp_path / "broken.jsonl"
    broken_json.write_text("{not json\n", encoding="utf-8")
    not_a_store = tmp_path / "folder"
    not_a_store.mkdir()
    (not_a_store / "keep.txt").write_text("precious", encoding="utf-8")
    a_file = tmp_path / "file.txt"
    a_file.write_text("x", encoding="utf-8")
    mixed = str(FIXTURES / "traces_mixed.jsonl")
    cases = [
        # 5: an input that is not there, whichever command reads it
        (["ingest", str(tmp_path / "none.jsonl"), "--store", store, "--teacher", "t"], 5),
        (["datasets", "local", str(tmp_path / "none.csv")], 5),
        (["segment", "--store", store, "--no-progress"], 5),  # no traces stored yet
        # 6: an input that is there but gives nothing
        (["ingest", str(all_bad), "--store", store, "--teacher", "t"], 6),
        (["datasets", "local", str(broken_json)], 6),
        # 2: a bad command line
        (["ingest", mixed, "--store", store, "--teacher", "t", "--map", "prompt"], 2),
        (["ingest", mixed, "--store", store, "--teacher", "t", "--task", "no-such-task"], 2),
        (["datasets", "no-such-dataset"], 2),
        (["segment", "--store", store, "--shard", "3/2"], 2),
        # 4: a store problem
        (["published", "--out", str(not_a_store)], 4),
        (["ingest", mixed, "--store", str(a_file), "--teacher", "t"], 4),
        (["verify", "--store", str(a_file)], 4),
    ]
    for args, expected in cases:
        code, err = _run(args, capsys)
        assert code == expected, (args, code, err)
        assert err.startswith("precompute: error:") and err.count("\n") == 1, (args, err)
    assert (not_a_store / "keep.txt").read_text(encoding="utf-8") == "precious"
    # The numbers are the documented ones (docs/running-at-scale.md, SECURITY.md, --help).
    assert (EXIT_USAGE, EXIT_STORE, EXIT_MISSING, cli.EXIT_UNUSABLE) == (2, 4, 5, 6)


def test_the_module_commands_run_through_the_cli_with_its_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ingest, datasets and published live in their own modules but run only as CLI commands
    (the modules no longer import the CLI back: tests/test_layers.py)."""
    store = str(tmp_path / "store")
    missing = str(tmp_path / "none.jsonl")
    assert main(["ingest", missing, "--store", store, "--teacher", "t"]) == EXIT_MISSING
    assert main(["datasets", "no-such-dataset"]) == EXIT_USAGE
    out = tmp_path / "published"
    assert main(["published", "--out", str(out)]) == EXIT_OK
    assert Store.open(out).tables() == ["decomposition", "teacher_metrics"]
    capsys.readouterr()


def test_ingest_prints_its_report_and_keeps_the_good_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.jsonl"
    rows = [
        {"problem_id": "p1", "prompt": "1 + 1?", "reasoning": "One and one. That is two.",
         "answer": "2", "correct": True},
        {"problem_id": "p2", "prompt": "2 + 2?", "reasoning": "Two and two make four.",
         "answer": "4", "correct": False},
    ]  # fmt: skip
    good.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    store = tmp_path / "store"
    code = main(["ingest", str(good), "--store", str(store), "--teacher", "t"])
    captured = capsys.readouterr()
    assert code == EXIT_OK, captured.err
    assert "rows read: 2, kept: 2, quarantined: 0" in captured.out
    grades = Store.open(store).read("grades")
    assert sorted(grades["correct"].tolist()) == [False, True]


def test_demo_takes_its_students_from_repeated_student_flags(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--student`` repeats (in order, each once); without it the demo has both students,
    and each student's first pass is its own budget unless ``--max-tokens`` sets them all."""
    from precompute import demo

    built: list[demo.DemoOptions] = []
    monkeypatch.setattr(
        demo,
        "build_demo",
        lambda options, progress=None: (
            built.append(options) or Store.create(tmp_path / str(len(built)))
        ),
    )
    assert main(["demo", "--out", str(tmp_path / "a")]) == EXIT_OK
    args = [
        "demo",
        "--out",
        str(tmp_path / "b"),
        "--student",
        "x.gguf",
        "--student",
        "smollm2-135m",
    ]
    assert main([*args, "--student", "x.gguf", "--max-tokens", "64"]) == EXIT_OK
    default, chosen = built
    assert default.students == ("smollm2-135m", "gemma3-270m")
    budgets = [s.max_tokens for s in demo.demo_config(default).students]
    assert budgets == [192, 48]
    assert chosen.students == ("x.gguf", "smollm2-135m")
    assert [s.max_tokens for s in demo.demo_config(chosen).students] == [64, 64]
