"""Datasets: secret records with their metric, and how to turn them into a :class:`Space`.

A :class:`Dataset` is the raw material (record coordinates, the privacy metric, optionally a
travel model for the travel-cost loss of paper 000 Eq. 48). :func:`build_space` picks the
outputs, the cost model, the prior, epsilon and eta, and returns the problem instance.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .. import _validate as V
from ..randomness import RNGLike, as_generator
from ..space import Space, check_points, pairwise

COST_MODELS = ("distance", "travel")


class TravelModel(Protocol):
    """Path (travel) distances from records to destinations, for the travel cost (Eq. 48)."""

    def n_destinations_available(self) -> int:
        """How many destinations the travel cost can sample from."""

    def sample_destinations(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` distinct destinations drawn with ``rng``."""

    def record_to_destination(self, destinations: np.ndarray) -> np.ndarray:
        """(N, T) path distances from every record to every destination."""
        ...


@dataclass(frozen=True, eq=False)
class Dataset:
    """Secret records in a metric space.

    Attributes:
        points: (N, dim) coordinates ((lat, lon) degrees when ``metric == 'haversine'``).
        metric: 'euclidean' or 'haversine'.
        name: description used in reports.
        labels: optional record names (words, node ids).
        travel: optional travel model (road network or grid lattice) for ``cost='travel'``.
        unit: distance unit.
    """

    points: np.ndarray
    metric: str
    name: str
    labels: tuple[str, ...] | None = None
    travel: TravelModel | None = field(default=None, repr=False)
    unit: str = ""

    @property
    def n_records(self) -> int:
        """The number of records N."""
        return int(self.points.shape[0])


def choose_outputs(n_records: int, n_outputs: int | None, rng: RNGLike) -> np.ndarray:
    """Indices of the K records used as outputs: all of them, or a seeded sample of K."""
    if n_outputs is None or n_outputs == n_records:
        return np.arange(n_records, dtype=np.int64)
    k = V.int_in_range("n_outputs", n_outputs, 1)
    if k > n_records:
        raise ValueError(f"n_outputs (K={k}) cannot exceed the number of records (N={n_records}) "
                         "when the outputs are a subset of the records")
    gen = as_generator(rng)
    return np.sort(gen.choice(n_records, size=k, replace=False)).astype(np.int64)


def travel_cost(rec_to_dest: np.ndarray, out_to_dest: np.ndarray,
                dest_weights: np.ndarray | None = None, *, block: int = 256) -> np.ndarray:
    """Paper 000 Eq. 48: c[i, k] = sum_t p_t |pd(r_i, dest_t) - pd(o_k, dest_t)|.

    ``rec_to_dest`` is (N, T), ``out_to_dest`` is (K, T); weights default to uniform.
    Computed in row blocks so memory stays at ``block * K * T`` floats.
    """
    n, t = rec_to_dest.shape
    if out_to_dest.shape[1] != t:
        raise ValueError("record and output path distances must use the same destinations")
    w = np.full(t, 1.0 / t) if dest_weights is None else np.asarray(dest_weights, dtype=np.float64)
    out = np.empty((n, out_to_dest.shape[0]))
    for s in range(0, n, block):
        diff = np.abs(rec_to_dest[s:s + block, None, :] - out_to_dest[None, :, :])
        out[s:s + block] = diff @ w
    return out


def build_space(dataset: Dataset, *, epsilon: float, eta: float, n_outputs: int | None = None,
                outputs: np.ndarray | None = None, cost: str = "distance",
                prior: np.ndarray | None = None, n_destinations: int = 100,
                destinations: np.ndarray | None = None, seed: RNGLike = None) -> Space:
    """Make the problem instance for ``dataset``.

    Args:
        epsilon: privacy budget per distance unit.
        eta: neighbour threshold.
        n_outputs: K, the number of outputs sampled (seeded) from the records; default all.
        outputs: explicit record indices to use as outputs (overrides ``n_outputs``).
        cost: 'distance' (c[i,k] = d(r_i, o_k)) or 'travel' (Eq. 48, needs a travel model).
        prior: p[i]; default uniform.
        n_destinations: destinations sampled for the travel cost (paper: 100).
        destinations: explicit destinations for the travel cost (indices in the travel model).
        seed: seed for the output and destination samples (None: a fresh one is drawn from the
            operating system's entropy; an int seed is recorded in the space, ``space.seed``).
    """
    V.choice("cost", cost, COST_MODELS)
    n = dataset.n_records
    k = n if outputs is None and n_outputs is None else (len(outputs) if outputs is not None else n_outputs)
    if isinstance(k, int) and k > 0:
        V.fits_in_memory(f"the {n:,} x {k:,} cost matrix of {dataset.name}",
                         8.0 * n * k * (2 if cost == "travel" else 1) + (8.0 * n * n_destinations if cost == "travel" else 0))
    if seed is None:
        seed = secrets.randbits(32)       # drawn, and recorded in the space, so the instance can be rebuilt
    gen = as_generator(seed)
    if outputs is not None:
        out = V.int_array("outputs", outputs)
        if out.ndim != 1 or out.size == 0 or out.min() < 0 or out.max() >= n:
            raise ValueError(f"outputs must be a non-empty list of record indices in [0, {n - 1}]")
        if len(np.unique(out)) != len(out):
            raise ValueError("outputs must not repeat a record")
    else:
        out = choose_outputs(n, n_outputs, gen)
    if cost == "distance":
        c = pairwise(check_points(dataset.points, dataset.metric, f"the records of {dataset.name}"),
                     dataset.points[out], dataset.metric)
    else:
        if dataset.travel is None:
            raise ValueError(f"cost='travel' needs a road network or grid dataset; {dataset.name!r} has no travel model")
        if destinations is None:
            t = V.int_in_range("n_destinations", n_destinations, 1)
            t = min(t, dataset.travel.n_destinations_available())
            destinations = dataset.travel.sample_destinations(t, gen)
        pd = dataset.travel.record_to_destination(np.asarray(destinations))
        if not np.all(np.isfinite(pd)):
            raise ValueError("some records cannot reach some destinations on the travel graph")
        c = travel_cost(pd, pd[out])
    if prior is None:
        prior = np.full(n, 1.0 / n)
    return Space(cost=c, prior=prior, epsilon=epsilon, eta=eta,
                 metric=dataset.metric, points=dataset.points, output_records=out,
                 labels=dataset.labels, name=dataset.name, unit=dataset.unit,
                 seed=int(seed) if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) else None)
