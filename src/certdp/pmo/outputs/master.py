"""The master of the outputs decomposition: a dense LP over points of the mDP polytope.

``min g' b (+ slack terms)  s.t.  R b (+ s+ - s-) = 1,  b >= 0``: column s is a point r_s of P
charged ``min_k c_k' r_s`` and given to that output, so any solution is a mechanism up to the
row sums (C is a convex cone). The columns of every master of a run live once, in one
:class:`~certdp.lp.dense.ColumnStore` (each master holds the slots of its own columns: the
stabilised and the free master share most columns, and neither copies them when columns are
added or deleted). It is solved by the dense interior-point method of
:mod:`certdp.lp.dense` (0.1-0.3 s per solve at N = 500, where HiGHS takes 2-5 s on these dense
masters), with HiGHS's IPM as the fallback when it does not converge.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ... import _validate as V
from ...lp.dense import ColumnStore, DenseColumns, solve_dense_lp
from ...lp.highs import INF, HighsLP, solve_lp
from .config import BLOCK_ROWS, SCREEN_SHARE, SPLIT_GAIN


#: Bytes the HiGHS fallback holds per entry of the dense columns (their sparse copy, HiGHS's
#: model and its interior-point work: 73-76 measured at 800, 1,600 and 2,000 records).
HIGHS_ENTRY_BYTES = 80


class MasterSolution(NamedTuple):
    """One solve of a :class:`ColumnMaster`: row duals, column weights, total slack, ``g' b``
    (the objective without the slack terms), ``value`` (with them: with the stabilisation box a
    relaxation of the free master, so no mechanism in the columns' span costs less, up to the
    solver's tolerance) and seconds."""

    duals: np.ndarray
    weights: np.ndarray
    slack: float
    objective: float
    value: float
    seconds: float


class ColumnMaster:
    """The master LP of the module docstring, with dense columns R.

    With ``box``, slack columns s+ / s- cost ``delta + center`` / ``delta - center``, which keeps
    the duals in the box ``|lambda - center| <= delta`` (delta a number or one per row; box-step
    stabilisation; without it the duals of this degenerate master swing to +-80 when costs are
    O(1), and the bound stalls).
    Without ``box`` every solution is a mechanism up to the solver's tolerance (the all-ones
    columns make it feasible), which certification turns into an exact one.
    Its columns are the ``slots`` of ``store`` (its own store unless one is given).
    """

    def __init__(self, n: int, tolerance: float, comp: np.ndarray | None = None,
                 store: ColumnStore | None = None, block_rows: int = BLOCK_ROWS) -> None:
        self.n = n
        self.store = store if store is not None else ColumnStore(n)
        self.tolerance = tolerance
        # the connected component of each row: every column lies on one component (module
        # docstring of .solve), so the LP splits into one LP per group of components
        self.comp = np.zeros(n, dtype=np.int64) if comp is None else np.asarray(comp, dtype=np.int64)
        self.block_rows = block_rows
        groups = self._groups()   # fixed with the rows: their components and their rows
        self.split = [(g, np.flatnonzero(np.isin(self.comp, g))) for g in groups] if len(groups) > 1 else []
        self.slots = np.zeros(0, dtype=np.int64)
        self.col_comp = np.zeros(0, dtype=np.int64)
        self.owner = np.zeros(0, dtype=np.int64)
        self.cost = np.zeros(0)
        self.idle = np.zeros(0, dtype=np.int64)   # consecutive prunes each column was idle at
        self.center = np.zeros(n)
        self.delta = math.inf
        self.iterations = 0
        self.work = 0.0      # the last stabilised solve's dense work: rows^2 x columns x steps, summed over its parts
        self.flops = 0.0     # every solve's dense work so far: (rows^2 x columns + rows^3 / 3) x steps
        self.fallbacks = 0   # solves handed to HiGHS because the dense IPM did not converge
        self.protected = 0   # the first columns are never deleted (they keep the LP feasible)

    @property
    def n_cols(self) -> int:
        """The number of columns in the master."""
        return int(self.cost.size)

    @property
    def R(self) -> np.ndarray:
        """The columns as one dense N x columns array (a copy)."""
        return self.store.gather(self.slots)

    def columns(self, rows: np.ndarray | None = None, cols: np.ndarray | slice | None = None) -> DenseColumns:
        """The columns (those at ``cols``, restricted to ``rows``), read in place."""
        slots = self.slots if cols is None else self.slots[cols]
        return DenseColumns(store=self.store, slots=slots, rows=rows)

    def set_box(self, center: np.ndarray, delta: float | np.ndarray) -> None:
        """Restrict the row-sum multipliers to a box of half-width ``delta`` around ``center``."""
        self.center = center.copy()
        self.delta = np.asarray(delta, dtype=np.float64)

    def add(self, R: np.ndarray, owner: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Add the columns of ``R`` (points of P, each charged ``g`` and given to ``owner``);
        returns their slots in the store, for :meth:`attach` by another master."""
        support = R != 0
        first = self.comp[np.argmax(support, axis=0)]
        if np.any(support & (self.comp[:, None] != first[None, :])):
            raise ValueError("a master column must lie on one connected component")
        slots = self.store.put(R)
        self.attach(slots, owner, g, first)
        return slots

    def attach(self, slots: np.ndarray, owner: np.ndarray, g: np.ndarray, col_comp: np.ndarray) -> None:
        """Add columns already in the store (at ``slots``, on components ``col_comp``)."""
        self.store.take(slots)
        self.slots = np.concatenate([self.slots, slots])
        self.col_comp = np.concatenate([self.col_comp, col_comp])
        self.owner = np.concatenate([self.owner, owner])
        self.cost = np.concatenate([self.cost, g])
        self.idle = np.concatenate([self.idle, np.zeros(g.size, dtype=np.int64)])

    def keep(self, mask: np.ndarray) -> None:
        """Keep the columns where ``mask`` holds; the others leave this master (and the store,
        once no master holds them)."""
        self.store.release(self.slots[~mask])
        self.slots, self.cost, self.owner, self.idle = self.slots[mask], self.cost[mask], self.owner[mask], self.idle[mask]
        self.col_comp = self.col_comp[mask]

    def solve(self, box: bool = True, elastic: tuple[np.ndarray, np.ndarray] | None = None, tol: float = 1e-8
              ) -> MasterSolution:
        """Solve the master; ``box`` False solves without the slack columns (every solution is
        then a mechanism); ``elastic=(center, width)`` uses that box instead of the stabilisation
        box; ``tol`` is the interior-point method's relative tolerance."""
        t0 = time.perf_counter()
        if elastic is not None:
            slack_costs = (elastic[1] + elastic[0], elastic[1] - elastic[0])
        else:
            slack_costs = (self.delta + self.center, self.delta - self.center) if box else None
        out = self._solve_blocks(slack_costs, tol)
        if out is not None:
            y, b, sp_, sm_, iterations, work = out
            if box and elastic is None:
                self.iterations, self.work = iterations, work
        else:   # rare (a degenerate, badly conditioned master): HiGHS, slower but sure
            self.fallbacks += 1
            y, b, sp_, sm_ = self._highs(slack_costs)
        b, sp_, sm_ = np.maximum(b, 0.0), np.maximum(sp_, 0.0), np.maximum(sm_, 0.0)
        objective = float(self.cost @ b)
        value = objective + (float(slack_costs[0] @ sp_ + slack_costs[1] @ sm_) if slack_costs is not None else 0.0)
        return MasterSolution(y, b, float(sp_.sum() + sm_.sum()), objective, value, time.perf_counter() - t0)

    def _groups(self) -> list[np.ndarray]:
        """The components in groups solved as one LP each: every component of at least
        ``block_rows`` rows on its own, the smaller ones packed in order into groups of at most
        that many rows (a dense solve has a fixed cost per iteration; its work grows as rows^2 x
        columns). One group, the whole LP, unless the split cuts that work by ``SPLIT_GAIN``: a
        split changes the inexact master's duals, and with them the rounds (text-500, whose
        largest component has 493 of 500 records: 27 rounds whole, 31 split)."""
        sizes = np.bincount(self.comp)
        rows = self.block_rows
        groups = [np.array([c]) for c in np.flatnonzero(sizes >= rows)]
        pack: list[int] = []
        for c in np.flatnonzero((sizes > 0) & (sizes < rows)):
            if pack and sizes[pack].sum() + sizes[c] > rows:
                groups.append(np.array(pack))
                pack = []
            pack.append(int(c))
        if pack:
            groups.append(np.array(pack))
        work = sum(float(sizes[g].sum()) ** 2 for g in groups)
        return groups if work <= (1.0 - SPLIT_GAIN) * float(self.n) ** 2 else [np.unique(self.comp)]

    def _solve_blocks(self, slack_costs: tuple[np.ndarray, np.ndarray] | None, tol: float
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, float] | None:
        """The dense interior-point method on each group of components (:meth:`_groups`), the
        parts put together; None if any part did not converge. The LP is the same: no row or
        column joins two groups. ``iterations`` is the largest part's count, ``work`` the sum
        over the parts of rows^2 x columns x steps (0 for a part its slack alone covers)."""
        n, m = self.n_cols, self.n
        y, b, sp_, sm_ = np.zeros(m), np.zeros(n), np.zeros(m), np.zeros(m)
        live = self._screen(slack_costs)
        parts = [(rows, np.flatnonzero(np.isin(self.col_comp, comps) & live)) for comps, rows in self.split] \
            or [(np.arange(m), np.flatnonzero(live))]
        whole = not self.split
        iterations, work = 0, 0.0
        for rows, cols in parts:
            # the part's columns gathered once: an interior-point iteration reads them 5-30 times
            R = self.store.gather(self.slots[cols], None if whole else rows)
            costs = None if slack_costs is None else (slack_costs[0][rows], slack_costs[1][rows])
            if cols.size == 0:   # every column of these components pruned or screened: slack covers them
                if costs is None:
                    return None
                y[rows], sp_[rows] = costs[0], 1.0
                continue
            r = solve_dense_lp(R, self.cost[cols], np.ones(rows.size), costs, tol=tol)
            if r.status not in ("optimal", "inaccurate"):
                return None
            y[rows], b[cols] = r.y, r.b
            if slack_costs is not None:
                sp_[rows], sm_[rows] = r.sp, r.sm
            iterations = max(iterations, r.iterations)
            work += float(rows.size) ** 2 * cols.size * max(1, r.iterations)
            self.flops += (float(rows.size) ** 2 * cols.size + float(rows.size) ** 3 / 3) * max(1, r.iterations)
        if slack_costs is None:
            sp_, sm_ = np.zeros(0), np.zeros(0)
        return y, b, sp_, sm_, iterations, work

    def _screen(self, slack_costs: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
        """The columns that can be in an optimal solution. With slack columns, every dual lies
        below the cost of s+ (the box's upper edge, u), and columns are non-negative, so a
        column with ``g_s > u' r_s`` has a positive reduced cost at every feasible dual: it is
        0 in every optimal solution and its dual constraint never binds, and leaving it out changes
        neither the optimum nor the optimal duals. Text data's first rounds, where the start's
        tents cost more than the box lets any row pay, keep few of their N columns. All are
        kept when fewer than ``SCREEN_SHARE`` of them go."""
        live = np.ones(self.n_cols, dtype=bool)
        if slack_costs is None or self.n_cols == 0:
            return live
        reach = self.columns().tmul(slack_costs[0])
        dead = self.cost > reach + 1e-9 * np.maximum(1.0, np.abs(reach))
        if dead.sum() >= SCREEN_SHARE * self.n_cols:
            live[dead] = False
        return live

    def _highs(self, slack_costs: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, ...]:
        n, m = self.n_cols, self.n
        # HiGHS holds the dense columns as a sparse LP: about 75 bytes an entry (measured at
        # 800-2,000 records), far above the dense solve's 8; refused rather than let the
        # kernel end the process
        need, free = HIGHS_ENTRY_BYTES * m * n, V.available_memory()
        if need > free:
            raise MemoryError(f"the outputs master's HiGHS fallback needs about {need / 1e9:.3g} GB for its "
                              f"{m:,} x {n:,} columns, more than the {free / 1e9:.3g} GB available")
        A = sp.csr_matrix(self.R)
        c = self.cost
        if slack_costs is not None:
            eye = sp.identity(m, format="csr")
            A = sp.hstack([A, eye, -eye], format="csr")
            c = np.concatenate([c, *slack_costs])
        sol = solve_lp(c, A, np.ones(m), np.ones(m), np.zeros(A.shape[1]), np.full(A.shape[1], INF),
                       solver="ipm", tolerance=self.tolerance, presolve=False)
        if sol.status != "optimal" or sol.x is None or sol.row_dual is None:
            raise RuntimeError(f"output decomposition master: HiGHS returned {sol.status!r}")
        x = sol.x   # [b, s+, s-]; the slack parts are empty without the box
        return sol.row_dual, x[:n], x[n:n + m], x[n + m:]

    def prune(self, lam: np.ndarray, b: np.ndarray, limit: int, weight: float = 1e-7, reduced: float = 1e-6,
              patience: int = 1) -> int:
        """Above ``limit`` columns, delete those with weight at most ``weight`` x the largest and
        a reduced cost above ``reduced`` (they can price out again later) at this and the
        ``patience - 1`` calls before. A master solved to a loose tolerance leaves weights of
        order tolerance / reduced cost on the columns its optimum does not use, so its cuts must
        be higher; a patience above 1 keeps a column that the next master may use from being
        deleted and priced again in turn with another (which stalls the bound). Returns how many
        were deleted."""
        rc = self.cost - self.columns().tmul(lam)
        idle = (b <= weight * max(1.0, float(b.max()))) & (rc > reduced)
        self.idle = np.where(idle, self.idle + 1, 0)
        if self.n_cols <= limit:
            return 0
        drop = self.idle >= patience
        drop[:self.protected] = False
        if not drop.any():
            return 0
        self.keep(~drop)
        return int(drop.sum())

    def matrix(self, b: np.ndarray, K: int) -> np.ndarray:
        """The mechanism of weights ``b``: output k gets the weighted sum of its columns."""
        return columns_matrix(self.columns(), self.owner, b, K)


def columns_matrix(R: DenseColumns, owner: np.ndarray, b: np.ndarray, K: int) -> np.ndarray:
    """``Z[:, k] = sum of b_s r_s over the columns s given to k``, a block of columns at a time."""
    Z = np.zeros((R.shape[0], K))
    for start, B in R.blocks():
        stop = start + B.shape[1]
        S = sp.csr_matrix((b[start:stop], (np.arange(stop - start), owner[start:stop])), shape=(stop - start, K))
        Z += np.asarray((S.T @ B.T).T)
    return Z


def new_columns(Z: np.ndarray, C: np.ndarray, lam: np.ndarray, comp: np.ndarray, n_comp: int) -> np.ndarray:
    """The pieces (one per connected component) of the priced points that have a negative
    reduced cost, without repeats. Each piece is in C, since no constraint links components."""
    if n_comp > 1:
        # piece (j, c) of column j on component c, for the pairs that occur only: a dense
        # N x columns x components array would take 2.5 GB at Gaussian 5,000 (300+ components)
        rows, cols = np.nonzero(Z)
        piece, at = np.unique(cols * n_comp + comp[rows], return_inverse=True)
        Z_pieces = np.zeros((Z.shape[0], piece.size))
        Z_pieces[rows, at] = Z[rows, cols]
        Z = Z_pieces
    rc = np.min(C.T @ Z, axis=0) - lam @ Z
    good = Z[:, rc < -1e-9]
    if good.shape[1] <= 1:
        return good
    _, first = np.unique(np.round(good.T, 10), axis=0, return_index=True)
    return good[:, np.sort(first)]


class FilledMaster:
    """The free master with an mDP *fill*: one more point f of the cone C, given whole to one
    output ``k0``, that makes up whatever the columns leave of the row sums:

        min  g' b + c_k0' f   s.t.  R b + f = 1,   A f <= 0,   b, f >= 0.

    Every solution is a mechanism (each output's column is a sum of points of C), and f = 0
    gives back the exact free master, so it never costs more. It is what the free master lacks
    where the priced points do not combine into an exact cover of the rows and it falls back
    on the all-ones columns (word vectors: text-500 with eta fixed certified 1.32397, the
    all-ones cover, until round 26 and 1% only at round 64; with the fill from round 11,
    1.2325 there and 1% at round 22; docs/history.md). The columns may then undershoot the
    row sums, and f makes up the rest along the mDP rows.

    A live HiGHS model (simplex): columns are appended as they are priced (a primal simplex
    carries on from the last basis), never deleted, and the cone rows of f join only when f
    violates them (most of C's rows never bind: 700 of 2,500 on text-500).
    """

    def __init__(self, A: sp.csr_matrix, fill_cost: np.ndarray, fill_output: int, n_outputs: int,
                 tolerance: float, max_iterations: int | None = None, store: ColumnStore | None = None) -> None:
        self.A = sp.csr_matrix(A)
        self.n = self.A.shape[1]
        self.store = store if store is not None else ColumnStore(self.n)
        self.k0, self.K = int(fill_output), int(n_outputs)
        self.lp = HighsLP(np.asarray(fill_cost, dtype=np.float64), sp.identity(self.n, format="csr"),
                          np.ones(self.n), np.ones(self.n), np.zeros(self.n), np.full(self.n, INF),
                          solver="simplex", tolerance=tolerance, presolve=False)
        self.in_model = np.zeros(self.A.shape[0], dtype=bool)   # the cone rows of f in the model
        self.slots = np.zeros(0, dtype=np.int64)            # the columns in the store, as added
        self.owner = np.zeros(0, dtype=np.int64)
        self.iterations = 0
        self.max_iterations = max_iterations   # simplex iterations a solve may take (None: no limit)

    def add(self, R: np.ndarray, owner: np.ndarray, g: np.ndarray) -> None:
        """Append columns: points of P, each charged ``g`` and given to ``owner``."""
        if R.shape[1]:
            self.attach(self.store.put(R), owner, g)

    def attach(self, slots: np.ndarray, owner: np.ndarray, g: np.ndarray) -> None:
        """Append the columns at ``slots`` of the store (held for the rest of the run)."""
        if len(slots) == 0:
            return
        self.store.take(slots)
        for start, B in DenseColumns(store=self.store, slots=slots).blocks():
            cols = sp.vstack([sp.csc_matrix(B), sp.csc_matrix((self.lp.n_row - self.n, B.shape[1]))])
            stop = start + B.shape[1]
            self.lp.add_cols(cols, g[start:stop], np.zeros(stop - start), np.full(stop - start, INF))
        self.slots = np.concatenate([self.slots, slots])
        self.owner = np.concatenate([self.owner, np.asarray(owner, dtype=np.int64)])

    def solve(self) -> np.ndarray | None:
        """The optimal matrix (to HiGHS's tolerance: certify it), or None if HiGHS failed or
        the solve (with its added rows) reached ``max_iterations``."""
        left = self.max_iterations
        while True:
            if left is not None:
                self.lp.set_option("simplex_iteration_limit", max(1, left))
            sol = self.lp.solve(fetch=("x",))
            self.iterations += sol.iterations
            if left is not None:
                left -= sol.iterations
            if sol.status != "optimal" or sol.x is None:
                return None
            x = np.maximum(sol.x, 0.0)
            f, b = x[:self.n], x[self.n:]
            v = self.A @ f
            v[self.in_model] = -INF
            bad = np.flatnonzero(v > 1e-12)
            if bad.size == 0:
                break
            self.in_model[bad] = True
            rows = self.A[bad]
            self.lp.add_rows(sp.csr_matrix((rows.data, rows.indices, rows.indptr), shape=(bad.size, self.lp.n_col)),
                             np.full(bad.size, -INF), np.zeros(bad.size))
        Z = columns_matrix(DenseColumns(store=self.store, slots=self.slots), self.owner, b, self.K)
        Z[:, self.k0] += f
        return Z
