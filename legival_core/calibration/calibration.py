"""Calibration: synthetic traces with planted properties, their closed-form truths, and a report
of how well each metric and detector recovers them.

How far can a redundancy share, a backtracking share, a leak point or a FOTU be trusted? This
module plants each property at known steps of seeded synthetic traces (:func:`plant_traces`),
states what a perfect instrument would report (closed forms below), and compares that with
what the real pipeline stored (:func:`calibration_report`). ``precompute.calibrate`` builds the
store and runs the stages; this module is pure (numpy/pandas only).

Planted properties, each from template families split into a *development* and a *held-out*
half (:data:`TEMPLATE_SETS`; fixed here, no detector was tuned on either):

- redundancy: exact repeats of an earlier step, paraphrases (another template of the same
  family and numbers) and near-misses (the same template with other numbers and one noun
  swapped, so the meaning differs);
- backtracking: self-corrections in four styles ("Wait", "Let me re-check", "Hmm, no",
  "Actually") and decoys that only contain cue words ("Wait time", "Check the box",
  "Actually measured");
- answer leak: the gold stated at a known step, boxed, after "the answer is", in prose
  ("so there are 239 marbles"), as an equation, or restated ("239 is the number we need");
  in the frame of a question of its own (:data:`FRAMED_QUESTIONS`: "So the marbles cannot be
  shared …" for a yes/no, "at least one crate …" for a count, "N ≡ 239 (mod 1000)"), or
  with a trailing clause ("is 239, achieved when …"); and traces that never state it;
- transfer: a key fact at a known step; the rule-based student
  (``precompute.backends.rule_student``) is right exactly when its prefix holds the fact;
- decomposition: instance sets with known r_ctx, r_logic, E[W], VŌ and κ
  (:func:`planted_instances`).

Closed forms for the rule student on a trace with key step s and grid points k: y_k = 1 iff
k ≥ s; bins b_k = ⌈50k/m⌉; the curve is y linearly interpolated over bins 1..50 (constant beyond
the first and last observed bin); FOTU = its mean; hazard = b of the smallest grid k ≥ s;
SOTU = entropy of the hazard histogram / log 50 (docs/metrics/sotu.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "BACKTRACK_CUES",
    "BACKTRACK_DECOYS",
    "FRAMED_QUESTIONS",
    "LEAK_STYLES",
    "MARBLES_QUESTION",
    "REPORT_COLUMNS",
    "TEMPLATE_SETS",
    "PlantedItem",
    "PlantedTrace",
    "calibration_report",
    "closed_form_curve",
    "closed_form_fotu",
    "closed_form_hazard_bin",
    "closed_form_sotu",
    "plant_traces",
    "planted_decomposition",
    "planted_instances",
    "rule_student_correct",
]

N_BINS = 50
#: Template indices 0 and 1 of every family are the development set, 2 and 3 held out.
TEMPLATE_SETS = ("dev", "held_out")


def _set_of(template: int) -> str:
    return TEMPLATE_SETS[template // 2]


# --- templates ------------------------------------------------------------------------------
# Content families: four wordings of one statement ({a}, {b} numbers < 100) and a noun that a
# near-miss swaps for another (it occurs in every wording).
FAMILIES: dict[str, tuple[tuple[str, str], tuple[str, ...]]] = {
    "tank": (
        ("litres", "gallons"),
        (
            "The tank fills at {a} litres per minute and already holds {b} litres.",
            "Water flows into the tank at {a} litres each minute, on top of {b} litres inside.",
            "Every minute adds {a} litres to a tank that starts with {b} litres.",
            "Starting from {b} litres, the tank gains {a} litres every minute.",
        ),
    ),
    "garden": (
        ("tulips", "roses"),
        (
            "The garden has {a} rows of tulips with {b} bulbs in each row.",
            "In the garden, tulips grow in {a} rows of {b} bulbs.",
            "There are {a} tulip rows in the garden, each planted with {b} tulips.",
            "Each of the {a} garden rows holds {b} tulips.",
        ),
    ),
    "shop": (
        ("notebook", "stapler"),
        (
            "A notebook costs {a} dollars and a pen costs {b} dollars.",
            "The price of a notebook is {a} dollars, while a pen is {b} dollars.",
            "For {a} dollars you get a notebook, and a pen sells for {b} dollars.",
            "Pens go for {b} dollars each and the notebook for {a} dollars.",
        ),
    ),
    "class": (
        ("chess", "tennis"),
        (
            "There are {a} students in the class and {b} of them play chess.",
            "Of the {a} pupils in the class, {b} play chess.",
            "The class counts {a} students, {b} of whom are chess players.",
            "Chess is played by {b} of the {a} children in the class.",
        ),
    ),
    "bakery": (
        ("loaves", "cakes"),
        (
            "The bakery sells {a} loaves in the morning and {b} in the afternoon.",
            "In the morning the bakery sells {a} loaves, and {b} more after noon.",
            "Morning sales at the bakery reach {a} loaves; afternoon sales reach {b}.",
            "The baker hands over {a} loaves before noon and {b} loaves after it.",
        ),
    ),
    "library": (
        ("novels", "atlases"),
        (
            "The library lends {a} novels on Monday and {b} on Tuesday.",
            "On Monday {a} novels leave the library, and on Tuesday {b}.",
            "Monday sees {a} novels borrowed from the library, Tuesday {b}.",
            "Borrowers take out {a} library novels on Monday and {b} the next day.",
        ),
    ),
    "cyclist": (
        ("laps", "sprints"),
        (
            "The cyclist rides {a} laps before lunch and {b} laps after it.",
            "Before lunch the cyclist completes {a} laps, then {b} more afterwards.",
            "The rider does {a} laps in the morning session and {b} laps later.",
            "After lunch the cyclist adds {b} laps to the {a} ridden earlier.",
        ),
    ),
    "farm": (
        ("hens", "geese"),
        (
            "The farm keeps {a} hens and {b} ducks.",
            "On the farm there are {a} hens alongside {b} ducks.",
            "The farmer looks after {a} hens as well as {b} ducks.",
            "Ducks number {b} on the farm, and hens number {a}.",
        ),
    ),
    "parking": (
        ("levels", "ramps"),
        (
            "The car park has {a} levels with {b} spaces on each of its levels.",
            "Each of the {a} car park levels offers {b} spaces.",
            "There are {b} parking spaces on every one of the {a} levels.",
            "The garage is built on {a} levels, and every one of its levels fits {b} cars.",
        ),
    ),
    "orchard": (
        ("apple", "pear"),
        (
            "Each of the {a} apple trees in the orchard gives {b} kilograms of fruit.",
            "The orchard has {a} apple trees, and every tree yields {b} kilograms.",
            "From each of its {a} apple trees the orchard harvests {b} kilograms.",
            "A harvest of {b} kilograms comes from every one of the {a} apple trees.",
        ),
    ),
    "concert": (
        ("downstairs", "backstage"),
        (
            "The hall seats {a} people downstairs and {b} upstairs.",
            "Downstairs the hall holds {a} seats, upstairs {b}.",
            "There are {a} seats downstairs in the hall and {b} seats upstairs.",
            "Upstairs the hall fits {b} people, while downstairs fits {a}.",
        ),
    ),
    "ferry": (
        ("cars", "bikes"),
        (
            "The ferry carries {a} cars on each crossing and makes {b} crossings a day.",
            "Each ferry crossing takes {a} cars, with {b} crossings daily.",
            "With {b} crossings a day, the ferry moves {a} cars every time.",
            "Every day the ferry sails {b} times, loading {a} cars per trip.",
        ),
    ),
}

#: Self-corrections by style: (development wording, held-out wording); {a} right, {b} wrong.
BACKTRACK_CUES: dict[str, tuple[str, str]] = {
    "wait": (
        "Wait, that's wrong: the subtotal is {a}, not {b}.",
        "Wait, I slipped there, so the subtotal should be {a} rather than {b}.",
    ),
    "recheck": (
        "Let me re-check the subtotal: it is {a}, not {b}.",
        "Let me recheck that sum, since {b} looks off; it comes to {a}.",
    ),
    "hmm": (
        "Hmm, no — the subtotal is {a}, not {b}.",
        "Hmm, that cannot be right, and the subtotal must be {a} instead of {b}.",
    ),
    "actually": (
        "Actually, the subtotal is {a}, not {b}.",
        "Actually, I misread the table, so the subtotal is {a} and not {b}.",
    ),
}

#: Decoys that merely contain cue words; they are not backtracking.
BACKTRACK_DECOYS: dict[str, tuple[str, str]] = {
    "wait_time": (
        "Wait time at the counter is {a} minutes per customer.",
        "Wait times at the clinic average {a} minutes.",
    ),
    "check_box": (
        "Check the box marked {a} before packing the crates.",
        "Check the box total on the form, which lists {a} items.",
    ),
    "actually_measured": (
        "Actually measured, the plank is {a} cm long.",
        "Actually measured lengths of the rope come to {a} metres.",
    ),
}

#: Ways of stating the gold {g}: (development wording, held-out wording). "none" never does.
LEAK_STYLES: dict[str, tuple[str, str]] = {
    "boxed": ("So the count is \\boxed{{{g}}}.", "This gives $\\boxed{{{g}}}$ marbles in total."),
    "answer_is": ("The answer is {g}.", "So the final answer is {g}."),
    "prose": ("So there are {g} marbles.", "That makes {g} marbles altogether."),
    "equation": ("Putting it together, x = {g}.", "Hence the total is N = {g}."),
    "restatement": ("{g} is the number we need.", "The count we are after is {g}."),
    # Prose read in the frame of the question (issue 23): a yes/no answered by a declarative,
    # a count by "at least one", a residue, a value with a trailing clause. Their questions
    # and golds are in FRAMED_QUESTIONS.
    "yes_no_statement": (
        "So the marbles cannot be shared equally among the crew.",
        "Hence there is no way to share the marbles equally among the crew.",
    ),
    "at_least_one": (
        "So at least one crate holds marbles.",
        "Therefore at least one of the crates must contain marbles.",
    ),
    "residue": (
        "So the number of marbles N ≡ {g} (mod 1000).",
        "Thus the count is congruent to {g} modulo 1000.",
    ),
    "trailing_clause": (
        "So the total is {g}, achieved when every crate is full.",
        "This gives {g} marbles, reached once every box is full.",
    ),
    "none": ("", ""),
}

#: The question every planted problem asks, unless its leak style has its own.
MARBLES_QUESTION = "How many marbles are in the crate?"
#: Leak styles with a question of their own: (question, gold; "{g}" is the drawn number).
FRAMED_QUESTIONS: dict[str, tuple[str, str]] = {
    "yes_no_statement": ("Can the marbles in the crate be shared equally among the crew?", "No"),
    "at_least_one": ("At least how many crates hold marbles?", "1"),
    "residue": ("What is the number of marbles in the crate mod 1000?", "{g}"),
}

_KEY_FACTS = (
    "The lid of the crate is stamped {code}.",
    "A label on the crate reads {code}.",
    "The crate carries the code {code} on its side.",
)

#: Synthetic teachers and where they put the key fact (share of the trace, low..high).
TEACHERS: dict[str, tuple[float, float]] = {
    "planted-early": (0.0, 0.35),
    "planted-even": (0.0, 1.0),
    "planted-late": (0.65, 1.0),
}


@dataclass(frozen=True)
class PlantedItem:
    """One planted sentence: its 0-based index, what it is and which template set wrote it."""

    index: int
    prop: str  # "redundancy", "backtracking", "leak", "key"
    case: str  # e.g. "repeat", "paraphrase", "near_miss", "wait", "wait_time", "prose"
    template_set: str  # "dev", "held_out" (or "all" where no split applies)
    positive: bool  # whether a perfect detector flags it


@dataclass(frozen=True)
class PlantedTrace:
    """A synthetic trace with its planted items (sentence indices are 0-based)."""

    trace_id: str
    problem_id: str
    teacher: str
    gold: str
    key_fact: str
    sentences: tuple[str, ...]
    items: tuple[PlantedItem, ...] = field(default=())
    #: What the problem asks (its leak style may have a question of its own).
    question: str = MARBLES_QUESTION

    @property
    def reasoning(self) -> str:
        return " ".join(self.sentences)

    def sentence_spans(self) -> list[tuple[int, int]]:
        """Character (start, end) of each sentence in :attr:`reasoning`."""
        spans, start = [], 0
        for sentence in self.sentences:
            spans.append((start, start + len(sentence)))
            start += len(sentence) + 1
        return spans

    def item(self, prop: str) -> PlantedItem | None:
        return next((i for i in self.items if i.prop == prop), None)


def _numbers(rng: np.random.Generator, count: int) -> list[int]:
    """``count`` distinct numbers in 2..98 (never a gold, which is ≥ 100, 1 or "No")."""
    return [int(x) for x in rng.choice(np.arange(2, 99), size=count, replace=False)]


def plant_traces(n_traces: int, seed: int = 0) -> list[PlantedTrace]:
    """Seeded synthetic traces, each with a key fact, a leak (or none), two redundancy items
    and two backtracking items (a cue and a decoy), between content sentences.

    Cases rotate with the trace index so every case and template set gets a share.

    >>> [t.teacher for t in plant_traces(3)]
    ['planted-early', 'planted-even', 'planted-late']
    >>> t = plant_traces(1, seed=3)[0]
    >>> t.sentences[t.item("key").index] == t.key_fact
    True
    """
    rng = np.random.default_rng(seed)
    traces = []
    family_names = list(FAMILIES)
    cues, decoys = list(BACKTRACK_CUES), list(BACKTRACK_DECOYS)
    leaks = list(LEAK_STYLES)
    redundancy_cases = ("repeat", "paraphrase", "near_miss")
    for number in range(n_traces):
        teacher = list(TEACHERS)[number % len(TEACHERS)]
        gold_number = str(int(rng.integers(100, 1000)))
        chosen = [family_names[i] for i in rng.permutation(len(family_names))[:6]]
        template_set = int(rng.integers(0, 2))  # one template set per trace's content
        body: list[tuple[str, PlantedItem | None]] = []
        # family, template, numbers and the body entry of each content sentence
        fillers: list[tuple[str, int, list[int], tuple[str, None]]] = []
        for name in chosen[:5]:
            template = 2 * template_set + int(rng.integers(0, 2))
            a, b = _numbers(rng, 2)
            entry = (FAMILIES[name][1][template].format(a=a, b=b), None)
            fillers.append((name, template, [a, b], entry))
            body.append(entry)
        # Two redundancy items, each after its source filler.
        for slot in range(2):
            case = redundancy_cases[(2 * number + slot) % 3]
            source = int(rng.integers(0, len(fillers)))
            name, template, (a, b), entry = fillers[source]
            swap, templates = FAMILIES[name]
            if case == "repeat":
                text = templates[template].format(a=a, b=b)
            elif case == "paraphrase":
                text = templates[template ^ 1].format(a=a, b=b)  # the other wording of its set
            else:
                c, d = _numbers(rng, 2)
                text = templates[template].format(a=c, b=d).replace(swap[0], swap[1])
            item = PlantedItem(-1, "redundancy", case, _set_of(template), case != "near_miss")
            # After its source, wherever earlier insertions have moved that sentence.
            where = next(i for i, e in enumerate(body) if e is entry)
            position = int(rng.integers(where + 1, len(body) + 1))
            body.insert(position, (text, item))
        # Backtracking: one cue and one decoy, anywhere after the first sentence.
        a, b, c = _numbers(rng, 3)
        cue = cues[number % len(cues)]
        decoy = decoys[number % len(decoys)]
        for case, wordings, positive, numbers in (
            (cue, BACKTRACK_CUES, True, {"a": a, "b": b}),
            (decoy, BACKTRACK_DECOYS, False, {"a": c}),
        ):
            variant = int(rng.integers(0, 2))
            text = wordings[case][variant].format(**numbers)
            item = PlantedItem(-1, "backtracking", case, TEMPLATE_SETS[variant], positive)
            body.insert(int(rng.integers(1, len(body) + 1)), (text, item))
        # The key fact, placed by the teacher's habit.
        code = "".join(rng.choice(list("BCDFGHJKLMNPQRSTVWXZ"), size=4))
        key_fact = _KEY_FACTS[number % len(_KEY_FACTS)].format(code=code)
        low, high = TEACHERS[teacher]
        position = int(
            np.clip(round(low * len(body) + rng.random() * (high - low) * len(body)), 0, len(body))
        )
        body.insert(position, (key_fact, PlantedItem(-1, "key", "key_fact", "all", True)))
        # The leak (or none), anywhere from the second sentence on.
        style = leaks[(number // 2) % len(leaks)]
        if style != "none":
            variant = int(rng.integers(0, 2))
            text = LEAK_STYLES[style][variant].format(g=gold_number)
            item = PlantedItem(-1, "leak", style, TEMPLATE_SETS[variant], True)
            body.insert(int(rng.integers(1, len(body) + 1)), (text, item))
        question, gold = FRAMED_QUESTIONS.get(style, (MARBLES_QUESTION, "{g}"))
        gold = gold.format(g=gold_number)
        sentences = tuple(text for text, _ in body)
        items = tuple(
            PlantedItem(index, i.prop, i.case, i.template_set, i.positive)
            for index, (_, i) in enumerate(body)
            if i is not None
        )
        if style == "none":
            items += (PlantedItem(-1, "leak", "none", "all", False),)
        problem_id = f"calib-{number:04d}"
        traces.append(
            PlantedTrace(
                trace_id=f"{problem_id}-{teacher}",
                problem_id=problem_id,
                teacher=teacher,
                gold=gold,
                key_fact=key_fact,
                sentences=sentences,
                items=items,
                question=question,
            )
        )
    return traces


# --- closed forms ---------------------------------------------------------------------------


def rule_student_correct(k: int, key_step: int) -> int:
    """The rule student's correctness at prefix size k: 1 iff the prefix holds the key step.

    >>> [rule_student_correct(k, 4) for k in (0, 3, 6, 9)]
    [0, 0, 1, 1]
    """
    return int(k >= key_step)


def closed_form_curve(m: int, key_step: int, ks: Sequence[int]) -> np.ndarray:
    """The rule student's curve over bins 1..50 for a trace of m steps, key fact at step s.

    Observed points: bin ⌈50k/m⌉ with value 1 iff k ≥ s, for the grid ks with k ≥ 1 (several
    k in one bin are averaged); other bins are linearly interpolated between observed bins and
    held constant beyond the first and last (docs/metrics/fotu.md).

    >>> curve = closed_form_curve(9, 4, [0, 3, 6, 9])
    >>> float(curve[16]), round(float(curve[25]), 4), float(curve[33]), float(curve[49])
    (0.0, 0.5294, 1.0, 1.0)
    """
    points: dict[int, list[int]] = {}
    for k in ks:
        if k >= 1:
            points.setdefault(-(-N_BINS * k // m), []).append(rule_student_correct(k, key_step))
    observed = sorted(points)
    values = [float(np.mean(points[b])) for b in observed]
    return np.interp(np.arange(1, N_BINS + 1), observed, values)


def closed_form_fotu(m: int, key_step: int, ks: Sequence[int]) -> float:
    """FOTU of the rule student: the mean of :func:`closed_form_curve` over the 50 bins.

    m = 9, s = 4, k ∈ {0, 3, 6, 9}: bins 17 (0), 34 (1), 50 (1); bins 1..16 are 0, bins
    17..33 rise as (b − 17)/17 (sum 136/17 = 8), bins 34..50 are 1 (17 bins): (8 + 17)/50.

    >>> closed_form_fotu(9, 4, [0, 3, 6, 9])
    0.5
    """
    return float(closed_form_curve(m, key_step, ks).mean())


def closed_form_hazard_bin(m: int, key_step: int, ks: Sequence[int]) -> int | None:
    """Bin ⌈50k/m⌉ of the smallest grid k ≥ 1 with k ≥ s (None when never solved).

    >>> closed_form_hazard_bin(9, 4, [0, 3, 6, 9]), closed_form_hazard_bin(9, 10, [0, 9])
    (34, None)
    """
    solved = [k for k in ks if k >= 1 and k >= key_step]
    return -(-N_BINS * min(solved) // m) if solved else None


def closed_form_sotu(hazard_bins: Iterable[int | None]) -> float:
    """Entropy of the histogram of hazard bins over 50 bins, divided by log 50.

    Never-solved traces (None) are left out. Two traces in bin 34 and two in bin 50:
    entropy log 2, so SOTU = log 2 / log 50.

    >>> round(closed_form_sotu([34, 34, 50, 50, None]), 6) == round(math.log(2) / math.log(50), 6)
    True
    """
    bins = [b for b in hazard_bins if b is not None]
    if not bins:
        return math.nan
    shares = np.bincount(bins, minlength=N_BINS + 1)[1:] / len(bins)
    shares = shares[shares > 0]
    return float(-(shares * np.log(shares)).sum() / math.log(N_BINS))


# --- decomposition ----------------------------------------------------------------------------


def planted_instances() -> pd.DataFrame:
    """Two models on 20 instances with workloads W = 1..5 (four each) and known terms.

    Instances i = 0..19, W_i = 1 + (i mod 5). Instances with i mod 5 = 0 are truncated (4 of
    20: r_ctx = 0.8); of the 16 completed, those with i mod 4 = 3 are wrong (4: r_logic =
    12/16 = 0.75). Model ``flat``: T_i = 50·W_i, so VŌ = 50, E[W] = 3, E[T] = 150, κ = 1,
    E0 = 1000·0.6/150 = 4. Model ``growing``: T_i = 50·W_i²/3, so VO_i = 50·W_i/3, VŌ = 50,
    E[T] = 50·E[W²]/3 = 50·11/3, κ = (550/3)/(3·50) = 11/9, E0 = 600/(550/3) = 36/11.

    >>> planted_instances().groupby("model")["tokens"].mean().round(4).to_dict()
    {'flat': 150.0, 'growing': 183.3333}
    """
    rows = []
    for model in ("flat", "growing"):
        for i in range(20):
            workload = 1 + i % 5
            truncated = i % 5 == 0
            tokens = 50.0 * workload if model == "flat" else 50.0 * workload**2 / 3
            rows.append(
                {
                    "model": model,
                    "benchmark": "planted",
                    "instance_id": str(i),
                    "correct": (not truncated) and i % 4 != 3,
                    "truncated": truncated,
                    "tokens": tokens,
                    "workload": float(workload),
                }
            )
    return pd.DataFrame(rows)


def planted_decomposition() -> dict[str, dict[str, float]]:
    """The closed-form terms of :func:`planted_instances` (see its docstring).

    >>> terms = planted_decomposition()["growing"]
    >>> round(terms["e0"], 6) == round(1000 * 0.8 * 0.75 / (50 * 11 / 3), 6)
    True
    """
    return {
        "flat": {
            "r_ctx": 0.8,
            "r_logic": 0.75,
            "mean_workload": 3.0,
            "vo": 50.0,
            "kappa": 1.0,
            "e0": 4.0,
        },
        "growing": {
            "r_ctx": 0.8,
            "r_logic": 0.75,
            "mean_workload": 3.0,
            "vo": 50.0,
            "kappa": 11 / 9,
            "e0": 36 / 11,
        },
    }


# --- the report -------------------------------------------------------------------------------

REPORT_COLUMNS = [
    "property",
    "measure",
    "template_set",
    "case",
    "n",
    "planted",
    "recovered",
    "bias",
    "max_error",
    "precision",
    "recall",
    "tolerance",
    "within_tolerance",
    "note",
]

#: Minimum recall the regression test holds each detector to, by (measure prefix, case).
MIN_RECALL: dict[tuple[str, str], float] = {
    ("minilm", "repeat"): 0.95,
    ("lexical", "wait"): 0.95,
    ("lexical", "recheck"): 0.95,
    ("lexical", "hmm"): 0.95,
    ("lexical", "actually"): 0.95,
}

#: (style, template set) pairs whose wording the answer layer claims to read
#: (legival_core.grading.answers: boxes, "the answer is", "there are X", "… is X", a closing
#: equation;
#: in the question's frame a concluding declarative for a yes/no, "at least one" for a count,
#: "≡ r (mod n)" / "congruent to r modulo n", "is X, achieved when …"); they are held to the
#: exact step. The held-out prose wordings "That makes X marbles altogether" and "This gives X
#: marbles, reached once …" have neither a copula nor "there are": measured, not claimed.
LEAK_STYLES_CLAIMED = frozenset(
    {(style, "dev") for style in ("boxed", "answer_is", "prose", "equation")}
    | {(style, "held_out") for style in ("boxed", "answer_is", "equation")}
    | {(style, "dev") for style in ("yes_no_statement", "at_least_one", "residue")}
    | {("trailing_clause", "dev")}
    | {(style, "held_out") for style in ("yes_no_statement", "at_least_one", "residue")}
)


def _row(**values: Any) -> dict[str, Any]:
    row = {column: None for column in REPORT_COLUMNS}
    row.update(values)
    return row


def step_of_char(step_ends: Sequence[int], position: int) -> int:
    """0-based index of the step whose span holds character ``position`` (ends are exclusive).

    >>> step_of_char([4, 10, 17], 5), step_of_char([4, 10, 17], 3)
    (1, 0)
    """
    return int(np.searchsorted(np.asarray(step_ends), position, side="right"))


def _steps_by_trace(steps: pd.DataFrame) -> dict[str, list[int]]:
    ordered = steps.sort_values(["trace_id", "step"])
    return {tid: g["end"].astype(int).tolist() for tid, g in ordered.groupby("trace_id")}


def _detector_rows(
    prop: str, measure: str, flags: pd.DataFrame, min_recall_key: str
) -> list[dict[str, Any]]:
    """Rows per (template set, case) and a summary per template set from item flags.

    ``flags`` has columns template_set, case, positive, flagged (one row per planted item or
    unplanted step). For a positive case: recovered = recall = flagged share; for a negative
    case: recovered = false-positive share. The "summary" row of each template set has
    precision TP/(TP+FP) and recall TP/P over the set's planted items (set "all": over every
    row, unplanted steps included).
    """
    rows = []
    for template_set, group in flags.groupby("template_set", sort=True):
        for case, items in group.groupby("case", sort=True):
            positive = bool(items["positive"].iloc[0])
            share = float(items["flagged"].mean())
            minimum = MIN_RECALL.get((min_recall_key, str(case)))
            rows.append(
                _row(
                    property=prop,
                    measure=measure,
                    template_set=template_set,
                    case=case,
                    n=len(items),
                    planted=1.0 if positive else 0.0,
                    recovered=share,
                    bias=share - (1.0 if positive else 0.0),
                    recall=share if positive else None,
                    tolerance=minimum,
                    within_tolerance=None if minimum is None else share >= minimum,
                    note="flagged share (recall)" if positive else "flagged share (false alarms)",
                )
            )
    # Summaries: each template set's planted items alone, then everything (unplanted steps too).
    for template_set in (*TEMPLATE_SETS, "all"):
        group = flags if template_set == "all" else flags[flags["template_set"] == template_set]
        tp = int((group["positive"] & group["flagged"]).sum())
        fp = int((~group["positive"] & group["flagged"]).sum())
        p = int(group["positive"].sum())
        rows.append(
            _row(
                property=prop,
                measure=measure,
                template_set=template_set,
                case="summary",
                n=len(group),
                precision=tp / (tp + fp) if tp + fp else None,
                recall=tp / p if p else None,
                note=f"{tp} true and {fp} false flags over {p} planted positives",
            )
        )
    return rows


def redundancy_flags(
    planted: Sequence[PlantedTrace], steps: pd.DataFrame, similarity: pd.DataFrame, tau: float
) -> pd.DataFrame:
    """One row per planted redundancy item and per unplanted step i ≥ 1: flagged iff r_i > τ.

    A planted sentence is matched to the step whose span holds its first character.

    >>> trace = PlantedTrace("t", "p", "x", "500", "K.", ("A b.", "C d.", "A b."),
    ...                      (PlantedItem(2, "redundancy", "repeat", "dev", True),))
    >>> steps = pd.DataFrame({"trace_id": "t", "step": [0, 1, 2], "end": [4, 9, 14]})
    >>> sims = pd.DataFrame({"trace_id": "t", "step": [0, 1, 2],
    ...                      "max_similarity": [None, 0.3, 1.0]})
    >>> redundancy_flags([trace], steps, sims, 0.8).values.tolist()
    [['dev', 'repeat', True, True], ['all', 'unplanted', False, False]]
    """
    sims = {
        (tid, int(s)): v
        for tid, s, v in similarity[["trace_id", "step", "max_similarity"]].itertuples(index=False)
    }

    def above_tau(trace_id: str, step: int) -> bool:
        value = sims.get((trace_id, step))
        return value is not None and not pd.isna(value) and float(value) > tau

    return _planted_flags(planted, steps, "redundancy", above_tau, first_unplanted=1)


def backtracking_flags(
    planted: Sequence[PlantedTrace], steps: pd.DataFrame, judgments: pd.DataFrame, labeler: str
) -> pd.DataFrame:
    """One row per planted cue/decoy and per unplanted step: flagged iff the labeler named it.

    A judgment that did not parse (``valid`` false) names no step.
    """
    mine = judgments[judgments["labeler"] == labeler]
    if "valid" in mine:
        mine = mine[mine["valid"].fillna(False).astype(bool)]
    named = {
        tid: {int(s) - 1 for s in (flagged if flagged is not None else [])}
        for tid, flagged in mine[["trace_id", "steps"]].itertuples(index=False)
    }

    def named_by_labeler(trace_id: str, step: int) -> bool:
        return step in named.get(trace_id, set())

    return _planted_flags(planted, steps, "backtracking", named_by_labeler, first_unplanted=0)


def _planted_flags(
    planted: Sequence[PlantedTrace],
    steps: pd.DataFrame,
    prop: str,
    is_flagged: Callable[[str, int], bool],
    first_unplanted: int,
) -> pd.DataFrame:
    """One row per planted ``prop`` item (at the step holding its first character) and per
    unplanted step from ``first_unplanted`` on, flagged by ``is_flagged(trace_id, step)``."""
    ends = _steps_by_trace(steps)
    rows = []
    for trace in planted:
        trace_ends = ends.get(trace.trace_id, [])
        spans = trace.sentence_spans()
        marked: set[int] = set()
        for item in trace.items:
            if item.prop != prop:
                continue
            step = step_of_char(trace_ends, spans[item.index][0])
            marked.add(step)
            flagged = is_flagged(trace.trace_id, step)
            rows.append((item.template_set, item.case, item.positive, flagged))
        for step in range(first_unplanted, len(trace_ends)):
            if step not in marked:
                rows.append(("all", "unplanted", False, is_flagged(trace.trace_id, step)))
    return pd.DataFrame(rows, columns=["template_set", "case", "positive", "flagged"])


def _segmentation_rows(planted: Sequence[PlantedTrace], steps: pd.DataFrame) -> list[dict]:
    ends = _steps_by_trace(steps)
    exact = [ends.get(t.trace_id) == [e for _, e in t.sentence_spans()] for t in planted]
    share = float(np.mean(exact)) if exact else math.nan
    return [
        _row(
            property="segmentation",
            measure="punkt steps = planted sentences",
            template_set="all",
            case="all",
            n=len(exact),
            planted=1.0,
            recovered=share,
            bias=share - 1.0,
            note="share of traces whose steps are exactly the planted sentences",
        )
    ]


def _leak_rows(
    planted: Sequence[PlantedTrace], steps: pd.DataFrame, transfer: pd.DataFrame, student: str
) -> list[dict[str, Any]]:
    ends = _steps_by_trace(steps)
    found = transfer[transfer["student"] == student].set_index("trace_id")["leak_k"]
    records = []
    for trace in planted:
        item = trace.item("leak")
        if item is None or trace.trace_id not in found.index:
            continue
        leak = found.loc[trace.trace_id]
        leak = None if pd.isna(leak) else int(leak)
        true_k = None
        if item.positive:
            true_k = (
                step_of_char(ends.get(trace.trace_id, []), trace.sentence_spans()[item.index][0])
                + 1
            )
        records.append((item.template_set, item.case, true_k, leak))
    frame = pd.DataFrame(records, columns=["template_set", "case", "true_k", "found_k"])
    # every row of this check measures the same thing
    leak_row = functools.partial(_row, property="leak", measure="answer layer leak step")
    rows = []
    for (template_set, case), group in frame.groupby(["template_set", "case"], sort=True):
        if case == "none":
            share = float(group["found_k"].notna().mean())
            rows.append(
                leak_row(
                    template_set=template_set,
                    case=case,
                    n=len(group),
                    planted=0.0,
                    recovered=share,
                    bias=share,
                    tolerance=0.0,
                    within_tolerance=share == 0.0,
                    note="share of no-leak traces with a leak found (false alarms)",
                )
            )
            continue
        hit = group["found_k"].notna()
        errors = (group.loc[hit, "found_k"] - group.loc[hit, "true_k"]).astype(float)
        exact = float((group["found_k"] == group["true_k"]).mean())
        claimed = (case, template_set) in LEAK_STYLES_CLAIMED
        rows.append(
            leak_row(
                template_set=template_set,
                case=case,
                n=len(group),
                planted=float(group["true_k"].mean()),
                recovered=float(group["found_k"].mean()) if hit.any() else None,
                bias=float(errors.mean()) if len(errors) else None,
                max_error=float(errors.abs().max()) if len(errors) else None,
                recall=exact,
                tolerance=0.0 if claimed else None,
                within_tolerance=(exact == 1.0) if claimed else None,
                note=f"exact step in {exact:.0%}; found at all in {float(hit.mean()):.0%}"
                + ("" if claimed else "; a wording the answer layer does not claim"),
            )
        )
    # Summaries per template set, then over everything (no-leak traces' false alarms too).
    for template_set in (*TEMPLATE_SETS, "all"):
        group = frame if template_set == "all" else frame[frame["template_set"] == template_set]
        leaking = group[group["case"] != "none"]
        exact = int((leaking["found_k"] == leaking["true_k"]).sum())
        flagged = int(group["found_k"].notna().sum())
        rows.append(
            leak_row(
                template_set=template_set,
                case="summary",
                n=len(group),
                precision=exact / flagged if flagged else None,
                recall=exact / len(leaking) if len(leaking) else None,
                note="precision: exact steps / leaks found; recall: exact / planted leaks",
            )
        )
    return rows


def _transfer_rows(
    planted: Sequence[PlantedTrace],
    steps: pd.DataFrame,
    rollouts: pd.DataFrame,
    transfer: pd.DataFrame,
    curves: pd.DataFrame,
    student: str,
    noisy_student: str | None,
    error_rate: float,
) -> list[dict[str, Any]]:
    ends = _steps_by_trace(steps)
    grids = (
        rollouts[rollouts["student"] == student]
        .groupby("trace_id")["k"]
        .apply(lambda ks: sorted(int(k) for k in ks))
        .to_dict()
    )
    mine = transfer[transfer["student"] == student].set_index("trace_id")
    truth = []
    for trace in planted:
        if trace.trace_id not in mine.index or trace.trace_id not in grids:
            continue
        trace_ends = ends[trace.trace_id]
        key = trace.item("key")
        if key is None:  # plant_traces gives every trace a key fact
            raise ValueError(f"planted trace {trace.trace_id} has no key fact")
        key_end = trace.sentence_spans()[key.index][1]
        # The key fact is in the prefix once a step ending at or after its end is included.
        key_step = next(k for k, end in enumerate(trace_ends, start=1) if end >= key_end)
        m, ks = len(trace_ends), grids[trace.trace_id]
        truth.append(
            {
                "trace_id": trace.trace_id,
                "teacher": trace.teacher,
                "fotu": closed_form_fotu(m, key_step, ks),
                "hazard": closed_form_hazard_bin(m, key_step, ks),
                "fotu_found": float(mine.loc[trace.trace_id, "fotu"]),
                "hazard_found": mine.loc[trace.trace_id, "hazard_bin"],
            }
        )
    frame = pd.DataFrame(truth)
    rows: list[dict[str, Any]] = []
    if frame.empty:
        return rows
    rows.append(
        _exact_row(
            f"FOTU ({student})",
            frame["fotu"],
            frame["fotu_found"],
            1e-9,
            "per trace: closed form vs trace_transfer.fotu",
        )
    )
    planted_bins, found_bins = frame["hazard"].astype(float), frame["hazard_found"].astype(float)
    rows.append(
        _exact_row(
            f"hazard bin ({student})",
            planted_bins,
            found_bins,
            0.0,
            "per trace: closed form vs trace_transfer.hazard_bin",
            # a bin the stage left empty is as wrong as it gets
            max_error=float((found_bins - planted_bins).abs().fillna(np.inf).max()),
        )
    )
    pooled = curves[
        (curves["profile"] == "paper") & (curves["dataset"] == "*") & (curves["student"] == student)
    ]
    sotu_found = pooled.groupby("teacher")["sotu"].first()
    sotu_true = frame.groupby("teacher")["hazard"].apply(lambda h: closed_form_sotu(h.tolist()))
    common = sotu_true.index.intersection(sotu_found.index)
    if len(common):
        rows.append(
            _exact_row(
                f"SOTU ({student})",
                sotu_true[common],
                sotu_found[common],
                1e-9,
                "per teacher: closed form vs transfer_curves.sotu",
            )
        )
    if noisy_student is not None:
        rows.extend(_noise_rows(frame, rollouts, transfer, student, noisy_student, error_rate))
    return rows


def _exact_row(
    measure: str,
    planted: pd.Series,
    recovered: pd.Series,
    tolerance: float,
    note: str,
    max_error: float | None = None,
) -> dict[str, Any]:
    """A transfer row comparing closed-form values with the recovered ones, pair by pair;
    ``max_error`` replaces the largest absolute difference where missing values must count."""
    diff = recovered - planted
    worst = float(diff.abs().max()) if max_error is None else max_error
    return _row(
        property="transfer",
        measure=measure,
        template_set="all",
        case="exact",
        n=len(planted),
        planted=float(planted.mean()),
        recovered=float(recovered.mean()),
        bias=float(diff.mean()),
        max_error=worst,
        tolerance=tolerance,
        within_tolerance=bool(worst <= tolerance),
        note=note,
    )


def _noise_rows(
    frame: pd.DataFrame,
    rollouts: pd.DataFrame,
    transfer: pd.DataFrame,
    student: str,
    noisy: str,
    error_rate: float,
) -> list[dict[str, Any]]:
    """The noisy student: its flip rate, and its FOTU against ε + (1 − 2ε)·FOTU_true."""
    key = ["trace_id", "k", "sample"]
    clean = rollouts[rollouts["student"] == student][[*key, "correct"]]
    other = rollouts[rollouts["student"] == noisy][[*key, "correct"]]
    both = clean.merge(other, on=key, suffixes=("", "_noisy"))
    flips = float((both["correct"] != both["correct_noisy"]).mean()) if len(both) else math.nan
    n = len(both)
    band = 3 * math.sqrt(error_rate * (1 - error_rate) / n) if n else math.nan
    rows = [
        _row(
            property="transfer",
            measure=f"flip rate ({noisy})",
            template_set="all",
            case="noisy",
            n=n,
            planted=error_rate,
            recovered=flips,
            bias=flips - error_rate,
            max_error=abs(flips - error_rate),
            tolerance=band,
            within_tolerance=bool(abs(flips - error_rate) <= band),
            note="share of rollouts where the noisy student differs; tolerance 3 binomial SE",
        )
    ]
    found = transfer[transfer["student"] == noisy].set_index("trace_id")["fotu"]
    joined = frame.join(found.rename("fotu_noisy"), on="trace_id").dropna(subset=["fotu_noisy"])
    if len(joined):
        expected = error_rate + (1 - 2 * error_rate) * joined["fotu"]
        diff = joined["fotu_noisy"] - expected
        tolerance = 3 * math.sqrt(error_rate * (1 - error_rate) / len(joined))
        rows.append(
            _row(
                property="transfer",
                measure=f"FOTU ({noisy})",
                template_set="all",
                case="noisy",
                n=len(joined),
                planted=float(expected.mean()),
                recovered=float(joined["fotu_noisy"].mean()),
                bias=float(diff.mean()),
                max_error=float(diff.abs().max()),
                tolerance=tolerance,
                within_tolerance=bool(abs(diff.mean()) <= tolerance),
                note="mean vs ε + (1 − 2ε)·FOTU_true; tolerance 3 SE on the mean",
            )
        )
    return rows


def _decomposition_rows(decomposed: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    truth = planted_decomposition()
    for model, terms in truth.items():
        found = decomposed[decomposed["model"] == model].iloc[0]
        for term, value in terms.items():
            error = float(found[term]) - value
            rows.append(
                _row(
                    property="decomposition",
                    measure=term,
                    template_set="all",
                    case=model,
                    n=int(found["n"]),
                    planted=value,
                    recovered=float(found[term]),
                    bias=error,
                    max_error=abs(error),
                    tolerance=1e-9,
                    within_tolerance=abs(error) <= 1e-9,
                    note="legival_core.metrics.decomposition.decompose on planted instances",
                )
            )
    return rows


def calibration_report(
    planted: Sequence[PlantedTrace],
    tables: Mapping[str, pd.DataFrame],
    *,
    student: str,
    noisy_student: str | None = None,
    error_rate: float = 0.0,
    thresholds: Sequence[float] = (0.8, 0.85),
    labelers: Sequence[str] = ("lexical",),
    decomposed: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Planted vs recovered for every property, as rows of :data:`REPORT_COLUMNS`.

    ``tables`` holds the store's ``steps``, ``similarity``, ``judgments``, ``rollouts``,
    ``trace_transfer`` and ``transfer_curves``. Metric rows: bias = mean(recovered − planted),
    max_error = max |recovered − planted|, tolerance = the largest error allowed. Detector
    rows: recovered = flagged share per case; the "all" row per template set carries
    precision = TP/(TP+FP) and recall = TP/P; tolerance there is the minimum recall the
    regression test demands (empty: reported, not enforced).
    """
    steps = tables["steps"]
    rows = _segmentation_rows(planted, steps)
    rows += _transfer_rows(
        planted,
        steps,
        tables["rollouts"],
        tables["trace_transfer"],
        tables["transfer_curves"],
        student,
        noisy_student,
        error_rate,
    )
    rows += _leak_rows(planted, steps, tables["trace_transfer"], student)
    for tau in thresholds:
        flags = redundancy_flags(planted, steps, tables["similarity"], tau)
        rows += _detector_rows("redundancy", f"minilm τ={tau:g}", flags, "minilm")
    for labeler in labelers:
        flags = backtracking_flags(planted, steps, tables["judgments"], labeler)
        rows += _detector_rows("backtracking", labeler, flags, labeler)
    if decomposed is not None:
        rows += _decomposition_rows(decomposed)
    report = pd.DataFrame(rows, columns=REPORT_COLUMNS)
    report["n"] = report["n"].astype("int64")
    for column in ("planted", "recovered", "bias", "max_error", "precision", "recall", "tolerance"):
        report[column] = pd.to_numeric(report[column], errors="coerce").astype("float64")
    report["within_tolerance"] = report["within_tolerance"].astype("boolean")
    return report


# --- views for the "Metric validity" page ------------------------------------------------------

#: Order in which properties are listed.
PROPERTY_ORDER = ("transfer", "leak", "redundancy", "backtracking", "decomposition", "segmentation")


def report_view(report: pd.DataFrame, prop: str | None = None) -> pd.DataFrame:
    """The report's rows of one property (all when None), in reading order.

    Rows sort by property (:data:`PROPERTY_ORDER`), measure, template set (dev, held-out,
    all) and case, with each measure's "summary" row last.

    >>> r = pd.DataFrame({"property": ["leak", "transfer"], "measure": ["x", "y"],
    ...                   "template_set": ["all", "all"], "case": ["none", "exact"]})
    >>> report_view(r)["property"].tolist(), report_view(r, "leak")["case"].tolist()
    (['transfer', 'leak'], ['none'])
    """
    rows = report if prop is None else report[report["property"] == prop]
    order = {name: i for i, name in enumerate(PROPERTY_ORDER)}
    sets = {name: i for i, name in enumerate((*TEMPLATE_SETS, "all"))}
    keys = pd.DataFrame(
        {
            "p": rows["property"].map(lambda p: order.get(p, len(order))),
            "m": rows["measure"],
            "s": rows["template_set"].map(lambda s: sets.get(s, len(sets))),
            "last": rows["case"] == "summary",
            "c": rows["case"],
        },
        index=rows.index,
    )
    return rows.loc[keys.sort_values(["p", "m", "s", "last", "c"]).index].reset_index(drop=True)


def detector_table(report: pd.DataFrame) -> pd.DataFrame:
    """Precision and recall of each detector, development vs held-out templates side by side.

    One row per (property, measure) from the "summary" rows: columns ``precision_dev``,
    ``recall_dev``, ``precision_held_out``, ``recall_held_out``, ``precision_all``,
    ``recall_all``.

    >>> r = pd.DataFrame({"property": ["leak"] * 2, "measure": ["m"] * 2,
    ...                   "template_set": ["dev", "held_out"], "case": ["summary"] * 2,
    ...                   "precision": [1.0, 0.5], "recall": [1.0, 0.75]})
    >>> detector_table(r).iloc[0].to_dict()["recall_held_out"]
    0.75
    """
    summary = report[report["case"] == "summary"]
    # Only the (property, measure) pairs the report has; a missing set stays empty (NaN).
    wide = summary.set_index(["property", "measure", "template_set"])[
        ["precision", "recall"]
    ].unstack("template_set")
    wide.columns = [f"{value}_{template_set}" for value, template_set in wide.columns]
    wanted = [
        f"{value}_{template_set}"
        for template_set in (*TEMPLATE_SETS, "all")
        for value in ("precision", "recall")
    ]
    return wide.reindex(columns=wanted).reset_index()
