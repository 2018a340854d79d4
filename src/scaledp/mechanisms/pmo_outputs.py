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
It has N variables and two rows per kept edge; it is solved in its LP-dual form (N rows, one
column per cone row and per record), in which pricing took 1.4-2.4x less time on all our
instances but road-500 (16% more; see :class:`_Pricer`). Its HiGHS model stays alive, and only
the right-hand side changes between rounds.

**Lower bound**: for *any* lambda, and the optimal Z*,

    OPT = sum_i lambda_i + sum_k (c_k - lambda)' z*_k  >=  sum_i lambda_i + sum_k min_{z in P} (c_k - lambda)' z.

Each minimum is bounded from below through the pricing LP's duals
(:func:`scaledp.lp.benders.lagrangian_affine`), so the bound holds whatever the solver's
accuracy.

**Upper bound**: the best certified cost of two candidates, the *free* master (the same kind
of LP without the box slack of the stabilised one, so its solutions are mechanisms) and,
once its slack is small, the stabilised master's own matrix: its rows are off 1 by the slack;
they are divided by their sums and lowered to the largest matrix below them whose columns keep
mDP (:func:`scaledp.mechanisms.certify.mdp_envelope`), and
:func:`scaledp.mechanisms.certify.rebalance_rows` then mixes each row with the uniform
mechanism by the cheapest weights that give sums of 1 and keep mDP (a small LP), before
certification.

**Masters** are solved by :mod:`scaledp.lp.dense` (a dense interior-point method; the masters
are 500 x 1,000 dense at N = 500, where HiGHS takes seconds per solve), with box-step
stabilisation and dual price smoothing (Wentges; automatic weight after Pessoa et al. 2018).
See docs/benders.md for what each piece bought, measured.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from .. import _validate as V
from ..graph import MDPGraph
from ..lp.benders import BlockSpec, lagrangian_affine
from ..lp.dense import solve_dense_lp
from ..lp.highs import INF, HighsLP, solve_lp
from ..space import Space
from .base import Mechanism
from .certify import certify, mdp_envelope, rebalance_rows, repair_rows
from .optimal import mdp_rows
from .result import SolveResult, relative_gap


class _Pricer:
    """One live HiGHS model per output; only the objective (``form="primal"``) or the right-hand
    side (``form="dual"``, the default) changes between rounds. The K solves of a round run on
    ``workers`` threads (HiGHS releases the GIL while it solves, and the models are
    independent, so the result does not depend on ``workers``).

    The pricing LP of output k, with ``w = c_k - lambda`` and the cone rows ``A z <= 0``
    (M = 2 x kept edges rows, N variables), is

        (primal)  min w'z  s.t.  A z <= 0,  0 <= z <= 1,

    and its LP dual, with y >= 0 on the cone rows and mu >= 0 on the bounds ``z <= 1``,

        (dual)    min 1'mu  s.t.  A'y + mu >= -w,  y, mu >= 0,

    whose optimum is minus the primal one. The dual form has N rows instead of M (about 25 x
    fewer at N = 1,000), and its simplex iterations are cheaper and fewer: replaying the
    first 8-20 rounds' duals of the 1,000-record instances through 10 outputs' models on one
    thread took 2.5-2.8x less time, but 1.4x more on road-500, where it needs more pivots
    (``benchmarks/pricing_forms.py`` measures whole solves; docs/benders.md, "Session 9").
    The minimiser z is the dual form's row duals (a vertex of P, as the solution is basic),
    and y gives the rigorous bound ``sum_i min(0, (w + A'y)_i)`` through
    :func:`scaledp.lp.benders.lagrangian_affine`, whatever HiGHS's accuracy.
    """

    def __init__(self, A: sp.csr_matrix, n: int, tolerance: float, workers: int, form: str = "dual") -> None:
        self.n = n
        self.m = A.shape[0]
        self.form = form
        self.lo = np.full(self.m, -INF)
        self.up = np.zeros(self.m)
        self.spec = BlockSpec(c=np.zeros(n), W=A, lo=self.lo, up=self.up, T=sp.csr_matrix((self.m, 0)),
                              coupling=np.zeros(0, dtype=np.int64), x_lo=np.zeros(n), x_up=np.ones(n))
        self.models: list[HighsLP] = []
        self.A = A
        self.AD = sp.hstack([A.T, sp.identity(n)], format="csr") if form == "dual" else None
        self.tolerance = tolerance
        self.cols = np.arange(n, dtype=np.int32)
        self.no_upper = np.full(n, INF)
        self.pool = ThreadPoolExecutor(workers) if workers > 1 else None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()

    def _build(self, w: np.ndarray) -> HighsLP:
        if self.form == "dual":
            m = HighsLP(np.r_[np.zeros(self.m), np.ones(self.n)], self.AD, -w, self.no_upper,
                        np.zeros(self.m + self.n), np.full(self.m + self.n, INF),
                        solver="simplex", tolerance=self.tolerance, presolve=False)
        else:
            m = HighsLP(w, self.A, self.lo, self.up, np.zeros(self.n), np.ones(self.n),
                        solver="simplex", tolerance=self.tolerance, presolve=False)
        # primal simplex. In the primal form the old basis stays primal feasible when only the
        # objective changes; in the dual form it was measured against dual simplex: text-500
        # 13.0 s against 13.9 s of pricing; replays (docs/benders.md, "Session 9") on gauss /
        # text / road-1000 3.4 / 8.9 / 1.7 s against 6.0 / 9.1 / 2.3 s, but road-500 1.7 s
        # against 1.1 s
        m.set_option("simplex_strategy", 4)
        return m

    def _one(self, k: int, w: np.ndarray) -> tuple[float, np.ndarray, int]:
        m = self.models[k]
        if self.form == "dual":
            m.set_row_bounds(self.cols, -w, self.no_upper)
        else:
            m.h.changeColsCost(self.n, self.cols, w)
        sol = m.solve()
        if sol.status != "optimal" or sol.row_dual is None or sol.x is None:
            raise RuntimeError(f"pricing LP of output {k}: HiGHS returned {sol.status!r}")
        if self.form == "dual":   # y >= 0 on the cone rows are multipliers -y in the primal's convention
            pi, z = -np.maximum(sol.x[:self.m], 0.0), sol.row_dual
        else:
            pi, z = sol.row_dual, sol.x
        v, _ = lagrangian_affine(self.spec, pi, w)
        return min(v, 0.0), np.clip(z, 0.0, 1.0), sol.iterations  # z = 0 is in P: the minimum is <= 0

    def price(self, C: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Rigorous lower bounds on ``min_{z in P} (c_k - lam)' z`` and the minimisers."""
        K = C.shape[1]
        W = [np.ascontiguousarray(C[:, k] - lam) for k in range(K)]
        while len(self.models) < K:        # built here, in one thread
            self.models.append(self._build(W[len(self.models)]))
        if self.pool is None:
            out = [self._one(k, W[k]) for k in range(K)]
        else:
            out = list(self.pool.map(self._one, range(K), W))
        bounds = np.array([o[0] for o in out])
        Z = np.column_stack([o[1] for o in out])
        return bounds, Z, int(sum(o[2] for o in out))


class _ColumnLP:
    """``min g' b (+ slack terms)  s.t.  R b (+ s+ - s-) = 1,  b >= 0`` with dense columns R,
    solved by the dense interior-point method of :mod:`scaledp.lp.dense` (HiGHS takes 2-5 s
    per solve on these dense masters, this takes 0.1-0.3 s at N = 500; see docs/benders.md).
    Column s is a point of P charged ``min_k c_k' r_s`` and given to that output.

    With ``box``, slack columns s+ / s- cost ``delta + center`` / ``delta - center``, which keeps
    the duals in the box ``|lambda - center| <= delta`` (delta a number or one per row; box-step
    stabilisation; without it the duals of this degenerate master swing to +-80 when costs are
    O(1), and the bound stalls).
    Without ``box`` every solution is a mechanism up to the solver's tolerance (the all-ones
    columns make it feasible), which certification turns into an exact one.
    """

    def __init__(self, n: int, tolerance: float) -> None:
        self.n = n
        self.tolerance = tolerance
        self.R = np.zeros((n, 0))
        self.owner = np.zeros(0, dtype=np.int64)
        self.cost = np.zeros(0)
        self.center = np.zeros(n)
        self.delta = math.inf
        self.iterations = 0
        self.fallbacks = 0   # solves handed to HiGHS because the dense IPM did not converge
        self.protected = 0   # the first columns are never deleted (they keep the LP feasible)

    @property
    def n_cols(self) -> int:
        return int(self.cost.size)

    def set_box(self, center: np.ndarray, delta: float | np.ndarray) -> None:
        self.center = center.copy()
        self.delta = np.asarray(delta, dtype=np.float64)

    def add(self, R: np.ndarray, owner: np.ndarray, g: np.ndarray) -> None:
        self.R = np.hstack([self.R, R])
        self.owner = np.concatenate([self.owner, owner])
        self.cost = np.concatenate([self.cost, g])

    def solve(self, box: bool = True, elastic: tuple[np.ndarray, np.ndarray] | None = None
              ) -> tuple[np.ndarray, np.ndarray, float, float, float]:
        """(duals, weights, total slack, objective without the box terms, seconds); ``box``
        False solves without the slack columns (every solution is then a mechanism);
        ``elastic=(center, width)`` uses that box instead of the stabilisation box."""
        t0 = time.perf_counter()
        if elastic is not None:
            slack_costs = (elastic[1] + elastic[0], elastic[1] - elastic[0])
        else:
            slack_costs = (self.delta + self.center, self.delta - self.center) if box else None
        r = solve_dense_lp(self.R, self.cost, np.ones(self.n), slack_costs)
        if r.status in ("optimal", "inaccurate"):
            y, b, sp_, sm_ = r.y, r.b, r.sp, r.sm
        else:   # rare (a degenerate, badly conditioned master): HiGHS, slower but sure
            self.fallbacks += 1
            y, b, sp_, sm_ = self._highs(slack_costs)
        b = np.maximum(b, 0.0)
        slack = float(np.maximum(sp_, 0).sum() + np.maximum(sm_, 0).sum())
        if box and elastic is None:
            self.iterations = r.iterations
        return y, b, slack, float(self.cost @ b), time.perf_counter() - t0

    def _highs(self, slack_costs: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, ...]:
        n, m = self.n_cols, self.n
        A = sp.csr_matrix(self.R)
        c = self.cost
        if slack_costs is not None:
            I = sp.identity(m, format="csr")
            A = sp.hstack([A, I, -I], format="csr")
            c = np.concatenate([c, *slack_costs])
        sol = solve_lp(c, A, np.ones(m), np.ones(m), np.zeros(A.shape[1]), np.full(A.shape[1], INF),
                       solver="ipm", tolerance=self.tolerance, presolve=False)
        if sol.status != "optimal" or sol.x is None or sol.row_dual is None:
            raise RuntimeError(f"output decomposition master: HiGHS returned {sol.status!r}")
        x = sol.x   # [b, s+, s-]; the slack parts are empty without the box
        return sol.row_dual, x[:n], x[n:n + m], x[n + m:]

    def prune(self, lam: np.ndarray, b: np.ndarray, limit: int) -> int:
        """Above ``limit`` columns, delete those with (interior) weight near 0 and a positive
        reduced cost (they can price out again later). Returns how many were deleted."""
        if self.n_cols <= limit:
            return 0
        rc = self.cost - self.R.T @ lam
        drop = (b <= 1e-7 * max(1.0, float(b.max()))) & (rc > 1e-6)
        drop[:self.protected] = False
        if not drop.any():
            return 0
        keep = ~drop
        self.R, self.cost, self.owner = self.R[:, keep], self.cost[keep], self.owner[keep]
        return int(drop.sum())

    def matrix(self, b: np.ndarray, K: int) -> np.ndarray:
        Z = np.zeros((self.n, K))
        np.add.at(Z.T, self.owner, (self.R * b[None, :]).T)
        return Z


def _cone_rows(n: int, edges: np.ndarray, dist: np.ndarray, eps: float) -> sp.csr_matrix:
    """The cone C as ``A z <= 0``: one output's mDP rows, all "i -> j" rows first, then all
    "j -> i" (the order the measured runs used; the pricing LPs' pivoting, hence the columns
    generated, depend on it)."""
    m = len(edges)
    return mdp_rows(n, 1, edges, dist, eps)[np.r_[0:2 * m:2, 1:2 * m:2]]


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


_ELASTIC_WIDTH = 1000.0
"""The elastic free master's slack costs ``lambda +- width``, with width this times the
stabilisation box's half-width: high enough that few rows are left off 1 (gauss-1000 at round
26: 70 rows at 1000, 113 at 100, 254 at 10), low enough that it does not take the exact cover
where that is far dearer (there: 138.6 against 205.8, in units of the largest cost)."""

_REBALANCE_SLACK = {"envelope": 0.1, "plain": 0.01}
"""The stabilised master's matrix is tried as an upper bound once its total slack is below
this times N. With the envelope (``rebalance="envelope"``) its price falls with the slack, so it
is tried earlier: text-1000, 31 -> 19 rounds (development runs; gates 0.05 and 0.1 gave 21 and
19 rounds, and without the envelope 0.05 gave 27). The 500-record instances keep their rounds."""

OPTIONS = ("gap", "max_iterations", "workers")
"""The options of :func:`solve_pmo_outputs` that ``solve_pmo(method='outputs')`` passes on."""


def solve_pmo_outputs(space: Space, *, gap: float = 1e-2, max_iterations: int = 500,
                      time_limit: float | None = None, reduce: bool = True, tolerance: float = 1e-9,
                      workers: int | None = None, smoothing: float | str = "auto", pricing: str = "dual",
                      upper: str = "repair", rebalance: str = "envelope",
                      progress: Callable[[dict[str, Any]], None] | None = None) -> SolveResult:
    """Solve PMO by the decomposition over outputs and return a certified mechanism.

    Stops at the relative ``gap`` between the certified cost and the rigorous lower bound, at
    ``max_iterations`` rounds, or at ``time_limit`` seconds (checked between rounds). The
    result is always the best certified matrix found, with its true gap. ``workers`` threads
    run the pricing LPs (default: one per core); the result does not depend on it.
    ``pricing`` chooses the form in which the pricing LPs are solved, ``"dual"`` (default,
    faster) or ``"primal"`` (as up to session 8, kept for comparison); see :class:`_Pricer`.
    ``upper`` chooses the free master's candidate for the upper bound: ``"repair"`` (default;
    the elastic free master with its off rows re-solved, :func:`repair_rows`) or ``"exact"``
    (the exact cover, as up to session 9, kept for comparison). ``rebalance`` chooses how the
    stabilised master's matrix is made a mechanism: ``"envelope"`` (default; rows divided by their
    sums, lowered to the largest matrix below them that keeps mDP, :func:`mdp_envelope`, then
    :func:`rebalance_rows`, tried once the slack is below 0.1 N) or ``"plain"``
    (:func:`rebalance_rows` alone, once the slack is below 0.01 N, as up to session 10).
    """
    gap = V.positive_float("gap", gap)
    V.int_in_range("max_iterations", max_iterations, 1)
    if time_limit is not None:
        V.positive_float("time_limit", time_limit, allow_inf=True)
    if workers is None:   # the cores this process may use (a container may allow fewer than cpu_count)
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    else:
        workers = V.int_in_range("workers", workers, 1)
    V.choice("pricing", pricing, ("dual", "primal"))
    V.choice("upper", upper, ("repair", "exact"))
    V.choice("rebalance", rebalance, ("envelope", "plain"))
    rebalance_slack = _REBALANCE_SLACK[rebalance]
    auto_smoothing = isinstance(smoothing, str)
    if auto_smoothing:
        V.choice("smoothing", smoothing, ("auto",))
        alpha = 0.5
    else:
        alpha = V.nonneg_float("smoothing", smoothing)
        if alpha >= 1:
            raise ValueError(f"smoothing must lie in [0, 1) or be 'auto', got {alpha}")
    t_start = time.perf_counter()
    N, K = space.n_records, space.n_outputs
    eps = space.epsilon
    wc = space.weighted_cost
    scale = float(wc.max()) if wc.size and wc.max() > 0 else 1.0
    C = wc / scale
    graph = MDPGraph.from_space(space)
    implied = graph.implied_edges() if reduce else np.zeros(graph.n_edges, dtype=bool)
    edges, dist = graph.edges[~implied], graph.distance[~implied]
    A = _cone_rows(N, edges, dist, eps)
    D = graph.path_distances()
    tents = np.exp(-eps * D)            # column a: exp(-eps D(., a)), 0 outside a's component
    t_build = time.perf_counter() - t_start

    center = C.min(axis=1)               # lambda_i = min_k c[i,k]: a valid start with bound sum_i min_k c[i,k]
    # the box half-width of record i: 0.07 x its own cost range, and at least 0.1 x that of the
    # largest range (records with nearly flat costs must still move). Measured on the four
    # 500-record instances against one width for all (0.1 x the largest range): rounds
    # 14/24/25/90 -> 14/23/21/44 on grid/road/gauss/text (docs/benders.md)
    spread = C.max(axis=1) - C.min(axis=1)
    delta = 0.07 * np.maximum(spread, 0.1 * (float(spread.max()) or 1.0))
    master = _ColumnLP(N, tolerance)     # solved with the box: the duals (stabilised)
    master.set_box(center, delta)
    free = _ColumnLP(N, tolerance)       # solved without: mechanisms (the upper bound)

    def add(R: np.ndarray) -> None:
        costs = C.T @ R                  # (K, n_new): c_k' r_s
        owner = np.argmin(costs, axis=0)
        g = costs[owner, np.arange(R.shape[1])]
        master.add(R, owner, g)
        free.add(R, owner, g)

    n_comp, comp = graph.components
    add((comp[:, None] == np.arange(n_comp)[None, :]).astype(np.float64))  # one all-ones per component
    add(tents)
    free.protected = free.n_cols        # kept: through the all-ones columns the free master is feasible
    lb = float(center.sum())
    ub = math.inf
    best: tuple[np.ndarray, Any] | None = None
    history: list[dict[str, Any]] = []
    status = "iteration_limit"
    t_master = t_price = t_cert = t_free = 0.0
    lb_at_free = -math.inf
    it_free = 0
    rebalance_wait = rebalance_skip = 0
    rebalanced = [0, 0]                  # tried, gave the best mechanism
    repaired = [0, 0, 0]                 # elastic free master + repair_rows: tried, best, failed
    repair_wait = repair_skip = 0
    it = 0

    def certified(Z: np.ndarray, rebalance_it: bool = False) -> bool:
        """Certify ``Z`` (rebalanced first, if asked); True if it is the new best."""
        nonlocal ub, best, t_cert
        t0 = time.perf_counter()
        if rebalance_it:
            if rebalance == "envelope":
                Z = mdp_envelope(Z, eps, edges, dist)
            Z = rebalance_rows(Z, C, eps, edges, dist)
        Zc, cert = certify(Z, eps, *space.neighbor_pairs)
        t_cert += time.perf_counter() - t0
        val = float(np.sum(C * Zc))
        if val < ub:
            ub, best = val, (Zc, cert)
            return True
        return False

    def solve_free() -> tuple[np.ndarray, np.ndarray, float]:
        """Solve the free master and certify its matrix unless its value cannot beat ``ub``."""
        nonlocal t_free
        lam_f, b_f, _, obj_f, secs_f = free.solve(box=False)
        t_free += secs_f
        if obj_f < ub:
            certified(free.matrix(b_f, K))
        return lam_f, b_f, secs_f

    def solve_elastic(lam_c: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The elastic free master (row-sum slack at ``_ELASTIC_WIDTH`` x the box width), its few
        rows whose sums are off 1 re-solved by :func:`repair_rows`, certified. None if the
        repair failed; it is then tried again only after 1, 2, 4, ... chances."""
        nonlocal t_free, t_cert, repair_wait, repair_skip
        lam_e, b_e, _, _, secs_e = free.solve(elastic=(lam_c, _ELASTIC_WIDTH * delta))
        t_free += secs_e
        t0 = time.perf_counter()
        Z = repair_rows(free.matrix(b_e, K), C, eps, edges, dist)
        t_cert += time.perf_counter() - t0
        repaired[0] += 1
        if Z is None:
            repaired[2] += 1
            repair_wait = max(1, 2 * repair_wait)
            repair_skip = repair_wait
            return None
        repair_wait = 0
        if certified(Z):
            repaired[1] += 1
        return lam_e, b_e, secs_e

    pricer = _Pricer(A, N, tolerance, workers, pricing)
    try:
        for it in range(1, max_iterations + 1):
            lam, b, slack, obj, secs = master.solve()
            t_master += secs
            t0 = time.perf_counter()
            # dual price smoothing (Wentges): price at a point between the stability centre and
            # the master's duals; if none of its columns prices out at the master's duals
            # (a mis-pricing), price at the master's duals themselves
            lam_s = master.center + (1.0 - alpha) * (lam - master.center) if it > 1 and alpha > 0 else lam
            bounds, Znew, p_iters = pricer.price(C, lam_s)
            lb_here, lam_lb = float(lam_s.sum() + bounds.sum()), lam_s
            if auto_smoothing and lam_s is not lam:
                # Pessoa et al. (2018): if the Lagrangian rises from the smoothed point towards
                # the master's duals (subgradient 1 - sum_k z_k), smooth less; else smooth more
                if float((1.0 - Znew.sum(axis=1)) @ (lam - lam_s)) > 0:
                    alpha = max(0.0, alpha - 0.1)
                else:
                    alpha = min(0.95, alpha + 0.1 * (1.0 - alpha))
            cols = _new_columns(Znew, C, lam, comp, n_comp)
            if cols.shape[1] == 0 and lam_s is not lam:
                bounds, Znew, extra = pricer.price(C, lam)
                p_iters += extra
                cols = _new_columns(Znew, C, lam, comp, n_comp)
                lb_master = float(lam.sum() + bounds.sum())
                if lb_master > lb_here:
                    lb_here, lam_lb = lb_master, lam
            tp = time.perf_counter() - t0
            t_price += tp
            serious = lb_here > lb
            if serious:                  # a serious step: move the box to these duals
                lb = lb_here
                master.set_box(lam_lb, master.delta)
            secs_free = 0.0
            if lb > lb_at_free and (not math.isfinite(ub) or gap < relative_gap(ub, lb) <= 2 * gap
                                    or it - it_free >= 5):
                # the free master: the best mechanism the columns so far can make. The upper
                # bound moves little after the first rounds (grid-500: 0.6% from round 7 to 20,
                # while the lower bound moves 3%), so it is solved when the gap is near the
                # target, or every 5 rounds
                it_free = it
                lb_at_free = lb
                # the elastic free master with its off rows repaired first (gauss-1000: upper
                # bound 1.0592 -> 1.0299 at round 21, 37 -> 24 rounds); the exact free master
                # when that failed
                out = None
                if repair_skip > 0:
                    repair_skip -= 1
                elif upper == "repair":
                    out = solve_elastic(lam)
                lam_f, b_f, secs_free = out if out is not None else solve_free()
                free.prune(lam_f, b_f, 4 * N)
                # the stabilised master's own matrix has row sums 1 +- its slack; lowered to its
                # mDP envelope (with rebalance="envelope") and mixed row by row with the uniform
                # mechanism to sums of 1 (rebalance_rows), it is sometimes far cheaper than the
                # free master's exact cover (text-500: 0.7% above the optimum where the free
                # master is 3% above). When it does not give the best mechanism, it is tried
                # again only after 1, 2, 4, ... chances
                if slack < rebalance_slack * N and rebalance_skip > 0:
                    rebalance_skip -= 1
                elif slack < rebalance_slack * N:
                    rebalanced[0] += 1
                    if certified(master.matrix(b, K), rebalance_it=True):
                        rebalanced[1] += 1
                        rebalance_wait = 0
                    else:
                        rebalance_wait = max(1, 2 * rebalance_wait)
                        rebalance_skip = rebalance_wait
            if math.isfinite(ub) and lb > ub * (1 + 1e-7) + 1e-12:
                raise AssertionError(f"lower bound {lb} exceeds the certified cost {ub}")
            g = relative_gap(ub, lb) if math.isfinite(ub) else math.inf
            rec = {"iteration": it, "lower_bound": lb * scale, "upper_bound": ub * scale, "gap": g,
                   "master_objective": obj * scale, "slack": slack, "box": float(np.max(master.delta)),
                   "cuts_added": int(cols.shape[1]), "columns": master.n_cols, "master_seconds": secs,
                   "master_iterations": master.iterations,
                   "free_master_seconds": secs_free, "sub_seconds": tp, "pricing_iterations": p_iters,
                   "smoothing": alpha, "elapsed": time.perf_counter() - t_start}
            history.append(rec)
            if progress is not None:
                progress(rec)
            if g <= gap:
                status = "optimal"
                break
            if time_limit is not None and time.perf_counter() - t_start >= time_limit:
                status = "time_limit"
                break
            if cols.shape[1] > 0:
                rec["deleted"] = master.prune(lam, b, 2 * N)
                add(cols)
            elif not serious:            # nothing prices out and the box did not move
                if slack > 1e-6:         # the box binds where it stands: widen it
                    master.set_box(master.center, master.delta * 10)
                else:                    # and it does not bind: done
                    solve_free()
                    g = relative_gap(ub, lb)
                    status = "optimal" if g <= gap else "stalled"
                    break
    finally:
        pricer.close()
    if best is None:  # no mechanism yet (e.g. a 1-round limit): solve the free master once
        solve_free()
    Zc, cert = best
    upper_bound = ub * scale
    lower = min(lb * scale, upper_bound)
    all_e, all_d = space.neighbor_pairs
    mech = Mechanism(Zc, eps, all_e, all_d, output_records=space.output_records, cost=space.cost,
                     prior=space.prior, metadata={"method": "outputs", "eta": space.eta, "instance": space.name,
                                                  "certify_mixing": cert.mixing})
    stats = {"n_records": N, "n_outputs": K, "columns": master.n_cols, "edges": int(len(all_e)),
             "edges_kept": int(len(edges)), "constraints_before": 2 * len(all_e) * K + N,
             "constraints_after": 2 * len(edges) * K + N, "certify_mixing": cert.mixing, "workers": workers,
             "master_fallbacks": master.fallbacks + free.fallbacks,
             "rebalanced_tried": rebalanced[0], "rebalanced_best": rebalanced[1],
             "repaired_tried": repaired[0], "repaired_best": repaired[1], "repaired_failed": repaired[2]}
    timings = {"build": t_build, "master": t_master, "free_master": t_free, "pricing": t_price,
               "certify": t_cert, "total": time.perf_counter() - t_start}
    return SolveResult(mechanism=mech, method="outputs", status=status, upper_bound=upper_bound, lower_bound=lower,
                       gap=relative_gap(upper_bound, lower), iterations=it, history=tuple(history), timings=timings,
                       stats=stats)
