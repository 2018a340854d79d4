"""The exact repair: tiny violations cost almost nothing, and the result is always exactly private."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp import verify
from certdp.certify import certify
from certdp.family.exponential import exponential_matrix

EDGE = np.array([[0, 1]])
D1 = np.array([1.0])


def _cone_matrix(n: int, k: int, eps: float, seed: int):
    """Records on a line (neighbours within 1.5), and a matrix whose every column is a sum of
    tents exp(-eps D(., a)) (so exactly in the mDP cone) but whose rows do not sum to 1."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, n / 2, n))
    E = np.array([(i, j) for i in range(n) for j in range(i + 1, n) if x[j] - x[i] <= 1.5])
    d = x[E[:, 1]] - x[E[:, 0]]
    D = np.abs(x[:, None] - x[None, :])       # on a line with these edges, the path distance
    tents = np.exp(-eps * D)
    W = rng.exponential(1.0, (n, k)) * (rng.random((n, k)) < 0.2)
    Z = tents @ W
    Z /= Z.sum(axis=1).mean()                 # mean row sum 1; single rows stay off 1
    cost = np.abs(x[:, None] - rng.uniform(0, n / 2, k)[None, :])
    return Z, cost, E, d


def _nearly_stochastic(seed: int):
    """A mechanism with exact row sums (rebalanced cone matrix), plus a small tent added to one
    output: every column is still in the mDP cone, but the rows near the tent's centre are off
    1 (rows far away by less than 1e-7)."""
    from certdp.pmo.upper import rebalance_rows
    n, k, eps = 30, 8, 1.3
    Z, cost, E, d = _cone_matrix(n, k, eps, seed)
    Z2 = rebalance_rows(Z, cost, eps, E, d)
    rng = np.random.default_rng(seed)
    x = np.sort(np.random.default_rng(seed).uniform(0, n / 2, n))   # _cone_matrix's positions
    a, q = int(rng.integers(n)), int(rng.integers(k))
    Z3 = Z2.copy()
    Z3[:, q] += 1e-4 * np.exp(-eps * np.abs(x - x[a]))
    return Z3, cost, eps, E, d


def test_certify_repairs_a_tiny_violation_at_tiny_cost():
    Z = np.array([[1e-9, 1 - 1e-9], [0.0, 1.0]])
    Zc, rep = certify(Z, 1.0, EDGE, D1)
    assert verify(Zc, 1.0, EDGE, D1).passed
    assert 0 < rep.mixing < 1e-7
    assert np.max(np.abs(Zc - Z)) < 1e-7


def test_certify_leaves_a_strictly_feasible_matrix_alone():
    Z = np.array([[0.6, 0.4], [0.4, 0.6]])
    Zc, rep = certify(Z, 1.0, EDGE, D1)
    assert rep.mixing == 0.0 and np.array_equal(Zc, Z)


@settings(max_examples=60)
@given(n=st.integers(2, 9), k=st.integers(1, 7), eps=st.floats(0.01, 30.0), noise=st.floats(0, 1e-6),
       zero_frac=st.floats(0, 0.5), seed=st.integers(0, 2**31 - 1))
def test_certify_always_returns_an_exactly_private_matrix(n, k, eps, noise, zero_frac, seed):
    """Whatever approximately-feasible input (solver noise, zeroed entries), the output passes
    the exact check and stays row-stochastic."""
    rng = np.random.default_rng(seed)
    pts = rng.random((n, 2)) * 3
    from scipy.spatial.distance import cdist
    D = cdist(pts, pts[:k] if k <= n else pts)
    Z = exponential_matrix(D[:, : min(k, n)], eps)
    Z = Z + noise * rng.standard_normal(Z.shape)
    Z[rng.random(Z.shape) < zero_frac] = 0.0
    iu, ju = np.triu_indices(n, 1)
    edges = np.column_stack([iu, ju])
    dist = np.linalg.norm(pts[iu] - pts[ju], axis=1)
    Zc, rep = certify(Z, eps, edges, dist)
    assert verify(Zc, eps, edges, dist).passed
    assert rep.verify.passed
    assert np.all(Zc >= 0) and np.max(np.abs(Zc.sum(axis=1) - 1)) <= 1e-9
