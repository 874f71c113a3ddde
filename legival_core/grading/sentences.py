"""One sentence read once: its copulas, its answer part, its trailing clause, its candidates.

The closing sentence of a reply states its answer in one of a few shapes: "… is X" (the tail
after a copula), "there are X …", inline maths, "… = X", "≡ r (mod n)", a leading "Yes"/"No",
an option letter. Each shape has a *sentence finder*, registered by the kind of candidate it
gives (:data:`SENTENCE_FINDERS`, tried in registration order). :func:`read_sentence` finds,
once per sentence, where its answer part starts (after the copula whose tail leads with a
value) and where a trailing clause ("…, achieved when …") cuts it off.

The patterns here run on one sentence of at most
:data:`~legival_core.grading.scanning.MAX_SENTENCE_CHARS` characters and have no nested
quantifiers: linear time on untrusted text.

Reference: Legi-Val (arXiv 2603.20508) §3 answer extraction.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from legival_core.grading.candidates import AnswerCandidate, CandidateKind
from legival_core.grading.lexicon import (
    CONCLUDING_CLAIMS,
    CONCLUDING_OPENERS,
    NUMBER_WORDS,
    REASONS,
    REASONS_AND_CONDITIONS,
    words_pattern,
)
from legival_core.grading.polarity import clause_start
from legival_core.grading.scanning import (
    ScannedText,
    expression_end,
    leading_expression,
    trimmed_candidate,
)

__all__ = [
    "SENTENCE_FINDERS",
    "SentenceReading",
    "concludes",
    "in_reason_clause",
    "maths_runs",
    "one_of_several_counts",
    "read_sentence",
    "sentence_finder",
    "trailing_cut",
]

SentenceFinder = Callable[["SentenceReading"], Iterator[AnswerCandidate]]
#: kind -> the finder of that kind in a sentence, in the order they are tried.
SENTENCE_FINDERS: dict[CandidateKind, SentenceFinder] = {}


def sentence_finder(kind: CandidateKind) -> Callable[[SentenceFinder], SentenceFinder]:
    """Decorator: register the sentence finder of candidates of ``kind``."""

    def add(finder: SentenceFinder) -> SentenceFinder:
        SENTENCE_FINDERS[kind] = finder
        return finder

    return add


# The last copula of a sentence introduces what it states: "… is X", "… are X", "… equals X",
# "… results in 2,001,000 terms" (only before a number or maths),
# "… will have X", "… is given by (the expression|formula) X", "… is equal to X".
COPULA = re.compile(
    r"\b(?:is|are|was|were|equals|will\s+have|has|have|becomes|be"
    r"|(?:will\s+)?results?\s+in(?=\s+[-\d$\\])"
    # verbs that give a quantity in a word problem, only before a number ("cost $1.50")
    r"|(?:costs?|earns?|pays?|weighs?|totals?|amounts?\s+to|comes?\s+to|adds?\s+up\s+to)(?=\s+[-\d$])"
    # a limit stated as a value: "converges to sqrt(a)", "tends to 3"
    r"|(?:converges?|converging|tends?)\s+to(?=\s+[-\d$\\(a-z]))"
    r"(?:\s+(?:given\s+by|equal\s+to|exactly|simply|just"
    # "is factorized (over the integers) as X", "can be written as X"
    r"|(?:factori[sz]ed|written|expressed|simplified|rewritten|represented)(?:\s+[A-Za-z]+){0,4}?\s+as))?"
    r"(?:\s+(?:the\s+)?(?:expression|formula|value|number|sum|product|answer))?"
    r"(?:\s*:)?\s+",
    re.IGNORECASE,
)
# "there are X …", "there is X …": X is the first maths-looking run after it.
THERE_ARE = re.compile(r"\bthere\s+(?:are|is|will\s+be|exist|exists)\s+", re.IGNORECASE)
# Used with Pattern.match(text, start): anchored at the sentence start.
# A conclusion's opener may come first: "Therefore, no."
_YES_NO = re.compile(
    rf"\W*(?:(?:{words_pattern(CONCLUDING_OPENERS)})\s*,?\s*)?(yes|no)\b"
    r"(?=\s*(?:[,.;:!—–-]|$)|\s+(?:it|they|there|we|this)\b)",
    re.IGNORECASE,
)
_OPTION_AT_START = re.compile(r"\s*([A-E])[.)]\s")
_OPTION = re.compile(r"\(([A-E])\)|\boption\s+([A-E])\b", re.IGNORECASE)
# What follows an answer and qualifies it: "11, achieved when …", "1/3, which occurs when …",
# "0 modulo 120 for any integer n". A trailing clause holds no candidates of its own.
TRAILING = re.compile(
    r"(?:,\s*|\s+)(?:achieved|attained|obtained|reached|occurring|which|when|whenever|where"
    r"|with|for|if|since|because|given|provided|so\s+that"
    r"|as\s+(?:long|shown|required|claimed|expected|desired|stated|computed|found|predicted))\b"
    r"|\s+\((?:i\.e\.|e\.g\.|when|for|with|achieved|attained)",
    re.IGNORECASE,
)
# In the frame of a question about residues: "is always congruent to 0 for any n" (the
# modulus said before it) states the residue 0.
CONGRUENT_TO = re.compile(r"\bcongruent\s+to\s+(-?\d+)\b(?![.,]?\d)", re.IGNORECASE)
# "≡ r (mod n)", "\equiv r \pmod{n}", "congruent to r modulo n": r is the residue.
_CONGRUENCE = re.compile(
    r"(?:≡|\\equiv|congruent\s+to)\s*(-?\d+)\s*(?:\(\s*)?(?:\\pmod|\\bmod|\\mod|mod(?:ulo)?)\b",
    re.IGNORECASE,
)
COUNT_WORD = re.compile(
    r"\b(?:(?:exactly|precisely|only|are|is|be|have|has|of)\s+|(?:least|most),?\s+)("
    + "|".join(NUMBER_WORDS)
    + r")\b",
    re.IGNORECASE,
)
# The comma of "At most, two …" sets off the bound; the count still follows it.
BOUND = re.compile(r"\b(?:at\s+least|at\s+most|exactly),?\s+", re.IGNORECASE)
# A count sentence that opens with the number of cases ("For 20 values of n, …", "In 20 cases,
# …", "Therefore, for exactly twenty integers n …"); used with Pattern.match at its start. The
# number must be followed by a word: "For n = 20" and "In 2020, …" name no count.
# "holds for 98 values of n", "in exactly two cases": the number of cases inside a sentence.
CASES_INSIDE = re.compile(
    r"\b(?:for|in)\s+(?:(?:exactly|precisely|only|just|all)\s+)?"
    r"(\d+|" + "|".join(NUMBER_WORDS) + r")"
    r"\s+(?:(?:distinct|different|positive|integer|such)\s+)?"
    r"(?:values?|integers?|numbers?|choices|cases|pairs?|triples?)\b",
    re.IGNORECASE,
)
# A clause that gives a reason ("…, since f(x)=x has no real solutions"): what it says of
# "no" or "none" is the premise, not the count.
_REASON_CLAUSE = re.compile(rf"\W*(?:{words_pattern(REASONS_AND_CONDITIONS)})\b", re.IGNORECASE)
_REASON_WORD = re.compile(rf"\b(?:{words_pattern(REASONS)})\b", re.IGNORECASE)
# A claim that its cases fail: "fails for 98 values of n" counts the other cases.
FAILS = re.compile(r"\bfail(?:s|ed)?\b", re.IGNORECASE)
CASES_COUNT = re.compile(
    rf"\W*(?:(?:{words_pattern(CONCLUDING_OPENERS)})\s*,?\s+)?"
    r"(?:for|in)\s+(?:(?:exactly|precisely|only|just|all)\s+)?"
    r"(\d+|" + "|".join(NUMBER_WORDS) + r")\s+(?=[A-Za-z])",
    re.IGNORECASE,
)
# "no such", "there are no …", "none", and "has no roots …" (a count of none).
NONE_STATED = re.compile(
    r"\b(?:no\s+such|there\s+(?:are|is|exist|exists)\s+no|none|(?:has|have)\s+no)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SentenceReading:
    """One sentence of a text, read once: where its answer part and its trailing clause are."""

    source: ScannedText
    start: int
    end: int
    copulas: list[re.Match[str]]
    answer_start: int  # after the copula that introduces the answer (start if none)
    answer_end: int  # where a trailing clause begins (end if none)
    value_tail: bool = False  # the copula's tail leads with a value ("… is 1")


def read_sentence(source: ScannedText, start: int, end: int) -> SentenceReading:
    """Read the sentence ``source.text[start:end]`` once: its copulas, where its answer starts
    (after the copula whose tail leads with a value) and where a trailing clause cuts it."""
    text = source.text
    copulas = [m for m in COPULA.finditer(text, start, end) if not source.inside(m.start())]
    answer_start, answer_end = start, end
    value_tail = False
    # The copula that introduces the answer: the last one whose tail starts with a value,
    # leaving out those inside the trailing clause that follows an earlier one's value ("is 0,
    # which is achieved when a equals b" -> "is", not "equals"; but in "the integer that
    # becomes 57 times smaller when … is 7125" the clause follows words, and "is" counts).
    chosen: tuple[re.Match[str], int] | None = None
    closed_at = end  # where the trailing clause of the chosen copula's value begins
    for copula in copulas:
        if copula.start() >= closed_at:
            continue
        cut = trailing_cut(source, copula.end(), end)
        value = source.region_at(copula.end()) is not None or text.startswith("\\", copula.end())
        leads = leading_expression(text, copula.end(), cut, CandidateKind.COPULA_TAIL)
        if value or leads is not None:
            chosen = (copula, cut)
            right_after = leads is not None and not text[leads.end : cut].strip(" ,;:")
            closed_at = cut if right_after and cut < end else end
    if chosen is not None:
        answer_start, answer_end, value_tail = chosen[0].end(), chosen[1], True
    elif copulas:
        answer_start = copulas[-1].end()
        answer_end = trailing_cut(source, answer_start, end)
    if not copulas:
        answer_end = trailing_cut(source, start, end, require_value=True)
    return SentenceReading(source, start, end, copulas, answer_start, answer_end, value_tail)


def trailing_cut(source: ScannedText, start: int, end: int, *, require_value: bool = False) -> int:
    """Where a trailing clause starts in ``text[start:end]`` after the first value (or end)."""
    text = source.text
    for match in TRAILING.finditer(text, start, end):
        if source.inside(match.start()):
            continue
        before = text[start : match.start()]
        bare = before.strip()
        has_value = (
            any(c.isdigit() for c in before)
            or "$" in before
            or "\\" in before
            or (bare != "" and expression_end(bare, 0) == len(bare))  # "n! for all n ≥ 2"
            or _LONE_VARIABLE.fullmatch(bare) is not None  # "n times for all n ≥ 2"
        )
        if before.strip() and (has_value or not require_value):
            return match.start()
    return end


@sentence_finder(CandidateKind.COPULA_TAIL)
def _copula_tail(sentence: SentenceReading) -> Iterator[AnswerCandidate]:
    if not sentence.copulas:
        return
    text = sentence.source.text
    last = sentence.copulas[-1]
    # The whole tail after the last copula ("… is given by the expression (2n)!/(2^n n!).")
    if (
        tail := trimmed_candidate(text, last.end(), sentence.end, CandidateKind.COPULA_TAIL)
    ) is not None:
        yield tail
        # An appositive in parentheses after a word: "n factorial (n!)".
        for inner in _APPOSITIVE.finditer(tail.text):
            a, b = tail.start + inner.start(1), tail.start + inner.end(1)
            if (part := trimmed_candidate(text, a, b, CandidateKind.COPULA_TAIL)) is not None:
                yield part
    # After every copula, the expression that leads the rest of the sentence, without the words
    # that qualify it ("is 0, achieved when all x_i are equal", "are (n+1)^4 ways").
    for copula in sentence.copulas:
        if (
            part := leading_expression(text, copula.end(), sentence.end, CandidateKind.COPULA_TAIL)
        ) is not None:
            yield part


# "(n!)" after a word and a space; not a function call "ln(n)", a power "2^(n-1)", nor the
# first factor of a product "as (x+1)(x-1)".
_APPOSITIVE = re.compile(r"(?<=[A-Za-z]) \(([^()]+)\)(?![\w(^_])")


@sentence_finder(CandidateKind.THERE_ARE)
def _there_are(sentence: SentenceReading) -> Iterator[AnswerCandidate]:
    text = sentence.source.text
    for match in THERE_ARE.finditer(text, sentence.start, sentence.end):
        if (
            found := leading_expression(text, match.end(), sentence.end, CandidateKind.THERE_ARE)
        ) is not None:
            yield found


@sentence_finder(CandidateKind.INLINE_MATH)
def _inline_math(sentence: SentenceReading) -> Iterator[AnswerCandidate]:
    source = sentence.source
    text = source.text
    at = bisect.bisect_left(source._region_starts, sentence.start)
    while at < len(source.regions) and source.regions[at][0] < sentence.end:
        start, end = source.regions[at]
        at += 1
        if end > sentence.end:
            continue
        inner_start = start + (2 if text.startswith(("$$", "\\(", "\\["), start) else 1)
        inner_end = end - (2 if text.endswith(("$$", "\\)", "\\]"), start, end) else 1)
        if found := trimmed_candidate(text, inner_start, inner_end, CandidateKind.INLINE_MATH):
            yield found


@sentence_finder(CandidateKind.EQUATION_RHS)
def _equation_rhs(sentence: SentenceReading) -> Iterator[AnswerCandidate]:
    text = sentence.source.text
    position = text.rfind("=", sentence.start, sentence.end)
    if position < 0 or text[position - 1 : position] in "<>!":
        return
    # The right-hand side runs to the trailing clause ("x = ±1 for all n ≥ 2" -> "±1").
    stop = sentence.answer_end if position < sentence.answer_end else sentence.end
    found = trimmed_candidate(text, position + 1, stop, CandidateKind.EQUATION_RHS)
    if found is not None:
        yield found


@sentence_finder(CandidateKind.CONGRUENCE)
def _congruence(sentence: SentenceReading) -> Iterator[AnswerCandidate]:
    text = sentence.source.text
    for match in _CONGRUENCE.finditer(text, sentence.start, sentence.end):
        yield AnswerCandidate(
            match.start(1), match.end(1), match.group(1), CandidateKind.CONGRUENCE
        )


@sentence_finder(CandidateKind.YES_NO)
def _yes_no(sentence: SentenceReading) -> Iterator[AnswerCandidate]:
    if match := _YES_NO.match(sentence.source.text, sentence.start, sentence.end):
        yield AnswerCandidate(match.start(1), match.end(1), match.group(1), CandidateKind.YES_NO)


@sentence_finder(CandidateKind.OPTION)
def _option(sentence: SentenceReading) -> Iterator[AnswerCandidate]:
    text = sentence.source.text
    if match := _OPTION_AT_START.match(text, sentence.start, sentence.end):
        yield AnswerCandidate(match.start(1), match.end(1), match.group(1), CandidateKind.OPTION)
    for match in _OPTION.finditer(text, sentence.start, sentence.end):
        group = 1 if match.group(1) is not None else 2
        letter = match.group(group)
        if group == 2 or letter.isupper():
            yield AnswerCandidate(
                match.start(group), match.end(group), letter.upper(), CandidateKind.OPTION
            )


@sentence_finder(CandidateKind.STATED_VALUE)
def _stated_value(sentence: SentenceReading) -> Iterator[AnswerCandidate]:
    """The value a sentence states without a copula to lead to it: the last maths-looking run
    of its answer part when nothing but punctuation follows it ("Hence we obtain 2^(n-1).",
    "Therefore, 239."), or the only run of that part ("239 for all n ≥ 2": the trailing clause
    is cut off first)."""
    text = sentence.source.text
    runs = maths_runs(sentence.source, sentence.answer_start, sentence.answer_end)
    if not runs:
        # "Therefore, n.": a lone variable, when it is all the sentence states.
        part = _OPENING_WORDS.sub("", text[sentence.answer_start : sentence.answer_end])
        lone = part.strip(" \t\n.,;:!")
        # "Therefore, n." and "Therefore, n times.": a lower-case variable and its unit.
        if _LONE_VARIABLE.fullmatch(lone):
            at = text.index(lone, sentence.answer_start)
            found = trimmed_candidate(text, at, at + len(lone), CandidateKind.STATED_VALUE)
            if found is not None:
                yield found
        return
    last_start, last_end = runs[-1]
    ends_the_part = not any(c.isalnum() for c in text[last_end : sentence.answer_end])
    if ends_the_part or len(runs) == 1:
        if sentence.source.region_at(last_start) == (last_start, last_end):
            # a maths region: its inside, as inline maths is read
            opener = 2 if text.startswith(("$$", "\\(", "\\["), last_start) else 1
            last_start, last_end = last_start + opener, last_end - opener
        found = trimmed_candidate(text, last_start, last_end, CandidateKind.STATED_VALUE)
        if found is not None:
            yield found


_LONE_VARIABLE = re.compile(r"[a-z](?:\s+[a-z]{3,})?")
# Words that lead to a stated value without stating anything: "Therefore,", "Hence we get".
_OPENING_WORDS = re.compile(
    rf"^\W*(?:(?:{words_pattern(CONCLUDING_OPENERS)})\s*,?\s*)?"
    r"(?:we\s+(?:get|obtain|have|find|conclude)\s+(?:that\s+)?)?",
    re.IGNORECASE,
)


def maths_runs(source: ScannedText, start: int, end: int) -> list[tuple[int, int]]:
    """The maths-looking runs of ``source.text[start:end]``: its maths regions, and runs of
    maths tokens (:func:`~legival_core.grading.scanning.expression_end`) that hold a digit or an
    operator (a lone letter such as "a" in "a problem" is no run). One pass."""
    text = source.text
    runs: list[tuple[int, int]] = []
    index = start
    while index < end:
        region = source.region_at(index)
        if region is not None and region[0] == index:
            if region[1] <= end:
                runs.append(region)
            index = region[1]
            continue
        if index > start and (text[index - 1].isalnum() or text[index - 1] == "\\"):
            index += 1
            continue
        stop = expression_end(text, index, end)
        if stop > index:
            piece = text[index:stop]
            if any(c.isdigit() or c in "+-*/^=<>!" for c in piece):
                runs.append((index, stop))
            index = stop
        else:
            index += 1
    return runs


def in_reason_clause(words: str, index: int) -> bool:
    """True when ``words[index]`` is in a clause of reasons: one that opens with "since",
    "because", "if", … or holds "because"/"since" before it ("is 2 because f(x) = x has no
    real solutions")."""
    clause = clause_start(words, index)
    return bool(_REASON_CLAUSE.match(words, clause) or _REASON_WORD.search(words, clause, index))


# A sentence that draws a conclusion: inside a trace, only these state a yes/no or a count.
CONCLUSION = re.compile(rf"\b(?:{words_pattern(CONCLUDING_CLAIMS)})\b", re.IGNORECASE)


def concludes(sentence: SentenceReading) -> bool:
    """True when the sentence draws a conclusion ("so", "hence", "the answer", …).

    >>> text = ScannedText("Let x be odd. So there are no solutions.")
    >>> concludes(read_sentence(text, 0, 13)), concludes(read_sentence(text, 14, 40))
    (False, True)
    """
    return CONCLUSION.search(sentence.source.text, sentence.start, sentence.end) is not None


_NOUNS = r"((?:[A-Za-z]+\s+){0,2}[A-Za-z]+)"
_A_COUNT = rf"(?<![\w.])(\d+|{'|'.join(NUMBER_WORDS)})\s+{_NOUNS}"
# Two counts said side by side: "2 complex solutions and 3 real ones", "3 red, 4 blue".
_COORDINATED_COUNTS = re.compile(
    _A_COUNT + r"\s*(?:,\s*(?:and\s+)?|\s+(?:and|but|while|whereas|plus)\s+)" + _A_COUNT,
    re.IGNORECASE,
)


def one_of_several_counts(words: str, at: int, asking_words: frozenset[str]) -> bool:
    """True when the count at ``words[at]`` is one of two counts said side by side ("2 complex
    solutions and 3 real ones") and the question does not single it out: the words after it
    share no more words with the asking sentence than the other count's do.

    >>> asking = frozenset({"many", "real", "solution"})
    >>> words = "There are 2 complex solutions and 3 real ones."
    >>> one_of_several_counts(words, 10, asking)
    True
    >>> one_of_several_counts("There are 4 real solutions and 0 complex ones.", 10, asking)
    False
    >>> one_of_several_counts("There are 120 ways to give the 3 cookies to 8 dogs.", 10, asking)
    False
    """

    def overlap(nouns: str) -> int:
        return len(asking_words.intersection(w.lower().rstrip("s") for w in nouns.split()))

    for match in _COORDINATED_COUNTS.finditer(words):
        counts = [
            (match.span(1), overlap(match.group(2))),
            (match.span(3), overlap(match.group(4))),
        ]
        for (span, mine), (_, theirs) in (counts, counts[::-1]):
            if span[0] <= at < span[1]:
                return theirs >= mine
    return False
