"""A dense interior-point solver for the small, dense LPs of column generation.

It solves

    min  g' b + cp' sp + cm' sm   s.t.  R b + sp - sm = rhs,   b, sp, sm >= 0

with ``R`` a dense m x n array (m a few thousand at most) and the slack pair optional. This is
the shape of a Dantzig-Wolfe master whose columns are dense: HiGHS's IPX (an interior-point
method preconditioned by a basis, made for sparse LPs) and its simplex codes take seconds per
solve there, while the normal equations ``R diag(d) R' + diag(ds)`` are an m x m dense matrix
that one BLAS product and one LAPACK Cholesky factor in milliseconds.

The method is Mehrotra's predictor-corrector (Nocedal & Wright, *Numerical Optimization*,
algorithm 14.3) with his starting point. The solution is interior: feasible up to ``tol``,
not a vertex. Callers that need exact feasibility must repair it (the PMO callers certify).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sl
from threadpoolctl import threadpool_limits


@dataclass(frozen=True)
class DenseLPResult:
    """Primal weights ``b``, slacks ``sp``/``sm`` (empty without the pair), row duals ``y``,
    objective values, iterations, status and error.

    ``error`` is the largest of the relative primal residual, dual residual and duality gap
    (the returned point is the iterate where it was least). ``status`` is 'optimal' when it is
    below ``tol``, 'inaccurate' when below ``100 tol`` (rounding stopped the progress) and
    'iteration_limit' otherwise. ``single_factors`` counts the iterations whose normal
    equations were factored in single precision (see :class:`_NormalEquations`)."""

    b: np.ndarray
    sp: np.ndarray
    sm: np.ndarray
    y: np.ndarray
    primal_objective: float
    dual_objective: float
    iterations: int
    status: str
    error: float
    single_factors: int = 0


_THREADED_FLOPS = 1e9    # rank-k product size above which BLAS runs on every core


class _NormalEquations:
    """The normal equations ``M = A diag(d) A'`` of one interior-point iteration (A = R, or
    [R, I, -I] with the slack pair): factored once, solved twice (predictor and corrector).

    Nearly all of an iteration is the rank-k product that forms M (m^2 n flops) and its
    Cholesky factor (m^3 / 3). In ``mixed`` mode both run in single precision
    (docs/decisions.md#the-dense-ipm-forms-its-normal-equations-in-single-precision), and each
    solve is refined to double precision by conjugate gradients on the exact (double) operator
    ``v -> A (d * A'v)``, the single factor as preconditioner: while the factor's error is
    small against 1 (condition of M below ~1e6), a few iterations reach a residual of
    ``SOLVE_TOL`` relative to the right-hand side. When they do not, or the
    single factor fails, this and every later iteration of the solve fall back to a double
    factor (the last iterations of an exact solve, where x / s spans many orders of magnitude).
    """

    SOLVE_TOL = 1e-10
    MAX_CG = 12

    def __init__(self, R: np.ndarray, box: bool, A_mul, At_mul, mixed: bool) -> None:
        self.R, self.box, self.A_mul, self.At_mul = R, box, A_mul, At_mul
        self.m, self.n = R.shape
        # single precision holds R's entries (and their squares' sums) only if they are
        # moderate (max and min rather than abs: no m x n temporary)
        self.mixed = mixed and R.size > 0 and max(float(R.max()), -float(R.min())) <= 1e15
        self.R32 = R.astype(np.float32) if self.mixed else None
        self.single_factors = 0
        self.d = np.ones(0)
        self.F: tuple = ()
        self.single = False
        self.scaled: np.ndarray | None = None
        self.sigma = 1.0

    def factor(self, d: np.ndarray) -> None:
        self.d = d
        if self.mixed:
            try:
                self.F, self.single = self._cholesky(d, single=True), True
                self.single_factors += 1
                return
            except np.linalg.LinAlgError:
                self.mixed = False
        self.F, self.single = self._cholesky(d, single=False), False

    def _cholesky(self, d: np.ndarray, single: bool) -> tuple:
        # the upper triangle of R diag(d) R' by one BLAS syrk (half the flops of a product)
        m, n = self.m, self.n
        w = np.sqrt(d[:n])
        diag = d[n:n + m] + d[n + m:] if self.box else np.zeros(m)
        if single:
            # in single precision M / sigma: x / s spans hundreds of orders of magnitude, and
            # squared weights above ~1e38 overflow; weights below 1e-10 of the largest add
            # less than single precision resolves (and their squares would be subnormal)
            self.sigma = max(float(w.max()) ** 2, float(diag.max(initial=0.0)), 1e-300)
            w = w / math.sqrt(self.sigma)
            w[w < 1e-10 * float(w.max())] = 0.0
            diag = diag / self.sigma
        else:
            # near the end x/s spans 1e300: columns with a weight below 1e-30 of the largest
            # add nothing and are left out (a guard against subnormal products)
            w[w < 1e-30 * float(w.max())] = 0.0
        R = self.R32 if single and self.R32 is not None else self.R
        S = self.scaled
        if S is None or S.dtype != R.dtype:
            S = self.scaled = np.empty_like(R)   # reused: a fresh m x n array each time costs page faults
        np.multiply(R, w.astype(R.dtype)[None, :], out=S)
        syrk = sl.blas.ssyrk if single else sl.blas.dsyrk
        # M = S S' with S = R diag(w), from S or from its transpose, whichever is Fortran-ordered
        M = syrk(1.0, S, trans=0, lower=0) if S.flags.f_contiguous else syrk(1.0, S.T, trans=1, lower=0)
        M[np.diag_indices(m)] += diag.astype(M.dtype)
        scale = max(1.0, float(np.trace(M)) / m)
        # R may be (numerically) rank-deficient: regularise more; in single precision the
        # factor is only a preconditioner, and rounding is already ~1e-7 of the diagonal
        for reg in ((1e-6, 1e-4) if single else (1e-13, 1e-10, 1e-7)):
            try:
                Mr = M.copy(order="F")   # (a C-ordered copy would be transposed twice)
                Mr[np.diag_indices(m)] += reg * scale
                return sl.cho_factor(Mr, lower=False, overwrite_a=True, check_finite=False)
            except np.linalg.LinAlgError:
                continue
        raise np.linalg.LinAlgError("normal equations not positive definite even with regularisation")

    def _precondition(self, r: np.ndarray) -> np.ndarray:
        norm = float(np.linalg.norm(r))
        if norm == 0.0:
            return np.zeros_like(r)
        z = sl.cho_solve(self.F, (r / norm).astype(np.float32), check_finite=False)
        return z.astype(np.float64) * (norm / self.sigma)

    def solve(self, r: np.ndarray) -> np.ndarray:
        """``M^-1 r``, in double precision."""
        if not self.single:
            return sl.cho_solve(self.F, r, check_finite=False)

        def op(v: np.ndarray) -> np.ndarray:
            return self.A_mul(self.d * self.At_mul(v))

        target = self.SOLVE_TOL * float(np.linalg.norm(r))
        x = np.zeros_like(r)
        res = r.copy()
        z = self._precondition(res)
        p, rz = z.copy(), float(res @ z)
        for _ in range(self.MAX_CG):
            q = op(p)
            pq = float(p @ q)
            if not pq > 0:
                break
            a = rz / pq
            x += a * p
            res -= a * q
            if float(np.linalg.norm(res)) <= target:
                res = r - op(x)      # the true residual: the recurrence can drift
                if float(np.linalg.norm(res)) <= 10 * target:
                    return x
            z = self._precondition(res)
            rz_new = float(res @ z)
            p = z + (rz_new / rz) * p
            rz = rz_new
        # not refined in time: double precision from here on
        self.mixed, self.single = False, False
        self.F = self._cholesky(self.d, single=False)
        return sl.cho_solve(self.F, r, check_finite=False)


def solve_dense_lp(R: np.ndarray, g: np.ndarray, rhs: np.ndarray,
                   slack_costs: tuple[np.ndarray, np.ndarray] | None = None, *,
                   tol: float = 1e-8, max_iter: int = 200, blas_threads: int | None = None,
                   mixed: bool | None = None) -> DenseLPResult:
    """Solve the LP above (``slack_costs = (cp, cm)`` adds the slack pair).

    ``blas_threads`` caps the BLAS threads during the solve. None chooses by size: nearly all
    the time goes to one symmetric rank-k product (m^2 n flops) and one Cholesky factor per
    iteration, and threads pay for their start-up only on large ones. On the 2-core reference
    machine one thread was 10-20% faster at m = 500 (n ~ 1,000, 2.5e8 flops) and two threads
    20-30% faster at m = 1,000 (n ~ 2,000, 2e9 flops); the switch is at 1e9.
    ``mixed`` factors the normal equations in single precision and solves them to double
    precision by preconditioned conjugate gradients (:class:`_NormalEquations`); None chooses
    by size, from the same switch.

    Raises ValueError on inconsistent shapes or non-finite data.
    """
    large = float(R.shape[0]) ** 2 * R.shape[1] >= _THREADED_FLOPS
    mixed = large if mixed is None else mixed
    if blas_threads is None and large:
        return _solve(R, g, rhs, slack_costs, tol, max_iter, mixed)
    with threadpool_limits(limits=int(blas_threads or 1), user_api="blas"):
        return _solve(R, g, rhs, slack_costs, tol, max_iter, mixed)


def _solve(R: np.ndarray, g: np.ndarray, rhs: np.ndarray, slack_costs: tuple[np.ndarray, np.ndarray] | None,
           tol: float, max_iter: int, mixed: bool) -> DenseLPResult:
    R = np.asarray(R, dtype=np.float64)
    g = np.asarray(g, dtype=np.float64)
    rhs = np.asarray(rhs, dtype=np.float64)
    m, n = R.shape
    if g.shape != (n,) or rhs.shape != (m,):
        raise ValueError(f"shapes: R {R.shape}, g {g.shape}, rhs {rhs.shape}")
    box = slack_costs is not None
    cp, cm = (np.zeros(0), np.zeros(0)) if slack_costs is None else \
        (np.asarray(slack_costs[0], dtype=np.float64), np.asarray(slack_costs[1], dtype=np.float64))
    if box and (cp.shape != (m,) or cm.shape != (m,)):
        raise ValueError("slack costs must have one entry per row")
    if not (np.isfinite(R).all() and np.isfinite(g).all() and np.isfinite(rhs).all()
            and np.isfinite(cp).all() and np.isfinite(cm).all()):
        raise ValueError("the LP data must be finite")
    c = np.concatenate([g, cp, cm])
    n_all = c.size

    # every BLAS call goes to scipy's OpenBLAS (numpy may load a second one): when both run
    # threads, each one's idle threads spin between its calls and take the cores from the other
    # (docs/decisions.md#every-blas-call-of-the-dense-ipm-goes-to-one-library)
    # BLAS wants Fortran order, and scipy copies anything else on every call (R has m x n
    # entries: at m = 5,000 that copy cost more than the product): use R itself when it is
    # Fortran-ordered (the masters' R is), else its transpose, which then is
    G, t = (R, 0) if R.flags.f_contiguous else (np.ascontiguousarray(R).T, 1)

    gemv = sl.blas.dgemv

    def A_mul(v: np.ndarray) -> np.ndarray:        # A v for v over [b, sp, sm]
        out = gemv(1.0, G, v[:n], trans=t)
        if box:
            out += v[n:n + m] - v[n + m:]
        return out

    def At_mul(y: np.ndarray) -> np.ndarray:       # A' y
        return np.concatenate([gemv(1.0, G, y, trans=1 - t), y, -y]) if box else gemv(1.0, G, y, trans=1 - t)

    F = _NormalEquations(R, box, A_mul, At_mul, mixed)
    F.factor(np.ones(n_all))
    x = At_mul(F.solve(rhs))
    y = F.solve(A_mul(c))
    s = c - At_mul(y)
    x += max(-1.5 * float(x.min()), 0.0)
    s += max(-1.5 * float(s.min()), 0.0)
    xs = float(x @ s)
    if xs <= 0:  # both already non-negative and complementary: nudge off the boundary
        x += 1.0
        s += 1.0
        xs = float(x @ s)
    x += 0.5 * xs / float(s.sum())
    s += 0.5 * xs / float(x.sum())
    nb, nc = 1.0 + float(np.linalg.norm(rhs)), 1.0 + float(np.linalg.norm(c))

    def longest(v: np.ndarray, dv: np.ndarray) -> float:
        neg = dv < 0
        return min(1.0, float(np.min(-v[neg] / dv[neg]))) if neg.any() else 1.0

    status = "iteration_limit"
    best: tuple[float, np.ndarray, np.ndarray, int] | None = None
    it = 0
    for it in range(max_iter + 1):
        rp = rhs - A_mul(x)
        rd = c - At_mul(y) - s
        pobj, dobj = float(c @ x), float(rhs @ y)
        err = max(float(np.linalg.norm(rp)) / nb, float(np.linalg.norm(rd)) / nc, abs(pobj - dobj) / (1.0 + abs(pobj)))
        if best is None or err < best[0]:
            best = (err, x, y, it)
        if err < tol:
            status = "optimal"
            break
        mu = xs / n_all
        # near the end the scaling x/s spans 1e20 and more; when mu is at rounding level the
        # residuals cannot shrink further and only grow: keep the best iterate instead
        if it == max_iter or mu < 1e-15 * (1.0 + abs(pobj)) / n_all or it - best[3] > 10:
            break
        d = x / s
        F.factor(d)

        def direction(rc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            dy = F.solve(rp - A_mul(rc / s - d * rd))
            ds = rd - At_mul(dy)
            return rc / s - d * ds, dy, ds

        dxa, _, dsa = direction(-x * s)
        ap, ad = longest(x, dxa), longest(s, dsa)
        mu_aff = float((x + ap * dxa) @ (s + ad * dsa)) / n_all
        sigma = (mu_aff / mu) ** 3
        dx, dy, ds = direction(-x * s + sigma * mu - dxa * dsa)
        ap, ad = 0.995 * longest(x, dx), 0.995 * longest(s, ds)
        x = x + ap * dx
        y = y + ad * dy
        s = s + ad * ds
        xs = float(x @ s)
    assert best is not None   # set in the first iteration
    err, x, y, _ = best
    if status != "optimal" and err < 100 * tol:
        status = "inaccurate"
    return DenseLPResult(b=x[:n], sp=x[n:n + m], sm=x[n + m:], y=y, primal_objective=float(c @ x),
                         dual_objective=float(rhs @ y), iterations=it, status=status, error=err,
                         single_factors=F.single_factors)
