"""Legi-Val core library: schemas, the results store and every metric.

Pure Python on numpy / pandas / pyarrow. Importing this package never imports torch,
streamlit, vllm or an HTTP client; modules that need a heavy dependency import it inside
the function that uses it.

From a notebook, :func:`open` is the way in (:mod:`legival_core.results`)::

    import legival_core as lv
    r = lv.open("results/demo")
    r.leaderboard()          # the app's tables as DataFrames

The library is in rooms, one subpackage each, and each room's docstring names the rooms it
may import (``tests/test_layers.py`` holds the code to them). Two rules hold for every room
below the views: it never imports ``legival_core.views`` (the app's data preparation) nor
``legival_core.results`` (the notebooks' front door, which sits above the views); and its
``__init__`` imports nothing but the room's registry where it has one (``tasks``), so a module
is imported by its full name (``from legival_core.metrics import efficiency``) and importing
one module never loads its neighbours.

This ``__init__`` only hands ``open`` on (:mod:`legival_core.opener`, which loads the front door
on first call, so importing the package loads no pandas).
"""

from __future__ import annotations

from legival_core.opener import open as open

__version__ = "0.1.0"
# ``from legival_core import *`` must not shadow the builtin ``open``.
__all__ = ["__version__"]
