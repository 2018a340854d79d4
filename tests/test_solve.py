"""The one entry point: every method through one registry, options checked once, one result
type, and an option the method does not take named in the error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from certdp import METHODS, Mechanism, SolveResult, Space, build_space, solve
from certdp.datasets import gaussian, grid


def metric_space(n: int, dim: int = 2, eps: float = 2.0, seed: int = 0) -> Space:
    """Paper 002's setting: outputs = records, loss = distance, every pair protected."""
    return build_space(gaussian(n, dim, seed=seed), epsilon=eps, eta=math.inf)


@pytest.fixture(scope="module")
def small():
    return build_space(grid(4, 5), epsilon=2.0, eta=2.0, cost="travel", seed=1)


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_returns_one_result_type_with_a_status(small, method):
    res = solve(small, method, **({"subsets": 3} if method == "benders" else {}))
    assert isinstance(res, SolveResult) and res.method == method
    assert res.status in ("optimal", "heuristic", "estimated")
    assert isinstance(res.message, str)
    if method in ("madlib", "laplace"):
        assert not isinstance(res.mechanism, Mechanism) and res.lower_bound is None
        assert 0 < res.expected_loss and res.stats["expected_loss_se"] > 0
    else:
        assert isinstance(res.mechanism, Mechanism) and res.mechanism.verification.passed


def test_the_exact_methods_agree_on_the_optimum(small):
    lp = solve(small, "lp")
    for method, opts in (("outputs", {"gap": 1e-6}), ("benders", {"subsets": 3, "gap": 1e-6})):
        res = solve(small, method, **opts)
        assert res.lower_bound <= lp.upper_bound * (1 + 1e-7)
        assert res.upper_bound == pytest.approx(lp.upper_bound, rel=1e-5)


@pytest.mark.parametrize("method,option", [("expmech", "subsets"), ("lp", "partition"), ("benders", "objective"),
                                           ("outputs", "subsets"), ("constopt", "gap"), ("madlib", "solver")])
def test_an_option_the_method_does_not_take_is_named(small, method, option):
    with pytest.raises(TypeError, match=f"{method!r} does not take {option}"):
        solve(small, method, **{option: 1})


def test_an_unknown_method_lists_the_methods(small):
    with pytest.raises(ValueError, match="unknown method 'simplex'.*lp, optmech"):
        solve(small, "simplex")


def test_the_space_must_be_a_space():
    with pytest.raises(TypeError, match="certdp.Space"):
        solve(np.eye(3), "lp")


@pytest.mark.parametrize("method,opts,match", [
    ("constopt", {"r": 0}, "r must be"),
    ("constopt", {"r": 10}, "r must be"),
    ("constopt", {"r": 2, "lambdas": []}, "lambdas"),
    ("constopt", {"r": 2, "lambdas": [0.1, -1.0]}, "lambdas"),
    ("spanner", {"delta": 0.5}, "delta"),
    ("laplace", {"draws": 0}, "draws"),
    ("laplace", {"q": 1.5}, "q must"),
    ("lp", {"solver": "magic"}, "solver"),
    ("lp", {"time_limit": -1}, "time_limit"),
    ("lp", {"objective": "median"}, "objective"),
    ("outputs", {"gap": 0.0}, "gap"),
    ("outputs", {"workers": 0}, "workers"),
    ("benders", {"subsets": 11}, "subsets"),
    ("benders", {"partition": "random"}, "partition"),
    ("benders", {"variant": "faster"}, "variant"),
])
def test_bad_values_name_the_option(method, opts, match):
    with pytest.raises((ValueError, TypeError), match=match):
        solve(metric_space(10), method, **opts)
