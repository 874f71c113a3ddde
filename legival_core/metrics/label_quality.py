"""How far the step segmenters and the backtracking labelers can be trusted: measured against
hand labels, and the stored result the app, the static site and the LaTeX table read.

Two hand-labelled samples ship in ``tests/fixtures/`` (each with a ``.md`` saying how it was
drawn and labelled), each split into a ``dev`` half (rules were developed on it) and a ``test``
half (scored once, at the end):

* ``segmentation_labels.jsonl``: 210 passages of CHAMP solutions split into steps by reading;
  a segmenter is scored by **boundary** precision, recall and F1 (:func:`boundary_counts`:
  a predicted step start is right when a reader put a step start at the same character);
* ``backtracking_labels.jsonl``: 602 steps labelled backtracking or not by reading, drawn in
  four strata; a labeler is scored by precision and recall of its flags
  (:func:`detector_scores`), also weighted by the inverse sampling rate of each stratum over
  the demo store's steps (:data:`DEMO_POPULATION`), and by agreement with the readers:
  Cohen's κ on the steps and Spearman's ρ on per-trace counts.

``bench/label_quality.py`` computes every number and writes them to
``legival_core/data/label_quality.json``; :func:`stored_quality` reads that file (no numpy or
model needed), :func:`backtracking_quality` and :func:`quality_note` give one labeler's numbers
and the sentence every Backtracking column and chart carries (docs/metrics/backtracking.md).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "DEMO_POPULATION",
    "HALVES",
    "QUALITY_FILE",
    "Counts",
    "LabelerQuality",
    "backtracking_quality",
    "backtracking_table",
    "boundary_counts",
    "detector_scores",
    "item_steps",
    "offline_item_flags",
    "quality_note",
    "read_jsonl",
    "segmentation_quality",
    "segmentation_table",
    "segmenter_scores",
    "store_labeler",
    "store_quality_note",
    "stored_quality",
]

#: The halves of every hand-labelled sample, in report order.
HALVES = ("dev", "test")
#: The stored measurements, inside the package (``legival_core/data/``).
QUALITY_FILE = "label_quality.json"

#: The demo store's steps as the backtracking sample's population, per stratum: (steps in
#: the population, steps drawn). ``lexical`` is a census (every step the lexical detector
#: flagged, 102 of the 2,865 Punkt steps of the demo store as committed before issue 38);
#: ``demo`` a simple random draw of 300 of the other 2,763. The ``wider_*`` strata (one step
#: per CHAMP solution outside the demo, drawn while two quotas filled) have no fixed per-step
#: rate and are left out of the weighted figures (reported unweighted, per stratum).
DEMO_POPULATION: dict[str, tuple[int, int]] = {"lexical": (102, 102), "demo": (2763, 300)}


# ---------------------------------------------------------------------------------------------
# Counting
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    """True positives, false positives and false negatives, with the rates they give (NaN
    when undefined: no prediction for precision, nothing to find for recall)."""

    tp: float
    fp: float
    fn: float

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else math.nan

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else math.nan

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r and not math.isnan(p + r) else math.nan

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn)

    def as_dict(self) -> dict[str, float | None]:
        """The counts and the rates, rounded for the stored file (NaN as None)."""
        return {
            "tp": _round(self.tp),
            "fp": _round(self.fp),
            "fn": _round(self.fn),
            "precision": _round(self.precision),
            "recall": _round(self.recall),
            "f1": _round(self.f1),
        }


def _round(value: float, digits: int = 4) -> float | None:
    if value is None or math.isnan(value):
        return None
    return round(float(value), digits) if value != int(value) else int(value)


def boundary_counts(predicted: Iterable[int], gold: Iterable[int]) -> Counts:
    """Step boundaries found (at the very character a reader put one), extra and missed.

    >>> c = boundary_counts([10, 25, 40], [10, 40, 55])
    >>> (c.tp, c.fp, c.fn), round(c.precision, 3), round(c.recall, 3)
    ((2, 1, 1), 0.667, 0.667)
    """
    found, wanted = set(predicted), set(gold)
    return Counts(len(found & wanted), len(found - wanted), len(wanted - found))


# ---------------------------------------------------------------------------------------------
# The hand labels
# ---------------------------------------------------------------------------------------------


def read_jsonl(path: str | Path, required: Sequence[str]) -> list[dict[str, Any]]:
    """The JSON objects of a hand-label file, one a line; a line that is not an object or
    lacks a ``required`` field raises one ``ValueError`` naming the file, the line and the
    field (the labels are the yardstick: a damaged file must not be scored in part)."""
    rows = []
    text = Path(path).read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}, line {number}: not JSON ({error.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}, line {number}: not a JSON object")
        missing = [field for field in required if field not in row]
        if missing:
            raise ValueError(f"{path}, line {number}: field {missing[0]!r} is missing")
        if row.get("half") not in HALVES:
            raise ValueError(f"{path}, line {number}: field 'half' is {row.get('half')!r}")
        rows.append(row)
    return rows


def segmenter_scores(passages: Sequence[Mapping[str, Any]], mode: str) -> dict[str, Counts]:
    """Boundary counts of the segmenter ``mode`` on each half of the hand-segmented passages
    (a passage's predicted boundaries: the starts of its steps after the first)."""
    from legival_core.text.segment import split_steps

    scores = {half: Counts(0, 0, 0) for half in HALVES}
    for passage in passages:
        predicted = [step.start for step in split_steps(str(passage["text"]), mode)[1:]]
        gold = [int(b) for b in passage["boundaries"]]
        scores[passage["half"]] += boundary_counts(predicted, gold)
    return scores


def item_steps(item: Mapping[str, Any]) -> tuple[list[str], int]:
    """A hand-labelled item as a labeler sees it: the steps before, the labelled step and the
    one after, with the labelled step's 1-based number among them."""
    before = [str(s) for s in item["before"]]
    return [*before, str(item["text"]), *(str(s) for s in item["after"])], len(before) + 1


def offline_item_flags(
    items: Sequence[Mapping[str, Any]],
    detector: Callable[[Sequence[str], str], list[int]],
    family: str = "math",
) -> list[bool]:
    """Whether ``detector`` (an offline labeler: steps, family -> flagged numbers) flags each
    item's labelled step, given the item's context."""
    flags = []
    for item in items:
        steps, number = item_steps(item)
        flags.append(number in detector(steps, family))
    return flags


# ---------------------------------------------------------------------------------------------
# Scores of a labeler
# ---------------------------------------------------------------------------------------------


def _weights(items: Sequence[Mapping[str, Any]]) -> list[float]:
    """Inverse sampling rate of each item's stratum over the demo population (0: outside)."""
    weights = []
    for item in items:
        population = DEMO_POPULATION.get(str(item.get("stratum")))
        weights.append(population[0] / population[1] if population else 0.0)
    return weights


def _counts(labels: Sequence[int], flags: Sequence[bool], weights: Sequence[float]) -> Counts:
    tp = sum(w for y, f, w in zip(labels, flags, weights, strict=True) if y and f)
    fp = sum(w for y, f, w in zip(labels, flags, weights, strict=True) if not y and f)
    fn = sum(w for y, f, w in zip(labels, flags, weights, strict=True) if y and not f)
    return Counts(tp, fp, fn)


#: Resamples of the bootstrap intervals of :func:`detector_scores` (by trace, seeded).
BOOTSTRAP_RESAMPLES = 1000


def _intervals(
    traces: Sequence[str],
    labels: Sequence[int],
    flags: Sequence[bool],
    weights: Sequence[float],
    seed: int = 38,
) -> dict[str, list[float | None]]:
    """95% percentile intervals of precision and recall, plain and weighted, from
    :data:`BOOTSTRAP_RESAMPLES` resamples of the traces (a trace's steps stay together)."""
    import numpy as np

    ids = sorted(set(traces))
    index = {t: i for i, t in enumerate(ids)}
    # Per trace: tp, fp, fn, then the same weighted.
    sums = np.zeros((len(ids), 6))
    for trace, label, flag, weight in zip(traces, labels, flags, weights, strict=True):
        row = sums[index[trace]]
        kind = 0 if label and flag else 1 if flag else 2 if label else None
        if kind is not None:
            row[kind] += 1
            row[3 + kind] += weight
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, len(ids), size=(BOOTSTRAP_RESAMPLES, len(ids)))
    totals = sums[drawn].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = {
            "precision": totals[:, 0] / (totals[:, 0] + totals[:, 1]),
            "recall": totals[:, 0] / (totals[:, 0] + totals[:, 2]),
            "weighted_precision": totals[:, 3] / (totals[:, 3] + totals[:, 4]),
            "weighted_recall": totals[:, 3] / (totals[:, 3] + totals[:, 5]),
        }
    out: dict[str, list[float | None]] = {}
    for name, values in rates.items():
        finite = values[np.isfinite(values)]
        out[name] = (
            [_round(float(np.percentile(finite, 2.5))), _round(float(np.percentile(finite, 97.5)))]
            if len(finite)
            else [None, None]
        )
    return out


def detector_scores(
    items: Sequence[Mapping[str, Any]], flags: Sequence[bool | None]
) -> dict[str, dict[str, Any]]:
    """Per half: how a labeler's ``flags`` (one per item; None = no valid answer, counted as
    not flagged) agree with the hand labels.

    * ``counts``: tp, fp, fn, precision, recall, F1 over every item of the half;
    * ``weighted``: the same over the demo store's steps as a population, each item weighted
      by its stratum's inverse sampling rate (:data:`DEMO_POPULATION`; census 1, the random
      draw 2,763 / 300);
    * ``strata``: the unweighted counts of each stratum;
    * ``kappa``: Cohen's κ between flags and labels on the steps;
    * ``rho``: Spearman's ρ between per-trace counts of flagged and of labelled steps (over
      the traces of the half, each counting only its labelled steps);
    * ``intervals``: 95% bootstrap intervals (resampling traces) of precision and recall,
      plain and weighted: the halves hold 16 and 19 backtracking steps, so the rates are
      coarse;
    * ``steps``, ``positives``, ``invalid`` (items with no valid answer).

    >>> items = [{"half": "dev", "stratum": "demo", "trace": t, "label": y}
    ...          for t, y in [("a", 1), ("a", 0), ("b", 1), ("c", 0)]]
    >>> dev = detector_scores(items, [True, False, False, True])["dev"]
    >>> dev["counts"]["precision"], dev["counts"]["recall"], dev["kappa"]
    (0.5, 0.5, 0)
    """
    from legival_core.metrics.backtracking import cohen_kappa, count_spearman

    if len(flags) != len(items):
        raise ValueError(f"{len(flags)} flags for {len(items)} items")
    out: dict[str, dict[str, Any]] = {}
    for half in HALVES:
        chosen = [i for i, item in enumerate(items) if item["half"] == half]
        if not chosen:
            continue
        labels = [int(items[i]["label"]) for i in chosen]
        found = [bool(flags[i]) for i in chosen]
        strata = sorted({str(items[i].get("stratum")) for i in chosen})
        per_trace: dict[str, list[int]] = {}
        for i, label, flag in zip(chosen, labels, found, strict=True):
            counts = per_trace.setdefault(str(items[i]["trace"]), [0, 0])
            counts[0] += label
            counts[1] += flag
        hand, machine = zip(*per_trace.values(), strict=True)
        weights = _weights([items[i] for i in chosen])
        out[half] = {
            "steps": len(chosen),
            "positives": sum(labels),
            "invalid": sum(flags[i] is None for i in chosen),
            "counts": _counts(labels, found, [1.0] * len(chosen)).as_dict(),
            "weighted": _counts(labels, found, weights).as_dict(),
            "intervals": _intervals(
                [str(items[i]["trace"]) for i in chosen], labels, found, weights
            ),
            "strata": {
                stratum: _counts(
                    labels,
                    found,
                    [float(items[i].get("stratum") == stratum) for i in chosen],
                ).as_dict()
                for stratum in strata
            },
            "kappa": _round(cohen_kappa(labels, [int(f) for f in found], binary=True)),
            "rho": _round(count_spearman(list(hand), list(machine))),
            "traces": len(per_trace),
        }
    return out


# ---------------------------------------------------------------------------------------------
# The stored measurements
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def stored_quality() -> dict[str, Any]:
    """The measurements of ``legival_core/data/label_quality.json`` ({} if it is missing)."""
    try:
        text = resources.files("legival_core").joinpath("data", QUALITY_FILE).read_text("utf-8")
    except FileNotFoundError:
        return {}
    return json.loads(text)


@dataclass(frozen=True)
class LabelerQuality:
    """A backtracking labeler's measured precision and recall on the hand-labelled steps."""

    labeler: str
    test_precision: float
    test_recall: float
    dev_precision: float
    dev_recall: float
    test_steps: int
    dev_steps: int
    weighted_test_precision: float
    weighted_test_recall: float


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def backtracking_quality(labeler: str | None) -> LabelerQuality | None:
    """The measured quality of ``labeler`` (a ``judgments`` labeler name), or None when it was
    not measured against the hand labels (another judge model, a human, a labeler of another
    store's own)."""
    if not labeler:
        return None
    measured = (stored_quality().get("backtracking") or {}).get("labelers") or {}
    entry = measured.get(str(labeler))
    if not entry or "test" not in entry or "dev" not in entry:
        return None
    test, dev = entry["test"], entry["dev"]
    return LabelerQuality(
        labeler=str(labeler),
        test_precision=_number(test["counts"]["precision"]),
        test_recall=_number(test["counts"]["recall"]),
        dev_precision=_number(dev["counts"]["precision"]),
        dev_recall=_number(dev["counts"]["recall"]),
        test_steps=int(test["steps"]),
        dev_steps=int(dev["steps"]),
        weighted_test_precision=_number(test["weighted"]["precision"]),
        weighted_test_recall=_number(test["weighted"]["recall"]),
    )


def _share(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.2f}"


def quality_note(labeler: str | None) -> str:
    """The sentence shown beside every Backtracking column and chart: which labeler gave the
    numbers and how well it finds hand-labelled backtracking (plain text, no markup).

    >>> quality_note("no-such-labeler")
    'Backtracking by no-such-labeler: not measured against the hand labels.'
    """
    name = labeler or "the stored labels"
    quality = backtracking_quality(labeler)
    if quality is None:
        return f"Backtracking by {name}: not measured against the hand labels."
    return (
        f"Backtracking by {name}: precision {_share(quality.test_precision)}, recall "
        f"{_share(quality.test_recall)} on {quality.test_steps} hand-labelled test steps "
        f"(dev: {_share(quality.dev_precision)}, {_share(quality.dev_recall)})."
    )


def segmentation_quality(mode: str | None) -> dict[str, Any] | None:
    """The stored boundary scores of the segmenter ``mode`` per half, or None."""
    modes = (stored_quality().get("segmentation") or {}).get("modes") or {}
    return modes.get(str(mode)) if mode else None


def store_labeler(manifest: Mapping[str, Any]) -> str | None:
    """The labeler behind a store's Backtracking numbers: the latest ``metrics`` record's
    ``primary_labeler``, else the recorded config's, else None (no metrics run yet).

    >>> store_labeler({"provenance": [{"stage": "metrics", "primary_labeler": "cues"}]})
    'cues'
    >>> store_labeler({"config": {"metrics": {"primary_labeler": "lexical"}}}), store_labeler({})
    ('lexical', None)
    """
    chosen = None
    config = manifest.get("config")
    if isinstance(config, Mapping) and isinstance(config.get("metrics"), Mapping):
        chosen = config["metrics"].get("primary_labeler")
    for record in manifest.get("provenance") or []:
        if isinstance(record, Mapping) and record.get("stage") == "metrics":
            chosen = record.get("primary_labeler") or chosen
    return str(chosen) if chosen else None


def store_quality_note(manifests: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> str:
    """:func:`quality_note` of the labeler behind one store's (a manifest) or several stores'
    (a list of manifests) Backtracking numbers, one sentence per distinct labeler.

    >>> store_quality_note([{}, {}])
    'Backtracking by the stored labels: not measured against the hand labels.'
    """
    several = manifests if isinstance(manifests, Sequence) else [manifests]
    labelers = list(dict.fromkeys(store_labeler(m) for m in several))
    return " ".join(quality_note(labeler) for labeler in labelers)


def backtracking_table(quality: Mapping[str, Any] | None = None) -> Any:
    """The stored backtracking measurements as a table (pandas), one row per (labeler, half):
    steps, backtracking steps, precision and recall with their 95% intervals, the same
    weighted over the demo store's steps, κ and ρ. A judge is scored on the items it
    answered (``steps``), with the share of invalid replies."""
    import pandas as pd

    quality = stored_quality() if quality is None else quality
    labelers = (quality.get("backtracking") or {}).get("labelers") or {}
    rows = []
    for labeler, entry in labelers.items():
        for half in HALVES:
            if half not in entry:
                continue
            scores = entry[half]
            intervals = scores.get("intervals") or {}

            def span(name: str, intervals: Mapping[str, Any] = intervals) -> str:
                low, high = (intervals.get(name) or [None, None])[:2]
                return "–" if low is None or high is None else f"{low:.2f}–{high:.2f}"

            rows.append(
                {
                    "labeler": labeler,
                    "half": half,
                    "steps": scores["steps"],
                    "backtracking steps": scores["positives"],
                    "invalid replies": scores.get("invalid", 0),
                    "precision": _number(scores["counts"]["precision"]),
                    "precision 95%": span("precision"),
                    "recall": _number(scores["counts"]["recall"]),
                    "recall 95%": span("recall"),
                    "weighted precision": _number(scores["weighted"]["precision"]),
                    "weighted recall": _number(scores["weighted"]["recall"]),
                    "κ": _number(scores["kappa"]),
                    "ρ (counts)": _number(scores["rho"]),
                }
            )
    return pd.DataFrame(rows)


def segmentation_table(quality: Mapping[str, Any] | None = None) -> Any:
    """The stored boundary scores as a table (pandas), one row per (segmenter, half), the
    second reader last."""
    import pandas as pd

    quality = stored_quality() if quality is None else quality
    segmentation = quality.get("segmentation") or {}
    entries = {**(segmentation.get("modes") or {})}
    if "second_reader" in segmentation:
        entries["second reader"] = segmentation["second_reader"]
    rows = [
        {
            "segmenter": name,
            "half": half,
            "boundaries found": scores["tp"],
            "extra": scores["fp"],
            "missed": scores["fn"],
            "precision": _number(scores["precision"]),
            "recall": _number(scores["recall"]),
            "F1": _number(scores["f1"]),
        }
        for name, entry in entries.items()
        for half, scores in entry.items()
        if half in HALVES
    ]
    return pd.DataFrame(rows)
