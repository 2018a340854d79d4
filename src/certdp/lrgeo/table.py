"""The server's cost reference table (paper 003, section 4.5).

The server discretises the region into a finer grid V-hat (cell size ``cell_km``); every fine
cell is represented by its nearest road node. For two fine cells a, b the table holds

    beta[a, b] = sum_l q_l |tc(a, l) - tc(b, l)|         (Eq. 3-5, expected over targets l)

for every pair whose centres are within ``band_km`` (the users need only pairs within the
obfuscation range plus the snapping distance). beta depends only on the two road nodes, so it
is computed once per distinct node pair.

A user who needs c[i, k] for locations v_i, v_k snaps them to their nearest fine cells a, b and
takes ``p_i (beta[a, b] + e_i + e_k)`` with ``e = tc(v, snapped)``, the travel distance to the
snapped node (Eq. 27). This is an upper bound on the true cost by the triangle inequality of
the road metric; ``p_i max(0, beta - e_i - e_k)`` is a lower bound (Eq. 33). The paper writes
the Haversine distance for e, which is not a bound on a *travel* distance; we use travel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.sparse.csgraph import connected_components, dijkstra
from scipy.spatial import cKDTree

from .. import _validate as V
from ..datasets.city import World, project_km
from ..space import haversine_km


@dataclass(frozen=True, eq=False)
class ReferenceTable:
    """beta over pairs of fine cells (stored per pair of their road nodes).

    Attributes:
        cell_km: fine cell side.
        fine_latlon: (F, 2) fine cell centres.
        fine_node: (F,) road node of each fine cell.
        band_km: pairs of fine cells farther apart than this are not in the table.
        pair_key: sorted keys ``a * n_nodes + b`` (a <= b) of the node pairs held.
        pair_beta: beta of each key.
        n_nodes: number of road nodes (for the keys).
        snap_max_km: the largest travel distance from a location of V to its snapped node
            (what the server knows about e; used by the inference metric).
    """

    cell_km: float
    fine_latlon: np.ndarray
    fine_node: np.ndarray
    band_km: float
    pair_key: np.ndarray
    pair_beta: np.ndarray
    n_nodes: int
    snap_max_km: float

    @property
    def half_diagonal_km(self) -> float:
        """Half the diagonal of a cell: the farthest a location is from its cell's centre."""
        return self.cell_km * math.sqrt(2.0) / 2.0

    def lookup(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """beta for node pairs (a, b); NaN where the pair is not in the table."""
        return lookup(self.pair_key, self.pair_beta, self.n_nodes, a, b)


def lookup(keys: np.ndarray, beta: np.ndarray, n_nodes: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Reference-table costs between locations ``a`` and ``b`` (pairs of node indices) from the sorted keys."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    k = np.minimum(a, b) * n_nodes + np.maximum(a, b)
    pos = np.searchsorted(keys, k)
    pos_c = np.minimum(pos, len(keys) - 1)
    found = (len(keys) > 0) & (keys[pos_c] == k)
    out = np.where(found, beta[pos_c], np.nan)
    return np.where(a == b, 0.0, out)


def fine_grid(world: World, cell_km: float) -> np.ndarray:
    """Centres of a grid of ``cell_km`` cells covering the world's cells."""
    R, C = world.shape
    ll = world.latlon
    hl, wl = world.cell_km
    lat_min, lat_max = ll[:, 0].min(), ll[:, 0].max()
    lon_min, lon_max = ll[:, 1].min(), ll[:, 1].max()
    dlat_cell = (lat_max - lat_min) / max(R - 1, 1) if R > 1 else 0.0
    dlon_cell = (lon_max - lon_min) / max(C - 1, 1) if C > 1 else 0.0
    # extend by half a location cell on each side
    lat_lo, lat_hi = lat_min - dlat_cell / 2, lat_max + dlat_cell / 2
    lon_lo, lon_hi = lon_min - dlon_cell / 2, lon_max + dlon_cell / 2
    height = float(haversine_km(np.array([lat_lo, lon_lo]), np.array([lat_hi, lon_lo])))
    lat0 = world.lat0
    width = float(haversine_km(np.array([lat0, lon_lo]), np.array([lat0, lon_hi])))
    nr = max(1, math.ceil(height / cell_km - 1e-9))
    nc = max(1, math.ceil(width / cell_km - 1e-9))
    r, c = np.divmod(np.arange(nr * nc), nc)
    return np.column_stack([lat_lo + (r + 0.5) * (lat_hi - lat_lo) / nr, lon_lo + (c + 0.5) * (lon_hi - lon_lo) / nc])


def build_table(world: World, cell_km: float, band_km: float, *, chunk: int = 4_000_000) -> ReferenceTable:
    """Build the server's reference table for ``world`` (targets: the world's prior q)."""
    cell_km = V.positive_float("cell_km (reference table cell size)", cell_km)
    band_km = V.positive_float("band_km", band_km)
    road = world.road
    fl = fine_grid(world, cell_km)
    _, comp = connected_components(road.graph, directed=False)
    big = np.flatnonzero(comp == comp[world.node[0]])
    tree = cKDTree(project_km(road.latlon[big], world.lat0))
    fnode = big[tree.query(project_km(fl, world.lat0))[1]]
    # node pairs that some two fine cells within the band map to. A node a represents fine
    # cells up to r_a from it, so d(a, b) <= band + r_a + r_b covers them all (a superset).
    n = road.n_nodes
    un, finv = np.unique(fnode, return_inverse=True)
    r = np.zeros(len(un))
    np.maximum.at(r, finv, haversine_km(fl, road.latlon[fnode]))
    xy = project_km(road.latlon[un], world.lat0)
    kd = cKDTree(xy)
    rows, cols = [], []
    for i, nb in enumerate(kd.query_ball_point(xy, (band_km + r + r.max()) * 1.02 + 1e-9)):
        nb = np.asarray(nb, dtype=np.int64)
        nb = nb[nb > i]
        rows.append(np.full(len(nb), i))
        cols.append(nb)
    I = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    J = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    d = haversine_km(road.latlon[un[I]], road.latlon[un[J]])
    keep = d <= (band_km + r[I] + r[J]) * 1.0001 + 1e-9
    a = np.minimum(un[I[keep]], un[J[keep]])
    b = np.maximum(un[I[keep]], un[J[keep]])
    keys = np.unique(a * n + b)
    pa, pb = keys // n, keys % n
    # travel from every distinct target node to every node used by the table
    tn, tinv = np.unique(world.node, return_inverse=True)
    w = np.bincount(tinv, weights=world.target_prior, minlength=len(tn))
    used, uinv = np.unique(np.concatenate([pa, pb]), return_inverse=True)
    T = dijkstra(road.graph, directed=False, indices=tn)[:, used]  # (targets, used)
    ia, ib = uinv[: len(pa)], uinv[len(pa):]
    beta = np.empty(len(keys))
    step = max(1, chunk // max(len(tn), 1))
    for s in range(0, len(keys), step):
        beta[s:s + step] = w @ np.abs(T[:, ia[s:s + step]] - T[:, ib[s:s + step]])
    # the snapping error the server can bound: travel from each location to its fine cell's node
    snap = snapped(fl, fnode, world.latlon, world.lat0)
    e = travel_pairs(road, world.node, snap)
    return ReferenceTable(cell_km=cell_km, fine_latlon=fl, fine_node=fnode, band_km=band_km, pair_key=keys,
                          pair_beta=beta, n_nodes=n, snap_max_km=float(e.max(initial=0.0)))


def snapped(fine_latlon: np.ndarray, fine_node: np.ndarray, latlon: np.ndarray, lat0: float) -> np.ndarray:
    """Road node of the fine cell nearest to each point."""
    tree = cKDTree(project_km(fine_latlon, lat0))
    return fine_node[tree.query(project_km(np.atleast_2d(latlon), lat0))[1]]


def travel_pairs(road, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Travel distance from ``src[t]`` to ``dst[t]`` for every t (one Dijkstra per distinct source)."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    out = np.zeros(len(src))
    need = src != dst
    if np.any(need):
        us, inv = np.unique(src[need], return_inverse=True)
        D = dijkstra(road.graph, directed=False, indices=us)
        out[need] = D[inv, dst[need]]
    return out
