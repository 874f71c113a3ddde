"""The published-numbers page's data: published rows beside the store's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

# ---------------------------------------------------------------------------------------------
# Published numbers and the store overview
# ---------------------------------------------------------------------------------------------


def published_beside(
    published: pd.DataFrame, mine: pd.DataFrame, metrics: Sequence[str]
) -> pd.DataFrame:
    """Published rows next to the store's rows for the same teacher and dataset.

    A store teacher matches a published model when its name or its ``hf_id`` equals the
    published short name or Hugging Face id (case-insensitive); datasets match
    case-insensitively. Columns: dataset, model, then ``<metric>_published`` and
    ``<metric>_yours`` per metric. Empty when nothing matches.
    """
    pub = published.assign(
        _model=published["model"].str.lower(),
        _hf=published["hf_id"].str.lower() if "hf_id" in published else "",
        _dataset=published["dataset"].str.lower(),
    )
    names = {
        **dict(zip(pub["_model"], pub["model"], strict=True)),
        **dict(zip(pub["_hf"], pub["model"], strict=True)),
    }
    rows = []
    for record in mine.to_dict(orient="records"):
        keys = [str(record.get("teacher", "")).lower(), str(record.get("hf_id") or "").lower()]
        model = next((names[k] for k in keys if k and k in names), None)
        if model is None:
            continue
        match = pub[(pub["model"] == model) & (pub["_dataset"] == str(record["dataset"]).lower())]
        if match.empty:
            continue
        published_row = match.iloc[0]
        row: dict[str, Any] = {
            "dataset": published_row["dataset"],
            "model": model,
            "your_teacher": record["teacher"],
        }
        for metric in metrics:
            row[f"{metric}_published"] = published_row.get(metric, math.nan)
            row[f"{metric}_yours"] = record.get(metric, math.nan)
        rows.append(row)
    return pd.DataFrame(rows)
