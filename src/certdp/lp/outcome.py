"""What every solver in certdp reports besides its numbers: the relative gap between a
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


def fmt_gap(gap: float | None) -> str:
    """A gap for a message: a percentage above 1e-4, else in scientific notation."""
    if gap is None:
        return "unknown (no lower bound)"
    if not math.isfinite(gap):
        return "infinite (no feasible point or no bound)"
    return f"{100 * gap:.3g}%" if gap >= 1e-4 else f"{gap:.2g}"


_ENDINGS = {"optimal": "reached", "time_limit": "stopped at the time limit", "iteration_limit":
            "stopped at the round limit", "stalled": "stalled (nothing improves the bounds)"}


def round_message(status: str, gap: float | None, requested: float, rounds: int) -> str:
    """The message of a decomposition's result: how it ended, and the true gap against the one
    requested."""
    how = _ENDINGS.get(status, status)
    return f"{how} after {rounds} rounds: certified gap {fmt_gap(gap)} (requested {requested:g})"
