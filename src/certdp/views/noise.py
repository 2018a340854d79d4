"""The noise in a view's answers: its standard deviation, where the release makes it known.

A view's answer to a range query is a linear function of the noisy values it released, so
when those values carry independent Laplace noise of known scales, the noise in the answer
has a variance that follows from the query alone:

* **Independent Laplace per leaf** (:class:`LeafLaplace`; RIPOST, PrivTree, HDPView, Identity).
  Leaf ``l`` holds ``c_l + Z_l``, ``Z_l ~ Laplace(b_l)`` independent, ``Var Z_l = 2 b_l^2``
  (for leaf counts, sensitivity 1, ``b_l = 1 / epsilon_l``). A query's answer is
  ``sum_l f_l (c_l + Z_l)``, where ``f_l`` is the share of leaf ``l``'s cells inside the query
  (overlap volume / leaf volume, summed over the query's boxes when a categorical selection
  makes several), so its noise has variance ``sum_l f_l^2 2 b_l^2``: each leaf the query
  touches contributes its Laplace variance times the square of the overlap fraction.
* **A Kronecker strategy** (:class:`KroneckerLaplace`; HDMM). ``y = A x + Z`` with ``Z`` i.i.d.
  ``Laplace(b)`` on every row of ``A = A_1 x ... x A_d`` and ``x_hat = P y``, ``P = P_1 x ...
  x P_d`` (``P_i`` the pseudo-inverse of ``A_i``). A box is ``q = q_1 x ... x q_d`` (one
  interval indicator per axis), its answer's noise is ``q^T P Z``, of variance
  ``2 b^2 ||P^T q||^2 = 2 b^2 prod_i ||P_i^T q_i||^2``; for a query of several boxes
  ``q = sum_j q^(j)`` the cross terms ``prod_i <P_i^T q_i^(j), P_i^T q_i^(k)>`` enter too.

Both are the variance of the noise given the published structure (the leaves, the strategy);
the error of an answer also has a part no one can know without the data: spreading a leaf's
count uniformly over its cells (a decomposition's aggregation error). Where the released
values are not a linear function of independent noise of known scale (DAWA's data-dependent
buckets and least squares, MST's and AIM's model fit, PrivBayes' sampled records) no model is
attached and the standard deviation is reported as NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from .viewfile import MAX_MAGNITUDE


@dataclass(frozen=True)
class LeafLaplace:
    """Independent Laplace noise on each leaf (or cell), of scale ``scale`` (one per leaf, or
    one for all)."""

    scale: np.ndarray

    def leaf_variances(self, n_leaves: int) -> np.ndarray:
        """The variance ``2 b^2`` of each of ``n_leaves`` leaves' noise."""
        s = np.broadcast_to(np.asarray(self.scale, dtype=np.float64), (n_leaves,))
        return 2.0 * s * s

    def to_dict(self) -> dict[str, Any]:
        """The model as the view file records it (one scale when all are equal)."""
        s = np.asarray(self.scale, dtype=np.float64).reshape(-1)
        return {"kind": "laplace", "scale": float(s[0]) if s.size and np.all(s == s[0]) else s.tolist()}


@dataclass(frozen=True)
class KroneckerLaplace:
    """``y = A x + Laplace(scale)`` with ``A = A_1 x ... x A_d`` (``strategy``, each ``A_i`` an
    ``m_i x n_i`` matrix of full column rank), read back as ``x_hat = P y`` with ``P_i = A_i^+``
    (``factors``, ``n_i x m_i``, derived here so a file cannot state them apart from ``A``)."""

    scale: float
    strategy: tuple[np.ndarray, ...]
    factors: tuple[np.ndarray, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "factors", tuple(np.linalg.pinv(a) for a in self.strategy))

    def sensitivity(self) -> float:
        """The L1 sensitivity of ``A x`` to one record: the product over axes of the largest
        column L1 norm of ``A_i`` (a record is one cell, one column of ``A``)."""
        with np.errstate(over="ignore"):
            return math.prod(float(np.abs(a).sum(axis=0).max()) for a in self.strategy)

    def box_vectors(self, lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
        """``P_i^T q_i`` for every box (rows of ``lo``/``hi``) and axis: a list over axes of
        ``(boxes, m_i)`` arrays, from prefix sums of the rows of ``P_i``."""
        out = []
        for i, p in enumerate(self.factors):
            prefix = np.vstack([np.zeros((1, p.shape[1])), np.cumsum(p, axis=0)])
            out.append(prefix[hi[:, i]] - prefix[lo[:, i]])
        return out

    def variances(self, lo: np.ndarray, hi: np.ndarray, owner: np.ndarray, n_queries: int) -> np.ndarray:
        """The noise variance of each query's answer, its boxes' cross terms included (module docstring)."""
        u = self.box_vectors(lo, hi)
        var = np.zeros(n_queries)
        for q, boxes in _by_owner(owner):
            gram = np.ones((boxes.size, boxes.size))
            with np.errstate(over="ignore"):     # inf past float64 (a strategy of entries near 1e-15): std unknown
                for ui in u:
                    v = ui[boxes]
                    gram *= v @ v.T
                var[q] = 2.0 * self.scale ** 2 * float(gram.sum())
        return var

    def to_dict(self) -> dict[str, Any]:
        """The model as the view file records it: the scale and the strategy's factors ``A_i``."""
        return {"kind": "kronecker-laplace", "scale": float(self.scale), "strategy": [a.tolist() for a in self.strategy]}


NoiseModel = LeafLaplace | KroneckerLaplace


def _by_owner(owner: np.ndarray) -> Iterable[tuple[int, np.ndarray]]:
    order = np.argsort(owner, kind="stable")
    bounds = np.flatnonzero(np.diff(owner[order])) + 1
    for part in np.split(order, bounds):
        if part.size:
            yield int(owner[part[0]]), part


#: How far ``P_i A_i`` may be from the identity before a strategy factor counts as rank
#: deficient (a cell that no measurement separates from the others has no unbiased estimate).
RANK_TOLERANCE = 1e-6

_KINDS = ("laplace", "kronecker-laplace")


def noise_from_dict(d: Any, kind: str | None, epsilon: float, n_leaves: int, shape: tuple[int, ...],
                    fail: Callable[[str], Exception]) -> NoiseModel | None:
    """The noise model a view file records, checked against ``kind``, the one its method writes
    (None: the method records none, and a file that has one is refused). Checked: scales finite
    and no smaller than the view's epsilon allows (a leaf or a measurement cannot have had more
    than the whole budget: ``b >= sensitivity / epsilon``, up to rounding, with sensitivity 1 for
    leaf counts and that of the recorded strategy for a Kronecker model), a strategy of the
    right shapes and of full column rank. The reconstruction a Kronecker model's deviations
    use is the strategy's pseudo-inverse, computed here: a file states the measurements, and
    what their noise does to an answer follows from them and from epsilon."""
    if kind is None:
        if d is not None:
            raise fail("this method records no noise model (its answers' deviations are not known); the file has one")
        return None
    if not isinstance(d, dict) or d.get("kind") not in _KINDS:
        raise fail(f"'noise_model' must be an object of kind {kind!r}")
    if d["kind"] != kind:
        raise fail(f"this method's noise model is of kind {kind!r}, not {d['kind']!r}")
    try:
        scale = np.array(d.get("scale"), dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise fail("the noise model's scale must be a number or a list of numbers") from None
    if isinstance(d.get("scale"), bool) or scale.ndim > 1 or scale.size == 0 or not np.all(scale <= MAX_MAGNITUDE):
        raise fail(f"the noise model's scale must be a number or a list of numbers, finite and at most "
                   f"{MAX_MAGNITUDE:g}")
    if kind == "laplace":
        if set(d) != {"kind", "scale"} or (scale.ndim == 1 and scale.size != n_leaves):
            raise fail(f"the laplace noise model needs one scale or {n_leaves} (one per leaf)")
        _floor(scale, 1.0, epsilon, fail)
        return LeafLaplace(scale)
    if set(d) != {"kind", "scale", "strategy"} or scale.ndim != 0:
        raise fail("the kronecker-laplace noise model needs one scale and its strategy")
    model = KroneckerLaplace(float(scale), _strategy(d["strategy"], shape, fail))
    with np.errstate(all="ignore"):
        for a, p in zip(model.strategy, model.factors):
            if not np.abs(p @ a - np.eye(a.shape[1])).max() <= RANK_TOLERANCE:
                raise fail("a strategy factor is not of full column rank: some cells' counts cannot be told apart, "
                           "so no unbiased estimate (and no deviation) exists for them")
    _floor(scale, model.sensitivity(), epsilon, fail)
    return model


def _floor(scale: np.ndarray, sensitivity: float, epsilon: float, fail: Callable[[str], Exception]) -> None:
    floor = (sensitivity / epsilon) * (1 - 1e-9)
    if np.any(scale < floor):
        raise fail(f"a noise scale ({float(scale.min()):g}) is below sensitivity/epsilon = {sensitivity / epsilon:g}: "
                   "the file claims more noise-free information than its epsilon pays for")


def _strategy(raw: Any, shape: tuple[int, ...], fail: Callable[[str], Exception]) -> tuple[np.ndarray, ...]:
    """A Kronecker strategy's factors, one ``m x n`` matrix of bounded numbers per column of
    ``n`` cells."""
    if not isinstance(raw, list) or len(raw) != len(shape):
        raise fail(f"the kronecker-laplace noise model needs {len(shape)} strategy factors, one per column")
    out = []
    for n, f in zip(shape, raw):
        try:
            a = np.array(f, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            raise fail("a strategy factor must be a matrix of numbers") from None
        if a.ndim != 2 or a.shape[1] != n or a.shape[0] < n or not np.all(np.abs(a) <= MAX_MAGNITUDE):
            raise fail(f"a strategy factor must be an m x {n} matrix (m >= {n}) of numbers of magnitude at most "
                       f"{MAX_MAGNITUDE:g}")
        out.append(a)
    return tuple(out)


def cells_variance(scale: float, lo: np.ndarray, hi: np.ndarray, owner: np.ndarray, n_queries: int) -> np.ndarray:
    """Variance of the sum of i.i.d. ``Laplace(scale)`` cells over each query's disjoint boxes:
    ``2 scale^2`` times the number of cells the query covers."""
    cells = np.asarray([math.prod(r) for r in (hi - lo).tolist()], dtype=np.float64)
    return 2.0 * scale * scale * np.bincount(owner, weights=cells, minlength=n_queries)
