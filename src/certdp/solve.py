"""The one entry point for computing a mechanism: :func:`solve`.

In the style of :func:`scipy.optimize.linprog`, it checks the method's options once, picks the
engine from one registry (:data:`METHODS`), and returns a :class:`~certdp.mechanism.SolveResult`
whose ``status`` and ``message`` say how the run ended. An option the chosen method does not take
is an error that names it.

=========  ================================================================================
lp         paper 000's PMO LP (Eq. 4-7), monolithic HiGHS per connected component
optmech    paper 002's OPTMech: the same LP minimising the worst-case loss
outputs    certdp's decomposition over outputs (Dantzig-Wolfe on the row sums)
benders    paper 000's Benders decomposition over a partition of the records
expmech    the exponential mechanism (paper 000 Eq. 47)
constopt   paper 002's ConstOPTMech (Algorithm 1)
spanner    SpannerMech (Bordenabe et al. 2014): mDP rows on a delta-spanner only
madlib     Madlib (Feyisetan et al. 2020): noise, then the nearest output (sampled)
laplace    planar Laplace (Andres et al. 2013): noise, then the nearest output (sampled)
=========  ================================================================================
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

import numpy as np

from . import _validate as V
from .family.additive import solve_additive
from .family.constopt import constopt_mechanism
from .family.exponential import exponential_mechanism
from .family.spanner import spanner_mechanism
from .lp.executors import EXECUTORS
from .lp.highs import SOLVERS
from .mechanism import SolveResult
from .pmo.benders import INITIAL_CUTS, BendersConfig, solve_benders
from .pmo.model import OBJECTIVES
from .pmo.monolithic import solve_monolithic
from .pmo.outputs.config import OutputsConfig
from .pmo.outputs.solve import OUTPUT_EXECUTORS, solve_outputs
from .pmo.partition import PARTITIONERS
from .progress import Progress
from .space import Space

Check = Callable[[str, Any, Space], Any]
log = logging.getLogger(__name__)


# ------------------------------------------------------------------- option checks
def _positive(name: str, v: Any, space: Space) -> float:
    return V.positive_float(name, v)


def _time_limit(name: str, v: Any, space: Space) -> float | None:
    return None if v is None else V.positive_float(name, v, allow_inf=True)


def _count(name: str, v: Any, space: Space) -> int:
    return V.int_in_range(name, v, 1)


def _workers(name: str, v: Any, space: Space) -> int | None:
    return None if v is None else V.int_in_range(name, v, 1)


def _flag(name: str, v: Any, space: Space) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{name} must be True or False, got {v!r}")
    return v


def _seed(name: str, v: Any, space: Space) -> int | None:
    return None if v is None else V.int_in_range(name, v, 0)


def _choice(*allowed: str) -> Check:
    return lambda name, v, space: V.choice(name, v, allowed)


def _subsets(name: str, v: Any, space: Space) -> int:
    return V.int_in_range(name, v, 1, space.n_records)


def _r(name: str, v: Any, space: Space) -> int:
    return V.int_in_range(name, v, 1, max(space.n_outputs - 1, 0))


def _lambdas(name: str, v: Any, space: Space) -> tuple[float, ...]:
    vals = [v] if isinstance(v, (int, float)) else list(v)
    if not vals:
        raise ValueError(f"{name} must hold at least one value")
    return tuple(V.nonneg_float(name, x) for x in vals)


def _delta(name: str, v: Any, space: Space) -> float:
    d = V.positive_float(name, v)
    if d < 1.0:
        raise ValueError(f"{name} must be >= 1 (the spanner stretch), got {d!r}")
    return d


def _quantile(name: str, v: Any, space: Space) -> float:
    return V.open_unit(name, v, upper_closed=True)


def _address(name: str, v: Any, space: Space) -> str | None:
    if v is not None and (not isinstance(v, str) or not v.strip()):
        raise ValueError(f"{name} must be the address of a Dask scheduler, e.g. tcp://host:8786; got {v!r}")
    return v


def _instance_of(cls: type) -> Check:
    def check(name: str, v: Any, space: Space) -> Any:
        if v is not None and not isinstance(v, cls):
            raise TypeError(f"{name} must be a {cls.__name__}, got {type(v).__name__}")
        return v
    return check


def _callable(name: str, v: Any, space: Space) -> Any:
    if v is not None and not callable(v):
        raise TypeError(f"{name} must be callable, got {type(v).__name__}")
    return v


_LP = {"solver": _choice(*SOLVERS), "time_limit": _time_limit, "tolerance": _positive}
_PMO = {**_LP, "reduce": _flag}
_ROUNDS = {"gap": _positive, "max_iterations": _count}


# ------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Method:
    """One way to compute a mechanism: its engine, the options it takes (with their checks),
    options it fixes, and whether the engine reports progress."""

    name: str
    engine: Callable[..., SolveResult]
    options: Mapping[str, Check]
    summary: str
    fixed: Mapping[str, Any] = field(default_factory=dict)
    reports_progress: bool = True


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("lp", solve_monolithic, {**_PMO, "solver": _choice(*SOLVERS, "auto"), "gap": _positive,
                                    "objective": _choice(*OBJECTIVES)},
           "PMO LP of paper 000 (Eq. 4-7), monolithic HiGHS per component; objective 'worst' is OPTMech"),
    Method("optmech", solve_monolithic, {**_PMO, "solver": _choice(*SOLVERS, "auto"), "gap": _positive},
           "OPTMech of paper 002: the LP of least worst-case loss",
           fixed={"objective": "worst"}),
    Method("outputs", solve_outputs,
           {**_ROUNDS, "time_limit": _time_limit, "tolerance": _positive, "reduce": _flag, "workers": _workers,
            "executor": _choice(*OUTPUT_EXECUTORS), "scheduler": _address, "config": _instance_of(OutputsConfig)},
           "decomposition over outputs (certdp): certified matrix and rigorous bound, fast"),
    Method("benders", solve_benders,
           {**_ROUNDS, "time_limit": _time_limit, "tolerance": _positive, "reduce": _flag,
            "partition": _choice(*PARTITIONERS), "subsets": _subsets, "initial_cuts": _choice(*INITIAL_CUTS),
            "variant": _choice("paper", "improved"), "seed": _seed, "executor": _choice(*EXECUTORS), "workers": _count,
            "scheduler": _address, "runner_factory": _callable, "config": _instance_of(BendersConfig)},
           "Benders decomposition over a partition of the records (paper 000, section 3)"),
    Method("expmech", exponential_mechanism, {}, "exponential mechanism (paper 000 Eq. 47)",
           reports_progress=False),
    Method("constopt", constopt_mechanism,
           {"r": _r, "lambdas": _lambdas, "select": _choice("worst", "quantile"), "q": _quantile,
            "solver": _choice(*SOLVERS, "auto"), "time_limit": _time_limit, "tolerance": _positive},
           "ConstOPTMech of paper 002 (Algorithm 1), best of a lambda sweep"),
    Method("spanner", spanner_mechanism,
           {**_LP, "delta": _delta, "objective": _choice(*OBJECTIVES)},
           "SpannerMech: mDP rows on a greedy delta-spanner at epsilon / delta"),
    Method("madlib", solve_additive, {"draws": _count, "q": _quantile, "seed": _seed},
           "Madlib: noise of density exp(-eps |z|), then the nearest output; Monte Carlo losses",
           fixed={"method": "madlib"}, reports_progress=False),
    Method("laplace", solve_additive, {"draws": _count, "q": _quantile, "seed": _seed},
           "planar Laplace: 2-D noise, then the nearest output; Monte Carlo losses",
           fixed={"method": "laplace"}, reports_progress=False),
)}


NO_PROTECTION = 50.0
"""epsilon x distance above which a protected pair is, in practice, not protected: the
guarantee then allows probability ratios above e^50 (about 5e21) between the two records."""


def estimate_bytes(space: Space, method: str) -> float:
    """A coarse estimate of the memory ``method`` needs on ``space`` (its largest arrays and
    solver models), checked before any solve starts."""
    N, K = space.n_records, space.n_outputs
    E = len(space.neighbor_pairs[0])
    matrices = 8.0 * N * K * 6                     # cost, weighted cost, solution, certified copies
    if method in ("lp", "optmech", "benders"):
        return matrices + 80.0 * (4 * E * K + 2 * N * K)   # HiGHS's copies of the sparse LP
    if method == "outputs":
        return matrices + 8.0 * N * N * 8 + 80.0 * K * (4 * E + 2 * N)
    if method in ("constopt", "spanner"):
        return matrices + 8.0 * N * N * 6
    return matrices


def _check_range(space: Space) -> None:
    """Refuse an epsilon whose product with a protected distance overflows float64: no matrix
    can be checked against a bound of exp(inf)."""
    _, d = space.neighbor_pairs
    with np.errstate(over="ignore"):
        top = space.epsilon * float(d.max()) if len(d) else 0.0
    if not np.isfinite(top):
        raise ValueError(f"epsilon = {space.epsilon:g} times the distance of a protected pair overflows float64; "
                         "no bound exp(epsilon x distance) can be checked: use a smaller epsilon (or other units)")


def _warnings(space: Space) -> list[str]:
    _, d = space.neighbor_pairs
    if len(d) == 0:
        return ["no two records are within eta of each other, so nothing is protected: every record simply "
                "reports its cheapest output (is eta in the unit of the distances?)"]
    top = space.epsilon * float(d.max())
    if top > NO_PROTECTION:
        return [f"epsilon x distance reaches {top:.6g} on a protected pair: the guarantee allows probability "
                f"ratios up to e^{top:.6g} between those records, no protection in practice (is epsilon per the "
                "unit of the distances?)"]
    return []


def check_options(method: str, options: Mapping[str, Any], space: Space) -> dict[str, Any]:
    """The options checked for ``method``: TypeError naming any option the method does not take,
    ValueError (or TypeError) naming any value it cannot use."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    m = METHODS[method]
    unknown = sorted(set(options) - set(m.options))
    if unknown:
        takes = ", ".join(sorted(m.options)) or "no options"
        raise TypeError(f"method {method!r} does not take {', '.join(unknown)} (it takes {takes})")
    return {k: m.options[k](k, v, space) for k, v in options.items()}


def solve(space: Space, method: str = "lp", *, progress: Progress | None = None, **options: Any) -> SolveResult:
    """Compute a mechanism for ``space`` with ``method`` (see the module docstring for the
    methods, and each engine for its options).

    Returns:
        A :class:`~certdp.mechanism.SolveResult`. Its mechanism passes the exact audit (for
        the sampled methods madlib and laplace, the guarantee is analytic and the losses are
        estimates); ``lower_bound`` is rigorous where the method gives one, and ``gap`` is the
        true relative gap of the certified matrix.

    Raises:
        TypeError, ValueError: an option the method does not take, or a bad value.
        SolverLimitError: a limit was reached before anything feasible existed.
    """
    if not isinstance(space, Space):
        raise TypeError(f"space must be a certdp.Space, got {type(space).__name__}")
    checked = check_options(method, options, space)
    _check_range(space)
    m = METHODS[method]
    V.fits_in_memory(f"method {method!r} on {space.n_records:,} records x {space.n_outputs:,} outputs "
                     f"({len(space.neighbor_pairs[0]):,} protected pairs)", estimate_bytes(space, method))
    kwargs = {**m.fixed, **checked}
    if m.reports_progress:
        kwargs["progress"] = progress
    log.info("solving %s with %s (N=%d, K=%d, %d protected pairs)", space.name, method, space.n_records,
             space.n_outputs, len(space.neighbor_pairs[0]))
    res = m.engine(space, **kwargs)
    log.info("%s on %s: %s, upper bound %.6g, gap %s, %.3g s", method, space.name, res.status, res.upper_bound,
             "-" if res.gap is None else f"{res.gap:.3g}", res.timings.get("total", float("nan")))
    notes = _warnings(space)
    if notes:
        res = replace(res, message="; ".join(notes + ([res.message] if res.message else [])))
    return res
