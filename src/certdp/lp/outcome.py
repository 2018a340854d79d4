"""What every solver in certdp reports besides its numbers: how the run ended
(:class:`Status`), the relative gap between a feasible value and a lower bound, and the error
raised when a solver stops at a limit before it has anything feasible to return."""

from __future__ import annotations

import math
from enum import StrEnum


class Status(StrEnum):
    """How a solve ended: the closed set of values of ``SolveResult.status``.

    A member is a ``str`` (``Status.OPTIMAL == "optimal"``, and JSON writes it as that string).
    What each status promises about the result (every one returns a result; a run that has
    nothing feasible raises :class:`SolverLimitError` instead):

    ===============  ================  ===============  =========================================
    status           certified matrix  rigorous bound   meaning
    ===============  ================  ===============  =========================================
    optimal          yes               yes              the certified gap is within the request
    gap_limited      yes               yes              the solver reached its own optimum, but
                                                        the certified gap is above the request
                                                        (a loose ``tolerance``)
    time_limit       yes               yes              stopped at the time limit
    iteration_limit  yes               yes              stopped at the iteration or round limit
    stalled          yes               yes              a decomposition's bounds stopped moving
    failed           yes               yes              the solver failed numerically on a part;
                                                        the best certified point so far
    approximate      yes               yes              the solver stopped with a feasible point
                                                        but no optimality claim (status 'unknown')
    heuristic        yes               no               no optimality claim (ExpMech, ConstOPT,
                                                        SpannerMech): ``lower_bound`` is None
    estimated        no                no               a sampled mechanism (Madlib, planar
                                                        Laplace): the guarantee is analytic and
                                                        the losses are Monte Carlo estimates
    ===============  ================  ===============  =========================================

    "Rigorous bound" means ``lower_bound`` is valid for the problem solved whatever the
    solver's accuracy, so ``gap`` is the true gap of the certified matrix; it is None when the
    solver returned no duals, and -inf when a limit came before the first bound.
    """

    OPTIMAL = "optimal"
    GAP_LIMITED = "gap_limited"
    TIME_LIMIT = "time_limit"
    ITERATION_LIMIT = "iteration_limit"
    STALLED = "stalled"
    FAILED = "failed"
    APPROXIMATE = "approximate"
    HEURISTIC = "heuristic"
    ESTIMATED = "estimated"

    @property
    def certified(self) -> bool:
        """Whether a result of this status carries a certified matrix (a ``Mechanism``)."""
        return self is not Status.ESTIMATED

    @property
    def bounded(self) -> bool:
        """Whether a result of this status carries a rigorous lower bound."""
        return self not in (Status.HEURISTIC, Status.ESTIMATED)


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


def loss_bound(lower: float, upper: float) -> float:
    """A rigorous lower bound on a loss, tightened by what every loss here is: at least 0 (costs
    and prior are validated non-negative; a bound from LP duals can come out at -4e-16, which
    made a zero-cost optimum read as an infinite gap) and at most the certified ``upper``
    (rounding can only make a bound a hair high)."""
    return min(max(lower, 0.0), upper)


def fmt_gap(gap: float | None) -> str:
    """A gap for a message: a percentage above 1e-4, else in scientific notation."""
    if gap is None:
        return "unknown (no lower bound)"
    if not math.isfinite(gap):
        return "infinite (no feasible point or no bound)"
    return f"{100 * gap:.3g}%" if gap >= 1e-4 else f"{gap:.2g}"


_ENDINGS = {Status.OPTIMAL: "reached", Status.GAP_LIMITED: "closed the gap before certification",
            Status.TIME_LIMIT: "stopped at the time limit", Status.ITERATION_LIMIT: "stopped at the round limit",
            Status.STALLED: "stalled (nothing improves the bounds)",
            Status.FAILED: "stopped (HiGHS failed on a part with every algorithm)"}


def round_message(status: Status, gap: float | None, requested: float, rounds: int) -> str:
    """The message of a decomposition's result: how it ended, and the true gap against the one
    requested."""
    how = _ENDINGS.get(status, status)
    return f"{how} after {rounds} rounds: certified gap {fmt_gap(gap)} (requested {requested:g})"
