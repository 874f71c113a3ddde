"""Legi-Val core library: schemas, the results store and every metric.

Pure Python on numpy / pandas / pyarrow. Importing this package never imports torch,
streamlit, vllm or an HTTP client; modules that need a heavy dependency import it inside
the function that uses it.

From a notebook, :func:`open` is the way in (:mod:`legival_core.results`)::

    import legival_core as lv
    r = lv.open("results/demo")
    r.leaderboard()          # the app's tables as DataFrames
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from legival_core.results import Results

__version__ = "0.1.0"
# ``from legival_core import *`` must not shadow the builtin ``open``.
__all__ = ["__version__"]


def open(path: str | os.PathLike[str]) -> Results:
    """Open the results store at ``path`` read-only: :func:`legival_core.results.open`.

    Imported on first call, so ``import legival_core`` stays as cheap as it was (no pandas).
    """
    from legival_core import results

    return results.open(path)
