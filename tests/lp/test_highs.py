"""The live HiGHS model: columns added to a solved model give the optimum of the larger LP; a
solve copies out only what it is asked for."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from certdp.lp.highs import INF, HighsLP, solve_lp


def test_added_columns_give_the_optimum_of_the_larger_lp():
    rng = np.random.default_rng(0)
    m, n = 30, 80
    A = sp.random(m, n, density=0.2, random_state=1, format="csc")
    A = sp.hstack([sp.identity(m, format="csc"), A], format="csc")    # the first m columns make it feasible
    c = np.r_[np.full(m, 10.0), rng.uniform(-1.0, 1.0, n)]
    b = rng.uniform(1.0, 2.0, m)
    full = solve_lp(c, A, np.full(m, -INF), b, np.zeros(m + n), np.ones(m + n))
    live = HighsLP(c[:m + 20], A[:, :m + 20], np.full(m, -INF), b, np.zeros(m + 20), np.ones(m + 20))
    first = live.solve()
    live.add_cols(A[:, m + 20:], c[m + 20:], np.zeros(n - 20), np.ones(n - 20))
    grown = live.solve()
    assert first.objective >= full.objective - 1e-9                  # fewer columns: not better
    assert grown.status == "optimal" and grown.objective == pytest.approx(full.objective, abs=1e-9)
    assert grown.x.size == m + n and live.n_col == m + n


def test_columns_of_the_wrong_height_are_refused():
    live = HighsLP(np.ones(2), sp.identity(2, format="csr"), np.zeros(2), np.ones(2), np.zeros(2), np.ones(2))
    with pytest.raises(ValueError, match="2 rows"):
        live.add_cols(sp.csc_matrix(np.ones((3, 1))), np.ones(1), np.zeros(1), np.ones(1))


def test_a_solve_copies_out_only_the_vectors_asked_for():
    rng = np.random.default_rng(2)
    A = sp.random(20, 40, density=0.3, random_state=3, format="csr")
    c, b = rng.uniform(-1.0, 1.0, 40), rng.uniform(1.0, 2.0, 20)
    lp = HighsLP(c, A, np.full(20, -INF), b, np.zeros(40), np.ones(40))
    every = lp.solve()
    duals = lp.solve(fetch=("row_dual",))
    assert duals.status == "optimal" and duals.x is None and duals.col_dual is None
    np.testing.assert_array_equal(duals.row_dual, every.row_dual)
    np.testing.assert_array_equal(lp.primal(), every.x)       # what was not copied is still there
    with pytest.raises(ValueError, match="row_duals"):
        lp.solve(fetch=("row_duals",))
