"""ConstOPTMech (paper 002, Algorithm 1) and the weighted exponential mechanism (Proposition 1).

The LP
------
Solved at ``eps' = epsilon / 2`` over the variables

* ``x[u, w]`` for every record u and every output w in F(u), the r nearest outputs of u other
  than u itself (the replacement function I_NN,r of Eq. 5 read column-wise:
  u is in I(w) exactly when w is in F(u));
* ``Y[w] >= 0`` for every output (the weights of the weighted exponential mechanism);
* ``k``, the worst-case penalised loss.

Every other entry is fixed by Eq. 4, ``M[u, w] = Y[w] a[u, w]`` with ``a = exp(-eps' D)`` and D
the privacy distance from record to output. For a neighbouring pair (u, v) (distance d) and a
column w the mDP constraints (Eq. 2 at eps') are then of three kinds:

1. u, v both fixed: ``a[u,w] <= exp(eps' d) a[v,w]`` is ``D[v,w] <= d + D[u,w]``, the triangle
   inequality, so the constraint is dropped (this is the saving of the paper).
2. u free, v fixed: ``x[u,w] <= Y[w] exp(eps' d) a[v,w]`` for every such v, of which only the
   smallest right-hand side matters, and ``x[u,w] >= Y[w] exp(-eps' d) a[v,w]``, of which only
   the largest matters: two rows per free entry, with the min / max precomputed.
3. u, v both free: ``x[u,w] <= exp(eps' d) x[v,w]``, both directions.

This is exactly the feasible set of the paper's LP with far fewer rows; the counts are reported
in ``stats`` next to Theorem 1's bound (``theorem1_*``).

Rows relaxed to ``sum_w M[u, w] >= 1`` and the loss of record u penalised as

    L~(M, u) = sum_w c[u, w] M[u, w] + lambda (sum_w M[u, w] - 1)

Eq. 6 as printed writes the penalty as ``lambda sum_u M_uu``; the text says the penalty is on
how far rows sum above 1, and that is the reading implemented here (with the constant -lambda
so that L~ equals the loss for a stochastic row). The LP minimises max_u L~(M, u).

Why the result is epsilon-mDP (Theorem 2)
------------------------------------------
M satisfies eps'-mDP on every neighbouring pair, column by column. Summing a column inequality
over w gives ``S_u <= exp(eps' d) S_v`` for the row sums. The returned matrix is
``H[u, w] = M[u, w] / S_u``, so ``H[u,w] / H[v,w] = (M[u,w] / M[v,w]) (S_v / S_u) <=
exp(2 eps' d) = exp(epsilon d)``. Solver tolerances are then removed by the same exact
certification as every LP solution (:mod:`scaledp.mechanisms.certify`), so the returned
mechanism passes the exact audit at ``epsilon`` on every neighbouring pair of the space.

Coefficients ``a[u, w]`` below ``1e-12`` are left out of the row-sum and loss rows of the LP
(they would only hurt its conditioning). Leaving a positive term out of ``sum >= 1`` can only
make rows sum to more than the LP assumed, and the final matrix is built with every entry
``Y[w] a[u, w]`` and normalised, so the guarantee above does not depend on it; the loss
reported is the exact loss of the returned matrix.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import scipy.sparse as sp

from .. import _validate as V
from ..audit import worst_case_loss
from ..lp.highs import INF, SOLVERS, HighsLP
from ..space import Space
from .base import Mechanism
from .certify import certify
from .exponential import exponential_mechanism, output_distances
from .optimal import MAX_LOG_RATIO
from .result import SolveResult

DEFAULT_LAMBDAS = (0.001, 0.1, 1.0)
SMALL_COEF = 1e-12


class LPTimeLimitError(RuntimeError):
    """An LP-based mechanism hit its time limit; such mechanisms return nothing short of the
    optimum (there is no feasible fallback)."""


# ------------------------------------------------------------------ weighted ExpMech
def weighted_exponential_mechanism(space: Space, weights: np.ndarray) -> SolveResult:
    """ExpMech_Y of Proposition 1: ``Pr[w_i -> w_j] ~ Y_j exp(-eps d(w_i, w_j) / 2)``, which is
    epsilon-mDP for any positive weights (numerator and normaliser ratios are each at most
    ``exp(eps d / 2)``). Certified exactly like every other matrix; reports the worst-case loss."""
    return exponential_mechanism(space, weights, objective="worst")


# ------------------------------------------------------------------ the LP
def nearest_outputs(D: np.ndarray, r: int) -> np.ndarray:
    """(N, r) the r nearest outputs of every record, excluding outputs at distance 0 (the
    record itself). Ties are broken by output index (stable sort), so the result is
    deterministic."""
    Dm = np.where(D > 0, D, np.inf)
    order = np.argsort(Dm, axis=1, kind="stable")[:, :r]
    if np.any(np.isinf(np.take_along_axis(Dm, order, axis=1))):
        raise ValueError(f"r={r} exceeds the number of outputs at positive distance from some record")
    return order


@dataclass(frozen=True)
class ConstOptLP:
    """The assembled LP of one (epsilon, r, lambda): variables [x (free entries), Y, k]."""

    c: np.ndarray
    A: sp.csr_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    free_rows: np.ndarray   # (F,) record of each free entry
    free_cols: np.ndarray   # (F,) output of each free entry
    n_outputs: int
    counts: dict[str, int]

    @property
    def n_vars(self) -> int:
        return len(self.c)


def assemble_constopt(space: Space, r: int, lam: float, eps_lp: float, *, free: np.ndarray | None = None,
                      D: np.ndarray | None = None, d_rec: np.ndarray | None = None) -> ConstOptLP:
    """Assemble the ConstOPTMech LP at privacy level ``eps_lp`` (Algorithm 1 uses epsilon/2).
    ``D`` (record to output) and ``d_rec`` (record to record) distances may be passed in when
    several LPs of one space are assembled."""
    N, K = space.n_records, space.n_outputs
    D = output_distances(space) if D is None else D          # (N, K) record -> output
    d_rec = space.distance_rows() if d_rec is None else d_rec  # (N, N) record -> record
    nbr = d_rec <= space.eta
    np.fill_diagonal(nbr, False)
    F = nearest_outputs(D, r) if free is None else free
    fr = np.repeat(np.arange(N), F.shape[1])
    fc = F.reshape(-1)
    order = np.lexsort((fc, fr))
    fr, fc = fr[order], fc[order]
    nf = len(fr)
    is_free = np.zeros((N, K), dtype=bool)
    is_free[fr, fc] = True
    a = np.exp(-eps_lp * D)
    iy = nf            # first Y variable
    ik = nf + K        # k
    n_vars = nf + K + 1

    rows_i: list[np.ndarray] = []
    rows_j: list[np.ndarray] = []
    rows_v: list[np.ndarray] = []
    lo: list[np.ndarray] = []
    up: list[np.ndarray] = []
    n_row = 0

    # --- kind 2: free entry vs fixed neighbours, two rows per free entry at most
    upper_coef = np.full(nf, np.inf)
    lower_coef = np.full(nf, -np.inf)
    step = max(1, 4_000_000 // max(N, 1))
    for s in range(0, nf, step):
        u = fr[s:s + step]
        w = fc[s:s + step]
        valid = nbr[u] & ~is_free[:, w].T                          # (P, N): v neighbour of u, fixed in w
        du = d_rec[u]                                              # (P, N)
        Dw = D[:, w].T                                             # (P, N)  D[v, w]
        up_exp = np.where(valid, du - Dw, np.inf).min(axis=1)      # log(exp(eps d) a[v,w]) / eps
        lo_exp = np.where(valid, -du - Dw, -np.inf).max(axis=1)
        upper_coef[s:s + step] = up_exp
        lower_coef[s:s + step] = lo_exp
    # rows with a ratio beyond exp(MAX_LOG_RATIO) are left to certification (optimal.MAX_LOG_RATIO)
    has_up = np.isfinite(upper_coef) & (eps_lp * upper_coef <= MAX_LOG_RATIO)
    has_lo = np.isfinite(lower_coef) & (eps_lp * lower_coef >= -MAX_LOG_RATIO)
    idx = np.flatnonzero(has_up)
    # x - exp(eps' * up) Y_w <= 0
    m = len(idx)
    rows_i += [n_row + np.arange(m), n_row + np.arange(m)]
    rows_j += [idx, iy + fc[idx]]
    rows_v += [np.ones(m), -np.exp(eps_lp * upper_coef[idx])]
    lo.append(np.full(m, -INF))
    up.append(np.zeros(m))
    n_row += m
    idx = np.flatnonzero(has_lo)
    # exp(eps' * lo) Y_w - x <= 0
    m = len(idx)
    rows_i += [n_row + np.arange(m), n_row + np.arange(m)]
    rows_j += [idx, iy + fc[idx]]
    rows_v += [-np.ones(m), np.exp(eps_lp * lower_coef[idx])]
    lo.append(np.full(m, -INF))
    up.append(np.zeros(m))
    n_row += m
    n_kind2 = int(has_up.sum() + has_lo.sum())

    # --- kind 3: free-free neighbouring pairs in the same column, both directions
    col_order = np.lexsort((fr, fc))
    bounds = np.searchsorted(fc[col_order], np.arange(K + 1))
    pa: list[np.ndarray] = []
    pb: list[np.ndarray] = []
    for w in range(K):
        ids = col_order[bounds[w]:bounds[w + 1]]
        if len(ids) < 2:
            continue
        us = fr[ids]
        ii, jj = np.nonzero(nbr[np.ix_(us, us)] & (eps_lp * d_rec[np.ix_(us, us)] <= MAX_LOG_RATIO))
        pa.append(ids[ii])
        pb.append(ids[jj])
    if pa:
        A_, B_ = np.concatenate(pa), np.concatenate(pb)
        m = len(A_)
        f = np.exp(eps_lp * d_rec[fr[A_], fr[B_]])
        rows_i += [n_row + np.arange(m), n_row + np.arange(m)]
        rows_j += [A_, B_]
        rows_v += [np.ones(m), -f]
        lo.append(np.full(m, -INF))
        up.append(np.zeros(m))
        n_row += m
        n_kind3 = m
    else:
        n_kind3 = 0

    # --- row sums >= 1 and loss rows <= lambda, over free x and fixed a[u,w] Y[w]
    fixed = ~is_free & (a >= SMALL_COEF)
    uu, ww = np.nonzero(fixed)
    cost = space.cost
    # row sums
    rows_i += [n_row + fr, n_row + uu]
    rows_j += [np.arange(nf), iy + ww]
    rows_v += [np.ones(nf), a[uu, ww]]
    lo.append(np.ones(N))
    up.append(np.full(N, INF))
    n_row += N
    # loss rows: sum (c + lam) M - k <= lam
    rows_i += [n_row + fr, n_row + uu, n_row + np.arange(N)]
    rows_j += [np.arange(nf), iy + ww, np.full(N, ik)]
    rows_v += [cost[fr, fc] + lam, (cost[uu, ww] + lam) * a[uu, ww], -np.ones(N)]
    lo.append(np.full(N, -INF))
    up.append(np.full(N, float(lam)))
    n_row += N

    A = sp.csr_matrix((np.concatenate(rows_v), (np.concatenate(rows_i), np.concatenate(rows_j))),
                      shape=(n_row, n_vars))
    c = np.zeros(n_vars)
    c[ik] = 1.0
    sizes = is_free.sum(axis=0).tolist()
    counts = {
        "variables": n_vars, "constraints": n_row, "nonzeros": int(A.nnz),
        "free_entries": nf, "kind2_rows": n_kind2, "kind3_rows": n_kind3,
        # Theorem 1's bounds, stated for K = N; with K outputs the weights are K variables and
        # the dense row-sum and loss rows hold 2 N K non-zeros
        "theorem1_variables": K + 1 + sum(sizes),
        "theorem1_constraints": 2 * N + sum(2 * s * s + 3 * s for s in sizes),
        "theorem1_nonzeros": 2 * N * K + sum(2 * s * s + 5 * s for s in sizes),
    }
    return ConstOptLP(c=c, A=A, row_lower=np.concatenate(lo), row_upper=np.concatenate(up), free_rows=fr,
                      free_cols=fc, n_outputs=K, counts=counts)


def _raw_matrix(lp: ConstOptLP, x: np.ndarray, D: np.ndarray, eps_lp: float) -> np.ndarray:
    """The LP's M (before normalisation): free entries from x, the others Y[w] a[u, w], with
    ``D`` the record-to-output distances."""
    K = lp.n_outputs
    nf = len(lp.free_rows)
    Y = np.maximum(x[nf:nf + K], 0.0)
    M = Y[None, :] * np.exp(-eps_lp * D)
    M[lp.free_rows, lp.free_cols] = np.maximum(x[:nf], 0.0)
    return M


def _solve_rowgen(lp: ConstOptLP, *, solver: str, tolerance: float, time_limit: float | None,
                  basis: Any = None, active: list[int] | None = None) -> tuple[Any, HighsLP, list[int]]:
    """Solve the LP with the free-free rows (kind 3) generated lazily.

    Almost none of the kind-3 rows bind (a few dozen of 49,000 at n = 400), so the LP starts
    with the kind-2, row-sum and loss rows plus the kind-3 rows in ``active``; violated kind-3
    rows are added and the model re-solved by dual simplex from its basis until none is violated
    (by more than 1e-9). The result is an optimum of the full LP. ``active`` lists kind-3 row
    numbers in the order they were added, so that a basis of an earlier model with the same
    active rows (``basis``) fits the new one.
    """
    k2, k3 = lp.counts["kind2_rows"], lp.counts["kind3_rows"]
    m = lp.A.shape[0]
    order = list(active or [])
    base = np.r_[np.arange(k2), np.arange(k2 + k3, m)]
    rows = np.r_[base, k2 + np.asarray(order, dtype=np.int64)]
    t0 = time.perf_counter()
    model = HighsLP(lp.c, lp.A[rows], lp.row_lower[rows], lp.row_upper[rows], np.zeros(lp.n_vars),
                    np.full(lp.n_vars, INF), solver=solver, time_limit=time_limit, tolerance=tolerance)
    if basis is not None:
        model.set_basis(basis)
    sol = model.solve()
    A3 = lp.A[k2:k2 + k3]
    have = np.zeros(k3, dtype=bool)
    have[order] = True
    while sol.status == "optimal" and sol.x is not None and k3:
        new = np.flatnonzero(((A3 @ sol.x) > 1e-9) & ~have)
        if not len(new):
            break
        have[new] = True
        order.extend(new.tolist())
        model.use_dual_simplex()
        if time_limit is not None:
            model.set_option("time_limit", max(1e-3, time_limit - (time.perf_counter() - t0)))
        model.add_rows(A3[new], lp.row_lower[k2 + new], lp.row_upper[k2 + new])
        sol = model.solve()
    return sol, model, order


def constopt_mechanism(space: Space, *, r: int = 10, lambdas: Sequence[float] = DEFAULT_LAMBDAS,
                       solver: str = "auto", time_limit: float | None = None, tolerance: float = 1e-9,
                       warm_start: bool = True, progress: Callable[[str], None] | None = None) -> SolveResult:
    """ConstOPTMech (Algorithm 1) with replacement function I_NN,r, swept over ``lambdas``;
    the mechanism of least worst-case loss max_w L(H, w) is returned.

    Args:
        r: nearest neighbours left free per record, 1 <= r < K.
        lambdas: penalties for rows summing above 1 (non-negative, at least one).
        solver, tolerance: HiGHS settings for the first LP of the sweep. 'auto' picks dual
            simplex up to 8,000 variables (n = 400, r = 10 is 4,401: 6 s against IPM's 8 s; on
            Helsinki POIs at eps 32/km, n = 200, 4 s against 105 s, where the exp(eps d) range
            slows IPM down) and IPM with crossover above (n = 1,000: dual simplex needed 323 s
            for the first LP alone; the whole sweep with IPM took 207 s).
        warm_start: solve the other lambdas by dual simplex from the previous optimal basis.
        time_limit: seconds for the whole sweep; if an LP hits it, :class:`LPTimeLimitError`
            is raised and no mechanism is returned.

    Returns:
        A :class:`SolveResult` with ``objective='worst'`` and no lower bound (ConstOPTMech is
        not optimal); ``stats['sweep']`` lists every lambda's loss and LP size.
    """
    K = space.n_outputs
    r = V.int_in_range("r", r, 1, K - 1) if K > 1 else V.int_in_range("r", r, 1, 0)
    lams = list(lambdas)
    if not lams:
        raise ValueError("lambdas must hold at least one value")
    lams = [V.nonneg_float("lambdas", lam) for lam in lams]
    V.choice("solver", solver, SOLVERS + ("auto",))
    if time_limit is not None:
        V.positive_float("time_limit", time_limit, allow_inf=True)
    if solver == "auto":
        solver = "simplex" if space.n_records * r + K + 1 <= 8000 else "ipm"
    say = progress or (lambda _m: None)
    t_start = time.perf_counter()
    eps_lp = space.epsilon / 2.0
    edges, dist = space.neighbor_pairs
    D = output_distances(space)
    d_rec = space.distance_rows()
    free = nearest_outputs(D, r)
    best: tuple[float, np.ndarray, float] | None = None
    sweep = []
    t_asm = t_solve = 0.0
    counts: dict[str, int] = {}
    prev: tuple[float, float, Any] | None = None   # (lambda, largest row sum, basis) of the last LP
    # Lambdas in increasing order. If the optimum for lambda has every row summing to exactly 1,
    # it is optimal for every larger lambda too (the penalty of any other feasible M only grows
    # with lambda, and is 0 for this one), so it is reused. Otherwise the next LP, which differs
    # only in the loss rows, starts (dual simplex) from the previous optimal basis; if that
    # stalls past the first solve's time it is solved afresh with ``solver``.
    first_seconds = None
    active: list[int] = []
    for lam in sorted(lams):
        if prev is not None and prev[1] - 1.0 <= 1e-9:
            sweep.append({"lambda": lam, "worst_case_loss": sweep[-1]["worst_case_loss"],
                          "lp_objective": sweep[-1]["lp_objective"], "iterations": 0,
                          "reused": f"rows of the lambda={prev[0]} optimum sum to 1"})
            say(f"lambda={lam}: the lambda={prev[0]} optimum has stochastic rows, so it is optimal here too")
            prev = (lam, prev[1], prev[2])
            continue
        t0 = time.perf_counter()
        lp = assemble_constopt(space, r, lam, eps_lp, free=free, D=D, d_rec=d_rec)
        t_asm += time.perf_counter() - t0
        counts = lp.counts
        remaining = None
        if time_limit is not None and math.isfinite(time_limit):
            remaining = time_limit - (time.perf_counter() - t_start)
            if remaining <= 0:
                raise LPTimeLimitError(f"ConstOPTMech: time limit of {time_limit} s reached before lambda={lam}")
        sol = None
        warm = prev is not None and prev[2] is not None and warm_start
        if warm:
            cap = max(10.0, 0.5 * (first_seconds or 0.0))
            cap = cap if remaining is None else min(cap, remaining)
            say(f"lambda={lam}: warm start from lambda={prev[0]} (cap {cap:.0f} s)")
            t0 = time.perf_counter()
            sol, model, active = _solve_rowgen(lp, solver="simplex", tolerance=tolerance, time_limit=cap,
                                               basis=prev[2], active=active)
            t_solve += time.perf_counter() - t0
            if sol.status != "optimal":
                say(f"lambda={lam}: warm start stopped ({sol.status}); solving afresh")
                sol = None
                if remaining is not None:
                    remaining = time_limit - (time.perf_counter() - t_start)
        if sol is None:
            say(f"lambda={lam}: {lp.counts['variables']} variables, {lp.counts['constraints']} rows "
                f"({lp.counts['kind3_rows']} of them generated lazily), {lp.counts['nonzeros']} non-zeros")
            t0 = time.perf_counter()
            sol, model, active = _solve_rowgen(lp, solver=solver, tolerance=tolerance, time_limit=remaining,
                                               active=active)
            t_solve += time.perf_counter() - t0
            first_seconds = first_seconds or (time.perf_counter() - t0)
        if sol.status != "optimal" or sol.x is None:
            if sol.status == "time_limit":
                raise LPTimeLimitError(f"ConstOPTMech LP (lambda={lam}) hit the time limit of {time_limit} s; "
                                       "no mechanism is returned")
            raise RuntimeError(f"ConstOPTMech LP (lambda={lam}) ended with HiGHS status {sol.status!r}")
        M = _raw_matrix(lp, sol.x, D, eps_lp)
        rowsum = M.sum(axis=1)
        if np.any(rowsum <= 0):
            raise RuntimeError("ConstOPTMech LP returned a row of zeros (solver failure)")
        H = M / rowsum[:, None]
        loss = worst_case_loss(H, space.cost)   # before certification; the winner is certified below
        sweep.append({"lambda": lam, "worst_case_loss": loss, "lp_objective": float(sol.objective),
                      "iterations": sol.iterations, "warm_start": bool(warm), "kind3_rows_used": len(active)})
        say(f"lambda={lam}: worst-case loss {loss:.6g} ({len(active)} free-free rows were needed)")
        if best is None or loss < best[0]:
            best = (loss, H, lam)
        prev = (lam, float(rowsum.max()), model.get_basis())
    assert best is not None
    _, H, lam = best
    t0 = time.perf_counter()
    Hc, cert = certify(H, space.epsilon, edges, dist)
    t_cert = time.perf_counter() - t0
    loss = worst_case_loss(Hc, space.cost)
    mech = Mechanism(Hc, space.epsilon, edges, dist, output_records=space.output_records, cost=space.cost,
                     prior=space.prior, metadata={"method": "constopt", "r": r, "lambda": lam, "eta": space.eta,
                                                  "instance": space.name, "certify_mixing": cert.mixing})
    stats = {"n_records": space.n_records, "n_outputs": K, "r": r, "lambda": lam, "sweep": sweep,
             "certify_mixing": cert.mixing, "constraints_before": None, "constraints_after": counts["constraints"],
             **counts}
    timings = {"assemble": t_asm, "solve": t_solve, "certify": t_cert, "total": time.perf_counter() - t_start}
    return SolveResult(mechanism=mech, method="constopt", status="heuristic", upper_bound=loss, lower_bound=None,
                       gap=None, iterations=0, timings=timings, stats=stats, objective="worst")
