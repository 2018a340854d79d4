"""Repair of solver output into a matrix that satisfies epsilon-mDP exactly in float64.

LP solutions carry solver tolerances: an entry of 1e-9 next to an entry of 0 is an unbounded
privacy loss. :func:`certify` turns an approximately feasible matrix into one that passes
:func:`scaledp.audit.verify` with no tolerance, at a small cost in loss that it reports.

The repair, and why it is sound
-------------------------------
1. Clip every entry to [0, inf) and divide each row by its sum: ``Z1`` is row-stochastic.
2. Let ``f_e = exp(eps' d_e)`` with ``eps' = eps (1 - 1e-9)`` slightly below the target (a
   margin so that a different ``exp`` implementation in somebody else's audit, off by an ulp,
   cannot flip the verdict). For every pair e = (i, j), direction and output k the violation is
   ``v = Z1[i,k] - f_e Z1[j,k]``.
3. Mix with the uniform mechanism U (every entry 1/K), separately in each connected component
   of the pairs (no constraint links two components, so each may use its own weight): ``Z2 = (1 - lam) Z1 + lam U``. Then
   ``Z2[i,k] - f_e Z2[j,k] = (1 - lam) v - lam (f_e - 1) / K``, which is <= 0 exactly when
   ``lam >= v / (v + (f_e - 1) / K)``. Taking ``lam`` as the largest such value over all pairs,
   directions and outputs (with a safety factor) makes every constraint hold in real
   arithmetic at ``eps'``, hence at ``eps`` with a relative margin of about ``1e-9 eps d``.
   Rows of ``Z2`` still sum to 1 (convex combination of row-stochastic matrices).
4. Check the result with the exact float64 test at ``eps'`` and at ``eps``; if rounding broke
   anything, double ``lam`` and repeat. ``lam = 1`` (the uniform mechanism) always passes,
   since ``exp(x) >= 1`` for ``x >= 0``, so the loop ends, and nothing unverified is returned.

The loss of ``Z2`` is ``(1 - lam) L(Z1) + lam L(U)``, so the price is at most
``lam (L(U) - L(Z1))``; it is reported as ``loss_increase``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..audit import VerifyReport, checked_mdp_inputs, verify
from ..lp.highs import INF, HighsLP

MARGIN = 1e-9


@dataclass(frozen=True)
class CertifyReport:
    """What the repair did.

    Attributes:
        mixing: the largest weight ``lam`` given to the uniform mechanism in any connected
            component (0: no change needed).
        max_violation_before: largest additive violation at eps' before repair.
        clipped_mass: total negative mass clipped away in step 1.
        max_row_error_before: max |row sum - 1| of the input.
        rounds: verification rounds.
        verify: the final exact check (always passed).
    """

    mixing: float
    max_violation_before: float
    clipped_mass: float
    max_row_error_before: float
    rounds: int
    verify: VerifyReport


class CertificationError(RuntimeError):
    """Raised when a matrix cannot be certified (never expected; see :func:`certify`)."""


def _components(n: int, edges: np.ndarray) -> np.ndarray:
    if len(edges) == 0:
        return np.arange(n)
    g = sp.csr_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    return connected_components(g, directed=False)[1]


def _required_mixing(Z: np.ndarray, eps: float, edges: np.ndarray, dist: np.ndarray, comp: np.ndarray,
                     block: int = 2_000_000) -> tuple[np.ndarray, float]:
    """Per connected component, the least mixing weight that removes every violation."""
    k = Z.shape[1]
    lam = np.zeros(int(comp.max()) + 1 if len(comp) else 0)
    vmax = 0.0
    step = max(1, block // max(k, 1))
    for s in range(0, len(edges), step):
        a, b = edges[s:s + step, 0], edges[s:s + step, 1]
        f = np.exp(eps * dist[s:s + step])[:, None]
        w = (f - 1.0) / k
        for X, Y in ((Z[a], Z[b]), (Z[b], Z[a])):
            v = X - f * Y
            pos = v > 0
            if np.any(pos):
                vmax = max(vmax, float(v[pos].max()))
                need = np.zeros(v.shape)
                need[pos] = v[pos] / (v[pos] + np.broadcast_to(w, v.shape)[pos])
                np.maximum.at(lam, comp[a], need.max(axis=1))
    return lam, vmax


def _matrix_cost_edges(matrix: np.ndarray, cost: np.ndarray, edges: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The checked inputs of :func:`rebalance_rows` and :func:`repair_rows`: the matrix clipped
    at 0 (a copy), the cost (of the same 2-D shape) and the edges as an (m, 2) array."""
    Z = np.maximum(np.asarray(matrix, dtype=np.float64), 0.0)
    C = np.asarray(cost, dtype=np.float64)
    if Z.ndim != 2 or C.shape != Z.shape:
        raise ValueError(f"matrix and cost must be 2-D of one shape, got {Z.shape} and {C.shape}")
    return Z, C, np.asarray(edges, dtype=np.int64).reshape(-1, 2)


def mdp_envelope(matrix: np.ndarray, epsilon: float, edges: np.ndarray, edge_distance: np.ndarray, *,
                 normalise: bool = True, max_sweeps: int | None = None) -> np.ndarray:
    """The largest matrix below ``Y`` whose columns satisfy epsilon-mDP on ``edges``, where
    ``Y`` is ``matrix`` clipped at 0 and, with ``normalise``, each row divided by its sum
    (rows summing to 0 stay 0).

    Entry by entry it is ``L[i,k] = min_j Y[j,k] exp(eps D(i,j))`` over the records j of i's
    connected component, D the shortest-path distance over the edges: every column of L is in
    the mDP cone (D obeys the triangle inequality), and any column in the cone that lies below
    ``Y[:, k]`` lies below ``L[:, k]``. Rows of L sum to at most 1 (with ``normalise``).

    For a stabilised column-generation master's matrix (columns in the cone, rows off 1 by the
    slack) this takes the row division's ratio breaks out again by lowering entries, instead of
    mixing whole rows with the uniform mechanism; :func:`rebalance_rows` then fills the rows'
    deficits. On text-500 at round 36 the certified cost fell from 417.9 to 416.2 (in units of
    the largest cost; the lower bound was 410.6); see docs/benders.md, "Session 11".

    Computed in log space by relaxing the directed edges until no entry falls (at most
    ``max_sweeps`` sweeps, default N; each sweep is one vectorised pass over the edges).
    The result holds to floating-point rounding: pass it on to :func:`certify` for an exact
    guarantee.
    """
    Y, eps, E, d = checked_mdp_inputs(matrix, epsilon, edges, edge_distance)
    Y = np.maximum(Y, 0.0)
    n = Y.shape[0]
    if normalise:
        r = Y.sum(axis=1)
        Y = Y / np.where(r > 0, r, 1.0)[:, None]
    if len(E) == 0:
        return Y
    src, dst = np.r_[E[:, 0], E[:, 1]], np.r_[E[:, 1], E[:, 0]]
    w = (eps * np.r_[d, d])[:, None]
    order = np.argsort(dst, kind="stable")
    src, dst, w = src[order], dst[order], w[order]
    targets, starts = np.unique(dst, return_index=True)
    with np.errstate(divide="ignore"):
        LY = np.log(Y)                               # 0 -> -inf, which stays -inf under + w
    for _ in range(n if max_sweeps is None else int(max_sweeps)):
        best = np.minimum.reduceat(LY[src] + w, starts, axis=0)
        lower = best < LY[targets]
        if not lower.any():
            break
        LY[targets] = np.where(lower, best, LY[targets])
    return np.exp(LY)


def rebalance_rows(matrix: np.ndarray, cost: np.ndarray, epsilon: float, edges: np.ndarray,
                   edge_distance: np.ndarray, *, max_rounds: int = 50, batch: int = 5000) -> np.ndarray:
    """The cheapest per-row mix of ``matrix`` with the uniform mechanism that has rows summing to
    1 and keeps epsilon-mDP: ``Z2[i] = a_i Z[i] + (1 - a_i r_i) / K`` with ``r_i`` the row sums
    of ``Z`` (clipped at 0) and ``0 <= a_i <= 1 / r_i``.

    For a matrix whose columns satisfy mDP but whose rows do not sum to 1 (a stabilised
    column-generation master's), this is far cheaper than :func:`certify`'s row division,
    which breaks ratios by ``r_j / r_i`` and needs one large mixing weight to mend them.

    The mDP rows ``Z2[i,k] <= exp(eps d) Z2[j,k]`` are linear in ``a`` (two variables each), so
    this is an LP with N variables and 2 K rows per pair; it is solved by HiGHS, adding only
    the violated rows (at most ``batch`` per round) until none is. ``a = 0`` (the uniform
    mechanism) is always feasible. The result holds to the LP's tolerance; pass it to
    :func:`certify` for an exact guarantee. If HiGHS fails, the clipped input is returned.
    """
    Z, C, E = _matrix_cost_edges(matrix, cost, edges)
    n, k = Z.shape
    d = np.asarray(edge_distance, dtype=np.float64).reshape(-1)
    r = Z.sum(axis=1)
    if len(E) == 0:
        return Z / np.where(r > 0, r, 1.0)[:, None] + np.where(r > 0, 0.0, 1.0 / k)[:, None]
    I, J = np.r_[E[:, 0], E[:, 1]], np.r_[E[:, 1], E[:, 0]]
    f = np.exp(float(epsilon) * np.r_[d, d])[:, None]
    A_i = Z[I] - r[I, None] / k                  # a_i A_i - a_j f (Z[j] - r_j / K) <= (f - 1) / K
    A_j = -f * (Z[J] - r[J, None] / k)
    rhs = np.broadcast_to((f - 1.0) / k, A_i.shape)
    ubar = C.mean(axis=1)
    obj = (C * Z).sum(axis=1) - r * ubar        # cost of Z2 = sum_i ubar_i + sum_i a_i obj_i
    upper = np.where(r > 0, 1.0 / np.where(r > 0, r, 1.0), 0.0)
    lp = HighsLP(obj, sp.csr_matrix((0, n)), np.zeros(0), np.zeros(0), np.zeros(n), upper,
                 solver="simplex", tolerance=1e-9, presolve=False)
    added = np.zeros(A_i.shape, dtype=bool)
    for _ in range(max_rounds):
        sol = lp.solve()
        if sol.status != "optimal" or sol.x is None:
            return Z
        a = np.clip(sol.x, 0.0, upper)
        v = A_i * a[I, None] + A_j * a[J, None] - rhs
        v[added] = -1.0
        bad = np.flatnonzero(v > 1e-12)
        if bad.size == 0:
            return a[:, None] * Z + (1.0 - a * r)[:, None] / k
        bad = bad[np.argsort(-v.flat[bad])[:batch]]
        p, q = np.unravel_index(bad, v.shape)
        m = len(p)
        rows = sp.csr_matrix((np.r_[A_i[p, q], A_j[p, q]], (np.r_[np.arange(m), np.arange(m)], np.r_[I[p], J[p]])),
                             shape=(m, n))
        lp.add_rows(rows, np.full(m, -INF), rhs[p, q])
        added[p, q] = True
    return Z


def repair_rows(matrix: np.ndarray, cost: np.ndarray, epsilon: float, edges: np.ndarray,
                edge_distance: np.ndarray, *, tol: float = 1e-7, grow: int = 3, max_rows: int = 400,
                max_lp_rows: int = 50_000, time_limit: float | None = None, batch: int = 20000
                ) -> np.ndarray | None:
    """Give the rows of ``matrix`` whose sums are off 1 by more than ``tol`` new values, by an
    LP in those rows alone, every other row fixed; None if that fails.

    For a matrix whose columns satisfy mDP and whose rows sum to 1 except in a few places (an
    elastic column-generation master's), this is the cheapest mechanism that agrees with it
    outside those rows, B: variables ``x[i,k]`` for i in B, rows ``sum_k x[i,k] = 1``, bounds
    ``Z[j,k] / f <= x[i,k] <= f Z[j,k]`` from every fixed neighbour j, and the mDP rows between
    two rows of B, which are added only when violated (at most ``batch`` per round), as in
    :func:`rebalance_rows`. If a row's bounds cannot hold a sum of 1, its neighbours join B
    (at most ``grow`` times, and at most ``max_rows`` rows). It gives up (None) when the LP
    would need more than ``max_lp_rows`` mDP rows (road-1000 at round 11 needed 176,000 for 168
    rows in a dense cluster, and 110 s; gauss-1000 at most 22,000, in 0.7 s), or, if
    ``time_limit`` is given, after that many seconds (then the outcome depends on the machine).
    When no row is off, the input clipped at 0 is returned unchanged. The result holds to the
    LP's tolerance: pass it to :func:`certify`.
    """
    Z, C, E = _matrix_cost_edges(matrix, cost, edges)
    n, k = Z.shape
    f = np.exp(float(epsilon) * np.asarray(edge_distance, dtype=np.float64).reshape(-1))
    inB = np.abs(Z.sum(axis=1) - 1.0) > tol
    if not inB.any():
        return Z
    deadline = time.perf_counter() + (math.inf if time_limit is None else time_limit)
    ii, jj = E[:, 0], E[:, 1]
    for _ in range(grow + 1):
        B = np.flatnonzero(inB)
        if B.size > max_rows:
            return None
        pos = np.full(n, -1, dtype=np.int64)
        pos[B] = np.arange(B.size)
        lo, hi = np.zeros((B.size, k)), np.ones((B.size, k))
        for a_, b_ in ((ii, jj), (jj, ii)):       # bounds from the fixed neighbours
            cross = inB[a_] & ~inB[b_]
            p, q, fe = pos[a_[cross]], b_[cross], f[cross][:, None]
            np.maximum.at(lo, p, Z[q] / fe)
            np.minimum.at(hi, p, Z[q] * fe)
        # (a tolerance: two tight neighbours give lo = hi up to rounding)
        stuck = np.any(lo > hi + 1e-12, axis=1) | (lo.sum(axis=1) > 1.0) | (hi.sum(axis=1) < 1.0)
        if not stuck.any():
            hi = np.maximum(hi, lo)
            break
        stuck_row = np.zeros(n, dtype=bool)
        stuck_row[B[stuck]] = True
        inB[jj[stuck_row[ii]]] = True             # the neighbours of those rows join B
        inB[ii[stuck_row[jj]]] = True
    else:
        return None
    nb = B.size
    both = inB[ii] & inB[jj]
    P, Q = np.r_[pos[ii[both]], pos[jj[both]]], np.r_[pos[jj[both]], pos[ii[both]]]
    F = np.r_[f[both], f[both]][:, None]
    sums = sp.csr_matrix((np.ones(nb * k), (np.repeat(np.arange(nb), k), np.arange(nb * k))), shape=(nb, nb * k))
    lp = HighsLP(C[B].ravel(), sums, np.ones(nb), np.ones(nb), lo.ravel(), hi.ravel(), solver="simplex",
                 tolerance=1e-9, presolve=False)
    added = np.zeros((P.size, k), dtype=bool)
    n_added = 0
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return None
        if math.isfinite(left):
            lp.set_option("time_limit", left)
        sol = lp.solve()
        if sol.status != "optimal" or sol.x is None:
            return None
        X = sol.x.reshape(nb, k)
        v = X[P] - F * X[Q]
        v[added] = -1.0
        bad = np.flatnonzero(v > 1e-12)
        if bad.size == 0:
            break
        bad = bad[np.argsort(-v.flat[bad])[:batch]]
        p, q = np.unravel_index(bad, v.shape)
        added[p, q] = True
        m = p.size
        n_added += m
        if n_added > max_lp_rows:
            return None
        rows = sp.csr_matrix((np.r_[np.ones(m), -F[p, 0]], (np.r_[np.arange(m), np.arange(m)], np.r_[P[p] * k + q, Q[p] * k + q])),
                             shape=(m, nb * k))
        lp.add_rows(rows, np.full(m, -INF), np.zeros(m))
    Z[B] = np.maximum(X, 0.0)
    return Z


def certify(matrix: np.ndarray, epsilon: float, edges: np.ndarray, edge_distance: np.ndarray,
            *, max_rounds: int = 60) -> tuple[np.ndarray, CertifyReport]:
    """Return a copy of ``matrix`` repaired to satisfy exact epsilon-mDP on ``edges`` (both
    directions, every output) with rows summing to 1, and a report of the cost.

    See the module docstring for the algorithm and its proof.
    """
    Z = np.array(matrix, dtype=np.float64, copy=True)
    if Z.ndim != 2 or Z.shape[1] < 1:
        raise ValueError(f"matrix must be 2-D with at least one output, got shape {Z.shape}")
    if not np.all(np.isfinite(Z)):
        raise ValueError("matrix contains NaN or inf entries; it cannot be certified")
    E = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    d = np.asarray(edge_distance, dtype=np.float64).reshape(-1)
    row_err = float(np.max(np.abs(Z.sum(axis=1) - 1.0)))
    clipped = float(-Z[Z < 0].sum())
    np.maximum(Z, 0.0, out=Z)
    sums = Z.sum(axis=1, keepdims=True)
    empty = sums[:, 0] <= 0
    if np.any(empty):
        Z[empty] = 1.0 / Z.shape[1]
        sums[empty] = 1.0
    Z /= sums
    eps_c = float(epsilon) * (1.0 - MARGIN)
    comp = _components(Z.shape[0], E)
    lam, vmax = _required_mixing(Z, eps_c, E, d, comp)
    k = Z.shape[1]
    lam = np.minimum(1.0, lam * (1.0 + 1e-6) + np.where(lam > 0, 1e-15, 0.0))
    rounds = 0
    while True:
        rounds += 1
        lr = lam[comp][:, None]
        Z2 = np.where(lr > 0, (1.0 - lr) * Z + lr / k, Z)
        Z2[lam[comp] >= 1.0] = 1.0 / k
        inner = verify(Z2, eps_c, E, d)
        rep = verify(Z2, epsilon, E, d) if inner.passed else inner
        if inner.passed and rep.passed:
            return Z2, CertifyReport(mixing=float(lam.max(initial=0.0)), max_violation_before=vmax,
                                     clipped_mass=clipped, max_row_error_before=row_err, rounds=rounds, verify=rep)
        if np.all(lam >= 1.0) or rounds >= max_rounds:
            raise CertificationError(f"could not certify the matrix (last check: {rep})")
        lam = np.minimum(1.0, np.maximum(2.0 * lam, 1e-12))
