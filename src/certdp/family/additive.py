"""Additive-noise baselines: Madlib (Feyisetan et al. 2020) for embeddings and planar Laplace
(Andres et al. 2013) for 2-D locations.

Both add noise Z with density proportional to ``exp(-epsilon ||z||)`` in R^d to the record's
point and report the output nearest to the noisy point. Sampling is exact: the direction is
uniform on the sphere (a normalised standard Gaussian vector) and the radius is Gamma(d,
1/epsilon), drawn as a sum of d exponentials.

Privacy. The noisy point x + Z is epsilon-mDP for the Euclidean distance on R^d: the density
ratio at any y is ``exp(-eps ||y - x||) / exp(-eps ||y - x'||) <= exp(eps ||x - x'||)`` by the
triangle inequality. Choosing the nearest output is post-processing, which cannot weaken the
guarantee, so the mechanism is epsilon-mDP on every pair of records for the Euclidean metric
(the metric of the space must therefore be 'euclidean' on the same coordinates).

These mechanisms have no closed-form matrix. :func:`estimate_noise_mechanism` estimates it by
Monte Carlo with a stated number of draws per record and reports the standard error of every
loss it computes. The estimated matrix is *not* certified (it cannot be: sampling error breaks
the inequalities); the guarantee is the analytic one above. :meth:`NoiseMechanism.perturb`
releases with the operating system's secure generator by default.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import cKDTree

from .. import _validate as V
from ..lp.outcome import Status
from ..mechanism import SolveResult
from ..randomness import RNGLike, as_generator, uniforms
from ..space import Space

METHODS = ("madlib", "laplace")


def _check_space(space: Space, method: str) -> tuple[np.ndarray, np.ndarray]:
    V.choice("method", method, METHODS)
    if space.metric != "euclidean" or space.points is None:
        raise ValueError(f"{method} needs records as points with metric='euclidean' (got metric={space.metric!r}); "
                         "project latitude/longitude to planar kilometres first")
    pts = space.points
    if method == "laplace" and pts.shape[1] != 2:
        raise ValueError(f"planar Laplace needs 2-D points; the data has dimension {pts.shape[1]} "
                         "(use method='madlib' for embeddings)")
    if method == "madlib" and pts.shape[1] < 2:
        raise ValueError(f"madlib is for embeddings of dimension >= 2; the data has dimension {pts.shape[1]}")
    if space.output_records is not None:
        outs = pts[space.output_records]
    elif space.output_points is not None:
        outs = space.output_points
        if outs.shape[1] != pts.shape[1]:
            raise ValueError(f"output points have dimension {outs.shape[1]} but records have {pts.shape[1]}")
    else:
        raise ValueError("the space has neither output_records nor output_points")
    return pts, outs


def laplace_noise(n: int, dim: int, epsilon: float, rng: RNGLike = None) -> np.ndarray:
    """``n`` draws in R^dim of density proportional to exp(-epsilon ||z||).

    With ``rng=None`` every uniform comes from ``os.urandom``; Gaussians by Box-Muller and the
    Gamma(dim, 1/epsilon) radius as a sum of ``dim`` exponentials, all from those uniforms.
    """
    eps = V.positive_float("epsilon", epsilon)
    n = V.int_in_range("n", n, 0)
    dim = V.int_in_range("dim", dim, 1)
    if rng is None:
        m = (dim + 1) // 2
        u = uniforms(n * m * 2, None).reshape(n, m, 2)
        rad = np.sqrt(-2.0 * np.log1p(-u[..., 0]))
        ang = 2.0 * math.pi * u[..., 1]
        g = np.concatenate([rad * np.cos(ang), rad * np.sin(ang)], axis=1)[:, :dim]
        e = -np.log1p(-uniforms(n * dim, None).reshape(n, dim)).sum(axis=1) / eps
    else:
        gen = as_generator(rng)
        g = gen.standard_normal((n, dim))
        e = gen.gamma(shape=dim, scale=1.0 / eps, size=n)
    norm = np.linalg.norm(g, axis=1)
    norm[norm == 0] = 1.0  # probability 0; keeps the draw finite
    return g / norm[:, None] * e[:, None]


class _Nearest:
    """Nearest output to each query point (KD-tree in low dimension, blocked scan otherwise)."""

    def __init__(self, outs: np.ndarray) -> None:
        self.outs = outs
        self.tree = cKDTree(outs) if outs.shape[1] <= 16 else None
        self.sq = np.einsum("ij,ij->i", outs, outs)

    def __call__(self, q: np.ndarray) -> np.ndarray:
        if self.tree is not None:
            return self.tree.query(q)[1].astype(np.int64)
        res = np.empty(len(q), dtype=np.int64)
        step = max(1, V.BLOCK // max(len(self.outs), 1))
        for s in range(0, len(q), step):
            block = q[s:s + step]
            d2 = self.sq[None, :] - 2.0 * block @ self.outs.T
            res[s:s + step] = np.argmin(d2, axis=1)
        return res


@dataclass
class NoiseMechanism:
    """Madlib or planar Laplace over the outputs of ``space``; ``perturb`` releases exactly."""

    space: Space
    method: str = "madlib"

    def __post_init__(self) -> None:
        self._pts, self._outs = _check_space(self.space, self.method)
        self._nearest = _Nearest(self._outs)

    @property
    def epsilon(self) -> float:
        """The privacy budget per unit distance."""
        return self.space.epsilon

    @property
    def n_records(self) -> int:
        """The number of records."""
        return self.space.n_records

    @property
    def n_outputs(self) -> int:
        """The number of outputs."""
        return self.space.n_outputs

    def save(self, path: object) -> None:
        """Always raises ValueError: a sampled mechanism has no matrix to write."""
        raise ValueError(f"{self.method} has no exact matrix to write (its losses are Monte Carlo estimates); "
                         "it is defined by its sampler alone")

    def perturb(self, records: np.ndarray | list[int] | int, rng: RNGLike = None) -> np.ndarray:
        """One output index per record index (secure randomness when ``rng`` is None)."""
        r = np.atleast_1d(np.asarray(records))
        if r.dtype.kind not in "iu":
            raise TypeError(f"records must be integer indices, got dtype {r.dtype}")
        if r.size and (r.min() < 0 or r.max() >= self.space.n_records):
            raise ValueError(f"records must be in [0, {self.space.n_records - 1}]")
        z = laplace_noise(len(r), self._pts.shape[1], self.epsilon, rng)
        return self._nearest(self._pts[r] + z)


@dataclass(frozen=True)
class MonteCarloResult:
    """A Monte Carlo estimate of a noise mechanism's matrix and losses, with standard errors.

    ``*_se`` are standard errors: exact formulas for the expected loss (independent per-record
    means), a parametric bootstrap over the per-record means for the worst-case and quantile
    losses. The matrix is an estimate, not a certified mechanism.
    """

    method: str
    epsilon: float
    draws: int
    matrix: np.ndarray
    per_record_loss: np.ndarray
    per_record_se: np.ndarray
    expected_loss: float
    expected_loss_se: float
    worst_case_loss: float
    worst_case_loss_se: float
    quantile_loss: float
    quantile_loss_se: float
    q: float
    timings: dict[str, float] = field(default_factory=dict)


def estimate_noise_mechanism(space: Space, method: str = "madlib", *, draws: int = 2000, q: float = 0.95,
                             seed: RNGLike = None, bootstrap: int = 200) -> MonteCarloResult:
    """Estimate the matrix of Madlib / planar Laplace on ``space`` with ``draws`` samples per
    record, and its losses (expected, worst-case, L_q) with standard errors."""
    draws = V.int_in_range("draws", draws, 1)
    q = V.open_unit("q", q, upper_closed=True)
    bootstrap = V.int_in_range("bootstrap", bootstrap, 1)
    t0 = time.perf_counter()
    mech = NoiseMechanism(space, method)
    gen = as_generator(seed)
    N, K = space.n_records, space.n_outputs
    counts = np.zeros((N, K), dtype=np.int64)
    loss_sum = np.zeros(N)
    loss_sq = np.zeros(N)
    dim = mech._pts.shape[1]
    per_block = max(1, 400_000 // max(dim, 1))
    V.fits_in_memory(f"{draws:,} draws for each of {N:,} records", 8.0 * N * draws)
    recs = np.repeat(np.arange(N), draws)
    for s in range(0, len(recs), per_block):
        r = recs[s:s + per_block]
        out = mech._nearest(mech._pts[r] + laplace_noise(len(r), dim, space.epsilon, gen))
        np.add.at(counts, (r, out), 1)
        c = space.cost[r, out]
        np.add.at(loss_sum, r, c)
        np.add.at(loss_sq, r, c * c)
    M = counts / draws
    mean = loss_sum / draws
    var = np.maximum(loss_sq / draws - mean ** 2, 0.0) * (draws / max(draws - 1, 1))
    se = np.sqrt(var / draws)
    exp_loss = float(np.dot(space.prior, mean))
    exp_se = float(np.sqrt(np.dot(space.prior ** 2, se ** 2)))
    boot = mean[None, :] + se[None, :] * gen.standard_normal((bootstrap, N))
    worst = float(mean.max())
    quant = float(np.quantile(mean, q))
    worst_se = float(np.std(boot.max(axis=1), ddof=1)) if bootstrap > 1 else 0.0
    quant_se = float(np.std(np.quantile(boot, q, axis=1), ddof=1)) if bootstrap > 1 else 0.0
    return MonteCarloResult(method=method, epsilon=space.epsilon, draws=draws, matrix=M, per_record_loss=mean,
                            per_record_se=se, expected_loss=exp_loss, expected_loss_se=exp_se,
                            worst_case_loss=worst, worst_case_loss_se=worst_se, quantile_loss=quant,
                            quantile_loss_se=quant_se, q=q, timings={"total": time.perf_counter() - t0})


def solve_additive(space: Space, *, method: str, draws: int = 2000, q: float = 0.95, seed: RNGLike = None
                   ) -> SolveResult:
    """Madlib or planar Laplace on ``space`` as a :class:`SolveResult`: the mechanism is the
    sampler (:class:`NoiseMechanism`), the losses are Monte Carlo estimates with their standard
    errors in ``stats`` (the full estimate under ``stats['estimate']``), and there is no bound.
    Options are checked by :func:`certdp.solve`."""
    mc = estimate_noise_mechanism(space, method, draws=draws, q=q, seed=seed)
    stats = {"n_records": space.n_records, "n_outputs": space.n_outputs, "draws": draws,
             "expected_loss": mc.expected_loss, "expected_loss_se": mc.expected_loss_se,
             "worst_case_loss": mc.worst_case_loss, "worst_case_loss_se": mc.worst_case_loss_se,
             "quantile_loss": mc.quantile_loss, "quantile_loss_se": mc.quantile_loss_se, "q": q, "estimate": mc}
    return SolveResult(mechanism=NoiseMechanism(space, method), method=method, status=Status.ESTIMATED,
                       upper_bound=mc.expected_loss, lower_bound=None, gap=None, timings=dict(mc.timings),
                       stats=stats, message=f"losses are Monte Carlo estimates over {draws} draws per record; "
                       "the privacy guarantee is analytic (noise, then the nearest output)")
