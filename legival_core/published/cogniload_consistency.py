"""A consistency check of the published CogniLoad efficiency table (Kaiser et al.).

The paper prints, per model, 100·E0, accuracy, r_ctx, r_logic (rounded percents), E[T], VŌ and κ
(:func:`legival_core.published.published.cogniload_efficiency`). :func:`instances_from_summary`
builds synthetic instances whose aggregates are those numbers and :func:`cogniload_consistency` runs
them through the same :func:`legival_core.metrics.decomposition.decompose` the app uses. VŌ and κ
therefore match by construction; what the check tests is whether the published columns agree
with each other: E0 = 1000 · accuracy / E[T] within the rounding of the percents, and the
Δlog r_ctx, r_logic and VŌ against a reference model. It is not a reproduction of the paper's
measurements (those need the models' outputs).

Reference: Kaiser, Frigessi, Ramezani-Kebrya, Ricaud, "Beyond Accuracy: Decomposing the
Reasoning Efficiency of LLMs", arXiv 2602.09805; CogniLoad, arXiv 2509.18458.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import pandas as pd

from legival_core.metrics.decomposition import decompose
from legival_core.published.published import cogniload_efficiency
from legival_core.stats.stats import seeded_stream
from legival_core.store.schema import require_columns

__all__ = ["cogniload_consistency", "common_workload_minimax", "instances_from_summary"]


def _counts_within_rounding(
    n: int, accuracy: float, r_ctx: float, r_logic: float, tol: float, target: float
) -> tuple[int, int] | None:
    """(n_completed, n_correct) honouring all three rates to ±tol, accuracy nearest target."""
    slack = 1e-9
    best: tuple[tuple[float, float, float], int, int] | None = None
    for n_completed in range(
        max(1, math.ceil((r_ctx - tol - slack) * n)),
        min(n, math.floor((r_ctx + tol + slack) * n)) + 1,
    ):
        for n_correct in range(
            max(0, math.ceil((accuracy - tol - slack) * n)),
            min(n_completed, math.floor((accuracy + tol + slack) * n)) + 1,
        ):
            if abs(n_correct / n_completed - r_logic) > tol + slack:
                continue
            score = (
                abs(n_correct / n - target),
                abs(n_completed / n - r_ctx),
                abs(n_correct / n_completed - r_logic),
            )
            if best is None or score < best[0]:
                best = (score, n_completed, n_correct)
    return None if best is None else (best[1], best[2])


def instances_from_summary(
    summary: pd.DataFrame,
    n_instances: int = 1000,
    tolerance: float = 0.005,
    mean_workload: float | None = None,
    light_workload_fraction: float = 0.2,
    benchmark: str = "summary",
) -> pd.DataFrame:
    """Build per-instance tables whose aggregates equal published per-model summaries.

    The instances are synthetic: only their aggregates are determined by the summary, so a
    decomposition of them gives back the summary's rates, E[T], VŌ and κ by construction. This
    exists to push published numbers through the *same* :func:`decompose` code path and check
    that the published columns are mutually consistent (E0 against accuracy and E[T], Δlog
    terms against the rates), not to reproduce the paper's measurements.

    Construction, per summary row (all models share instance ids ``0..n-1``, so they pair):

    1. Counts: choose integers n_completed and n_correct so that n_completed/n, n_correct/n
       and n_correct/n_completed each lie within ``tolerance`` of ``r_ctx``, ``accuracy`` and
       ``r_logic`` (published percents are rounded: tolerance 0.005 = half a percent), with
       accuracy as close as possible to ``accuracy_target`` (default: ``accuracy``). The first
       n − n_completed instances of a seeded per-model permutation are truncated, the next
       n_correct are correct.
    2. Workload (only with ``vo`` and ``kappa`` columns): a two-level design. Even ids are
       light, W = x·W̄, odd ids heavy, W = (2−x)·W̄, with x = ``light_workload_fraction``, so
       E[W] = W̄. W̄ is ``mean_workload`` when given (one native workload shared by all
       models, so dlog_w = 0 and κ follows from E[T], VŌ and W̄), else each row's own
       W̄ = E[T] / (VŌ·κ) (κ then comes out exactly).
    3. Tokens: light instances get T = E[T]·(1+d), heavy ones T = E[T]·(1−d), which keeps
       E[T]. The overhead is VŌ = E[T]/(2W̄) · ((1+d)/x + (1−d)/(2−x)); setting it to the
       row's VŌ gives d = (2/κ − 1/x − 1/(2−x)) / (1/x − 1/(2−x)) with κ = E[T]/(W̄·VŌ).
       Tokens stay ≥ 0 iff x ≤ κ ≤ 2−x; otherwise the row is rejected with an error.
       Without workload columns every instance gets T = E[T].

    Args:
        summary: one row per model with ``model, accuracy, r_ctx, r_logic, mean_tokens``
            (rates as fractions), optional ``vo``, ``kappa`` and ``accuracy_target``.
        n_instances: instances per model (even).
        tolerance: how far a built rate may be from the summary's (half the rounding step).
        mean_workload: one common E[W] for all models, or None for per-row E[W].
        light_workload_fraction: x in (0, 1).
        benchmark: value of the ``benchmark`` column.

    Returns:
        An instances table for :func:`decompose` (``workload`` column when the summary has
        ``vo`` and ``kappa``).

    >>> s = pd.DataFrame({"model": ["m"], "accuracy": [0.5], "r_ctx": [0.8],
    ...                   "r_logic": [0.625], "mean_tokens": [1000.0], "vo": [4.0],
    ...                   "kappa": [0.5]})
    >>> row = decompose(instances_from_summary(s, n_instances=20), n_boot=0).iloc[0]
    >>> [round(float(row[c]), 6) for c in ("accuracy", "r_ctx", "mean_tokens", "vo", "kappa")]
    [0.5, 0.8, 1000.0, 4.0, 0.5]
    """
    table = "instances_from_summary(summary)"
    needed = ["model", "accuracy", "r_ctx", "r_logic", "mean_tokens"]
    require_columns(summary, needed, table)
    if n_instances < 2 or n_instances % 2:
        raise ValueError(f"{table}: n_instances must be an even number ≥ 2, got {n_instances}")
    x = light_workload_fraction
    if not 0.0 < x < 1.0:
        raise ValueError(f"light_workload_fraction must lie in (0, 1), got {x}")
    with_workload = {"vo", "kappa"} <= set(summary.columns)
    n = n_instances
    ids = np.arange(n)
    light = ids % 2 == 0
    parts: list[pd.DataFrame] = []
    for pos, rec in enumerate(summary.to_dict(orient="records")):
        where = f"{table}: row {pos} (model={rec['model']!r})"
        target = rec.get("accuracy_target", rec["accuracy"])
        counts = _counts_within_rounding(
            n, rec["accuracy"], rec["r_ctx"], rec["r_logic"], tolerance, target
        )
        if counts is None:
            raise ValueError(
                f"{where}: no counts out of {n} give accuracy {rec['accuracy']}, r_ctx "
                f"{rec['r_ctx']} and r_logic {rec['r_logic']} within ±{tolerance}; the rates are "
                f"inconsistent (accuracy should be r_ctx·r_logic) or n_instances is too small"
            )
        n_completed, n_correct = counts
        order = seeded_stream(0, "summary", str(rec["model"])).permutation(n)
        truncated = np.zeros(n, dtype=bool)
        truncated[order[: n - n_completed]] = True
        correct = np.zeros(n, dtype=bool)
        correct[order[n - n_completed : n - n_completed + n_correct]] = True
        mean_tokens = float(rec["mean_tokens"])
        if not mean_tokens > 0:
            raise ValueError(f"{where}, field 'mean_tokens': must be > 0, got {mean_tokens}")
        tokens = np.full(n, mean_tokens)
        columns: dict[str, Any] = {}
        if with_workload:
            vo, kappa = float(rec["vo"]), float(rec["kappa"])
            if not (vo > 0 and kappa > 0):
                raise ValueError(f"{where}, fields 'vo'/'kappa': must be > 0, got {vo}, {kappa}")
            w_bar = mean_tokens / (vo * kappa) if mean_workload is None else float(mean_workload)
            kappa_built = mean_tokens / (w_bar * vo)
            d = (2 / kappa_built - 1 / x - 1 / (2 - x)) / (1 / x - 1 / (2 - x))
            if abs(d) > 1:
                raise ValueError(
                    f"{where}, field 'kappa': κ = {kappa_built:.4g} lies outside "
                    f"[{x}, {2 - x}], which a two-level design with light_workload_fraction "
                    f"{x} cannot reach with non-negative tokens"
                )
            tokens = np.where(light, mean_tokens * (1 + d), mean_tokens * (1 - d))
            columns["workload"] = np.where(light, x * w_bar, (2 - x) * w_bar)
        parts.append(
            pd.DataFrame(
                {
                    "model": rec["model"],
                    "benchmark": benchmark,
                    "instance_id": ids.astype(str),
                    "correct": correct,
                    "tokens": tokens,
                    "truncated": truncated,
                    **columns,
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def common_workload_minimax(published: pd.DataFrame) -> float:
    """One E[W] for all models that keeps every κ = E[T]/(E[W]·VŌ) nearest the published κ.

    Minimises the largest |κ_built − κ_published| over a fine grid between the smallest and
    largest per-model E[T]/(VŌ·κ).

    >>> round(common_workload_minimax(cogniload_efficiency()), 1)
    492.4
    """
    t = published["mean_tokens"].to_numpy(float)
    vo = published["vo_nat"].to_numpy(float)
    kappa = published["kappa_nat"].to_numpy(float)
    implied = t / (vo * kappa)
    grid = np.linspace(implied.min(), implied.max(), 20_001)
    worst = np.abs(t[None, :] / (grid[:, None] * vo[None, :]) - kappa[None, :]).max(axis=1)
    return float(grid[int(np.argmin(worst))])


def cogniload_consistency(
    n_instances: int = 1000,
    accuracy_from: Literal["published", "e0"] = "published",
    workload: Literal["per_model", "common"] = "per_model",
    reference: str = "o3",
) -> pd.DataFrame:
    """Check the published CogniLoad table against itself through :func:`decompose`.

    A consistency check, not a reproduction: the instances are built from the published
    aggregates, so VŌ and κ match by construction; what can disagree is the published E0
    against the published accuracy and E[T], and the Δlog terms against rounded rates.
    Builds instances with :func:`instances_from_summary` from the published accuracy, r_ctx,
    r_logic (rounded percents, tolerance ±0.5 pp), E[T], VŌ_nat and κ_nat, decomposes them
    against ``reference`` and sets the results beside the published columns.

    ``accuracy_from="published"`` aims the accuracy at the rounded published percent;
    ``"e0"`` aims it at the unrounded value implied by the published E0 and E[T]
    (100·E0 · E[T] / 10⁵) while still honouring every rounded percent. ``workload``:
    ``"per_model"`` gives each model its implied E[W] (κ exact, small dlog_w), ``"common"``
    one shared E[W] from :func:`common_workload_minimax` (dlog_w = 0, κ approximate).

    Returns:
        One row per model: built and published 100·E0 and their difference; dlog r_ctx,
        r_logic, VŌ against the reference, built vs from the published columns; κ built vs
        published; the built rates. ``attrs["mean_workload"]`` holds the common E[W] (or NaN).

    >>> r = cogniload_consistency(accuracy_from="e0")
    >>> bool((r["e0_x100_diff"].abs() <= 0.1).all())
    True
    """
    published = cogniload_efficiency()
    summary = pd.DataFrame(
        {
            "model": published["model"],
            "accuracy": published["accuracy"],
            "r_ctx": published["r_ctx"],
            "r_logic": published["r_logic"],
            "mean_tokens": published["mean_tokens"].astype(float),
            "vo": published["vo_nat"],
            "kappa": published["kappa_nat"],
        }
    )
    targets: dict[str, Callable[[], pd.Series]] = {
        "published": lambda: summary["accuracy"],
        "e0": lambda: published["e0_x100"] * published["mean_tokens"] / 1e5,
    }
    workloads: dict[str, Callable[[], float | None]] = {
        "per_model": lambda: None,
        "common": lambda: common_workload_minimax(published),
    }
    if accuracy_from not in targets:
        raise ValueError(f"accuracy_from must be one of {sorted(targets)}, got {accuracy_from!r}")
    if workload not in workloads:
        raise ValueError(f"workload must be one of {sorted(workloads)}, got {workload!r}")
    summary["accuracy_target"] = targets[accuracy_from]()
    w_bar = workloads[workload]()
    built = instances_from_summary(
        summary, n_instances=n_instances, mean_workload=w_bar, benchmark="cogniload"
    )
    dec = decompose(built, reference=reference, n_boot=0).set_index("model")
    dec = dec.loc[published["model"]]
    ref_pub = published.set_index("model").loc[reference]

    def published_dlog(column: str) -> np.ndarray:
        return np.log(published[column].to_numpy(float) / float(ref_pub[column]))

    out = pd.DataFrame(
        {
            "model": published["model"].to_numpy(),
            "e0_x100_published": published["e0_x100"].to_numpy(float),
            "e0_x100_built": 100 * dec["e0"].to_numpy(),
            "dlog_r_ctx_published": published_dlog("r_ctx_pct"),
            "dlog_r_ctx_built": dec["dlog_r_ctx"].to_numpy(),
            "dlog_r_logic_published": published_dlog("r_logic_pct"),
            "dlog_r_logic_built": dec["dlog_r_logic"].to_numpy(),
            "dlog_vo_published": published_dlog("vo_nat"),
            "dlog_vo_built": dec["dlog_vo"].to_numpy(),
            "dlog_w_built": dec["dlog_w"].to_numpy(),
            "kappa_published": published["kappa_nat"].to_numpy(float),
            "kappa_built": dec["kappa"].to_numpy(),
            "accuracy_built": dec["accuracy"].to_numpy(),
            "r_ctx_built": dec["r_ctx"].to_numpy(),
            "r_logic_built": dec["r_logic"].to_numpy(),
            "mean_tokens_built": dec["mean_tokens"].to_numpy(),
            "vo_built": dec["vo"].to_numpy(),
        }
    )
    out.insert(3, "e0_x100_diff", out["e0_x100_built"] - out["e0_x100_published"])
    out.attrs["mean_workload"] = float("nan") if w_bar is None else w_bar
    return out
