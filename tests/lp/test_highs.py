"""The live HiGHS model: columns added to a solved model give the optimum of the larger LP."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from scaledp.lp.highs import INF, HighsLP, solve_lp


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
