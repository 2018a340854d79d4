"""The benchmark instances of the Benders issue, in one place.

Every instance has K = 100 outputs sampled from the records (as in paper 000's experiments),
or K = N where the name ends in ``-KN``. epsilon is chosen per dataset so that epsilon times
the median neighbour distance is 1: the LP is then far from trivial (neither "report the
record itself" nor "uniform"). The paper's own setting (epsilon = 10 per km, eta = 2 km) is
kept as the ``-paper`` rows for the grid.

=====================  ===================================================================
grid-500               grid map 20 x 25 cells of 1 km (paper 000 section 4.1 (2)); eta = 2 km
                       (mean degree about 11);
                       travel cost (Manhattan street lattice) to 100 sampled destinations
grid-500-paper         the same with the paper's epsilon = 10 per km
road-500, road-1000    Helsinki walking network (shared/data/helsinki): N sampled nodes,
                       Haversine privacy distance, eta = 0.07 km (mean degree about 13; the
                       area is only about 1.0 x 1.7 km, so the paper's 2 km would make every
                       pair neighbours),
                       travel cost = shortest paths to 100 sampled nodes
text-500, text-1000    the 2,000 most frequent lowercase words of word2vec (shared/data/
                       word2vec), N sampled; Euclidean distance; eta = 1.2 (unit vectors:
                       distances run 0.2 to 1.55; mean degree about 12); cost = distance
gauss-500, gauss-1000  standard Gaussian in 3-d; eta = 0.65; cost = distance
=====================  ===================================================================
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scaledp import Space, build_space
from scaledp.datasets import embeddings, gaussian, grid, road_network

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SEED = 1


def _calibrated(ds, *, eta: float, cost: str, k: int | None, eps: float | None = None) -> Space:
    probe = build_space(ds, epsilon=1.0, eta=eta, n_outputs=k, cost=cost, seed=SEED)
    if eps is None:
        _, d = probe.neighbor_pairs
        eps = 1.0 / float(np.median(d))
    return probe.with_epsilon(eps)


def load(name: str) -> Space:
    """Build the named instance (raises FileNotFoundError when its real data is absent)."""
    kind, n, *rest = name.split("-")
    N = int(n)
    k = N if "KN" in rest else 100
    eps = 10.0 if "paper" in rest else None
    if kind == "grid":
        rows, cols = {500: (20, 25), 1000: (25, 40), 2000: (40, 50), 100: (10, 10), 250: (10, 25)}[N]
        return _calibrated(grid(rows, cols, 1.0), eta=2.0, cost="travel", k=k, eps=eps)
    if kind == "road":
        nodes = DATA / "helsinki" / "helsinki_walking_nodes.csv"
        edges = DATA / "helsinki" / "helsinki_walking_edges.csv"
        if not nodes.exists():
            raise FileNotFoundError(nodes)
        return _calibrated(road_network(nodes, edges, N, seed=SEED), eta=0.07, cost="travel", k=k, eps=eps)
    if kind == "text":
        npy = DATA / "word2vec" / "w2v_gnews_bolukbasi_top2000_lower.npy"
        if not npy.exists():
            raise FileNotFoundError(npy)
        return _calibrated(embeddings(npy, N, seed=SEED), eta=1.2, cost="distance", k=k, eps=eps)
    if kind == "gauss":
        return _calibrated(gaussian(N, 3, seed=SEED), eta=0.65, cost="distance", k=k, eps=eps)
    raise KeyError(f"unknown instance {name!r}")


def available(names: list[str]):
    """Yield (name, space) for each named instance whose data is present; say which are skipped."""
    for name in names:
        try:
            sp = load(name)
        except FileNotFoundError as exc:
            print(f"skip {name}: real data not found ({exc})")
            continue
        yield name, sp


INSTANCES = ["grid-500", "grid-500-paper", "grid-500-KN", "road-500", "road-500-KN", "road-1000", "text-500",
             "text-500-KN", "text-1000", "gauss-500", "gauss-500-KN", "gauss-1000"]
