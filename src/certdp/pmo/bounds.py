"""Rigorous lower bounds on the PMO optimum from any multipliers of its mDP rows.

These use the row-sum constraints exactly (each row of a mechanism is a probability vector),
which makes them tighter than the box bound of :mod:`certdp.lp.bounds` for PMO.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def lagrangian_lower_bound(weighted_cost: np.ndarray, M: sp.csr_matrix, y_mdp: np.ndarray) -> float:
    """A rigorous lower bound on the PMO optimum from any multipliers of the mDP rows.

    For y <= 0 on the rows ``M z <= 0`` and any z feasible for PMO, y'Mz >= 0, so
    c'z >= (c - M'y)'z >= sum_i min_k (c - M'y)[i,k] because each row z_i is a probability
    vector. Multipliers of the wrong sign (solver noise) are clipped to 0, so the bound holds
    for whatever the solver returned: it is the Lagrangian dual function at y.
    """
    n, K = weighted_cost.shape
    y = np.minimum(np.asarray(y_mdp, dtype=np.float64), 0.0)
    r = weighted_cost.reshape(-1) - M.T @ y[:M.shape[0]]
    return float(np.sum(np.min(r.reshape(n, K), axis=1)))


def worst_case_lower_bound(cost: np.ndarray, M: sp.csr_matrix, y_mdp: np.ndarray, y_loss: np.ndarray) -> float:
    """A rigorous lower bound on min_z max_i c_i'z_i over PMO-feasible z, from any multipliers.

    For weights w >= 0 with sum w = 1, max_i c_i'z_i >= sum_i w_i c_i'z_i, and the expected-loss
    bound of :func:`lagrangian_lower_bound` applies to the costs w_i c[i, k]. The weights are the
    loss rows' duals (sign-corrected, normalised; uniform if they are all 0).
    """
    w = np.maximum(-np.asarray(y_loss, dtype=np.float64), 0.0)
    w = w / w.sum() if w.sum() > 0 else np.full(len(w), 1.0 / len(w))
    return lagrangian_lower_bound(cost * w[:, None], M, y_mdp)
