"""The transfer-curves page's data, computed from the rollouts or read from the stored
``transfer_curves`` table (:mod:`legival_core.metrics.transfer_curves`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from legival_core.metrics import transfer_curves
from legival_core.metrics.transfer_curves import (
    TransferView,
    selection_view,
    transfer_view_from_table,
)
from legival_core.views.common import filter_rows

if TYPE_CHECKING:
    from legival_core.store.store import Store


def transfer_view(
    rollouts: pd.DataFrame,
    dataset: str | None = None,
    student: str | None = None,
    profile: str = "paper",
    n_boot: int = 200,
    seed: int = 0,
) -> TransferView:
    """The transfer page's curves, hazards, baseline and summary, computed from the rollouts.

    The rows of ``dataset`` / ``student`` (None = all) are collapsed once for both the curves
    (:func:`legival_core.metrics.transfer.curve` by teacher, ``n_boot`` resamples) and the per-trace
    table (:func:`legival_core.metrics.transfer.trace_metrics`); see
    :func:`legival_core.metrics.transfer.selection_curves`. The stored ``transfer_curves`` table
    holds the same view for every selection:

    >>> from legival_core.metrics.transfer_curves import (
    ...     transfer_curve_table,
    ...     transfer_view_from_table,
    ... )
    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": ["S", "U"] * 3,
    ...     "trace_id": "a", "problem_id": "p", "k": [0, 0, 1, 1, 2, 2], "m": 2,
    ...     "correct": [0, 0, 0, 1, 1, 1]})
    >>> table = transfer_curve_table(rollouts, ["paper"], n_boot=0)
    >>> stored = transfer_view_from_table(table, None, "S", "paper", 0)
    >>> stored.curves.equals(transfer_view(rollouts, None, "S", "paper", 0).curves)
    True
    """
    from legival_core.metrics.transfer import selection_curves

    selected = filter_rows(rollouts, dataset=dataset, student=student)
    ((curves, per_trace),) = selection_curves(
        selected, [{}], by="teacher", n_boot=n_boot, seed=seed, profile=profile
    )
    return selection_view(curves, per_trace, profile)


def stored_or_computed_view(
    table: pd.DataFrame | None,
    load_rollouts: Callable[[], pd.DataFrame],
    dataset: str | None,
    student: str | None,
    profile: str,
    n_boot: int,
) -> TransferView:
    """The transfer view of one selection: read from the stored ``transfer_curves`` ``table``
    when it holds the selection, else computed from the rollouts (``load_rollouts`` is called
    only then, so a store with fresh curves never reads its rollouts). The Transfer page and
    ``lv.open(...).transfer`` both call it."""
    view = (
        transfer_view_from_table(table, dataset, student, profile, n_boot)
        if table is not None
        else None
    )
    if view is None:
        view = transfer_view(load_rollouts(), dataset, student, profile, n_boot)
    return view


def observed_coverage(
    rollouts: pd.DataFrame,
    dataset: str | None = None,
    student: str | None = None,
    profile: str = "paper",
) -> pd.DataFrame:
    """:func:`legival_core.metrics.transfer_curves.observed_coverage` of the rows of
    ``dataset`` / ``student`` (None = all)."""
    selected = filter_rows(rollouts, dataset=dataset, student=student)
    return transfer_curves.observed_coverage(selected, profile)


def first_measured_positions(
    rollouts: pd.DataFrame, dataset: str | None = None, student: str | None = None
) -> pd.DataFrame:
    """:func:`legival_core.metrics.transfer_curves.first_measured_positions` of the rows of
    ``dataset`` / ``student`` (None = all)."""
    selected = filter_rows(rollouts, dataset=dataset, student=student)
    return transfer_curves.first_measured_positions(selected)


def board_fotu_traces(
    teacher_metrics: pd.DataFrame,
    trace_transfer: pd.DataFrame,
    support: str = "common",
    outside: Sequence[str] = (),
) -> pd.Series:
    """Per teacher, the traces behind its leaderboard FOTU: the traces of ``trace_transfer``
    (already filtered to the selection) with a FOTU value, on the datasets that FOTU is
    averaged over (:func:`legival_core.stats.support.teacher_means` with the same ``support``
    and ``outside``, from ``teacher_metrics``: under ``"common"`` the datasets every compared
    teacher covers, under ``"all"`` every dataset the teacher covers).

    The count the Transfer page shows beside that FOTU, so a number and its n come from the
    same rows.

    >>> tm = pd.DataFrame({"teacher": ["a", "a", "b", "b"], "dataset": ["x", "y", "x", "y"],
    ...     "fotu": [0.1, 0.5, 0.3, None]})
    >>> tt = pd.DataFrame({"teacher": ["a", "a", "a", "a", "b"],
    ...     "dataset": ["x", "x", "y", "y", "x"], "trace_id": ["1", "1", "2", "3", "4"],
    ...     "fotu": [0.1, 0.2, 0.5, None, 0.3]})
    >>> board_fotu_traces(tm, tt).to_dict()  # common support: dataset x only
    {'a': 1, 'b': 1}
    >>> board_fotu_traces(tm, tt, support="all").to_dict()  # a: x and y (trace 3 has no FOTU)
    {'a': 2, 'b': 1}
    """
    from legival_core.stats.support import covered_matrix, support_mask

    covered = covered_matrix(teacher_metrics, "fotu")
    used = covered & support_mask(covered, support, outside)
    rows = trace_transfer[pd.to_numeric(trace_transfer["fotu"], errors="coerce").notna()]
    keys = list(zip(rows["teacher"].astype(str), rows["dataset"].astype(str), strict=True))
    keep = [t in used.index and d in used.columns and bool(used.loc[t, d]) for t, d in keys]
    counted = rows[keep].assign(teacher=rows["teacher"].astype(str)[keep])
    per_teacher = counted.groupby("teacher")["trace_id"].nunique()
    return per_teacher.reindex(used.index, fill_value=0).astype("int64").rename("n_traces")


def board_fotu(
    teacher_metrics: pd.DataFrame,
    trace_transfer: pd.DataFrame,
    per_student: pd.DataFrame | None,
    dataset: str | None,
    student: str | None,
    support: str = "common",
    outside: Sequence[str] = (),
) -> pd.DataFrame:
    """The leaderboard's FOTU of each teacher for a selection (index: teacher): ``fotu``, the
    mean over datasets of the stored per-(teacher, dataset) FOTU of ``teacher_metrics`` (of
    the one ``student`` when chosen, from ``per_student``), over the datasets ``support``
    names as the leaderboard averages it (``outside`` teachers do not narrow them), and ``n``,
    the traces of ``trace_transfer`` on those datasets that FOTU rests on
    (:func:`board_fotu_traces`).

    >>> tm = pd.DataFrame({"teacher": ["a", "a", "b"], "dataset": ["x", "y", "x"],
    ...     "fotu": [0.2, 0.6, 0.3]})
    >>> tt = pd.DataFrame({"teacher": ["a", "a", "b"], "dataset": ["x", "y", "x"],
    ...     "student": ["s", "s", "s"], "trace_id": ["1", "2", "3"], "fotu": [0.2, 0.6, 0.3]})
    >>> board_fotu(tm, tt, None, None, None).to_dict()  # common support: x only
    {'fotu': {'a': 0.2, 'b': 0.3}, 'n': {'a': 1, 'b': 1}}
    >>> board_fotu(tm, tt, None, None, None, "all")["fotu"].to_dict()  # a: (0.2 + 0.6) / 2
    {'a': 0.4, 'b': 0.3}
    """
    from legival_core.stats.support import teacher_means
    from legival_core.views.leaderboard import with_student

    frame = filter_rows(teacher_metrics, dataset=dataset)
    if student is not None and per_student is not None:
        frame = with_student(frame, per_student, student)
    frame = frame.assign(teacher=frame["teacher"].astype(str))
    means = teacher_means(frame, ["fotu"], support=support, outside=outside)
    pairs = filter_rows(trace_transfer, dataset=dataset, student=student)
    counts = board_fotu_traces(frame, pairs, support, outside)
    out = means.set_index("teacher")[["fotu"]]
    return out.assign(n=counts.reindex(out.index, fill_value=0))


def has_gaps(view: TransferView, picked: Sequence[str]) -> bool:
    """Whether a picked teacher's curve has bins without a value (no trace measured there:
    the release profile fills nothing in), so its line joins measured bins only.

    >>> import types
    >>> curves = pd.DataFrame({"teacher": ["a", "a", "b"], "mean": [0.1, None, 0.2]})
    >>> view = types.SimpleNamespace(curves=curves)
    >>> has_gaps(view, ["a"]), has_gaps(view, ["b"])
    (True, False)
    """
    return bool(view.curves[view.curves["teacher"].isin(list(picked))]["mean"].isna().any())


def store_leak_table(
    store: Store, page_results: pd.DataFrame | None, manifest: Mapping[str, Any]
) -> pd.DataFrame | None:
    """The leak table of every (trace, student) pair of ``store``
    (:func:`legival_core.metrics.leak_summary.leak_summary`): the Transfer page's table of all
    datasets and students as the metrics stage stored it in ``page_results`` when current,
    else computed from the store's leak points and rollouts. None when the store has no leak
    points (``trace_transfer`` without ``leak_k``) or no rollouts."""
    from legival_core.metrics.leak_summary import leak_summary
    from legival_core.metrics.page_results import TransferSelection, stored_frame

    if not (store.has("trace_transfer") and store.has("rollouts")):
        return None
    table = stored_frame(page_results, manifest, "transfer_leaks", TransferSelection())
    if table is not None:
        return table
    pairs = store.read("trace_transfer")
    if not {"leak_k", "fotu_before_leak"} <= set(pairs.columns):
        return None
    rollouts = store.read("rollouts", columns=["trace_id", "student", "k", "correct"])
    return leak_summary(pairs, rollouts)


#: The command that gives a store its students' rollouts, hence its transfer curves and FOTU:
#: the demo's two packaged students on the CPU (``precompute.students``).
ROLLOUTS_COMMAND = "python -m precompute run --store {store} --students default"


def rollouts_command(store: str | None) -> str:
    """:data:`ROLLOUTS_COMMAND` for the store at ``store``, quoted for a POSIX shell; ``DIR``
    in its place when the path is not to be shown (read-only mode shows no store paths).

    >>> rollouts_command("results/run 1")
    "python -m precompute run --store 'results/run 1' --students default"
    >>> rollouts_command(None)
    'python -m precompute run --store DIR --students default'
    """
    import shlex

    return ROLLOUTS_COMMAND.format(store=shlex.quote(store) if store is not None else "DIR")


def no_rollouts_message(label: str) -> str:
    """What the Transfer page says of a store without rollouts (``label``: the store's name,
    already escaped for Markdown); the command itself goes below it as a code block."""
    return (
        f"The store '{label}' has no student rollouts, so it has no transfer curves and no "
        "transfer utility (FOTU). The command below adds them with the demo's two students, "
        "SmolLM2-135M and Gemma 3 270M (packaged, on the CPU, no network): it first says how "
        "many rollouts it will run and about how long they take, and a rerun resumes where a "
        "stopped run left off. Or pick another store in the sidebar."
    )
