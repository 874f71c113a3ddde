"""Small numbers written as words, shared by the answer layer and the task families.

Answers and golds say counts in words ("exactly two sequences", "one of the integers"); one
table keeps the grader's reading of them and the gold's reading of them the same.
"""

from __future__ import annotations

#: Lower-case number words and their digits: the counts a reply or a gold spells out.
NUMBER_WORDS: dict[str, str] = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
}  # fmt: skip
