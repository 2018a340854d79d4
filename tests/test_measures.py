"""Losses, epsilon_tight and the packing lower bound (paper 002), against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp import solve
from certdp.datasets import build_space, planar
from certdp.family.exponential import exponential_mechanism
from certdp.measures import _pair_tight, epsilon_tight, packing_lower_bound

from .paper002 import brute_tight, metric_space


@given(st.integers(0, 10_000), st.sampled_from([1e-3, 0.05, 0.3]))
@settings(max_examples=60)
def test_pair_tightness_matches_bisection(seed, delta):
    rng = np.random.default_rng(seed)
    K = int(rng.integers(2, 9))
    Mu, Mv = rng.dirichlet(np.ones(K)), rng.dirichlet(np.ones(K))
    if seed % 3 == 0:
        Mv[rng.integers(K)] = 0
        Mv /= Mv.sum()
    if seed % 5 == 0:
        Mu = Mv.copy()
    t = _pair_tight(Mu[None], Mv[None], delta)[0]
    b = brute_tight(Mu, Mv, delta)
    assert (math.isinf(t) and math.isinf(b)) or t == pytest.approx(b, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("p,delta", [(0.9, 1e-3), (0.7, 0.05), (0.99, 0.01)])
def test_epsilon_tight_randomised_response_closed_form(p, delta):
    M = np.array([[p, 1 - p], [1 - p, p]])
    D = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert epsilon_tight(M, D, delta) == pytest.approx(math.log((p - delta) / (1 - p)), rel=1e-9)


def test_epsilon_tight_of_an_exact_mechanism_is_at_most_its_epsilon():
    s = metric_space(30, seed=2, eps=1.5)
    m = exponential_mechanism(s).mechanism
    et = epsilon_tight(m.matrix, s.distance_rows(), 1e-3)
    assert 0 < et <= 1.5 + 1e-9


@given(st.integers(0, 10_000), st.floats(0.5, 6.0))
@settings(max_examples=12)
def test_packing_bound_never_exceeds_the_optimum(seed, eps):
    s = metric_space(8, seed=seed, eps=eps)
    lb = packing_lower_bound(s)
    assert 0 <= lb.bound <= solve(s, "optmech").upper_bound + 1e-9


def test_packing_bound_two_point_closed_form():
    """Two records at distance L with outputs = records: the output sets {s} stay disjoint up to
    r = L, N = 1 + exp(-eps L), so the bound is L / (1 + exp(eps L)): exactly the loss of the
    optimal randomised response."""
    s = build_space(planar(np.array([[0.0, 0.0], [2.0, 0.0]])), epsilon=1.0, eta=math.inf)
    lb = packing_lower_bound(s)
    L = 2.0
    assert lb.bound == pytest.approx(L * (1 - 1 / (1 + math.exp(-L))), rel=1e-12)
    assert lb.bound == pytest.approx(solve(s, "optmech").upper_bound, rel=1e-7)
