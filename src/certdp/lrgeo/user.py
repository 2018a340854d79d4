"""The user's side of LR-Geo (paper 003, sections 4.1, 4.2, 4.5).

A user at location v_m builds the Geo-Ind graph over the public locations V (edges between
locations within gamma, weighted by Haversine distance), finds its LR set N_m by Dijkstra
(path distance <= Gamma, Def. 4.1), its obfuscation range O_m (every location within r_obf of
some LR location, so that each row's own range C(v_i, r_obf) is inside, Eq. 12 and the proof
of Theorem 4.4), requests the reference table for a circle around a uniformly drawn
v_a in N_m, estimates its costs (Eq. 27 and 33) and uploads only LP coefficients.

The requested circle has radius 2 Gamma + r_obf. The paper's max(2 Gamma, Gamma + r_obf)
(Prop. 4.3) covers C(v_m, r_obf) but not the ranges C(v_i, r_obf) of the other LR rows, whose
columns the user also needs; 2 Gamma + r_obf covers them by the triangle inequality.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.sparse.csgraph import dijkstra
from scipy.spatial import cKDTree

from .. import _validate as V
from ..datasets.city import World, project_km
from ..mechanism import Mechanism
from ..randomness import CounterRNG, RNGLike, as_generator
from ..space import Geometry, haversine_km
from .messages import ObfuscationRequest, ObfuscationResponse, ProtocolError, TableRequest, TableResponse
from .table import lookup, travel_pairs

MAX_EXP_FACTOR = 34.0
"""The largest eps r_obf / 2 accepted: the exponential entries' LP coefficients reach
exp(eps r_obf / 2), and HiGHS rejects coefficients above 1e15 (e^34.5)."""


@dataclass(frozen=True)
class LRGeoParams:
    """Protocol parameters (km and 1/km).

    Attributes:
        epsilon: Geo-Ind budget per km.
        gamma: neighbour threshold of Geo-Ind (``inf``: LR-Geo-F, every pair).
        Gamma: LR distance threshold (path distance in the Geo-Ind graph), >= gamma.
        r_obf: obfuscation range; entries beyond it are y'_k.
        r_exp: entries farther than r_exp follow the exponential mechanism (<= r_obf).
        cell: reference table cell size.
        hide: 0 (the paper): the LR set is the Gamma-ball of the user's location, whose centre
            the server finds from the uploaded columns and distances (it locates every user).
            > 0: the LR set is the (Gamma + hide)-ball of a location drawn uniformly within
            ``hide`` of the user's (path distance in the Geo-Ind graph); it still holds the
            user's Gamma-ball, and the server learns only that centre, so every location
            within ``hide`` of it could be the user's. Larger LR sets are the price.
    """

    epsilon: float
    gamma: float
    Gamma: float
    r_obf: float
    r_exp: float
    cell: float
    hide: float = 0.0

    def __post_init__(self) -> None:
        V.positive_float("epsilon", self.epsilon)
        V.positive_float("gamma", self.gamma, allow_inf=True)
        V.positive_float("Gamma", self.Gamma)
        V.positive_float("r_obf", self.r_obf)
        V.nonneg_float("r_exp", self.r_exp)
        V.positive_float("cell (reference table cell size)", self.cell)
        V.nonneg_float("hide", self.hide)
        if math.isfinite(self.gamma) and self.Gamma < self.gamma:
            raise ValueError(f"Gamma ({self.Gamma}) must be >= gamma ({self.gamma}): the LR set must "
                             "contain the user's Geo-Ind neighbours")
        if self.r_exp > self.r_obf:
            raise ValueError(f"r_exp ({self.r_exp}) must be <= r_obf ({self.r_obf})")
        if self.epsilon * self.r_obf / 2 > MAX_EXP_FACTOR:
            raise ValueError(f"epsilon x r_obf / 2 = {self.epsilon * self.r_obf / 2:.4g} is too large: the LP "
                             f"coefficients exp(eps (r_obf - d) / 2) would exceed e^{MAX_EXP_FACTOR:g} (about 6e14), "
                             "beyond what HiGHS accepts; lower epsilon or r_obf")

    @property
    def lr_radius(self) -> float:
        """The radius of the LR set around its centre: Gamma, plus ``hide``."""
        return self.Gamma + self.hide

    @property
    def circle_radius(self) -> float:
        """The radius (km) of the circle whose table the user asks for: 2 Gamma + r_obf."""
        return 2.0 * self.lr_radius + self.r_obf

    @property
    def table_band(self) -> float:
        """Pairs of fine cells the users need: within r_obf plus both snapping distances."""
        return self.r_obf + self.cell * math.sqrt(2.0) * 1.01

    @classmethod
    def paper(cls, cell_km: float) -> "LRGeoParams":
        """Paper 003's settings (section 5): eps 10 per km, LR distance threshold Gamma 20 km,
        r_obf 4 km, reference table cell 0.1 km; the Geo-Ind neighbour threshold (not given in
        the paper) 1.5 location cells and r_exp = r_obf / 2 (not given), as in :meth:`scaled`."""
        return cls(epsilon=10.0, gamma=1.5 * cell_km, Gamma=20.0, r_obf=4.0, r_exp=2.0, cell=0.1)

    @classmethod
    def scaled(cls, cell_km: float, *, eps_cell: float = 12.0, gamma_cells: float = 1.5, Gamma_cells: float = 2.5,
               r_obf_cells: float = 3.3, r_exp_cells: float = 1.65, table_cells: float = 1 / 12,
               lrgeo_f: bool = False) -> "LRGeoParams":
        """Parameters in units of the location cell (see ``docs/lrgeo.md`` for the scaling)."""
        return cls(epsilon=eps_cell / cell_km, gamma=math.inf if lrgeo_f else gamma_cells * cell_km,
                   Gamma=Gamma_cells * cell_km, r_obf=r_obf_cells * cell_km, r_exp=r_exp_cells * cell_km,
                   cell=table_cells * cell_km)


def geo_ind_path_distance(world: World, gamma: float, source: int, limit: float) -> np.ndarray:
    """Path distances D[source, :] in the Geo-Ind graph (inf beyond ``limit``)."""
    if math.isinf(gamma):
        return world.haversine[source].copy()  # complete graph: the metric itself
    return dijkstra(world.geo_ind_graph(gamma), directed=False, indices=int(source), limit=limit * (1 + 1e-12))


class LRGeoUser:
    """One user: its private location, LR set and obfuscation range, and its messages."""

    def __init__(self, world: World, location: int, params: LRGeoParams, *, name: str | None = None,
                 rng: RNGLike = None) -> None:
        self.world = world
        self.params = params
        self.location = V.int_in_range("location", location, 0, world.K - 1)
        self.name = name or f"user-{location}"
        self.rng = rng if isinstance(rng, CounterRNG) else as_generator(rng)   # CounterRNG: the page's draws
        self.centre = self.location
        if params.hide > 0:   # a decoy centre within hide of the location (see LRGeoParams.hide)
            near = np.flatnonzero(geo_ind_path_distance(world, params.gamma, self.location, params.hide)
                                  <= params.hide)
            self.centre = int(self.rng.choice(near))
        D = geo_ind_path_distance(world, params.gamma, self.centre, params.lr_radius)
        lr = np.flatnonzero(D <= params.lr_radius)
        if len(lr) < 2:
            raise ValueError(f"{self.name}: the LR set has a single location (Gamma={params.Gamma:g} km is "
                             "below the distance to every neighbour); raise Gamma")
        self.lr = self.rng.permutation(lr)            # rows in a random order
        self.row_of_location = int(np.flatnonzero(self.lr == self.location)[0])
        self.D_NV = world.haversine[self.lr]          # (n, K)
        self.obf = np.flatnonzero(self.D_NV.min(axis=0) <= params.r_obf)
        if len(self.obf) == 0:
            raise ValueError(f"{self.name}: the obfuscation range is empty (r_obf={params.r_obf:g})")
        self.anchor = int(self.rng.choice(self.lr))
        self.c_low: np.ndarray | None = None

    @property
    def n(self) -> int:
        """The size of the user's LR set."""
        return int(len(self.lr))

    def table_request(self) -> TableRequest:
        """The request for the reference table around the user (a circle, not the location)."""
        return TableRequest(user=self.name, center=self.world.latlon[self.anchor].copy(),
                            radius_km=self.params.circle_radius)

    def obfuscation_request(self, table: TableResponse) -> ObfuscationRequest:
        """Estimate the costs from the reference table and build the upload (Eq. 27).

        The upper estimate is Eq. 27's ``p (beta + e_i + e_k)``, lowered to ``p tc(v_i, v_k)``
        where that is smaller: the travel distance between the two locations' road nodes bounds
        the cost too (``|tc(i, t) - tc(k, t)| <= tc(i, k)`` for every target t), and the user
        computes it from the public road network. Without it the diagonal (true cost 0) is
        charged ``2 p e_i``, and where a location's snapping error e_i is large (a street grid
        with dropped edges, 0.1 km table cells, 1.2 km locations) the LP reported a neighbour
        instead of the true cell with probability 0.997 (1.3 km expected cost on that row)."""
        w, P = self.world, self.params
        need = np.union1d(self.lr, self.obf)
        reach = haversine_km(np.asarray(table.center)[None, :], w.latlon[need])
        if np.any(reach > table.radius_km * (1 + 1e-12)):
            raise ProtocolError(f"{self.name}: the requested circle (radius {table.radius_km:g} km) does not cover "
                                "the LR set and the obfuscation range")
        if len(table.fine_latlon) == 0:
            raise ProtocolError(f"{self.name}: the reference table is empty")
        tree = cKDTree(project_km(table.fine_latlon, w.lat0))
        snap = table.fine_node[tree.query(project_km(w.latlon[need], w.lat0))[1]]
        e = travel_pairs(w.road, w.node[need], snap)
        pos = {int(v): t for t, v in enumerate(need)}
        ri = np.array([pos[int(v)] for v in self.lr])
        ci = np.array([pos[int(v)] for v in self.obf])
        D_NO = self.D_NV[:, self.obf]
        within = D_NO <= P.r_obf
        beta = lookup(table.pair_key, table.pair_beta, table.n_nodes,
                      np.broadcast_to(snap[ri][:, None], D_NO.shape)[within],
                      np.broadcast_to(snap[ci][None, :], D_NO.shape)[within])
        if np.any(np.isnan(beta)):
            raise ProtocolError(f"{self.name}: the reference table lacks pairs within r_obf (its band is too small)")
        p = np.full(self.n, 1.0 / self.n)
        E = (e[ri][:, None] + e[ci][None, :])[within]
        pw = np.broadcast_to(p[:, None], D_NO.shape)[within]
        tc = w.travel[np.ix_(self.lr, self.obf)][within]
        C = np.full(D_NO.shape, np.nan)
        C[within] = pw * np.minimum(beta + E, tc)
        low = np.full(D_NO.shape, np.nan)
        low[within] = pw * np.maximum(0.0, beta - E)
        self.c_low = low          # kept by the user (Eq. 33), for the lower bound of Theorem 4.7
        return ObfuscationRequest(user=self.name, D_NN=self.geometry().distance_matrix, columns=self.obf.copy(), D_NO=D_NO, C_NO=C, p=p)

    def assemble(self, resp: ObfuscationResponse) -> np.ndarray:
        """The raw (n, K) LR matrix from the server's values (before certification)."""
        P = self.params
        y = np.asarray(resp.y, dtype=np.float64)
        if y.shape != (self.world.K,):
            raise ProtocolError(f"{self.name}: y must have K={self.world.K} entries")
        free = np.asarray(resp.free, dtype=np.float64)
        D_NO = self.D_NV[:, self.obf]
        if free.shape != D_NO.shape:
            raise ProtocolError(f"{self.name}: free values have shape {free.shape}, expected {D_NO.shape}")
        Z = np.broadcast_to(y, (self.n, self.world.K)).copy()
        h = exp_factor(D_NO, P)
        Zo = np.where(D_NO <= P.r_exp, free, h * y[self.obf][None, :])
        if np.any(np.isnan(Zo)):
            raise ProtocolError(f"{self.name}: the response lacks a free value")
        Z[:, self.obf] = Zo
        return Z

    def lower_bound_costs(self, cbar: np.ndarray) -> np.ndarray:
        """(n, K) costs for the relaxed problem of Theorem 4.7: Eq. 33 where the user estimated
        them (within r_obf), the exact p_i cbar elsewhere; both are <= the true cost."""
        if self.c_low is None:
            raise ValueError(f"{self.name}: build the obfuscation request first (it estimates the costs)")
        low = cbar[self.lr] / self.n
        within = self.D_NV[:, self.obf] <= self.params.r_obf
        sub = low[:, self.obf]
        sub[within] = self.c_low[within]
        low[:, self.obf] = sub
        return low

    def geometry(self) -> Geometry:
        """The LR set's own geometry: its rows' Haversine distances and gamma (what a file of
        the user's mechanism needs to be audited)."""
        D = self.D_NV[:, self.lr]
        D = (D + D.T) / 2
        np.fill_diagonal(D, 0.0)
        return Geometry(self.params.gamma, "precomputed", distance_matrix=D)

    def lr_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Geo-Ind pairs (row indices) within the LR set and their distances."""
        return self.geometry().pairs()

    def mechanism(self, resp: ObfuscationResponse) -> tuple[Mechanism, float]:
        """Certify the LR matrix on its LR pairs (exact audit); returns it and the mixing used."""
        mech, rep = Mechanism.certified(self.geometry(), self.assemble(resp), epsilon=self.params.epsilon,
                                        method="lrgeo", user=self.name, lr_set=self.lr.tolist(),
                                        gamma=self.params.gamma)
        return mech, rep.mixing


def exp_factor(D: np.ndarray, P: LRGeoParams) -> np.ndarray:
    """h = exp(eps (r_obf - min(d, r_obf)) / 2) >= 1: z = y' h for exponential entries, where
    y'_k = y_k exp(-eps r_obf / 2) is the value of every entry beyond r_obf (Eq. 19)."""
    return np.exp(P.epsilon * (P.r_obf - np.minimum(D, P.r_obf)) / 2.0)
