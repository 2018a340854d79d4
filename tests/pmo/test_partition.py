"""Secret dataset partitioning: the statistics of paper 000's Tables 1-2 and k-m-adj's
closed neighbourhoods, on generated graphs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components

from certdp import build_space
from certdp.datasets import planar
from certdp.graph import MDPGraph
from certdp.pmo.partition import Partition, partition


@st.composite
def labelled_graphs(draw):
    """A random graph on n records and a labelling of them into M non-empty subsets."""
    n = draw(st.integers(2, 30))
    m = draw(st.integers(1, n))
    labels = np.array(draw(st.permutations(list(range(m)) + draw(st.lists(st.integers(0, m - 1),
                                                                             min_size=n - m, max_size=n - m)))))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=min(len(pairs), 60))) if pairs else []
    edges = np.array(sorted(chosen), dtype=np.int64).reshape(-1, 2)
    return Partition(labels.astype(np.int64), "given"), edges


def _components(n, edges, members):
    """Reference: component label of each member record, by scipy on the explicit subgraph."""
    import scipy.sparse as sp

    idx = np.flatnonzero(members)
    keep = members[edges[:, 0]] & members[edges[:, 1]] if len(edges) else np.zeros(0, bool)
    pos = {v: k for k, v in enumerate(idx)}
    e = edges[keep]
    g = sp.coo_matrix((np.ones(len(e)), ([pos[a] for a in e[:, 0]], [pos[b] for b in e[:, 1]])),
                      shape=(len(idx), len(idx)))
    return connected_components(g, directed=False)[1] if len(idx) else np.zeros(0, int)


@settings(max_examples=150)
@given(labelled_graphs())
def test_statistics_count_every_record_once(case):
    part, edges = case
    n, M = len(part.labels), part.n_subsets
    st_ = part.stats(edges)
    cut = part.labels[edges[:, 0]] != part.labels[edges[:, 1]] if len(edges) else np.zeros(0, bool)
    boundary = np.zeros(n, bool)
    boundary[edges[cut].ravel()] = True
    internal = np.bincount(part.labels[~boundary], minlength=M)
    # Definition 3.2: a boundary record has a neighbour in another subset
    assert st_["boundary_records"] == boundary.sum()
    assert st_["internal_per_subset"] == internal.tolist()
    assert st_["internal_mean"] * M == pytest.approx(internal.sum())
    nonempty = internal[internal > 0]
    assert st_["subproblem_mean"] == (nonempty.mean() if len(nonempty) else 0.0)
    assert st_["internal_mean"] <= st_["subproblem_mean"] <= st_["subproblem_max"] or not len(nonempty)
    # the master's components: every boundary record in exactly one, under either reading
    induced = np.bincount(_components(n, edges, boundary)) if boundary.any() else np.zeros(0, int)
    assert st_["master_components"] == len(induced)
    assert st_["master_component_max"] == (induced.max() if len(induced) else 0)
    assert st_["master_component_mean"] * st_["master_components"] == pytest.approx(boundary.sum())
    assert st_["cut_component_mean"] * st_["cut_components"] == pytest.approx(boundary.sum())
    # the cut-edge graph is a subgraph of the induced one: its components are finer
    assert st_["cut_components"] >= st_["master_components"]
    assert st_["cut_component_max"] <= st_["master_component_max"]
    assert st_["cut_edges"] == cut.sum()


@st.composite
def cliques(draw):
    """Records in well separated groups of 1-4, each group within eta of itself: the mDP
    graph is a disjoint union of cliques, and the number of subsets is the number of groups."""
    sizes = draw(st.lists(st.integers(1, 4), min_size=2, max_size=8))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    pts = np.concatenate([np.array([10.0 * g, 0.0]) + rng.uniform(0, 0.3, (s, 2)) for g, s in enumerate(sizes)])
    group = np.repeat(np.arange(len(sizes)), sizes)
    return build_space(planar(pts), epsilon=1.0, eta=1.0, seed=0), group


@settings(max_examples=40)
@given(cliques())
def test_kmeans_adj_keeps_every_clique_whole(case):
    """With closed neighbourhoods the records of one clique have equal rows, so k-means with
    one subset per clique cuts no edge. With open ones the two records of a pair have
    disjoint rows, as far apart as two strangers."""
    space, group = case
    m = int(group.max()) + 1
    g = MDPGraph.from_space(space)
    p = partition(space, "kmeans-adj", m, seed=0, graph=g)
    assert p.stats(g.edges)["cut_edges"] == 0
    assert all(len(np.unique(p.labels[group == k])) == 1 for k in range(m))
