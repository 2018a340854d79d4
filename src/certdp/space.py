"""The metric-DP problem: records, outputs, privacy distances, utility costs, prior, epsilon, eta.

Everything downstream (the mDP graph, the LPs, the mechanisms, the audit) reads only a
:class:`Space`. Units are the user's (kilometres for locations).

Paper 000, section 2: N secret records R, K perturbed outputs O, a metric d on R, the utility
loss c[i, k] of reporting o_k for r_i, the prior p[i], the privacy budget epsilon and the
neighbour threshold eta (records i, j are neighbours when d(i, j) <= eta).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from scipy.spatial import cKDTree
from scipy.spatial.distance import cdist

from . import _validate as V

EARTH_RADIUS_KM = 6371.0088
METRICS = ("euclidean", "haversine", "precomputed")


def haversine_km(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Great-circle distance in km between (lat, lon) degree arrays ``a`` and ``b`` (broadcast).

    Latitude comes first: the authors' MATLAB code swaps the two, we do not.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    lat1, lon1 = np.radians(a[..., 0]), np.radians(a[..., 1])
    lat2, lon2 = np.radians(b[..., 0]), np.radians(b[..., 1])
    h = np.sin((lat2 - lat1) / 2.0) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2.0) ** 2
    return 2.0 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def _unit_sphere(latlon: np.ndarray) -> np.ndarray:
    lat = np.radians(latlon[:, 0])
    lon = np.radians(latlon[:, 1])
    return np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])


def pairwise(points_a: np.ndarray, points_b: np.ndarray, metric: str) -> np.ndarray:
    """Dense distance matrix between two point sets under ``metric`` (not 'precomputed')."""
    if metric == "euclidean":
        return cdist(points_a, points_b)
    if metric == "haversine":
        return haversine_km(points_a[:, None, :], points_b[None, :, :])
    raise ValueError(f"metric must be 'euclidean' or 'haversine' for coordinates, got {metric!r}")


def paired(points_a: np.ndarray, points_b: np.ndarray, metric: str) -> np.ndarray:
    """Distances between row ``t`` of ``points_a`` and row ``t`` of ``points_b``."""
    if metric == "euclidean":
        diff = points_a - points_b
        d = np.sqrt(np.einsum("ij,ij->i", diff, diff))
        # squares below the normal range round (a difference of 2.8e-162 read as 3.1e-162, so
        # a pair within eta went unprotected): those rows again, scaled by their largest term
        tiny = np.flatnonzero(d < TINY_DISTANCE)
        if tiny.size:
            t = diff[tiny]
            m = np.max(np.abs(t), axis=1)
            safe = np.where(m > 0, m, 1.0)
            d[tiny] = m * np.sqrt(np.einsum("ij,ij->i", t / safe[:, None], t / safe[:, None]))
        return d
    if metric == "haversine":
        return haversine_km(points_a, points_b)
    raise ValueError(f"metric must be 'euclidean' or 'haversine' for coordinates, got {metric!r}")


#: Euclidean distances below this are recomputed without squaring underflow (:func:`paired`).
TINY_DISTANCE = 1e-150
#: The smallest eta over coordinates: the neighbour search compares squared distances, which
#: must stay in float64's normal range (refused below, not silently lost).
MIN_ETA = 1e-100
#: Bytes the neighbour search holds per candidate pair at its peak (indices, distance, order).
PAIR_BYTES = 64


def _candidate_pairs(metric: str, points: np.ndarray | None, n: int, radius: float) -> np.ndarray:
    """Pairs (i < j) whose distance may be <= radius (a superset, filtered by the caller)."""
    if metric == "precomputed" or math.isinf(radius) or n <= 1:
        V.fits_in_memory(f"the {n * (n - 1) // 2:,} pairs of {n:,} records", PAIR_BYTES * n * (n - 1) / 2,
                         "protect fewer pairs (a finite eta) or use fewer records")
        iu, ju = np.triu_indices(n, 1)
        return np.column_stack([iu, ju])
    assert points is not None
    if 0 < radius < MIN_ETA:
        raise ValueError(f"eta must be at least {MIN_ETA:g} with coordinates, got {radius!r}: rescale the data")
    if metric == "haversine":
        theta = min(radius / EARTH_RADIUS_KM, math.pi)
        chord = 2.0 * math.sin(theta / 2.0)
        return _tree_pairs(cKDTree(_unit_sphere(points)), chord * (1 + 1e-9) + 1e-15)
    if points.shape[1] <= 16:
        return _tree_pairs(cKDTree(points), radius * (1 + 1e-9))
    # High-dimensional embeddings: KD-trees do not help; scan in blocks.
    chunks = []
    found = 0
    step = max(1, 4_000_000 // max(n, 1))
    for s in range(0, n, step):
        d = cdist(points[s:s + step], points)
        ii, jj = np.nonzero(d <= radius * (1 + 1e-9))
        ii = ii + s
        keep = ii < jj
        found += int(np.count_nonzero(keep))
        V.fits_in_memory(f"more than {found:,} pairs of {n:,} records within eta", PAIR_BYTES * found,
                         "protect fewer pairs (a smaller eta) or use fewer records")
        chunks.append(np.column_stack([ii[keep], jj[keep]]))
    return np.concatenate(chunks) if chunks else np.empty((0, 2), dtype=np.int64)


def _tree_pairs(tree: cKDTree, r: float) -> np.ndarray:
    """The pairs within ``r`` in ``tree``. Where even every pair of its records might not fit
    in memory they are counted first (without building them: 0.5-1 times the search's own
    time) so that a set too large (every record at one point) is refused before it is built."""
    n = tree.n
    if PAIR_BYTES * n * (n - 1) / 2 > V.memory_limit():
        pairs = (int(tree.count_neighbors(tree, r)) - n) // 2
        V.fits_in_memory(f"the {pairs:,} pairs of {n:,} records within eta", PAIR_BYTES * pairs,
                         "protect fewer pairs (a smaller eta) or use fewer records")
    return tree.query_pairs(r, output_type="ndarray")


def neighbor_pairs(eta: float, metric: str, *, points: np.ndarray | None = None,
                   distance_matrix: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i < j) of records within ``eta`` of each other under ``metric`` (from
    ``points``, or from ``distance_matrix`` when the metric is 'precomputed'), sorted, with
    its distance. The library's one definition of "neighbours": a mechanism file is audited
    against the pairs this function finds in the file's own coordinates."""
    n = int(distance_matrix.shape[0] if metric == "precomputed" else points.shape[0])  # type: ignore[union-attr]
    cand = _candidate_pairs(metric, points, n, eta)
    if len(cand) == 0:
        return np.empty((0, 2), dtype=np.int64), np.empty(0, dtype=np.float64)
    cand = np.asarray(cand, dtype=np.int64)
    if metric == "precomputed":
        d = distance_matrix[cand[:, 0], cand[:, 1]]  # type: ignore[index]
    else:
        d = paired(points[cand[:, 0]], points[cand[:, 1]], metric)  # type: ignore[index]
    keep = d <= eta
    cand, d = cand[keep], d[keep]
    order = np.lexsort((cand[:, 1], cand[:, 0]))
    return cand[order], np.asarray(d[order], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class Geometry:
    """What decides which pairs of records a guarantee protects: the neighbour threshold, the
    metric, and the records' coordinates (or their distance matrix when the metric is
    'precomputed'). A mechanism file carries it, so its pairs can be recomputed by anyone."""

    eta: float
    metric: str
    points: np.ndarray | None = None
    distance_matrix: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "eta", V.positive_float("eta", self.eta, allow_inf=True))
        V.choice("metric", self.metric, METRICS)
        if self.metric == "precomputed":
            if self.distance_matrix is None:
                raise ValueError("distance_matrix is required when metric='precomputed'")
            arr, other = check_distance_matrix(self.distance_matrix), "points"
        else:
            if self.points is None:
                raise ValueError(f"points are required when metric={self.metric!r}")
            arr, other = check_points(self.points, self.metric), "distance_matrix"
        arr = np.array(arr, dtype=np.float64, copy=True)
        arr.setflags(write=False)       # the facts a certified guarantee rests on do not change
        object.__setattr__(self, "distance_matrix" if self.metric == "precomputed" else "points", arr)
        object.__setattr__(self, other, None)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """The protected pairs and their distances (:func:`neighbor_pairs`)."""
        return neighbor_pairs(self.eta, self.metric, points=self.points, distance_matrix=self.distance_matrix)


@dataclass(frozen=True, eq=False)
class Space:
    """A finite metric-DP problem instance.

    Attributes:
        cost: (N, K) utility loss c[i, k] of reporting output k for record i (non-negative).
        prior: (N,) prior p[i] of each record (non-negative, sums to 1).
        epsilon: privacy budget per unit of distance (> 0).
        eta: neighbour threshold in distance units (> 0; ``inf`` means every pair).
        metric: 'euclidean', 'haversine' (points are (lat, lon) degrees, distances in km) or
            'precomputed' (``distance_matrix`` gives every record distance).
        points: (N, dim) record coordinates, or None when the metric is precomputed.
        distance_matrix: (N, N) record distances when ``metric == 'precomputed'``.
        output_records: (K,) indices of the records used as outputs, or None when the outputs
            are not records (their coordinates are then in ``output_points``).
        output_points: (K, dim) output coordinates. When the outputs are records it is filled
            in as ``points[output_records]`` (and a given one must equal that); None only
            when the metric is precomputed and the outputs have no coordinates.
        labels: optional names of the records (words, road node ids).
        name: a short description of where the instance came from.
        unit: the distance unit.
        seed: the seed the instance was drawn with, when it is known (recorded in outputs).
    """

    cost: np.ndarray
    prior: np.ndarray
    epsilon: float
    eta: float
    metric: str = "euclidean"
    points: np.ndarray | None = None
    distance_matrix: np.ndarray | None = None
    output_records: np.ndarray | None = None
    output_points: np.ndarray | None = None
    labels: tuple[str, ...] | None = None
    name: str = "custom"
    unit: str = ""
    seed: int | None = None

    def __post_init__(self) -> None:
        eps = V.positive_float("epsilon", self.epsilon)
        eta = V.positive_float("eta", self.eta, allow_inf=True)
        V.choice("metric", self.metric, METRICS)
        cost = V.finite_array("cost", self.cost, ndim=2, nonneg=True)
        n, k = cost.shape
        if n < 1 or k < 1:
            raise ValueError(f"cost must have at least one record and one output, got shape {cost.shape}")
        prior = V.finite_array("prior", self.prior, ndim=1, nonneg=True)
        if prior.shape != (n,):
            raise ValueError(f"prior must have one entry per record ({n}), got shape {prior.shape}")
        if abs(float(prior.sum()) - 1.0) > 1e-9:
            raise ValueError(f"prior must sum to 1, got sum {float(prior.sum())!r}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "eta", eta)
        object.__setattr__(self, "cost", cost)
        object.__setattr__(self, "prior", prior)
        if self.metric == "precomputed":
            if self.distance_matrix is None:
                raise ValueError("distance_matrix is required when metric='precomputed'")
            dm = check_distance_matrix(self.distance_matrix, "distance_matrix")
            if dm.shape != (n, n):
                raise ValueError(f"distance_matrix must be ({n}, {n}) to match cost, got {dm.shape}")
            object.__setattr__(self, "distance_matrix", dm)
        else:
            if self.points is None:
                raise ValueError(f"points are required when metric={self.metric!r}")
            pts = check_points(self.points, self.metric)
            if pts.shape[0] != n:
                raise ValueError(f"points must have one row per record ({n}), got {pts.shape[0]}")
            object.__setattr__(self, "points", pts)
        if self.output_records is not None:
            out = V.int_array("output_records", self.output_records, ndim=1)
            if out.shape != (k,):
                raise ValueError(f"output_records must have K={k} entries, got shape {out.shape}")
            if out.size and (out.min() < 0 or out.max() >= n):
                raise ValueError(f"output_records must index records 0..{n - 1}")
            if len(np.unique(out)) != k:
                raise ValueError("output_records must not repeat a record")
            object.__setattr__(self, "output_records", out)
        self._set_output_points(k)
        self._check_no_duplicates()

    def _set_output_points(self, k: int) -> None:
        """Outputs that are records have the records' coordinates: ``output_points`` is
        ``points[output_records]``, so code that maps output indices to places needs only it."""
        op = None if self.output_points is None else V.finite_array("output_points", self.output_points, ndim=2)
        if op is not None and op.shape[0] != k:
            raise ValueError(f"output_points must have K={k} rows, got {op.shape[0]}")
        if self.output_records is not None and self.points is not None:
            own = self.points[self.output_records]
            if op is not None and (op.shape != own.shape or not np.array_equal(op, own)):
                raise ValueError("output_points must be the coordinates of output_records (points[output_records]) "
                                 "when both are given")
            op = own
        if op is not None and self.points is not None and op.shape[1] != self.points.shape[1]:
            raise ValueError(f"output_points must have the records' dimension {self.points.shape[1]}, "
                             f"got {op.shape[1]}")
        object.__setattr__(self, "output_points", op)

    # ------------------------------------------------------------------ sizes
    @property
    def n_records(self) -> int:
        """The number of records N."""
        return int(self.cost.shape[0])

    @property
    def n_outputs(self) -> int:
        """The number of outputs K."""
        return int(self.cost.shape[1])

    @property
    def weighted_cost(self) -> np.ndarray:
        """p[i] * c[i, k]: the LP objective coefficients (paper 000, c_i in Eq. 4)."""
        return self.prior[:, None] * self.cost

    # ------------------------------------------------------------- distances
    def distance_rows(self, rows: np.ndarray | slice | None = None) -> np.ndarray:
        """Distances from the records ``rows`` to every record, as a dense array."""
        if self.metric == "precomputed":
            assert self.distance_matrix is not None
            return self.distance_matrix if rows is None else self.distance_matrix[rows]
        assert self.points is not None
        pts = self.points if rows is None else self.points[rows]
        return pairwise(np.atleast_2d(pts), self.points, self.metric)

    @property
    def geometry(self) -> Geometry:
        """The facts that decide the protected pairs (stored in every mechanism file)."""
        return Geometry(self.eta, self.metric, self.points, self.distance_matrix)

    @cached_property
    def neighbor_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """All neighbouring pairs (i < j, d(i, j) <= eta) and their distances, sorted.

        This is the edge set E of the mDP graph (paper 000, Definition 2.1): every pair the
        mechanism's guarantee must cover (:func:`neighbor_pairs`).
        """
        return neighbor_pairs(self.eta, self.metric, points=self.points, distance_matrix=self.distance_matrix)

    def _check_no_duplicates(self) -> None:
        """Two records at distance 0 make the metric a pseudo-metric: refuse them."""
        pts = self.points
        if self.metric == "precomputed" or pts is None:
            return  # check_distance_matrix already refused zero off-diagonal entries
        cand = _candidate_pairs(self.metric, pts, self.n_records, 0.0)
        if len(cand):
            cand = np.asarray(cand, dtype=np.int64)
            d = paired(pts[cand[:, 0]], pts[cand[:, 1]], self.metric)
            dup = cand[d <= 0.0]
            if len(dup):
                i, j = dup[0]
                raise ValueError(
                    f"records {i} and {j} are at distance 0 (duplicate records); "
                    "mDP needs distinct records: deduplicate the input")

    # --------------------------------------------------------------- changes
    def with_epsilon(self, epsilon: float) -> "Space":
        """The same instance with another privacy budget."""
        return dataclasses.replace(self, epsilon=epsilon)

    def describe(self) -> dict[str, Any]:
        """A small summary for logs and JSON output."""
        e, _ = self.neighbor_pairs
        return {
            "name": self.name,
            "n_records": self.n_records,
            "n_outputs": self.n_outputs,
            "metric": self.metric,
            "epsilon": self.epsilon,
            "eta": self.eta,
            "neighbor_pairs": int(len(e)),
            "unit": self.unit,
        }


def check_points(points: Any, metric: str, name: str = "points") -> np.ndarray:
    """Validate record coordinates for ``metric``: a finite 2-D real array, (lat, lon) degrees
    for 'haversine', and small enough that no squared difference overflows float64 (a distance
    of inf would make every pair look unprotected or every record a duplicate)."""
    pts = V.finite_array(name, points, ndim=2)
    if metric == "haversine":
        if pts.shape[1] != 2:
            raise ValueError(f"haversine {name} must be (lat, lon) pairs, got dimension {pts.shape[1]}")
        if np.any(np.abs(pts[:, 0]) > 90) or np.any(np.abs(pts[:, 1]) > 180):
            raise ValueError(f"haversine {name} must be (lat, lon) in degrees: |lat| <= 90, |lon| <= 180")
    if pts.shape[0] and pts.shape[1] == 0:
        raise ValueError(f"{name} have no coordinates (shape {pts.shape})")
    if pts.size:
        big = float(np.max(np.abs(pts)))
        if big > 1e150 / math.sqrt(pts.shape[1]):
            raise ValueError(f"{name} have coordinates up to {big:.3g}: their distances would overflow float64; "
                             "rescale the data")
    return pts


def check_distance_matrix(d: Any, name: str = "distance_matrix") -> np.ndarray:
    """Validate a dense record-distance matrix: finite, >= 0, symmetric, zero diagonal, and
    strictly positive off the diagonal (no duplicate records)."""
    arr = V.finite_array(name, d, ndim=2, nonneg=True)
    if arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be square, got shape {arr.shape}")
    if np.any(np.diag(arr) != 0):
        raise ValueError(f"{name} must have a zero diagonal; largest diagonal entry {float(np.abs(np.diag(arr)).max())}")
    asym = np.abs(arr - arr.T)
    if asym.size and float(asym.max()) > 1e-12 * max(1.0, float(arr.max())):
        i, j = np.unravel_index(int(np.argmax(asym)), asym.shape)
        raise ValueError(f"{name} must be symmetric; d[{i},{j}]={arr[i, j]} but d[{j},{i}]={arr[j, i]}")
    off = arr + np.eye(arr.shape[0]) * (1.0 + float(arr.max(initial=0.0)))
    if arr.shape[0] > 1 and float(off.min()) <= 0:
        i, j = np.unravel_index(int(np.argmin(off)), off.shape)
        raise ValueError(f"{name}: records {i} and {j} are at distance 0 (duplicate records)")
    return np.minimum(arr, arr.T)  # exactly symmetric
