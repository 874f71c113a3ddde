"""Published reference numbers, as tidy DataFrames with their units stated.

Two CSV files ship inside the package (``legival_core/data/published/``):

* ``legival_table7_published.csv`` -- the per-dataset teacher table of Legi-Val
  (arXiv 2603.20508, Table 7): 12 teachers x {Connections, GPQA, MATH}; shares in percent.
* ``efficiency_cogniload_published.csv`` -- the CogniLoad efficiency results of Kaiser et al.
  (arXiv 2602.09805): 25 models; E0 scaled by 100, shares in percent.

The loaders return shares as fractions in [0, 1] (the name the rest of the project uses) and keep
the published percent columns beside them, so a reader can always compare with the paper. Each
frame's ``attrs`` carry ``unit`` (what every column measures) and ``source`` (the citation).
"""

from __future__ import annotations

import hashlib
from decimal import Decimal, InvalidOperation
from importlib import resources
from typing import Any

import pandas as pd

from legival_core.metrics.metric_catalog import RANKED_METRICS

__all__ = [
    "COGNILOAD_FILE",
    "COGNILOAD_MEASURES",
    "PUBLISHED_SOURCES",
    "TABLE7_FILE",
    "PublishedDataError",
    "cogniload_decomposition_frame",
    "cogniload_efficiency",
    "legival_table7",
    "published_file_digests",
    "table7_teacher_metrics_frame",
]

TABLE7_FILE = "legival_table7_published.csv"
COGNILOAD_FILE = "efficiency_cogniload_published.csv"

#: The measured columns of :func:`cogniload_efficiency` in their shown order (units there),
#: without the published percent copies; the page shows these beside ``model``.
COGNILOAD_MEASURES: tuple[str, ...] = (
    "e0",
    "accuracy",
    "mean_tokens",
    "r_ctx",
    "r_logic",
    "vo_nat",
    "kappa_nat",
    "mean_tokens_correct",
    "mean_tokens_incorrect",
)

#: Where the bundled numbers come from (cite these wherever the numbers are shown).
PUBLISHED_SOURCES: dict[str, dict[str, str]] = {
    "legival": {
        "title": "Measuring Reasoning Trace Legibility: Can Those Who Understand Teach?",
        "also_titled": "Measuring Weak-to-Strong Legibility of Reasoning Models",
        "arxiv": "2603.20508",
        "url": "https://arxiv.org/abs/2603.20508",
        "what": "Table 7: accuracy, mean tokens, redundancy, backtracking, first- and second-order "
        "transfer utility (FOTU, SOTU) and regression rate of 12 teachers on Connections, GPQA "
        "and MATH; percentages as printed.",
        "file": TABLE7_FILE,
    },
    "kaiser": {
        "title": "Beyond Accuracy: Decomposing the Reasoning Efficiency of LLMs",
        "authors": "Kaiser, Frigessi, Ramezani-Kebrya, Ricaud",
        "arxiv": "2602.09805",
        "url": "https://arxiv.org/abs/2602.09805",
        "what": "CogniLoad results for 25 models: E0 (x100), accuracy, mean output tokens, "
        "context and logic reliability, mean verbosity overhead and coupling under the native "
        "workload, mean tokens of correct and incorrect answers. CogniLoad: arXiv 2509.18458.",
        "file": COGNILOAD_FILE,
    },
}


class PublishedDataError(ValueError):
    """A bundled CSV does not have the expected shape; the message names file, row and field."""


# Column -> kind: "text", "number", "percent" (a share in 0..100).
_TABLE7_COLUMNS: dict[str, str] = {
    "dataset": "text",
    "model": "text",
    "hf_id": "text",
    "accuracy_pct": "percent",
    "tokens": "number",
    "redundancy_pct": "percent",
    "backtracking_pct": "percent",
    "fotu_pct": "percent",
    "sotu_pct": "percent",
    "regression_rate_pct": "percent",
}
_COGNILOAD_COLUMNS: dict[str, str] = {
    "model": "text",
    "e0_x100": "number",
    "accuracy_pct": "percent",
    "mean_tokens": "number",
    "r_ctx_pct": "percent",
    "r_logic_pct": "percent",
    "vo_nat": "number",
    "kappa_nat": "number",
    "mean_tokens_correct": "number",
    "mean_tokens_incorrect": "number",
}


def _read_text(name: str) -> str:
    return resources.files("legival_core").joinpath("data", "published", name).read_text("utf-8")


def published_file_digests() -> dict[str, str]:
    """SHA-256 of each bundled CSV, for provenance records."""
    return {
        name: hashlib.sha256(_read_text(name).encode("utf-8")).hexdigest()
        for name in (TABLE7_FILE, COGNILOAD_FILE)
    }


def _load(name: str, columns: dict[str, str]) -> pd.DataFrame:
    """Read a bundled CSV as text and check every cell; numbers are parsed from their decimal
    text so that 14.9 % becomes the float nearest 0.149 (not 14.9 / 100 with its rounding)."""
    import io

    raw = pd.read_csv(io.StringIO(_read_text(name)), dtype=str, keep_default_na=False)
    missing = [c for c in columns if c not in raw.columns]
    if missing:
        raise PublishedDataError(f"{name}: missing column(s) {missing}")
    out: dict[str, list[Any]] = {c: [] for c in columns}
    fractions: dict[str, list[float]] = {c: [] for c, k in columns.items() if k == "percent"}
    for row, record in enumerate(raw[list(columns)].itertuples(index=False)):
        for column, text in zip(columns, record, strict=True):
            kind = columns[column]
            where = f"{name}: row {row} (line {row + 2}), field '{column}'"
            text = text.strip()
            if kind == "text":
                if not text:
                    raise PublishedDataError(f"{where}: empty")
                out[column].append(text)
                continue
            try:
                value = Decimal(text)
            except InvalidOperation:
                raise PublishedDataError(f"{where}: {text[:40]!r} is not a number") from None
            if not value.is_finite() or value < 0:
                raise PublishedDataError(f"{where}: {text[:40]!r} is not a non-negative number")
            if kind == "percent":
                if value > 100:
                    raise PublishedDataError(f"{where}: {text!r} is not a percentage in 0..100")
                fractions[column].append(float(value / 100))
            out[column].append(float(value))
    frame = pd.DataFrame(out)
    for column, values in fractions.items():
        frame[column.removesuffix("_pct")] = values
    return frame


def legival_table7() -> pd.DataFrame:
    """Legi-Val Table 7: one row per (dataset, teacher), 36 rows.

    Columns: ``dataset``, ``model`` (the paper's short teacher name), ``hf_id``, ``tokens`` (mean
    generated tokens of a trace), and the shares ``accuracy``, ``redundancy``, ``backtracking``,
    ``fotu``, ``sotu``, ``regression_rate`` as fractions in [0, 1], each next to the published
    percentage (``accuracy_pct``, ...). Reference: Legi-Val, arXiv 2603.20508, Table 7.

    >>> table = legival_table7()
    >>> table.shape[0], sorted(table["dataset"].unique())
    (36, ['Connections', 'GPQA', 'MATH'])
    >>> row = table[(table.dataset == "MATH") & (table.model == "qwen3-8b")].iloc[0]
    >>> float(row.accuracy), float(row.accuracy_pct), float(row.tokens)
    (0.9, 90.0, 2377.0)
    """
    table = _load(TABLE7_FILE, _TABLE7_COLUMNS)
    # Table 7 reports the seven ranked metrics; every share among them is printed in percent,
    # so each but ``tokens`` (a raw count) has a published ``*_pct`` twin after the fractions.
    order = [
        "dataset",
        "model",
        "hf_id",
        *RANKED_METRICS,
        *(f"{metric}_pct" for metric in RANKED_METRICS if metric != "tokens"),
    ]
    table = table[order]
    table.attrs["unit"] = (
        "accuracy, redundancy, backtracking, fotu, sotu, regression_rate: fractions in [0, 1] "
        "(the *_pct columns hold the published percentages); tokens: mean generated tokens per "
        "trace (raw count)"
    )
    table.attrs["source"] = _cite("legival")
    return table


def cogniload_efficiency() -> pd.DataFrame:
    """Kaiser et al.'s CogniLoad efficiency results: one row per model, 25 rows.

    Columns: ``model``, ``benchmark`` ("CogniLoad"), ``e0`` (correct answers per 1,000 output
    tokens, E0 = 1000 * P(S=1) / E[T]; the paper prints 100 * E0, kept as ``e0_x100``),
    ``accuracy``, ``r_ctx`` (share of completed outputs), ``r_logic`` (accuracy among completed
    outputs) as fractions with their published percentages (``*_pct``), ``mean_tokens`` (E[T]),
    ``vo_nat`` (mean verbosity overhead T/W, native workload), ``kappa_nat`` (coupling
    E[T] / (E[W] * VO)), ``mean_tokens_correct`` and ``mean_tokens_incorrect``.
    Reference: Kaiser et al., arXiv 2602.09805.

    >>> table = cogniload_efficiency()
    >>> len(table), table.loc[0, "model"], float(table.loc[0, "e0"])
    (25, 'o3', 0.1525)
    """
    table = _load(COGNILOAD_FILE, _COGNILOAD_COLUMNS)
    table["e0"] = [float(Decimal(str(v)) / 100) for v in table["e0_x100"]]
    table.insert(1, "benchmark", "CogniLoad")
    order = [
        "model",
        "benchmark",
        *COGNILOAD_MEASURES,
        "e0_x100",
        "accuracy_pct",
        "r_ctx_pct",
        "r_logic_pct",
    ]
    table = table[order]
    table.attrs["unit"] = (
        "e0: correct answers per 1,000 output tokens (e0_x100 = 100 * e0 as published); "
        "accuracy, r_ctx, r_logic: fractions in [0, 1] (the *_pct columns hold the published "
        "percentages); mean_tokens, mean_tokens_correct, mean_tokens_incorrect: output tokens; "
        "vo_nat: output tokens per unit of native workload; kappa_nat: dimensionless"
    )
    table.attrs["source"] = _cite("kaiser")
    return table


def _cite(key: str) -> str:
    src = PUBLISHED_SOURCES[key]
    return f"{src['title']} (arXiv {src['arxiv']}, {src['url']})"


def table7_teacher_metrics_frame() -> pd.DataFrame:
    """Table 7 shaped as the store's ``teacher_metrics`` table (teacher = the paper's short name;
    shares as fractions; columns the paper does not report are left out, i.e. null)."""
    table = legival_table7()
    return pd.DataFrame(
        {
            "teacher": table["model"],
            "dataset": table["dataset"],
            "accuracy": table["accuracy"],
            "tokens": table["tokens"],
            "redundancy": table["redundancy"],
            "backtracking": table["backtracking"],
            "fotu": table["fotu"],
            "sotu": table["sotu"],
            "regression_rate": table["regression_rate"],
            "hf_id": table["hf_id"],
        }
    )


def cogniload_decomposition_frame() -> pd.DataFrame:
    """The CogniLoad rows shaped as the store's ``decomposition`` table (layer "native")."""
    table = cogniload_efficiency()
    return pd.DataFrame(
        {
            "model": table["model"],
            "benchmark": table["benchmark"],
            "layer": "native",
            "accuracy": table["accuracy"],
            "e0": table["e0"],
            "mean_tokens": table["mean_tokens"],
            "r_ctx": table["r_ctx"],
            "r_logic": table["r_logic"],
            "vo": table["vo_nat"],
            "kappa": table["kappa_nat"],
            "mean_tokens_correct": table["mean_tokens_correct"],
            "mean_tokens_incorrect": table["mean_tokens_incorrect"],
        }
    )
