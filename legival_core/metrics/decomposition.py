"""Reasoning-efficiency decomposition of Kaiser et al. (docs/metrics/decomposition.md).

Per model and benchmark, over instances i with S_i ∈ {0, 1} (correct), T_i ≥ 0 (generated
output tokens), C_i ∈ {0, 1} (truncated, i.e. not completed) and, when known, a workload
W_i > 0:

- accuracy = mean S;  **E0 = 1000 · P(S=1) / E[T]** (correct answers per 1,000 tokens);
- r_ctx = P(completed);  r_logic = P(S=1 | completed);  so E0 = 1000 · r_ctx · r_logic / E[T];
- VO_i = T_i / W_i;  VŌ = mean VO_i;  κ = E[T] / (E[W] · VŌ);  so E[T] = E[W] · VŌ · κ;
- against a reference model on the same instances:
  Δlog E0 = Δlog r_ctx + Δlog r_logic − Δlog E[W] − Δlog VŌ − Δlog κ (exact).

Trace layer (when a ``trace`` column is present): σ_i = compression ratio of the trace
(:func:`legival_core.metrics.efficiency.compression_ratio`, zlib level 9), q_trace = mean σ, and the
signal terms VŌ_sig, κ_sig computed with σ_i·T_i in place of T_i. With
signal_share = E[σT] / E[T] the token budget splits once more, exactly:
E[T] = E[W] · VŌ_sig · κ_sig / signal_share.

Reference: Kaiser, Frigessi, Ramezani-Kebrya, Ricaud, "Beyond Accuracy: Decomposing the
Reasoning Efficiency of LLMs", arXiv 2602.09805; CogniLoad, arXiv 2509.18458.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pandas as pd

from legival_core.metrics.efficiency import compression_ratio
from legival_core.stats.stats import percentile_interval, resample_counts, seeded_stream
from legival_core.store.schema import require_columns

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
        f"truncated output has no extractable answer (docs/metrics/decomposition.md). Fix the "
        f"grading, or pass truncated_correct='count_incorrect'."
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


#: The ``traces`` columns :func:`decomposition_instances` reads: ``reasoning`` only to count the
#: tokens of a trace whose ``tokens`` is null, and for the trace layer's σ (callers may leave it
#: out when the store has none).
INSTANCE_TRACE_COLUMNS: Final[tuple[str, ...]] = (
    "trace_id", "problem_id", "dataset", "teacher", "sample", "tokens", "truncated", "reasoning",
)  # fmt: skip


def decomposition_instances(
    traces: pd.DataFrame,
    grades: pd.DataFrame,
    problems: pd.DataFrame | None = None,
    sigma: pd.Series | None = None,
    counted: pd.Series | None = None,
) -> pd.DataFrame:
    """The instances table of :func:`decompose` from a store's tables (one rule for all).

    One row per graded trace (a trace whose grade is null is not an instance): ``model`` =
    teacher, ``benchmark`` = dataset, ``instance_id`` = problem id (``#sample`` appended for
    samples > 0), ``correct``, ``truncated`` (null = not truncated), the problem's native
    ``workload`` where ``problems`` has one, ``trace`` (the reasoning text, for the trace
    layer) when ``traces`` has a ``reasoning`` column, and ``tokens`` T:

    **T = the trace's stored ``tokens``; where that is null, the tiktoken count of its
    reasoning text** (:func:`legival_core.text.tokens.count_tokens_many`, default encoding), so a
    store whose engine did not report token counts (an ingested one) keeps every trace. The
    metrics stage and the app's audits both build their instances here, so they hold the
    same rows. ``counted`` (trace id → that same count, e.g. the segment stage's
    ``trace_counts`` in the default encoding) is used first, so the text is needed only for
    a trace it lacks.

    ``sigma`` (trace id → σ, e.g. the stored ``trace_efficiency.compression``) gives the trace
    layer its σ without compressing every text again: when it has a value for every instance,
    the result carries a ``sigma`` column instead of ``trace``.

    >>> traces = pd.DataFrame({"trace_id": ["t1", "t2", "t3"], "problem_id": ["p", "p", "q"],
    ...     "dataset": "d", "teacher": "a", "sample": [0, 1, 0], "tokens": [10, None, 30],
    ...     "truncated": [False, None, True], "reasoning": ["x", "hello world", "z"]})
    >>> grades = pd.DataFrame({"trace_id": ["t1", "t2", "t3"], "correct": [True, False, None]})
    >>> out = decomposition_instances(traces, grades)  # t3 ungraded; t2's T counted: 2 tokens
    >>> out[["instance_id", "tokens", "truncated"]].values.tolist()
    [['p', 10.0, False], ['p#1', 2.0, False]]
    """
    graded = traces.merge(grades[["trace_id", "correct"]], on="trace_id", how="inner")
    graded = graded[graded["correct"].notna()].reset_index(drop=True)
    # a copy: a column read from a memory-mapped store is read-only, and counts are filled in
    tokens = pd.to_numeric(graded["tokens"], errors="coerce").to_numpy(dtype=float, copy=True)
    unknown = np.isnan(tokens)
    if unknown.any() and counted is not None:
        stored = pd.to_numeric(graded["trace_id"].map(counted), errors="coerce").to_numpy(
            dtype=float
        )
        tokens[unknown] = stored[unknown]
        unknown = np.isnan(tokens)
    if unknown.any():
        if "reasoning" not in graded:
            first = int(np.flatnonzero(unknown)[0])
            raise ValueError(
                f"traces: row {first} (trace_id={graded['trace_id'].iloc[first]!r}), field "
                "'tokens': null, and no 'reasoning' column to count the tokens from"
            )
        from legival_core.text.tokens import count_tokens_many

        texts = graded.loc[unknown, "reasoning"].fillna("").astype(str).tolist()
        tokens[unknown] = count_tokens_many(texts)
    sample = (
        pd.to_numeric(graded["sample"], errors="coerce").fillna(0).astype(int)
        if "sample" in graded
        else pd.Series(0, index=graded.index)
    )
    problem = graded["problem_id"].astype(str)
    out = pd.DataFrame(
        {
            "model": graded["teacher"].astype(str).to_numpy(),
            "benchmark": graded["dataset"].astype(str).to_numpy(),
            "instance_id": problem.where(sample == 0, problem + "#" + sample.astype(str)),
            "correct": graded["correct"].astype(bool).to_numpy(),
            "tokens": tokens,
            "truncated": graded["truncated"].astype("boolean").fillna(False).to_numpy(dtype=bool)
            if "truncated" in graded
            else False,
        }
    )
    workload = problem_workload(problems) if problems is not None else None
    if workload is not None:
        out["workload"] = pd.to_numeric(
            graded["problem_id"].map(workload).to_numpy(), errors="coerce"
        )
    known = (
        pd.to_numeric(graded["trace_id"].map(sigma), errors="coerce").to_numpy(dtype=float)
        if sigma is not None
        else np.full(len(graded), np.nan)
    )
    if len(graded) and not np.isnan(known).any():
        out["sigma"] = known
    elif "reasoning" in graded:
        # The trace layer (compression σ of the reasoning text) needs the text itself.
        out["trace"] = graded["reasoning"].fillna("").astype(str).to_numpy()
    return out


def problem_workload(problems: pd.DataFrame) -> pd.Series | None:
    """Problem id → native workload from ``problems`` (the last row of a repeated id, as
    :func:`decomposition_instances` reads it), or None
    when the table has no ``workload`` column.

    >>> problem_workload(pd.DataFrame({"problem_id": ["p", "q", "p"], "workload": [1, 2, 3]}))
    q    2
    p    3
    dtype: int64
    """
    if "workload" not in problems:
        return None
    last = problems.drop_duplicates("problem_id", keep="last")
    return pd.Series(last["workload"].to_numpy(), index=last["problem_id"].to_numpy())


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
    require_columns(instances, REQUIRED_COLUMNS, table)
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
    # text columns of pandas' own string dtype, not Python objects: at ten million instances
    # three object columns held 2 GB of strings
    out = pd.DataFrame({k: frame[k].astype(str) for k in KEY_COLUMNS})
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
    if "sigma" in frame.columns and "trace" not in frame.columns:
        # σ given (e.g. the stored trace_efficiency.compression): no text to compress again.
        sigma = _number_column(frame, "sigma", table, positive=True, allow_missing=True)
        _whole_groups_only(frame, ~np.isnan(sigma), "sigma", table)
    elif "trace" in frame.columns:
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
    """One (model, benchmark) group: instance ids and the (n, F) feature matrix. The ids stay
    as the frame holds them (pandas' string array): only a paired comparison reads them, and
    a fixed-width copy of every group's ids took 80 bytes an instance."""

    instance_id: pd.api.extensions.ExtensionArray | np.ndarray
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
        return cls(frame["instance_id"].array, np.column_stack(columns))

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


def log_ratio(model: np.ndarray | float, ref: np.ndarray | float) -> np.ndarray:
    """Δlog = log(model) − log(ref), elementwise: the one definition of every Δlog term.

    −inf / +inf when one side is 0 (a model that never answers correctly is infinitely worse
    on r_logic, which :func:`failure_mode` counts as the largest shortfall), NaN when both
    are 0 or either is NaN or negative. Used on paired instances by :func:`decompose` and on
    stored decomposition rows by the app's waterfall and failure-mode table.

    >>> round(float(log_ratio(250.0, 500.0)), 4)  # log(250) − log(500) = log(1/2)
    -0.6931
    >>> log_ratio([0.0, 1.0, 0.0], [0.5, 0.0, 0.0]).tolist()
    [-inf, inf, nan]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.asarray(model, dtype=float)) - np.log(np.asarray(ref, dtype=float))


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
        counts = resample_counts(n, size, rng)  # how often each instance is drawn
        parts.append(statistic([_terms(g.sums(counts), n) for g in groups]))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


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
    alpha: float = 0.05,
    truncated_correct: str = "raise",
) -> pd.DataFrame:
    """Decompose each model's reasoning efficiency E0 into its factors
    (docs/metrics/decomposition.md).

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
    percentile intervals ``<col>_lo`` / ``<col>_hi`` at level 1 − ``alpha``. Each group has its own
    random stream derived from ``seed`` and the group's names, so results do not depend on
    which other groups are present. Resamples where a term is undefined are left out; with
    infinite draws the interval uses order statistics. ``n_boot=0`` gives NaN intervals. With
    zero variance (e.g. all answers correct) the interval collapses to the point.

    Args:
        instances: ``model, benchmark, instance_id, correct, tokens, truncated``, optional
            ``workload`` (> 0) and ``trace`` (text). One row per (model, benchmark, instance).
        reference: a model name, :data:`BEST_E0` (each benchmark's highest-E0 model), or
            None (no dlog terms; they are NaN).
        n_boot: bootstrap resamples (500 by default; docs/metrics/decomposition.md).
        seed: seed of the bootstrap.
        alpha: 1 − confidence level of the intervals (0.05: 95% intervals).
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
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
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
                [group], lambda ts: ts[0], n_boot, seeded_stream(seed, "terms", model, bench)
            )
            for term in TERMS:
                row[f"{term}_lo"], row[f"{term}_hi"] = percentile_interval(draws[term], alpha)
        row.update(_paired(groups, model, bench, refs[bench], n_boot, seed, alpha))
        rows.append(row)

    result = pd.DataFrame(rows).reindex(columns=list(DECOMPOSITION_COLUMNS))
    result["n"] = result["n"].astype("int64")
    result["n_paired"] = result["n_paired"].astype("int64")
    result["has_trace"] = result["has_trace"].astype(bool)
    result["dlog_undefined"] = result["dlog_undefined"].fillna("").astype(str)
    result.attrs["note"] = _note(result, reference, n_boot, alpha, seed)
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
    alpha: float,
) -> dict[str, Any]:
    out: dict[str, Any] = {"reference": ref, "n_paired": 0, "dlog_undefined": ""}
    if ref is None:
        return out
    mine, theirs = groups[(model, bench)], groups[(ref, bench)]
    common, pos_m, pos_r = np.intersect1d(
        np.asarray(mine.instance_id, dtype=str),
        np.asarray(theirs.instance_id, dtype=str),
        return_indices=True,
    )
    out["n_paired"] = len(common)
    if not len(common):
        out["dlog_undefined"] = ",".join(c.removeprefix("dlog_") for c in DLOG_OF)
        return out
    pair = [mine.subset(pos_m), theirs.subset(pos_r)]
    pm, pr = _point_terms(pair[0]), _point_terms(pair[1])
    for col, term in DLOG_OF.items():
        out[col] = float(log_ratio(pm[term], pr[term]))
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
            return {col: log_ratio(ts[0][term], ts[1][term]) for col, term in DLOG_OF.items()}

        draws = _bootstrap(pair, dlogs, n_boot, seeded_stream(seed, "dlog", model, ref, bench))
        for col in DLOG_OF:
            out[f"{col}_lo"], out[f"{col}_hi"] = percentile_interval(draws[col], alpha)
    return out


def _note(result: pd.DataFrame, reference: str | None, n_boot: int, alpha: float, seed: int) -> str:
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
        parts.append(f"{1 - alpha:.0%} percentile intervals from {n_boot} resamples (seed {seed}).")
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


__all__ = [
    "BEST_E0",
    "DECOMPOSITION_COLUMNS",
    "DLOG_OF",
    "FAILURE_MODE_RULES",
    "INSTANCE_TRACE_COLUMNS",
    "NO_SHORTFALL",
    "REQUIRED_COLUMNS",
    "TERMS",
    "TRUNCATED_CORRECT_POLICIES",
    "UNDETERMINED",
    "FailureModeRule",
    "decompose",
    "decomposition_instances",
    "failure_mode",
    "failure_modes",
    "log_ratio",
    "normalize_instances",
]
