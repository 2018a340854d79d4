"""One generic Benders engine for block-ladder LPs.

The problem::

    min  c0' y + sum_l c_l' x_l
    s.t. r0_lo <= A0 y <= r0_up                                   (master rows)
         lo_l - T_l y <= W_l x_l <= up_l - T_l y       for every block l
         y in [y_lo, y_up],  x_l in [x_lo_l, x_up_l]   (all finite)

The master holds ``y`` and one ``theta_l`` per block; block ``l`` holds ``x_l`` for a fixed
``y`` and only its row bounds change between iterations (its HiGHS model stays alive). The
master stays alive too and receives cuts through ``addRows``, so HiGHS hot-starts.

Cuts are Lagrangian (:mod:`certdp.lp.bounds`), hence valid whatever the solver's accuracy:
for *any* row multipliers ``pi`` of block l the bound is affine in ``y``; optimality cuts
``theta_l >= a + g' y`` use the block's duals, feasibility cuts ``0 >= a + g' y`` use a dual
ray (``c_l`` replaced by 0). The master's own lower bound is
computed the same way from its duals, so the reported lower bound is rigorous, and the upper
bound is always the cost of an actual feasible (y, x) pair. Each cost is counted once: ``c0``
only in the master objective, ``c_l`` only through ``theta_l``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from time import process_time  # CPU seconds in the history; time.perf_counter is the deadlines clock
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from ..progress import Progress, bounds_line, report
from .bounds import drop_small_coefficients, lagrangian_affine, lagrangian_bound
from .dense import single_threaded_blas
from .highs import INF, HighsLP
from .outcome import SolverLimitError, Status, relative_gap


# --------------------------------------------------------------------- the data
@dataclass(frozen=True, eq=False)
class BlockSpec:
    """One subproblem: ``lo - T y <= W x <= up - T y``, ``x`` in ``[x_lo, x_up]``.

    ``coupling`` lists the master variables that appear in ``T`` (``T`` has one column per
    entry of ``coupling``), so only those values are sent to the block. The last ``n_slack``
    variables are slacks of an elastic block (a relaxation: its solutions are points of the
    original problem only when their slack is 0). ``value_lo`` is a known lower bound on the
    block's value for every y (tighter than the box's, e.g. from its row sums), or None.
    ``basis`` is a starting basis for the block's first solve, as status codes of its columns
    and rows (:meth:`certdp.lp.highs.HighsLP.set_basis_status`), or None (the slack basis).
    """

    c: np.ndarray
    W: sp.csr_matrix
    lo: np.ndarray
    up: np.ndarray
    T: sp.csr_matrix
    coupling: np.ndarray
    x_lo: np.ndarray
    x_up: np.ndarray
    n_slack: int = 0
    value_lo: float | None = None
    basis: tuple[np.ndarray, np.ndarray] | None = None

    def affine(self, pi: np.ndarray, c: np.ndarray) -> tuple[float, np.ndarray]:
        """The Lagrangian minorant ``a + g' y[coupling]`` of this block from multipliers ``pi``
        (:func:`certdp.lp.bounds.lagrangian_affine`)."""
        return lagrangian_affine(c, self.W, self.lo, self.up, self.x_lo, self.x_up, pi, self.T)

    def cost_bounds(self) -> tuple[float, float]:
        """Bounds on ``c' x`` over the box (the bounds of ``theta``), the lower one raised to
        ``value_lo`` when that is known."""
        lo = float(np.minimum(self.c * self.x_lo, self.c * self.x_up).sum())
        hi = float(np.maximum(self.c * self.x_lo, self.c * self.x_up).sum())
        return (lo if self.value_lo is None else max(lo, min(self.value_lo, hi))), hi


def elastic(spec: BlockSpec, rows: np.ndarray, signs: np.ndarray, price: float, *, slack_up: float | np.ndarray,
            value_lo: float | None = None) -> BlockSpec:
    """``spec`` with one slack column per entry of ``rows``, in ``[0, slack_up]`` (finite, as
    every bound of the engine: the Lagrangian cuts need it) at ``price`` per
    unit, with coefficient ``signs`` in its row (-1 relaxes the row's upper side, +1 its lower
    side). Where the slacks can absorb every violation the master's y can cause, the block has
    a solution for every y, its duals on those rows are bounded by ``price`` and so are its
    cuts' coefficients (by ``price`` times the rows' T entries), and its value never exceeds the
    hard block's: the cuts it gives are valid for the hard problem. Its solutions are the hard
    block's when their slack is 0 (:class:`BlockSolver` reports the others as 'elastic')."""
    rows = np.asarray(rows, dtype=np.int64)
    ns = len(rows)
    S = sp.csr_matrix((np.asarray(signs, dtype=np.float64), (rows, np.arange(ns))), shape=(spec.W.shape[0], ns))
    return BlockSpec(c=np.r_[spec.c, np.full(ns, float(price))], W=sp.hstack([spec.W, S], format="csr"),
                     lo=spec.lo, up=spec.up, T=spec.T, coupling=spec.coupling,
                     x_lo=np.r_[spec.x_lo, np.zeros(ns)],
                     x_up=np.r_[spec.x_up, np.broadcast_to(np.asarray(slack_up, dtype=np.float64), (ns,))],
                     n_slack=spec.n_slack + ns, value_lo=value_lo)


@dataclass(frozen=True, eq=False)
class MasterSpec:
    """The master's own part: ``min c0' y, r_lo <= A0 y <= r_up, y in [y_lo, y_up]``."""

    c: np.ndarray
    A: sp.csr_matrix
    r_lo: np.ndarray
    r_up: np.ndarray
    y_lo: np.ndarray
    y_up: np.ndarray


@dataclass(frozen=True)
class Cut:
    """``theta_block >= const + coef' y[coupling]`` (optimality) or ``0 >= ...`` (feasibility)."""

    block: int
    feasibility: bool
    const: float
    coef: np.ndarray


@dataclass(frozen=True)
class BlockResult:
    """A block's answer for one ``y``: ``status`` is 'optimal', 'elastic' (an elastic block's
    optimum that uses its slack: a cut, but no feasible point), 'infeasible', 'time_limit' or
    'failed' (HiGHS could not solve it, even afresh and by interior point)."""

    block: int
    status: str
    value: float
    x: np.ndarray | None
    cut: Cut | None
    seconds: float
    iterations: int

    @property
    def feasible(self) -> bool:
        """Whether the block's LP was solved to optimality (so it gives an optimality cut)."""
        return self.status == "optimal"


# -------------------------------------------------------------------- the blocks
class BlockSolver:
    """Keeps one block's HiGHS model alive; only its row bounds change with ``y``. When the live
    model fails numerically, it is run once more from where it stopped; when that fails too,
    the block is solved afresh with presolve (tiny coupled values
    cleaned to 0 first), by dual simplex and then by interior point, before it is reported as
    failed. An elastic block (never infeasible) is solved with presolve throughout; a hard one
    without, so that the dual ray of an infeasible block refers to its own rows."""

    def __init__(self, index: int, spec: BlockSpec, tolerance: float = 1e-9) -> None:
        self.index = index
        self.spec = spec
        self.tolerance = tolerance
        self.model = self._model(*self._bounds(np.zeros(len(spec.coupling))), "simplex", spec.n_slack > 0)
        if spec.basis is not None:
            self.model.set_basis_status(*spec.basis)
        self.rows = np.arange(spec.W.shape[0], dtype=np.int32)

    def _model(self, lo: np.ndarray, up: np.ndarray, solver: str, presolve: bool) -> HighsLP:
        return HighsLP(self.spec.c, self.spec.W, lo, up, self.spec.x_lo, self.spec.x_up, solver=solver,
                       tolerance=self.tolerance, presolve=presolve)

    def _bounds(self, y_coupled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        shift = self.spec.T @ y_coupled
        return self.spec.lo - shift, self.spec.up - shift

    def _attempts(self, y_coupled: np.ndarray, deadline: float):
        """Solutions of the live model, run twice, then of fresh ones, until one is not a
        numerical failure; all within ``deadline`` (a ``time.perf_counter()`` instant). The
        second run starts from the basis where HiGHS gave up, set again (so refactorised, its
        simplex state discarded). On the Gold Coast's blocks at the paper's settings, 40 rounds
        of 4 users, the dual simplex stopped 'Unknown' 9 times near the optimum; 5 second runs
        ended optimal in 2 to 1,088 iterations, where a fresh presolved model takes 11,552 to
        17,544 (4 to 10 s)."""
        self.model.set_row_bounds(self.rows, *self._bounds(y_coupled))
        self.model.set_time_limit(_left(deadline))
        yield self.model, self.model.solve()
        self._adopt_basis(self.model)
        self.model.set_time_limit(_left(deadline))
        yield self.model, self.model.solve()
        clean = np.where(np.abs(y_coupled) < 1e-12, 0.0, y_coupled)
        for solver in ("simplex", "ipm"):
            m = self._model(*self._bounds(clean), solver, True)
            m.set_time_limit(_left(deadline))
            yield m, m.solve()

    def solve(self, y_coupled: np.ndarray, theta: float, time_limit: float | None = None) -> BlockResult:
        """Solve the block for the master's coupling values ``y_coupled`` and estimate ``theta``, and return its cut."""
        t0 = time.perf_counter()
        deadline = math.inf if time_limit is None else t0 + time_limit
        spec = self.spec
        iters = 0
        for model, sol in self._attempts(y_coupled, deadline):
            iters += sol.iterations
            if sol.status == "optimal" and sol.row_dual is not None:
                if model is not self.model:
                    self._adopt_basis(model)
                const, coef = spec.affine(sol.row_dual, spec.c)
                value = float(np.dot(spec.c, sol.x))
                cut = Cut(self.index, False, const, coef)
                slack = float(sol.x[len(sol.x) - spec.n_slack:].sum()) if spec.n_slack else 0.0
                status = "optimal" if slack <= 1e-9 else "elastic"
                return BlockResult(self.index, status, value, sol.x, cut, time.perf_counter() - t0, iters)
            if sol.status in ("infeasible", "infeasible_or_unbounded"):
                cut = self._feasibility_cut(model, y_coupled, deadline)
                return BlockResult(self.index, "infeasible", math.inf, None, cut, time.perf_counter() - t0, iters)
            if sol.status == "time_limit":
                return BlockResult(self.index, "time_limit", math.inf, None, None, time.perf_counter() - t0, iters)
        return BlockResult(self.index, "failed", math.inf, None, None, time.perf_counter() - t0, iters)

    def _adopt_basis(self, model: HighsLP) -> None:
        """Start the live model's next solve from ``model``'s current basis (the same LP): a
        fresh model's optimal one (left where HiGHS failed, the live model would start from the
        failed run's basis and fail again, and each fresh model starts cold), or the live
        model's own, set again so that HiGHS refactorises it and drops its simplex state."""
        basis = model.get_basis()
        if basis is not None:
            self.model.set_basis(basis)

    def basis(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The live model's current basis as status codes (:attr:`BlockSpec.basis`), or None."""
        return self.model.basis_status()

    def _feasibility_cut(self, model: HighsLP, y_coupled: np.ndarray, deadline: float) -> Cut | None:
        """The feasibility cut ``0 >= a + g'y`` from the dual ray of a model without presolve
        (a fresh one, within ``deadline``, when ``model`` was presolved), when it cuts off y."""
        if model is not self.model or self.spec.n_slack:
            model = self._model(*self._bounds(y_coupled), "simplex", False)
            model.set_time_limit(_left(deadline))
            if model.solve().status not in ("infeasible", "infeasible_or_unbounded"):
                return None
        ray = model.dual_ray()
        if ray is None:
            return None
        zero = np.zeros_like(self.spec.c)
        best = None
        for sgn in (1.0, -1.0):
            const, coef = self.spec.affine(sgn * ray, zero)
            viol = const + float(np.dot(coef, y_coupled))
            if viol > 0 and (best is None or viol > best[0]):
                best = (viol, const, coef)
        if best is None:
            return None
        scale = max(1.0, float(np.abs(best[2]).max(initial=0.0)))
        return Cut(self.index, True, best[1] / scale, best[2] / scale)


def _left(deadline: float) -> float | None:
    """Seconds until ``deadline`` for a HiGHS time limit (None: no limit; at least 1 ms)."""
    return None if math.isinf(deadline) else max(1e-3, deadline - time.perf_counter())


def solve_in_turn(calls: Iterable[tuple[BlockSolver, np.ndarray, float]], time_limit: float | None = None
                  ) -> list[BlockResult]:
    """Solve blocks ``(solver, y_coupled, theta)`` one after another, all within ``time_limit``
    seconds of wall-clock time (each gets what the earlier ones left)."""
    deadline = math.inf if time_limit is None else time.perf_counter() + time_limit
    return [solver.solve(y, theta, _left(deadline)) for solver, y, theta in calls]


# ------------------------------------------------------------------- executors
class Runner(Protocol):
    """Runs every block for a given ``y``; the answer must not depend on the executor."""

    def solve_all(self, y: np.ndarray, theta: np.ndarray, time_limit: float | None = None
                  ) -> list[BlockResult]:
        """Solve every block for the master point (``y``, ``theta``); one result per block, in block order."""

    def close(self) -> None:
        """Release the runner's workers."""


class SerialRunner:
    """All blocks in this process."""

    def __init__(self, blocks: Sequence[BlockSpec], tolerance: float = 1e-9) -> None:
        self.solvers = [BlockSolver(i, b, tolerance) for i, b in enumerate(blocks)]

    def solve_all(self, y: np.ndarray, theta: np.ndarray, time_limit: float | None = None) -> list[BlockResult]:
        """Solve the blocks one after another in this process."""
        return solve_in_turn(((s, y[s.spec.coupling], float(theta[s.index])) for s in self.solvers), time_limit)

    def close(self) -> None:
        """Drop the block models."""
        self.solvers = []


# ---------------------------------------------------------------------- engine
@dataclass
class BendersOutcome:
    """What the engine found; ``status`` is one of optimal, time_limit, iteration_limit,
    stalled or failed."""

    status: Status
    y: np.ndarray | None
    x: list[np.ndarray | None]
    upper_bound: float
    lower_bound: float
    iterations: int
    history: list[dict[str, Any]] = field(default_factory=list)
    cuts: int = 0
    skipped_cuts: int = 0
    dropped_cuts: int = 0

    @property
    def gap(self) -> float:
        """The relative gap between the upper and lower bounds."""
        g = relative_gap(self.upper_bound, self.lower_bound)
        return math.inf if g is None else g


MAX_CUT_RANGE = 1e9
"""A cut whose coefficients still span more than this after its tiny ones are relaxed away is
skipped (the master stays a relaxation, so the lower bound stays valid): HiGHS rejects rows
that span around 1e15 and mis-solves well before."""


class BendersMaster:
    """The live master LP: ``y`` followed by one ``theta`` per block. Cuts are cleaned before
    they reach it (:func:`certdp.lp.bounds.drop_small_coefficients`, then scaled, or skipped
    when their range stays above :data:`MAX_CUT_RANGE`); when the live model fails numerically
    it is rebuilt from its rows and solved by dual simplex, then by interior point. With
    ``clean=False`` every cut reaches the master as it is (the textbook algorithm).

    With ``cut_age``, a cut whose slack was basic at that many whole solves in a row, and at
    every level-box solve between them, is deleted from the master (a slack basic in both
    models' bases, so each keeps a valid basis and hot-starts). Any subset of valid cuts is a
    relaxation, so each solve's bound stays a lower bound (the engine keeps the best one);
    a deleted cut comes back from its block when the point returns to where it binds."""

    def __init__(self, master: MasterSpec, blocks: Sequence[BlockSpec], tolerance: float = 1e-9,
                 clean: bool = True, cut_age: int | None = None) -> None:
        self.clean = clean
        self.cut_age = cut_age
        self.fixed_rows = master.A.shape[0]
        self.idle = np.zeros(0, dtype=np.int64)
        self.dropped = 0
        self.ny = len(master.c)
        self.nb = len(blocks)
        self.spec = master
        self.tolerance = tolerance
        th_lo, th_up = zip(*(b.cost_bounds() for b in blocks)) if blocks else ((), ())
        self.th_lo = np.asarray(th_lo, dtype=np.float64)
        self.th_up = np.asarray(th_up, dtype=np.float64)
        c = np.concatenate([master.c, np.ones(self.nb)])
        A = sp.hstack([master.A, sp.csr_matrix((master.A.shape[0], self.nb))], format="csr")
        self.col_lo = np.concatenate([master.y_lo, self.th_lo])
        self.col_up = np.concatenate([master.y_up, self.th_up])
        # presolve off: after addRows HiGHS then always hot-starts from the previous basis
        self.model = HighsLP(c, A, master.r_lo, master.r_up, self.col_lo, self.col_up, solver="simplex",
                             tolerance=tolerance, presolve=False)
        self.c = c
        self.A_rows: list[sp.csr_matrix] = [A]
        self.r_lo = [np.asarray(master.r_lo, dtype=np.float64)]
        self.r_up = [np.asarray(master.r_up, dtype=np.float64)]
        self.n_cuts = 0
        self.skipped = 0
        self.box: HighsLP | None = None

    def _add(self, R: sp.csr_matrix, lo: np.ndarray, up: np.ndarray) -> None:
        """Clean the rows (relax tiny coefficients away, scale each to a largest coefficient of
        1, skip those that still span too much) and add them to the live model; with
        ``clean=False`` add them as they are."""
        if not self.clean:
            self._append(sp.csr_matrix(R), lo, up)
            return
        R, lo, up = drop_small_coefficients(sp.csr_matrix(R), lo, up, self.col_lo, self.col_up,
                                            tau=1.0 / MAX_CUT_RANGE)
        a = abs(R)
        big = np.asarray(a.max(axis=1).todense()).ravel()
        keep = big > 0
        small = np.full(R.shape[0], np.inf)
        if a.nnz:
            inv = a.copy()
            inv.data = 1.0 / inv.data
            small = np.where(keep, 1.0 / np.asarray(inv.max(axis=1).todense()).ravel().clip(1e-300), np.inf)
        keep &= big <= MAX_CUT_RANGE * small
        self.skipped += int(R.shape[0] - keep.sum())
        if not keep.any():
            return
        scale = 1.0 / big[keep]
        D = sp.diags(scale)
        R = sp.csr_matrix(D @ R[keep])
        self._append(R, lo[keep] * scale, up[keep] * scale)

    def _append(self, R: sp.csr_matrix, lo: np.ndarray, up: np.ndarray) -> None:
        """Add rows to the live model and keep them for a rebuild."""
        for model in (self.model, self.box):
            if model is not None:
                model.add_rows(R, lo, up)
        self.idle = np.append(self.idle, np.zeros(R.shape[0], dtype=np.int64))
        self.A_rows.append(R)
        self.r_lo.append(np.asarray(lo, dtype=np.float64))
        self.r_up.append(np.asarray(up, dtype=np.float64))
        self.n_cuts += R.shape[0]

    def add_cuts(self, cuts: Sequence[Cut], couplings: Sequence[np.ndarray]) -> None:
        """Add the blocks' cuts to the live master (HiGHS hot-starts from its basis)."""
        if not cuts:
            return
        rows, cols, vals, up = [], [], [], []
        for t, cut in enumerate(cuts):
            idx = couplings[cut.block]
            nz = cut.coef != 0
            # const + coef' y <= theta   <=>   coef' y - theta <= -const
            rows.append(np.full(int(nz.sum()) + (0 if cut.feasibility else 1), t))
            cols.append(idx[nz] if cut.feasibility else np.append(idx[nz], self.ny + cut.block))
            vals.append(cut.coef[nz] if cut.feasibility else np.append(cut.coef[nz], -1.0))
            up.append(-cut.const)
        R = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(len(cuts), self.ny + self.nb))
        self._add(R, np.full(len(cuts), -INF), np.asarray(up, dtype=np.float64))

    def add_master_rows(self, R: sp.csr_matrix, lo: np.ndarray, up: np.ndarray) -> None:
        """Valid inequalities on ``y`` alone (no theta), e.g. from a problem-specific separator."""
        R = sp.hstack([sp.csr_matrix(R), sp.csr_matrix((R.shape[0], self.nb))], format="csr")
        self._add(R, np.asarray(lo, dtype=np.float64), np.asarray(up, dtype=np.float64))

    def _rows(self) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        A = sp.vstack(self.A_rows, format="csr") if len(self.A_rows) > 1 else self.A_rows[0]
        self.A_rows = [A]
        lo, up = np.concatenate(self.r_lo), np.concatenate(self.r_up)
        self.r_lo, self.r_up = [lo], [up]
        return A, lo, up

    def _drop_idle(self) -> None:
        """Delete the cuts idle (slack basic) at the last ``cut_age`` whole solves and at every
        level solve between them, from both models and from the rows kept for a rebuild."""
        if self.cut_age is None:
            return
        old = np.flatnonzero(self.idle >= self.cut_age)
        if len(old) == 0:
            return
        A, lo, up = self._rows()
        keep = np.ones(A.shape[0], dtype=bool)
        keep[self.fixed_rows + old] = False
        for model in (self.model, self.box):
            if model is not None:
                model.delete_rows(self.fixed_rows + old)
        self.A_rows, self.r_lo, self.r_up = [A[keep]], [lo[keep]], [up[keep]]
        self.idle = self.idle[keep[self.fixed_rows:]]
        self.dropped += len(old)

    def _age(self, model: HighsLP, whole: bool) -> None:
        """Count a solve against each cut whose slack it left basic (one more idle round after a
        whole solve), and clear the count of every cut it made binding."""
        if self.cut_age is None:
            return
        status = model.basis_status()
        if status is None:
            return
        basic = status[1][self.fixed_rows:] == 1
        self.idle[~basic] = 0
        if whole:
            self.idle[basic] += 1

    def solve(self, time_limit: float | None = None) -> tuple[np.ndarray, np.ndarray, float, float, float] | None:
        """Solve; return (y, theta, rigorous lower bound, objective, seconds), or None when
        ``time_limit`` seconds ran out first. Raises :class:`SolverLimitError` when HiGHS fails
        on the master with every algorithm."""
        t0 = time.perf_counter()
        self._drop_idle()
        self.model.set_time_limit(time_limit)
        sol = self.model.solve()
        A, lo, up = self._rows()
        for solver in ("simplex", "ipm"):
            if sol.status in ("optimal", "time_limit"):
                break
            left = None if time_limit is None else time_limit - (time.perf_counter() - t0)
            if left is not None and left <= 0:
                return None
            self.model = HighsLP(self.c, A, lo, up, self.col_lo, self.col_up, solver=solver,
                                 tolerance=self.tolerance, presolve=False, time_limit=left)
            sol = self.model.solve()
        if sol.status == "time_limit":
            return None
        if sol.status != "optimal" or sol.row_dual is None or sol.x is None:
            raise SolverLimitError(f"Benders master: HiGHS returned {sol.status!r} with every algorithm")
        self.model.use_dual_simplex()
        self._age(self.model, whole=True)
        lb = lagrangian_bound(self.c, A, lo, up, self.col_lo, self.col_up, sol.row_dual)
        x = sol.x
        return x[: self.ny], x[self.ny:], lb, sol.objective, time.perf_counter() - t0

    def point_within(self, lo: np.ndarray, up: np.ndarray, time_limit: float | None = None
                     ) -> tuple[np.ndarray, np.ndarray, float, float] | None:
        """The master's optimum with ``y`` kept in ``[lo, up]`` (within its own bounds): ``(y,
        theta, seconds, objective)``, or None when HiGHS did not end optimal (the time ran out, or it
        failed). Solved on a second model with the same rows (:attr:`box`), built at the first
        call, so that each model hot-starts from its own kind of basis."""
        t0 = time.perf_counter()
        if self.box is None:
            A, r_lo, r_up = self._rows()
            self.box = HighsLP(self.c, A, r_lo, r_up, self.col_lo, self.col_up, solver="simplex",
                               tolerance=self.tolerance, presolve=False)
        cols = np.arange(self.ny)
        self.box.set_col_bounds(cols, np.maximum(self.col_lo[: self.ny], lo), np.minimum(self.col_up[: self.ny], up))
        self.box.set_time_limit(time_limit)
        sol = self.box.solve()
        if sol.status == "optimal":
            self._age(self.box, whole=False)
        elif sol.status != "time_limit":
            self.box = None     # rebuilt from the rows at the next call
        if sol.status != "optimal" or sol.x is None:
            return None
        return sol.x[: self.ny], sol.x[self.ny:], time.perf_counter() - t0, float(sol.objective)


BOX_RANGE = (2.0 ** -8, 2.0 ** 6)
"""The factors ``b`` a level box may take (:func:`_level_point`): from a box a fraction of a
per cent wide to one that lets every ``y`` move 64-fold, past which the master's own point is
taken."""


def _level_point(m: BendersMaster, core: np.ndarray, target: float, b: float, time_limit: float | None
                 ) -> tuple[tuple[np.ndarray, np.ndarray, float, float], float, float] | None:
    """The master's optimum within the narrowest box ``[core / (1 + b), core (1 + b)]``, ``b``
    a power of 2 in :data:`BOX_RANGE`, whose optimum is at most ``target``: from the previous
    ``b``, halved while the level is still reached, else doubled until it is. ``(point, b,
    seconds)``, or None when no box reaches the level (or HiGHS did not end optimal)."""
    seconds = 0.0

    def within(f: float) -> tuple[np.ndarray, np.ndarray, float, float] | None:
        nonlocal seconds
        left = None if time_limit is None else max(1e-3, time_limit - seconds)
        near = m.point_within(core / (1.0 + f), core * (1.0 + f), left)
        seconds += 0.0 if near is None else near[2]
        return near if near is not None and near[3] <= target else None

    near = within(b)
    if near is None:
        while near is None and b < BOX_RANGE[1]:
            b *= 2.0
            near = within(b)
        return None if near is None else (near, b, seconds)
    while b > BOX_RANGE[0]:
        closer = within(b / 2.0)
        if closer is None:
            break
        near, b = closer, b / 2.0
    return near, b, seconds


def _master_point(m: BendersMaster, core: np.ndarray | None, level: float | None, ub: float, b: float,
                  time_limit: float | None) -> tuple[np.ndarray, np.ndarray, float, float, float, bool, float] | None:
    """The master's solution (:meth:`BendersMaster.solve`); with a ``core``, a ``level`` and a
    finite upper bound ``ub``, its point moved to :func:`_level_point`'s for the target
    ``obj + level (ub - obj)``. The lower bound and the objective stay the whole master's; the
    last two items say whether the point is not the master's own, and the box factor to start
    from next round."""
    solved = m.solve(time_limit)
    if solved is None or core is None or level is None or not math.isfinite(ub):
        return None if solved is None else (*solved, False, b)
    obj = solved[3]
    left = None if time_limit is None else max(1e-3, time_limit - solved[4])
    found = _level_point(m, core, obj + level * (ub - obj), b, left)
    if found is None:
        return (*solved, False, b)
    near, b, seconds = found
    binding = near[3] > obj + 1e-9 * max(1.0, abs(obj))
    return near[0], near[1], solved[2], obj, solved[4] + seconds, binding, b


def _start_core(core: np.ndarray | None, level: float | None) -> np.ndarray | None:
    """A float copy of ``core``; with ``level`` it must be positive (the level box about it is
    multiplicative, and every later core, a mean of points in such boxes, stays positive) and
    ``level`` in (0, 1)."""
    if core is None:
        return None
    core = np.asarray(core, dtype=np.float64).copy()
    if level is not None and not (0 < level < 1 and bool(np.all(core > 0))):
        raise ValueError("a level box needs a level in (0, 1) and a core with every entry above 0")
    return core


def _check_order(lb: float, ub: float, crossing: float) -> None:
    """Raise when the lower bound passes the upper one by more than rounding and ``crossing``."""
    if lb > ub + 1e-7 * max(1.0, abs(ub)) + crossing * abs(ub):
        raise AssertionError(f"Benders lower bound {lb} exceeds upper bound {ub}: a cost is counted twice")


Heuristic = Callable[[np.ndarray, Sequence[BlockResult]], tuple[float, np.ndarray, list[np.ndarray]] | None]
"""A primal heuristic: from the master's ``y`` and the blocks' answers, a feasible point
``(value, y, xs)`` of the whole problem, or None."""


def _round_cuts(results: Sequence[BlockResult], theta: np.ndarray, y: np.ndarray,
                couplings: Sequence[np.ndarray]) -> list[Cut]:
    """The cuts that cut off the master's point (y, theta)."""
    cuts: list[Cut] = []
    for r in results:
        if r.cut is None:
            continue
        at = r.cut.const + float(np.dot(r.cut.coef, y[couplings[r.block]]))
        bound = 0.0 if r.cut.feasibility else theta[r.block]
        if at > bound + 1e-9 * max(1.0, abs(at)):
            cuts.append(r.cut)
    return cuts


def _point(master: MasterSpec, y: np.ndarray, results: Sequence[BlockResult]
           ) -> tuple[float, np.ndarray, list[np.ndarray]] | None:
    """``(value, y, xs)`` when every block was feasible at ``y``, else None."""
    xs = [r.x for r in results if r.feasible and r.x is not None]
    if len(xs) < len(results):
        return None
    return float(np.dot(master.c, y)) + sum(r.value for r in results), y.copy(), xs


def _incumbent(start: tuple[float, np.ndarray, list[np.ndarray]] | None, n_blocks: int
               ) -> tuple[float, np.ndarray | None, list[np.ndarray | None]]:
    """The first best point ``(upper bound, y, xs)``: ``start``'s, or none yet."""
    if start is None:
        return math.inf, None, [None] * n_blocks
    return start[0], start[1], list(start[2])


def _separate(m: BendersMaster, separator: Callable[[np.ndarray], tuple[sp.csr_matrix, np.ndarray, np.ndarray] | None]
              | None, y: np.ndarray) -> int:
    """Add the separator's valid inequalities violated at ``y`` to the master; how many."""
    extra = None if separator is None else separator(y)
    if extra is None or not extra[0].shape[0]:
        return 0
    m.add_master_rows(*extra)
    return int(extra[0].shape[0])


def _stop(g: float, gap: float, results: Sequence[BlockResult], added: bool, at_master: bool) -> Status | None:
    """Why the rounds end after this one, or None: the gap is reached; a block ran out of
    time; or nothing was added to the master at its own point (stalled, or failed when a
    block failed)."""
    if g <= gap:
        return Status.OPTIMAL
    if any(r.status == "time_limit" for r in results):
        return Status.TIME_LIMIT
    if not added and at_master:
        return Status.FAILED if any(r.status == "failed" for r in results) else Status.STALLED
    return None


def benders(master: MasterSpec, blocks: Sequence[BlockSpec], *, gap: float = 1e-2, max_iterations: int = 500,
            time_limit: float | None = None, runner: Runner | None = None, tolerance: float = 1e-9,
            progress: Progress | None = None, repair_runner: Runner | None = None,
            separator: Callable[[np.ndarray], tuple[sp.csr_matrix, np.ndarray, np.ndarray] | None] | None = None,
            heuristic: Heuristic | None = None, core: np.ndarray | None = None, in_out: float = 0.2,
            start: tuple[float, np.ndarray, list[np.ndarray]] | None = None, crossing: float = 0.0,
            clean_cuts: bool = True, repair: Callable[[np.ndarray], np.ndarray] | None = None,
            level: float | None = None, cut_age: int | None = None) -> BendersOutcome:
    """Run Benders decomposition until the relative gap, iteration or (wall-clock) time limit.

    ``separator(y)`` may return rows ``(R, lo, up)`` of valid inequalities on ``y`` violated at
    the round's point (the in-out point with a ``core``), added to the master. ``heuristic`` is
    asked for a feasible point in every round whose blocks did not all give one. ``repair(y)`` maps
    the master's point to one the problem knows to be better; the blocks are solved there too
    every round (on their own models, ``repair_runner``, on a second thread), their cuts join
    the master's and their value, if all feasible, is an upper bound. The rounds run BLAS on one
    thread (:func:`certdp.lp.dense.single_threaded_blas`).

    With a ``core`` point (a feasible y, e.g. from a known mechanism), the blocks are solved
    not at the master's y but at ``in_out * y + (1 - in_out) * core`` (in-out stabilisation,
    Ben-Ameur and Neto 2007; Fischetti, Ljubic and Sinnl 2017); when that cut does not cut off
    the master's point, the next round separates at the master's y itself. The core moves to
    each point where every block was feasible (docs/lrgeo.md: why); the answers there are
    upper bounds. With ``level`` too (a level bundle step, Lemarechal, Nemirovskii and Nesterov
    1995, in a box), the master's point is its optimum within the narrowest box ``[core / (1 +
    b), core (1 + b)]`` whose optimum is at most ``obj + level (ub - obj)``, ``obj`` the
    master's optimum and ``ub`` the best upper bound (:func:`_level_point`; the lower bound stays
    the whole master's), so it does not jump to the master's vertices (docs/lrgeo.md). Where the
    blocks, solved at that point itself, cut nothing off, the model is exact there, and the next
    round takes the master's own optimum (on a model exact everywhere, the optimum: a level
    alone would shrink the gap by about ``level`` a round), where the core does not move (the
    boxes would pin a vertex's zeros). A stall is declared at the master's own point only.
    ``start``: a feasible ``(value, y, xs)``, the first upper bound. ``clean_cuts``, ``cut_age``: the master's.

    Returns the best feasible (y, x) found with its true objective (upper bound) and the best
    rigorous lower bound. ``lower_bound <= upper_bound`` is asserted every round, up to 1e-7 and
    ``crossing`` times the upper bound (for upper bounds feasible to HiGHS's tolerances only; 0
    when certified, as PMO's are). When HiGHS fails with every algorithm: 'failed', best bounds.
    """
    t_start = time.perf_counter()
    own_runner, own_fixer = runner is None, repair is not None and repair_runner is None and bool(blocks)
    run = runner if runner is not None else SerialRunner(blocks, tolerance)
    fixer = (SerialRunner(blocks, tolerance) if own_fixer else repair_runner) if repair and blocks else None
    couplings = [b.coupling for b in blocks]
    m = BendersMaster(master, blocks, tolerance, clean=clean_cuts, cut_age=cut_age)
    lb, (ub, best_y, best_x) = -math.inf, _incumbent(start, len(blocks))
    history: list[dict[str, Any]] = []
    status, it, kelley, free, box = Status.ITERATION_LIMIT, 0, False, False, 1.0
    core = _start_core(core, level)

    def left() -> float | None: return None if time_limit is None else time_limit - (time.perf_counter() - t_start)

    # the repair's blocks are separate HiGHS models, and HiGHS releases the GIL while it solves
    beside = ThreadPoolExecutor(1) if fixer is not None else None
    with single_threaded_blas():
        try:
            for it in range(1, max_iterations + 1):
                if left() is not None and left() <= 0:
                    status, it = Status.TIME_LIMIT, it - 1
                    break
                c_master = process_time()
                try:
                    solved = _master_point(m, core, None if free else level, ub, box, left())
                except SolverLimitError:
                    status, it = Status.FAILED, it - 1
                    break
                if solved is None:  # the master alone used up the time limit
                    status, it = Status.TIME_LIMIT, it - 1
                    break
                (y_master, theta, lb_it, obj, t_master, binding, box), c_master = solved, process_time() - c_master
                lb, y = max(lb, lb_it), y_master
                if core is not None and not kelley and not free:
                    y = in_out * y_master + (1.0 - in_out) * core
                t0, c_sub = time.perf_counter(), process_time()
                repaired = None
                if fixer is not None and beside is not None and repair is not None:
                    y_r = repair(y_master)
                    repaired = y_r, beside.submit(fixer.solve_all, y_r, theta, left())
                results = run.solve_all(y, theta, left()) if blocks else []
                cuts = _round_cuts(results, theta, y_master, couplings)
                core = y if core is not None and not free and results and all(r.feasible for r in results) else core
                # no cut at the in-out point: the level point next; none there: the master's own optimum
                free, kelley = binding and kelley and not cuts, core is not None and not kelley and not cuts
                points = [_point(master, y, results)]
                points += [heuristic(y, results)] if points[0] is None and heuristic is not None else []
                if repaired is not None:
                    fixed = repaired[1].result()
                    cuts, results = cuts + _round_cuts(fixed, theta, y_master, couplings), list(results) + list(fixed)
                    points.append(_point(master, repaired[0], fixed))
                t_sub, c_sub = time.perf_counter() - t0, process_time() - c_sub
                best: tuple[float, np.ndarray | None, list] = min((p for p in points if p is not None),
                                                                   key=lambda p: p[0], default=(ub, None, []))
                if best[0] < ub:
                    ub, best_y, best_x = best[0], best[1], list(best[2])
                _check_order(lb, ub, crossing)
                g = relative_gap(ub, lb)
                assert g is not None   # lb is a number
                rec = {"iteration": it, "lower_bound": lb, "upper_bound": ub, "gap": g, "cuts_added": len(cuts),
                       "feasibility_cuts": sum(c.feasibility for c in cuts), "master_seconds": t_master,
                       "sub_seconds": t_sub, "master_cpu": c_master, "sub_cpu": c_sub,
                       "elapsed": time.perf_counter() - t_start, "master_objective": obj,
                       "box": box if level is not None else None, "master_rows": m.model.n_row,
                       "blocks_failed": sum(r.status == "failed" for r in results)}
                history.append(rec)
                report(progress, "round", bounds_line("round", rec, "cuts_added", "cuts"), rec)
                m.add_cuts(cuts, couplings)
                n_sep = _separate(m, separator, y) if g > gap else 0
                rec["separated"] = n_sep
                stop = _stop(g, gap, results, bool(cuts or n_sep), y is y_master and not binding)
                if stop is not None:
                    status = stop
                    break
        finally:
            if beside is not None:
                beside.shutdown(cancel_futures=True)
            for r, own in ((run, own_runner), (fixer, own_fixer)):
                if own and r is not None:
                    r.close()
    return BendersOutcome(status=status, y=best_y, x=best_x, upper_bound=ub, lower_bound=lb, iterations=it,
                          history=history, cuts=m.n_cuts, skipped_cuts=m.skipped, dropped_cuts=m.dropped)
