"""Several methods on one instance, measured the way paper 002 measures them: time, LP size,
epsilon_tight, L_q, worst-case and expected loss; plus the uniform-output loss and the packing
lower bound that frame them."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..family.exponential import exponential_matrix, output_distances
from ..measures import epsilon_tight, expected_loss, packing_lower_bound, quantile_loss, uniform_loss, worst_case_loss
from ..mechanism import Mechanism, SolveResult
from ..space import Space


@dataclass(frozen=True)
class Comparison:
    """One row of ``certdp compare``."""

    method: str
    epsilon: float
    seconds: float | None
    variables: int | None
    constraints: int | None
    nonzeros: int | None
    epsilon_tight: float
    quantile_loss: float | None
    quantile_loss_se: float | None
    worst_case_loss: float | None
    expected_loss: float | None
    audit_passed: bool | None

    def as_dict(self) -> dict[str, Any]:
        """The row as a JSON-ready dictionary."""
        return dict(self.__dict__)


def compare_row(space: Space, res: SolveResult, *, q: float = 0.95, delta: float = 1e-3,
                distance: np.ndarray | None = None) -> Comparison:
    """Sizes, time, epsilon_tight (all pairs), L_q, worst-case and expected loss of one result.
    ``distance`` (the record distance matrix) may be passed when comparing several results."""
    D = space.distance_rows() if distance is None else distance
    if not isinstance(res.mechanism, Mechanism):
        # a sampled mechanism: the true one is epsilon-mDP (analytic), so its epsilon_tight is
        # at most epsilon; the estimate from sampled frequencies can exceed that only through
        # sampling noise (outputs never drawn look impossible), so it is capped there
        mc = res.stats["estimate"]
        return Comparison(res.method, space.epsilon, res.timings.get("total"), None, None, None,
                          min(epsilon_tight(mc.matrix, D, delta), mc.epsilon), mc.quantile_loss, mc.quantile_loss_se,
                          mc.worst_case_loss, mc.expected_loss, None)
    Z = res.mechanism.matrix
    st = res.stats
    return Comparison(res.method, space.epsilon, res.timings.get("total"), st.get("variables"),
                      st.get("constraints", st.get("constraints_after")), st.get("nonzeros"),
                      epsilon_tight(Z, D, delta), quantile_loss(Z, space.cost, q), None,
                      worst_case_loss(Z, space.cost), expected_loss(Z, space.cost, space.prior),
                      bool(res.mechanism.verification.passed))


def baseline_rows(space: Space, q: float = 0.95) -> dict[str, float]:
    """The uniform-output loss and the packing lower bound on the worst-case loss."""
    uni = np.asarray(space.cost).mean(axis=1)
    return {"uniform_quantile_loss": float(np.quantile(uni, q)),
            "uniform_expected_loss": uniform_loss(space.cost, space.prior),
            "packing_lower_bound": packing_lower_bound(space).bound}


@dataclass(frozen=True)
class Matched:
    """A method calibrated to a target epsilon_tight: the result at the epsilon found, and
    every epsilon tried with its measured epsilon_tight."""

    result: SolveResult
    epsilon: float
    epsilon_tight: float
    matched: bool
    trials: tuple[tuple[float, float], ...]
    seconds: float


def match_tight(space: Space, method: str, target: float, options: dict[str, Any] | None = None, *,
                delta: float = 1e-3, rtol: float = 0.01, max_trials: int = 24,
                distance: np.ndarray | None = None, proportional: bool = False,
                run: Callable[[Space, str, dict[str, Any]], SolveResult] | None = None) -> Matched:
    """Find the epsilon at which ``method``'s measured epsilon_tight (``delta``) is ``target``
    within ``rtol``, as paper 002 compares methods (its Figure 1 plots loss against the
    measured epsilon_tight, not the nominal epsilon).

    epsilon_tight grows with epsilon for every method here, roughly in proportion, so the
    search brackets the target by doubling or halving from ``space.epsilon``, then narrows the
    bracket by interpolation in log-log space, with a bisection step (log scale) whenever the
    same end of the bracket moved twice in a row. A method whose epsilon_tight does not reach the
    target within ``max_trials`` solves is returned at its closest trial with ``matched=False``.
    With ``proportional``, each step before the target is bracketed goes to epsilon x target /
    epsilon_tight instead (at most a doubling or halving): for a method whose epsilon_tight is
    nearly proportional to epsilon (SpannerMech: 0.96-1.0 of it on 50-150 word2vec words), one or two solves
    from a start near the target instead of the doubling's bracket and its bisections.
    ``run(space, method, options)`` solves (default :func:`certdp.solve`)."""
    from ..solve import solve as _solve

    if not (target > 0 and np.isfinite(target)):
        raise ValueError(f"target epsilon_tight must be a positive number, got {target!r}")
    opts = dict(options or {})
    solve_one = run or (lambda sp, m, o: _solve(sp, m, **o))
    D = space.distance_rows() if distance is None else distance
    t0 = time.perf_counter()
    trials: list[tuple[float, float, SolveResult]] = []

    def measure(eps: float) -> float:
        at = space.with_epsilon(eps)
        res = solve_one(at, method, opts)
        tight = compare_row(at, res, delta=delta, distance=D).epsilon_tight
        trials.append((eps, tight, res))
        return tight

    def done(tight: float) -> bool:
        return abs(tight - target) <= rtol * target

    eps = float(space.epsilon)
    tight = measure(eps)
    lo = hi = None   # (eps, tight) with tight below / above the target
    if tight < target:
        lo = (eps, tight)
    else:
        hi = (eps, tight)
    while not done(tight) and (lo is None or hi is None) and len(trials) < max_trials:
        if proportional and tight > 0:
            eps = eps * min(2.0, max(0.5, target / tight))
        else:
            eps = eps * 2.0 if hi is None else eps / 2.0
        tight = measure(eps)
        if tight < target:
            lo = (eps, tight)
        else:
            hi = (eps, tight)
    side = None   # which end the last step moved: two in a row on one end means bisect
    while not done(tight) and lo is not None and hi is not None and len(trials) < max_trials:
        (e0, t0_), (e1, t1) = lo, hi
        eps = math.sqrt(e0 * e1)
        if side != "repeat" and t0_ > 0 and t1 > t0_:
            guess = math.exp(math.log(e0) + (math.log(target) - math.log(t0_)) / (math.log(t1) - math.log(t0_))
                             * math.log(e1 / e0))
            # stay well inside the bracket so that a poor guess still shrinks it
            if e0 * (e1 / e0) ** 0.05 < guess < e0 * (e1 / e0) ** 0.95:
                eps = guess
        tight = measure(eps)
        moved = "lo" if tight < target else "hi"
        side = "repeat" if moved == side else moved
        if moved == "lo":
            lo = (eps, tight)
        else:
            hi = (eps, tight)
    eps, tight, res = min(trials, key=lambda t: abs(t[1] - target))
    return Matched(res, eps, tight, done(tight), tuple((e, t) for e, t, _ in trials), time.perf_counter() - t0)


def order_factors(space: Space, constopt: Matched, expmech: Matched, q: float = 0.95) -> dict[str, float]:
    """Why ConstOPTMech and ExpMech, calibrated to the same epsilon_tight, come in the order they
    do: the ratio of their L_q split into four measured factors whose product it is exactly,

        L_q(C) / L_q(E) = objective x calibration x equaliser x spread

    * ``objective`` = W(C) / W(E'), with W the worst-case loss and E' ExpMech at ConstOPT's own
      epsilon. E' is a point of ConstOPT's LP (all weights Y equal, scaled so that every row sums
      to at least 1; normalising its rows gives E' back), so above 1 means the LP preferred a
      matrix whose worst case is higher: its objective is the loss *before* normalisation plus
      the penalty, not the loss of the mechanism it returns. ``lp_objective`` and
      ``expmech_lp_objective`` give both points' values in the LP's own terms (at the lambda chosen).
    * ``calibration`` = W(E') / W(E): ExpMech at ConstOPT's epsilon against ExpMech at its own.
      Below 1 when ConstOPT is given more nominal epsilon than ExpMech for the same
      epsilon_tight (its guarantee is looser than its measured privacy), above 1 when less.
    * ``equaliser`` = L_q(C) / W(C) and ``spread`` = W(E) / L_q(E): how far below its worst case
      each mechanism's q-quantile lies. A minimax LP leaves no record below the worst case when it
      can trade every record's loss against the others' (ConstOPT's is then exactly 1).

    The data enters through ``z_spread``, max / min over records of ExpMech's normaliser
    ``sum_w exp(-epsilon d(u, w) / 2)`` at ConstOPT's epsilon (how unequal the density around
    records is at the privacy scale: the "black hole" of paper 002 section 3.1 is a large value),
    and ``nn_spread``, the 95th percentile over the median of the distance to the nearest other
    record.
    """
    C = space.cost
    mc, me = constopt.result.mechanism, expmech.result.mechanism
    if not (isinstance(mc, Mechanism) and isinstance(me, Mechanism)):
        raise TypeError("the order's factors compare two mechanisms with exact matrices")
    HC, HE = mc.matrix, me.matrix
    wc, lc = worst_case_loss(HC, C), quantile_loss(HC, C, q)
    we, le = worst_case_loss(HE, C), quantile_loss(HE, C, q)
    D = output_distances(space)
    E2 = exponential_matrix(D, constopt.epsilon)
    we2 = worst_case_loss(E2, C)
    a = np.exp(-0.5 * constopt.epsilon * D)
    Z = a.sum(axis=1)
    lam = float(constopt.result.stats["lambda"])
    chosen = [s for s in constopt.result.stats["sweep"] if s["lambda"] == lam][0]
    M = a / Z.min()
    exp_lp = float(np.max((C * M).sum(axis=1) + lam * (M.sum(axis=1) - 1.0)))
    Dr = space.distance_rows()
    nn = np.min(np.where(np.eye(len(Dr), dtype=bool), np.inf, Dr), axis=1)
    return {"quantile_ratio": lc / le, "worst_ratio": wc / we, "objective": wc / we2, "calibration": we2 / we,
            "equaliser": lc / wc, "spread": we / le, "constopt_quantile": lc, "constopt_worst": wc,
            "expmech_quantile": le, "expmech_worst": we, "expmech_at_constopt_epsilon_worst": we2,
            "lambda": lam, "lp_objective": float(chosen["lp_objective"]), "expmech_lp_objective": exp_lp,
            "max_row_sum": float(chosen["max_row_sum"]), "z_spread": float(Z.max() / Z.min()),
            "nn_spread": float(np.quantile(nn, 0.95) / np.median(nn))}
