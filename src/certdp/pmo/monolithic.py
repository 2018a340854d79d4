"""PMO solved as one LP per connected component of the mDP graph, by HiGHS.

Exact reductions come first: each connected component of the mDP graph is solved alone
(Property 3.1) and implied edges are dropped (:meth:`certdp.graph.MDPGraph.implied_edges`).
The solution is certified (:mod:`certdp.certify`) against *every* neighbouring pair, and a
rigorous lower bound is computed from the LP duals (:mod:`certdp.pmo.bounds`), so the
reported gap is true. With ``objective='worst'`` this is paper 002's OPTMech.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..graph import MDPGraph
from ..lp.highs import INF, HighsLP, LPSolution
from ..lp.outcome import SolverLimitError, Status, fmt_gap, loss_bound, relative_gap
from ..measures import worst_case_loss
from ..mechanism import Mechanism, SolveResult
from ..progress import Progress, report
from ..space import Space
from .bounds import lagrangian_lower_bound, worst_case_lower_bound
from .model import MAX_LOG_RATIO, PMOLP, assemble_pmo


@dataclass
class _Run:
    """What the components have added up to so far."""

    objective: str
    solver: str
    tolerance: float
    time_limit: float | None
    t_start: float
    lower: float = 0.0
    iterations: int = 0
    t_assemble: float = 0.0
    t_solve: float = 0.0
    nnz: int = 0
    status: Status = Status.OPTIMAL
    used: set[str] = field(default_factory=set)
    failed: list[str] = field(default_factory=list)
    progress: Progress | None = None      # hears HiGHS's iteration lines

    def remaining(self) -> float | None:
        if self.time_limit is None or not math.isfinite(self.time_limit):
            return None
        return max(1e-3, self.time_limit - (time.perf_counter() - self.t_start))

    def add_lower(self, value: float) -> None:
        if self.objective == "worst":
            self.lower = max(self.lower, value)
        else:
            self.lower += value


AUTO_IPM_ROWS = 50_000
"""``solver='auto'`` takes HiGHS's interior-point method above this many LP rows and dual
simplex below (docs/decisions.md#the-monolithic-lp-takes-interior-point-above-50000-rows)."""


def _highs_solve(lp: PMOLP, run: _Run, solver: str) -> LPSolution:
    model = HighsLP(lp.c, lp.A, lp.row_lower, lp.row_upper, np.zeros(lp.n_vars), np.full(lp.n_vars, INF),
                    solver=solver, time_limit=run.remaining(), tolerance=run.tolerance, progress=run.progress)
    sol = model.solve()
    run.t_solve += sol.seconds
    run.iterations += sol.iterations
    return sol


def _solver_order(solver: str, n_rows: int) -> list[str]:
    """The HiGHS algorithms to try, in order: the chosen one, then the other exact one when it
    fails numerically (each can fail where the other does not)."""
    first = ("ipm" if n_rows > AUTO_IPM_ROWS else "simplex") if solver == "auto" else solver
    return [first] + [s for s in ("simplex", "ipm") if s != first]


def _solve_component(space: Space, graph: MDPGraph, implied: np.ndarray, members: np.ndarray, wc: np.ndarray,
                     scale: float, run: _Run, say: Progress | None, label: str) -> np.ndarray:
    """Solve the LP of one connected component; return its rows of the matrix and add its
    rigorous lower bound to ``run``."""
    K = wc.shape[1]
    sub, eids = graph.subgraph(members)
    keep = ~implied[eids] & (space.epsilon * sub.distance <= MAX_LOG_RATIO)
    t0 = time.perf_counter()
    lp = assemble_pmo(wc[members] / scale, sub.edges[keep], sub.distance[keep], space.epsilon, run.objective)
    run.t_assemble += time.perf_counter() - t0
    run.nnz += lp.nnz
    order = _solver_order(run.solver, lp.A.shape[0])
    for attempt, solver in enumerate(order):
        report(say, "component", f"{label}: {len(members)} records, {lp.A.shape[0]} rows, {lp.nnz} non-zeros, "
               f"HiGHS {solver}")
        sol = _highs_solve(lp, run, solver)
        if not sol.status.startswith("error"):
            run.used.add(solver)
            break
        run.failed.append(f"{solver} ({sol.status.removeprefix('error: ')}, {sol.seconds:.0f} s)")
        if attempt + 1 < len(order):
            report(say, "component", f"{label}: HiGHS {solver} failed ({sol.status}); trying {order[attempt + 1]}")
    if sol.status != "optimal":
        if sol.status.startswith("error"):
            raise SolverLimitError(f"HiGHS failed on a component of {len(members)} records with every algorithm "
                                   f"tried ({', '.join(run.failed)}); method 'outputs' solves the same problem "
                                   "by a decomposition")
        if sol.x is None or not sol.primal_feasible:
            raise SolverLimitError(
                f"HiGHS stopped with status {sol.status!r} on a component of {len(members)} records "
                "before finding a feasible solution; raise time_limit or use method='outputs'")
        # stopped early with a usable point (a limit, or HiGHS's 'unknown'): the certified
        # matrix and the Lagrangian bound still give a true gap
        run.status = Status(sol.status) if sol.status in ("time_limit", "iteration_limit") else Status.APPROXIMATE
    m = len(members)
    if sol.row_dual is None:
        run.lower = -math.inf
    elif run.objective == "worst":
        M = lp.A[:lp.n_mdp_rows, :m * K]
        run.add_lower(scale * worst_case_lower_bound(wc[members] / scale, M, sol.row_dual[:lp.n_mdp_rows],
                                                     sol.row_dual[lp.n_mdp_rows + m:]))
    else:
        run.add_lower(scale * lagrangian_lower_bound(lp.c.reshape(m, K), lp.A[:lp.n_mdp_rows],
                                                     sol.row_dual[:lp.n_mdp_rows]))
    assert sol.x is not None   # optimal, or stopped with a primal feasible point (checked above)
    return sol.x[:m * K].reshape(m, K)


def solve_monolithic(space: Space, *, objective: str = "expected", solver: str = "auto",
                     time_limit: float | None = None, tolerance: float = 1e-9, gap: float = 1e-6,
                     reduce: bool = True, progress: Progress | None = None) -> SolveResult:
    """Solve PMO (or OPTMech with ``objective='worst'``) one component at a time; see the
    module docstring. Options are checked by :func:`certdp.solve`.

    ``solver`` is a HiGHS algorithm or 'auto' (:data:`AUTO_IPM_ROWS`); when it fails
    numerically the other exact algorithm is tried, and the result says which produced it.
    The status is 'optimal' only when the certified gap is within ``gap``; a looser
    ``tolerance`` can leave a larger one ('gap_limited').

    Raises:
        SolverLimitError: a component's solve stopped (time limit, solver failure) before it
            had a feasible solution.
    """
    t_start = time.perf_counter()
    graph = MDPGraph.from_space(space)
    t0 = time.perf_counter()
    implied = graph.implied_edges() if reduce else np.zeros(graph.n_edges, dtype=bool)
    t_reduce = time.perf_counter() - t0
    N, K = space.n_records, space.n_outputs
    worst = objective == "worst"
    wc = space.cost if worst else space.weighted_cost
    scale = float(wc.max()) if wc.size and wc.max() > 0 else 1.0
    run = _Run(objective, solver, tolerance, time_limit, t_start, progress=progress)
    Z = np.zeros((N, K))
    comps = graph.component_members()
    n_singletons = 0
    for ci, members in enumerate(comps):
        if len(members) == 1:          # alone: report its cheapest output
            i = members[0]
            k = int(np.argmin(wc[i]))
            Z[i, k] = 1.0
            run.add_lower(float(wc[i, k]))
            n_singletons += 1
            continue
        Z[members] = _solve_component(space, graph, implied, members, wc, scale, run, progress,
                                      f"component {ci + 1}/{len(comps)}")
    t0 = time.perf_counter()
    name = "optmech" if worst else "lp"
    mech, cert = Mechanism.certified(space, Z, method=name, objective=objective,
                                     solver="/".join(sorted(run.used)) or solver)
    t_cert = time.perf_counter() - t0
    if worst:
        upper = worst_case_loss(mech.matrix, space.cost)
        lp_value = worst_case_loss(np.clip(Z, 0, None), space.cost)
    else:
        upper = float(np.sum(wc * mech.matrix))
        lp_value = float(np.sum(wc * np.clip(Z, 0, None)))
    lb = loss_bound(run.lower, upper) if math.isfinite(run.lower) else None
    true_gap = relative_gap(upper, lb)
    status = run.status
    if status is Status.OPTIMAL and (true_gap is None or true_gap > gap):
        status = Status.GAP_LIMITED
    used = "/".join(sorted(run.used)) or "none (every component had one record)"
    message = (f"certified gap {fmt_gap(true_gap)} (requested {gap:g}); HiGHS {used}"
               + (f", after {'; '.join(run.failed)} failed" if run.failed else ""))
    E_full = int(len(space.neighbor_pairs[0]))
    E_kept = int(np.count_nonzero(~implied))
    extra = N * (2 if worst else 1)
    stats = {
        "n_records": N, "n_outputs": K, "variables": N * K + (1 if worst else 0),
        "edges": E_full, "edges_kept": E_kept,
        "constraints_before": 2 * E_full * K + extra, "constraints_after": 2 * E_kept * K + extra,
        "nonzeros": run.nnz, "components": len(comps), "largest_component": int(len(comps[0])) if comps else 0,
        "singleton_components": n_singletons, "solver": used, "solver_failures": list(run.failed),
        "certify_mixing": cert.mixing, "certify_max_violation": cert.max_violation_before,
        "lp_objective": lp_value, "certify_loss_increase": upper - lp_value,
    }
    timings = {"reduce": t_reduce, "assemble": run.t_assemble, "solve": run.t_solve, "certify": t_cert,
               "total": time.perf_counter() - t_start}
    return SolveResult(mechanism=mech, method=name, status=status, upper_bound=upper, lower_bound=lb,
                       gap=true_gap, iterations=run.iterations, timings=timings, stats=stats,
                       objective=objective, message=message)
