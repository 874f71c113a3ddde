"""How every page writes a number and names a column: the one formatting helper of the app.

A table on screen shows labels, not field names ("FOTU before leak", not
``fotu_before_leak``), shares as percentages, other numbers with fixed decimals, whole counts
without decimals, and an em dash where a value is missing or undefined. It never shows
``None``, ``NaN``, ``-Infinity`` or ``-0.000``: those are artefacts of the computation, not
something a reader should have to decode.

Pure pandas, no Streamlit: :func:`tidy_table` returns a pandas ``Styler`` whose underlying
numbers stay numbers (a grid still sorts them as numbers) while the text shown is formatted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from legival_core.metrics.metric_catalog import METRICS

__all__ = [
    "MISSING",
    "column_label",
    "format_number",
    "format_share",
    "format_signed",
    "number_formatter",
    "tidy_labels",
    "tidy_table",
]

#: What a missing or undefined value is shown as.
MISSING = "—"

#: Labels of the field names that are not metrics and not a plain word (metrics take theirs
#: from the catalog; a plain word such as ``teacher`` is already readable and stays).
COLUMN_LABELS: dict[str, str] = {
    "problem_id": "problem",
    "trace_id": "trace",
    "n_traces": "n traces",
    "n_students": "n students",
    "n_pairs": "n pairs",
    "n_problems": "n problems",
    "n_dataset": "n datasets",
    "leak_k": "leak at k",
    "fotu_pooled": "FOTU, traces pooled",
    "hf_id": "Hugging Face id",
    "τ_b": "τ_b",  # Kendall's tau-b: a subscript, not a field name
    "m": "steps m",
    "rho": "ρ (Spearman)",
    "pvalue": "p",
    "partial_rho": "partial ρ (given tokens)",
    "partial_pvalue": "partial p",
    # a monitor's verdict counts against the labels, and its F1
    "tp": "true positives",
    "fp": "false positives",
    "fn": "false negatives",
    "tn": "true negatives",
    "f1": "F1",
}

#: What a metric's per-metric count columns hold (``fotu_datasets``: the datasets its mean is
#: over; ``fotu_covered``: those the teacher has a value on, :mod:`legival_core.stats.support`).
_SUFFIX_WORDS = {"_datasets": "datasets averaged", "_covered": "datasets with a value"}

#: Columns holding whole counts: shown without decimals.
COUNT_COLUMNS = frozenset(
    {"n", "m", "k", "leak_k", "n_traces", "n_students", "n_pairs", "n_problems", "n_dataset"}
)


def _is_missing(value: object) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    try:
        return bool(isinstance(value, float | np.floating) and math.isnan(value))
    except TypeError:
        return False


def column_label(name: str) -> str:
    """The header a reader sees for a column: the metric's label, a known column's label, or
    the field name in words.

    >>> column_label("fotu_before_leak"), column_label("n_traces"), column_label("leak_share")
    ('FOTU before leak', 'n traces', 'leak share')

    A metric's coverage columns and a standard error say what they count:

    >>> column_label("fotu_datasets"), column_label("top_share_se")
    ('FOTU: datasets averaged', 'top share (standard error)')

    Statistics and counts are written out:

    >>> column_label("rho"), column_label("pvalue"), column_label("tp"), column_label("f1_n")
    ('ρ (Spearman)', 'p', 'true positives', 'F1 n')
    """
    text = str(name)
    if text in METRICS:
        return METRICS[text].label
    if text in COLUMN_LABELS:
        return COLUMN_LABELS[text]
    for suffix, words in _SUFFIX_WORDS.items():
        stem = text.removesuffix(suffix)
        if stem != text and (stem in METRICS or stem == "score"):
            return f"{column_label(stem)}: {words}"
    if text.endswith("_se") and len(text) > 3:
        return f"{column_label(text[:-3])} (standard error)"
    if text.endswith("_n") and len(text) > 2:  # the count behind a score: f1_n
        return f"{column_label(text[:-2])} n"
    if "_" not in text:
        return text
    return text.replace("_", " ").strip()


def format_number(value: object, decimals: int = 3) -> str:
    """A number with ``decimals`` fixed decimals; an em dash when missing; ∞ for infinities;
    never a negative zero.

    >>> format_number(0.25), format_number(-0.0001), format_number(None), format_number(-np.inf)
    ('0.250', '0.000', '—', '−∞')
    >>> format_number(1652.7, 0)
    '1,653'
    """
    if _is_missing(value):
        return MISSING
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    if math.isinf(number):
        return "∞" if number > 0 else "−∞"
    text = f"{number:,.{decimals}f}"
    # "-0.000": a tiny negative rounded to zero is zero
    if text.startswith("-") and float(text[1:].replace(",", "")) == 0:
        text = text[1:]
    return text


def format_signed(value: object, decimals: int = 3) -> str:
    """:func:`format_number` with a sign: + above zero, − below, none at a rounded zero.

    >>> format_signed(0.25), format_signed(-0.25), format_signed(-0.0001), format_signed(None)
    ('+0.250', '−0.250', '0.000', '—')
    """
    text = format_number(value, decimals)
    if text == MISSING or text.endswith("∞") or float(text.replace(",", "")) == 0:
        return text
    return text.replace("-", "−") if text.startswith("-") else f"+{text}"


def format_share(value: object, decimals: int = 1) -> str:
    """A share in [0, 1] as a percentage.

    >>> format_share(0.2417), format_share(float("nan")), format_share(-1e-9)
    ('24.2%', '—', '0.0%')
    """
    if _is_missing(value):
        return MISSING
    text = format_number(100 * float(value), decimals)  # type: ignore[arg-type]
    return text if text in (MISSING, "∞", "−∞") else f"{text}%"


def _format_other(value: object) -> str:
    if _is_missing(value):
        return MISSING
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    return str(value)


def number_formatter(column: str, values: pd.Series | None = None) -> Callable[[Any], str]:
    """How one column's cells are written: shares (catalog metrics marked ``share``) in %,
    tokens and counts whole, other numbers with 3 decimals, text as it is.

    >>> number_formatter("accuracy")(0.5), number_formatter("tokens")(812.4)
    ('50.0%', '812')
    >>> number_formatter("n_traces")(12.0), number_formatter("rho")(-0.0004)
    ('12', '0.000')
    """
    if column in METRICS and METRICS[column].share:
        return format_share
    whole = column in COUNT_COLUMNS or column == "rank" or column.endswith(("_rank", " rank"))
    if whole or column == "tokens" or column.startswith("mean_tokens"):
        return lambda value: format_number(value, 0)
    if values is not None and not (
        pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    ):
        return _format_other
    if values is not None and pd.api.types.is_integer_dtype(values):
        return lambda value: format_number(value, 0)  # a count has no decimals
    return format_number


def tidy_labels(columns: Iterable[str], labels: Mapping[str, str] | None = None) -> list[str]:
    """:func:`column_label` of every column (``labels`` first), made unique.

    >>> tidy_labels(["fotu", "fotu_pooled"])
    ['FOTU', 'FOTU, traces pooled']
    """
    seen: dict[str, int] = {}
    out = []
    for column in columns:
        label = (labels or {}).get(column) or column_label(column)
        if label in seen:
            seen[label] += 1
            label = f"{label} ({seen[label]})"
        else:
            seen[label] = 1
        out.append(label)
    return out


def tidy_table(
    frame: pd.DataFrame,
    labels: Mapping[str, str] | None = None,
    formats: Mapping[str, Callable[[Any], str]] | None = None,
) -> Any:
    """``frame`` ready for a page: columns relabelled, every cell formatted.

    Returns a pandas ``Styler``; its ``data`` keeps the numbers (relabelled) so a grid sorts
    numerically, except in a column with a missing value, which holds its text (Streamlit's
    grid would draw the gap as "None"). ``labels`` and ``formats`` override the
    defaults of :func:`column_label` and :func:`number_formatter` per original column name.

    >>> styled = tidy_table(pd.DataFrame({"teacher": ["a"], "fotu": [None], "n_traces": [3]}))
    >>> list(styled.data.columns), styled.to_html().count("—"), styled.data["FOTU"].tolist()
    (['teacher', 'FOTU', 'n traces'], 1, ['—'])
    """
    from legival_core.text.safe_text import visible_bidi

    formats = formats or {}
    shown = frame.reset_index(drop=True).copy()
    original = [str(c) for c in shown.columns]
    shown.columns = [visible_bidi(c) for c in tidy_labels(original, labels)]
    for label in shown.columns:
        # Names are drawn as they are in a grid cell: a bidi control would reorder them. (Two
        # categories may become one text, "a\u202e" and a literal "a\\u202e": mapped as objects.)
        column = shown[label]
        if isinstance(column.dtype, pd.CategoricalDtype) or column.dtype == object:
            shown[label] = column.astype(object).map(
                lambda v: visible_bidi(v) if isinstance(v, str) else v
            )
        elif str(column.dtype) in ("string", "str"):
            shown[label] = column.map(visible_bidi, na_action="ignore").astype(column.dtype)
    formatter = {
        label: formats.get(name) or number_formatter(name, shown[label])
        for name, label in zip(original, shown.columns, strict=True)
    }
    for label, write in formatter.items():
        # A grid draws a missing cell as "None" and -inf as "-Infinity" whatever the Styler
        # says: such a column is shown as its text (it then sorts as text); others stay numeric.
        column = shown[label]
        numeric = pd.api.types.is_float_dtype(column)
        if column.isna().any() or (numeric and np.isinf(column.to_numpy(dtype=float)).any()):
            shown[label] = column.map(write).astype(object)
            formatter[label] = str
    return shown.style.format(formatter, na_rep=MISSING)
