"""The one entry point for building a private view: :func:`build_view`, over one registry of
view methods (RIPOST and its competitors), and the one check of a request, :func:`check_request`.

Every argument of a build is checked here, before the method runs and before any budget is
charged: the method, epsilon (a finite number in :data:`EPSILON_RANGE`), each parameter
against its declared kind and range (:data:`PARAMS`), the tensor's size for the methods that
materialise the domain, the number of columns a method needs, and its optional dependency. A
request that passes is one the method can carry out; a :class:`~certdp.views.session.Session`
charges its ledger only then.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from numbers import Real
from typing import Any, Callable

import numpy as np

from .. import _validate as V
from .._optional import MissingExtraError
from ..progress import Progress
from ..randomness import RNGLike, as_generator
from .competitors import MAX_IDENTITY_CELLS, check_dense, hdpview, identity, privtree
from .marginals import aim, mst
from .noise import MAX_HDMM_AXIS
from .ripost import ripost
from .strategies import MAX_DAWA_CELLS, dawa, hdmm
from .synthesizers import privbayes
from .tensor import CountTensor
from .view import BlockView, DenseView, MarginalView, SampleView

METHODS: dict[str, Callable[..., Any]] = {"ripost": ripost, "privtree": privtree, "hdpview": hdpview,
                                          "identity": identity, "hdmm": hdmm, "dawa": dawa,
                                          "privbayes": privbayes, "mst": mst, "aim": aim}

#: Methods that report their steps to a ``progress`` callback (their builds can take minutes).
REPORTS_PROGRESS = frozenset({"ripost", "privtree", "hdpview"})

#: Methods whose views are not private releases, and why: a ledger refuses to count them
#: (:meth:`~certdp.views.session.Session.build_view`) and their files say so (``sampler``).
NOT_RELEASES: dict[str, str] = {
    "privbayes": "PrivBayes draws DataSynthesizer's numpy noise and keeps the exact number of records "
                 "(a competitor for comparisons)"}
EPSILON_RANGE = (1e-9, 1e6)
"""The epsilons a view is built with. Below 1e-9 a count's Laplace noise has a scale above 1e9
(nothing of the data is left) and the methods' arithmetic leaves float64: at 1e-300 MST and AIM
hand the model fit noise variances of 1e600 (an infinite weight, then an error deep in
``mbi``); above 1e6 nothing is private, and at 1e300 DAWA's weighted least squares overflows."""

#: The largest domain a dense method may be asked to materialise (float64 cells: 8 GB).
MAX_CELLS_LIMIT = 1_000_000_000


@dataclass(frozen=True)
class Param:
    """A method parameter's kind and range: ``kind`` is 'unit' (a number in (0, 1)), 'real'
    (a finite number in [lo, hi]), 'int' (an integer in [lo, hi]) or 'choice' (one of
    ``choices``); ``optional`` admits None (the method's default)."""

    kind: str
    lo: float = -math.inf
    hi: float = math.inf
    choices: tuple[str, ...] = ()
    optional: bool = False
    above: bool = False          # 'real': strictly above lo

    def check(self, name: str, value: Any) -> Any:
        """``value`` checked against this kind and range (None passes when optional); errors name ``name``."""
        if value is None and self.optional:
            return None
        if self.kind == "choice":
            if not isinstance(value, str):
                raise TypeError(f"{name} must be one of {', '.join(self.choices)}; got {value!r}")
            return V.choice(name, value, self.choices)
        if self.kind == "int":
            return V.int_in_range(name, value, int(self.lo), None if math.isinf(self.hi) else int(self.hi))
        if self.kind == "unit":
            return V.open_unit(name, value)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Real, np.integer, np.floating)):
            raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
        v = float(value)
        low_ok = v > self.lo if self.above else v >= self.lo
        if not (math.isfinite(v) and low_ok and v <= self.hi):
            lo = "(" if self.above else "["
            raise ValueError(f"{name} must be a finite number in {lo}{self.lo:g}, {self.hi:g}], got {v}")
        return v


_UNIT = Param("unit")
_OPT_UNIT = Param("unit", optional=True)
_THETA = Param("real", -1e9, 1e9)
_CELLS = Param("int", 1, MAX_CELLS_LIMIT)
_ITERS = Param("int", 1, 100_000)
_COLUMNS = Param("int", 1, 64)        # columns a query restricts; above the tensor's count means all

PARAMS: dict[str, dict[str, Param]] = {
    "ripost": {"alpha": _OPT_UNIT, "gamma": _OPT_UNIT, "beta": _OPT_UNIT, "k": Param("int", 1, 1000),
               "os": Param("int", 1, 10_000), "theta1": _THETA, "theta2": _THETA,
               "leaf_budget": Param("choice", choices=("rest", "fixed"), optional=True),
               "variant": Param("choice", choices=("improved", "paper")),
               "phase1": Param("choice", choices=("paper", "privtree"), optional=True),
               "phase2_test": Param("choice", choices=("series", "biased"), optional=True),
               "phase2_cuts": Param("choice", choices=("all", "midpoints"), optional=True),
               "split_axes": Param("int", 1, 64, optional=True)},
    "privtree": {"theta": _THETA, "fanout": Param("choice", choices=("auto", "all", "binary"))},
    "hdpview": {"ratio": _UNIT, "a": Param("real", 1.0, 1e6, above=True), "beta": Param("real", 0.0, 100.0, above=True),
                "gamma": _UNIT, "theta": Param("real", -1e9, 1e9, optional=True)},
    "identity": {"max_cells": _CELLS},
    "hdmm": {"query_columns": _COLUMNS, "max_cells": _CELLS},
    "dawa": {"ratio": _UNIT, "max_cells": _CELLS},
    "privbayes": {"degree": _COLUMNS},
    "mst": {"iters": _ITERS},
    "aim": {"degree": _COLUMNS, "rounds": Param("int", 1, 100_000, optional=True),
            "max_model_mb": Param("real", 0.0, 1e6, above=True), "iters": _ITERS, "round_iters": _ITERS},
}
"""Each method's parameters, their kinds and ranges (the one place they are checked)."""

#: Methods that materialise every cell of the domain, and their default limits.
DENSE_LIMITS = {"identity": MAX_IDENTITY_CELLS, "hdmm": MAX_IDENTITY_CELLS, "dawa": MAX_DAWA_CELLS}
#: Workload-aware methods: the parameter that names the number of columns a query restricts.
WORKLOAD_PARAM = {"hdmm": "query_columns", "aim": "degree"}
#: Methods that need at least two columns (a tree or a network over one column has no edge).
MIN_COLUMNS = {"mst": 2, "privbayes": 2}
#: The most columns the model-fitting competitors are asked to fit: MST's and AIM's time and
#: memory grow about as the square of the columns, PrivBayes's time faster. Measured on 5,000
#: records of 4-value columns at epsilon 1, 2 cores, nothing else running: MST 9.5 s / 0.64 GB
#: at 10 columns, 56 s / 1.3 GB at 20, 137 s / 2.6 GB at 30, 313 s / 5.1 GB at 40 (about 13 GB
#: at 60); AIM 158 s / 2.2 GB at 10, 415 s / 4.6 GB at 14 (about 10 GB at 20); PrivBayes (about
#: the 3.5th power) 23 s at 10, 108 s at 14, 379 s at 20 (about 26 minutes at 30, days at 160).
#: At 160 columns none finished nor failed within minutes, while its budget had been charged.
MAX_COLUMNS = {"mst": 48, "aim": 20, "privbayes": 30}
#: Methods on an optional dependency: (module, extra).
EXTRAS = {"mst": ("mbi", "pgm"), "aim": ("mbi", "pgm"), "privbayes": ("DataSynthesizer", "synth")}


def check_epsilon(epsilon: Any, name: str = "epsilon") -> float:
    """``epsilon`` as a float, checked to be a finite number in :data:`EPSILON_RANGE`."""
    eps = V.positive_float(name, epsilon)
    lo, hi = EPSILON_RANGE
    if not lo <= eps <= hi:
        raise ValueError(f"{name} must lie in [{lo:g}, {hi:g}], got {eps:g} (below, the noise drowns every count "
                         "and float arithmetic breaks down; above, nothing is private)")
    return eps


def check_request(tensor: CountTensor, method: str, epsilon: Any, params: dict[str, Any], *, rng: Any = None,
                  progress: Any = None) -> dict[str, Any]:
    """Check a build request completely, before any budget is charged or noise drawn: returns
    the parameters, checked (unknown ones are refused, so a typo cannot silently fall back to
    a default). ``rng`` must be one a view can draw from (None, an int seed or a numpy
    Generator) and ``progress`` callable or None: a build would otherwise fail on them only when
    it first draws noise or reports, after the budget is spent. Raises ``ValueError``/``TypeError``
    naming the argument, or :class:`~certdp._optional.MissingExtraError` naming the extra to
    install."""
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a callable taking a ProgressEvent, or None; got {type(progress).__name__}")
    if rng is not None:
        as_generator(rng)
    if not isinstance(tensor, CountTensor):
        raise TypeError(f"a view is built from a CountTensor, got {type(tensor).__name__}")
    if not isinstance(method, str):
        raise TypeError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    V.choice("method", method, tuple(METHODS))
    check_epsilon(epsilon)
    spec = PARAMS[method]
    bad = sorted(set(params) - set(spec))
    if bad:
        raise ValueError(f"{method} does not take {bad}; it takes {sorted(spec)}")
    checked = {k: spec[k].check(k, v) for k, v in params.items()}
    if method in DENSE_LIMITS:
        check_dense(tensor, method, checked.get("max_cells", DENSE_LIMITS[method]))
    if method == "hdmm" and max(tensor.shape) > MAX_HDMM_AXIS:
        raise ValueError(f"hdmm optimises one strategy per column, in time about the cube of its cells: a column "
                         f"of {max(tensor.shape):,} cells is above its limit of {MAX_HDMM_AXIS:,}; use coarser bins "
                         "or another method")
    if len(tensor.shape) > MAX_COLUMNS.get(method, len(tensor.shape)):
        raise ValueError(f"{method} fits a model whose time grows as a power of the columns (2 to 3.5): "
                         f"{len(tensor.shape)} columns are above its limit of {MAX_COLUMNS[method]} "
                         "(build.MAX_COLUMNS); fit fewer columns, or use a decomposition method (ripost, privtree)")
    need = MIN_COLUMNS.get(method, 1)
    if len(tensor.shape) < need:
        raise ValueError(f"{method} needs at least {'two' if need == 2 else need} columns, the tensor has "
                         f"{len(tensor.shape)}")
    if method in EXTRAS:
        module, extra = EXTRAS[method]
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(f"the {method} view method needs the optional dependency {module!r}, which is "
                                    f"not installed; install it with: pip install 'certdp[{extra}]'")
    k, os_ = checked.get("k", 4), checked.get("os", 4)
    if method == "ripost" and os_ < k:
        raise ValueError(f"os must be >= k for the series weights to sum to at most 1 (k={k}, os={os_})")
    if method == "aim" and checked.get("rounds") is not None and checked["rounds"] <= len(tensor.shape):
        raise ValueError(f"rounds must be above the number of columns ({len(tensor.shape)}): the one-way "
                         f"marginals take the first rounds; got {checked['rounds']}")
    return checked


def build_view(tensor: CountTensor, method: str = "ripost", epsilon: float = 0.1, rng: RNGLike = None, *,
               progress: Progress | None = None, **params: Any) -> BlockView | DenseView | SampleView | MarginalView:
    """Build an ``epsilon``-DP view of ``tensor`` with ``method``; ``params`` are the method's
    own, checked by :func:`check_request` first. ``progress`` hears of the build's steps where
    the method reports them (the decompositions: :data:`REPORTS_PROGRESS`).

    The view's own accountant keeps this one build within ``epsilon``; nothing here counts
    builds against each other. To keep several releases about one table within a total, build
    them through a :class:`~certdp.views.session.Session`, which charges its ledger and then
    calls this function."""
    checked = check_request(tensor, method, epsilon, params, rng=rng, progress=progress)
    return build_checked(tensor, method, float(epsilon), rng, progress, checked)


def build_checked(tensor: CountTensor, method: str, epsilon: float, rng: RNGLike, progress: Progress | None,
                  checked: dict[str, Any]) -> BlockView | DenseView | SampleView | MarginalView:
    """:func:`build_view` for a request :func:`check_request` has passed (``checked``: what it
    returned, for these ``rng`` and ``progress``)."""
    if method in REPORTS_PROGRESS:
        checked = {**checked, "progress": progress}
    return METHODS[method](tensor, epsilon=epsilon, rng=rng, **checked)
