"""Workloads W_i for the efficiency decomposition, and audits of solver-derived ones
(docs/metrics/decomposition.md).

Two sources of W_i > 0, the amount of reasoning an instance needs:

- **native**: metadata of the benchmark, one number per instance, the same for every model.
  Examples: CHAMP's gold solutions are written as numbered steps, so W = number of steps
  (:func:`champ_solution_steps`); GSM8K's gold solutions have one line per step and a
  calculator annotation ``<<a*b=c>>`` per computation, so W = solution lines
  (:func:`gsm8k_solution_steps`) or arithmetic operations (:func:`gsm8k_operation_count`).
  Others: ProofWriter proof depth, ZebraLogic clue atoms, CogniLoad condition checks plus
  updates. :func:`native_workload` turns any such column into the ``workload`` column.
- **solver-derived** (:func:`solver_workload`): rank a reference pool of models by E0 and, per
  instance, take the token count of the highest-ranked pool model that answered it correctly.

Because a solver-derived workload depends on the pool, three audits check whether the VŌ
ranking of models survives changes to it (:func:`leave_self_out`, :func:`leave_top_k`,
:func:`held_out_pools`), and :func:`solver_concentration` says how much one solver dominates.

Reference: Kaiser, Frigessi, Ramezani-Kebrya, Ricaud, "Beyond Accuracy: Decomposing the
Reasoning Efficiency of LLMs", arXiv 2602.09805.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Final

import numpy as np
import pandas as pd

from legival_core.metrics.decomposition import normalize_instances
from legival_core.stats.stats import spearman_rho
from legival_core.store.schema import require_columns

#: ρ of an audit is defined from two pairs on: an audit compares the rankings of a few
#: benchmarks or models, and two that agree are worth showing as ρ = 1.
AUDIT_MIN_PAIRS: Final = 2

#: Columns of every audit table (one schema so the app can stack them).
AUDIT_COLUMNS: Final = (
    "benchmark",
    "audit",
    "k",
    "n_models",
    "rho",
    "rho_p05",
    "rho_p95",
    "coverage",
)

# ---------------------------------------------------------------------------------------------
# Native workloads
# ---------------------------------------------------------------------------------------------


def native_workload(instances: pd.DataFrame, column: str) -> pd.DataFrame:
    """Copy of ``instances`` whose ``workload`` column is the dataset's own ``column``.

    Every value must be a finite number > 0 (or missing for *all* rows of a model/benchmark
    group, which then stays in the outcome layer).

    >>> t = pd.DataFrame({"model": ["m"], "benchmark": ["gsm8k"], "instance_id": ["1"],
    ...                   "correct": [True], "tokens": [90], "truncated": [False],
    ...                   "gold_steps": [3]})
    >>> native_workload(t, "gold_steps")["workload"].tolist()
    [3.0]
    """
    if column not in instances.columns:
        raise ValueError(
            f"instances: no column {column!r} to use as native workload; has "
            f"{list(instances.columns)}"
        )
    out = instances.copy()
    out["workload"] = instances[column]
    # validates the new column (row, field) with the same rules decompose applies
    out["workload"] = normalize_instances(out, f"instances (workload from {column!r})")[
        "workload"
    ].to_numpy()
    return out


_ANNOTATION = re.compile(r"<<([^<>]*?)=[^<>]*>>")


def gsm8k_solution_steps(solution: str) -> int:
    """Number of reasoning steps of a GSM8K gold solution: its non-empty lines before ``####``.

    >>> gsm8k_solution_steps("Ann buys 3*4=<<3*4=12>>12 pens.\\n"
    ...                      "She gives away 5, so 12-5=<<12-5=7>>7 remain.\\n#### 7")
    2
    """
    body = solution.split("####", 1)[0]
    return sum(1 for line in body.splitlines() if line.strip())


def gsm8k_operation_count(solution: str) -> int:
    """Arithmetic operations in a GSM8K gold solution's calculator annotations ``<<expr=v>>``.

    Counts the binary operators + − * / of each ``expr`` (a minus that starts an expression or
    follows another operator or a parenthesis is a sign, not an operation). Solutions without
    annotations give 0: use :func:`gsm8k_solution_steps` for those.

    >>> gsm8k_operation_count("Total 2+3*4=<<2+3*4=14>>14, less 1: <<14-1=13>>13\\n#### 13")
    3
    >>> gsm8k_operation_count("<<-2*3=-6>>")
    1
    """
    count = 0
    for expression in _ANNOTATION.findall(solution):
        previous = ""
        for char in expression.replace(" ", ""):
            if char in "+-*/" and previous and (previous.isalnum() or previous in ").%"):
                count += 1
            previous = char
    return count


def champ_solution_steps() -> pd.DataFrame:
    """Native workload of CHAMP: the number of steps of each problem's gold solution.

    Reads the JSON shipped inside the ``champ-dataset`` package (270 competition problems,
    MIT licence), offline. Returns ``instance_id`` (CHAMP's problem identifier) and
    ``workload`` (steps, 1..18).

    >>> w = champ_solution_steps()
    >>> int(w.set_index("instance_id").loc["P_Combinatorics_1", "workload"])
    6
    """
    try:
        files = resources.files("champ_dataset")
    except ModuleNotFoundError as err:  # optional dependency
        raise ModuleNotFoundError(
            "champ_solution_steps needs the 'champ-dataset' package (pip install champ-dataset)"
        ) from err
    with files.joinpath("dataset_files/v0.json").open("r", encoding="utf-8") as handle:
        problems = json.load(handle)["problems"]
    rows = [
        {"instance_id": pid, "workload": len(problem["solution"]["steps"])}
        for pid, problem in problems.items()
    ]
    return pd.DataFrame(rows).sort_values("instance_id", ignore_index=True)


# ---------------------------------------------------------------------------------------------
# Solver-derived workloads
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Bench:
    """One benchmark as dense arrays: models × instances."""

    name: str
    instance_ids: np.ndarray  # (I,)
    models: np.ndarray  # (M,)
    tokens: np.ndarray  # (M, I), NaN where the model has no row
    solved: np.ndarray  # (M, I), correct with > 0 tokens
    e0: np.ndarray  # (M,)

    def ranked(self, pool: Sequence[str]) -> np.ndarray:
        """Model indices of the pool members present here, best E0 first (ties: by name)."""
        wanted = set(pool)
        idx = [i for i, m in enumerate(self.models) if m in wanted]
        return np.array(sorted(idx, key=lambda i: (-self.e0[i], self.models[i])), dtype=int)

    def solve(self, pool_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(W, solver index or −1) per instance for a pool given best-first."""
        n = len(self.instance_ids)
        if len(pool_idx) == 0:
            return np.full(n, np.nan), np.full(n, -1)
        solved = self.solved[pool_idx]
        covered = solved.any(axis=0)
        first = solved.argmax(axis=0)
        tokens = self.tokens[pool_idx][first, np.arange(n)]
        return np.where(covered, tokens, np.nan), np.where(covered, pool_idx[first], -1)

    def vo(self, workload: np.ndarray) -> np.ndarray:
        """VŌ of every model on the instances it answered that the workload covers."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = self.tokens / workload[None, :]
            counts = (~np.isnan(ratio)).sum(axis=1)
            return np.where(counts > 0, np.nansum(ratio, axis=1) / counts, np.nan)


def _sorted_codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A text column's distinct values in code point order and each row's index into them, as
    ``np.unique(..., return_inverse=True)`` gives them. Factorised in Arrow: ``np.unique``
    first made a Python string of every row (half of the workload audits' time at a million
    instances)."""
    codes, uniques = pd.factorize(column, sort=True)
    return np.asarray(uniques, dtype=str), codes


def _benchmarks(instances: pd.DataFrame, pool: Sequence[str]) -> list[_Bench]:
    frame = normalize_instances(instances, "instances")
    if frame.empty:
        raise ValueError("instances: the table has no rows")
    if isinstance(pool, str) or not len(pool):
        raise ValueError("pool: expected a non-empty list of model names")
    absent = sorted(set(pool) - set(frame["model"]))
    if absent:
        raise ValueError(f"pool: model(s) {absent} have no rows in instances")
    benches = []
    for bench, g in frame.groupby("benchmark", sort=True, observed=True):
        ids, id_codes = _sorted_codes(g["instance_id"])
        models, model_codes = _sorted_codes(g["model"])
        tokens = np.full((len(models), len(ids)), np.nan)
        correct = np.zeros((len(models), len(ids)), dtype=bool)
        tokens[model_codes, id_codes] = g["tokens"].to_numpy(float)
        correct[model_codes, id_codes] = g["correct"].to_numpy(bool)
        with np.errstate(invalid="ignore", divide="ignore"):
            answered = ~np.isnan(tokens)
            accuracy = correct.sum(axis=1) / answered.sum(axis=1)
            mean_t = np.nansum(tokens, axis=1) / answered.sum(axis=1)
            e0 = np.where(mean_t > 0, 1000 * accuracy / mean_t, np.nan)
        benches.append(
            _Bench(
                name=str(bench),
                instance_ids=ids,
                models=models,
                tokens=tokens,
                # a correct answer with 0 tokens cannot define a positive workload
                solved=correct & (np.nan_to_num(tokens) > 0),
                e0=np.nan_to_num(e0, nan=-np.inf),
            )
        )
    return benches


def solver_workload(instances: pd.DataFrame, pool: Sequence[str]) -> pd.DataFrame:
    """Solver-derived workload W_solv: the tokens of the best-E0 pool model that solved it.

    Per benchmark the pool is ranked by E0 = 1000·accuracy/E[T] (best first; ties by name).
    For each instance, W_i is the token count of the highest-ranked pool model that answered
    it correctly (falling through the ranking when better models were wrong); a correct answer
    with 0 tokens does not count. Instances that no pool model solved are dropped.

    Args:
        instances: an instances table (see :func:`legival_core.metrics.decomposition.decompose`).
        pool: the reference models.

    Returns:
        ``benchmark, instance_id, workload, solver, solver_rank`` (1 = best E0). ``attrs``:
        ``"coverage"`` = {benchmark: {n_instances, n_covered, n_dropped, coverage}} and
        ``"pool_ranking"`` = {benchmark: [models, best first]}.

    Reference: Kaiser et al., arXiv 2602.09805 (solver-derived workload).

    >>> t = pd.DataFrame({"model": ["a", "a", "b", "b"], "benchmark": ["x"] * 4,
    ...                   "instance_id": ["1", "2", "1", "2"], "correct": [1, 0, 1, 1],
    ...                   "tokens": [100, 100, 300, 500], "truncated": [0] * 4})
    >>> w = solver_workload(t, ["a", "b"])
    >>> w[["instance_id", "workload", "solver"]].values.tolist()
    [['1', 100.0, 'a'], ['2', 500.0, 'b']]
    """
    frames = []
    coverage: dict[str, dict[str, float]] = {}
    ranking: dict[str, list[str]] = {}
    for bench in _benchmarks(instances, pool):
        order = bench.ranked(pool)
        workload, solver = bench.solve(order)
        covered = solver >= 0
        rank_of = {int(m): r + 1 for r, m in enumerate(order)}
        frames.append(
            pd.DataFrame(
                {
                    "benchmark": bench.name,
                    "instance_id": bench.instance_ids[covered],
                    "workload": workload[covered],
                    "solver": bench.models[solver[covered]],
                    "solver_rank": [rank_of[int(s)] for s in solver[covered]],
                }
            )
        )
        n_all = len(bench.instance_ids)
        coverage[bench.name] = {
            "n_instances": n_all,
            "n_covered": int(covered.sum()),
            "n_dropped": int(n_all - covered.sum()),
            "coverage": float(covered.mean()) if n_all else float("nan"),
        }
        ranking[bench.name] = [str(bench.models[i]) for i in order]
    out = pd.concat(frames, ignore_index=True)
    out["solver_rank"] = out["solver_rank"].astype("int64")
    out.attrs["coverage"] = coverage
    out.attrs["pool_ranking"] = ranking
    return out


def attach_workload(instances: pd.DataFrame, workload: pd.DataFrame) -> pd.DataFrame:
    """Instances restricted to the covered ones, with ``workload`` (and ``solver``) joined in.

    Uncovered instances are dropped for *every* model, so all models are compared on the same
    instances. An existing ``workload`` column is replaced.

    >>> t = pd.DataFrame({"model": ["a", "a"], "benchmark": ["x", "x"],
    ...                   "instance_id": ["1", "2"], "correct": [1, 0], "tokens": [10, 20],
    ...                   "truncated": [0, 0]})
    >>> w = pd.DataFrame({"benchmark": ["x"], "instance_id": ["1"], "workload": [5.0],
    ...                   "solver": ["a"]})
    >>> attach_workload(t, w)[["instance_id", "workload"]].values.tolist()
    [['1', 5.0]]
    """
    require_columns(workload, ("benchmark", "instance_id", "workload"), "workload")
    keep = [c for c in ("benchmark", "instance_id", "workload", "solver") if c in workload]
    right = workload[keep].astype({"benchmark": str, "instance_id": str})
    left = instances.drop(columns=[c for c in ("workload", "solver") if c in instances])
    left = left.astype({"benchmark": str, "instance_id": str})
    return left.merge(right, on=["benchmark", "instance_id"], how="inner", validate="m:1")


def solver_concentration(workload: pd.DataFrame) -> pd.DataFrame:
    """How much one solver dominates a solver-derived workload, per benchmark.

    With p_s the share of covered instances whose solver is s: ``top1_share`` = max p_s and
    ``effective_solvers`` = exp(−Σ p_s log p_s) (1 when one model solves everything, the
    number of solvers when they share equally).

    >>> w = pd.DataFrame({"benchmark": ["x"] * 4, "solver": ["a", "a", "b", "c"]})
    >>> r = solver_concentration(w).iloc[0]
    >>> r["top1_solver"], float(r["top1_share"]), round(float(r["effective_solvers"]), 4)
    ('a', 0.5, 2.8284)
    """
    rows = []
    for bench, g in workload.groupby("benchmark", sort=True, observed=True):
        shares = g["solver"].value_counts(normalize=True, sort=True)
        p = shares.to_numpy(float)
        rows.append(
            {
                "benchmark": bench,
                "n_covered": len(g),
                "n_solvers": len(p),
                "top1_solver": str(shares.index[0]),
                "top1_share": float(p[0]),
                "effective_solvers": float(np.exp(-(p * np.log(p)).sum())),
            }
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Audits
# ---------------------------------------------------------------------------------------------


def _coverage(workload: np.ndarray) -> float:
    return float((~np.isnan(workload)).mean()) if workload.size else float("nan")


def _audit_row(bench: _Bench, audit: str, **values: float) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(AUDIT_COLUMNS, float("nan"))
    row.update(benchmark=bench.name, audit=audit, n_models=len(bench.models), **values)
    return row


def _audit_table(rows: list[dict[str, object]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(AUDIT_COLUMNS))


def leave_self_out(instances: pd.DataFrame, pool: Sequence[str]) -> pd.DataFrame:
    """Does a pool member's VŌ rank change when it is not its own solver?

    For every model m, VŌ_m is recomputed with the workload of the pool without m (models
    outside the pool keep their full-pool VŌ); ``rho`` = Spearman ρ between the full-pool
    VŌ of all models and these leave-self-out values. ``coverage`` is the mean coverage of
    the reduced pools.

    Reference: Kaiser et al., arXiv 2602.09805 (solver-workload audits).

    >>> t = pd.DataFrame({"model": list("aabbcc"), "benchmark": ["x"] * 6,
    ...                   "instance_id": ["1", "2"] * 3, "correct": [1, 1, 1, 1, 1, 0],
    ...                   "tokens": [10, 20, 30, 60, 50, 90], "truncated": [0] * 6})
    >>> float(leave_self_out(t, ["a", "b", "c"])["rho"].iloc[0])
    1.0
    """
    rows = []
    for bench in _benchmarks(instances, pool):
        order = bench.ranked(pool)
        full = bench.vo(bench.solve(order)[0])
        held = full.copy()
        coverages = []
        for m in order:
            reduced = bench.solve(order[order != m])[0]
            held[m] = bench.vo(reduced)[m]
            coverages.append(_coverage(reduced))
        rows.append(
            _audit_row(
                bench,
                "leave_self_out",
                rho=spearman_rho(full, held, min_pairs=AUDIT_MIN_PAIRS),
                coverage=float(np.mean(coverages)) if coverages else float("nan"),
            )
        )
    return _audit_table(rows)


def leave_top_k(
    instances: pd.DataFrame, pool: Sequence[str], k: Sequence[int] = (1, 3, 5)
) -> pd.DataFrame:
    """VŌ rank stability when the k best-E0 models are removed from the pool.

    One row per benchmark and k: ``rho`` = Spearman ρ between the full-pool VŌ of all models
    and their VŌ under the pool without its top k; ``coverage`` of the reduced pool. When
    k ≥ the pool size nothing is left: ρ is NaN and coverage 0.

    >>> t = pd.DataFrame({"model": list("aabbcc"), "benchmark": ["x"] * 6,
    ...                   "instance_id": ["1", "2"] * 3, "correct": [1, 1, 1, 1, 1, 0],
    ...                   "tokens": [10, 20, 30, 60, 50, 90], "truncated": [0] * 6})
    >>> leave_top_k(t, ["a", "b", "c"], k=(1,))[["k", "rho", "coverage"]].values.tolist()
    [[1.0, 1.0, 1.0]]
    """
    if any(int(v) < 1 for v in k):
        raise ValueError(f"leave_top_k: every k must be ≥ 1, got {list(k)}")
    rows = []
    for bench in _benchmarks(instances, pool):
        order = bench.ranked(pool)
        full = bench.vo(bench.solve(order)[0])
        for top in k:
            reduced = bench.solve(order[int(top) :])[0]
            rows.append(
                _audit_row(
                    bench,
                    "leave_top_k",
                    k=float(top),
                    rho=spearman_rho(full, bench.vo(reduced), min_pairs=AUDIT_MIN_PAIRS),
                    coverage=_coverage(reduced),
                )
            )
    return _audit_table(rows)


def held_out_pools(
    instances: pd.DataFrame, pool: Sequence[str], n: int = 200, seed: int = 0
) -> pd.DataFrame:
    """VŌ rank agreement between workloads from two disjoint random halves of the pool.

    Each of ``n`` splits shuffles the pool and cuts it into halves A (⌊P/2⌋ models) and B;
    **[choice]** ρ is the Spearman correlation of all models' VŌ under W_A with their VŌ
    under W_B (a split-half reliability of the ranking). Reports the median ρ as ``rho`` and
    its 5th and 95th percentiles; ``coverage`` is the mean coverage of the halves. A pool of
    fewer than two models cannot be split: NaN. Seeded per benchmark.

    >>> t = pd.DataFrame({"model": list("aabbcc"), "benchmark": ["x"] * 6,
    ...                   "instance_id": ["1", "2"] * 3, "correct": [1, 1, 1, 1, 1, 1],
    ...                   "tokens": [10, 20, 30, 60, 50, 90], "truncated": [0] * 6})
    >>> r = held_out_pools(t, ["a", "b", "c"], n=20)
    >>> float(r["rho"].iloc[0])
    1.0
    """
    if n < 1:
        raise ValueError(f"held_out_pools: n must be ≥ 1, got {n}")
    rows = []
    for bench in _benchmarks(instances, pool):
        order = bench.ranked(pool)
        if len(order) < 2:
            rows.append(_audit_row(bench, "held_out_pools"))
            continue
        rng = np.random.default_rng([seed, zlib.crc32(bench.name.encode())])
        half = len(order) // 2
        rhos, coverages = [], []
        for _ in range(n):
            chosen = np.zeros(len(order), dtype=bool)
            chosen[rng.permutation(len(order))[:half]] = True
            # slicing the best-first order keeps each half ranked by E0
            w_a, w_b = bench.solve(order[chosen])[0], bench.solve(order[~chosen])[0]
            rhos.append(spearman_rho(bench.vo(w_a), bench.vo(w_b), min_pairs=AUDIT_MIN_PAIRS))
            coverages.extend([_coverage(w_a), _coverage(w_b)])
        values = np.array(rhos)
        values = values[~np.isnan(values)]
        lo, mid, hi = np.quantile(values, [0.05, 0.5, 0.95]) if values.size else (np.nan,) * 3
        rows.append(
            _audit_row(
                bench,
                "held_out_pools",
                rho=float(mid),
                rho_p05=float(lo),
                rho_p95=float(hi),
                coverage=float(np.mean(coverages)),
            )
        )
    return _audit_table(rows)


def pool_audits(
    instances: pd.DataFrame, n_splits: int = 200, seed: int = 0
) -> dict[str, pd.DataFrame]:
    """Solver-derived workload and its audits over the pool of every model in ``instances``
    (Kaiser et al., arXiv 2602.09805): ``"audits"`` (leave-self-out, leave-top-k for k = 1,
    3, 5, and ``n_splits`` random half-pool splits, one table) and ``"concentration"`` (top-1
    solver share, effective number of solvers). Leave reference teachers out of
    ``instances`` first where they should not be solvers
    (:func:`legival_core.views.efficiency.workload_audits` does).
    """
    base = instances.drop(columns=["workload"], errors="ignore")
    pool = sorted(base["model"].unique())
    audits = pd.concat(
        [
            leave_self_out(base, pool),
            leave_top_k(base, pool),
            held_out_pools(base, pool, n_splits, seed),
        ],
        ignore_index=True,
    )
    return {"audits": audits, "concentration": solver_concentration(solver_workload(base, pool))}


__all__ = [
    "AUDIT_COLUMNS",
    "attach_workload",
    "champ_solution_steps",
    "gsm8k_operation_count",
    "gsm8k_solution_steps",
    "held_out_pools",
    "leave_self_out",
    "leave_top_k",
    "native_workload",
    "pool_audits",
    "solver_concentration",
    "solver_workload",
]
