"""MkDocs hook: show the docstrings' doctests as code blocks in the API reference.

The library's docstrings carry doctests as plain ``>>>`` lines (pytest runs them with
``--doctest-modules``). Markdown would read them as prose, and output such as ``['a', 'b']``
as a reference link that strict mode reports as broken. This adds a Markdown preprocessor that
fences every run of lines that starts with ``>>>`` and ends at a blank line. It is registered
in ``on_config`` before mkdocstrings reads the extension list, so docstrings get it too.
"""

from __future__ import annotations

from typing import Any

from markdown import Extension, Markdown
from markdown.preprocessors import Preprocessor
from mkdocs.plugins import event_priority


class _DoctestFence(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        in_fence = False  # inside a fence the author wrote: leave it alone
        block: list[str] = []
        for line in [*lines, ""]:
            stripped = line.lstrip()
            if not block and stripped.startswith(("```", "~~~")):
                in_fence = not in_fence
            if not in_fence and not block and stripped.startswith(">>>"):
                indent = line[: len(line) - len(stripped)]
                block = [line]
                continue
            if block:
                if stripped:
                    block.append(line)
                    continue
                out += ["", f"{indent}```pycon", *block, f"{indent}```", ""]
                block = []
            out.append(line)
        return out[:-1]


class DoctestFenceExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:
        md.preprocessors.register(_DoctestFence(md), "doctest_fence", 29)


@event_priority(100)  # before mkdocstrings copies the extension list
def on_config(config: Any) -> Any:
    config.markdown_extensions.append(DoctestFenceExtension())
    return config
