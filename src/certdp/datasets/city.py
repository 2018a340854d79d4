"""The public location model of LR-Geo (paper 003, section 5.1.1).

A rectangular region is cut into a rows x cols grid. Every cell is one location of V: its
privacy coordinates are the cell centre (Geo-Ind uses the Haversine distance between centres),
and for travel it is represented by the road node nearest to its centre. Travel costs are
shortest paths on the road graph. The target prior q is uniform over V, as in the paper.

Everything here is public: users and the server both know V, the road graph and the travel
costs between locations. What is private is where each user is (and, for the server, q).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, dijkstra
from scipy.spatial import cKDTree

from .. import _validate as V
from ..randomness import RNGLike, as_generator
from ..space import EARTH_RADIUS_KM, haversine_km
from .road import RoadNetwork, load_road_network


def project_km(latlon: np.ndarray, lat0: float) -> np.ndarray:
    """Local equirectangular projection to km (for nearest-neighbour searches only)."""
    latlon = np.asarray(latlon, dtype=np.float64)
    k = math.pi / 180.0 * EARTH_RADIUS_KM
    return np.column_stack([latlon[:, 1] * k * math.cos(math.radians(lat0)), latlon[:, 0] * k])


Bbox = tuple[float, float, float, float]
"""An area as (lon_min, lat_min, lon_max, lat_max) in degrees: the order of GeoJSON and of the
command line's ``--bbox``."""


#: bytes of Dijkstra output held at once: distances from many sources are computed in chunks of
#: sources, so that memory grows with the distances kept, not with sources x road nodes
DIJKSTRA_CHUNK_BYTES = 64 * 2**20


def road_travel(road: RoadNetwork, sources: np.ndarray, targets: np.ndarray, *, limit: float = math.inf
                ) -> np.ndarray:
    """(len(sources), len(targets)) travel distances on the road graph, km (inf beyond
    ``limit``). Dijkstra runs from chunks of sources (:data:`DIJKSTRA_CHUNK_BYTES`)."""
    sources = np.asarray(sources, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    out = np.empty((len(sources), len(targets)))
    step = max(1, DIJKSTRA_CHUNK_BYTES // (8 * max(road.n_nodes, 1)))
    for s in range(0, len(sources), step):
        out[s:s + step] = dijkstra(road.graph, directed=False, indices=sources[s:s + step], limit=limit)[:, targets]
    return out


def pairs_within(latlon: np.ndarray, radius_km: float, lat0: float) -> tuple[np.ndarray, np.ndarray]:
    """All pairs (i < j) with Haversine distance <= radius, and their distances."""
    xy = project_km(latlon, lat0)
    # the projection distorts by well under 1% over a city; search a little wider, then filter
    cand = cKDTree(xy).query_pairs(radius_km * 1.02 + 1e-9, output_type="ndarray")
    if len(cand) == 0:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0)
    d = haversine_km(latlon[cand[:, 0]], latlon[cand[:, 1]])
    keep = d <= radius_km
    return cand[keep].astype(np.int64), d[keep]


@dataclass(frozen=True, eq=False)
class World:
    """Locations V on a road network.

    Attributes:
        road: the road graph (lengths in km).
        latlon: (K, 2) cell centres, (lat, lon) degrees.
        node: (K,) index of each location's road node.
        shape: (rows, cols) of the grid; location ``r * cols + c`` is row r, column c.
        cell_km: (height, width) of a cell in km.
        name: where the instance came from.
        bbox: the area the grid covers, (lon_min, lat_min, lon_max, lat_max).
    """

    road: RoadNetwork = field(repr=False)
    latlon: np.ndarray
    node: np.ndarray
    shape: tuple[int, int]
    cell_km: tuple[float, float]
    name: str = "world"
    bbox: Bbox | None = None

    @property
    def K(self) -> int:
        """The number of cells (the LR-Geo locations)."""
        return int(self.latlon.shape[0])

    @property
    def lat0(self) -> float:
        """The mean latitude of the cells (degrees)."""
        return float(self.latlon[:, 0].mean())

    @property
    def cell(self) -> float:
        """The mean side of a cell in km (the unit in which defaults are scaled)."""
        return float(np.mean(self.cell_km))

    @cached_property
    def haversine(self) -> np.ndarray:
        """(K, K) Haversine distances between cell centres, km."""
        return haversine_km(self.latlon[:, None, :], self.latlon[None, :, :])

    @cached_property
    def _node_travel(self) -> tuple[np.ndarray, np.ndarray]:
        """Travel distances between the distinct road nodes of the locations, and each
        location's index among them (travel depends only on the node)."""
        uniq, inv = np.unique(self.node, return_inverse=True)
        d = road_travel(self.road, uniq, uniq)
        if not np.all(np.isfinite(d)):
            raise ValueError(f"{self.name}: some locations are not connected on the road graph")
        return d, inv

    @cached_property
    def travel(self) -> np.ndarray:
        """(K, K) travel distances tc between the locations' road nodes, km (Dijkstra)."""
        d, inv = self._node_travel
        return d[np.ix_(inv, inv)]

    @cached_property
    def _geo_ind_graphs(self) -> dict[float, sp.csr_matrix]:
        return {}

    def geo_ind_graph(self, gamma: float) -> sp.csr_matrix:
        """The Geo-Ind graph for threshold ``gamma`` (finite): edges between locations within
        gamma, weighted by Haversine distance; built once per gamma."""
        g = self._geo_ind_graphs.get(gamma)
        if g is None:
            E, d = pairs_within(self.latlon, gamma, self.lat0)
            g = sp.csr_matrix((np.concatenate([d, d]), (np.concatenate([E[:, 0], E[:, 1]]),
                                                        np.concatenate([E[:, 1], E[:, 0]]))), shape=(self.K, self.K))
            self._geo_ind_graphs[gamma] = g
        return g

    @cached_property
    def target_prior(self) -> np.ndarray:
        """q: uniform over the locations (paper 003, section 5.1.1)."""
        return np.full(self.K, 1.0 / self.K)

    @cached_property
    def expected_cost(self) -> np.ndarray:
        """(K, K) cbar[i, k] = sum_l q_l |tc(i, l) - tc(k, l)| (Eq. 3-5 without p_i)."""
        # travel depends only on road nodes: work on distinct nodes, targets weighted by count
        T, inv = self._node_travel
        q = np.bincount(inv, weights=self.target_prior, minlength=len(T))
        U = len(T)
        cu = np.empty((U, U))
        step = max(1, 8_000_000 // (U * U))
        for s in range(0, U, step):
            cu[s:s + step] = np.abs(T[s:s + step, None, :] - T[None, :, :]) @ q
        out = cu[np.ix_(inv, inv)]
        return out

    def block(self, rows: int, cols: int) -> "World":
        """The centred rows x cols sub-grid (same cells, same road network)."""
        R, C = self.shape
        rows = V.int_in_range("rows", rows, 1, R)
        cols = V.int_in_range("cols", cols, 1, C)
        r0, c0 = (R - rows) // 2, (C - cols) // 2
        idx = ((np.arange(r0, r0 + rows)[:, None]) * C + np.arange(c0, c0 + cols)[None, :]).reshape(-1)
        bbox = None
        if self.bbox is not None:
            lon_min, lat_min, lon_max, lat_max = self.bbox
            dlat, dlon = (lat_max - lat_min) / R, (lon_max - lon_min) / C
            bbox = (lon_min + c0 * dlon, lat_min + r0 * dlat, lon_min + (c0 + cols) * dlon, lat_min + (r0 + rows) * dlat)
        return World(road=self.road, latlon=self.latlon[idx], node=self.node[idx], shape=(rows, cols),
                     cell_km=self.cell_km, name=f"{self.name}[{rows}x{cols}]", bbox=bbox)

    def nearest(self, latlon: np.ndarray) -> np.ndarray:
        """Index of the location whose centre is nearest to each point."""
        tree = cKDTree(project_km(self.latlon, self.lat0))
        return tree.query(project_km(np.atleast_2d(latlon), self.lat0))[1]

    def describe(self) -> dict:
        """A JSON-ready summary: name, K, grid shape, cell size in km, road nodes."""
        return {"name": self.name, "K": self.K, "shape": list(self.shape),
                "cell_km": [round(c, 5) for c in self.cell_km], "road_nodes": self.road.n_nodes,
                "bbox": None if self.bbox is None else [round(v, 7) for v in self.bbox]}


def check_bbox(bbox: Bbox | list[float] | str) -> Bbox:
    """``bbox`` as four floats (lon_min, lat_min, lon_max, lat_max), from a sequence or the text
    'LON_MIN,LAT_MIN,LON_MAX,LAT_MAX'; ValueError naming what is wrong."""
    if isinstance(bbox, str):
        parts = bbox.split(",")
        try:
            vals = [float(p) for p in parts]
        except ValueError:
            raise ValueError(f"bbox must be LON_MIN,LAT_MIN,LON_MAX,LAT_MAX (degrees); got {bbox!r}") from None
    else:
        vals = [float(v) for v in bbox]
    if len(vals) != 4 or not all(math.isfinite(v) for v in vals):
        raise ValueError(f"bbox must be four finite numbers LON_MIN,LAT_MIN,LON_MAX,LAT_MAX; got {bbox!r}")
    lon_min, lat_min, lon_max, lat_max = vals
    if not (-180 <= lon_min < lon_max <= 180 and -90 <= lat_min < lat_max <= 90):
        raise ValueError(f"bbox must have -180 <= LON_MIN < LON_MAX <= 180 and -90 <= LAT_MIN < LAT_MAX <= 90; "
                         f"got {bbox!r}")
    return (lon_min, lat_min, lon_max, lat_max)


def grid_centres(bbox: Bbox, rows: int, cols: int) -> np.ndarray:
    """(rows * cols, 2) centres (lat, lon) of a rows x cols grid over ``bbox``; cell
    ``r * cols + c`` is row r (from the south), column c (from the west)."""
    lon_min, lat_min, lon_max, lat_max = bbox
    r, c = np.divmod(np.arange(rows * cols), cols)
    return np.column_stack([lat_min + (r + 0.5) * (lat_max - lat_min) / rows,
                            lon_min + (c + 0.5) * (lon_max - lon_min) / cols])


def grid_world(road: RoadNetwork, rows: int, cols: int, bbox: Bbox | None = None, name: str = "road") -> World:
    """A rows x cols grid over ``bbox`` = (lon_min, lat_min, lon_max, lat_max) (default: the
    bounding box of the road graph's largest connected component), each cell represented by
    its nearest node of that component. A bbox must hold at least one of its nodes."""
    rows = V.int_in_range("rows", rows, 1)
    cols = V.int_in_range("cols", cols, 1)
    if rows * cols < 2:
        raise ValueError("the grid needs at least two cells")
    _, comp = connected_components(road.graph, directed=False)
    big = np.flatnonzero(comp == np.argmax(np.bincount(comp)))
    ll = road.latlon[big]
    if bbox is None:
        bbox = (float(ll[:, 1].min()), float(ll[:, 0].min()), float(ll[:, 1].max()), float(ll[:, 0].max()))
    else:
        bbox = check_bbox(bbox)
        lon_min, lat_min, lon_max, lat_max = bbox
        inside = ((ll[:, 1] >= lon_min) & (ll[:, 1] <= lon_max) & (ll[:, 0] >= lat_min) & (ll[:, 0] <= lat_max))
        if not inside.any():
            raise ValueError(f"bbox {bbox} holds no node of the road network (its nodes span lon "
                             f"{ll[:, 1].min():.4f}..{ll[:, 1].max():.4f}, lat {ll[:, 0].min():.4f}..{ll[:, 0].max():.4f})")
    lon_min, lat_min, lon_max, lat_max = bbox
    dlat = (lat_max - lat_min) / rows
    dlon = (lon_max - lon_min) / cols
    centres = grid_centres(bbox, rows, cols)
    lat0 = (lat_min + lat_max) / 2
    tree = cKDTree(project_km(ll, lat0))
    _, nn = tree.query(project_km(centres, lat0))
    h = float(haversine_km(np.array([lat_min, lon_min]), np.array([lat_min + dlat, lon_min])))
    w = float(haversine_km(np.array([lat0, lon_min]), np.array([lat0, lon_min + dlon])))
    return World(road=road, latlon=centres, node=big[nn], shape=(rows, cols), cell_km=(h, w),
                 name=f"{name}:{rows}x{cols}", bbox=bbox)


def helsinki(data_dir: str | Path, rows: int = 40, cols: int = 40, bbox: Bbox | None = None) -> World:
    """The Helsinki walking network of ``shared/data/helsinki`` with a rows x cols grid (over
    ``bbox``, default the network's bounding box)."""
    d = Path(data_dir)
    road = load_road_network(d / "helsinki_walking_nodes.csv", d / "helsinki_walking_edges.csv")
    return grid_world(road, rows, cols, bbox=bbox, name="helsinki")


def grid_city(rows: int = 40, cols: int = 40, *, cell_km: float = 0.25, streets_per_cell: int = 2,
              drop: float = 0.15, detour: float = 0.3, seed: RNGLike = 0,
              origin: tuple[float, float] = (45.0, 10.0), name: str = "gridcity") -> World:
    """A generated city: a street grid (``streets_per_cell`` streets per cell side) with a
    fraction ``drop`` of its blocks' edges removed (the graph stays connected) and every edge
    up to ``detour`` longer than the straight line, and a rows x cols location grid on top."""
    rows = V.int_in_range("rows", rows, 1)
    cols = V.int_in_range("cols", cols, 1)
    cell_km = V.positive_float("cell_km", cell_km)
    spc = V.int_in_range("streets_per_cell", streets_per_cell, 1)
    if not 0 <= drop < 0.5:
        raise ValueError(f"drop must be in [0, 0.5), got {drop}")
    rng = as_generator(seed)
    nr, nc = rows * spc + 1, cols * spc + 1
    step = cell_km / spc
    lat0, lon0 = origin
    dlat = step / (math.pi / 180 * EARTH_RADIUS_KM)
    dlon = dlat / math.cos(math.radians(lat0))
    r, c = np.divmod(np.arange(nr * nc), nc)
    jit = rng.uniform(-0.2, 0.2, size=(nr * nc, 2))
    latlon = np.column_stack([lat0 + (r + jit[:, 0]) * dlat, lon0 + (c + jit[:, 1]) * dlon])
    idx = np.arange(nr * nc).reshape(nr, nc)
    e = np.concatenate([np.column_stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()]),
                        np.column_stack([idx[:-1, :].ravel(), idx[1:, :].ravel()])])
    # drop edges but keep a spanning tree (random order Kruskal), so the city stays connected
    order = rng.permutation(len(e))
    parent = np.arange(nr * nc)

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    tree = np.zeros(len(e), dtype=bool)
    for t in order:
        a, b = find(int(e[t, 0])), find(int(e[t, 1]))
        if a != b:
            parent[a] = b
            tree[t] = True
    keep = tree | (rng.random(len(e)) >= drop)
    e = e[keep]
    length = haversine_km(latlon[e[:, 0]], latlon[e[:, 1]]) * (1.0 + detour * rng.random(len(e)))
    n = nr * nc
    g = sp.csr_matrix((np.concatenate([length, length]), (np.concatenate([e[:, 0], e[:, 1]]),
                                                         np.concatenate([e[:, 1], e[:, 0]]))), shape=(n, n))
    road = RoadNetwork(ids=np.arange(n), latlon=latlon, graph=g)
    bbox = (lon0, lat0, lon0 + cols * spc * dlon, lat0 + rows * spc * dlat)
    return grid_world(road, rows, cols, bbox=bbox, name=name)


#: a generated city at the scale of paper 003's Rome grid (49 x 47 km, 40 x 40 cells)
ROME_KM = 48.0
WORLDS = ("gridcity", "helsinki", "romecity")


def load_world(dataset: str, rows: int, cols: int, *, data_dir: str | Path | None = None,
               network: str | None = None, bbox: Bbox | list[float] | str | None = None) -> World:
    """The LR-Geo world of the command line: ``network`` ('NODES.csv,EDGES.csv', any road
    network in the Helsinki CSV format) or ``dataset``: 'gridcity' (a generated street grid of
    0.25 km cells), 'romecity' (a generated city of 48 x 48 km) or 'helsinki' (the centred rows
    x cols block of its 40 x 40 grid; the CSV files in ``data_dir``). On a road network the
    rows x cols grid covers ``bbox`` (lon_min, lat_min, lon_max, lat_max), by default the
    network's bounding box; the generated cities have no bbox to choose."""
    if bbox is not None:
        bbox = check_bbox(bbox)
        if network is None and dataset != "helsinki":
            raise ValueError(f"bbox applies to a road network (network or helsinki), not to the generated {dataset!r}")
    if network is not None:
        parts = network.split(",")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"network must be NODES.csv,EDGES.csv; got {network!r}")
        for p in parts:
            if not Path(p).is_file():
                raise ValueError(f"network: no file {p!r}")
        return grid_world(load_road_network(*parts), rows, cols, bbox=bbox, name=Path(parts[0]).stem)
    if dataset == "gridcity":
        return grid_city(rows, cols)
    if dataset == "romecity":
        return grid_city(rows, cols, cell_km=ROME_KM / max(rows, cols), streets_per_cell=3, name="romecity")
    if dataset != "helsinki":
        raise ValueError(f"dataset must be one of {', '.join(WORLDS)}; got {dataset!r}")
    d = Path(data_dir) if data_dir is not None else None
    if d is None or not (d / "helsinki_walking_nodes.csv").is_file():
        raise ValueError(f"the Helsinki CSV files are not in {d} (give their folder, or use gridcity)")
    if bbox is not None:
        return helsinki(d, rows, cols, bbox=bbox)
    return helsinki(d).block(rows, cols) if (rows, cols) != (40, 40) else helsinki(d)


def fingerprint(world: World) -> str:
    """A digest of what an LR-Geo user computes with (location centres, their road nodes and
    coordinates): a client and a server agree on the world exactly when it matches."""
    import hashlib

    h = hashlib.sha256()
    for a in (np.round(world.latlon, 9), world.node.astype(np.int64), np.round(world.road.latlon[world.node], 9),
              np.asarray(world.shape, dtype=np.int64)):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]
