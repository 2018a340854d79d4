"""The only place where the views draw DP noise.

Every release goes through :func:`laplace_release` or :func:`exponential_choice`, which charge a
:class:`~scaledp.views.budget.BudgetNode` *before* drawing, so no noise is drawn for a release
the budget cannot pay. Randomness comes from ``os.urandom`` unless an ``rng`` is passed (tests,
experiments).

Floating-point caveat: the Laplace sampler is the textbook inverse-CDF one on 53-bit uniforms,
not a snapping or discrete sampler, so it carries the known floating-point weaknesses
(Mironov 2012). OpenDP's samplers avoid them; evaluating them here is still to do.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from .. import _validate as V
from ..randomness import RNGLike, uniforms
from .budget import BudgetNode


def laplace(scale: float, size: int = 1, rng: RNGLike = None) -> np.ndarray:
    """``size`` draws of Laplace(0, scale) by inverse CDF."""
    b = V.positive_float("scale", scale)
    n = V.int_in_range("size", size, 0)
    u = uniforms(n, rng) - 0.5                       # in [-0.5, 0.5)
    mag = -np.log1p(-2.0 * np.abs(u))                # Exp(1); |u| < 0.5 keeps it finite
    return b * np.sign(u) * mag


def laplace_release(values: np.ndarray | float, sensitivity: float, epsilon: float, node: BudgetNode,
                    what: str = "laplace", rng: RNGLike = None) -> np.ndarray:
    """``values + Laplace(sensitivity / epsilon)`` after charging ``epsilon`` to ``node``.

    ``values`` must be the answers of queries whose joint L1 sensitivity is ``sensitivity``."""
    d = V.positive_float("sensitivity", sensitivity)
    eps = V.positive_float("epsilon", epsilon)
    v = np.atleast_1d(np.asarray(values, dtype=np.float64))
    node.charge(eps, what)
    return v + laplace(d / eps, v.size, rng).reshape(v.shape)


def exponential_choice(scores: np.ndarray, sensitivity: float, epsilon: float, node: BudgetNode,
                       what: str = "exponential", rng: RNGLike = None) -> int:
    """Index i drawn with probability proportional to ``exp(eps * score_i / (2 * sensitivity))``
    (McSherry-Talwar) after charging ``epsilon`` to ``node``."""
    d = V.positive_float("sensitivity", sensitivity)
    eps = V.positive_float("epsilon", epsilon)
    s = V.finite_array("scores", scores, ndim=1)
    if s.size == 0:
        raise ValueError("scores must hold at least one candidate")
    node.charge(eps, what)
    logits = eps * s / (2.0 * d)
    p = np.exp(logits - logsumexp(logits))
    cdf = np.cumsum(p)
    u = float(uniforms(1, rng)[0]) * cdf[-1]
    i = int(np.searchsorted(cdf, u, side="right"))
    i = min(i, s.size - 1)
    while p[i] <= 0:   # never return a candidate of probability 0 (only reachable by rounding)
        i -= 1
    return i
