"""The mergeable bootstrap weights (legival_core.stats.poisson_bootstrap)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from legival_core.stats.poisson_bootstrap import MAX_WEIGHT, poisson_weights, weights_of_bits

MOD = 2**64


def _splitmix(z: int) -> int:
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) % MOD
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) % MOD
    return z ^ (z >> 31)


def _weight_by_hand(key: str, replicate: int, seed: int) -> int:
    """The documented recipe in plain integers: hash, mix, uniform, inverse Poisson(1) CDF."""
    digest = hashlib.blake2b(f"{seed}\x1f{key}".encode(), digest_size=8).digest()
    x = _splitmix((int.from_bytes(digest, "big") + (replicate + 1) * 0x9E3779B97F4A7C15) % MOD)
    return _weight_of_u((x >> 11) / 2**53)


def _weight_of_u(u: float) -> int:
    """The inverse Poisson(1) CDF by hand: the number of k with F(k) <= u."""
    k, cdf = 0, math.exp(-1.0)
    while cdf <= u:
        k += 1
        cdf += math.exp(-1.0) / math.factorial(k)
    return k


def test_the_cells_give_every_53_bit_value_its_weight_at_every_step_of_the_cdf() -> None:
    # each step of F falls between two 53-bit values b - 1 and b: both sides of every step,
    # the ends, and random values (the cells look most values up by their top 16 bits)
    steps, cdf = [], 0.0
    for k in range(MAX_WEIGHT):
        cdf += math.exp(-1.0) / math.factorial(k)
        steps.append(math.ceil(cdf * 2**53))  # the least b with b / 2^53 >= F(k)
    near = {b + d for b in steps for d in (-2, -1, 0, 1) if 0 <= b + d < 2**53}
    rng = np.random.default_rng(3)
    drawn = rng.integers(0, 2**53, size=20_000, dtype=np.uint64).tolist()
    values = sorted(near | {0, 2**53 - 1} | set(drawn))
    got = weights_of_bits(np.array(values, dtype=np.uint64))
    assert got.dtype == np.uint8
    assert got.tolist() == [_weight_of_u(b / 2**53) for b in values]


def test_weights_follow_the_documented_recipe() -> None:
    keys = ["p-1", "p-2", "gsm8k/17", "é"]
    got = poisson_weights(keys, n_boot=30, seed=11)
    expected = [[_weight_by_hand(k, r, 11) for k in keys] for r in range(30)]
    assert got.tolist() == expected


def test_a_key_weights_do_not_depend_on_the_other_keys_or_their_order() -> None:
    keys = [f"t{i}" for i in range(50)]
    whole = poisson_weights(keys, 40, seed=2)
    chunks = [keys[i::7] for i in range(7)]
    for chunk in chunks:
        part = poisson_weights(chunk[::-1], 40, seed=2)
        columns = [keys.index(k) for k in chunk[::-1]]
        assert np.array_equal(part, whole[:, columns])


def test_seed_and_replicate_change_the_weights() -> None:
    keys = [f"k{i}" for i in range(200)]
    a, b = poisson_weights(keys, 2, seed=0), poisson_weights(keys, 2, seed=1)
    assert not np.array_equal(a, b)
    assert not np.array_equal(a[0], a[1])


def test_weights_are_poisson_one() -> None:
    # 400,000 draws: the share of each k lies within 5 standard errors of e^-1 / k!
    w = poisson_weights([str(i) for i in range(20_000)], 20, seed=5).ravel()
    n = w.size
    for k in range(5):
        p = math.exp(-1.0) / math.factorial(k)
        assert abs((w == k).mean() - p) < 5 * math.sqrt(p * (1 - p) / n)
    assert abs(w.mean() - 1.0) < 5 / math.sqrt(n)
    assert int(w.max()) <= MAX_WEIGHT


def test_shapes_and_errors() -> None:
    assert poisson_weights([], 3).shape == (3, 0)
    assert poisson_weights(["a"], 0).shape == (0, 1)
    with pytest.raises(ValueError, match="n_boot must be >= 0"):
        poisson_weights(["a"], -1)
