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

Which rows are held. Users snap only locations of V, and V is public, so the only fine cells
any user ever looks up are those that can be nearest to a location's centre (one per
location, up to four where a centre lies on a boundary between fine cells). The table holds
those cells and the pairs of them within the band (section 4.5.3 reduces V-hat the same
way, to what the users need): every cost a user estimates is the one the whole fine grid
gives, while the table grows with the locations, K times the cells within the band, instead
of with the area over the fine cell (0.1 km cells over a 47 x 49 km box: 231,000 cells and 7
million node pairs, 5.6 GB to build, against 1,600 cells and tens of thousands of pairs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from .. import _validate as V
from ..datasets.city import World, pairs_within, project_km, road_travel
from ..space import haversine_km


@dataclass(frozen=True)
class FineGrid:
    """The geometry of V-hat: ``rows x cols`` cells of about ``cell_km`` over the world's cells
    (their extent, extended by half a location cell on each side), regular in latitude and
    longitude. Cell ``r * cols + c`` has its centre at row r, column c. Nothing is allocated
    per cell: cells are found by arithmetic."""

    lat_lo: float
    lon_lo: float
    dlat: float
    dlon: float
    rows: int
    cols: int

    @classmethod
    def over(cls, world: World, cell_km: float) -> FineGrid:
        R, C = world.shape
        ll = world.latlon
        lat_min, lat_max = ll[:, 0].min(), ll[:, 0].max()
        lon_min, lon_max = ll[:, 1].min(), ll[:, 1].max()
        dlat_cell = (lat_max - lat_min) / max(R - 1, 1) if R > 1 else 0.0
        dlon_cell = (lon_max - lon_min) / max(C - 1, 1) if C > 1 else 0.0
        lat_lo, lat_hi = lat_min - dlat_cell / 2, lat_max + dlat_cell / 2
        lon_lo, lon_hi = lon_min - dlon_cell / 2, lon_max + dlon_cell / 2
        height = float(haversine_km(np.array([lat_lo, lon_lo]), np.array([lat_hi, lon_lo])))
        width = float(haversine_km(np.array([world.lat0, lon_lo]), np.array([world.lat0, lon_hi])))
        nr = max(1, math.ceil(height / cell_km - 1e-9))
        nc = max(1, math.ceil(width / cell_km - 1e-9))
        return cls(float(lat_lo), float(lon_lo), float((lat_hi - lat_lo) / nr), float((lon_hi - lon_lo) / nc), nr, nc)

    @property
    def n_cells(self) -> int:
        return self.rows * self.cols

    def centres(self, cells: np.ndarray) -> np.ndarray:
        """(len(cells), 2) centres (lat, lon) of the cells with these indices."""
        r, c = np.divmod(np.asarray(cells, dtype=np.int64), self.cols)
        return np.column_stack([self.lat_lo + (r + 0.5) * self.dlat, self.lon_lo + (c + 0.5) * self.dlon])

    def nearest_cells(self, latlon: np.ndarray, lat0: float) -> np.ndarray:
        """Sorted indices of every cell whose centre is nearest (in the projection a user snaps
        with, :func:`certdp.datasets.city.project_km` at ``lat0``) to one of the points, ties
        included: the cell containing a point, or several where it lies on a boundary."""
        latlon = np.atleast_2d(np.asarray(latlon, dtype=np.float64))
        r0 = np.clip(np.floor((latlon[:, 0] - self.lat_lo) / self.dlat).astype(np.int64), 0, self.rows - 1)
        c0 = np.clip(np.floor((latlon[:, 1] - self.lon_lo) / self.dlon).astype(np.int64), 0, self.cols - 1)
        off = np.array([(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1)])
        r = np.clip(r0[:, None] + off[None, :, 0], 0, self.rows - 1)
        c = np.clip(c0[:, None] + off[None, :, 1], 0, self.cols - 1)
        cells = r * self.cols + c                                          # (points, 9)
        xy = project_km(self.centres(cells.reshape(-1)), lat0).reshape(len(latlon), 9, 2)
        d = np.linalg.norm(xy - project_km(latlon, lat0)[:, None, :], axis=2)
        near = d <= d.min(axis=1, keepdims=True) * (1 + 1e-9) + 1e-12
        return np.unique(cells[near])


@dataclass(frozen=True, eq=False)
class ReferenceTable:
    """beta over pairs of the fine cells held (stored per pair of their road nodes).

    Attributes:
        cell_km: fine cell side.
        fine_latlon: (F, 2) centres of the fine cells held (see the module docstring).
        fine_node: (F,) road node of each of them.
        band_km: pairs of fine cells farther apart than this are not in the table.
        pair_key: sorted keys ``a * n_nodes + b`` (a < b) of the node pairs held.
        pair_beta: beta of each key.
        n_nodes: number of road nodes (for the keys).
        snap_max_km: the largest travel distance from a location of V to its snapped node
            (what the server knows about e; used by the inference metric).
        grid_cells: cells of the whole fine grid V-hat over the world.
    """

    cell_km: float
    fine_latlon: np.ndarray
    fine_node: np.ndarray
    band_km: float
    pair_key: np.ndarray
    pair_beta: np.ndarray
    n_nodes: int
    snap_max_km: float
    grid_cells: int = 0

    @property
    def half_diagonal_km(self) -> float:
        """Half the diagonal of a cell: the farthest a location is from its cell's centre."""
        return self.cell_km * math.sqrt(2.0) / 2.0

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.fine_latlon, self.fine_node, self.pair_key, self.pair_beta)))

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


def build_table(world: World, cell_km: float, band_km: float, *, chunk: int = 4_000_000) -> ReferenceTable:
    """Build the server's reference table for ``world`` (targets: the world's prior q), over
    the fine cells a location can snap to (see the module docstring)."""
    cell_km = V.positive_float("cell_km (reference table cell size)", cell_km)
    band_km = V.positive_float("band_km", band_km)
    road = world.road
    grid = FineGrid.over(world, cell_km)
    cells = grid.nearest_cells(world.latlon, world.lat0)
    fl = grid.centres(cells)
    _, comp = connected_components(road.graph, directed=False)
    big = np.flatnonzero(comp == comp[world.node[0]])
    tree = cKDTree(project_km(road.latlon[big], world.lat0))
    fnode = big[tree.query(project_km(fl, world.lat0))[1]]
    E, _ = pairs_within(fl, band_km, world.lat0)
    a, b = fnode[E[:, 0]], fnode[E[:, 1]]
    n = road.n_nodes
    keys = np.unique(np.minimum(a, b)[a != b] * n + np.maximum(a, b)[a != b])
    pa, pb = keys // n, keys % n
    # travel from every distinct target node (the locations' nodes, weighted by q) to every
    # node the table uses
    tn, tinv = np.unique(world.node, return_inverse=True)
    w = np.bincount(tinv, weights=world.target_prior, minlength=len(tn))
    used, uinv = np.unique(np.concatenate([pa, pb]), return_inverse=True)
    T = road_travel(road, tn, used)                                     # (targets, used)
    ia, ib = uinv[: len(pa)], uinv[len(pa):]
    beta = np.empty(len(keys))
    step = max(1, chunk // max(len(tn), 1))
    for s in range(0, len(keys), step):
        beta[s:s + step] = w @ np.abs(T[:, ia[s:s + step]] - T[:, ib[s:s + step]])
    # the snapping error the server can bound: travel from each location to its fine cell's node
    snap = snapped(fl, fnode, world.latlon, world.lat0)
    e = travel_pairs(road, world.node, snap)
    return ReferenceTable(cell_km=cell_km, fine_latlon=fl, fine_node=fnode, band_km=band_km, pair_key=keys,
                          pair_beta=beta, n_nodes=n, snap_max_km=float(e.max(initial=0.0)), grid_cells=grid.n_cells)


def snapped(fine_latlon: np.ndarray, fine_node: np.ndarray, latlon: np.ndarray, lat0: float) -> np.ndarray:
    """Road node of the fine cell nearest to each point."""
    tree = cKDTree(project_km(fine_latlon, lat0))
    return fine_node[tree.query(project_km(np.atleast_2d(latlon), lat0))[1]]


def travel_pairs(road, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Travel distance from ``src[t]`` to ``dst[t]`` for every t. The pairs are near each other
    (a location's node and its snapped node), so Dijkstra first stops at four times the
    largest straight-line distance plus 1 km, and runs unbounded only from the sources it
    left unreached: the distances are exact either way."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    out = np.zeros(len(src))
    need = np.flatnonzero(src != dst)
    if len(need) == 0:
        return out
    straight = haversine_km(road.latlon[src[need]], road.latlon[dst[need]])
    limit = 4.0 * float(straight.max()) + 1.0
    for lim in (limit, math.inf):
        us, inv = np.unique(src[need], return_inverse=True)
        ud, dinv = np.unique(dst[need], return_inverse=True)
        D = road_travel(road, us, ud, limit=lim)
        out[need] = D[inv, dinv]
        need = need[~np.isfinite(out[need])]
        if len(need) == 0:
            break
    return out
