"""The pricing step of the outputs decomposition: one LP per output over the mDP polytope.

For row-sum duals lambda and output k the pricing problem is ``min (c_k - lambda)' z`` over
``P = {z : A z <= 0, 0 <= z <= 1}``, with ``A z <= 0`` the mDP cone of one output (M = 2 x kept
edges rows, N variables). It is solved in its LP-dual form, with y >= 0 on the cone rows and
mu >= 0 on the bounds ``z <= 1``:

    (dual)    min 1'mu  s.t.  A'y + mu >= -w,  y, mu >= 0,      w = c_k - lambda,

whose optimum is minus the primal one. The dual form has N rows instead of M (about 25 x fewer
at N = 1,000), so its simplex iterations are cheaper and fewer: whole solves took 1.4-2.4x less
time than in the primal form on the 500- and 1,000-record benchmark instances, except road-500
(16% more; docs/history.md has the table). Only the right-hand side changes between rounds, so
each output's HiGHS model stays alive. The minimiser z is the dual form's row duals (a vertex
of P), and y gives a rigorous bound whatever HiGHS's accuracy: for any y >= 0 and z in P,
``w'z >= (w + A'y)'z >= sum_j min(0, (w + A'y)_j)`` (the Lagrangian bound of
:mod:`certdp.lp.bounds` for rows with right-hand side 0 over the box [0, 1], in closed form).

Each model holds only a **working set** of the cone rows (columns y of the dual form): it starts
with none, and after each solve the rows that the minimiser z violates by more than the
tolerance (``A_r z > tol``: exactly the columns whose reduced cost would make HiGHS pivot) join
it, the most violated first, at most N / 4 at a time, until none is violated; then z is the
minimiser over the whole of P and the bound is the whole LP's. A vertex of P is
``exp(-eps D(., S))`` on each connected component (S the records at 1, D the path distance), so
it is fixed by one shortest-path tree, and few rows are ever needed: over a replay of every
round, on average 3,100 of 24,354 rows per output on Gaussian 1,000 records with eta fixed (24
neighbours each), 390 of 6,512 on road-500 and 1,900 of 6,002 on text-500; pricing took 2.9x,
1.8x and 1.35x less time than with every row (docs/history.md). Rows also leave: one strictly
slack at the minimiser for ``working_set_age`` solves in a row is deleted (at 5,000 Sydney
records the models then held 2.1 million rows against 5.0 million, and pricing took 20.5
against 38.2 CPU s a later round; docs/pmo.md).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from ...lp.executors import EXECUTORS, DaskHolders, ProcessHolders, ReplayedGroups, close_dask, dask_client
from ...lp.highs import INF, HighsLP, LPSolution
from ..model import mdp_rows
from .config import OutputsConfig


def cone_rows(n: int, edges: np.ndarray, dist: np.ndarray, eps: float) -> sp.csr_matrix:
    """The cone C as ``A z <= 0``: one output's mDP rows, all "i -> j" rows first, then all
    "j -> i" (the pricing LPs' pivoting, hence the columns generated, depend on the order)."""
    m = len(edges)
    return mdp_rows(n, 1, edges, dist, eps)[np.r_[0:2 * m:2, 1:2 * m:2]]


class OutputModels:
    """The live pricing models of the outputs ``ks`` (every output on threads; a share of them
    in a worker process or a Dask actor). ``C`` holds those outputs' cost columns. A model is
    built the first time its output is priced; afterwards its right-hand side changes and its
    working set of cone rows grows (module docstring), both driven by the duals alone, so an
    output's answers depend only on the sequence of duals it was priced at, not on where it
    lives."""

    def __init__(self, A: sp.csr_matrix, C: np.ndarray, ks: np.ndarray, tolerance: float,
                 config: OutputsConfig | None = None) -> None:
        self.config = config if config is not None else OutputsConfig()
        self.A = sp.csr_matrix(A)
        self.AT = sp.csc_matrix(self.A.T)        # column r: cone row r, a column of the dual form
        self.m, self.n = self.A.shape
        self.C = np.asarray(C, dtype=np.float64)
        self.ks = np.asarray(ks, dtype=np.int64)
        self.models: list[HighsLP] = []
        self.rows: list[np.ndarray] = []          # each model's working set, in column order
        self.active: list[np.ndarray] = []        # the same as a mask over the cone rows
        self.idle: list[np.ndarray] = []          # per working row: solves it was slack in a row
        self.dropped = 0                          # rows that left a working set (:meth:`_age`)
        self.batch = max(1, int(self.config.working_set_batch * self.n))
        self.tolerance = tolerance
        self.cols = np.arange(self.n, dtype=np.int32)
        self.no_upper = np.full(self.n, INF)
        self.fallbacks = 0   # solves the live model failed and a fresh interior-point one did
        self.failures = 0    # solves both failed: the bound of y = 0 and no column

    def _build(self, w: np.ndarray) -> HighsLP:
        """The dual form over the initial working set (``config.working_set_from``)."""
        rows = self.rows[-1]
        AD = sp.hstack([sp.identity(self.n, format="csc"), self.AT[:, rows]], format="csr")
        k = self.n + rows.size
        m = HighsLP(np.r_[np.ones(self.n), np.zeros(rows.size)], AD, -w, self.no_upper, np.zeros(k),
                    np.full(k, INF), solver="simplex", tolerance=self.tolerance, presolve=False)
        # primal simplex: the basis stays feasible when rows join the working set, and it was
        # measured faster than dual simplex in this form on text-500 (13.0 s against 13.9 s of
        # pricing) and on replays of the 1,000-record instances (gauss / text / road 3.4 / 8.9 /
        # 1.7 s against 6.0 / 9.1 / 2.3 s), slower only on road-500 (1.7 s against 1.1 s)
        m.set_option("simplex_strategy", 4)
        return m

    def _fallback(self, w: np.ndarray) -> tuple[LPSolution, np.ndarray]:
        """A fresh interior-point solve over every cone row (with crossover, so the minimiser is
        still a vertex): where epsilon x distance is large the rows span six orders of magnitude
        against right-hand sides near 1e-6, and the live simplex model can end in status
        'Unknown' (grid-500 at eps = 10 per km) where the interior-point method does not.
        Returns the solution and y."""
        self.fallbacks += 1
        AD = sp.hstack([self.AT, sp.identity(self.n)], format="csr")
        sol = HighsLP(np.r_[np.zeros(self.m), np.ones(self.n)], AD, -w, self.no_upper,
                      np.zeros(self.m + self.n), np.full(self.m + self.n, INF),
                      solver="ipm", tolerance=self.tolerance, presolve=True).solve()
        return sol, (sol.x[:self.m] if sol.x is not None else np.zeros(self.m))

    def weights(self, lam: np.ndarray) -> list[np.ndarray]:
        """``c_k - lam`` for each of this group's outputs; builds the models not built yet."""
        W = [np.ascontiguousarray(self.C[:, j] - lam) for j in range(len(self.ks))]
        while len(self.models) < len(W):
            start = self.m <= self.config.working_set_from * self.n
            self.rows.append(np.arange(self.m) if start else np.zeros(0, dtype=np.int64))
            self.idle.append(np.zeros(self.rows[-1].size, dtype=np.int32))
            self.active.append(np.full(self.m, start))
            self.models.append(self._build(W[len(self.models)]))
        return W

    def _solve_working_set(self, j: int) -> tuple[LPSolution, int, np.ndarray | None]:
        """Solve model ``j``, adding the violated cone rows until none is; the last solution,
        the iterations of every solve and which working rows are strictly slack at the
        minimiser (None where that was not computed)."""
        m, active = self.models[j], self.active[j]
        iterations = 0
        while True:
            sol = m.solve(fetch=("row_dual",))      # z; y is read once, from the last solve
            iterations += sol.iterations
            if sol.status != "optimal" or sol.row_dual is None or self.rows[j].size == self.m:
                return sol, iterations, None
            v = self.A @ sol.row_dual
            bad = np.flatnonzero((v > self.tolerance) & ~active)
            if bad.size == 0:
                return sol, iterations, v[self.rows[j]] < -self.tolerance
            bad = bad[np.argsort(-v[bad], kind="stable")[:self.batch]]
            m.add_cols(self.AT[:, bad], np.zeros(bad.size), np.zeros(bad.size), np.full(bad.size, INF))
            self.rows[j] = np.r_[self.rows[j], bad]
            self.idle[j] = np.r_[self.idle[j], np.zeros(bad.size, dtype=np.int32)]
            active[bad] = True

    def _age(self, j: int, slack: np.ndarray) -> None:
        """Count the solves each working row of model ``j`` has been strictly slack at the
        minimiser (``A_r z < -tol``: its column in the dual form has a positive reduced cost,
        so it is nonbasic and its deletion keeps the basis); rows slack for
        ``config.working_set_age`` solves in a row leave the model. The working set only shapes the
        path to the minimiser: a row that is violated again joins again, and the minimiser and
        bound are over the whole of P whatever the set (module docstring)."""
        if self.config.working_set_age == 0:
            return
        idle = np.where(slack, self.idle[j] + 1, 0).astype(np.int32)
        out = idle >= self.config.working_set_age
        if out.sum() < self.batch:               # deletions in batches: each one rebuilds HiGHS's copies
            self.idle[j] = idle
            return
        self.models[j].delete_cols(self.n + np.flatnonzero(out))
        self.dropped += int(out.sum())
        self.active[j][self.rows[j][out]] = False
        self.rows[j] = self.rows[j][~out]
        self.idle[j] = idle[~out]

    def one(self, j: int, w: np.ndarray) -> tuple[float, np.ndarray, int]:
        """Output ``ks[j]`` at ``w = c - lam``: a rigorous bound, the minimiser, the iterations."""
        self.models[j].set_row_bounds(self.cols, -w, self.no_upper)
        sol, iterations, slack = self._solve_working_set(j)
        if sol.status == "optimal" and sol.row_dual is not None:
            # columns: mu, then the working set in order; y is 0 on the cone rows outside it
            y = np.zeros(self.m)
            y[self.rows[j]] = self.models[j].primal()[self.n:]
            if slack is not None:
                self._age(j, slack)
        else:
            sol, y = self._fallback(w)
            iterations += sol.iterations
            if sol.status != "optimal" or sol.row_dual is None or sol.x is None:
                # no column, and the bound of y = 0 (min of w'z over the box): valid, only weaker
                self.failures += 1
                return min(float(np.minimum(w, 0.0).sum()), 0.0), np.zeros(self.n), iterations
        # the Lagrangian bound (certdp.lp.bounds) of multipliers -y <= 0 on the rows A z <= 0 over
        # the box [0, 1]: the rows' right-hand sides are 0, so it is sum_j min(0, (w + A'y)_j)
        v = float(np.minimum(w + self.AT @ np.maximum(y, 0.0), 0.0).sum())
        return min(v, 0.0), np.clip(sol.row_dual, 0.0, 1.0), iterations  # z = 0 is in P: min <= 0

    @property
    def working_rows(self) -> int:
        """The cone rows in this group's models together (their LPs' size beyond the N rows)."""
        return int(sum(r.size for r in self.rows))

    def price(self, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, int, float, int]:
        """Every output of the group in turn (a worker's call): ``(ks, bounds, Z, iterations,
        fallbacks, failures, seconds, working rows)``, fallbacks and failures cumulative, seconds
        this call's compute time."""
        t0 = time.perf_counter()
        out = [self.one(j, w) for j, w in enumerate(self.weights(lam))]
        return (self.ks, np.array([o[0] for o in out]), np.column_stack([o[1] for o in out]),
                int(sum(o[2] for o in out)), self.fallbacks, self.failures, time.perf_counter() - t0,
                self.working_rows)


class Pricer(Protocol):
    """What the decomposition needs of a pricer, wherever its LPs run (:func:`make_pricer`)."""

    @property
    def replays(self) -> int:
        """groups rebuilt and replayed after a lost worker"""

    rounds: list[dict[str, float]]
    """per call: the wall time, and the slowest group's and all groups' compute times"""

    @property
    def working_rows(self) -> int:
        """the cone rows in every output's pricing model together"""

    @property
    def fallbacks(self) -> int:
        """solves the live model failed and a fresh interior-point one did"""

    @property
    def failures(self) -> int:
        """solves both failed (the bound of y = 0 and no column)"""

    def price(self, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Rigorous lower bounds on ``min_{z in P} (c_k - lam)' z`` for every output k, the
        minimisers (as columns, in output order) and the simplex iterations spent."""

    def close(self) -> None:
        """Release the workers."""


class ThreadPricer:
    """Every output's live model in this process; the K solves of a round run on ``workers``
    threads (HiGHS releases the GIL while it solves and the models are independent, so the
    result does not depend on ``workers``)."""

    def __init__(self, A: sp.csr_matrix, C: np.ndarray, tolerance: float, workers: int,
                 config: OutputsConfig | None = None) -> None:
        self.group = OutputModels(A, C, np.arange(C.shape[1]), tolerance, config)
        self.pool = ThreadPoolExecutor(workers) if workers > 1 else None
        self.replays = 0
        self.rounds: list[dict[str, float]] = []

    @property
    def fallbacks(self) -> int:
        """As :attr:`Pricer.fallbacks`."""
        return self.group.fallbacks

    @property
    def working_rows(self) -> int:
        """As :attr:`Pricer.working_rows`."""
        return self.group.working_rows

    @property
    def failures(self) -> int:
        """As :attr:`Pricer.failures`."""
        return self.group.failures

    def close(self) -> None:
        """End the threads; solves not started are dropped (the caller may be unwinding from
        Ctrl-C), the ones under way finish their LP."""
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def price(self, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """As :meth:`Pricer.price`."""
        g = self.group
        t0 = time.perf_counter()
        W = g.weights(lam)                 # models built here, in one thread
        if self.pool is None:
            out = [g.one(j, w) for j, w in enumerate(W)]
        else:
            out = list(self.pool.map(g.one, range(len(W)), W))
        wall = time.perf_counter() - t0
        self.rounds.append({"wall": wall, "compute_max": wall, "compute_sum": wall})
        bounds = np.array([o[0] for o in out])
        Z = np.column_stack([o[1] for o in out])
        return bounds, Z, int(sum(o[2] for o in out))



class _GroupedPricer:
    """The outputs split into ``n_groups`` interleaved groups, each group's live models
    (:class:`OutputModels`) held by one worker: a process (:class:`ProcessPricer`) or a Dask
    actor (:class:`DaskPricer`). A round sends every worker only the duals and gathers the
    answers in output order, so the run is the threaded run, to the bit.

    A worker lost mid-run loses its models, and their state depends on every dual they were
    priced at; :class:`~certdp.lp.executors.ReplayedGroups` then rebuilds the group on a new
    worker and replays it through the duals of every earlier round, which restores the same
    models, before the round is priced again (or reports the loss, as that module says).
    ``replays`` counts those rebuilds; ``rounds`` records each call's wall time and its
    groups' compute times (the difference is transfer and waiting)."""

    def __init__(self, A: sp.csr_matrix, C: np.ndarray, tolerance: float, n_groups: int,
                 config: OutputsConfig | None = None) -> None:
        K = C.shape[1]
        self.config = config if config is not None else OutputsConfig()
        n = max(1, min(n_groups, K))
        self.groups = [np.arange(i, K, n) for i in range(n)]   # interleaved: neighbouring outputs cost alike
        self.A_data = A
        self.C = C
        self.tolerance = tolerance
        self.rounds: list[dict[str, float]] = []
        self._counts = [(0, 0, 0)] * len(self.groups)
        self.work: ReplayedGroups | None = None

    def _what(self, i: int) -> str:
        return f"pricing group {i} ({len(self.groups[i])} outputs)"

    @property
    def workers(self) -> list[Any]:
        """What holds each group: a :class:`~certdp.lp.executors.WorkerProcess` or an actor."""
        return self.work.held if self.work is not None else []

    @property
    def replays(self) -> int:
        return self.work.replays if self.work is not None else 0

    @property
    def fallbacks(self) -> int:
        return sum(c[0] for c in self._counts)

    @property
    def failures(self) -> int:
        return sum(c[1] for c in self._counts)

    @property
    def working_rows(self) -> int:
        return sum(c[2] for c in self._counts)

    def price(self, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """As :meth:`Pricer.price`."""
        assert self.work is not None
        lam = np.asarray(lam, dtype=np.float64)
        t0 = time.perf_counter()
        parts = self.work.call_all([(lam,)] * len(self.groups))
        self._counts = [(p[4], p[5], p[7]) for p in parts]
        self.rounds.append({"wall": time.perf_counter() - t0, "compute_max": max(p[6] for p in parts),
                            "compute_sum": sum(p[6] for p in parts)})
        order = np.argsort(np.concatenate([p[0] for p in parts]), kind="stable")
        bounds = np.concatenate([p[1] for p in parts])[order]
        Z = np.hstack([p[2] for p in parts])[:, order]
        return bounds, Z, int(sum(p[3] for p in parts))

    def close(self) -> None:
        if self.work is not None:
            self.work.close()


class ProcessPricer(_GroupedPricer):
    """The pricing LPs on ``workers`` local processes, one group of outputs each. A process has
    its own interpreter, so the Python around each LP (about 40% of a road-500 pass) runs in
    parallel as well, which threads sharing one interpreter lock cannot do. Workers are forked
    from certdp's fork server (:func:`~certdp.lp.executors.worker_context`) and receive the
    cone rows and their cost columns once."""

    def __init__(self, A: sp.csr_matrix, C: np.ndarray, tolerance: float, workers: int,
                 config: OutputsConfig | None = None) -> None:
        super().__init__(A, C, tolerance, workers, config)
        self.work = ReplayedGroups(ProcessHolders(OutputModels, self._args, "price", self._what), len(self.groups))

    def _args(self, i: int) -> tuple:
        g = self.groups[i]
        return (self.A_data, self.C[:, g], g, self.tolerance, self.config)


class DaskPricer(_GroupedPricer):
    """The pricing LPs on a Dask cluster: one group of outputs per worker, each group's live
    models held by a Dask actor. The cone rows, which every group needs, are scattered once
    (broadcast, and again when a group is rebuilt: their holders may be gone too); each group
    receives its own cost columns once."""

    def __init__(self, A: sp.csr_matrix, C: np.ndarray, tolerance: float, workers: int = 2,
                 address: str | None = None, connect_timeout: float = 10.0,
                 config: OutputsConfig | None = None) -> None:
        client, cluster = dask_client(workers, address, "pricing on Dask", connect_timeout)
        self.client, self.cluster = client, cluster
        try:
            n_workers = max(1, len(client.scheduler_info().get("workers", {})) or workers)
            super().__init__(A, C, tolerance, n_workers, config)
            self.A: Any = None
            holders = DaskHolders(client, cluster, OutputModels, self._args, "price", self._what)
            self.work = ReplayedGroups(holders, len(self.groups))
        except BaseException:
            close_dask(client, cluster)
            raise

    def _args(self, i: int) -> tuple:
        if self.A is None or self.work is not None:    # first use, or a rebuild
            self.A = self.client.scatter(self.A_data, broadcast=True)
        g = self.groups[i]
        return (self.A, self.C[:, g], g, self.tolerance, self.config)


def make_pricer(executor: str, A: sp.csr_matrix, C: np.ndarray, tolerance: float, workers: int,
                scheduler: str | None = None, config: OutputsConfig | None = None) -> Pricer:
    """The pricer of ``executor`` (one of :data:`EXECUTORS`)."""
    if executor == "threads":
        return ThreadPricer(A, C, tolerance, workers, config)
    if executor == "process":
        return ProcessPricer(A, C, tolerance, workers, config)
    if executor == "dask":
        return DaskPricer(A, C, tolerance, workers, scheduler, config=config)
    raise ValueError(f"executor must be one of {', '.join(EXECUTORS)} for the outputs decomposition, got {executor!r}")
