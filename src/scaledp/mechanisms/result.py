"""The value every solver returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..audit import worst_case_loss
from .base import Mechanism


@dataclass(frozen=True)
class SolveResult:
    """A certified mechanism with what is known about its optimality.

    Attributes:
        mechanism: the certified mechanism (passes the exact audit).
        method: the algorithm that produced it.
        status: 'optimal' (gap within the request), 'time_limit', 'iteration_limit',
            'approximate' (the solver stopped at its own tolerance, e.g. PDLP; ``gap`` is still
            true) or 'heuristic' (no optimality claim, e.g. ExpMech).
        upper_bound: the objective of ``mechanism`` itself (expected loss, or the worst-case
            loss max_w L(M, w) when ``objective == 'worst'``).
        lower_bound: a valid lower bound on the optimal objective of the problem solved, or
            None when the method gives none.
        gap: (upper - lower) / upper, or None.
        iterations: solver iterations (simplex iterations, Benders rounds).
        history: per-iteration records (Benders), else empty.
        timings: seconds per phase.
        stats: sizes and counters (constraints before/after reduction, non-zeros, ...).
        objective: 'expected' (paper 000, Eq. 4) or 'worst' (paper 002, Eq. 1).
    """

    mechanism: Mechanism
    method: str
    status: str
    upper_bound: float
    lower_bound: float | None
    gap: float | None
    iterations: int = 0
    history: tuple[dict[str, Any], ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    objective: str = "expected"

    @property
    def expected_loss(self) -> float:
        if self.objective == "expected":
            return self.upper_bound
        return self.mechanism.expected_loss()

    @property
    def worst_case_loss(self) -> float:
        if self.objective == "worst":
            return self.upper_bound
        return worst_case_loss(self.mechanism.matrix, self.mechanism.cost)

    def summary(self) -> dict[str, Any]:
        """The ``--json`` summary of the CLI."""
        m = self.mechanism
        out = {
            "method": self.method,
            "status": self.status,
            "n_records": m.n_records,
            "n_outputs": m.n_outputs,
            "epsilon": m.epsilon,
            "objective": self.objective,
            "expected_loss": self.expected_loss,
            "worst_case_loss": self.worst_case_loss if m.cost is not None else None,
            "lower_bound": self.lower_bound,
            "upper_bound": self.upper_bound,
            "gap": self.gap,
            "iterations": self.iterations,
            "seconds": self.timings.get("total"),
            "constraints_before": self.stats.get("constraints_before"),
            "constraints_after": self.stats.get("constraints_after"),
            "audit_passed": m.verification.passed,
        }
        for k, v in list(out.items()):
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = None
        return out


def relative_gap(upper: float, lower: float | None) -> float | None:
    """(upper - lower) / |upper| (0 when both are 0), or None without a lower bound."""
    if lower is None:
        return None
    if upper == 0:
        return 0.0 if lower >= 0 else math.inf
    return max(0.0, (upper - lower) / abs(upper))
