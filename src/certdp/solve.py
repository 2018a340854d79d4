"""The one entry point for computing a mechanism: :func:`solve`.

In the style of :func:`scipy.optimize.linprog`, it checks the method's options once, picks the
engine from one registry (:data:`METHODS`), and returns a :class:`~certdp.mechanism.SolveResult`
whose ``status`` (a :class:`~certdp.lp.outcome.Status`) and ``message`` say how the run ended.
An option the chosen method does not take is an error that names it.

Each :class:`Method` lists its options as :class:`Option` values: the check, the type, the
help and the choices, and each default is the engine's own (read from its signature). The
``certdp solve`` command line and the docstring of :func:`solve` (``help(certdp.solve)``) are
generated from them.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from . import _validate as V
from .family.additive import solve_additive
from .family.constopt import constopt_mechanism, free_mask
from .family.exponential import exponential_mechanism
from .family.spanner import spanner_mechanism
from .lp.executors import EXECUTORS
from .lp.highs import MIN_TOLERANCE, SOLVERS
from .mechanism import SolveResult
from .pmo.benders import INITIAL_CUTS, VARIANTS, BendersConfig, solve_benders
from .pmo.model import OBJECTIVES
from .pmo.monolithic import solve_monolithic
from .pmo.outputs.config import OutputsConfig
from .pmo.outputs.solve import default_workers, memory_parts, solve_outputs
from .pmo.partition import PARTITIONERS
from .progress import Progress
from .space import Space

Check = Callable[[str, Any, Space], Any]
log = logging.getLogger(__name__)


class Engine(Protocol):
    """What every engine of :data:`METHODS` is: a function of the :class:`~certdp.space.Space`
    (positional) and of its options (keywords, checked by :func:`solve` before the call; the
    engine's defaults are the options' defaults), plus ``progress`` when the method reports
    it. It returns a :class:`~certdp.mechanism.SolveResult` whose status is a
    :class:`~certdp.lp.outcome.Status` and whose mechanism comes from
    :meth:`~certdp.mechanism.Mechanism.certified` (a sampled mechanism for status
    'estimated'), or raises :class:`~certdp.lp.outcome.SolverLimitError` when it has
    nothing feasible."""

    def __call__(self, space: Space, /, *args: Any, **options: Any) -> SolveResult: ...


# ------------------------------------------------------------------- option checks
def _positive(name: str, v: Any, space: Space) -> float:
    return V.positive_float(name, v)


def _tolerance(name: str, v: Any, space: Space) -> float:
    t = V.positive_float(name, v)
    if t < MIN_TOLERANCE:
        raise ValueError(f"{name} must be at least {MIN_TOLERANCE:g} (HiGHS's smallest feasibility tolerance; "
                         f"below it HiGHS keeps its own 1e-7), got {t!r}")
    return t


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
    # 2^32 - 1: the largest seed every consumer takes (scikit-learn's random_state among them)
    return None if v is None else V.int_in_range(name, v, 0, 2**32 - 1)


def _subsets(name: str, v: Any, space: Space) -> int:
    return V.int_in_range(name, v, 1, space.n_records)


def _r(name: str, v: Any, space: Space) -> int:
    if space.n_outputs < 2:
        raise ValueError(f"ConstOPTMech needs at least 2 outputs (each row's {name} nearest others), got "
                         f"{space.n_outputs}; with one output every mechanism is the same all-ones column")
    return V.int_in_range(name, v, 1, space.n_outputs - 1)


def parse_numbers(name: str, v: Any) -> tuple[float, ...]:
    """At least one finite number >= 0, from a sequence, one number, or their comma-separated
    text ('0.001,0.1,1'); ValueError naming ``name`` otherwise."""
    if isinstance(v, str):
        parts = [p for p in v.replace(" ", "").split(",") if p]
        try:
            v = [float(p) for p in parts]
        except ValueError:
            raise ValueError(f"{name} must be comma-separated numbers, e.g. 0.001,0.1,1; got {v!r}") from None
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        vals = [v]
    elif isinstance(v, (list, tuple, np.ndarray)):
        vals = list(np.ravel(v)) if isinstance(v, np.ndarray) else list(v)
    else:
        raise TypeError(f"{name} must be a number, a list of numbers or their comma-separated text, "
                        f"got {type(v).__name__} {v!r}")
    if not vals:
        raise ValueError(f"{name} must hold at least one value")
    return tuple(V.nonneg_float(name, x) for x in vals)


def _lambdas(name: str, v: Any, space: Space) -> tuple[float, ...]:
    return parse_numbers(name, v)


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


def _free_mask(name: str, v: Any, space: Space) -> Any:
    return None if v is None else free_mask(v, space, name)


def _callable(name: str, v: Any, space: Space) -> Any:
    if v is not None and not callable(v):
        raise TypeError(f"{name} must be callable, got {type(v).__name__}")
    return v


# ------------------------------------------------------------------- the options
@dataclass(frozen=True)
class Option:
    """One option of a method.

    Attributes:
        kind: the type of its value (``int``, ``float``, ``str``, ``bool``), as the command
            line parses it.
        help: what it is, one phrase.
        check: ``check(name, value, space)`` returns the value to pass, or raises ValueError or
            TypeError naming the option; by default, membership of ``choices``.
        choices: the allowed values, when the option names one of a list.
        default: the default in words, where the engine's default (None) is decided from the
            instance; else the engine's signature gives it.
        command_line: whether ``certdp solve`` offers it (not a callable, nor the seed, which
            is the instance's ``--seed``).
    """

    kind: type
    help: str
    check: Check | None = None
    choices: tuple[str, ...] = ()
    default: str | None = None
    command_line: bool = True

    def checked(self, name: str, value: Any, space: Space) -> Any:
        """``value`` as the engine takes it, or ValueError/TypeError naming ``name``."""
        if self.check is not None:
            return self.check(name, value, space)
        return V.choice(name, value, self.choices)


def _choices(help: str, choices: tuple[str, ...]) -> Option:
    return Option(str, help, choices=choices)


_SOLVER = "HiGHS algorithm"
_TIME_LIMIT = Option(float, "wall-clock seconds (LP methods and decompositions)", _time_limit)
_TOLERANCE = Option(float, f"HiGHS feasibility tolerance, at least {MIN_TOLERANCE:g} (looser is faster; "
                           "certification absorbs it, the gap shows it)", _tolerance)
_REDUCE = Option(bool, "drop the implied mDP constraints before solving (exact)", _flag)
_GAP = Option(float, "relative gap the result must be within to be 'optimal'", _positive)
_ROUNDS = Option(int, "round limit", _count)
_OBJECTIVE = _choices("expected loss (paper 000) or worst-case loss (paper 002)", OBJECTIVES)
_SCHEDULER = Option(str, "address of an existing Dask scheduler (implies executor dask)", _address)
_EXECUTOR = _choices("where the parallel work runs: threads of this process, local worker processes, or "
                     "dask (a local cluster of that many workers, or the scheduler's)", EXECUTORS)
_SEED = Option(int, "seed of the method's own randomness", _seed, command_line=False)
_Q = Option(float, "quantile of the loss L_q reported", _quantile)

_LP = {"solver": _choices(_SOLVER, (*SOLVERS, "auto")), "time_limit": _TIME_LIMIT, "tolerance": _TOLERANCE,
       "reduce": _REDUCE, "gap": _GAP}
_DECOMPOSITION = {"gap": _GAP, "max_iterations": _ROUNDS, "time_limit": _TIME_LIMIT, "tolerance": _TOLERANCE,
                  "reduce": _REDUCE, "executor": Option(str, _EXECUTOR.help, choices=EXECUTORS,
                                                        default="dask with a scheduler, else threads"),
                  "scheduler": _SCHEDULER}
_ADDITIVE = {"draws": Option(int, "Monte Carlo draws per record", _count), "q": _Q, "seed": _SEED}


# ------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Method:
    """One way to compute a mechanism: its engine, the options it takes, options it fixes, and
    whether the engine reports progress."""

    name: str
    engine: Engine
    options: Mapping[str, Option]
    summary: str
    fixed: Mapping[str, Any] = field(default_factory=dict)
    reports_progress: bool = True

    def default(self, option: str) -> str:
        """The default of ``option``, in words where it depends on the instance."""
        text = self.options[option].default
        if text is not None:
            return text
        value = inspect.signature(self.engine).parameters[option].default
        if value is None:
            return "none"
        return ",".join(f"{v:g}" for v in value) if isinstance(value, tuple) else f"{value}"


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("lp", solve_monolithic, {**_LP, "objective": _OBJECTIVE},
           "PMO LP of paper 000 (Eq. 4-7), monolithic HiGHS per component; objective 'worst' is OPTMech"),
    Method("optmech", solve_monolithic, _LP, "OPTMech of paper 002: the LP of least worst-case loss",
           fixed={"objective": "worst"}),
    Method("outputs", solve_outputs,
           {**_DECOMPOSITION, "workers": Option(int, "pricing threads, processes or Dask workers", _workers,
                                                default="one per core"),
            "config": Option(OutputsConfig, "the engine's tuning", _instance_of(OutputsConfig),
                             default="OutputsConfig()", command_line=False)},
           "decomposition over outputs (certdp): certified matrix and rigorous bound, fast"),
    Method("benders", solve_benders,
           {**_DECOMPOSITION,
            "executor": Option(str, _EXECUTOR.help, choices=EXECUTORS,
                               default="dask with a scheduler, process when workers > 1, else threads"),
            "workers": Option(int, "subproblem threads, processes or Dask workers", _count),
            "partition": _choices("how to partition the records", PARTITIONERS),
            "subsets": Option(int, "number of subsets M", _subsets, default="25, or N when fewer"),
            "reduce": Option(bool, _REDUCE.help, _flag, default="the variant's: False for paper, True for improved"),
            "initial_cuts": Option(str, "Property 3.2's initial cuts: every non-neighbouring pair of boundary "
                                   "records (union, as published), only pairs within a subset, or none",
                                   choices=INITIAL_CUTS, default="the variant's: union for paper, subset for improved"),
            "variant": _choices("'paper' is the algorithm as published (HiGHS refuses it at large eps x eta); "
                                "'improved' adds a ratio cap, cleaned cuts, the edge reduction, elastic blocks, a "
                                "certified upper bound every round, a stabilised master and the envelope "
                                "inequalities", tuple(VARIANTS)),
            "seed": Option(int, "seed of the k-means partitioners", _seed, command_line=False),
            "runner_factory": Option(object, "f(blocks) -> Runner, in place of executor", _callable,
                                     command_line=False),
            "config": Option(BendersConfig, "the engine's tuning (in place of variant)",
                             _instance_of(BendersConfig), default="the variant's", command_line=False)},
           "Benders decomposition over a partition of the records (paper 000, section 3)"),
    Method("expmech", exponential_mechanism, {}, "exponential mechanism (paper 000 Eq. 47)",
           reports_progress=False),
    Method("constopt", constopt_mechanism,
           {"r": Option(int, "nearest neighbours left free", _r, default="10, or K - 1 when fewer"),
            "lambdas": Option(str, "penalties to sweep (numbers, or their comma-separated text)", _lambdas),
            "select": _choices("the loss that picks lambda: worst-case, or L_q at q", ("worst", "quantile")),
            "q": _Q, "solver": _choices(_SOLVER, (*SOLVERS, "auto")), "time_limit": _TIME_LIMIT,
            "tolerance": _TOLERANCE,
            "free": Option(object, "the replacement function I(v) as an (N, K) boolean mask of the free entries, "
                           "in place of I_NN,r", _free_mask, default="I_NN,r", command_line=False)},
           "ConstOPTMech of paper 002 (Algorithm 1), best of a lambda sweep"),
    Method("spanner", spanner_mechanism,
           {"solver": _choices(_SOLVER, SOLVERS), "time_limit": _TIME_LIMIT, "tolerance": _TOLERANCE,
            "delta": Option(float, "stretch of the spanner", _delta), "objective": _OBJECTIVE},
           "SpannerMech: mDP rows on a greedy delta-spanner at epsilon / delta"),
    Method("madlib", solve_additive, _ADDITIVE,
           "Madlib: noise of density exp(-eps |z|), then the nearest output; Monte Carlo losses",
           fixed={"method": "madlib"}, reports_progress=False),
    Method("laplace", solve_additive, _ADDITIVE,
           "planar Laplace: 2-D noise, then the nearest output; Monte Carlo losses",
           fixed={"method": "laplace"}, reports_progress=False),
)}


def option_table() -> dict[str, list[tuple[str, Option]]]:
    """Every option name of :data:`METHODS`, in order of first appearance, with the methods that
    take it and their :class:`Option`."""
    table: dict[str, list[tuple[str, Option]]] = {}
    for m in METHODS.values():
        for name, opt in m.options.items():
            table.setdefault(name, []).append((m.name, opt))
    return table


def option_help(name: str) -> str:
    """The help of option ``name`` across the methods that take it: what it is and each
    method's default, e.g. "relative gap ...: lp, optmech [1e-06]; outputs, benders [0.01]"."""
    groups: dict[tuple[str, str], list[str]] = {}
    for method, opt in option_table()[name]:
        groups.setdefault((opt.help, METHODS[method].default(name)), []).append(method)
    helps = {h for h, _ in groups}
    if len(helps) == 1:
        return f"{helps.pop()}: " + "; ".join(f"{', '.join(ms)} [{d}]" for (_, d), ms in groups.items())
    return "; ".join(f"{', '.join(ms)}: {h} [{d}]" for (h, d), ms in groups.items())


NO_PROTECTION = 50.0
"""epsilon x distance above which a protected pair is, in practice, not protected: the
guarantee then allows probability ratios above e^50 (about 5e21) between the two records."""


def estimate_bytes(space: Space, method: str, options: Mapping[str, Any] | None = None) -> float:
    """A coarse estimate of the memory ``method`` needs on ``space`` in this process and its
    local workers (its largest arrays and solver models), checked before any solve starts.
    For 'outputs' it is :func:`certdp.pmo.outputs.solve.memory_parts`; with a Dask
    ``scheduler`` its pricing models live on that cluster's workers and are not counted here."""
    N, K = space.n_records, space.n_outputs
    E = len(space.neighbor_pairs[0])
    options = options or {}
    matrices = 8.0 * N * K * 6                     # cost, weighted cost, solution, certified copies
    if method in ("lp", "optmech", "benders"):
        return matrices + 80.0 * (4 * E * K + 2 * N * K)   # HiGHS's copies of the sparse LP
    if method == "outputs":
        return sum(_outputs_memory(space, options).values())
    if method in ("constopt", "spanner"):
        return matrices + 8.0 * N * N * 6
    return matrices


def _outputs_memory(space: Space, options: Mapping[str, Any]) -> dict[str, float]:
    """:func:`certdp.pmo.outputs.solve.memory_parts` for ``space`` and the checked ``options``:
    the pricing models left out where a Dask scheduler's workers hold them, and an interpreter
    counted for each local worker process."""
    executor, scheduler = options.get("executor"), options.get("scheduler")
    workers = options.get("workers") or default_workers()
    local = 0 if scheduler or executor in (None, "threads") else workers
    parts = memory_parts(space.n_records, space.n_outputs, len(space.neighbor_pairs[0]), options.get("config"),
                         rounds=options.get("max_iterations", 500), local_workers=local)
    if scheduler:
        parts.pop("pricing")
    return parts


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
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    m = METHODS[method]
    unknown = sorted(set(options) - set(m.options))
    if unknown:
        takes = ", ".join(sorted(m.options)) or "no options"
        raise TypeError(f"method {method!r} does not take {', '.join(unknown)} (it takes {takes})")
    return {k: m.options[k].checked(k, v, space) for k, v in options.items()}


def solve(space: Space, method: str = "lp", *, progress: Progress | None = None, **options: Any) -> SolveResult:
    """Compute a mechanism for ``space`` with ``method`` and its options (listed below, from
    :data:`METHODS`). ``progress`` receives the engine's :class:`~certdp.progress.ProgressEvent`
    values.

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
    need, hint = estimate_bytes(space, method, checked), "use a smaller instance"
    if method == "outputs" and not checked.get("scheduler") and need > V.memory_limit():
        pricing = _outputs_memory(space, checked)["pricing"]
        if need - pricing <= V.memory_limit():
            hint += (f", or price on a Dask cluster (scheduler), whose workers would hold the pricing models' "
                     f"{pricing / 1e9:.3g} GB of it")
    V.fits_in_memory(f"method {method!r} on {space.n_records:,} records x {space.n_outputs:,} outputs "
                     f"({len(space.neighbor_pairs[0]):,} protected pairs)", need, hint)
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


def _docstring() -> str:
    """The methods and their options, for the docstring of :func:`solve`."""
    lines = ["", "    Methods and their options (type, default, choices):", ""]
    for m in METHODS.values():
        lines.append(f"    {m.name}: {m.summary}.")
        for name, opt in m.options.items():
            choices = f" in {{{', '.join(opt.choices)}}}" if opt.choices else ""
            kind = "callable" if opt.kind is object else opt.kind.__name__
            lines.append(f"        {name} ({kind}{choices}, default {m.default(name)}): {opt.help}.")
        if not m.options:
            lines.append("        (no options)")
    return "\n".join(lines) + "\n"


if solve.__doc__ is not None:   # (None under python -OO)
    solve.__doc__ += _docstring()
