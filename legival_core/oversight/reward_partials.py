"""What the reward-model results need of ``trace_transfer``, in pieces that merge.

The reward results (:mod:`legival_core.oversight.oversight`) read the transfer rows twice over:
per trace (FOTU and regression rate averaged over its students, the scatter's points and the
trace-level ρ) and per (teacher, dataset, student) (FOTU and regression rate averaged over the
traces, SOTU from the hazard histogram, then the mean over students: the teacher-level ρ). At a
million traces that is 2.3M rows held and grouped again for each of the six results.

Both come from partials instead:

- :func:`trace_means`: one row per trace. A trace's rows all lie in one chunk of the metrics
  stage (chunks are buckets of problems), so a chunk's means are final.
- :func:`student_sums`: per (teacher, dataset, student), the sums and counts of FOTU and of
  regression rate, and the hazard histogram (``hazard_1`` … ``hazard_50``). Sums of disjoint
  chunks add (:func:`merge_student_sums`); :func:`teacher_transfer` turns them into the
  per-(teacher, dataset) means. The histogram counts are integers, so SOTU is the same for
  any chunking; the FOTU and regression means may differ in the last bits (the sums are added
  in another order).

:class:`RewardPartial` holds a chunk's (or several chunks') pieces, for all traces and for the
traces graded correct.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from legival_core.metrics.registry import metrics_in
from legival_core.metrics.transfer_grid import N_BINS
from legival_core.metrics.transfer_profiles import solved_hazard_bins, sotu_of_histogram
from legival_core.store.frames import is_in
from legival_core.store.schema import require_columns
from legival_core.store.spilled_frames import SpilledFrame, held

__all__ = [
    "HAZARD_COLUMNS",
    "STUDENT_KEYS",
    "SUBSETS",
    "RewardPartial",
    "correct_ids",
    "merge_student_sums",
    "student_sums",
    "sums_without",
    "teacher_transfer",
    "trace_means",
]

#: The keys of :func:`student_sums`' rows.
STUDENT_KEYS: tuple[str, ...] = ("teacher", "dataset", "student")
#: The hazard histogram's columns: how many traces a student first solves in bin 1 … 50.
HAZARD_COLUMNS: tuple[str, ...] = tuple(f"hazard_{b}" for b in range(1, N_BINS + 1))
#: The trace sets a :class:`RewardPartial` keeps sums of: every trace, the correct ones.
SUBSETS: tuple[str, ...] = ("all", "correct")
_TRACE_METRICS: tuple[str, ...] = metrics_in("oversight_trace")


def correct_ids(grades: pd.DataFrame) -> pd.Index:
    """The ids of the traces graded correct, as text (an index, not a Python set: at millions
    of traces a set of their strings is hundreds of MB); a missing grade is not correct.

    >>> correct_ids(pd.DataFrame({"trace_id": ["a", "b", "c"],
    ...     "correct": pd.array([True, None, False], dtype="boolean")})).tolist()
    ['a']
    """
    require_columns(grades, ("trace_id", "correct"), "grades")
    flags = grades["correct"].astype("boolean").fillna(False).astype(bool)
    return pd.Index(grades.loc[flags.to_numpy(), "trace_id"].astype(str)).unique()


def trace_means(trace_transfer: pd.DataFrame, *, leak: bool = False) -> pd.DataFrame:
    """One row per trace (sorted by id): its ``teacher`` and ``dataset`` and its ``fotu`` and
    ``regression_rate``, each the mean over the trace's students; with ``leak``, its
    ``leak_k`` too when the rows have one (the same for every student; the trace list shows
    it).

    >>> t = pd.DataFrame({"trace_id": ["b", "a", "a"], "teacher": "T", "dataset": "D",
    ...     "fotu": [0.9, 0.2, 0.4], "regression_rate": [0.0, 0.0, 0.5]})
    >>> trace_means(t)[["trace_id", "fotu", "regression_rate"]].values.tolist()
    [['a', 0.30000000000000004, 0.25], ['b', 0.9, 0.0]]

    Rows already one per trace in id order (the metrics stage's merged means) are their own
    means: they are taken as they are, not grouped again (at ten million traces a group-by
    of their text ids, done for three of each reward model's results).
    """
    require_columns(
        trace_transfer, ("trace_id", "teacher", "dataset", *_TRACE_METRICS), "trace_transfer"
    )
    first_leak = {"leak_k": ("leak_k", "first")} if leak and "leak_k" in trace_transfer else {}
    if _one_row_per_trace_in_order(trace_transfer["trace_id"]):
        columns = ["trace_id", "teacher", "dataset", *_TRACE_METRICS, *first_leak]
        out = trace_transfer[columns].reset_index(drop=True)
        # a mean is a float: whole numbers and flags become floats, floats keep their type
        whole = [m for m in _TRACE_METRICS if pd.api.types.is_integer_dtype(out[m])]
        whole += [m for m in _TRACE_METRICS if pd.api.types.is_bool_dtype(out[m])]
        return out.astype({metric: "float64" for metric in whole})
    return (
        trace_transfer.groupby("trace_id", sort=True, observed=True)
        .agg(
            teacher=("teacher", "first"),
            dataset=("dataset", "first"),
            **{metric: (metric, "mean") for metric in _TRACE_METRICS},
            **first_leak,
        )
        .reset_index()
    )


def _one_row_per_trace_in_order(ids: pd.Series) -> bool:
    """Whether ``ids`` strictly increase: sorted as a group-by sorts them, none repeated
    (neighbours compared, no hash table of the ids).

    >>> _one_row_per_trace_in_order(pd.Series(["a", "b"])), _one_row_per_trace_in_order(
    ...     pd.Series(["a", "a"])), _one_row_per_trace_in_order(pd.Series(["b", "a"]))
    (True, False, False)
    """
    # a categorical sorts by its categories' order, and no rows keep the group-by's empty
    # frame: both are left to the group-by
    if ids.empty or isinstance(ids.dtype, pd.CategoricalDtype) or not ids.is_monotonic_increasing:
        return False
    values = ids.array
    return bool(np.asarray(values[1:] != values[:-1], dtype=bool).all())


def _sum_columns() -> list[str]:
    return [f"{metric}_{part}" for metric in _TRACE_METRICS for part in ("sum", "n")]


def student_sums(trace_transfer: pd.DataFrame) -> pd.DataFrame:
    """Per (teacher, dataset, student): ``<metric>_sum`` and ``<metric>_n`` (the sum and the
    count of the values that are not missing) of FOTU and regression rate, and the hazard
    histogram (:data:`HAZARD_COLUMNS`; never-solved rows, hazard bin missing or 0, counted in
    none).

    >>> t = pd.DataFrame({"trace_id": ["a", "b", "c"], "student": "s", "teacher": "T",
    ...     "dataset": "D", "fotu": [0.5, 0.25, None], "regression_rate": 0.0,
    ...     "hazard_bin": [7, 7, None]})
    >>> row = student_sums(t).iloc[0]
    >>> float(row.fotu_sum), int(row.fotu_n), int(row.hazard_7), int(row.hazard_8)
    (0.75, 2, 2, 0)
    """
    require_columns(
        trace_transfer, (*STUDENT_KEYS, *_TRACE_METRICS, "hazard_bin"), "trace_transfer"
    )
    keys = list(STUDENT_KEYS)
    frame = trace_transfer[[*keys, *_TRACE_METRICS]].copy()
    for metric in _TRACE_METRICS:
        values = pd.to_numeric(frame.pop(metric), errors="coerce").astype(float)
        frame[f"{metric}_sum"] = values.fillna(0.0).to_numpy()
        frame[f"{metric}_n"] = values.notna().to_numpy().astype(np.int64)
    grouped = frame.groupby(keys, sort=True, observed=True)
    sums = grouped[_sum_columns()].sum()
    group = grouped.ngroup().to_numpy()
    solved, bins = solved_hazard_bins(trace_transfer["hazard_bin"])
    cells = group[solved] * N_BINS + bins[solved] - 1
    counts = np.bincount(cells, minlength=len(sums) * N_BINS).reshape(len(sums), N_BINS)
    histogram = pd.DataFrame(counts, index=sums.index, columns=list(HAZARD_COLUMNS))
    out = pd.concat([sums, histogram], axis=1).reset_index()
    for key in keys:
        out[key] = out[key].astype(str)
    return out


def merge_student_sums(parts: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """:func:`student_sums` of disjoint sets of traces added into one (rows sorted by key).

    >>> t = pd.DataFrame({"trace_id": ["a", "b"], "student": "s", "teacher": "T",
    ...     "dataset": "D", "fotu": [0.5, 0.25], "regression_rate": 0.0, "hazard_bin": 3})
    >>> both = merge_student_sums([student_sums(t[:1]), student_sums(t[1:])])
    >>> float(both.fotu_sum.item()), int(both.fotu_n.item()), int(both.hazard_3.item())
    (0.75, 2, 2)
    """
    frames = [p for p in parts if len(p)]
    columns = [*STUDENT_KEYS, *_sum_columns(), *HAZARD_COLUMNS]
    if not frames:
        return pd.DataFrame(columns=columns)
    if len(frames) == 1:
        return frames[0][columns].sort_values(list(STUDENT_KEYS)).reset_index(drop=True)
    joined = pd.concat(frames, ignore_index=True)
    return joined.groupby(list(STUDENT_KEYS), sort=True).sum().reset_index()[columns]


def teacher_transfer(sums: pd.DataFrame) -> pd.DataFrame:
    """Per (teacher, dataset): FOTU, SOTU and regression rate of the students'
    :func:`student_sums`, each the mean over students of the student's mean over traces
    (SOTU: the normalised entropy of the student's hazard histogram; NaN when none solved).

    >>> t = pd.DataFrame({"trace_id": ["a", "b", "a"], "student": ["s", "s", "u"],
    ...     "teacher": "T", "dataset": "D", "fotu": [0.5, 0.25, 1.0],
    ...     "regression_rate": 0.0, "hazard_bin": [7, 7, 3]})
    >>> row = teacher_transfer(student_sums(t)).iloc[0]
    >>> float(row.fotu), float(row.sotu)  # ((0.5 + 0.25) / 2 + 1.0) / 2; one bin each
    (0.6875, 0.0)
    """
    keys = list(STUDENT_KEYS)
    names = ["teacher", "dataset", *metrics_in("oversight_teacher")]
    if not len(sums):
        return pd.DataFrame(columns=names)
    per_student = sums[keys].copy()
    for metric in _TRACE_METRICS:
        count = sums[f"{metric}_n"].to_numpy(dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_student[metric] = np.where(
                count > 0, sums[f"{metric}_sum"].to_numpy(dtype=float) / count, np.nan
            )
    histograms = sums[list(HAZARD_COLUMNS)].to_numpy(dtype=np.int64)
    per_student["sotu"] = [sotu_of_histogram(h) for h in histograms]
    return (
        per_student.groupby(["teacher", "dataset"], sort=True, observed=True)[names[2:]]
        .mean()
        .reset_index()
    )


@dataclass
class RewardPartial:
    """One chunk's (or several merged chunks') share of the reward results' transfer inputs:
    the per-trace means (one frame per chunk) and, per subset (:data:`SUBSETS`), the
    per-student sums."""

    #: a frame per chunk, or its :class:`~legival_core.store.spilled_frames.SpilledFrame`
    per_trace: list[pd.DataFrame | SpilledFrame] = field(default_factory=list)
    sums: dict[str, pd.DataFrame] = field(default_factory=dict)

    @classmethod
    def of_chunk(cls, trace_transfer: pd.DataFrame, grades: pd.DataFrame) -> RewardPartial:
        """The partial of one chunk's ``trace_transfer`` rows and its traces' ``grades``."""
        correct = trace_transfer[is_in(trace_transfer["trace_id"].astype(str), correct_ids(grades))]
        means = trace_means(trace_transfer, leak=True)
        for key in ("trace_id", "teacher", "dataset"):
            means[key] = means[key].astype(str)
        return cls(
            per_trace=[means],
            sums={"all": student_sums(trace_transfer), "correct": student_sums(correct)},
        )

    def merge(self, other: RewardPartial) -> RewardPartial:
        """Both partials as one (of disjoint sets of traces)."""
        return RewardPartial(
            per_trace=self.per_trace + other.per_trace,
            sums={
                subset: merge_student_sums(
                    [s for s in (self.sums.get(subset), other.sums.get(subset)) if s is not None]
                )
                for subset in SUBSETS
            },
        )

    def joined(self) -> RewardPartial:
        """This partial, its chunks' per-trace means joined into one frame sorted by trace id.

        Joined in place: the chunks' frames are let go as the joined one is made (the means
        held once, not twice, at a million traces), and asking again finds them joined. The
        metrics stage leaves the join to the page results, which ask for the means after the
        decomposition has let its instances go."""
        frames = held(self.per_trace)  # a frame the stage spilled to its scratch, read back
        self.per_trace.clear()
        if len(frames) == 1 and frames[0]["trace_id"].is_monotonic_increasing:
            self.per_trace.append(frames[0])
            return self
        if not frames:
            joined = pd.DataFrame(columns=["trace_id", "teacher", "dataset", *_TRACE_METRICS])
        else:
            joined = pd.concat(frames, ignore_index=True)
            frames.clear()
            joined = joined.sort_values("trace_id", kind="stable", ignore_index=True)
        self.per_trace.append(joined)
        return self

    def trace_means(self) -> pd.DataFrame:
        """Every chunk's per-trace means as one frame, sorted by trace id."""
        (joined,) = held(self.joined().per_trace)
        return joined


def sums_without(
    sums: pd.DataFrame, teachers: Sequence[str] = (), dataset: str | None = None
) -> pd.DataFrame:
    """``sums`` without the rows of ``teachers`` and, with a ``dataset``, of other datasets."""
    keep = ~is_in(sums["teacher"], [str(t) for t in teachers])
    if dataset is not None:
        keep &= (sums["dataset"].astype(str) == str(dataset)).to_numpy()
    return sums if keep.all() else sums[keep]
