"""Trace-level audits for the efficiency decomposition (docs/metrics/decomposition.md, trace layer
and audits).

Everything here looks at the *text* of a model's output, where the outcome and workload
layers of :mod:`legival_core.metrics.decomposition` only look at counts:

- the signal share σ_i of one trace is :func:`legival_core.metrics.efficiency.compression_ratio`
  (one definition for the stored ``compression`` column and the trace layer);
- :func:`truncation_loop_audit` — do truncated outputs end in a loop or in a copy of the prompt?
- :func:`oracle_early_stop` / :func:`prefix_checks` — how early a correct answer was already
  extractable, and which share of the tokens came after it;
- :func:`tokens_by_outcome` — mean tokens of correct, incorrect and truncated outputs.

Reference: Kaiser, Frigessi, Ramezani-Kebrya, Ricaud, "Beyond Accuracy: Decomposing the
Reasoning Efficiency of LLMs", arXiv 2602.09805.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from legival_core.store.schema import require_columns

#: Size of the tail window of a truncated output that the loop audit reads. **[choice]** 2,000
#: characters: long enough to hold a few repetitions of a looping paragraph, short enough to
#: look only at how the output ended.
DEFAULT_LOOP_WINDOW_CHARS = 2000
#: n of the word n-grams used for repetition and prompt-copy shares (4-grams;
#: docs/metrics/decomposition.md).
LOOP_NGRAM = 4

_KEY = ["model", "benchmark", "instance_id"]


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def repeated_ngram_share(text: str, n: int = LOOP_NGRAM) -> float:
    """Share of the word n-grams of ``text`` that already occurred earlier in it.

    share = (number of n-gram positions − number of distinct n-grams) / number of positions.
    Words are whitespace-separated and lower-cased. NaN when the text has fewer than n words.

    >>> repeated_ngram_share("a b c d a b c d")  # 5 positions, 4 distinct -> 1/5
    0.2
    >>> repeated_ngram_share("one two three")
    nan
    """
    grams = _ngrams(text.lower().split(), n)
    if not grams:
        return float("nan")
    return (len(grams) - len(set(grams))) / len(grams)


def prompt_copy_share(text: str, prompt: str, n: int = LOOP_NGRAM) -> float:
    """Share of the word n-grams of ``text`` that also occur in ``prompt``.

    NaN when ``text`` has fewer than n words.

    >>> prompt_copy_share("we know x is 3 today ok", "Find x if x is 3 today")
    0.25
    """
    grams = _ngrams(text.lower().split(), n)
    if not grams:
        return float("nan")
    prompt_grams = set(_ngrams(prompt.lower().split(), n))
    return sum(g in prompt_grams for g in grams) / len(grams)


def _text_at(table: pd.DataFrame, pos: int, field: str, name: str) -> str:
    value = table[field].iloc[pos]
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return ""
    if not isinstance(value, str):
        raise ValueError(
            f"{name}: row {pos}, field '{field}': expected text, got {type(value).__name__}"
        )
    return value


def truncation_loop_audit(
    instances: pd.DataFrame,
    window_chars: int = DEFAULT_LOOP_WINDOW_CHARS,
    n: int = LOOP_NGRAM,
) -> pd.DataFrame:
    """Loop and prompt-copy shares in the last window of every truncated output.

    For each row with ``truncated`` true and a ``trace``, the audit reads the last
    ``window_chars`` characters and reports

    - ``repeat_share`` = :func:`repeated_ngram_share` of the window (the output is stuck in
      a loop when this is high);
    - ``prompt_copy_share`` = :func:`prompt_copy_share` of the window against ``prompt``
      (NaN when the table has no ``prompt`` column).

    Args:
        instances: table with ``model, benchmark, instance_id, truncated, trace`` and
            optionally ``prompt``.
        window_chars: size of the tail window in characters (default 2,000).
        n: word n-gram length (default 4).

    Returns:
        One row per truncated output: ``model, benchmark, instance_id, window_chars,
        repeat_share, prompt_copy_share``.

    Reference: Kaiser et al., arXiv 2602.09805 (truncation-loop audit).

    >>> t = pd.DataFrame({"model": ["m"], "benchmark": ["b"], "instance_id": ["1"],
    ...                   "truncated": [True], "trace": ["so so so so so so"],
    ...                   "prompt": ["say so so so so"]})
    >>> truncation_loop_audit(t)[["repeat_share", "prompt_copy_share"]].to_numpy().tolist()
    [[0.6666666666666666, 1.0]]
    """
    name = "truncation_loop_audit(instances)"
    require_columns(instances, [*_KEY, "truncated", "trace"], name)
    if window_chars <= 0:
        raise ValueError(f"{name}: window_chars must be positive, got {window_chars}")
    has_prompt = "prompt" in instances.columns
    rows: list[dict[str, Any]] = []
    truncated = instances["truncated"].to_numpy()
    for pos in range(len(instances)):
        flag = truncated[pos]
        if flag is pd.NA or flag not in (True, False, 0, 1):
            raise ValueError(f"{name}: row {pos}, field 'truncated': expected a bool, got {flag!r}")
        if not flag:
            continue
        window = _text_at(instances, pos, "trace", name)[-window_chars:]
        prompt = _text_at(instances, pos, "prompt", name) if has_prompt else None
        rows.append(
            {
                "model": instances["model"].iloc[pos],
                "benchmark": instances["benchmark"].iloc[pos],
                "instance_id": instances["instance_id"].iloc[pos],
                "window_chars": len(window),
                "repeat_share": repeated_ngram_share(window, n),
                "prompt_copy_share": (
                    prompt_copy_share(window, prompt, n) if prompt is not None else float("nan")
                ),
            }
        )
    columns = [*_KEY, "window_chars", "repeat_share", "prompt_copy_share"]
    return pd.DataFrame(rows, columns=columns)


def prefix_checks(
    instances: pd.DataFrame,
    is_correct: Callable[[Mapping[str, Any], str], bool],
    n_prefixes: int = 10,
) -> pd.DataFrame:
    """Check the answer extractable from prefixes of each trace; input for oracle early stop.

    Every trace is cut at ``n_prefixes`` evenly spaced word boundaries (the last cut is the
    whole trace). ``is_correct(row, prefix_text)`` extracts an answer from the prefix and grades
    it (e.g. a task's extractor followed by its checker). The token count of a prefix is
    estimated as T · len(prefix) / len(trace) **[choice]**: the instance table holds T but not
    per-token offsets; pass an exact table to :func:`oracle_early_stop` when you have one.

    Args:
        instances: table with ``model, benchmark, instance_id, tokens, trace``.
        is_correct: callable (row as a mapping, prefix text) -> bool.
        n_prefixes: number of cuts per trace (≥ 1).

    Returns:
        ``model, benchmark, instance_id, prefix_tokens, correct``, one row per cut.

    >>> t = pd.DataFrame({"model": ["m"], "benchmark": ["b"], "instance_id": ["1"],
    ...                   "tokens": [100], "trace": ["x = 4 . check : x = 4"]})
    >>> prefix_checks(t, lambda row, p: "4" in p, n_prefixes=2)["correct"].tolist()
    [True, True]
    """
    name = "prefix_checks(instances)"
    require_columns(instances, [*_KEY, "tokens", "trace"], name)
    if n_prefixes < 1:
        raise ValueError(f"{name}: n_prefixes must be ≥ 1, got {n_prefixes}")
    rows: list[dict[str, Any]] = []
    for pos in range(len(instances)):
        row = instances.iloc[pos].to_dict()
        text = _text_at(instances, pos, "trace", name)
        tokens = float(row["tokens"])
        if not np.isfinite(tokens) or tokens < 0:
            raise ValueError(f"{name}: row {pos}, field 'tokens': expected ≥ 0, got {tokens}")
        # word boundaries: end offsets of each whitespace-separated word
        ends = _word_ends(text)
        if not ends:
            continue
        cuts = {
            ends[int(np.ceil(len(ends) * j / n_prefixes)) - 1] for j in range(1, n_prefixes + 1)
        }
        picks = sorted(cuts)
        for end in picks:
            prefix = text[:end]
            rows.append(
                {
                    "model": row["model"],
                    "benchmark": row["benchmark"],
                    "instance_id": row["instance_id"],
                    "prefix_tokens": tokens * end / len(text),
                    "correct": bool(is_correct(row, prefix)),
                }
            )
    return pd.DataFrame(rows, columns=[*_KEY, "prefix_tokens", "correct"])


def _word_ends(text: str) -> list[int]:
    ends: list[int] = []
    in_word = False
    for i, ch in enumerate(text):
        if ch.isspace():
            if in_word:
                ends.append(i)
            in_word = False
        else:
            in_word = True
    if in_word:
        ends.append(len(text))
    return ends


def _token_counts(frame: pd.DataFrame, field: str, table: str) -> pd.Series:
    """``frame[field]`` as floats, refusing (with the row and the value) a missing, non-numeric,
    infinite or negative count: a token count is a number ≥ 0."""
    counts = pd.to_numeric(frame[field], errors="coerce").astype(float)
    bad = ~np.isfinite(counts.to_numpy()) | (counts.to_numpy() < 0)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{table}: row {pos}, field '{field}': expected a number ≥ 0, "
            f"got {frame[field].iloc[pos]!r}"
        )
    return counts


def oracle_early_stop(instances: pd.DataFrame, prefixes: pd.DataFrame) -> pd.DataFrame:
    """Oracle early stop: the first prefix whose extracted answer is already correct.

    For each instance with at least one correct prefix, T_first = the smallest
    ``prefix_tokens`` with ``correct`` true, and

    - gain = T / T_first (how many times fewer tokens an oracle stopper would spend),
    - wasted_tail = 1 − T_first / T (share of the output written after the answer was there).

    Instances with no correct prefix get NaN gain and tail and ``has_correct_prefix`` false.
    A prefix with 0 tokens that is already correct means the answer was in the prompt:
    gain is +inf and the tail is 1.

    Args:
        instances: ``model, benchmark, instance_id, tokens`` (T per output).
        prefixes: ``model, benchmark, instance_id, prefix_tokens, correct`` (from
            :func:`prefix_checks` or from exact token offsets).

    Returns:
        ``model, benchmark, instance_id, tokens, first_correct_tokens, has_correct_prefix,
        gain, wasted_tail``.

    Reference: Kaiser et al., arXiv 2602.09805 (oracle early-stop audit).

    >>> inst = pd.DataFrame({"model": ["m", "m"], "benchmark": ["b", "b"],
    ...                      "instance_id": ["1", "2"], "tokens": [1000, 400]})
    >>> pre = pd.DataFrame({"model": ["m"] * 3, "benchmark": ["b"] * 3,
    ...                     "instance_id": ["1", "1", "2"], "prefix_tokens": [250, 500, 400],
    ...                     "correct": [True, True, False]})
    >>> oracle_early_stop(inst, pre)[["gain", "wasted_tail"]].to_numpy().tolist()
    [[4.0, 0.75], [nan, nan]]
    """
    require_columns(instances, [*_KEY, "tokens"], "oracle_early_stop(instances)")
    require_columns(prefixes, [*_KEY, "prefix_tokens", "correct"], "oracle_early_stop(prefixes)")
    tokens = _token_counts(instances, "tokens", "oracle_early_stop(instances)")
    pre_tokens = _token_counts(prefixes, "prefix_tokens", "oracle_early_stop(prefixes)")
    correct = prefixes["correct"].astype("boolean")
    if correct.isna().any():
        pos = int(np.flatnonzero(correct.isna().to_numpy())[0])
        raise ValueError(f"oracle_early_stop(prefixes): row {pos}, field 'correct': missing")
    hits = prefixes.loc[correct.to_numpy(dtype=bool), _KEY].assign(
        prefix_tokens=pre_tokens[correct.to_numpy(dtype=bool)].to_numpy()
    )
    first = hits.groupby(_KEY, sort=False, observed=True)["prefix_tokens"].min()
    out = instances[_KEY].copy()
    out["tokens"] = tokens.to_numpy()
    out = out.merge(
        first.rename("first_correct_tokens").reset_index(), on=_KEY, how="left", validate="1:1"
    )
    t = out["tokens"].to_numpy(dtype=float)
    t_first = out["first_correct_tokens"].to_numpy(dtype=float)
    out["has_correct_prefix"] = ~np.isnan(t_first)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["gain"] = np.where(np.isnan(t_first), np.nan, t / t_first)
        out["wasted_tail"] = np.where(
            np.isnan(t_first) | (t == 0), np.nan, 1.0 - t_first / np.where(t == 0, 1, t)
        )
    return out


def tokens_by_outcome(instances: pd.DataFrame) -> pd.DataFrame:
    """Mean output tokens of correct, incorrect and truncated outputs per model and benchmark.

    Columns: ``n_correct, n_incorrect, n_truncated, mean_tokens_correct,
    mean_tokens_incorrect, mean_tokens_truncated`` (NaN where a group is empty). Incorrect
    includes truncated outputs, as in the published CogniLoad table.

    >>> t = pd.DataFrame({"model": ["m"] * 3, "benchmark": ["b"] * 3,
    ...                   "instance_id": ["1", "2", "3"], "correct": [True, False, False],
    ...                   "tokens": [100, 300, 500], "truncated": [False, False, True]})
    >>> tokens_by_outcome(t)[["mean_tokens_correct", "mean_tokens_incorrect"]].iloc[0].tolist()
    [100.0, 400.0]
    """
    name = "tokens_by_outcome(instances)"
    require_columns(instances, ["model", "benchmark", "correct", "tokens", "truncated"], name)
    frame = pd.DataFrame(
        {
            "model": instances["model"].to_numpy(),
            "benchmark": instances["benchmark"].to_numpy(),
            "correct": instances["correct"].astype(bool).to_numpy(),
            "truncated": instances["truncated"].astype(bool).to_numpy(),
            "tokens": pd.to_numeric(instances["tokens"], errors="raise").astype(float),
        }
    )
    rows = []
    for (model, bench), g in frame.groupby(["model", "benchmark"], sort=True, observed=True):
        t = g["tokens"].to_numpy()
        c = g["correct"].to_numpy()
        tr = g["truncated"].to_numpy()
        rows.append(
            {
                "model": model,
                "benchmark": bench,
                "n_correct": int(c.sum()),
                "n_incorrect": int((~c).sum()),
                "n_truncated": int(tr.sum()),
                "mean_tokens_correct": _mean_or_nan(t[c]),
                "mean_tokens_incorrect": _mean_or_nan(t[~c]),
                "mean_tokens_truncated": _mean_or_nan(t[tr]),
            }
        )
    return pd.DataFrame(rows)


def _mean_or_nan(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else float("nan")


__all__ = [
    "DEFAULT_LOOP_WINDOW_CHARS",
    "LOOP_NGRAM",
    "oracle_early_stop",
    "prefix_checks",
    "prompt_copy_share",
    "repeated_ngram_share",
    "tokens_by_outcome",
    "truncation_loop_audit",
]
