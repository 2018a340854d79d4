"""Views fitted from noisy marginals: MST (McKenna, Miklau and Sheldon, JPC 2021) and AIM
(McKenna, Mullins, Sheldon and Miklau, PVLDB 2022), on the Private-PGM engine ``mbi`` (the
``pgm`` extra). AIM's own description is in :func:`aim`; MST's follows.

MST measures every one-way marginal, selects a maximum spanning tree of pairs whose two-way
marginals the one-way model explains worst, measures those, and fits a graphical model to all
measurements; queries are answered exactly on the model's marginals. The published MST is
stated in zCDP with Gaussian noise; certdp's accountant is pure epsilon-DP, so this is its
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


def _mbi(method: str):
    """``mbi`` with jax in float64 (its float32 default stalls on counts of 10^4 and more)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        jax = require("jax", "pgm", f"the {method} view method")
        jax.config.update("jax_enable_x64", True)
        return require("mbi", "pgm", f"the {method} view method")


def _release() -> None:
    """Drop jax's compiled programs: every fit compiles new ones for its set of measurements, and
    each keeps memory mappings, so a process building views one after another reaches the
    kernel's map limit after a few dozen AIM builds (LLVM 'Cannot allocate memory')."""
    import jax

    jax.clear_caches()


def _fit(mbi, names: list[str], shape: tuple[int, ...], measured: list[tuple[tuple[int, ...], np.ndarray, float]],
         iters: int, warm=None):
    """The graphical model fitted to ``measured`` (axes, noisy marginal, noise standard deviation)."""
    dom = mbi.Domain(names, list(shape))
    meas = [mbi.LinearMeasurement(y.ravel(), tuple(names[a] for a in axes), stddev=sd) for axes, y, sd in measured]
    return mbi.estimation.MirrorDescent().estimate(dom, meas, iters=iters, warm_start=warm)


def _model_marginal(model, names: list[str], axes: tuple[int, ...]) -> np.ndarray:
    return np.asarray(model.project([names[a] for a in axes]).datavector(flatten=False))


def _marginal_fn(model, names: list[str]):
    """``axes -> marginal`` on the fitted model (what a MarginalView answers from)."""
    return lambda axes: _model_marginal(model, names, axes)


def mst(tensor: CountTensor, epsilon: float = 1.0, iters: int = 1000, rng: RNGLike = None) -> MarginalView:
    """MST in its pure-DP form (see the module docstring)."""
    eps = V.positive_float("epsilon", epsilon)
    iters = V.int_in_range("iters", iters, 1)
    d = len(tensor.shape)
    if d < 2:
        raise ValueError("mst needs at least two columns (with one, its tree has no edge)")
    mbi = _mbi("mst")
    gen = None if rng is None else as_generator(rng)
    names = [f"c{j}" for j in range(d)]
    budget = PrivacyBudget(eps)
    e1 = e2 = eps / 3
    root = budget.root
    root.charge(e1, "mst: one-way marginals")
    one = [((a,), add_laplace(_marginal(tensor, (a,)), d / e1, gen), np.sqrt(2) * d / e1) for a in range(d)]
    model = _fit(mbi, names, tensor.shape, one, iters)
    pairs = list(itertools.combinations(range(d), 2))
    score = {p: float(np.abs(_marginal(tensor, p) - _model_marginal(model, names, p)).sum()) for p in pairs}
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
    _release()
    return MarginalView(tensor.domains, _marginal_fn(model, names), "mst", eps, float(budget.spent()),
                        {"tree": [[names[a], names[b]] for a, b in tree], "iters": iters,
                         "total": float(model.total)}, ledger_totals(budget), n_blocks=d + len(tree))


def _downward_closure(cliques: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Every non-empty subset of every clique, once, ordered by size then axes."""
    out = {s for c in cliques for k in range(1, len(c) + 1) for s in itertools.combinations(c, k)}
    return sorted(out, key=lambda s: (len(s), s))


def aim(tensor: CountTensor, epsilon: float = 1.0, degree: int = 2, rounds: int | None = None,
        max_model_mb: float = 80.0, iters: int = 1000, round_iters: int = 100, rng: RNGLike = None) -> MarginalView:
    """AIM (McKenna, Mullins, Sheldon and Miklau, PVLDB 2022) in pure epsilon-DP form.

    The workload is every ``degree``-way marginal; the candidates are its downward closure,
    candidate r weighted by ``w_r = sum_s |r & s|`` over the workload's marginals s. The budget
    is spent in rounds of ``eps / rounds`` (``rounds`` defaults to 16 d, AIM's T), 10% choosing
    and 90% measuring, as AIM splits them:

    * first every one-way marginal, Laplace(1 / e_m) each, charged d e_m;
    * then, each round, the exponential mechanism (sensitivity max w_r) picks the candidate of
      largest ``w_r (||M_r(D) - M_r(model)||_1 - b n_r)``, ``b n_r`` being the Laplace noise's
      expected L1 size over its n_r cells, among the candidates that keep the model's junction
      tree under ``spent / eps * max_model_mb`` megabytes (AIM's size filter); it is measured
      with Laplace(b), and the model refitted from all measurements (``round_iters`` mirror
      descent steps from the previous model);
    * when the refit moves the chosen marginal less than the noise would (``b n_r``), the
      round budget doubles (AIM's annealing); the round that would leave less than one more
      round's budget takes all of it.

    AIM's zCDP Gaussian measurements become Laplace ones and its rho shares epsilon shares; the
    structure, the score, the size filter and the annealing rule are AIM's.
    """
    eps = V.positive_float("epsilon", epsilon)
    d = len(tensor.shape)
    degree = V.int_in_range("degree", degree, 1)
    T = 16 * d if rounds is None else V.int_in_range("rounds", rounds, d + 1)
    cap = V.positive_float("max_model_mb", max_model_mb)
    iters = V.int_in_range("iters", iters, 1)
    round_iters = V.int_in_range("round_iters", round_iters, 1)
    mbi = _mbi("aim")
    from mbi.junction_tree import hypothetical_model_size

    gen = None if rng is None else as_generator(rng)
    names = [f"c{j}" for j in range(d)]
    dom = mbi.Domain(names, list(tensor.shape))
    work = list(itertools.combinations(range(d), min(degree, d)))
    cands = _downward_closure(work)
    weight = {r: float(sum(len(set(r) & set(s)) for s in work)) for r in cands}
    true = {r: _marginal(tensor, r) for r in cands}
    budget = PrivacyBudget(eps)
    root = budget.root
    e_round = eps / T
    e_m = 0.9 * e_round
    root.charge(d * e_m, "aim: one-way marginals")
    measured = [((a,), add_laplace(true[(a,)], 1.0 / e_m, gen), np.sqrt(2) / e_m) for a in range(d)]
    model = _fit(mbi, names, tensor.shape, measured, iters)
    n_rounds = 0
    while root.remaining() > 1e-12 * eps:
        left = root.remaining()
        e_round = left if left < 2 * e_round else e_round
        e_sel, e_m = 0.1 * e_round, 0.9 * e_round
        b = 1.0 / e_m
        used = (eps - left + e_round) / eps
        chosen = [m[0] for m in measured]
        ok = [r for r in cands
              if hypothetical_model_size(dom, [tuple(names[a] for a in c) for c in chosen + [r]]) <= used * cap]
        est = {r: _model_marginal(model, names, r) for r in ok}
        score = np.asarray([weight[r] * (np.abs(true[r] - est[r]).sum() - b * true[r].size) for r in ok])
        r = ok[exponential_choice(score, max(weight[c] for c in ok), e_sel, root, "aim: choose a marginal", gen)]
        if e_round == left:                               # the last round measures with what is left
            e_m = root.remaining()
        root.charge(e_m, "aim: measure the chosen marginal")
        measured.append((r, add_laplace(true[r], 1.0 / e_m, gen), np.sqrt(2) / e_m))
        model = _fit(mbi, names, tensor.shape, measured, round_iters, warm=model)
        n_rounds += 1
        if np.abs(_model_marginal(model, names, r) - est[r]).sum() <= b * true[r].size:
            e_round *= 2
    model = _fit(mbi, names, tensor.shape, measured, iters, warm=model)
    _release()
    return MarginalView(tensor.domains, _marginal_fn(model, names), "aim", eps, float(budget.spent()),
                        {"degree": degree, "rounds": n_rounds, "iters": iters,
                         "measured": [[names[a] for a in m[0]] for m in measured], "total": float(model.total)},
                        ledger_totals(budget), n_blocks=len(measured))
