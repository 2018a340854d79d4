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
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sl
from threadpoolctl import ThreadpoolController


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


#: Rank-k product size (m^2 n) from which the normal equations are formed in single precision
#: and in two halves side by side (:meth:`DenseColumns.gram`): below it a product takes under
#: ~20 ms and neither pays for its overhead.
_LARGE_FLOPS = 1e9

_CONTROLLER: ThreadpoolController | None = None


def single_threaded_blas() -> AbstractContextManager[Any]:
    """A context in which BLAS runs on one thread, for solver loops whose own numpy work is
    small (vector products, sparse products beside HiGHS solves). A multithreaded BLAS call
    wakes OpenBLAS's worker threads, which then spin for their timeout (about 0.1 s) before
    they sleep: a dot product of 37,000 entries once per Benders block solve kept a second core
    busy for 40% of LR-Geo's CPU time on Sydney at paper 003's settings
    (benchmarks/paper003/results/scale.md). The limit is process-wide (OpenBLAS has no other):
    enter it from the thread that runs the loop, not from worker threads."""
    global _CONTROLLER
    if _CONTROLLER is None:   # inspecting the loaded libraries costs milliseconds: once
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")


class ColumnStore:
    """Dense columns of length m kept once for every LP that uses them, with a count of users.

    The columns live in chunks of :data:`CHUNK` columns (Fortran-ordered m x CHUNK arrays), so
    that adding columns never copies the ones already there, and a slot whose count falls to 0
    is reused by the next column put in. Several LPs over overlapping sets of columns (a
    column-generation master and its restricted variants) then hold one copy of each column
    and a list of slots (:class:`DenseColumns` reads them in place), instead of one m x n
    array each, which every added or deleted column would copy."""

    CHUNK = 1024

    def __init__(self, m: int) -> None:
        self.m = int(m)
        self.chunks: list[np.ndarray] = []
        self.refs = np.zeros(0, dtype=np.int64)

    @property
    def capacity(self) -> int:
        """Slots allocated (used or free)."""
        return int(self.refs.size)

    @property
    def nbytes(self) -> int:
        """Bytes held by the chunks."""
        return sum(c.nbytes for c in self.chunks)

    def put(self, R: np.ndarray) -> np.ndarray:
        """Store the columns of ``R`` (m x k) in free slots and return the slots (each with a
        count of 0 until a user :meth:`take` s it)."""
        R = np.asarray(R, dtype=np.float64)
        if R.ndim != 2 or R.shape[0] != self.m:
            raise ValueError(f"columns must have {self.m} rows, got shape {R.shape}")
        k = R.shape[1]
        free = np.flatnonzero(self.refs == 0)
        while free.size < k:
            self.chunks.append(np.zeros((self.m, self.CHUNK), order="F"))
            self.refs = np.concatenate([self.refs, np.zeros(self.CHUNK, dtype=np.int64)])
            free = np.flatnonzero(self.refs == 0)
        slots = free[:k]
        self.refs[slots] = -1        # reserved until taken: a second put must not hand them out
        for c, at, cols in self._by_chunk(slots):
            self.chunks[c][:, at] = R[:, cols]
        return slots

    def take(self, slots: np.ndarray) -> None:
        """Count one more user of each column at ``slots``."""
        slots = np.asarray(slots, dtype=np.int64)
        np.maximum.at(self.refs, slots, 0)
        np.add.at(self.refs, slots, 1)

    def release(self, slots: np.ndarray) -> None:
        """Count one user less of each column at ``slots``; a column no one uses frees its slot."""
        slots = np.asarray(slots, dtype=np.int64)
        np.add.at(self.refs, slots, -1)
        if np.any(self.refs[slots] < 0):
            raise ValueError("a column released more often than taken")

    def _by_chunk(self, slots: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """``(chunk, columns in the chunk, positions in slots)`` for each chunk the slots touch."""
        chunk = slots // self.CHUNK
        for c in np.unique(chunk):
            pos = np.flatnonzero(chunk == c)
            yield int(c), slots[pos] - c * self.CHUNK, pos

    def gather(self, slots: np.ndarray, rows: np.ndarray | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """The columns at ``slots`` (the ``rows`` of them, or all) as one Fortran-ordered array."""
        slots = np.asarray(slots, dtype=np.int64)
        m = self.m if rows is None else len(rows)
        out = np.empty((m, slots.size), order="F") if out is None else out
        for c, at, pos in self._by_chunk(slots):
            block = self.chunks[c]
            out[:, pos] = block[:, at] if rows is None else block[np.ix_(rows, at)]
        return out


class DenseColumns:
    """The m x n matrix ``R`` of an LP, read where it is: either one array (products by BLAS on
    ``R`` itself, or on its transpose when it is C-ordered; scipy would copy anything else on
    every call), or the columns at ``slots`` of a :class:`ColumnStore`, restricted to ``rows``
    (read :data:`BLOCK` columns at a time). The normal equations are built from blocks of
    :data:`BLOCK` columns, so that a solve holds no second m x n array (a scaled copy, a
    single-precision one, or the gathered columns)."""

    BLOCK = 2048
    """Columns scaled and multiplied per rank-k update of the normal equations (an m x BLOCK
    temporary); a matrix of at most this many columns is done in one product."""

    def __init__(self, R: np.ndarray | None = None, *, store: ColumnStore | None = None,
                 slots: np.ndarray | None = None, rows: np.ndarray | None = None) -> None:
        self.store = store
        if store is None:
            self.R = np.asarray(R, dtype=np.float64)
            self.shape = self.R.shape
            # BLAS wants Fortran order: use R itself when it is Fortran-ordered, else its transpose
            self.G, self.t = (self.R, 0) if self.R.flags.f_contiguous else (np.ascontiguousarray(self.R).T, 1)
        else:
            self.slots = np.asarray(slots, dtype=np.int64)
            self.rows = None if rows is None else np.asarray(rows, dtype=np.int64)
            self.shape = (store.m if rows is None else len(rows), self.slots.size)

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, block)`` over the columns, ``block`` an m x BLOCK (at most) array."""
        n = self.shape[1]
        for start in range(0, n, self.BLOCK):
            if self.store is None:
                yield start, self.R[:, start:start + self.BLOCK]
            else:
                yield start, self.store.gather(self.slots[start:start + self.BLOCK], self.rows)

    def mul(self, v: np.ndarray) -> np.ndarray:
        """R v."""
        if self.store is None:
            return sl.blas.dgemv(1.0, self.G, v, trans=self.t)
        out = np.zeros(self.shape[0])
        for start, B in self.blocks():
            out += B @ v[start:start + B.shape[1]]
        return out

    def tmul(self, y: np.ndarray) -> np.ndarray:
        """R' y."""
        if self.store is None:
            return sl.blas.dgemv(1.0, self.G, y, trans=1 - self.t)
        out = np.empty(self.shape[1])
        for start, B in self.blocks():
            out[start:start + B.shape[1]] = B.T @ y
        return out

    def finite(self) -> bool:
        """Whether every entry is finite."""
        return all(bool(np.isfinite(B).all()) for _, B in self.blocks())

    def largest(self) -> float:
        """The largest absolute entry (max and min rather than abs: no m x n temporary)."""
        return max((max(float(B.max()), -float(B.min())) for _, B in self.blocks() if B.size), default=0.0)

    def gram(self, w: np.ndarray, single: bool, pool: ThreadPoolExecutor | None = None) -> np.ndarray:
        """The upper triangle of ``R diag(w)^2 R'`` (float32 when ``single``), block of columns
        by block of columns: one BLAS syrk per block, or with a ``pool``, three independent
        products per block on the two halves of the rows (the two diagonal blocks, a quarter
        of the flops together, on one of the pool's threads, and the block above them, another
        quarter, on another; numpy's products, which release the interpreter's lock): the
        matrix is the same whatever the number of threads."""
        m, n = self.shape
        dtype = np.float32 if single else np.float64
        h = m // 2 if pool is not None and m >= 2 else 0
        if not h:
            syrk = sl.blas.ssyrk if single else sl.blas.dsyrk
            M: np.ndarray | None = None
            for start, B in self.blocks():
                S = B.astype(dtype, copy=self.store is None or single)   # keeps B's order
                np.multiply(S, w[start:start + B.shape[1]].astype(dtype)[None, :], out=S)
                more = {} if M is None else {"beta": 1.0, "c": M, "overwrite_c": True}
                # S S' from S or from its transpose, whichever is Fortran-ordered
                M = syrk(1.0, S, trans=0, lower=0, **more) if S.flags.f_contiguous else \
                    syrk(1.0, S.T, trans=1, lower=0, **more)
            return np.zeros((m, m), dtype=dtype, order="F") if M is None else M
        M = np.zeros((m, m), dtype=dtype, order="F")
        top_left, bottom_right, top_right = M[:h, :h], M[h:, h:], M[:h, h:]

        def diagonal(top: np.ndarray, bottom: np.ndarray) -> None:
            top_left[...] += top @ top.T          # numpy takes syrk for a product with its own transpose
            bottom_right[...] += bottom @ bottom.T

        def off(top: np.ndarray, bottom: np.ndarray) -> None:
            top_right[...] += top @ bottom.T

        assert pool is not None   # h > 0 only with a pool
        for start, B in self.blocks():
            W = w[start:start + B.shape[1]].astype(dtype)[None, :]
            top = np.multiply(B[:h], W, dtype=dtype, order="F")
            bottom = np.multiply(B[h:], W, dtype=dtype, order="F")
            for job in (pool.submit(diagonal, top, bottom), pool.submit(off, top, bottom)):
                job.result()
        return M


class _NormalEquations:
    """The normal equations ``M = A diag(d) A'`` of one interior-point iteration (A = R, or
    [R, I, -I] with the slack pair): factored once, solved twice (predictor and corrector).

    Nearly all of an iteration is the rank-k product that forms M (m^2 n flops) and its
    Cholesky factor (m^3 / 3). In ``mixed`` mode both run in single precision
    (docs/decisions.md#the-dense-ipm-forms-its-normal-equations-in-single-precision), and each
    solve is refined to double precision by conjugate gradients on the exact (double) operator
    ``v -> A (d * A'v)``, the single factor as preconditioner: while the factor's error is
    small against 1 (condition of M below ~1e6), a few iterations reach a residual of
    ``SOLVE_TOL`` relative to the right-hand side, or the absolute one the caller allows. When
    they do not, or the single factor fails, this and every later iteration of the solve fall
    back to a double factor (the last iterations of an exact solve, where x / s spans many
    orders of magnitude). Each product with the operator reads R twice; on the masters those
    reads were 40% of a loose solve's time when every solve was refined to ``SOLVE_TOL``.
    """

    SOLVE_TOL = 1e-10
    MAX_CG = 12

    def __init__(self, R: DenseColumns, box: bool, A_mul, At_mul, mixed: bool,
                 pool: ThreadPoolExecutor | None = None) -> None:
        self.R, self.box, self.A_mul, self.At_mul, self.pool = R, box, A_mul, At_mul, pool
        self.m, self.n = R.shape
        # single precision holds R's entries (and their squares' sums) only if they are moderate
        self.mixed = mixed and self.n > 0 and self.m > 0 and R.largest() <= 1e15
        self.single_factors = 0
        self.d = np.ones(0)
        self.F: tuple = ()
        self.single = False
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
        m, n = self.m, self.n
        w = np.sqrt(d[:n])
        diag = d[n:n + m] + d[n + m:] if self.box else np.zeros(m)
        if single:
            # in single precision M / sigma: x / s spans hundreds of orders of magnitude, and
            # squared weights above ~1e38 overflow; weights below 1e-10 of the largest add
            # less than single precision resolves (and their squares would be subnormal)
            self.sigma = max(float(w.max(initial=0.0)) ** 2, float(diag.max(initial=0.0)), 1e-300)
            w = w / math.sqrt(self.sigma)
            w[w < 1e-10 * float(w.max(initial=0.0))] = 0.0
            diag = diag / self.sigma
        else:
            # near the end x/s spans 1e300: columns with a weight below 1e-30 of the largest
            # add nothing and are left out (a guard against subnormal products)
            w[w < 1e-30 * float(w.max(initial=0.0))] = 0.0
        # R may be (numerically) rank-deficient: regularise more; in single precision the
        # factor is only a preconditioner, and rounding is already ~1e-7 of the diagonal. The
        # product is formed again for a stronger regularisation (rare) rather than kept twice.
        for reg in ((1e-6, 1e-4) if single else (1e-13, 1e-10, 1e-7)):
            M = self.R.gram(w, single, self.pool)
            M[np.diag_indices(m)] += diag.astype(M.dtype)
            scale = max(1.0, float(np.trace(M)) / m)
            M[np.diag_indices(m)] += reg * scale
            try:
                return sl.cho_factor(M, lower=False, overwrite_a=True, check_finite=False)
            except np.linalg.LinAlgError:
                continue
        raise np.linalg.LinAlgError("normal equations not positive definite even with regularisation")

    def _precondition(self, r: np.ndarray) -> np.ndarray:
        norm = float(np.linalg.norm(r))
        if norm == 0.0:
            return np.zeros_like(r)
        z = sl.cho_solve(self.F, (r / norm).astype(np.float32), check_finite=False)
        return z.astype(np.float64) * (norm / self.sigma)

    def solve(self, r: np.ndarray, atol: float = 0.0) -> np.ndarray:
        """``M^-1 r`` in double precision: to a residual of ``SOLVE_TOL`` relative to ``r``, or
        of ``atol``, whichever is larger, when the factor is single."""
        if not self.single:
            return sl.cho_solve(self.F, r, check_finite=False)

        def op(v: np.ndarray) -> np.ndarray:
            return self.A_mul(self.d * self.At_mul(v))

        target = max(self.SOLVE_TOL * float(np.linalg.norm(r)), atol)
        x = self._precondition(r)    # the single factor's answer, checked on the exact operator
        res = r - op(x)
        if float(np.linalg.norm(res)) <= target:
            return x
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


def solve_dense_lp(R: np.ndarray | DenseColumns, g: np.ndarray, rhs: np.ndarray,
                   slack_costs: tuple[np.ndarray, np.ndarray] | None = None, *,
                   tol: float = 1e-8, max_iter: int = 200, threads: int | None = None,
                   mixed: bool | None = None) -> DenseLPResult:
    """Solve the LP above (``slack_costs = (cp, cm)`` adds the slack pair); ``R`` an array or
    :class:`DenseColumns` (columns read from a :class:`ColumnStore`; an array is faster: an
    iteration reads R 5-30 times, each read of a :class:`DenseColumns` gathers its columns).

    Nearly all the time goes to one symmetric rank-k product (m^2 n flops) and one Cholesky
    factor per iteration. Every BLAS call runs on one thread: OpenBLAS's own threads
    synchronise by spinning, and when another process holds one of the cores a threaded
    Cholesky factor or product took 5-100 times as long as on one thread (m = 1,500-2,000 on
    the 2-core reference machine, benchmarks/paper000/results/dense_threads.md). From
    ``_LARGE_FLOPS`` (m^2 n) on, the product is split into three independent BLAS calls run on
    ``threads`` threads (at most two, the calls' grouping; None: the cores this process may
    use), which a busy core only slows down (:meth:`DenseColumns.gram`); the result does not
    depend on ``threads``.
    ``mixed`` factors the normal equations in single precision and solves them to double
    precision by preconditioned conjugate gradients (:class:`_NormalEquations`); None chooses
    by size, from the same switch.

    Raises ValueError on inconsistent shapes or non-finite data.
    """
    large = float(R.shape[0]) ** 2 * R.shape[1] >= _LARGE_FLOPS
    mixed = large if mixed is None else mixed
    R = R if isinstance(R, DenseColumns) else DenseColumns(R)
    if threads is None:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    with single_threaded_blas():
        if not large:
            return _solve(R, g, rhs, slack_costs, tol, max_iter, mixed, None)
        with ThreadPoolExecutor(max(1, min(2, int(threads)))) as pool:
            return _solve(R, g, rhs, slack_costs, tol, max_iter, mixed, pool)


#: A step's normal equations are solved to a residual of this share of the primal residual the
#: stopping test allows (their residual goes into the next primal residual and nowhere else).
_RESIDUAL_SHARE = 0.1

#: Gondzio's multiple centrality correctors, with the parameters of OOQP (Gertz and Wright
#: 2003): at most 3 a step, each aiming at step lengths 1.08 x the current + 0.08 and kept
#: while the shorter grows by 1%, the complementarity products of the trial point projected into
#: [0.1, 10] x the target mu.
_CORRECTORS, _STEP_FACTOR, _STEP_ADD, _ACCEPT, _BETA_MIN, _BETA_MAX = 3, 1.08, 0.08, 1.01, 0.1, 10.0


def _centrality_correctors(x, s, dx, dy, ds, ap, ad, mu_target, correction, longest):
    """Gondzio's multiple centrality correctors (Gondzio 1996, *Multiple centrality corrections
    in a primal-dual method for linear programming*): a step of the predictor-corrector
    direction that is cut short by a few products x_i s_i far from the target mu is lengthened
    by a correction towards the target on exactly those products (``correction(t)``: the
    Newton direction for complementarity right-hand side t and no residuals, solved with the
    factor the step already has; a solve is much cheaper than a factor). Kept while the
    shorter of the two step lengths grows; returns the direction and its step lengths."""
    for _ in range(_CORRECTORS):
        if min(ap, ad) >= 1.0:
            break
        tp, td = min(1.0, _STEP_FACTOR * ap + _STEP_ADD), min(1.0, _STEP_FACTOR * ad + _STEP_ADD)
        v = (x + tp * dx) * (s + td * ds)
        t = np.clip(v, _BETA_MIN * mu_target, _BETA_MAX * mu_target) - v
        np.maximum(t, -_BETA_MAX * mu_target, out=t)
        cx, cy, cs = correction(t)
        nx, ny, ns = dx + cx, dy + cy, ds + cs
        nap, nad = longest(x, nx), longest(s, ns)
        if min(nap, nad) < _ACCEPT * min(ap, ad):
            break
        dx, dy, ds, ap, ad = nx, ny, ns, nap, nad
    return dx, dy, ds, ap, ad


def _solve(R: DenseColumns, g: np.ndarray, rhs: np.ndarray, slack_costs: tuple[np.ndarray, np.ndarray] | None,
           tol: float, max_iter: int, mixed: bool, pool: ThreadPoolExecutor | None) -> DenseLPResult:
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
    if not (R.finite() and np.isfinite(g).all() and np.isfinite(rhs).all()
            and np.isfinite(cp).all() and np.isfinite(cm).all()):
        raise ValueError("the LP data must be finite")
    c = np.concatenate([g, cp, cm])
    n_all = c.size

    # every BLAS call goes to scipy's OpenBLAS (numpy may load a second one), on one thread
    # (docs/decisions.md#the-dense-ipm-runs-every-blas-call-on-one-thread-and-its-product-in-halves);
    # R's products and normal equations are BLAS calls on R in place (DenseColumns)

    def A_mul(v: np.ndarray) -> np.ndarray:        # A v for v over [b, sp, sm]
        out = R.mul(v[:n])
        if box:
            out += v[n:n + m] - v[n + m:]
        return out

    def At_mul(y: np.ndarray) -> np.ndarray:       # A' y
        return np.concatenate([R.tmul(y), y, -y]) if box else R.tmul(y)

    F = _NormalEquations(R, box, A_mul, At_mul, mixed, pool)
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

    zero_p, zero_d = np.zeros(m), np.zeros(n_all)      # a corrector's residuals
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

        def direction(rc: np.ndarray, rp: np.ndarray, rd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            # a normal-equations residual e only moves the next primal residual, by e (the
            # dual residual and the complementarity follow from dy exactly): a share of what
            # the stopping test allows it
            dy = F.solve(rp - A_mul(rc / s - d * rd), atol=_RESIDUAL_SHARE * tol * nb)
            ds = rd - At_mul(dy)
            return rc / s - d * ds, dy, ds

        dxa, _, dsa = direction(-x * s, rp, rd)
        ap, ad = longest(x, dxa), longest(s, dsa)
        mu_aff = float((x + ap * dxa) @ (s + ad * dsa)) / n_all
        sigma = (mu_aff / mu) ** 3
        dx, dy, ds = direction(-x * s + sigma * mu - dxa * dsa, rp, rd)
        ap, ad = longest(x, dx), longest(s, ds)
        dx, dy, ds, ap, ad = _centrality_correctors(x, s, dx, dy, ds, ap, ad, sigma * mu,
                                                    lambda t: direction(t, zero_p, zero_d), longest)
        ap, ad = 0.995 * ap, 0.995 * ad
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
