"""One generic Benders engine for block-ladder LPs.

The problem::

    min  c0' y + sum_l c_l' x_l
    s.t. r0_lo <= A0 y <= r0_up                                   (master rows)
         lo_l - T_l y <= W_l x_l <= up_l - T_l y       for every block l
         y in [y_lo, y_up],  x_l in [x_lo_l, x_up_l]   (all finite)

The master holds ``y`` and one ``theta_l`` per block; block ``l`` holds ``x_l`` for a fixed
``y`` and only its row bounds change between iterations (its HiGHS model stays alive). The
master stays alive too and receives cuts through ``addRows``, so HiGHS hot-starts.

Cuts are Lagrangian (:mod:`scaledp.lp.bounds`), hence valid whatever the solver's accuracy:
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
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np
import scipy.sparse as sp

from ..progress import Progress, bounds_line, report
from .bounds import lagrangian_affine, lagrangian_bound
from .highs import INF, HighsLP
from .outcome import relative_gap


# --------------------------------------------------------------------- the data
@dataclass(frozen=True, eq=False)
class BlockSpec:
    """One subproblem: ``lo - T y <= W x <= up - T y``, ``x`` in ``[x_lo, x_up]``.

    ``coupling`` lists the master variables that appear in ``T`` (``T`` has one column per
    entry of ``coupling``), so only those values are sent to the block.
    """

    c: np.ndarray
    W: sp.csr_matrix
    lo: np.ndarray
    up: np.ndarray
    T: sp.csr_matrix
    coupling: np.ndarray
    x_lo: np.ndarray
    x_up: np.ndarray

    def affine(self, pi: np.ndarray, c: np.ndarray) -> tuple[float, np.ndarray]:
        """The Lagrangian minorant ``a + g' y[coupling]`` of this block from multipliers ``pi``
        (:func:`scaledp.lp.bounds.lagrangian_affine`)."""
        return lagrangian_affine(c, self.W, self.lo, self.up, self.x_lo, self.x_up, pi, self.T)

    def cost_bounds(self) -> tuple[float, float]:
        """Bounds on ``c' x`` over the box (trivial bounds on ``theta``)."""
        lo = np.minimum(self.c * self.x_lo, self.c * self.x_up).sum()
        hi = np.maximum(self.c * self.x_lo, self.c * self.x_up).sum()
        return float(lo), float(hi)


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
    """A block's answer for one ``y``."""

    block: int
    feasible: bool
    value: float
    x: np.ndarray | None
    cut: Cut | None
    seconds: float
    iterations: int


# -------------------------------------------------------------------- the blocks
class BlockSolver:
    """Keeps one block's HiGHS model alive; only its row bounds change with ``y``."""

    def __init__(self, index: int, spec: BlockSpec, tolerance: float = 1e-9) -> None:
        self.index = index
        self.spec = spec
        y0 = np.zeros(len(spec.coupling))
        lo, up = self._bounds(y0)
        # presolve off: a dual ray of an infeasible block must refer to the model's own rows
        self.model = HighsLP(spec.c, spec.W, lo, up, spec.x_lo, spec.x_up, solver="simplex",
                             tolerance=tolerance, presolve=False)
        self.rows = np.arange(spec.W.shape[0], dtype=np.int32)

    def _bounds(self, y_coupled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        shift = self.spec.T @ y_coupled
        return self.spec.lo - shift, self.spec.up - shift

    def solve(self, y_coupled: np.ndarray, theta: float) -> BlockResult:
        t0 = time.perf_counter()
        lo, up = self._bounds(y_coupled)
        self.model.set_row_bounds(self.rows, lo, up)
        sol = self.model.solve()
        spec = self.spec
        if sol.status == "optimal":
            const, coef = spec.affine(sol.row_dual, spec.c)
            value = float(np.dot(spec.c, sol.x))
            cut = Cut(self.index, False, const, coef)
            return BlockResult(self.index, True, value, sol.x, cut, time.perf_counter() - t0, sol.iterations)
        if sol.status in ("infeasible", "infeasible_or_unbounded"):
            ray = self.model.dual_ray()
            cut = None
            if ray is not None:
                zero = np.zeros_like(spec.c)
                best = None
                for sgn in (1.0, -1.0):
                    const, coef = spec.affine(sgn * ray, zero)
                    viol = const + float(np.dot(coef, y_coupled))
                    if viol > 0 and (best is None or viol > best[0]):
                        best = (viol, const, coef)
                if best is not None:
                    scale = max(1.0, float(np.abs(best[2]).max(initial=0.0)))
                    cut = Cut(self.index, True, best[1] / scale, best[2] / scale)
            return BlockResult(self.index, False, math.inf, None, cut, time.perf_counter() - t0, sol.iterations)
        raise RuntimeError(f"block {self.index}: HiGHS returned {sol.status!r}")


# ------------------------------------------------------------------- executors
class Runner(Protocol):
    """Runs every block for a given ``y``; the answer must not depend on the executor."""

    def solve_all(self, y: np.ndarray, theta: np.ndarray) -> list[BlockResult]: ...

    def close(self) -> None: ...


class SerialRunner:
    """All blocks in this process."""

    def __init__(self, blocks: Sequence[BlockSpec], tolerance: float = 1e-9) -> None:
        self.solvers = [BlockSolver(i, b, tolerance) for i, b in enumerate(blocks)]

    def solve_all(self, y: np.ndarray, theta: np.ndarray) -> list[BlockResult]:
        return [s.solve(y[s.spec.coupling], float(theta[s.index])) for s in self.solvers]

    def close(self) -> None:
        self.solvers = []


# ---------------------------------------------------------------------- engine
@dataclass
class BendersOutcome:
    """What the engine found."""

    status: str
    y: np.ndarray | None
    x: list[np.ndarray | None]
    upper_bound: float
    lower_bound: float
    iterations: int
    history: list[dict[str, Any]] = field(default_factory=list)
    cuts: int = 0

    @property
    def gap(self) -> float:
        g = relative_gap(self.upper_bound, self.lower_bound)
        return math.inf if g is None else g


class BendersMaster:
    """The live master LP: ``y`` followed by one ``theta`` per block."""

    def __init__(self, master: MasterSpec, blocks: Sequence[BlockSpec], tolerance: float = 1e-9) -> None:
        self.ny = len(master.c)
        self.nb = len(blocks)
        self.spec = master
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

    def add_cuts(self, cuts: Sequence[Cut], couplings: Sequence[np.ndarray]) -> None:
        if not cuts:
            return
        rows, cols, vals, lo, up = [], [], [], [], []
        for t, cut in enumerate(cuts):
            idx = couplings[cut.block]
            nz = cut.coef != 0
            # const + coef' y <= theta   <=>   coef' y - theta <= -const
            rows.append(np.full(int(nz.sum()) + (0 if cut.feasibility else 1), t))
            cols.append(idx[nz] if cut.feasibility else np.append(idx[nz], self.ny + cut.block))
            vals.append(cut.coef[nz] if cut.feasibility else np.append(cut.coef[nz], -1.0))
            lo.append(-INF)
            up.append(-cut.const)
        R = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(len(cuts), self.ny + self.nb))
        self.model.add_rows(R, np.asarray(lo), np.asarray(up))
        self.A_rows.append(R)
        self.r_lo.append(np.asarray(lo, dtype=np.float64))
        self.r_up.append(np.asarray(up, dtype=np.float64))
        self.n_cuts += len(cuts)

    def add_master_rows(self, R: sp.csr_matrix, lo: np.ndarray, up: np.ndarray) -> None:
        """Valid inequalities on ``y`` alone (no theta), e.g. from a problem-specific separator."""
        R = sp.hstack([sp.csr_matrix(R), sp.csr_matrix((R.shape[0], self.nb))], format="csr")
        self.model.add_rows(R, lo, up)
        self.A_rows.append(R)
        self.r_lo.append(np.asarray(lo, dtype=np.float64))
        self.r_up.append(np.asarray(up, dtype=np.float64))
        self.n_cuts += R.shape[0]

    def solve(self, time_limit: float | None = None) -> tuple[np.ndarray, np.ndarray, float, float, float] | None:
        """Solve; return (y, theta, rigorous lower bound, objective, seconds), or None when
        ``time_limit`` seconds ran out first."""
        self.model.set_option("time_limit", float(time_limit) if time_limit is not None else INF)
        sol = self.model.solve()
        if sol.status == "time_limit":
            return None
        if sol.status != "optimal":
            raise RuntimeError(f"Benders master: HiGHS returned {sol.status!r}")
        A = sp.vstack(self.A_rows, format="csr") if len(self.A_rows) > 1 else self.A_rows[0]
        self.A_rows = [A]
        lo = np.concatenate(self.r_lo)
        up = np.concatenate(self.r_up)
        self.r_lo, self.r_up = [lo], [up]
        lb = lagrangian_bound(self.c, A, lo, up, self.col_lo, self.col_up, sol.row_dual)
        x = sol.x
        return x[: self.ny], x[self.ny:], lb, sol.objective, sol.seconds


def benders(master: MasterSpec, blocks: Sequence[BlockSpec], *, gap: float = 1e-2, max_iterations: int = 500,
            time_limit: float | None = None, runner: Runner | None = None, tolerance: float = 1e-9,
            progress: Progress | None = None,
            separator: Callable[[np.ndarray], tuple[sp.csr_matrix, np.ndarray, np.ndarray] | None] | None = None,
            ) -> BendersOutcome:
    """Run Benders decomposition until the relative gap, iteration or time limit is reached.

    ``separator(y)`` may return rows ``(R, lo, up)`` of valid inequalities on ``y`` violated at
    the master's solution; they are added to the master (the lower bound stays valid because
    the inequalities hold for every feasible point of the full problem).

    Returns the best feasible (y, x) found with its true objective (upper bound) and the best
    rigorous lower bound. ``lower_bound <= upper_bound`` is asserted at every iteration.
    """
    t_start = time.perf_counter()
    own_runner = runner is None
    run = runner if runner is not None else SerialRunner(blocks, tolerance)
    couplings = [b.coupling for b in blocks]
    m = BendersMaster(master, blocks, tolerance)
    lb, ub = -math.inf, math.inf
    best_y: np.ndarray | None = None
    best_x: list[np.ndarray | None] = [None] * len(blocks)
    history: list[dict[str, Any]] = []
    status = "iteration_limit"
    it = 0
    try:
        for it in range(1, max_iterations + 1):
            left = None if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - t_start))
            solved = m.solve(left)
            if solved is None:  # the master alone used up the time limit
                status = "time_limit"
                it -= 1
                break
            y, theta, lb_it, obj, t_master = solved
            lb = max(lb, lb_it)
            t0 = time.perf_counter()
            results = run.solve_all(y, theta) if blocks else []
            t_sub = time.perf_counter() - t0
            cuts: list[Cut] = []
            feasible = all(r.feasible for r in results)
            for r in results:
                if r.cut is None:
                    if not r.feasible:
                        raise RuntimeError(f"block {r.block} is infeasible and gave no usable dual ray")
                    continue
                if r.feasible:
                    # add the optimality cut only if it cuts off the current theta
                    if r.value > theta[r.block] + 1e-9 * max(1.0, abs(r.value)):
                        cuts.append(r.cut)
                else:
                    cuts.append(r.cut)
            if feasible:
                val = float(np.dot(master.c, y)) + sum(r.value for r in results)
                if val < ub:
                    ub = val
                    best_y = y.copy()
                    best_x = [r.x for r in results]
            if lb > ub + 1e-7 * max(1.0, abs(ub)):
                raise AssertionError(f"Benders lower bound {lb} exceeds upper bound {ub}: a cost is counted twice")
            g = relative_gap(ub, lb)
            rec = {"iteration": it, "lower_bound": lb, "upper_bound": ub, "gap": g, "cuts_added": len(cuts),
                   "feasibility_cuts": sum(c.feasibility for c in cuts), "master_seconds": t_master,
                   "sub_seconds": t_sub, "elapsed": time.perf_counter() - t_start, "master_objective": obj}
            history.append(rec)
            report(progress, "round", bounds_line("round", rec, "cuts_added", "cuts"), rec)
            m.add_cuts(cuts, couplings)
            n_sep = 0
            if separator is not None and g > gap:
                extra = separator(y)
                if extra is not None and extra[0].shape[0]:
                    m.add_master_rows(*extra)
                    n_sep = extra[0].shape[0]
            rec["separated"] = n_sep
            if g <= gap:
                status = "optimal"
                break
            if not cuts and not n_sep:
                status = "optimal" if math.isfinite(ub) else "stalled"
                break
            if time_limit is not None and time.perf_counter() - t_start >= time_limit:
                status = "time_limit"
                break
    finally:
        if own_runner:
            run.close()
    return BendersOutcome(status=status, y=best_y, x=best_x, upper_bound=ub, lower_bound=lb, iterations=it,
                          history=history, cuts=m.n_cuts)
