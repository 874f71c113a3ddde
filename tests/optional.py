"""Tests that need an optional extra skip, naming the exact line that installs it.

``requirements.txt`` is everything the suite needs; three extras add tools that some tests run
for real: the evaluation tools whose files the ingest reads (``requirements-ingest.txt``:
Inspect AI, lm-eval and, through lm-eval, Hugging Face ``datasets``; ``zipfile-zstd`` for
Inspect's ``.eval`` zips), Ray (``requirements-cluster.txt``) and MkDocs
(``requirements-docs.txt``). ``.ci/run`` installs all three. Without one, a test that needs it
calls :func:`requires` and skips with ``pip install -r <file>`` in its reason, instead of
failing or erroring on an import.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import pytest

#: Each extra's requirements file.
EXTRAS = {
    "ingest": "requirements-ingest.txt",
    "cluster": "requirements-cluster.txt",
    "docs": "requirements-docs.txt",
}
#: The extra that installs each optional module a test imports.
MODULE_EXTRAS = {
    "inspect_ai": "ingest",
    "lm_eval": "ingest",
    "datasets": "ingest",  # a dependency of lm-eval
    "zipfile_zstd": "ingest",
    "ray": "cluster",
    "ray.data.llm": "cluster",
    "mkdocs": "docs",
}


def install_line(extra: str) -> str:
    """The command that installs ``extra``.

    >>> install_line("ingest")
    'pip install -r requirements-ingest.txt'
    """
    return f"pip install -r {EXTRAS[extra]}"


def skip_reason(module: str, extra: str | None = None) -> str:
    """Why a test skips without ``module``: the module, and the exact install line.

    >>> skip_reason("inspect_ai")
    'needs inspect_ai, an optional extra: pip install -r requirements-ingest.txt'
    """
    return f"needs {module}, an optional extra: {install_line(extra or MODULE_EXTRAS[module])}"


def requires(module: str, extra: str | None = None) -> ModuleType:
    """``module`` imported, or the calling test (or fixture) skipped with the install line of
    ``extra`` (by default the extra that :data:`MODULE_EXTRAS` gives the module)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        pytest.skip(skip_reason(module, extra))


def requires_eval_zips() -> None:
    """Inspect writes its ``.eval`` logs as zips of Zstandard members, which ``zipfile`` reads
    from Python 3.14 on; before that the ingest needs ``zipfile-zstd`` (the ingest extra)."""
    if sys.version_info < (3, 14):
        requires("zipfile_zstd")
