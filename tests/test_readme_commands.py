"""Every command the README and the documentation give runs as written (issue 16, item 3).

Each ``python -m precompute …`` and ``python bench/…`` command in the code (fenced blocks and
inline code) of README.md and of every page under ``docs/`` is run in its ``--help`` form: the
subcommand or script must exist, and every ``--option`` written must be one it takes. The
benches also run from another folder, with nothing on PYTHONPATH, as a user who copies the
command would run them. The README's first two commands are checked word for word.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_process import python_child

REPO = Path(__file__).resolve().parents[1]
BENCHES = sorted(p.name for p in (REPO / "bench").glob("*.py"))
#: Where the commands are written: the README and the documentation site's pages.
DOC_PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_INLINE = re.compile(r"`([^`]+)`")
_COMMAND = re.compile(
    r"python (?:-m (?P<module>precompute\S*)|(?P<script>bench/\S+\.py))(?P<rest>.*)"
)


def readme_commands(text: str) -> list[tuple[str, list[str]]]:
    """``(head, words after it)`` of every precompute / bench command in a page's code.

    ``head`` is ``"-m precompute"``, ``"-m precompute.x"`` (the old form) or the bench path;
    the words stop at a shell comment or ``&&``.

    >>> text = "See `python -m precompute\\nlist`.\\n```\\npython bench/a.py --n 2  # note\\n```"
    >>> readme_commands(text)
    [('bench/a.py', ['--n', '2']), ('-m precompute', ['list'])]
    """
    pieces = [line for block in _FENCED.findall(text) for line in block.splitlines()]
    pieces += [" ".join(span.split()) for span in _INLINE.findall(_FENCED.sub("", text))]
    found = []
    for piece in pieces:
        for part in piece.split("&&"):
            match = _COMMAND.search(part.split(" #", 1)[0])
            if match:
                head = f"-m {match['module']}" if match["module"] else match["script"]
                found.append((head, match["rest"].split()))
    return found


def _options(words: list[str]) -> set[str]:
    """The ``--options`` among ``words`` (``[--seed`` and ``--out,`` count as the option)."""
    return {m.group(0) for w in words if (m := re.search(r"--[a-z][a-z0-9-]*", w))}


def _readme_invocations() -> dict[tuple[str, ...], set[str]]:
    """The distinct ``--help`` invocations the commands of the README and the docs need, with
    the options each command writes."""
    wanted: dict[tuple[str, ...], set[str]] = {}
    text = "\n".join(page.read_text(encoding="utf-8") for page in DOC_PAGES)
    for head, words in readme_commands(text):
        if head.startswith("-m "):
            sub = words[:1] if words and not words[0].startswith(("-", "…")) else []
            key = (*head.split(), *sub)
        else:
            key = (head,)
        wanted.setdefault(key, set()).update(_options(words))
    return wanted


def test_the_readme_gives_precompute_and_bench_commands_in_one_form_only() -> None:
    invocations = _readme_invocations()
    assert ("-m", "precompute", "ingest") in invocations
    assert ("-m", "precompute", "datasets") in invocations
    assert {(f"bench/{name}",) for name in BENCHES} <= set(invocations)
    old = sorted(" ".join(k) for k in invocations if k[0] == "-m" and k[1] != "precompute")
    assert old == [], f"the README or docs still give the old module entry points: {old}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "invocation", sorted(_readme_invocations()), ids=lambda k: " ".join(k).replace("-m ", "")
)
def test_each_readme_command_runs_its_help_form(invocation: tuple[str, ...]) -> None:
    options = _readme_invocations()[invocation]
    result = python_child(*invocation, "--help")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout
    unknown = sorted(o for o in options if not re.search(rf"{re.escape(o)}\b", result.stdout))
    assert unknown == [], f"{' '.join(invocation)} does not take {unknown}"


@pytest.mark.parametrize("name", BENCHES)
def test_each_bench_runs_its_help_from_another_folder(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = python_child(str(REPO / "bench" / name), "--help", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage:") and "Traceback" not in result.stderr


def test_the_first_command_opens_the_app_with_the_app_requirements_only() -> None:
    """README's first command installs ``requirements-app.txt`` (no torch, no compiler) into a
    fresh venv and opens the app; the second installs the full ``requirements.txt`` and runs
    the tests (issue 27, item 4)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.split("## Start here", 1)[1].split("\n## ", 1)[0]
    first, second = (block.strip() for block in _FENCED.findall(start)[:2])
    steps = [step.strip() for step in first.split("&&")]
    assert steps[0] == "python -m venv .venv-app"
    assert steps[1] == ".venv-app/bin/pip install -r requirements-app.txt"
    assert steps[-1] == ".venv-app/bin/streamlit run app.py"
    assert "requirements.txt" not in first.replace("requirements-app.txt", "")
    # the second makes its own venv, installs everything into it and runs the tests there
    assert [step.strip() for step in second.split("&&")] == [
        "python -m venv .venv",
        ".venv/bin/pip install -r requirements.txt",
        ".venv/bin/python -m legival_core.store.assets",
        ".venv/bin/python -m pytest",
    ]
    # what the full install needs and costs is said next to it
    assert "compiler" in start and "2.7 GB" in start and "3.11" in start and "minutes" in start


def test_ci_runs_the_readme_command_as_written() -> None:
    """.ci/run reads the README's second command from README.md and runs it in two parts (the
    install, then the tests), so the README's command is what CI checks (issue 41)."""
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "python3 .ci/readme_command.py install" in ci and 'bash -c "$readme_install"' in ci
    assert "python3 .ci/readme_command.py test" in ci and 'bash -c "$readme_test"' in ci
    assert "pip install -r requirements.txt" not in ci  # never a copy of the command
    parts = {}
    for part in ("install", "test"):
        done = subprocess.run(
            [sys.executable, str(REPO / ".ci" / "readme_command.py"), part],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        parts[part] = done.stdout.strip()
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.split("## Start here", 1)[1].split("\n## ", 1)[0]
    second = " ".join(_FENCED.findall(start)[1].split())
    assert f"{parts['install']} && {parts['test']}" == second


def test_the_llama_cpp_build_settings_are_in_the_requirements_file() -> None:
    """pip builds llama-cpp-python for AVX2 from requirements.txt itself: the README's command
    needs no environment variable (a native build faults on CPUs that report AVX-512 or AMX
    without granting them)."""
    lines = [
        line for line in (REPO / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if line.startswith("llama-cpp-python")
    ]  # fmt: skip
    assert len(lines) == 1
    for define in ("GGML_NATIVE=OFF", "GGML_AVX2=ON", "GGML_FMA=ON", "GGML_F16C=ON"):
        assert f"--config-settings=cmake.define.{define}" in lines[0]
