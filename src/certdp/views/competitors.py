"""The competitors of RIPOST in paper 004: Identity, PrivTree and HDPView.

* **Identity** (Dwork 2006): Laplace(1/eps) on every cell of the full tensor. Cells are
  disjoint, so the whole release costs ``eps`` (parallel composition). The domain has to be
  materialised; above ``max_cells`` it is refused with a clear error.
* **PrivTree** (Zhang, Xiao, Xie, SIGMOD 2016), with its biased convergence condition: a node
  at depth ``h`` with count ``c`` is split when
  ``max(theta - delta, c - h delta) + Lap(lambda) > theta``, with fanout ``b = 2``,
  ``lambda = (2b - 1)/(b - 1) / eps_tree = 3 / eps_tree`` and ``delta = lambda ln b``. The
  paper's theorem bounds the cost of the *whole* tree by ``eps_tree`` whatever its depth, so
  the tree is charged once, at the root; leaves get ``Lap(1/eps_leaf)``. Splits halve every
  axis that can still be cut (fanout ``b = 2^d``; halving
  every axis at once, as the HDPView and RIPOST comparisons ran it, is the default
  ``fanout='all'``; ``fanout='binary'`` halves one axis at a time, round-robin, which suits
  many columns better). ``eps_tree = eps_leaf = eps / 2`` as in PrivTree.
* **HDPView** (Kato et al., PVLDB 2022): recursive bisection. Cuts are chosen by the
  exponential mechanism on ``-(AE_L + AE_R)`` over every (axis, position), with sensitivity
  ``2 (2 - 2/|B|)`` and ``eps_cut = (1 - gamma) eps_r / kappa`` per level for the first
  ``kappa = ceil(beta log2 |domain|)`` levels, then uniformly at random. Convergence is
  PrivTree's biased test on AE: ``max(AE - h delta, theta + 2 - delta) + Lap(lambda) <= theta``
  with ``lambda = ((2a - 1)/(a - 1) + 1) 2 / (gamma eps_r)``, ``delta = lambda ln a``,
  ``theta = 1/eps_p``; it is charged once at the root (``gamma eps_r``), like PrivTree's.
  Defaults are the published ones: ``eps_r = 0.9 eps``, ``a = 1.6``, ``beta = 1.2``,
  ``gamma = 0.9``; leaves get ``Lap(1/eps_p)``, ``eps_p = eps - eps_r``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _validate as V
from ..progress import Progress, report
from ..randomness import RNGLike, as_generator, uniforms
from .blocks import aggregation_error, cut_scores
from .budget import PrivacyBudget
from .noise import LeafLaplace
from .ripost import Block, BiasedTest, finish_view, halve_all, ledger_totals, quadtree_fanout, root_block, split_block
from .sampling import add_laplace, exponential_choice
from .tensor import CountTensor
from .view import BlockView, DenseView

MAX_IDENTITY_CELLS = 20_000_000


def check_dense(tensor: CountTensor, method: str, max_cells: int) -> None:
    """Refuse, with a clear error, a method that materialises the domain on more than
    ``max_cells`` cells (checked by the builders and, before any charge, by a release)."""
    if tensor.domain_size > max_cells:
        raise ValueError(f"{method} must materialise all {tensor.cells_text} cells of the domain, above max_cells="
                         f"{max_cells:,}; use fewer or coarser columns, or a decomposition method")


def dense_counts(tensor: CountTensor, method: str, max_cells: int) -> np.ndarray:
    """The tensor as a dense array of counts, for the methods that materialise the domain;
    refused above ``max_cells`` cells (:func:`check_dense`)."""
    check_dense(tensor, method, max_cells)
    dense = np.zeros(tensor.shape)
    dense[tuple(tensor.coords.T)] = tensor.counts
    return dense


def identity(tensor: CountTensor, epsilon: float = 0.1, max_cells: int = MAX_IDENTITY_CELLS,
             rng: RNGLike = None) -> DenseView:
    """Laplace(1/eps) on every cell (the tensor is materialised; refused above ``max_cells``)."""
    eps = V.positive_float("epsilon", epsilon)
    dense = dense_counts(tensor, "Identity", max_cells)
    gen = None if rng is None else as_generator(rng)
    budget = PrivacyBudget(eps)
    budget.root.charge(eps, "identity: every cell (disjoint cells, parallel)")
    dense = add_laplace(dense, 1.0 / eps, gen)
    return DenseView(tensor.domains, dense, "identity", eps, float(budget.spent()), {}, ledger_totals(budget),
                     noise=LeafLaplace(np.asarray(1.0 / eps)))


#: ``fanout='auto'`` halves every axis up to this many cuttable axes, one at a time past it: a
#: split into 2^d children at d = 22 binary columns made 4 million blocks and ran out of memory
#: (3.4 GB) before its first level ended; paper 004's comparisons (7-14 columns) stay below it.
MAX_QUADTREE_AXES = 16


def privtree(tensor: CountTensor, epsilon: float = 0.1, theta: float = 0.0, fanout: str = "auto",
             rng: RNGLike = None, progress: Progress | None = None) -> BlockView:
    """PrivTree (see the module docstring). ``fanout='all'`` halves every axis that can still be
    cut (the quadtree generalisation of the original, used in the RIPOST and HDPView
    comparisons; beta = 2^d); ``'binary'`` halves one axis at a time, round-robin (beta = 2);
    ``'auto'`` is 'all' up to :data:`MAX_QUADTREE_AXES` cuttable axes and 'binary' past it."""
    eps = V.positive_float("epsilon", epsilon)
    th = float(theta)
    V.choice("fanout", fanout, ("auto", "all", "binary"))
    if fanout == "auto":
        fanout = "all" if sum(s > 1 for s in tensor.shape) <= MAX_QUADTREE_AXES else "binary"
    gen = None if rng is None else as_generator(rng)
    eps_tree = eps_leaf = eps / 2
    coords, counts = tensor.coords, tensor.counts.astype(np.float64)
    shape = np.asarray(tensor.shape, dtype=np.int64)
    d = shape.size
    fan = quadtree_fanout(shape) if fanout == "all" else 2
    # The privacy proof (Zhang et al., Thm. 3.1) bounds one root-to-leaf path; beta enters only
    # through delta = lambda ln beta, so nodes with fewer children than beta are covered too.
    test = BiasedTest.on_sum(eps_tree, th, fan)
    lam, delta = test.scale, test.delta
    budget = PrivacyBudget(eps)
    budget.root.charge(eps_tree, "privtree: biased-convergence tree (whole tree, Zhang et al. Thm. 3.1)")
    frontier = [(root_block(tensor, budget, 0), -1)]
    leaves: list[Block] = []
    while frontier:                      # level by level, so each level's noise is one draw
        report(progress, "level", f"level {frontier[0][0].depth}: {len(frontier):,} blocks to test, "
                                  f"{len(leaves):,} leaves")
        c = np.asarray([float(counts[b.idx].sum()) for b, _ in frontier])
        depth = np.asarray([b.depth for b, _ in frontier], dtype=np.float64)
        noisy = add_laplace(np.maximum(test.floor, c - depth * delta), lam, gen)
        nxt = []
        for (b, last_axis), z in zip(frontier, noisy):
            sides = b.hi - b.lo
            if z <= th or np.all(sides <= 1):
                leaves.append(b)
            elif fanout == "binary":
                axis = next(a % d for a in range(last_axis + 1, last_axis + 1 + d) if sides[a % d] > 1)
                pos = int(b.lo[axis] + (sides[axis] + 1) // 2)
                left, right = split_block(b, axis, pos, coords)
                nxt.extend([(left, axis), (right, axis)])
            else:
                nxt.extend((child, -1) for child in halve_all(b, coords))
        frontier = nxt
    params = {"theta": th, "fanout": fanout, "beta": fan, "lambda": lam, "delta": delta,
              "stats": {"blocks": len(leaves)}}      # no build time: it depends on the records
    return finish_view(tensor, leaves, eps_leaf, budget, "privtree", params, gen)


def hdpview(tensor: CountTensor, epsilon: float = 0.1, ratio: float = 0.9, a: float = 1.6, beta: float = 1.2,
            gamma: float = 0.9, theta: float | None = None, rng: RNGLike = None,
            progress: Progress | None = None) -> BlockView:
    """HDPView with its published defaults (see the module docstring)."""
    eps = V.positive_float("epsilon", epsilon)
    r = V.open_unit("ratio", ratio)
    g = V.open_unit("gamma", gamma)
    a = float(a)
    if not a > 1:
        raise ValueError(f"a (the bias fanout) must be > 1, got {a}")
    bt = V.positive_float("beta", beta)
    gen = None if rng is None else as_generator(rng)
    eps_r, eps_p = eps * r, eps * (1 - r)
    th = 1.0 / eps_p if theta is None else float(theta)
    kappa = max(1, int(math.ceil(math.log2(max(tensor.domain_size, 2)) * bt)))   # log2 of any int
    eps_cut = (1 - g) * eps_r / kappa
    test = BiasedTest.on_ae(g * eps_r, th, a)
    lam, delta = test.scale, test.delta
    budget = PrivacyBudget(eps)
    budget.root.charge(g * eps_r, "hdpview: random convergence (whole tree, PrivTree-style bias)")
    coords, counts = tensor.coords, tensor.counts.astype(np.float64)
    root = root_block(tensor, budget, 0)
    leaves: list[Block] = []
    stack = [root] if root.cells() > 1 else []
    if not stack:
        leaves.append(root)
    last = time.perf_counter()
    while stack:
        if progress is not None and time.perf_counter() - last > 2.0:
            last = time.perf_counter()
            report(progress, "split", f"{len(leaves):,} leaves, {len(stack):,} blocks open")
        b = stack.pop()
        x = counts[b.idx]
        if b.depth < kappa:
            axes, poss, scores = cut_scores(coords[b.idx], x, b.lo, b.hi, "ae")
            sens = 2.0 * (2.0 - 2.0 / b.cells())
            i = exponential_choice(scores, sens, eps_cut, b.node, "hdpview cut", gen)
            axis, pos = int(axes[i]), int(poss[i])
        else:
            sides = b.hi - b.lo
            cand = np.flatnonzero(sides > 1)
            u = uniforms(2, gen)                        # data-independent: costs nothing
            axis = int(cand[min(int(u[0] * cand.size), cand.size - 1)])
            pos = int(b.lo[axis] + 1 + min(int(u[1] * (sides[axis] - 1)), sides[axis] - 2))
        for child in split_block(b, axis, pos, coords):
            if child.cells() <= 1:
                leaves.append(child)
                continue
            ae = aggregation_error(counts[child.idx], child.cells())
            if float(add_laplace(test.biased(ae, child.depth), lam, gen)) <= th:
                leaves.append(child)
            else:
                stack.append(child)
    params = {"ratio": r, "a": a, "beta": bt, "gamma": g, "theta": th, "kappa": kappa, "lambda": lam,
              "delta": delta, "stats": {"blocks": len(leaves)}}      # no build time: it depends on the records
    return finish_view(tensor, leaves, eps_p, budget, "hdpview", params, gen)
