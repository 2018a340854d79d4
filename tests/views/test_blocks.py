"""Cut scores and aggregation error of blocks, against brute force on dense arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp.views.blocks import aggregation_error, cut_scores

from .tensors import brute_ae


@given(st.integers(0, 10_000))
@settings(max_examples=120)
def test_cut_scores_match_brute_force(seed):
    """Every cut's Min and AE score equals the score computed on the dense sub-array."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 4))
    shape = rng.integers(1, 6, size=d)
    dense = (rng.random(shape) < rng.random()) * rng.integers(1, 6, size=shape)
    lo = np.array([rng.integers(0, s) for s in shape])
    hi = np.array([rng.integers(a + 1, s + 1) for a, s in zip(lo, shape)])
    sub = dense[tuple(slice(a, b) for a, b in zip(lo, hi))]
    coords = np.argwhere(sub > 0) + lo
    x = sub[sub > 0]
    assert aggregation_error(x.astype(float), sub.size) == pytest.approx(brute_ae(sub), abs=1e-9)
    for metric in ("min", "ae"):
        axes, pos, sc = cut_scores(coords, x, lo, hi, metric)
        assert axes.size == int(np.sum(hi - lo - 1))
        for a, p, s in zip(axes, pos, sc):
            j = p - lo[a]
            left = np.take(sub, range(0, j), axis=a)
            right = np.take(sub, range(j, sub.shape[a]), axis=a)
            if metric == "ae":
                ref = -(brute_ae(left) + brute_ae(right))
            else:
                mn = lambda b: min(int((b > 0).sum()), int((b == 0).sum()))  # noqa: E731
                ref = -min(mn(left), mn(right))
            assert s == pytest.approx(ref, abs=1e-9)


def test_ae_of_huge_sparse_block_is_exact():
    # 10^18 cells, three non-zero: AE = 2 (S - n S / V) (the empty cells hold the mean)
    x = np.array([1.0, 2.0, 5.0])
    V = 1e18
    assert aggregation_error(x, V) == pytest.approx(2 * (8 - 3 * 8 / V))
