"""RIPOST: two-phase private decomposition of a count tensor (paper 004, Algorithms 1-3), as
published (``variant='paper'``) and with four named departures (``'improved'``, :class:`Design`).

Budget (Algorithm 1, lines 1-4): ``eps_p = (1 - alpha) eps`` perturbs the leaves,
``eps_d = alpha eps`` decomposes; ``gamma`` splits ``eps_d`` into the two phases and ``beta``
splits each phase between the convergence test (Secure_cc) and the cut choice (Secure_ss).

Depth-free allocation (section 5.2, Eq. 3-4): at phase depth ``i`` (1 at the root of a phase;
a block entering phase 2 restarts at 1) an operation with phase budget ``E`` spends
``omega_i E`` with ``omega_i = k / (n (n+1))`` at ``n = i + os - 1``: the terms of ``S^k`` from
index ``os`` on, summing to ``k / os`` (exactly 1 at the defaults ``k = os = 4``, ``omega_1 =
0.2``). The paper is off by one with itself here: its derivation keeps the terms from index
``os`` (sum ``k / os``, whence its condition ``os >= k``), while Eq. 4 (``omega_i =
S^k_{i+os}``) and its worked example (``S^2`` with ``os = 1``, sum 1) start at ``os + 1`` (sum
``k / (os + 1)``). Both are the same family of series shifted by one; Eq. 4 read with the
derivation's ``os >= k`` would sum to 0.8 at ``k = os = 4`` and leave 20% of every phase's
budget unspendable. The paper does not state its own ``k`` and ``os``.

Leaves (``leaf_budget``): ``'fixed'`` is Algorithm 1, ``Lap(1 / eps_p)`` on every leaf (the
series' unspent tail is lost, as published). ``'rest'`` (the improved variant's) gives each leaf
everything its root-to-leaf path has not spent, ``eps_p`` plus the decomposition budget left
unused because the series stopped at a finite depth. The amount depends on the path's earlier
noisy outcomes only, so this is adaptive composition of pure-DP releases with a budget filter
(Rogers et al. 2016: for pure DP the sum of the adaptively chosen epsilons on any record's path
bounding the total is enough), which is exactly what the :class:`PrivacyBudget` checks: each
leaf is charged its path's exact remainder, and the largest path sum is then the whole epsilon.

Secure_cc (Algorithm 2): ``metric + Lap(Delta / eps_i) <= theta`` with ``Delta_Sum = 1`` in
phase 1 and ``Delta_AE = 2`` in phase 2 (Theorem 5.1), ``theta = 0`` by default.
Secure_ss (Algorithm 3): a cut drawn with probability proportional to
``exp(eps_i score / (4 Delta_metric))``, i.e. the exponential mechanism with score
sensitivity ``2 Delta_metric``; phase 1 scores cuts by Min (``Delta = 1``), phase 2 by AE
(``Delta = 2``). Leaves get ``Lap(1 / eps_p)`` on their sum (``Lap(1 / (V eps_p))`` on their
mean).

A block of one cell cannot be cut: it is converged without a test (a data-independent
decision, so it costs nothing). Every release is charged to a :class:`PrivacyBudget` node of
the block before it is drawn, sequentially along root-to-leaf paths and in parallel across
disjoint blocks; the view records the exact largest path sum it spent.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _validate as V
from ..progress import Progress, report
from ..randomness import RNGLike, as_generator
from .blocks import aggregation_error, cut_scores, volume
from .budget import BudgetNode, PrivacyBudget
from .noise import LeafLaplace
from .sampling import add_laplace, exponential_choice, laplace_release, laplace_release_many
from .tensor import CountTensor
from .view import BlockView


@dataclass(frozen=True)
class DepthSeries:
    """``omega_i = k / ((i + os - 1)(i + os))`` for depths ``i >= 1``; total ``k / os`` (1 at ``os = k``)."""

    k: int = 4
    os: int = 4

    def __post_init__(self) -> None:
        V.int_in_range("k", self.k, 1)
        V.int_in_range("os", self.os, 0)
        if self.os < self.k:
            raise ValueError(f"os must be >= k for the series weights to sum to at most 1 (k={self.k}, os={self.os})")

    def weight(self, depth: int) -> float:
        """The share of the budget of a block at ``depth`` (the depth-free series, Eq. 3-4)."""
        n = depth + self.os - 1
        return self.k / (n * (n + 1))

    @property
    def total(self) -> float:
        """The sum of the series over every depth."""
        return self.k / self.os


@dataclass(frozen=True)
class BiasedTest:
    """PrivTree's biased convergence test (Zhang et al. 2016, Thm. 3.1), as HDPView applies it
    to AE: a block at depth h (0 at the subtree's root) with statistic v is converged when
    ``max(floor, v - h delta) + Lap(scale) <= theta``. The bias makes the privacy loss along
    any root-to-leaf path a geometric series, so the tests of a whole subtree cost ``epsilon``
    once, whatever its depth."""

    scale: float
    delta: float
    floor: float

    def biased(self, value: float, depth: int) -> float:
        """The test value lowered by ``delta`` per level of depth, never below the floor."""
        return max(self.floor, value - depth * self.delta)

    @classmethod
    def on_sum(cls, epsilon: float, theta: float, fanout: int) -> "BiasedTest":
        """PrivTree's test of a count (sensitivity 1) with ``fanout`` children per split:
        ``scale = (2 b - 1)/(b - 1) / eps``, ``delta = scale ln b``, floor ``theta - delta``."""
        lam = (2 * fanout - 1) / (fanout - 1) / epsilon
        d = lam * math.log(fanout)
        return cls(lam, d, theta - d)

    @classmethod
    def on_ae(cls, epsilon: float, theta: float, a: float = 1.6) -> "BiasedTest":
        """HDPView's test of AE (sensitivity 2) with bias base ``a``:
        ``scale = ((2a - 1)/(a - 1) + 1) 2 / eps``, ``delta = scale ln a``, floor
        ``theta + 2 - delta``."""
        lam = ((2 * a - 1) / (a - 1) + 1) * (2 / epsilon)
        d = lam * math.log(a)
        return cls(lam, d, theta + 2 - d)


def quadtree_fanout(shape) -> int:
    """Children of a split that halves every axis of more than one cell (at least 2)."""
    return max(2, 2 ** int(np.sum(np.asarray(shape) > 1)))


@dataclass
class Block:
    """A box of the count tensor: lower and upper cell corners (upper exclusive), its depth and phase."""
    lo: np.ndarray
    hi: np.ndarray
    idx: np.ndarray          # indices of the tensor's non-zero cells inside the block
    node: BudgetNode
    depth: int = 1

    def cells(self) -> float:
        """The number of cells in the box (:func:`~certdp.views.blocks.volume`)."""
        return volume(self.lo, self.hi)


def split_block(b: Block, axis: int, pos: int, coords: np.ndarray) -> tuple[Block, Block]:
    """Cut ``b`` on ``axis`` at ``pos`` (cells with coordinate < pos go left)."""
    left_mask = coords[b.idx, axis] < pos
    lhi = b.hi.copy()
    lhi[axis] = pos
    rlo = b.lo.copy()
    rlo[axis] = pos
    return (Block(b.lo, lhi, b.idx[left_mask], b.node.child(), b.depth + 1),
            Block(rlo, b.hi, b.idx[~left_mask], b.node.child(), b.depth + 1))


def perturb_leaves(leaves: list[Block], counts: np.ndarray, eps_p: float, rng, rest: bool = False
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Each leaf's sum plus ``Lap(1 / e)``, charged to the leaf (disjoint leaves: parallel), with
    ``e = eps_p``, or with ``rest`` everything the leaf's path has left (at least ``eps_p``).
    Returns the noisy sums and each leaf's ``e``."""
    if not leaves:
        return np.zeros(0), np.zeros(0)
    sums = np.asarray([float(counts[b.idx].sum()) for b in leaves])
    left = np.asarray([b.node.remaining() for b in leaves])
    # eps_p was computed in floating point from splits of epsilon that add up to epsilon in
    # the reals; rounding can leave it an ulp above what a path has left. Take the exact
    # remainder then (never more), and treat anything larger than rounding as a bug.
    if left.min() < eps_p * (1 - 1e-9):
        raise RuntimeError(f"leaf budget {left.min()} is short of the planned {eps_p}: the plan overspends")
    e = left if rest else np.full(len(leaves), min(eps_p, float(left.min())))
    out = np.empty(len(leaves))
    for value in np.unique(e):                      # one release per distinct budget
        at = np.flatnonzero(e == value)
        out[at] = laplace_release_many(sums[at], 1.0, float(value), [leaves[i].node for i in at],
                                       "leaf perturbation", rng)
    return out, e


def ledger_totals(budget: PrivacyBudget) -> dict[str, float]:
    """The budget charged so far, summed by the kind of release."""
    tot: dict[str, float] = {}
    for _, eps, what in budget.ledger:
        tot[what] = tot.get(what, 0.0) + eps
    return tot


def root_block(tensor: CountTensor, budget: PrivacyBudget, depth: int) -> Block:
    """The whole domain, holding every non-zero cell, on the budget's root node."""
    shape = np.asarray(tensor.shape, dtype=np.int64)
    return Block(np.zeros_like(shape), shape, np.arange(tensor.counts.size), budget.root, depth)


def finish_view(tensor: CountTensor, leaves: list[Block], eps_leaf: float, budget: PrivacyBudget, method: str,
                params: dict, rng, rest: bool = False) -> BlockView:
    """Perturb the leaves (charging each; with ``rest``, each its path's whole remainder) and
    assemble the released view; ``params['leaf_epsilon']`` summarises the leaves' budgets and
    ``params['path_spend']`` the root-to-leaf path sums (exact, from the accountant)."""
    values, e = perturb_leaves(leaves, tensor.counts.astype(np.float64), eps_leaf, rng, rest)
    if len(leaves):
        spend = np.asarray([float(b.node.path_spent()) for b in leaves])
        params = {**params, "leaf_epsilon": {"min": float(e.min()), "mean": float(e.mean()), "max": float(e.max())},
                  "path_spend": {"min": float(spend.min()), "mean": float(spend.mean()),
                                 "max": float(spend.max())}}
    d = len(tensor.shape)
    lo = np.asarray([b.lo for b in leaves], dtype=np.int64).reshape(-1, d)
    hi = np.asarray([b.hi for b in leaves], dtype=np.int64).reshape(-1, d)
    return BlockView(tensor.domains, lo, hi, values, method, float(budget.total), float(budget.spent()), params,
                     ledger_totals(budget), LeafLaplace(1.0 / e))      # each leaf count: sensitivity 1


@dataclass(frozen=True)
class Design:
    """Which component each part of RIPOST uses: Algorithms 1-3's, or a named departure.

    * ``leaf_budget``: ``'fixed'`` (Algorithm 1: ``Lap(1 / eps_p)`` on every leaf) or ``'rest'``
      (each leaf gets what its path left: ``eps_p`` plus the series' unspent tail).
    * ``phase1``: ``'paper'`` (Algorithm 2's test of the Sum at ``omega_i eps_cc^1`` per depth,
      Algorithm 3's cut by Min at ``omega_i eps_ss^1``) or ``'privtree'`` (PrivTree's biased
      test of the Sum, charged once for the whole phase, and data-independent halving of
      ``split_axes`` axes per split).
    * ``phase2_test``: ``'series'`` (Algorithm 2 on AE at ``omega_i eps_cc^2`` per depth) or
      ``'biased'`` (HDPView's biased AE test, charged once per phase-1 block).
    * ``phase2_cuts``: ``'all'`` (Algorithm 3 over every cut of every axis) or ``'midpoints'``
      (Algorithm 3 over the midpoint of each axis only).
    """

    leaf_budget: str
    phase1: str
    phase2_test: str
    phase2_cuts: str

    CHOICES = {"leaf_budget": ("fixed", "rest"), "phase1": ("paper", "privtree"),
               "phase2_test": ("series", "biased"), "phase2_cuts": ("all", "midpoints")}

    def __post_init__(self) -> None:
        for name, allowed in self.CHOICES.items():
            V.choice(name, getattr(self, name), allowed)

    def departures(self) -> list[str]:
        """The components that differ from Algorithms 1-3, by name."""
        paper = VARIANTS["paper"]["design"]
        return [f"{n}={getattr(self, n)}" for n in self.CHOICES if getattr(self, n) != getattr(paper, n)]


VARIANTS: dict[str, dict[str, Any]] = {
    "paper": {"alpha": 0.3, "gamma": 0.9, "beta": 0.4,
              "design": Design(leaf_budget="fixed", phase1="paper", phase2_test="series", phase2_cuts="all")},
    "improved": {"alpha": 0.5, "gamma": 0.5, "beta": 0.9,
                 "design": Design(leaf_budget="rest", phase1="privtree", phase2_test="biased",
                                  phase2_cuts="midpoints")},
}
"""Each variant's budget shares (paper 004 section 6.1 for 'paper'; the improved ones from the
sweep in docs/views.md) and components. 'paper' is Algorithms 1-3 with nothing changed."""


def phase1_axes(shape) -> int:
    """How many axes the 'privtree' phase 1 halves per split (see docs/views.md, the rule)."""
    return max(1, min(2, int(np.sum(np.asarray(shape) > 1))))


def halve(b: Block, coords: np.ndarray, axes: np.ndarray) -> list[Block]:
    """The ``2^len(axes)`` children of ``b`` obtained by halving each of ``axes`` (all of more
    than one cell)."""
    sides = b.hi - b.lo
    mids = b.lo[axes] + (sides[axes] + 1) // 2
    bits = (coords[b.idx][:, axes] >= mids[None, :]).astype(np.int64)
    code = bits @ (1 << np.arange(axes.size, dtype=np.int64))
    order = np.argsort(code, kind="stable")
    bounds = np.searchsorted(code[order], np.arange((1 << axes.size) + 1))
    out = []
    for c in range(1 << axes.size):
        lo, hi = b.lo.copy(), b.hi.copy()
        for j, a in enumerate(axes):
            if (c >> j) & 1:
                lo[a] = mids[j]
            else:
                hi[a] = mids[j]
        out.append(Block(lo, hi, b.idx[order[bounds[c]:bounds[c + 1]]], b.node.child(), b.depth + 1))
    return out


def halve_all(b: Block, coords: np.ndarray) -> list[Block]:
    """The 2^k children of ``b`` obtained by halving each of its k cuttable axes."""
    return halve(b, coords, np.flatnonzero(b.hi - b.lo > 1))


def least_halved_axes(b: Block, m: int, shape: np.ndarray) -> np.ndarray:
    """The ``m`` cuttable axes of ``b`` with the largest share of their column left (the ones
    halved the fewest times; ties: the lower axis), so every column is halved in turn whatever
    its length. Data-independent."""
    sides = b.hi - b.lo
    order = np.argsort(-(sides / shape), kind="stable")
    return np.sort(order[sides[order] > 1][:m])


def midpoint_cuts(coords: np.ndarray, x: np.ndarray, b: Block) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each cuttable axis's midpoint cut of ``b`` and its AE score ``-(AE_L + AE_R)``
    (``coords`` and ``x``: the block's non-zero cells)."""
    sides = b.hi - b.lo
    axes = np.flatnonzero(sides > 1)
    poss = b.lo[axes] + (sides[axes] + 1) // 2
    vol = b.cells()
    scores = np.empty(axes.size)
    for j, (a, p) in enumerate(zip(axes, poss)):
        left = coords[:, a] < p
        v_left = vol / float(sides[a]) * float(p - b.lo[a])
        scores[j] = -(aggregation_error(x[left], v_left) + aggregation_error(x[~left], vol - v_left))
    return axes, poss, scores


@dataclass
class _Phase:
    """What one phase of the decomposition needs: its statistic, its test, its cuts."""

    number: int
    test_eps: float
    cut_eps: float
    theta: float
    bias: BiasedTest | None     # None: Algorithm 2's test, omega_i test_eps per depth
    halving: int                # > 0: halve that many axes per split (no cut choice), else Algorithm 3
    midpoints: bool             # Algorithm 3 over each axis's midpoint only

    @property
    def test_sensitivity(self) -> float:
        return 1.0 if self.number == 1 else 2.0     # Delta_Sum = 1, Delta_AE = 2 (Theorem 5.1)

    @property
    def metric(self) -> str:
        return "min" if self.number == 1 else "ae"

    def test_scale(self, weight: float) -> float:
        return self.test_sensitivity / (weight * self.test_eps) if self.bias is None else self.bias.scale


def _phases(design: Design, eps_d: float, g: float, bt: float, th1: float, th2: float, m: int, shape
            ) -> tuple[_Phase, _Phase]:
    e1, e2 = eps_d * g, eps_d * (1 - g)
    if design.phase1 == "paper":
        p1 = _Phase(1, e1 * bt, e1 * (1 - bt), th1, None, 0, False)
    else:   # PrivTree's: its cuts are free, so the whole phase budget tests
        fan = 2 ** min(m, max(1, int(np.sum(np.asarray(shape) > 1))))
        p1 = _Phase(1, e1, 0.0, th1, BiasedTest.on_sum(e1, th1, max(2, fan)), m, False)
    bias2 = BiasedTest.on_ae(e2 * bt, th2) if design.phase2_test == "biased" else None
    return p1, _Phase(2, e2 * bt, e2 * (1 - bt), th2, bias2, 0, design.phase2_cuts == "midpoints")


def ripost(tensor: CountTensor, epsilon: float = 0.1, alpha: float | None = None, gamma: float | None = None,
           beta: float | None = None, k: int = 4, os: int = 4, theta1: float = 0.0, theta2: float = 0.0,
           leaf_budget: str | None = None, variant: str = "improved", phase1: str | None = None,
           phase2_test: str | None = None, phase2_cuts: str | None = None, split_axes: int | None = None,
           rng: RNGLike = None, progress: Progress | None = None) -> BlockView:
    """Build an ``epsilon``-DP view of ``tensor`` with RIPOST (Algorithm 1).

    ``variant='paper'`` is Algorithms 1-3 as published (alpha 0.3, gamma 0.9, beta 0.4, fixed
    leaves). ``'improved'`` (the default; alpha 0.5, gamma 0.5, beta 0.9) keeps the two phases
    and their statistics and departs in four named components (:class:`Design`): leaves take
    their path's rest, phase 1 is PrivTree's (biased sum test charged once, halving
    ``split_axes`` axes per split, by default :func:`phase1_axes`), phase 2 tests AE with
    HDPView's biased test and chooses among the axes' midpoints only. ``leaf_budget``,
    ``phase1``, ``phase2_test`` and ``phase2_cuts`` override the variant's component one by one
    (the ablation in docs/views.md).

    ``rng=None`` draws all noise from OpenDP's samplers (see :mod:`.sampling`); an int seed makes
    the run reproducible (for experiments only). The view's ``params['noise']`` lists, per phase
    and depth reached, the convergence test's Laplace scale and the cut choice's epsilon;
    ``params['path_spend']`` the spend of the root-to-leaf paths."""
    eps = V.positive_float("epsilon", epsilon)
    V.choice("variant", variant, tuple(VARIANTS))
    dflt = VARIANTS[variant]
    a = V.open_unit("alpha", dflt["alpha"] if alpha is None else alpha)
    g = V.open_unit("gamma", dflt["gamma"] if gamma is None else gamma)
    bt = V.open_unit("beta", dflt["beta"] if beta is None else beta)
    base: Design = dflt["design"]
    design = Design(*(base.__dict__[n] if v is None else v for n, v in
                      zip(Design.CHOICES, (leaf_budget, phase1, phase2_test, phase2_cuts))))
    m = phase1_axes(tensor.shape) if split_axes is None else V.int_in_range("split_axes", split_axes, 1)
    series = DepthSeries(k, os)
    th1, th2 = float(theta1), float(theta2)
    gen = None if rng is None else as_generator(rng)
    eps_p = eps * (1 - a)
    phases = _phases(design, eps * a, g, bt, th1, th2, m, tensor.shape)

    budget = PrivacyBudget(eps)
    coords, counts = tensor.coords, tensor.counts.astype(np.float64)
    shape = np.asarray(tensor.shape, dtype=np.float64)
    t0 = last = time.perf_counter()
    stats = {"cuts_phase1": 0, "cuts_phase2": 0, "tests_phase1": 0, "tests_phase2": 0,
             "max_depth_phase1": 1, "max_depth_phase2": 1}

    def run_phase(start: list[Block], ph: _Phase) -> list[Block]:
        nonlocal last
        n = ph.number
        if ph.bias is not None:
            for b in start:                          # the whole phase's tests, once per subtree
                if b.cells() > 1.0:
                    b.node.charge(ph.test_eps, f"phase {n} biased convergence (whole subtree)")
        stack, done = list(start), []
        while stack:
            b = stack.pop()
            if progress is not None and time.perf_counter() - last > 2.0:
                last = time.perf_counter()
                report(progress, "phase", f"phase {n}: {len(done)} converged, {len(stack) + 1} open, "
                       f"{last - t0:.1f} s")
            if b.cells() <= 1.0:
                done.append(b)
                continue
            w = series.weight(b.depth)
            x = counts[b.idx]
            value = float(x.sum()) if n == 1 else aggregation_error(x, b.cells())
            stats[f"tests_phase{n}"] += 1
            if ph.bias is None:
                noisy = laplace_release(value, ph.test_sensitivity, w * ph.test_eps, b.node,
                                        f"phase {n} convergence", gen)[0]
            else:
                noisy = float(add_laplace(ph.bias.biased(value, b.depth - 1), ph.bias.scale, gen))
            if noisy <= ph.theta:
                done.append(b)
                continue
            if ph.halving:                           # data-independent halving: no cut choice
                children = halve(b, coords, least_halved_axes(b, ph.halving, shape))
            else:
                if ph.midpoints:
                    axes, poss, scores = midpoint_cuts(coords[b.idx], x, b)
                else:
                    axes, poss, scores = cut_scores(coords[b.idx], x, b.lo, b.hi, ph.metric)
                i = exponential_choice(scores, 2.0 * ph.test_sensitivity, w * ph.cut_eps, b.node,
                                       f"phase {n} split", gen)   # score sensitivity 2 x the metric's
                children = list(split_block(b, int(axes[i]), int(poss[i]), coords))
            stats[f"cuts_phase{n}"] += 1
            stats[f"max_depth_phase{n}"] = max(stats[f"max_depth_phase{n}"], children[0].depth)
            stack.extend(children)
        return done

    phase1_blocks = run_phase([root_block(tensor, budget, 1)], phases[0])
    for b in phase1_blocks:
        b.depth = 1                                 # depth restarts in phase 2 (section 5.3.1)
    leaves = run_phase(phase1_blocks, phases[1])
    # no build time: the parameters are released with the view, and the time depends on the records
    stats.update(blocks_phase1=len(phase1_blocks), blocks=len(leaves))
    noise = [{"phase": ph.number, "depth": i, "test_laplace_scale": ph.test_scale(series.weight(i)),
              "split_epsilon": 0.0 if ph.halving else series.weight(i) * ph.cut_eps}
             for ph in phases for i in range(1, stats[f"max_depth_phase{ph.number}"] + 1)]
    params = {"variant": variant, "alpha": a, "gamma": g, "beta": bt, "k": series.k, "os": series.os,
              "theta1": th1, "theta2": th2, **design.__dict__, "departures": design.departures(),
              "split_axes": m if design.phase1 == "privtree" else None, "stats": stats, "noise": noise}
    return finish_view(tensor, leaves, eps_p, budget, "ripost", params, gen, rest=design.leaf_budget == "rest")
