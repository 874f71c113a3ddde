"""The words the grader reads: one table per role, each written once.

A reply's words decide how its answer is read: "so" and "therefore" conclude, "because" and
"if" give reasons or conditions, "but" and "although" open a new clause, "not" and "cannot"
deny, "perhaps" and "maybe" hedge, "actually" and "no, it is" correct what came before. Each
role has one tuple here; the patterns of the answer layer, the polarity reader and the
families' statement matchers are built from these tuples (:func:`words_pattern`), so a word
added to a role reaches every reader of that role.

Reference: Legi-Val (arXiv 2603.20508) §3 answer extraction; negation cues after NegEx
(Chapman et al., 2001, J. Biomed. Inform. 34(5)).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "CLAUSE_BREAKERS",
    "CONCESSIONS",
    "CONCLUDING_CLAIMS",
    "CONCLUDING_CLAUSES",
    "CONCLUDING_CONNECTIVES",
    "CONCLUDING_OPENERS",
    "CONDITIONS",
    "CONTINUATIONS",
    "CORRECTION_CUES",
    "NUMBER_WORDS",
    "REASONS",
    "REASONS_AND_CONDITIONS",
    "REASONS_CONDITIONS_AND_CONCESSIONS",
    "RELATION_OPENERS",
    "SUBORDINATORS",
    "words_pattern",
]

#: Lower-case number words and their digits: the counts a reply or a gold spells out.
NUMBER_WORDS: dict[str, str] = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
}  # fmt: skip

# --- conclusions ------------------------------------------------------------------------------
#: Connectives that draw a conclusion wherever they stand.
CONCLUDING_CONNECTIVES: tuple[str, ...] = ("so", "thus", "hence", "therefore", "consequently")
#: Openers of a concluding sentence ("Therefore, …", "In conclusion, …").
CONCLUDING_OPENERS: tuple[str, ...] = (
    *CONCLUDING_CONNECTIVES,
    "in conclusion",
    "as a result",
    "finally",
    "in summary",
    "to conclude",
    "overall",
)
#: What marks a sentence inside a trace as a conclusion (only such a sentence states a yes/no
#: or a count before the end of a trace).
CONCLUDING_CLAIMS: tuple[str, ...] = (
    *CONCLUDING_CONNECTIVES,
    "we conclude",
    "in conclusion",
    "the answer",
    "this shows",
    "this proves",
    "this means",
)
#: Clauses that give the conclusion of the clause before them ("…, which means …").
CONCLUDING_CLAUSES: tuple[str, ...] = (
    "which means",
    "which implies",
    "which shows",
    "implying",
    "meaning",
    "so",
    "hence",
    "thus",
    "therefore",
)

# --- reasons, conditions, concessions ------------------------------------------------------------
#: Words that give a reason: a statement's words are never matched across them, and what a
#: clause of reasons says is a premise, not the answer.
REASONS: tuple[str, ...] = ("because", "since")
#: The cases of a piecewise answer ("… if m is odd", "otherwise …").
CONDITIONS: tuple[str, ...] = ("if", "when", "whenever", "unless", "otherwise")
#: Openers of a clause of reasons or conditions ("…, since f(x) = x has no real solutions").
REASONS_AND_CONDITIONS: tuple[str, ...] = (*REASONS, "as", "given", "if", "when", "whenever")
#: Concessive conjunctions: each opens a clause of its own.
CONCESSIONS: tuple[str, ...] = ("although", "though", "whereas", "while")
#: Openers of a clause whose comparison is not the claim ("since a_n < 30 for small n").
REASONS_CONDITIONS_AND_CONCESSIONS: tuple[str, ...] = (
    *REASONS_AND_CONDITIONS,
    *CONCESSIONS,
    "for",
    "assuming",
    "suppose",
)
#: Openers of a subordinate clause: it gives reasons or circumstances, not the claim.
SUBORDINATORS: tuple[str, ...] = (
    *REASONS,
    "as",
    "which",
    "where",
    "given",
    "if",
    "when",
    *CONCESSIONS,
    "for",
)
#: Words that open a new clause inside a sentence: a negation before them does not scope over
#: what follows.
CLAUSE_BREAKERS: tuple[str, ...] = ("but", *CONCESSIONS)

# --- corrections --------------------------------------------------------------------------------
#: Cues that take back what came before them ("I thought it was 3, but actually it is 4",
#: "The answer is 3? No, it is 4.", "3 (wrong, it is 4)"): a value before them is not the final
#: answer.
CORRECTION_CUES: tuple[str, ...] = (
    "actually",
    "no, it is",
    "no, it's",
    "no it is",
    "wait",
    "correction",
    "i mean",
    "rather",
    "instead",
    "wrong",
    "incorrect",
    "mistake",
    "not correct",
    "not right",
)


#: Words after which a sentence goes on from a value to another one ("3, minus 1, so 2",
#: "3, but it is 4"): the first value is a step, not the answer.
CONTINUATIONS: tuple[str, ...] = (
    *CONCLUDING_CONNECTIVES,
    "but",
    "minus",
    "plus",
    "times",
    "divided by",
    "giving",
    "gives",
    "which gives",
    "yields",
    "making",
    "leaving",
)

# --- relations ------------------------------------------------------------------------------
#: How a relation can open an answer that has no left side ("\\neq 3", "< 3", "\\not\\equiv 3"):
#: such an answer states no value. As a regular expression (LaTeX commands and Unicode signs).
RELATION_OPENERS: str = (
    r"(?:\\(?:neq?|leq?|geq?|lt|gt|not|neg|nless|ngtr|nleq|ngeq|leqslant|geqslant|lnot)"
    r"(?![A-Za-z])|[<>≤≥≠≢¬≮≯]|!=|<=|>=)"
)


def words_pattern(words: Iterable[str]) -> str:
    r"""An alternation of ``words`` for a regular expression: each word escaped, its spaces
    matching any run of whitespace, longer phrases first (so "which means" wins over "which").

    >>> words_pattern(["so", "in conclusion"])
    'in\\s+conclusion|so'
    """
    phrases = sorted(set(words), key=lambda w: (-len(w), w))
    return "|".join(r"\s+".join(re.escape(part) for part in phrase.split()) for phrase in phrases)
