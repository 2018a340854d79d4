"""Workload-adaptive measurement strategies: HDMM and DAWA, written here from their papers (no
installable package exists for Python 3.11). Both materialise the domain, as Identity does.

* **HDMM** (McKenna, Miklau, Hay and Machanavajjhala, PVLDB 2018), its Kronecker strategy
  OPT_x: one p-Identity strategy ``A_i = [I; Theta_i] D_i^-1`` per axis (``p_i = ceil(n_i /
  16)`` extra rows, columns scaled to L1 norm 1, so the Kronecker product has sensitivity 1),
  chosen to minimise the expected total squared error ``sum_S prod_i tr[(A_i^T A_i)^-1
  G_i^S]`` of the workload, by block coordinate descent over the axes (each step an L-BFGS-B
  solve in Theta_i >= 0 with the analytic gradient). The workload is the one the comparisons
  ask: range queries over ``query_columns`` axes, every such set of axes equally likely, each
  range uniform among all ranges (Gram ``G_ab = (min(a, b) + 1)(n - max(a, b))`` divided by the
  number of ranges), the other axes summed out (Gram ``1 1^T``). Then ``y = A x +
  Laplace(1 / eps)`` and ``x_hat = (A_1^+ x ... x A_d^+) y``, applied axis by axis.
* **DAWA** (Li, Hay, Miklau and Wang, PVLDB 2014) on the tensor flattened in row-major order.
  Stage 1 (``ratio`` = 0.25 of eps): a private partition into buckets, minimising the sum of
  each bucket's L1 deviation from its mean plus ``1 / eps_2``; this version considers the
  aligned dyadic intervals (lengths 2^k starting at multiples of 2^k), where one cell lies in
  one interval per level, so the vector of all deviations has L1 sensitivity ``2 (levels)``
  and gets Laplace(2 levels / eps_1); the least-cost partition is then an exact tree
  dynamic program (keep a node or split it). Stage 2 (eps_2): the bucket totals measured by a
  binary hierarchy over the buckets with per-level shares of eps_2 chosen to minimise the
  expected error of all range queries over the buckets (GreedyH chooses per node; per level is
  its coarser form), weighted least squares, and every bucket's total spread uniformly over
  its cells.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import scipy.optimize
import scipy.sparse
import scipy.sparse.linalg

from .. import _validate as V
from ..randomness import RNGLike, as_generator
from .budget import PrivacyBudget
from .competitors import MAX_IDENTITY_CELLS, dense_counts
from .noise import KroneckerLaplace
from .ripost import ledger_totals
from .sampling import add_laplace
from .tensor import CountTensor
from .view import DenseView

#: DAWA's least squares over its hierarchy grows with the number of buckets, which the partition
#: at small epsilon keeps near the number of cells: 10^7 cells take minutes, so it stops here.
MAX_DAWA_CELLS = 2_000_000


def range_gram(n: int) -> np.ndarray:
    """``W^T W / |W|`` for W all ``n (n + 1) / 2`` ranges of a line of ``n`` cells."""
    i = np.arange(n)
    return (np.minimum.outer(i, i) + 1.0) * (n - np.maximum.outer(i, i)) / (n * (n + 1) / 2.0)


# --- HDMM -------------------------------------------------------------------------------


def _pidentity_loss(theta_flat: np.ndarray, p: int, n: int, gram: np.ndarray) -> tuple[float, np.ndarray]:
    """``tr[(A^T A)^-1 G]`` for ``A = [I; Theta] D^-1`` and its gradient in Theta."""
    th = theta_flat.reshape(p, n)
    dvec = 1.0 + th.sum(axis=0)
    M = np.linalg.inv(np.eye(n) + th.T @ th)
    H = dvec[:, None] * gram * dvec[None, :]
    loss = float(dvec @ (M * gram) @ dvec)
    grad = -2.0 * th @ (M @ H @ M) + 2.0 * ((M * gram) @ dvec)[None, :]
    return loss, grad.ravel()


def _pidentity(gram: np.ndarray, p: int, seed: int) -> np.ndarray:
    """The p-Identity strategy (rows ``n + p``) minimising ``tr[(A^T A)^-1 G]``."""
    n = gram.shape[0]
    if p == 0:
        return np.eye(n)
    x0 = np.random.default_rng(seed).random(p * n)
    res = scipy.optimize.minimize(_pidentity_loss, x0, args=(p, n, gram), jac=True, method="L-BFGS-B",
                                  bounds=[(0, None)] * (p * n), options={"maxiter": 500})
    th = res.x.reshape(p, n)
    return np.vstack([np.eye(n), th]) / (1.0 + th.sum(axis=0))[None, :]


def _error(A: np.ndarray, gram: np.ndarray) -> float:
    return float(np.trace(np.linalg.solve(A.T @ A, gram)))


@functools.lru_cache(maxsize=64)
def hdmm_strategy(shape: tuple[int, ...], query_columns: int, sweeps: int = 2) -> tuple[np.ndarray, ...]:
    """Per-axis p-Identity factors for the union of range workloads (see the module docstring),
    by block coordinate descent; depends on the public shape only, so it is cached."""
    d = len(shape)
    q = min(query_columns, d)
    subsets = list(itertools.combinations(range(d), q))
    grams = [(range_gram(n), np.ones((n, n))) for n in shape]     # (ranged, summed out) per axis
    A = [np.eye(n) for n in shape]
    for sweep in range(sweeps):
        for i, n in enumerate(shape):
            err = [(_error(A[j], grams[j][0]), _error(A[j], grams[j][1])) for j in range(d)]
            g = np.zeros((n, n))
            for S in subsets:
                c = math.prod(err[j][0 if j in S else 1] for j in range(d) if j != i)
                g += c * grams[i][0 if i in S else 1]
            A[i] = _pidentity(g / len(subsets), math.ceil(n / 16) if n > 2 else 0, seed=sweep * d + i)
    return tuple(A)


def _kron_apply(mats: list[np.ndarray], y: np.ndarray) -> np.ndarray:
    """``(M_1 x ... x M_d) y`` for ``y`` shaped by the factors' columns, axis by axis."""
    for i, m in enumerate(mats):
        y = np.moveaxis(np.tensordot(m, y, axes=([1], [i])), 0, i)
    return y


def hdmm(tensor: CountTensor, epsilon: float = 0.1, query_columns: int = 2, max_cells: int = MAX_IDENTITY_CELLS,
         rng: RNGLike = None) -> DenseView:
    """HDMM's Kronecker strategy for range queries over ``query_columns`` axes (module docstring)."""
    eps = V.positive_float("epsilon", epsilon)
    q = V.int_in_range("query_columns", query_columns, 1)
    x = dense_counts(tensor, "HDMM", V.int_in_range("max_cells", max_cells, 1))
    A = hdmm_strategy(tuple(int(n) for n in tensor.shape), q)
    gen = None if rng is None else as_generator(rng)
    budget = PrivacyBudget(eps)
    budget.root.charge(eps, "hdmm: A x (every column of A has L1 norm 1)")
    y = add_laplace(_kron_apply(list(A), x), 1.0 / eps, gen)
    noise = KroneckerLaplace(1.0 / eps, A)           # its factors, the A_i^+, are the read-back
    return DenseView(tensor.domains, _kron_apply(list(noise.factors), y), "hdmm", eps, float(budget.spent()),
                     {"query_columns": q, "extra_rows": [int(a.shape[0] - a.shape[1]) for a in A]},
                     ledger_totals(budget), noise=noise)


# --- DAWA -------------------------------------------------------------------------------


def _dyadic_deviations(x: np.ndarray) -> list[np.ndarray]:
    """Per level k, the L1 deviation from the mean of every aligned interval of length 2^k
    (the line padded with zeros to a power of two)."""
    size = 1 << max(0, math.ceil(math.log2(max(x.size, 1))))
    xp = np.zeros(size)
    xp[:x.size] = x
    out, k = [], 0
    while (1 << k) <= size:
        blocks = xp.reshape(-1, 1 << k)
        out.append(np.abs(blocks - blocks.mean(axis=1, keepdims=True)).sum(axis=1))
        k += 1
    return out


def _best_partition(costs: list[np.ndarray], n: int) -> np.ndarray:
    """The least-cost partition of ``[0, n)`` into aligned dyadic intervals (keep or split every
    node, bottom-up), as the sorted start of every bucket; intervals wholly past ``n`` are
    padding and dropped, the last one is clipped to ``n``."""
    best = costs[0].copy()
    keep = [np.ones(best.size, dtype=bool)]
    for k in range(1, len(costs)):
        split = best[0::2] + best[1::2]
        here = costs[k] <= split
        best = np.where(here, costs[k], split)
        keep.append(here)
    starts, active = [], np.zeros(1, dtype=np.int64)           # node indices on level k
    for k in range(len(costs) - 1, -1, -1):
        active = active[(active << k) < n]
        done = keep[k][active] if k > 0 else np.ones(active.size, dtype=bool)
        starts.append(active[done] << k)
        active = np.stack([2 * active[~done], 2 * active[~done] + 1], axis=1).ravel()
    return np.sort(np.concatenate(starts))


def _tree(m: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """A binary hierarchy over ``m`` leaves: per level (root first) its nodes' leaf ranges
    ``[start, stop)`` as two arrays; a node of one leaf is repeated on the deeper levels."""
    a, b = np.zeros(1, dtype=np.int64), np.full(1, m, dtype=np.int64)
    levels = [(a, b)]
    while (b - a > 1).any():
        big = b - a > 1
        mid = np.where(big, (a + b + 1) // 2, b)
        a2 = np.stack([a, np.where(big, mid, -1)], axis=1).ravel()
        b2 = np.stack([mid, np.where(big, b, -1)], axis=1).ravel()
        keep = a2 >= 0
        a, b = a2[keep], b2[keep]
        levels.append((a, b))
    return levels


def _tree_matrix(levels: list[tuple[np.ndarray, np.ndarray]], m: int, w: np.ndarray) -> scipy.sparse.csr_matrix:
    """Rows: every node of every level, ``w[level]`` on the leaves it covers."""
    leaves = np.arange(m)
    rows, vals, off = [], [], 0
    for lv, (a, _) in enumerate(levels):
        rows.append(off + np.searchsorted(a, leaves, side="right") - 1)
        vals.append(np.full(m, w[lv]))
        off += a.size
    return scipy.sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.tile(leaves, len(levels)))),
                                   shape=(off, m))


@functools.lru_cache(maxsize=64)
def level_weights(depth: int, proxy_depth: int = 9) -> tuple[float, ...]:
    """Shares of the budget per level of a binary hierarchy of ``depth`` levels (summing to 1)
    that minimise the expected squared error of all range queries over its leaves; found on a
    full tree of at most ``proxy_depth`` levels (256 leaves), deeper levels taking the proxy's
    deepest share (the optimum depends on the depth, not on the exact number of leaves)."""
    if depth == 1:
        return (1.0,)
    dp = min(depth, proxy_depth)
    mp = 1 << (dp - 1)
    levels = _tree(mp)
    gram = range_gram(mp)

    def loss(z):
        return _error(_tree_matrix(levels, mp, z / z.sum()).toarray(), gram)

    z = scipy.optimize.minimize(loss, np.ones(dp), method="L-BFGS-B", bounds=[(1e-3, 1.0)] * dp).x
    w = z / z.sum()
    if dp < depth:
        w = np.concatenate([w, np.full(depth - dp, w[-1])])
        w = w / w.sum()
    return tuple(float(v) for v in w)


def dawa(tensor: CountTensor, epsilon: float = 0.1, ratio: float = 0.25, max_cells: int = MAX_DAWA_CELLS,
         rng: RNGLike = None) -> DenseView:
    """DAWA on the row-major flattening of the tensor (module docstring)."""
    eps = V.positive_float("epsilon", epsilon)
    ratio = V.open_unit("ratio", ratio)
    x = dense_counts(tensor, "DAWA", V.int_in_range("max_cells", max_cells, 1)).ravel()
    gen = None if rng is None else as_generator(rng)
    budget = PrivacyBudget(eps)
    e1, e2 = ratio * eps, (1.0 - ratio) * eps
    devs = _dyadic_deviations(x)
    budget.root.charge(e1, "dawa: partition (noisy deviations, one interval per level per cell)")
    flat = add_laplace(np.concatenate(devs), 2.0 * len(devs) / e1, gen)
    noisy, at = [], 0
    for dv in devs:
        noisy.append(flat[at:at + dv.size] + 1.0 / e2)
        at += dv.size
    starts = _best_partition(noisy, x.size)
    m = starts.size
    totals = np.add.reduceat(x, starts)
    levels = _tree(m)
    depth = len(levels)
    w = np.asarray(level_weights(depth)) * e2
    w[-1] = budget.root.remaining() - float(w[:-1].sum())    # the deepest level takes the exact rest
    meas = []
    cum = np.concatenate([[0.0], np.cumsum(totals)])
    for lv, (a, b) in enumerate(levels):
        e_lv = budget.root.remaining() if lv == depth - 1 else w[lv]
        budget.root.charge(e_lv, f"dawa: hierarchy level {lv} (disjoint nodes)")
        w[lv] = e_lv
        node_tot = cum[b] - cum[a]
        meas.append(add_laplace(node_tot, 1.0 / e_lv, gen) * e_lv)
    B = _tree_matrix(levels, m, w)          # rows scaled by the level's epsilon: equal noise variance
    est = scipy.sparse.linalg.lsqr(B, np.concatenate(meas), atol=1e-12, btol=1e-12)[0]
    sizes = np.diff(np.append(starts, x.size))
    out = np.repeat(est / sizes, sizes)
    return DenseView(tensor.domains, out.reshape(tensor.shape), "dawa", eps, float(budget.spent()),
                     {"ratio": ratio, "buckets": m, "level_epsilon": [float(v) for v in w]}, ledger_totals(budget))
