# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Explore a results store from a notebook
#
# `lv.open` reads a Legi-Val results store and gives the app's tables as pandas DataFrames:
# the same calls, with the same defaults, as the app's pages. This notebook walks through the
# bundled demo store (`results/demo`); point `STORE` at your own store to read that one.
#
# `examples/explore_a_store.py` is this notebook as a script (jupytext "percent" cells);
# `tests/test_front_door_example.py` runs it and checks that the two hold the same code.

# %%
import sys
from pathlib import Path

import plotly.express as px

# The notebook may be opened from the repository root or from examples/ (where Jupyter starts
# its kernel), the package installed or not: the repository's root, the folder that holds
# legival_core/ and results/, is found from the working folder and put on the path.
ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "legival_core").is_dir())
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import legival_core as lv  # noqa: E402  (after the path is set)

STORE = ROOT / "results" / "demo"
r = lv.open(STORE)
r.tables

# %% [markdown]
# ## Leaderboard
#
# One row per teacher, every metric averaged over the datasets, its rank (1 = best) and its
# change against the accuracy rank (`<metric>_change`, the page's Δ). Reference teachers (a
# human solution) keep their values but get no rank unless `include_references=True`.

# %%
board = r.leaderboard()
board.sort_values("fotu_rank")[
    ["teacher", "accuracy", "tokens", "fotu", "fotu_rank", "fotu_change", "reference"]
]

# %% [markdown]
# How sure is each rank? The page's rank intervals: each value's 95% interval over 1,000 paired
# resamples of the problems, the traces behind it, and its rank's 95% interval.

# %%
r.rank_intervals("fotu")

# %% [markdown]
# The page's filters are keyword arguments: one dataset, one student, a weighted composite.

# %%
one = r.leaderboard(r.datasets[0], weights={"fotu": 1, "accuracy": 1}, include_references=True)
one.sort_values("composite_rank")[["teacher", "accuracy", "fotu", "composite", "composite_rank"]]

# %% [markdown]
# ## Transfer curves
#
# μ_T(x): the share of students that answer correctly after seeing the first x of a correct
# trace, with its 95% band over 200 resamples of traces. FOTU is the area under it.

# %%
curves = r.curves()
px.line(curves, x="x", y="mean", color="teacher", title="Transfer curves (paper profile)")

# %%
r.curves(profile="release").pivot(index="bin", columns="teacher", values="mean").iloc[::10]

# %% [markdown]
# ## One trace, step by step
#
# `traces()` is the inspector's table (correct traces with rollouts first); `trace(id)` gives
# a trace's steps with their redundancy r_i (best cosine to an earlier step) and backtracking
# flags.

# %%
r.traces().head()

# %%
steps = r.trace(r.traces()["trace_id"].iloc[0])
steps[["number", "tokens", "similarity", "matched_step", "redundant", "text"]].head(10)

# %% [markdown]
# ## Correlations
#
# Spearman ρ between metrics, one point per trace (the page's default) or per teacher
# (`level="model"`); `value="p"` or `value="n"` give its p-values and point counts.

# %%
r.correlations().round(2)

# %%
r.correlations("model", value="n")

# %% [markdown]
# ## Efficiency decomposition
#
# The E0 board of one benchmark: correct answers per 1,000 tokens, with the terms it splits
# into (accuracy, r_ctx, r_logic, E[T], VŌ, κ).

# %%
r.decomposition()
