"""Repair of solver output into a matrix that satisfies epsilon-mDP exactly in float64.

LP solutions carry solver tolerances: an entry of 1e-9 next to an entry of 0 is an unbounded
privacy loss. This module is the proof that closes that gap, and nothing else; the cheaper
repairs that the decompositions try first, before certifying, are in :mod:`certdp.pmo.upper`. :func:`certify` turns an approximately feasible matrix into one that passes
:func:`certdp.audit.verify` with no tolerance, at a small cost in loss that it reports.

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

from dataclasses import dataclass

import numpy as np

from . import _validate as V
from .audit import VerifyReport, verify, violated
from .graph import edge_components

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


def _required_mixing(Z: np.ndarray, eps: float, edges: np.ndarray, dist: np.ndarray, comp: np.ndarray,
                     block: int = V.BLOCK) -> tuple[np.ndarray, float]:
    """Per connected component, the least mixing weight that removes every violation.

    Where exp(eps d) overflows, the exact check (:func:`certdp.audit.violated`) fails only a
    positive entry against (almost) zero; there any weight with ``lam / K >= 2 exp(-eps d)``
    mends it, and ``lam = 2 K exp(-min(eps d, 700))`` is taken (a negligible weight)."""
    k = Z.shape[1]
    lam = np.zeros(int(comp.max()) + 1 if len(comp) else 0)
    vmax = 0.0
    step = max(1, block // max(k, 1))
    for s in range(0, len(edges), step):
        a, b = edges[s:s + step, 0], edges[s:s + step, 1]
        ed = (eps * dist[s:s + step])[:, None]
        with np.errstate(over="ignore"):
            f = np.exp(ed)
        w = (f - 1.0) / k
        tiny = np.minimum(1.0, 2.0 * k * np.exp(-np.minimum(ed, 700.0)))
        for X, Y in ((Z[a], Z[b]), (Z[b], Z[a])):
            bad = violated(X, Y, ed)
            if np.any(bad):
                with np.errstate(invalid="ignore", over="ignore"):
                    v = X - f * Y
                finite_v = bad & np.isfinite(v) & np.broadcast_to(np.isfinite(w), v.shape)
                need = np.zeros(v.shape)
                ww = np.broadcast_to(w, v.shape)
                need[finite_v] = v[finite_v] / (v[finite_v] + ww[finite_v])
                need[bad & ~finite_v] = np.broadcast_to(tiny, v.shape)[bad & ~finite_v]
                if finite_v.any():
                    vmax = max(vmax, float(v[finite_v].max()))
                np.maximum.at(lam, comp[a], need.max(axis=1))
    return lam, vmax


def certify(matrix: np.ndarray, epsilon: float, edges: np.ndarray, edge_distance: np.ndarray,
            *, max_rounds: int = 60) -> tuple[np.ndarray, CertifyReport]:
    """Return a copy of ``matrix`` repaired to satisfy exact epsilon-mDP on ``edges`` (both
    directions, every output) with rows summing to 1, and a report of the cost.

    See the module docstring for the algorithm and its proof.
    """
    Z = np.array(V.real_array("matrix", matrix), dtype=np.float64, copy=True)
    if Z.ndim != 2 or Z.shape[1] < 1:
        raise ValueError(f"matrix must be 2-D with at least one output, got shape {Z.shape}")
    if not np.all(np.isfinite(Z)):
        raise ValueError("matrix contains NaN or inf entries; it cannot be certified")
    E = V.int_array("edges", edges).reshape(-1, 2)
    d = V.real_array("edge_distance", edge_distance).reshape(-1)
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
    comp = edge_components(Z.shape[0], E)
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
