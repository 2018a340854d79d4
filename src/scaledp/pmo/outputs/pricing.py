"""The pricing step of the outputs decomposition: one LP per output over the mDP polytope.

For row-sum duals lambda and output k the pricing problem is ``min (c_k - lambda)' z`` over
``P = {z : A z <= 0, 0 <= z <= 1}``, with ``A z <= 0`` the mDP cone of one output (M = 2 x kept
edges rows, N variables). It is solved in its LP-dual form, with y >= 0 on the cone rows and
mu >= 0 on the bounds ``z <= 1``:

    (dual)    min 1'mu  s.t.  A'y + mu >= -w,  y, mu >= 0,      w = c_k - lambda,

whose optimum is minus the primal one. The dual form has N rows instead of M (about 25 x fewer
at N = 1,000), so its simplex iterations are cheaper and fewer: whole solves took 1.4-2.4x less
time than in the primal form on the 500- and 1,000-record benchmark instances, except road-500
(16% more; docs/history.md has the table). Only the right-hand side changes between rounds, so
each output's HiGHS model stays alive. The minimiser z is the dual form's row duals (a vertex
of P), and y gives a rigorous bound through :func:`scaledp.lp.bounds.lagrangian_bound`, whatever
HiGHS's accuracy.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from ...lp.bounds import lagrangian_bound
from ...lp.highs import INF, HighsLP, LPSolution
from ..model import mdp_rows


def cone_rows(n: int, edges: np.ndarray, dist: np.ndarray, eps: float) -> sp.csr_matrix:
    """The cone C as ``A z <= 0``: one output's mDP rows, all "i -> j" rows first, then all
    "j -> i" (the pricing LPs' pivoting, hence the columns generated, depend on the order)."""
    m = len(edges)
    return mdp_rows(n, 1, edges, dist, eps)[np.r_[0:2 * m:2, 1:2 * m:2]]


class Pricer:
    """One live HiGHS model per output (in the dual form above); the K solves of a round run on
    ``workers`` threads (HiGHS releases the GIL while it solves and the models are independent,
    so the result does not depend on ``workers``)."""

    def __init__(self, A: sp.csr_matrix, n: int, tolerance: float, workers: int) -> None:
        self.n = n
        self.m = A.shape[0]
        self.A = A
        self.lo = np.full(self.m, -INF)
        self.up = np.zeros(self.m)
        self.x_lo, self.x_up = np.zeros(n), np.ones(n)
        self.models: list[HighsLP] = []
        self.AD = sp.hstack([A.T, sp.identity(n)], format="csr")
        self.tolerance = tolerance
        self.cols = np.arange(n, dtype=np.int32)
        self.no_upper = np.full(n, INF)
        self.pool = ThreadPoolExecutor(workers) if workers > 1 else None
        self.fallbacks = 0   # solves the live model failed and a fresh interior-point one did
        self.failures = 0    # solves both failed: the bound of y = 0 and no column

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()

    def _build(self, w: np.ndarray) -> HighsLP:
        m = HighsLP(np.r_[np.zeros(self.m), np.ones(self.n)], self.AD, -w, self.no_upper,
                    np.zeros(self.m + self.n), np.full(self.m + self.n, INF),
                    solver="simplex", tolerance=self.tolerance, presolve=False)
        # primal simplex: measured against dual simplex in this form, it was faster on text-500
        # (13.0 s against 13.9 s of pricing) and on replays of the 1,000-record instances
        # (gauss / text / road 3.4 / 8.9 / 1.7 s against 6.0 / 9.1 / 2.3 s), slower only on
        # road-500 (1.7 s against 1.1 s)
        m.set_option("simplex_strategy", 4)
        return m

    def _fallback(self, w: np.ndarray) -> LPSolution:
        """A fresh interior-point solve (with crossover, so the minimiser is still a vertex):
        where epsilon x distance is large the rows span six orders of magnitude against
        right-hand sides near 1e-6, and the live simplex model can end in status 'Unknown'
        (grid-500 at eps = 10 per km) where the interior-point method does not."""
        self.fallbacks += 1
        return HighsLP(np.r_[np.zeros(self.m), np.ones(self.n)], self.AD, -w, self.no_upper,
                       np.zeros(self.m + self.n), np.full(self.m + self.n, INF),
                       solver="ipm", tolerance=self.tolerance, presolve=True).solve()

    def _one(self, k: int, w: np.ndarray) -> tuple[float, np.ndarray, int]:
        m = self.models[k]
        m.set_row_bounds(self.cols, -w, self.no_upper)
        sol = m.solve()
        if sol.status != "optimal" or sol.row_dual is None or sol.x is None:
            sol = self._fallback(w)
        if sol.status != "optimal" or sol.row_dual is None or sol.x is None:
            # no column, and the bound of y = 0 (min of w'z over the box): valid, only weaker
            self.failures += 1
            return min(float(np.minimum(w, 0.0).sum()), 0.0), np.zeros(self.n), sol.iterations
        pi = -np.maximum(sol.x[:self.m], 0.0)   # y >= 0 on the cone rows: multipliers -y of A z <= 0
        v = lagrangian_bound(w, self.A, self.lo, self.up, self.x_lo, self.x_up, pi)
        return min(v, 0.0), np.clip(sol.row_dual, 0.0, 1.0), sol.iterations  # z = 0 is in P: min <= 0

    def price(self, C: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Rigorous lower bounds on ``min_{z in P} (c_k - lam)' z`` for every output k, the
        minimisers (as columns) and the simplex iterations spent."""
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
