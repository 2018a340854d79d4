"""Randomness for sampling from mechanisms.

``rng=None`` means draws from the operating system's cryptographically secure generator
(``os.urandom``); an ``int`` seed or a ``numpy.random.Generator`` gives a reproducible run for
tests and experiments. Nothing in certdp has a fixed default seed.
"""

from __future__ import annotations

import os
from typing import Union

import numpy as np

RNGLike = Union[None, int, np.random.Generator]

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
    return as_generator(rng).random(size)


def as_generator(rng: RNGLike) -> np.random.Generator:
    """Turn ``rng`` into a numpy Generator; ``None`` seeds one from OS entropy."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng(int.from_bytes(os.urandom(16), "little"))
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise TypeError(f"rng must be None, an int seed or a numpy Generator, got {type(rng).__name__}")


def sample_rows(cdf_rows: np.ndarray, rng: RNGLike = None) -> np.ndarray:
    """Inverse-CDF sampling: one index per row of ``cdf_rows`` (rows of cumulative sums)."""
    u = uniforms(cdf_rows.shape[0], rng) * cdf_rows[:, -1]
    idx = (cdf_rows <= u[:, None]).sum(axis=1)
    return np.minimum(idx, cdf_rows.shape[1] - 1)
