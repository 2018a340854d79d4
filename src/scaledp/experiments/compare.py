"""Several methods on one instance, measured the way paper 002 measures them: time, LP size,
epsilon_tight, L_q, worst-case and expected loss; plus the uniform-output loss and the packing
lower bound that frame them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..measures import epsilon_tight, expected_loss, packing_lower_bound, quantile_loss, uniform_loss, worst_case_loss
from ..mechanism import Mechanism, SolveResult
from ..space import Space


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
        return Comparison(res.method, res.timings.get("total"), None, None, None,
                          min(epsilon_tight(mc.matrix, D, delta), mc.epsilon), mc.quantile_loss, mc.quantile_loss_se,
                          mc.worst_case_loss, mc.expected_loss, None)
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
    return {"uniform_quantile_loss": float(np.quantile(uni, q)),
            "uniform_expected_loss": uniform_loss(space.cost, space.prior),
            "packing_lower_bound": packing_lower_bound(space).bound}
