"""Polarity and hedges of an answer sentence: does it assert, deny, or not commit?

A reply to a yes/no question is often a statement: "There are no integer solutions." (No),
"4^545 + 545^4 is not a prime number." (No), "It is possible to tile the board." (Yes). Its
*polarity* is the parity of the negations that scope over the claim: each of "not", "n't",
"no" (as a determiner), "never", "none", "nothing", "cannot", "impossible", "false that",
"neither" flips it, so "It is false that there are no solutions" is positive. Idioms that
contain a negation word without negating ("not only … but", "no doubt", "no matter",
"no less than", "nothing but") do not count. A "≠" in the claim's predicate negates too ("x_n ≠ 0
for all n" as "x_n is never 0"), not one that ranges ("for any p ≠ q") or sits in its subject.

A question can give a claim more ways to be denied. For one that asks whether a limit exists
("Does a finite limit of a_n exist?"), a claim of divergence ("diverges", "is unbounded", "tends
to infinity", "grows without bound") denies it as "has no limit" would; for one that asks about
divergence itself, it affirms. For one that compares a quantity with a number ("Do we have
a_9000 > 30?"), a reply that compares with the same number answers by its direction: "a_9000 is
about 2.7, which is less than 30" is No, "a_9000 exceeds 30" is Yes (:class:`AskedClaim`).

A *hedge* commits to nothing: "Yes and no.", "Yes or no, I cannot tell.", "We cannot conclude
that …", "it is not possible to determine …", "3 (or possibly 239)", "perhaps", "maybe". A
hedged sentence states no answer at all, whatever words it contains.

Both work on words outside inline maths, by one regular-expression pass with fixed word lists
(no nested quantifiers: linear time on untrusted text).

Reference: Legi-Val (arXiv 2603.20508) §3 answer extraction; negation cues after NegEx
(Chapman et al., 2001, J. Biomed. Inform. 34(5)).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from legival_core.grading.lexicon import (
    CONCLUDING_CLAUSES,
    CONCLUDING_OPENERS,
    REASONS,
    REASONS_CONDITIONS_AND_CONCESSIONS,
    SUBORDINATORS,
    words_pattern,
)

__all__ = [
    "AskedClaim",
    "Polarity",
    "asked_claim",
    "asked_comparison",
    "clause_start",
    "compared_polarity",
    "divergence_count",
    "is_hedge",
    "main_clause",
    "negation_count",
    "polarity",
    "sentential_negation_count",
    "speaks_to",
    "unequal_count",
    "without_relative_clauses",
]

Polarity = Literal["yes", "no"]

# Idioms first (they must win over the single words they contain).
_NOT_NEGATING = (
    r"not\s+only|no\s+doubt|no\s+matter|no\s+less|no\s+more\s+than|not\s+less|nothing\s+but"
    r"|not\s+just|not\s+merely|no\s+other\s+than"
)
_NEGATION = (
    r"not|never|none|nothing|neither|nor|cannot|impossible|false\s+that|untrue\s+that"
    r"|wrong\s+that|incorrect\s+that|no|nobody|nowhere"
)
_WORDS = re.compile(
    rf"\b(?:(?P<idiom>{_NOT_NEGATING})|(?P<negation>{_NEGATION}))\b|(?P<contraction>n't)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:yes\s+(?:and|or)\s+no|no\s+(?:and|or)\s+yes|perhaps|maybe|probably"
    r"|(?:or|and|but|is|are|be)\s+possibly|possibly\s+(?:also|even)|would\s+require"
    r"|further\s+(?:analysis|investigation|work)\s+(?:is|would\s+be)\s+(?:needed|required)"
    r"|requires?\s+(?:further|more)\s+(?:\w+\s+)?(?:analysis|investigation|work|methods|study)"
    r"|might\s+be|may\s+or\s+may\s+not|not\s+sure|unsure|unclear|uncertain|undetermined"
    r"|cannot\s+(?:be\s+)?(?:tell|determined?|decided?|concluded?|conclude|say|know|be\s+sure)"
    r"|can't\s+(?:tell|determine|decide|conclude|say|know|be\s+sure)"
    r"|(?:is|was)\s+not\s+possible\s+to\s+(?:\w+\s+)?(?:determine|decide|conclude|say|tell)"
    r"|unable\s+to\s+(?:determine|decide|conclude|say|tell)"
    r"|not\s+(?:enough|sufficient)\s+information|(?:no|not\s+a)\s+simple\s+general"
    r"|either\s+way|depends\s+on\s+the|unlikely|conjectured?"
    r"|(?:analysis|approach|computation|calculation|investigation|proof)\s+(?:is|would\s+be)"
    r"\s+(?:needed|required)|(?:conclusion|answer)\s+cannot\s+be\s+(?:made|reached|drawn|given))\b",
    re.IGNORECASE,
)
_INLINE_MATHS = re.compile(r"\$[^$]*\$|\\\([^\\]*\\\)")


def _words_only(sentence: str) -> str:
    """``sentence`` with its inline maths blanked (same length: positions stay valid)."""
    return _INLINE_MATHS.sub(lambda m: " " * len(m.group()), sentence)


def clause_start(text: str, index: int) -> int:
    """Where the clause holding ``text[index]`` starts: just after the last ",", ";" or ":"
    before it (0 when there is none).

    >>> clause_start("Since x > 2, the answer is yes", 20)
    12
    """
    return max(text.rfind(mark, 0, index) for mark in ",;:") + 1


def negation_count(sentence: str) -> int:
    """How many negations the words of ``sentence`` hold (idioms that do not negate skipped).

    >>> negation_count("There are no integer solutions.")
    1
    >>> negation_count("It is false that there are no integer solutions.")
    2
    >>> negation_count("Not only can it be tiled, but in two ways.")
    0
    >>> negation_count("It is neither increasing nor decreasing.")
    1
    """
    count, neither = 0, False
    for match in _WORDS.finditer(_words_only(sentence)):
        word = match.group().lower()
        if match.lastgroup == "idiom" or (word == "nor" and neither):
            continue  # "neither A nor B" denies A and B once each: one negation, not two
        neither |= word == "neither"
        count += 1
    return count


_SENTENTIAL = frozenset({"not", "never", "cannot", "impossible"})

# A relative clause inside a subject ("the number of students who do not have a pet is …",
# "the integers that are not divisible by 3 are …"): from its pronoun to the main verb (the
# last copula of the words before the answer). A
# "that" after a word that takes a clause ("false that", "shows that") is no relative pronoun.
_RELATIVE = re.compile(
    r"\b(?:who|which|whose|whom|that)\b[^,;:]*(?=\b(?:is|are|was|were|equals)\b)",
    re.IGNORECASE,
)
_TAKES_A_CLAUSE = re.compile(
    r"\b(?:false|wrong|untrue|incorrect|true|so|shows?|showed|says?|said|know|knows|conclude|"
    r"concluded|clear|follows|means|note|find|found|see|get|proves?|proved|claim|claims)\s*$",
    re.IGNORECASE,
)


def without_relative_clauses(words: str) -> str:
    """``words`` with its relative clauses blanked (same length): their negations belong to
    the noun they describe, not to the claim.

    >>> without_relative_clauses("the students who do not have a pet are ")
    'the students                       are '
    >>> without_relative_clauses("it is false that the answer is ")
    'it is false that the answer is '
    """

    def blank(match: re.Match[str]) -> str:
        if match.group().lower().startswith("that") and _TAKES_A_CLAUSE.search(
            words, 0, match.start()
        ):
            return match.group()
        return " " * len(match.group())

    return _RELATIVE.sub(blank, words)


def sentential_negation_count(sentence: str) -> int:
    """Negations that deny a whole claim ("not", "n't", "never", "cannot", "false that"), not
    the determiners that belong to a noun phrase ("strings with no two 1s").

    >>> sentential_negation_count("The number of strings with no two 1s is 96.")
    0
    >>> sentential_negation_count("It is false that there are no solutions; it isn't 5.")
    2
    """
    count = 0
    for match in _WORDS.finditer(_words_only(sentence)):
        word = match.group().lower()
        if (
            match.lastgroup == "contraction"
            or word in _SENTENTIAL
            or " ".join(word.split()).endswith(" that")
        ):
            count += 1
    return count


_UNEQUAL = re.compile(r"≠|\\neq?(?![A-Za-z])")  # not "!=": "n!=120" is a factorial
# "for any p ≠ q", "with n ≠ 1", "integers m ≠ n such that …": the sign ranges over cases and
# negates no claim. "x_n is such that x_n ≠ 0" is a predicate, not a range.
_RANGING = re.compile(
    r"\b(?:for\s+(?:any|all|every|each|some)|with|where|(?<!is\s)(?<!are\s)such\s+that)\b[^.?]*$",
    re.IGNORECASE,
)


def unequal_count(text: str, start: int = 0) -> int:
    """How many "≠" signs (also ``\\neq``, ``\\ne``) of ``text`` deny a relation
    ("x_n ≠ 0 for all n" denies "x_n = 0"): those within 16 characters after a range ("for
    any p ≠ q", "with n ≠ 1") do not count, nor those before ``start``.

    >>> unequal_count("Must x_n≠0 for all n?"), unequal_count("For any p ≠ q, p + q > 2.")
    (1, 0)
    >>> unequal_count(r"The sequence is such that $x_n \\neq 0$ for all $n$.")
    1
    """
    return sum(
        not _RANGING.search(text, max(0, m.start() - 16), m.start())
        for m in _UNEQUAL.finditer(text, start)
    )


def is_hedge(sentence: str) -> bool:
    """True when ``sentence`` does not commit to an answer.

    >>> is_hedge("Yes and no."), is_hedge("We cannot conclude that there are none.")
    (True, True)
    >>> is_hedge("Hence the value is 3 (or possibly 239)."), is_hedge("So there are 3.")
    (True, False)
    """
    return _HEDGE.search(_words_only(sentence)) is not None


# Clause boundaries: a subordinate clause ("…, because …", "since …,") gives reasons, not the
# answer; a concluding one ("…, which means …", "implying that …") gives the answer.
#: Words that open a new clause without a comma before them: a reason or a conclusion.
_CLAUSE_OPENERS = (*REASONS, "as", "which", "implying", "meaning", "so", "hence", "thus")
_CLAUSE = re.compile(rf"[,;:]|\s(?=(?:{words_pattern(_CLAUSE_OPENERS)})\b)", re.IGNORECASE)
_SUBORDINATE = re.compile(rf"\s*(?:{words_pattern(SUBORDINATORS)})\b", re.IGNORECASE)
_CONCLUDING = re.compile(rf"\s*(?:{words_pattern(CONCLUDING_CLAUSES)})\b", re.IGNORECASE)
#: A clause that opens with its verb has no subject of its own: it is the predicate of the
#: main clause's subject, cut off by a phrase set off by commas ("x, with 1961 zeros in the
#: middle, is not a prime number").
_PREDICATE = re.compile(
    r"\s*(?:is|are|was|were|has|have|does|do|did|can|cannot|can't|could|must|will|would"
    r"|equals|exists|exist)\b",
    re.IGNORECASE,
)


#: A connective that opens a sentence and is set off by a comma ("Therefore, …", "In
#: conclusion, …"): the clause after it is the conclusion.
_OPENER = re.compile(rf"\s*(?:{words_pattern(CONCLUDING_OPENERS)})\s*[,;:]\s*", re.IGNORECASE)


def main_clause(sentence: str) -> str:
    """The clause of ``sentence`` that states its claim: the last concluding clause ("…,
    which means A is not greater than 0.1"), else the first clause that is not subordinate.

    >>> main_clause("There are no solutions, because 3 is not a square.")
    'There are no solutions,'
    >>> main_clause("Since 3 is odd, there are no solutions.")
    ' there are no solutions.'
    >>> main_clause("A is about 0.01, which means A is not greater than 0.1.")
    ' which means A is not greater than 0.1.'
    >>> main_clause("It has no limit because it grows, so it must exceed 3.")
    'It has no limit'
    >>> main_clause("Therefore, there do not exist such integers.")
    'Therefore, there do not exist such integers.'
    >>> main_clause("The sequence defined by a_1=1, a_(n+1)=a_n+1/a_n^2 has no limit.")
    'The sequence defined by a_1=1, a_(n+1)=a_n+1/a_n^2 has no limit.'
    >>> main_clause("The number x, with 1961 zeros in the middle, is not a prime number.")
    'The number x, is not a prime number.'
    >>> main_clause("The number x, as shown above, cannot be prime.")
    'The number x, cannot be prime.'
    """
    words = _words_only(sentence)
    listing = _letter_list_commas(words)
    cuts = [0] + [
        m.start() + (1 if m.group() in ",;:" else 0)
        for m in _CLAUSE.finditer(words)
        if not (m.group() == "," and (_between_relations(words, m.start()) or m.start() in listing))
    ]
    clauses = [sentence[a:b] for a, b in zip(cuts, [*cuts[1:], len(sentence)], strict=True)]
    clauses = [c for c in clauses if c.strip()]
    main: str | None = None
    concluding: str | None = None
    opener = ""
    for at, clause in enumerate(clauses):
        if _OPENER.fullmatch(clause):
            opener += clause  # "Therefore," alone states nothing: it opens the next clause
            continue
        if opener:
            clause, opener = opener + clause, ""
            concluding = clause
            continue
        if _CONCLUDING.match(clause):
            concluding = clause
        elif _SUBORDINATE.match(clause):
            if main is not None and not _predicate_follows(main, clauses[at + 1 :]):
                break  # "…, because …, so …": what follows the reason belongs to the reason
        elif main is None:
            main = clause
        elif _predicate_follows(main, [clause]):
            # the subject's own verb, after an aside: "x, with …, is not prime"
            main += clause
    return concluding or main or (clauses or [sentence])[0]


def _predicate_follows(subject: str, clauses: list[str]) -> bool:
    """True when ``subject`` has no verb of its own and the first of ``clauses`` that is not
    an aside opens with one (its predicate: "x, as shown above, cannot be prime")."""
    if _PREDICATE.search(subject):
        return False
    for clause in clauses:
        if _PREDICATE.match(clause):
            return True
        if not _SUBORDINATE.match(clause) and not clause.lstrip().lower().startswith("with"):
            return False
    return False


_RELATION_CHARS = frozenset("=<>≤≥≠^_")


def _between_relations(words: str, comma: int) -> bool:
    """True for the comma of "a_1=1, a_(n+1)=a_n+1/a_n^2": the words on both sides of it are
    undelimited maths (a relation, an index or a power), so it separates the givens of one
    definition, not two clauses."""
    # Each side read on at most 64 characters: linear however many commas a sentence has.
    before = words[max(0, comma - 64) : comma].rsplit(None, 1)[-1:] or [""]
    after = words[comma + 1 : comma + 65].split(None, 1)[:1] or [""]
    return all(any(c in _RELATION_CHARS for c in side[0]) for side in (before, after))


# "a, b, and c", "x, y, z": one-letter variables listed with commas (and "and"/"or").
_LETTER_LIST = re.compile(
    r"\b[A-Za-z]\b(?:[ \t]*,[ \t]*[A-Za-z]\b)+(?:[ \t]*,?[ \t]*(?:and|or)[ \t]+[A-Za-z]\b)?"
)


def _letter_list_commas(words: str) -> set[int]:
    """Positions of the commas inside lists of three or more one-letter variables ("a, b,
    and c", "x, y, z"): they list variables, not clauses. "for all n, a_n > 0" is no list."""
    commas: set[int] = set()
    for match in _LETTER_LIST.finditer(words):
        inside = [match.start() + i for i, c in enumerate(match.group()) if c == ","]
        joined = re.search(r"\b(?:and|or)\b", match.group()) is not None
        if len(inside) >= 2 or (inside and joined):
            commas.update(inside)
    return commas


# A claim of divergence in words: "diverges", "is divergent", "is unbounded", "tends to
# infinity", "grows without bound". Fixed words only (linear time).
_DIVERGENCE = re.compile(
    r"\b(?:diverg(?:es|ed|ent|ing|e)\b|unbounded\b"
    r"|(?:tends?|tending|goes|go|going|grows?|growing|increases?|increasing|approach(?:es)?"
    r"|approaching|rises?|rising)\s+(?:to\s+(?:\+\s*)?(?:infinity\b|∞)|without\s+(?:a\s+)?bound\b))",
    re.IGNORECASE,
)
#: Words that make "n tends to infinity" the limit process ("as n tends to infinity, …"), not
#: a claim that something diverges.
_PROCESS_WORDS = frozenset({"as", "when", "while", "if", "until", "once"})
_LIMIT_WORDS = re.compile(r"\b(?:limits?|converg\w*|diverg\w*)\b", re.IGNORECASE)


def divergence_count(claim: str) -> int:
    """How many claims of divergence the words of ``claim`` make ("diverges", "is unbounded",
    "tends to infinity", "grows without bound"); one that follows "as", "when", "if" … in its
    clause is the limit process ("as n tends to infinity"), not a claim.

    >>> divergence_count("The sequence diverges to infinity."), divergence_count("b_n is unbounded")
    (1, 1)
    >>> divergence_count("As n tends to infinity, the terms settle down to 2.")
    0
    """
    words = _words_only(claim)
    count = 0
    for match in _DIVERGENCE.finditer(words):
        before = words[max(0, match.start() - 64) : match.start()]
        for mark in ",;:":
            before = before.rsplit(mark, 1)[-1]
        if not _PROCESS_WORDS.intersection(w.lower() for w in before.split()[-5:]):
            count += 1
    return count


# A comparison with a number: words ("greater than", "at most", "exceeds") or signs (">", "≤",
# "\\geq"); "not"/"no" before the words turn it round ("no more than" is "at most"). The
# bound is a plain number or fraction; what follows it is checked by :func:`_bound_of`.
_UP = (
    r"\b(?:(?:greater|larger|bigger|more|higher)\s+than(?:\s+or\s+equal\s+to)?|exceed(?:s|ing)?"
    r"|above|at\s+least)\b|≥|>=|\\geq?(?:slant)?(?![A-Za-z])|\\gt(?![A-Za-z])|(?<![-=<>])>(?![=>])"
)
_DOWN = (
    r"\b(?:(?:less|smaller|lower|fewer)\s+than(?:\s+or\s+equal\s+to)?|below|at\s+most)\b"
    r"|≤|<=|\\leq?(?:slant)?(?![A-Za-z])|\\lt(?![A-Za-z])|(?<![<>])<(?![=<>-])"
)
_RELATION = rf"(?P<neg>\b(?:not|no)\s+)?(?:(?P<up>{_UP})|(?P<down>{_DOWN}))"
_ANY_COMPARISON = re.compile(_RELATION, re.IGNORECASE)
_COMPARISON = re.compile(
    _RELATION + r"[ \t]*(?:\$[ \t]*)?(?:\{[ \t]*)?(?P<bound>-?\d+(?:\.\d+)?(?:[ \t]*/[ \t]*\d+)?)",
    re.IGNORECASE,
)
#: A clause that gives a reason or a condition ("since a_n < 30 for small n"): its comparison
#: is not the claim.
_REASON = re.compile(
    rf"\W*(?:{words_pattern(REASONS_CONDITIONS_AND_CONCESSIONS)})\b", re.IGNORECASE
)
Comparison = tuple[Literal["up", "down"], Fraction]


def _bound_of(text: str, match: re.Match[str]) -> Fraction | None:
    """The number a comparison match compares with, or None when the number is only the start
    of an expression ("< 2^99", "> 30n", "< 30 + 1")."""
    end = match.end()
    following = text[end : end + 1]
    if following and (following.isalnum() or following in "^_/!({[\\"):
        return None
    rest = text[end : end + 16].lstrip(" \t$}")
    if rest[:1] and rest[0] in "+-*/^·×":
        return None
    try:
        return Fraction(match.group("bound").replace(" ", "").replace("\t", ""))
    except (ValueError, ZeroDivisionError):
        return None


def _direction(match: re.Match[str]) -> Literal["up", "down"]:
    """The direction of a comparison: up for "greater than" and its kin, down for "less than";
    a "not" or "no" before the words turns it."""
    up = match.group("up") is not None
    if match.group("neg"):
        up = not up
    return "up" if up else "down"


def asked_comparison(asking: str) -> Comparison | None:
    """The direction and number of the one comparison a question asks about ("Do we have
    a_9000>30?" -> up, 30), or None: no comparison, several, one with an expression, or a
    negated question (read by its negation instead).

    >>> asked_comparison("do we have a_9000>30?")
    ('up', Fraction(30, 1))
    >>> asked_comparison("is a less than 1/15?")
    ('down', Fraction(1, 15))
    >>> asked_comparison("is it possible to have a_100<2^99?") is None
    True
    """
    if sentential_negation_count(asking) % 2 or len(_ANY_COMPARISON.findall(asking)) != 1:
        return None
    match = _COMPARISON.search(asking)
    if match is None or (bound := _bound_of(asking, match)) is None:
        return None
    return _direction(match), bound


def compared_polarity(sentence: str, comparison: Comparison | None) -> Polarity | None:
    """How ``sentence`` answers a question that asks a ``comparison`` (:func:`asked_comparison`),
    read from its own comparison with the same number: Yes in the asked direction, No in the
    other, each turned by the negations of its clause ("It is false that …"). The comparison of
    the main clause counts; else the last one outside a clause of reasons ("… is about 2.7,
    which is less than 30"). None when the sentence compares nothing with that number.

    >>> asked = asked_comparison("do we have a_9000>30?")
    >>> compared_polarity("a_9000 is about 2.7, which is less than 30.", asked)
    'no'
    >>> compared_polarity("a_9000 is no less than 30.", asked)
    'yes'
    >>> compared_polarity("a_9000 is less than 40.", asked) is None
    True
    >>> compared_polarity("a_9000 is greater than 40.", asked)  # settles it: more than 30
    'yes'
    """
    return _compared(sentence, comparison)[1]


def _compared(sentence: str, comparison: Comparison | None) -> tuple[bool, Polarity | None]:
    """``(compares, answer)``: whether ``sentence``'s claim compares with a number, and how
    that answers the asked ``comparison`` (None when it settles nothing: "a_9000 > 5" for
    "Is a_9000 > 30?")."""
    if comparison is None:
        return False, None
    direction, bound = comparison
    bounded = [(m, b) for m in _COMPARISON.finditer(sentence) if (b := _bound_of(sentence, m))
               is not None]  # fmt: skip
    found = [m for m, b in bounded if b == bound]
    main = main_clause(sentence)
    main_start = max(sentence.find(main), 0)

    def in_main(match: re.Match[str]) -> bool:
        return main_start <= match.start() < main_start + len(main)

    if not found:
        # Another number in the claim: an answer only when it implies the asked comparison
        # or its opposite ("> 40" answers "> 30?" Yes; "< 20" answers it No; "> 5" neither).
        other = [(m, b) for m, b in bounded if in_main(m)]
        if not other:
            return False, None
        match, number = other[-1]
        clause = clause_start(sentence, match.start())
        up = (_direction(match) == "up") != (negation_count(sentence[clause : match.start()]) % 2)
        if up and number >= bound:
            return True, "yes" if direction == "up" else "no"
        if not up and number <= bound:
            return True, "no" if direction == "up" else "yes"
        return True, None
    in_main_clause = [m for m in found if in_main(m)]
    chosen: re.Match[str] | None = in_main_clause[-1] if in_main_clause else None
    if chosen is None:
        for match in reversed(found):
            clause = clause_start(sentence, match.start())
            if not _REASON.match(sentence, clause, match.start()):
                chosen = match
                break
    if chosen is None:
        return False, None
    clause = clause_start(sentence, chosen.start())
    negated = negation_count(sentence[clause : chosen.start()]) % 2 == 1
    return True, "yes" if (_direction(chosen) == direction) != negated else "no"


@dataclass(frozen=True)
class AskedClaim:
    """What a yes/no question's claim is about, beyond its words.

    Attributes:
        about_limit: the question asks whether a limit exists, or whether a sequence converges
            or diverges ("Does a finite limit of a_n exist?"): a claim of divergence in a reply
            is read against it.
        divergence: the question's own claim is divergence ("Does b_n diverge?").
        comparison: the direction and number of the comparison it asks about ("Do we have
            a_9000>30?": up, 30), read by :func:`compared_polarity`; None when it asks none.
    """

    about_limit: bool = False
    divergence: bool = False
    comparison: Comparison | None = None


def asked_claim(asking: str) -> AskedClaim:
    """The :class:`AskedClaim` of a question's asking sentence.

    >>> asked_claim("Does a finite limit of a_n exist, and if so, find it.")
    AskedClaim(about_limit=True, divergence=False, comparison=None)
    >>> asked_claim("Does the sequence b_n diverge?").divergence
    True
    """
    about_limit = _LIMIT_WORDS.search(_words_only(asking)) is not None
    divergence = about_limit and divergence_count(asking) % 2 == 1
    return AskedClaim(about_limit, divergence, asked_comparison(asking))


def speaks_to(sentence: str, asked: AskedClaim | None) -> bool:
    """True when ``sentence``'s claim is about what the question asks by a route its words
    need not share with the question: for a question about a limit, a claim of convergence,
    divergence or a limit ("converges to a finite limit" for "Does b_n diverge?"); for one
    that asks a comparison, a comparison with the same number.

    >>> speaks_to("The sequence grows without bound.", AskedClaim(about_limit=True))
    True
    >>> speaks_to("The sequence is increasing.", AskedClaim(about_limit=True))
    False
    """
    if asked is None:
        return False
    if compared_polarity(sentence, asked.comparison) is not None:
        return True
    if not asked.about_limit:
        return False
    claim = main_clause(sentence)
    return divergence_count(claim) > 0 or _LIMIT_WORDS.search(_words_only(claim)) is not None


def polarity(sentence: str, asked: AskedClaim | None = None) -> Polarity | None:
    """``"no"`` when an odd number of negations scope over the claim, else ``"yes"``; None for
    a hedge. A leading "Yes," / "No," decides by itself. With the question's ``asked`` claim
    about a limit, a claim of divergence counts as a negation (once more when the question
    itself asks about divergence); when it asks a comparison, a comparison of the sentence
    with the same number decides (:func:`compared_polarity`).

    >>> polarity("4^545 + 545^4 is not a prime number.")
    'no'
    >>> polarity("There do not exist such integers.")
    'no'
    >>> polarity(r"The sequence is such that $x_n \\neq 0$ for all $n$.")
    'no'
    >>> polarity("The least p + q with x_p = x_q and p ≠ q is 3.")  # "≠" of the subject
    'yes'
    >>> polarity("No doubt, it can.")
    'yes'
    >>> polarity("Yes or no, I cannot tell.") is None
    True
    >>> polarity("The sequence diverges to infinity.", AskedClaim(about_limit=True))
    'no'
    """
    if is_hedge(sentence):
        return None
    lead = re.match(r"\W*(yes|no)\b\s*[,.;:!—-]", sentence, re.IGNORECASE)
    if lead is not None:
        return "yes" if lead.group(1).lower() == "yes" else "no"
    if asked is not None and asked.comparison is not None:
        compares, compared = _compared(sentence, asked.comparison)
        if compares:
            return compared  # None: it compares with a number that settles nothing
    claim = main_clause(sentence)
    # "x_n ≠ 0 for all n" denies as "x_n is never 0" does: a "≠" of the claim is a negation,
    # one before its last copula belongs to the subject ("the least p + q with x_p ≠ x_q is 3").
    copulas = list(_COPULA_WORD.finditer(_words_only(claim)))
    predicate = copulas[-1].end() if copulas else 0
    negations = negation_count(claim) + unequal_count(claim, predicate)
    if asked is not None and asked.about_limit:
        # "diverges" denies "a limit exists"; it affirms "does it diverge?"
        negations += divergence_count(claim) + asked.divergence
    return "no" if negations % 2 else "yes"


_COPULA_WORD = re.compile(r"\b(?:is|are|was|were|be|equals)\b", re.IGNORECASE)
