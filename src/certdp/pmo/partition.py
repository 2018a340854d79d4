"""Secret dataset partitioning (paper 000 section 3.4 and appendix C), plus METIS.

=============  =============================================================================
kmeans-dv      k-means on distance vectors d_i = (d(i,1), ..., d(i,N))  (Eq. 18)
kmeans-rec     k-means on the records' coordinates / embeddings          (Eq. 40)
kmeans-adj     k-means on adjacency rows of the mDP graph               (Eq. 41-42)
bsc            spectral clustering: first M eigenvectors of the unnormalised Laplacian
               L = D - W, then k-means on their rows                      (Eq. 43-46)
metis          balanced minimum edge cut of the mDP graph with METIS (pymetis); not in the
               paper
=============  =============================================================================

Each returns a :class:`Partition` whose :meth:`Partition.stats` gives the statistics of
Tables 1-2: internal and boundary records per subset, subproblem sizes, and the sizes of the
master program's components (the graph induced on boundary records).
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
        """Sizes as in Tables 1-2 of paper 000, with respect to the mDP constraints ``edges``."""
        n = len(self.labels)
        bmask = self.boundary_mask(edges)
        M = self.n_subsets
        internal = np.bincount(self.labels[~bmask], minlength=M)
        boundary = np.bincount(self.labels[bmask], minlength=M)
        b_idx = np.flatnonzero(bmask)
        comp_sizes: np.ndarray = np.zeros(0, dtype=int)
        if len(b_idx):
            pos = np.full(n, -1)
            pos[b_idx] = np.arange(len(b_idx))
            keep = bmask[edges[:, 0]] & bmask[edges[:, 1]]
            e = edges[keep]
            g = sp.csr_matrix((np.ones(len(e)), (pos[e[:, 0]], pos[e[:, 1]])), shape=(len(b_idx), len(b_idx)))
            _, lab = connected_components(g, directed=False)
            comp_sizes = np.bincount(lab)
        subs = internal[internal > 0]
        return {
            "method": self.method, "subsets": M, "records": n,
            "internal_per_subset": internal.tolist(), "boundary_per_subset": boundary.tolist(),
            "boundary_records": int(bmask.sum()),
            "subproblem_mean": float(subs.mean()) if len(subs) else 0.0,
            "subproblem_max": int(subs.max()) if len(subs) else 0,
            "master_components": int(len(comp_sizes)),
            "master_component_mean": float(comp_sizes.mean()) if len(comp_sizes) else 0.0,
            "master_component_max": int(comp_sizes.max()) if len(comp_sizes) else 0,
            "cut_edges": int(np.count_nonzero(self.labels[edges[:, 0]] != self.labels[edges[:, 1]])),
        }


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
    if method == "kmeans-adj":
        return _relabel(_kmeans(W.toarray(), m, seed), method)
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
