"""The mDP graph, its exact edge reduction, and the PMO LP against closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra

from scaledp import MDPGraph, Space, build_space, solve_pmo
from scaledp.datasets import gaussian, grid, planar


def brute_force_implied(g: MDPGraph) -> np.ndarray:
    out = np.zeros(g.n_edges, dtype=bool)
    for e, (i, j) in enumerate(g.edges):
        keep = np.ones(g.n_edges, dtype=bool)
        keep[e] = False
        h = MDPGraph(g.n, g.edges[keep], g.distance[keep])
        out[e] = dijkstra(h.adjacency, directed=False, indices=[i])[0, j] <= g.distance[e]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_implied_edges_match_brute_force(seed):
    sp = build_space(gaussian(25, 2, seed=seed), epsilon=1.0, eta=1.2, seed=seed)
    g = MDPGraph.from_space(sp)
    assert np.array_equal(g.implied_edges(), brute_force_implied(g))


def test_grid_reduction_drops_exactly_the_straight_two_cell_edges():
    sp = build_space(grid(5, 5, 1.0), epsilon=1.0, eta=2.0, seed=0)
    g = MDPGraph.from_space(sp)
    imp = g.implied_edges()
    # on a grid, an edge of length 2 is implied by two edges of length 1; sqrt(2) is not implied
    assert np.all(imp == np.isclose(g.distance, 2.0))


@pytest.mark.parametrize("seed", range(3))
def test_reduction_keeps_the_optimum(seed):
    sp = build_space(gaussian(14, 2, seed=seed), epsilon=2.0, eta=1.5, n_outputs=6, seed=seed)
    a = solve_pmo(sp, reduce=True)
    b = solve_pmo(sp, reduce=False)
    assert a.stats["constraints_after"] <= b.stats["constraints_after"]
    assert a.upper_bound == pytest.approx(b.upper_bound, rel=1e-7, abs=1e-10)


def test_components_are_reported_and_solved_separately():
    sp = build_space(planar(np.array([[0, 0], [0.5, 0], [5, 5], [5.4, 5], [9, 9]], dtype=float)),
                     epsilon=2.0, eta=0.8, seed=0)
    res = solve_pmo(sp)
    assert res.stats["components"] == 3
    assert res.stats["singleton_components"] == 1
    # the isolated record reports itself: no neighbour constrains it
    assert res.mechanism.matrix[4, 4] == 1.0
    assert res.mechanism.verification.passed


@pytest.mark.parametrize("eps", [0.1, 0.7, 3.0])
def test_two_records_give_randomised_response(eps):
    """N = K = 2, d = 1, 0/1 cost, uniform prior: the optimum is randomised response with
    loss 1 / (1 + e^eps)."""
    D = np.array([[0.0, 1.0], [1.0, 0.0]])
    sp = Space(cost=D.copy(), prior=np.array([0.5, 0.5]), epsilon=eps, eta=1.0, metric="precomputed",
               distance_matrix=D, output_records=np.arange(2))
    res = solve_pmo(sp)
    assert res.upper_bound == pytest.approx(1 / (1 + np.exp(eps)), rel=1e-7)
    assert res.lower_bound <= res.upper_bound


def test_lower_bound_is_valid_even_for_bad_multipliers():
    """The Lagrangian bound holds for any multipliers, so noise cannot make it overshoot."""
    from scaledp.mechanisms.optimal import assemble_pmo, lagrangian_lower_bound
    sp = build_space(gaussian(10, 2, seed=1), epsilon=2.0, eta=1.5, seed=1)
    e, d = sp.neighbor_pairs
    lp = assemble_pmo(sp.weighted_cost, e, d, sp.epsilon)
    opt = solve_pmo(sp, reduce=False).upper_bound
    rng = np.random.default_rng(0)
    for _ in range(20):
        y = rng.standard_normal(lp.n_mdp_rows) * rng.choice([1e-3, 1.0, 10.0])
        assert lagrangian_lower_bound(sp.weighted_cost, lp.A[: lp.n_mdp_rows], y) <= opt + 1e-12


def test_pdlp_result_is_certified_and_its_gap_is_true():
    sp = build_space(gaussian(12, 2, seed=5), epsilon=2.0, eta=1.2, n_outputs=5, seed=5)
    exact = solve_pmo(sp).upper_bound
    res = solve_pmo(sp, solver="pdlp", tolerance=1e-5)
    assert res.mechanism.verification.passed
    assert res.status in ("optimal", "approximate")
    assert res.lower_bound <= exact * (1 + 1e-7) + 1e-12 <= res.upper_bound * (1 + 1e-7) + 2e-12
