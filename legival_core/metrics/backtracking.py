"""Offline backtracking detectors, and agreement between two labelings.

The published backtracking labels come from an LLM judge with a per-dataset rubric
(docs/metrics/backtracking.md). This module ships two cheap, offline counterparts:

* the **lexical** detector (labeler ``lexical``, :func:`lexical_backtracking`): a step counts
  as backtracking when it *opens* with one of the revision cues of its task family's rubric
  ("Wait", "Alternatively", "On second thought", "Let me re-check", and for maths also the
  bare "But" and "However"). All cue lists live in :data:`CUE_PHRASES`, one entry per family,
  so adding a family is one registry entry. Kept as it was, for comparison: on hand-labelled
  maths steps most of its flags are ordinary connectives ("However, since …").
* the **context-aware cues** (labeler ``cues``, :func:`context_backtracking`): a step is
  flagged for what it says, not for its first word: an interruption that opens it ("Wait",
  "Let me re-check", :data:`CONTEXT_OPENERS`), a plan dropped for another ("Instead, let's …",
  "a more systematic way"), a dead end or a revision said anywhere in it ("there is no
  straightforward method", "we have not yet shown", "in our previous solution"), or, from
  the step before it, a new plan right after a dead end and a look back right after a doubt.
  A contrastive "However, since …" alone is never a flag.

How well each one finds the backtracking of hand-labelled steps is measured by
:mod:`legival_core.metrics.label_quality` (docs/metrics/backtracking.md).

Agreement with the judge is reported as the published human check was: Spearman ρ on
per-trace counts, and Cohen's κ on the exact counts and on "any backtracking".

Reference: Legi-Val, arXiv 2603.20508 (backtracking rubric; human agreement ρ 0.72,
binary κ 0.71).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CONTEXT_OPENERS",
    "CUE_PHRASES",
    "FAMILY_ALIASES",
    "OFFLINE_LABELERS",
    "Agreement",
    "backtracking_agreement",
    "cohen_kappa",
    "context_backtracking",
    "context_reasons",
    "count_spearman",
    "cue_phrases",
    "lexical_backtracking",
    "offline_backtracking",
    "register_cues",
]

# Revision cues shared by every family's rubric: the reasoner interrupts itself.
_COMMON = (
    "wait",
    "hmm",
    "hold on",
    "oops",
    "actually",
    "alternatively",
    "on second thought",
    "on further reflection",
    "scratch that",
    "no, wait",
    "that's not right",
    "that is not right",
    "that's wrong",
    "that is wrong",
    "i made a mistake",
    "i made an error",
    "let me reconsider",
    "let me rethink",
    "let me start over",
    "let me try again",
    "let me try another",
    "let me try a different",
)

#: Cue phrases per task family, matched case-insensitively at the start of a step.
#: Lowercase; a plain apostrophe also matches a typographic one.
#: Science cues a lexical rule and the context-aware openers both use: a missed fact or sign.
_SCIENCE_SLIPS = (
    "i forgot",
    "i missed",
    "i overlooked",
    "i neglected",
    "i need to reconsider",
    "the sign is wrong",
)
#: Word-puzzle cues both lists use: a group that fails, a red herring, regrouping the rest.
_PUZZLE_CUES = (
    "that doesn't work",
    "that does not work",
    "that won't work",
    "that leaves",
    "red herring",
    "this is a red herring",
    "remaining words",
    "the remaining words",
    "let me regroup",
    "let me recount",
    "maybe the category",
    "maybe the theme",
)

CUE_PHRASES: dict[str, tuple[str, ...]] = {
    # Math rubric: revision cues, switching method, re-checking earlier work, another
    # approach after a failure (a minor arithmetic fix alone does not count, which a lexical
    # rule cannot see — one reason the judge stays the reference).
    "math": (
        *_COMMON,
        "but",
        "however",
        "going back",
        "let me go back",
        "let me re-check",
        "let me recheck",
        "let me check again",
        "let me double-check",
        "let me double check",
        "let me verify",
        "let me redo",
        "let me recompute",
        "let me recalculate",
        "another approach",
        "a different approach",
        "instead",
        "that doesn't work",
        "that does not work",
    ),
    # Science rubric: correcting constants or signs, a missed constraint, switching framework.
    "science": (
        *_COMMON,
        "however",
        "but wait",
        "correction",
        "let me correct",
        "let me recalculate",
        "let me recompute",
        "let me redo",
        "let me re-check",
        "let me recheck",
        *_SCIENCE_SLIPS,
        "instead",
    ),
    # Word-puzzle rubric: abandoning a proposed group, a red herring, recomputing the
    # remaining words, changing a category's theme.
    "puzzles": (
        *_COMMON,
        "however",
        "but",
        *_PUZZLE_CUES,
        "instead",
    ),
}

#: Task names that map onto a rubric family.
FAMILY_ALIASES: dict[str, str] = {
    "gsm8k": "math",
    "champ": "math",
    "gpqa": "science",
    "connections": "puzzles",
}

# Leading decoration a step may carry before its first word: Markdown emphasis, bullets,
# quotes, brackets and list numbers such as "3." or "(b)".
_LEAD = r"^(?:[\s*_#>\-•\"'“‘(\[]|\d{1,3}[.)]\s|\(?[a-z]\)\s)*"


def register_cues(family: str, phrases: Iterable[str]) -> None:
    """Add (or replace) a family's cue phrases.

    >>> register_cues("logic", ["wait", "contradiction"])
    >>> lexical_backtracking(["All men are mortal.", "Contradiction: no."], family="logic")
    [2]
    >>> del CUE_PHRASES["logic"]; _pattern.cache_clear()
    """
    cleaned = tuple(dict.fromkeys(p.strip().lower() for p in phrases if p.strip()))
    if not cleaned:
        raise ValueError(f"no cue phrases given for family {family!r}")
    CUE_PHRASES[family] = cleaned
    _pattern.cache_clear()


def cue_phrases(family: str) -> tuple[str, ...]:
    """The cue phrases of a family (aliases such as ``gpqa`` → ``science`` resolved)."""
    name = FAMILY_ALIASES.get(family, family)
    try:
        return CUE_PHRASES[name]
    except KeyError:
        known = sorted([*CUE_PHRASES, *FAMILY_ALIASES])
        raise ValueError(f"no backtracking cues for family {family!r}; known: {known}") from None


@functools.lru_cache(maxsize=32)
def _pattern(family: str) -> re.Pattern[str]:
    return _opening_phrases(cue_phrases(family))


def _opening_phrases(phrases: Sequence[str]) -> re.Pattern[str]:
    """A pattern matching a text that opens (after list marks and emphasis) with a phrase."""
    # Longest phrases first, so "but wait" wins over "but"; \b stops "but" matching "butter".
    ordered = sorted(phrases, key=len, reverse=True)
    alternatives = "|".join(r"\s+".join(map(re.escape, p.split())) for p in ordered)
    return re.compile(rf"{_LEAD}(?:{alternatives})\b", re.IGNORECASE)


def lexical_backtracking(steps: Sequence[object], family: str = "math") -> list[int]:
    """1-based numbers of the steps that open with a backtracking cue of ``family``.

    Args:
        steps: step texts (or :class:`legival_core.text.segment.Step` objects), in order.
        family: ``math``, ``science``, ``puzzles`` or an alias (``gpqa``, ``connections``…).

    Returns:
        Step numbers as an LLM judge would report them (first step = 1).

    >>> lexical_backtracking(["x = 2.", "Wait, x = 3.", "Butter is 3.", "**Hmm.** No."])
    [2, 4]
    """
    pattern = _pattern(FAMILY_ALIASES.get(family, family))
    flagged = []
    for number, step in enumerate(steps, start=1):
        if pattern.match(_step_text(step, number)):
            flagged.append(number)
    return flagged


# ---------------------------------------------------------------- context-aware cues

# Interruptions shared by every family: the reasoner stops and turns back on itself. Unlike
# the lexical list, no bare connective ("but", "however", "instead", "alternatively"): those
# carry an argument forward far more often than they revise it.
_CONTEXT_COMMON = (
    "wait",
    "hmm",
    "hmmm",
    "hold on",
    "oops",
    "actually",
    "on second thought",
    "on further reflection",
    "scratch that",
    "no, wait",
    "but wait",
    "that's not right",
    "that is not right",
    "that's wrong",
    "that is wrong",
    "correction",
    "going back",
    *(
        f"{lead} {verb}"
        for lead in ("let me", "let's", "let us")
        for verb in (
            "reconsider",
            "rethink",
            "start over",
            "try again",
            "re-check",
            "recheck",
            "double-check",
            "double check",
            "check again",
            "go back",
            "redo",
            "recompute",
            "recalculate",
            "correct",
            "re-examine",
            "reexamine",
        )
    ),
)

#: Phrases that make a step backtracking when they *open* it, per family (lowercase). The
#: families' own revision cues of the lexical lists, less the bare connectives.
CONTEXT_OPENERS: dict[str, tuple[str, ...]] = {
    "math": _CONTEXT_COMMON,
    "science": (
        *_CONTEXT_COMMON,
        *_SCIENCE_SLIPS,
    ),
    "puzzles": (
        *_CONTEXT_COMMON,
        *_PUZZLE_CUES,
    ),
}

_WORDS = re.IGNORECASE
#: "Instead, let's …", "Instead we …": the plan in hand is dropped for another.
_INSTEAD_PLAN = re.compile(_LEAD + r"instead\s*,?\s*(?:let'?s|let\s+us|we|i)\b", _WORDS)
#: Another line of attack named anywhere in the step ("a more systematic way", "a different
#: approach"): rubric 1 and 4 (abandon a plan, change approach).
_NEW_APPROACH = re.compile(
    r"\b(?:different|another|new|more\s+(?:systematic|straightforward|direct|efficient|careful))"
    r"\s+(?:approach|method|way|strategy|tack)\b",
    _WORDS,
)
#: A dead end, a doubt or a revision said anywhere in the step (rubric 1 to 3).
_DEAD_END = re.compile(
    r"\b(?:no\s+straightforward\s+(?:method|way|formula)"
    r"|(?:is|seems)\s+not\s+straightforward"
    r"|does(?:n't|\s+not)\s+(?:work|lead\s+anywhere|help)"
    r"|dead\s+end"
    r"|(?:is|was)\s+inconclusive"
    r"|not\s+yet\s+(?:shown|proved|proven|established)"
    r"|(?:need|needs|have|has)\s+to\s+be\s+careful"
    r"|(?:made|make)\s+(?:a|an)\s+(?:mistake|error)"
    r"|(?:our|my|the)\s+previous\s+(?:solution|answer|calculation|count|reasoning|result)"
    r"|(?:was|is)\s+(?:incorrect|wrong),?\s+(?:so|since|because)"
    r"|we\s+must\s+have\s+made"
    r"|incorrect\s+assumption"
    r"|(?:over|under)count(?:ed|ing)\b)",
    _WORDS,
)
#: Criticism of a solution the problem *gives* is not the solver turning on its own work.
_GIVEN_SOLUTION = re.compile(r"\b(?:given|provided|partial)\s+(?:partial\s+)?solution\b", _WORDS)
#: A step that takes up a new plan ("However, we can check …", "Let's try …"): a change of
#: approach when the step before it declared a dead end.
_NEXT_PLAN = re.compile(
    _LEAD + r"(?:however|but|instead|so|thus|therefore|let'?s|let\s+us|we\s+can|we\s+could|"
    r"a\s+more|another)\b.*?\b(?:try|use|check|look|approach|method|switch|go\s+back|start|"
    r"instead)\b",
    _WORDS | re.DOTALL,
)
#: Doubt about earlier work ("we need to be careful here", "not yet shown") …
_DOUBT = re.compile(
    r"\b(?:(?:need|needs|have|has)\s+to\s+be\s+careful|not\s+yet\s+(?:shown|proved|proven|"
    r"established)|double[- ]check|re-?check)\b",
    _WORDS,
)
#: … and a step right after it that looks back at that work (rubric 3, re-checking).
_LOOKS_BACK = re.compile(r"\b(?:above|earlier|previous|previously|again|back)\b", _WORDS)


@functools.lru_cache(maxsize=32)
def _opener_pattern(family: str) -> re.Pattern[str]:
    name = FAMILY_ALIASES.get(family, family)
    try:
        phrases = CONTEXT_OPENERS[name]
    except KeyError:
        known = sorted([*CONTEXT_OPENERS, *FAMILY_ALIASES])
        raise ValueError(f"no backtracking cues for family {family!r}; known: {known}") from None
    return _opening_phrases(phrases)


def _step_text(step: object, number: int) -> str:
    text = step.text if hasattr(step, "text") else step
    if not isinstance(text, str):
        raise TypeError(f"step {number} is {type(step).__name__}, not str or Step")
    return text.replace("’", "'")


def context_reasons(steps: Sequence[object], family: str = "math") -> dict[int, str]:
    """The steps :func:`context_backtracking` flags, each with the rule that flagged it.

    >>> context_reasons(["Try x = 1.", "That does not work.", "Let's try induction instead."])
    {2: "dead end or revision: 'does not work'", 3: 'a new plan right after the dead end of step 2'}
    """
    opener = _opener_pattern(family)
    texts = [_step_text(step, number) for number, step in enumerate(steps, start=1)]
    reasons: dict[int, str] = {}
    turned = [False] * len(texts)  # steps that declare a dead end or name another approach
    for index, text in enumerate(texts):
        number = index + 1
        dead = _DEAD_END.search(text)
        if dead and _GIVEN_SOLUTION.search(text):
            dead = None
        approach = _NEW_APPROACH.search(text)
        turned[index] = bool(dead or approach)
        if match := opener.match(text) or _INSTEAD_PLAN.match(text):
            reasons[number] = f"opens with a revision cue: {match.group().strip()!r}"
        elif dead:
            reasons[number] = f"dead end or revision: {dead.group()!r}"
        elif approach:
            reasons[number] = f"another approach: {approach.group()!r}"
        elif index and turned[index - 1] and _NEXT_PLAN.match(text):
            reasons[number] = f"a new plan right after the dead end of step {number - 1}"
        elif index and _DOUBT.search(texts[index - 1]) and _LOOKS_BACK.search(text):
            reasons[number] = f"looks back right after the doubt of step {number - 1}"
    return reasons


def context_backtracking(steps: Sequence[object], family: str = "math") -> list[int]:
    """1-based numbers of the steps the context-aware cues flag as backtracking.

    A step is flagged when it opens with an interruption of ``family``
    (:data:`CONTEXT_OPENERS`) or with "Instead, let's/we …"; when it names a dead end, a
    doubt or a revision anywhere (criticism of a *given* solution excepted) or another
    approach; when it takes up a new plan right after a step that declared a dead end; or when
    it looks back ("above", "again") right after a step that doubted earlier work. An opening
    "However" or "But" alone flags nothing.

    Args:
        steps: step texts (or :class:`legival_core.text.segment.Step` objects), in order.
        family: ``math``, ``science``, ``puzzles`` or an alias (``gpqa``, ``connections``…).

    >>> context_backtracking([
    ...     "However, since x > 0, the sum is positive.",       # a connective: no
    ...     "However, this is a non-trivial problem, and there's no straightforward method.",
    ...     "Instead, let's look for a pattern.",               # new plan after a dead end
    ...     "Wait, the pattern breaks at n = 4.",               # an interruption
    ... ])
    [2, 3, 4]
    """
    return sorted(context_reasons(steps, family))


#: The offline labelers by name (the ``judgments`` labeler and ``[judge] labelers`` value).
OFFLINE_LABELERS = {"lexical": lexical_backtracking, "cues": context_backtracking}


def offline_backtracking(labeler: str, steps: Sequence[object], family: str = "math") -> list[int]:
    """The steps the offline ``labeler`` (a key of :data:`OFFLINE_LABELERS`) flags.

    >>> offline_backtracking("lexical", ["x = 1.", "But x > 0."])
    [2]
    >>> offline_backtracking("cues", ["x = 1.", "But x > 0."])
    []
    """
    try:
        detector = OFFLINE_LABELERS[labeler]
    except KeyError:
        raise ValueError(
            f"unknown offline backtracking labeler {labeler!r}; choose one of "
            f"{sorted(OFFLINE_LABELERS)}"
        ) from None
    return detector(steps, family)


# ---------------------------------------------------------------------------- agreement


def _paired(a: Sequence[object], b: Sequence[object], what: str) -> tuple[np.ndarray, np.ndarray]:
    left, right = np.asarray(a), np.asarray(b)
    if left.ndim != 1 or right.ndim != 1:
        raise ValueError(f"{what}: expects two 1-D sequences")
    if left.shape != right.shape:
        raise ValueError(f"{what}: {left.size} labels against {right.size}; pair them per trace")
    return left, right


def count_spearman(counts_a: Sequence[float], counts_b: Sequence[float]) -> float:
    """Spearman ρ between two labelers' per-trace backtracking counts.

    ρ = Pearson correlation of the ranks (ties get their average rank). NaN when fewer than
    two traces or when either labeling is constant (no ranking to compare).

    Reference: Legi-Val, arXiv 2603.20508 (human check: ρ = 0.72 overall).

    >>> round(count_spearman([0, 1, 2, 5], [0, 2, 1, 7]), 12)  # ranks 1234 vs 1324: 1 − 6·2/60
    0.8
    """
    from scipy.stats import rankdata

    left, right = _paired(counts_a, counts_b, "count_spearman")
    if left.size < 2:
        return float("nan")
    rank_a, rank_b = rankdata(left.astype(float)), rankdata(right.astype(float))
    if np.ptp(rank_a) == 0 or np.ptp(rank_b) == 0:
        return float("nan")
    return float(np.corrcoef(rank_a, rank_b)[0, 1])


def cohen_kappa(
    labels_a: Sequence[object], labels_b: Sequence[object], *, binary: bool = False
) -> float:
    """Cohen's κ between two labelings of the same traces.

    κ = (p_o − p_e) / (1 − p_e), where, over the N items and the categories k seen in
    either labeling, p_o = Σ_k n_kk / N is the observed agreement and
    p_e = Σ_k (n_k· / N)(n_·k / N) the agreement expected by chance from the marginals.
    κ = 1 is perfect agreement, 0 chance level. NaN when p_e = 1 (both labelings put every
    item in one and the same category: κ is undefined).

    Args:
        labels_a, labels_b: per-trace labels (e.g. backtracking counts).
        binary: compare only "any backtracking" (label > 0) instead of exact labels.

    Reference: Cohen (1960); Legi-Val, arXiv 2603.20508 (binary κ = 0.71 against humans).

    >>> cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0])  # p_o = 3/4, p_e = ½·¼ + ½·¾ = ½ → ½
    0.5
    """
    left, right = _paired(labels_a, labels_b, "cohen_kappa")
    if left.size == 0:
        return float("nan")
    if binary:
        left, right = left.astype(float) > 0, right.astype(float) > 0
    categories, codes = np.unique(np.concatenate([left, right]), return_inverse=True)
    k, n = categories.size, left.size
    table = np.zeros((k, k))
    np.add.at(table, (codes[:n], codes[n:]), 1.0)
    observed = np.trace(table) / n
    expected = float(table.sum(axis=1) @ table.sum(axis=0)) / n**2
    if np.isclose(expected, 1.0):
        return float("nan")
    return float((observed - expected) / (1.0 - expected))


@dataclass(frozen=True)
class Agreement:
    """Agreement between two backtracking labelings of the same traces."""

    n_traces: int
    spearman: float
    kappa_exact: float
    kappa_binary: float


def backtracking_agreement(counts_a: Sequence[int], counts_b: Sequence[int]) -> Agreement:
    """ρ on counts, κ on exact counts and κ on any-backtracking, in one call.

    >>> backtracking_agreement([0, 2, 1, 0], [0, 3, 1, 0]).kappa_binary
    1.0
    """
    left, _ = _paired(counts_a, counts_b, "backtracking_agreement")
    return Agreement(
        n_traces=int(left.size),
        spearman=count_spearman(counts_a, counts_b),
        kappa_exact=cohen_kappa(counts_a, counts_b),
        kappa_binary=cohen_kappa(counts_a, counts_b, binary=True),
    )
