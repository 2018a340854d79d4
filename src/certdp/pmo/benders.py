"""PMO by Benders decomposition over a partitioned secret dataset (paper 000, section 3.2).

The master holds the perturbation vectors of the boundary records (records with a neighbour
in another subset; Definition 3.2) and one ``w_l`` per subset; it starts with the mDP and
unit-measure constraints among boundary records (Eq. 10, 25-27) plus the initial cut set of
Property 3.2, ``z_i <= exp(eps D(i,j)) z_j`` for every pair of boundary records of the union
of the Y_l that are not neighbours (section 3.2, "Initial cut"). Subproblem ``l`` holds the
internal records of subset ``l``; its constraints with the boundary records become
right-hand sides that change with the master's solution (Eq. 13-16).

Where this reads the paper rather than transcribing it:

- The printed initial cut is ``z_i <= e^{D_ij} z_j``, without epsilon; Property 3.2, which it
  cites, has ``e^{eps D_ij}``, and only that form is valid for every mechanism (at eps > 1
  the printed one cuts off mDP matrices), so the cut is built with epsilon.
- The paper's optimality cut ``w_l >= (b - B y)' a + c_Y y`` puts the boundary records' cost
  inside every cut although it is already in the master's objective (Eq. 9); the authors'
  MATLAB code does the same, and its lower bound then overshoots. Here each cost is counted
  once: ``c_Y y`` only in the master's objective.
- A pair whose ratio ``exp(eps D)`` overflows float64 (eps D > 700) has no representable cut
  and is left out (a relaxation; ``stats["initial_cuts_left_out"]`` counts the rows left out).
- Block rows with a master variable are written with that variable's coefficient +-1
  (``x / exp(eps d) - y <= 0`` for ``x - exp(eps d) y <= 0``): the same inequality scaled by a
  positive factor, so the same feasible set, the same cuts up to their own positive factor.

Every other difference from the published algorithm is a switch of :class:`BendersConfig`,
off in the variant 'paper' and measured one at a time by
``benchmarks/paper000/paper_switches.py``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np
import scipy.sparse as sp

from ..graph import MDPGraph
from ..certify import certify
from ..lp.benders import BlockResult, BlockSpec, MasterSpec, benders
from ..lp.benders import elastic as elastic_block
from ..lp.executors import make_runner
from ..lp.highs import INF
from ..lp.outcome import SolverLimitError, Status, loss_bound, relative_gap, round_message
from ..mechanism import Mechanism, SolveResult
from ..progress import Progress, ProgressEvent, bounds_line, report
from ..space import Space
from .model import MAX_LOG_RATIO, mdp_rows, row_sum_rows
from .partition import Partition
from .upper import mdp_lift
from .partition import partition as partition_records

INITIAL_CUTS = ("union", "subset", "none")
"""Property 3.2's initial cuts: 'union' (every non-neighbouring pair of boundary records, as
published), 'subset' (only pairs of the same subset), 'none'."""

#: eps D above which exp(eps D) overflows float64
_OVERFLOW_LOG = 700.0


class EnvelopeSeparator:
    """Separates the envelope inequalities of the internal records.

    For an internal record i of subset l, boundary records j of subset l and D the path
    distance in the mDP graph, every feasible matrix has z[i,k] >= exp(-eps D(i,j)) z[j,k]
    and z[i,k] <= exp(eps D(i,j)) z[j,k] (Property 3.2). With sum_k z[i,k] = 1, for any choice
    of one j(k) per output::

        sum_k exp(-eps D(i,j(k))) z[j(k),k] <= 1   and   sum_k exp(eps D(i,j(k))) z[j(k),k] >= 1.

    These are valid for the full LP, and they involve only boundary (master) variables. Given
    the master's y, the most violated choice is the per-output argmax (argmin), so separation
    is exact and cheap. They cut off the boundary vectors for which the internal records cannot
    be completed: the row-sum infeasibility that plain Benders learns one ray at a time.
    """

    def __init__(self, groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]], K: int, tol: float = 1e-9,
                 per_group: int = 4) -> None:
        self.groups = groups  # (y record positions of B_l, F_low (|X| x |B|), F_up)
        self.K = K
        self.tol = tol
        self.per_group = per_group

    def __call__(self, y: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray] | None:
        K = self.K
        Y = y.reshape(-1, K)
        rows, cols, vals, lo, up = [], [], [], [], []
        r = 0
        kk = np.arange(K)
        for bpos, Flow, Fup in self.groups:
            Yb = Y[bpos]                                     # (|B|, K)
            low = Flow[:, :, None] * Yb[None, :, :]          # (|X|, |B|, K)
            jl = np.argmax(low, axis=1)                      # (|X|, K)
            sl = np.take_along_axis(low, jl[:, None, :], axis=1)[:, 0, :].sum(axis=1)
            # no path between i and j: no upper constraint (inf), never 0 * inf
            hi = np.where(np.isfinite(Fup)[:, :, None], np.where(np.isfinite(Fup), Fup, 0.0)[:, :, None] * Yb[None, :, :],
                          np.inf)
            ju = np.argmin(hi, axis=1)
            su = np.take_along_axis(hi, ju[:, None, :], axis=1)[:, 0, :].sum(axis=1)
            for viol, js, F, is_low in ((sl - 1.0, jl, Flow, True), (1.0 - su, ju, Fup, False)):
                order = np.argsort(-viol)[: self.per_group]
                for i in order[viol[order] > self.tol]:
                    j = js[i]
                    rows.append(np.full(K, r))
                    cols.append(bpos[j] * K + kk)
                    vals.append(F[i, j])
                    lo.append(-INF if is_low else 1.0)
                    up.append(1.0 if is_low else INF)
                    r += 1
        if r == 0:
            return None
        R = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(r, Y.shape[0] * K))
        R.sum_duplicates()
        return R, np.asarray(lo), np.asarray(up)


@dataclass(frozen=True, eq=False)
class PMODecomposition:
    """The block-ladder form of one PMO instance."""

    master: MasterSpec
    blocks: list[BlockSpec]
    boundary: np.ndarray          # record ids of boundary records (y order)
    internal: list[np.ndarray]    # record ids of each block's internal records (x order)
    n_outputs: int
    n_initial_cuts: int
    separator: EnvelopeSeparator | None = None
    n_initial_overflow: int = 0


def _block(X: np.ndarray, edges: np.ndarray, dist: np.ndarray, eps: float, K: int, N: int, ypos: np.ndarray,
           wc: np.ndarray, elastic: float | None) -> BlockSpec:
    """The subproblem of the internal records ``X``: their mDP rows among themselves and with
    the boundary records they neighbour (right-hand sides from the master's y), and their row
    sums. With ``elastic = M`` the rows that involve y (its mDP rows with the boundary records)
    and the row sums get a slack in [0, 1] at price M per unit, so every y has a solution (x = 0
    with full slack): a relaxation, so its cuts stay valid for the original problem, and its
    solutions are feasible when their slack is 0. It also bounds the duals of the coupling
    rows by M, hence the cuts' coefficients by M (the rows' y coefficients are +-1;
    docs/decisions.md#elastic-benders-blocks-not-a-box-on-the-duals)."""
    xpos = np.full(N, -1, dtype=np.int64)
    xpos[X] = np.arange(len(X))
    in_a, in_b = xpos[edges[:, 0]] >= 0, xpos[edges[:, 1]] >= 0
    inner = in_a & in_b
    W_parts = [mdp_rows(len(X), K, xpos[edges[inner]], dist[inner], eps)]
    T_parts: list[sp.csr_matrix] = []
    lo_parts = [np.full(W_parts[0].shape[0], -INF)]
    up_parts = [np.zeros(W_parts[0].shape[0])]
    cross = in_a ^ in_b  # internal records only neighbour records of their own subset
    ce, cd = edges[cross], dist[cross]
    a_int = np.where(xpos[ce[:, 0]] >= 0, ce[:, 0], ce[:, 1])
    b_bnd = np.where(xpos[ce[:, 0]] >= 0, ce[:, 1], ce[:, 0])
    coup_rec = np.unique(b_bnd)
    cpos = np.full(N, -1, dtype=np.int64)
    cpos[coup_rec] = np.arange(len(coup_rec))
    nC, E = len(coup_rec), len(ce)
    if E:
        f = np.exp(eps * cd)
        k = np.arange(K)
        # rows (e, dir, k): dir 0: x_ak / f - y_bk <= 0 ; dir 1: y_bk - f x_ak <= 0. Each row is
        # written with its y coefficient +-1, so a cut's coefficients are the block's duals on
        # these rows (at most M when elastic), not duals times f
        # (docs/decisions.md#benders-block-rows-have-a-unit-master-coefficient)
        r = np.arange(2 * E * K).reshape(E, 2, K)
        xcol = (xpos[a_int][:, None] * K + k[None, :])
        ycol = (cpos[b_bnd][:, None] * K + k[None, :])
        wv = np.stack([np.broadcast_to(1 / f[:, None], (E, K)), -np.broadcast_to(f[:, None], (E, K))], axis=1)
        tv = np.stack([-np.ones((E, K)), np.ones((E, K))], axis=1)
        rows = r.reshape(-1)
        W_parts.append(sp.csr_matrix((wv.reshape(-1), (rows, np.repeat(xcol[:, None, :], 2, axis=1).reshape(-1))),
                                     shape=(2 * E * K, len(X) * K)))
        T_parts.append(sp.csr_matrix((tv.reshape(-1), (rows, np.repeat(ycol[:, None, :], 2, axis=1).reshape(-1))),
                                     shape=(2 * E * K, nC * K)))
        lo_parts.append(np.full(2 * E * K, -INF))
        up_parts.append(np.zeros(2 * E * K))
    W_parts.append(row_sum_rows(len(X), K))
    lo_parts.append(np.ones(len(X)))
    up_parts.append(np.ones(len(X)))
    W = sp.vstack(W_parts, format="csr")
    n_before = W_parts[0].shape[0]
    T = sp.vstack([sp.csr_matrix((n_before, nC * K))] + T_parts + [sp.csr_matrix((len(X), nC * K))], format="csr")
    coupling = (ypos[coup_rec][:, None] * K + np.arange(K)[None, :]).reshape(-1).astype(np.int64)
    spec = BlockSpec(c=wc[X].reshape(-1), W=W, lo=np.concatenate(lo_parts), up=np.concatenate(up_parts), T=T,
                     coupling=coupling, x_lo=np.zeros(len(X) * K), x_up=np.ones(len(X) * K))
    if elastic is None:
        return spec
    # slack on each cross row (... - s <= 0) and each row sum (sum x + s = 1), at most 1 (x and
    # y are): every internal row sums to 1 or pays M for what it lacks, so the block's cost is at
    # least its rows' cheapest outputs' (or M), whatever y is
    cross_rows = n_before + np.arange(2 * E * K)
    sums = W.shape[0] - len(X) + np.arange(len(X))
    floor = float(np.minimum(wc[X].min(axis=1), float(elastic)).sum())
    return elastic_block(spec, np.r_[cross_rows, sums], np.r_[-np.ones(len(cross_rows)), np.ones(len(sums))],
                         float(elastic), slack_up=1.0, value_lo=floor)


def decompose(space: Space, part: Partition, edges: np.ndarray, dist: np.ndarray, *, scale: float,
              initial_cuts: str = "subset", graph: MDPGraph | None = None,
              elastic: float | None = None, ratio_cap: float | None = MAX_LOG_RATIO) -> PMODecomposition:
    """Build the master and the blocks for the LP restricted to the constraints ``edges``
    (with ``elastic``, blocks with slack: see :func:`_block`). Boundary records are those with
    a neighbour in another subset along ``edges`` (Definition 3.2 on that graph);
    ``initial_cuts`` is one of :data:`INITIAL_CUTS`; initial cuts whose ratio exceeds
    exp(ratio_cap) are left out (None: only those whose ratio overflows float64)."""
    N, K = space.n_records, space.n_outputs
    eps = space.epsilon
    wc = space.weighted_cost / scale
    lab = part.labels
    bmask = part.boundary_mask(edges)
    boundary = np.flatnonzero(bmask)
    ypos = np.full(N, -1, dtype=np.int64)
    ypos[boundary] = np.arange(len(boundary))
    nY = len(boundary)

    # ---- master: mDP among boundary records, their row sums, Property 3.2 cuts
    both = bmask[edges[:, 0]] & bmask[edges[:, 1]]
    mrows = [mdp_rows(nY, K, ypos[edges[both]], dist[both], eps), row_sum_rows(nY, K)]
    r_lo = [np.full(mrows[0].shape[0], -INF), np.ones(nY)]
    r_up = [np.zeros(mrows[0].shape[0]), np.ones(nY)]
    g = graph if graph is not None else MDPGraph(N, edges, dist)
    n_init = n_over = 0
    if initial_cuts != "none" and nY > 1:
        D = g.path_distances(boundary)[:, boundary]
        adj = np.zeros((nY, nY), dtype=bool)
        adj[ypos[edges[both, 0]], ypos[edges[both, 1]]] = True
        adj |= adj.T
        iu, ju = np.triu_indices(nY, 1)
        sel = ~adj[iu, ju] & np.isfinite(D[iu, ju])
        if initial_cuts == "subset":
            sel &= lab[boundary][iu] == lab[boundary][ju]
        # a pair beyond exp(ratio_cap) would only put a near-vacuous, badly scaled row in the
        # master; beyond exp(_OVERFLOW_LOG) its ratio is not a float64
        over = sel & (eps * D[iu, ju] > (_OVERFLOW_LOG if ratio_cap is None else min(ratio_cap, _OVERFLOW_LOG)))
        n_over = int(over.sum()) * 2 * K
        sel &= ~over
        pairs = np.column_stack([iu[sel], ju[sel]])
        if len(pairs):
            P = mdp_rows(nY, K, pairs, D[iu[sel], ju[sel]], eps)
            mrows.append(P)
            r_lo.append(np.full(P.shape[0], -INF))
            r_up.append(np.zeros(P.shape[0]))
            n_init = P.shape[0]
    master = MasterSpec(c=wc[boundary].reshape(-1), A=sp.vstack(mrows, format="csr"),
                        r_lo=np.concatenate(r_lo), r_up=np.concatenate(r_up),
                        y_lo=np.zeros(nY * K), y_up=np.ones(nY * K))

    # ---- blocks: internal records of each subset
    blocks: list[BlockSpec] = []
    internal: list[np.ndarray] = []
    groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for l in range(part.n_subsets):
        X = np.flatnonzero((lab == l) & ~bmask)
        if len(X) == 0:
            continue  # a subset with no internal records has no subproblem
        blocks.append(_block(X, edges, dist, eps, K, N, ypos, wc, elastic))
        internal.append(X)
        B = boundary[lab[boundary] == l]
        if len(B):
            Dxb = g.path_distances(X)[:, B]
            # pairs beyond exp(MAX_LOG_RATIO) are left out of the envelope inequalities: a factor
            # exp(-eps D) of 0 only weakens the "<= 1" one, and no upper factor none of the others
            ok = eps * Dxb <= MAX_LOG_RATIO
            Flow = np.where(ok, np.exp(-eps * np.where(ok, Dxb, 0.0)), 0.0)
            Fup = np.where(ok, np.exp(eps * np.where(ok, Dxb, 0.0)), np.inf)
            groups.append((ypos[B], Flow, Fup))
    sep = EnvelopeSeparator(groups, K) if groups else None
    return PMODecomposition(master=master, blocks=blocks, boundary=boundary, internal=internal, n_outputs=K,
                            n_initial_cuts=n_init, separator=sep, n_initial_overflow=n_over)


@dataclass(frozen=True)
class BendersConfig:
    """What a Benders run adds to the paper's algorithm (``solve(space, "benders",
    config=...)``; :data:`VARIANTS` names the two designs). Each part's effect is measured by
    ``benchmarks/paper000/benders_ablation.py`` (docs/pmo.md has the table).

    Attributes:
        envelope: separate the envelope inequalities (:class:`EnvelopeSeparator`).
        elastic: elastic blocks at this price per unit of slack (:func:`_block`; costs are
            scaled to a largest weighted cost of 1, so the price is in those units), or None for
            the paper's hard blocks with feasibility cuts.
        repair: an upper bound from every round's iterate, assembled and certified
            (:class:`_Repair`), starting from each record's cheapest output lifted to mDP.
        in_out: in-out stabilisation: the blocks are solved at ``in_out`` x the master's y plus
            the rest x a core point that starts at the first mechanism (needs ``repair``), or
            None.
        initial_cuts: Property 3.2's initial cuts (:data:`INITIAL_CUTS`): 'union' as published.
        reduce: drop the implied edges (:meth:`certdp.MDPGraph.implied_edges`, exact) before
            partitioning, so boundary records and every row are those of the reduced graph;
            False: Definition 3.2 on the whole mDP graph, as published.
        ratio_cap: leave out the mDP rows and initial cuts whose ratio exp(eps d) exceeds
            exp(ratio_cap) (a relaxation; the returned matrix is certified on every pair):
            MAX_LOG_RATIO (16) by default; 34.5 is the least that HiGHS accepts (it refuses
            coefficients above 1e15). None: every row, as published.
        clean_cuts: before a cut reaches the master, relax its coefficients below 1e-9 of its
            largest away, scale it to a largest coefficient of 1, and skip it when it still
            spans more than 1e9 (:class:`certdp.lp.benders.BendersMaster`). False: every cut
            as the block gives it, as published.
    """

    envelope: bool = True
    elastic: float | None = 10.0
    repair: bool = True
    in_out: float | None = 0.2
    initial_cuts: str = "subset"
    reduce: bool = True
    ratio_cap: float | None = MAX_LOG_RATIO
    clean_cuts: bool = True

    def __post_init__(self) -> None:
        if self.elastic is not None and not (isinstance(self.elastic, (int, float)) and self.elastic > 0):
            raise ValueError(f"BendersConfig.elastic must be a positive price or None, got {self.elastic!r}")
        if self.in_out is not None and not (isinstance(self.in_out, (int, float)) and 0 < self.in_out <= 1):
            raise ValueError(f"BendersConfig.in_out must be in (0, 1] or None, got {self.in_out!r}")
        if self.ratio_cap is not None and not (isinstance(self.ratio_cap, (int, float)) and self.ratio_cap > 0):
            raise ValueError(f"BendersConfig.ratio_cap must be a positive log ratio or None, got {self.ratio_cap!r}")
        if self.initial_cuts not in INITIAL_CUTS:
            raise ValueError(f"BendersConfig.initial_cuts must be one of {', '.join(INITIAL_CUTS)}, "
                             f"got {self.initial_cuts!r}")


#: 'paper' is the published algorithm (every switch of :class:`BendersConfig` off); 'improved'
#: is the combination that won the ablation in benchmarks/paper000/benders_ablation.py
#: (docs/pmo.md has the table).
VARIANTS = {"paper": BendersConfig(envelope=False, elastic=None, repair=False, in_out=None, initial_cuts="union",
                                   reduce=False, ratio_cap=None, clean_cuts=False),
            "improved": BendersConfig()}


def assemble(dec: PMODecomposition, N: int, y: np.ndarray, xs: Sequence[np.ndarray | None]) -> np.ndarray:
    """The (N, K) matrix of a master point ``y`` and the blocks' points (slack dropped; a block
    without a point leaves its rows at 0)."""
    K = dec.n_outputs
    Z = np.zeros((N, K))
    Z[dec.boundary] = y.reshape(len(dec.boundary), K)
    for X, x in zip(dec.internal, xs):
        if x is not None:
            Z[X] = x[:len(X) * K].reshape(len(X), K)
    return Z


class _Repair:
    """An upper bound from a round's iterate: the master's y and the blocks' points (elastic,
    or absent where infeasible) assembled and certified: a mechanism in every round, whether or
    not the blocks were feasible, certified as it is
    (docs/decisions.md#benders-upper-bound-is-each-rounds-matrix-certified-as-it-is)."""

    def __init__(self, space: Space, dec: PMODecomposition, C: np.ndarray, edges: np.ndarray, dist: np.ndarray):
        self.space, self.dec, self.C, self.edges, self.dist = space, dec, C, edges, dist

    def __call__(self, y: np.ndarray, results: Sequence[BlockResult]) -> tuple[float, np.ndarray, list[np.ndarray]]:
        Z = assemble(self.dec, self.space.n_records, y, [r.x for r in results])
        return _certified_point(self.space, self.dec, self.C, Z)


def _certified_point(space: Space, dec: PMODecomposition, C: np.ndarray, Z: np.ndarray
                     ) -> tuple[float, np.ndarray, list[np.ndarray]]:
    """``Z`` certified, as a point ``(value, y, xs)`` of the decomposition (slacks at 0)."""
    Zc, _ = certify(Z, space.epsilon, *space.neighbor_pairs)
    xs = [np.r_[Zc[X].ravel(), np.zeros(b.n_slack)] for X, b in zip(dec.internal, dec.blocks)]
    return float(np.sum(C * Zc)), Zc[dec.boundary].ravel(), xs


def _start(space: Space, dec: PMODecomposition, C: np.ndarray, edges: np.ndarray, dist: np.ndarray
           ) -> tuple[float, np.ndarray, list[np.ndarray]]:
    """A first mechanism: every record's cheapest output, lifted to the smallest matrix above it
    that keeps mDP (:func:`certdp.pmo.upper.mdp_lift`) and certified, as a point ``(value, y,
    xs)``: the first upper bound, and the in-out stabilisation's first core
    (docs/decisions.md#benders-starts-from-the-mdp-lift-of-the-cheapest-outputs)."""
    Z0 = np.zeros_like(C)
    Z0[np.arange(len(C)), np.argmin(C, axis=1)] = 1.0
    return _certified_point(space, dec, C, mdp_lift(Z0, space.epsilon, edges, dist))


#: the fields of a round's record that are in units of the objective
_OBJECTIVE_FIELDS = ("lower_bound", "upper_bound", "master_objective")


def _in_cost_units(record: dict[str, Any], scale: float) -> dict[str, Any]:
    """A round's record with its bounds in the cost's units (the engine works on costs / scale)."""
    return {k: (v * scale if k in _OBJECTIVE_FIELDS else v) for k, v in record.items()}


def _rescaled(progress: Progress | None, scale: float) -> Progress | None:
    if progress is None:
        return None

    def forward(event: ProgressEvent) -> None:
        rec = _in_cost_units(dict(event.record), scale)
        report(progress, event.stage, bounds_line("round", rec, "cuts_added", "cuts"), rec)
    return forward


def solve_benders(space: Space, *, partition: str = "kmeans-dv", subsets: int | None = None, gap: float = 1e-2,
                  max_iterations: int = 1000, time_limit: float | None = None, reduce: bool | None = None,
                  initial_cuts: str | None = None, variant: str = "improved", seed: int = 0,
                  executor: str | None = None, workers: int = 1, scheduler: str | None = None,
                  runner_factory: Callable[..., Any] | None = None, progress: Progress | None = None,
                  tolerance: float = 1e-9, config: BendersConfig | None = None) -> SolveResult:
    """Solve PMO by Benders decomposition and return a certified mechanism. Options are
    checked by :func:`certdp.solve`.

    Args:
        partition: one of 'kmeans-dv', 'kmeans-rec', 'kmeans-adj', 'bsc', 'metis'.
        subsets: M, the number of subsets (default: the paper's 25, or N when there are fewer records).
        gap: stop at this relative gap.
        max_iterations: stop after this many rounds.
        time_limit: stop after this many seconds of wall-clock time.
        reduce: drop implied edges before decomposing (exact); default: the variant's
            (:attr:`BendersConfig.reduce`).
        initial_cuts: one of :data:`INITIAL_CUTS`; default: the variant's.
        variant: 'paper' (the published algorithm: every switch of :class:`BendersConfig`
            off) or 'improved' (default; see :data:`VARIANTS` and docs/pmo.md).
        config: a :class:`BendersConfig` to run instead of the named variant's (``reduce`` and
            ``initial_cuts``, when given, override it).
        seed: seed of the k-means partitioners.
        executor: one of :data:`certdp.lp.executors.EXECUTORS`: 'threads' (``workers`` threads
            of this process), 'process' (``workers`` local processes) or 'dask' (a LocalCluster
            of ``workers`` processes, or the cluster at ``scheduler``); by default 'dask' when a
            scheduler is given, 'process' when ``workers > 1``, else 'threads'. The result does
            not depend on it.
        runner_factory: ``f(blocks) -> Runner`` overriding ``executor``.
        progress: receives each round's bounds.
    """
    d = config if config is not None else VARIANTS[variant]
    if reduce is not None or initial_cuts is not None:
        d = replace(d, reduce=d.reduce if reduce is None else reduce,
                    initial_cuts=d.initial_cuts if initial_cuts is None else initial_cuts)
    if executor is None:
        executor = "dask" if scheduler else ("process" if workers > 1 else "threads")
    if subsets is None:
        subsets = min(25, space.n_records)
    t_start = time.perf_counter()
    graph = MDPGraph.from_space(space)
    implied = graph.implied_edges() if d.reduce else np.zeros(graph.n_edges, dtype=bool)
    # with ratio_cap, rows beyond exp(MAX_LOG_RATIO) are left out, as in the monolithic LP: a
    # relaxation (both bounds stay valid: the upper bound is a certified matrix's cost)
    keep = ~implied & ((space.epsilon * graph.distance <= d.ratio_cap) if d.ratio_cap is not None else True)
    edges, dist = graph.edges[keep], graph.distance[keep]
    t0 = time.perf_counter()
    part = partition_records(space, partition, subsets, seed=seed, graph=graph)
    t_part = time.perf_counter() - t0
    wc = space.weighted_cost
    scale = float(wc.max()) if wc.size and wc.max() > 0 else 1.0
    t0 = time.perf_counter()
    dec = decompose(space, part, edges, dist, scale=scale, initial_cuts=d.initial_cuts,
                    graph=MDPGraph(space.n_records, edges, dist), elastic=d.elastic, ratio_cap=d.ratio_cap)
    t_build = time.perf_counter() - t0
    if runner_factory is not None:
        runner = runner_factory(dec.blocks)
    else:
        runner = make_runner(dec.blocks, executor=executor, workers=workers, address=scheduler, tolerance=tolerance)
    start = _start(space, dec, wc / scale, edges, dist) if d.repair else None
    remaining = None if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - t_start))
    try:
        out = benders(dec.master, dec.blocks, gap=gap, max_iterations=max_iterations, time_limit=remaining,
                      runner=runner, tolerance=tolerance, progress=_rescaled(progress, scale),
                      separator=dec.separator if d.envelope else None,
                      heuristic=_Repair(space, dec, wc / scale, edges, dist) if d.repair else None,
                      core=None if start is None or d.in_out is None else start[1], in_out=d.in_out or 0.2,
                      start=start, clean_cuts=d.clean_cuts)
    finally:
        runner.close()
    if out.y is None:
        raise SolverLimitError(f"Benders found no feasible point in {out.iterations} rounds ({out.status}; lower bound "
                               f"{out.lower_bound * scale:.6g}); raise max_iterations or time_limit")
    t = {"partition": t_part, "build": t_build, "start": t_start}
    return _result(space, dec, part, out, edges, scale, gap, variant if config is None else "config", subsets, t)


def _result(space: Space, dec: PMODecomposition, part: Partition, out: Any, edges: np.ndarray, scale: float,
            gap: float, variant: str, subsets: int, t: dict[str, float]) -> SolveResult:
    N, K = space.n_records, space.n_outputs
    wc = space.weighted_cost
    Z = assemble(dec, N, out.y, out.x)
    t0 = time.perf_counter()
    mech, cert = Mechanism.certified(space, Z, method="benders", variant=variant, partition=part.method,
                                     subsets=subsets)
    t_cert = time.perf_counter() - t0
    upper = float(np.sum(wc * mech.matrix))
    lower = loss_bound(out.lower_bound * scale, upper)
    all_e = space.neighbor_pairs[0]
    stats: dict[str, Any] = {
        "n_records": N, "n_outputs": K, "variant": variant, "partition": part.stats(edges), "subsets": part.n_subsets,
        "blocks": len(dec.blocks), "boundary_records": int(len(dec.boundary)),
        "master_variables": int(len(dec.boundary) * K), "initial_cuts": dec.n_initial_cuts,
        "initial_cuts_left_out": dec.n_initial_overflow,
        "cuts": out.cuts, "skipped_cuts": out.skipped_cuts,
        "constraints_before": 2 * len(all_e) * K + N, "constraints_after": 2 * len(edges) * K + N,
        "certify_mixing": cert.mixing, "benders_upper_bound": out.upper_bound * scale,
        "certify_loss_increase": upper - out.upper_bound * scale,
        "partition_labels": part.labels, "boundary_mask": part.boundary_mask(edges),
    }
    timings = {"partition": t["partition"], "build": t["build"],
               "master": float(sum(h["master_seconds"] for h in out.history)),
               "subproblems": float(sum(h["sub_seconds"] for h in out.history)),
               "certify": t_cert, "total": time.perf_counter() - t["start"]}
    hist = tuple(_in_cost_units(h, scale) for h in out.history)
    true_gap = relative_gap(upper, lower)
    status = (out.status if out.status is not Status.OPTIMAL or (true_gap is not None and true_gap <= gap)
              else Status.GAP_LIMITED)
    return SolveResult(mechanism=mech, method="benders", status=status, upper_bound=upper, lower_bound=lower,
                       gap=true_gap, iterations=out.iterations, history=hist, timings=timings, stats=stats,
                       message=round_message(status, true_gap, gap, out.iterations))
