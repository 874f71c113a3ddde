"""Linear scanners of model text: maths regions, sentence breaks, maths-looking runs, lists.

Everything the answer layer reads is found by one-pass, hand-written scanners over the text
(no regular expression here can backtrack more than a bounded window), so reading a reply of
any size takes time linear in its length:

- :func:`math_regions`: the spans of ``$…$``, ``$$…$$``, ``\\(…\\)``, ``\\[…\\]``;
- :class:`ScannedText`: a text with its regions and sentence breaks, and the sentence that
  holds any position;
- :func:`expression_end`: the end of the maths-looking run at a position ("2^(n-1) ways");
- :func:`value_list_span` and :func:`value_count`: several values offered together.

Reference: Legi-Val (arXiv 2603.20508) §3 answer extraction.
"""

from __future__ import annotations

import bisect
import re

from legival_core.grading.candidates import AnswerCandidate, CandidateKind

__all__ = [
    "MATHS_FUNCTIONS",
    "MAX_PREFIX_SENTENCE_CHARS",
    "MAX_SENTENCE_CHARS",
    "PROSE_PAIRS",
    "ScannedText",
    "blank_ascii_maths",
    "brackets_close",
    "closing_sentence_span",
    "expression_end",
    "factor_count",
    "is_ascii_letter",
    "leading_expression",
    "list_value_spans",
    "math_regions",
    "trimmed_candidate",
    "value_count",
    "value_end_at",
    "value_list_span",
    "window_end",
    "window_start",
]

#: A sentence (or the text after "the answer is") is read on at most this many characters; an
#: answer is short, and the bound keeps every pattern on it linear in the whole text.
MAX_SENTENCE_CHARS = 2000
#: Inside a trace (leak points: one closing sentence per step) a sentence is read on at most
#: this many characters: a sentence that states an answer is short.
MAX_PREFIX_SENTENCE_CHARS = 500


# Characters trimmed from both ends of a candidate: spaces, sentence punctuation, and quotes.
_TRIM = " \t\r\n.,;:?\"'`“”‘’"  # not "!": a factorial ends an answer


def trimmed_candidate(
    source: str, start: int, end: int, kind: CandidateKind
) -> AnswerCandidate | None:
    """The candidate ``source[start:end]`` after trimming, or None when nothing is left."""
    while start < end and source[start] in _TRIM:
        start += 1
    while end > start and source[end - 1] in _TRIM:
        end -= 1
    if start >= end:
        return None
    return AnswerCandidate(start, end, source[start:end], kind)


# --- linear scanners ------------------------------------------------------------------------------


def math_regions(text: str) -> list[tuple[int, int]]:
    """Spans of the maths regions ``$$…$$``, ``$…$``, ``\\(…\\)``, ``\\[…\\]`` of ``text``,
    in order, by one left-to-right pass (an unclosed opener is plain text).

    Each closer is looked up with ``str.find``; once a closer is known to be absent after some
    position it is never looked up again, so the pass is linear even on thousands of unclosed
    openers. Dollars are money, not maths, when a "$" before a digit would close on a "$" after
    a space ("pays $0.50 per egg, so 3 eggs cost $1.50"): that opener is plain text.

    >>> math_regions(r"a $x$ b \\(y\\) $$z$$ $unclosed")
    [(2, 5), (8, 13), (14, 19)]
    >>> math_regions("pays $0.50 each, so $1.50 in total")
    []
    """
    regions: list[tuple[int, int]] = []
    absent_after: dict[str, int] = {}  # closer -> a position after which it never occurs
    index, length = 0, len(text)

    def closer(token: str, start: int) -> int:
        if start >= absent_after.get(token, length + 1):
            return -1
        found = text.find(token, start)
        if found < 0:
            absent_after[token] = start
        return found

    while index < length:
        char = text[index]
        if char == "$":
            if text.startswith("$$", index):
                end = closer("$$", index + 2)
                # "$$…$$" needs something inside; "$$" alone may open an empty "$…$" pair.
                if end > index + 2:
                    regions.append((index, end + 2))
                    index = end + 2
                    continue
            end = closer("$", index + 1)
            money = text[index + 1 : index + 2].isdigit() and text[end - 1 : end].isspace()
            if end > index + 1 and not money:
                regions.append((index, end + 1))
                index = end + 1
                continue
            index += 1
        elif char == "\\" and text.startswith(("\\(", "\\["), index):
            close = "\\)" if text[index + 1] == "(" else "\\]"
            end = closer(close, index + 2)
            if end > index + 2:
                regions.append((index, end + 2))
                index = end + 2
                continue
            index += 2
        else:
            index += 1
    return regions


_BREAK_AFTER = ".!?"
_LIST_LEAD = "-*#0123456789"


def _sentence_breaks(text: str) -> list[tuple[int, int]]:
    """Spans of the sentence breaks of ``text``: the spaces after ". ", "! ", "? " before a
    capital, a backslash or "$"; a blank line; a line break before a list item or a numbered
    line. One pass over the whitespace runs of ``text``.

    >>> _sentence_breaks("One. Two\\n\\nthree\\n- four")
    [(4, 5), (8, 10), (15, 16)]
    """
    breaks: list[tuple[int, int]] = []
    length, index = len(text), 0
    while index < length:
        if not text[index].isspace():
            index += 1
            continue
        run_start = index
        while index < length and text[index].isspace():
            index += 1
        run_end = index  # text[run_start:run_end] is a maximal whitespace run
        after = text[run_end] if run_end < length else ""
        if (
            run_start > 0
            and text[run_start - 1] in _BREAK_AFTER
            and after
            and (after.isupper() or after in "\\$")
        ):
            breaks.append((run_start, run_end))
            continue
        newline = text.find("\n", run_start, run_end)
        while newline >= 0:
            last = text.rfind("\n", newline + 1, run_end)
            if last >= 0:  # a blank line: from this line break to the last one of the run
                breaks.append((newline, last + 1))
                break
            if after and after in _LIST_LEAD:
                breaks.append((newline, newline + 1))
            newline = text.find("\n", newline + 1, run_end)
    return breaks


_SPACE = re.compile(r"\s+")


def window_start(text: str, start: int, end: int, limit: int) -> int:
    """Where a sentence ``text[start:end]`` read on its last ``limit`` characters begins: at
    ``end - limit``, moved on past the token that the cut falls inside ("= 1000…0" read from
    inside its zeros would be the value 0); ``end`` when no whole token is left.

    >>> text = "x = 1" + "0" * 10 + " so 7"
    >>> text[window_start(text, 0, len(text), 8) :]
    'so 7'
    >>> window_start("1" + "0" * 10, 0, 11, 8)
    11
    """
    if end - start <= limit:
        return start
    cut = end - limit
    if text[cut - 1].isspace() or text[cut].isspace():
        return cut
    gap = _SPACE.search(text, cut, end)
    return gap.end() if gap is not None else end


def window_end(text: str, start: int, cut: int) -> int:
    """Where a text ``text[start:]`` read up to ``cut`` ends: at ``cut``, moved back before the
    token it falls inside ("is 1000…0" cut inside its zeros names a smaller number); ``start``
    when no whole token is left.

    >>> text = "is 7 and 1" + "0" * 10
    >>> text[: window_end(text, 0, 15)]
    'is 7 and'
    """
    if cut >= len(text) or text[cut].isspace() or text[cut - 1].isspace():
        return cut
    last = max(text.rfind(space, start, cut) for space in " \t\n\r")
    return last if last > start else start


class ScannedText:
    """A text with its maths regions and sentence breaks, found once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.regions = math_regions(text)
        self._region_starts = [start for start, _ in self.regions]
        self.breaks = [b for b in _sentence_breaks(text) if not self.inside(b[0])]
        self._break_starts = [start for start, _ in self.breaks]
        self._good: list[int] | None = None

    def inside(self, position: int) -> bool:
        """True when ``position`` lies strictly inside a maths region."""
        at = bisect.bisect_left(self._region_starts, position) - 1
        return at >= 0 and self.regions[at][0] < position < self.regions[at][1]

    def region_at(self, position: int) -> tuple[int, int] | None:
        """The maths region holding ``position`` (its delimiters included), or None."""
        at = bisect.bisect_right(self._region_starts, position) - 1
        if at >= 0 and self.regions[at][0] <= position < self.regions[at][1]:
            return self.regions[at]
        return None

    def sentence_end(self, position: int) -> int:
        """Where the sentence holding ``position`` ends (the next break, or the end)."""
        at = bisect.bisect_left(self._break_starts, position)
        return self.breaks[at][0] if at < len(self.breaks) else len(self.text)

    def sentence_start(self, position: int) -> int:
        """Where the sentence holding ``position`` starts."""
        at = bisect.bisect_right(self._break_starts, position) - 1
        while at >= 0 and self.breaks[at][1] > position:
            at -= 1
        return self.breaks[at][1] if at >= 0 else 0

    def closing_sentence(self, end: int | None = None) -> tuple[int, int]:
        """The last sentence of ``text[:end]`` that has a word or a number in it (in
        logarithmic time: whether each full sentence has one is found once)."""
        end = len(self.text) if end is None else end
        at = bisect.bisect_left(self._break_starts, end)  # breaks[:at] start before end
        start = self.breaks[at - 1][1] if at > 0 else 0
        if start < end and _ALNUM.search(self.text, max(start, end - MAX_SENTENCE_CHARS), end):
            return start, end
        good = self._last_good()[at - 1] if at > 0 else -1
        if good < 0:
            return 0, end
        return (self.breaks[good - 1][1] if good > 0 else 0), self.breaks[good][0]

    def _last_good(self) -> list[int]:
        """For each full sentence i (ending at break i), the last sentence <= i with a word or
        a number in it, or -1."""
        if self._good is None:
            good, last = [], -1
            for i, (stop, _) in enumerate(self.breaks):
                start = self.breaks[i - 1][1] if i > 0 else 0
                if start < stop and _ALNUM.search(self.text, start, stop):
                    last = i
                good.append(last)
            self._good = good
        return self._good


_ALNUM = re.compile(r"[A-Za-z0-9]")


def closing_sentence_span(text: str) -> tuple[int, int]:
    """The span of the last sentence of ``text`` that has a word or a number in it.

    >>> text = "We count cases. So there are 239 strings."
    >>> start, end = closing_sentence_span(text)
    >>> text[start:end]
    'So there are 239 strings.'
    """
    return ScannedText(text).closing_sentence()


# Two-letter words that are prose, never a variable of an answer ("3 or 239", "2 is it").
PROSE_PAIRS = frozenset(
    {"or", "is", "if", "of", "in", "on", "at", "to", "as", "be", "by", "we", "so", "it", "an"}
    | {"no", "do", "us", "he", "am", "my", "me", "up", "go"}
)
_OPERATORS = frozenset("-+*/^!=<>(){}[]_⋅·×√π∑∏−±∓…≤≥≠")


def _token_end(text: str, index: int, end: int) -> int:
    """End of the maths token at ``index`` (``index`` itself when none starts there).

    Tokens: a number (``2``, ``2,001,000``, ``2.5``) with at most a two-letter suffix
    (``2n``), a one- or two-letter variable standing alone (not ``or``, ``is``, …), a function
    written in letters and applied (``sqrt(3)``, ``floor(n/2)``, ``sum_(i=1)``), a LaTeX command,
    an operator or bracket.
    """
    char = text[index]
    if char.isdigit() and char.isascii():
        stop = index + 1
        while stop < end and (text[stop].isdigit() or _thousands_comma(text, stop, end)):
            stop += 1
        if stop + 1 < end and text[stop] == "." and text[stop + 1].isdigit():
            stop += 1
            while stop < end and text[stop].isdigit():
                stop += 1
        letters = stop
        while letters < end and letters - stop < 3 and is_ascii_letter(text[letters]):
            letters += 1
        if 0 < letters - stop <= 2 and not (letters < end and is_ascii_letter(text[letters])):
            return letters
        return stop
    if is_ascii_letter(char):
        if index > 0 and is_ascii_letter(text[index - 1]):
            return index
        stop = index
        while stop < end and stop - index < 3 and is_ascii_letter(text[stop]):
            stop += 1
        word = text[index:stop]
        if len(word) <= 2 and not (stop < end and is_ascii_letter(text[stop])):
            return index if word.lower() in PROSE_PAIRS else stop
        return _applied_function_end(text, index, end)
    if char == "\\":
        stop = index + 1
        while stop < end and is_ascii_letter(text[stop]):
            stop += 1
        return stop if stop > index + 1 else index
    if char in _OPERATORS:
        return index + 1
    if text.startswith("...", index) and index > 0 and not text[index - 1].isspace():
        return index + 3  # "(x-2)...(x-2022)": an ellipsis inside an expression
    return index


#: Functions that ASCII maths writes in letters ("sqrt(3)/3", "2^floor(n/2)", "sum_(i=1)^n").
MATHS_FUNCTIONS = frozenset(
    {"sqrt", "floor", "ceil", "sum", "prod", "log", "ln", "sin", "cos", "tan", "exp", "max"}
    | {"min", "gcd", "lcm", "binom", "arctan", "abs"}
)


def _applied_function_end(text: str, index: int, end: int) -> int:
    """End of a function name at ``index`` that is applied (followed by "(", "_", "^" or "{"),
    else ``index``: "floor(n/2)" is maths, "floor plan" is prose."""
    stop = index
    while stop < end and stop - index < 7 and is_ascii_letter(text[stop]):
        stop += 1
    if text[index:stop] in MATHS_FUNCTIONS and stop < end and text[stop] in "(_^{":
        return stop
    return index


def _thousands_comma(text: str, index: int, end: int) -> bool:
    """True for the comma of "2,001,000": followed by exactly three digits (not "1, 2")."""
    digits = text[index + 1 : index + 5]
    return (
        text[index] == ","
        and len(digits) >= 3
        and digits[:3].isdigit()
        and index + 4 <= end
        and not digits[3:4].isdigit()
    )


def is_ascii_letter(char: str) -> bool:
    return char.isascii() and char.isalpha()


def expression_end(text: str, start: int, end: int | None = None) -> int:
    """End of the maths-looking run at ``text[start:]`` (``start`` when there is none).

    A run is tokens (:func:`_token_end`) separated by spaces or tabs; it stops at a word of
    three or more letters. One pass, no backtracking (the regular expression this replaces
    could split a run of n digits in 2^(n-1) ways).

    >>> text = "is 2^(n-1) ways"
    >>> text[3 : expression_end(text, 3)]
    '2^(n-1)'
    >>> text = "3 or 239 strings"
    >>> text[: expression_end(text, 0)]
    '3'
    """
    end = len(text) if end is None else end
    index = last = start
    opened: list[int] = []  # open brackets: inside them a comma separates coordinates
    while index < end:
        char = text[index]
        stop = index + 1 if char == "," and opened else _token_end(text, index, end)
        if stop == index:
            break
        if stop == index + 1 and char in "([{":
            opened.append(index)
        elif stop == index + 1 and char in ")]}" and opened:
            opened.pop()
        last = index = stop
        while index < end and text[index] in " \t":
            index += 1
    if opened and index < end and is_ascii_letter(text[index]):
        # "2 (attained by …)": a word inside a bracket it opened; the run ends before it.
        last = opened[0]
        while last > start and text[last - 1] in " \t":
            last -= 1
    return last


def leading_expression(
    text: str, start: int, end: int, kind: CandidateKind
) -> AnswerCandidate | None:
    """The maths-looking run at ``start``, or None. A bare variable followed by a word ("n
    factorial", "no two") is prose, not an answer; a "$" before a digit is money ("$1.50")."""
    if text.startswith("$", start) and text[start + 1 : start + 2].isdigit():
        closer = text.find("$", start + 1, end)
        if closer >= 0 and not text[closer - 1].isspace():
            return None  # "$0,1,4$": maths, read as a region
        start += 1
    stop = expression_end(text, start, end)
    if stop == start or (found := trimmed_candidate(text, start, stop, kind)) is None:
        return None
    rest = text[found.end : end].lstrip()
    if found.text.isalpha() and rest[:1].isalpha():
        return None
    return found


def value_list_span(text: str, offset: int = 0) -> tuple[int, int] | None:
    """Span (plus ``offset``) of the first run of two or more values joined by ",", "or",
    "and" in ``text`` ("$0$, $1$, or $-1$", "3 or 239", "x = 3 or x = 239"), else None.

    >>> value_list_span("We get $0$, $1$, or $-1$.")
    (7, 24)
    >>> value_list_span("The minimum is 11") is None
    True
    """
    index, length = 0, len(text)
    regions = math_regions(text)
    region_at = {start: end for start, end in regions}
    while index < length:
        first = value_end_at(text, index, region_at)
        if first is None:
            index += 1
            continue
        if _QUANTIFIER_BEFORE.search(text, max(0, index - 12), index):
            index = first  # "For all $x, y$, $w \ge 20$": the domain, not a value offered
            continue
        values, stop, cursor, joined_by_word = 1, first, first, False
        while True:
            after, word = _separator(text, cursor)
            if after is None:
                break
            following = value_end_at(text, after, region_at)
            if following is None:
                # "0 and any positive integer below 100": a value joined to a quantified
                # phrase is a list too (the phrase stands for more values).
                quantified = _QUANTIFIED.match(text, after)
                if word and quantified is not None:
                    values, stop = values + 1, len(text.rstrip(_TRIM))
                break
            values += 1
            joined_by_word |= word
            stop = cursor = following
        if values >= 2:
            return offset + index, offset + stop
        index = max(first, index + 1)
    return None


def list_value_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The spans of the values of the list ``text[start:end]`` (a span of
    :func:`value_list_span`)."""
    region_at = {a: b for a, b in math_regions(text)}
    spans: list[tuple[int, int]] = []
    index = start
    while index < end:
        stop = value_end_at(text, index, region_at)
        if stop is None or stop > end:
            break
        spans.append((index, stop))
        after, _word = _separator(text, stop)
        if after is None:
            break
        index = after
    return spans


def value_end_at(text: str, index: int, region_at: dict[int, int]) -> int | None:
    """End of a value starting exactly at ``index`` (a maths region or an expression)."""
    if index in region_at:
        return region_at[index]
    if index > 0 and (text[index - 1].isalnum() or text[index - 1] == "\\"):
        return None
    stop = expression_end(text, index)
    if stop == index:
        return None
    value = text[index:stop].strip()
    # A lone bracket or operator is not a value; a value holds a digit or a variable.
    if not any(c.isalnum() for c in value):
        return None
    return stop


_QUANTIFIER_BEFORE = re.compile(r"\bfor\s+(?:all|any|every|each)\s+$", re.IGNORECASE)
_QUANTIFIED = re.compile(r"(?:any|all|every|each|some|other|several|many)\b", re.IGNORECASE)
_SEPARATOR = re.compile(
    r"[ \t]*(?:,[ \t]*(?:(?:or|and)[ \t]+)?|(?:or|and|to|through)[ \t]+)", re.IGNORECASE
)


def _separator(text: str, index: int) -> tuple[int | None, bool]:
    match = _SEPARATOR.match(text, index)
    if match is None:
        return None, False
    return match.end(), bool(re.search(r"or|and|to|through", match.group(), re.IGNORECASE))


def value_count(text: str) -> int:
    """How many values ``text`` offers: 1 for one value, more for a list ("1, 2 and 3").

    Commas inside brackets do not separate (``(2, 1)`` is one pair).

    >>> value_count("3"), value_count("3 or 239"), value_count("(2, 1)"), value_count("1, 2, 3")
    (1, 2, 1, 3)
    """
    depth, count = 0, 1
    for match in re.finditer(r"[([{]|[)\]}]|,|\b(?:or|and)\b", text):
        token = match.group()
        if token in "([{":
            depth += 1
        elif token in ")]}":
            depth = max(depth - 1, 0)
        elif depth == 0:
            count += 1
    if count > 1 and text.count(",") and re.search(r"\b(?:or|and)\b", text):
        # "1, 2, and 3": the ", and" is one separator, not two.
        count -= len(re.findall(r",\s*(?:or|and)\b", text))
    return count


def brackets_close(text: str) -> bool:
    """True when ``text`` closes as many brackets as it opens ("[0, 1)" counts as closed)."""
    return sum(text.count(c) for c in "([{") == sum(text.count(c) for c in ")]}")


_RELATION_OR_OPERATOR = frozenset("=<>≤≥≠^_+*/")


def blank_ascii_maths(text: str) -> str:
    """``text`` with every maths-looking run that holds a relation or an operator blanked (same
    length), so that the words around a formula written in ASCII read as one phrase ("the
    sequence defined by x_1 = 1, x_(n+1) = x_n^2 + 1 is not periodic"). One pass.

    >>> blank_ascii_maths("x_1 = 1 is odd, n is 5")
    '        is odd, n is 5'
    """
    out = list(text)
    index = 0
    while index < len(text):
        if index > 0 and (text[index - 1].isalnum() or text[index - 1] == "\\"):
            index += 1
            continue
        stop = expression_end(text, index)
        if stop > index:
            if _RELATION_OR_OPERATOR.intersection(text[index:stop]):
                out[index:stop] = " " * (stop - index)
            index = stop
        else:
            index += 1
    return "".join(out)


_POWER = re.compile(r"\s*\^\s*\{?\s*(\d+)\s*\}?")


def factor_count(text: str) -> int:
    """How many factors a product writes at its top level, a power counting its exponent
    ("(x+1)(x-1)^2" is 3): bracketed groups side by side or joined by "*", "\\cdot", "×".
    A text that is no product of brackets counts 1. One pass.

    >>> factor_count("(x^2+x+1)(x^2-x+1)(x^4-x^2+1)"), factor_count("(x+1)^2 (x-1)")
    (3, 3)
    >>> factor_count("x^2 + 1"), factor_count("$(x+1) \\cdot (x-1)$")
    (1, 2)
    """
    body = text.strip().strip("$").replace("\\left", "").replace("\\right", "")
    body = body.replace("\\cdot", "*").replace("\\times", "*").replace("×", "*")
    count, depth, index, groups = 0, 0, 0, 0
    while index < len(body):
        char = body[index]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0 and char == ")":
                groups += 1
                power = _POWER.match(body, index + 1)
                count += int(power.group(1)) if power and int(power.group(1)) < 64 else 1
                if power:
                    index = power.end() - 1
        elif depth == 0 and char in "+-" and index > 0:
            return 1  # a sum at the top level: not a product
        index += 1
    return count if groups >= 2 or (groups == 1 and count > 1) else 1
