"""Counter-based random numbers: a value is a pure function of (key, counter).

Masks and held-out choices must not depend on which batch an example lands in, on padding, on the number
of workers or on how far a resumed run had got. Hashing the identity of the thing being decided (example,
position, document ordinal) gives that for free, and it vectorises: one numpy expression per batch.
The mixer is SplitMix64's finaliser, whose outputs pass the usual statistical test batteries.
"""
from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on a uint64 array (wrapping arithmetic)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> _S30)) * _M1
        x = (x ^ (x >> _S27)) * _M2
    return x ^ (x >> _S31)


def combine(*parts: int | np.ndarray) -> np.ndarray:
    """Fold integers (or uint64 arrays, broadcast) into one well-mixed uint64 key."""
    key = np.zeros((), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for part in parts:
            part = np.asarray(part).astype(np.uint64)
            key = mix64(key * _GOLDEN + part + _GOLDEN)
    return key


def hash_bits(keys: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """64 random bits for each (key, counter) pair; keys [B] and counters [B, L] (or anything broadcastable)."""
    with np.errstate(over="ignore"):
        return mix64(np.asarray(keys, dtype=np.uint64) + (np.asarray(counters).astype(np.uint64) + np.uint64(1)) * _GOLDEN)


def hash_uniform(keys: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """Uniform floats in [0, 1) for each (key, counter) pair, from the top 53 bits."""
    return (hash_bits(keys, counters) >> _S11).astype(np.float64) * (1.0 / (1 << 53))
