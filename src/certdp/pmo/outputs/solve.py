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
(:func:`certdp.pmo.upper.rebalance_rows`). Every candidate is certified exactly
(:mod:`.incumbent`).

The tuning is one :class:`~certdp.pmo.outputs.config.OutputsConfig`; docs/pmo.md has what each
piece buys, measured.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict
from typing import Any

try:
    import resource
except ImportError:   # not on Windows: the rounds then record no peak memory
    resource = None

import numpy as np

from ..._validate import BLOCK
from ...graph import MDPGraph
from ...lp.dense import ColumnStore, single_threaded_blas
from ...lp.executors import EXECUTORS, start_worker_server
from ...lp.outcome import Status, loss_bound, relative_gap, round_message
from ...mechanism import Mechanism, SolveResult
from ...progress import Progress, bounds_line, report
from ...space import Space
from ..model import MAX_LOG_RATIO
from .config import BOX_FLOOR, EXACT_TOLERANCE, FREE_COLUMNS, SECOND_PASS_WORK, UPPER_NEAR, OutputsConfig
from .incumbent import Incumbent
from .master import ColumnMaster, new_columns
from .pricing import Pricer, cone_rows, make_pricer


#: Bytes of an interpreter and its libraries (every 500-record run peaked at 0.24-0.38 GB);
#: each local worker process (``executor`` 'process', a Dask LocalCluster) has its own.
BASE_BYTES = 0.3e9
#: Bytes a pricing model holds per cone row of its working set: HiGHS's model, its solver's
#: copy and its factor (550-960 bytes per row added, measured between the rounds of the Sydney
#: runs at 2,000 and 5,000 records, ``results/growing_2000.json``, ``growing_5000_age.json``).
ROW_BYTES = 1000.0
#: The working-set rule's multiple of n x sqrt(mean neighbours) (:func:`working_set_rows`).
WORKING_SET_SHARE = 1.5


def working_set_rows(n: int, pairs: int, config: OutputsConfig) -> float:
    """The most cone rows one pricing model holds at once, at most every row (``2 pairs``): a
    cone of at most ``working_set_from`` x n rows starts with all of them (the engine counts
    the rows left after implied pairs are removed, so any cone may start full up to that
    size), and otherwise the working set stays below ``WORKING_SET_SHARE`` x n x the square
    root of the mean neighbours. That part is measured, not derived: the 49 recorded runs of
    the growing-density family (500-5,000 records, 11-104 neighbours, four road networks)
    held at most 0.99 of n x sqrt(neighbours) (``growing.py --memory-from``,
    ``results/memory_estimate.md``), 400 Gaussian records with every pair protected 1.15; a
    generator test runs sparse to every-pair cones on Gaussian and grid records."""
    rows = 2.0 * pairs                        # both directions of every protected pair
    grown = WORKING_SET_SHARE * n * math.sqrt(rows / max(n, 1))
    return min(rows, max(config.working_set_from * n, grown))


def memory_parts(n: int, k: int, pairs: int, config: OutputsConfig | None = None, *, rounds: int = 500,
                 local_workers: int = 0) -> dict[str, float]:
    """Bytes the engine may hold at its peak on ``n`` records, ``k`` outputs and ``pairs``
    protected pairs within ``rounds`` rounds, by part: the interpreters (``BASE_BYTES``, one
    more per local worker process); the dense columns (the store at both masters' column
    limits, ``columns`` + ``FREE_COLUMNS`` x n, or the start's 2 n and two passes of k a round
    if fewer, plus the start's tents and path distances) and a dense master's normal matrix
    and factor, 8 n^2 bytes each; the pricing models (:func:`working_set_rows` x
    ``ROW_BYTES`` per output), which live in the workers under Dask; the upper step (the masks
    of the mDP rows its row repair and rebalancing have added, a byte a pair, direction and
    output; 64 bytes a pair; and ten blocks of their violation scans,
    :data:`certdp._validate.BLOCK`); and the n x k matrices. Over the 49 recorded runs it is
    1.4-3.8 times the measured peak (the store reaches its limits only in long runs, and the
    working-set rule keeps a margin; ``growing.py --memory-from``). The master's HiGHS
    fallback, rare, checks its own memory when it runs."""
    config = config if config is not None else OutputsConfig()
    if not isinstance(config, OutputsConfig):
        raise TypeError(f"config must be an OutputsConfig, got {type(config).__name__}")
    dense = 8.0 * n * n
    stored = min((config.columns + FREE_COLUMNS) * n, 2.0 * n + 2.0 * k * rounds)
    return {"base": BASE_BYTES * (1 + local_workers),
            "columns": 8.0 * n * stored + 2.0 * dense,
            "master": 2.0 * dense,
            "pricing": ROW_BYTES * k * working_set_rows(n, pairs, config),
            "upper": 2.0 * pairs * k + 64.0 * pairs + 10 * 8.0 * BLOCK,
            "matrices": 80.0 * n * k}


def default_workers() -> int:
    """The cores this process may use (a container may allow fewer than cpu_count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def second_pass(first_pass_columns: int, generated: int, K: int, pricing_iterations: int,
                master: ColumnMaster, config: OutputsConfig) -> bool:
    """Whether to price a second time in a round, at the master's duals besides the smoothed
    ones. The rounds are bounded below by the columns the master needs (about N besides its
    start, at most K a pass), so a second pass pays where columns are what the run lacks: the
    first pass was productive (at least ``productive_share`` x K new columns) and either fewer
    than N columns were generated so far or a pass is cheap against the master by the work
    model (simplex iterations x ``SECOND_PASS_WORK`` x N against the last stabilised master's
    dense work: rows^2 x columns x interior-point steps, summed over its parts). Work and
    columns, not clocks, so the run does not depend on timing."""
    if first_pass_columns < config.productive_share * K:
        return False
    cheap = pricing_iterations * SECOND_PASS_WORK * master.n < master.work
    return generated < master.n or cheap


class PricingLoop:
    """The lower-bound side of a run: the instance in cost units, the stabilised master, the
    pricer and the best Lagrangian bound. Priced columns go to the :class:`Incumbent` too."""

    def __init__(self, space: Space, *, reduce: bool, tolerance: float, workers: int, executor: str,
                 scheduler: str | None, config: OutputsConfig) -> None:
        self.space = space
        N, self.K = space.n_records, space.n_outputs
        self.eps = space.epsilon
        self.config = config
        wc = space.weighted_cost
        self.scale = float(wc.max()) if wc.size and wc.max() > 0 else 1.0
        self.C = wc / self.scale
        graph = MDPGraph.from_space(space)
        implied = graph.implied_edges() if reduce else np.zeros(graph.n_edges, dtype=bool)
        # rows with a ratio beyond exp(MAX_LOG_RATIO) are left out of the cone, as in the monolithic
        # LP: a relaxation (the bound stays valid), and certification covers every pair
        keep = ~implied & (self.eps * graph.distance <= MAX_LOG_RATIO)
        self.edges, self.dist = graph.edges[keep], graph.distance[keep]
        self.A = cone_rows(N, self.edges, self.dist, self.eps)
        tents = np.exp(-self.eps * graph.path_distances())  # column a: exp(-eps D(., a)), 0 off a's component
        # lambda_i = min_k c[i,k]: a valid start, with bound sum_i min_k c[i,k]
        center = self.C.min(axis=1)
        # the box half-width of record i: a share of its own cost range, and at least a share of
        # the largest range (records with nearly flat costs must still move)
        spread = self.C.max(axis=1) - self.C.min(axis=1)
        self.delta = config.box * np.maximum(spread, BOX_FLOOR * (float(spread.max()) or 1.0))
        self.n_comp, self.comp = graph.components
        # every master's columns live once, in one store: the stabilised and the free master
        # share most of theirs
        self.store = ColumnStore(N)
        self.master = ColumnMaster(N, tolerance, self.comp, self.store)   # with the box: the duals
        self.master.set_box(center, self.delta)
        self.upper = Incumbent(space, self.C, self.A, self.edges, self.dist, self.comp, self.n_comp, tolerance,
                               config, self.store)
        self.add((self.comp[:, None] == np.arange(self.n_comp)[None, :]).astype(np.float64))
        self.add(tents)
        self.upper.protect_start()
        self.generated = 0                          # columns priced in so far (not counting the start)
        self.executor = executor
        self.pricer: Pricer = make_pricer(executor, self.A, self.C, tolerance, workers, scheduler, config)
        self.lb = float(center.sum())
        self.alpha = 0.5                            # the smoothing weight (Pessoa et al. 2018 adjust it)
        self.seconds = {"master": 0.0, "price": 0.0}

    def add(self, R: np.ndarray) -> None:
        """New columns (points of P): each charged at its cheapest output and given to it, into
        the store once, for the stabilised master and the upper bound's masters."""
        costs = self.C.T @ R                  # (K, n_new): c_k' r_s
        owner = np.argmin(costs, axis=0)
        g = costs[owner, np.arange(R.shape[1])]
        slots = self.master.add(R, owner, g)
        self.upper.attach(slots, owner, g, self.master.col_comp[self.master.n_cols - len(slots):])

    def price(self, lam: np.ndarray, smooth: bool) -> tuple[float, np.ndarray, np.ndarray, int]:
        """Price at the smoothed duals and, when nothing prices out there or a second pass is
        cheap against the master (:func:`second_pass`), at the master's duals too; returns the
        better of the two Lagrangian bounds, the duals it was taken at, the new columns and the
        pricing iterations (and adjusts the smoothing weight)."""
        center = self.master.center
        alpha = self.alpha
        lam_s = center + (1.0 - alpha) * (lam - center) if smooth else lam
        bounds, Znew, iters = self.pricer.price(lam_s)
        lb_here, lam_lb = float(lam_s.sum() + bounds.sum()), lam_s
        if smooth:
            # Pessoa et al. (2018): if the Lagrangian rises from the smoothed point towards the
            # master's duals (subgradient 1 - sum_k z_k), smooth less; else smooth more
            if float((1.0 - Znew.sum(axis=1)) @ (lam - lam_s)) > 0:
                self.alpha = max(0.0, alpha - 0.1)
            else:
                self.alpha = min(0.95, alpha + 0.1 * (1.0 - alpha))
        cols = new_columns(Znew, self.C, lam, self.comp, self.n_comp)
        if smooth and (cols.shape[1] == 0 or second_pass(cols.shape[1], self.generated, self.K, iters, self.master,
                                                         self.config)):
            bounds, Z_master, extra = self.pricer.price(lam)
            iters += extra
            cols = new_columns(np.hstack([Znew, Z_master]), self.C, lam, self.comp, self.n_comp)
            lb_master = float(lam.sum() + bounds.sum())
            if lb_master > lb_here:
                lb_here, lam_lb = lb_master, lam
        return lb_here, lam_lb, cols, iters


def _result(loop: PricingLoop, space: Space, status: Status, it: int, history: list[dict[str, Any]],
            workers: int, t_start: float, t_build: float, gap: float) -> SolveResult:
    up = loop.upper
    if up.best is None:  # no mechanism yet (e.g. a 1-round limit): solve the free master once
        up.solve_free()
    assert up.best is not None
    t0 = time.perf_counter()
    mech, cert = Mechanism.certified(space, up.best, method="outputs")
    up.seconds["cert"] += time.perf_counter() - t0
    upper_bound = float(np.sum(loop.C * mech.matrix)) * loop.scale
    lower = loss_bound(loop.lb * loop.scale, upper_bound)
    all_e = space.neighbor_pairs[0]
    N, K = space.n_records, space.n_outputs
    stats = {"n_records": N, "n_outputs": K, "columns": loop.master.n_cols, "edges": len(all_e),
             "edges_kept": len(loop.edges), "constraints_before": 2 * len(all_e) * K + N,
             "constraints_after": 2 * len(loop.edges) * K + N, "certify_mixing": cert.mixing, "workers": workers,
             "master_fallbacks": loop.master.fallbacks + up.free.fallbacks,
             "pricing_fallbacks": loop.pricer.fallbacks, "pricing_failures": loop.pricer.failures,
             "pricing_replays": loop.pricer.replays, "pricing_calls": list(loop.pricer.rounds),
             "executor": loop.executor, "config": asdict(loop.config), **up.counts}
    timings = {"build": t_build, "master": loop.seconds["master"], "free_master": up.seconds["free"],
               "pricing": loop.seconds["price"], "certify": up.seconds["cert"],
               "total": time.perf_counter() - t_start}
    true_gap = relative_gap(upper_bound, lower)
    return SolveResult(mechanism=mech, method="outputs", status=status, upper_bound=upper_bound, lower_bound=lower,
                       gap=true_gap, iterations=it, history=tuple(history), timings=timings, stats=stats,
                       message=round_message(status, true_gap, gap, it))


def solve_outputs(space: Space, *, gap: float = 1e-2, max_iterations: int = 500, time_limit: float | None = None,
                  reduce: bool = True, tolerance: float = 1e-9, workers: int | None = None,
                  executor: str | None = None, scheduler: str | None = None,
                  config: OutputsConfig | None = None, progress: Progress | None = None) -> SolveResult:
    """Solve PMO by the decomposition over outputs and return a certified mechanism.

    Stops at the relative ``gap`` between the certified cost and the rigorous lower bound, at
    ``max_iterations`` rounds, or at ``time_limit`` seconds (checked in each round, after its
    master and pricing). The round that passes ``time_limit`` takes an upper step unless its
    lower bound has not moved since the last one or that one is fewer than ``UPPER_NEAR``
    rounds back, so a capped run returns the upper bound of its last columns and may end one
    round and one upper step past the limit. The result is always the best certified matrix
    found, with its true gap. ``workers`` threads run the pricing LPs (default: one per core);
    the result does not depend on it.
    ``executor='process'`` runs them on ``workers`` local processes instead
    (:class:`~certdp.pmo.outputs.pricing.ProcessPricer`), ``executor='dask'`` on a Dask
    cluster: the one at ``scheduler`` (an address; giving it implies 'dask'), or a LocalCluster
    of ``workers`` processes (:class:`~certdp.pmo.outputs.pricing.DaskPricer`). Either way the
    result is the threaded run's, and a lost worker's outputs are rebuilt and replayed.
    ``config`` is the engine's tuning (:class:`~certdp.pmo.outputs.config.OutputsConfig`; its
    defaults when None). Options are checked by :func:`certdp.solve`.
    """
    if scheduler and executor not in (None, "dask"):
        raise ValueError(f"a scheduler address prices on that Dask cluster: executor must be 'dask' or left "
                         f"out with it, got {executor!r}")
    executor = executor or ("dask" if scheduler else "threads")
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)} for the outputs decomposition, "
                         f"got {executor!r}")
    config = config if config is not None else OutputsConfig()
    workers = default_workers() if workers is None else workers
    t_start = time.perf_counter()
    if executor == "process":
        start_worker_server()   # its imports overlap the build below
    loop = PricingLoop(space, reduce=reduce, tolerance=tolerance, workers=workers, executor=executor,
                       scheduler=scheduler, config=config)
    t_build = time.perf_counter() - t_start
    history: list[dict[str, Any]] = []
    try:
        # the rounds' own numpy work is small products beside HiGHS solves and the dense
        # masters (which limit BLAS themselves): on one BLAS thread, no worker threads spin
        # after each call and take a core from the pricing threads
        with single_threaded_blas():
            status, it = _rounds(loop, gap, max_iterations, time_limit, t_start, history, progress)
    finally:
        loop.pricer.close()
    return _result(loop, space, status, it, history, workers, t_start, t_build, gap)


class _Meter:
    """Process CPU seconds and the peak resident memory after each part of a round (what each
    part costs, for the benchmarks; the run reads neither)."""

    def __init__(self) -> None:
        self.record: dict[str, float] = {}
        self.cpu = time.process_time()

    def part(self, name: str) -> None:
        now = time.process_time()
        self.record[f"{name}_cpu"] = now - self.cpu
        self.cpu = now
        if resource is not None:
            self.record[f"{name}_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _upper_due(it: int, it_upper: int, lb_at_upper: float, value: float, tol: float, lb: float, ub: float,
               gap: float, config: OutputsConfig) -> bool:
    """Whether round ``it`` takes an upper step. The upper bound moves little after the first
    rounds (grid-500: 0.6% from round 7 to 20, while the lower bound moves 3%): every
    ``upper_every`` rounds (the columns move it too), and when the gap is near the target, the
    lower bound has moved, the stabilised master's ``value`` could close the gap and the last
    upper step is at least ``UPPER_NEAR`` rounds back. That value bounds every mechanism in the
    span of the stabilised master's columns; the free master keeps more columns and the repair
    leaves the span, so this is a filter, not a proof (it decides only which candidates are
    tried; every bound stays rigorous)."""
    if not math.isfinite(ub) or it - it_upper >= config.upper_every:
        return True
    closable = value <= lb / (1.0 - gap) * (1.0 + tol)
    return (closable and lb > lb_at_upper and gap < relative_gap(ub, lb) <= 2 * gap
            and it - it_upper >= UPPER_NEAR)


def _rounds(loop: PricingLoop, gap: float, max_iterations: int, time_limit: float | None, t_start: float,
            history: list[dict[str, Any]], progress: Progress | None) -> tuple[Status, int]:
    """The rounds of a run, recorded into ``history``; the status and the last round."""
    cfg, up, master = loop.config, loop.upper, loop.master
    N = loop.space.n_records
    status = Status.ITERATION_LIMIT
    lb_at_upper = -math.inf
    it_upper = it = 0
    tol_cap = cfg.master_tolerance
    for it in range(1, max_iterations + 1):
        # an inexact master (primal-dual column generation): solved to a share of the gap
        g_now = relative_gap(up.ub, loop.lb) if math.isfinite(up.ub) else math.inf
        tol = max(EXACT_TOLERANCE, min(tol_cap, cfg.gap_share * g_now))
        meter = _Meter()
        lam, b, slack, obj, value, secs = master.solve(tol=tol)
        loop.seconds["master"] += secs
        meter.part("master")
        t0 = time.perf_counter()
        lb_here, lam_lb, cols, p_iters = loop.price(lam, smooth=it > 1 and loop.alpha > 0)
        tp = time.perf_counter() - t0
        loop.seconds["price"] += tp
        meter.part("pricing")
        serious = lb_here > loop.lb
        if serious:                  # a serious step: move the box to these duals
            loop.lb = lb_here
            master.set_box(lam_lb, master.delta)
        free_before = up.seconds["free"]
        # the round that passes the time limit is the last: it takes an upper step if the
        # columns moved the lower bound since the last one, UPPER_NEAR rounds back or more, so
        # a capped run returns the bound of its last columns, not of its last scheduled step
        # (10,000 Sydney records on a cluster: round 1's, eight rounds old); a step fewer
        # rounds back gains little (Helsinki at 2,000 records: 0.03% after one round)
        last = time_limit is not None and time.perf_counter() - t_start >= time_limit
        final = last and loop.lb > lb_at_upper and it - it_upper >= UPPER_NEAR
        stepped = final or _upper_due(it, it_upper, lb_at_upper, value, tol, loop.lb, up.ub, gap, cfg)
        if stepped:
            it_upper, lb_at_upper = it, loop.lb
            up.step(lam, loop.delta, master, b, slack, loop.lb)
        meter.part("upper")
        if math.isfinite(up.ub) and loop.lb > up.ub * (1 + 1e-7) + 1e-12:
            raise AssertionError(f"lower bound {loop.lb} exceeds the certified cost {up.ub}")
        g = relative_gap(up.ub, loop.lb)
        rec = {"iteration": it, "lower_bound": loop.lb * loop.scale, "upper_bound": up.ub * loop.scale, "gap": g,
               "master_objective": obj * loop.scale, "master_value": value * loop.scale, "slack": slack,
               "box": float(np.max(master.delta)), "cuts_added": int(cols.shape[1]), "columns": master.n_cols,
               "master_seconds": secs, "master_iterations": master.iterations, "master_work": master.work,
               "master_tolerance": tol, "free_master_seconds": up.seconds["free"] - free_before,
               "free_columns": up.free.n_cols, "sub_seconds": tp, "pricing_iterations": p_iters,
               "pricing_rows": loop.pricer.working_rows, "master_flops": master.flops, "free_flops": up.free.flops,
               "smoothing": loop.alpha, "upper_step": stepped, "elapsed": time.perf_counter() - t_start,
               **meter.record}
        history.append(rec)
        report(progress, "round", bounds_line("round", rec, "columns", "columns"), rec)
        if g <= gap:
            return Status.OPTIMAL, it
        if last:
            return Status.TIME_LIMIT, it
        if cols.shape[1] > 0:
            # above the column limit, prune those idle at the master's weights for two rounds
            # running: every IPM step costs ~ columns x N^2, and too few columns cost rounds;
            # one idle round is not enough (a small Gaussian case then deletes and prices the
            # same two columns in turn and its bound stalls)
            rec["deleted"] = master.prune(lam, b, int(cfg.columns * N), weight=1e-3, reduced=1e-4, patience=2)
            loop.add(cols)
            loop.generated += cols.shape[1]
        elif not serious:            # nothing prices out and the box did not move
            if tol > EXACT_TOLERANCE:   # the duals may be off by the tolerance: solve more exactly
                tol_cap = tol / 10
            elif slack > 1e-6:         # the box binds where it stands: widen it
                master.set_box(master.center, master.delta * 10)
            else:                    # and it does not bind: done
                up.solve_free()
                return (Status.OPTIMAL if relative_gap(up.ub, loop.lb) <= gap else Status.STALLED), it
    return status, it
