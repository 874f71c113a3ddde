"""Print a part of the README's second command (the full install, then the tests), as written.

CI runs the README's command word for word, so the two can never drift apart: it reads the
command from README.md here and runs it in two parts, with the optional extras installed into
the same venv between them.

    python3 .ci/readme_command.py install   # everything before the test command
    python3 .ci/readme_command.py test      # the test command

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
TEST_COMMAND = ".venv/bin/python -m pytest"


def second_command(text: str) -> str:
    """The second fenced command of the README's "Start here" section."""
    section = text.split("## Start here", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```[^\n]*\n(.*?)```", section, re.DOTALL)
    return " ".join(blocks[1].split())


def main(argv: list[str]) -> int:
    command = second_command(README.read_text(encoding="utf-8"))
    install, sep, test = command.rpartition(" && ")
    if not sep or test != TEST_COMMAND:
        print(f"README's second command does not end with '&& {TEST_COMMAND}': {command}",
              file=sys.stderr)  # fmt: skip
        return 1
    if argv == ["install"]:
        print(install)
    elif argv == ["test"]:
        print(test)
    else:
        print("usage: readme_command.py install|test", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
