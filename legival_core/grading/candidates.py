"""Candidate answers and their kinds: one table says how each kind is graded.

A *candidate* is a piece of a model's text that may state its answer, with its exact span. Its
*kind* says which finder produced it, and the kind's :class:`KindPolicy` (the table
:data:`KIND_POLICY`) says how the grader treats it: whether it commits to an answer at all,
whether it offers several values, whether only a statement gold is read in it, whether it is
read at the start of its sentence. Code asks the table, never a list of kind names.

Reference: Legi-Val (arXiv 2603.20508) §3 answer extraction.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["KIND_POLICY", "AnswerCandidate", "CandidateKind", "KindPolicy", "policy_of"]


class CandidateKind(StrEnum):
    """Where a candidate comes from (its value is what grades store as ``answer_kind``)."""

    #: the task's own extractor (a box for math, a letter for GPQA, a JSON grouping)
    TASK = "task"
    #: the content of a ``\\boxed{…}``
    BOXED = "boxed"
    #: the text after "the answer is", "final answer:", …
    ANSWER_PHRASE = "answer_phrase"
    #: a sentence or phrase that commits to nothing ("Yes and no", "3 (or possibly 4)")
    HEDGE = "hedge"
    #: several values offered together ("3 or 239", "$0$, $1$, or $-1$")
    LIST = "list"
    #: the one value of a list left when the values the question sets aside are removed
    LIST_REST = "list_rest"
    #: what follows a copula ("… is X", "… equals X", "… is given by X")
    COPULA_TAIL = "copula_tail"
    #: the value after "there are" / "there is"
    THERE_ARE = "there_are"
    #: the inside of an inline maths region of the sentence
    INLINE_MATH = "inline_math"
    #: the right-hand side of the sentence's last "="
    EQUATION_RHS = "equation_rhs"
    #: the residue r of "≡ r (mod n)" / "congruent to r"
    CONGRUENCE = "congruence"
    #: a value the sentence states on its own: its last maths-looking run, or its only one
    #: ("Therefore, 239.", "Hence we obtain 2^(n-1).", "239 for all n ≥ 2.")
    STATED_VALUE = "stated_value"
    #: a leading "Yes" / "No"
    YES_NO = "yes_no"
    #: an option letter ("(B)", "option C")
    OPTION = "option"
    #: the polarity of a statement answering a yes/no question (text: "Yes" / "No")
    POLARITY = "polarity"
    #: a count read in words ("exactly two", "no such", "for 20 values of n")
    COUNT = "count"
    #: the whole closing sentence (read word by word against a statement gold)
    SENTENCE = "sentence"
    #: a whole sentence that offers a list
    LIST_SENTENCE = "list_sentence"
    #: a whole sentence that restates a condition of the problem
    GIVEN_SENTENCE = "given_sentence"
    #: a whole sentence cut off before its brackets close
    CUT_SENTENCE = "cut_sentence"


@dataclass(frozen=True)
class KindPolicy:
    """How the grader treats one kind of candidate.

    Attributes:
        commits: it states an answer at all (a hedge does not: never accepted).
        several_values: it offers several values: graded whole, only against a gold that is
            itself several values.
        statement_only: a whole sentence holding a list, a restated condition or a cut-off
            expression: read only against a gold that is a statement (a value's verifier would
            take its last value).
        opens_sentence: read at the start of its sentence ("No, …", "(B) …"): the rules about
            trailing clauses, negating clauses and restated objects do not apply.
        closed_token: a token that cannot be cut off mid-expression (a residue, a letter, yes/no).
        reads_frame: its text is the reading of its sentence in the question's frame ("No",
            "2"), and its span is the sentence's.
        kept_apart_in_leaks: a leak search checks it apart from a value of the same text (a
            list "3, 4" is not the value "3, 4" graded again).
    """

    commits: bool = True
    several_values: bool = False
    statement_only: bool = False
    opens_sentence: bool = False
    closed_token: bool = False
    reads_frame: bool = False
    kept_apart_in_leaks: bool = False


#: The policy of every kind (the one place that lists kinds by behaviour).
KIND_POLICY: dict[CandidateKind, KindPolicy] = {
    CandidateKind.TASK: KindPolicy(),
    CandidateKind.BOXED: KindPolicy(),
    CandidateKind.ANSWER_PHRASE: KindPolicy(),
    CandidateKind.HEDGE: KindPolicy(commits=False, kept_apart_in_leaks=True),
    CandidateKind.LIST: KindPolicy(several_values=True, kept_apart_in_leaks=True),
    CandidateKind.LIST_REST: KindPolicy(),
    CandidateKind.COPULA_TAIL: KindPolicy(),
    CandidateKind.THERE_ARE: KindPolicy(),
    CandidateKind.INLINE_MATH: KindPolicy(),
    CandidateKind.EQUATION_RHS: KindPolicy(),
    CandidateKind.CONGRUENCE: KindPolicy(closed_token=True),
    CandidateKind.STATED_VALUE: KindPolicy(),
    CandidateKind.YES_NO: KindPolicy(opens_sentence=True, closed_token=True),
    CandidateKind.OPTION: KindPolicy(opens_sentence=True, closed_token=True),
    CandidateKind.POLARITY: KindPolicy(reads_frame=True),
    CandidateKind.COUNT: KindPolicy(reads_frame=True),
    CandidateKind.SENTENCE: KindPolicy(),
    CandidateKind.LIST_SENTENCE: KindPolicy(statement_only=True),
    CandidateKind.GIVEN_SENTENCE: KindPolicy(statement_only=True),
    CandidateKind.CUT_SENTENCE: KindPolicy(statement_only=True),
}


def policy_of(kind: str) -> KindPolicy:
    """The :class:`KindPolicy` of ``kind`` (a :class:`CandidateKind` or its value).

    >>> policy_of("hedge").commits, policy_of("boxed").commits
    (False, True)
    """
    return KIND_POLICY[CandidateKind(kind)]


@dataclass(frozen=True, order=True)
class AnswerCandidate:
    """One answer a text may state.

    Attributes:
        start, end: the span of ``text`` in the source (``source[start:end] == text``), except
            for kinds that read the frame (``polarity``, ``count``), whose text is the answer
            they read ("No", "0") and whose span is the sentence that states it.
        text: the candidate answer as written (stripped of surrounding spaces and punctuation).
        kind: the :class:`CandidateKind` that produced it.
    """

    start: int
    end: int
    text: str
    kind: CandidateKind

    @property
    def span(self) -> tuple[int, int]:
        return self.start, self.end

    @property
    def policy(self) -> KindPolicy:
        return KIND_POLICY[self.kind]
