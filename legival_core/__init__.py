"""Legi-Val core library: schemas, the results store and every metric.

Pure Python on numpy / pandas / pyarrow. Importing this package never imports torch,
streamlit, vllm or an HTTP client; modules that need a heavy dependency import it inside
the function that uses it.

From a notebook, :func:`open` is the way in (:mod:`legival_core.results`)::

    import legival_core as lv
    r = lv.open("results/demo")
    r.leaderboard()          # the app's tables as DataFrames

This ``__init__`` only hands ``open`` on (:mod:`legival_core.opener`, which loads the front door
on first call, so importing the package loads no pandas).
"""

from __future__ import annotations

from legival_core.opener import open as open

__version__ = "0.1.0"
# ``from legival_core import *`` must not shadow the builtin ``open``.
__all__ = ["__version__"]
