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

from .viewfile import MAX_MAGNITUDE, Fields


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


#: The largest column (cells on one axis) a Kronecker strategy may cover: HDMM's p-Identity
#: optimisation over a column of n cells took 11 s at n = 200, 34 s at 400 and 152 s at 800 on
#: one column beside a 2-cell one (about n^2.1), so HDMM refuses columns above it; a view file's
#: strategy is held to it too (its pseudo-inverse costs m n^2: 80 s at n = 4,000).
MAX_HDMM_AXIS = 500

#: Queries whose boxes are not the product of one set of intervals per axis (a Workload built
#: by hand) take the boxes' Gram matrix, boxes x boxes: above this many boxes their deviation is
#: reported as unknown (NaN) rather than allocated.
MAX_GRAM_BOXES = 4096


def log_sensitivity(strategy: tuple[np.ndarray, ...]) -> float:
    """The natural log of the L1 sensitivity of ``A x`` to one record, ``A`` the Kronecker
    product of ``strategy``: the sum over axes of the log of ``A_i``'s largest column L1 norm (a
    record is one cell, one column of ``A``). In logs, so that 22 columns of factors near 1e15
    and 1e-15 neither overflow nor vanish."""
    with np.errstate(divide="ignore"):
        return float(sum(math.log(float(np.abs(a).sum(axis=0).max())) if np.any(a) else -math.inf
                         for a in strategy))


@dataclass(frozen=True)
class KroneckerLaplace:
    """``y = A x + Laplace(scale)`` with ``A = A_1 x ... x A_d`` (``strategy``, each ``A_i`` an
    ``m_i x n_i`` matrix of full column rank), read back as ``x_hat = P y`` with ``P_i = A_i^+``
    (``factors``, ``n_i x m_i``, derived here so a file cannot state them apart from ``A``)."""

    scale: float
    strategy: tuple[np.ndarray, ...]
    factors: tuple[np.ndarray, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        with np.errstate(all="ignore"):          # a strategy of entries near 1e-15 has a read-back past float64
            object.__setattr__(self, "factors", tuple(np.linalg.pinv(a) for a in self.strategy))

    def log_sensitivity(self) -> float:
        """The natural log of the L1 sensitivity of ``A x`` to one record (:func:`log_sensitivity`)."""
        return log_sensitivity(self.strategy)

    def variances(self, lo: np.ndarray, hi: np.ndarray, owner: np.ndarray, n_queries: int) -> np.ndarray:
        """The noise variance of each query's answer (module docstring), never below the least
        any query can have, ``2 b^2 / sensitivity^2`` (for a cell ``j`` of the query,
        ``(P^T q)^T a_j = 1``, so ``||P^T q||_2 >= 1 / ||a_j||_1``), which rounding could
        otherwise undercut; inf past float64 (the deviation unknown).

        A query's boxes are the product of one set of intervals per axis (a selection of values
        on each column), so ``P^T q = (x)_i P_i^T q_i`` with ``q_i`` the sum of axis ``i``'s
        intervals, and the variance is ``2 b^2 prod_i ||P_i^T q_i||^2``: summed in logs, one
        vector per axis, with no cancellation between boxes. Boxes that are not such a product
        take their Gram matrix (up to :data:`MAX_GRAM_BOXES`)."""
        log_floor = math.log(2.0) + 2.0 * math.log(self.scale) - 2.0 * self.log_sensitivity()
        with np.errstate(all="ignore"):
            prefix = [np.vstack([np.zeros((1, p.shape[1])), np.cumsum(p, axis=0)]) for p in self.factors]
        out = np.zeros(n_queries)                    # a query of no boxes (a hand-built Workload) is exact
        for q, boxes in _by_owner(owner):
            log_var = max(self._log_variance(prefix, lo[boxes], hi[boxes]), log_floor)    # NaN stays NaN
            out[q] = math.inf if log_var > 709.0 else math.exp(log_var)
        return out

    def _log_variance(self, prefix: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> float:
        """The log of one query's variance (boxes ``[lo, hi)``); NaN where it is not computed."""
        d = lo.shape[1]
        axes = [np.unique(np.stack([lo[:, i], hi[:, i]], axis=1), axis=0) for i in range(d)]
        base = math.log(2.0) + 2.0 * math.log(self.scale)
        if math.prod(len(a) for a in axes) == lo.shape[0] == np.unique(np.hstack([lo, hi]), axis=0).shape[0]:
            total = base
            for pre, iv in zip(prefix, axes):
                u = (pre[iv[:, 1]] - pre[iv[:, 0]]).sum(axis=0)
                top = float(np.abs(u).max())
                if top == 0:
                    return -math.inf                  # lost to rounding: the floor holds
                if not math.isfinite(top):
                    return top                        # inf: past float64, the deviation unknown
                total += 2.0 * math.log(top) + math.log(float((u / top) @ (u / top)))
            return total
        if lo.shape[0] > MAX_GRAM_BOXES:
            return math.nan
        gram = np.ones((lo.shape[0], lo.shape[0]))
        with np.errstate(over="ignore", invalid="ignore"):
            for i, pre in enumerate(prefix):
                v = pre[hi[:, i]] - pre[lo[:, i]]
                gram *= v @ v.T
            g = float(gram.sum())
        return base + math.log(g) if g > 0 else math.nan      # <= 0 or NaN: lost to rounding, unknown

    def to_dict(self) -> dict[str, Any]:
        """The model as the view file records it: the scale and the strategy's factors ``A_i``."""
        return {"kind": "kronecker-laplace", "scale": float(self.scale),
                "strategy": [a.tolist() for a in self.strategy]}


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

#: The noise model each block-view method records: its scales (and HDMM's strategy) are what
#: checks the epsilon the file claims against the deviations its answers report. DAWA records
#: none (its estimates are weighted least squares over data-dependent buckets; its deviations
#: are reported as unknown).
NOISE_MODELS = {"ripost": "laplace", "privtree": "laplace", "hdpview": "laplace", "identity": "laplace",
                "hdmm": "kronecker-laplace", "dawa": None}


def noise_from_dict(d: Any, method: str, epsilon: float, n_leaves: int, shape: tuple[int, ...],
                    f: Fields) -> NoiseModel | None:
    """The noise model a view file of ``method`` records, checked against the kind that method
    writes (:data:`NOISE_MODELS`; a file without one where the method writes
    one is refused, and so is a file with one where it writes none). Checked: scales and
    strategy entries JSON numbers, finite; scales no smaller than the view's epsilon allows (a
    leaf or a measurement cannot have had more than the whole budget: ``b >= sensitivity /
    epsilon``, up to rounding, in logs, with sensitivity 1 for leaf counts and that of the
    recorded strategy for a Kronecker model); a strategy of the right shapes, over columns of at
    most :data:`MAX_HDMM_AXIS` cells, of full column rank. The reconstruction a Kronecker model's
    deviations use is the strategy's pseudo-inverse, computed here: a file states the
    measurements, and what their noise does to an answer follows from them and from epsilon."""
    fail = f.fail
    kind = NOISE_MODELS[method]
    if kind is None:
        if d is not None:
            raise fail("this method records no noise model (its answers' deviations are not known); the file has one")
        return None
    if d is None:
        raise fail(f"a view of method {method!r} records its noise model, whose scales bound the epsilon it claims; "
                   "this file has none")
    if not isinstance(d, dict) or d.get("kind") not in _KINDS:
        raise fail(f"'noise_model' must be an object of kind {kind!r}")
    if d["kind"] != kind:
        raise fail(f"this method's noise model is of kind {kind!r}, not {d['kind']!r}")
    scale = f.array("noise_model.scale", d.get("scale"), "f", 1 if isinstance(d.get("scale"), list) else 0)
    if kind == "laplace":
        if set(d) != {"kind", "scale"} or scale.size == 0 or (scale.ndim == 1 and scale.size != n_leaves):
            raise fail(f"the laplace noise model needs one scale or {n_leaves} (one per leaf)")
        return LeafLaplace(_floor(scale, 0.0, epsilon, fail))
    if set(d) != {"kind", "scale", "strategy"} or scale.ndim != 0:
        raise fail("the kronecker-laplace noise model needs one scale and its strategy")
    strategy = _strategy(d["strategy"], shape, f)
    model = KroneckerLaplace(float(_floor(scale, log_sensitivity(strategy), epsilon, fail)), strategy)
    with np.errstate(all="ignore"):
        for a, p in zip(model.strategy, model.factors):
            if not np.abs(p @ a - np.eye(a.shape[1])).max() <= RANK_TOLERANCE:
                raise fail("a strategy factor is not of full column rank: some cells' counts cannot be told apart, "
                           "so no unbiased estimate (and no deviation) exists for them")
    return model


def _floor(scale: np.ndarray, log_sensitivity: float, epsilon: float, fail: Callable[[str], Exception]
           ) -> np.ndarray:
    """The scales, refused when below ``sensitivity / epsilon`` (compared in logs; a scale of 0 or
    below always) and raised to it when below by no more than rounding (an honest file's scale
    is that quotient as its builder computed it), so that no deviation is reported below what
    epsilon allows."""
    log_floor = log_sensitivity - math.log(epsilon)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = ~(np.log(scale) >= log_floor + math.log1p(-1e-9))    # NaN (< 0) too
    if np.any(low):
        need = math.exp(min(log_floor, 709.0))
        raise fail(f"a noise scale ({float(scale.min()):g}) is below sensitivity/epsilon = {need:g}: the file "
                   "claims more noise-free information than its epsilon pays for")
    return np.maximum(scale, math.exp(min(log_floor, math.log(np.finfo(np.float64).max))))


def _strategy(raw: Any, shape: tuple[int, ...], f: Fields) -> tuple[np.ndarray, ...]:
    """A Kronecker strategy's factors, one ``m x n`` matrix of bounded numbers per column of
    ``n`` cells (``n <= m <= 2 n``, ``n <= MAX_HDMM_AXIS``)."""
    if not isinstance(raw, list) or len(raw) != len(shape):
        raise f.fail(f"the kronecker-laplace noise model needs {len(shape)} strategy factors, one per column")
    out = []
    for n, x in zip(shape, raw):
        if n > MAX_HDMM_AXIS:
            raise f.fail(f"a Kronecker strategy covers columns of at most {MAX_HDMM_AXIS} cells; this one has {n}")
        a = f.array("noise_model.strategy", x, "f", 2)
        if np.any((a != 0) & (np.abs(a) < 1.0 / MAX_MAGNITUDE)):
            raise f.fail(f"a strategy entry is below {1 / MAX_MAGNITUDE:g} in magnitude and not 0 (its read-back "
                         "would leave float64)")
        if a.shape[1] != n or not n <= a.shape[0] <= 2 * n:
            raise f.fail(f"a strategy factor must be an m x {n} matrix (m from {n} to {2 * n}), got "
                         f"{a.shape[0]} x {a.shape[1]}")
        out.append(a)
    return tuple(out)


def cells_variance(scale: float, lo: np.ndarray, hi: np.ndarray, owner: np.ndarray, n_queries: int) -> np.ndarray:
    """Variance of the sum of i.i.d. ``Laplace(scale)`` cells over each query's disjoint boxes:
    ``2 scale^2`` times the number of cells the query covers."""
    cells = np.asarray([math.prod(r) for r in (hi - lo).tolist()], dtype=np.float64)
    return 2.0 * scale * scale * np.bincount(owner, weights=cells, minlength=n_queries)
