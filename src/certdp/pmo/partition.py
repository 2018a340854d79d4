"""Secret dataset partitioning (paper 000 section 3.4 and appendix C), plus METIS.

=============  =============================================================================
kmeans-dv      k-means on distance vectors d_i = (d(i,1), ..., d(i,N))  (Eq. 18)
kmeans-rec     k-means on the records' coordinates / embeddings          (Eq. 40)
kmeans-adj     k-means on closed-neighbourhood rows of the mDP graph      (Eq. 41-42)
bsc            spectral clustering: first M eigenvectors of the unnormalised Laplacian
               L = D - W, then k-means on their rows                      (Eq. 43-46)
metis          balanced minimum edge cut of the mDP graph with METIS (pymetis); not in the
               paper
=============  =============================================================================

Eq. 41 sets w_ij = 1 when r_j is a neighbour of r_i; kmeans-adj reads the record itself as
its own neighbour (d_ii = 0 <= eta, Definition 2.1), so w_ii = 1: two neighbours then share
their own two coordinates and sit closer than two records that merely share neighbours.
Without the diagonal, two neighbours with no common neighbour are as far apart as two
strangers, and k-means splits every such edge (a lattice's two colour classes, a graph of
pairs). The paper's published code keeps the diagonal on its grid, text and Gaussian data
(and drops it on the road network).

Each returns a :class:`Partition` whose :meth:`Partition.stats` gives the statistics of
Tables 1-2: internal and boundary records per subset, subproblem sizes, and the sizes of the
master program's components, under two readings of the master's graph (see
:meth:`Partition.stats`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, laplacian

from .. import _validate as V
from ..graph import MDPGraph
from ..space import EARTH_RADIUS_KM, Space

PARTITIONERS = ("kmeans-dv", "kmeans-rec", "kmeans-adj", "bsc", "metis")


@dataclass(frozen=True, eq=False)
class Partition:
    """Subset label of every record (0..M-1, no empty subset) and the method that made it."""

    labels: np.ndarray
    method: str

    @property
    def n_subsets(self) -> int:
        """The number of subsets M."""
        return int(self.labels.max()) + 1 if len(self.labels) else 0

    def boundary_mask(self, edges: np.ndarray) -> np.ndarray:
        """Records with a neighbour (along ``edges``) in another subset (Definition 3.2)."""
        cross = self.labels[edges[:, 0]] != self.labels[edges[:, 1]]
        mask = np.zeros(len(self.labels), dtype=bool)
        mask[edges[cross, 0]] = True
        mask[edges[cross, 1]] = True
        return mask

    def stats(self, edges: np.ndarray) -> dict[str, Any]:
        """Sizes as in Tables 1-2 of paper 000, with respect to the mDP constraints ``edges``.

        A subproblem is a subset's internal records; a subset without any has none.
        ``subproblem_mean`` averages over the subproblems there are (the blocks Benders
        solves); ``internal_mean`` is the internal records per subset over all M subsets, a
        subset without internal records counting 0 (the mean the paper's published code
        reports). The master's components are read two ways: ``master_component_*`` on the
        graph induced on the boundary records by every edge (Eq. 25: the master holds the
        constraints among all boundary records, as :func:`certdp.pmo.benders.decompose`
        builds it), ``cut_component_*`` on the graph of cut edges alone (the published code's
        master holds only the pairs in different subsets, leaving a pair of boundary records
        of one subset to that subset's subproblem).
        """
        n = len(self.labels)
        bmask = self.boundary_mask(edges)
        M = self.n_subsets
        internal = np.bincount(self.labels[~bmask], minlength=M)
        boundary = np.bincount(self.labels[bmask], minlength=M)
        cut = self.labels[edges[:, 0]] != self.labels[edges[:, 1]]
        induced = _component_sizes(n, bmask, edges[bmask[edges[:, 0]] & bmask[edges[:, 1]]])
        across = _component_sizes(n, bmask, edges[cut])
        subs = internal[internal > 0]
        return {
            "method": self.method, "subsets": M, "records": n,
            "internal_per_subset": internal.tolist(), "boundary_per_subset": boundary.tolist(),
            "boundary_records": int(bmask.sum()),
            "subproblem_mean": float(subs.mean()) if len(subs) else 0.0,
            "subproblem_max": int(subs.max()) if len(subs) else 0,
            "internal_mean": float(internal.mean()) if M else 0.0,
            "master_components": len(induced),
            "master_component_mean": float(induced.mean()) if len(induced) else 0.0,
            "master_component_max": int(induced.max()) if len(induced) else 0,
            "cut_components": len(across),
            "cut_component_mean": float(across.mean()) if len(across) else 0.0,
            "cut_component_max": int(across.max()) if len(across) else 0,
            "cut_edges": int(np.count_nonzero(cut)),
        }


def _component_sizes(n: int, members: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Sizes of the connected components of the graph on the records ``members`` (a mask of
    length ``n``) with ``edges`` (pairs of members)."""
    idx = np.flatnonzero(members)
    if not len(idx):
        return np.zeros(0, dtype=np.int64)
    pos = np.full(n, -1)
    pos[idx] = np.arange(len(idx))
    g = sp.csr_matrix((np.ones(len(edges)), (pos[edges[:, 0]], pos[edges[:, 1]])), shape=(len(idx), len(idx)))
    _, lab = connected_components(g, directed=False)
    return np.bincount(lab)


def _relabel(labels: np.ndarray, method: str) -> Partition:
    _, lab = np.unique(labels, return_inverse=True)
    return Partition(lab.astype(np.int64), method)


def _kmeans(X: np.ndarray, m: int, seed: int) -> np.ndarray:
    from sklearn.cluster import KMeans   # imported here: scikit-learn is slow to import, and most runs never cluster
    return KMeans(n_clusters=m, n_init=4, random_state=seed).fit_predict(X)


def _coordinates(space: Space) -> np.ndarray:
    if space.points is None:
        raise ValueError("partition 'kmeans-rec' needs record coordinates (the metric is precomputed)")
    if space.metric == "haversine":
        lat = np.radians(space.points[:, 0])
        lon = np.radians(space.points[:, 1])
        lat0 = float(np.mean(lat))
        return EARTH_RADIUS_KM * np.column_stack([(lon - lon.mean()) * np.cos(lat0), lat - lat0])
    return space.points


def partition(space: Space, method: str = "kmeans-dv", subsets: int = 25, *, seed: int = 0,
              graph: MDPGraph | None = None) -> Partition:
    """Partition the records of ``space`` into at most ``subsets`` non-empty subsets."""
    V.choice("partition", method, PARTITIONERS)
    n = space.n_records
    m = V.int_in_range("subsets", subsets, 1, n)
    g = graph if graph is not None else MDPGraph.from_space(space)
    if m == 1:
        return Partition(np.zeros(n, dtype=np.int64), method)
    if method == "kmeans-dv":
        return _relabel(_kmeans(space.distance_rows(), m, seed), method)
    if method == "kmeans-rec":
        return _relabel(_kmeans(_coordinates(space), m, seed), method)
    W = g.adjacency.copy()
    W.data[:] = 1.0
    if method == "kmeans-adj":   # closed neighbourhoods: w_ii = 1 (module docstring)
        return _relabel(_kmeans(W.toarray() + np.eye(n), m, seed), method)
    if method == "bsc":
        L = laplacian(W).toarray()
        _, vec = np.linalg.eigh(L)
        return _relabel(_kmeans(vec[:, :m], m, seed), method)
    import pymetis

    if g.n_edges == 0:
        return _relabel(np.arange(n) % m, method)
    W = W.tocsr()
    opts = pymetis.Options(seed=seed)
    adj = pymetis.CSRAdjacency(adj_starts=W.indptr.astype(np.int32), adjacent=W.indices.astype(np.int32))
    _, parts = pymetis.part_graph(m, adjacency=adj, options=opts)
    return _relabel(np.asarray(parts), method)
