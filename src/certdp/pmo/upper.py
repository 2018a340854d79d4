"""Cheap feasible matrices from approximate ones: the upper-bound heuristics of the PMO
decompositions.

A decomposition's master gives matrices that are *almost* mechanisms: columns in the mDP cone
with rows off 1 by a slack (a stabilised master), or rows that sum to 1 except in a few places
(an elastic master). Dividing rows by their sums and certifying (:func:`certdp.certify.certify`)
always works but breaks ratios and needs a large mixing weight; these repairs cost far less:

* :func:`mdp_envelope`: the largest matrix below the row-normalised input whose columns keep mDP;
* :func:`mdp_lift`: the smallest matrix above the input whose columns keep mDP;
* :func:`rebalance_rows`: the cheapest per-row mix with the uniform mechanism that has rows
  summing to 1 and keeps mDP (an N-variable LP);
* :func:`repair_rows`: new values for the few rows that are off, by an LP in those rows alone.

Each result holds to floating-point rounding or the LP's tolerance; callers pass it to
:func:`certdp.certify.certify` for the exact guarantee.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, dijkstra

from .._validate import BLOCK
from ..audit import checked_mdp_inputs
from ..lp.highs import INF, HighsLP


def _matrix_cost_edges(matrix: np.ndarray, cost: np.ndarray, edges: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The checked inputs of :func:`rebalance_rows` and :func:`repair_rows`: the matrix clipped
    at 0 (a copy), the cost (of the same 2-D shape) and the edges as an (m, 2) array."""
    Z = np.maximum(np.asarray(matrix, dtype=np.float64), 0.0)
    C = np.asarray(cost, dtype=np.float64)
    if Z.ndim != 2 or C.shape != Z.shape:
        raise ValueError(f"matrix and cost must be 2-D of one shape, got {Z.shape} and {C.shape}")
    return Z, C, np.asarray(edges, dtype=np.int64).reshape(-1, 2)


def _worst_violations(violation: Callable[[int, int], np.ndarray], rows: int, k: int, added: np.ndarray,
                      batch: int) -> tuple[np.ndarray, np.ndarray]:
    """The (row, column) positions of the at most ``batch`` largest violations above 1e-12 not
    yet ``added`` (a (rows, k) mask), largest first and ties by position, scanning the rows in
    blocks of :data:`certdp._validate.BLOCK` entries (several such arrays at once over every pair
    would be gigabytes): ``violation(s, e)`` is the (e - s, k) block of rows s to e. Ties are broken by
    position so that the rows chosen, and so the LP's result where it is degenerate, do not
    depend on the block."""
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    step = max(1, BLOCK // max(k, 1))
    values, where = np.empty(0), np.empty(0, dtype=np.int64)
    for s in range(0, rows, step):
        e = min(rows, s + step)
        v = violation(s, e)
        v[added[s:e]] = -1.0
        flat = np.flatnonzero(v > 1e-12)
        if flat.size:
            values, where = np.r_[values, v.flat[flat]], np.r_[where, flat + s * k]
            keep = np.lexsort((where, -values))[:batch]
            values, where = values[keep], where[keep]
    p, q = np.unravel_index(where, (rows, k))
    return p.astype(np.int64), q.astype(np.int64)


def _lower_along_edges(L: np.ndarray, edges: np.ndarray, weight: np.ndarray,
                       source: np.ndarray | None = None) -> np.ndarray:
    """``L`` (log entries, one row per record; changed in place) with each entry lowered to
    ``min_j L[j] + D(i, j)``, D the shortest-path distance over the undirected ``edges`` of
    non-negative ``weight``: the shortest-path closure that :func:`mdp_envelope`,
    :func:`mdp_lift` and :func:`repair_rows` need. +inf entries reach nothing; a -inf entry
    makes its whole connected component -inf. With ``source`` (an integer array of L's shape,
    changed in place), an entry that falls takes the source of the entry it fell to, so each
    entry keeps where its value came from.

    One Dijkstra search per column (scipy's) from a node joined to every record j by an edge of
    length ``L[j] - min L + 1`` (lengths must be non-negative, and scipy reads a length of 0 as
    no edge): on a 2,000-record road network with 100 columns, 0.07-0.1 s where relaxing the
    edges until nothing falls (one vectorised pass per step of the longest shortest path) took
    1.4-1.9 s (docs/decisions.md#shortest-path-closures-by-dijkstra). The values agree with
    the relaxation's to rounding."""
    n, K = L.shape
    if len(edges) == 0:
        return L
    w = np.r_[weight, weight].astype(np.float64)
    w[w == 0] = np.finfo(np.float64).tiny          # a length of 0 is an edge too
    graph = sp.csr_matrix((w, (np.r_[edges[:, 0], edges[:, 1]], np.r_[edges[:, 1], edges[:, 0]])), shape=(n, n))
    _, comp = connected_components(graph, directed=False)
    indptr = np.r_[graph.indptr, graph.indptr[-1]]   # row n, the start node, is filled per column
    rows = np.arange(n)
    for k in range(K):
        col = L[:, k]
        below = np.isneginf(col)
        gone = np.isin(comp, comp[below]) if below.any() else np.zeros(n, dtype=bool)
        start = np.flatnonzero(np.isfinite(col) & ~gone)
        if start.size:
            low = float(col[start].min())
            G = sp.csr_matrix((np.r_[graph.data, col[start] - low + 1.0], np.r_[graph.indices, start],
                               np.r_[indptr[:-1], indptr[-1] + start.size]), shape=(n + 1, n + 1))
            dist, pred = dijkstra(G, directed=True, indices=n, return_predecessors=True)
            value = dist[:n] - 1.0 + low
            fell = value < col
            col[fell] = value[fell]
            if source is not None and fell.any():
                # the entry each path starts from: follow the predecessors up to the start node
                up = np.where((pred[:n] == n) | (pred[:n] < 0), rows, pred[:n])
                while True:
                    nxt = up[up]
                    if np.array_equal(nxt, up):
                        break
                    up = nxt
                source[fell, k] = source[up[fell], k]
        if gone.any():
            if source is not None:
                _, _, origin = dijkstra(graph, directed=True, indices=np.flatnonzero(below), min_only=True,
                                        return_predecessors=True)
                moved = gone & ~below
                source[moved, k] = source[origin[moved], k]
            col[gone] = -np.inf
    return L


def mdp_envelope(matrix: np.ndarray, epsilon: float, edges: np.ndarray, edge_distance: np.ndarray, *,
                 normalise: bool = True) -> np.ndarray:
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
    deficits (docs/decisions.md#the-stabilised-masters-matrix-is-lowered-to-its-mdp-envelope).

    Computed in log space, one shortest-path search per column. The result holds to
    floating-point rounding: pass it on to :func:`certify` for an exact guarantee.
    """
    Y, eps, E, d = checked_mdp_inputs(matrix, epsilon, edges, edge_distance)
    Y = np.maximum(Y, 0.0)
    if normalise:
        r = Y.sum(axis=1)
        Y = Y / np.where(r > 0, r, 1.0)[:, None]
    if len(E) == 0:
        return Y
    with np.errstate(divide="ignore"):
        return np.exp(_lower_along_edges(np.log(Y), E, eps * d))


def mdp_lift(matrix: np.ndarray, epsilon: float, edges: np.ndarray, edge_distance: np.ndarray) -> np.ndarray:
    """The smallest matrix above ``matrix`` (clipped at 0) whose columns satisfy epsilon-mDP on
    ``edges``: ``U[i,k] = max_j Y[j,k] exp(-eps D(i,j))``, D the shortest-path distance over the
    edges (every column of U is in the mDP cone, and any column in the cone above ``Y[:, k]``
    lies above ``U[:, k]``). Rows of U sum to at least the input's.

    The counterpart of :func:`mdp_envelope` for matrices whose small entries matter: where the
    optimum is nearly deterministic (large epsilon x distance), lowering entries removes the
    tails the mDP rows need, while lifting adds exactly those tails. Computed in log space, one
    shortest-path search per column; the result holds to rounding (pass it on to
    :func:`certdp.certify.certify`)."""
    Y, eps, E, d = checked_mdp_inputs(matrix, epsilon, edges, edge_distance)
    Y = np.maximum(Y, 0.0)
    if len(E) == 0:
        return Y
    # raising log entries to max_j (LY_j - w_ij) is lowering their negatives to min_j (-LY_j + w_ij)
    with np.errstate(divide="ignore"):
        return np.exp(-_lower_along_edges(-np.log(Y), E, eps * d))


def rebalance_rows(matrix: np.ndarray, cost: np.ndarray, epsilon: float, edges: np.ndarray,
                   edge_distance: np.ndarray, *, max_rounds: int = 50, batch: int = 5000,
                   cutoff: float | None = None) -> np.ndarray | None:
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

    With ``cutoff`` (a cost, as ``sum(cost * Z2)``), it returns None as soon as the LP's value
    reaches it: every added row only raises that value, so the result could not cost less (a
    caller that only wants a better mechanism than one it has stops after two or three solves
    instead of twenty).
    """
    Z, C, E = _matrix_cost_edges(matrix, cost, edges)
    n, k = Z.shape
    d = np.asarray(edge_distance, dtype=np.float64).reshape(-1)
    r = Z.sum(axis=1)
    if len(E) == 0:
        return Z / np.where(r > 0, r, 1.0)[:, None] + np.where(r > 0, 0.0, 1.0 / k)[:, None]
    I, J = np.r_[E[:, 0], E[:, 1]], np.r_[E[:, 1], E[:, 0]]
    f = np.exp(float(epsilon) * np.r_[d, d])
    centred = Z - r[:, None] / k                 # a_i (Z[i] - r_i / K) - a_j f (Z[j] - r_j / K) <= (f - 1) / K
    ubar = C.mean(axis=1)
    obj = (C * Z).sum(axis=1) - r * ubar        # cost of Z2 = sum_i ubar_i + sum_i a_i obj_i
    upper = np.where(r > 0, 1.0 / np.where(r > 0, r, 1.0), 0.0)
    lp = HighsLP(obj, sp.csr_matrix((0, n)), np.zeros(0), np.zeros(0), np.zeros(n), upper,
                 solver="simplex", tolerance=1e-9, presolve=False)
    added = np.zeros((I.size, k), dtype=bool)
    for _ in range(max_rounds):
        sol = lp.solve()
        if sol.status != "optimal" or sol.x is None:
            return Z
        if cutoff is not None and float(ubar.sum()) + sol.objective >= cutoff:
            return None
        a = np.clip(sol.x, 0.0, upper)

        def violation(s: int, e: int, a: np.ndarray = a) -> np.ndarray:
            i, j, fe = I[s:e], J[s:e], f[s:e, None]
            return centred[i] * a[i, None] - fe * centred[j] * a[j, None] - (fe - 1.0) / k

        p, q = _worst_violations(violation, I.size, k, added, batch)
        if p.size == 0:
            return a[:, None] * Z + (1.0 - a * r)[:, None] / k
        m = len(p)
        rows = sp.csr_matrix((np.r_[centred[I[p], q], -f[p] * centred[J[p], q]],
                              (np.r_[np.arange(m), np.arange(m)], np.r_[I[p], J[p]])), shape=(m, n))
        lp.add_rows(rows, np.full(m, -INF), (f[p] - 1.0) / k)
        added[p, q] = True
    return Z


TIGHT = 1e-8
"""Bounds of :func:`repair_rows` that miss each other by less than this still count as met: the
matrices it repairs keep mDP to their LP solver's tolerance (about 1e-9), and certification
mends the rest."""


def _bounds_of_free_rows(Z: np.ndarray, inB: np.ndarray, ii: np.ndarray, jj: np.ndarray, f: np.ndarray
                         ) -> tuple[np.ndarray, ...]:
    """For the free rows B (mask ``inB``) of :func:`repair_rows`: the bounds ``lo <= x <= hi``
    that mDP with the fixed rows implies, carried along the mDP rows inside B (each x must also
    meet what its neighbours in B allow, or the LP is infeasible), the fixed row each bound comes
    from (-1 for the trivial 0 and 1), and B's inner edges (positions in B) with their factors."""
    n, k = Z.shape
    B = np.flatnonzero(inB)
    pos = np.full(n, -1, dtype=np.int64)
    pos[B] = np.arange(B.size)
    lo, hi = np.zeros((B.size, k)), np.ones((B.size, k))
    lo_from, hi_from = np.full((B.size, k), -1, dtype=np.int64), np.full((B.size, k), -1, dtype=np.int64)
    step = max(1, BLOCK // max(k, 1))
    sides = [(np.flatnonzero(inB[a_] & ~inB[b_]), a_, b_) for a_, b_ in ((ii, jj), (jj, ii))]
    for with_origin in (False, True):   # every bound first, then the fixed row that attains it
        for cross, a_, b_ in sides:     # bounds from the fixed neighbours, in blocks of pairs
            for s in range(0, cross.size, step):
                c = cross[s:s + step]
                p, q, fe = pos[a_[c]], b_[c], f[c][:, None]
                for bound, origin, value, tighten in ((lo, lo_from, Z[q] / fe, np.maximum),
                                                      (hi, hi_from, Z[q] * fe, np.minimum)):
                    if not with_origin:
                        tighten.at(bound, p, value)
                        continue
                    r, col = np.nonzero(value == bound[p])
                    origin[p[r], col] = q[r]
    inner = inB[ii] & inB[jj]
    local = np.c_[pos[ii[inner]], pos[jj[inner]]]
    logf = np.log(f[inner])
    with np.errstate(divide="ignore"):
        hi = np.exp(_lower_along_edges(np.log(hi), local, logf, hi_from))
        lo = np.exp(-_lower_along_edges(-np.log(lo), local, logf, lo_from))
    return lo, hi, lo_from, hi_from, local, f[inner]


def repair_rows(matrix: np.ndarray, cost: np.ndarray, epsilon: float, edges: np.ndarray,
                edge_distance: np.ndarray, *, tol: float = 1e-7, grow: int = 10, max_rows: int | None = None,
                max_lp_rows: int = 50_000, time_limit: float | None = None, batch: int = 20000
                ) -> np.ndarray | None:
    """Give the rows of ``matrix`` whose sums are off 1 by more than ``tol`` new values, by an
    LP in those rows alone, every other row fixed; None if that fails.

    For a matrix whose columns satisfy mDP and whose rows sum to 1 except in a few places (an
    elastic column-generation master's), this is the cheapest mechanism that agrees with it
    outside those rows, B: variables ``x[i,k]`` for i in B, rows ``sum_k x[i,k] = 1``, bounds
    ``Z[j,k] / f <= x[i,k] <= f Z[j,k]`` from every fixed neighbour j, and the mDP rows between
    two rows of B, which are added only when violated (at most ``batch`` per round), as in
    :func:`rebalance_rows`. The bounds are carried along the mDP rows inside B first (implied
    by them), so a row whose range cannot meet its neighbours' is found before the LP would turn
    out infeasible. If a row's bounds cannot hold a sum of 1, the fixed rows its binding bounds
    come from join B (at most ``grow`` times, and at most ``max_rows`` rows, default all;
    docs/decisions.md#the-row-repair-brings-in-only-the-rows-that-bind). It gives up (None) when the LP
    would need more than ``max_lp_rows`` mDP rows, or, if ``time_limit`` is given, after that
    many seconds (then the outcome depends on the machine).
    When no row is off, the input clipped at 0 is returned unchanged. The result holds to the
    LP's tolerance: pass it to :func:`certify`.

    The input's columns should keep mDP to rounding: an LP solver's matrix keeps it only to an
    absolute tolerance, which compounds along paths into bounds that contradict each other;
    :func:`mdp_lift` raises such entries by at most the tolerance first.
    """
    Z, C, E = _matrix_cost_edges(matrix, cost, edges)
    k = Z.shape[1]
    f = np.exp(float(epsilon) * np.asarray(edge_distance, dtype=np.float64).reshape(-1))
    inB = np.abs(Z.sum(axis=1) - 1.0) > tol
    if not inB.any():
        return Z
    deadline = time.perf_counter() + (math.inf if time_limit is None else time_limit)
    ii, jj = E[:, 0], E[:, 1]
    for _ in range(grow + 1):
        B = np.flatnonzero(inB)
        if max_rows is not None and B.size > max_rows:
            return None
        lo, hi, lo_from, hi_from, local, f_local = _bounds_of_free_rows(Z, inB, ii, jj, f)
        # a row is stuck when its range is empty or cannot hold a sum of 1; with a tolerance,
        # since the input keeps mDP only to its solver's (two tight neighbours give lo = hi up
        # to rounding)
        clash = lo > hi + TIGHT
        over, under = lo.sum(axis=1) > 1.0, hi.sum(axis=1) < 1.0
        stuck = clash.any(axis=1) | over | under
        if not stuck.any():
            hi = np.maximum(hi, lo)
            break
        # the fixed rows that set a stuck row's binding bounds join B: those of its lower
        # bounds when they sum past 1, of its upper bounds when they sum short of it, of both
        # where they cross
        need_lo = (over[:, None] & (lo > 0)) | clash
        need_hi = (under[:, None] & (hi < 1)) | clash
        # (every bound above 0 or below 1 has a source, and sources are fixed rows, so each
        # step adds at least one row; -1, the trivial bounds' mark, must not index the last row)
        new = np.r_[lo_from[stuck][need_lo[stuck]], hi_from[stuck][need_hi[stuck]]]
        inB[new[new >= 0]] = True
    else:
        return None
    nb = B.size
    P, Q = np.r_[local[:, 0], local[:, 1]], np.r_[local[:, 1], local[:, 0]]
    F = np.r_[f_local, f_local][:, None]
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
            lp.set_time_limit(left)
        sol = lp.solve()
        if sol.status != "optimal" or sol.x is None:
            return None
        X = sol.x.reshape(nb, k)

        def violation(s: int, e: int, X: np.ndarray = X) -> np.ndarray:
            return X[P[s:e]] - F[s:e] * X[Q[s:e]]

        p, q = _worst_violations(violation, P.size, k, added, batch)
        if p.size == 0:
            break
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
