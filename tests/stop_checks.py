"""Early-stop checks named by tests in a :class:`~precompute.backends.base.StopCheckSpec`.

vLLM's engine core imports them by name in its own process, so they live in a small module
that imports nothing heavy.
"""

from __future__ import annotations


def count_at_least(text: str, *, needle: str, count: int) -> bool:
    """True once ``needle`` occurs ``count`` times in ``text``.

    >>> count_at_least("a b c", needle=" ", count=2)
    True
    """
    return text.count(needle) >= count
