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
@settings(max_examples=25, deadline=None)
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
