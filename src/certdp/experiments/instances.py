"""The named instances of the benchmarks, in one place (``load('grid-500')``).

Paper 000 kinds: K = 100 outputs sampled from the records (as in paper 000's experiments), or
K = N where the name ends in ``-KN``. epsilon is chosen per dataset so that epsilon times the
median neighbour distance is 1 (the LP is then far from trivial).

``-paper`` rows are at paper 000's settings (section 4.1): epsilon x eta = 20. The grid is
the paper's own (eta = 2 km, epsilon = 10 per km). The other data cannot take the paper's
eta as such (the Helsinki network is 1.0 x 1.7 km where the paper's Rome box is 49 x 47 km;
eta = 2 makes every word2vec pair neighbours), so their eta is the one at which k-m-DV with
25 subsets gives the mean subproblem size of the paper's Table 1 (road 9.5, text 12.6,
synthetic 9.6 records), and epsilon = 20 / eta (:data:`PAPER_SETTINGS`).

=====================  ===================================================================
grid-N                 grid map of 1 km cells (paper 000 section 4.1 (2)), N in 100, 250,
                       500, 1000, 2000; eta = 2 km; travel cost (Manhattan street lattice)
                       to 100 sampled destinations
road-N                 Helsinki walking network (shared data): N sampled nodes, Haversine
                       privacy distance, eta = 0.07 km (mean degree about 13; the area is
                       only about 1.0 x 1.7 km); travel cost = shortest paths to 100 nodes
text-N                 N of the 2,000 most frequent lowercase words of word2vec (shared
                       data); Euclidean distance; eta = 1.2; cost = distance
gauss-N                standard Gaussian in 3-d; eta = 0.65; cost = distance
=====================  ===================================================================

Paper 002 kinds (:func:`uai`): outputs = records (K = N), loss = distance, every pair protected
(eta = inf). ``text`` samples N words with the clustered procedure of paper 002 section 5.1;
``loc`` samples N Helsinki points of interest, projected to planar kilometres (standing in for
the paper's Geolife bins, which are not available offline).

Real data is read from the folder :func:`data_dir` names; an instance whose data is absent
raises :class:`FileNotFoundError`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ..datasets import build_space, clustered_embeddings, embeddings, gaussian, grid, planar, road_network
from ..space import EARTH_RADIUS_KM, Space

SEED = 1
GRID_SHAPES = {100: (10, 10), 250: (10, 25), 500: (20, 25), 1000: (25, 40), 2000: (40, 50)}
#: (eta, epsilon) of the ``-paper`` instances (see the module docstring)
PAPER_SETTINGS = {"grid": (2.0, 10.0), "road": (0.1, 200.0), "text": (1.07, 20 / 1.07), "gauss": (0.47, 20 / 0.47)}


def data_dir() -> Path:
    """Where the real data lives: ``$CERTDP_DATA``, else ``../shared/data`` beside the
    project checkout."""
    env = os.environ.get("CERTDP_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[4] / "shared" / "data"


def _need(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(path)
    return path


def words_file() -> Path:
    """The 2,000-word word2vec matrix under the shared data folder."""
    return data_dir() / "word2vec" / "w2v_gnews_bolukbasi_top2000_lower.npy"


def helsinki_files() -> tuple[Path, Path]:
    """The Helsinki walking network's node and edge CSV files under the shared data folder."""
    d = data_dir() / "helsinki"
    return d / "helsinki_walking_nodes.csv", d / "helsinki_walking_edges.csv"


def _calibrated(ds, *, eta: float, cost: str, k: int | None, eps: float | None = None) -> Space:
    probe = build_space(ds, epsilon=1.0, eta=eta, n_outputs=k, cost=cost, seed=SEED)
    if eps is None:
        _, d = probe.neighbor_pairs
        eps = 1.0 / float(np.median(d))
    return probe.with_epsilon(eps)


def load(name: str) -> Space:
    """The paper-000 instance ``name`` (see the module docstring)."""
    kind, n, *rest = name.split("-")
    N = int(n)
    k = N if "KN" in rest else 100
    if kind not in PAPER_SETTINGS:
        raise KeyError(f"unknown instance {name!r}")
    default_eta = {"grid": 2.0, "road": 0.07, "text": 1.2, "gauss": 0.65}[kind]
    eta, eps = PAPER_SETTINGS[kind] if "paper" in rest else (default_eta, None)
    if kind == "grid":
        rows, cols = GRID_SHAPES[N]
        return _calibrated(grid(rows, cols, 1.0), eta=eta, cost="travel", k=k, eps=eps)
    if kind == "road":
        nodes, edges = helsinki_files()
        return _calibrated(road_network(_need(nodes), edges, N, seed=SEED), eta=eta, cost="travel", k=k, eps=eps)
    if kind == "text":
        return _calibrated(embeddings(_need(words_file()), N, seed=SEED), eta=eta, cost="distance", k=k, eps=eps)
    return _calibrated(gaussian(N, 3, seed=SEED), eta=eta, cost="distance", k=k, eps=eps)


def w2v_binary() -> Path:
    """Word2vec's whole binary (26,423 words), for the text scaling instances."""
    return data_dir() / "word2vec" / "GoogleNews-vectors-negative300-bolukbasi.bin"


SCALE_SHAPES = {500: (20, 25), 1000: (25, 40), 2000: (40, 50), 5000: (50, 100), 10000: (100, 100)}


def _twelfth_neighbour(points: np.ndarray, metric: str) -> float:
    """The median over records of the distance to the 12th nearest other record."""
    from sklearn.neighbors import NearestNeighbors

    dist, _ = NearestNeighbors(n_neighbors=13, metric=metric).fit(points).kneighbors(points)
    return float(np.median(dist[:, 12]))


def scaling(kind: str, n: int, mode: str) -> Space:
    """A paper-000 instance of ``n`` records for the scaling benchmark, K = 100, epsilon set
    so that epsilon x the median neighbour distance is 1. ``mode`` says how the neighbours grow:

    * ``density``: about the same number of neighbours per record at every n: grid of 1 km
      cells, eta 2 km (12 neighbours); Gaussian with eta 0.65 (500 / n)^(1/3); road and text
      with eta the median distance to the 12th nearest record (Haversine, Euclidean);
    * ``eta``: eta fixed on a fixed area, so neighbours grow with n: the grid covers 500 km^2
      with cells of sqrt(500 / n) km, eta 2 km; Gaussian eta 0.65; road 0.07 km; text 1.2
      (words drawn from word2vec's whole binary); city 2 km.

    ``city`` is a generated road network (:func:`street_city`), sampled like ``road``.
    """
    if mode not in ("density", "eta"):
        raise ValueError(f"mode must be 'density' or 'eta', got {mode!r}")
    f = 500.0 / n
    if kind == "grid":
        rows, cols = SCALE_SHAPES[n]
        cell = 1.0 if mode == "density" else math.sqrt(f)
        return _calibrated(grid(rows, cols, cell), eta=2.0, cost="travel", k=100)
    if kind == "gauss":
        eta = 0.65 * f ** (1 / 3) if mode == "density" else 0.65
        return _calibrated(gaussian(n, 3, seed=SEED), eta=eta, cost="distance", k=100)
    if kind == "road":
        nodes, edges = helsinki_files()
        ds = road_network(_need(nodes), edges, n, seed=SEED)
        eta = _twelfth_neighbour(np.radians(ds.points), "haversine") * EARTH_RADIUS_KM if mode == "density" else 0.07
        return _calibrated(ds, eta=eta, cost="travel", k=100)
    if kind == "text":
        ds = embeddings(_need(w2v_binary()), n, seed=SEED)
        eta = _twelfth_neighbour(ds.points, "euclidean") if mode == "density" else 1.2
        return _calibrated(ds, eta=eta, cost="distance", k=100)
    if kind == "city":
        ds = road_network("city", "", n, seed=SEED, network=street_city().road)
        eta = _twelfth_neighbour(np.radians(ds.points), "haversine") * EARTH_RADIUS_KM if mode == "density" else 2.0
        return _calibrated(ds, eta=eta, cost="travel", k=100)
    raise KeyError(f"unknown scaling kind {kind!r}; expected grid, gauss, road, text or city")


def street_city():
    """The ``city`` scaling kind's road network: a generated street grid of 23.5 x 23.5 km with
    streets every 0.25 km, 15% of block edges removed and detours up to 30%
    (:func:`certdp.datasets.city.grid_city`; 9,025 nodes). At eta = 2 km its records have
    about 21 neighbours at 1,000 records and 42 at 2,000, the setting of a city-sized road
    network that the Helsinki extract (1.0 x 1.7 km) cannot give."""
    from ..datasets.city import grid_city

    return grid_city(47, 47, cell_km=0.5, streets_per_cell=2, seed=SEED, name="city")


def uai(kind: str, n: int, epsilon: float) -> Space:
    """A paper-002 instance: ``kind`` 'text' or 'loc', N records, at ``epsilon``."""
    if kind == "text":
        return build_space(clustered_embeddings(_need(words_file()), n, seed=SEED), epsilon=epsilon, eta=math.inf)
    if kind == "loc":
        import pandas as pd

        df = pd.read_csv(_need(data_dir() / "helsinki" / "helsinki_pois.csv")).drop_duplicates(subset=["lat", "lon"])
        pick = np.sort(np.random.default_rng(SEED).choice(len(df), size=n, replace=False))
        lat, lon = df["lat"].to_numpy()[pick], df["lon"].to_numpy()[pick]
        lat0 = math.radians(float(lat.mean()))
        km = EARTH_RADIUS_KM * math.pi / 180.0
        xy = np.column_stack([(lon - lon.mean()) * km * math.cos(lat0), (lat - lat.mean()) * km])
        return build_space(planar(xy), epsilon=epsilon, eta=math.inf)
    raise ValueError(f"unknown instance kind {kind!r}; expected 'text' or 'loc'")


def available(names: list[str]):
    """Yield (name, space) for each named paper-000 instance whose data is present; say which
    are skipped."""
    for name in names:
        try:
            sp = load(name)
        except FileNotFoundError as exc:
            print(f"skip {name}: real data not found ({exc})")
            continue
        yield name, sp
