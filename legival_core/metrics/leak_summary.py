"""Where students first succeed relative to the answer leak, per teacher
(docs/metrics/fotu-before-leak.md).

A trace *leaks* at step ``leak_k`` when its first ``leak_k`` steps already state an answer equal
to the gold (:meth:`legival_core.tasks.base.Task.answer_leak_step`, stored by the metrics stage
in ``trace_transfer.leak_k``). A student that first succeeds at a prefix ``k ≥ leak_k`` may
simply have copied the answer; FOTU before the leak (``trace_transfer.fotu_before_leak``) keeps
only the prefixes before it. This module puts the two side by side per teacher.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

__all__ = [
    "LEAK_COLUMNS",
    "first_solve_positions",
    "leak_headline",
    "leak_pairs",
    "leak_summary",
    "selection_leak_summary",
]


def first_solve_positions(rollouts: pd.DataFrame) -> pd.DataFrame:
    """The smallest prefix size ``k`` a student solves, per (trace, student).

    ``first_k`` is the smallest ``k`` (``k = 0``, the student alone, included) whose rollouts
    are correct on average at least half the time (with one greedy sample: the sample is
    correct); pairs never solved get ``<NA>``.

    >>> rows = pd.DataFrame({"trace_id": ["t"] * 4, "student": ["s"] * 4,
    ...                      "k": [0, 3, 6, 7], "correct": [0.0, 0.0, 1.0, 1.0]})
    >>> first_solve_positions(rows)
      trace_id student  first_k
    0        t       s        6
    """
    keys = ["trace_id", "student"]
    mean = rollouts.groupby([*keys, "k"], observed=True)["correct"].mean().reset_index()
    solved = mean[mean["correct"] >= 0.5]
    first = solved.groupby(keys, observed=True)["k"].min().rename("first_k")
    pairs = mean[keys].drop_duplicates().set_index(keys)
    out = pairs.join(first).reset_index()
    out["first_k"] = out["first_k"].astype("Int64")
    return out


#: Columns of :func:`leak_summary`, in order.
LEAK_COLUMNS = (
    "teacher",
    "pairs",
    "leaks",
    "first_solves",
    "at_or_after_leak",
    "share_at_or_after_leak",
    "fotu",
    "fotu_before_leak",
)


def leak_pairs(trace_transfer: pd.DataFrame, rollouts: pd.DataFrame) -> pd.DataFrame:
    """The (trace, student) pairs of ``trace_transfer`` with their first solve (``first_k``,
    :func:`first_solve_positions`) and flags ``has_leak``, ``solved`` and ``after`` (first
    solve at or after the leak): per pair, so a chunk of whole traces gives its pairs' rows
    (:func:`legival_core.metrics.rollout_partials.leak_partial`)."""
    pairs = trace_transfer[
        ["trace_id", "student", "teacher", "fotu", "leak_k", "fotu_before_leak"]
    ].merge(first_solve_positions(rollouts), on=["trace_id", "student"], how="left")
    leak = pd.to_numeric(pairs["leak_k"], errors="coerce")
    first = pd.to_numeric(pairs["first_k"], errors="coerce")
    return pairs.assign(
        has_leak=leak.notna(),
        solved=first.notna(),
        after=(first.notna() & leak.notna() & (first >= leak)),
    )


def leak_summary(trace_transfer: pd.DataFrame, rollouts: pd.DataFrame) -> pd.DataFrame:
    """Per teacher: FOTU beside FOTU before the leak, and where first solves fall.

    Columns: ``teacher``, ``pairs`` ((trace, student) pairs), ``leaks`` (pairs whose trace
    has a leak step), ``first_solves`` (pairs the student ever solves), ``at_or_after_leak``
    (first solves at a prefix ``k ≥ leak_k``), ``share_at_or_after_leak`` (the ratio of the
    last two), ``fotu`` and ``fotu_before_leak`` (means over the teacher's pairs; a pair whose
    trace leaks at step 1 or earlier has no prefix before the leak and is left out of the
    second mean, as ``trace_transfer`` leaves it NaN).

    >>> tt = pd.DataFrame({"trace_id": ["a", "b"], "student": ["s", "s"],
    ...                    "teacher": ["T", "T"], "fotu": [0.5, 0.25],
    ...                    "leak_k": pd.array([6, None], dtype="Int64"),
    ...                    "fotu_before_leak": [0.0, float("nan")]})
    >>> ro = pd.DataFrame({"trace_id": ["a"] * 3 + ["b"] * 3, "student": ["s"] * 6,
    ...                    "k": [0, 3, 6] * 2, "correct": [0, 0, 1, 0, 1, 1]})
    >>> leak_summary(tt, ro).iloc[0].to_dict()  # doctest: +NORMALIZE_WHITESPACE
    {'teacher': 'T', 'pairs': 2, 'leaks': 1, 'first_solves': 2, 'at_or_after_leak': 1,
     'share_at_or_after_leak': 0.5, 'fotu': 0.375, 'fotu_before_leak': 0.0}
    """
    columns = list(LEAK_COLUMNS)
    if trace_transfer.empty:
        return pd.DataFrame(columns=columns)
    pairs = leak_pairs(trace_transfer, rollouts)
    grouped = pairs.groupby("teacher", sort=True, observed=True)
    out = pd.DataFrame(
        {
            "pairs": grouped.size(),
            "leaks": grouped["has_leak"].sum(),
            "first_solves": grouped["solved"].sum(),
            "at_or_after_leak": grouped["after"].sum(),
            "fotu": grouped["fotu"].mean(),
            "fotu_before_leak": grouped["fotu_before_leak"].mean(),
        }
    )
    out["share_at_or_after_leak"] = out["at_or_after_leak"] / out["first_solves"].where(
        out["first_solves"] > 0
    )
    out = out.reset_index()
    for column in ("pairs", "leaks", "first_solves", "at_or_after_leak"):
        out[column] = out[column].astype(int)
    return out[columns]


def selection_leak_summary(trace_transfer: pd.DataFrame, rollouts: pd.DataFrame) -> pd.DataFrame:
    """:func:`leak_summary` of the (trace, student) pairs of ``trace_transfer`` (a selection's
    rows), reading only the rollouts of their traces: the transfer page's "Before the answer
    leaks" table, which the metrics stage stores for the default selection."""
    wanted = set(trace_transfer["trace_id"])
    return leak_summary(trace_transfer, rollouts[rollouts["trace_id"].isin(wanted)])


def leak_headline(table: pd.DataFrame, references: Sequence[str], per_teacher: str) -> str | None:
    """The answer-leak warning every FOTU headline carries (the app's pages and the published
    site): how many first solves come at or after the leak, how many model teachers have FOTU
    before the leak 0, and for how many it cannot be measured (NaN: no prefix before the leak
    was measured; never counted as 0), from a :func:`leak_summary` ``table``; reference
    teachers left out. None when no student ever solves. ``per_teacher`` says where the
    per-teacher table is.

    >>> table = pd.DataFrame({"teacher": ["a", "b", "human"], "first_solves": [4, 2, 9],
    ...     "at_or_after_leak": [3, 0, 9], "fotu_before_leak": [0.0, 0.2, 0.0]})
    >>> print(leak_headline(table, ["human"], "below"))
    ⚠ Answer leak: 3 of 6 first solves by a student come at or after the step where the trace \
already states the answer, so FOTU there may measure copying; FOTU before the leak is 0 for 1 \
of 2 model teachers (every selection of this store; per teacher below).
    """
    models = table[~table["teacher"].astype(str).isin(list(references))]
    solves, after = int(models["first_solves"].sum()), int(models["at_or_after_leak"].sum())
    if not solves:
        return None
    before = pd.to_numeric(models["fotu_before_leak"], errors="coerce")
    # "0 for 0 of 4 teachers" reads as a finding; say each clause only when it counts someone.
    # NaN is no measured prefix before the leak (left out of the mean), never a measured 0.
    n, zero, unmeasured = len(models), int(before.eq(0.0).sum()), int(before.isna().sum())
    parts = [f"is 0 for {zero} of {n} model teachers"] if zero else []
    if unmeasured:
        parts.append(
            f"cannot be measured for {unmeasured} of {n} model teachers (no prefix before the "
            "leak was measured)"
        )
    zeros = f"; FOTU before the leak {' and '.join(parts)}" if parts else ""
    return (
        f"⚠ Answer leak: {after} of {solves} first solves by a student come at or after the step "
        f"where the trace already states the answer, so FOTU there may measure copying{zeros}"
        f" (every selection of this store; per teacher {per_teacher})."
    )
