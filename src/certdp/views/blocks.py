"""Blocks of a sparse count tensor and the scores of their cuts (paper 004, sections 4, 5.3).

A block is a hyper-rectangle ``[lo, hi)`` of cells (half-open, one interval per axis) together
with the indices of the tensor's non-zero cells that lie in it. Everything here is computed
from those non-zero cells only, so a block of 10^19 cells costs what its few thousand non-zero
cells cost.

Statistics of a block with non-zero counts ``x_1..x_n`` (all >= 1), volume ``V`` (cells,
counting the empty ones), sum ``S`` and mean ``m = S / V``:

* ``AE = sum over all V cells of |c - m| = 2 (S - n m) + 2 sum_{x_i < m} (m - x_i)``: the
  empty cells contribute ``(V - n) m = S - n m``; the last sum is zero unless ``m > 1``.
* ``Min`` score of a cut into ``L``, ``R``: ``-min(min(n_L, V_L - n_L), min(n_R, V_R - n_R))``.
* ``AE`` score of a cut: ``-(AE_L + AE_R)``.

A cut ``(d, p)`` with ``lo_d < p < hi_d`` puts the cells with coordinate ``< p`` on axis ``d``
on the left. :func:`cut_scores` scores every cut of a block on every axis at once, with one
``bincount`` per axis and prefix sums: O(n d + sum of side lengths), plus, only for the cuts
whose side mean exceeds 1 (dense blocks), the exact correction term.
"""

from __future__ import annotations

import numpy as np

METRICS = ("min", "ae", "sum")


def volume(lo: np.ndarray, hi: np.ndarray) -> float:
    """Number of cells of ``[lo, hi)`` as a float (exact up to 2^53, then 16 significant digits,
    and inf past float64's range: 160 columns of 100 bins)."""
    with np.errstate(over="ignore"):
        return float(np.prod((hi - lo).astype(np.float64)))


def aggregation_error(x: np.ndarray, vol: float) -> float:
    """AE of a block whose non-zero counts are ``x`` and whose volume is ``vol``."""
    s = float(x.sum())
    if vol <= 0 or s == 0.0:
        return 0.0
    m = s / vol
    corr = float(np.sum(m - x[x < m])) if m > 1.0 else 0.0
    return max(0.0, 2.0 * (s - x.size * m) + 2.0 * corr)


def _side_corrections(rel: np.ndarray, x: np.ndarray, j: np.ndarray, m: np.ndarray, left: bool) -> np.ndarray:
    """``sum_{i on the side, x_i < m} (m - x_i)`` for the cuts ``j`` (left side: rel < j)."""
    out = np.zeros(j.size)
    keep = x < m.max()
    if not keep.any():
        return out
    r, xv = rel[keep], x[keep].astype(np.float64)
    step = max(1, 4_000_000 // max(1, r.size))
    for a in range(0, j.size, step):
        jj, mm = j[a:a + step, None], m[a:a + step, None]
        on_side = (r[None, :] < jj) if left else (r[None, :] >= jj)
        below = xv[None, :] < mm
        out[a:a + step] = np.where(on_side & below, mm - xv[None, :], 0.0).sum(axis=1)
    return out


def _ae_sides(S: np.ndarray, n: np.ndarray, V: np.ndarray, rel: np.ndarray, x: np.ndarray,
              j: np.ndarray, left: bool) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(V > 0, S / V, 0.0)
    ae = 2.0 * (S - n * m)
    dense = m > 1.0
    if dense.any():
        ae[dense] += 2.0 * _side_corrections(rel, x, j[dense], m[dense], left)
    return np.maximum(ae, 0.0)


def cut_scores(coords: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, metric: str
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score every cut of the block ``[lo, hi)`` holding the non-zero cells ``coords`` (n x d,
    already restricted to the block) with counts ``x``.

    Returns ``(axis, position, score)``, one entry per cut, in axis-major order; higher is
    better. ``metric`` is ``'min'`` (phase 1 of RIPOST), ``'ae'`` (phase 2, HDPView) or
    ``'sum'`` (``-|S_L - S_R|``, a balanced split; not used by the paper's algorithms).
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    sides = (hi - lo).astype(np.int64)
    sizes_f = sides.astype(np.float64)
    vol = volume(lo, hi)
    S = float(x.sum())
    n = x.size
    xf = x.astype(np.float64)
    axes, poss, scores = [], [], []
    for d in np.flatnonzero(sides > 1):
        L = int(sides[d])
        rel = coords[:, d] - lo[d]
        h_sum = np.bincount(rel, weights=xf, minlength=L)
        h_nz = np.bincount(rel, minlength=L).astype(np.float64)
        j = np.arange(1, L)
        S_L = np.cumsum(h_sum)[:-1]
        n_L = np.cumsum(h_nz)[:-1]
        S_R, n_R = S - S_L, n - n_L
        slab = vol / sizes_f[d]
        V_L = slab * j
        V_R = slab * (L - j)
        if metric == "min":
            sc = -np.minimum(np.minimum(n_L, V_L - n_L), np.minimum(n_R, V_R - n_R))
        elif metric == "ae":
            sc = -(_ae_sides(S_L, n_L, V_L, rel, xf, j, True) + _ae_sides(S_R, n_R, V_R, rel, xf, j, False))
        else:
            sc = -np.abs(S_L - S_R)
        axes.append(np.full(L - 1, d, dtype=np.int64))
        poss.append(lo[d] + j)
        scores.append(sc)
    if not axes:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
    return np.concatenate(axes), np.concatenate(poss), np.concatenate(scores)
