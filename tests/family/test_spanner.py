"""SpannerMech: the greedy spanner's stretch, and stretch 1 is OPTMech."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import shortest_path
from scipy.spatial.distance import cdist

from certdp import solve
from certdp.family.spanner import greedy_spanner, spanner_mechanism

from ..paper002 import metric_space


@given(st.integers(0, 10_000), st.floats(1.0, 3.0))
@settings(max_examples=25)
def test_greedy_spanner_stretch(seed, delta):
    pts = np.random.default_rng(seed).random((25, 2))
    D = cdist(pts, pts)
    E, w = greedy_spanner(D, delta)
    G = np.zeros_like(D)
    G[E[:, 0], E[:, 1]] = w
    P = shortest_path(G, directed=False)
    off = ~np.eye(25, dtype=bool)
    assert np.all(P[off] <= delta * D[off] * (1 + 1e-9))
    assert len(E) <= 25 * 24 // 2


def test_spanner_with_stretch_one_is_optmech():
    s = metric_space(9, seed=3)
    assert spanner_mechanism(s, delta=1.0).upper_bound == pytest.approx(solve(s, "optmech").upper_bound, rel=1e-6)


@given(st.integers(4, 14), st.integers(1, 4), st.integers(0, 10_000), st.sampled_from([1.5, 2.0, 3.0, 5.0]))
@settings(max_examples=15)
def test_spanner_lp_size_is_its_edge_count(n, dim, seed, delta):
    """The LP's size is decided by the spanner alone: one mDP row per edge, direction and output
    (2 non-zeros each), plus the row sums and the loss rows (paper 002, Table 2)."""
    s = metric_space(n, dim=dim, seed=seed)
    st_ = solve(s, "spanner", delta=delta).stats
    N, K, E = st_["n_records"], st_["n_outputs"], st_["spanner_edges"]
    assert st_["nonzeros"] == 4 * K * E + 2 * N * K + N
    assert N - 1 <= E <= N * (N - 1) // 2   # a connected spanner of every pair
