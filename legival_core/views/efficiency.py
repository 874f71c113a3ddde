"""The efficiency-decomposition page's data: the E0 board, the Δlog waterfall, failure modes
and the solver-workload audits (Kaiser et al., arXiv 2602.09805). The instances come from
:func:`legival_core.metrics.decomposition.decomposition_instances`, as the metrics stage's do.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
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


def waterfall_terms(
    decomposition: pd.DataFrame, benchmark: str, layer: str, model: str, reference: str
) -> pd.DataFrame:
    """The Δlog E0 bars of ``model`` against ``reference`` (:func:`delta_log_terms`) from the
    stored ``decomposition`` rows of one ``benchmark`` and workload ``layer`` (each model's
    first row there).

    >>> rows = pd.DataFrame({"benchmark": ["b", "b", "b"], "layer": ["native"] * 2 + ["trace"],
    ...     "model": ["m", "r", "m"], "e0": [1.0, 2.0, 9.0], "r_ctx": [1.0] * 3,
    ...     "r_logic": [0.5] * 3, "mean_tokens": [500.0, 250.0, 1.0]})
    >>> terms = waterfall_terms(rows, "b", "native", "m", "r")  # tokens double: log(1/2)
    >>> [(r.term, round(r.value, 4)) for r in terms.itertuples()][-1]
    ('Δlog E0', -0.6931)
    """
    here = decomposition[
        (decomposition["benchmark"] == benchmark) & (decomposition["layer"] == layer)
    ]
    first = {
        name: here[here["model"].astype(str) == name].iloc[0].to_dict()
        for name in (model, reference)
    }
    return delta_log_terms(first[model], first[reference])


def default_comparison(
    models: Sequence[Any], references: Sequence[str]
) -> tuple[Any | None, Any | None]:
    """The waterfall's default (model, compared with) among ``models`` in board order (best
    E0 first): the runner-up against the best, both models, not reference teachers (a model
    with E0 = 0 would make every bar −∞, so the best is the yardstick); every model counts
    when all are references.

    >>> default_comparison(["human", "a", "b"], ["human"])
    ('b', 'a')
    >>> default_comparison(["a"], []), default_comparison([], [])
    (('a', 'a'), (None, None))
    """
    apart = {str(r) for r in references}
    candidates = [m for m in models if str(m) not in apart] or list(models)
    if not candidates:
        return None, None
    return (candidates[1] if len(candidates) > 1 else candidates[0]), candidates[0]


def off_scale(board: pd.DataFrame, apart: Collection[str], top: float) -> list[str]:
    """``"<model> E0 <value>"`` for each teacher of ``apart`` (reference teachers, drawn as
    lines) whose E0 lies above ``top``, the top of the E0 chart's axis.

    >>> board = pd.DataFrame({"model": ["a", "human"], "e0": [1.0, 5.0]})
    >>> off_scale(board, {"human"}, 1.25), off_scale(board, {"human"}, 6.0)
    (['human E0 5.00'], [])
    """
    off = board[board["model"].astype(str).isin(set(apart)) & (board["e0"] > top)]
    return [f"{m} E0 {v:.2f}" for m, v in zip(off["model"], off["e0"], strict=True)]


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


# ---------------------------------------------------------------------------------------------
# Intervals and n for the E0 board and the waterfall (problem bootstrap)
# ---------------------------------------------------------------------------------------------

#: The E0 board's headers as the page shows them: a readable name and its unit.
E0_BOARD_LABELS = {
    "e0_rank": "E0 rank",
    "e0": "E0 (correct per 1,000 tokens)",
    "e0_lo": "E0 95% lo",
    "e0_hi": "E0 95% hi",
    "n_instances": "n (problems)",
    "r_ctx": "r_ctx (share completed)",
    "r_logic": "r_logic (share correct when completed)",
    "mean_tokens": "E[T] (tokens per output)",
    "mean_workload": "E[W] (workload units)",
    "vo": "VŌ overhead (mean T/W)",
    "kappa": "κ coupling (E[T] / (E[W]·VŌ))",
    "coverage": "coverage (share with a workload)",
}

#: Where a bootstrap interval is not shown: the resampled point is not the board's.
NO_E0_INTERVAL = "no interval"


def e0_intervals(
    instances: pd.DataFrame, n_boot: int, seed: int, alpha: float = 0.05
) -> pd.DataFrame:
    """Per model of one benchmark's ``instances``: E0 and its 95% percentile interval over
    ``n_boot`` resamples of the problems, and the problems behind it
    (:func:`legival_core.metrics.decomposition.decompose`). Columns ``model, e0, e0_lo, e0_hi,
    n``; empty without instances.

    >>> t = pd.DataFrame({"model": "a", "benchmark": "b", "instance_id": list("1234"),
    ...     "correct": [1, 1, 0, 0], "tokens": [100, 300, 200, 400], "truncated": 0})
    >>> row = e0_intervals(t, n_boot=200, seed=0).iloc[0]
    >>> float(row.e0), int(row.n), bool(row.e0_lo <= row.e0 <= row.e0_hi)
    (2.0, 4, True)
    """
    from legival_core.metrics.decomposition import decompose

    if instances.empty:
        return pd.DataFrame(columns=["model", "e0", "e0_lo", "e0_hi", "n"])
    result = decompose(
        instances.drop(columns=["workload", "trace"], errors="ignore"),
        reference=None,
        n_boot=n_boot,
        seed=seed,
        alpha=alpha,
        truncated_correct="count_incorrect",
    )
    return result[["model", "e0", "e0_lo", "e0_hi", "n"]].reset_index(drop=True)


def board_with_intervals(board: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """The E0 board with ``e0_lo``, ``e0_hi`` and ``n_instances`` right after E0 (so n is on the
    first screen, not cut off at the right), the interval kept only where the resampled E0 is
    the board's own (relative 1e-9): an interval goes only around the number it belongs to.

    >>> board = pd.DataFrame({"benchmark": "b", "model": ["a", "c"], "e0_rank": [1, 2],
    ...     "e0": [2.0, 1.0], "accuracy": [0.5, 0.2], "n_instances": [4, 4]})
    >>> iv = pd.DataFrame({"model": ["a", "c"], "e0": [2.0, 1.5], "e0_lo": [1.0, 0.5],
    ...     "e0_hi": [3.0, 2.0], "n": [4, 4]})
    >>> board_with_intervals(board, iv).columns.tolist()[3:7]
    ['e0', 'e0_lo', 'e0_hi', 'n_instances']
    >>> board_with_intervals(board, iv)["e0_lo"].tolist()  # c's resampled E0 is not the board's
    [1.0, nan]
    """
    import numpy as np

    out = board.copy()
    found = intervals.set_index(intervals["model"].astype(str)) if len(intervals) else None
    lo = pd.Series(np.nan, index=out.index)
    hi = pd.Series(np.nan, index=out.index)
    if found is not None:
        keys = out["model"].astype(str)
        same = np.isclose(
            keys.map(found["e0"]).astype(float), out["e0"].astype(float), rtol=1e-9, atol=0.0
        )
        lo = keys.map(found["e0_lo"]).astype(float).where(same)
        hi = keys.map(found["e0_hi"]).astype(float).where(same)
        if "n_instances" not in out:
            out["n_instances"] = keys.map(found["n"]).astype("Int64")
    at = list(out.columns).index("e0") + 1
    rest = [c for c in out.columns if c not in ("n_instances",)]
    out = out[rest[:at] + (["n_instances"] if "n_instances" in out else []) + rest[at:]]
    out.insert(at, "e0_hi", hi.to_numpy())
    out.insert(at, "e0_lo", lo.to_numpy())
    return out


#: The waterfall's bars and the paired Δlog column each resamples, with its sign on the chart.
_WATERFALL_DLOGS = {
    "Δlog r_ctx": ("dlog_r_ctx", 1.0),
    "Δlog r_logic": ("dlog_r_logic", 1.0),
    "−Δlog E[T]": ("dlog_tokens", -1.0),
    "Δlog E0": ("dlog_e0", 1.0),
}


def waterfall_intervals(
    terms: pd.DataFrame,
    instances: pd.DataFrame,
    model: str,
    reference: str,
    n_boot: int,
    seed: int,
) -> pd.DataFrame:
    """``terms`` (:func:`delta_log_terms`) with each bar's 95% interval over ``n_boot`` paired
    resamples of the problems both models answered, and that n (``lo``, ``hi``,
    ``n_paired``), for the bars a paired bootstrap gives (Δlog r_ctx, Δlog r_logic, −Δlog E[T]
    and the total); the workload bars keep no interval (their W depends on the layer). An
    interval is kept only where its paired point equals the bar (relative 1e-9).

    >>> t = pd.DataFrame({"model": ["a"] * 4 + ["r"] * 4, "benchmark": "b",
    ...     "instance_id": list("1234") * 2, "correct": [1, 1, 0, 0, 1, 1, 1, 0],
    ...     "tokens": [100, 300, 200, 400] * 2, "truncated": 0})
    >>> rows = {m: {"e0": 1000 * acc / 250, "r_ctx": 1.0, "r_logic": acc, "mean_tokens": 250.0}
    ...     for m, acc in (("a", 0.5), ("r", 0.75))}
    >>> terms = delta_log_terms(rows["a"], rows["r"])
    >>> out = waterfall_intervals(terms, t, "a", "r", n_boot=200, seed=0)
    >>> int(out.set_index("term").loc["Δlog E0", "n_paired"])
    4
    """
    from legival_core.metrics.decomposition import decompose

    out = terms.copy()
    out["lo"], out["hi"] = float("nan"), float("nan")
    out["n_paired"] = pd.array([pd.NA] * len(out), dtype="Int64")
    pair = instances[instances["model"].astype(str).isin([str(model), str(reference)])]
    if pair.empty or str(model) == str(reference) or pair["model"].nunique() < 2:
        return out
    result = decompose(
        pair.drop(columns=["workload", "trace"], errors="ignore"),
        reference=str(reference),
        n_boot=n_boot,
        seed=seed,
        truncated_correct="count_incorrect",
    )
    row = result[result["model"].astype(str) == str(model)].iloc[0]
    for i, term in enumerate(out["term"]):
        if term not in _WATERFALL_DLOGS:
            continue
        column, sign = _WATERFALL_DLOGS[term]
        value = float(out.at[i, "value"])
        point = sign * float(row[column])
        if not (math.isfinite(value) and math.isclose(point, value, rel_tol=1e-9, abs_tol=1e-12)):
            continue
        bounds = sorted(sign * float(row[f"{column}_{end}"]) for end in ("lo", "hi"))
        out.at[i, "lo"], out.at[i, "hi"] = bounds
        out.at[i, "n_paired"] = int(row["n_paired"])
    return out


def waterfall_csv(terms: pd.DataFrame) -> pd.DataFrame:
    """The waterfall's rows for the CSV export: an infinite Δlog written as what it means
    (:func:`dlog_text`: "no correct answer"), never ``-inf``; finite values keep full precision.

    >>> terms = pd.DataFrame({"term": ["Δlog E0"], "value": [float("-inf")], "measure": "total"})
    >>> waterfall_csv(terms)["value"].tolist()
    ['no correct answer']
    """
    out = terms.copy()
    for column in [c for c in ("value", "lo", "hi") if c in out]:
        values = pd.to_numeric(out[column], errors="coerce")
        if values.abs().eq(math.inf).any():
            out[column] = [dlog_cell(v) for v in out[column]]
    return out


# ---------------------------------------------------------------------------------------------
# Workload audits as the page shows them
# ---------------------------------------------------------------------------------------------

#: The workload audits' headers: a readable name and its unit.
AUDIT_LABELS = {
    "audit": "audit",
    "k": "k (best models left out)",
    "n_models": "models in the pool",
    "rho": "ρ (Spearman, VŌ ranks)",
    "rho_p05": "ρ 5th percentile",
    "rho_p95": "ρ 95th percentile",
    "coverage": "coverage (share of problems with a solver workload)",
    "why": "why no ρ",
}
#: The audits' names in words.
AUDIT_NAMES = {
    "leave_self_out": "leave self out",
    "leave_top_k": "leave out the best k",
    "held_out_pools": "two disjoint half pools",
}
#: The solver-concentration table's headers.
CONCENTRATION_LABELS = {
    "n_covered": "problems covered",
    "n_solvers": "solvers",
    "top1_solver": "top solver",
    "top1_share": "top solver's share of problems",
    "effective_solvers": "effective number of solvers",
}


def audit_rows(audits: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The workload audits as the page lists them, and what was left out.

    A leave-top-k row whose k is at least the pool's size audits nothing (no model is left to
    solve anything): it is left out, and named in the second value. Any other row without a ρ
    keeps its place with the reason in ``why`` (the reduced pool solves no problem, so no
    model has a workload to rank; or fewer than two models have a VŌ under both pools), and
    its coverage is shown, not a ρ of 0. Audit names are written in words.

    >>> audits = pd.DataFrame({"benchmark": "b", "audit": ["leave_top_k"] * 3, "k": [1.0, 3, 5],
    ...     "n_models": 4, "rho": [0.8, None, None], "rho_p05": None, "rho_p95": None,
    ...     "coverage": [0.3, 0.0, 0.0]})
    >>> rows, left_out = audit_rows(audits)
    >>> rows[["k", "why"]].values.tolist(), left_out
    ([[1.0, ''], [3.0, 'the 1 model left solves no problem: no workload to rank']], ['k = 5'])
    """
    if audits.empty:
        return audits.assign(why=pd.Series(dtype=object)), []
    k = pd.to_numeric(audits["k"], errors="coerce")
    n_models = pd.to_numeric(audits["n_models"], errors="coerce")
    nothing_left = (audits["audit"] == "leave_top_k") & (k >= n_models)
    left_out = [f"k = {int(v)}" for v in k[nothing_left]]
    rows = audits[~nothing_left].reset_index(drop=True).copy()
    why = []
    for row in rows.itertuples(index=False):
        if pd.notna(row.rho):
            why.append("")
        elif row.audit == "leave_top_k" and pd.notna(row.coverage) and row.coverage == 0:
            left = int(row.n_models) - int(row.k)
            models = "model" if left == 1 else "models"
            why.append(f"the {left} {models} left solves no problem: no workload to rank")
        elif pd.notna(row.coverage) and row.coverage == 0:
            why.append("the reduced pools solve no problem: no workload to rank")
        else:
            why.append("fewer than two models have a VŌ under both pools (no overlap)")
    rows.insert(list(rows.columns).index("rho") + 1, "why", why)  # beside the missing ρ
    rows["audit"] = rows["audit"].map(lambda a: AUDIT_NAMES.get(str(a), str(a)))
    return rows, left_out
