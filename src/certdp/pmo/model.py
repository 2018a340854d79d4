"""The perturbation-matrix optimisation (PMO) LP of paper 000, Eq. 2-7: its rows, assembled.

    min  sum_i p_i sum_k c[i,k] z[i,k]
    s.t. z[i,k] - exp(eps d(i,j)) z[j,k] <= 0   for every kept neighbouring pair, both
                                               directions, every output k      (Eq. 2, 5)
         sum_k z[i,k] = 1                       for every record i              (Eq. 3, 6)
         z >= 0                                 (z <= 1 follows from the row sums; Eq. 7)

With ``objective='worst'`` the objective is paper 002's worst-case loss instead (OPTMech):
minimise t subject to sum_k c[i,k] z[i,k] <= t for every record i, same constraints.

Every engine (monolithic, the paper's Benders, the outputs decomposition, SpannerMech, the
LR-Geo bounds) builds its mDP rows here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..lp.highs import INF

OBJECTIVES = ("expected", "worst")

#: mDP rows whose ratio exp(eps d) exceeds exp(MAX_LOG_RATIO) (about 9e6) are left out of the
#: LP: HiGHS rejects or mis-solves coefficients spanning that many orders of magnitude, and
#: such a row is almost vacuous. Leaving rows out relaxes the LP, so its dual bound stays a valid
#: lower bound. The certification step still checks every pair exactly, so the
#: guarantee does not depend on it; if such a row ends up violated, certification mixes in a
#: weight of about K exp(-MAX_LOG_RATIO).
MAX_LOG_RATIO = 16.0


@dataclass(frozen=True)
class PMOLP:
    """The assembled LP for one set of records.

    ``A`` is CSR: first ``n_mdp_rows`` rows are mDP constraints (upper bound 0), then one
    row-sum constraint per record (equal to 1). Variable ``i * K + k`` is z[i, k]. With the
    worst-case objective there is one more variable t (last) and one more row per record,
    ``sum_k c[i,k] z[i,k] - t <= 0`` (after the row sums); ``c`` is then zero except on t.
    """

    c: np.ndarray
    A: sp.csr_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    n_records: int
    n_outputs: int
    n_mdp_rows: int
    objective: str = "expected"

    @property
    def n_vars(self) -> int:
        """The number of LP variables (N K, plus one for the worst-case objective)."""
        return self.n_records * self.n_outputs + (1 if self.objective == "worst" else 0)

    @property
    def nnz(self) -> int:
        """The number of non-zeros of the constraint matrix."""
        return int(self.A.nnz)


def mdp_rows(n_records: int, n_outputs: int, edges: np.ndarray, dist: np.ndarray,
             epsilon: float) -> sp.csr_matrix:
    """CSR matrix of the mDP constraints (Eq. 2) for ``edges``, both directions, every output:
    row ``(2e + dir) K + k`` is ``z[a,k] - exp(eps d_e) z[b,k]`` with (a, b) = (i, j) or (j, i).
    Built with vectorised numpy, no Python loop over constraints."""
    K = n_outputs
    E = len(edges)
    f = np.exp(epsilon * np.asarray(dist, dtype=np.float64))
    i = np.asarray(edges[:, 0], dtype=np.int64)
    j = np.asarray(edges[:, 1], dtype=np.int64)
    lo = np.minimum(i, j)
    hi = np.maximum(i, j)
    k = np.arange(K, dtype=np.int64)
    idx = np.empty((E, 2, K, 2), dtype=np.int32)
    idx[:, :, :, 0] = (lo[:, None, None] * K + k[None, None, :])
    idx[:, :, :, 1] = (hi[:, None, None] * K + k[None, None, :])
    val = np.empty((E, 2, K, 2), dtype=np.float64)
    # direction 0: z[i] - f z[j]; direction 1: z[j] - f z[i]; columns ordered (lo, hi)
    i_is_lo = (i <= j)[:, None]
    val[:, 0, :, 0] = np.where(i_is_lo, 1.0, -f[:, None])
    val[:, 0, :, 1] = np.where(i_is_lo, -f[:, None], 1.0)
    val[:, 1, :, 0] = np.where(i_is_lo, -f[:, None], 1.0)
    val[:, 1, :, 1] = np.where(i_is_lo, 1.0, -f[:, None])
    n_rows = 2 * E * K
    indptr = np.arange(0, 2 * n_rows + 1, 2, dtype=np.int64)
    return sp.csr_matrix((val.reshape(-1), idx.reshape(-1), indptr), shape=(n_rows, n_records * K))


def row_sum_rows(n_records: int, n_outputs: int) -> sp.csr_matrix:
    """CSR matrix of the unit-measure constraints (Eq. 3): one row of ones per record."""
    K = n_outputs
    indptr = np.arange(0, n_records * K + 1, K, dtype=np.int64)
    idx = np.arange(n_records * K, dtype=np.int32)
    return sp.csr_matrix((np.ones(n_records * K), idx, indptr), shape=(n_records, n_records * K))


def assemble_pmo(weighted_cost: np.ndarray, edges: np.ndarray, dist: np.ndarray, epsilon: float,
                 objective: str = "expected") -> PMOLP:
    """Assemble the PMO LP for records 0..n-1 (local indices) with objective ``weighted_cost``
    (p_i c[i,k], shape (n, K); with ``objective='worst'`` the plain costs c[i,k]) and mDP
    constraints on ``edges``."""
    n, K = weighted_cost.shape
    M = mdp_rows(n, K, edges, dist, epsilon)
    S = row_sum_rows(n, K)
    if objective == "expected":
        A = sp.vstack([M, S], format="csr")
        rl = np.concatenate([np.full(M.shape[0], -INF), np.ones(n)])
        ru = np.concatenate([np.zeros(M.shape[0]), np.ones(n)])
        return PMOLP(c=np.ascontiguousarray(weighted_cost, dtype=np.float64).reshape(-1), A=A, row_lower=rl,
                     row_upper=ru, n_records=n, n_outputs=K, n_mdp_rows=M.shape[0])
    C = S.copy()
    C.data = np.ascontiguousarray(weighted_cost, dtype=np.float64).reshape(-1).copy()
    t_col = sp.csr_matrix((-np.ones(n), (np.arange(n), np.zeros(n, dtype=np.int64))), shape=(n, 1))
    zeros = sp.csr_matrix((M.shape[0] + n, 1))
    A = sp.hstack([sp.vstack([M, S, C]), sp.vstack([zeros, t_col])], format="csr")
    rl = np.concatenate([np.full(M.shape[0], -INF), np.ones(n), np.full(n, -INF)])
    ru = np.concatenate([np.zeros(M.shape[0]), np.ones(n), np.zeros(n)])
    c = np.zeros(n * K + 1)
    c[-1] = 1.0
    return PMOLP(c=c, A=A, row_lower=rl, row_upper=ru, n_records=n, n_outputs=K, n_mdp_rows=M.shape[0],
                 objective="worst")
