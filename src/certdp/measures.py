"""Privacy and utility measures: the losses of a mechanism (expected, worst case, L_q, uniform;
paper 000 Eq. 4 and paper 002 Eq. 1, 3, 11), epsilon_tight (paper 002, Eq. 9-10) and the
packing lower bound on the worst-case loss of every epsilon-mDP mechanism (paper 002, Theorem 3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _validate as V
from .graph import MDPGraph
from .space import Space


# ---------------------------------------------------------------------- losses
def per_record_loss(matrix: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """L(M, w) = sum_k c[w, k] M[w, k] for every record w (paper 002, Eq. 3)."""
    return np.einsum("ik,ik->i", V.real_array("matrix", matrix), V.real_array("cost", cost))


def expected_loss(matrix: np.ndarray, cost: np.ndarray, prior: np.ndarray) -> float:
    """sum_i p[i] sum_k c[i, k] Z[i, k] (paper 000, Eq. 4)."""
    return float(np.dot(V.real_array("prior", prior), per_record_loss(matrix, cost)))


def worst_case_loss(matrix: np.ndarray, cost: np.ndarray) -> float:
    """max_w L(M, w) (paper 002, Eq. 1)."""
    return float(np.max(per_record_loss(matrix, cost)))


def quantile_loss(matrix: np.ndarray, cost: np.ndarray, q: float = 0.95) -> float:
    """L_q(M) = quantile_q {L(M, w)} (paper 002, Eq. 11)."""
    q = V.open_unit("q", q, upper_closed=True)
    return float(np.quantile(per_record_loss(matrix, cost), q))


def uniform_loss(cost: np.ndarray, prior: np.ndarray | None = None) -> float:
    """Expected loss of reporting an output uniformly at random (ignoring the record)."""
    c = V.real_array("cost", cost)
    per = c.mean(axis=1)
    if prior is None:
        return float(per.mean())
    return float(np.dot(V.real_array("prior", prior), per))



# ------------------------------------------------------------------ epsilon_tight
def _pair_tight(Mu: np.ndarray, Mv: np.ndarray, delta: float) -> np.ndarray:
    """For each row pair (u, v), the least t >= 0 with sum_w max(0, Mu_w - t Mv_w) <= delta
    (inf when no finite t works). Exact: g(t) is convex, piecewise linear and non-increasing,
    with breakpoints at the ratios Mu_w / Mv_w."""
    P, K = Mu.shape
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(Mv > 0, Mu / Mv, np.where(Mu > 0, np.inf, 0.0))
    order = np.argsort(-ratio, axis=1, kind="stable")
    rs = np.take_along_axis(ratio, order, axis=1)
    a = np.cumsum(np.take_along_axis(Mu, order, axis=1), axis=1)     # sum of Mu over the top j+1
    b = np.cumsum(np.take_along_axis(Mv, order, axis=1), axis=1)
    # g at t = rs[j] (set = top j entries, strictly larger ratios; ties contribute 0 at t = rs[j])
    a0 = np.concatenate([np.zeros((P, 1)), a[:, :-1]], axis=1)
    b0 = np.concatenate([np.zeros((P, 1)), b[:, :-1]], axis=1)
    with np.errstate(invalid="ignore"):
        g = np.where(np.isinf(rs), np.inf, a0 - rs * b0)
    g = np.where(np.isnan(g), np.inf, g)
    # g(rs[j]) is non-decreasing in j (t decreasing). Find the last j with g(rs[j]) <= delta:
    ok = g <= delta
    any_ok = ok.any(axis=1)
    # last breakpoint j with g(rs[j]) <= delta; then t* lies in [rs[j+1], rs[j]], where
    # g(t) = a[j] - t b[j] (the top j+1 entries have ratio above t); for j = K-1 the segment
    # is [0, rs[K-1]]. No such j: the mass at infinite ratios exceeds delta, t* = inf.
    j = np.where(any_ok, K - 1 - np.argmax(ok[:, ::-1], axis=1), 0)
    rows = np.arange(P)
    A_ = a[rows, j]
    B_ = b[rows, j]
    hi = rs[rows, j]
    lo = np.where(j + 1 < K, rs[rows, np.minimum(j + 1, K - 1)], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        tt = np.where(B_ > 0, (A_ - delta) / B_, -np.inf)
    t = np.minimum(hi, np.maximum(np.maximum(lo, tt), 0.0))
    return np.where(any_ok, t, np.inf)


def epsilon_tight(matrix: np.ndarray, distance: np.ndarray, delta: float = 1e-3, *,
                  pairs: np.ndarray | None = None, chunk: int = 4096) -> float:
    """The least epsilon such that the mechanism is (epsilon, delta)-mDP (paper 002, Eq. 9-10):
    for every ordered pair (u, v) and set S, Pr[M(u) in S] <= exp(eps d(u,v)) Pr[M(v) in S] + delta.

    For a pair the worst S is {w : M_uw > t M_vw}, so the pair needs the least t with
    ``sum_w max(0, M_uw - t M_vw) <= delta``; that t is found exactly (sorting the ratios), and
    epsilon_tight is the largest ln(t) / d(u, v) over pairs. Pairs are screened first against
    the running maximum (one vectorised pass, chunked), and only those that could raise it
    are solved exactly.

    Args:
        matrix: (N, K) row-stochastic matrix.
        distance: (N, N) distances between records.
        delta: in (0, 1).
        pairs: optional (P, 2) unordered pairs to check (default: every pair).
    """
    delta = V.open_unit("delta", delta)
    Z = V.real_array("matrix", matrix, ndim=2)
    D = V.real_array("distance", distance)
    N = Z.shape[0]
    if D.shape != (N, N):
        raise ValueError(f"distance must be ({N}, {N}), got {D.shape}")
    if pairs is None:
        iu, ju = np.triu_indices(N, 1)
    else:
        pr = V.int_array("pairs", pairs).reshape(-1, 2)
        iu, ju = pr[:, 0], pr[:, 1]
    u = np.concatenate([iu, ju])
    v = np.concatenate([ju, iu])
    d = D[u, v]
    if np.any(d <= 0):
        raise ValueError("epsilon_tight needs distinct records (a pair at distance 0)")
    # order pairs by a cheap proxy (short pairs first) so the running maximum grows fast
    order = np.argsort(d, kind="stable")
    u, v, d = u[order], v[order], d[order]
    best = 0.0
    for s in range(0, len(u), chunk):
        uu, vv, dd = u[s:s + chunk], v[s:s + chunk], d[s:s + chunk]
        t_cur = np.exp(best * dd)
        g = np.maximum(Z[uu] - t_cur[:, None] * Z[vv], 0.0).sum(axis=1)
        need = g > delta
        if not np.any(need):
            continue
        t = _pair_tight(Z[uu[need]], Z[vv[need]], delta)
        with np.errstate(divide="ignore"):
            e = np.log(np.maximum(t, 1.0)) / dd[need]
        best = max(best, float(np.max(e)))
        if math.isinf(best):
            return best
    return best


# ------------------------------------------------------------------ lower bound
@dataclass(frozen=True)
class PackingBound:
    """The best Theorem 3 bound over the k-center packings, and where it was attained."""

    bound: float
    k: int
    radius: float
    centers: np.ndarray
    per_k: np.ndarray   # bound for k = 1..N


def packing_lower_bound(space: Space, epsilon: float | None = None, *, start: int = 0) -> PackingBound:
    """Lower bound on the worst-case loss max_w L(M, w) of *every* epsilon-mDP mechanism
    (paper 002, Theorem 3), maximised over the packings of a k-center (farthest point) sequence.

    For centres S and output sets B_s = {outputs o : c[s, o] <= r} that are pairwise disjoint,
    every epsilon-mDP mechanism with worst-case loss L has Pr[M(s) in B_s] >= 1 - L / r (an
    output outside B_s costs more than r), and for any record w,
    ``1 >= sum_s Pr[M(w) in B_s] >= N(w, S) (1 - L / r)`` with
    ``N(w, S) = sum_s exp(-epsilon d_G(w, s))``, so ``L >= r (1 - 1 / N(w, S))``. Here d_G is
    the path distance of the mDP graph (the metric itself when eta is infinite, as in the paper),
    since the guarantee composes along paths. The largest r keeping the B_s disjoint is
    ``min over centre pairs of min_o max(c[s, o], c[s', o])`` (the bound is continuous in r,
    so its supremum over r below that value is attained at it). With c = d and outputs = records
    this is exactly the paper's (c, r, Q)-packing bound (7), maximised over w.
    """
    eps = space.epsilon if epsilon is None else V.positive_float("epsilon", epsilon)
    N = space.n_records
    C = space.cost
    Drec = space.distance_rows()
    DG = Drec if math.isinf(space.eta) else MDPGraph.from_space(space).path_distances()
    start = V.int_in_range("start", start, 0, N - 1)
    centers = [start]
    mind = Drec[start].copy()
    radius = np.inf
    best = (0.0, 1, 0.0)
    per_k = np.zeros(N)
    Nsum = np.exp(-eps * DG[:, start])
    for k in range(2, N + 1):
        nxt = int(np.argmax(mind))
        if mind[nxt] <= 0:
            break
        # disjointness radius between the new centre and every earlier one
        sep = np.maximum(C[centers], C[nxt][None, :]).min(axis=1)
        radius = min(radius, float(sep.min()))
        centers.append(nxt)
        mind = np.minimum(mind, Drec[nxt])
        Nsum = Nsum + np.exp(-eps * DG[:, nxt])
        b = radius * (1.0 - 1.0 / float(Nsum.max()))
        per_k[k - 1] = b
        if b > best[0]:
            best = (b, k, radius)
    return PackingBound(bound=best[0], k=best[1], radius=best[2], centers=np.asarray(centers[:best[1]]),
                        per_k=per_k)
