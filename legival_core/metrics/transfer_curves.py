"""The stored ``transfer_curves`` table: every view the transfer page can show.

Built by the metrics stage (:func:`transfer_curve_table`) and read by the app and the
static snapshot (:func:`transfer_view_from_table`), with a stamp saying which state of the
rollouts and which curve definitions it was computed from (:func:`rollouts_stamp`).
Each view holds the mean transfer curve per teacher with its bootstrap band, the hazard
histogram, the student baseline and the per-teacher summary (Legi-Val, arXiv 2603.20508).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from legival_core.metrics.transfer import CURVE_COLUMNS

__all__ = [
    "ALL_ROWS",
    "SUMMARY_COLUMNS",
    "TRANSFER_CURVES_VERSION",
    "TransferView",
    "first_measured_positions",
    "fresh_transfer_curves",
    "hazard_histograms",
    "observed_coverage",
    "rollouts_stamp",
    "selection_view",
    "student_baseline",
    "student_metrics_from_curves",
    "transfer_curve_table",
    "transfer_options",
    "transfer_summary",
    "transfer_view_from_table",
]

# ---------------------------------------------------------------------------------------------
# Transfer curves
# ---------------------------------------------------------------------------------------------


def hazard_histograms(trace_transfer: pd.DataFrame, by: str = "teacher") -> pd.DataFrame:
    """Share of each teacher's (trace, student) pairs whose hazard falls in each bin.

    Long table ``<by>, bin (1..50), share`` plus one row per group with ``bin`` 0 holding the
    never-solved share; shares of a group add up to 1 over bins 0..50. SOTU is the normalised
    entropy of the bins 1..50 part (Legi-Val, arXiv 2603.20508).

    >>> tt = pd.DataFrame({"teacher": "T", "hazard_bin": pd.array([3, 3, None, 50], "Int64"),
    ...                    "fotu": 0.5})
    >>> h = hazard_histograms(tt)
    >>> h[h.share > 0][["bin", "share"]].values.tolist()
    [[0.0, 0.25], [3.0, 0.5], [50.0, 0.25]]
    """
    from legival_core.metrics.transfer import N_BINS

    rows = []
    # Pairs without any prefix k >= 1 (NaN FOTU) have no hazard to report.
    usable = (
        trace_transfer[trace_transfer["fotu"].notna()]
        if "fotu" in trace_transfer
        else (trace_transfer)
    )
    for key, group in usable.groupby(by, observed=True, sort=True):
        bins = pd.array(group["hazard_bin"], dtype="Int64").to_numpy(dtype=np.int64, na_value=0)
        counts = np.bincount(bins, minlength=N_BINS + 1)[: N_BINS + 1]
        shares = counts / max(1, len(bins))
        rows.append(pd.DataFrame({by: key, "bin": np.arange(N_BINS + 1), "share": shares}))
    if not rows:
        return pd.DataFrame(columns=[by, "bin", "share"])
    return pd.concat(rows, ignore_index=True)


def transfer_summary(
    curves: pd.DataFrame, per_trace: pd.DataFrame, profile: str = "paper"
) -> pd.DataFrame:
    """Per teacher: FOTU, SOTU, never-solved share and baseline, from what the curves page has.

    ``curves`` is :func:`legival_core.metrics.transfer.curve` by teacher and ``per_trace`` is
    :func:`legival_core.metrics.transfer.trace_metrics` on the same rollouts, so no third pass over
    the rollouts is needed: FOTU = mean of μ_T over the (non-empty) bins; SOTU = mean over
    the students with a solved trace of :func:`legival_core.metrics.transfer.sotu` of their hazards
    (``release``: divided by log of the number of bins μ_T has data in); never solved = mean over
    students of the share of traces without a hazard; regression rate = mean over students of
    the mean over traces; baseline = the curve's baseline. These
    equal :func:`legival_core.metrics.transfer.teacher_metrics` grouped by teacher.
    """
    from legival_core.metrics.transfer import sotu

    usable = per_trace[per_trace["fotu"].notna()]
    rows = []
    for teacher, group in curves.groupby("teacher", observed=True, sort=True):
        pairs = usable[usable["teacher"] == teacher]
        by_student = pairs.groupby("student", observed=True)
        centres = int(group["mean"].notna().sum())
        per_student = np.array(
            [sotu(g["hazard_bin"], profile, curve_centres=centres) for _, g in by_student]
        )
        solved = per_student[~np.isnan(per_student)]
        rows.append(
            {
                "teacher": teacher,
                "n_traces": int(group["n_traces"].iloc[0]),
                "n_students": int(pairs["student"].nunique()),
                "fotu": float(np.nanmean(group["mean"].to_numpy(dtype=float))),
                "sotu": float(solved.mean()) if len(solved) else math.nan,
                "never_solved": float(
                    by_student["hazard_bin"].apply(lambda h: h.isna().mean()).mean()
                )
                if len(pairs)
                else math.nan,
                "regression_rate": float(by_student["regression_rate"].mean().mean())
                if len(pairs)
                else math.nan,
                "baseline": float(group["baseline"].iloc[0]),
            }
        )
    out = pd.DataFrame(rows)
    if len(out):
        out["lift"] = out["fotu"] - out["baseline"]
    return out


#: Columns of the per-teacher summary the transfer page shows, in order.
SUMMARY_COLUMNS = (
    "teacher",
    "n_traces",
    "n_students",
    "fotu",
    "sotu",
    "never_solved",
    "regression_rate",
    "baseline",
    "lift",
)
#: ``dataset`` / ``student`` of a ``transfer_curves`` row that pools every dataset / student.
ALL_ROWS = "*"
#: Poisson bootstrap replicates over traces behind the transfer curves' 95% bands
#: (:func:`legival_core.metrics.transfer.curve`): the metrics stage stores its views with these,
#: and the app's page, the published site and the front door draw with them.
BAND_RESAMPLES = 200
_CURVE_VIEW_COLUMNS = ("teacher", *CURVE_COLUMNS)
_BAND_COLUMNS = ("lo", "hi", "baseline_lo", "baseline_hi")


@dataclass(frozen=True)
class TransferView:
    """What the transfer-curves page draws for one selection (dataset, student, profile).

    Attributes:
        curves: :func:`legival_core.metrics.transfer.curve` by teacher (teacher as text, sorted).
        hazards: :func:`hazard_histograms` of the selection's (trace, student) pairs.
        baseline: :func:`student_baseline` of the selection (the student alone, k = 0).
        summary: :func:`transfer_summary`, columns :data:`SUMMARY_COLUMNS`.
    """

    curves: pd.DataFrame
    hazards: pd.DataFrame
    baseline: float
    summary: pd.DataFrame


def selection_view(curves: pd.DataFrame, per_trace: pd.DataFrame, profile: str) -> TransferView:
    """The :class:`TransferView` of one selection from its collapsed rollouts: ``curves`` and
    ``per_trace`` are one result of :func:`legival_core.metrics.transfer.selection_curves`."""
    curves = curves.assign(teacher=curves["teacher"].astype(str))
    curves = curves.sort_values("teacher", kind="stable").reset_index(drop=True)
    per_trace = per_trace.assign(teacher=per_trace["teacher"].astype(str))
    summary = transfer_summary(curves, per_trace, profile)
    if summary.empty:
        summary = pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    return TransferView(
        curves=curves[list(_CURVE_VIEW_COLUMNS)],
        hazards=hazard_histograms(per_trace),
        baseline=student_baseline(per_trace),
        summary=summary[list(SUMMARY_COLUMNS)],
    )


#: definition changes (2: the ``release`` profile pools k = 0 into centre 1, bins in floating
#: point and normalises SOTU by the curve's centres; 3: the bands are Poisson bootstrap bands
#: keyed by trace, which merge chunk by chunk), so tables computed before are stale.
TRANSFER_CURVES_VERSION = 3


def rollouts_stamp(manifest: Mapping[str, Any]) -> str:
    """Which state of a store's ``rollouts`` table, and which curve definitions, a derived
    table was computed from.

    Every write or merge of a table raises its ``last_seq`` in the manifest, so a stored
    ``transfer_curves`` table whose stamp differs from the store's is stale; so is one made
    under an older :data:`TRANSFER_CURVES_VERSION`.

    >>> rollouts_stamp({"tables": {"rollouts": {"last_seq": 3, "rows": 120}}})
    'curves v3, seq 3, rows 120'
    """
    entry = (manifest.get("tables") or {}).get("rollouts") or {}
    seq, rows = int(entry.get("last_seq") or 0), int(entry.get("rows") or 0)
    return f"curves v{TRANSFER_CURVES_VERSION}, seq {seq}, rows {rows}"


def fresh_transfer_curves(table: pd.DataFrame, manifest: Mapping[str, Any]) -> pd.DataFrame | None:
    """``table`` (a store's ``transfer_curves``) if it was computed from the store's current
    rollouts (see :func:`rollouts_stamp`), else None.

    >>> manifest = {"tables": {"rollouts": {"last_seq": 3, "rows": 120}}}
    >>> table = pd.DataFrame({"rollouts_stamp": ["curves v3, seq 3, rows 120"]})
    >>> fresh_transfer_curves(table, manifest) is table
    True
    >>> old = pd.DataFrame({"rollouts_stamp": ["seq 3, rows 120"]})  # older definitions
    >>> fresh_transfer_curves(old, manifest) is None
    True
    >>> manifest["tables"]["rollouts"]["last_seq"] = 4  # rollouts written since
    >>> fresh_transfer_curves(table, manifest) is None
    True
    """
    if table.empty or "rollouts_stamp" not in table:
        return None
    return table if (table["rollouts_stamp"] == rollouts_stamp(manifest)).all() else None


#: Per-cell transfer metrics the ``transfer_curves`` table repeats on every bin of a cell.
CELL_METRICS = ("n_traces", "n_students", "fotu", "sotu", "regression_rate", "never_solved",
                "baseline", "lift")  # fmt: skip


def student_metrics_from_curves(table: pd.DataFrame, profile: str) -> pd.DataFrame:
    """Transfer metrics per (teacher, dataset, student) read from a ``transfer_curves`` table:
    the rows of one dataset and one student (not the pooled ``*`` views) hold the same values
    as :func:`legival_core.metrics.transfer.teacher_metrics` grouped by teacher, dataset and student
    without bootstrap (a test compares them), so pages need not regroup every rollout.

    >>> table = pd.DataFrame({"profile": "paper", "dataset": ["d", "d", "*"],
    ...     "student": ["s", "s", "s"], "teacher": "T", "bin": [1, 2, 1], "fotu": 0.5,
    ...     "sotu": 0.2, "regression_rate": 0.0, "never_solved": 0.1, "baseline": 0.0,
    ...     "lift": 0.5, "n_traces": 4, "n_students": 1})
    >>> student_metrics_from_curves(table, "paper")[["teacher", "dataset", "fotu"]].values.tolist()
    [['T', 'd', 0.5]]
    """
    keys = ["teacher", "dataset", "student"]
    cells = table[
        (table["profile"] == profile)
        & (table["dataset"] != ALL_ROWS)
        & (table["student"] != ALL_ROWS)
    ]
    cells = cells.drop_duplicates(keys).sort_values(keys)
    return cells[[*keys, *CELL_METRICS]].reset_index(drop=True)


def _check_selectable(values: Sequence[str], column: str) -> None:
    if ALL_ROWS in values:
        from legival_core.store.schema import SchemaError

        raise SchemaError(
            "transfer_curves",
            f"a {column} is literally named {ALL_ROWS!r}, which the table uses for 'all'",
            column=column,
        )


def transfer_curve_table(
    rollouts: pd.DataFrame,
    profiles: Sequence[str] | None = None,
    *,
    n_boot: int = 200,
    seed: int = 0,
    alpha: float = 0.05,
    stamp: str = "",
) -> pd.DataFrame:
    """Rows of the store's ``transfer_curves`` table: every view the transfer page can show.

    For each profile (default: every registered one), each dataset and each student, plus
    ``"*"`` (:data:`ALL_ROWS`) for all of them, it holds the :class:`TransferView` that the
    transfer page (:func:`legival_core.views.transfer_view`) computes for that selection: the
    mean curve with its ``n_boot`` band (bins 1..50), the hazard shares (bin 0 = never
    solved), the teacher summary and the selection's student baseline (repeated on each of a
    teacher's rows). The rollouts are collapsed once per profile
    (:func:`legival_core.metrics.transfer.selection_curves`). The bands are Poisson bootstrap
    bands keyed by trace (:func:`legival_core.metrics.transfer.curve`), so the same table can
    be built one chunk of traces at a time
    (:func:`legival_core.metrics.rollout_partials.curve_rows`).
    ``stamp`` is :func:`rollouts_stamp` of the store the rollouts were read from.

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": ["S", "U"] * 3,
    ...     "trace_id": "a", "problem_id": "p", "k": [0, 0, 1, 1, 2, 2], "m": 2,
    ...     "correct": [0, 0, 0, 1, 1, 1]})
    >>> table = transfer_curve_table(rollouts, ["paper"], n_boot=0)
    >>> sorted(set(zip(table.dataset, table.student)))
    [('*', '*'), ('*', 'S'), ('*', 'U'), ('D', '*'), ('D', 'S'), ('D', 'U')]
    >>> view = transfer_view_from_table(table, None, "S", "paper", 0)
    >>> view.curves["mean"].iloc[[24, 37, 49]].round(2).tolist()  # 0 at bin 25, 1 at bin 50
    [0.0, 0.52, 1.0]
    """
    from legival_core.metrics.transfer import PROFILES, selection_curves

    chosen = list(PROFILES) if profiles is None else list(profiles)
    datasets = sorted({str(v) for v in pd.unique(rollouts["dataset"])}) if len(rollouts) else []
    students = sorted({str(v) for v in pd.unique(rollouts["student"])}) if len(rollouts) else []
    _check_selectable(datasets, "dataset")
    _check_selectable(students, "student")
    selections = [(d, s) for d in [None, *datasets] for s in [None, *students]]

    def views() -> Iterator[tuple[str, str | None, str | None, TransferView]]:
        for profile in chosen:
            results = selection_curves(
                rollouts,
                [{"dataset": d, "student": s} for d, s in selections],
                by="teacher",
                n_boot=n_boot,
                seed=seed,
                profile=profile,
                alpha=alpha,
            )
            for (dataset, student), (curves, per_trace) in zip(selections, results, strict=True):
                yield profile, dataset, student, selection_view(curves, per_trace, profile)

    return table_of_views(views(), n_boot=n_boot, seed=seed, alpha=alpha, stamp=stamp)


def table_of_views(
    views: Iterable[tuple[str, str | None, str | None, TransferView | None]],
    *,
    n_boot: int,
    seed: int,
    alpha: float,
    stamp: str,
) -> pd.DataFrame:
    """The ``transfer_curves`` rows of each (profile, dataset, student, view): the view's rows
    with the selection (None = every dataset / student, stored as :data:`ALL_ROWS`), the band's
    resamples, seed and level and the rollouts' stamp; views without a curve add nothing."""
    from legival_core.store.schema import spec

    frames = [
        _view_rows(view).assign(
            profile=profile,
            dataset=ALL_ROWS if dataset is None else dataset,
            student=ALL_ROWS if student is None else student,
            n_boot=n_boot,
            seed=seed,
            alpha=alpha,
            rollouts_stamp=stamp,
        )
        for profile, dataset, student, view in views
        if view is not None and not view.curves.empty
    ]
    columns = spec("transfer_curves").columns
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def _view_rows(view: TransferView) -> pd.DataFrame:
    """One :class:`TransferView` as ``transfer_curves`` rows (bins 0..50 per teacher)."""
    curves = view.curves
    never = curves.drop_duplicates("teacher").assign(bin=0, x=math.nan, mean=math.nan)
    never = never.assign(lo=math.nan, hi=math.nan)
    rows = pd.concat([never, curves], ignore_index=True)
    rows = rows.sort_values(["teacher", "bin"], kind="stable")
    hazards = view.hazards.rename(columns={"share": "hazard_share"})
    rows = rows.merge(hazards, on=["teacher", "bin"], how="left")
    summary = view.summary.drop(columns=["n_traces", "baseline"])
    rows = rows.merge(summary, on="teacher", how="left")
    return rows.assign(student_baseline=view.baseline)


def transfer_options(table: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The datasets and students a ``transfer_curves`` table has views for (sorted).

    >>> transfer_options(pd.DataFrame({"dataset": ["*", "b", "a"], "student": ["*", "s", "s"]}))
    (['a', 'b'], ['s'])
    """
    datasets = sorted({str(d) for d in table["dataset"].unique()} - {ALL_ROWS})
    students = sorted({str(s) for s in table["student"].unique()} - {ALL_ROWS})
    return datasets, students


def transfer_view_from_table(
    table: pd.DataFrame,
    dataset: str | None,
    student: str | None,
    profile: str,
    n_boot: int,
    seed: int = 0,
    alpha: float = 0.05,
) -> TransferView | None:
    """The :class:`TransferView` of one selection, read from a ``transfer_curves`` table.

    The same numbers :func:`legival_core.views.transfer_view` computes from the rollouts; None
    when the table has no rows for the selection, or its bands come from another ``n_boot`` /
    ``seed`` / ``alpha`` (``n_boot = 0`` asks for no band and fits any table).
    """
    rows = table[
        (table["profile"] == profile).to_numpy()
        & (table["dataset"] == (ALL_ROWS if dataset is None else dataset)).to_numpy()
        & (table["student"] == (ALL_ROWS if student is None else student)).to_numpy()
    ]
    if rows.empty:
        return None
    if n_boot and not (
        (rows["n_boot"] == n_boot).all()
        and (rows["seed"] == seed).all()
        and (rows["alpha"] == alpha).all()
    ):
        return None
    rows = rows.assign(teacher=rows["teacher"].astype(str))
    rows = rows.sort_values(["teacher", "bin"], kind="stable").reset_index(drop=True)
    curve_rows = rows[rows["bin"] > 0]
    curves = pd.DataFrame(
        {
            "teacher": curve_rows["teacher"].to_numpy(dtype=object),
            "bin": curve_rows["bin"].to_numpy(dtype=np.int64),
            **{c: curve_rows[c].to_numpy(dtype=np.float64) for c in _CURVE_VIEW_COLUMNS[2:-1]},
            "n_traces": curve_rows["n_traces"].to_numpy(dtype=np.int64),
        }
    ).assign(teacher=lambda f: f["teacher"].astype(str))
    if not n_boot:
        curves[list(_BAND_COLUMNS)] = math.nan
    shown = rows[rows["hazard_share"].notna()]
    hazards = pd.DataFrame(
        {
            "teacher": shown["teacher"].to_numpy(dtype=object),
            "bin": shown["bin"].to_numpy(dtype=np.int64),
            "share": shown["hazard_share"].to_numpy(dtype=np.float64),
        }
    ).assign(teacher=lambda f: f["teacher"].astype(str))
    first = rows.drop_duplicates("teacher")
    summary = pd.DataFrame(
        {
            "teacher": first["teacher"].to_numpy(dtype=object),
            "n_traces": first["n_traces"].to_numpy(dtype=np.int64),
            "n_students": first["n_students"].to_numpy(dtype=np.int64),
            **{c: first[c].to_numpy(dtype=np.float64) for c in SUMMARY_COLUMNS[3:]},
        }
    ).assign(teacher=lambda f: f["teacher"].astype(str))
    return TransferView(
        curves=curves,
        hazards=hazards,
        baseline=float(rows["student_baseline"].iloc[0]),
        summary=summary,
    )


def student_baseline(trace_transfer: pd.DataFrame) -> float:
    """The student alone (k = 0): mean over students of the mean baseline of their traces.

    >>> tt = pd.DataFrame({"student": ["a", "a", "b"], "baseline": [0.0, 1.0, 0.0]})
    >>> student_baseline(tt)
    0.25
    """
    if trace_transfer.empty or "baseline" not in trace_transfer:
        return math.nan
    per_student = trace_transfer.groupby("student", observed=True)["baseline"].mean()
    return float(per_student.mean())


def observed_coverage(rollouts: pd.DataFrame, profile: str = "paper") -> pd.DataFrame:
    """How many traces were measured in each bin of the transfer curve, per teacher.

    A curve's value in a bin is *measured* for a trace when the trace has a prefix ``k >= 1``
    whose bin (:func:`legival_core.metrics.transfer.paper_bin`, or ``release_bin`` under the
    ``release`` profile) is that bin; every other bin is filled in by the profile's grid (from
    the neighbouring measured prefixes, the first one back-filled to x = 0). Traces count once
    whatever the number of students.

    Returns:
        ``teacher``, ``bin`` (1..50), ``x`` (bin centre), ``n_observed``, ``n_traces`` (the
        teacher's traces with at least one measured prefix), one row per (teacher, bin).

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": "S",
    ...     "trace_id": ["a", "a", "a", "b", "b"], "k": [0, 1, 2, 0, 4], "m": [2, 2, 2, 4, 4]})
    >>> c = observed_coverage(rollouts)  # a: k/m = 1/2 (bin 25) and 1 (bin 50); b: 4/4 (bin 50)
    >>> c[c["n_observed"] > 0][["bin", "n_observed", "n_traces"]].values.tolist()
    [[25, 1, 2], [50, 2, 2]]
    """
    return _coverage_frame(*_coverage_counts(rollouts, profile))


def _coverage_counts(rollouts: pd.DataFrame, profile: str) -> tuple[pd.Series, pd.Series]:
    """Traces measured per (teacher, bin) and traces with a measured prefix per teacher: sums
    over traces, so chunks of whole traces add up
    (:func:`legival_core.metrics.rollout_partials.coverage_partial`)."""
    from legival_core.metrics.transfer import N_BINS, paper_bin, release_bin

    prefixes = rollouts[rollouts["k"] >= 1][["teacher", "trace_id", "k", "m"]]
    prefixes = prefixes.drop_duplicates(["trace_id", "k"]).astype({"teacher": str})
    to_bin = release_bin if profile == "release" else paper_bin
    prefixes = prefixes.assign(
        bin=to_bin(prefixes["k"].to_numpy(), prefixes["m"].to_numpy()).clip(1, N_BINS)
    )
    counts = (
        prefixes.drop_duplicates(["trace_id", "bin"])
        .groupby(["teacher", "bin"], observed=True)["trace_id"]
        .nunique()
    )
    totals = prefixes.groupby("teacher", observed=True)["trace_id"].nunique()
    return counts, totals


def _coverage_frame(counts: pd.Series, totals: pd.Series) -> pd.DataFrame:
    """:func:`observed_coverage`'s table from its counts (one row per teacher and bin)."""
    from legival_core.metrics.transfer import N_BINS, bin_centres

    teachers = sorted(totals.index)
    grid = pd.MultiIndex.from_product([teachers, range(1, N_BINS + 1)], names=["teacher", "bin"])
    out = counts.reindex(grid, fill_value=0).rename("n_observed").reset_index()
    out.insert(2, "x", np.tile(bin_centres(), len(teachers)))
    out["n_traces"] = out["teacher"].map(totals).astype("int64")
    out["n_observed"] = out["n_observed"].astype("int64")
    return out


def first_measured_positions(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Per trace: the first measured position ``min k / m`` over ``k >= 1`` and whether the
    only measured prefix is the whole trace (``k = m``).

    >>> rollouts = pd.DataFrame({"teacher": "T", "dataset": "D", "student": "S",
    ...     "trace_id": ["a", "a", "b"], "k": [1, 2, 4], "m": [2, 2, 4]})
    >>> first_measured_positions(rollouts)[["trace_id", "first_x", "whole_only"]].values.tolist()
    [['a', 0.5, False], ['b', 1.0, True]]
    """
    from legival_core.store.frames import text_codes

    prefixes = rollouts[rollouts["k"] >= 1]
    # grouped by codes into the sorted distinct ids: the rows' ids made into Python strings
    # first were most of this function's time on a bucket of rollouts
    trace, trace_ids = text_codes(prefixes["trace_id"])
    teacher, teachers = text_codes(prefixes["teacher"])
    frame = pd.DataFrame(
        {
            "trace": trace,
            "teacher": pd.array(teacher, dtype="Int64").copy(),
            "x": (prefixes["k"] / prefixes["m"]).array,
            "k": prefixes["k"].array,
        }
    )
    frame.loc[pd.isna(teachers)[teacher], "teacher"] = pd.NA  # first() skips it, as a null
    frame = frame[~pd.isna(trace_ids)[trace]]  # a null id is no trace (a group-by drops it)
    grouped = frame.groupby("trace", sort=True)
    out = grouped.agg(teacher=("teacher", "first"), first_x=("x", "min"))
    whole_only = grouped["k"].nunique().eq(1) & out["first_x"].eq(1.0)
    first_teacher = out["teacher"].to_numpy(dtype=np.float64, na_value=np.nan)
    named = ~np.isnan(first_teacher)
    teacher_names = np.full(len(out), np.nan, dtype=object)
    teacher_names[named] = teachers[first_teacher[named].astype(np.int64)]
    return pd.DataFrame(
        {
            "trace_id": pd.Series(trace_ids[out.index.to_numpy()], dtype=object).astype(str),
            "teacher": pd.Series(teacher_names, dtype=object).astype(str),
            "first_x": out["first_x"].reset_index(drop=True),
            "whole_only": whole_only.reset_index(drop=True),
        }
    )
