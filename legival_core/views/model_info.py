"""Optional facts about the models on the board: a ``models.csv`` kept in the store's folder.

Columns (a header line names them, any order; only ``model`` is required):

- ``model``: the teacher's name as the store spells it (the key the board joins on);
- ``parameters``: the parameter count, a number with an optional K, M, B or T suffix
  (``7B``, ``1.5T``, ``70000000000``);
- ``release_date``: ``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``;
- ``open_weights``: true/false (also yes/no, 1/0);
- ``family``: free text (the maker or model line, e.g. ``OpenAI``);
- ``link``: an ``http://`` or ``https://`` address.

A bad field drops its row with a one-line problem naming the file, the line and the field; the
good rows are kept. The file is text written by someone else: a link other than http(s) is
refused (a ``javascript:`` address in a link cell would run when clicked).

Pure pandas, no Streamlit.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import re
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

import pandas as pd

__all__ = [
    "DETAIL_LABELS",
    "MODELS_FILE",
    "MODEL_COLUMNS",
    "ModelInfo",
    "filter_models",
    "format_parameters",
    "parse_models",
    "read_models",
    "safe_link",
    "with_facts",
    "with_model_columns",
]

#: The file's name, in the store's folder.
MODELS_FILE = "models.csv"
#: The columns a models.csv may have, in the order the board shows them.
MODEL_COLUMNS = ("model", "parameters", "release_date", "open_weights", "family", "link")
#: The headers of the models' facts on the Leaderboard.
DETAIL_LABELS = {
    "parameters": "Parameters",
    "release_date": "Released",
    "open_weights": "Open weights",
    "family": "Family",
    "link": "Link",
}
#: The longest text field kept (a name or a family is short; more is a mistake or an attack).
MAX_TEXT = 200

_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
_PARAMETERS = re.compile(r"^\s*(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([KkMmBbTt]?)\s*$")
_TRUE, _FALSE = {"true", "yes", "1", "y"}, {"false", "no", "0", "n"}


class ModelInfo:
    """What :func:`read_models` found: the good rows and a problem line per bad one."""

    def __init__(self, frame: pd.DataFrame, problems: Sequence[str]) -> None:
        self.frame = frame
        self.problems = list(problems)

    @property
    def empty(self) -> bool:
        return self.frame.empty


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": pd.Series(dtype=object),
            "parameters": pd.Series(dtype="float64"),
            "release_date": pd.Series(dtype=object),
            "open_weights": pd.Series(dtype="boolean"),
            "family": pd.Series(dtype=object),
            "link": pd.Series(dtype=object),
        }
    )


def parse_parameters(text: str) -> float:
    """A parameter count: ``7B`` → 7e9, ``1.5T`` → 1.5e12, ``350M`` → 3.5e8, plain numbers as
    they are; ValueError otherwise.

    >>> parse_parameters("7B"), parse_parameters("1.5t"), parse_parameters("125000000")
    (7000000000.0, 1500000000000.0, 125000000.0)
    """
    match = _PARAMETERS.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a count (a number, optionally with K, M, B or T)")
    value = float(match.group(1)) * _SUFFIX[match.group(2).upper()]
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} is not a positive count")
    return value


def parse_release_date(text: str) -> str:
    """A release date as written, checked: ``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``.

    >>> parse_release_date("2023-03-14"), parse_release_date("2023-05")
    ('2023-03-14', '2023-05')
    """
    for layout in ("%Y-%m-%d", "%Y-%m", "%Y"):
        try:
            dt.datetime.strptime(text, layout)
        except ValueError:
            continue
        if len(text) in (10, 7, 4):
            return text
    raise ValueError(f"{text!r} is not a date (YYYY-MM-DD, YYYY-MM or YYYY)")


def parse_open_weights(text: str) -> bool:
    """true/false, yes/no, 1/0 (any case).

    >>> parse_open_weights("False"), parse_open_weights("yes")
    (False, True)
    """
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"{text!r} is not true or false")


def safe_link(text: str) -> str:
    """``text`` when it is an http(s) address with a host and no space or control character;
    ValueError otherwise (a ``javascript:`` or ``data:`` link would run or load when clicked).

    >>> safe_link("https://arxiv.org/abs/2303.08774")
    'https://arxiv.org/abs/2303.08774'
    >>> safe_link("javascript:alert(1)")
    Traceback (most recent call last):
    ValueError: 'javascript:alert(1)' is not an http or https address
    """
    # a bidi or other invisible format character would make the link read as another one
    if any(c.isspace() or not c.isprintable() for c in text):
        raise ValueError(f"{text!r} holds a space, a control or an invisible character")
    try:
        parts = urlsplit(text)
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r} is not an http or https address")
    return text


def _text(value: str) -> str:
    if len(value) > MAX_TEXT:
        raise ValueError(f"is longer than {MAX_TEXT} characters")
    return value


_PARSERS = {
    "parameters": parse_parameters,
    "release_date": parse_release_date,
    "open_weights": parse_open_weights,
    "family": _text,
    "link": safe_link,
}


def parse_models(text: str, source: str = MODELS_FILE) -> ModelInfo:
    """The rows of a models.csv's ``text``; ``source`` names it in the problems.

    >>> info = parse_models("model,parameters,open_weights\\na,7B,true\\nb,lots,false\\n")
    >>> info.frame[["model", "parameters", "open_weights"]].values.tolist()
    [['a', 7000000000.0, True]]
    >>> info.problems
    ["models.csv line 3, field parameters: 'lots' is not a count (a number, optionally with K, M, B or T); row left out"]
    """  # noqa: E501
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip() for h in next(reader)]
    except (StopIteration, csv.Error):
        return ModelInfo(_empty(), [f"{source} line 1: no header line (model, …)"])
    unknown = [h for h in header if h not in MODEL_COLUMNS]
    if "model" not in header:
        return ModelInfo(
            _empty(), [f"{source} line 1, field model: the header has no model column"]
        )
    problems = [
        f"{source} line 1, field {name!r}: not a column of {MODELS_FILE} "
        f"({', '.join(MODEL_COLUMNS)}); ignored"
        for name in unknown
    ]
    rows: list[dict[str, object]] = []
    seen: dict[str, int] = {}
    line = 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            problems.append(f"{source} line {reader.line_num}: {error}; row left out")
            continue
        line = reader.line_num
        if not any(c.strip() for c in cells):
            continue
        if len(cells) > len(header):
            problems.append(
                f"{source} line {line}: {len(cells)} fields for {len(header)} columns; row left out"
            )
            continue
        record = dict(zip(header, [c.strip() for c in cells], strict=False))
        row, problem = _row(record, source, line)
        if problem:
            problems.append(problem)
            continue
        name = str(row["model"])
        if name in seen:
            problems.append(
                f"{source} line {line}, field model: {name!r} is already on line {seen[name]}; "
                "row left out"
            )
            continue
        seen[name] = line
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(MODEL_COLUMNS)) if rows else _empty()
    frame["parameters"] = pd.to_numeric(frame["parameters"], errors="coerce").astype("float64")
    frame["open_weights"] = frame["open_weights"].astype("boolean")
    return ModelInfo(frame.reset_index(drop=True), problems)


def _row(record: dict[str, str], source: str, line: int) -> tuple[dict[str, object], str]:
    """One parsed row, or the problem of its first bad field."""
    model = record.get("model", "")
    if not model:
        return {}, f"{source} line {line}, field model: empty; row left out"
    try:
        model = _text(model)
    except ValueError as error:
        return {}, f"{source} line {line}, field model: {error}; row left out"
    row: dict[str, object] = {"model": model}
    for name, parse in _PARSERS.items():
        value = record.get(name, "")
        if not value:
            row[name] = None
            continue
        try:
            row[name] = parse(value)
        except ValueError as error:
            return {}, f"{source} line {line}, field {name}: {error}; row left out"
    return row, ""


def read_models(store: Path) -> ModelInfo:
    """The models.csv in the store folder ``store``: empty, with no problem, when there is none;
    one problem when it cannot be read as UTF-8 text."""
    path = Path(store) / MODELS_FILE
    if not path.is_file():
        return ModelInfo(_empty(), [])
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        return ModelInfo(_empty(), [f"{path}: cannot be read as UTF-8 text ({error})"])
    return parse_models(text, str(path))


def format_parameters(value: object) -> str:
    """A parameter count as a board shows it: ``7B``, ``1.5T``, ``350M``; empty when unknown.

    >>> format_parameters(7e9), format_parameters(1.5e12), format_parameters(float("nan"))
    ('7B', '1.5T', '')
    """
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    number = float(value)  # type: ignore[arg-type]
    for suffix in ("T", "B", "M", "K"):
        if number >= _SUFFIX[suffix]:
            return f"{number / _SUFFIX[suffix]:.4g}{suffix}"
    return f"{number:.4g}"


def filter_models(
    teachers: Sequence[str],
    models: pd.DataFrame,
    *,
    search: str = "",
    families: Sequence[str] = (),
    open_weights: bool | None = None,
    parameters: tuple[float | None, float | None] = (None, None),
) -> list[bool]:
    """Which of ``teachers`` pass the board's filters: ``search`` a case-insensitive substring
    of the name; ``families`` (any of them; none = no filter); ``open_weights`` True/False (None
    = no filter); ``parameters`` a (low, high) count range, either end open. A filter on a fact
    leaves out the teachers whose fact is unknown.

    >>> models = pd.DataFrame({"model": ["a-7b", "b"], "parameters": [7e9, None],
    ...     "family": ["X", "Y"], "open_weights": pd.array([True, False], dtype="boolean")})
    >>> filter_models(["a-7b", "b", "c"], models, search="7B")
    [True, False, False]
    >>> filter_models(["a-7b", "b", "c"], models, open_weights=False)
    [False, True, False]
    >>> filter_models(["a-7b", "b", "c"], models, parameters=(1e9, None))
    [True, False, False]
    """
    facts = models.set_index("model") if not models.empty else pd.DataFrame()
    needle = search.casefold().strip()
    low, high = parameters
    keep = []
    for teacher in teachers:
        row = facts.loc[teacher] if teacher in facts.index else pd.Series(dtype=object)
        ok = not needle or needle in str(teacher).casefold()
        if families:
            ok = ok and row.get("family") in set(families)
        if open_weights is not None:
            value = row.get("open_weights")
            ok = ok and value is not None and value is not pd.NA and bool(value) is open_weights
        if low is not None or high is not None:
            count = row.get("parameters")
            known = count is not None and not pd.isna(count)
            ok = (
                ok
                and known
                and (low is None or float(count) >= low)
                and (high is None or float(count) <= high)
            )
        keep.append(bool(ok))
    return keep


def with_facts(numbers: pd.DataFrame, models: pd.DataFrame, keep: Sequence[str]) -> pd.DataFrame:
    """The board's numbers as exported: the rows of the teachers in ``keep`` (the ones the
    filters leave), each with its facts from models.csv as the file holds them (``parameters``
    a plain count) in the last columns; unchanged columns when there are no facts.

    >>> numbers = pd.DataFrame({"teacher": ["a", "b"], "fotu": [0.1, 0.2]})
    >>> models = pd.DataFrame({"model": ["a"], "parameters": [7e9], "family": ["X"]})
    >>> with_facts(numbers, models, ["a"]).values.tolist()
    [['a', 0.1, 7000000000.0, 'X']]
    """
    out = numbers[numbers["teacher"].astype(str).isin(set(keep))]
    if not models.empty:
        out = out.merge(models.rename(columns={"model": "teacher"}), on="teacher", how="left")
    return out.reset_index(drop=True)


def with_model_columns(
    shown: pd.DataFrame, models: pd.DataFrame, columns: Sequence[str]
) -> pd.DataFrame:
    """``shown`` (the Leaderboard's rows) with the chosen facts of models.csv after the
    teacher, headed by :data:`DETAIL_LABELS`, as text cells: an em dash where the fact is
    unknown (the app's mark for a missing value), an empty link cell; text from the file with
    its bidi controls shown escaped, as teacher names are.

    >>> shown = pd.DataFrame({"teacher": ["a", "b"], "FOTU": ["0.1", "0.2"]})
    >>> models = pd.DataFrame({"model": ["a"], "parameters": [7e9], "open_weights": [True]})
    >>> with_model_columns(shown, models, ["parameters", "open_weights"]).values.tolist()
    [['a', '7B', 'yes', '0.1'], ['b', '—', '—', '0.2']]
    """
    from legival_core.text.safe_text import visible_bidi

    if not columns:
        return shown
    facts = models.set_index("model")
    out = shown.copy()
    for position, name in enumerate(columns, start=1):
        values = out["teacher"].map(facts[name]) if not facts.empty else pd.Series(dtype=object)
        if name == "parameters":
            cells = values.map(lambda v: format_parameters(v) or "—")
        elif name == "open_weights":
            cells = values.map(lambda v: "—" if pd.isna(v) else "yes" if v else "no")
        elif name == "link":  # an empty cell, not a link to "—"
            cells = values.map(lambda v: "" if pd.isna(v) else str(v))
        else:
            cells = values.map(lambda v: "—" if pd.isna(v) else visible_bidi(v))
        out.insert(position, DETAIL_LABELS[name], cells.to_numpy())
    return out
