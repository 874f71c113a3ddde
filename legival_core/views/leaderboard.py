"""The leaderboard page's data: per-student transfer metrics, the rank table with its
composite score, bootstrap intervals of the efficiency metrics and a LaTeX export.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from legival_core.metrics.registry import metrics_in
from legival_core.views.common import METRICS, STUDENT_METRICS, filter_rows, ranked_metrics

if TYPE_CHECKING:
    from legival_core.rankings.rank_intervals import TeacherResamples

# ---------------------------------------------------------------------------------------------
# Leaderboard
# ---------------------------------------------------------------------------------------------


def student_transfer_metrics(rollouts: pd.DataFrame, profile: str = "paper") -> pd.DataFrame:
    """Transfer metrics per (teacher, dataset, student), no bootstrap.

    A thin call of :func:`legival_core.metrics.transfer.teacher_metrics` grouped by student too, so
    a leaderboard can be filtered to one student and cross-student stability can be measured.
    """
    from legival_core.metrics.transfer import teacher_metrics

    if rollouts.empty:
        return pd.DataFrame(columns=["teacher", "dataset", "student", *STUDENT_METRICS])
    return teacher_metrics(
        rollouts, profile=profile, n_boot=0, by=("teacher", "dataset", "student")
    )


def with_student(
    teacher_metrics: pd.DataFrame, per_student: pd.DataFrame, student: str | None
) -> pd.DataFrame:
    """``teacher_metrics`` with its transfer columns taken from one student.

    ``per_student`` is :func:`student_transfer_metrics`' output. With ``student`` None the
    table is returned unchanged (its transfer columns average over students). Rows without
    rollouts of that student get NaN transfer values.

    >>> tm = pd.DataFrame({"teacher": ["a"], "dataset": ["d"], "accuracy": [0.9], "fotu": [0.5]})
    >>> ps = pd.DataFrame({"teacher": ["a"], "dataset": ["d"], "student": ["s"], "fotu": [0.7]})
    >>> with_student(tm, ps, "s")[["accuracy", "fotu"]].values.tolist()
    [[0.9, 0.7]]
    """
    if student is None:
        return teacher_metrics
    chosen = per_student[per_student["student"] == student]
    columns = [c for c in STUDENT_METRICS if c in chosen.columns]
    base = teacher_metrics.drop(columns=[c for c in columns if c in teacher_metrics.columns])
    merged = base.merge(
        chosen[["teacher", "dataset", *columns]], on=["teacher", "dataset"], how="left"
    )
    # A student metric the per-student table lacks is unknown for one student, not the
    # average over all of them.
    for column in STUDENT_METRICS:
        if column in teacher_metrics.columns and column not in merged.columns:
            merged[column] = np.nan
    return merged[[c for c in teacher_metrics.columns if c in merged.columns]]


def composite_score(ranks: pd.DataFrame, weights: Mapping[str, float]) -> pd.Series:
    """Weighted composite of rank scores, in [0, 1] (1 = best on every weighted metric).

    Each metric's rank r (1 = best) among the n models ranked on it becomes the score
    ``(n - r) / (n - 1)`` (1 for the best, 0 for the worst; 1 when n = 1), and the composite is
    ``sum_m w_m * score_m / sum_m w_m`` over the metrics with a positive weight that the model
    has a rank for. Ranks rather than raw values make metrics with different units comparable.
    A model with no weighted rank gets NaN.

    Args:
        ranks: a :func:`legival_core.stats.stats.rank_table` result (``<metric>_rank`` columns).
        weights: metric -> weight >= 0.

    >>> ranks = pd.DataFrame({"accuracy_rank": [1, 2, 3], "tokens_rank": [3, 1, 2]})
    >>> # scores: accuracy 1, 0.5, 0; tokens 0, 1, 0.5; weights 2:1 -> (2*s_acc + s_tok) / 3
    >>> composite_score(ranks, {"accuracy": 2, "tokens": 1}).round(4).tolist()
    [0.6667, 0.6667, 0.1667]
    """
    from legival_core.rankings.rank_intervals import composite_scores

    # One definition of the composite: composite_scores also scores each bootstrap resample.
    columns = {
        metric: pd.to_numeric(ranks[f"{metric}_rank"], errors="coerce").to_numpy(dtype="float64")
        for metric in weights
        if f"{metric}_rank" in ranks.columns
    }
    for metric, weight in weights.items():
        if weight < 0 or not math.isfinite(weight):
            raise ValueError(f"composite_score: weight of {metric!r} must be >= 0, got {weight}")
    scores = composite_scores(columns, weights) if columns else np.full(len(ranks), np.nan)
    return pd.Series(np.broadcast_to(scores, (len(ranks),)), index=ranks.index, name="composite")


def leaderboard(
    teacher_metrics: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
    references: Sequence[str] = (),
    include_references: bool = False,
    support: str = "common",
) -> pd.DataFrame:
    """The rank table of docs/rankings.md for the rows given (already filtered by dataset).

    Values are averaged over datasets per teacher under ``support`` (by default the datasets
    every ranked teacher has a value on; ``"all"``: every dataset, teachers missing one left
    unranked; :mod:`legival_core.stats.support`), ranked (1 = best) and each rank's change
    against the accuracy rank is given (``<metric>_change = accuracy_rank - metric_rank``), by
    :func:`legival_core.stats.stats.rank_table`. With ``weights``, a ``composite`` column
    (:func:`composite_score`) and its rank are added. ``hf_id`` is carried over where known.

    Reference teachers (``references``, see :mod:`legival_core.published.references`) keep a row
    with their values but no rank, no change and no composite, below the ranked teachers, and do
    not move anyone else's rank; with ``include_references`` they are ranked like the others.
    When ``references`` is given the table has a boolean ``reference`` column.

    >>> tm = pd.DataFrame({"teacher": ["a", "b", "human"], "dataset": "d",
    ...     "accuracy": [0.5, 0.4, 1.0]})
    >>> board = leaderboard(tm, references=["human"])
    >>> board[["teacher", "accuracy_rank", "reference"]].values.tolist()
    [['a', 1, False], ['b', 2, False], ['human', <NA>, True]]
    >>> leaderboard(tm, references=["human"], include_references=True).accuracy_rank.tolist()
    [1, 2, 3]
    """
    from legival_core.stats.stats import rank_table

    chosen = list(metrics) if metrics is not None else ranked_metrics(teacher_metrics)
    chosen = [m for m in chosen if m in ranked_metrics(teacher_metrics, chosen)]
    if "accuracy" not in chosen:
        chosen.insert(0, "accuracy")
    frame = teacher_metrics[["teacher", "dataset", *chosen]]
    left_out = () if include_references else tuple(str(r) for r in references)
    table = rank_table(
        frame,
        {m: METRICS[m].higher_is_better for m in chosen if m != "accuracy"},
        references=left_out,
        support=support,
    )
    if "hf_id" in teacher_metrics.columns:
        ids = teacher_metrics.dropna(subset=["hf_id"]).drop_duplicates("teacher")
        table.insert(
            1, "hf_id", table["teacher"].map(dict(zip(ids["teacher"], ids["hf_id"], strict=True)))
        )
    if weights:
        ranked = ~table["teacher"].astype(str).isin(left_out)
        table["composite"] = composite_score(table, weights).where(ranked)
        table["composite_rank"] = (
            table["composite"].round(9).rank(ascending=False, method="min").astype("Int64")
        )
    if references:
        table["reference"] = table["teacher"].astype(str).isin([str(r) for r in references])
    return table


def without_one_trace_intervals(intervals: pd.DataFrame) -> pd.DataFrame:
    """The per-dataset interval table (``teacher, dataset, metric, value, lo, hi, n``) as the
    page shows it: a value resting on one trace has no bootstrap interval (resampling one trace
    gives it back every time, a [v–v] that claims certainty), so ``lo`` and ``hi`` are blank
    there and ``note`` says "one trace, no interval". Wilson intervals, valid from one trace,
    stay.

    >>> ci = pd.DataFrame({"teacher": ["a", "b"], "value": [0.06, 0.5], "lo": [0.06, 0.2],
    ...     "hi": [0.06, 0.8], "n": [1, 9]})
    >>> shown = without_one_trace_intervals(ci)
    >>> shown["lo"].tolist(), shown["note"].tolist()
    ([nan, 0.2], ['one trace, no interval', ''])
    """
    from legival_core.views.board import ONE_OBSERVATION

    if intervals.empty or "n" not in intervals:
        return intervals
    one = pd.to_numeric(intervals["n"], errors="coerce").lt(2).to_numpy()
    out = intervals.copy()
    for column in ("lo", "hi"):
        if column in out:
            out[column] = out[column].astype("float64").where(~one)
    out["note"] = np.where(one, ONE_OBSERVATION, "")
    return out


def efficiency_intervals(
    trace_efficiency: pd.DataFrame, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> pd.DataFrame:
    """Per (teacher, dataset): accuracy, tokens, redundancy and backtracking with bootstrap CIs.

    Each value is the mean over the group's traces (what ``teacher_metrics`` stores) and its
    percentile interval from :func:`legival_core.stats.stats.bootstrap_ci` (``n_boot`` resamples of
    the traces, seeded). Accuracy, a proportion, also gets its Wilson interval
    (:func:`legival_core.stats.stats.wilson_interval`), which does not collapse to a point when
    every trace is right or wrong. Long table: ``teacher, dataset, metric, value, lo, hi, n,
    wilson_lo, wilson_hi`` (the last two NaN except for accuracy).

    >>> te = pd.DataFrame({"teacher": "T", "dataset": "D", "correct": [True, True],
    ...     "tokens": [10, 30]})
    >>> row = efficiency_intervals(te, n_boot=50).iloc[0]  # 2 of 2 right: bootstrap [1, 1]
    >>> float(row["lo"]), round(float(row["wilson_lo"]), 4)  # Wilson: 2 / (2 + 1.96^2)
    (1.0, 0.3424)
    """
    from legival_core.stats.stats import bootstrap_ci, wilson_interval

    rows = []
    columns = [c for c in metrics_in("efficiency_means") if c in trace_efficiency]
    frame = trace_efficiency.assign(
        accuracy=trace_efficiency["correct"].astype("Float64").astype("float64")
    )
    for (teacher, dataset), group in frame.groupby(["teacher", "dataset"], observed=True):
        for metric in ["accuracy", *columns]:
            values = pd.to_numeric(group[metric], errors="coerce").to_numpy(dtype=float)
            values = values[~np.isnan(values)]
            if not len(values):
                continue
            ci = bootstrap_ci(values, n_boot=n_boot, seed=seed, alpha=alpha)
            wilson = (
                wilson_interval(int(values.sum()), len(values), alpha)
                if metric == "accuracy"
                else None
            )
            rows.append(
                (teacher, dataset, metric, ci.estimate, ci.lo, ci.hi, len(values),
                 wilson.lo if wilson else np.nan, wilson.hi if wilson else np.nan)
            )  # fmt: skip
    columns = ["teacher", "dataset", "metric", "value", "lo", "hi", "n", "wilson_lo", "wilson_hi"]
    return pd.DataFrame(rows, columns=columns)


def dataset_intervals(
    trace_efficiency: pd.DataFrame | None,
    rollouts: pd.DataFrame | None,
    profile: str,
    n_boot: int,
) -> pd.DataFrame:
    """The Leaderboard's per-dataset values with bootstrap intervals over traces, one long
    table (``teacher, dataset, metric, value, lo, hi, n``): the efficiency metrics from
    ``trace_efficiency`` (:func:`efficiency_intervals`) and the transfer metrics from
    ``rollouts`` (already filtered to a student when one is chosen) under ``profile`` (the one
    the stored ``teacher_metrics`` were computed with, so the intervals match them),
    :func:`legival_core.metrics.transfer.teacher_metrics`'s wide columns turned to rows.
    Empty when neither table is given."""
    from legival_core.metrics.transfer import teacher_metrics

    frames = []
    if trace_efficiency is not None:
        frames.append(efficiency_intervals(trace_efficiency, n_boot=n_boot))
    if rollouts is not None:
        transfer = teacher_metrics(rollouts, profile=profile, n_boot=n_boot)
        for name in metrics_in("transfer_intervals"):
            frames.append(
                pd.DataFrame(
                    {
                        "teacher": transfer["teacher"],
                        "dataset": transfer["dataset"],
                        "metric": name,
                        "value": transfer[name],
                        "lo": transfer[f"{name}_lo"],
                        "hi": transfer[f"{name}_hi"],
                        "n": transfer["n_traces"],
                    }
                )
            )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _latex_escape(text: str) -> str:
    # ASCII-only, every special character escaped, "[" braced: legival_core.store.safe_export.
    from legival_core.store.safe_export import tex_text

    return tex_text(text)


def latex_table(
    frame: pd.DataFrame,
    caption: str = "",
    decimals: int = 3,
    notes: Mapping[str, str] | None = None,
    line_break: str | None = None,
) -> str:
    """A ``tabular`` (booktabs) of ``frame`` for a paper; every cell is LaTeX-escaped.

    ``notes`` maps a column to a footnote: its header gets a mark (a, b, …) and the note is
    printed under the table with that mark (escaped too). With ``line_break`` (e.g. ``" ; "``)
    a text cell's parts go on lines of their own (a nested ``tabular``), so that a cell
    "value [interval] ; n 50" is as narrow as its widest part.

    >>> print(latex_table(pd.DataFrame({"teacher": ["a_b"], "fotu": [0.51234]})))
    \\begin{tabular}{lr}
    \\toprule
    teacher & fotu \\\\
    \\midrule
    a\\_b & 0.512 \\\\
    \\bottomrule
    \\end{tabular}
    >>> print(latex_table(pd.DataFrame({"bt": [0.5]}), notes={"bt": "by 100% cues"}))
    \\begin{tabular}{r}
    \\toprule
    bt\\textsuperscript{a} \\\\
    \\midrule
    0.500 \\\\
    \\bottomrule
    \\end{tabular}
    \\par\\smallskip{\\footnotesize \\textsuperscript{a} by 100\\% cues}
    """

    def cell(value: object) -> str:
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            return "--"
        if isinstance(value, float | np.floating):
            return f"{float(value):.{decimals}f}"
        parts = str(value).split(line_break) if line_break else [str(value)]
        if len(parts) == 1:
            return _latex_escape(parts[0])
        lines = " \\\\ ".join(_latex_escape(part) for part in parts)
        return f"\\begin{{tabular}}{{@{{}}l@{{}}}}{lines}\\end{{tabular}}"

    marks = {
        column: chr(ord("a") + index)
        for index, column in enumerate(c for c in frame.columns if notes and c in notes)
    }

    def header(column: object) -> str:
        mark = f"\\textsuperscript{{{marks[column]}}}" if column in marks else ""
        parts = str(column).split(line_break) if line_break else [str(column)]
        if len(parts) == 1:
            return _latex_escape(parts[0]) + mark
        lines = " \\\\ ".join(_latex_escape(part) for part in parts)
        return f"\\begin{{tabular}}{{@{{}}l@{{}}}}{lines}{mark}\\end{{tabular}}"

    headers = [header(c) for c in frame.columns]
    align = "".join("r" if pd.api.types.is_numeric_dtype(frame[c]) else "l" for c in frame.columns)
    lines = [
        f"\\begin{{tabular}}{{{align}}}",
        "\\toprule",
        " & ".join(headers) + " \\\\",
        "\\midrule",
    ]
    for number, row in enumerate(frame.itertuples(index=False)):
        if line_break and number:
            lines.append("\\addlinespace")  # rows of stacked cells need air between them
        lines.append(" & ".join(cell(v) for v in row) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    for column, mark in marks.items():
        note = _latex_escape(str(notes[column]))  # type: ignore[index]
        lines.append(f"\\par\\smallskip{{\\footnotesize \\textsuperscript{{{mark}}} {note}}}")
    if caption:
        lines = [
            "\\begin{table}",
            "\\centering",
            *lines,
            f"\\caption{{{_latex_escape(caption)}}}",
            "\\end{table}",
        ]
    return "\n".join(lines)


#: The most metrics a LaTeX table of the rank table holds beside ``teacher``: each metric is
#: one column whose cell stacks value, interval, n, flags, rank and change on lines of their
#: own, so that four of them fit an ``article`` text width in ``\footnotesize`` (checked by
#: compiling the demo's table with pdflatex in tests/test_publish.py).
LATEX_METRICS_PER_TABLE = 4
#: The most columns a LaTeX table of the rank table holds: ``teacher`` and the metrics.
LATEX_MAX_COLUMNS = 1 + LATEX_METRICS_PER_TABLE
#: The metrics of the core LaTeX table: the Leaderboard page's default columns.
LATEX_CORE_METRICS: tuple[str, ...] = metrics_in("latex_core")
#: The caption of the rank table's LaTeX (the site's and the Leaderboard page's download).
LATEX_CAPTION = (
    "Legi-Val rank table: value [95% interval]; n traces (× students for transfer metrics); "
    "rank (95% rank interval); Δ the rank's change against the accuracy rank (+ better than "
    "accuracy suggests)"
)
#: What the suffixes of a text-table column name add to its metric's cell in LaTeX.
_LATEX_COLUMN_PARTS = ((" rank", "rank "), (" change", "Δ "))


def _latex_metric_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """The text rank table with one column per metric: a metric's value, rank and change
    columns (``X``, ``X rank``, ``X change``) joined into one cell of " ; "-separated parts,
    the interval (and its kind, "(Wilson)") on lines of their own after the value.

    >>> frame = pd.DataFrame({"teacher": ["a"], "FOTU": ["10.4% [3.1–19.5] ; n 20"],
    ...                       "FOTU rank": ["3 (1–4)"], "FOTU change": ["- 2"]})
    >>> _latex_metric_cells(frame).loc[0, "FOTU"]
    '10.4% ; [3.1–19.5] ; n 20 ; rank 3 (1–4) ; Δ -2'
    """
    suffixes = tuple(suffix for suffix, _ in _LATEX_COLUMN_PARTS)
    metrics = [c for c in frame.columns if c != "teacher" and not str(c).endswith(suffixes)]
    joined = pd.DataFrame({"teacher": frame["teacher"]}) if "teacher" in frame else pd.DataFrame()
    for metric in metrics:
        cells = []
        for row in range(len(frame)):
            value = str(frame[metric].iloc[row])
            # the interval, and what it is ("(Wilson)"), each on a line of its own
            value = value.replace(" [", " ; [", 1).replace("] (", "] ; (", 1)
            parts = [p for p in value.split(" ; ") if p]
            for suffix, prefix in _LATEX_COLUMN_PARTS:
                column = f"{metric}{suffix}"
                extra = str(frame[column].iloc[row]) if column in frame else ""
                if extra and extra != "nan":
                    # "- 2" → "-2"; a reference teacher's "reference" stays as it is
                    extra = extra.replace("+ ", "+").replace("- ", "-")
                    parts.append(extra if extra == "reference" else prefix + extra)
            cells.append(" ; ".join(parts))
        joined[metric] = cells
    return joined


def _latex_header(label: str) -> str:
    # a header of more than one word goes on two lines, so it is no wider than its cells
    words = label.split(" ")
    if len(words) < 3:
        return label
    return " ".join(words[:1]) + " ; " + " ".join(words[1:])


def latex_rank_tables(
    frame: pd.DataFrame,
    caption: str,
    notes: Mapping[str, str] | None = None,
    core: Sequence[str] = LATEX_CORE_METRICS,
) -> str:
    r"""The rank table (the text table after :func:`legival_core.views.board.ascii_cells`) as
    LaTeX that fits a page: one column per metric, its cell stacking the value, its interval,
    n, flags, the rank ("rank 3 (1--4)") and the change against the accuracy rank ("Δ +1");
    a core table (``teacher`` and the metrics of ``core``) and appendix tables with every other
    metric, ``teacher`` first in each, at most :data:`LATEX_METRICS_PER_TABLE` metrics a
    table. A note goes under the table holding its column. Needs the ``booktabs`` package.

    >>> import re
    >>> cells = {"Accuracy": ["50% [40–60] ; n 2"], "Accuracy rank": ["1 (1–2)"]}
    >>> frame = pd.DataFrame({"teacher": ["a"], **cells, **{c: ["x"] for c in "ABCDEF"}})
    >>> tex = latex_rank_tables(frame, "Board", core=["accuracy"])
    >>> [len(spec) for spec in re.findall(r"^\\begin\{tabular\}\{(\w+)\}", tex, re.M)]
    [2, 5, 3]
    >>> print(tex.splitlines()[8])
    a & \begin{tabular}{@{}l@{}}50\% \\ {[}40--60{]} \\ n 2 \\ rank 1 (1--2)\end{tabular} \\
    >>> "(appendix, part 2 of 2)" in tex
    True
    """
    joined = _latex_metric_cells(frame)
    labels = [METRICS[m].label for m in core if m in METRICS]
    metrics = [c for c in joined.columns if c != "teacher"]
    core_metrics = [c for c in labels if c in metrics][:LATEX_METRICS_PER_TABLE]
    rest = [c for c in metrics if c not in core_metrics]
    per_part = LATEX_METRICS_PER_TABLE
    appendix = [["teacher", *rest[i : i + per_part]] for i in range(0, len(rest), per_part)]
    titled = [
        (
            ["teacher", *core_metrics],
            caption + (" (core columns; the others in the appendix)" if appendix else ""),
        )
    ]
    titled += [
        (columns, f"{caption} (appendix, part {number} of {len(appendix)})")
        for number, columns in enumerate(appendix, start=1)
    ]
    tables = []
    for columns, title in titled:
        # a long header on two lines (" ; " is the cells' line break), its note kept with it
        shown = joined[columns].rename(columns=_latex_header)
        body = latex_table(
            shown,
            caption=title,
            notes={_latex_header(c): n for c, n in (notes or {}).items() if c in columns},
            line_break=" ; ",
        )
        # smaller type and narrower gaps so that four metric columns fit the text width
        tables.append(
            body.replace(
                "\\centering", "\\centering\n\\footnotesize\n\\setlength{\\tabcolsep}{4pt}", 1
            )
        )
    return "\n\n".join(tables)


def latex_notes(
    frame: pd.DataFrame, manifests: Mapping[str, Any] | Sequence[Mapping[str, Any]]
) -> dict[str, str]:
    """The footnotes of a rank table's LaTeX (:func:`latex_table`'s ``notes``): under its
    Backtracking column, which labeler gave the numbers and how well it finds hand-labelled
    backtracking (:func:`legival_core.metrics.label_quality.store_quality_note`)."""
    from legival_core.metrics.label_quality import store_quality_note

    label = METRICS["backtracking"].label
    return {label: store_quality_note(manifests)} if label in frame.columns else {}


def board_resamples(
    efficiency: pd.DataFrame | None,
    transfer: pd.DataFrame | None,
    metrics: Sequence[str],
    dataset: str | None,
    student: str | None,
    *,
    n_boot: int,
    seed: int,
    support: str = "common",
    outside: Sequence[str] = (),
) -> TeacherResamples | None:
    """Every ranked metric per teacher on paired resamples of problems for one selection
    (:func:`legival_core.rankings.rank_intervals.resample_teachers` on ``trace_efficiency`` and
    ``trace_transfer`` filtered to ``dataset`` and ``student``); None when neither per-trace
    table has a row there. Each metric is averaged over datasets under ``support`` as the rank
    table averages it; teachers in ``outside`` (the unranked reference teachers) do not narrow
    the common support. The Leaderboard page and ``lv.open(...).rank_intervals`` both call it,
    so their intervals come from the same draws."""
    from legival_core.rankings.rank_intervals import resample_teachers

    if efficiency is not None:
        efficiency = filter_rows(efficiency, dataset=dataset)
    if transfer is not None:
        transfer = filter_rows(transfer, dataset=dataset, student=student)
    if (efficiency is None or efficiency.empty) and (transfer is None or transfer.empty):
        return None
    return resample_teachers(
        efficiency,
        transfer,
        list(metrics),
        n_boot=n_boot,
        seed=seed,
        support=support,
        outside=outside,
    )
