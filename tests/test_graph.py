"""The mDP graph: the exact implied-edge reduction against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra

from certdp import MDPGraph, build_space
from certdp.datasets import gaussian, grid


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
