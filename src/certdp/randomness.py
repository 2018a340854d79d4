"""Randomness for sampling from mechanisms.

``rng=None`` means draws from the operating system's cryptographically secure generator
(``os.urandom``); an ``int`` seed or a ``numpy.random.Generator`` gives a reproducible run for
tests and experiments. Nothing in certdp has a fixed default seed.
"""

from __future__ import annotations

import os
from typing import Union

import numpy as np

RNGLike = Union[None, int, np.random.Generator, "CounterRNG"]
"""What every ``rng=`` argument takes; a :class:`CounterRNG` is accepted where only uniforms,
choices and permutations are drawn (sampling a mechanism's outputs, an LR-Geo user)."""

_TWO53 = float(2**53)


def uniforms(size: int, rng: RNGLike = None) -> np.ndarray:
    """Return ``size`` independent uniforms in [0, 1) with 53 random bits each.

    With ``rng=None`` the bits come from ``os.urandom`` (a CSPRNG); otherwise from a numpy
    ``Generator`` (seeded from ``rng`` when it is an int).
    """
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    if rng is None:
        raw = np.frombuffer(os.urandom(8 * size), dtype=np.uint64)
        return (raw >> np.uint64(11)).astype(np.float64) / _TWO53
    if isinstance(rng, CounterRNG):
        return np.asarray(rng.random(size))
    return as_generator(rng).random(size)


def as_generator(rng: RNGLike) -> np.random.Generator:
    """Turn ``rng`` into a numpy Generator; ``None`` seeds one from OS entropy."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng(int.from_bytes(os.urandom(16), "little"))
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    if isinstance(rng, CounterRNG):
        raise TypeError("a CounterRNG draws uniforms, choices and permutations only (mechanism sampling, LR-Geo "
                        "users); pass an int seed or a numpy Generator here")
    raise TypeError(f"rng must be None, an int seed or a numpy Generator, got {type(rng).__name__}")


def sample_rows(cdf_rows: np.ndarray, rng: RNGLike = None) -> np.ndarray:
    """Inverse-CDF sampling: one index per row of ``cdf_rows`` (rows of cumulative sums)."""
    u = uniforms(cdf_rows.shape[0], rng) * cdf_rows[:, -1]
    idx = (cdf_rows <= u[:, None]).sum(axis=1)
    return np.minimum(idx, cdf_rows.shape[1] - 1)


_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


class CounterRNG:
    """A seeded generator that JavaScript reproduces bit for bit: the LR-Geo user's draws in a
    seeded run, so that the browser page (``lrgeo/static/user.js``) and the Python user give
    the same answer for the same seed.

    Word ``i`` (``i = 0, 1, ...``) is SplitMix64's output function applied to the counter
    state ``seed + (i + 1) * 0x9E3779B97F4A7C15 (mod 2**64)``, the published SplitMix64
    sequence. Only integer arithmetic modulo 2**64 is involved, so any language with 64-bit
    integers (JavaScript's BigInt) produces the same words. From a word ``w``: a uniform in
    [0, 1) is ``(w >> 11) / 2**53``, and an index below ``n`` is ``((w >> 11) * n) >> 53``
    (exact, no float rounding). ``choice`` takes one word, ``permutation`` is Fisher-Yates from
    the last position down, one word per step.

    It is not a cryptographic generator: it serves seeded, reproducible runs only. Unseeded
    runs draw from the operating system (``rng=None`` everywhere in certdp).
    """

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) <= _MASK64:
            raise ValueError(f"seed must be an integer in [0, 2**64), got {seed!r}")
        self.seed = int(seed)
        self.counter = 0

    def word(self) -> int:
        """The next 64-bit word."""
        self.counter += 1
        z = (self.seed + self.counter * _GOLDEN) & _MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """A uniform index in [0, n)."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        return ((self.word() >> 11) * int(n)) >> 53

    def random(self, size: int | None = None) -> float | np.ndarray:
        """Uniforms in [0, 1) with 53 random bits each (one, or an array of ``size``)."""
        if size is None:
            return (self.word() >> 11) / _TWO53
        return np.array([(self.word() >> 11) / _TWO53 for _ in range(int(size))], dtype=np.float64)

    def choice(self, a: np.ndarray):
        """One element of the 1-d array ``a``, uniformly."""
        a = np.asarray(a)
        return a[self.below(len(a))]

    def permutation(self, a: np.ndarray) -> np.ndarray:
        """A shuffled copy of the 1-d array ``a`` (Fisher-Yates)."""
        out = np.array(a, copy=True)
        for i in range(len(out) - 1, 0, -1):
            j = self.below(i + 1)
            out[i], out[j] = out[j], out[i]
        return out
