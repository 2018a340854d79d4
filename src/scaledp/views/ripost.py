"""RIPOST: two-phase private decomposition of a count tensor (paper 004, Algorithms 1-3).

Budget (Algorithm 1, lines 1-4): ``eps_p = (1 - alpha) eps`` perturbs the leaves,
``eps_d = alpha eps`` decomposes; ``gamma`` splits ``eps_d`` into the two phases and ``beta``
splits each phase between the convergence test (Secure_cc) and the cut choice (Secure_ss).

Depth-free allocation (section 5.2, Eq. 3-4): at phase depth ``i`` (1 at the root of a phase;
a block entering phase 2 restarts at 1) an operation with phase budget ``E`` spends
``omega_i E`` with ``omega_i = S^k_{i+os} = k / ((i+os)(i+os+1))``. Then
``sum_{i>=1} omega_i = k / (os + 1) <= 1`` whenever ``os >= k - 1``; the paper requires
``os >= k`` (sum ``k/(k+1)`` at ``os = k``), and so do we. Defaults ``k = 4, os = 4``
(sum 0.8; ``omega_1 = 0.133``): a slowly decaying series, as section 5.2 recommends, with
most of each budget usable within the depths RIPOST reaches. The paper does not state its own
values.

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

import time
from dataclasses import dataclass

import numpy as np

from .. import _validate as V
from ..progress import Progress, report
from ..randomness import RNGLike, as_generator
from .blocks import aggregation_error, cut_scores
from .budget import BudgetNode, PrivacyBudget
from .sampling import exponential_choice, laplace_release, laplace_release_many
from .tensor import CountTensor
from .view import BlockView


@dataclass(frozen=True)
class DepthSeries:
    """``omega_i = k / ((i + os)(i + os + 1))`` for depths ``i >= 1``; total ``k / (os + 1)``."""

    k: int = 4
    os: int = 4

    def __post_init__(self) -> None:
        V.int_in_range("k", self.k, 1)
        V.int_in_range("os", self.os, 0)
        if self.os < self.k:
            raise ValueError(f"os must be >= k for the series weights to sum to at most 1 (k={self.k}, os={self.os})")

    def weight(self, depth: int) -> float:
        i = depth + self.os
        return self.k / (i * (i + 1))

    @property
    def total(self) -> float:
        return self.k / (self.os + 1)


@dataclass
class Block:
    lo: np.ndarray
    hi: np.ndarray
    idx: np.ndarray          # indices of the tensor's non-zero cells inside the block
    node: BudgetNode
    depth: int = 1

    def cells(self) -> float:
        return float(np.prod((self.hi - self.lo).astype(np.float64)))


def split_block(b: Block, axis: int, pos: int, coords: np.ndarray) -> tuple[Block, Block]:
    """Cut ``b`` on ``axis`` at ``pos`` (cells with coordinate < pos go left)."""
    left_mask = coords[b.idx, axis] < pos
    lhi = b.hi.copy()
    lhi[axis] = pos
    rlo = b.lo.copy()
    rlo[axis] = pos
    return (Block(b.lo, lhi, b.idx[left_mask], b.node.child(), b.depth + 1),
            Block(rlo, b.hi, b.idx[~left_mask], b.node.child(), b.depth + 1))


def perturb_leaves(leaves: list[Block], counts: np.ndarray, eps_p: float, rng) -> np.ndarray:
    """Each leaf's sum plus ``Lap(1 / eps_p)``, charged to the leaf (disjoint leaves: parallel)."""
    if not leaves:
        return np.zeros(0)
    sums = np.asarray([float(counts[b.idx].sum()) for b in leaves])
    # eps_p was computed in floating point from splits of epsilon that add up to epsilon in
    # the reals; rounding can leave it an ulp above what a path has left. Take the exact
    # remainder then (never more), and treat anything larger than rounding as a bug.
    e = min([eps_p] + [b.node.remaining() for b in leaves])
    if e < eps_p * (1 - 1e-9):
        raise RuntimeError(f"leaf budget {e} is short of the planned {eps_p}: the plan overspends")
    return laplace_release_many(sums, 1.0, e, [b.node for b in leaves], "leaf perturbation", rng)


def ledger_totals(budget: PrivacyBudget) -> dict[str, float]:
    tot: dict[str, float] = {}
    for _, eps, what in budget.ledger:
        tot[what] = tot.get(what, 0.0) + eps
    return tot


def root_block(tensor: CountTensor, budget: PrivacyBudget, depth: int) -> Block:
    """The whole domain, holding every non-zero cell, on the budget's root node."""
    shape = np.asarray(tensor.shape, dtype=np.int64)
    return Block(np.zeros_like(shape), shape, np.arange(tensor.counts.size), budget.root, depth)


def finish_view(tensor: CountTensor, leaves: list[Block], eps_leaf: float, budget: PrivacyBudget, method: str,
                params: dict, rng) -> BlockView:
    """Perturb the leaves (charging each) and assemble the released view."""
    values = perturb_leaves(leaves, tensor.counts.astype(np.float64), eps_leaf, rng)
    d = len(tensor.shape)
    lo = np.asarray([b.lo for b in leaves], dtype=np.int64).reshape(-1, d)
    hi = np.asarray([b.hi for b in leaves], dtype=np.int64).reshape(-1, d)
    return BlockView(tensor.domains, lo, hi, values, method, float(budget.total), float(budget.spent()), params,
                     ledger_totals(budget))


def ripost(tensor: CountTensor, epsilon: float = 0.1, alpha: float = 0.3, gamma: float = 0.9, beta: float = 0.4,
           k: int = 4, os: int = 4, theta1: float = 0.0, theta2: float = 0.0, rng: RNGLike = None,
           progress: Progress | None = None) -> BlockView:
    """Build an ``epsilon``-DP view of ``tensor`` with RIPOST (Algorithm 1).

    ``rng=None`` draws all noise from OpenDP's samplers (see :mod:`.sampling`); an int seed makes
    the run reproducible (for experiments only). ``progress`` receives a line now and then on long runs."""
    eps = V.positive_float("epsilon", epsilon)
    a = V.open_unit("alpha", alpha)
    g = V.open_unit("gamma", gamma)
    bt = V.open_unit("beta", beta)
    series = DepthSeries(k, os)
    th1 = float(theta1)
    th2 = float(theta2)
    gen = None if rng is None else as_generator(rng)

    eps_p, eps_d = eps * (1 - a), eps * a
    eps_1, eps_2 = eps_d * g, eps_d * (1 - g)
    cc1, ss1 = eps_1 * bt, eps_1 * (1 - bt)
    cc2, ss2 = eps_2 * bt, eps_2 * (1 - bt)

    budget = PrivacyBudget(eps)
    coords, counts = tensor.coords, tensor.counts.astype(np.float64)
    root = root_block(tensor, budget, 1)
    t0, last = time.perf_counter(), time.perf_counter()
    stats = {"cuts_phase1": 0, "cuts_phase2": 0, "max_depth_phase1": 1, "max_depth_phase2": 1}

    def run_phase(start: list[Block], phase: int) -> list[Block]:
        nonlocal last
        cc, ss = (cc1, ss1) if phase == 1 else (cc2, ss2)
        th = th1 if phase == 1 else th2
        d_cc = 1.0 if phase == 1 else 2.0          # Delta_Sum = 1, Delta_AE = 2 (Theorem 5.1)
        metric = "min" if phase == 1 else "ae"
        d_score = 2.0 * (1.0 if phase == 1 else 2.0)  # score sensitivity 2 x metric sensitivity
        stack, done = list(start), []
        while stack:
            b = stack.pop()
            if progress is not None and time.perf_counter() - last > 2.0:
                last = time.perf_counter()
                report(progress, "phase", f"phase {phase}: {len(done)} converged, {len(stack) + 1} open, "
                       f"{last - t0:.1f} s")
            if b.cells() <= 1.0:
                done.append(b)
                continue
            w = series.weight(b.depth)
            x = counts[b.idx]
            value = float(x.sum()) if phase == 1 else aggregation_error(x, b.cells())
            noisy = laplace_release(value, d_cc, w * cc, b.node, f"phase {phase} convergence", gen)[0]
            if noisy <= th:
                done.append(b)
                continue
            axes, poss, scores = cut_scores(coords[b.idx], x, b.lo, b.hi, metric)
            i = exponential_choice(scores, d_score, w * ss, b.node, f"phase {phase} split", gen)
            left, right = split_block(b, int(axes[i]), int(poss[i]), coords)
            stats[f"cuts_phase{phase}"] += 1
            stats[f"max_depth_phase{phase}"] = max(stats[f"max_depth_phase{phase}"], left.depth)
            stack.extend((left, right))
        return done

    phase1 = run_phase([root], 1)
    for b in phase1:
        b.depth = 1                                 # depth restarts in phase 2 (section 5.3.1)
    leaves = run_phase(phase1, 2)
    stats.update(blocks_phase1=len(phase1), blocks=len(leaves), seconds=time.perf_counter() - t0)
    params = {"alpha": a, "gamma": g, "beta": bt, "k": series.k, "os": series.os, "theta1": th1, "theta2": th2,
              "stats": stats}
    return finish_view(tensor, leaves, eps_p, budget, "ripost", params, gen)
