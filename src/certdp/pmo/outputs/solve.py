"""PMO by a decomposition over outputs (Dantzig-Wolfe on the row sums); not in paper 000.

For one output k the mDP constraints ``z[i,k] <= exp(eps d(i,j)) z[j,k]`` define a cone C
that is the same for every k. The only constraints that link outputs are the row sums. So
PMO is

    min  sum_k c_k' z_k   s.t.  sum_k z_k = 1,   z_k in C,

and since ``z_k <= 1`` on every feasible matrix, each ``z_k`` lies in the polytope
``P = C cap [0,1]^N``.

**Master** (:mod:`.master`, restricted): non-negative weights ``b_s`` on points ``r_s`` of P,
with ``sum_s b_s r_s = 1``. It starts with the all-ones vector of each connected component of
the mDP graph (in C, since no constraint links two components), which makes it feasible, and
with the single-record tents ``exp(-eps D(., a))``, D the path distance of the mDP graph. It is
stabilised by a box step around the best duals (one half-width per record) and dual price
smoothing (Wentges; automatic weight after Pessoa et al. 2018).

**Pricing** (:mod:`.pricing`), for row-sum duals lambda: one LP per output,
``min (c_k - lambda)' z`` over P, on threads.

**Lower bound**: for *any* lambda, and the optimal Z*,

    OPT = sum_i lambda_i + sum_k (c_k - lambda)' z*_k  >=  sum_i lambda_i + sum_k min_{z in P} (c_k - lambda)' z,

each minimum bounded from below through the pricing LP's duals, so the bound holds whatever
the solver's accuracy.

**Upper bound**: the best certified cost of four candidates: the *elastic* free master (the
master without the box, its row sums allowed off 1 at a high price), lifted to exact mDP by
:func:`certdp.pmo.upper.mdp_lift`, with its off rows re-solved by
:func:`certdp.pmo.upper.repair_rows`; the exact free master (every solution a
mechanism) when that repair gives up; the *filled* free master
(:class:`~certdp.pmo.outputs.master.FilledMaster`: the free master's columns plus one point of
C that fills the rest of the row sums) where the free master's cover keeps leaning on its
all-ones columns; and, once the stabilised master's slack is small, its
own matrix divided by its row sums, lowered to its mDP envelope
(:func:`certdp.pmo.upper.mdp_envelope`) and mixed row by row with the uniform mechanism
(:func:`certdp.pmo.upper.rebalance_rows`). Every candidate is certified exactly.
docs/benders.md describes what each piece buys, measured; docs/history.md what was tried.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import numpy as np

from ...certify import CertifyReport, certify
from ...graph import MDPGraph
from ...lp.executors import EXECUTORS, start_worker_server
from ...lp.outcome import Status, relative_gap, round_message
from ...mechanism import Mechanism, SolveResult
from ...progress import Progress, bounds_line, report
from ...space import Space
from ..model import MAX_LOG_RATIO
from ..upper import mdp_envelope, mdp_lift, rebalance_rows, repair_rows
from .master import ColumnMaster, FilledMaster, new_columns
from .pricing import DaskPricer, Pricer, ProcessPricer, cone_rows

ELASTIC_WIDTH = 1000.0
"""The elastic free master's slack costs ``lambda +- width``, with width this times the
stabilisation box's half-width: high enough that few rows are left off 1 (gauss-1000 at round
26: 70 rows at 1000, 113 at 100, 254 at 10), low enough that it does not take the exact cover
where that is far dearer (there: 138.6 against 205.8, in units of the largest cost)."""

REBALANCE_SLACK = 0.1
"""The stabilised master's matrix is tried as an upper bound once its total slack is below
this times N (text-1000: 19 rounds at 0.1, 21 at 0.05)."""


MASTER_TOL = 1e-2
"""The stabilised master is solved to a relative accuracy of a tenth of the current gap, at
most this (primal-dual column generation: Gondzio, Gonzalez-Brevis and Munari 2013). Its duals
then lie inside the optimal face rather than at a vertex, which prices better columns, and a
solve takes 5-12 interior-point steps instead of 16-23. Neither bound depends on it: the lower
bound comes from pricing, the upper from certified matrices. When nothing prices out at such
duals the cap drops tenfold before the box is widened. Measured against exact masters in
docs/history.md (grid-1000 22 -> 16 rounds, 37 -> 20 s; gauss-1000 23 -> 19, 67 -> 48 s)."""

UPPER_EVERY = 3
"""Near the target gap an upper step runs at most every this many rounds. Each step solves the
free master (4N columns, exactly) and certifies a repaired matrix, which costs about two rounds
(Gaussian 2,000 records: 6-7 s a step against 3.5 s for the master and pricing of a round).
Rounds, not seconds, so that a run takes the same path on any machine and executor; measured
against the rule it replaced (upper steps at most half the seconds of the rest) in
docs/history.md: the same rounds and seconds within run-to-run noise, Gaussian 2,000 in 20
rounds and 111 s against 22 and 125 s."""

FILL_WHEN = 0.5
"""The free master's cover *leans on* its all-ones columns when they cover the rows this much
on average: the priced points do not combine into an exact cover of the rows."""

FILL_AFTER = 3
"""The filled free master (:class:`~certdp.pmo.outputs.master.FilledMaster`) is solved once the
free master's cover has leaned on the all-ones columns at this many upper steps in a row. Word
vectors lean at every step until the run ends; Gaussian data only at its first two steps (after
5-6 rounds the elastic master's repair takes over), and there the filled master cost 13-16 s a
solve at 1,000 records for nothing the next step would not give; grid and road data do not
lean after their first step. Measured in docs/history.md."""

FILL_NEAR = 0.25
"""The fill is given to one output, k0, so it is cheap only where that output suits every
record: the filled master is solved only while the constant mechanism that releases k0
costs at most this much more than the lower bound. Word vectors: 2-10% (one word near all);
Gaussian data 46-74%, where the fill must bend hard away from the centre and the filled LP
ran for over 10 minutes at 5,000 records with eta fixed (docs/history.md)."""

FILL_ITERATIONS = 10
"""A filled-master solve that takes more than this times N simplex iterations is given up,
and the filled master with it for the rest of the run: a bound on its work that depends on
no clock (word vectors need 1-3 x N a step)."""

EXACT_TOL = 1e-8
"""The dense interior-point method's tolerance for an exact master."""


def default_workers() -> int:
    """The cores this process may use (a container may allow fewer than cpu_count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class _Backoff:
    """Try something; after each failure wait 1, 2, 4, ... chances before trying again."""

    def __init__(self) -> None:
        self.wait = self.skip = 0

    def ready(self) -> bool:
        if self.skip > 0:
            self.skip -= 1
            return False
        return True

    def failed(self) -> None:
        self.wait = max(1, 2 * self.wait)
        self.skip = self.wait

    def succeeded(self) -> None:
        self.wait = 0


MASTER_FLOPS_PER_PRICING_ITERATION = 5000.0
"""The work model's threshold: one pricing simplex iteration counted as this many x N master
flops. A threshold chosen by runs (grid-2000 keeps its second pass at 5,000 and loses it at the
measured cost ratio, about 19,000: 24 rounds and 88 s instead of 19 and 79 s; a pass saves
rounds, and a round costs a master, a pass and a share of the free master, not a master
alone), not a cost ratio."""

PRODUCTIVE_SHARE = 0.5
"""A pass is productive when it brings at least this share of K new columns."""


def _second_pass(first_pass_columns: int, generated: int, K: int, pricing_iterations: int,
                 master: ColumnMaster) -> bool:
    """Whether to price a second time in a round, at the master's duals besides the smoothed
    ones. The rounds are bounded below by the columns the master needs (about N besides its
    start, at most K a pass), so a second pass pays where columns are what the run lacks: the
    first pass was productive (at least ``PRODUCTIVE_SHARE`` x K new columns; text-500's first
    passes bring 0-35, and pricing twice there costs 9.5 -> 13 s) and either fewer than N
    columns were generated so far or a pass is cheap against the master by the work model
    (simplex iterations against the last stabilised master's dense work: rows^2 x columns x
    interior-point steps, summed over its parts, the columns it left out not counted; grid-2000
    keeps its second pass past N columns: 18 rounds and 81 s against 24 and 100 s without it).
    Gaussian 2,000 (benchmarks/paper000/results/scale.md): 36 rounds and 227 s under the work
    model alone, 16 rounds and 81 s with the column deficit (the rules compared:
    docs/history.md). Work and columns, not clocks, so the run does not depend on timing."""
    if first_pass_columns < PRODUCTIVE_SHARE * K:
        return False
    cheap = pricing_iterations * MASTER_FLOPS_PER_PRICING_ITERATION * master.n < master.work
    return generated < master.n or cheap


class _Decomposition:
    """The state of one run: the instance in cost units, both masters, the pricer, and the
    best certified matrix so far."""

    def __init__(self, space: Space, *, reduce: bool, tolerance: float, workers: int, executor: str = "threads",
                 scheduler: str | None = None) -> None:
        self.space = space
        N, self.K = space.n_records, space.n_outputs
        self.eps = space.epsilon
        wc = space.weighted_cost
        self.scale = float(wc.max()) if wc.size and wc.max() > 0 else 1.0
        self.C = wc / self.scale
        graph = MDPGraph.from_space(space)
        implied = graph.implied_edges() if reduce else np.zeros(graph.n_edges, dtype=bool)
        # rows with a ratio beyond exp(MAX_LOG_RATIO) are left out of the cone, as in the monolithic
        # LP: a relaxation (the bound stays valid), and certification covers every pair
        keep = ~implied & (self.eps * graph.distance <= MAX_LOG_RATIO)
        self.edges, self.dist = graph.edges[keep], graph.distance[keep]
        A = self.A = cone_rows(N, self.edges, self.dist, self.eps)
        tents = np.exp(-self.eps * graph.path_distances())  # column a: exp(-eps D(., a)), 0 off a's component
        # lambda_i = min_k c[i,k]: a valid start, with bound sum_i min_k c[i,k]
        center = self.C.min(axis=1)
        # the box half-width of record i: 0.07 x its own cost range, and at least 0.1 x the
        # largest range (records with nearly flat costs must still move)
        spread = self.C.max(axis=1) - self.C.min(axis=1)
        self.delta = 0.07 * np.maximum(spread, 0.1 * (float(spread.max()) or 1.0))
        self.n_comp, self.comp = graph.components
        self.master = ColumnMaster(N, tolerance, self.comp)   # solved with the box: the (stabilised) duals
        self.master.set_box(center, self.delta)
        self.free = ColumnMaster(N, tolerance, self.comp)     # solved without: mechanisms (the upper bound)
        self.filled: FilledMaster | None = None             # the free master with an mDP fill, once needed
        self.leaning = 0                                    # upper steps in a row whose cover leaned on the all-ones
        self.fill_output = int(np.argmin(self.C.sum(axis=0)))  # the best constant mechanism's output
        self.constant = float(self.C[:, self.fill_output].sum())   # and its cost
        self.tolerance = tolerance
        self.add((self.comp[:, None] == np.arange(self.n_comp)[None, :]).astype(np.float64))
        self.add(tents)
        self.generated = 0                          # columns priced in so far (not counting the start)
        self.free.protected = self.free.n_cols     # kept: through the all-ones columns the free master is feasible
        self.executor = executor
        self.pricer: Pricer | ProcessPricer | DaskPricer = (
            Pricer(A, self.C, tolerance, workers) if executor == "threads"
            else ProcessPricer(A, self.C, tolerance, workers) if executor == "process"
            else DaskPricer(A, self.C, tolerance, workers, scheduler))
        self.lb = float(center.sum())
        self.ub = math.inf
        self.best: tuple[np.ndarray, CertifyReport] | None = None
        self.t = {"master": 0.0, "price": 0.0, "cert": 0.0, "free": 0.0}
        self.rebalance = _Backoff()
        self.repair = _Backoff()
        self.counts = {"rebalanced_tried": 0, "rebalanced_best": 0, "repaired_tried": 0, "repaired_best": 0,
                       "repaired_failed": 0, "filled_tried": 0, "filled_best": 0, "filled_given_up": 0}

    def add(self, R: np.ndarray) -> None:
        costs = self.C.T @ R                  # (K, n_new): c_k' r_s
        owner = np.argmin(costs, axis=0)
        g = costs[owner, np.arange(R.shape[1])]
        self.master.add(R, owner, g)
        self.free.add(R, owner, g)
        if self.filled is not None:
            self.filled.add(R, owner, g)

    # ------------------------------------------------------------ upper bounds
    def certified(self, Z: np.ndarray, rebalance: bool = False) -> bool:
        """Certify ``Z`` (lowered to its envelope and rebalanced first, if asked); True if it
        is the new best."""
        t0 = time.perf_counter()
        if rebalance:
            Z = rebalance_rows(mdp_envelope(Z, self.eps, self.edges, self.dist), self.C, self.eps, self.edges,
                               self.dist, cutoff=self.ub)
            if Z is None:   # its LP's value already reached the best upper bound
                self.t["cert"] += time.perf_counter() - t0
                return False
        Zc, cert = certify(Z, self.eps, *self.space.neighbor_pairs)
        self.t["cert"] += time.perf_counter() - t0
        val = float(np.sum(self.C * Zc))
        if val < self.ub:
            self.ub, self.best = val, (Zc, cert)
            return True
        return False

    def solve_free(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Solve the exact free master and certify its matrix unless its value cannot beat ``ub``."""
        f = self.free.solve(box=False)
        self.t["free"] += f.seconds
        if f.objective < self.ub:
            self.certified(self.free.matrix(f.weights, self.K))
        return f.duals, f.weights, f.seconds

    def solve_elastic(self, lam_c: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The elastic free master, its rows whose sums are off 1 re-solved by
        :func:`repair_rows`, certified; None if the repair failed."""
        e = self.free.solve(elastic=(lam_c, ELASTIC_WIDTH * self.delta))
        self.t["free"] += e.seconds
        t0 = time.perf_counter()
        Z = mdp_lift(self.free.matrix(e.weights, self.K), self.eps, self.edges, self.dist)
        Z = repair_rows(Z, self.C, self.eps, self.edges, self.dist)
        self.t["cert"] += time.perf_counter() - t0
        self.counts["repaired_tried"] += 1
        if Z is None:
            self.counts["repaired_failed"] += 1
            self.repair.failed()
            return None
        self.repair.succeeded()
        if self.certified(Z):
            self.counts["repaired_best"] += 1
        return e.duals, e.weights, e.seconds

    def solve_filled(self) -> float:
        """The filled free master (built from the free master's columns the first time, then
        given every new column), certified; returns its seconds."""
        t0 = time.perf_counter()
        if self.filled is None:
            k0 = self.fill_output
            self.filled = FilledMaster(self.A, self.C[:, k0], k0, self.K, self.tolerance,
                                       max_iterations=int(FILL_ITERATIONS * self.master.n))
            self.filled.add(self.free.R, self.free.owner, self.free.cost)
        Z = self.filled.solve()
        secs = time.perf_counter() - t0
        self.t["free"] += secs
        self.counts["filled_tried"] += 1
        if Z is None:
            self.counts["filled_given_up"] = 1   # for the rest of the run
        elif self.certified(Z):
            self.counts["filled_best"] += 1
        return secs

    def upper_step(self, lam: np.ndarray, b: np.ndarray, slack: float) -> float:
        """Improve the upper bound: the elastic free master (or, when its repair fails, the
        exact one); the filled free master once that cover has leaned on the all-ones columns
        at ``FILL_AFTER`` steps in a row; then, once the slack is small, the stabilised
        master's own matrix. Returns the free masters' seconds."""
        out = self.solve_elastic(lam) if self.repair.ready() else None
        lam_f, b_f, secs_free = out if out is not None else self.solve_free()
        ones = self.free.R[:, :self.n_comp] @ b_f[:self.n_comp]   # the first columns: all-ones, never pruned
        self.leaning = self.leaning + 1 if float(ones.mean()) >= FILL_WHEN else 0
        if (self.leaning >= FILL_AFTER and not self.counts["filled_given_up"]
                and self.constant <= (1.0 + FILL_NEAR) * self.lb):
            secs_free += self.solve_filled()
        self.free.prune(lam_f, b_f, 4 * self.master.n)
        if slack < REBALANCE_SLACK * self.master.n and self.rebalance.ready():
            self.counts["rebalanced_tried"] += 1
            if self.certified(self.master.matrix(b, self.K), rebalance=True):
                self.counts["rebalanced_best"] += 1
                self.rebalance.succeeded()
            else:
                self.rebalance.failed()
        return secs_free

    # ------------------------------------------------------------ lower bounds
    def price(self, lam: np.ndarray, alpha: float, smooth: bool
              ) -> tuple[float, np.ndarray, np.ndarray, float, int]:
        """Price at the smoothed duals and, when nothing prices out there or a second pass is
        cheap against the master (:func:`_second_pass`), at the master's duals too; returns the
        better of the two Lagrangian bounds, the duals it was taken at, the new columns, the
        new smoothing weight and the pricing iterations."""
        center = self.master.center
        lam_s = center + (1.0 - alpha) * (lam - center) if smooth else lam
        bounds, Znew, iters = self.pricer.price(lam_s)
        lb_here, lam_lb = float(lam_s.sum() + bounds.sum()), lam_s
        if smooth:
            # Pessoa et al. (2018): if the Lagrangian rises from the smoothed point towards the
            # master's duals (subgradient 1 - sum_k z_k), smooth less; else smooth more
            if float((1.0 - Znew.sum(axis=1)) @ (lam - lam_s)) > 0:
                alpha = max(0.0, alpha - 0.1)
            else:
                alpha = min(0.95, alpha + 0.1 * (1.0 - alpha))
        cols = new_columns(Znew, self.C, lam, self.comp, self.n_comp)
        if smooth and (cols.shape[1] == 0
                       or _second_pass(cols.shape[1], self.generated, self.K, iters, self.master)):
            bounds, Z_master, extra = self.pricer.price(lam)
            iters += extra
            cols = new_columns(np.hstack([Znew, Z_master]), self.C, lam, self.comp, self.n_comp)
            lb_master = float(lam.sum() + bounds.sum())
            if lb_master > lb_here:
                lb_here, lam_lb = lb_master, lam
        return lb_here, lam_lb, cols, alpha, iters


def _result(d: _Decomposition, space: Space, status: Status, it: int, history: list[dict[str, Any]],
            workers: int, t_start: float, t_build: float, gap: float) -> SolveResult:
    if d.best is None:  # no mechanism yet (e.g. a 1-round limit): solve the free master once
        d.solve_free()
    assert d.best is not None
    Zc, cert = d.best
    upper_bound = d.ub * d.scale
    lower = min(d.lb * d.scale, upper_bound)
    all_e, all_d = space.neighbor_pairs
    N, K = space.n_records, space.n_outputs
    mech = Mechanism(Zc, d.eps, all_e, all_d, geometry=space.geometry, output_records=space.output_records,
                     cost=space.cost, prior=space.prior,
                     metadata={"method": "outputs", "eta": space.eta, "instance": space.name, "seed": space.seed,
                               "certify_mixing": cert.mixing})
    stats = {"n_records": N, "n_outputs": K, "columns": d.master.n_cols, "edges": len(all_e),
             "edges_kept": len(d.edges), "constraints_before": 2 * len(all_e) * K + N,
             "constraints_after": 2 * len(d.edges) * K + N, "certify_mixing": cert.mixing, "workers": workers,
             "master_fallbacks": d.master.fallbacks + d.free.fallbacks, "pricing_fallbacks": d.pricer.fallbacks,
             "pricing_failures": d.pricer.failures, "pricing_replays": getattr(d.pricer, "replays", 0),
             "pricing_calls": list(getattr(d.pricer, "rounds", [])),
             "executor": d.executor, **d.counts}
    timings = {"build": t_build, "master": d.t["master"], "free_master": d.t["free"], "pricing": d.t["price"],
               "certify": d.t["cert"], "total": time.perf_counter() - t_start}
    true_gap = relative_gap(upper_bound, lower)
    return SolveResult(mechanism=mech, method="outputs", status=status, upper_bound=upper_bound, lower_bound=lower,
                       gap=true_gap, iterations=it, history=tuple(history), timings=timings, stats=stats,
                       message=round_message(status, true_gap, gap, it))


def solve_outputs(space: Space, *, gap: float = 1e-2, max_iterations: int = 500, time_limit: float | None = None,
                  reduce: bool = True, tolerance: float = 1e-9, workers: int | None = None,
                  executor: str | None = None, scheduler: str | None = None,
                  progress: Progress | None = None) -> SolveResult:
    """Solve PMO by the decomposition over outputs and return a certified mechanism.

    Stops at the relative ``gap`` between the certified cost and the rigorous lower bound, at
    ``max_iterations`` rounds, or at ``time_limit`` seconds (checked between rounds). The
    result is always the best certified matrix found, with its true gap. ``workers`` threads
    run the pricing LPs (default: one per core); the result does not depend on it.
    ``executor='process'`` runs them on ``workers`` local processes instead
    (:class:`~certdp.pmo.outputs.pricing.ProcessPricer`), ``executor='dask'`` on a Dask
    cluster: the one at ``scheduler`` (an address; giving it implies 'dask'), or a LocalCluster
    of ``workers`` processes (:class:`~certdp.pmo.outputs.pricing.DaskPricer`). Either way the
    result is the threaded run's, and a lost worker's outputs are rebuilt and replayed. Options
    are checked by :func:`certdp.solve`.
    """
    executor = executor or ("dask" if scheduler else "threads")
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)} for the outputs decomposition, "
                         f"got {executor!r}")
    workers = default_workers() if workers is None else workers
    t_start = time.perf_counter()
    if executor == "process":
        start_worker_server()   # its imports overlap the build below
    d = _Decomposition(space, reduce=reduce, tolerance=tolerance, workers=workers, executor=executor,
                       scheduler=scheduler)
    t_build = time.perf_counter() - t_start
    N = space.n_records
    alpha = 0.5
    history: list[dict[str, Any]] = []
    status = Status.ITERATION_LIMIT
    lb_at_free = -math.inf
    it_free = it = 0
    tol_cap = MASTER_TOL
    try:
        for it in range(1, max_iterations + 1):
            # an inexact master (primal-dual column generation): solved to a tenth of the gap
            g_now = relative_gap(d.ub, d.lb) if math.isfinite(d.ub) else math.inf
            tol = max(EXACT_TOL, min(tol_cap, 0.1 * g_now))
            lam, b, slack, obj, value, secs = d.master.solve(tol=tol)
            d.t["master"] += secs
            t0 = time.perf_counter()
            lb_here, lam_lb, cols, alpha, p_iters = d.price(lam, alpha, smooth=it > 1 and alpha > 0)
            tp = time.perf_counter() - t0
            d.t["price"] += tp
            serious = lb_here > d.lb
            if serious:                  # a serious step: move the box to these duals
                d.lb = lb_here
                d.master.set_box(lam_lb, d.master.delta)
            secs_free = 0.0
            # the upper bound moves little after the first rounds (grid-500: 0.6% from round 7
            # to 20, while the lower bound moves 3%): improve it every 5 rounds (the columns
            # move it too), and when the gap is near the target, the lower bound has moved, the
            # stabilised master's value could close the gap and the last upper step is at least
            # UPPER_EVERY rounds back. That value bounds every
            # mechanism in the span of the stabilised master's columns; the free master keeps
            # more columns and the repair leaves the span, so this is a filter, not a proof
            # (it decides only which candidates are tried; every bound stays rigorous)
            closable = value <= d.lb / (1.0 - gap) * (1.0 + tol)
            if (not math.isfinite(d.ub) or it - it_free >= 5
                    or (closable and d.lb > lb_at_free and gap < relative_gap(d.ub, d.lb) <= 2 * gap
                        and it - it_free >= UPPER_EVERY)):
                it_free, lb_at_free = it, d.lb
                secs_free = d.upper_step(lam, b, slack)
            if math.isfinite(d.ub) and d.lb > d.ub * (1 + 1e-7) + 1e-12:
                raise AssertionError(f"lower bound {d.lb} exceeds the certified cost {d.ub}")
            g = relative_gap(d.ub, d.lb)
            rec = {"iteration": it, "lower_bound": d.lb * d.scale, "upper_bound": d.ub * d.scale, "gap": g,
                   "master_objective": obj * d.scale, "master_value": value * d.scale, "slack": slack, "box": float(np.max(d.master.delta)),
                   "cuts_added": int(cols.shape[1]), "columns": d.master.n_cols, "master_seconds": secs,
                   "master_iterations": d.master.iterations, "master_tolerance": tol,
                   "free_master_seconds": secs_free, "sub_seconds": tp, "pricing_iterations": p_iters,
                   "smoothing": alpha, "elapsed": time.perf_counter() - t_start}
            history.append(rec)
            report(progress, "round", bounds_line("round", rec, "columns", "columns"), rec)
            if g <= gap:
                status = Status.OPTIMAL
                break
            if time_limit is not None and time.perf_counter() - t_start >= time_limit:
                status = Status.TIME_LIMIT
                break
            if cols.shape[1] > 0:
                # above 1.75N columns, prune those idle at the master's weights for two rounds
                # running: every IPM step costs ~ columns x N^2, and too few columns cost rounds
                # (grid-2000 / gauss-1000: 2N 147.8 s / 38.6 s, 1.75N 125.5 s / 34.3 s, 1.5N
                # 123.5 s / 56.1 s); one idle round is not enough (a small Gaussian case then
                # deletes and prices the same two columns in turn and its bound stalls)
                rec["deleted"] = d.master.prune(lam, b, int(1.75 * N), weight=1e-3, reduced=1e-4, patience=2)
                d.add(cols)
                d.generated += cols.shape[1]
            elif not serious:            # nothing prices out and the box did not move
                if tol > EXACT_TOL:      # the duals may be off by the tolerance: solve more exactly
                    tol_cap = tol / 10
                elif slack > 1e-6:         # the box binds where it stands: widen it
                    d.master.set_box(d.master.center, d.master.delta * 10)
                else:                    # and it does not bind: done
                    d.solve_free()
                    status = Status.OPTIMAL if relative_gap(d.ub, d.lb) <= gap else Status.STALLED
                    break
    finally:
        d.pricer.close()
    return _result(d, space, status, it, history, workers, t_start, t_build, gap)
