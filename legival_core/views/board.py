"""The leaderboard with its uncertainty, as tables a page or a static snapshot shows.

:mod:`legival_core.rankings.rank_intervals` computes the numbers; this module lays them out: every
mean with its 95% interval and its n ("24.0% [12.0–36.0] · n 50"), marked low-n under a threshold,
every rank with its 95% rank interval ("2 (1–4)"), and the same table as plain numbers for
CSV and LaTeX. A store without per-trace tables (the published one) has no resamples: its
cells say so instead of showing an interval.

Pure pandas, no Streamlit, no HTML: text goes out as text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from legival_core.metrics.metric_catalog import METRICS

__all__ = [
    "APART_MARK",
    "LOW_N_MARK",
    "NO_INTERVAL",
    "NO_INTERVAL_HERE",
    "ONE_OBSERVATION",
    "REFERENCE_MARK",
    "TIED_MARK",
    "WILSON_MARK",
    "as_sentence",
    "ascii_cells",
    "board_numbers",
    "change_arrow",
    "change_style",
    "format_value",
    "is_tied",
    "low_n_style",
    "metric_detail",
    "rank_cell",
    "rank_order",
    "support_note",
    "uncertainty_board",
    "value_cell",
    "verdict",
]

#: What a cell says when the store has no per-trace data to resample (the published numbers).
NO_INTERVAL = "published, no interval"
#: What a cell says when other metrics of the store have intervals but this one has none
#: (its per-trace table is missing, or recomputing it does not give the stored value).
NO_INTERVAL_HERE = "no interval"
#: Appended to a cell with fewer traces than the low-n threshold.
LOW_N_MARK = "⚠ low n"
#: What the rank cells of a reference teacher (left out of the ranks) say.
REFERENCE_MARK = "reference"
#: What the rank and Δ cells of a metric that does not vary between the ranked teachers say:
#: ranking equal values would show a tie as a signal.
TIED_MARK = "tied"
#: What a value cell resting on one trace says instead of an interval (a resample of one
#: observation is that observation: a zero-width interval that looks certain).
ONE_OBSERVATION = "one trace, no interval"
#: Follows an interval that is the Wilson interval of a share whose bootstrap collapsed.
WILSON_MARK = "(Wilson)"
#: What the rank cells of a teacher left unranked for missing a dataset say (the
#: ``support="all"`` choice, :mod:`legival_core.stats.support`).
APART_MARK = "apart: misses a dataset"


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def format_value(value: object, metric: str) -> str:
    """A metric value as every page prints it (:mod:`legival_core.views.display`): shares in %,
    tokens whole, else 3 decimals; an em dash when missing.

    >>> format_value(0.2417, "accuracy"), format_value(1652.7, "tokens"), format_value(0.5, "x")
    ('24.2%', '1,653', '0.500')
    """
    from legival_core.views.display import number_formatter

    return number_formatter(metric)(value)


def _bound(value: float, metric: str) -> str:
    # The interval's bounds without the % sign, which the value already carries.
    return format_value(value, metric).rstrip("%")


def collapsed_share_interval(
    value: object, lo: object, hi: object, n_traces: object, metric: str
) -> tuple[float, float] | None:
    """The Wilson 95% interval of a share whose bootstrap interval collapsed to a point.

    When every trace scores the same (say 0 of 14 regress), resampling the traces gives
    [0, 0]: zero width from many observations, which reads as certain. For a share (a catalog
    metric marked ``share``) from two traces or more this gives the Wilson interval of
    ``round(value · n)`` of ``n`` (:func:`legival_core.stats.stats.wilson_interval`) instead;
    None when the interval has width, the metric is not a share, or n is under 2.

    >>> [round(b, 4) for b in collapsed_share_interval(0.0, 0.0, 0.0, 14, "accuracy")]
    [0.0, 0.2153]
    >>> collapsed_share_interval(0.2, 0.1, 0.3, 14, "accuracy") is None
    True
    """
    from legival_core.rankings.rank_intervals import collapsed_share_bounds

    if any(_missing(x) for x in (value, lo, hi, n_traces)):
        return None
    share = metric in METRICS and METRICS[metric].share
    mid, low, high, n = (float(x) for x in (value, lo, hi, n_traces))  # type: ignore[arg-type]
    return collapsed_share_bounds(mid, low, high, n, share=share)


def value_cell(
    value: object,
    lo: object,
    hi: object,
    n_traces: object,
    n_students: object,
    metric: str,
    low_n: int,
    no_interval: str = NO_INTERVAL,
) -> str:
    """One cell: value, 95% interval, n (traces, "× students" when more than one), low-n mark.

    Without an interval (``lo`` missing) the cell says ``no_interval``.

    >>> value_cell(0.24, 0.12, 0.36, 50, 1, "accuracy", low_n=20)
    '24.0% [12.0–36.0] · n 50'
    >>> value_cell(0.3, 0.1, 0.5, 12, 2, "fotu", low_n=20)
    '30.0% [10.0–50.0] · n 12 × 2 students · ⚠ low n'
    >>> value_cell(0.378, None, None, None, None, "fotu", low_n=20)
    '37.8% · published, no interval'
    >>> value_cell(0.0, 0.0, 0.0, 1, 1, "accuracy", low_n=20)
    '0.0% · n 1 · one trace, no interval'

    A share whose bootstrap collapsed (every trace the same) shows its Wilson interval
    (:func:`collapsed_share_interval`):

    >>> value_cell(0.0, 0.0, 0.0, 14, 1, "accuracy", low_n=5)
    '0.0% [0.0–21.5] (Wilson) · n 14'
    """
    text = format_value(value, metric)
    if _missing(value):
        return text
    if not _missing(n_traces) and int(n_traces) < 2:  # type: ignore[call-overload]
        return f"{text} · n {int(n_traces)} · {ONE_OBSERVATION}"  # type: ignore[call-overload]
    if _missing(lo) or _missing(hi):
        return f"{text} · {no_interval}"
    wilson = collapsed_share_interval(value, lo, hi, n_traces, metric)
    if wilson is not None:
        text += f" [{_bound(wilson[0], metric)}–{_bound(wilson[1], metric)}] {WILSON_MARK}"
    else:
        text += f" [{_bound(lo, metric)}–{_bound(hi, metric)}]"  # type: ignore[arg-type]
    if not _missing(n_traces):
        traces = int(n_traces)  # type: ignore[call-overload]
        students = 0 if _missing(n_students) else int(n_students)  # type: ignore[call-overload]
        text += f" · n {traces}" + (f" × {students} students" if students > 1 else "")
        if traces < low_n:
            text += f" · {LOW_N_MARK}"
    return text


def rank_cell(rank: object, lo: object, hi: object) -> str:
    """A rank with its 95% interval: "2 (1–4)"; "2 (2)" when the interval is one rank.

    >>> rank_cell(2, 1, 4), rank_cell(1, 1, 1), rank_cell(3, None, None)
    ('2 (1–4)', '1 (1)', '3')
    """
    if _missing(rank):
        return "—"
    text = str(int(rank))  # type: ignore[call-overload]
    if _missing(lo) or _missing(hi):
        return text
    low, high = int(lo), int(hi)  # type: ignore[call-overload]
    return f"{text} ({low})" if low == high else f"{text} ({low}–{high})"


def change_arrow(change: object) -> str:
    """The change of a rank against the accuracy rank as an arrow: ▲ better, ▼ worse.

    >>> change_arrow(2), change_arrow(-1), change_arrow(0), change_arrow(None)
    ('▲ 2', '▼ 1', '=', '')
    """
    if _missing(change):
        return ""
    steps = int(change)  # type: ignore[call-overload]
    return f"▲ {steps}" if steps > 0 else f"▼ {-steps}" if steps < 0 else "="


def is_tied(board: pd.DataFrame, metric: str, decimals: int = 9) -> bool:
    """Whether every ranked teacher has the same value of ``metric`` (two or more of them):
    their ranks and changes then say nothing and are shown as :data:`TIED_MARK`.

    >>> board = pd.DataFrame({"teacher": list("abc"), "regression_rate": [0.0, 0.0, 0.0],
    ...     "regression_rate_rank": [1, 1, 1], "fotu": [0.1, 0.2, 0.2], "fotu_rank": [3, 1, 1]})
    >>> is_tied(board, "regression_rate"), is_tied(board, "fotu")
    (True, False)
    """
    rank_column = f"{metric}_rank"
    if metric not in board or rank_column not in board:
        return False
    ranked = board[rank_column].notna().to_numpy()
    values = pd.to_numeric(board[metric], errors="coerce")[ranked].round(decimals)
    return int(ranked.sum()) > 1 and values.notna().all() and values.nunique() == 1


def rank_order(board: pd.DataFrame, metric: str) -> np.ndarray:
    """Row positions of ``board`` best first on ``metric`` (its rank; ties keep the board's
    order), unranked rows (reference teachers) last.

    >>> board = pd.DataFrame({"teacher": list("abc"),
    ...     "fotu_rank": pd.array([3, 1, None], dtype="Int64")})
    >>> rank_order(board, "fotu").tolist()
    [1, 0, 2]
    """
    ranks = board[f"{metric}_rank"].astype("Float64").fillna(float("inf")).to_numpy(float)
    return np.argsort(ranks, kind="stable")


def verdict(board: pd.DataFrame, intervals: pd.DataFrame, metric: str) -> str:
    """One sentence on what the rank intervals of ``metric`` allow to say.

    Teacher A is *ahead of* B when A's whole 95% rank interval is better than B's
    (``rank_hi(A) < rank_lo(B)``). The sentence names, best first, each teacher ahead of
    someone and whom; "no teacher is separated" when no pair is; "tied" for a metric that
    does not vary; nothing to say without intervals.

    >>> board = pd.DataFrame({"teacher": list("abc"), "fotu": [0.5, 0.2, 0.1],
    ...     "fotu_rank": [1, 2, 3]})
    >>> intervals = pd.DataFrame({"teacher": list("abc"), "metric": "fotu",
    ...     "rank_lo": [1, 2, 2], "rank_hi": [1, 3, 3]})
    >>> verdict(board, intervals, "fotu")
    'On FOTU, a is ahead of b and c; the others are not separated from each other.'
    >>> verdict(board, intervals.assign(rank_lo=1, rank_hi=3), "fotu")
    'No teacher is separated on FOTU: every pair of 95% rank intervals overlaps.'
    """
    label = METRICS[metric].label if metric in METRICS else metric
    if is_tied(board, metric):
        return f"Every ranked teacher has the same {label}: tied, so no order to read."
    rows = _by_teacher(intervals, metric)
    if rows.empty or "rank_lo" not in rows or rows["rank_lo"].isna().all():
        return (
            f"This store has no rank intervals for {label}: the ranks alone cannot say who is "
            "ahead."
        )
    ranked = board[board[f"{metric}_rank"].notna()].sort_values(f"{metric}_rank", kind="stable")
    teachers = [t for t in ranked["teacher"].astype(str) if t in rows.index]
    lo = {t: rows.loc[t, "rank_lo"] for t in teachers}
    hi = {t: rows.loc[t, "rank_hi"] for t in teachers}
    ahead = {
        t: [u for u in teachers if not _missing(hi[t]) and not _missing(lo[u]) and hi[t] < lo[u]]
        for t in teachers
    }
    named = [(t, behind) for t, behind in ahead.items() if behind]
    if not named:
        return f"No teacher is separated on {label}: every pair of 95% rank intervals overlaps."

    def listing(names: list[str]) -> str:
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]

    parts = [f"{t} is ahead of {listing(behind)}" for t, behind in named[:3]]
    more = "; and more pairs (see the table)" if len(named) > 3 else ""
    return (
        f"On {label}, "
        + "; ".join(parts)
        + more
        + ("; the others are not separated from each other.")
    )


def _by_teacher(intervals: pd.DataFrame, metric: str) -> pd.DataFrame:
    if intervals.empty:
        return pd.DataFrame()
    return intervals[intervals["metric"] == metric].set_index("teacher")


def uncertainty_board(
    board: pd.DataFrame,
    intervals: pd.DataFrame,
    metrics: Sequence[str],
    low_n: int,
    with_composite: bool = False,
    ranked: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The rank table as text cells: per metric "value [lo–hi] · n", "rank (lo–hi)", "Δ".

    ``board`` is :func:`legival_core.views.leaderboard`'s table (its ranks and changes are the
    ones shown); ``intervals`` is :func:`legival_core.rankings.rank_intervals.interval_table` for
    the same selection, or empty when there is nothing to resample (then every value cell says
    :data:`NO_INTERVAL`; a metric missing from a non-empty ``intervals`` says
    :data:`NO_INTERVAL_HERE`; ranks without an interval show the rank alone). Columns:
    ``teacher``, then per metric its label, ``<label> rank`` and (except accuracy)
    ``<label> Δ``; with ``with_composite`` first ``composite`` and ``composite rank``. Rows in
    the order of ``board``. A reference teacher left out of the ranks (``board.reference``
    True, no rank) shows its values (and their intervals, when ``intervals`` has them) with
    :data:`REFERENCE_MARK` in its rank cells; a teacher the board leaves unranked on a metric
    for missing a dataset (``support="all"``) shows :data:`APART_MARK`. A value resting on
    fewer datasets than the selection holds (the board's ``<metric>_covered`` below
    ``n_dataset``) says so: "· 4/5 datasets". With ``ranked``, only those metrics get rank
    and Δ columns (the page's first screen); the others show their values alone.

    >>> board = pd.DataFrame({"teacher": ["a", "human"], "accuracy": [0.5, 1.0],
    ...     "accuracy_rank": pd.array([1, None], dtype="Int64"), "reference": [False, True]})
    >>> uncertainty_board(board, pd.DataFrame(), ["accuracy"], 20)["Accuracy rank"].tolist()
    ['1', 'reference']
    """
    shown = pd.DataFrame({"teacher": board["teacher"].astype(str).to_numpy()})
    is_reference = (
        board["reference"].fillna(False).astype(bool).to_numpy()
        if "reference" in board
        else [False] * len(board)
    )
    names = [*(["composite"] if with_composite else []), *metrics]
    no_interval = NO_INTERVAL if intervals.empty else NO_INTERVAL_HERE
    for metric in names:
        label = METRICS[metric].label if metric in METRICS else metric
        rows = _by_teacher(intervals, metric)
        tied = is_tied(board, metric)
        cells, ranks = [], []
        coverage = _coverage_cells(board, metric)
        for teacher, value, rank, reference, covers in zip(
            shown["teacher"],
            board[metric],
            board[f"{metric}_rank"],
            is_reference,
            coverage,
            strict=True,
        ):
            row = rows.loc[teacher] if teacher in rows.index else pd.Series(dtype=object)
            get = row.get
            if metric == "composite":
                cells.append(format_value(value, metric))
            else:
                cells.append(
                    value_cell(
                        value,
                        get("value_lo"),
                        get("value_hi"),
                        get("n_traces"),
                        get("n_students"),
                        metric,
                        low_n,
                        no_interval,
                    )
                    + (f" · {covers}" if covers and not _missing(value) else "")
                )
            unranked = reference and _missing(rank)
            ranks.append(
                REFERENCE_MARK
                if unranked
                else APART_MARK
                if _missing(rank) and not _missing(value) and metric != "composite"
                else TIED_MARK
                if tied
                else rank_cell(rank, lo=get("rank_lo"), hi=get("rank_hi"))
            )
        shown[label] = cells
        if ranked is not None and metric not in ranked:
            continue
        shown[f"{label} rank"] = ranks
        if metric not in ("accuracy", "composite"):
            changes = board[f"{metric}_change"].map(change_arrow)
            if tied:
                changes = changes.where(changes == "", TIED_MARK)
            shown[f"{label} Δ"] = changes.to_numpy()
    return shown


def _coverage_cells(board: pd.DataFrame, metric: str) -> list[str]:
    """Per row of ``board``, "4/5 datasets" when the teacher has a value of ``metric`` on
    fewer datasets than the selection holds, else "" (:func:`legival_core.stats.support.
    coverage_text`)."""
    from legival_core.stats.support import coverage_text

    column = f"{metric}_covered"
    if column not in board or "n_dataset" not in board:
        return [""] * len(board)
    return [
        coverage_text(have, of) if not (_missing(have) or _missing(of)) else ""
        for have, of in zip(board[column], board["n_dataset"], strict=True)
    ]


def support_note(
    rows: pd.DataFrame,
    metrics: Sequence[str],
    support: str,
    references: Sequence[str] = (),
) -> str:
    """Which datasets the teacher-level values of ``metrics`` are averaged over, in words, for
    the selection's per-dataset ``rows`` (``teacher_metrics``): under ``"common"`` the metrics
    whose common support is narrower than the selection, with the teachers that narrow it and
    what they miss; under ``"all"`` the teachers listed apart. Metrics with the same story
    share a sentence. Empty when every compared teacher covers every dataset.

    >>> tm = pd.DataFrame({"teacher": ["a", "a", "b", "b"], "dataset": ["x", "y", "x", "y"],
    ...     "fotu": [0.1, 0.5, 0.3, None], "sotu": [0.1, 0.5, 0.3, None]})
    >>> import textwrap
    >>> print(textwrap.fill(support_note(tm, ["fotu", "sotu"], "common"), 80))
    FOTU, SOTU: averaged over the 1 of 2 datasets every compared teacher has a value
    on (b: none on y).
    >>> print(support_note(tm, ["fotu"], "all"))
    FOTU: averaged over every dataset a teacher has a value on; listed apart, unranked: b (1 of 2).
    """
    from legival_core.stats.support import ALL_DATASETS, covered_matrix, support_datasets

    apart = sorted({str(r) for r in references})
    stories: dict[str, list[str]] = {}
    for metric in metrics:
        if metric not in rows:
            continue
        covered = covered_matrix(rows, metric)
        compared = covered[[t not in apart and covered.loc[t].any() for t in covered.index]]
        short = compared[~compared.all(axis=1)]
        if short.empty:
            continue
        total = covered.shape[1]
        named = list(short.iterrows())[:3]
        more = f"; {len(short) - 3} more" if len(short) > 3 else ""
        if support == ALL_DATASETS:
            who = ", ".join(f"{t} ({int(r.sum())} of {total})" for t, r in named)
            story = (
                "averaged over every dataset a teacher has a value on; listed apart, "
                f"unranked: {who}{more}."
            )
        else:
            common = support_datasets(covered, apart)
            who = "; ".join(
                f"{t}: none on {', '.join(str(d) for d in r.index[~r.to_numpy()])}"
                for t, r in named
            )
            story = (
                f"averaged over the {len(common)} of {total} datasets every compared teacher "
                f"has a value on ({who}{more})."
            )
        label = METRICS[metric].label if metric in METRICS else metric
        stories.setdefault(story, []).append(label)
    return " ".join(f"{', '.join(labels)}: {story}" for story, labels in stories.items())


def board_numbers(
    board: pd.DataFrame,
    intervals: pd.DataFrame,
    metrics: Sequence[str],
    support: str | None = None,
) -> pd.DataFrame:
    """The rank table as numbers (for CSV and LaTeX): per metric value, lo, hi, n, ranks.

    Columns: ``support`` (which datasets the values are averaged over, ``"common"`` or
    ``"all"``, :mod:`legival_core.stats.support`) when given, so an export names its choice;
    ``n_dataset`` (the datasets of the selection) when the board has it, then per
    metric m: ``m``, ``m_datasets`` and ``m_covered`` (the datasets its mean is over, and those
    the teacher has a value on) when the board has them, ``m_lo``, ``m_hi``, ``m_n_traces``,
    ``m_n_students``, ``m_rank``, ``m_rank_lo``, ``m_rank_hi``, ``m_rank_ub`` (NaN / missing
    without resamples), plus ``composite`` and its columns when ``board`` has one, and a last
    ``reference`` column when ``board`` marks reference teachers.

    >>> board = pd.DataFrame({"teacher": ["a"], "accuracy": [0.5], "accuracy_rank": [1]})
    >>> board_numbers(board, pd.DataFrame(), ["accuracy"]).columns.tolist()[:4]
    ['teacher', 'accuracy', 'accuracy_lo', 'accuracy_hi']
    """
    out = pd.DataFrame({"teacher": board["teacher"].astype(str).to_numpy()})
    if support is not None:
        out["support"] = support
    if "n_dataset" in board:
        out["n_dataset"] = board["n_dataset"].to_numpy()
    names = [*(["composite"] if "composite" in board else []), *metrics]
    for metric in names:
        rows = _by_teacher(intervals, metric)
        out[metric] = board[metric].to_numpy()
        for part in ("datasets", "covered"):  # the datasets behind the mean, and the teacher's
            if f"{metric}_{part}" in board:
                out[f"{metric}_{part}"] = board[f"{metric}_{part}"].to_numpy()
        for column in ("value_lo", "value_hi", "n_traces", "n_students"):
            values = rows[column] if column in rows else pd.Series(dtype="float64")
            out[f"{metric}_{column.removeprefix('value_')}"] = out["teacher"].map(values).to_numpy()
        out[f"{metric}_rank"] = board[f"{metric}_rank"].to_numpy()
        for column in ("rank_lo", "rank_hi", "rank_ub"):
            values = rows[column] if column in rows else pd.Series(dtype="Int64")
            out[f"{metric}_{column}"] = out["teacher"].map(values).astype("Int64").to_numpy()
    if "reference" in board:  # reference teachers: values without ranks
        out["reference"] = board["reference"].fillna(False).astype(bool).to_numpy()
    return out


def metric_detail(
    board: pd.DataFrame, intervals: pd.DataFrame, metric: str, low_n: int
) -> pd.DataFrame:
    """One metric (or ``"composite"``) per teacher, best first: value, interval, n, low-n flag,
    rank, rank interval, upper-bound rank and the teachers it is not separated from.

    Without resamples the interval columns are empty and ``rank 95% interval`` says
    :data:`NO_INTERVAL` (:data:`NO_INTERVAL_HERE` when only this metric has none); a metric
    that does not vary says :data:`TIED_MARK`; one trace gives no value interval.
    """
    rows = _by_teacher(intervals, metric)
    out = pd.DataFrame({"teacher": board["teacher"].astype(str).to_numpy()})
    out["value"] = board[metric].to_numpy(dtype="float64")

    def column(name: str) -> pd.Series:
        values = rows[name] if name in rows else pd.Series(dtype="float64")
        return out["teacher"].map(values)

    out["n traces"] = column("n_traces").astype("Int64").to_numpy()
    one = (out["n traces"] < 2).fillna(False).to_numpy(dtype=bool)  # no interval from one trace
    out.insert(2, "95% lo", column("value_lo").astype("float64").mask(one).to_numpy())
    out.insert(3, "95% hi", column("value_hi").astype("float64").mask(one).to_numpy())
    # a share whose bootstrap collapsed to a point: its Wilson interval, as the table cell shows
    for i in range(len(out)):
        wilson = collapsed_share_interval(
            out.at[i, "value"], out.at[i, "95% lo"], out.at[i, "95% hi"], out.at[i, "n traces"],
            metric,
        )  # fmt: skip
        if wilson is not None:
            out.at[i, "95% lo"], out.at[i, "95% hi"] = wilson
    out["n students"] = column("n_students").astype("Int64").to_numpy()
    out["low n"] = (out["n traces"] < low_n).fillna(False).astype(bool).to_numpy()
    out["rank"] = board[f"{metric}_rank"].astype("Int64").to_numpy()
    lo, hi = column("rank_lo"), column("rank_hi")
    no_interval = NO_INTERVAL if intervals.empty else NO_INTERVAL_HERE
    unranked = (
        board["reference"].fillna(False).astype(bool).to_numpy() & out["rank"].isna().to_numpy()
        if "reference" in board
        else np.zeros(len(out), dtype=bool)
    )
    tied = is_tied(board, metric)
    missing_one = out["rank"].isna().to_numpy() & out["value"].notna().to_numpy() & ~unranked
    out["rank 95% interval"] = [
        REFERENCE_MARK
        if apart
        else APART_MARK
        if short and metric != "composite"
        else TIED_MARK
        if tied
        else no_interval
        if _missing(a) or _missing(b)
        else f"{int(a)}–{int(b)}"
        for a, b, apart, short in zip(lo, hi, unranked, missing_one, strict=True)
    ]
    for part, name in (("datasets", "datasets averaged"), ("covered", "datasets with a value")):
        if f"{metric}_{part}" in board and "n_dataset" in board:
            out[name] = [
                f"{int(have)} of {int(of)}"
                for have, of in zip(board[f"{metric}_{part}"], board["n_dataset"], strict=True)
            ]
    out["rank (upper bound)"] = column("rank_ub").astype("Int64").to_numpy()
    out["not separated from"] = column("not_separated").fillna("").astype(str).to_numpy()
    return out.sort_values(["rank", "teacher"], kind="stable").reset_index(drop=True)


_ASCII = {"–": "--", "·": ";", "×": "x", LOW_N_MARK: "low n", "▲": "+", "▼": "-", "Δ": "change"}


def ascii_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """The text table (cells and headers) with plain-ASCII marks, for LaTeX (pdflatex has no
    ⚠, ▲ or Δ).

    >>> ascii_cells(pd.DataFrame({"a": ["24.0% [12.0–36.0] · n 5 × 2 students · ⚠ low n"]})).a[0]
    '24.0% [12.0--36.0] ; n 5 x 2 students ; low n'
    """

    def plain(value: object) -> object:
        if not isinstance(value, str):
            return value
        for mark in sorted(_ASCII, key=len, reverse=True):
            value = value.replace(mark, _ASCII[mark])
        return value

    out = frame.apply(lambda column: column.map(plain))
    out.columns = [plain(c) for c in frame.columns]
    return out


def change_style(text: object) -> str:
    """The CSS colour of a rank-change cell (``▲`` up green, ``▼`` down red, else grey).

    >>> change_style("▲2"), change_style("▼1"), change_style("=")
    ('color: #1e8449', 'color: #c0392b', 'color: #7f8c8d')
    """
    shown = str(text)
    if shown.startswith("▲"):
        return "color: #1e8449"
    return "color: #c0392b" if shown.startswith("▼") else "color: #7f8c8d"


def low_n_style(text: object) -> str:
    """The CSS colour of a value cell resting on few traces (:data:`LOW_N_MARK`), else none.

    >>> low_n_style(f"0.5 {LOW_N_MARK}"), low_n_style("0.5")
    ('color: #b9770e', '')
    """
    return "color: #b9770e" if LOW_N_MARK in str(text) else ""


def as_sentence(text: str) -> str:
    """``text`` as a sentence: first letter up, the rest as written ("FOTU …" stays "FOTU").

    >>> as_sentence("first-order transfer utility")
    'First-order transfer utility.'
    """
    return text[:1].upper() + text[1:] + "."
