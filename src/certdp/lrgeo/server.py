"""The server's side of LR-Geo: reference table service and the CLR-Geo solve (Eq. 20-22).

Variables. The master holds y'_k for every location k (y'_k = y_k exp(-eps r_obf / 2), the
value of every entry beyond r_obf, Eq. 19) and S = sum_k y'_k; subproblem m holds user m's
free probabilities (entries within r_exp). An exponential entry is z[i, k] = y'_k h_ik with
h_ik = exp(eps (r_obf - min(d_ik, r_obf)) / 2). Because min(., r_obf) is 1-Lipschitz, two
exponential entries of the same column satisfy Geo-Ind for *every* pair of rows, of any users
(Theorem 4.4), so only pairs with at least one free entry become LP rows.

Constraints of user m (rows i, j of N_m with d_ij <= gamma, columns k of O_m):
    unit:    sum_free x_ik + sum_exp h_ik y'_k + (S - sum_{k in O_m} y'_k) = 1
    Geo-Ind: z_ik <= exp(eps d_ij) z_jk, both directions, whenever z_ik or z_jk is free.
Costs: free entries cost C_NO x (subproblem); exponential entries cost C_NO h y' (master);
entries whose cost the user could not estimate (d > r_obf, NaN in C_NO, and every column
outside O_m) cost p_i * max_{v in circle} tc(v, k) y'_k, an upper bound on the true cost since
N_m lies in the requested circle and |tc(i,l) - tc(k,l)| <= tc(i,k). So the LP objective is an
upper bound on the true expected cost of the returned matrices (Theorem 4.6).

The problem is block-ladder: :func:`certdp.lp.benders.benders` solves it (master: y', S and one
theta per user; one subproblem per user; feasibility cuts from dual rays, optimality cuts
from duals), and :func:`solve_whole` solves the same LP in one HiGHS call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..datasets.city import World
from ..lp.benders import BlockSolver, BlockSpec, MasterSpec, benders
from ..lp.bounds import lagrangian_bound
from ..lp.highs import INF, HighsLP
from ..lp.outcome import SolverLimitError, Status, relative_gap
from ..progress import Progress
from ..space import haversine_km, neighbor_pairs
from .messages import ObfuscationRequest, ObfuscationResponse, ProtocolError, TableRequest, TableResponse
from .table import ReferenceTable
from .user import LRGeoParams, exp_factor


@dataclass
class UserBlock:
    """The LP pieces of one user."""

    request: ObfuscationRequest
    spec: BlockSpec
    free_rows: np.ndarray
    free_cols: np.ndarray
    alpha: np.ndarray  # (K,) this user's master cost on y'


def build_block(req: ObfuscationRequest, P: LRGeoParams, K: int, cout: np.ndarray, H: np.ndarray) -> UserBlock:
    """Subproblem of one user (see the module docstring) and its master cost vector, in the
    master's variables u_k = H_k y'_k (:func:`column_scale`)."""
    n, o = req.D_NO.shape
    cols = req.columns
    D = req.D_NO
    h = exp_factor(D, P)
    free = D <= P.r_exp
    fr, fc = np.nonzero(free)
    nx = len(fr)
    xid = np.full((n, o), -1, dtype=np.int64)
    xid[fr, fc] = np.arange(nx)
    C = np.where(np.isnan(req.C_NO), req.p[:, None] * cout[cols][None, :], req.C_NO)
    # unit rows: W = 1 on free entries; T on (y'_cols, S)
    W_rows = [fr]
    W_cols = [xid[fr, fc]]
    W_vals = [np.ones(nx)]
    Ti, Tj, Tv = [], [], []
    tr, tc_ = np.divmod(np.arange(n * o), o)       # every entry (i, t), row-major
    Ti.append(tr)
    Tj.append(tc_)
    Tv.append(np.where(free, -1.0, h - 1.0).reshape(-1))
    Ti.append(np.arange(n))
    Tj.append(np.full(n, o))
    Tv.append(np.ones(n))
    lo = [np.ones(n)]
    up = [np.ones(n)]
    r0 = n
    # Geo-Ind rows
    pairs, dij = neighbor_pairs(P.gamma, "precomputed", distance_matrix=req.D_NN)
    # a pair whose exp(eps d) overflows float64 constrains nothing a float can express: left out
    # (a relaxation; every user's matrix is certified on all its pairs afterwards)
    finite = P.epsilon * dij < 700.0
    pairs, dij = pairs[finite], dij[finite]
    i, j = pairs[:, 0], pairs[:, 1]
    if len(i):
        f = np.exp(P.epsilon * dij)
        pi, pk = np.nonzero(free[i] | free[j])       # pair index, column
        for a, b in ((i[pi], j[pi]), (j[pi], i[pi])):
            m = len(pk)
            rows = r0 + np.arange(m)
            fa, fb = free[a, pk], free[b, pk]
            ff = f[pi]
            # z_a: +1 (x or h y')
            W_rows.append(rows[fa]); W_cols.append(xid[a[fa], pk[fa]]); W_vals.append(np.ones(int(fa.sum())))
            Ti.append(rows[~fa]); Tj.append(pk[~fa]); Tv.append(h[a[~fa], pk[~fa]])
            # z_b: -f (x or h y')
            W_rows.append(rows[fb]); W_cols.append(xid[b[fb], pk[fb]]); W_vals.append(-ff[fb])
            Ti.append(rows[~fb]); Tj.append(pk[~fb]); Tv.append(-ff[~fb] * h[b[~fb], pk[~fb]])
            lo.append(np.full(m, -INF))
            up.append(np.zeros(m))
            r0 += m
    nrow = r0
    W = sp.csr_matrix((np.concatenate(W_vals), (np.concatenate(W_rows), np.concatenate(W_cols))), shape=(nrow, nx))
    T = sp.csr_matrix((np.concatenate(Tv), (np.concatenate(Ti), np.concatenate(Tj))), shape=(nrow, o + 1))
    T = sp.csr_matrix(T @ sp.diags(np.append(1.0 / H[cols], 1.0)))   # y'_k = u_k / H_k; S stays
    T.eliminate_zeros()
    # row scaling (largest coefficient 1): Geo-Ind rows carry exp(eps d) h, up to 1e7 and more
    scale = np.maximum(abs(W).max(axis=1).toarray().ravel(), abs(T).max(axis=1).toarray().ravel())
    R = sp.diags(1.0 / np.where(scale > 0, scale, 1.0))
    W, T = sp.csr_matrix(R @ W), sp.csr_matrix(R @ T)
    lo_s, up_s = R @ np.concatenate(lo), R @ np.concatenate(up)
    spec = BlockSpec(c=C[fr, fc].astype(np.float64), W=W, lo=lo_s, up=up_s, T=T,
                     coupling=np.append(cols, K).astype(np.int64), x_lo=np.zeros(nx), x_up=np.ones(nx))
    alpha = np.zeros(K)
    exp_cost = np.where(free, 0.0, C * h).sum(axis=0)
    np.add.at(alpha, cols, exp_cost)
    outside = np.ones(K, dtype=bool)
    outside[cols] = False
    alpha[outside] += req.p.sum() * cout[outside]
    return UserBlock(request=req, spec=spec, free_rows=fr, free_cols=fc, alpha=alpha)


def column_scale(requests: list[ObfuscationRequest], P: LRGeoParams, K: int) -> np.ndarray:
    """H_k: the largest coefficient h_ik of y'_k in any user's rows (1 for a column in no
    obfuscation range). The master holds u_k = H_k y'_k: the largest entry of column k, a
    probability, hence in [0, 1]. In y' itself (entries beyond r_obf) the values are
    exp(-eps r_obf / 2) times smaller, about 2e-9 at the paper's eps x r_obf = 40, below every
    HiGHS tolerance: cuts on y' could never be violated by more than that, and Benders stalled."""
    H = np.ones(K)
    for req in requests:
        np.maximum.at(H, req.columns, exp_factor(req.D_NO, P).max(axis=0))
    return H


def master_spec(alpha: np.ndarray, H: np.ndarray) -> MasterSpec:
    """min alpha' y' over u = H y' in [0, 1] and S = sum_k y'_k (S kept in y'; see :func:`column_scale`)."""
    K = len(H)
    A = sp.csr_matrix(np.append(-1.0 / H, 1.0)[None, :])
    return MasterSpec(c=np.append(alpha / H, 0.0), A=A, r_lo=np.zeros(1), r_up=np.zeros(1),
                      y_lo=np.zeros(K + 1), y_up=np.append(np.ones(K), float(np.sum(1.0 / H))))


def core_point(blocks: list[UserBlock], P: LRGeoParams, H: np.ndarray) -> np.ndarray:
    """A master point (u = H y', S) where every user's block is feasible: y'_k = c for every k.

    With y' = c everywhere, every entry beyond r_exp is c h_ik, and setting each free entry to
    t_i c h_ik with one factor t_i >= 1 per row satisfies Geo-Ind on every pair (h is
    exp(-eps min(d, r_obf) / 2) up to a constant, so h_ik / h_jk <= exp(eps d_ij / 2)) as long
    as the t_i of neighbouring rows differ by at most exp(eps d_ij / 2). The rows sum to 1 with
    t_i >= 1 when c <= 1 / max_i sum_k h_ik (every column, h = 1 beyond the range). That c makes
    the rows with the largest sum exactly the exponential mechanism and gives the others a
    t_i above 1; the blocks, solved at this point, choose their own free entries. This is the
    first upper bound of the Benders solve and the core of its in-out stabilisation."""
    K = len(H)
    total = max(float((exp_factor(b.request.D_NO, P).sum(axis=1) + (K - len(b.request.columns))).max())
                for b in blocks)
    c = 1.0 / total
    return np.append(c * H, c * K)


UB_CROSSING = 1e-2
"""How far the rigorous lower bound may pass the upper bound before Benders calls it a defect:
the upper bound here is the cost of the blocks' solutions as HiGHS returns them, feasible only
to its tolerances (docs/decisions.md#lr-geos-benders-tolerates-a-crossing-of-1-of-the-upper-bound). The users
certify the matrices, so the guarantee does not rest on this value."""


def block_start(master: MasterSpec, specs: list[BlockSpec], y: np.ndarray
                ) -> tuple[float, np.ndarray, list[np.ndarray]] | None:
    """``(value, y, xs)`` when every block is feasible at ``y`` (a Benders start), else None."""
    value, xs = float(master.c @ y), []
    for i, spec in enumerate(specs):
        r = BlockSolver(i, spec).solve(y[spec.coupling], -INF)
        if not r.feasible:
            return None
        value += r.value
        xs.append(r.x)
    return value, y, xs


METHODS = ("benders", "lp")
"""How the server solves CLR-Geo: the generic Benders engine, or the whole LP in one HiGHS
model ('lp', the name :func:`certdp.solve` gives the monolithic LP)."""


@dataclass
class SolveInfo:
    """How the server's solve ended: ``method`` is one of :data:`METHODS`, or 'benders->lp'
    when Benders found no feasible point and the whole LP was solved (``message`` says why)."""

    method: str
    status: Status
    upper_bound: float
    lower_bound: float
    gap: float
    iterations: int
    seconds: float
    history: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""


def solve_whole(master: MasterSpec, blocks: list[BlockSpec], *, time_limit: float | None = None,
                     solver: str = "simplex") -> tuple[np.ndarray, list[np.ndarray], SolveInfo]:
    """The same LP in one HiGHS model; a rigorous Lagrangian lower bound from its duals."""
    t0 = time.perf_counter()
    ny = len(master.c)
    offs = np.cumsum([0] + [len(b.c) for b in blocks])
    nv = ny + int(offs[-1])
    A_parts = [sp.hstack([master.A, sp.csr_matrix((master.A.shape[0], nv - ny))], format="csr")]
    lo, up = [master.r_lo], [master.r_up]
    for b, off in zip(blocks, offs[:-1]):
        Tfull = sp.csr_matrix((b.T.data, b.coupling[b.T.indices], b.T.indptr), shape=(b.T.shape[0], ny))
        Wfull = sp.hstack([sp.csr_matrix((b.W.shape[0], int(off))), b.W,
                           sp.csr_matrix((b.W.shape[0], int(offs[-1] - off - b.W.shape[1])))], format="csr")
        A_parts.append(sp.hstack([Tfull, Wfull], format="csr"))
        lo.append(b.lo)
        up.append(b.up)
    A = sp.vstack(A_parts, format="csr")
    c = np.concatenate([master.c] + [b.c for b in blocks])
    cl = np.concatenate([master.y_lo] + [b.x_lo for b in blocks])
    cu = np.concatenate([master.y_up] + [b.x_up for b in blocks])
    lo_a, up_a = np.concatenate(lo), np.concatenate(up)
    lp = HighsLP(c, A, lo_a, up_a, cl, cu, solver=solver, time_limit=time_limit)
    sol = lp.solve()
    if sol.status != "optimal" or sol.x is None:
        raise SolverLimitError(f"CLR-Geo whole LP: HiGHS returned {sol.status!r}")
    lb = lagrangian_bound(c, A, lo_a, up_a, cl, cu, sol.row_dual)
    x = sol.x
    ub = float(c @ x)
    xs = [x[ny + offs[t]: ny + offs[t + 1]] for t in range(len(blocks))]
    info = SolveInfo("lp", Status.OPTIMAL, ub, min(lb, ub), relative_gap(ub, min(lb, ub)), sol.iterations,
                     time.perf_counter() - t0)
    return x[:ny], xs, info


class LRGeoServer:
    """Holds the public world, the reference table and the users' requests.

    Every incoming message is validated before anything is stored; a rejected message leaves
    the state for the other users unchanged.
    """

    def __init__(self, world: World, table: ReferenceTable, params: LRGeoParams) -> None:
        if table.band_km + 1e-12 < params.table_band:
            raise ValueError(f"the reference table's band ({table.band_km:g} km) is below what users need "
                             f"({params.table_band:g} km = r_obf + snapping)")
        self.world = world
        self.table = table
        self.params = params
        self.circles: dict[str, tuple[np.ndarray, float]] = {}
        self.requests: dict[str, ObfuscationRequest] = {}

    # ------------------------------------------------------------ messages
    def handle_table_request(self, req: TableRequest) -> TableResponse:
        """Answer a user's request for the reference table around its circle."""
        if not isinstance(req, TableRequest):
            raise ProtocolError("expected a TableRequest")
        self.circles[req.user] = (req.center.copy(), req.radius_km)
        return self.table_rows(req.center, req.radius_km)

    def table_rows(self, center: np.ndarray, radius_km: float) -> TableResponse:
        """The reference-table rows for a circle (records nothing)."""
        t = self.table
        d = haversine_km(np.asarray(center)[None, :], t.fine_latlon)
        inside = np.flatnonzero(d <= radius_km + t.half_diagonal_km)
        nodes = np.unique(t.fine_node[inside])
        a, b = t.pair_key // t.n_nodes, t.pair_key % t.n_nodes
        keep = np.isin(a, nodes) & np.isin(b, nodes)
        return TableResponse(center=center, radius_km=radius_km, cell_km=t.cell_km,
                             fine_latlon=t.fine_latlon[inside], fine_node=t.fine_node[inside],
                             pair_key=t.pair_key[keep], pair_beta=t.pair_beta[keep], n_nodes=t.n_nodes)

    def enrol(self, user) -> None:
        """Run one user's side of the protocol up to its upload (table request, then request)."""
        self.submit(user.obfuscation_request(self.handle_table_request(user.table_request())))

    def submit(self, req: ObfuscationRequest) -> None:
        """Validate and store a user's coefficients (replaces that user's earlier request)."""
        if not isinstance(req, ObfuscationRequest):
            raise ProtocolError("expected an ObfuscationRequest")
        K = self.world.K
        if req.user not in self.circles:
            raise ProtocolError(f"{req.user}: no table request on record (the server needs the circle)")
        if req.columns.max() >= K:
            raise ProtocolError(f"{req.user}: columns must index locations 0..{K - 1}")
        within = req.D_NO <= self.params.r_obf
        if np.any(np.isnan(req.C_NO[within])):
            raise ProtocolError(f"{req.user}: C_NO lacks a cost for an entry within r_obf")
        if not np.all(within.any(axis=0)):
            raise ProtocolError(f"{req.user}: a column is farther than r_obf from every LR row")
        center, radius = self.circles[req.user]
        reach = haversine_km(center[None, :], self.world.latlon[req.columns])
        if np.any(reach > radius * (1 + 1e-9)):
            raise ProtocolError(f"{req.user}: a column lies outside the requested circle")
        self.requests[req.user] = req

    # --------------------------------------------------------------- solve
    def outside_cost(self, user: str) -> np.ndarray:
        """max_{v in circle} tc(v, k): bounds p_i-free cost of any LR row of the user at k."""
        center, radius = self.circles[user]
        inside = haversine_km(center[None, :], self.world.latlon) <= radius * (1 + 1e-9)
        return self.world.travel[inside].max(axis=0)

    def build(self, users: list[str] | None = None) -> tuple[MasterSpec, list[UserBlock], np.ndarray]:
        """The master, one block per user (all stored requests by default), and the column
        scale H of the master's variables (:func:`column_scale`)."""
        names = list(self.requests) if users is None else users
        if not names:
            raise ValueError("no user requests to solve")
        K = self.world.K
        H = column_scale([self.requests[u] for u in names], self.params, K)
        blocks = [build_block(self.requests[u], self.params, K, self.outside_cost(u), H) for u in names]
        alpha = np.sum([b.alpha for b in blocks], axis=0)
        return master_spec(alpha, H), blocks, H

    def solve(self, *, method: str = "benders", gap: float = 1e-4, time_limit: float | None = None,
              max_iterations: int = 100, progress: Progress | None = None,
              fallback: bool = True) -> tuple[dict[str, ObfuscationResponse], SolveInfo]:
        """Solve CLR-Geo for every stored request; one response per user.

        ``method='benders'`` uses the generic engine; if it finds no feasible point within
        ``max_iterations`` and ``fallback`` is set, the whole LP is solved in one model and
        ``info.method`` says so. ``method='lp'`` solves the whole LP directly."""
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        if not gap > 0:
            raise ValueError(f"gap must be > 0, got {gap}")
        t0 = time.perf_counter()
        master, ublocks, H = self.build()
        specs = [b.spec for b in ublocks]
        if method == "lp":
            y, xs, info = solve_whole(master, specs, time_limit=time_limit)
        else:
            core = core_point(ublocks, self.params, H)
            start = block_start(master, specs, core)
            try:
                out = benders(master, specs, gap=gap, max_iterations=max_iterations, time_limit=time_limit,
                              progress=progress, start=start, core=None if start is None else core,
                              crossing=UB_CROSSING)
            except RuntimeError as exc:   # a subproblem HiGHS could not solve (badly scaled, large eps)
                if not fallback:
                    raise
                out = None
                reason = str(exc)
            else:
                reason = f"no feasible point in {out.iterations} iterations"
            if out is None or out.y is None:
                if not fallback:
                    raise SolverLimitError(f"CLR-Geo Benders found no feasible solution ({reason})")
                # Large eps: exp(eps d) h reaches 1e7 and the dual-ray feasibility cuts become
                # too shallow to move y' (see docs/lrgeo.md). Solve the same LP in one model.
                y, xs, info = solve_whole(master, specs, time_limit=time_limit)
                info.method = "benders->lp"
                info.message = f"Benders: {reason}"
                if out is not None:
                    info.iterations += out.iterations
                    info.history = out.history
            else:
                y, xs = out.y, out.x
                info = SolveInfo("benders", out.status, out.upper_bound, out.lower_bound, out.gap, out.iterations,
                                 time.perf_counter() - t0, out.history)
        info.seconds = time.perf_counter() - t0
        K = self.world.K
        yk = np.clip(y[:K], 0.0, None) / H
        resp = {}
        for b, x in zip(ublocks, xs):
            req = b.request
            free = np.full(req.D_NO.shape, np.nan)
            free[b.free_rows, b.free_cols] = np.clip(x, 0.0, None)
            resp[req.user] = ObfuscationResponse(user=req.user, free=free, y=yk, status=info.status,
                                                 upper_bound=info.upper_bound, lower_bound=info.lower_bound)
        return resp, info
