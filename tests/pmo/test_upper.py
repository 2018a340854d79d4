"""The cheap repairs of the decompositions (rebalance, repair, envelope) against their LPs and formulas."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from certdp import verify
from certdp.certify import certify

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


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rebalance_rows_is_the_optimum_of_its_lp_and_beats_plain_certification(seed):
    from scipy.optimize import linprog

    from certdp.pmo.upper import rebalance_rows
    n, k, eps = 30, 8, 1.3
    Z, cost, E, d = _cone_matrix(n, k, eps, seed)
    r = Z.sum(axis=1)
    assert np.ptp(r) > 0.05                          # rows really are off
    Z2 = rebalance_rows(Z, cost, eps, E, d, batch=50)   # small batches: several generation rounds
    np.testing.assert_allclose(Z2.sum(axis=1), 1.0, atol=1e-12)
    assert verify(Z2, eps * (1 + 1e-6), E, d).passed
    Zc, rep = certify(Z2, eps, E, d)
    assert rep.mixing < 1e-6
    # the same LP with every row written out, solved at once
    I, J = np.r_[E[:, 0], E[:, 1]], np.r_[E[:, 1], E[:, 0]]
    f = np.exp(eps * np.r_[d, d])
    rows = []
    for p in range(len(I)):
        for q in range(k):
            row = np.zeros(n)
            row[I[p]] += Z[I[p], q] - r[I[p]] / k
            row[J[p]] -= f[p] * (Z[J[p], q] - r[J[p]] / k)
            rows.append(row)
    rhs = np.repeat((f - 1) / k, k)
    obj = (cost * Z).sum(axis=1) - r * cost.mean(axis=1)
    full = linprog(obj, A_ub=np.array(rows), b_ub=rhs, bounds=list(zip(np.zeros(n), 1 / r)), method="highs")
    assert full.status == 0
    best = full.fun + cost.mean(axis=1).sum()
    assert float(np.sum(cost * Z2)) == pytest.approx(best, rel=1e-7)
    # and it is cheaper than dividing the rows (certify alone) and than the uniform mechanism
    plain, _ = certify(Z, eps, E, d)
    assert np.sum(cost * Zc) < np.sum(cost * plain)
    assert np.sum(cost * Zc) <= cost.mean(axis=1).sum() + 1e-9


@pytest.mark.parametrize("seed", [0, 1])
def test_rebalance_rows_cutoff_stops_only_when_the_result_cannot_beat_it(seed):
    from certdp.pmo.upper import rebalance_rows
    eps = 1.3
    Z, cost, E, d = _cone_matrix(30, 8, eps, seed)
    Z2 = rebalance_rows(Z, cost, eps, E, d, batch=50)
    best = float(np.sum(cost * Z2))
    assert rebalance_rows(Z, cost, eps, E, d, batch=50, cutoff=best * (1 - 1e-6)) is None
    # a cutoff above the optimum changes nothing
    np.testing.assert_array_equal(rebalance_rows(Z, cost, eps, E, d, batch=50, cutoff=best * (1 + 1e-6)), Z2)


def test_rebalance_rows_rejects_mismatched_cost():
    from certdp.pmo.upper import rebalance_rows
    with pytest.raises(ValueError, match="one shape"):
        rebalance_rows(np.ones((3, 2)), np.ones((3, 3)), 1.0, np.array([[0, 1]]), np.array([1.0]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_repair_rows_is_the_optimum_of_its_local_lp(seed):
    from scipy.optimize import linprog

    from certdp.pmo.upper import repair_rows
    Z, cost, eps, E, d = _nearly_stochastic(seed)
    n, k = Z.shape
    B = np.flatnonzero(np.abs(Z.sum(axis=1) - 1) > 1e-7)
    assert 0 < B.size < n
    Zr = repair_rows(Z, cost, eps, E, d, batch=5)      # small batches: several generation rounds
    assert Zr is not None
    np.testing.assert_allclose(Zr[B].sum(axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(Zr.sum(axis=1), 1.0, atol=1e-7)    # the rows left alone: within tol
    assert verify(Zr, eps * (1 + 1e-6), E, d).violations == 0
    out = np.setdiff1d(np.arange(n), B)
    np.testing.assert_array_equal(Zr[out], Z[out])     # the other rows are untouched
    # the same LP written out in full: rows B free, the rest fixed
    pos = {int(i): p for p, i in enumerate(B)}
    A, b = [], []
    for (i, j), dist in zip(E, d):
        f = np.exp(eps * dist)
        for u, v in ((i, j), (j, i)):
            for q in range(k):
                row = np.zeros(B.size * k)
                rhs = 0.0
                if u in pos:
                    row[pos[u] * k + q] += 1.0
                else:
                    rhs -= Z[u, q]
                if v in pos:
                    row[pos[v] * k + q] -= f
                else:
                    rhs += f * Z[v, q]
                if row.any():
                    A.append(row)
                    b.append(rhs)
    Aeq = np.kron(np.eye(B.size), np.ones(k))
    full = linprog(cost[B].ravel(), A_ub=np.array(A), b_ub=b, A_eq=Aeq, b_eq=np.ones(B.size),
                   bounds=(0, 1), method="highs")
    assert full.status == 0
    assert float(np.sum(cost[B] * Zr[B])) == pytest.approx(full.fun, rel=1e-7)
    # and it certifies at almost no cost
    _Zc, rep = certify(Zr, eps, E, d)
    assert rep.mixing < 1e-6


def test_repair_rows_finds_bounds_that_clash_along_the_free_rows():
    """Rows 1 and 2 are off; the fixed rows 0 and 3 leave each a range of its own, but the two
    ranges cannot meet across the edge 1-2 (the LP would be infeasible). Carrying the bounds
    along that edge finds it, and the fixed rows join: the whole line is re-solved."""
    from certdp.pmo.upper import repair_rows
    Z = np.array([[1.0, 0.0], [0.6, 0.6], [0.6, 0.6], [0.0, 1.0]])
    E, d = np.array([[0, 1], [1, 2], [2, 3]]), np.ones(3)
    cost = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    assert repair_rows(Z, cost, 1.0, E, d, grow=0) is None
    R = repair_rows(Z, cost, 1.0, E, d)
    assert R is not None
    np.testing.assert_allclose(R.sum(axis=1), 1.0, atol=1e-9)
    assert verify(R, 1.0 + 1e-6, E, d).violations == 0


def test_repair_rows_gives_up_cleanly():
    from certdp.pmo.upper import repair_rows
    Z, cost, eps, E, d = _nearly_stochastic(0)
    assert repair_rows(Z, cost, eps, E, d, time_limit=0.0) is None      # no time
    assert repair_rows(Z, cost, eps, E, d, max_lp_rows=1) is None       # too large an LP
    assert repair_rows(Z, cost, eps, E, d, max_rows=1) is None          # too many rows
    # a row whose settled neighbours leave it no room must bring them in: more than max_rows
    Z3 = np.array([[0.9, 0.1], [0.5, 0.6], [0.1, 0.9]])
    E3, d3 = np.array([[0, 1], [1, 2]]), np.array([1.0, 1.0])
    assert repair_rows(Z3, np.ones((3, 2)), 1.0, E3, d3, max_rows=1) is None
    grown = repair_rows(Z3, np.ones((3, 2)), 1.0, E3, d3, max_rows=3)
    assert grown is not None and verify(grown, 1.0 + 1e-6, E3, d3).violations == 0
    exact = Z / Z.sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(repair_rows(exact, cost, eps, E, d), exact)   # no row off: unchanged
    with pytest.raises(ValueError, match="one shape"):
        repair_rows(np.ones((3, 2)), np.ones((3, 3)), 1.0, np.array([[0, 1]]), np.array([1.0]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mdp_envelope_is_the_largest_mdp_matrix_below_its_input(seed):
    """Against the formula min_j Y[j,k] exp(eps D(i,j)) with D from scipy's shortest paths, on
    a random graph with two components and zero entries."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    from certdp.pmo.upper import mdp_envelope
    rng = np.random.default_rng(seed)
    n, k, eps = 40, 6, 0.8
    E = np.array([(i, j) for i in range(n) for j in range(i + 1, n)
                  if rng.random() < 0.12 and (i < 25) == (j < 25)])
    d = rng.uniform(0.05, 2.0, len(E))
    Y = rng.random((n, k)) * (rng.random((n, k)) > 0.1)
    L = mdp_envelope(Y, eps, E, d)
    P = shortest_path(coo_matrix((d, (E[:, 0], E[:, 1])), shape=(n, n)).tocsr(), directed=False)
    Yn = Y / Y.sum(axis=1, keepdims=True)
    F = np.where(np.isfinite(P), np.exp(eps * np.where(np.isfinite(P), P, 0.0)), np.inf)
    ref = np.array([[np.min(np.where(np.isfinite(F[i]), Yn[:, q] * np.where(np.isfinite(F[i]), F[i], 0.0), np.inf))
                     for q in range(k)] for i in range(n)])
    np.testing.assert_allclose(L, ref, rtol=1e-12, atol=1e-300)
    assert np.all(L <= Yn * (1 + 1e-12)) and np.all(L.sum(axis=1) <= 1 + 1e-12)
    assert (L == 0).any() and not (L == 0).all()
    f = np.exp(eps * d)[:, None]                 # every column in the cone, up to rounding
    assert np.all(L[E[:, 0]] <= f * L[E[:, 1]] * (1 + 1e-12))
    assert np.all(L[E[:, 1]] <= f * L[E[:, 0]] * (1 + 1e-12))
    # a matrix already in the cone is its own envelope, and normalise=False keeps the scale
    np.testing.assert_allclose(mdp_envelope(3 * L, eps, E, d, normalise=False), 3 * L, rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_mdp_lift_is_the_smallest_mdp_matrix_above_its_input(seed):
    """Against the formula max_j Y[j,k] exp(-eps D(i,j)), D from scipy's shortest paths, on a
    random graph with two components, zeros and an epsilon x distance beyond exp's range."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    from certdp.pmo.upper import mdp_lift
    rng = np.random.default_rng(seed)
    n, k, eps = 40, 6, 0.8
    E = np.array([(i, j) for i in range(n) for j in range(i + 1, n)
                  if rng.random() < 0.12 and (i < 25) == (j < 25)])
    d = rng.uniform(0.05, 2.0, len(E))
    d[0] = 2000.0                                # exp(-eps d) underflows: the lift must not care
    Y = rng.random((n, k)) * (rng.random((n, k)) > 0.6)
    U = mdp_lift(Y, eps, E, d)
    P = shortest_path(coo_matrix((d, (E[:, 0], E[:, 1])), shape=(n, n)).tocsr(), directed=False)
    G = np.exp(-eps * P)                         # 0 where there is no path
    ref = np.max(G[:, :, None] * Y[None, :, :], axis=1)
    np.testing.assert_allclose(U, ref, rtol=1e-12, atol=1e-300)
    assert np.all(U >= Y * (1 - 1e-14))          # (to the rounding of exp(log y))
    f, a, b = np.exp(eps * d[1:])[:, None], E[1:, 0], E[1:, 1]   # (edge 0 constrains nothing)
    assert np.all(U[a] <= f * U[b] * (1 + 1e-12)) and np.all(U[b] <= f * U[a] * (1 + 1e-12))
    np.testing.assert_allclose(mdp_lift(U, eps, E, d), U, rtol=1e-12)   # already in the cone


def test_mdp_envelope_then_rebalance_certifies_a_cone_matrix_cheaper_than_division():
    from certdp.pmo.upper import mdp_envelope, rebalance_rows
    n, k, eps = 30, 8, 1.3
    Z, cost, E, d = _cone_matrix(n, k, eps, 0)
    Z2 = rebalance_rows(mdp_envelope(Z, eps, E, d), cost, eps, E, d)
    np.testing.assert_allclose(Z2.sum(axis=1), 1.0, atol=1e-12)
    Zc, rep = certify(Z2, eps, E, d)
    assert rep.mixing < 1e-6
    plain, _ = certify(Z, eps, E, d)
    assert np.sum(cost * Zc) < np.sum(cost * plain)


@pytest.mark.parametrize("args, match", [
    ((np.ones(3), 1.0, np.array([[0, 1]]), np.array([1.0])), "2-D"),
    ((np.ones((3, 2)), 0.0, np.array([[0, 1]]), np.array([1.0])), "epsilon"),
    ((np.ones((3, 2)), 1.0, np.array([[0, 3]]), np.array([1.0])), "index"),
    ((np.ones((3, 2)), 1.0, np.array([[0, 1]]), np.array([1.0, 2.0])), "differ in length"),
    ((np.ones((3, 2)), 1.0, np.array([[0, 1]]), np.array([-1.0])), "non-negative"),
])
def test_mdp_envelope_rejects_bad_input(args, match):
    from certdp.pmo.upper import mdp_envelope
    with pytest.raises(ValueError, match=match):
        mdp_envelope(*args)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 30), st.floats(0.0, 0.4), st.booleans())
def test_closure_keeps_the_source_of_each_entry(seed, n, density, zero_lengths):
    """The closure is min_j L0[j] + D(i, j) over the records j of i's component (D from
    scipy's shortest paths; lengths may be 0, components many, entries +inf or -inf: a -inf
    entry makes its component -inf). With ``source``, every entry keeps the record its value
    came from: a finite entry equals that source's starting value plus the distance from it,
    and a -inf one comes from a -inf record of its component."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components, shortest_path

    from certdp.pmo.upper import _lower_along_edges
    rng = np.random.default_rng(seed)
    k = 4
    E = np.array([(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < density]).reshape(-1, 2)
    w = rng.uniform(0.1, 1.0, len(E))
    if zero_lengths:
        w[rng.random(len(E)) < 0.2] = 0.0
    u = rng.random((n, k))
    L0 = np.where(u < 0.2, rng.uniform(0.0, 3.0, (n, k)), np.where(u < 0.23, -np.inf, np.inf))
    source = np.where(np.isfinite(L0) | np.isneginf(L0), np.arange(n)[:, None], -1)
    L = _lower_along_edges(L0.copy(), E, w, source)
    G = coo_matrix((np.where(w > 0, w, 1e-300), (E[:, 0], E[:, 1])), shape=(n, n)).tocsr()
    D = shortest_path(G, directed=False)
    _, comp = connected_components(G, directed=False)
    with np.errstate(invalid="ignore"):
        expect = np.min(np.where(np.isfinite(D)[:, :, None], L0[None, :, :] + D[:, :, None], np.inf), axis=1)
    np.testing.assert_allclose(L, expect, rtol=1e-12, atol=1e-12)
    assert (source[np.isfinite(L) | np.isneginf(L)] >= 0).all() and (source[np.isposinf(L)] == -1).all()
    r, c = np.nonzero(np.isfinite(L))
    np.testing.assert_allclose(L0[source[r, c], c] + D[r, source[r, c]], L[r, c], rtol=1e-12, atol=1e-12)
    r, c = np.nonzero(np.isneginf(L))
    assert np.isneginf(L0[source[r, c], c]).all() and (comp[source[r, c]] == comp[r]).all()


def test_repair_rows_brings_in_only_the_rows_that_bind():
    """Rows 1-3 (a path between the fixed rows 0 and 4) are off, and their lower bounds from 0
    and 4 sum past 1. Rows 0 and 4 set those bounds and join; the leaves 5-7 hang off row 2 at a
    long distance, bind nothing, and keep their values."""
    from certdp.pmo.upper import repair_rows
    Z = np.array([[1.0, 0.0], [0.6, 0.6], [0.6, 0.6], [0.6, 0.6], [0.0, 1.0],
                  [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]])
    E = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [2, 5], [2, 6], [2, 7]])
    d = np.array([0.1, 0.1, 0.1, 0.1, 20.0, 20.0, 20.0])
    cost = np.tile([0.0, 1.0], (8, 1))
    assert repair_rows(Z, cost, 1.0, E, d, grow=0) is None      # stuck without growing
    R = repair_rows(Z, cost, 1.0, E, d)
    assert R is not None
    np.testing.assert_allclose(R.sum(axis=1), 1.0, atol=1e-9)
    assert verify(R, 1.0 + 1e-6, E, d).violations == 0
    np.testing.assert_array_equal(R[5:], Z[5:])
    assert not np.array_equal(R[[0, 4]], Z[[0, 4]])             # the binding rows were re-solved


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40), st.integers(1, 60))
def test_row_repairs_do_not_depend_on_the_block_of_their_violation_scans(seed, block, batch):
    """The violation scans of rebalance_rows and repair_rows run in blocks of pairs (their
    arrays would otherwise be pairs x outputs, several at once): one pair's columns a block, or
    a few pairs, gives the same matrix as one block holding every pair, also where violations
    tie and the LP is degenerate (every output costing the same: the rows chosen decide which
    of its optima comes out)."""
    import certdp.pmo.upper as U

    Z, cost, E, d = _cone_matrix(25, 6, 1.1, seed)
    Zn, cost_n, eps_n, En, dn = _nearly_stochastic(seed % 50)
    whole = U.BLOCK
    out = []
    for size in (whole, block * 6):
        U.BLOCK = size
        try:
            out.append([U.rebalance_rows(Z, cost, 1.1, E, d, batch=batch),
                        U.repair_rows(Zn, cost_n, eps_n, En, dn, batch=batch),
                        U.repair_rows(Zn, np.ones_like(cost_n), eps_n, En, dn, batch=batch)])
        finally:
            U.BLOCK = whole
    for a, b in zip(*out):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)


def test_row_repairs_refuse_an_empty_batch():
    import certdp.pmo.upper as U

    Z, cost, E, d = _cone_matrix(8, 3, 1.1, 0)
    with pytest.raises(ValueError, match="batch"):
        U.rebalance_rows(Z, cost, 1.1, E, d, batch=0)
