"""SpannerMech (Bordenabe, Chatzikokolakis and Palamidessi 2014), a baseline of paper 002.

A delta-spanner G of the records' metric is a graph whose shortest-path distance d_G satisfies
d(u, v) <= d_G(u, v) <= delta d(u, v) for every pair. The LP keeps the mDP constraints only on
the spanner's edges, at ``epsilon / delta``:

    z[u,k] <= exp((epsilon / delta) d(u, v)) z[v,k]     for every spanner edge (u, v), every k

Chaining these along a shortest spanner path from u to v gives
``z[u,k] <= exp((epsilon / delta) d_G(u, v)) z[v,k] <= exp(epsilon d(u, v)) z[v,k]``, so the
solution is epsilon-mDP on *every* pair. The returned matrix is certified (exactly, at epsilon)
against every neighbouring pair of the space, like every LP solution here.

The spanner is the greedy one (Althöfer et al. 1993): pairs in order of increasing distance,
an edge added whenever the current graph distance exceeds delta times the metric distance.
Graph distances are kept in a dense matrix updated in O(N^2) per added edge, which is exact.
"""

from __future__ import annotations

import time

import numpy as np

from ..lp.highs import INF, HighsLP
from ..lp.outcome import SolverLimitError, Status
from ..measures import worst_case_loss
from ..mechanism import Mechanism, SolveResult
from ..pmo.bounds import worst_case_lower_bound
from ..pmo.model import MAX_LOG_RATIO, assemble_pmo
from ..progress import Progress, report
from ..space import Space


def greedy_spanner(dist: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Edges (i < j) and lengths of the greedy delta-spanner of the distance matrix ``dist``
    (N x N; ``inf`` marks a pair that is not to be covered and may not be used). Every covered
    pair then has graph distance <= delta * dist (checked before returning)."""
    D = np.asarray(dist, dtype=np.float64)
    n = D.shape[0]
    delta = float(delta)
    iu, ju = np.triu_indices(n, 1)
    finite = np.isfinite(D[iu, ju])
    iu, ju = iu[finite], ju[finite]
    order = np.argsort(D[iu, ju], kind="stable")
    G = np.full((n, n), np.inf)
    np.fill_diagonal(G, 0.0)
    edges = []
    for t in order:
        i, j = int(iu[t]), int(ju[t])
        w = D[i, j]
        if G[i, j] <= delta * w:
            continue
        edges.append((i, j))
        # exact all-pairs update for one new edge of length w
        via = np.minimum(G[:, i][:, None] + w + G[j, :][None, :], G[:, j][:, None] + w + G[i, :][None, :])
        np.minimum(G, via, out=G)
    if not np.all(G[iu, ju] <= delta * D[iu, ju] * (1 + 1e-12)):
        raise RuntimeError("greedy spanner check failed")  # cannot happen: every pair was examined
    E = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    return E, (D[E[:, 0], E[:, 1]] if len(E) else np.empty(0))


def spanner_mechanism(space: Space, *, delta: float = 3.0, objective: str = "worst", solver: str = "ipm",
                      time_limit: float | None = None, tolerance: float = 1e-9,
                      progress: Progress | None = None) -> SolveResult:
    """SpannerMech: the optimal-mechanism LP with mDP constraints only on the edges of a greedy
    ``delta``-spanner, at epsilon / delta.

    The spanner is built over the neighbouring pairs of the space (all pairs when ``space.eta``
    is infinite, the paper's setting).

    Args:
        delta: spanner stretch, >= 1 (1 gives the full LP). The default 3 is the 3-spanner
            paper 002 says Bordenabe et al. use (section 1, related work); a smaller stretch
            keeps more edges (on 50 word2vec words: 136 edges at 3, 340 at 2) and loses less
            utility, since the LP runs at epsilon / delta.
        objective: 'worst' (paper 002's loss, default, comparable with OPTMech) or 'expected'
            (Bordenabe et al.'s prior-weighted loss).
        progress: receives the spanner's size and HiGHS's iteration lines.

    Options are checked by :func:`certdp.solve`.
    """
    t_start = time.perf_counter()
    N, K = space.n_records, space.n_outputs
    edges, dist = space.neighbor_pairs
    # distances of the protected pairs only (inf elsewhere): spanner paths then use only pairs
    # the space protects, and the chaining argument covers exactly them
    D = np.full((N, N), np.inf)
    D[edges[:, 0], edges[:, 1]] = dist
    D[edges[:, 1], edges[:, 0]] = dist
    np.fill_diagonal(D, 0.0)
    t0 = time.perf_counter()
    S, Sd = greedy_spanner(D, delta)
    keep = space.epsilon / delta * Sd <= MAX_LOG_RATIO   # see optimal.MAX_LOG_RATIO
    S_lp, Sd_lp = S[keep], Sd[keep]
    t_span = time.perf_counter() - t0
    cost = space.cost if objective == "worst" else space.weighted_cost
    scale = float(cost.max()) if cost.size and cost.max() > 0 else 1.0
    t0 = time.perf_counter()
    lp = assemble_pmo(cost / scale, S_lp, Sd_lp, space.epsilon / delta, objective)
    t_asm = time.perf_counter() - t0
    model = HighsLP(lp.c, lp.A, lp.row_lower, lp.row_upper, np.zeros(lp.n_vars), np.full(lp.n_vars, INF),
                    solver=solver, time_limit=time_limit, tolerance=tolerance, progress=progress)
    report(progress, "phase", f"spanner: {len(S_lp)} of {len(edges)} protected pairs kept; HiGHS {solver} on "
           f"{lp.A.shape[0]} rows")
    sol = model.solve()
    if sol.status != "optimal" or sol.x is None:
        if sol.status == "time_limit":
            raise SolverLimitError(f"SpannerMech LP hit the time limit of {time_limit} s; no mechanism is returned")
        raise RuntimeError(f"SpannerMech LP ended with HiGHS status {sol.status!r}")
    Z = sol.x[:N * K].reshape(N, K)
    t0 = time.perf_counter()
    mech, cert = Mechanism.certified(space, Z, method="spanner", delta=delta, objective=objective)
    Zc = mech.matrix
    t_cert = time.perf_counter() - t0
    if objective == "worst":
        upper = worst_case_loss(Zc, space.cost)
        lb_lp = None
        if sol.row_dual is not None:
            lb_lp = scale * worst_case_lower_bound(cost / scale, lp.A[:lp.n_mdp_rows, :N * K],
                                                   sol.row_dual[:lp.n_mdp_rows], sol.row_dual[lp.n_mdp_rows + N:])
    else:
        upper = float(np.sum(cost * Zc))
        lb_lp = None
    stats = {"n_records": N, "n_outputs": K, "delta": delta, "spanner_edges": int(len(S)),
             "pairs": int(len(edges)), "variables": lp.n_vars, "constraints": int(lp.A.shape[0]),
             "nonzeros": lp.nnz, "constraints_before": None, "constraints_after": int(lp.A.shape[0]),
             "certify_mixing": cert.mixing,
             # the spanner LP's optimum bounds nothing about the full problem from below
             "spanner_lp_objective": scale * float(sol.objective), "spanner_lp_dual_bound": lb_lp}
    timings = {"spanner": t_span, "assemble": t_asm, "solve": sol.seconds, "certify": t_cert,
               "total": time.perf_counter() - t_start}
    return SolveResult(mechanism=mech, method="spanner", status=Status.HEURISTIC, upper_bound=upper, lower_bound=None,
                       gap=None, iterations=sol.iterations, timings=timings, stats=stats, objective=objective)
