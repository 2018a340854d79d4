"""PMO by a decomposition over outputs (Dantzig-Wolfe on the row sums); not in paper 000.

For one output k the mDP constraints ``z[i,k] <= exp(eps d(i,j)) z[j,k]`` define a cone C
that is the same for every k. The only constraints that link outputs are the row sums. So
PMO is

    min  sum_k c_k' z_k   s.t.  sum_k z_k = 1,   z_k in C,

and since ``z_k <= 1`` on every feasible matrix, each ``z_k`` lies in the polytope
``P = C cap [0,1]^N``.

**Master** (restricted): non-negative weights ``b_s`` on points ``r_s`` of P, with
``sum_s b_s r_s = 1``. Each point is charged ``min_k c_k' r_s`` and given to that output. Any
master solution is a feasible mechanism, because C is a convex cone. It starts with the
all-ones vector of each connected component of the mDP graph (in C, since no constraint links
two components), which makes it feasible, and with the single-record tents
``exp(-eps D(., a))``, where D is the path distance of the mDP graph.

**Pricing**, for row-sum duals lambda: one LP per output, ``min (c_k - lambda)' z`` over P.
It has N variables and two rows per kept edge. Its HiGHS model stays alive, and only the
objective changes between rounds.

**Lower bound**: for *any* lambda, and the optimal Z*,

    OPT = sum_i lambda_i + sum_k (c_k - lambda)' z*_k  >=  sum_i lambda_i + sum_k min_{z in P} (c_k - lambda)' z.

Each minimum is bounded from below through the pricing LP's duals
(:func:`scaledp.lp.benders.lagrangian_affine`), so the bound holds whatever the solver's
accuracy.

**Upper bound**: the certified cost of the master's matrix. The master is solved by IPM without
crossover, at a tolerance tied to the current gap (primal-dual column generation; the
interior duals are well centred). When the bounds say the gap may be met, it is re-solved with
crossover, so that the rows sum to 1 within 1e-9 before certification.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from .. import _validate as V
from ..graph import MDPGraph
from ..lp.benders import BlockSpec, lagrangian_affine
from ..lp.highs import INF, HighsLP
from ..space import Space
from .base import Mechanism
from .certify import certify
from .optimal import mdp_rows
from .result import SolveResult, relative_gap


class _Pricer:
    """One live HiGHS model of P per output; only the objective changes."""

    def __init__(self, A: sp.csr_matrix, n: int, tolerance: float) -> None:
        self.n = n
        self.lo = np.full(A.shape[0], -INF)
        self.up = np.zeros(A.shape[0])
        self.spec = BlockSpec(c=np.zeros(n), W=A, lo=self.lo, up=self.up, T=sp.csr_matrix((A.shape[0], 0)),
                              coupling=np.zeros(0, dtype=np.int64), x_lo=np.zeros(n), x_up=np.ones(n))
        self.models: list[HighsLP] = []
        self.A = A
        self.tolerance = tolerance
        self.cols = np.arange(n, dtype=np.int32)

    def _model(self, k: int, w: np.ndarray) -> HighsLP:
        while len(self.models) <= k:
            m = HighsLP(w, self.A, self.lo, self.up, np.zeros(self.n), np.ones(self.n), solver="simplex",
                        tolerance=self.tolerance, presolve=False)
            m.set_option("simplex_strategy", 4)  # primal simplex: the old basis stays primal feasible
            self.models.append(m)
        return self.models[k]

    def price(self, C: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Rigorous lower bounds on ``min_{z in P} (c_k - lam)' z`` and the minimisers."""
        K = C.shape[1]
        bounds = np.zeros(K)
        Z = np.zeros((self.n, K))
        iters = 0
        for k in range(K):
            w = C[:, k] - lam
            new = len(self.models) <= k
            m = self._model(k, w)
            if not new:
                m.h.changeColsCost(self.n, self.cols, np.ascontiguousarray(w))
            sol = m.solve()
            if sol.status != "optimal" or sol.row_dual is None:
                raise RuntimeError(f"pricing LP of output {k}: HiGHS returned {sol.status!r}")
            iters += sol.iterations
            v, _ = lagrangian_affine(self.spec, sol.row_dual, w)
            bounds[k] = min(v, 0.0)  # z = 0 is in P, so the minimum is <= 0
            Z[:, k] = np.clip(sol.x, 0.0, 1.0)
        return bounds, Z, iters


class _Master:
    """The restricted master ``min g' b + box terms, R b + s+ - s- = 1, b, s >= 0`` with dense
    columns R.

    The slack columns s+ / s- cost ``delta + center`` / ``delta - center``, which keeps the
    duals in the box ``|lambda - center| <= delta`` (box-step stabilisation; without it the
    duals of this degenerate master swing to +-80 when costs are O(1), and the bound stalls).
    A master solution is a mechanism only when the slacks are 0.
    """

    def __init__(self, n: int, tolerance: float, center: np.ndarray, delta: float) -> None:
        self.n = n
        I = sp.identity(n, format="csr")
        self.model = HighsLP(np.zeros(2 * n), sp.hstack([I, -I], format="csr"), np.ones(n), np.ones(n),
                             np.zeros(2 * n), np.full(2 * n, INF), solver="ipm", tolerance=tolerance, presolve=False)
        self.model.set_option("run_crossover", "off")
        self.set_box(center, delta)
        self.R: list[np.ndarray] = []
        self.owner: list[np.ndarray] = []
        self.cost: list[np.ndarray] = []
        self.n_cols = 0

    def set_box(self, center: np.ndarray, delta: float) -> None:
        self.center = center.copy()
        self.delta = float(delta)
        cost = np.concatenate([delta + center, delta - center])
        self.model.h.changeColsCost(2 * self.n, np.arange(2 * self.n, dtype=np.int32), np.ascontiguousarray(cost))

    def add(self, R: np.ndarray, C: np.ndarray) -> None:
        if R.shape[1] == 0:
            return
        costs = C.T @ R                      # (K, n_new): c_k' r_s
        owner = np.argmin(costs, axis=0)
        g = costs[owner, np.arange(R.shape[1])]
        Rs = sp.csc_matrix(R)
        st = self.model.h.addCols(R.shape[1], np.ascontiguousarray(g), np.zeros(R.shape[1]),
                                  np.full(R.shape[1], INF), Rs.nnz, Rs.indptr[:-1].astype(np.int32),
                                  Rs.indices.astype(np.int32), np.ascontiguousarray(Rs.data))
        if str(st).endswith("kError"):
            raise RuntimeError("HiGHS rejected the master's new columns")
        self.R.append(R)
        self.owner.append(owner)
        self.cost.append(g)
        self.n_cols += R.shape[1]

    def solve(self, tol: float, exact: bool) -> tuple[np.ndarray, np.ndarray, float, float, float]:
        """(duals, weights, total slack, objective without the box terms, seconds); ``exact``
        runs crossover (rows then sum to 1 within the feasibility tolerance)."""
        h = self.model
        h.set_option("ipm_optimality_tolerance", float(max(tol, 1e-12)))
        h.set_option("run_crossover", "on" if exact else "off")
        h.set_option("solver", "ipm")
        sol = h.solve()
        if sol.x is None or sol.row_dual is None:
            raise RuntimeError(f"output decomposition master: HiGHS returned {sol.status!r}")
        x = np.clip(sol.x, 0.0, None)
        slack = x[:2 * self.n]
        b = x[2 * self.n:]
        g = np.concatenate(self.cost) if self.cost else np.zeros(0)
        return sol.row_dual, b, float(slack.sum()), float(g @ b), sol.seconds

    def prune(self, lam: np.ndarray, b: np.ndarray, limit: int) -> int:
        """Above ``limit`` columns, delete those at weight 0 with a positive reduced cost
        (they can price out again later). Returns how many were deleted."""
        if self.n_cols <= limit or not self.R:
            return 0
        R = np.hstack(self.R)
        g = np.concatenate(self.cost)
        owner = np.concatenate(self.owner)
        rc = g - R.T @ lam
        drop = (b <= 1e-12) & (rc > 1e-6)
        if not drop.any():
            return 0
        idx = np.flatnonzero(drop)
        self.model.h.deleteCols(int(len(idx)), (2 * self.n + idx).astype(np.int32))
        keep = ~drop
        self.R, self.cost, self.owner = [R[:, keep]], [g[keep]], [owner[keep]]
        self.n_cols = int(keep.sum())
        return int(len(idx))

    def matrix(self, b: np.ndarray, K: int) -> np.ndarray:
        Z = np.zeros((self.n, K))
        start = 0
        for R, owner in zip(self.R, self.owner):
            w = b[start:start + R.shape[1]]
            start += R.shape[1]
            np.add.at(Z.T, owner, (R * w[None, :]).T)
        return Z


def _new_columns(Z: np.ndarray, C: np.ndarray, lam: np.ndarray, comp: np.ndarray, n_comp: int) -> np.ndarray:
    """The pieces (one per connected component) of the priced points that have a negative
    reduced cost, without repeats. Each piece is in C, since no constraint links components."""
    if n_comp > 1:
        pieces = (Z[:, :, None] * (comp[:, None, None] == np.arange(n_comp)[None, None, :])).reshape(Z.shape[0], -1)
        Z = pieces[:, np.abs(pieces).sum(axis=0) > 0]
    rc = np.min(C.T @ Z, axis=0) - lam @ Z
    good = Z[:, rc < -1e-9]
    if good.shape[1] <= 1:
        return good
    _, first = np.unique(np.round(good.T, 10), axis=0, return_index=True)
    return good[:, np.sort(first)]


OPTIONS = ("gap", "max_iterations")
"""The options of :func:`solve_pmo_outputs` that ``solve_pmo(method='outputs')`` passes on."""


def solve_pmo_outputs(space: Space, *, gap: float = 1e-2, max_iterations: int = 500,
                      time_limit: float | None = None, reduce: bool = True, tolerance: float = 1e-9,
                      progress: Callable[[dict[str, Any]], None] | None = None) -> SolveResult:
    """Solve PMO by the decomposition over outputs and return a certified mechanism.

    Stops at the relative ``gap`` between the certified cost and the rigorous lower bound, at
    ``max_iterations`` rounds, or at ``time_limit`` seconds (checked between rounds). The
    result is always the certified matrix of the last exact master solve, with its true gap.
    """
    gap = V.positive_float("gap", gap)
    V.int_in_range("max_iterations", max_iterations, 1)
    if time_limit is not None:
        V.positive_float("time_limit", time_limit, allow_inf=True)
    t_start = time.perf_counter()
    N, K = space.n_records, space.n_outputs
    eps = space.epsilon
    wc = space.weighted_cost
    scale = float(wc.max()) if wc.size and wc.max() > 0 else 1.0
    C = wc / scale
    graph = MDPGraph.from_space(space)
    implied = graph.implied_edges() if reduce else np.zeros(graph.n_edges, dtype=bool)
    edges, dist = graph.edges[~implied], graph.distance[~implied]
    # the cone C: one output's mDP rows, all "i -> j" rows first, then all "j -> i" (the order the
    # measured runs used; the pricing LPs' pivoting, hence the columns generated, depend on it)
    m = len(edges)
    A = mdp_rows(N, 1, edges, dist, eps)[np.r_[0:2 * m:2, 1:2 * m:2]]
    D = graph.path_distances()
    tents = np.exp(-eps * D)            # column a: exp(-eps D(., a)), 0 outside a's component
    t_build = time.perf_counter() - t_start

    pricer = _Pricer(A, N, tolerance)
    center = C.min(axis=1)               # lambda_i = min_k c[i,k]: a valid start with bound sum_i min_k c[i,k]
    delta = 0.1 * (float(np.max(C.max(axis=1) - C.min(axis=1))) or 1.0)
    master = _Master(N, tolerance, center, delta)
    n_comp, comp = graph.components
    master.add((comp[:, None] == np.arange(n_comp)[None, :]).astype(np.float64), C)  # one all-ones per component
    master.add(tents, C)
    lb = float(center.sum())
    ub = math.inf
    best: tuple[np.ndarray, Any] | None = None
    history: list[dict[str, Any]] = []
    tol = 1e-2
    status = "iteration_limit"
    t_master = t_price = t_cert = 0.0
    it = 0
    for it in range(1, max_iterations + 1):
        # crossover only when the last master had no slack (its matrix is a mechanism) and its
        # value is within the requested gap of the bound; with slack its value means nothing
        prev = history[-1] if history else None
        exact = (prev is not None and prev["slack"] <= 1e-9 and prev["master_gap"] <= 0.8 * gap) or tol <= 1e-9
        lam, b, slack, obj, secs = master.solve(tol, exact)
        t_master += secs
        t0 = time.perf_counter()
        bounds, Znew, p_iters = pricer.price(C, lam)
        tp = time.perf_counter() - t0
        t_price += tp
        lb_here = float(lam.sum() + bounds.sum())
        if lb_here > lb:                 # a serious step: move the box to these duals
            lb = lb_here
            master.set_box(lam, master.delta)
        if exact and slack <= 1e-9:
            t0 = time.perf_counter()
            Zc, cert = certify(master.matrix(b, K), eps, *space.neighbor_pairs)
            t_cert += time.perf_counter() - t0
            val = float(np.sum(C * Zc))
            if val < ub:
                ub, best = val, (Zc, cert)
        cols = _new_columns(Znew, C, lam, comp, n_comp)
        if math.isfinite(ub) and lb > ub * (1 + 1e-7) + 1e-12:
            raise AssertionError(f"lower bound {lb} exceeds the certified cost {ub}")
        g = relative_gap(ub, lb) if math.isfinite(ub) else math.inf
        rec = {"iteration": it, "lower_bound": lb * scale, "upper_bound": ub * scale, "gap": g,
               "master_objective": obj * scale, "master_gap": (obj - lb) / max(abs(obj), 1e-300),
               "slack": slack, "box": master.delta,
               "cuts_added": int(cols.shape[1]), "columns": master.n_cols, "master_seconds": secs,
               "sub_seconds": tp, "pricing_iterations": p_iters, "exact_master": exact,
               "elapsed": time.perf_counter() - t_start}
        history.append(rec)
        if progress is not None:
            progress(rec)
        if g is not None and g <= gap:
            status = "optimal"
            break
        if time_limit is not None and time.perf_counter() - t_start >= time_limit:
            status = "time_limit"
            break
        if cols.shape[1] == 0:
            if slack > 1e-9:             # the box binds: widen it
                master.set_box(master.center, master.delta * 10)
            elif exact and tol <= 1e-9:
                status = "stalled"
                break
            tol = max(1e-9, tol / 100)   # no column prices out at these duals: solve the master tighter
        else:
            tol = max(1e-9, min(tol, rec["master_gap"] / 10))
            rec["deleted"] = master.prune(lam, b, 2 * N)
            master.add(cols, C)
    if best is None:  # no exact master solve without slack yet: drop the box and solve exactly
        master.set_box(master.center, 1e6 * (1.0 + float(np.abs(master.center).max())))
        lam, b, slack, obj, secs = master.solve(1e-9, True)
        t_master += secs
        Zc, cert = certify(master.matrix(b, K), eps, *space.neighbor_pairs)
        ub, best = float(np.sum(C * Zc)), (Zc, cert)
    Zc, cert = best
    upper = ub * scale
    lower = min(lb * scale, upper)
    all_e, all_d = space.neighbor_pairs
    mech = Mechanism(Zc, eps, all_e, all_d, output_records=space.output_records, cost=space.cost,
                     prior=space.prior, metadata={"method": "outputs", "eta": space.eta, "instance": space.name,
                                                  "certify_mixing": cert.mixing})
    stats = {"n_records": N, "n_outputs": K, "columns": master.n_cols, "edges": int(len(all_e)),
             "edges_kept": int(len(edges)), "constraints_before": 2 * len(all_e) * K + N,
             "constraints_after": 2 * len(edges) * K + N, "certify_mixing": cert.mixing}
    timings = {"build": t_build, "master": t_master, "pricing": t_price, "certify": t_cert,
               "total": time.perf_counter() - t_start}
    return SolveResult(mechanism=mech, method="outputs", status=status, upper_bound=upper, lower_bound=lower,
                       gap=relative_gap(upper, lower), iterations=it, history=tuple(history), timings=timings,
                       stats=stats)
