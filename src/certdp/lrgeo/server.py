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

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from ..datasets.city import World
from ..lp.benders import BendersOutcome, BlockSpec, MasterSpec, SerialRunner, benders
from ..lp.bounds import lagrangian_bound
from ..lp.highs import INF, HighsLP
from ..lp.outcome import SolverLimitError, Status, relative_gap
from ..progress import Progress
from ..space import haversine_km, neighbor_pairs
from .memory import MAX_ROUNDS
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
    lower: np.ndarray  # (free entries,) x = lower * y'_k + s (see build_block)
    floor: np.ndarray  # (K,) u_k at which column k's own entry can hold its whole row (0: no own entry)


def build_block(req: ObfuscationRequest, P: LRGeoParams, K: int, cout: np.ndarray, H: np.ndarray) -> UserBlock:
    """Subproblem of one user (see the module docstring) and its master cost vector, in the
    master's variables u_k = H_k y'_k (:func:`column_scale`).

    A Geo-Ind inequality between a free entry x_ik and an exponential entry h_jk y'_k of the
    same column bounds x_ik by a multiple of y'_k: ``x_ik <= e^(eps d_ij) h_jk y'_k`` or
    ``x_ik >= h_jk y'_k / e^(eps d_ij)``. All of an entry's bounds involve the one y'_k >= 0,
    so only the tightest of each side constrains it: one row for the upper side, and the
    lower side as a shift of the variable, ``x_ik = lower_ik y'_k + s_ik`` with ``s_ik >= 0``
    (``s_ik <= 1`` holds since the unit row keeps x_ik <= 1). The LP is the same; the block
    has one row per upper bound instead of one per pair (at the paper's settings 48,000 of a
    block's 79,000 rows are such pairs), and every entry starts at its smallest value, where
    most of them end. ``free`` of the response is x = lower y' + s."""
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
    # unit rows: sum of the free entries + sum_exp h y'_k + (S - sum_{k in O} y'_k) = 1
    W_rows, W_cols, W_vals = [fr], [xid[fr, fc]], [np.ones(nx)]
    Ti, Tj, Tv = [], [], []
    tr, tc_ = np.divmod(np.arange(n * o), o)       # every entry (i, t), row-major
    Ti += [tr, np.arange(n)]
    Tj += [tc_, np.full(n, o)]
    Tv += [np.where(free, -1.0, h - 1.0).reshape(-1), np.ones(n)]
    lo, up = [np.ones(n)], [np.ones(n)]
    r0 = n
    own = np.full(o, -1, dtype=np.int64)           # the free entry of the row at each column's location
    at0 = D[fr, fc] == 0
    own[fc[at0]] = np.flatnonzero(at0)
    tight = np.full(nx, -1, dtype=np.int64)         # the starting basis' tight row of each entry
    links: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []   # x_a <= e^(log f) x_b
    upper = np.full(nx, np.inf)                    # x <= upper * y'_k (tightest over exponential neighbours)
    lower = np.zeros(nx)                           # x >= lower * y'_k
    pairs, dij = neighbor_pairs(P.gamma, "precomputed", distance_matrix=req.D_NN)
    # a pair whose exp(eps d) overflows float64 constrains nothing a float can express: left out
    # (a relaxation; every user's matrix is certified on all its pairs afterwards)
    finite = P.epsilon * dij < 700.0
    pairs, dij = pairs[finite], dij[finite]
    i, j = pairs[:, 0], pairs[:, 1]
    if len(i):
        f = np.exp(P.epsilon * dij)
        pi, pk = np.nonzero(free[i] | free[j])       # pair index, column
        for a, b in ((i[pi], j[pi]), (j[pi], i[pi])):   # z_a <= f z_b
            fa, fb = free[a, pk], free[b, pk]
            ff = fa & fb
            m = int(ff.sum())
            rows = r0 + np.arange(m)
            xa, xb = xid[a[ff], pk[ff]], xid[b[ff], pk[ff]]
            from_own = own[pk[ff]] == xa
            tight[xb[from_own]] = rows[from_own]
            W_rows += [rows, rows]
            W_cols += [xa, xb]
            W_vals += [np.ones(m), -f[pi[ff]]]
            links.append((xa, xb, P.epsilon * dij[pi[ff]]))
            lo.append(np.full(m, -INF))
            up.append(np.zeros(m))
            r0 += m
            e = ~fb                                  # x_a <= f h_bk y'_k
            np.minimum.at(upper, xid[a[e], pk[e]], f[pi[e]] * h[b[e], pk[e]])
            e = ~fa                                  # x_b >= h_ak y'_k / f
            np.maximum.at(lower, xid[b[e], pk[e]], h[a[e], pk[e]] / f[pi[e]])
    e = np.flatnonzero(np.isfinite(upper))          # x - upper y'_k <= 0
    rows = r0 + np.arange(len(e))
    W_rows.append(rows)
    W_cols.append(e)
    W_vals.append(np.ones(len(e)))
    Ti.append(rows)
    Tj.append(fc[e])
    Tv.append(-upper[e])
    lo.append(np.full(len(e), -INF))
    up.append(np.zeros(len(e)))
    r0 += len(e)
    nrow = r0
    W = sp.csr_matrix((np.concatenate(W_vals), (np.concatenate(W_rows), np.concatenate(W_cols))), shape=(nrow, nx))
    T = sp.csr_matrix((np.concatenate(Tv), (np.concatenate(Ti), np.concatenate(Tj))), shape=(nrow, o + 1))
    # x = lower y'_k + s: every row holding x gets lower W on y'_k
    T = T + W @ sp.csr_matrix((lower, (np.arange(nx), fc)), shape=(nx, o + 1))
    T = sp.csr_matrix(T @ sp.diags(np.append(1.0 / H[cols], 1.0)))   # y'_k = u_k / H_k; S stays
    T.eliminate_zeros()
    # row scaling (largest coefficient 1): Geo-Ind rows carry exp(eps d) h, up to 1e7 and more
    scale = np.maximum(abs(W).max(axis=1).toarray().ravel(), abs(T).max(axis=1).toarray().ravel())
    R = sp.diags(1.0 / np.where(scale > 0, scale, 1.0))
    W, T = sp.csr_matrix(R @ W), sp.csr_matrix(R @ T)
    lo_s, up_s = R @ np.concatenate(lo), R @ np.concatenate(up)
    cx = C[fr, fc].astype(np.float64)
    spec = BlockSpec(c=cx, W=W, lo=lo_s, up=up_s, T=T,
                     coupling=np.append(cols, K).astype(np.int64), x_lo=np.zeros(nx), x_up=np.ones(nx),
                     basis=near_identity_basis(own, tight, n, nrow))
    alpha = np.zeros(K)
    exp_cost = np.where(free, 0.0, C * h).sum(axis=0)
    np.add.at(alpha, cols, exp_cost)
    np.add.at(alpha, cols[fc], cx * lower)           # the cost of x's shift, lower y'_k
    outside = np.ones(K, dtype=bool)
    outside[cols] = False
    alpha[outside] += req.p.sum() * cout[outside]
    cap = entry_caps(nx, links, upper)
    floor = np.zeros(K)                              # u_k at which column k's own entry can hold a whole row
    has = (own >= 0) & np.isfinite(cap[np.maximum(own, 0)])
    floor[cols[has]] = H[cols[has]] / cap[own[has]]
    return UserBlock(request=req, spec=spec, free_rows=fr, free_cols=fc, alpha=alpha, lower=lower,
                     floor=np.minimum(floor, 1.0))


def entry_caps(nx: int, links: list[tuple[np.ndarray, np.ndarray, np.ndarray]], upper: np.ndarray) -> np.ndarray:
    """``cap``: every free entry of column k is at most ``cap y'_k``. Following the Geo-Ind rows
    between free entries of the column (``x_a <= e^(eps d) x_b``, the ``links``) from the
    entries with an upper bound, ``cap`` is the smallest product of e^(eps d) along a path to
    one: a shortest path in log space (inf where there is no path)."""
    a = np.concatenate([l[0] for l in links]) if links else np.zeros(0, dtype=np.int64)
    b = np.concatenate([l[1] for l in links]) if links else np.zeros(0, dtype=np.int64)
    w = np.concatenate([l[2] for l in links]) if links else np.zeros(0)
    src = np.flatnonzero(np.isfinite(upper))
    # 1e-300: an edge of length 0 (e^0 = 1) must stay an edge of the sparse graph
    g = sp.csr_matrix((np.r_[w, np.log(upper[src])] + 1e-300, (np.r_[b, np.full(len(src), nx)], np.r_[a, src])),
                      shape=(nx + 1, nx + 1))
    return np.exp(dijkstra(g, directed=True, indices=nx)[:nx])


def near_identity_basis(own: np.ndarray, tight: np.ndarray, n: int, nrow: int) -> tuple[np.ndarray, np.ndarray]:
    """A starting basis for a block (status codes, :class:`certdp.lp.benders.BlockSpec`): the
    shape of a mechanism that reports the true location with high probability. Every row's own
    entry is basic with its unit row tight; every other free entry is basic with the Geo-Ind
    row tight that bounds it by its column's own entry (``z_kk <= e^(eps d) z_ik``), where there
    is one; the rest sit at their lower bounds. As many rows are tight as entries basic. At the
    paper's settings the first solve of a block then takes a few hundred dual simplex
    iterations instead of one per free entry (6,800 on a Sydney user of 791 locations)."""
    col = np.zeros(len(tight), dtype=np.int8)
    row = np.ones(nrow, dtype=np.int8)
    col[own[own >= 0]] = 1
    row[:n] = 0                                    # unit rows (equalities) tight
    has = tight >= 0
    col[has] = 1
    row[tight[has]] = 2                            # 'z_a <= f z_b' rows at their upper bound 0
    return col, row


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
    c = core_level(blocks, P, len(H))
    return np.append(c * H, c * len(H))


def core_level(blocks: list[UserBlock], P: LRGeoParams, K: int) -> float:
    """c of :func:`core_point`: 1 / the largest row sum of h over every column."""
    return 1.0 / max(float((exp_factor(b.request.D_NO, P).sum(axis=1) + (K - len(b.request.columns))).max())
                     for b in blocks)


def leak_cost(req: ObfuscationRequest, P: LRGeoParams) -> float:
    """The scale of a user's objective, known before any LP is solved: the cost of the
    probability Geo-Ind forces from each LR row's own location onto its neighbours,
    ``sum_i sum_(j neighbour of i) C[j, v_i] e^(-eps d_ij)`` (z_ji >= e^(-eps d_ij) z_ii with
    z_ii near 1). Where the mechanisms are near the identity it is close to the optimum (a
    Sydney round at the paper's settings: 1.42105e-4 against 1.42092e-4)."""
    D = req.D_NO
    rows, cols = np.nonzero(D == 0)
    col_of = np.empty(req.n, dtype=np.int64)
    col_of[rows] = cols
    E, d = neighbor_pairs(P.gamma, "precomputed", distance_matrix=req.D_NN)
    C = np.nan_to_num(req.C_NO)
    w = np.exp(-P.epsilon * d)
    return float(np.sum(C[E[:, 1], col_of[E[:, 0]]] * w) + np.sum(C[E[:, 0], col_of[E[:, 1]]] * w))


OBJECTIVE_SCALE = 1.0
"""The costs of CLR-Geo's LP are scaled so that the users' :func:`leak_cost` sums to this. At
the paper's settings the objective is about 1e-4 km (the mechanisms are near the identity),
below what HiGHS's absolute tolerances (1e-9 on duals) let a rigorous bound resolve:
unscaled, the Lagrangian lower bound of the Benders master lost 8.6e-8 (6e-4 of the
objective) to reduced costs within tolerance on 500 columns of u, and stopped 1.8e-4 below
the optimum; scaled to an objective of 1e-2 it still stopped 5e-5 below. Scaled to about 1, it
came within 1e-5 of the whole LP's optimum (a Sydney round of 4 users)."""


def floor_repair(blocks: list[UserBlock], H: np.ndarray):
    """The Benders engine's ``repair`` for CLR-Geo: u_k raised to the floor at which column
    k's own entry can hold its whole row (:attr:`UserBlock.floor`), S = sum_k u_k / H_k kept.

    Below its floor a location's row must put mass on other locations, at a cost of a cell or
    more, so a block's value rises steeply there; the master learns each floor only through
    cuts, one location at a time, and its points sit just below many of them (the blocks'
    value at the master's point of a Sydney round was 0.05-0.17 km against an optimum of
    1.4e-4). Raised to the floors, that point's value was within 2e-5 of the optimum from
    the first round."""
    floor = np.max([b.floor for b in blocks], axis=0)
    K = len(H)

    def repair(y: np.ndarray) -> np.ndarray:
        out = y.copy()
        out[:K] = np.maximum(out[:K], floor)
        out[K] = float(np.sum(out[:K] / H))
        return out

    return repair


LEVEL = 0.7
"""The Benders master's point is its optimum in the narrowest box about the in-out core that
takes the master's objective 70% of the way from its optimum to the best upper bound
(:func:`certdp.lp.benders.benders`'s ``level``). Unrestricted, the master's point is a vertex
whose u are above 0 only where cuts pin them: on the Gold Coast at the paper's settings (4
users) 1,410 of the 1,600 u were at 0 at round 66, the pinned ones growing by 4-5 a round,
and the gap stalled at 0.49% (docs/lrgeo.md). Chosen over 0.5 on the tuning networks (Sydney's
three boxes, 4 users: worst solve CPU 11.6 s against 35.1 s, whose sydney-west round moved
far enough for its in-out points to leave the blocks' feasible region). Confirmed on the held-out
networks; the whole Gold Coast, which stalled at 0.29-0.49% before, reaches gap 1e-4 with 4
and 10 users (162 and 138 rounds with :data:`CUT_AGE`; docs/lrgeo.md)."""

CUT_AGE = 10
"""A cut idle (slack basic) at 10 whole master solves in a row leaves the master
(:func:`certdp.lp.benders.benders`'s ``cut_age``). Every round adds up to two dense cuts per
user over the K + 1 entries of y; kept all, the late rounds of the Gold Coast round at the
paper's settings spent 3 CPU s a round in the master with 4 users and 9-13 s with 10 users.
With this and the level box on a master model of its own, the Gold Coast's master took 63
CPU s instead of 197 (4 users, 162 rounds against 156) and its 10-user round reached gap 1e-4
(138 rounds); at 5 and 20 the 4-user round's solve took 649 and 653 CPU s against 639
(docs/lrgeo.md)."""


UB_CROSSING = 1e-2
"""How far the rigorous lower bound may pass the upper bound before Benders calls it a defect:
the upper bound here is the cost of the blocks' solutions as HiGHS returns them, feasible only
to its tolerances (docs/decisions.md#lr-geos-benders-tolerates-a-crossing-of-1-of-the-upper-bound). The users
certify the matrices, so the guarantee does not rest on this value."""


def solve_benders(master: MasterSpec, ublocks: list[UserBlock], P: LRGeoParams, H: np.ndarray, *, gap: float,
                  max_iterations: int, time_limit: float | None, progress: Progress | None) -> BendersOutcome:
    """CLR-Geo by the Benders engine: every block is first solved at the core point
    (:func:`core_point`), which gives the first upper bound and the centre of the in-out
    stabilisation, on the block models the engine then goes on with (hot-started)."""
    specs = [b.spec for b in ublocks]
    core = core_point(ublocks, P, H)
    t0 = time.perf_counter()
    runner = SerialRunner(specs)
    fixer = None
    try:
        first = runner.solve_all(core, np.zeros(len(specs)), time_limit)
        start = None
        if all(r.feasible for r in first):
            start = (float(master.c @ core) + sum(r.value for r in first), core, [r.x for r in first])
        # the repair point's models start from the bases the blocks reached at the core point
        fixer = SerialRunner([dataclasses.replace(b, basis=s.basis() or b.basis) for b, s in zip(specs, runner.solvers)])
        left = None if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - t0))
        return benders(master, specs, gap=gap, max_iterations=max_iterations, time_limit=left, runner=runner,
                       progress=progress, start=start, core=None if start is None else core, crossing=UB_CROSSING,
                       repair=floor_repair(ublocks, H), repair_runner=fixer, level=LEVEL,
                       cut_age=CUT_AGE)
    finally:
        runner.close()
        if fixer is not None:
            fixer.close()


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

    def build(self, users: list[str] | None = None) -> tuple[MasterSpec, list[UserBlock], np.ndarray, float]:
        """The master and one block per user (every stored request by default), with H
        (:func:`column_scale`) and the factor the costs are multiplied by
        (:data:`OBJECTIVE_SCALE`)."""
        names = list(self.requests) if users is None else users
        if not names:
            raise ValueError("no user requests to solve")
        K = self.world.K
        H = column_scale([self.requests[u] for u in names], self.params, K)
        blocks = [build_block(self.requests[u], self.params, K, self.outside_cost(u), H) for u in names]
        leak = sum(leak_cost(self.requests[u], self.params) for u in names)
        scale = OBJECTIVE_SCALE / leak if leak > 0 else 1.0
        for b in blocks:
            b.spec = dataclasses.replace(b.spec, c=b.spec.c * scale)
            b.alpha = b.alpha * scale
        alpha = np.sum([b.alpha for b in blocks], axis=0)
        return master_spec(alpha, H), blocks, H, scale

    def solve(self, *, method: str = "benders", gap: float = 1e-4, time_limit: float | None = None,
              max_iterations: int = MAX_ROUNDS, progress: Progress | None = None,
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
        master, ublocks, H, scale = self.build()
        specs = [b.spec for b in ublocks]
        if method == "lp":
            y, xs, info = solve_whole(master, specs, time_limit=time_limit)
        else:
            try:
                out = solve_benders(master, ublocks, self.params, H, gap=gap, max_iterations=max_iterations,
                                    time_limit=time_limit, progress=progress)
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
        info.upper_bound /= scale
        info.lower_bound /= scale
        for rec in info.history:
            for k in ("lower_bound", "upper_bound", "master_objective"):
                rec[k] = rec[k] / scale
        K = self.world.K
        yk = np.clip(y[:K], 0.0, None) / H
        resp = {}
        for b, x in zip(ublocks, xs):
            req = b.request
            free = np.full(req.D_NO.shape, np.nan)
            free[b.free_rows, b.free_cols] = b.lower * yk[req.columns[b.free_cols]] + np.clip(x, 0.0, None)
            resp[req.user] = ObfuscationResponse(user=req.user, free=free, y=yk, status=info.status,
                                                 upper_bound=info.upper_bound, lower_bound=info.lower_bound)
        return resp, info
