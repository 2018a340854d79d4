"""The mDP graph (paper 000, Definition 3.1): records as nodes, neighbouring pairs as edges
weighted by their distance; its connected components (Property 3.1), path distances
(Property 3.2) and the exact edge reduction.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, dijkstra

from ._validate import BLOCK
from .space import Space


def edge_components(n: int, edges: np.ndarray) -> np.ndarray:
    """The connected component of each of ``n`` records over the undirected ``edges`` (an
    (m, 2) array of record indices)."""
    if len(edges) == 0:
        return np.arange(n)
    g = sp.csr_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    return connected_components(g, directed=False)[1]


@dataclass(frozen=True, eq=False)
class MDPGraph:
    """Undirected weighted graph on ``n`` records.

    Attributes:
        n: number of records.
        edges: (E, 2) int64 pairs (i < j) of neighbouring records.
        distance: (E,) their distances d(i, j) > 0.
    """

    n: int
    edges: np.ndarray
    distance: np.ndarray

    @classmethod
    def from_space(cls, space: Space) -> "MDPGraph":
        """The mDP graph of ``space``: its neighbouring pairs and their distances."""
        e, d = space.neighbor_pairs
        return cls(space.n_records, e, d)

    @property
    def n_edges(self) -> int:
        """The number of edges (neighbouring pairs)."""
        return int(len(self.edges))

    @cached_property
    def adjacency(self) -> sp.csr_matrix:
        """Symmetric CSR matrix of edge distances."""
        i, j = self.edges[:, 0], self.edges[:, 1]
        return sp.csr_matrix((np.concatenate([self.distance, self.distance]),
                              (np.concatenate([i, j]), np.concatenate([j, i]))), shape=(self.n, self.n))

    @cached_property
    def components(self) -> tuple[int, np.ndarray]:
        """(number of connected components, component label of each record)."""
        return connected_components(self.adjacency, directed=False)

    def component_members(self) -> list[np.ndarray]:
        """Record indices of each connected component, largest first."""
        n_comp, lab = self.components
        order = np.argsort(lab, kind="stable")
        groups = np.split(order, np.cumsum(np.bincount(lab, minlength=n_comp))[:-1])
        return sorted(groups, key=len, reverse=True)

    def path_distances(self, sources: np.ndarray | None = None, limit: float = np.inf) -> np.ndarray:
        """Shortest-path distances D (Property 3.2) from ``sources`` (default all) to every
        record; ``inf`` where no path (of length <= ``limit``) exists."""
        return dijkstra(self.adjacency, directed=False, indices=sources, limit=limit)

    def subgraph(self, members: np.ndarray) -> tuple["MDPGraph", np.ndarray]:
        """The induced subgraph on ``members`` (local indices), and the global edge ids."""
        local = np.full(self.n, -1, dtype=np.int64)
        local[members] = np.arange(len(members))
        a, b = local[self.edges[:, 0]], local[self.edges[:, 1]]
        keep = np.flatnonzero((a >= 0) & (b >= 0))
        e = np.column_stack([a[keep], b[keep]])
        return MDPGraph(len(members), e, self.distance[keep]), keep

    def implied_edges(self, *, block: int = 4096) -> np.ndarray:
        """Boolean mask of edges whose constraint is implied by others (exact reduction).

        Edge (i, j) is dropped when some path i -> l -> ... -> j of two or more edges has total
        length <= d(i, j), i.e. when ``min_l D(i, l) + D(l, j) <= d(i, j)`` over records l other
        than i and j, with D the shortest-path distance in the mDP graph.

        Why this is sound: every edge on such a path is strictly shorter than d(i, j) (all
        distances are > 0 and there are at least two edges). By induction on edge length, the
        constraints of all edges shorter than d(i, j) hold whenever the kept constraints hold
        (the shortest edge is never dropped, as no path of two or more edges can be as short).
        Chaining them along the path (Property 3.2, proof in appendix B.2) gives, for every
        output k, z[i,k] <= exp(eps * sum of path lengths) z[j,k] <= exp(eps * d(i,j)) z[j,k],
        so the dropped constraint holds too. The LP optimum is therefore unchanged. (The
        certification step still checks every neighbouring pair, not only the kept ones.)
        """
        if self.n_edges == 0:
            return np.zeros(0, dtype=bool)
        dmax = float(self.distance.max())
        # Path distances up to the longest edge: any path that can imply an edge is that short,
        # so only those entries matter. Kept sparse (missing = longer than dmax or i itself).
        rows = []
        step = max(1, BLOCK // max(self.n, 1))
        for s in range(0, self.n, step):
            D = self.path_distances(np.arange(s, min(s + step, self.n)), limit=dmax)
            D[~np.isfinite(D)] = 0.0
            rows.append(sp.csr_matrix(D))
        Dsp = sp.vstack(rows, format="csr")
        implied = np.zeros(self.n_edges, dtype=bool)
        cblock = max(1, block * 1000 // max(self.n, 1))
        for s in range(0, self.n_edges, cblock):
            ei = self.edges[s:s + cblock, 0]
            ej = self.edges[s:s + cblock, 1]
            A = Dsp[ei].toarray()
            B = Dsp[ej].toarray()
            A[A == 0] = np.inf  # missing entries and l == i
            B[B == 0] = np.inf  # missing entries and l == j
            best = np.min(A + B, axis=1)
            implied[s:s + cblock] = best <= self.distance[s:s + cblock]
        return implied
