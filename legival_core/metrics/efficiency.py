"""The efficiency axis of Legi-Val: length, redundancy, backtracking share, compression.

Pure functions on arrays, lists and data frames (docs/metrics/). The only model involved is
behind :func:`redundancy_scores`, a thin wrapper that embeds the steps with
:mod:`legival_core.text.embedding` and then calls the pure functions.

References:
    Legi-Val — "Measuring Reasoning Trace Legibility: Can Those Who Understand Teach?",
    arXiv 2603.20508 (length, redundancy, backtracking).
    Kaiser et al., "Beyond Accuracy: Decomposing the Reasoning Efficiency of LLMs",
    arXiv 2602.09805 (compression ratio σ of the trace layer).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import pandas as pd

from legival_core.store.schema import require_columns

__all__ = [
    "COMPRESSION_LEVEL",
    "REDUNDANCY_THRESHOLDS",
    "SWEEP_THRESHOLDS",
    "RedundancyScores",
    "backtracking_share",
    "compression_ratio",
    "labeler_backtracking",
    "length_summary",
    "normalised_lengths",
    "redundancy_scores",
    "redundancy_share",
    "redundancy_sweep",
    "resolve_threshold",
    "step_similarities",
    "trace_lengths",
]

#: Named redundancy thresholds τ: the paper's value (default) and the authors' scripts'.
REDUNDANCY_THRESHOLDS: dict[str, float] = {"paper": 0.8, "release": 0.85}
#: The published threshold study: 21 thresholds 0.0, 0.05, …, 1.0.
SWEEP_THRESHOLDS: np.ndarray = np.linspace(0.0, 1.0, 21)

# Rows of the similarity matrix computed per matrix product; caps memory at ~2048·m floats.
_SIMILARITY_BLOCK = 2048


def resolve_threshold(threshold: float | str) -> float:
    """τ as a number: a float in [0, 1] or a profile name from :data:`REDUNDANCY_THRESHOLDS`.

    >>> resolve_threshold("release"), resolve_threshold(0.8)
    (0.85, 0.8)
    """
    if isinstance(threshold, str):
        try:
            return REDUNDANCY_THRESHOLDS[threshold]
        except KeyError:
            raise ValueError(
                f"unknown redundancy profile {threshold!r}; choose one of "
                f"{sorted(REDUNDANCY_THRESHOLDS)} or give a number"
            ) from None
    value = float(threshold)
    if not -1.0 <= value <= 1.0:
        raise ValueError(f"a cosine threshold lies in [-1, 1], got {value}")
    return value


# ---------------------------------------------------------------------------------- lengths


def trace_lengths(
    reasoning: Iterable[str], *, encoding: str = "cl100k_base", segment_mode: str = "paper"
) -> pd.DataFrame:
    """Token length *n* and step length *m* of each reasoning text.

    n = tiktoken count of the text (:func:`legival_core.text.tokens.count_tokens`);
    m = number of steps (:func:`legival_core.text.segment.split_steps`). Efficiency is 1/n and
    1/m.

    Returns:
        A frame with int64 columns ``tokens`` and ``steps``, one row per text.

    Reference: Legi-Val, arXiv 2603.20508 (token and step length).

    >>> trace_lengths(["hello world. Bye.", ""])
       tokens  steps
    0       5      2
    1       0      0
    """
    from legival_core.text.segment import split_steps
    from legival_core.text.tokens import count_tokens_many

    texts = list(reasoning)
    return pd.DataFrame(
        {
            "tokens": np.asarray(count_tokens_many(texts, encoding), dtype=np.int64),
            "steps": np.asarray([len(split_steps(t, segment_mode)) for t in texts], np.int64),
        }
    )


def normalised_lengths(
    df: pd.DataFrame,
    length_col: str = "tokens",
    *,
    problem_col: str = "problem_id",
    correct_col: str = "correct",
) -> pd.Series:
    """Length divided by the median length of the *correct* traces of the same problem.

    ℓ̃_t = ℓ_t / median{ℓ_u : u correct, problem(u) = problem(t)}, the median taken over the
    correct traces of *all* teachers. Problems without a correct trace (or whose correct
    traces have median length 0) give NaN.

    Args:
        df: one row per trace.
        length_col: the length to normalise (``tokens`` for n, ``steps`` for m).
        problem_col, correct_col: the problem key and the boolean correctness.

    Returns:
        float64 Series aligned with ``df`` (same index), named ``<length_col>_norm``.

    Reference: Legi-Val, arXiv 2603.20508 (cross-problem length comparison).

    >>> df = pd.DataFrame({"problem_id": ["p", "p", "p", "q"],
    ...                    "correct": [True, True, False, False],
    ...                    "tokens": [100, 300, 400, 50]})
    >>> normalised_lengths(df).tolist()  # median of correct p = (100+300)/2 = 200
    [0.5, 1.5, 2.0, nan]
    """
    require_columns(df, [length_col, problem_col, correct_col], "normalised_lengths")
    lengths = pd.to_numeric(df[length_col], errors="raise").astype("float64")
    correct = df[correct_col].fillna(False).astype(bool)
    medians = lengths[correct].groupby(df.loc[correct, problem_col], observed=True).median()
    reference = df[problem_col].map(medians).astype("float64")
    reference = reference.where(reference > 0)
    return (lengths / reference).rename(f"{length_col}_norm")


def length_summary(
    df: pd.DataFrame,
    by: str | Sequence[str] = "teacher",
    length_col: str = "tokens",
    *,
    problem_col: str = "problem_id",
    correct_col: str = "correct",
) -> pd.DataFrame:
    """Raw mean and median length per group, and mean / median of the normalised length.

    The published table reports raw tokens; the normalised columns make problems of
    different difficulty comparable (see :func:`normalised_lengths`).

    Returns:
        One row per group with ``n_traces``, ``mean``, ``median``, ``mean_norm``,
        ``median_norm`` (NaN-normalised traces are skipped in the last two).

    >>> df = pd.DataFrame({"teacher": ["a", "a", "b"], "problem_id": ["p", "q", "p"],
    ...                    "correct": [True, True, True], "tokens": [100, 40, 300]})
    >>> summary = length_summary(df)  # a: raw 100, 40; normalised 100/200, 40/40
    >>> summary["mean"].tolist(), summary["mean_norm"].tolist()
    ([70.0, 300.0], [0.75, 1.5])
    """
    keys = [by] if isinstance(by, str) else list(by)
    require_columns(df, [*keys, length_col], "length_summary")
    frame = df[keys].copy()
    frame["length"] = pd.to_numeric(df[length_col], errors="raise").astype("float64")
    frame["norm"] = normalised_lengths(
        df, length_col, problem_col=problem_col, correct_col=correct_col
    )
    grouped = frame.groupby(keys, observed=True, sort=True)
    return pd.DataFrame(
        {
            "n_traces": grouped["length"].size(),
            "mean": grouped["length"].mean(),
            "median": grouped["length"].median(),
            "mean_norm": grouped["norm"].mean(),
            "median_norm": grouped["norm"].median(),
        }
    )


# ------------------------------------------------------------------------------- redundancy


def step_similarities(embeddings: np.ndarray) -> tuple[np.ndarray, list[int | None]]:
    """For each step, the highest cosine to an earlier step and which step that was.

    r_i = max_{j<i} cos(s_i, s_j),  j*_i = argmax_{j<i} cos(s_i, s_j)  (0-based; ties → the
    earliest j). Step 0 has no earlier step: r_0 = NaN, j*_0 = None. Rows are normalised
    here, so any non-zero embeddings work; cosines are clipped to [-1, 1] so rounding never
    lifts an exact repeat above 1.

    Computed as a matrix product with the upper triangle (j ≥ i) masked, in row blocks so a
    very long trace does not need an m × m matrix at once.

    Args:
        embeddings: array (m, d), one row per step, no zero rows.

    Returns:
        ``(max_similarity, matched_step)``: float64 array of length m, list of length m.

    Reference: Legi-Val, arXiv 2603.20508 (redundancy r_i).

    >>> e = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    >>> r, j = step_similarities(e)
    >>> r.round(2).tolist(), j  # cos(s2, s0) = 0.6, cos(s2, s1) = 0.8
    ([nan, 0.0, 0.8], [None, 0, 1])
    """
    matrix = np.asarray(embeddings, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D array (steps × dims), got shape {matrix.shape}")
    m = matrix.shape[0]
    max_similarity = np.full(m, np.nan)
    matched: list[int | None] = [None] * m
    if m == 0:
        return max_similarity, matched
    if not np.all(np.isfinite(matrix)):
        raise ValueError("embeddings contain NaN or infinite values")
    norms = np.linalg.norm(matrix, axis=1)
    if np.any(norms == 0):
        raise ValueError(f"embedding row {int(np.argmin(norms))} is all zeros (no direction)")
    unit = matrix / norms[:, None]
    for lo in range(1, m, _SIMILARITY_BLOCK):
        hi = min(m, lo + _SIMILARITY_BLOCK)
        sims = unit[lo:hi] @ unit[:hi].T  # rows i in [lo, hi), columns j in [0, hi)
        rows = np.arange(lo, hi)[:, None]
        sims[np.arange(hi)[None, :] >= rows] = -np.inf  # keep only j < i
        best = np.argmax(sims, axis=1)
        max_similarity[lo:hi] = np.clip(sims[np.arange(hi - lo), best], -1.0, 1.0)
        matched[lo:hi] = best.tolist()
    return max_similarity, matched


def _similarity_vector(max_similarity: Sequence[float] | np.ndarray) -> np.ndarray:
    values = np.asarray(max_similarity, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"max_similarity must be 1-D (one value per step), got {values.shape}")
    if values.size > 1 and np.isnan(values[1:]).any():
        raise ValueError(
            f"max_similarity has NaN at step {int(np.flatnonzero(np.isnan(values[1:]))[0]) + 1}; "
            "only step 0 may be NaN"
        )
    return values


def redundancy_share(
    max_similarity: Sequence[float] | np.ndarray, threshold: float | str = 0.8
) -> float:
    """Share of steps i ≥ 1 whose best match to an earlier step exceeds τ.

    redundancy = |{i ≥ 1 : r_i > τ}| / (m − 1);  **[choice]** a trace with m ≤ 1 has 0.

    Args:
        max_similarity: r_0..r_{m-1} from :func:`step_similarities` (r_0, NaN, is ignored).
        threshold: τ, default 0.8 (paper); ``"release"`` gives 0.85 (authors' scripts).

    Reference: Legi-Val, arXiv 2603.20508 (redundancy, τ = 0.8).

    >>> redundancy_share([np.nan, 0.9, 0.5, 0.81])  # steps 1 and 3 > 0.8 → 2 / 3
    0.6666666666666666
    >>> redundancy_share([np.nan])
    0.0
    """
    values = _similarity_vector(max_similarity)
    tau = resolve_threshold(threshold)
    if values.size <= 1:
        return 0.0
    return float(np.count_nonzero(values[1:] > tau) / (values.size - 1))


def redundancy_sweep(
    max_similarity: Sequence[float] | np.ndarray,
    thresholds: Sequence[float] | np.ndarray = SWEEP_THRESHOLDS,
) -> np.ndarray:
    """:func:`redundancy_share` at each threshold (the published 21-point study by default).

    Non-increasing in τ: raising τ can only drop steps from the count.

    Returns:
        float64 array, one share per threshold.

    Reference: Legi-Val, arXiv 2603.20508 (threshold sensitivity study).

    >>> redundancy_sweep([np.nan, 0.3, 0.9], [0.0, 0.5, 0.95]).tolist()
    [1.0, 0.5, 0.0]
    """
    values = _similarity_vector(max_similarity)
    taus = np.asarray([resolve_threshold(t) for t in np.atleast_1d(thresholds)], np.float64)
    if values.size <= 1:
        return np.zeros(taus.size)
    return (values[1:, None] > taus[None, :]).mean(axis=0)


@dataclass(frozen=True)
class RedundancyScores:
    """Redundancy of one trace with the per-step detail the inspector shows."""

    share: float
    max_similarity: np.ndarray
    matched_step: list[int | None]
    threshold: float


def redundancy_scores(
    steps: Sequence[str],
    threshold: float | str = 0.8,
    *,
    model: object = None,
    batch_size: int = 64,
) -> RedundancyScores:
    """Embed a trace's steps (all-MiniLM-L6-v2 by default) and score its redundancy.

    Args:
        steps: the step texts of one trace, in order.
        threshold: τ as a number, or ``"paper"`` (0.8) / ``"release"`` (0.85).
        model: an embedding model for :func:`legival_core.text.embedding.embed_sentences`.
        batch_size: texts per forward pass.

    Reference: Legi-Val, arXiv 2603.20508 (redundancy).
    """
    from legival_core.text.embedding import embed_sentences

    tau = resolve_threshold(threshold)
    texts = [str(step) if not hasattr(step, "text") else step.text for step in steps]
    if not texts:
        return RedundancyScores(0.0, np.zeros(0), [], tau)
    max_similarity, matched = step_similarities(
        embed_sentences(texts, model=model, batch_size=batch_size)
    )
    return RedundancyScores(redundancy_share(max_similarity, tau), max_similarity, matched, tau)


# ------------------------------------------------------------------------------ compression


#: zlib level of σ. **[choice]** the decomposition paper names zlib but no level; 9 (best
#: compression) is the
#: one level used everywhere σ appears: ``trace_efficiency.compression`` and the
#: decomposition's trace layer. (Until this was unified the stored column used zlib's default,
#: 6, and gave a different σ for the same trace.)
COMPRESSION_LEVEL: Final = 9


def compression_ratio(text: str | bytes) -> float:
    """σ = min(1, len(zlib(b, level 9)) / len(b)) of a trace, b = its UTF-8 bytes.

    The one definition of the compression ratio (the signal share σ_i of the decomposition's
    trace layer, and ``trace_efficiency.compression``), at :data:`COMPRESSION_LEVEL`. A trace
    that repeats itself compresses well and gets a small σ; ordinary prose sits around
    0.3–0.5; very short texts compress to more bytes than they have, hence the cap at 1. The
    empty text has nothing to compress and gets σ = 1 (the cap), so that σ·T never invents
    signal from nothing. Lone surrogates in text are kept as their own bytes
    (``surrogatepass``) rather than failing.

    Args:
        text: the trace text (untrusted model text; only its bytes are used), or its bytes.

    Returns:
        σ in (0, 1].

    Reference: Kaiser et al., arXiv 2602.09805 (trace layer, σ_i).

    >>> compression_ratio("abc")  # zlib output (11 bytes) is longer than 3 bytes → capped
    1.0
    >>> compression_ratio("")
    1.0
    >>> compression_ratio("ab" * 1000)  # 2000 bytes → 24 compressed bytes: 24 / 2000
    0.012
    """
    if isinstance(text, str):
        data = text.encode("utf-8", "surrogatepass")
    elif isinstance(text, bytes | bytearray | memoryview):
        data = bytes(text)
    else:
        raise TypeError(f"compression_ratio: text must be str or bytes, got {type(text).__name__}")
    if not data:
        return 1.0
    return min(1.0, len(zlib.compress(data, COMPRESSION_LEVEL)) / len(data))


# ----------------------------------------------------------------------------- backtracking


def backtracking_share(steps_flagged: Iterable[int], m: int, *, on_invalid: str = "raise") -> float:
    """Share of a trace's m steps labelled as backtracking.

    backtracking = |distinct flagged steps| / m, steps numbered 1..m as the judge sees them.
    A trace with no steps has share 0.

    Args:
        steps_flagged: 1-based step numbers (a judge's or the lexical detector's).
        m: number of steps of the trace.
        on_invalid: ``"raise"`` on a number outside 1..m, or ``"drop"`` to ignore it (an LLM
            judge sometimes cites steps that do not exist).

    Reference: Legi-Val, arXiv 2603.20508 (backtracking share).

    >>> backtracking_share([2, 5, 5], m=10)  # steps 2 and 5 of 10 → 0.2
    0.2
    >>> backtracking_share([3, 99], m=4, on_invalid="drop")
    0.25
    """
    if m < 0:
        raise ValueError(f"m must be >= 0, got {m}")
    if on_invalid not in ("raise", "drop"):
        raise ValueError(f"on_invalid must be 'raise' or 'drop', got {on_invalid!r}")
    flagged: set[int] = set()
    for number in steps_flagged:
        if isinstance(number, bool) or int(number) != number:
            raise ValueError(f"step numbers must be integers, got {number!r}")
        number = int(number)
        if 1 <= number <= m:
            flagged.add(number)
        elif on_invalid == "raise":
            raise ValueError(f"step number {number} is outside 1..{m}")
    return len(flagged) / m if m else 0.0


def labeler_backtracking(judgments: pd.DataFrame, labeler: str, steps: pd.Series) -> pd.Series:
    """Per trace (indexed by trace id), :func:`backtracking_share` of ``labeler``'s valid
    judgment with ``on_invalid="drop"``: the distinct flagged steps within 1..m over m, 0 when
    m = 0, with m from ``steps`` (trace id → step count); a trace without a count is left out,
    and of two judgments of one trace the last counts.

    ``judgments`` has ``trace_id``, ``labeler``, ``valid`` and ``steps`` (each row's flagged
    step numbers, a list or array). Vectorised, for the metrics stage's and the robustness
    report's million traces: one pass over the flattened numbers, not a loop per trace.

    Raises:
        ValueError: a flagged step number is not an integer.

    >>> judgments = pd.DataFrame({"trace_id": ["a", "b", "c", "d"], "labeler": "cues",
    ...     "valid": [True, True, False, True], "steps": [[2, 5, 5, 99], [], [1], [1]]})
    >>> labeler_backtracking(judgments, "cues", pd.Series({"a": 10, "b": 0, "c": 3})).to_dict()
    {'a': 0.2, 'b': 0.0}
    """
    chosen = (judgments["labeler"].astype(str) == labeler).to_numpy() & judgments["valid"].astype(
        "boolean"
    ).fillna(False).to_numpy(dtype=bool)
    rows = judgments.loc[chosen, ["trace_id", "steps"]]
    rows = rows.assign(trace_id=rows["trace_id"].astype(str)).drop_duplicates(
        "trace_id", keep="last"
    )
    m = pd.to_numeric(rows["trace_id"].map(steps), errors="coerce").to_numpy(dtype=float)
    known = ~np.isnan(m)
    ids = rows["trace_id"].to_numpy()[known]
    m = m[known].astype(np.int64)
    if (m < 0).any():
        raise ValueError(f"m must be >= 0, got {int(m.min())}")
    flagged = pd.Series(rows["steps"].to_numpy()[known], dtype=object).explode().dropna()
    numbers = flagged.to_numpy(dtype=float)
    if np.any(np.mod(numbers, 1) != 0):
        raise ValueError(
            f"step numbers must be integers, got {numbers[np.mod(numbers, 1) != 0][0]!r}"
        )
    owner = flagged.index.to_numpy(dtype=np.int64)
    inside = (numbers >= 1) & (numbers <= m[owner])
    owner, numbers = owner[inside], numbers[inside].astype(np.int64)
    # distinct (trace, step) pairs, counted per trace
    pairs = np.unique(owner * (int(m.max(initial=0)) + 1) + numbers)
    hits = np.bincount(pairs // (int(m.max(initial=0)) + 1), minlength=len(ids))
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = np.where(m > 0, hits / np.maximum(m, 1), 0.0)
    return pd.Series(shares, index=ids, dtype="float64")
