"""Polarity and hedges of an answer sentence: does it assert, deny, or not commit?

A reply to a yes/no question is often a statement: "There are no integer solutions." (No),
"4^545 + 545^4 is not a prime number." (No), "It is possible to tile the board." (Yes). Its
*polarity* is the parity of the negations that scope over the claim: each of "not", "n't",
"no" (as a determiner), "never", "none", "nothing", "cannot", "impossible", "false that",
"neither" flips it, so "It is false that there are no solutions" is positive. Idioms that
contain a negation word without negating ("not only … but", "no doubt", "no matter",
"no less than", "nothing but") do not count.

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
from typing import Literal

__all__ = [
    "Polarity",
    "is_hedge",
    "main_clause",
    "negation_count",
    "polarity",
    "sentential_negation_count",
]

Polarity = Literal["yes", "no"]

# Idioms first (they must win over the single words they contain).
_NOT_NEGATING = (
    r"not\s+only|no\s+doubt|no\s+matter|no\s+less|no\s+more\s+than|not\s+less|nothing\s+but"
    r"|not\s+just|not\s+merely|no\s+other\s+than"
)
_NEGATION = (
    r"not|never|none|nothing|neither|nor|cannot|impossible|false\s+that|untrue\s+that"
    r"|no|nobody|nowhere"
)
_WORDS = re.compile(
    rf"\b(?:(?P<idiom>{_NOT_NEGATING})|(?P<negation>{_NEGATION}))\b|(?P<contraction>n't)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:yes\s+(?:and|or)\s+no|no\s+(?:and|or)\s+yes|perhaps|maybe|probably"
    r"|(?:or|and|but|is|are|be)\s+possibly|possibly\s+(?:also|even)|would\s+require"
    r"|further\s+(?:analysis|investigation|work)\s+(?:is|would\s+be)\s+(?:needed|required)"
    r"|might\s+be|may\s+or\s+may\s+not|not\s+sure|unsure|unclear|uncertain|undetermined"
    r"|cannot\s+(?:be\s+)?(?:tell|determined?|decided?|concluded?|conclude|say|know|be\s+sure)"
    r"|can't\s+(?:tell|determine|decide|conclude|say|know|be\s+sure)"
    r"|(?:is|was)\s+not\s+possible\s+to\s+(?:\w+\s+)?(?:determine|decide|conclude|say|tell)"
    r"|unable\s+to\s+(?:determine|decide|conclude|say|tell)"
    r"|not\s+(?:enough|sufficient)\s+information|(?:no|not\s+a)\s+simple\s+general"
    r"|either\s+way|depends\s+on\s+the)\b",
    re.IGNORECASE,
)
_INLINE_MATHS = re.compile(r"\$[^$]*\$|\\\([^\\]*\\\)")


def _words_only(sentence: str) -> str:
    """``sentence`` with its inline maths blanked (same length: positions stay valid)."""
    return _INLINE_MATHS.sub(lambda m: " " * len(m.group()), sentence)


def negation_count(sentence: str) -> int:
    """How many negations the words of ``sentence`` hold (idioms that do not negate skipped).

    >>> negation_count("There are no integer solutions.")
    1
    >>> negation_count("It is false that there are no integer solutions.")
    2
    >>> negation_count("Not only can it be tiled, but in two ways.")
    0
    """
    return sum(match.lastgroup != "idiom" for match in _WORDS.finditer(_words_only(sentence)))


_SENTENTIAL = frozenset({"not", "never", "cannot", "impossible"})


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
_CLAUSE = re.compile(r"[,;:]|\s(?=(?:because|since|as|which|implying|meaning|so|hence|thus)\b)",
                     re.IGNORECASE)  # fmt: skip
_SUBORDINATE = re.compile(
    r"\s*(?:because|since|as|which|where|given|if|when|whereas|while|although|though|for)\b",
    re.IGNORECASE,
)
_CONCLUDING = re.compile(
    r"\s*(?:which\s+(?:means|implies|shows)|implying|meaning|so|hence|thus|therefore)\b",
    re.IGNORECASE,
)


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
    """
    words = _words_only(sentence)
    cuts = [0] + [m.start() + (1 if m.group() in ",;:" else 0) for m in _CLAUSE.finditer(words)]
    clauses = [sentence[a:b] for a, b in zip(cuts, [*cuts[1:], len(sentence)], strict=True)]
    clauses = [c for c in clauses if c.strip()]
    main: str | None = None
    concluding: str | None = None
    for clause in clauses:
        if _CONCLUDING.match(clause):
            concluding = clause
        elif _SUBORDINATE.match(clause):
            if main is not None:
                break  # "…, because …, so …": what follows the reason belongs to the reason
        elif main is None:
            main = clause
    return concluding or main or (clauses or [sentence])[0]


def polarity(sentence: str) -> Polarity | None:
    """``"no"`` when an odd number of negations scope over the claim, else ``"yes"``; None for
    a hedge. A leading "Yes," / "No," decides by itself.

    >>> polarity("4^545 + 545^4 is not a prime number.")
    'no'
    >>> polarity("There do not exist such integers.")
    'no'
    >>> polarity("No doubt, it can.")
    'yes'
    >>> polarity("Yes or no, I cannot tell.") is None
    True
    """
    if is_hedge(sentence):
        return None
    lead = re.match(r"\W*(yes|no)\b\s*[,.;:!—-]", sentence, re.IGNORECASE)
    if lead is not None:
        return "yes" if lead.group(1).lower() == "yes" else "no"
    return "no" if negation_count(main_clause(sentence)) % 2 else "yes"
