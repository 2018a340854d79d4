"""HiGHS plumbing: the only module that imports ``highspy``.

It knows nothing about privacy: it takes ``min c'x  s.t.  row_lower <= A x <= row_upper,
col_lower <= x <= col_upper`` with ``A`` a scipy.sparse matrix, and returns an
:class:`LPSolution`. :class:`HighsLP` keeps a model alive so that rows can be added (the
solver hot-starts from its last basis) and row bounds changed between solves, as the Benders
engine needs.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
import scipy.sparse as sp

from .. import _validate as V
from .._interrupt import Interrupted, StopFlag, native_section, stops_enforced
from ..progress import Progress, report
from .outcome import SolverLimitError


def _make_first_model_quietly() -> None:
    """HiGHS prints a banner on the C-level stdout when a process makes its first model, before
    any option can turn output off; it would corrupt ``--json`` output. Make that first model
    with file descriptor 1 pointed at /dev/null."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:          # no stdout at all: nothing to protect
        highspy.Highs()
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


_make_first_model_quietly()

SOLVERS = ("simplex", "ipm")
#: HiGHS's smallest primal and dual feasibility tolerance.
MIN_TOLERANCE = 1e-10
INF = highspy.kHighsInf

_STATUS = {
    highspy.HighsModelStatus.kOptimal: "optimal",
    highspy.HighsModelStatus.kInfeasible: "infeasible",
    highspy.HighsModelStatus.kUnbounded: "unbounded",
    highspy.HighsModelStatus.kUnboundedOrInfeasible: "infeasible_or_unbounded",
    highspy.HighsModelStatus.kTimeLimit: "time_limit",
    highspy.HighsModelStatus.kIterationLimit: "iteration_limit",
    highspy.HighsModelStatus.kModelEmpty: "optimal",
}

INTERRUPTIBLE_NONZEROS = 50_000
"""Models with at least this many non-zeros poll for Ctrl-C at every simplex and interior-point
iteration (HiGHS's interrupt callbacks), so that it stops them at once, unless the process's
stops are enforced from outside the solve (the ``certdp`` command's watchdog ends the process
anyway: :func:`certdp._interrupt.stops_enforced`). A poll is a call into Python: polled, the
solves of the monolithic LPs of grids of 36 to 144 records took a median 2.4% and at most 4.4%
more CPU time, with the same iterations (``benchmarks/cli/results/interrupt_polling.md``);
smaller models, whose iterations cost less, finish their solves in a fraction of a second and
are left unpolled."""


_LOGGING = int(highspy.cb.HighsCallbackType.kCallbackLogging)


class _Hooks:
    """What a model's one HiGHS callback does (HiGHS keeps one per model): answer the interrupt
    polls from ``stop``, and pass each log message to ``log`` when it is set."""

    __slots__ = ("stop", "log")

    def __init__(self) -> None:
        self.stop = StopFlag()
        self.log: Any = None


def _poll(kind: int, message: str, data_out: object, data_in: object, hooks: _Hooks) -> None:
    """HiGHS's callback: a log message goes to ``hooks.log``; an interrupt poll stops the solve
    when ``hooks.stop`` says so (answered either way: HiGHS keeps the answer from one run to
    the next). It must not raise: an exception raised inside a HiGHS callback corrupts the
    solver, which is why every solve with a callback runs in a
    :func:`~certdp._interrupt.native_section`."""
    if kind == _LOGGING:
        if hooks.log is not None:
            hooks.log(message)
    else:
        data_in.user_interrupt = hooks.stop.stop  # type: ignore[attr-defined]


@dataclass(frozen=True)
class LPSolution:
    """What one HiGHS solve returned.

    Attributes:
        status: 'optimal', 'infeasible', 'unbounded', 'infeasible_or_unbounded', 'time_limit',
            'iteration_limit' or 'error: ...'.
        x: primal values (may be absent or infeasible unless ``primal_feasible``).
        row_dual: row duals (HiGHS convention: reduced costs are ``c - A' row_dual``).
        col_dual: column reduced costs.
        objective: primal objective value reported by HiGHS.
        primal_feasible: whether HiGHS reports the primal solution feasible.
        iterations: simplex (or IPM) iterations.
        seconds: wall time of the solve.
    """

    status: str
    x: np.ndarray | None
    row_dual: np.ndarray | None
    col_dual: np.ndarray | None
    objective: float
    primal_feasible: bool
    iterations: int
    seconds: float


def _configure(h: highspy.Highs, *, solver: str, tolerance: float,
               presolve: bool, log: bool) -> None:
    V.choice("solver", solver, SOLVERS)
    h.setOptionValue("output_flag", bool(log))
    if solver == "simplex":
        h.setOptionValue("solver", "simplex")
        h.setOptionValue("simplex_strategy", 1)  # dual simplex
    else:
        h.setOptionValue("solver", "ipm")
        h.setOptionValue("run_crossover", "on")
    h.setOptionValue("presolve", "on" if presolve else "off")
    for option in ("primal_feasibility_tolerance", "dual_feasibility_tolerance"):
        # HiGHS refuses a value out of its range and keeps its own 1e-7 (looser than asked)
        if h.setOptionValue(option, float(tolerance)) != highspy.HighsStatus.kOk:
            raise ValueError(f"tolerance must be in HiGHS's range for {option} (at least "
                             f"{MIN_TOLERANCE:g}), got {tolerance!r}")
    if solver == "ipm":
        h.setOptionValue("ipm_optimality_tolerance", max(float(tolerance), 1e-12))


_NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf)"
_SIMPLEX_LINE = re.compile(rf"^\s*(\d+)\s+({_NUMBER})\s+(?:Pr|Du|Ph)", re.IGNORECASE)
_IPX_LINE = re.compile(rf"^\s*(\d+)\*?\s+({_NUMBER})\s+({_NUMBER})\s+{_NUMBER}\s+{_NUMBER}\s+({_NUMBER})\s+[\d.]+\s*$")


def iteration_line(solver: str, line: str, sign: float = 1.0) -> tuple[str, dict[str, Any]] | None:
    """The iteration count and objective in one line of HiGHS's log, as a message for a person
    and a record for a program; None for any other line. Dual simplex logs ``iteration objective
    Pr: ...`` lines; the interior-point solver (IPX) logs ``iteration primal-objective
    dual-objective pinf dinf gap time`` lines, of the dual model when it dualized the LP
    (``sign`` -1 then turns its objective back into the LP's).

    >>> iteration_line("simplex", "      1311     1.4655542532e+01 Pr: 0(0) 0s")
    ('HiGHS simplex: iteration 1311, LP objective 14.66', {'iteration': 1311, 'objective': 14.655542532})
    >>> iteration_line("ipm", "  12   -4.37427442e-01  -4.49427026e-01   1.73e-17   2.29e-07  8.31e-03  0.2", -1.0)[0]
    'HiGHS ipm: iteration 12, LP objective 0.4374, primal-dual gap 0.00831'
    """
    m = _SIMPLEX_LINE.match(line)
    if m:
        it, obj = int(m.group(1)), float(m.group(2))
        return f"HiGHS {solver}: iteration {it}, LP objective {obj:.4g}", {"iteration": it, "objective": obj}
    m = _IPX_LINE.match(line)
    if m:
        it, obj, gap = int(m.group(1)), sign * float(m.group(2)), float(m.group(4))
        return (f"HiGHS {solver}: iteration {it}, LP objective {obj:.4g}, primal-dual gap {gap:.3g}",
                {"iteration": it, "objective": obj, "gap": gap})
    return None


class HighsLP:
    """A live HiGHS model: ``min c'x, row_lower <= A x <= row_upper, col bounds``.

    Args:
        c: the objective.
        A: the constraint matrix (any scipy.sparse).
        row_lower: lower bounds of the rows.
        row_upper: upper bounds of the rows.
        col_lower: lower bounds of the variables.
        col_upper: upper bounds of the variables.
        solver: 'simplex' (dual simplex) or 'ipm' (interior point with crossover).
        time_limit: seconds per solve (of wall-clock time: HiGHS's own limit counts the time of
            every run of a model, so it is set afresh before each one), or None.
        tolerance: primal and dual feasibility tolerance (HiGHS accepts down to 1e-10).
        presolve: HiGHS presolve; switch off where dual rays of infeasible models are needed.
        progress: receives an 'lp' event for each iteration line HiGHS logs (iteration count
            and objective; HiGHS logs them every few seconds), so a long solve shows where it is.

    HiGHS's ``threads`` option is never set: HiGHS keeps one thread scheduler per process, and
    from highspy 1.16 on a model whose ``threads`` differs from the scheduler's fails to run
    (status 'Not Set'). Models that run side by side on Python threads (the pricing of the
    outputs decomposition) use serial simplex and need no setting.
    """

    def __init__(self, c: np.ndarray, A: sp.spmatrix, row_lower: np.ndarray, row_upper: np.ndarray,
                 col_lower: np.ndarray, col_upper: np.ndarray, *, solver: str = "simplex",
                 time_limit: float | None = None, tolerance: float = 1e-9, presolve: bool = True,
                 log: bool = False, progress: Progress | None = None) -> None:
        self.h = highspy.Highs()
        self.hooks: _Hooks | None = None
        self.time_limit = None if time_limit is None else V.positive_float("time_limit", time_limit, allow_inf=True)
        _configure(self.h, solver=solver, tolerance=tolerance,
                   presolve=presolve, log=log)
        if progress is not None:
            self._follow(progress, solver)
        A = sp.csr_matrix(A)
        A.sort_indices()
        n_row, n_col = A.shape
        c = np.ascontiguousarray(c, dtype=np.float64)
        if c.shape != (n_col,):
            raise ValueError(f"c must have {n_col} entries, got {c.shape}")
        lp = highspy.HighsLp()
        lp.num_col_ = int(n_col)
        lp.num_row_ = int(n_row)
        lp.col_cost_ = c
        lp.col_lower_ = np.ascontiguousarray(col_lower, dtype=np.float64)
        lp.col_upper_ = np.ascontiguousarray(col_upper, dtype=np.float64)
        lp.row_lower_ = np.ascontiguousarray(row_lower, dtype=np.float64)
        lp.row_upper_ = np.ascontiguousarray(row_upper, dtype=np.float64)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.num_col_ = int(n_col)
        lp.a_matrix_.num_row_ = int(n_row)
        lp.a_matrix_.start_ = A.indptr.astype(np.int32)
        lp.a_matrix_.index_ = A.indices.astype(np.int32)
        lp.a_matrix_.value_ = np.ascontiguousarray(A.data, dtype=np.float64)
        # no integrality vector: an all-continuous one makes HiGHS drop its basis after changes
        st = self.h.passModel(lp)
        if st == highspy.HighsStatus.kError:
            raise SolverLimitError("HiGHS rejected the model (passModel returned an error: coefficients out of its range?)")
        self.n_col = n_col
        self.n_row = n_row
        if A.nnz >= INTERRUPTIBLE_NONZEROS and not stops_enforced():
            self._poll_for_stop()

    def _callback(self) -> _Hooks:
        """The model's hooks, its HiGHS callback set to :func:`_poll` the first time (the raw
        callback of highspy's base class: highspy's own dispatch costs twice as much a call)."""
        if self.hooks is None:
            self.hooks = _Hooks()
            super(highspy.Highs, self.h).setCallback(_poll, self.hooks)  # type: ignore[arg-type]
        return self.hooks

    def _poll_for_stop(self) -> None:
        """Make each simplex and interior-point iteration ask whether to stop."""
        self._callback()
        for kind in (highspy.cb.HighsCallbackType.kCallbackSimplexInterrupt,
                     highspy.cb.HighsCallbackType.kCallbackIpmInterrupt):
            self.h.startCallback(kind)

    def _follow(self, progress: Progress, solver: str) -> None:
        """Send HiGHS's iteration lines to ``progress`` through its logging callback (the log
        itself stays off the console)."""
        self.h.setOptionValue("output_flag", True)
        self.h.setOptionValue("log_to_console", False)

        sign = [1.0]

        def on_log(message: str) -> None:
            for line in str(message).splitlines():
                if "Dualized model:" in line:
                    sign[0] = -1.0 if "yes" in line else 1.0
                found = iteration_line(solver, line, sign[0])
                if found is not None:
                    report(progress, "lp", found[0], found[1])

        self._callback().log = on_log
        self.h.startCallback(highspy.cb.HighsCallbackType.kCallbackLogging)

    # ------------------------------------------------------------- changes
    def add_rows(self, A_rows: sp.spmatrix, lower: np.ndarray, upper: np.ndarray) -> None:
        """Append rows (HiGHS keeps its basis and hot-starts the next solve)."""
        R = sp.csr_matrix(A_rows)
        R.sort_indices()
        if R.shape[1] != self.n_col:
            raise ValueError(f"new rows must have {self.n_col} columns, got {R.shape[1]}")
        st = self.h.addRows(int(R.shape[0]), np.ascontiguousarray(lower, dtype=np.float64),
                            np.ascontiguousarray(upper, dtype=np.float64), int(R.nnz),
                            R.indptr[:-1].astype(np.int32), R.indices.astype(np.int32),
                            np.ascontiguousarray(R.data, dtype=np.float64))
        if st == highspy.HighsStatus.kError:
            raise SolverLimitError("HiGHS rejected the new rows")
        self.n_row += R.shape[0]

    def delete_rows(self, rows: np.ndarray) -> None:
        """Delete the given rows. Rows whose slack is basic leave the rest of the basis valid,
        and the next solve hot-starts from it."""
        rows = np.ascontiguousarray(np.unique(rows), dtype=np.int32)
        if len(rows) == 0:
            return
        if self.h.deleteRows(int(len(rows)), rows) == highspy.HighsStatus.kError:
            raise SolverLimitError("HiGHS rejected the row deletion")
        self.n_row -= len(rows)

    def add_cols(self, A_cols: sp.spmatrix, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Append columns (new nonbasic variables: HiGHS keeps its basis, and a primal simplex
        carries on from it)."""
        Acs = sp.csc_matrix(A_cols)
        Acs.sort_indices()
        if Acs.shape[0] != self.n_row:
            raise ValueError(f"new columns must have {self.n_row} rows, got {Acs.shape[0]}")
        st = self.h.addCols(int(Acs.shape[1]), np.ascontiguousarray(cost, dtype=np.float64),
                            np.ascontiguousarray(lower, dtype=np.float64),
                            np.ascontiguousarray(upper, dtype=np.float64), int(Acs.nnz),
                            Acs.indptr[:-1].astype(np.int32), Acs.indices.astype(np.int32),
                            np.ascontiguousarray(Acs.data, dtype=np.float64))
        if st == highspy.HighsStatus.kError:
            raise SolverLimitError("HiGHS rejected the new columns")
        self.n_col += Acs.shape[1]

    def delete_cols(self, cols: np.ndarray) -> None:
        """Delete the given columns. Nonbasic columns leave the rest of the basis valid, and the
        next solve hot-starts from it."""
        cols = np.ascontiguousarray(np.unique(cols), dtype=np.int32)
        if len(cols) == 0:
            return
        if self.h.deleteCols(int(len(cols)), cols) == highspy.HighsStatus.kError:
            raise SolverLimitError("HiGHS rejected the column deletion")
        self.n_col -= len(cols)

    def set_row_bounds(self, rows: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Change the bounds of the given rows (the model and basis are kept)."""
        rows = np.ascontiguousarray(rows, dtype=np.int32)
        # (changeRowsBounds and getDualRay exist at run time but not in highspy's type stubs)
        st = self.h.changeRowsBounds(int(len(rows)), rows,  # type: ignore[attr-defined]
                                     np.ascontiguousarray(lower, dtype=np.float64),
                                     np.ascontiguousarray(upper, dtype=np.float64))
        if st == highspy.HighsStatus.kError:
            raise SolverLimitError("HiGHS rejected the row bound change")

    def set_col_bounds(self, cols: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Change the bounds of the given columns (the model and basis are kept)."""
        cols = np.ascontiguousarray(cols, dtype=np.int32)
        st = self.h.changeColsBounds(int(len(cols)), cols,
                                     np.ascontiguousarray(lower, dtype=np.float64),
                                     np.ascontiguousarray(upper, dtype=np.float64))
        if st == highspy.HighsStatus.kError:
            raise SolverLimitError("HiGHS rejected the column bound change")

    def set_option(self, name: str, value: bool | float | str) -> None:
        """Set a HiGHS option on the live model."""
        self.h.setOptionValue(name, value)

    def get_basis(self) -> highspy.HighsBasis | None:
        """The current simplex basis, or None if there is none."""
        b = self.h.getBasis()
        return b if b.valid else None

    def use_dual_simplex(self) -> None:
        """Make the next solves dual simplex, the algorithm that hot-starts from a basis (after
        added rows, or after an IPM solve with crossover)."""
        self.h.setOptionValue("solver", "simplex")
        self.h.setOptionValue("simplex_strategy", 1)

    def set_basis(self, basis: highspy.HighsBasis) -> bool:
        """Start the next solve from ``basis`` (from a model with the same shape); switches the
        solver to dual simplex, which is what can use it. Returns False if HiGHS refused it."""
        self.use_dual_simplex()
        # devex pricing: dual steepest edge would first compute a weight per row (one solve
        # with the basis each), which on a 58k-row model costs more than the few iterations
        self.h.setOptionValue("simplex_dual_edge_weight_strategy", 1)
        return self.h.setBasis(basis) != highspy.HighsStatus.kError

    def set_basis_status(self, col_status: np.ndarray, row_status: np.ndarray) -> bool:
        """Start the next solve from the basis given by status codes, one per column and one
        per row: 0 nonbasic at the lower bound, 1 basic, 2 nonbasic at the upper bound (as
        :meth:`set_basis`). Returns False if HiGHS refused it."""
        b = highspy.HighsBasis()
        st = highspy.HighsBasisStatus
        codes = (st.kLower, st.kBasic, st.kUpper)
        b.col_status = [codes[int(v)] for v in col_status]
        b.row_status = [codes[int(v)] for v in row_status]
        b.valid = True
        return self.set_basis(b)

    def basis_status(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The current basis as the status codes :meth:`set_basis_status` takes (one per column,
        one per row), or None if there is none."""
        b = self.get_basis()
        if b is None:
            return None
        col = np.fromiter((int(v) for v in b.col_status), dtype=np.int8, count=self.n_col)
        row = np.fromiter((int(v) for v in b.row_status), dtype=np.int8, count=self.n_row)
        if (col > 2).any() or (row > 2).any():    # a free nonbasic (zero) status: none in a bounded LP
            return None
        return col, row

    # --------------------------------------------------------------- solve
    def set_time_limit(self, seconds: float | None) -> None:
        """Limit each following solve to ``seconds`` of wall-clock time (None: no limit)."""
        self.time_limit = None if seconds is None else max(1e-3, float(seconds))

    def solve(self, fetch: tuple[str, ...] = ("x", "row_dual", "col_dual")) -> LPSolution:
        """Run HiGHS; the solution's vectors named in ``fetch`` are copied out, the others are
        None (each costs a Python list of its length, about 30 microseconds per 1,000 entries:
        a loop of thousands of small solves fetches only what it reads)."""
        unknown = set(fetch) - {"x", "row_dual", "col_dual"}
        if unknown:
            raise ValueError(f"fetch names 'x', 'row_dual' or 'col_dual', got {sorted(unknown)}")
        limit = INF if self.time_limit is None or not math.isfinite(self.time_limit) else \
            self.h.getRunTime() + self.time_limit     # HiGHS's clock runs across every run of the model
        self.h.setOptionValue("time_limit", float(limit))
        t0 = time.perf_counter()
        if self.hooks is None:
            self.h.run()
        else:
            with native_section(self.hooks.stop):
                self.h.run()
        seconds = time.perf_counter() - t0
        ms = self.h.getModelStatus()
        if ms == highspy.HighsModelStatus.kInterrupt:
            raise Interrupted("HiGHS was stopped: the process is stopping")
        status = _STATUS.get(ms, f"error: {self.h.modelStatusToString(ms)}")
        info = self.h.getInfo()
        iters = int(info.simplex_iteration_count) + int(info.ipm_iteration_count)
        primal_ok = int(info.primal_solution_status) == 2  # kSolutionStatusFeasible
        x = row_dual = col_dual = None
        if status == "optimal" or primal_ok:
            sol = self.h.getSolution()
            if "x" in fetch:
                x = np.asarray(sol.col_value, dtype=np.float64)
            if sol.dual_valid:
                if "row_dual" in fetch:
                    row_dual = np.asarray(sol.row_dual, dtype=np.float64)
                if "col_dual" in fetch:
                    col_dual = np.asarray(sol.col_dual, dtype=np.float64)
        return LPSolution(status=status, x=x, row_dual=row_dual, col_dual=col_dual,
                          objective=float(info.objective_function_value),
                          primal_feasible=bool(primal_ok or status == "optimal"),
                          iterations=iters, seconds=seconds)

    def dual_ray(self) -> np.ndarray | None:
        """A dual ray proving infeasibility (HiGHS ``getDualRay``), or None if none exists."""
        st, has, ray = self.h.getDualRay()  # type: ignore[attr-defined]
        if st == highspy.HighsStatus.kError or not has:
            return None
        return np.asarray(ray, dtype=np.float64)

    def primal(self) -> np.ndarray:
        """The primal values of the last solve."""
        return np.asarray(self.h.getSolution().col_value, dtype=np.float64)


def solve_lp(c: np.ndarray, A: sp.spmatrix, row_lower: np.ndarray, row_upper: np.ndarray,
             col_lower: np.ndarray, col_upper: np.ndarray, **options: object) -> LPSolution:
    """Solve one LP with HiGHS (see :class:`HighsLP` for the options)."""
    return HighsLP(c, A, row_lower, row_upper, col_lower, col_upper, **options).solve()  # type: ignore[arg-type]
