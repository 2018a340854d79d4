"""The exponential mechanism (paper 000 Eq. 47; McSherry and Talwar 2007) as an mDP baseline.

    Pr[Q(r_i) = o_k] = exp(-eps d(r_i, o_k) / 2) / sum_l exp(-eps d(r_i, o_l) / 2)

with d the *privacy* metric between record and output. For neighbours i, j the numerator
ratio is at most exp(eps d(i,j) / 2) and so is the normaliser ratio (triangle inequality),
which gives eps-mDP. Using the utility cost c in the exponent instead (as the LR-Geo paper
writes it) is not eps-mDP in general, so the distance is used here.
The matrix is computed in log space and then certified exactly like every LP solution.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.special import logsumexp

from .. import _validate as V
from ..lp.outcome import Status
from ..measures import worst_case_loss
from ..mechanism import Mechanism, SolveResult
from ..space import Space, pairwise


def output_distances(space: Space) -> np.ndarray:
    """(N, K) privacy-metric distances from every record to every output."""
    if space.output_records is not None:
        if space.metric == "precomputed" or space.points is None:
            return space.distance_rows()[:, space.output_records]
        return pairwise(space.points, space.points[space.output_records], space.metric)
    if space.output_points is None:
        raise ValueError("the space has neither output_records nor output_points")
    if space.points is None:
        raise ValueError("output_points need record coordinates")
    return pairwise(space.points, space.output_points, space.metric)


def exponential_matrix(dist: np.ndarray, epsilon: float, weights: np.ndarray | None = None) -> np.ndarray:
    """Row-stochastic matrix of the (weighted) exponential mechanism, computed in log space."""
    logits = -0.5 * epsilon * np.asarray(dist, dtype=np.float64)
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if np.any(w <= 0) or not np.all(np.isfinite(w)):
            raise ValueError("weights must be finite and > 0")
        logits = logits + np.log(w)[None, :]
    return np.exp(logits - logsumexp(logits, axis=1, keepdims=True))


def exponential_mechanism(space: Space, weights: np.ndarray | None = None, *,
                          objective: str = "expected") -> SolveResult:
    """ExpMech for ``space`` at its epsilon (with ``weights``: the weighted ExpMech_Y of paper
    002, Proposition 1), certified on every neighbouring pair. ``objective`` chooses which loss
    is reported as ``upper_bound``: 'expected' or 'worst'."""
    t0 = time.perf_counter()
    V.choice("objective", objective, ("expected", "worst"))
    method = "expmech"
    if weights is not None:
        method = "weighted-expmech"
        weights = V.finite_array("weights", weights, ndim=1)
        if weights.shape != (space.n_outputs,):
            raise ValueError(f"weights must have one entry per output ({space.n_outputs}), got shape {weights.shape}")
    Z = exponential_matrix(output_distances(space), space.epsilon, weights)
    mech, cert = Mechanism.certified(space, Z, method=method)
    ub = mech.expected_loss() if objective == "expected" else worst_case_loss(mech.matrix, space.cost)
    return SolveResult(mechanism=mech, method=method, status=Status.HEURISTIC, upper_bound=ub, lower_bound=None,
                       gap=None, timings={"total": time.perf_counter() - t0}, objective=objective,
                       stats={"n_records": space.n_records, "n_outputs": space.n_outputs,
                              "certify_mixing": cert.mixing, "constraints_before": None,
                              "constraints_after": None})
