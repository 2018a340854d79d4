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
NETWORK-N-bB           the growing-density family of issue 49 (:func:`growing`): N road
                       nodes of NETWORK (helsinki, goldcoast, sydney, city, or a held-out
                       network under ``$CERTDP_HELDOUT/roads``) in box B, about (N - 1) / 48
                       neighbours a record, eta 2 km where the network allows it
=====================  ===================================================================

Paper 002 kinds (:func:`uai`): outputs = records (K = N), loss = distance, every pair protected
(eta = inf). ``text`` samples N words with the clustered procedure of paper 002 section 5.1;
``loc`` samples N Helsinki points of interest, projected to planar kilometres (standing in for
the paper's Geolife bins, which are not available offline).

Real data is read from the folder :func:`data_dir` names; an instance whose data is absent
raises :class:`FileNotFoundError`.
"""

from __future__ import annotations

import functools
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


def _calibrated(ds, *, eta: float, cost: str, k: int | None, eps: float | None = None, seed: int = SEED) -> Space:
    probe = build_space(ds, epsilon=1.0, eta=eta, n_outputs=k, cost=cost, seed=seed)
    if eps is None:
        _, d = probe.neighbor_pairs
        eps = 1.0 / float(np.median(d))
    return probe.with_epsilon(eps)


def load(name: str) -> Space:
    """The paper-000 instance ``name`` (see the module docstring); ``NETWORK-N-bB`` is box B of
    the growing-density family (:func:`growing`). A last part ``sS`` draws instance S of the
    kind (records, outputs and destinations sampled with seed S; ``s1`` is the instance
    without it), as the paper's 10 instances per dataset."""
    kind, n, *rest = name.split("-")
    seed = SEED
    if rest and rest[-1][:1] == "s" and rest[-1][1:].isdigit():
        seed = int(rest.pop()[1:])
    N = int(n)
    if kind in NETWORKS or kind in heldout_networks():
        box = int(rest[0][1:]) if rest and rest[0].startswith("b") else 0
        return growing(kind, N, box)
    k = N if "KN" in rest else 100
    if kind not in PAPER_SETTINGS:
        raise KeyError(f"unknown instance {name!r}")
    default_eta = {"grid": 2.0, "road": 0.07, "text": 1.2, "gauss": 0.65}[kind]
    eta, eps = PAPER_SETTINGS[kind] if "paper" in rest else (default_eta, None)
    if kind == "grid":
        rows, cols = GRID_SHAPES[N]
        return _calibrated(grid(rows, cols, 1.0), eta=eta, cost="travel", k=k, eps=eps, seed=seed)
    if kind == "road":
        nodes, edges = helsinki_files()
        return _calibrated(road_network(_need(nodes), edges, N, seed=seed), eta=eta, cost="travel", k=k, eps=eps,
                           seed=seed)
    if kind == "text":
        return _calibrated(embeddings(_need(words_file()), N, seed=seed), eta=eta, cost="distance", k=k, eps=eps,
                           seed=seed)
    return _calibrated(gaussian(N, 3, seed=seed), eta=eta, cost="distance", k=k, eps=eps, seed=seed)


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


def street_city(seed: int = SEED):
    """The ``city`` scaling kind's road network: a generated street grid of 23.5 x 23.5 km with
    streets every 0.25 km, 15% of block edges removed and detours up to 30%
    (:func:`certdp.datasets.city.grid_city`; 9,025 nodes). At eta = 2 km its records have
    about 21 neighbours at 1,000 records and 42 at 2,000, the setting of a city-sized road
    network that the Helsinki extract (1.0 x 1.7 km) cannot give."""
    from ..datasets.city import grid_city

    return grid_city(47, 47, cell_km=0.5, streets_per_cell=2, seed=seed, name="city")


# ----------------------------------------------------------------- real networks, growing density
GROWING_ETA = 2.0
"""eta (km) of the growing-density family, as in the generated city's ``eta`` mode."""

NEIGHBOUR_SHARE = 1.0 / 48.0
"""The share of record pairs within eta in the growing-density family: the generated city's at
eta = 2 km (``results/scale_city.md``: 10.5 / 20.6 / 41.7 neighbours at 500 / 1,000 / 2,000
records, 0.0206-0.0210 of the other records), so a record has about (N - 1) / 48 neighbours:
11 / 21 / 42 / 104 at 500 / 1,000 / 2,000 / 5,000."""

NETWORKS = ("helsinki", "goldcoast", "sydney", "city")
"""The road networks of the growing-density family: the Helsinki walking extract, the Gold
Coast and Sydney car networks (shared data), and the generated city (:func:`street_city`)."""


def heldout_dir() -> Path | None:
    """``$CERTDP_HELDOUT/roads``: real networks kept out of tuning, used only to confirm; None
    when unset or absent."""
    env = os.environ.get("CERTDP_HELDOUT")
    d = Path(env) / "roads" if env else None
    return d if d is not None and d.is_dir() else None


def heldout_networks() -> list[str]:
    """The names of the held-out networks (``<name>_nodes.csv`` with its ``<name>_edges.csv``)."""
    d = heldout_dir()
    if d is None:
        return []
    return sorted(p.name[:-len("_nodes.csv")] for p in d.glob("*_nodes.csv")
                  if (d / (p.name[:-len("_nodes.csv")] + "_edges.csv")).is_file())


def network_files(name: str) -> tuple[Path, Path]:
    """The node and edge files of a real road network of the growing-density family or of the
    held-out folder; FileNotFoundError when absent."""
    if name == "helsinki":
        nodes, edges = helsinki_files()
    elif name in ("goldcoast", "sydney"):
        nodes, edges = data_dir() / "roads" / f"{name}_nodes.csv", data_dir() / "roads" / f"{name}_edges.csv"
    else:
        d = heldout_dir()
        if d is None:
            raise FileNotFoundError(f"network {name!r}: not a shared network and $CERTDP_HELDOUT/roads is absent")
        nodes, edges = d / f"{name}_nodes.csv", d / f"{name}_edges.csv"
    return _need(nodes), _need(edges)


@functools.lru_cache(maxsize=4)
def _network(name: str, box: int):
    """The road network of ``name`` (the generated city's box b is the city of seed SEED + b),
    its candidate record nodes (largest component, one per distinct coordinate) and their
    planar coordinates in km."""
    from scipy.sparse.csgraph import connected_components

    from ..datasets import load_road_network
    from ..datasets.city import project_km

    net = street_city(SEED + box).road if name == "city" else load_road_network(*network_files(name))
    _, comp = connected_components(net.graph, directed=False)
    cand = np.flatnonzero(comp == np.argmax(np.bincount(comp)))
    _, first = np.unique(net.latlon[cand], axis=0, return_index=True)
    cand = np.sort(cand[first])
    return net, cand, project_km(net.latlon[cand], float(net.latlon[cand, 0].mean()))


def _pair_share(xy: np.ndarray, radius: float) -> float:
    """The share of pairs of the points ``xy`` within ``radius`` of each other."""
    from scipy.spatial import cKDTree

    n = len(xy)
    if n < 2:
        return 0.0
    tree = cKDTree(xy)
    return float(tree.count_neighbors(tree, radius) - n) / (n * (n - 1))


def box_centres(xy: np.ndarray, count: int) -> list[int]:
    """Up to ``count`` box centres: the nodes with the most nodes within 2.5 eta, in that
    order, each at least 10 eta from the centres before it (distinct parts of a city)."""
    from scipy.spatial import cKDTree

    tree = cKDTree(xy)
    density = tree.query_ball_point(xy, 2.5 * GROWING_ETA, return_length=True)
    centres: list[int] = []
    for i in np.argsort(-density, kind="stable"):
        if all(np.hypot(*(xy[i] - xy[j])) >= 10 * GROWING_ETA for j in centres):
            centres.append(int(i))
            if len(centres) == count:
                break
    return centres


def growing_box(xy: np.ndarray, n: int, centre: int) -> tuple[np.ndarray, float]:
    """The records' area and eta of the growing-density family (module :data:`NEIGHBOUR_SHARE`):
    the square around node ``centre`` whose side is the larger of the side at which a share
    :data:`NEIGHBOUR_SHARE` of its node pairs lie within :data:`GROWING_ETA` and the side at
    which it holds ``n`` nodes; eta is :data:`GROWING_ETA`, or, where even the whole network
    has more pairs than that share within it (Helsinki's 1.0 x 1.7 km, the Gold Coast
    network), the distance within which that share lies on the whole network. epsilon x the
    median neighbour distance is 1 either way, so the LP does not depend on the unit of
    distance, only on who neighbours whom. Returns the indices of ``xy`` in the box and eta."""
    if n > len(xy):
        raise ValueError(f"the network has {len(xy)} candidate nodes, fewer than n={n}")
    off = np.max(np.abs(xy - xy[centre]), axis=1)      # half the side of the smallest box holding each node
    order = np.sort(off)
    extent = float(order[-1])

    def share(half: float) -> float:
        return _pair_share(xy[off <= half], GROWING_ETA)

    half_n = float(order[n - 1])
    if share(extent) > NEIGHBOUR_SHARE:                 # the whole network is denser than the share
        inside = np.arange(len(xy))
        lo, hi = 0.0, GROWING_ETA
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if _pair_share(xy, mid) < NEIGHBOUR_SHARE else (lo, mid)
        return inside, hi
    lo, hi = 0.0, extent
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if share(mid) <= NEIGHBOUR_SHARE else (mid, hi)
    return np.flatnonzero(off <= max(hi, half_n)), GROWING_ETA


def growing(network: str, n: int, box: int = 0, k: int = 100) -> Space:
    """An instance of the growing-density family (issue 49): ``n`` road nodes of ``network``
    (one of :data:`NETWORKS` or a held-out network, :func:`heldout_networks`) drawn from box
    number ``box`` (:func:`growing_box` around the ``box``-th of :func:`box_centres`; where the
    network has fewer centres, or every box is the whole network, the boxes differ by their
    sample), eta and the box as :func:`growing_box` says, epsilon x the median neighbour
    distance = 1, ``k`` outputs, travel cost. The generated city's boxes are cities of
    different seeds. A record has about (n - 1) / 48 neighbours where the network is large
    enough."""
    net, cand, xy = _network(network, box if network == "city" else 0)
    centres = box_centres(xy, box + 1)
    inside, eta = growing_box(xy, n, centres[box % len(centres)])
    ds = road_network(f"{network}-b{box}", "", n, seed=SEED + box, network=net, within=cand[inside])
    return _calibrated(ds, eta=eta, cost="travel", k=k)


def uai(kind: str, n: int, epsilon: float, *, seed: int = SEED, source: str | Path | None = None) -> Space:
    """A paper-002 instance: ``kind`` 'text' or 'loc', N records, at ``epsilon``; ``seed`` draws
    the subset. ``source`` replaces the shared data: for 'text' an embedding file (``.npy`` with
    its word list, or word2vec ``.bin``), for 'loc' a CSV with ``lat`` and ``lon`` columns (points
    of interest, or the nodes of a road network)."""
    if kind == "text":
        path = words_file() if source is None else Path(source)
        return build_space(clustered_embeddings(_need(path), n, seed=seed), epsilon=epsilon, eta=math.inf)
    if kind == "loc":
        import pandas as pd

        path = data_dir() / "helsinki" / "helsinki_pois.csv" if source is None else Path(source)
        df = pd.read_csv(_need(path)).drop_duplicates(subset=["lat", "lon"])
        pick = np.sort(np.random.default_rng(seed).choice(len(df), size=n, replace=False))
        lat, lon = df["lat"].to_numpy()[pick], df["lon"].to_numpy()[pick]
        lat0 = math.radians(float(lat.mean()))
        km = EARTH_RADIUS_KM * math.pi / 180.0
        xy = np.column_stack([(lon - lon.mean()) * km * math.cos(lat0), (lat - lat.mean()) * km])
        return build_space(planar(xy, name=f"loc:{path.name}:{n}:seed{seed}", unit="km"), epsilon=epsilon, eta=math.inf)
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
