"""The one entry point for building a private view: :func:`build_view`, over one registry of
view methods (RIPOST and its competitors)."""

from __future__ import annotations

from typing import Any, Callable

from .. import _validate as V
from ..randomness import RNGLike
from .competitors import hdpview, identity, privtree
from .marginals import mst
from .ripost import ripost
from .synthesizers import privbayes
from .tensor import CountTensor
from .view import BlockView, DenseView, MarginalView, SampleView

METHODS: dict[str, Callable[..., Any]] = {"ripost": ripost, "privtree": privtree, "hdpview": hdpview,
                                          "identity": identity, "privbayes": privbayes, "mst": mst}
PARAMS = {"ripost": {"alpha", "gamma", "beta", "k", "os", "theta1", "theta2", "leaf_budget", "variant"},
          "privtree": {"theta", "fanout"}, "hdpview": {"ratio", "a", "beta", "gamma", "theta"},
          "identity": {"max_cells"}, "privbayes": {"degree"}, "mst": {"iters"}}


def build_view(tensor: CountTensor, method: str = "ripost", epsilon: float = 0.1, rng: RNGLike = None,
               **params: Any) -> BlockView | DenseView | SampleView | MarginalView:
    """Build an ``epsilon``-DP view of ``tensor`` with ``method``; ``params`` are the method's
    own (unknown ones are refused, so a typo cannot silently fall back to a default)."""
    V.choice("method", method, tuple(METHODS))
    bad = sorted(set(params) - PARAMS[method])
    if bad:
        raise ValueError(f"{method} does not take {bad}; it takes {sorted(PARAMS[method])}")
    return METHODS[method](tensor, epsilon=epsilon, rng=rng, **params)
