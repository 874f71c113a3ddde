"""The frame of a question: what it asks, what it already gives, what it asks about.

A reply is read in the frame of its problem (:class:`AnswerFrame`): the sentence of the prompt
that asks (:func:`asking_sentence`), whose question type (:mod:`legival_core.grading.questions`,
which reads its answers in this frame) decides how a statement answers ("There are no
solutions." answers a yes/no question with No), and the prompt decides what cannot be an
answer: a condition it gives ("a + b = 5", :func:`restates_given`), the one expression it asks
about ("Factorize x^8+x^4+1"), the values it sets aside ("besides 25").

Reference: Legi-Val (arXiv 2603.20508) §3 answer extraction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from legival_core.grading.candidates import AnswerCandidate
from legival_core.grading.polarity import (
    AskedClaim,
    asked_claim,
    sentential_negation_count,
    unequal_count,
)
from legival_core.grading.scanning import (
    MAX_SENTENCE_CHARS,
    PROSE_PAIRS,
    ScannedText,
    expression_end,
    is_ascii_letter,
)

__all__ = [
    "AnswerFrame",
    "asking_sentence",
    "normal_maths",
    "relation_around",
    "restates_given",
    "topic_words",
]


@dataclass(frozen=True)
class AnswerFrame:
    """What the question asks, for reading its answers.

    Attributes:
        question_type: a type of :mod:`legival_core.grading.questions` (default
            ``"expression"``).
        prompt: the problem text, whose conditions are never the answer (None: unknown).
    """

    question_type: str = "expression"
    prompt: str | None = None
    _givens: str | None = field(default=None, compare=False, repr=False)
    _focus: frozenset[str] | None = field(default=None, compare=False, repr=False)
    _asked: AskedClaim | None = field(default=None, compare=False, repr=False)
    _asked_object: str | None = field(default=None, compare=False, repr=False)
    _set_aside: frozenset[str] | None = field(default=None, compare=False, repr=False)
    _asking_words: frozenset[str] | None = field(default=None, compare=False, repr=False)

    @property
    def question_negated(self) -> bool:
        """True when the question itself is negated ("Must x_n ≠ 0 for all n?")."""
        if not self.prompt:
            return False
        # A remark in brackets ("(i.e., not encountering division by zero)") is no negation.
        asking = _BRACKETED.sub(" ", asking_sentence(self.prompt))
        # "≠" negates the question's claim ("Must x_n ≠ 0 for all n?"), not when it only
        # ranges over cases ("for any p ≠ q"); a reply's polarity counts it the same way.
        return (sentential_negation_count(asking) + unequal_count(asking)) % 2 == 1

    @property
    def asked(self) -> AskedClaim:
        """What the question's claim is about beyond its words (a limit; computed once)."""
        if self._asked is None:
            object.__setattr__(self, "_asked", asked_claim(asking_sentence(self.prompt or "")))
        return self._asked or AskedClaim()

    @property
    def focus(self) -> frozenset[str]:
        """The words and numbers of the asking sentence that the rest of the prompt does not
        hold: what the question asks about ("Must x_n ≠ 0 for all n?" after a definition of
        the sequence: {"0"}). Empty without a prompt (computed once)."""
        if self._focus is None:
            asking = asking_sentence(self.prompt or "")
            lowered = (self.prompt or "").lower()
            cut = lowered.rfind(asking) if asking else -1
            rest = lowered[:cut] + lowered[cut + len(asking) :] if cut >= 0 else lowered
            focus = frozenset(topic_words(asking)) - frozenset(topic_words(rest))
            object.__setattr__(self, "_focus", focus)
        return self._focus or frozenset()

    @property
    def asking(self) -> str:
        """The sentence of the prompt that asks (lower case; "" without a prompt)."""
        return asking_sentence(self.prompt or "") if self.prompt else ""

    @property
    def asking_words(self) -> frozenset[str]:
        """The topic words of the asking sentence ("how many real solutions …": {"real",
        "solution", …}); computed once."""
        if self._asking_words is None:
            words = frozenset(topic_words(asking_sentence(self.prompt or "")))
            object.__setattr__(self, "_asking_words", words)
        return self._asking_words or frozenset()

    @property
    def set_aside(self) -> frozenset[str]:
        """Values the question itself sets aside ("… besides 25": {"25"}), in the normal form
        of :func:`restates_given`; computed once per frame (it is asked once per sentence)."""
        if self._set_aside is None:
            asking = asking_sentence(self.prompt or "")
            values = frozenset(
                normal_maths(value)
                for match in _SET_ASIDE.finditer(asking)
                for value in re.split(r"\s*(?:,|\band\b|\bor\b)\s*", match.group(1))
                if value
            )
            object.__setattr__(self, "_set_aside", values)
        return self._set_aside or frozenset()

    def restates_object(self, candidate: str) -> bool:
        """True when ``candidate`` is the one expression the question asks about ("Factorize
        x^8+x^4+1": "x^8 + x^4 + 1"), which is never its answer. Not for yes/no and choice
        questions, nor when the asking sentence writes several expressions ("Which is larger,
        2^100 or 3^60?"): there a restated expression may be the answer."""
        if self.question_type in ("yes_no", "choice") or not self.prompt:
            return False
        if self._asked_object is None:
            asked_object = _only_expression(asking_sentence(self.prompt))
            object.__setattr__(self, "_asked_object", asked_object)
        normal = normal_maths(candidate)
        return bool(self._asked_object) and normal == self._asked_object

    @property
    def givens(self) -> str:
        """The prompt in the normal form of :func:`restates_given` (computed once)."""
        if self._givens is None:
            object.__setattr__(self, "_givens", normal_maths(self.prompt or ""))
        return self._givens or ""


#: Only the last this many characters of a prompt are read (the question is at its end).
MAX_PROMPT_CHARS = 4000

_IMPERATIVE = re.compile(
    r"\b(?:find|determine|compute|calculate|evaluate|express|give|prove|show|decide)\b"
)


def asking_sentence(prompt: str) -> str:
    """The sentence of ``prompt`` that asks: its last question, else its last imperative
    sentence, else its last sentence (lower-cased).

    >>> asking_sentence("Let n = 5. Is n prime? Explain.")
    'is n prime?'
    >>> asking_sentence("Let a + b = 5. Find ab.")
    'find ab.'
    """
    text = prompt[-MAX_PROMPT_CHARS:].lower()
    sentences = _sentences(text)
    questions = [s for s in sentences if s.rstrip().endswith("?")]
    if questions:
        return questions[-1].strip()
    asking = [s for s in sentences if _IMPERATIVE.search(s)]
    return (asking or sentences or [""])[-1].strip()


def _sentences(text: str) -> list[str]:
    """Sentences split after ". ", "? ", "! " and line breaks, by one pass over ``text``. An
    ellipsis ("a_1, a_2, ... satisfy") and a factorial ("x/(1!)+x^2/(2!)") end nothing.

    >>> _sentences("Let f = 1+x/(1!)+x^2/(2!). How many a_0, a_1, ... are there?")
    ['Let f = 1+x/(1!)+x^2/(2!).', ' How many a_0, a_1, ... are there?']
    """
    sentences, start = [], 0
    for index, char in enumerate(text):
        after = text[index + 1 : index + 2]
        if char == "!":
            ends = after in (" ", "\n", "") and not text[index - 1 : index].isalnum()
        elif char == ".":
            ends = after in (" ", "\n", "") and text[index - 1 : index] != "."
        else:
            ends = char in "?\n"
        if ends:
            if text[start : index + 1].strip():
                sentences.append(text[start : index + 1])
            start = index + 1
    if text[start:].strip():
        sentences.append(text[start:])
    return sentences


_BRACKETED = re.compile(r"\([^()]*\)")
_OPERATOR_CHARS = frozenset("+-*/^")


_DECIMAL = re.compile(r"\d*\.\d+")


def _only_expression(asking: str) -> str:
    """The normal form (:func:`normal_maths`) of the one expression that ``asking`` writes: one
    with an operator, of five or more characters, or a decimal number to convert ("Write 0.25
    as a fraction"); "" when it writes none or several."""
    found: list[str] = []
    index = 0
    while index < len(asking):
        stop = expression_end(asking, index)
        if stop > index:
            normal = normal_maths(asking[index:stop])
            operator = len(normal) >= 5 and _OPERATOR_CHARS.intersection(normal)
            if operator or _DECIMAL.fullmatch(normal):
                found.append(normal)
            index = stop
        else:
            index += 1
    return found[0] if len(found) == 1 else ""


_TOPIC_TOKEN = re.compile(r"\\[A-Za-z]+|[A-Za-z]{3,}|\d+")
#: Words that ask or join, not what is asked about.
_TOPIC_STOP = frozenset({
    "the", "and", "for", "all", "any", "must", "can", "could", "does", "did", "are", "was",
    "were", "there", "that", "this", "with", "such", "have", "has", "not", "what", "which",
    "whether", "determine", "prove", "disprove", "find", "some", "each", "every", "its", "their",
    "from", "into", "than", "then", "also", "only", "may", "might", "will", "would", "should",
    "shall", "let", "given",
})  # fmt: skip
_TOPIC_SAME = {"zero": "0", "impossible": "possible", "exists": "exist"}


def topic_words(text: str) -> list[str]:
    """Lower-cased words of three or more letters and numbers of ``text`` (LaTeX commands,
    joining and asking words left out; a plural "s" dropped, "zero" read as 0), by one pass.

    >>> topic_words(r"The sequence has no zero terms, $x_n \\neq 0$.")
    ['sequence', '0', 'term', '0']
    """
    words = []
    for match in _TOPIC_TOKEN.finditer(text[-MAX_SENTENCE_CHARS * 2 :].lower()):
        word = match.group()
        if word.startswith("\\") or word in _TOPIC_STOP:
            continue
        word = _TOPIC_SAME.get(word, word)
        words.append(word[:-1] if len(word) > 3 and word.endswith("s") else word)
    return words


# "besides 25", "other than 1 and 2": values the question itself sets aside.
_SET_ASIDE = re.compile(
    r"\b(?:besides|other\s+than|apart\s+from|aside\s+from|except(?:\s+for)?)\s+"
    r"(-?\d+(?:\s*(?:,|\band\b|\bor\b)\s*-?\d+)*)",
    re.IGNORECASE,
)
# --- restated givens ------------------------------------------------------------------------------

_NORMAL_REPLACEMENTS = (
    ("\\left", ""), ("\\right", ""), ("\\equiv", "≡"), ("\\pmod", "mod"), ("\\bmod", "mod"),
    ("\\mod", "mod"), ("\\cdots", "..."), ("\\ldots", "..."), ("\\dots", "..."), ("…", "..."),
    ("\\leq", "≤"), ("\\le", "≤"), ("\\geq", "≥"), ("\\ge", "≥"), ("\\neq", "≠"), ("\\ne", "≠"),
    ("\\cdot", "*"), ("\\times", "*"), ("⋅", "*"), ("·", "*"), ("×", "*"), ("−", "-"),
    ("modulo", "mod"), ("<=", "≤"), (">=", "≥"),
)  # fmt: skip
_RELATIONS = frozenset("=≡<>≤≥≠")


def normal_maths(text: str) -> str:
    """Maths text without spaces, ``$``, braces, ``\\,`` and case, LaTeX relations as symbols."""
    lowered = text.lower()
    for old, new in _NORMAL_REPLACEMENTS:
        lowered = lowered.replace(old, new)
    return "".join(c for c in lowered if not c.isspace() and c not in "${}()\\")


def restates_given(statement: str, frame: AnswerFrame) -> bool:
    """True when ``statement`` is a relation (equation, congruence, inequality) written in the
    frame's prompt: a condition of the problem restated, not an answer. An ellipsis in the
    statement ("a^5 + … + e^5 ≡ 0 mod 25") stands for any text of the prompt.

    >>> frame = AnswerFrame(prompt="Let a + b = 5 and ab = 6. Find a^2 + b^2.")
    >>> restates_given("a+b = 5", frame), restates_given("a^2 + b^2 = 13", frame)
    (True, False)
    >>> frame = AnswerFrame(prompt="If $a^5+b^5+c^5 \\\\equiv 0 \\\\pmod{25}$, find abc mod 5.")
    >>> restates_given("a^5 + ... + c^5 ≡ 0 mod 25", frame)
    True
    >>> restates_given("a^5+b^5+c^5 mod 25 = 0", frame)  # the same congruence, spelt otherwise
    True
    """
    if not frame.prompt:
        return False
    normal = normal_maths(statement)
    if len(normal) < 3 or not (any(c in _RELATIONS for c in normal) or "mod" in normal):
        return False
    return any(_occurs_in(form, frame.givens) for form in _congruence_forms(normal))


def _congruence_forms(normal: str) -> list[str]:
    """A relation in normal form and, for a congruence, its other spelling: ``x≡rmodn`` and
    ``xmodn=r`` say the same."""
    forms = [normal]
    if (at := normal.find("≡")) > 0 and (mod := normal.find("mod", at)) > at:
        forms.append(f"{normal[:at]}{normal[mod:]}={normal[at + 1 : mod]}")
    elif (eq := normal.find("=")) > 0 and (mod := normal.rfind("mod", 0, eq)) > 0:
        forms.append(f"{normal[:mod]}≡{normal[eq + 1 :]}{normal[mod:eq]}")
    return forms


def _occurs_in(normal: str, givens: str) -> bool:
    """``normal`` is a substring of ``givens``, each "..." in it standing for any text."""
    position = 0
    for piece in (p for p in normal.split("...") if p):
        found = givens.find(piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return True


#: Words that belong to a relation written in prose maths ("≡ 0 mod 25").
_MATHS_WORDS = frozenset({"mod", "modulo", "pmod", "bmod", "equiv"})


def _mathish(text: str, index: int) -> bool:
    """True when ``text[index]`` belongs to a maths-looking run (not a prose word, not the end
    of a clause)."""
    char = text[index]
    if char in ",;:" or (char == "." and text[index + 1 : index + 2] in ("", " ", "\n")):
        return False
    if not is_ascii_letter(char):
        return not char.isalpha()
    begin = end = index
    while begin > 0 and is_ascii_letter(text[begin - 1]):
        begin -= 1
    while end < len(text) and is_ascii_letter(text[end]):
        end += 1
    word = text[begin:end].lower()
    return (len(word) <= 2 and word not in PROSE_PAIRS) or word in _MATHS_WORDS


def relation_around(source: ScannedText, candidate: AnswerCandidate, start: int, end: int) -> str:
    """The relation a candidate belongs to: its maths region, or the maths-looking run around
    it inside ``text[start:end]`` (``a + b = 5`` for the right-hand side ``5``)."""
    region = source.region_at(candidate.start)
    if region is not None:
        return source.text[region[0] : region[1]]
    text = source.text
    left, right = candidate.start, candidate.end
    while left > start and left > candidate.start - MAX_SENTENCE_CHARS and _mathish(text, left - 1):
        left -= 1
    while right < end and right < candidate.end + MAX_SENTENCE_CHARS and _mathish(text, right):
        right += 1
    return text[left:right]
