"""Madlib and planar Laplace: exact noise, honest Monte Carlo standard errors, refused metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import gamma, kstest

from certdp.datasets import build_space, gaussian
from certdp.family.additive import NoiseMechanism, estimate_noise_mechanism, laplace_noise


@pytest.mark.parametrize("rng", [None, 5])
@pytest.mark.parametrize("dim", [2, 7])
def test_noise_radius_is_gamma_and_direction_uniform(rng, dim):
    eps = 1.7
    z = laplace_noise(4000, dim, eps, rng)
    assert kstest(np.linalg.norm(z, axis=1), gamma(a=dim, scale=1 / eps).cdf).pvalue > 1e-3
    u = z / np.linalg.norm(z, axis=1, keepdims=True)
    assert np.all(np.abs(u.mean(axis=0)) < 5 / math.sqrt(4000))
    if dim == 2:
        ang = (np.arctan2(u[:, 1], u[:, 0]) + math.pi) / (2 * math.pi)
        assert kstest(ang, "uniform").pvalue > 1e-3


def test_monte_carlo_estimate_has_honest_standard_errors():
    s = build_space(gaussian(20, 2, seed=1), epsilon=2.0, eta=math.inf)
    small = estimate_noise_mechanism(s, "laplace", draws=400, seed=1)
    big = estimate_noise_mechanism(s, "laplace", draws=40_000, seed=2)
    assert np.allclose(small.matrix.sum(axis=1), 1.0)
    assert small.expected_loss_se > 0 and small.quantile_loss_se > 0 and small.worst_case_loss_se > 0
    assert abs(small.expected_loss - big.expected_loss) < 5 * small.expected_loss_se
    # the release path samples the same distribution
    m = NoiseMechanism(s, "laplace")
    outs = m.perturb(np.zeros(20_000, dtype=np.int64), rng=3)
    freq = np.bincount(outs, minlength=s.n_outputs) / len(outs)
    assert np.max(np.abs(freq - big.matrix[0])) < 0.02


def test_madlib_refuses_latitude_longitude():
    from certdp.datasets import latlon
    ll = np.column_stack([60.1 + 0.01 * np.arange(5), 24.9 + 0.01 * np.arange(5)])
    s = build_space(latlon(ll), epsilon=1.0, eta=math.inf)
    with pytest.raises(ValueError, match="euclidean"):
        NoiseMechanism(s, "madlib")
