"""The dense interior-point solver of column-generation masters (scaledp.lp.dense)."""

import numpy as np
import pytest
import scipy.sparse as sp

from scaledp.lp.dense import solve_dense_lp
from scaledp.lp.highs import INF, solve_lp


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


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("box", [False, True])
def test_a_warm_start_after_adding_and_removing_columns_reaches_the_optimum(seed, box):
    rng = np.random.default_rng(100 + seed)
    m, n = 30, 120
    R = rng.random((m, n)) ** 3
    R[:, :m] += np.eye(m)
    g = rng.random(n) + 0.1
    rhs = np.ones(m)
    costs = (rng.random(m) + 0.05, rng.random(m) + 0.05) if box else None
    first = solve_dense_lp(R[:, :80], g[:80], rhs, costs)
    assert first.warm is not None
    x0, y0, s0 = first.warm
    assert x0.shape == s0.shape == (80 + (2 * m if box else 0),) and y0.shape == (m,)
    assert (x0 > 0).all() and (s0 > 0).all()                    # an interior point
    # drop columns 70-79, add 80-119 (unknown to the kept iterate: NaN)
    keep = np.r_[0:70, 80:120]
    b0 = np.concatenate([x0[:70], np.full(40, np.nan)])
    start = (np.concatenate([b0, x0[80:]]), y0)
    # costs moved as the elastic master's box moves between solves
    costs2 = (costs[0] * 1.1, costs[1] * 0.9) if box else None
    warm = solve_dense_lp(R[:, keep], g[keep], rhs, costs2, start=start)
    assert warm.status == "optimal"
    assert warm.primal_objective == pytest.approx(_highs(R[:, keep], g[keep], rhs, costs2), rel=1e-6, abs=1e-8)


def test_a_warm_start_of_the_wrong_size_is_refused():
    R = np.eye(3)
    with pytest.raises(ValueError, match="warm start"):
        solve_dense_lp(R, np.ones(3), np.ones(3), start=(np.ones(2), np.zeros(3)))
