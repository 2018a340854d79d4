"""One entry point for every method, used by the CLI and by ``compare``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .. import _validate as V
from ..audit import expected_loss, quantile_loss, uniform_loss, worst_case_loss
from ..metrics import epsilon_tight, packing_lower_bound
from ..space import Space
from .constopt import DEFAULT_LAMBDAS, constopt_mechanism
from .exponential import exponential_mechanism
from .noise import MonteCarloResult, estimate_noise_mechanism
from .optimal import solve_pmo
from .result import SolveResult
from .spanner import spanner_mechanism

METHODS = ("lp", "benders", "outputs", "expmech", "optmech", "constopt", "spanner", "madlib", "laplace")


def run_method(space: Space, method: str, *, solver: str | None = None, time_limit: float | None = None,
               tolerance: float = 1e-9, objective: str = "expected", reduce: bool = True, r: int = 10,
               lambdas: Sequence[float] = DEFAULT_LAMBDAS, delta: float = 2.0, draws: int = 2000,
               seed: int | None = None, progress: Callable[[str], None] | None = None,
               benders: dict[str, Any] | None = None) -> SolveResult | MonteCarloResult:
    """Run ``method`` on ``space`` with the options that apply to it (others are ignored).

    lp / benders / outputs: paper 000's PMO (``objective`` 'expected' or 'worst' for lp); optmech: the
    worst-case LP of paper 002; constopt: ConstOPTMech (``r``, ``lambdas``); spanner:
    SpannerMech (``delta``); madlib / laplace: Monte Carlo estimates (``draws``); expmech.
    ``solver=None`` takes each method's default (dual simplex for lp, benders and optmech;
    'auto' for constopt; IPM for spanner).
    """
    V.choice("method", method, METHODS)
    if method == "expmech":
        return exponential_mechanism(space)
    if method in ("lp", "benders", "optmech"):
        solver = solver or "simplex"
    if method == "outputs":
        from .pmo_outputs import OPTIONS

        opts = {k: v for k, v in (benders or {}).items() if k in OPTIONS}
        return solve_pmo(space, method="outputs", time_limit=time_limit, reduce=reduce, tolerance=tolerance,
                         progress=progress, **opts)
    if method in ("lp", "benders"):
        opts = dict(benders or {}) if method == "benders" else {}
        return solve_pmo(space, method=method, solver=solver, time_limit=time_limit, reduce=reduce,
                         tolerance=tolerance, objective=objective, progress=progress, **opts)
    if method == "optmech":
        return solve_pmo(space, method="lp", solver=solver, time_limit=time_limit, reduce=reduce,
                         tolerance=tolerance, objective="worst", progress=progress)
    if method == "constopt":
        return constopt_mechanism(space, r=r, lambdas=lambdas, solver=solver or "auto",
                                  time_limit=time_limit, tolerance=tolerance, progress=progress)
    if method == "spanner":
        return spanner_mechanism(space, delta=delta, solver=solver or "ipm",
                                 time_limit=time_limit, tolerance=tolerance)
    return estimate_noise_mechanism(space, method, draws=draws, seed=seed)


@dataclass(frozen=True)
class Comparison:
    """One row of ``scaledp compare``."""

    method: str
    seconds: float | None
    variables: int | None
    constraints: int | None
    nonzeros: int | None
    epsilon_tight: float | None
    quantile_loss: float | None
    quantile_loss_se: float | None
    worst_case_loss: float | None
    expected_loss: float | None
    audit_passed: bool | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def compare_row(space: Space, res: SolveResult | MonteCarloResult, *, q: float = 0.95,
                delta: float = 1e-3, distance: np.ndarray | None = None) -> Comparison:
    """Sizes, time, epsilon_tight (all pairs), L_q, worst-case and expected loss of one result.
    ``distance`` (the record distance matrix) may be passed when comparing several results."""
    D = space.distance_rows() if distance is None else distance
    if isinstance(res, MonteCarloResult):
        # the true mechanism is epsilon-mDP (analytic), so its epsilon_tight is at most epsilon;
        # the estimate from sampled frequencies can exceed that only through sampling noise
        # (outputs never drawn look impossible), so it is capped there
        Z = res.matrix
        return Comparison(res.method, res.timings.get("total"), None, None, None,
                          min(epsilon_tight(Z, D, delta), res.epsilon), res.quantile_loss, res.quantile_loss_se,
                          res.worst_case_loss, res.expected_loss, None)
    Z = res.mechanism.matrix
    st = res.stats
    return Comparison(res.method, res.timings.get("total"), st.get("variables"),
                      st.get("constraints", st.get("constraints_after")), st.get("nonzeros"),
                      epsilon_tight(Z, D, delta), quantile_loss(Z, space.cost, q), None,
                      worst_case_loss(Z, space.cost), expected_loss(Z, space.cost, space.prior),
                      bool(res.mechanism.verification.passed))


def baseline_rows(space: Space, q: float = 0.95) -> dict[str, float]:
    """The uniform-output loss and the packing lower bound on the worst-case loss."""
    uni = np.asarray(space.cost).mean(axis=1)
    return {"uniform_quantile_loss": float(np.quantile(uni, q)), "uniform_expected_loss": uniform_loss(space.cost,
                                                                                                      space.prior),
            "packing_lower_bound": packing_lower_bound(space).bound}
