"""The dense interior-point solver of column-generation masters (certdp.lp.dense)."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp.lp.dense import solve_dense_lp
from certdp.lp.highs import INF, solve_lp


def _highs(R, g, rhs, slack_costs=None):
    m, n = R.shape
    if slack_costs is not None:
        A = np.hstack([R, np.eye(m), -np.eye(m)])
        c = np.concatenate([g, *slack_costs])
    else:
        A, c = R, g
    sol = solve_lp(c, sp.csr_matrix(A), rhs, rhs, np.zeros(A.shape[1]), np.full(A.shape[1], INF))
    assert sol.status == "optimal"
    return sol.objective


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("box", [False, True])
def test_matches_highs_on_random_masters(seed, box):
    rng = np.random.default_rng(seed)
    m, n = 30, 80
    R = rng.random((m, n)) ** 3                  # dense, positive, like the PMO masters
    R[:, :m] += np.eye(m)                        # feasible: the identity part covers every row
    g = rng.random(n) + 0.1
    rhs = np.ones(m)
    costs = (rng.random(m) + 0.05, rng.random(m) + 0.05) if box else None
    r = solve_dense_lp(R, g, rhs, costs)
    assert r.status == "optimal"
    ref = _highs(R, g, rhs, costs)
    assert r.primal_objective == pytest.approx(ref, rel=1e-6, abs=1e-8)
    assert r.dual_objective == pytest.approx(ref, rel=1e-6, abs=1e-8)
    # the point is primal feasible up to the tolerance, and the duals are dual feasible
    res = R @ r.b + (r.sp - r.sm if box else 0) - rhs
    assert np.abs(res).max() < 1e-6
    assert (r.b >= 0).all()
    assert (g - R.T @ r.y).min() > -1e-6
    if box:
        assert (costs[0] - r.y).min() > -1e-6 and (costs[1] + r.y).min() > -1e-6


def test_rank_deficient_and_duplicate_columns():
    rng = np.random.default_rng(7)
    m = 20
    base = np.eye(m) + 0.1 * rng.random((m, m))
    R = np.hstack([base, base[:, :5], base[:, :5]])     # repeated columns
    g = np.concatenate([np.ones(m), 0.9 * np.ones(5), 0.9 * np.ones(5)])
    r = solve_dense_lp(R, g, np.ones(m))
    assert r.status == "optimal"
    assert r.primal_objective == pytest.approx(_highs(R, g, np.ones(m)), rel=1e-6)


def test_fewer_columns_than_rows_with_box():
    rng = np.random.default_rng(3)
    m = 25
    R = rng.random((m, 4))
    r = solve_dense_lp(R, np.ones(4), np.ones(m), (np.full(m, 2.0), np.full(m, 1.0)))
    assert r.status == "optimal"
    assert r.primal_objective == pytest.approx(_highs(R, np.ones(4), np.ones(m), (np.full(m, 2.0), np.full(m, 1.0))),
                                               rel=1e-6)


def test_infeasible_is_not_reported_optimal():
    R = np.ones((3, 4))
    r = solve_dense_lp(R, np.ones(4), -np.ones(3))   # R b = -1 with R, b >= 0: infeasible
    assert r.status != "optimal"
    assert r.error > 1e-6


@pytest.mark.parametrize("bad", [
    dict(R=np.ones((3, 4)), g=np.ones(3), rhs=np.ones(3)),
    dict(R=np.ones((3, 4)), g=np.ones(4), rhs=np.ones(4)),
    dict(R=np.full((3, 4), np.nan), g=np.ones(4), rhs=np.ones(3)),
    dict(R=np.ones((3, 4)), g=np.ones(4), rhs=np.ones(3), slack_costs=(np.ones(2), np.ones(3))),
])
def test_bad_input(bad):
    with pytest.raises(ValueError):
        solve_dense_lp(**bad)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("box", [False, True])
def test_mixed_precision_reaches_the_same_optimum(seed, box):
    """Normal equations factored in single precision and refined by conjugate gradients give
    the double-precision optimum, on well-scaled masters and on masters whose columns span
    six orders of magnitude (where the single factor gives up and the solve continues in
    double precision)."""
    rng = np.random.default_rng(seed)
    m, n = 60, 200
    R = rng.random((m, n)) ** 3
    R[:, :m] += np.eye(m)
    g = rng.random(n) + 0.1
    costs = (rng.random(m) + 0.05, rng.random(m) + 0.05) if box else None
    for badly_scaled in (False, True):
        Rs = R * 10.0 ** rng.uniform(-6, 0, n)[None, :] if badly_scaled else R
        ref = _highs(Rs, g, np.ones(m), costs)
        r = solve_dense_lp(Rs, g, np.ones(m), costs, mixed=True)
        assert r.status == "optimal"
        assert r.single_factors >= 1
        assert r.primal_objective == pytest.approx(ref, rel=1e-6, abs=1e-8)
        res = Rs @ r.b + (r.sp - r.sm if box else 0) - 1.0
        assert np.abs(res).max() < 1e-6
        if badly_scaled and not box:
            assert r.single_factors < r.iterations     # the last iterations ran in double


def test_double_precision_only_when_asked():
    rng = np.random.default_rng(5)
    m, n = 40, 120
    R = rng.random((m, n)) ** 3 + np.hstack([np.eye(m), np.zeros((m, n - m))])
    r = solve_dense_lp(R, rng.random(n) + 0.1, np.ones(m), mixed=False)
    assert r.status == "optimal" and r.single_factors == 0


@pytest.mark.parametrize("mixed", [False, True])
def test_memory_order_of_the_columns_does_not_matter(mixed):
    """The masters keep R in Fortran order; the products with R and the normal equations
    take either order (scipy's BLAS would otherwise copy R on every call). The two orders
    round the single-precision products differently, so the answers agree to a tenth of the
    solver's tolerance (1e-8)."""
    rng = np.random.default_rng(11)
    m, n = 50, 150
    R = rng.random((m, n)) ** 3
    R[:, :m] += np.eye(m)
    g = rng.random(n) + 0.1
    costs = (rng.random(m) + 0.05, rng.random(m) + 0.05)
    a = solve_dense_lp(np.ascontiguousarray(R), g, np.ones(m), costs, mixed=mixed)
    b = solve_dense_lp(np.asfortranarray(R), g, np.ones(m), costs, mixed=mixed)
    assert a.iterations == b.iterations
    assert a.primal_objective == pytest.approx(b.primal_objective, rel=1e-9)
    np.testing.assert_allclose(a.y, b.y, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("order", ["C", "F"])
def test_the_normal_equations_built_block_by_block_are_the_whole_product(order):
    """R diag(w)^2 R' from blocks of columns (here 3 at a time) is the whole product, in double
    and in single precision, whatever R's memory order; products with R and R' are R's."""
    from certdp.lp.dense import DenseColumns

    rng = np.random.default_rng(1)
    R = np.asarray(rng.uniform(0.0, 1.0, (7, 11)), order=order)
    w = rng.uniform(0.1, 2.0, 11)
    cols = DenseColumns(R)
    cols.BLOCK = 3
    want = (R * w ** 2) @ R.T
    for single, tol in ((False, 1e-12), (True, 1e-5)):
        M = cols.gram(w, single)
        assert M.dtype == (np.float32 if single else np.float64)
        assert np.allclose(np.triu(M), np.triu(want), rtol=tol, atol=tol)
    v, y = rng.normal(size=11), rng.normal(size=7)
    assert np.allclose(cols.mul(v), R @ v) and np.allclose(cols.tmul(y), R.T @ y)



@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 30), st.integers(1, 40), st.booleans(), st.booleans())
def test_the_normal_equations_in_halves_are_the_whole_product_on_any_number_of_threads(seed, m, n, single, store):
    """Formed as three products on the two halves of the rows (the large masters' way), the
    normal equations are the whole product, read from an array or from a store, and the same
    bits on one thread as on two."""
    from concurrent.futures import ThreadPoolExecutor

    from certdp.lp.dense import ColumnStore, DenseColumns

    rng = np.random.default_rng(seed)
    R = rng.random((m, n)) ** 3
    w = rng.uniform(0.1, 2.0, n)
    if store:
        cs = ColumnStore(m)
        cs.CHUNK = 8
        slots = cs.put(R)
        cols = DenseColumns(store=cs, slots=slots)
    else:
        cols = DenseColumns(R)
    cols.BLOCK = 7
    with ThreadPoolExecutor(1) as one, ThreadPoolExecutor(2) as two:
        a, b = cols.gram(w, single, one), cols.gram(w, single, two)
    np.testing.assert_array_equal(np.triu(a), np.triu(b))
    tol = 1e-5 if single else 1e-12
    assert np.allclose(np.triu(a), np.triu((R * w ** 2) @ R.T), rtol=tol, atol=tol)


def test_a_large_master_gives_the_same_answer_on_one_thread_as_on_two():
    """From the size where the normal equations are formed in halves side by side, the solve
    does not depend on the threads it is given."""
    rng = np.random.default_rng(3)
    m, n = 400, 6400                                 # m^2 n = 1.02e9: the halves
    R = rng.random((m, n)) ** 3
    R[:, :m] += np.eye(m)
    g = rng.random(n) + 0.1
    costs = (rng.random(m) + 1.0, rng.random(m) + 0.5)
    a = solve_dense_lp(R, g, np.ones(m), costs, threads=1)
    b = solve_dense_lp(R, g, np.ones(m), costs, threads=2)
    assert a.status == b.status == "optimal" and a.iterations == b.iterations
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.b, b.b)
@settings(max_examples=30)
@given(st.integers(0, 2**31 - 1), st.integers(1, 7), st.lists(st.integers(1, 40), min_size=1, max_size=6))
def test_a_column_store_keeps_each_column_once_and_reads_it_in_place(seed, m, batches):
    """Columns put into a store, taken and released in any order, read back as they were
    given (through any subset of rows and columns), and the products of DenseColumns over the
    store are those of the same matrix in one array; a freed slot is reused before the store
    grows."""
    from certdp.lp.dense import ColumnStore, DenseColumns

    rng = np.random.default_rng(seed)
    store = ColumnStore(m)
    store.CHUNK = 16                                  # several chunks even on small cases
    held: dict[int, np.ndarray] = {}
    for k in batches:
        R = rng.random((m, k))
        slots = store.put(R)
        assert len(set(slots.tolist())) == k and not set(slots.tolist()) & set(held)
        store.take(slots)
        held.update(zip(slots.tolist(), R.T))
        gone = [s for s in held if rng.random() < 0.4]
        store.release(np.array(gone, dtype=np.int64))
        for s in gone:
            del held[s]
        assert store.capacity <= 16 * (-(-(sum(batches)) // 16))
        assert int((store.refs > 0).sum()) == len(held)
    if not held:
        return
    slots = np.array(sorted(held, key=lambda s: rng.random()), dtype=np.int64)
    R = np.column_stack([held[s] for s in slots.tolist()])
    rows = np.sort(rng.choice(m, size=max(1, m // 2), replace=False))
    np.testing.assert_array_equal(store.gather(slots), R)
    np.testing.assert_array_equal(store.gather(slots, rows), R[rows])
    D = DenseColumns(store=store, slots=slots, rows=rows)
    D.BLOCK = 3
    v, y, w = rng.random(slots.size), rng.random(rows.size), rng.random(slots.size)
    np.testing.assert_allclose(D.mul(v), R[rows] @ v)
    np.testing.assert_allclose(D.tmul(y), R[rows].T @ y)
    np.testing.assert_allclose(np.triu(D.gram(w, single=False)), np.triu(R[rows] @ np.diag(w**2) @ R[rows].T))
    assert D.largest() == pytest.approx(float(np.abs(R[rows]).max()))


def test_a_master_read_from_a_store_is_the_master_in_one_array():
    """The dense LP over columns read in place from a store gives the same answer as over the
    same columns in one array."""
    from certdp.lp.dense import ColumnStore, DenseColumns

    rng = np.random.default_rng(7)
    m, n = 25, 70
    R = rng.random((m, n)) ** 3
    R[:, :m] += np.eye(m)
    g = rng.random(n) + 0.1
    store = ColumnStore(m)
    store.CHUNK = 32
    filler = store.put(rng.random((m, 20)))           # slots that the LP's columns do not use
    store.take(filler)
    slots = store.put(R)
    store.take(slots)
    costs = (rng.random(m) + 1.0, rng.random(m) + 0.5)
    for slack in (None, costs):
        a = solve_dense_lp(R, g, np.ones(m), slack)
        b = solve_dense_lp(DenseColumns(store=store, slots=slots), g, np.ones(m), slack)
        assert a.status == b.status == "optimal"
        assert b.primal_objective == pytest.approx(a.primal_objective, rel=1e-9)
        assert b.primal_objective == pytest.approx(_highs(R, g, np.ones(m), slack), rel=1e-6)
