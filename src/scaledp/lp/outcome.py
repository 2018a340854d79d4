"""What every solver in scaledp reports besides its numbers: the relative gap between a
feasible value and a lower bound, and the error raised when a solver stops at a limit before
it has anything feasible to return."""

from __future__ import annotations

import math


class SolverLimitError(RuntimeError):
    """A time or iteration limit was reached (or the solver failed) before any feasible
    solution existed, so there is nothing to certify and return."""


def relative_gap(upper: float, lower: float | None) -> float | None:
    """``(upper - lower) / |upper|``, at least 0; 0 when both are 0; None without a lower
    bound; inf when either bound is not finite (no feasible point yet, or no bound yet)."""
    if lower is None:
        return None
    if not (math.isfinite(upper) and math.isfinite(lower)):
        return math.inf
    if upper == 0:
        return 0.0 if lower >= 0 else math.inf
    return max(0.0, (upper - lower) / abs(upper))
