"""Measure the segmenters and the backtracking labelers against the hand labels, and store the
numbers the app, the static site and the docs show (``legival_core/data/label_quality.json``).

    python bench/label_quality.py                      # print, and check the stored file
    python bench/label_quality.py --write              # (re)write the stored file
    python bench/label_quality.py --write \\
        --judge tests/fixtures/backtracking_judge_qwen2.5-coder-0.5b.jsonl
    python bench/label_quality.py --classifier-check   # + the MiniLM classifier, dev CV only
    python bench/label_quality.py --score FILE         # one judge's replies only, printed

What is measured (legival_core.metrics.label_quality):

* every segmenter of :data:`legival_core.text.segment.SEGMENTERS` on the 210 hand-segmented
  passages, boundary precision / recall / F1 per half, and the second reader against the
  settled labels;
* the offline backtracking labelers (``lexical``, ``cues``) on the 602 hand-labelled steps,
  precision / recall per half (also weighted over the demo store's steps), per stratum, κ on
  the steps and ρ on per-trace counts; the readers' own κ;
* each LLM judge whose replies ``bench/judge_hand_labels.py`` recorded (``--judge FILE``),
  parsed by the judge stage's own parser; a judge recorded earlier stays in the file;
* with ``--classifier-check``: a logistic regression over MiniLM step embeddings and the cue
  features, scored by 5-fold cross-validation by trace on the **dev half only** against the
  cue rules on the same folds: it is shipped only when it measures better there.

The ``dev`` halves are where the rules were developed; the ``test`` halves were scored once,
when the rules were final (docs/metrics/steps.md, docs/metrics/backtracking.md).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `python bench/x.py` puts bench/ on sys.path, not the repo root

FIXTURES = REPO / "tests" / "fixtures"
SEGMENTATION_LABELS = FIXTURES / "segmentation_labels.jsonl"
BACKTRACKING_LABELS = FIXTURES / "backtracking_labels.jsonl"
STORED = REPO / "legival_core" / "data" / "label_quality.json"
SEGMENTATION_FIELDS = ("passage_id", "half", "text", "boundaries", "second_reader_boundaries")
BACKTRACKING_FIELDS = (
    "item",
    "half",
    "stratum",
    "trace",
    "before",
    "text",
    "after",
    "label",
    "reader_1",
    "reader_2",
)
#: The labeler the pipeline uses by default (docs/metrics/backtracking.md, "Which labeler").
PRIMARY = "cues"


def segmentation_report() -> dict[str, Any]:
    """Boundary scores of every segmenter and of the second reader, per half."""
    from legival_core.metrics.label_quality import (
        HALVES,
        Counts,
        boundary_counts,
        read_jsonl,
        segmenter_scores,
    )
    from legival_core.text.segment import SEGMENTERS

    passages = read_jsonl(SEGMENTATION_LABELS, SEGMENTATION_FIELDS)
    reader = {half: Counts(0, 0, 0) for half in HALVES}
    for passage in passages:
        reader[passage["half"]] += boundary_counts(
            passage["second_reader_boundaries"], passage["boundaries"]
        )
    return {
        "labels": "tests/fixtures/segmentation_labels.jsonl",
        "passages": {h: sum(p["half"] == h for p in passages) for h in HALVES},
        "boundaries": {
            h: sum(len(p["boundaries"]) for p in passages if p["half"] == h) for h in HALVES
        },
        "modes": {
            mode: {half: c.as_dict() for half, c in segmenter_scores(passages, mode).items()}
            for mode in sorted(SEGMENTERS)
        },
        "second_reader": {half: c.as_dict() for half, c in reader.items()},
    }


def judge_flags(
    items: list[dict[str, Any]], path: Path
) -> tuple[str, list[dict[str, Any]], list[bool | None]]:
    """(labeler, the items it answered, their flags) from a file of recorded judge replies:
    each reply parsed by the judge stage's parser; an invalid reply (or an engine error) is
    None, counted as no flag. Items without a reply are left out (a run may stop part way)."""
    from legival_core.metrics.label_quality import item_steps
    from precompute.stages.judge import parse_verdict

    replies: dict[int, dict[str, Any]] = {}
    labelers = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if "item" not in row or "labeler" not in row:
            raise ValueError(f"{path}, line {number}: a reply needs 'item' and 'labeler'")
        replies[int(row["item"])] = row
        labelers.add(str(row["labeler"]))
    if len(labelers) != 1:
        raise ValueError(f"{path}: replies of {len(labelers)} labelers; one file per judge")
    answered = [item for item in items if int(item["item"]) in replies]
    flags: list[bool | None] = []
    for item in answered:
        reply = replies[int(item["item"])]
        if reply.get("raw") is None:
            flags.append(None)
            continue
        steps, number = item_steps(item)
        verdict = parse_verdict(str(reply["raw"]), len(steps))
        flags.append(number in verdict.steps if verdict.valid else None)
    return labelers.pop(), answered, flags


def backtracking_report(judges: list[Path]) -> dict[str, Any]:
    """Scores of the offline labelers and the recorded judges on the hand-labelled steps."""
    from legival_core.metrics.backtracking import OFFLINE_LABELERS, cohen_kappa
    from legival_core.metrics.label_quality import (
        DEMO_POPULATION,
        HALVES,
        detector_scores,
        offline_item_flags,
        read_jsonl,
    )

    items = read_jsonl(BACKTRACKING_LABELS, BACKTRACKING_FIELDS)
    labelers: dict[str, Any] = {}
    for name, detector in OFFLINE_LABELERS.items():
        labelers[name] = detector_scores(items, offline_item_flags(items, detector))
    previous = _stored().get("backtracking", {}).get("labelers", {})
    for name, entry in previous.items():
        if name.startswith("judge:"):
            labelers[name] = entry  # a judge recorded earlier keeps its numbers
    for path in judges:
        name, answered, flags = judge_flags(items, path)
        # Scored on the items it answered (a judge may have been run on one half only); the
        # offline labelers on the same items, for a like-for-like comparison.
        labelers[name] = {
            **detector_scores(answered, flags),
            "replies": str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path),
            "same_items": {
                offline: detector_scores(answered, offline_item_flags(answered, detector))
                for offline, detector in OFFLINE_LABELERS.items()
            },
        }
    readers = {
        half: cohen_kappa(
            [int(i["reader_1"]) for i in items if i["half"] == half],
            [int(i["reader_2"]) for i in items if i["half"] == half],
            binary=True,
        )
        for half in HALVES
    }
    every = cohen_kappa(
        [int(i["reader_1"]) for i in items], [int(i["reader_2"]) for i in items], binary=True
    )
    return {
        "labels": "tests/fixtures/backtracking_labels.jsonl",
        "steps": {h: sum(i["half"] == h for i in items) for h in HALVES},
        "positives": {h: sum(int(i["label"]) for i in items if i["half"] == h) for h in HALVES},
        "readers_kappa": {"all": round(every, 4), **{h: round(v, 4) for h, v in readers.items()}},
        "demo_population": {k: list(v) for k, v in DEMO_POPULATION.items()},
        "primary": PRIMARY,
        "labelers": labelers,
    }


def classifier_check() -> dict[str, Any]:
    """5-fold cross-validation by trace on the dev half: a logistic regression over MiniLM
    embeddings of the step and of the step before it, with the cue features, against the cue
    rules on the same items (the test half is not read)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    from legival_core.metrics.backtracking import context_reasons
    from legival_core.metrics.label_quality import Counts, item_steps, read_jsonl
    from legival_core.text.embedding import embed_sentences

    items = [i for i in read_jsonl(BACKTRACKING_LABELS, BACKTRACKING_FIELDS) if i["half"] == "dev"]
    kinds = ("opens with", "dead end", "another approach", "a new plan", "looks back")
    features, rules = [], []
    for item in items:
        steps, number = item_steps(item)
        reason = context_reasons(steps).get(number, "")
        rules.append(bool(reason))
        features.append([float(reason.startswith(kind)) for kind in kinds])
    step = embed_sentences([str(i["text"]) for i in items])
    before = embed_sentences([str(i["before"][-1]) if i["before"] else "" for i in items])
    x = np.hstack([step, step - before, np.asarray(features)])
    y = np.asarray([int(i["label"]) for i in items])
    groups = np.asarray([str(i["trace"]) for i in items])
    probability = np.zeros(len(y))
    for train, held in GroupKFold(5).split(x, y, groups):
        model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=5000)
        model.fit(x[train], y[train])
        probability[held] = model.predict_proba(x[held])[:, 1]

    def counts(flags: Any) -> dict[str, Any]:
        flags = np.asarray(flags, dtype=bool)
        return Counts(
            int((flags & (y == 1)).sum()),
            int((flags & (y == 0)).sum()),
            int((~flags & (y == 1)).sum()),
        ).as_dict()

    thresholds = {f"{t:.1f}": counts(probability >= t) for t in (0.3, 0.5, 0.7, 0.9)}
    best = max(thresholds.values(), key=lambda c: c["f1"] or 0.0)
    rule_counts = counts(rules)
    return {
        "half": "dev",
        "folds": "5-fold GroupKFold by trace",
        "features": "MiniLM embedding of the step, of the step minus the one before, "
        "and the five cue-rule kinds",
        "classifier": thresholds,
        "rules": rule_counts,
        "shipped": (best["f1"] or 0.0) > (rule_counts["f1"] or 0.0),
    }


def _stored() -> dict[str, Any]:
    return json.loads(STORED.read_text(encoding="utf-8")) if STORED.exists() else {}


def report(judges: list[Path], classifier: bool) -> dict[str, Any]:
    """Everything the stored file holds."""
    out = {
        "about": "Measured by bench/label_quality.py against the hand labels of tests/fixtures "
        "(docs/metrics/steps.md, docs/metrics/backtracking.md). dev: the half rules were "
        "developed on; test: scored once, when the rules were final.",
        "segmentation": segmentation_report(),
        "backtracking": backtracking_report(judges),
    }
    check = classifier_check() if classifier else _stored().get("classifier_check")
    if check is not None:
        out["classifier_check"] = check
    return out


def _line(name: str, entry: dict[str, Any]) -> str:
    def show(value: Any) -> str:
        return (
            "–"
            if value is None or (isinstance(value, float) and math.isnan(value))
            else (f"{value:.3f}" if isinstance(value, float) else str(value))
        )

    halves = []
    for half in ("dev", "test"):
        if half not in entry:
            continue
        counts = entry[half]["counts"] if "counts" in entry[half] else entry[half]
        extra = ""
        if "kappa" in entry[half]:
            weighted = entry[half]["weighted"]
            extra = (
                f" κ {show(entry[half]['kappa'])} ρ {show(entry[half]['rho'])}"
                f" | weighted P {show(weighted['precision'])} R {show(weighted['recall'])}"
            )
        halves.append(
            f"{half}: P {show(counts['precision'])} R {show(counts['recall'])} "
            f"F1 {show(counts['f1'])} (tp {counts['tp']}, fp {counts['fp']}, fn {counts['fn']})"
            + extra
        )
    return f"{name:28s} " + "  ||  ".join(halves)


def score_judge(path: Path) -> int:
    """Print the scores of one judge's recorded replies, beside the offline labelers on the
    same items (nothing is written: what ``bench/gpu_check.sh`` runs after its judge)."""
    from legival_core.metrics.backtracking import OFFLINE_LABELERS
    from legival_core.metrics.label_quality import (
        detector_scores,
        offline_item_flags,
        read_jsonl,
    )

    items = read_jsonl(BACKTRACKING_LABELS, BACKTRACKING_FIELDS)
    name, answered, flags = judge_flags(items, path)
    invalid = sum(flag is None for flag in flags)
    print(f"{name}: {len(answered)} items answered, {invalid} without a valid verdict")
    print(_line(name, detector_scores(answered, flags)))
    for offline, detector in OFFLINE_LABELERS.items():
        scores = detector_scores(answered, offline_item_flags(answered, detector))
        print(_line(f"{offline} (same items)", scores))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--write", action="store_true", help="rewrite the stored file")
    parser.add_argument("--judge", type=Path, action="append", default=[], help="judge replies")
    parser.add_argument("--classifier-check", action="store_true")
    parser.add_argument(
        "--score", type=Path, default=None, help="print one judge's scores from its replies"
    )
    args = parser.parse_args(argv)
    if args.score is not None:
        return score_judge(args.score)
    result = report(args.judge, args.classifier_check)
    for mode, entry in result["segmentation"]["modes"].items():
        print(_line(f"segmenter {mode}", entry))
    print(_line("second reader", result["segmentation"]["second_reader"]))
    for name, entry in result["backtracking"]["labelers"].items():
        print(_line(f"backtracking {name}", entry))
    if "classifier_check" in result:
        check = result["classifier_check"]
        print("classifier (dev CV):", json.dumps(check["classifier"]), "rules:", check["rules"])
    text = json.dumps(result, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if args.write:
        STORED.write_text(text, encoding="utf-8")
        print(f"wrote {STORED.relative_to(REPO)}")
        return 0
    if not STORED.exists() or STORED.read_text(encoding="utf-8") != text:
        print(f"{STORED.relative_to(REPO)} differs from these numbers; run with --write")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
