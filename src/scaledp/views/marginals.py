"""Views fitted from noisy marginals: MST (McKenna, Miklau and Sheldon, JPC 2021), on the
Private-PGM engine ``mbi`` (the ``pgm`` extra).

MST measures every one-way marginal, selects a maximum spanning tree of pairs whose two-way
marginals the one-way model explains worst, measures those, and fits a graphical model to all
measurements; queries are answered exactly on the model's marginals. The published MST is
stated in zCDP with Gaussian noise; scaledp's accountant is pure epsilon-DP, so this is its
pure-DP form, with the same three steps and budget thirds:

* one-way marginals: one record is one cell of each of the d marginals, so together they have
  L1 sensitivity d: Laplace(d / eps_1) on every cell, charged eps_1 = eps / 3 once;
* the tree: d - 1 rounds of Kruskal, each choosing among the pairs that join two components by
  the exponential mechanism on ``||M_ij(data) - M_ij(model)||_1`` (sensitivity 1, the model
  fitted to the noisy one-way marginals being fixed), eps_2 / (d - 1) a round, eps_2 = eps / 3;
* the d - 1 chosen two-way marginals: sensitivity d - 1 together, Laplace((d - 1) / eps_3).

The model is fitted by ``mbi``'s mirror descent with each measurement's noise standard
deviation (sqrt(2) times its Laplace scale); the number of records is estimated from the
measurements by ``mbi`` (minimum-variance unbiased), not taken from the data.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np

from .. import _validate as V
from .._optional import require
from ..randomness import RNGLike, as_generator
from .budget import PrivacyBudget
from .ripost import ledger_totals
from .sampling import add_laplace, exponential_choice
from .tensor import CountTensor
from .view import MarginalView


def _marginal(tensor: CountTensor, axes: tuple[int, ...]) -> np.ndarray:
    """The exact marginal of ``tensor`` over ``axes`` (dense, in their order)."""
    shape = [tensor.shape[a] for a in axes]
    flat = np.ravel_multi_index(tuple(tensor.coords[:, a] for a in axes), shape)
    return np.bincount(flat, weights=tensor.counts.astype(np.float64), minlength=int(np.prod(shape))).reshape(shape)


def _mbi():
    """``mbi`` with jax in float64 (its float32 default stalls on counts of 10^4 and more)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        jax = require("jax", "pgm", "the mst view method")
        jax.config.update("jax_enable_x64", True)
        return require("mbi", "pgm", "the mst view method")


def _fit(mbi, names: list[str], shape: tuple[int, ...], measured: list[tuple[tuple[int, ...], np.ndarray, float]],
         iters: int):
    dom = mbi.Domain(names, list(shape))
    meas = [mbi.LinearMeasurement(y.ravel(), tuple(names[a] for a in axes), stddev=sd) for axes, y, sd in measured]
    return mbi.estimation.MirrorDescent().estimate(dom, meas, iters=iters)


def mst(tensor: CountTensor, epsilon: float = 1.0, iters: int = 1000, rng: RNGLike = None) -> MarginalView:
    """MST in its pure-DP form (see the module docstring)."""
    eps = V.positive_float("epsilon", epsilon)
    iters = V.int_in_range("iters", iters, 1)
    d = len(tensor.shape)
    if d < 2:
        raise ValueError("mst needs at least two columns (with one, its tree has no edge)")
    mbi = _mbi()
    gen = None if rng is None else as_generator(rng)
    names = [f"c{j}" for j in range(d)]
    budget = PrivacyBudget(eps)
    e1 = e2 = eps / 3
    root = budget.root
    root.charge(e1, "mst: one-way marginals")
    one = [((a,), add_laplace(_marginal(tensor, (a,)), d / e1, gen), np.sqrt(2) * d / e1) for a in range(d)]
    model = _fit(mbi, names, tensor.shape, one, iters)
    pairs = list(itertools.combinations(range(d), 2))
    score = {p: float(np.abs(_marginal(tensor, p) - np.asarray(model.project([names[p[0]], names[p[1]]])
                                                                 .datavector(flatten=False))).sum())
             for p in pairs}
    comp = list(range(d))
    tree = []
    for _ in range(d - 1):
        cand = [p for p in pairs if comp[p[0]] != comp[p[1]]]
        i = exponential_choice(np.asarray([score[p] for p in cand]), 1.0, e2 / (d - 1), root, "mst: tree edge", gen)
        a, b = cand[i]
        tree.append((a, b))
        old = comp[b]
        comp = [comp[a] if c == old else c for c in comp]
    e3 = root.remaining()      # eps / 3 up to the rounding of the thirds (never more than is left)
    root.charge(e3, "mst: two-way marginals of the tree")
    two = [(p, add_laplace(_marginal(tensor, p), (d - 1) / e3, gen), np.sqrt(2) * (d - 1) / e3) for p in tree]
    model = _fit(mbi, names, tensor.shape, one + two, iters)

    def marginal(axes: tuple[int, ...]) -> np.ndarray:
        return np.asarray(model.project([names[a] for a in axes]).datavector(flatten=False))

    return MarginalView(tensor.domains, marginal, "mst", eps, float(budget.spent()),
                        {"tree": [[names[a], names[b]] for a, b in tree], "iters": iters,
                         "total": float(model.total)}, ledger_totals(budget), n_blocks=d + len(tree))
