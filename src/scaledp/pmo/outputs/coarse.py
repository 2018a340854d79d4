"""A multilevel start for the decomposition over outputs: solve a coarsened instance and lift
its row duals and its mechanism to the full one.

Coarsening: k-means on the records' coordinates (on the unit sphere for Haversine points) into
``N / ratio`` clusters; each cluster is represented by its record nearest the centroid, with the
cluster's prior mass and its members' prior-weighted mean costs. The coarse instance keeps
epsilon and eta, so it is a smaller PMO of the same kind; it is solved by the same
decomposition to a looser gap.

Lifting:

* **duals**: record i of cluster c gets ``lambda_c p_i / P_c`` (the coarse row dual shared by
  prior, as the weighted costs are). Any row duals give a valid Lagrangian bound, so this only
  moves where the stabilised master starts (the box centre), never what is certified;
* **mechanism**: the coarse rows are pinned at the representatives and every other entry is
  the largest the full instance's mDP constraints allow (the envelope ``min_j z[j, k] exp(eps
  D(i, j))`` over the representatives j, capped at 1), so each column is a point of the pricing
  polytope P that varies record by record; both masters start with these columns, and the
  matrix rebalanced row by row is certified as the first upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...space import Space


@dataclass(frozen=True)
class CoarseStart:
    """What the coarse solve hands to the full one (unscaled units)."""

    duals: np.ndarray          # (N,) row duals for the box centre
    matrix: np.ndarray         # (N, K) the coarse rows at the representatives, 1 elsewhere (an upper cap)
    n_clusters: int
    seconds: float
    coarse_gap: float


def _embedding(space: Space) -> np.ndarray:
    if space.metric == "precomputed" or space.points is None:
        raise ValueError("the coarse start needs record coordinates (metric 'euclidean' or 'haversine'); "
                         "this instance has only a distance matrix")
    if space.metric == "haversine":
        lat, lon = np.radians(space.points[:, 0]), np.radians(space.points[:, 1])
        return np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])
    return space.points


def clusters(space: Space, ratio: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(label of every record, representative record of every cluster)."""
    from sklearn.cluster import KMeans

    X = _embedding(space)
    m = max(2, int(round(space.n_records / ratio)))
    km = KMeans(n_clusters=m, n_init=1, random_state=seed).fit(X)
    d2 = ((X - km.cluster_centers_[km.labels_]) ** 2).sum(axis=1)
    reps = np.full(m, -1, dtype=np.int64)
    for c in range(m):
        members = np.flatnonzero(km.labels_ == c)
        if members.size:
            reps[c] = members[np.argmin(d2[members])]
    keep = reps >= 0
    remap = np.cumsum(keep) - 1
    return remap[km.labels_], reps[keep]


def coarse_space(space: Space, labels: np.ndarray, reps: np.ndarray) -> Space:
    m = reps.size
    mass = np.bincount(labels, weights=space.prior, minlength=m)
    wsum = np.zeros((m, space.n_outputs))
    np.add.at(wsum, labels, space.prior[:, None] * space.cost)
    safe = np.where(mass > 0, mass, 1.0)
    prior = mass if mass.sum() > 0 else np.full(m, 1.0 / m)
    return Space(cost=wsum / safe[:, None], prior=prior / prior.sum(), epsilon=space.epsilon, eta=space.eta,
                 metric=space.metric, points=space.points[reps], name=f"{space.name} (coarse, {m} clusters)",
                 unit=space.unit)


def coarse_start(space: Space, ratio: float = 4.0, gap: float = 0.02, **options) -> CoarseStart:
    """Solve the coarsened instance by the decomposition over outputs and lift it (module docstring)."""
    import time

    from .solve import solve_outputs

    if not ratio > 1:
        raise ValueError(f"coarse_ratio must be > 1 (records per cluster), got {ratio!r}")
    t0 = time.perf_counter()
    labels, reps = clusters(space, ratio)
    small = coarse_space(space, labels, reps)
    res = solve_outputs(small, gap=gap, **options)
    lam_c = np.asarray(res.stats["row_duals"])
    mass = np.bincount(labels, weights=space.prior, minlength=reps.size)
    share = np.where(mass[labels] > 0, space.prior / np.where(mass[labels] > 0, mass[labels], 1.0), 0.0)
    duals = lam_c[labels] * share
    matrix = np.ones((space.n_records, space.n_outputs))
    matrix[reps] = np.asarray(res.mechanism.matrix)
    return CoarseStart(duals, matrix, int(reps.size), time.perf_counter() - t0, float(res.gap))
