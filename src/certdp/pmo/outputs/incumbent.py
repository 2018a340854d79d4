"""The upper-bound strategy of the outputs decomposition: the best certified mechanism so far,
and the candidates that improve it.

Four candidates, each certified exactly before it counts (:func:`certdp.certify.certify`):

* the *elastic* free master (the master without the stabilisation box, its row sums allowed off
  1 at a high price), lifted to exact mDP (:func:`certdp.pmo.upper.mdp_lift`: its columns keep
  mDP only to the solver's absolute tolerance, which compounds along paths), with its rows off 1
  re-solved by :func:`certdp.pmo.upper.repair_rows`;
* the *exact* free master (every solution a mechanism) when that repair gives up;
* the *filled* free master (:class:`~certdp.pmo.outputs.master.FilledMaster`: the free
  master's columns plus one point of the cone that fills the rest of the row sums) where the
  free master's cover keeps leaning on its all-ones columns;
* once the stabilised master's slack is small, its own matrix divided by its row sums, lowered
  to its mDP envelope (:func:`certdp.pmo.upper.mdp_envelope`) and mixed row by row with the
  uniform mechanism (:func:`certdp.pmo.upper.rebalance_rows`).

It keeps the best candidate as the solver gave it, so that the result is made by
:meth:`certdp.mechanism.Mechanism.certified` from it, the one way a solver's matrix becomes a
mechanism (certification is deterministic: the same certified matrix as the run's).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from ...certify import certify
from ...lp.dense import ColumnStore
from ...space import Space
from ..upper import mdp_envelope, mdp_lift, rebalance_rows, repair_rows
from .config import (ELASTIC_HARDEN, EXACT_TOLERANCE, FILL_ITERATIONS, FILL_NEAR, FREE_COLUMNS, REBALANCE_SLACK,
                     REPAIR_SHARE, OutputsConfig)
from .master import ColumnMaster, FilledMaster


class Backoff:
    """Try something; after the failures of a row, skip 0, 1, 2, 4, ... chances before trying
    again. A first failure is retried at the next chance: the chances are upper steps, each
    ``upper_every`` rounds apart, and a first failure can come from the start's columns alone
    (Gold Coast at 2,000 records: the elastic master's repair fails at round 1 and succeeds at
    round 21; skipping the step of round 11 held its certified cost at 2.4262, 96% above the
    lower bound, for ten rounds)."""

    def __init__(self) -> None:
        self.wait = self.skip = 0

    def ready(self) -> bool:
        """Whether to try now (a chance passes either way)."""
        if self.skip > 0:
            self.skip -= 1
            return False
        return True

    def failed(self) -> None:
        """A try failed: the failures of a row skip 0, 1, 2, 4, ... chances."""
        self.skip = self.wait
        self.wait = max(1, 2 * self.wait)

    def succeeded(self) -> None:
        """A try succeeded: try again at the next chance."""
        self.wait = 0


class Incumbent:
    """The best certified mechanism of a run and the free masters that improve it.

    ``C`` is the weighted cost in units of its largest entry (the engine's units), ``A`` the
    cone rows, ``edges``/``dist`` the kept mDP pairs, ``n_comp``/``comp`` the connected
    components, ``store`` the run's columns. Columns reach it through :meth:`attach` as they
    are priced."""

    def __init__(self, space: Space, C: np.ndarray, A: sp.csr_matrix, edges: np.ndarray, dist: np.ndarray,
                 comp: np.ndarray, n_comp: int, tolerance: float, config: OutputsConfig, store: ColumnStore) -> None:
        self.space, self.C, self.A, self.edges, self.dist = space, C, A, edges, dist
        self.eps = space.epsilon
        self.K = C.shape[1]
        self.n_comp = n_comp
        self.config = config
        self.tolerance = tolerance
        self.free = ColumnMaster(space.n_records, tolerance, comp, store)   # without the box: mechanisms
        self.filled: FilledMaster | None = None    # the free master with an mDP fill, once needed
        self.leaning = 0                           # upper steps in a row whose cover leaned on the all-ones
        self.fill_output = int(np.argmin(C.sum(axis=0)))    # the best constant mechanism's output
        self.constant = float(C[:, self.fill_output].sum())  # and its cost
        self.ub = math.inf
        self.best: np.ndarray | None = None        # the best candidate as the solver gave it (certify it)
        self.seconds = {"free": 0.0, "cert": 0.0}
        self.rebalance = Backoff()
        self.repair = Backoff()
        self.elastic_width = config.elastic_width     # hardened by each failed repair
        self.counts = {"rebalanced_tried": 0, "rebalanced_best": 0, "repaired_tried": 0, "repaired_best": 0,
                       "repaired_failed": 0, "filled_tried": 0, "filled_best": 0, "filled_given_up": 0}

    def attach(self, slots: np.ndarray, owner: np.ndarray, g: np.ndarray, col_comp: np.ndarray) -> None:
        """New columns, already in the store at ``slots``."""
        self.free.attach(slots, owner, g, col_comp)
        if self.filled is not None:
            self.filled.attach(slots, owner, g)

    def protect_start(self) -> None:
        """Never delete the columns added so far (the all-ones columns keep the free master
        feasible)."""
        self.free.protected = self.free.n_cols

    # ------------------------------------------------------------ candidates
    def certified(self, Z: np.ndarray, rebalance: bool = False) -> bool:
        """Certify ``Z`` (lowered to its envelope and rebalanced first, if asked); True if it
        is the new best."""
        t0 = time.perf_counter()
        if rebalance:
            mixed = rebalance_rows(mdp_envelope(Z, self.eps, self.edges, self.dist), self.C, self.eps, self.edges,
                                   self.dist, cutoff=self.ub)
            if mixed is None:   # its LP's value already reached the best upper bound
                self.seconds["cert"] += time.perf_counter() - t0
                return False
            Z = mixed
        Zc, _ = certify(Z, self.eps, *self.space.neighbor_pairs)
        self.seconds["cert"] += time.perf_counter() - t0
        val = float(np.sum(self.C * Zc))
        if val < self.ub:
            self.ub, self.best = val, Z
            return True
        return False

    def solve_free(self) -> tuple[np.ndarray, np.ndarray]:
        """Solve the exact free master and certify its matrix unless its value cannot beat the
        best; its duals and weights."""
        f = self.free.solve(box=False, tol=EXACT_TOLERANCE)
        self.seconds["free"] += f.seconds
        if f.objective < self.ub:
            self.certified(self.free.matrix(f.weights, self.K))
        return f.duals, f.weights

    def solve_elastic(self, lam: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The elastic free master around ``lam`` (slack prices the current elastic width x
        ``delta``), its rows whose sums are off 1 re-solved by :func:`repair_rows` (given up
        past ``REPAIR_SHARE`` of the records), certified; its duals and weights, or None if the
        repair failed (the width then grows ``ELASTIC_HARDEN`` times for the rest of the run)."""
        e = self.free.solve(elastic=(lam, self.elastic_width * delta), tol=EXACT_TOLERANCE)
        self.seconds["free"] += e.seconds
        t0 = time.perf_counter()
        Z = repair_rows(mdp_lift(self.free.matrix(e.weights, self.K), self.eps, self.edges, self.dist), self.C,
                        self.eps, self.edges, self.dist, max_rows=int(REPAIR_SHARE * self.free.n))
        self.seconds["cert"] += time.perf_counter() - t0
        self.counts["repaired_tried"] += 1
        if Z is None:
            self.counts["repaired_failed"] += 1
            self.repair.failed()
            self.elastic_width *= ELASTIC_HARDEN
            return None
        self.repair.succeeded()
        if self.certified(Z):
            self.counts["repaired_best"] += 1
        return e.duals, e.weights

    def solve_filled(self, n: int) -> None:
        """The filled free master (built from the free master's columns the first time, then
        given every new column), certified."""
        t0 = time.perf_counter()
        if self.filled is None:
            k0 = self.fill_output
            self.filled = FilledMaster(self.A, self.C[:, k0], k0, self.K, self.tolerance,
                                       max_iterations=int(FILL_ITERATIONS * n), store=self.free.store)
            self.filled.attach(self.free.slots, self.free.owner, self.free.cost)
        Z = self.filled.solve()
        self.seconds["free"] += time.perf_counter() - t0
        self.counts["filled_tried"] += 1
        if Z is None:
            self.counts["filled_given_up"] = 1   # for the rest of the run
        elif self.certified(Z):
            self.counts["filled_best"] += 1

    def step(self, lam: np.ndarray, delta: np.ndarray, stabilised: ColumnMaster, b: np.ndarray, slack: float,
             lower: float) -> None:
        """Improve the upper bound: the elastic free master around ``lam`` (or, when its repair
        fails, the exact one); the filled free master once that cover has leaned on the
        all-ones columns at ``fill_after`` steps in a row; then, once the stabilised master's
        ``slack`` is small, its own matrix at weights ``b``."""
        cfg = self.config
        out = self.solve_elastic(lam, delta) if self.repair.ready() else None
        lam_f, b_f = out if out is not None else self.solve_free()
        ones = self.free.columns(cols=slice(0, self.n_comp)).mul(b_f[:self.n_comp])   # all-ones, never pruned
        self.leaning = self.leaning + 1 if float(ones.mean()) >= cfg.fill_when else 0
        if (self.leaning >= cfg.fill_after and not self.counts["filled_given_up"]
                and self.constant <= (1.0 + FILL_NEAR) * lower):
            self.solve_filled(stabilised.n)
        self.free.prune(lam_f, b_f, int(FREE_COLUMNS * stabilised.n))
        if slack < REBALANCE_SLACK * stabilised.n and self.rebalance.ready():
            self.counts["rebalanced_tried"] += 1
            if self.certified(stabilised.matrix(b, self.K), rebalance=True):
                self.counts["rebalanced_best"] += 1
                self.rebalance.succeeded()
            else:
                self.rebalance.failed()
