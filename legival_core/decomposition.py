"""Reasoning-efficiency decomposition of Kaiser et al. (SPEC §5).

Per model and benchmark, over instances i with S_i ∈ {0, 1} (correct), T_i ≥ 0 (generated
output tokens), C_i ∈ {0, 1} (truncated, i.e. not completed) and, when known, a workload
W_i > 0:

- accuracy = mean S;  **E0 = 1000 · P(S=1) / E[T]** (correct answers per 1,000 tokens);
- r_ctx = P(completed);  r_logic = P(S=1 | completed);  so E0 = 1000 · r_ctx · r_logic / E[T];
- VO_i = T_i / W_i;  VŌ = mean VO_i;  κ = E[T] / (E[W] · VŌ);  so E[T] = E[W] · VŌ · κ;
- against a reference model on the same instances:
  Δlog E0 = Δlog r_ctx + Δlog r_logic − Δlog E[W] − Δlog VŌ − Δlog κ (exact).

Trace layer (when a ``trace`` column is present): σ_i = compression ratio of the trace
(:func:`legival_core.trace_audits.compression_ratio`), q_trace = mean σ, and the signal
terms VŌ_sig, κ_sig computed with σ_i·T_i in place of T_i. With
signal_share = E[σT] / E[T] the token budget splits once more, exactly:
E[T] = E[W] · VŌ_sig · κ_sig / signal_share.

Reference: Kaiser, Frigessi, Ramezani-Kebrya, Ricaud, "Beyond Accuracy: Decomposing the
Reasoning Efficiency of LLMs", arXiv 2602.09805; CogniLoad, arXiv 2509.18458.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final, Literal

import numpy as np
import pandas as pd

from legival_core.trace_audits import compression_ratio

KEY_COLUMNS: Final = ("model", "benchmark", "instance_id")
REQUIRED_COLUMNS: Final = (*KEY_COLUMNS, "correct", "tokens", "truncated")

#: Pass as ``reference`` to compare each benchmark against its own highest-E0 model.
BEST_E0: Final = "@best-e0"

#: Per-(model, benchmark) terms, in output order.
TERMS: Final = (
    "accuracy",
    "e0",
    "mean_tokens",
    "mean_tokens_correct",
    "mean_tokens_incorrect",
    "r_ctx",
    "r_logic",
    "mean_workload",
    "vo",
    "kappa",
    "q_trace",
    "signal_share",
    "vo_sig",
    "kappa_sig",
)

#: Δlog columns and the term each one differences.
DLOG_OF: Final[dict[str, str]] = {
    "dlog_e0": "e0",
    "dlog_r_ctx": "r_ctx",
    "dlog_r_logic": "r_logic",
    "dlog_tokens": "mean_tokens",
    "dlog_w": "mean_workload",
    "dlog_vo": "vo",
    "dlog_kappa": "kappa",
    "dlog_signal_share": "signal_share",
    "dlog_vo_sig": "vo_sig",
    "dlog_kappa_sig": "kappa_sig",
}

#: Every column of :func:`decompose`'s result, in order. The schema is fixed: terms that a
#: layer cannot compute are NaN, never missing.
DECOMPOSITION_COLUMNS: Final = (
    "model",
    "benchmark",
    "layer",
    "has_trace",
    "n",
    *TERMS,
    "reference",
    "n_paired",
    *DLOG_OF,
    "dlog_undefined",
    *(f"{c}_{side}" for c in (*TERMS, *DLOG_OF) for side in ("lo", "hi")),
)

_WORKLOAD_DLOGS: Final = frozenset(
    {"dlog_w", "dlog_vo", "dlog_kappa", "dlog_vo_sig", "dlog_kappa_sig"}
)
_TRACE_DLOGS: Final = frozenset({"dlog_signal_share", "dlog_vo_sig", "dlog_kappa_sig"})

# Bootstrap draws are processed in chunks of about this many cells to bound memory.
_BOOT_CHUNK_CELLS: Final = 2_000_000


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def _row_label(frame: pd.DataFrame, pos: int) -> str:
    keys = [f"{k}={frame[k].iloc[pos]!r}" for k in KEY_COLUMNS if k in frame.columns]
    return f"row {pos}" + (f" ({', '.join(keys)})" if keys else "")


def _bool_column(frame: pd.DataFrame, field: str, table: str) -> np.ndarray:
    series = frame[field]
    if pd.api.types.is_bool_dtype(series.dtype) and not series.isna().any():
        return series.to_numpy(dtype=bool)
    if pd.api.types.is_numeric_dtype(series.dtype) and series.isin((0, 1)).all():
        return series.to_numpy(dtype=float) == 1.0
    values = series.to_numpy(dtype=object)
    out = np.empty(len(values), dtype=bool)
    for pos, value in enumerate(values):
        is_flag = isinstance(value, bool | np.bool_)
        if is_flag or (
            isinstance(value, int | float | np.integer | np.floating) and value in (0, 1)
        ):
            out[pos] = bool(value)
        else:
            raise ValueError(
                f"{table}: {_row_label(frame, pos)}, field '{field}': expected a bool "
                f"(True/False or 0/1), got {value!r}"
            )
    return out


def _number_column(
    frame: pd.DataFrame, field: str, table: str, *, positive: bool, allow_missing: bool
) -> np.ndarray:
    raw = frame[field]
    numbers = pd.to_numeric(raw, errors="coerce").astype("float64").to_numpy()
    missing = raw.isna().to_numpy()
    bad_parse = np.isnan(numbers) & ~missing
    low = numbers <= 0 if positive else numbers < 0
    bad = bad_parse | np.isinf(numbers) | (low & ~np.isnan(numbers))
    if not allow_missing:
        bad |= missing
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        need = "a finite number > 0" if positive else "a finite number ≥ 0"
        raise ValueError(
            f"{table}: {_row_label(frame, pos)}, field '{field}': expected {need}, "
            f"got {raw.iloc[pos]!r}"
        )
    return numbers


def _whole_groups_only(frame: pd.DataFrame, present: np.ndarray, field: str, table: str) -> None:
    """A column like workload or trace must be present for all or none of a group's rows."""
    share = pd.Series(present).groupby([frame["model"], frame["benchmark"]]).transform("mean")
    partial = ((share > 0) & (share < 1)).to_numpy() & ~present
    if partial.any():
        pos = int(np.flatnonzero(partial)[0])
        raise ValueError(
            f"{table}: {_row_label(frame, pos)}, field '{field}': missing, while other rows of "
            f"model {frame['model'].iloc[pos]!r} on benchmark {frame['benchmark'].iloc[pos]!r} "
            f"have it. Give it for every instance of the group or for none (drop the rows "
            f"without it, e.g. the instances no solver covered)."
        )


def _truncated_correct_raise(frame: pd.DataFrame, clash: np.ndarray, table: str) -> np.ndarray:
    pos = int(np.flatnonzero(clash)[0])
    raise ValueError(
        f"{table}: {_row_label(frame, pos)}: 'correct' and 'truncated' are both true, but a "
        f"truncated output has no extractable answer (SPEC §1). Fix the grading, or pass "
        f"truncated_correct='count_incorrect'."
    )


def _truncated_correct_as_incorrect(
    frame: pd.DataFrame, clash: np.ndarray, table: str
) -> np.ndarray:
    return np.zeros(len(clash), dtype=bool)


#: What to do with rows that are both correct and truncated (the identity
#: accuracy = r_ctx · r_logic needs correct ⇒ completed).
TRUNCATED_CORRECT_POLICIES: Final[
    dict[str, Callable[[pd.DataFrame, np.ndarray, str], np.ndarray]]
] = {
    "raise": _truncated_correct_raise,
    "count_incorrect": _truncated_correct_as_incorrect,
}


def normalize_instances(
    instances: pd.DataFrame,
    table: str = "instances",
    truncated_correct: str = "raise",
) -> pd.DataFrame:
    """Check an instances table and return it in canonical form.

    The result has columns ``model, benchmark, instance_id`` (str), ``correct``,
    ``truncated`` (bool), ``tokens`` (float ≥ 0), ``workload`` (float > 0, NaN when unknown)
    and ``sigma`` (σ_i of the ``trace`` column, NaN when there is no trace). Errors name the
    table, the row (position and key) and the field.

    >>> t = pd.DataFrame({"model": ["m"], "benchmark": ["b"], "instance_id": [7],
    ...                   "correct": [1], "tokens": [120], "truncated": [0]})
    >>> n = normalize_instances(t)
    >>> n.loc[0, "instance_id"], bool(n.loc[0, "correct"]), float(n.loc[0, "workload"])
    ('7', True, nan)
    """
    if not isinstance(instances, pd.DataFrame):
        raise TypeError(f"{table}: expected a pandas DataFrame, got {type(instances).__name__}")
    missing = [c for c in REQUIRED_COLUMNS if c not in instances.columns]
    if missing:
        raise ValueError(
            f"{table}: missing column(s) {missing}; required are {list(REQUIRED_COLUMNS)}"
        )
    if truncated_correct not in TRUNCATED_CORRECT_POLICIES:
        raise ValueError(
            f"truncated_correct must be one of {sorted(TRUNCATED_CORRECT_POLICIES)}, "
            f"got {truncated_correct!r}"
        )
    frame = instances.reset_index(drop=True)
    for key in KEY_COLUMNS:
        absent = frame[key].isna().to_numpy()
        if absent.any():
            pos = int(np.flatnonzero(absent)[0])
            raise ValueError(f"{table}: {_row_label(frame, pos)}, field '{key}': missing")
    out = pd.DataFrame({k: frame[k].astype(str).astype(object) for k in KEY_COLUMNS})
    duplicated = out.duplicated(list(KEY_COLUMNS)).to_numpy()
    if duplicated.any():
        pos = int(np.flatnonzero(duplicated)[0])
        raise ValueError(
            f"{table}: {_row_label(frame, pos)}: duplicate (model, benchmark, instance_id); "
            f"keep one sample per instance, or give each sample its own instance_id"
        )
    correct = _bool_column(frame, "correct", table)
    truncated = _bool_column(frame, "truncated", table)
    clash = correct & truncated
    if clash.any():
        policy = TRUNCATED_CORRECT_POLICIES[truncated_correct]
        correct = np.where(clash, policy(frame, clash, table), correct)
    out["correct"] = correct
    out["truncated"] = truncated
    out["tokens"] = _number_column(frame, "tokens", table, positive=False, allow_missing=False)
    if "workload" in frame.columns:
        workload = _number_column(frame, "workload", table, positive=True, allow_missing=True)
        _whole_groups_only(frame, ~np.isnan(workload), "workload", table)
    else:
        workload = np.full(len(frame), np.nan)
    out["workload"] = workload
    sigma = np.full(len(frame), np.nan)
    if "trace" in frame.columns:
        traces = frame["trace"].to_numpy(dtype=object)
        for pos, text in enumerate(traces):
            if isinstance(text, str):
                sigma[pos] = compression_ratio(text)
            elif not (text is None or text is pd.NA or (isinstance(text, float) and text != text)):
                raise ValueError(
                    f"{table}: {_row_label(frame, pos)}, field 'trace': expected text, "
                    f"got {type(text).__name__}"
                )
        _whole_groups_only(frame, ~np.isnan(sigma), "trace", table)
    out["sigma"] = sigma
    return out


# ---------------------------------------------------------------------------------------------
# Terms. Every term is a ratio of sums over instances, so a bootstrap resample is a vector of
# resample counts and all its sums are one matrix product: counts (B, n) @ features (n, F).
# ---------------------------------------------------------------------------------------------

# Per-instance features whose sums give every term (s correct, c truncated, t tokens,
# w workload, q = σ); NaN in w or q (absent layer) makes only the terms that use them NaN.
_FEATURES: Final = (
    "s", "done", "s_done", "t", "t_s", "w", "t_w", "q", "q_t", "q_t_w",
)  # fmt: skip
_F = {name: i for i, name in enumerate(_FEATURES)}


def _terms(sums: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """All terms from feature sums of shape (..., F) over n instances; undefined -> NaN."""

    def total(name: str) -> np.ndarray:
        return sums[..., _F[name]]

    nan = np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        n_correct, n_done, tokens = total("s"), total("done"), total("t")
        accuracy = n_correct / n
        mean_tokens = tokens / n
        mean_workload = total("w") / n
        vo = total("t_w") / n
        mean_signal = total("q_t") / n
        vo_sig = total("q_t_w") / n
        return {
            "accuracy": accuracy,
            "e0": np.where(mean_tokens > 0, 1000.0 * accuracy / mean_tokens, nan),
            "mean_tokens": mean_tokens,
            "mean_tokens_correct": np.where(n_correct > 0, total("t_s") / n_correct, nan),
            "mean_tokens_incorrect": np.where(
                n_correct < n, (tokens - total("t_s")) / (n - n_correct), nan
            ),
            "r_ctx": n_done / n,
            "r_logic": np.where(n_done > 0, total("s_done") / n_done, nan),
            "mean_workload": mean_workload,
            "vo": vo,
            "kappa": np.where(vo > 0, mean_tokens / (mean_workload * vo), nan),
            "q_trace": total("q") / n,
            "signal_share": np.where(tokens > 0, mean_signal / mean_tokens, nan),
            "vo_sig": vo_sig,
            "kappa_sig": np.where(vo_sig > 0, mean_signal / (mean_workload * vo_sig), nan),
        }


@dataclass(frozen=True)
class _Group:
    """One (model, benchmark) group: instance ids and the (n, F) feature matrix."""

    instance_id: np.ndarray
    features: np.ndarray

    @classmethod
    def of(cls, frame: pd.DataFrame) -> _Group:
        s = frame["correct"].to_numpy(dtype=float)
        done = 1.0 - frame["truncated"].to_numpy(dtype=float)
        t = frame["tokens"].to_numpy(dtype=float)
        w = frame["workload"].to_numpy(dtype=float)
        q = frame["sigma"].to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            columns = (s, done, s * done, t, t * s, w, t / w, q, q * t, q * t / w)
        return cls(frame["instance_id"].to_numpy(dtype=str), np.column_stack(columns))

    @property
    def n(self) -> int:
        return len(self.instance_id)

    def subset(self, positions: np.ndarray) -> _Group:
        return _Group(self.instance_id[positions], self.features[positions])

    def sums(self, counts: np.ndarray) -> np.ndarray:
        # NaN features (absent layer) must stay NaN even where a count is 0
        return counts @ self.features


def _point_terms(group: _Group) -> dict[str, float]:
    sums = group.features.sum(axis=0)
    return {k: float(v) for k, v in _terms(sums, group.n).items()}


def _dlog(model: np.ndarray | float, ref: np.ndarray | float) -> np.ndarray:
    """log(model) − log(ref): −inf/+inf when one side is 0, NaN when both are or one is NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.asarray(model, dtype=float)) - np.log(np.asarray(ref, dtype=float))


def _stream(seed: int, *parts: str) -> np.random.Generator:
    # One independent, reproducible stream per group, whatever other groups exist.
    return np.random.default_rng([seed, *(zlib.crc32(p.encode()) for p in parts)])


def _bootstrap(
    groups: Sequence[_Group],
    statistic: Callable[[list[dict[str, np.ndarray]]], dict[str, np.ndarray]],
    n_boot: int,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """n_boot resamples of instance positions, shared by the (aligned) groups."""
    n = groups[0].n
    chunk = max(1, _BOOT_CHUNK_CELLS // max(n, 1))
    parts: list[dict[str, np.ndarray]] = []
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        idx = rng.integers(0, n, size=(size, n))
        # how often each instance was drawn in each resample
        flat = (idx + (np.arange(size) * n)[:, None]).ravel()
        counts = np.bincount(flat, minlength=size * n).reshape(size, n).astype(float)
        parts.append(statistic([_terms(g.sums(counts), n) for g in groups]))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _interval(draws: np.ndarray, ci: float) -> tuple[float, float]:
    """Percentile interval; undefined (NaN) resamples are left out."""
    finite_or_inf = draws[~np.isnan(draws)]
    if finite_or_inf.size == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - ci) / 2.0
    if np.isinf(finite_or_inf).any():
        # linear interpolation between an infinity and a number is undefined: take order stats
        lo = np.quantile(finite_or_inf, alpha, method="lower")
        hi = np.quantile(finite_or_inf, 1.0 - alpha, method="higher")
    else:
        lo, hi = np.quantile(finite_or_inf, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


# ---------------------------------------------------------------------------------------------
# decompose
# ---------------------------------------------------------------------------------------------


def _resolve_references(
    points: Mapping[tuple[str, str], Mapping[str, float]],
    reference: str | None,
    models: set[str],
) -> dict[str, str | None]:
    benchmarks = sorted({b for _, b in points})
    if reference is None:
        return dict.fromkeys(benchmarks)
    if reference == BEST_E0:
        chosen: dict[str, str | None] = {}
        for bench in benchmarks:
            scored = [
                (-e0, m)
                for (m, b), p in points.items()
                if b == bench and not math.isnan(e0 := p["e0"])
            ]
            chosen[bench] = min(scored)[1] if scored else None
        return chosen
    if reference not in models:
        raise ValueError(
            f"reference model {reference!r} has no rows in instances; models are {sorted(models)}"
        )
    return {b: (reference if (reference, b) in points else None) for b in benchmarks}


def decompose(
    instances: pd.DataFrame,
    reference: str | None = None,
    n_boot: int = 500,
    seed: int = 0,
    ci: float = 0.95,
    truncated_correct: str = "raise",
) -> pd.DataFrame:
    """Decompose each model's reasoning efficiency E0 into its factors (SPEC §5).

    Per (model, benchmark), with S correct, T tokens, C truncated, W workload:

    - ``accuracy`` = mean S; ``e0`` = 1000 · accuracy / E[T];
      ``mean_tokens_correct`` / ``mean_tokens_incorrect`` = E[T | S=1] / E[T | S=0];
    - ``r_ctx`` = P(C=0); ``r_logic`` = P(S=1 | C=0); accuracy = r_ctx · r_logic because a
      truncated output is never correct (see ``truncated_correct``);
    - workload layer (only when every instance of the group has a ``workload``):
      ``mean_workload`` = E[W]; ``vo`` = VŌ = mean(T/W); ``kappa`` = E[T] / (E[W] · VŌ);
    - trace layer (only when the group has a ``trace`` per instance): ``q_trace`` = mean σ,
      ``signal_share`` = E[σT] / E[T], ``vo_sig`` = mean(σT/W),
      ``kappa_sig`` = E[σT] / (E[W] · vo_sig).

    Against ``reference``, on the instances both models answered (inner join on benchmark
    and instance_id; ``n_paired`` of them), every term is recomputed on that common set and
    ``dlog_<x>`` = log x(model) − log x(reference). Exactly:

    - dlog_e0 = dlog_r_ctx + dlog_r_logic − dlog_tokens;
    - dlog_tokens = dlog_w + dlog_vo + dlog_kappa, hence
      dlog_e0 = dlog_r_ctx + dlog_r_logic − dlog_w − dlog_vo − dlog_kappa;
    - dlog_tokens = dlog_w + dlog_vo_sig + dlog_kappa_sig − dlog_signal_share.

    Zero and undefined terms are kept visible rather than hidden: a term that is 0 for one
    side only gives dlog = −inf (model side 0) or +inf (reference side 0); 0 on both sides,
    or an undefined term on either side, gives NaN. Undefined terms are NaN at the source:
    e0 when E[T] = 0; r_logic when nothing completed; κ when VŌ = 0 (all T = 0);
    mean_tokens_correct/incorrect when the group has no correct/incorrect output; every
    workload/trace term when that layer is absent. The column ``dlog_undefined`` lists, comma
    separated, the dlog terms of the model's layers that are not finite (empty when all are;
    terms of a layer the model lacks are NaN but not listed; with no shared instance every
    term is listed), so the identity can be checked exactly on the rows where it is empty.

    Bootstrap: ``n_boot`` resamples of instances with replacement (per group; for the dlog
    terms the paired instances are resampled jointly, so both models see the same draw),
    percentile intervals ``<col>_lo`` / ``<col>_hi`` at level ``ci``. Each group has its own
    random stream derived from ``seed`` and the group's names, so results do not depend on
    which other groups are present. Resamples where a term is undefined are left out; with
    infinite draws the interval uses order statistics. ``n_boot=0`` gives NaN intervals. With
    zero variance (e.g. all answers correct) the interval collapses to the point.

    Args:
        instances: ``model, benchmark, instance_id, correct, tokens, truncated``, optional
            ``workload`` (> 0) and ``trace`` (text). One row per (model, benchmark, instance).
        reference: a model name, :data:`BEST_E0` (each benchmark's highest-E0 model), or
            None (no dlog terms; they are NaN).
        n_boot: bootstrap resamples (SPEC: 500).
        seed: seed of the bootstrap.
        ci: confidence level of the intervals.
        truncated_correct: policy for rows both correct and truncated, a key of
            :data:`TRUNCATED_CORRECT_POLICIES` (``"raise"`` or ``"count_incorrect"``).

    Returns:
        One row per (model, benchmark) with the columns of :data:`DECOMPOSITION_COLUMNS`.
        ``layer`` is ``"workload"`` when the workload terms exist and ``"outcome"`` otherwise
        (accuracy, e0, r_ctx, r_logic and token means only); ``df.attrs["note"]`` says which
        layers were computed and against which reference.

    Reference: Kaiser et al., arXiv 2602.09805 (eqs. for E0, r_ctx, r_logic, VŌ, κ).

    >>> t = pd.DataFrame({"model": ["a"] * 4, "benchmark": ["b"] * 4,
    ...                   "instance_id": [1, 2, 3, 4], "correct": [1, 1, 0, 0],
    ...                   "tokens": [100, 300, 200, 400], "truncated": [0, 0, 0, 1],
    ...                   "workload": [10, 20, 10, 20]})
    >>> row = decompose(t, n_boot=0).iloc[0]
    >>> float(row.e0), float(row.r_ctx), round(float(row.r_logic), 4), float(row.vo)
    (2.0, 0.75, 0.6667, 16.25)
    """
    if n_boot < 0:
        raise ValueError(f"n_boot must be ≥ 0, got {n_boot}")
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must lie in (0, 1), got {ci}")
    frame = normalize_instances(instances, "instances", truncated_correct)
    if frame.empty:
        raise ValueError("instances: the table has no rows")
    groups: dict[tuple[str, str], _Group] = {
        (str(m), str(b)): _Group.of(g)
        for (m, b), g in frame.groupby(["model", "benchmark"], sort=True, observed=True)
    }
    points = {key: _point_terms(g) for key, g in groups.items()}
    refs = _resolve_references(points, reference, {m for m, _ in groups})

    rows: list[dict[str, Any]] = []
    for (model, bench), group in groups.items():
        point = points[(model, bench)]
        row: dict[str, Any] = {
            "model": model,
            "benchmark": bench,
            "layer": "outcome" if math.isnan(point["vo"]) else "workload",
            "has_trace": not math.isnan(point["q_trace"]),
            "n": group.n,
            **point,
        }
        if n_boot:
            draws = _bootstrap(
                [group], lambda ts: ts[0], n_boot, _stream(seed, "terms", model, bench)
            )
            for term in TERMS:
                row[f"{term}_lo"], row[f"{term}_hi"] = _interval(draws[term], ci)
        row.update(_paired(groups, model, bench, refs[bench], n_boot, seed, ci))
        rows.append(row)

    result = pd.DataFrame(rows).reindex(columns=list(DECOMPOSITION_COLUMNS))
    result["n"] = result["n"].astype("int64")
    result["n_paired"] = result["n_paired"].astype("int64")
    result["has_trace"] = result["has_trace"].astype(bool)
    result["dlog_undefined"] = result["dlog_undefined"].fillna("").astype(str)
    result.attrs["note"] = _note(result, reference, n_boot, ci, seed)
    result.attrs["reference"] = reference
    result.attrs["n_boot"] = n_boot
    result.attrs["seed"] = seed
    return result


def _paired(
    groups: Mapping[tuple[str, str], _Group],
    model: str,
    bench: str,
    ref: str | None,
    n_boot: int,
    seed: int,
    ci: float,
) -> dict[str, Any]:
    out: dict[str, Any] = {"reference": ref, "n_paired": 0, "dlog_undefined": ""}
    if ref is None:
        return out
    mine, theirs = groups[(model, bench)], groups[(ref, bench)]
    common, pos_m, pos_r = np.intersect1d(mine.instance_id, theirs.instance_id, return_indices=True)
    out["n_paired"] = len(common)
    if not len(common):
        out["dlog_undefined"] = ",".join(c.removeprefix("dlog_") for c in DLOG_OF)
        return out
    pair = [mine.subset(pos_m), theirs.subset(pos_r)]
    pm, pr = _point_terms(pair[0]), _point_terms(pair[1])
    for col, term in DLOG_OF.items():
        out[col] = float(_dlog(pm[term], pr[term]))
    # terms of a layer the model does not have are NaN by design, not "undefined"
    applicable = {
        col
        for col in DLOG_OF
        if (col not in _WORKLOAD_DLOGS or not math.isnan(pm["vo"]))
        and (col not in _TRACE_DLOGS or not math.isnan(pm["q_trace"]))
    }
    out["dlog_undefined"] = ",".join(
        col.removeprefix("dlog_")
        for col in DLOG_OF
        if col in applicable and not np.isfinite(out[col])
    )
    if n_boot:

        def dlogs(ts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
            return {col: _dlog(ts[0][term], ts[1][term]) for col, term in DLOG_OF.items()}

        draws = _bootstrap(pair, dlogs, n_boot, _stream(seed, "dlog", model, ref, bench))
        for col in DLOG_OF:
            out[f"{col}_lo"], out[f"{col}_hi"] = _interval(draws[col], ci)
    return out


def _note(result: pd.DataFrame, reference: str | None, n_boot: int, ci: float, seed: int) -> str:
    outcome = result.loc[result["layer"] == "outcome", ["model", "benchmark"]]
    parts = []
    if len(outcome) == len(result):
        parts.append(
            "Outcome layer only: no workload column, so VŌ, κ and the workload dlog terms are "
            "NaN; accuracy, E0, r_ctx, r_logic and token means are computed."
        )
    elif len(outcome):
        pairs = ", ".join(f"{m}/{b}" for m, b in outcome.itertuples(index=False))
        parts.append(f"Workload layer where a workload is given; outcome layer only for {pairs}.")
    else:
        parts.append("Workload layer: every group has a workload.")
    if not result["has_trace"].any():
        parts.append("No traces: the trace-layer terms (q_trace, VŌ_sig, κ_sig) are NaN.")
    if reference is None:
        parts.append("No reference model: the dlog terms are NaN.")
    else:
        ref = "each benchmark's best-E0 model" if reference == BEST_E0 else repr(reference)
        parts.append(f"dlog terms against {ref} on the instances both answered.")
    if n_boot:
        parts.append(f"{ci:.0%} percentile intervals from {n_boot} resamples (seed {seed}).")
    else:
        parts.append("No bootstrap (n_boot=0): interval columns are NaN.")
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------
# Failure modes
# ---------------------------------------------------------------------------------------------


def _term(row: Mapping[str, Any], name: str) -> float:
    value = row.get(name, float("nan"))
    return float("nan") if value is None or value is pd.NA else float(value)


def _first_finite(*values: float) -> float:
    return next((v for v in values if not math.isnan(v)), float("nan"))


def _verbosity_shortfall(row: Mapping[str, Any]) -> float:
    # Signal tokens per unit of work when traces exist; all tokens per unit of work when only
    # workloads exist; plain tokens on the shared instances otherwise (same work on both sides).
    signal = _term(row, "dlog_vo_sig") + _term(row, "dlog_kappa_sig")
    plain = _term(row, "dlog_vo") + _term(row, "dlog_kappa")
    tokens_only = _term(row, "dlog_tokens") + _first_finite(_term(row, "dlog_signal_share"), 0.0)
    return _first_finite(signal, plain, tokens_only)


@dataclass(frozen=True)
class FailureModeRule:
    """One failure mode: its label and how large the model's shortfall on it is (in log units).

    ``shortfall(row) > 0`` means the model is worse than the reference on this factor by
    that many log units; the shortfalls of a row add up to −dlog_e0 − dlog_w.
    """

    label: str
    shortfall: Callable[[Mapping[str, Any]], float]
    meaning: str


#: The failure-mode registry, in tie-break order.
FAILURE_MODE_RULES: Final[tuple[FailureModeRule, ...]] = (
    FailureModeRule(
        "logic-limited",
        lambda row: -_term(row, "dlog_r_logic"),
        "completes but answers wrongly more often (lower r_logic)",
    ),
    FailureModeRule(
        "context-limited",
        lambda row: -_term(row, "dlog_r_ctx"),
        "runs out of output budget more often (lower r_ctx)",
    ),
    FailureModeRule(
        "verbosity-limited",
        _verbosity_shortfall,
        "spends more (signal) tokens per unit of work (higher VŌ·κ)",
    ),
    FailureModeRule(
        "redundancy-limited",
        lambda row: -_term(row, "dlog_signal_share"),
        "its traces repeat themselves more (lower compressed-signal share)",
    ),
)

NO_SHORTFALL: Final = "no-shortfall"
UNDETERMINED: Final = "undetermined"


def failure_mode(row: Mapping[str, Any], margin: float = 0.0) -> str:
    """Label what limits a model's efficiency relative to the reference of its row.

    Rule: each :data:`FAILURE_MODE_RULES` entry turns the row's dlog terms into a shortfall
    (log units by which the model is worse than the reference on that factor):

    - logic = −dlog_r_logic;  context = −dlog_r_ctx;
    - verbosity = dlog_vo_sig + dlog_kappa_sig (trace layer), else dlog_vo + dlog_kappa
      (workload layer), else dlog_tokens + dlog_signal_share (outcome layer, same instances);
    - redundancy = −dlog_signal_share (needs traces).

    With traces these add up exactly to −dlog_e0 − dlog_w, i.e. they split the E0 gap (on the
    same instances dlog_w is 0 for a native workload). The label is the rule with the largest
    shortfall (the dominant negative Δlog term); ties go to the earlier rule. NaN shortfalls
    are skipped; +inf (e.g. r_logic = 0) wins. If no shortfall exceeds ``margin`` the model is
    at least as good as the reference on every factor: ``"no-shortfall"`` (the reference's own
    row gets this). Without any finite dlog term: ``"undetermined"``. Use the benchmark's best
    model as reference (``decompose(..., reference=BEST_E0)``) so every other model has a gap.

    Reference: Kaiser et al., arXiv 2602.09805 (failure modes).

    >>> failure_mode({"dlog_r_logic": -0.4, "dlog_r_ctx": -0.1, "dlog_vo": 0.2,
    ...               "dlog_kappa": 0.1, "dlog_tokens": 0.3})
    'logic-limited'
    >>> failure_mode({"dlog_r_logic": 0.0, "dlog_r_ctx": 0.0, "dlog_tokens": 0.0})
    'no-shortfall'
    """
    scored = [(rule.shortfall(row), -i, rule.label) for i, rule in enumerate(FAILURE_MODE_RULES)]
    scored = [s for s in scored if not math.isnan(s[0])]
    if not scored:
        return UNDETERMINED
    best = max(scored)
    return best[2] if best[0] > margin else NO_SHORTFALL


def failure_modes(decomposition: pd.DataFrame, margin: float = 0.0) -> pd.Series:
    """:func:`failure_mode` for every row of a :func:`decompose` result (index kept).

    >>> d = pd.DataFrame({"dlog_r_logic": [0.0, -0.1], "dlog_r_ctx": [0.0, -0.5],
    ...                   "dlog_tokens": [0.0, 0.2]})
    >>> failure_modes(d).tolist()
    ['no-shortfall', 'context-limited']
    """
    records = decomposition.to_dict(orient="records")
    return pd.Series(
        [failure_mode(r, margin) for r in records], index=decomposition.index, name="failure_mode"
    )


# ---------------------------------------------------------------------------------------------
# Reproduction aid: instance tables from published summaries
# ---------------------------------------------------------------------------------------------


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
    """Build per-instance tables that reproduce published per-model summaries (reproduction aid).

    The instances are synthetic: only their aggregates are determined by the summary. This
    exists to push published numbers through the *same* :func:`decompose` code path and check
    that the published columns are mutually consistent.

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
    missing = [c for c in needed if c not in summary.columns]
    if missing:
        raise ValueError(f"{table}: missing column(s) {missing}")
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
        order = _stream(0, "summary", str(rec["model"])).permutation(n)
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


COGNILOAD_CSV: Final = "data/published/efficiency_cogniload_published.csv"


def load_cogniload_published() -> pd.DataFrame:
    """The published CogniLoad efficiency table (25 models; Kaiser et al., arXiv 2602.09805).

    Columns: ``model, e0_x100, accuracy_pct, mean_tokens, r_ctx_pct, r_logic_pct, vo_nat,
    kappa_nat, mean_tokens_correct, mean_tokens_incorrect``.

    >>> load_cogniload_published().shape
    (25, 10)
    """
    path = resources.files("legival_core").joinpath(COGNILOAD_CSV)
    with path.open("r", encoding="utf-8") as handle:
        table = pd.read_csv(handle)
    expected = [
        "model", "e0_x100", "accuracy_pct", "mean_tokens", "r_ctx_pct", "r_logic_pct",
        "vo_nat", "kappa_nat", "mean_tokens_correct", "mean_tokens_incorrect",
    ]  # fmt: skip
    if list(table.columns) != expected:
        raise ValueError(f"{COGNILOAD_CSV}: expected columns {expected}, got {list(table.columns)}")
    return table


def common_workload_minimax(published: pd.DataFrame) -> float:
    """One E[W] for all models that keeps every κ = E[T]/(E[W]·VŌ) nearest the published κ.

    Minimises the largest |κ_built − κ_published| over a fine grid between the smallest and
    largest per-model E[T]/(VŌ·κ).

    >>> round(common_workload_minimax(load_cogniload_published()), 1)
    492.4
    """
    t = published["mean_tokens"].to_numpy(float)
    vo = published["vo_nat"].to_numpy(float)
    kappa = published["kappa_nat"].to_numpy(float)
    implied = t / (vo * kappa)
    grid = np.linspace(implied.min(), implied.max(), 20_001)
    worst = np.abs(t[None, :] / (grid[:, None] * vo[None, :]) - kappa[None, :]).max(axis=1)
    return float(grid[int(np.argmin(worst))])


def cogniload_reproduction(
    n_instances: int = 1000,
    accuracy_from: Literal["published", "e0"] = "published",
    workload: Literal["per_model", "common"] = "per_model",
    reference: str = "o3",
) -> pd.DataFrame:
    """Rebuild the published CogniLoad table through :func:`decompose` and compare.

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

    >>> r = cogniload_reproduction(accuracy_from="e0")
    >>> bool((r["e0_x100_diff"].abs() <= 0.1).all())
    True
    """
    published = load_cogniload_published()
    summary = pd.DataFrame(
        {
            "model": published["model"],
            "accuracy": published["accuracy_pct"] / 100,
            "r_ctx": published["r_ctx_pct"] / 100,
            "r_logic": published["r_logic_pct"] / 100,
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


__all__ = [
    "BEST_E0",
    "DECOMPOSITION_COLUMNS",
    "DLOG_OF",
    "FAILURE_MODE_RULES",
    "NO_SHORTFALL",
    "REQUIRED_COLUMNS",
    "TERMS",
    "TRUNCATED_CORRECT_POLICIES",
    "UNDETERMINED",
    "FailureModeRule",
    "cogniload_reproduction",
    "common_workload_minimax",
    "decompose",
    "failure_mode",
    "failure_modes",
    "instances_from_summary",
    "load_cogniload_published",
    "normalize_instances",
]
