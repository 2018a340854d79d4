"""The one entry point for building a private view: :func:`build_view`, over one registry of
view methods (RIPOST and its competitors)."""

from __future__ import annotations

from typing import Any, Callable

from .. import _validate as V
from ..randomness import RNGLike
from .competitors import MAX_IDENTITY_CELLS, hdpview, identity, privtree
from .marginals import aim, mst
from .ripost import ripost
from .strategies import MAX_DAWA_CELLS, dawa, hdmm
from .synthesizers import privbayes
from .tensor import CountTensor
from .view import BlockView, DenseView, MarginalView, SampleView

METHODS: dict[str, Callable[..., Any]] = {"ripost": ripost, "privtree": privtree, "hdpview": hdpview,
                                          "identity": identity, "hdmm": hdmm, "dawa": dawa,
                                          "privbayes": privbayes, "mst": mst, "aim": aim}
PARAMS = {"ripost": {"alpha", "gamma", "beta", "k", "os", "theta1", "theta2", "leaf_budget", "variant", "phase1",
                     "phase2_test", "phase2_cuts", "split_axes"},
          "privtree": {"theta", "fanout"}, "hdpview": {"ratio", "a", "beta", "gamma", "theta"},
          "identity": {"max_cells"}, "hdmm": {"query_columns", "max_cells"}, "dawa": {"ratio", "max_cells"},
          "privbayes": {"degree"}, "mst": {"iters"},
          "aim": {"degree", "rounds", "max_model_mb", "iters", "round_iters"}}
#: Methods that materialise every cell of the domain, and their default limits.
DENSE_LIMITS = {"identity": MAX_IDENTITY_CELLS, "hdmm": MAX_IDENTITY_CELLS, "dawa": MAX_DAWA_CELLS}
#: Workload-aware methods: the parameter that names the number of columns a query restricts.
WORKLOAD_PARAM = {"hdmm": "query_columns", "aim": "degree"}


def build_view(tensor: CountTensor, method: str = "ripost", epsilon: float = 0.1, rng: RNGLike = None,
               **params: Any) -> BlockView | DenseView | SampleView | MarginalView:
    """Build an ``epsilon``-DP view of ``tensor`` with ``method``; ``params`` are the method's
    own (unknown ones are refused, so a typo cannot silently fall back to a default)."""
    V.choice("method", method, tuple(METHODS))
    bad = sorted(set(params) - PARAMS[method])
    if bad:
        raise ValueError(f"{method} does not take {bad}; it takes {sorted(PARAMS[method])}")
    return METHODS[method](tensor, epsilon=epsilon, rng=rng, **params)
