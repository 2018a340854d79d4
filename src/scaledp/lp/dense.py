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
    'iteration_limit' otherwise."""

    b: np.ndarray
    sp: np.ndarray
    sm: np.ndarray
    y: np.ndarray
    primal_objective: float
    dual_objective: float
    iterations: int
    status: str
    error: float


_THREADED_FLOPS = 1e9    # rank-k product size above which BLAS runs on every core


def solve_dense_lp(R: np.ndarray, g: np.ndarray, rhs: np.ndarray,
                   slack_costs: tuple[np.ndarray, np.ndarray] | None = None, *,
                   tol: float = 1e-8, max_iter: int = 200, blas_threads: int | None = None) -> DenseLPResult:
    """Solve the LP above (``slack_costs = (cp, cm)`` adds the slack pair).

    ``blas_threads`` caps the BLAS threads during the solve. None chooses by size: nearly all
    the time goes to one symmetric rank-k product (m^2 n flops) and one Cholesky factor per
    iteration, and threads pay for their start-up only on large ones. On the 2-core reference
    machine one thread was 10-20% faster at m = 500 (n ~ 1,000, 2.5e8 flops) and two threads
    20-30% faster at m = 1,000 (n ~ 2,000, 2e9 flops); the switch is at 1e9.

    Raises ValueError on inconsistent shapes or non-finite data.
    """
    if blas_threads is None and float(R.shape[0]) ** 2 * R.shape[1] >= _THREADED_FLOPS:
        return _solve(R, g, rhs, slack_costs, tol, max_iter)
    with threadpool_limits(limits=int(blas_threads or 1), user_api="blas"):
        return _solve(R, g, rhs, slack_costs, tol, max_iter)


def _solve(R: np.ndarray, g: np.ndarray, rhs: np.ndarray, slack_costs: tuple[np.ndarray, np.ndarray] | None,
           tol: float, max_iter: int) -> DenseLPResult:
    R = np.asarray(R, dtype=np.float64)
    g = np.asarray(g, dtype=np.float64)
    rhs = np.asarray(rhs, dtype=np.float64)
    m, n = R.shape
    if g.shape != (n,) or rhs.shape != (m,):
        raise ValueError(f"shapes: R {R.shape}, g {g.shape}, rhs {rhs.shape}")
    box = slack_costs is not None
    cp, cm = (np.asarray(slack_costs[0], dtype=np.float64), np.asarray(slack_costs[1], dtype=np.float64)) \
        if box else (np.zeros(0), np.zeros(0))
    if box and (cp.shape != (m,) or cm.shape != (m,)):
        raise ValueError("slack costs must have one entry per row")
    if not (np.isfinite(R).all() and np.isfinite(g).all() and np.isfinite(rhs).all()
            and np.isfinite(cp).all() and np.isfinite(cm).all()):
        raise ValueError("the LP data must be finite")
    c = np.concatenate([g, cp, cm])
    n_all = c.size

    # every BLAS call goes to scipy's OpenBLAS (numpy may load a second one): when both run
    # threads, each one's idle threads spin between its calls and take the cores from the other
    # (two threads were then 1.5-2x slower than one at N = 1,000; through one library, 1.3-1.5x
    # faster)
    RT = R.T                                       # Fortran-ordered view: no copy in dgemv

    gemv = sl.blas.dgemv

    def A_mul(v: np.ndarray) -> np.ndarray:        # A v for v over [b, sp, sm]
        out = gemv(1.0, RT, v[:n], trans=1)
        if box:
            out += v[n:n + m] - v[n + m:]
        return out

    def At_mul(y: np.ndarray) -> np.ndarray:       # A' y
        return np.concatenate([gemv(1.0, RT, y), y, -y]) if box else gemv(1.0, RT, y)

    def factor(d: np.ndarray) -> tuple:
        # the upper triangle of R diag(d) R' by one BLAS syrk (half the flops of a product).
        # Near the end x/s spans 1e300: columns with a weight below 1e-30 of the largest add
        # nothing and are left out (a guard against subnormal products; the slowdowns we
        # measured came from BLAS threads, see solve_dense_lp, not from these)
        w = np.sqrt(d[:n])
        w[w < 1e-30 * float(w.max())] = 0.0
        M = sl.blas.dsyrk(1.0, np.asfortranarray((R * w).T), trans=1, lower=0)
        if box:
            M[np.diag_indices(m)] += d[n:n + m] + d[n + m:]
        scale = max(1.0, float(np.trace(M)) / m)
        for reg in (1e-13, 1e-10, 1e-7):  # R may be (numerically) rank-deficient: regularise more
            try:
                Mr = M.copy()
                Mr[np.diag_indices(m)] += reg * scale
                return sl.cho_factor(Mr, lower=False, overwrite_a=True, check_finite=False)
            except np.linalg.LinAlgError:
                continue
        raise np.linalg.LinAlgError("normal equations not positive definite even with regularisation")

    F = factor(np.ones(n_all))
    x = At_mul(sl.cho_solve(F, rhs, check_finite=False))
    y = sl.cho_solve(F, A_mul(c), check_finite=False)
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
        F = factor(d)

        def direction(rc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            dy = sl.cho_solve(F, rp - A_mul(rc / s - d * rd), check_finite=False)
            ds = rd - At_mul(dy)
            return rc / s - d * ds, dy, ds

        dxa, dya, dsa = direction(-x * s)
        ap, ad = longest(x, dxa), longest(s, dsa)
        mu_aff = float((x + ap * dxa) @ (s + ad * dsa)) / n_all
        sigma = (mu_aff / mu) ** 3
        dx, dy, ds = direction(-x * s + sigma * mu - dxa * dsa)
        ap, ad = 0.995 * longest(x, dx), 0.995 * longest(s, ds)
        x = x + ap * dx
        y = y + ad * dy
        s = s + ad * ds
        xs = float(x @ s)
    err, x, y, _ = best
    if status != "optimal" and err < 100 * tol:
        status = "inaccurate"
    return DenseLPResult(b=x[:n], sp=x[n:n + m], sm=x[n + m:], y=y, primal_objective=float(c @ x),
                         dual_objective=float(rhs @ y), iterations=it, status=status, error=err)
