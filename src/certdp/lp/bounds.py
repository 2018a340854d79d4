"""Rigorous Lagrangian bounds for LPs with finite variable boxes, from any multipliers.

For ``min c'x  s.t.  lo <= W x <= up,  x in [x_lo, x_up]`` and *any* row multipliers ``pi``,
every feasible x satisfies

    c'x = (c - W'pi)'x + sum_r pi_r (W x)_r
        >= sum_j min_{x_j in box} (c - W'pi)_j x_j + sum_r pi_r B_r,

where ``B_r`` is the row's lower bound when ``pi_r > 0`` and its upper bound when ``pi_r < 0``
(a multiplier whose bound is infinite is dropped). The right-hand side is therefore a lower
bound whatever the solver's accuracy: the duals a solver returns only make it tight.

When the row bounds depend on other variables, ``lo - T y <= W x <= up - T y`` (a Benders block
for fixed master values y), the same bound is affine in y: :func:`lagrangian_affine`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def lagrangian_affine(c: np.ndarray, W: sp.spmatrix, lo: np.ndarray, up: np.ndarray, x_lo: np.ndarray,
                      x_up: np.ndarray, pi: np.ndarray, T: sp.spmatrix | None = None) -> tuple[float, np.ndarray]:
    """``(a, g)`` with ``a + g'y`` a lower bound on ``min c'x`` over the block for every y (see
    the module docstring); ``g`` is empty without ``T``. With ``c = 0`` and ``pi`` a dual ray
    it is the block's feasibility function (positive where the block is infeasible)."""
    pi = np.asarray(pi, dtype=np.float64).copy()
    pi[(pi > 0) & ~np.isfinite(lo)] = 0.0
    pi[(pi < 0) & ~np.isfinite(up)] = 0.0
    r = c - W.T @ pi
    box = np.minimum(r * x_lo, r * x_up).sum()
    bound = np.where(pi > 0, lo, np.where(pi < 0, up, 0.0))
    const = float(box + np.dot(pi, np.where(pi != 0, bound, 0.0)))
    coef = np.zeros(0) if T is None else np.asarray(-(T.T @ pi), dtype=np.float64)
    return const, coef


def lagrangian_bound(c: np.ndarray, W: sp.spmatrix, lo: np.ndarray, up: np.ndarray, x_lo: np.ndarray,
                     x_up: np.ndarray, pi: np.ndarray) -> float:
    """A rigorous lower bound on ``min c'x, lo <= W x <= up, x in [x_lo, x_up]`` from the row
    multipliers ``pi`` (any values; the solver's duals make it tight)."""
    return lagrangian_affine(c, W, lo, up, x_lo, x_up, pi)[0]


def drop_small_coefficients(A: sp.csr_matrix, lo: np.ndarray, up: np.ndarray, col_lo: np.ndarray,
                            col_up: np.ndarray, tau: float = 1e-9) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """A relaxation of the rows ``lo <= A x <= up`` (x in the box) without the coefficients
    below ``tau`` times their row's largest: a term ``a_j x_j`` lies in ``[m_j, M_j]`` over the
    box, so ``a'x <= up`` implies ``a_rest'x <= up - m_j`` and ``a'x >= lo`` implies
    ``a_rest'x >= lo - M_j``. Every point of the original rows satisfies the new ones; what is
    gained is a coefficient range HiGHS accepts."""
    A = sp.csr_matrix(A, copy=True)
    lo = np.asarray(lo, dtype=np.float64).copy()
    up = np.asarray(up, dtype=np.float64).copy()
    for r in range(A.shape[0]):
        s, e = A.indptr[r], A.indptr[r + 1]
        a = A.data[s:e]
        if a.size == 0:
            continue
        small = np.abs(a) < tau * np.abs(a).max()
        if not small.any():
            continue
        j = A.indices[s:e][small]
        t_lo, t_up = a[small] * col_lo[j], a[small] * col_up[j]
        if np.isfinite(up[r]):
            up[r] -= float(np.minimum(t_lo, t_up).sum())
        if np.isfinite(lo[r]):
            lo[r] -= float(np.maximum(t_lo, t_up).sum())
        a[small] = 0.0
    A.eliminate_zeros()
    return A, lo, up
