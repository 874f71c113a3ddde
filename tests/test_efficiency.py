"""Efficiency metrics: lengths, redundancy (with the real MiniLM), compression, backtracking."""

from __future__ import annotations

import math
import os
import zlib

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from legival_core.metrics import efficiency
from legival_core.metrics.efficiency import (
    REDUNDANCY_THRESHOLDS,
    SWEEP_THRESHOLDS,
    backtracking_share,
    compression_ratio,
    length_summary,
    normalised_lengths,
    redundancy_scores,
    redundancy_share,
    redundancy_sweep,
    resolve_threshold,
    step_similarities,
    trace_lengths,
)
from legival_core.text.segment import split_steps
from legival_core.text.tokens import count_tokens

# --------------------------------------------------------------------------------- lengths


def test_trace_lengths_counts_tokens_and_steps():
    texts = ["First we add. Then we divide by 3.14 to get x.", "", "Wait."]
    frame = trace_lengths(texts)
    assert frame.columns.tolist() == ["tokens", "steps"]
    assert frame["tokens"].tolist() == [count_tokens(t) for t in texts]
    # sentences: 2 ("First we add." | "Then … x."), 0 (empty), 1 ("Wait.")
    assert frame["steps"].tolist() == [2, 0, 1]
    assert frame["tokens"].dtype == np.int64


def _traces() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "teacher": pd.array(["a", "b", "c", "a", "b", "c"], dtype="string"),
            "problem_id": pd.array(["p1", "p1", "p1", "p2", "p2", "p2"], dtype="string"),
            "correct": [True, True, False, True, False, False],
            "tokens": [100, 300, 1000, 50, 25, 500],
            "steps": [4, 8, 20, 2, 1, 0],
        }
    )


def test_normalised_lengths_divide_by_median_of_correct_traces_of_the_problem():
    df = _traces()
    # p1: correct traces 100 and 300 → median 200 → 100/200, 300/200, 1000/200
    # p2: only trace a (50) correct → median 50 → 50/50, 25/50, 500/50
    assert normalised_lengths(df).tolist() == [0.5, 1.5, 5.0, 1.0, 0.5, 10.0]
    # steps: p1 median(4, 8) = 6 → 4/6, 8/6, 20/6 ; p2 median 2 → 1, 0.5, 0
    got = normalised_lengths(df, "steps")
    assert got.name == "steps_norm"
    assert got.tolist() == pytest.approx([4 / 6, 8 / 6, 20 / 6, 1.0, 0.5, 0.0])


def test_normalised_lengths_nan_without_a_correct_trace_and_keeps_the_index():
    df = _traces().set_index(pd.Index([10, 11, 12, 13, 14, 15]))
    df.loc[13, "correct"] = False  # now p2 has no correct trace
    df["problem_id"] = df["problem_id"].astype("category")
    got = normalised_lengths(df)
    assert got.index.tolist() == [10, 11, 12, 13, 14, 15]
    assert got.iloc[:3].tolist() == [0.5, 1.5, 5.0]
    assert got.iloc[3:].isna().all()


def test_normalised_lengths_names_the_missing_column():
    from legival_core.store.schema import SchemaError

    pattern = r"table 'normalised_lengths', field 'n': missing column\(s\) \['n'\]"
    with pytest.raises(SchemaError, match=pattern):
        normalised_lengths(_traces(), "n")


def test_length_summary_reports_raw_and_normalised_statistics():
    summary = length_summary(_traces(), by="teacher")
    # a: raw 100, 50 → mean 75, median 75 ; normalised 0.5, 1.0 → mean 0.75
    # b: raw 300, 25 → mean 162.5 ; normalised 1.5, 0.5 → mean 1.0
    # c: raw 1000, 500 → mean 750 ; normalised 5, 10 → mean 7.5
    assert summary.loc["a", "mean"] == 75.0
    assert summary.loc["b", "mean"] == 162.5
    assert summary.loc["c", "median"] == 750.0
    assert summary["mean_norm"].tolist() == [0.75, 1.0, 7.5]
    assert summary["n_traces"].tolist() == [2, 2, 2]


# ------------------------------------------------------------------------------ similarities


def test_step_similarities_by_hand():
    # s0 = (1,0,0), s1 = (0,1,0), s2 = (0.6,0.8,0), s3 = (0,1,0) (repeat of s1), s4 = (0,0,2)
    # r1 = cos(s1,s0) = 0 → j=0 ; r2 = max(0.6, 0.8) = 0.8 → j=1 ;
    # r3 = max(0, 1, 0.8) = 1 → j=1 ; r4 = 0 for every earlier step → first, j=0
    e = np.array([[1, 0, 0], [0, 1, 0], [0.6, 0.8, 0], [0, 1, 0], [0, 0, 2]], dtype=float)
    r, j = step_similarities(e)
    assert math.isnan(r[0])
    assert r[1:].tolist() == pytest.approx([0.0, 0.8, 1.0, 0.0])
    assert j == [None, 0, 1, 1, 0]


def test_step_similarities_edge_cases():
    r, j = step_similarities(np.zeros((0, 4)))
    assert r.shape == (0,) and j == []
    r, j = step_similarities(np.ones((1, 4)))
    assert math.isnan(r[0]) and j == [None]
    with pytest.raises(ValueError, match="row 1 is all zeros"):
        step_similarities(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="2-D"):
        step_similarities(np.ones(3))


def test_exact_repeats_never_exceed_one():
    # float32 rounding can make s·s slightly above 1; the clip keeps r ≤ 1 so τ = 1 counts 0
    rng = np.random.default_rng(0)
    e = rng.normal(size=(1, 384)).astype(np.float32)
    r, _ = step_similarities(np.repeat(e, 5, axis=0))
    assert np.all(r[1:] <= 1.0)
    assert redundancy_share(r, 1.0) == 0.0


@pytest.mark.parametrize("block", [1, 3, 7])
def test_blocked_similarities_equal_the_plain_double_loop(monkeypatch, block):
    monkeypatch.setattr(efficiency, "_SIMILARITY_BLOCK", block)
    rng = np.random.default_rng(1)
    e = rng.normal(size=(17, 5))
    unit = e / np.linalg.norm(e, axis=1, keepdims=True)
    r, j = step_similarities(e)
    for i in range(1, 17):
        cos = [float(unit[i] @ unit[k]) for k in range(i)]
        assert r[i] == pytest.approx(max(cos))
        assert j[i] == int(np.argmax(cos))


# ------------------------------------------------------------------------------- redundancy


def test_redundancy_share_by_hand():
    # r = [-, 0.9, 0.8, 0.85, 0.1]: above 0.8 are 0.9 and 0.85 (0.8 itself is not >) → 2/4
    r = [np.nan, 0.9, 0.8, 0.85, 0.1]
    assert redundancy_share(r) == 0.5
    # release profile τ = 0.85: only 0.9 → 1/4
    assert redundancy_share(r, "release") == 0.25
    assert redundancy_share(r, REDUNDANCY_THRESHOLDS["release"]) == 0.25


def test_one_step_and_empty_traces_have_zero_redundancy():
    assert redundancy_share([np.nan]) == 0.0
    assert redundancy_share([]) == 0.0
    assert redundancy_sweep([np.nan]).tolist() == [0.0] * 21


def test_redundancy_rejects_bad_input():
    with pytest.raises(ValueError, match="NaN at step 2"):
        redundancy_share([np.nan, 0.5, np.nan])
    with pytest.raises(ValueError, match="unknown redundancy profile 'loose'"):
        resolve_threshold("loose")
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        redundancy_share([np.nan, 0.5], 1.5)


def test_sweep_uses_the_published_21_thresholds_and_matches_single_shares():
    assert SWEEP_THRESHOLDS.tolist() == pytest.approx([k / 20 for k in range(21)])
    r = [np.nan, 0.12, 0.55, 0.97, 0.81, 0.3]
    sweep = redundancy_sweep(r)
    assert sweep.tolist() == [redundancy_share(r, t) for t in SWEEP_THRESHOLDS]
    # τ = 0: all 5 later steps > 0 → 1 ; τ = 0.5: 0.55, 0.97, 0.81 → 3/5 ; τ = 1 → 0
    assert sweep[0] == 1.0 and sweep[10] == 0.6 and sweep[20] == 0.0


@settings(max_examples=100, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 60), elements=st.floats(-1, 1)))
def test_sweep_is_monotone_non_increasing(values):
    values = values.copy()
    values[0] = np.nan
    sweep = redundancy_sweep(values)
    assert np.all(np.diff(sweep) <= 0)
    assert np.all((sweep >= 0) & (sweep <= 1))


@settings(max_examples=50, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 25), st.just(3)), elements=st.floats(-5, 5)))
def test_similarities_are_cosines_of_earlier_steps(e):
    if np.any(np.linalg.norm(e, axis=1) == 0):
        return
    r, j = step_similarities(e)
    unit = e / np.linalg.norm(e, axis=1, keepdims=True)
    for i in range(1, len(e)):
        assert 0 <= j[i] < i
        assert r[i] == pytest.approx(float(np.clip(unit[i] @ unit[j[i]], -1, 1)), abs=1e-9)
        assert r[i] >= float(np.max(unit[:i] @ unit[i])) - 1e-9


# ------------------------------------------------------------- redundancy with the real MiniLM


@pytest.fixture(scope="module")
def minilm():
    from legival_core.text.embedding import load_minilm

    return load_minilm("cpu")


DISTINCT = [
    "The train leaves the station at nine in the morning.",
    "Photosynthesis converts sunlight into chemical energy in plants.",
    "Let x denote the number of red marbles in the bag.",
    "The French Revolution began in 1789.",
    "Compile the program with optimisation flags enabled.",
    "My grandmother grows tomatoes in her garden every summer.",
    "The derivative of the sine function is the cosine function.",
]


@pytest.mark.slow
def test_planted_trace_redundancy_through_minilm(minilm):
    d = DISTINCT
    # 10 steps, 7 distinct sentences, 3 exact repeats (steps 3, 6, 9 repeat steps 2, 0, 5)
    steps = [d[0], d[1], d[2], d[2], d[3], d[4], d[0], d[5], d[6], d[4]]
    scores = redundancy_scores(steps, model=minilm)
    # repeats have r = 1 > 0.8; the 6 other later steps are unrelated topics (r < 0.8)
    # → share = 3 / (10 − 1) = 1/3
    assert scores.share == pytest.approx(3 / 9)
    assert scores.threshold == 0.8
    assert [scores.matched_step[i] for i in (3, 6, 9)] == [2, 0, 5]
    assert scores.max_similarity[[3, 6, 9]] == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)
    others = [1, 2, 4, 5, 7, 8]
    assert np.all(scores.max_similarity[others] < 0.8)
    # release profile (τ = 0.85) still counts exactly the three repeats
    assert redundancy_scores(steps, "release", model=minilm).share == pytest.approx(3 / 9)
    # one-step trace → 0 ; empty trace → 0
    single = redundancy_scores([d[0]], model=minilm)
    assert single.share == 0.0 and single.matched_step == [None]
    assert redundancy_scores([], model=minilm).share == 0.0


@pytest.mark.slow
def test_paraphrase_scores_higher_than_unrelated_step(minilm):
    steps = [
        "We need to find the area of the triangle.",
        "The weather was sunny yesterday.",
        "We have to compute the triangle's area.",
    ]
    scores = redundancy_scores(steps, model=minilm)
    assert scores.matched_step[2] == 0
    assert scores.max_similarity[2] > scores.max_similarity[1]


# --------------------------------------------------------------------------- compression


def test_compression_ratio_of_a_repeated_string():
    text = "Wait, let me check. " * 200  # 20 bytes × 200 = 4000 bytes
    ratio = compression_ratio(text)
    assert ratio == len(zlib.compress(text.encode(), 9)) / 4000
    # zlib stores the 20-byte unit once plus back-references: far below 5 % of 4000 bytes
    assert ratio < 0.05
    # twice the repeats → nearly the same compressed size over twice the bytes → smaller σ
    assert compression_ratio(text * 2) < ratio


def test_compression_ratio_is_capped_at_one():
    # zlib adds a 2-byte header and a 4-byte checksum: 3 bytes of text compress to > 3 bytes
    assert compression_ratio("abc") == 1.0
    assert compression_ratio("") == 1.0
    assert compression_ratio(os.urandom(2000)) == 1.0  # random bytes do not compress


def test_compression_ratio_counts_utf8_bytes():
    text = "π≈3.14159 " * 50  # 'π' 2 bytes + '≈' 3 bytes + "3.14159 " 8 bytes = 13 per unit
    assert len(text.encode()) == 650  # 13 × 50, not the 500 characters
    assert compression_ratio(text) == len(zlib.compress(text.encode(), 9)) / 650


#: A 3,000-byte trace-like text on which zlib's levels disagree: level 9 compresses it to 441
#: bytes, the default level 6 to 439.
MODULAR_TRIES = "".join(
    f"Try n = {i}: 2 * {i} mod 7 = {2 * i % 7}, not yet. " for i in range(1, 80)
)[:3000]


def test_compression_ratio_is_zlib_level_9_by_hand() -> None:
    raw = MODULAR_TRIES.encode()
    assert len(raw) == 3000
    assert len(zlib.compress(raw, 9)) == 441
    # σ = 441 / 3000 = 0.147 (level 6 would give 439 / 3000 = 0.146333…)
    assert compression_ratio(MODULAR_TRIES) == 0.147
    # "Wait, let me check. " × 200 = 4,000 bytes -> 57 bytes at level 9: σ = 57 / 4000 = 0.01425
    assert compression_ratio("Wait, let me check. " * 200) == 0.01425


# ------------------------------------------------------------------------- backtracking


def test_backtracking_share_by_hand():
    # flagged 2, 5, 5 (duplicate) of 8 steps → 2 distinct / 8 = 0.25
    assert backtracking_share([2, 5, 5], 8) == 0.25
    assert backtracking_share([], 8) == 0.0
    assert backtracking_share([], 0) == 0.0
    # one step outside 1..4 dropped: {1, 4} of 4 → 0.5
    assert backtracking_share([0, 1, 4, 9], 4, on_invalid="drop") == 0.5


def test_backtracking_share_rejects_invalid_steps():
    with pytest.raises(ValueError, match=r"step number 9 is outside 1\.\.4"):
        backtracking_share([9], 4)
    with pytest.raises(ValueError, match="integers"):
        backtracking_share([1.5], 4)
    with pytest.raises(ValueError, match="on_invalid"):
        backtracking_share([1], 4, on_invalid="ignore")


def test_backtracking_share_of_the_lexical_detector_on_a_real_split():
    from legival_core.metrics.backtracking import lexical_backtracking

    text = "So x = 4. Wait, that is wrong. Let me redo it: x = 5. The answer is 5."
    steps = split_steps(text)
    # 4 sentences; "Wait" opens step 2, "Let me redo" opens step 3 → 2/4
    assert len(steps) == 4
    assert backtracking_share(lexical_backtracking(steps), len(steps)) == 0.5


# ------------------------------------------------- embed_sentences (dedupe, order, caches)


class CountingModel:
    """The real MiniLM, with a record of what each encode call was given."""

    def __init__(self, model):
        self.model = model
        self.calls: list[list[str]] = []

    def encode(self, texts, **kwargs):
        self.calls.append(list(texts))
        return self.model.encode(texts, **kwargs)

    def get_sentence_embedding_dimension(self):
        return self.model.get_sentence_embedding_dimension()


@pytest.mark.slow
def test_embed_sentences_dedupes_sorts_by_length_and_caches(minilm):
    from legival_core.text.embedding import embed_sentences

    model = CountingModel(minilm)
    texts = ["Wait.", "Let me check the sum again.", "Wait.", "So x = 3.", "Wait."]
    vectors = embed_sentences(texts, model=model)
    # 3 distinct texts, encoded once each, longest first
    assert model.calls == [["Let me check the sum again.", "So x = 3.", "Wait."]]
    assert vectors.shape == (5, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(vectors[0], vectors[2]) and np.array_equal(vectors[0], vectors[4])
    bare = minilm.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert np.allclose(vectors, bare, atol=1e-5)
    # the second call only encodes the text it has not seen
    again = embed_sentences(["So x = 3.", "A new step."], model=model)
    assert model.calls[1] == ["A new step."]
    assert np.array_equal(again[0], vectors[3])
    # everything cached: no encode call at all
    embed_sentences(texts, model=model)
    assert len(model.calls) == 2


@pytest.mark.slow
def test_embed_sentences_disk_cache_survives_a_fresh_model_object(minilm, tmp_path):
    from legival_core.text.embedding import embed_sentences

    path = tmp_path / "vectors.sqlite"
    texts = ["First step.", "Second, longer step of the trace.", "First step."]
    first = CountingModel(minilm)
    stored = embed_sentences(texts, model=first, model_key="minilm-test", disk_cache=path)
    assert len(first.calls) == 1 and path.is_file()
    fresh = CountingModel(minilm)  # new object: its memory cache is empty
    loaded = embed_sentences(texts, model=fresh, model_key="minilm-test", disk_cache=path)
    assert fresh.calls == []
    assert np.array_equal(stored, loaded)
    other_key = CountingModel(minilm)  # rows of another model key never mix
    embed_sentences(texts, model=other_key, model_key="other", disk_cache=path)
    assert len(other_key.calls) == 1


@pytest.mark.slow
def test_embed_sentences_default_model_and_edge_cases(minilm):
    from legival_core.text.embedding import embed_sentences, load_minilm

    assert load_minilm("cpu") is minilm  # loaded once per process
    # model=None: the packaged MiniLM on the auto-picked device, same vectors
    default = embed_sentences(["Let me re-check step 2."])
    expected = minilm.encode(["Let me re-check step 2."], normalize_embeddings=True)
    assert default.shape == (1, 384)
    assert np.allclose(default, expected, atol=1e-5)
    assert embed_sentences([], model=minilm).shape == (0, 384)
    with pytest.raises(ValueError, match="model_key"):
        embed_sentences(["x"], model=CountingModel(minilm), disk_cache=True)
    with pytest.raises(TypeError, match="item 1 is int"):
        embed_sentences(["x", 3], model=minilm)
    # lone surrogates from broken model output are hashed and embedded, not rejected
    assert embed_sentences(["bad \ud800 text"], model=minilm).shape == (1, 384)
