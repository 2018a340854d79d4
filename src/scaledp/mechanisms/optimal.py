"""The perturbation-matrix optimisation (PMO) LP of paper 000, Eq. 4-7, solved exactly.

With ``objective='worst'`` the objective is paper 002's worst-case loss instead (OPTMech):
minimise t subject to sum_k c[i,k] z[i,k] <= t for every record i, same constraints.

    min  sum_i p_i sum_k c[i,k] z[i,k]
    s.t. z[i,k] - exp(eps d(i,j)) z[j,k] <= 0   for every kept neighbouring pair, both
                                               directions, every output k      (Eq. 2, 5)
         sum_k z[i,k] = 1                       for every record i              (Eq. 3, 6)
         z >= 0                                 (z <= 1 follows from the row sums; Eq. 7)

Exact reductions come first: each connected component of the mDP graph is solved alone
(Property 3.1) and implied edges are dropped (:meth:`scaledp.graph.MDPGraph.implied_edges`).
The solution is certified (:mod:`scaledp.mechanisms.certify`) against *every* neighbouring
pair, and a rigorous lower bound is computed from the LP duals, so the reported gap is true.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from .. import _validate as V
from ..graph import MDPGraph
from ..lp.highs import INF, SOLVERS, HighsLP
from ..space import Space
from ..audit import worst_case_loss
from .base import Mechanism
from .certify import certify
from .result import SolveResult, relative_gap

OBJECTIVES = ("expected", "worst")

#: mDP rows whose ratio exp(eps d) exceeds exp(MAX_LOG_RATIO) (about 9e6) are left out of the
#: LP: HiGHS rejects or mis-solves coefficients spanning that many orders of magnitude, and
#: such a row is almost vacuous. Leaving rows out relaxes the LP, so its dual bound stays a valid
#: lower bound. The certification step still checks every pair exactly, so the
#: guarantee does not depend on it; if such a row ends up violated, certification mixes in a
#: weight of about K exp(-MAX_LOG_RATIO).
MAX_LOG_RATIO = 16.0


class SolverLimitError(RuntimeError):
    """The solver hit a limit before it had any feasible solution to certify."""


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
        return self.n_records * self.n_outputs + (1 if self.objective == "worst" else 0)

    @property
    def nnz(self) -> int:
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


def _progress_lines(progress: Callable[[str], None] | None, word: str, key: str,
                    name: str) -> Callable[[dict[str, Any]], None] | None:
    """Turn a decomposition's per-round records into the CLI's one-line progress messages."""
    if progress is None:
        return None

    def line(h: dict[str, Any]) -> None:
        progress(f"{word} {h['iteration']}: lower {h['lower_bound']:.6g}, upper {h['upper_bound']:.6g}, "
                 f"gap {h['gap']:.3g}, {name} {h[key]}")
    return line


def solve_pmo(space: Space, *, method: str = "lp", solver: str = "simplex", time_limit: float | None = None,
              reduce: bool = True, tolerance: float = 1e-9, objective: str = "expected",
              progress: Callable[[str], None] | None = None, **options: Any) -> SolveResult:
    """Solve the PMO problem for ``space`` and return a certified mechanism.

    Args:
        method: 'lp' (monolithic HiGHS per component), 'outputs' (the decomposition over
            outputs of :mod:`scaledp.mechanisms.pmo_outputs`; options ``gap``,
            ``max_iterations``, ``workers``) or 'benders' (Benders decomposition
            over a partition; options ``partition``, ``subsets``, ``gap``, ``max_iterations``,
            ``initial_cuts``, ``seed``, ``runner_factory`` go to
            :func:`scaledp.mechanisms.pmo_benders.solve_pmo_benders`).
        solver: 'simplex' (dual simplex), 'ipm' (interior point + crossover) or 'pdlp'.
        time_limit: seconds for the whole solve (None: no limit).
        reduce: drop implied edges (exact) before solving.
        tolerance: HiGHS primal/dual feasibility tolerance.
        objective: 'expected' (Eq. 4) or 'worst' (paper 002's OPTMech: minimise the largest
            per-record loss; monolithic LP only).
        progress: optional callback receiving short status lines.

    Returns:
        A :class:`SolveResult` whose mechanism passes the exact audit; ``lower_bound`` is a
        rigorous Lagrangian bound from the duals and ``gap`` the true relative gap.

    Raises:
        SolverLimitError: the time limit was hit before a feasible solution existed.
    """
    V.choice("method", method, ("lp", "benders", "outputs"))
    V.choice("solver", solver, SOLVERS)
    V.choice("objective", objective, OBJECTIVES)
    if method in ("benders", "outputs") and objective != "expected":
        raise ValueError("objective='worst' is solved by the monolithic LP only (method='lp')")
    if method == "outputs":
        from .pmo_outputs import OPTIONS, solve_pmo_outputs

        if set(options) - set(OPTIONS):
            raise TypeError(f"unknown options for method 'outputs': {sorted(set(options) - set(OPTIONS))}")
        return solve_pmo_outputs(space, time_limit=time_limit, reduce=reduce, tolerance=tolerance,
                                 progress=_progress_lines(progress, "round", "columns", "columns"), **options)
    if method == "benders":
        from .pmo_benders import solve_pmo_benders

        if "partition" in options:
            options["partitioner"] = options.pop("partition")
        return solve_pmo_benders(space, time_limit=time_limit, reduce=reduce, tolerance=tolerance,
                                 progress=_progress_lines(progress, "iteration", "cuts_added", "cuts"), **options)
    if options:
        raise TypeError(f"unknown options for method {method!r}: {sorted(options)}")
    if time_limit is not None:
        V.positive_float("time_limit", time_limit, allow_inf=True)
    t_start = time.perf_counter()
    say = progress or (lambda _msg: None)

    graph = MDPGraph.from_space(space)
    t0 = time.perf_counter()
    implied = graph.implied_edges() if reduce else np.zeros(graph.n_edges, dtype=bool)
    t_reduce = time.perf_counter() - t0
    N, K = space.n_records, space.n_outputs
    worst = objective == "worst"
    wc = space.cost if worst else space.weighted_cost
    scale = float(wc.max()) if wc.size and wc.max() > 0 else 1.0
    Z = np.zeros((N, K))
    lower = 0.0
    iterations = 0
    t_assemble = t_solve = 0.0
    nnz = 0
    status = "optimal"
    comps = graph.component_members()
    n_singletons = 0
    for ci, members in enumerate(comps):
        if len(members) == 1:
            i = members[0]
            k = int(np.argmin(wc[i]))
            Z[i, k] = 1.0
            lower = max(lower, float(wc[i, k])) if worst else lower + float(wc[i, k])
            n_singletons += 1
            continue
        sub, eids = graph.subgraph(members)
        keep = ~implied[eids] & (space.epsilon * sub.distance <= MAX_LOG_RATIO)
        t0 = time.perf_counter()
        lp = assemble_pmo(wc[members] / scale, sub.edges[keep], sub.distance[keep], space.epsilon, objective)
        t_assemble += time.perf_counter() - t0
        nnz += lp.nnz
        remaining = None
        if time_limit is not None and math.isfinite(time_limit):
            remaining = max(1e-3, time_limit - (time.perf_counter() - t_start))
        say(f"component {ci + 1}/{len(comps)}: {len(members)} records, {lp.A.shape[0]} rows, {lp.nnz} non-zeros")
        model = HighsLP(lp.c, lp.A, lp.row_lower, lp.row_upper, np.zeros(lp.n_vars), np.full(lp.n_vars, INF),
                        solver=solver, time_limit=remaining, tolerance=tolerance)
        sol = model.solve()
        t_solve += sol.seconds
        iterations += sol.iterations
        if sol.status.startswith("error") and solver != "simplex":
            # numerical failure (exp(eps d) spans many orders of magnitude at large eps d):
            # dual simplex is the most robust HiGHS algorithm, so try it once before giving up
            say(f"component {ci + 1}: HiGHS {solver} failed ({sol.status}); retrying with dual simplex")
            remaining = None if remaining is None else max(1e-3, time_limit - (time.perf_counter() - t_start))
            model = HighsLP(lp.c, lp.A, lp.row_lower, lp.row_upper, np.zeros(lp.n_vars), np.full(lp.n_vars, INF),
                            solver="simplex", time_limit=remaining, tolerance=tolerance)
            sol = model.solve()
            t_solve += sol.seconds
            iterations += sol.iterations
        if sol.status != "optimal":
            if sol.status.startswith("error"):
                raise SolverLimitError(f"HiGHS failed ({sol.status}) on a component of {len(members)} records; "
                                       "a looser --tolerance or a smaller epsilon * distance range may help")
            if sol.x is None or not sol.primal_feasible:
                raise SolverLimitError(
                    f"HiGHS stopped with status {sol.status!r} on a component of {len(members)} records "
                    "before finding a feasible solution; raise time_limit or use method='benders'")
            # stopped early with a usable point (e.g. PDLP at its tolerance): the certified
            # matrix and the Lagrangian bound still give a true gap
            status = sol.status if sol.status in ("time_limit", "iteration_limit") else "approximate"
        Z[members] = sol.x[:len(members) * K].reshape(len(members), K)
        if sol.row_dual is None:
            lower = -math.inf
        elif worst:
            m = len(members)
            Mrows = lp.A[:lp.n_mdp_rows, :m * K]
            lb_c = scale * worst_case_lower_bound(wc[members] / scale, Mrows, sol.row_dual[:lp.n_mdp_rows],
                                                  sol.row_dual[lp.n_mdp_rows + m:])
            lower = max(lower, lb_c)
        else:
            lower += scale * lagrangian_lower_bound(lp.c.reshape(len(members), K),
                                                    lp.A[:lp.n_mdp_rows], sol.row_dual[:lp.n_mdp_rows])
    t0 = time.perf_counter()
    edges, dist = space.neighbor_pairs
    Zc, cert = certify(Z, space.epsilon, edges, dist)
    t_cert = time.perf_counter() - t0
    if worst:
        upper = worst_case_loss(Zc, space.cost)
        lp_value = worst_case_loss(np.clip(Z, 0, None), space.cost)
    else:
        upper = float(np.sum(wc * Zc))
        lp_value = float(np.sum(wc * np.clip(Z, 0, None)))
    lb = lower if math.isfinite(lower) else None
    if lb is not None:
        lb = min(lb, upper)  # the bound is rigorous; rounding can only make it a hair high
    gap = relative_gap(upper, lb)
    E_full = int(len(edges))
    E_kept = int(np.count_nonzero(~implied))
    stats = {
        "n_records": N, "n_outputs": K, "variables": N * K + (1 if worst else 0),
        "edges": E_full, "edges_kept": E_kept,
        "constraints_before": 2 * E_full * K + N * (2 if worst else 1),
        "constraints_after": 2 * E_kept * K + N * (2 if worst else 1),
        "nonzeros": nnz, "components": len(comps), "largest_component": int(len(comps[0])) if comps else 0,
        "singleton_components": n_singletons, "solver": solver,
        "certify_mixing": cert.mixing, "certify_max_violation": cert.max_violation_before,
        "lp_objective": lp_value, "certify_loss_increase": upper - lp_value,
    }
    timings = {"reduce": t_reduce, "assemble": t_assemble, "solve": t_solve, "certify": t_cert,
               "total": time.perf_counter() - t_start}
    name = "optmech" if worst else "lp"
    mech = Mechanism(Zc, space.epsilon, edges, dist, output_records=space.output_records, cost=space.cost,
                     prior=space.prior, metadata={"method": name, "objective": objective, "solver": solver,
                                                  "eta": space.eta, "instance": space.name,
                                                  "certify_mixing": cert.mixing})
    return SolveResult(mechanism=mech, method=name, status=status, upper_bound=upper, lower_bound=lb, gap=gap,
                       iterations=iterations, timings=timings, stats=stats, objective=objective)


def optmech(space: Space, **options: Any) -> SolveResult:
    """OPTMech of paper 002: the mechanism of least worst-case loss max_w L(M, w) under
    epsilon-mDP on every neighbouring pair of ``space`` (all pairs when ``space.eta`` is
    infinite, as in the paper). The LP has O(N K) variables and O(|E| K) constraints before the
    exact implied-edge reduction. Options as :func:`solve_pmo` (monolithic)."""
    return solve_pmo(space, method="lp", objective="worst", **options)
