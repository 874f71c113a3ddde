"""The efficiency-decomposition page's data: the E0 board, the Δlog waterfall, failure modes
and the solver-workload audits (Kaiser et al., arXiv 2602.09805). The instances come from
:func:`legival_core.metrics.decomposition.decomposition_instances`, as the metrics stage's do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from legival_core.metrics.decomposition import log_ratio

# ---------------------------------------------------------------------------------------------
# Efficiency decomposition
# ---------------------------------------------------------------------------------------------


def e0_board(
    decomposition: pd.DataFrame,
    references: Sequence[str] = (),
    include_references: bool = False,
) -> pd.DataFrame:
    """The E0 board: one row per (benchmark, model), ranked by E0 within each benchmark.

    Columns: benchmark, model, e0_rank, e0 (correct answers per 1,000 tokens), accuracy,
    r_ctx, r_logic, mean_tokens (E[T]), vo, kappa (where the layer has them). Reference
    teachers (``references``) keep their row but get no rank and sort last, unless
    ``include_references``.

    >>> d = pd.DataFrame({"benchmark": "b", "model": ["a", "human", "c"], "e0": [0.5, 5.8, 0.1]})
    >>> e0_board(d, ["human"])[["model", "e0_rank"]].values.tolist()
    [['a', 1], ['c', 2], ['human', <NA>]]
    """
    columns = [
        c
        for c in (
            "accuracy",
            "r_ctx",
            "r_logic",
            "mean_tokens",
            "mean_workload",
            "vo",
            "kappa",
            "coverage",
            "n_instances",
        )
        if c in decomposition
    ]
    board = decomposition[["benchmark", "model", "e0", *columns]].copy()
    left_out = () if include_references else [str(r) for r in references]
    ranked = board["e0"].where(~board["model"].astype(str).isin(left_out))
    board.insert(
        2,
        "e0_rank",
        ranked.groupby(board["benchmark"], observed=True)
        .rank(ascending=False, method="min")
        .astype("Int64"),
    )
    return board.sort_values(["benchmark", "e0_rank", "model"]).reset_index(drop=True)


def delta_log_terms(row: Mapping[str, Any], reference: Mapping[str, Any]) -> pd.DataFrame:
    """The Δlog E0 waterfall of one model against a reference, from two decomposition rows.

    Δlog E0 = Δlog r_ctx + Δlog r_logic − Δlog E[W] − Δlog VŌ − Δlog κ (Kaiser et al., arXiv
    2602.09805). When a row lacks the workload terms, −Δlog E[T] stands in for the last three.
    A ``rounding`` bar holds whatever the stored terms leave over (published tables are
    rounded; on rows computed by :func:`legival_core.metrics.decomposition.decompose` it is ~0), so
    the bars always add up to the ``total``.

    Returns ``term, value, measure`` (``"relative"`` bars, then the ``"total"``).

    >>> a = {"e0": 2.0, "r_ctx": 1.0, "r_logic": 0.5, "mean_tokens": 250.0}
    >>> b = {"e0": 1.0, "r_ctx": 1.0, "r_logic": 0.5, "mean_tokens": 500.0}
    >>> t = delta_log_terms(a, b)  # tokens halve: −Δlog E[T] = log 2 = Δlog E0
    >>> [(r.term, round(r.value, 4) + 0.0) for r in t.itertuples()][2:]
    [('−Δlog E[T]', 0.6931), ('rounding', 0.0), ('Δlog E0', 0.6931)]
    """

    def term(name: str) -> tuple[float, float]:
        return float(row.get(name, math.nan)), float(reference.get(name, math.nan))

    parts = [
        ("Δlog r_ctx", float(log_ratio(*term("r_ctx")))),
        ("Δlog r_logic", float(log_ratio(*term("r_logic")))),
    ]
    workload = [float(log_ratio(*term(n))) for n in ("mean_workload", "vo", "kappa")]
    if all(math.isfinite(v) for v in workload):
        parts += [
            ("−Δlog E[W]", -workload[0]),
            ("−Δlog VŌ", -workload[1]),
            ("−Δlog κ", -workload[2]),
        ]
    elif math.isfinite(workload[1]) and math.isfinite(workload[2]):
        # Published rows give VŌ and κ but not E[W]: E[W] = E[T] / (VŌ κ) on each side.
        dlog_tokens = float(log_ratio(*term("mean_tokens")))
        parts += [
            ("−Δlog E[W]", -(dlog_tokens - workload[1] - workload[2])),
            ("−Δlog VŌ", -workload[1]),
            ("−Δlog κ", -workload[2]),
        ]
    else:
        parts.append(("−Δlog E[T]", -float(log_ratio(*term("mean_tokens")))))
    total = float(log_ratio(*term("e0")))
    explained = sum(v for _, v in parts)
    parts.append(("rounding", total - explained if math.isfinite(total) else math.nan))
    frame = pd.DataFrame(parts, columns=["term", "value"])
    frame["measure"] = "relative"
    total_row = pd.DataFrame({"term": ["Δlog E0"], "value": [total], "measure": ["total"]})
    return pd.concat([frame, total_row], ignore_index=True)


def failure_mode_table(decomposition: pd.DataFrame, references: Sequence[str] = ()) -> pd.DataFrame:
    """Failure-mode label of every model against its benchmark's best-E0 model.

    The Δlog terms are taken from the stored rows (model vs reference), then labelled by
    :func:`legival_core.metrics.decomposition.failure_modes` (logic-, context-, verbosity- or
    redundancy-limited; the reference itself has no shortfall). Reference teachers
    (``references``: a human solution, a gold rationale) are never the yardstick: the best
    model is the best non-reference one, and a reference teacher's own row is left out.

    >>> d = pd.DataFrame({"benchmark": "b", "model": ["a", "human", "c"], "e0": [0.5, 5.8, 0.1],
    ...     "r_ctx": 1.0, "r_logic": [0.5, 1.0, 0.1], "mean_tokens": [1000.0, 172.0, 1000.0]})
    >>> failure_mode_table(d, ["human"])[["model", "reference"]].values.tolist()
    [['a', 'a'], ['c', 'a']]
    """
    from legival_core.metrics.decomposition import failure_modes

    left_out = {str(r) for r in references}
    decomposition = decomposition[~decomposition["model"].astype(str).isin(left_out)]
    rows = []
    for bench, group in decomposition.groupby("benchmark", observed=True, sort=True):
        best = group.sort_values(["e0", "model"], ascending=[False, True]).iloc[0]
        for record in group.to_dict(orient="records"):

            def d(name: str, rec: dict[str, Any] = record, ref: pd.Series = best) -> float:
                return float(
                    log_ratio(float(rec.get(name, math.nan)), float(ref.get(name, math.nan)))
                )

            rows.append(
                {
                    "benchmark": bench,
                    "model": record["model"],
                    "reference": best["model"],
                    "dlog_e0": d("e0"),
                    "dlog_r_ctx": d("r_ctx"),
                    "dlog_r_logic": d("r_logic"),
                    "dlog_tokens": d("mean_tokens"),
                    "dlog_vo": d("vo"),
                    "dlog_kappa": d("kappa"),
                }
            )
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table["failure_mode"] = failure_modes(table).to_numpy()
    return table


def workload_audits(
    instances: pd.DataFrame,
    n_splits: int = 200,
    seed: int = 0,
    references: Sequence[str] = (),
    include_references: bool = False,
) -> dict[str, pd.DataFrame]:
    """Solver-derived workload and its audits (Kaiser et al., arXiv 2602.09805).

    The pool is every model of the instances except the reference teachers (``references``:
    a human solution that carries the gold would solve every instance), unless
    ``include_references``; the references' instances are left out of the audits too.
    Returns ``"audits"`` (leave-self-out, leave-top-k for k = 1, 3, 5, and ``n_splits``
    random half-pool splits, one table) and ``"concentration"`` (top-1 solver share,
    effective number of solvers) from :mod:`legival_core.metrics.workload`.
    """
    from legival_core.metrics.workload import pool_audits
    from legival_core.published.references import keep_teachers

    base = keep_teachers(instances, references, include_references, column="model")
    return pool_audits(base, n_splits, seed)


#: The failure-mode table's headers as the page shows them: what each column is, and its unit
#: (a natural-log ratio of the model's term to the reference model's; 0 = equal).
FAILURE_MODE_LABELS = {
    "failure_mode": "failure mode",
    "dlog_e0": "Δlog E0 (log ratio)",
    "dlog_r_ctx": "Δlog r_ctx (log ratio)",
    "dlog_r_logic": "Δlog r_logic (log ratio)",
    "dlog_tokens": "Δlog E[T] tokens (log ratio)",
    "dlog_vo": "Δlog VŌ overhead (log ratio)",
    "dlog_kappa": "Δlog κ coupling (log ratio)",
}


#: What a Δlog cell says where the model has no correct answer on the benchmark (E0 = 0, so
#: log E0 = −∞): the shortfall is total, not a number to compare.
NO_CORRECT_ANSWER = "no correct answer"
#: The same where the yardstick has none (log ratio +∞).
REFERENCE_NO_CORRECT = "reference: no correct answer"


def dlog_cell(value: object) -> object:
    """A Δlog value as the failure-mode table shows it: the number when finite, else what the
    infinity means (:data:`NO_CORRECT_ANSWER` for −∞, :data:`REFERENCE_NO_CORRECT` for +∞).

    >>> dlog_cell(-0.25), dlog_cell(float("-inf")), dlog_cell(float("inf"))
    (-0.25, 'no correct answer', 'reference: no correct answer')
    """
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return value
    if math.isinf(number):
        return NO_CORRECT_ANSWER if number < 0 else REFERENCE_NO_CORRECT
    return value


def failure_mode_cells(modes: pd.DataFrame) -> pd.DataFrame:
    """:func:`failure_mode_table` for the page: every ``dlog_*`` column through
    :func:`dlog_text`, so −∞ reads "no correct answer" instead of a number. A column with no
    infinity keeps its numbers (and its numeric sorting); one with an infinity becomes text
    throughout (a grid column holds one type).

    >>> modes = pd.DataFrame({"dlog_e0": [-0.5, float("-inf")], "dlog_vo": [0.1, 0.2]})
    >>> failure_mode_cells(modes).values.tolist()
    [['−0.500', 0.1], ['no correct answer', 0.2]]
    """
    out = modes.copy()
    for column in [c for c in out.columns if str(c).startswith("dlog_")]:
        values = pd.to_numeric(out[column], errors="coerce")
        if values.abs().eq(math.inf).any():
            out[column] = [dlog_text(v) for v in out[column]]
    return out


def dlog_text(value: object) -> str:
    """A waterfall bar's label: the signed number, or what an infinite Δlog means
    (:func:`dlog_cell`).

    >>> dlog_text(0.25), dlog_text(float("-inf"))
    ('+0.250', 'no correct answer')
    """
    from legival_core.views.display import format_signed

    cell = dlog_cell(value)
    return cell if isinstance(cell, str) else format_signed(value)
