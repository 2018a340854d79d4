"""Small random count tensors and brute-force references for the views' tests."""

from __future__ import annotations

import numpy as np

from certdp.views.tensor import CountTensor, Domain


def random_tensor(rng: np.random.Generator, shape=(6, 5, 4), density=0.3, max_count=20) -> CountTensor:
    dense = (rng.random(shape) < density) * rng.integers(1, max_count + 1, size=shape)
    if dense.sum() == 0:
        dense.flat[0] = 1
    doms = tuple(Domain.numeric(f"x{i}", 0, s, s) for i, s in enumerate(shape))
    coords = np.argwhere(dense > 0)
    return CountTensor(doms, coords.astype(np.int64), dense[dense > 0].astype(np.int64))


def dense_array(t: CountTensor) -> np.ndarray:
    d = np.zeros(t.shape)
    d[tuple(t.coords.T)] = t.counts
    return d


def brute_ae(a: np.ndarray) -> float:
    return float(np.abs(a - a.mean()).sum()) if a.size else 0.0
