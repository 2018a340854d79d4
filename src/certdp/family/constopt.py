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
certification as every LP solution (:mod:`certdp.certify`), so the returned
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
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from ..lp.highs import INF, HighsLP
from ..lp.outcome import SolverLimitError, Status
from ..measures import quantile_loss, worst_case_loss
from ..mechanism import Mechanism, SolveResult
from ..pmo.model import MAX_LOG_RATIO
from ..progress import Progress, report
from ..space import Space
from .exponential import exponential_mechanism, output_distances

DEFAULT_LAMBDAS = (0.001, 0.1, 1.0, 10.0, 50.0)
SMALL_COEF = 1e-12


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


def free_mask(free: Any, space: Space, name: str = "free") -> np.ndarray:
    """``free`` as a replacement function's mask of free entries: a boolean (N, K) array, or
    ValueError naming ``name``."""
    a = np.asarray(free)
    if a.dtype != bool or a.shape != (space.n_records, space.n_outputs):
        raise ValueError(f"{name} must be a boolean ({space.n_records}, {space.n_outputs}) mask of the free "
                         f"entries, got {a.dtype} {a.shape}")
    return a


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
        """The number of LP variables (free entries, weights Y and k)."""
        return len(self.c)


class _Rows:
    """Rows of a sparse LP collected as (row, column, value) triplets with their bounds."""

    def __init__(self) -> None:
        self.i: list[np.ndarray] = []
        self.j: list[np.ndarray] = []
        self.v: list[np.ndarray] = []
        self.lo: list[np.ndarray] = []
        self.up: list[np.ndarray] = []
        self.n = 0

    def add(self, m: int, terms: list[tuple[np.ndarray, np.ndarray, np.ndarray]], lo: np.ndarray,
            up: np.ndarray) -> None:
        """``m`` new rows; each term gives (local row, column, value) triplets."""
        for r, c, v in terms:
            self.i.append(self.n + r)
            self.j.append(c)
            self.v.append(v)
        self.lo.append(lo)
        self.up.append(up)
        self.n += m

    def matrix(self, n_vars: int) -> sp.csr_matrix:
        return sp.csr_matrix((np.concatenate(self.v), (np.concatenate(self.i), np.concatenate(self.j))),
                             shape=(self.n, n_vars))


def _fixed_neighbour_exponents(fr: np.ndarray, fc: np.ndarray, nbr: np.ndarray, is_free: np.ndarray,
                               D: np.ndarray, d_rec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each free entry (u, w), over the fixed neighbours v of u in column w, the smallest
    ``d(u,v) - D[v,w]`` and the largest ``-d(u,v) - D[v,w]`` (the exponents, over eps', of the
    kind-2 bounds; +-inf without such a neighbour)."""
    nf, N = len(fr), d_rec.shape[0]
    upper_exp = np.full(nf, np.inf)
    lower_exp = np.full(nf, -np.inf)
    step = max(1, 4_000_000 // max(N, 1))
    for s in range(0, nf, step):
        u, w = fr[s:s + step], fc[s:s + step]
        valid = nbr[u] & ~is_free[:, w].T                          # (P, N): v neighbour of u, fixed in w
        du = d_rec[u]                                              # (P, N)
        Dw = D[:, w].T                                             # (P, N)  D[v, w]
        upper_exp[s:s + step] = np.where(valid, du - Dw, np.inf).min(axis=1)
        lower_exp[s:s + step] = np.where(valid, -du - Dw, -np.inf).max(axis=1)
    return upper_exp, lower_exp


def _free_pairs(fr: np.ndarray, fc: np.ndarray, nbr: np.ndarray, d_rec: np.ndarray, eps_lp: float,
                K: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (a, b) of free entries in the same column whose records are neighbours (kind 3),
    both orders, without those whose ratio exceeds exp(MAX_LOG_RATIO)."""
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
    if not pa:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(pa), np.concatenate(pb)


def assemble_constopt(space: Space, r: int, lam: float, eps_lp: float, *, free: np.ndarray | None = None,
                      D: np.ndarray | None = None, d_rec: np.ndarray | None = None) -> ConstOptLP:
    """Assemble the ConstOPTMech LP at privacy level ``eps_lp`` (Algorithm 1 uses epsilon/2).
    ``free`` gives the entries left free (the replacement function): an (N, r) array of each
    record's free outputs, or an (N, K) boolean mask with ``free[u, w]`` when u is in I(w);
    default the r nearest outputs (:func:`nearest_outputs`). ``D`` (record to output) and
    ``d_rec`` (record to record) distances may be passed in when several LPs of one space are
    assembled."""
    N, K = space.n_records, space.n_outputs
    D = output_distances(space) if D is None else D          # (N, K) record -> output
    d_rec = space.distance_rows() if d_rec is None else d_rec  # (N, N) record -> record
    nbr = d_rec <= space.eta
    np.fill_diagonal(nbr, False)
    F = nearest_outputs(D, r) if free is None else free
    if F.dtype == bool:
        fr, fc = np.nonzero(F)
    else:
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
    rows = _Rows()

    # --- kind 2: free entry vs fixed neighbours, two rows per free entry at most; rows with a
    # ratio beyond exp(MAX_LOG_RATIO) are left to certification (pmo.model.MAX_LOG_RATIO)
    upper_exp, lower_exp = _fixed_neighbour_exponents(fr, fc, nbr, is_free, D, d_rec)
    has_up = np.isfinite(upper_exp) & (eps_lp * upper_exp <= MAX_LOG_RATIO)
    has_lo = np.isfinite(lower_exp) & (eps_lp * lower_exp >= -MAX_LOG_RATIO)
    for idx, sign, expo in ((np.flatnonzero(has_up), 1.0, upper_exp), (np.flatnonzero(has_lo), -1.0, lower_exp)):
        # x - exp(eps' up) Y_w <= 0   and   exp(eps' lo) Y_w - x <= 0
        m = len(idx)
        rows.add(m, [(np.arange(m), idx, np.full(m, sign)), (np.arange(m), iy + fc[idx], -sign * np.exp(eps_lp * expo[idx]))],
                 np.full(m, -INF), np.zeros(m))
    n_kind2 = int(has_up.sum() + has_lo.sum())

    # --- kind 3: free-free neighbouring pairs in the same column, both directions
    A_, B_ = _free_pairs(fr, fc, nbr, d_rec, eps_lp, K)
    n_kind3 = len(A_)
    if n_kind3:
        f = np.exp(eps_lp * d_rec[fr[A_], fr[B_]])
        m = n_kind3
        rows.add(m, [(np.arange(m), A_, np.ones(m)), (np.arange(m), B_, -f)], np.full(m, -INF), np.zeros(m))

    # --- row sums >= 1 and loss rows <= lambda, over free x and fixed a[u,w] Y[w]
    fixed = ~is_free & (a >= SMALL_COEF)
    uu, ww = np.nonzero(fixed)
    cost = space.cost
    rows.add(N, [(fr, np.arange(nf), np.ones(nf)), (uu, iy + ww, a[uu, ww])], np.ones(N), np.full(N, INF))
    # loss rows: sum (c + lam) M - k <= lam
    rows.add(N, [(fr, np.arange(nf), cost[fr, fc] + lam), (uu, iy + ww, (cost[uu, ww] + lam) * a[uu, ww]),
                 (np.arange(N), np.full(N, ik), -np.ones(N))], np.full(N, -INF), np.full(N, float(lam)))

    A = rows.matrix(n_vars)
    c = np.zeros(n_vars)
    c[ik] = 1.0
    sizes = is_free.sum(axis=0).tolist()
    counts = {
        "variables": n_vars, "constraints": rows.n, "nonzeros": int(A.nnz),
        "free_entries": nf, "kind2_rows": n_kind2, "kind3_rows": n_kind3,
        # Theorem 1's bounds, stated for K = N; with K outputs the weights are K variables and
        # the dense row-sum and loss rows hold 2 N K non-zeros
        "theorem1_variables": K + 1 + sum(sizes),
        "theorem1_constraints": 2 * N + sum(2 * s * s + 3 * s for s in sizes),
        "theorem1_nonzeros": 2 * N * K + sum(2 * s * s + 5 * s for s in sizes),
    }
    return ConstOptLP(c=c, A=A, row_lower=np.concatenate(rows.lo), row_upper=np.concatenate(rows.up), free_rows=fr,
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
                  basis: Any = None, active: list[int] | None = None,
                  progress: Progress | None = None) -> tuple[Any, HighsLP, list[int]]:
    """Solve the LP with the free-free rows (kind 3) generated lazily.

    Almost none of the kind-3 rows bind
    (docs/decisions.md#constoptmechs-lp-is-exact-but-smaller-than-the-papers), so the LP starts
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
                    np.full(lp.n_vars, INF), solver=solver, time_limit=time_limit, tolerance=tolerance,
                    progress=progress)
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
            model.set_time_limit(time_limit - (time.perf_counter() - t0))
        model.add_rows(A3[new], lp.row_lower[k2 + new], lp.row_upper[k2 + new])
        sol = model.solve()
    return sol, model, order


@dataclass
class _Sweep:
    """The state of a lambda sweep: the last LP's (lambda, largest row sum, basis), the
    kind-3 rows generated so far, and the best mechanism."""

    space: Space
    solver: str
    tolerance: float
    time_limit: float | None
    t_start: float
    progress: Progress | None
    prev: tuple[float, float, Any] | None = None
    active: list[int] = field(default_factory=list)
    first_seconds: float | None = None
    t_solve: float = 0.0

    def remaining(self, lam: float) -> float | None:
        if self.time_limit is None or not math.isfinite(self.time_limit):
            return None
        left = self.time_limit - (time.perf_counter() - self.t_start)
        if left <= 0:
            raise SolverLimitError(f"ConstOPTMech: time limit of {self.time_limit} s reached before lambda={lam}")
        return left

    def solve(self, lp: ConstOptLP, lam: float) -> tuple[Any, HighsLP, bool]:
        """Solve the LP of ``lam``: by dual simplex from the previous optimal basis first (capped
        at half the first solve's time, at least 10 s), afresh with ``solver`` if that stalls."""
        remaining = self.remaining(lam)
        prev = self.prev
        warm = prev is not None and prev[2] is not None
        if warm and prev is not None:
            cap = max(10.0, 0.5 * (self.first_seconds or 0.0))
            cap = cap if remaining is None else min(cap, remaining)
            report(self.progress, "lambda", f"lambda={lam}: warm start from lambda={prev[0]} (cap {cap:.0f} s)")
            t0 = time.perf_counter()
            sol, model, self.active = _solve_rowgen(lp, solver="simplex", tolerance=self.tolerance, time_limit=cap,
                                                    basis=prev[2], active=self.active, progress=self.progress)
            self.t_solve += time.perf_counter() - t0
            if sol.status == "optimal":
                return sol, model, True
            report(self.progress, "lambda", f"lambda={lam}: warm start stopped ({sol.status}); solving afresh")
            remaining = self.remaining(lam)
        report(self.progress, "lambda", f"lambda={lam}: {lp.counts['variables']} variables, "
               f"{lp.counts['constraints']} rows ({lp.counts['kind3_rows']} of them generated lazily), "
               f"{lp.counts['nonzeros']} non-zeros")
        t0 = time.perf_counter()
        sol, model, self.active = _solve_rowgen(lp, solver=self.solver, tolerance=self.tolerance,
                                                time_limit=remaining, active=self.active, progress=self.progress)
        self.t_solve += time.perf_counter() - t0
        self.first_seconds = self.first_seconds or (time.perf_counter() - t0)
        return sol, model, warm


#: What a lambda whose optimum is the previous lambda's takes from that one's sweep record.
_REUSED = ("worst_case_loss", "quantile_loss", "lp_objective", "lp_worst_case_loss", "certify_mixing", "max_row_sum")


def constopt_mechanism(space: Space, *, r: int | None = None, lambdas: Sequence[float] = DEFAULT_LAMBDAS,
                       select: str = "worst", q: float = 0.95, solver: str = "auto",
                       time_limit: float | None = None, tolerance: float = 1e-9,
                       free: np.ndarray | None = None, progress: Progress | None = None) -> SolveResult:
    """ConstOPTMech (Algorithm 1) with replacement function I_NN,r, swept over ``lambdas``;
    the mechanism of least loss (``select``) is returned. Options are checked by
    :func:`certdp.solve`.

    Args:
        r: nearest neighbours left free per record, 1 <= r < K (default 10, or K - 1 when
            there are fewer outputs).
        lambdas: penalties for rows summing above 1 (non-negative, at least one). The default
            grid includes 10 and 50 (paper 002's Table 3 finds 50 best on its data); a lambda
            whose predecessor's optimum already has stochastic rows costs nothing.
        select: the loss that picks the lambda: 'worst' (max_w L(H, w), the LP's objective) or
            'quantile' (L_q, the loss paper 002 reports; ``q`` its quantile).
        tolerance: HiGHS's feasibility tolerance for the LPs.
        solver: the HiGHS algorithm of the first LP of the sweep. 'auto' picks dual
            simplex up to 8,000 variables and IPM with crossover above
            (docs/decisions.md#constoptmech-solves-by-dual-simplex-up-to-8000-variables). The other lambdas
            start by dual simplex from the previous optimal basis.
        time_limit: seconds for the whole sweep; if an LP hits it, :class:`SolverLimitError`
            is raised and no mechanism is returned.
        free: a replacement function other than I_NN,r (Algorithm 1 takes any I(v)), as an
            (N, K) boolean mask: ``free[u, w]`` when u is in I(w), so that M[u, w] is an LP
            variable instead of Eq. 4's ``Y_w exp(-eps' D[u, w])``. ``r`` is then only a label
            in the stats. Theorem 2 holds for any I(v), and the matrix is certified as always.

    Returns:
        A :class:`SolveResult` with ``objective='worst'`` and no lower bound (ConstOPTMech is
        not optimal); ``stats['sweep']`` lists every lambda's loss and LP size.
    """
    K = space.n_outputs
    if r is None:
        r = max(1, min(10, K - 1))
    if free is not None:
        free = free_mask(free, space)
    n_free = space.n_records * r if free is None else int(free.sum())
    if solver == "auto":
        solver = "simplex" if n_free + K + 1 <= 8000 else "ipm"
    t_start = time.perf_counter()
    run = _Sweep(space, solver, tolerance, time_limit, t_start, progress)
    eps_lp = space.epsilon / 2.0
    D = output_distances(space)
    d_rec = space.distance_rows()
    free = nearest_outputs(D, r) if free is None else free
    best: tuple[float, Mechanism, Any, float] | None = None
    t_cert = 0.0
    sweep: list[dict[str, Any]] = []
    t_asm = 0.0
    counts: dict[str, int] = {}
    # Lambdas in increasing order. If the optimum for lambda has every row summing to exactly 1,
    # it is optimal for every larger lambda too (the penalty of any other feasible M only grows
    # with lambda, and is 0 for this one), so it is reused. Otherwise the next LP, which differs
    # only in the loss rows, starts from the previous optimal basis.
    for lam in sorted(lambdas):
        prev = run.prev
        if prev is not None and prev[1] - 1.0 <= 1e-9:
            sweep.append({"lambda": lam, **{k: sweep[-1][k] for k in _REUSED}, "iterations": 0,
                          "reused": f"rows of the lambda={prev[0]} optimum sum to 1"})
            report(progress, "lambda", f"lambda={lam}: the lambda={prev[0]} optimum has stochastic rows, "
                   "so it is optimal here too")
            run.prev = (lam, prev[1], prev[2])
            continue
        t0 = time.perf_counter()
        lp = assemble_constopt(space, r, lam, eps_lp, free=free, D=D, d_rec=d_rec)
        t_asm += time.perf_counter() - t0
        counts = lp.counts
        sol, model, warm = run.solve(lp, lam)
        if sol.status != "optimal" or sol.x is None:
            if sol.status == "time_limit":
                raise SolverLimitError(f"ConstOPTMech LP (lambda={lam}) hit the time limit of {time_limit} s; "
                                       "no mechanism is returned")
            raise SolverLimitError(f"ConstOPTMech LP (lambda={lam}) ended with HiGHS status {sol.status!r}")
        M = _raw_matrix(lp, sol.x, D, eps_lp)
        rowsum = M.sum(axis=1)
        if np.any(rowsum <= 0):
            raise SolverLimitError("ConstOPTMech LP returned a row of zeros (solver failure)")
        H = M / rowsum[:, None]
        # each lambda's matrix is certified before the sweep compares them: where the LP's
        # tolerance exceeds a pair's slack (eps d near 1e-9) certification mixes in much of the
        # uniform matrix, and a choice made before it picked a lambda that lost after it
        t0 = time.perf_counter()
        cand, cert = Mechanism.certified(space, H, method="constopt", r=r, **{"lambda": lam})
        t_cert += time.perf_counter() - t0
        worst = worst_case_loss(cand.matrix, space.cost)
        quant = quantile_loss(cand.matrix, space.cost, q)
        loss = worst if select == "worst" else quant
        sweep.append({"lambda": lam, "worst_case_loss": worst, "quantile_loss": quant,
                      "lp_worst_case_loss": worst_case_loss(H, space.cost), "certify_mixing": cert.mixing,
                      "lp_objective": float(sol.objective), "max_row_sum": float(rowsum.max()),
                      "iterations": sol.iterations, "warm_start": bool(warm),
                      "kind3_rows_used": len(run.active)})
        report(progress, "lambda", f"lambda={lam}: worst-case loss {worst:.6g}, L_{q:g} {quant:.6g} "
               f"({len(run.active)} free-free rows were needed)")
        if best is None or loss < best[0]:
            best = (loss, cand, cert, lam)
        run.prev = (lam, float(rowsum.max()), model.get_basis())
    assert best is not None
    _, mech, cert, lam = best
    loss = worst_case_loss(mech.matrix, space.cost)
    stats = {"n_records": space.n_records, "n_outputs": K, "r": r, "lambda": lam, "select": select, "sweep": sweep,
             "certify_mixing": cert.mixing, "constraints_before": None, "constraints_after": counts["constraints"],
             **counts}
    timings = {"assemble": t_asm, "solve": run.t_solve, "certify": t_cert, "total": time.perf_counter() - t_start}
    return SolveResult(mechanism=mech, method="constopt", status=Status.HEURISTIC, upper_bound=loss, lower_bound=None,
                       gap=None, iterations=0, timings=timings, stats=stats, objective="worst")
