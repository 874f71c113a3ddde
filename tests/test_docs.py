"""The README stays a short map, and no link of it or of the documentation pages is dead
(issue 30, item 3).

``mkdocs build --strict`` (run by ``.ci/run``) checks the links between pages of ``docs/``
and their anchors; this checks what MkDocs does not see: the relative links of the README and
of CONTRIBUTING.md, and links from ``docs/`` to files outside it, which must name files that
exist.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README_LIMIT = 12_000

_FENCED = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)
_INLINE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def relative_links(markdown: str) -> list[str]:
    """The targets of the Markdown links and images in ``markdown`` that point at files:
    not URLs, not in-page anchors, not inside code.

    >>> relative_links("[a](docs/x.md#y) ![i](img/p.png) [w](https://e.org) [t](#top) `[c](no.md)`")
    ['docs/x.md', 'img/p.png']
    """
    text = _INLINE.sub("", _FENCED.sub("", markdown))
    found = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        found.append(target.split("#", 1)[0])
    return found


def dead_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file does not exist, each as ``page: target``."""
    return [
        f"{page.relative_to(REPO)}: {target}"
        for target in relative_links(page.read_text(encoding="utf-8"))
        if not (page.parent / target).exists()
    ]


def test_the_readme_is_at_most_12000_characters() -> None:
    size = len((REPO / "README.md").read_text(encoding="utf-8"))
    assert size <= README_LIMIT, f"README.md has {size} characters; move detail into docs/"


def test_the_readme_shows_three_screenshots_of_the_app() -> None:
    # what a reader sees before installing anything: the leaderboard, the transfer curves and
    # (issue 42) the trace inspector with its maths typeset
    text = (REPO / "README.md").read_text(encoding="utf-8")
    images = [t for t in relative_links(text) if t.endswith(".png")]
    assert images == [
        "docs/img/leaderboard.png",
        "docs/img/transfer.png",
        "docs/img/inspector.png",
    ], images
    assert all((REPO / image).stat().st_size > 50_000 for image in images)


def test_every_relative_link_of_the_readme_and_the_docs_names_a_file_that_exists() -> None:
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
    assert len(pages) > 20  # the docs pages are there to check
    assert sum(len(relative_links(p.read_text(encoding="utf-8"))) for p in pages) > 30
    dead = [entry for page in pages for entry in dead_links(page)]
    assert dead == []


def test_the_link_check_sees_a_dead_link(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("x", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#a) [gone](missing.md) ![img](img/none.png)", encoding="utf-8")
    targets = [t for t in relative_links(page.read_text()) if not (tmp_path / t).exists()]
    assert targets == ["missing.md", "img/none.png"]


def test_the_readme_links_every_docs_page_it_names_by_topic() -> None:
    """Each topic page of the site is one link away from the README."""
    links = set(relative_links((REPO / "README.md").read_text(encoding="utf-8")))
    for page in (
        "index",
        "bring-your-traces",
        "running-at-scale",
        "metrics/index",
        "profiles",
        "sharing",
        "reliability",
        "benchmarks",
        "design",
        "offline-assets",
        "testing",
    ):
        assert f"docs/{page}.md" in links, page


#: Names of notes that were never in the repository; the docs pages hold that content now.
#: Spelt in pieces so that this file does not match itself.
_GONE = re.compile(
    r"\b(?:"
    + "|".join(("SP" + "EC", "OFF" + r"LINE\.md", "TEST" + r"ING\.md", "DES" + "IGN"))
    + r")\b(?![_A-Z])"
)
_TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".yml", ".yaml", ".sh", ".cfg", ".ini"}
_SKIP = {".git", "results", "site", ".venv", ".venv-app", ".venv-vllm", "node_modules"}


def test_nothing_cites_notes_that_are_not_in_the_repository() -> None:
    """Code, comments, docstrings and pages cite docs pages, never the old private notes."""
    files = [REPO / ".ci" / "run", REPO / "Dockerfile"]
    for folder, subfolders, names in os.walk(REPO):
        # pruned while walking: the virtual environments alone hold tens of thousands of files
        subfolders[:] = sorted(name for name in subfolders if name not in _SKIP)
        files.extend(Path(folder, n) for n in sorted(names) if Path(n).suffix in _TEXT_SUFFIXES)
    assert len(files) > 100
    cited = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()[:80]}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _GONE.search(line)
    ]
    assert cited == []


# --- the reliability pages say what the code does (issue 40, item 18) ---------------------------


def _paragraph(text: str, opening: str) -> str:
    """The paragraph (or list item) of ``text`` that starts with ``opening``, on one line."""
    after = text.split(opening, 1)[1]
    return " ".join(re.split(r"\n\n|\n- ", after, maxsplit=1)[0].split())


def test_security_gives_the_exit_code_a_full_disk_gives_ingest() -> None:
    """SECURITY.md said a full-disk ingest exits 2; it exits 4, the command line's store code
    (tests/test_crash_safety.py runs it on a filled tmpfs)."""
    from precompute.cli import EXIT_STORE

    security = (REPO / "SECURITY.md").read_text(encoding="utf-8")
    paragraph = _paragraph(security, "**A full disk is one line")
    assert set(re.findall(r"exit `(\d+)`", paragraph)) == {str(EXIT_STORE)}, paragraph
    assert "ingest says which store it cannot write (exit `4`)" in paragraph


def test_reliability_says_how_a_problems_file_treats_a_bad_line(tmp_path: Path) -> None:
    """docs/reliability.md said the good rows of every hostile file are kept; a problems file
    fails whole on a line that is not JSON, on purpose (a benchmark must not silently lose a
    problem), and skips only rows of the wrong shape. The page says so, and the loader does
    what the page says."""
    import pytest

    from precompute.datasets import DatasetUnreadableError, load_local

    reliability = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    bullet = _paragraph(reliability, "- **Hostile files**")
    assert "a line that is not JSON fails the whole file (exit 6, naming the line)" in bullet
    assert "is skipped and listed with its row and field while the others load" in bullet
    good = '{"problem_id": "a", "prompt": "1+1?", "gold": "2"}\n'
    broken = tmp_path / "broken.jsonl"
    broken.write_text(good + "{not json\n", encoding="utf-8")
    with pytest.raises(DatasetUnreadableError, match="line 2: invalid JSON"):
        load_local(broken, dataset="d")
    shaped = tmp_path / "shaped.jsonl"
    shaped.write_text(good + '{"problem_id": "b", "prompt": "2+2?"}\n', encoding="utf-8")
    frame = load_local(shaped, dataset="d")
    assert frame["problem_id"].tolist() == ["d/a"]
    assert "row 2, field 'gold'" in frame.attrs["skipped"][0]


def sections_that_start_mid_sentence(markdown: str) -> list[str]:
    """The headings whose first line of text starts with a lower-case word: a section that
    begins mid-sentence lost its opening words. A name written in lower case with capitals
    inside (``vLLM``) and lines in code are not sentences' starts.

    >>> sections_that_start_mid_sentence("# A\\n\\nread their files.\\n## B\\n\\nvLLM serve\\n")
    ['# A']
    """
    lines = _FENCED.sub("", markdown).splitlines()
    found = []
    for index, line in enumerate(lines):
        if not re.match(r"#{1,6} ", line):
            continue
        text = next((t for t in lines[index + 1 :] if t.strip()), "")
        if re.match(r"[a-z]+\b(?![\w`])", text):
            found.append(line)
    return found


def test_no_section_of_the_readme_or_the_docs_begins_mid_sentence() -> None:
    pages = [
        REPO / "README.md",
        REPO / "SECURITY.md",
        REPO / "CONTRIBUTING.md",
        *sorted((REPO / "docs").rglob("*.md")),
    ]
    broken = [
        f"{page.relative_to(REPO)}: {heading}"
        for page in pages
        for heading in sections_that_start_mid_sentence(page.read_text(encoding="utf-8"))
    ]
    assert broken == []
