"""Bootstrap weights that merge: each item's weight in each replicate depends only on the seed,
the item's key and the replicate number.

The classical bootstrap draws n items with replacement: item i appears w_i times, with
(w_1, ..., w_n) multinomial, so one item's count depends on how many others there are and in
what order they were drawn. That cannot be computed one chunk of the data at a time. The Poisson
bootstrap (Hanley & MacGibbon, 2006; used for streams by Oza & Russell, 2001, and at scale by
Chamandy et al., 2012, "Estimating uncertainty for massive data streams") draws each w_i
independently from Poisson(1) instead: for large n it has the same mean (1) and variance (1)
per item, and a weighted statistic such as ``sum w_i v_i / sum w_i`` has the same bootstrap
distribution to first order. Here w_i is a fixed function of ``(seed, key_i, replicate)``, so a
chunk computes its items' weights alone, partial sums from different chunks (or machines) add up,
and the result is the same for any split of the data and any order of its rows.

The replicates are not those of a multinomial bootstrap with the same seed: a replicate's total
weight varies (its expected value is n) instead of being exactly n.

Mechanism: a 64-bit key hash (BLAKE2b of ``seed`` and the key), mixed with the replicate number by
the SplitMix64 finaliser (Steele, Lea & Flood, 2014), gives a uniform u in [0, 1) with 53 bits;
the weight is the smallest k with F(k) > u, F the Poisson(1) distribution function. Only integer
arithmetic modulo 2^64 and one table lookup: the same weights on every platform.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

#: A dataclass of partial sums (arrays and numbers, every field additive).
Sums = TypeVar("Sums", bound="DataclassInstance")
#: A key of per-chunk counts or sets (a teacher, a (teacher, dataset) pair, ...).
Key = TypeVar("Key", bound=Hashable)

#: Largest weight produced: P(Poisson(1) > 20) < 1e-19, below the 2^-53 resolution of u.
MAX_WEIGHT = 20

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def _poisson_cdf() -> np.ndarray:
    """F(k) = P(Poisson(1) <= k) for k = 0..MAX_WEIGHT - 1 (the table searched for k)."""
    terms = [math.exp(-1.0) / math.factorial(k) for k in range(MAX_WEIGHT)]
    return np.cumsum(terms)


_CDF = _poisson_cdf()

#: u's 53 bits are looked up by their top 16 first: a cell of u values that all get the same
#: weight answers for every value in it, and only the few cells a step of F falls inside are
#: searched (the same weights as searching every u, at a fraction of the time).
_CELL_BITS = 16
_CELL_SHIFT = np.uint64(53 - _CELL_BITS)


def _weight_cells() -> tuple[np.ndarray, np.ndarray]:
    """Per cell of u's top 16 bits: the weight of its lowest value, and whether its highest
    value has another weight (then each u in the cell is searched)."""
    lowest = np.arange(2**_CELL_BITS, dtype=np.uint64) << _CELL_SHIFT
    highest = lowest + ((np.uint64(1) << _CELL_SHIFT) - np.uint64(1))
    # below 2^53 every value is a float exactly, and so is its product by 2^-53
    low = np.searchsorted(_CDF, lowest.astype(np.float64) * 2.0**-53, side="right")
    high = np.searchsorted(_CDF, highest.astype(np.float64) * 2.0**-53, side="right")
    return low.astype(np.uint8), low != high


_CELL_WEIGHT, _CELL_SPLIT = _weight_cells()


def weights_of_bits(bits: np.ndarray) -> np.ndarray:
    """Poisson(1) weights (uint8) of 53-bit integers ``bits``: ``#{j : F(j) <= bits / 2^53}``.

    >>> bits = np.array([0, 2**52, 2**53 - 1], dtype=np.uint64)  # u = 0, 1/2, 1 - 2^-53
    >>> weights_of_bits(bits).tolist()  # F(0) <= 1/2 < F(1); F(17) <= 1 - 2^-53 < F(18)
    [0, 1, 18]
    """
    cells = (bits >> _CELL_SHIFT).astype(np.intp)
    weights = _CELL_WEIGHT[cells]
    split = _CELL_SPLIT[cells]
    if split.any():
        uniform = bits[split].astype(np.float64) * 2.0**-53
        weights[split] = np.searchsorted(_CDF, uniform, side="right")
    return weights


def key_hashes(keys: Iterable[str], seed: int) -> np.ndarray:
    """One unsigned 64-bit hash per key: the first 8 bytes (big-endian) of the BLAKE2b digest of
    ``"<seed>\\x1f<key>"``.

    >>> digest = hashlib.blake2b("0\x1fp1".encode(), digest_size=8).digest()
    >>> int(key_hashes(["p1"], 0)[0]) == int.from_bytes(digest, "big")
    True
    """
    prefix = f"{int(seed)}\x1f".encode()
    digests = [
        int.from_bytes(
            hashlib.blake2b(prefix + str(k).encode("utf-8"), digest_size=8).digest(), "big"
        )
        for k in keys
    ]
    return np.array(digests, dtype=np.uint64)


def splitmix64(values: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser applied elementwise to uint64 ``values`` (arithmetic mod 2^64).

    >>> int(splitmix64(np.array([0], dtype=np.uint64))[0])
    0
    >>> hex(int(splitmix64(np.array([1], dtype=np.uint64))[0]))
    '0x5692161d100b05e5'
    """
    z = np.asarray(values, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= _MIX_1
        z ^= z >> np.uint64(27)
        z *= _MIX_2
        z ^= z >> np.uint64(31)
    return z


def poisson_weights(keys: Iterable[str], n_boot: int, seed: int = 0) -> np.ndarray:
    """``(n_boot, n)`` Poisson(1) bootstrap weights (uint8), column i for ``keys[i]``.

    Replicate r (0-based) of key k: ``x = splitmix64(h(k) + (r + 1) * 0x9E3779B97F4A7C15)``,
    ``u = (x >> 11) / 2^53`` and the weight is ``#{j : F(j) <= u}``, F the Poisson(1)
    distribution function (so weight 0 for u < e^-1 ≈ 0.368, 1 for u < 2e^-1, ...).

    A key's column is the same whatever keys come with it and in what order: weights computed
    chunk by chunk equal those computed at once.

    >>> w = poisson_weights(["a", "b", "c"], n_boot=4, seed=7)
    >>> w.shape, w.dtype.name
    ((4, 3), 'uint8')
    >>> bool((poisson_weights(["c", "a"], 4, seed=7) == w[:, [2, 0]]).all())
    True
    """
    if n_boot < 0:
        raise ValueError(f"poisson_weights: n_boot must be >= 0, got {n_boot}")
    hashes = key_hashes(keys, seed)
    replicate = np.arange(1, int(n_boot) + 1, dtype=np.uint64)[:, None]
    with np.errstate(over="ignore"):
        mixed = splitmix64(hashes[None, :] + replicate * _GOLDEN)
    return weights_of_bits(mixed >> np.uint64(11))


def add_fields(first: Sums, second: Sums) -> Sums:
    """Two partial sums of one kind added field by field (a dataclass whose every field adds:
    numbers, arrays of one shape): how the sums of two chunks of the data merge into those of
    both.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Pair:
    ...     total: float
    ...     counts: np.ndarray
    >>> add_fields(Pair(1.5, np.array([1, 2])), Pair(2.0, np.array([3, 4])))
    Pair(total=3.5, counts=array([4, 6]))
    """
    return replace(
        first, **{f.name: getattr(first, f.name) + getattr(second, f.name) for f in fields(first)}
    )


def check_alike(parts: Sequence[object], names: Sequence[str], refusal: str) -> None:
    """Refuse to merge partials made under other settings: every part's attributes ``names``
    must equal the first part's, else ``ValueError(refusal + the two differing values)``.

    >>> from types import SimpleNamespace as S
    >>> check_alike([S(n_boot=5, seed=0), S(n_boot=5, seed=1)], ("n_boot", "seed"), "no")
    Traceback (most recent call last):
    ValueError: no: (n_boot, seed) (5, 0) vs (5, 1)
    """
    first = tuple(getattr(parts[0], name) for name in names)
    for part in parts[1:]:
        other = tuple(getattr(part, name) for name in names)
        if other != first:
            raise ValueError(f"{refusal}: ({', '.join(names)}) {first} vs {other}")


def add_counts(maps: Iterable[Mapping[Key, int]]) -> dict[Key, int]:
    """Counts by key of several chunks added (a key missing from a chunk counts 0).

    >>> add_counts([{"a": 1}, {"a": 2, "b": 1}])
    {'a': 3, 'b': 1}
    """
    total: dict[Key, int] = {}
    for counts in maps:
        for key, n in counts.items():
            total[key] = total.get(key, 0) + n
    return total


def unite_sets(maps: Iterable[Mapping[Key, frozenset[str]]]) -> dict[Key, frozenset[str]]:
    """Sets by key of several chunks united.

    >>> unite_sets([{"a": frozenset("x")}, {"a": frozenset("y")}])["a"] == frozenset("xy")
    True
    """
    united: dict[Key, frozenset[str]] = {}
    for sets in maps:
        for key, names in sets.items():
            united[key] = united.get(key, frozenset()) | names
    return united
