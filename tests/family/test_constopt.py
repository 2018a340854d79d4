"""ConstOPTMech (paper 002, Algorithm 1) against the paper's LP written out in full."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp import SolverLimitError, solve
from certdp.datasets import build_space, planar
from certdp.family.constopt import (assemble_constopt, constopt_mechanism, nearest_outputs,
                                    weighted_exponential_mechanism)
from certdp.family.exponential import exponential_mechanism
from certdp.lp.highs import INF, HighsLP
from certdp.measures import worst_case_loss

from ..paper002 import metric_space, naive_constopt_value


@pytest.mark.parametrize("r,lam", [(1, 0.1), (3, 0.001), (5, 1.0)])
def test_constopt_reduced_lp_equals_the_paper_lp(r, lam):
    s = metric_space(8, seed=r)
    lp = assemble_constopt(s, r, lam, s.epsilon / 2)
    sol = HighsLP(lp.c, lp.A, lp.row_lower, lp.row_upper, np.zeros(lp.n_vars), np.full(lp.n_vars, INF)).solve()
    assert sol.objective == pytest.approx(naive_constopt_value(s, r, lam), rel=1e-7)
    # Theorem 1: variables exactly, constraints and non-zeros at most its bounds
    assert lp.counts["variables"] == lp.counts["theorem1_variables"]
    assert lp.counts["constraints"] <= lp.counts["theorem1_constraints"]
    assert lp.counts["nonzeros"] <= lp.counts["theorem1_nonzeros"]


@given(n=st.integers(3, 8), seed=st.integers(0, 10_000), density=st.floats(0.0, 1.0),
       lam=st.sampled_from([0.001, 0.1, 1.0, 50.0]))
@settings(max_examples=25)
def test_constopt_any_replacement_function_solves_the_paper_lp(n, seed, density, lam):
    """Algorithm 1 takes any replacement function I(v): with a random mask of free entries the
    reduced LP has the optimum of the LP written out in full, and the mechanism is certified."""
    s = metric_space(n, seed=seed)
    free = np.random.default_rng(seed).random((n, n)) < density
    lp = assemble_constopt(s, 1, lam, s.epsilon / 2, free=free)
    sol = HighsLP(lp.c, lp.A, lp.row_lower, lp.row_upper, np.zeros(lp.n_vars), np.full(lp.n_vars, INF)).solve()
    assert sol.objective == pytest.approx(naive_constopt_value(s, 1, lam, free=free), rel=1e-7, abs=1e-9)
    assert lp.counts["free_entries"] == int(free.sum())
    res = solve(s, "constopt", r=1, lambdas=[lam], free=free)
    assert res.mechanism.verification.passed


@given(n=st.integers(3, 9), r=st.integers(1, 8), seed=st.integers(0, 10_000))
@settings(max_examples=15)
def test_constopt_mask_of_the_nearest_outputs_is_the_default(n, r, seed):
    """The I_NN,r mask passed as ``free`` gives the same mechanism as the default ``r``."""
    r = min(r, n - 1)
    s = metric_space(n, seed=seed)
    mask = np.zeros((n, n), dtype=bool)
    mask[np.repeat(np.arange(n), r), nearest_outputs(s.distance_rows(), r).reshape(-1)] = True
    a = constopt_mechanism(s, r=r, lambdas=[0.1])
    b = constopt_mechanism(s, r=r, lambdas=[0.1], free=mask)
    assert b.upper_bound == pytest.approx(a.upper_bound, rel=1e-9, abs=1e-12)
    assert b.stats["constraints"] == a.stats["constraints"]


@pytest.mark.parametrize("bad", [np.zeros((4, 4)), np.zeros((3, 4), dtype=bool), [[True]]])
def test_constopt_free_must_be_a_boolean_mask_of_the_matrix(bad):
    s = metric_space(4, seed=1)
    with pytest.raises(ValueError, match="free must be"):
        solve(s, "constopt", r=1, free=bad)


def test_constopt_sweep_returns_the_best_lambda_and_is_epsilon_mdp():
    s = metric_space(15, seed=4)
    res = constopt_mechanism(s, r=4, lambdas=[0.001, 0.1, 1.0])
    losses = [row["worst_case_loss"] for row in res.stats["sweep"]]
    assert len(losses) == 3
    assert res.upper_bound == pytest.approx(min(losses), rel=1e-6)
    assert res.mechanism.verification.passed
    assert res.upper_bound >= solve(s, "optmech").upper_bound - 1e-7


def test_weighted_exponential_mechanism_fixes_the_black_hole():
    """Lemma 1's example: one outlier at distance 1 from a tight cluster."""
    n = 12
    pts = np.vstack([[0.0, 0.0], 1.0 + 1e-3 * np.random.default_rng(0).random((n - 1, 2))])
    pts[1:, 1] = 0.0
    pts[1:, 0] = 1.0 + 1e-3 * np.arange(n - 1)
    s = build_space(planar(pts), epsilon=4.0, eta=math.inf)
    plain = worst_case_loss(exponential_mechanism(s).mechanism.matrix, s.cost)
    Y = np.r_[1.0, np.full(n - 1, 1.0 / (n - 1))]
    weighted = weighted_exponential_mechanism(s, Y)
    assert weighted.mechanism.verification.passed
    assert weighted.upper_bound < plain


def test_time_limit_returns_no_mechanism():
    s = metric_space(60, seed=1)
    with pytest.raises(SolverLimitError):
        constopt_mechanism(s, r=10, time_limit=1e-4)
