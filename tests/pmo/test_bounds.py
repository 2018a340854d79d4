"""The PMO Lagrangian bounds hold for any multipliers."""

from __future__ import annotations

import numpy as np
from scipy.sparse.csgraph import dijkstra

from certdp import MDPGraph, build_space, solve
from certdp.datasets import gaussian


def brute_force_implied(g: MDPGraph) -> np.ndarray:
    out = np.zeros(g.n_edges, dtype=bool)
    for e, (i, j) in enumerate(g.edges):
        keep = np.ones(g.n_edges, dtype=bool)
        keep[e] = False
        h = MDPGraph(g.n, g.edges[keep], g.distance[keep])
        out[e] = dijkstra(h.adjacency, directed=False, indices=[i])[0, j] <= g.distance[e]
    return out


def test_lower_bound_is_valid_even_for_bad_multipliers():
    """The Lagrangian bound holds for any multipliers, so noise cannot make it overshoot."""
    from certdp.pmo.bounds import lagrangian_lower_bound
    from certdp.pmo.model import assemble_pmo
    sp = build_space(gaussian(10, 2, seed=1), epsilon=2.0, eta=1.5, seed=1)
    e, d = sp.neighbor_pairs
    lp = assemble_pmo(sp.weighted_cost, e, d, sp.epsilon)
    opt = solve(sp, reduce=False).upper_bound
    rng = np.random.default_rng(0)
    for _ in range(20):
        y = rng.standard_normal(lp.n_mdp_rows) * rng.choice([1e-3, 1.0, 10.0])
        assert lagrangian_lower_bound(sp.weighted_cost, lp.A[: lp.n_mdp_rows], y) <= opt + 1e-12
