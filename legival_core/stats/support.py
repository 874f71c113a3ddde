"""Which datasets a teacher-level value is averaged over: the common support of the compared
teachers (docs/rankings.md, "Common support").

A teacher-level value is a mean over datasets of each dataset's value. When one teacher has no
value on a dataset (no correct trace there, so no FOTU), a plain mean over the datasets each
teacher has compares means over different datasets: a teacher that missed the hardest dataset
looks better for missing it. So by default (``support="common"``) every compared teacher is
averaged over the same datasets, those on which *every* compared teacher has a value (at least
one eligible trace: any trace for accuracy and the efficiency metrics, a correct trace with
rollouts for FOTU, a first solve for SOTU). ``support="all"`` averages each teacher over every
dataset it has a value on and leaves the teachers that miss one unranked, listed apart.

When every teacher covers every dataset (the papers' tables) both give the plain mean over
datasets. Teachers shown but not compared (reference teachers, ``outside``) do not narrow the
support; they are averaged over the same datasets as the others.

Pure pandas; nothing here knows what a metric means.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = [
    "ALL_DATASETS",
    "COMMON_SUPPORT",
    "SUPPORTS",
    "coverage_text",
    "covered_matrix",
    "support_datasets",
    "support_mask",
    "teacher_means",
]

#: Average over the datasets every compared teacher covers (the default).
COMMON_SUPPORT = "common"
#: Average over every dataset; teachers that miss one are left unranked.
ALL_DATASETS = "all"
#: The choices, the default first (the app's ``?support=`` and the API's ``support=``).
SUPPORTS = (COMMON_SUPPORT, ALL_DATASETS)


def check_support(support: str) -> str:
    """``support`` if it is one of :data:`SUPPORTS`, else a ValueError naming the choices.

    >>> check_support("all")
    'all'
    >>> check_support("some")
    Traceback (most recent call last):
    ...
    ValueError: support must be one of 'common', 'all'; got 'some'
    """
    if support not in SUPPORTS:
        choices = ", ".join(repr(s) for s in SUPPORTS)
        raise ValueError(f"support must be one of {choices}; got {support!r}")
    return support


def covered_matrix(
    frame: pd.DataFrame, metric: str, by: str = "teacher", over: str = "dataset"
) -> pd.DataFrame:
    """Teacher × dataset: True where the teacher has a value of ``metric`` on the dataset.

    The datasets are every dataset of ``frame`` (the selection), so a teacher with no row on
    one does not cover it.

    >>> tm = pd.DataFrame({"teacher": ["a", "a", "b"], "dataset": ["x", "y", "x"],
    ...     "fotu": [0.2, None, 0.1]})
    >>> covered_matrix(tm, "fotu").astype(int).values.tolist()
    [[1, 0], [1, 0]]
    """
    datasets = sorted(pd.unique(frame[over].astype(str)))
    teachers = sorted(pd.unique(frame[by].astype(str)))
    values = pd.to_numeric(frame[metric], errors="coerce")
    has = pd.DataFrame(
        {by: frame[by].astype(str).to_numpy(), over: frame[over].astype(str).to_numpy()}
    )[values.notna().to_numpy()]
    matrix = pd.DataFrame(False, index=pd.Index(teachers, name=by), columns=datasets)
    for teacher, dataset in has.drop_duplicates().itertuples(index=False):
        matrix.loc[teacher, dataset] = True
    return matrix


def support_datasets(covered: pd.DataFrame, outside: Sequence[str] = ()) -> list[str]:
    """The datasets every compared teacher covers: the columns of ``covered``
    (:func:`covered_matrix`) that are True for every teacher not in ``outside`` that covers at
    least one dataset (a teacher with no value anywhere has nothing to compare and narrows
    nothing). With no compared teacher, every dataset someone covers.

    >>> covered = pd.DataFrame([[True, True], [True, False], [False, False]],
    ...     index=["a", "b", "c"], columns=["x", "y"])
    >>> support_datasets(covered), support_datasets(covered, outside=["b"])
    (['x'], ['x', 'y'])
    """
    wanted = {str(t) for t in outside}
    compared = covered[[str(t) not in wanted for t in covered.index]]
    compared = compared[compared.any(axis=1)]
    if compared.empty:
        return [str(d) for d in covered.columns[covered.any(axis=0)]]
    return [str(d) for d in compared.columns[compared.all(axis=0)]]


def support_mask(covered: pd.DataFrame, support: str, outside: Sequence[str] = ()) -> pd.Series:
    """Per dataset of ``covered``: whether teacher-level means use it (True for every dataset
    under ``support="all"``)."""
    if check_support(support) == ALL_DATASETS:
        return pd.Series(True, index=covered.columns)
    common = set(support_datasets(covered, outside))
    return pd.Series([d in common for d in covered.columns], index=covered.columns)


def teacher_means(
    frame: pd.DataFrame,
    metrics: Sequence[str],
    *,
    by: str = "teacher",
    over: str = "dataset",
    support: str = COMMON_SUPPORT,
    outside: Sequence[str] = (),
) -> pd.DataFrame:
    """One row per teacher: each metric averaged over datasets under ``support``, with the
    datasets behind it.

    Columns: ``by``, ``n_<over>`` (the datasets of the selection), then per metric ``m`` (the
    mean), ``m_datasets`` (how many datasets that mean is over) and ``m_covered`` (how many
    datasets the teacher has a value on). Under ``"common"`` the mean is over
    :func:`support_datasets` (teachers in ``outside`` do not narrow it); under ``"all"`` over
    every dataset the teacher covers.

    >>> tm = pd.DataFrame({"teacher": ["a", "a", "b", "b"], "dataset": ["x", "y", "x", "y"],
    ...     "fotu": [0.1, 0.5, 0.3, None]})
    >>> teacher_means(tm, ["fotu"]).values.tolist()
    [['a', 2, 0.1, 1, 2], ['b', 2, 0.3, 1, 1]]
    >>> means = teacher_means(tm, ["fotu"], support="all")
    >>> means[["teacher", "fotu", "fotu_datasets"]].values.tolist()
    [['a', 0.3, 2], ['b', 0.3, 1]]
    """
    check_support(support)
    teachers = sorted(pd.unique(frame[by].astype(str)))
    datasets = sorted(pd.unique(frame[over].astype(str)))
    out = pd.DataFrame({by: teachers})
    out[f"n_{over}"] = len(datasets)
    keys = frame[[by, over]].astype(str)
    for metric in metrics:
        values = pd.to_numeric(frame[metric], errors="coerce").astype("float64")
        table = (
            pd.DataFrame({by: keys[by].to_numpy(), over: keys[over].to_numpy(), "v": values})
            .groupby([by, over], sort=True)["v"]
            .mean()
            .unstack(over)
            .reindex(index=teachers, columns=datasets)
        )
        covered = table.notna()
        used = support_mask(covered, support, outside).to_numpy()
        chosen = table.to_numpy(dtype="float64")[:, used]
        with np.errstate(invalid="ignore"):
            count = (~np.isnan(chosen)).sum(axis=1)
            total = np.where(np.isnan(chosen), 0.0, chosen).sum(axis=1)
            mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        out[metric] = mean
        out[f"{metric}_datasets"] = count.astype("int64")
        out[f"{metric}_covered"] = covered.sum(axis=1).to_numpy(dtype="int64")
    return out


def coverage_text(covered: object, total: object) -> str:
    """A teacher's coverage as a page shows it: "4/5 datasets"; empty when complete.

    >>> coverage_text(4, 5), coverage_text(5, 5)
    ('4/5 datasets', '')
    """
    try:
        have, of = int(covered), int(total)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return ""
    return "" if have >= of else f"{have}/{of} datasets"
