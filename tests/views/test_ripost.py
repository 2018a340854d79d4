"""RIPOST (paper 004, Algorithms 1-3): its series, its spend, its noise, its bad input."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kstest
from scipy.stats import laplace as laplace_dist

from certdp.views.ripost import DepthSeries, ripost
from certdp.views.tensor import CountTensor, Domain
from certdp.views.view import Workload, answer_boxes, rmse, true_answers

from .tensors import dense_array, random_tensor

@pytest.mark.parametrize("k,os", [(1, 1), (2, 2), (4, 4), (3, 7)])
def test_series_weights_sum_within_one(k, os):
    """The terms from index os on: partial sums stay below k / os <= 1, equal to 1 at os = k."""
    s = DepthSeries(k, os)
    partial = sum(Fraction(k, (i + os - 1) * (i + os)) for i in range(1, 5000))
    assert partial < Fraction(k, os) <= 1
    assert abs(float(partial) - k / os) < 1e-3
    assert s.total == pytest.approx(k / os)
    assert s.weight(1) == pytest.approx(k / (os * (os + 1)))
    assert sum(s.weight(i) for i in range(1, 5000)) == pytest.approx(float(partial))
    assert s.weight(10) < s.weight(2)


def test_default_series_sums_to_one():
    assert DepthSeries().total == 1.0


@pytest.mark.parametrize("k,os,match", [(0, 1, "k"), (3, 2, "os"), (2, -1, "os")])
def test_series_bad_parameters(k, os, match):
    with pytest.raises(ValueError, match=match):
        DepthSeries(k, os)


@given(st.integers(0, 10_000), st.floats(0.01, 5.0), st.floats(0.05, 0.95), st.floats(0.05, 0.95),
       st.floats(0.05, 0.95), st.integers(1, 4), st.integers(0, 3))
@settings(max_examples=60, deadline=None)
def test_ripost_never_overspends(seed, eps, alpha, gamma, beta, k, extra):
    """Many tensors and parameters: the exact largest path sum of the charges stays within
    epsilon, the leaves partition the domain, and every leaf was perturbed."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 7, size=int(rng.integers(1, 4))))
    t = random_tensor(rng, shape, float(rng.random()), 30)
    v = ripost(t, eps, alpha, gamma, beta, k=k, os=k + extra, leaf_budget="fixed", variant="paper", rng=rng)
    assert Fraction(v.spent) <= Fraction(eps)
    v.check()
    assert v.ledger["leaf perturbation"] > 0
    assert v.n_blocks == int(v.ledger["leaf perturbation"] / (eps * (1 - alpha)) + 0.5)
    for variant in ("paper", "improved"):
        r = ripost(t, eps, alpha, gamma, beta, k=k, os=k + extra, leaf_budget="rest", variant=variant, rng=seed)
        assert Fraction(r.spent) <= Fraction(eps)
        r.check()
        f = ripost(t, eps, alpha, gamma, beta, k=k, os=k + extra, leaf_budget="fixed", variant=variant, rng=seed)
        assert Fraction(f.spent) <= Fraction(eps)


@given(st.integers(0, 10_000), st.floats(0.01, 5.0), st.floats(0.05, 0.95))
@settings(max_examples=40, deadline=None)
def test_rest_leaves_spend_the_whole_budget_on_every_path(seed, eps, alpha):
    """With leaf_budget='rest' every root-to-leaf path spends epsilon (within rounding) and the
    accountant's exact largest path sum never exceeds it; with 'fixed' paths spend less."""
    rng = np.random.default_rng(seed)
    t = random_tensor(rng, (8, 6), 0.4, 30)
    r = ripost(t, eps, alpha, variant="paper", rng=seed)
    assert Fraction(r.spent) <= Fraction(eps)
    assert r.params["path_spend"]["min"] >= eps * (1 - 1e-9)
    assert r.params["leaf_epsilon"]["min"] >= eps * (1 - alpha) * (1 - 1e-9)
    f = ripost(t, eps, alpha, leaf_budget="fixed", variant="paper", rng=seed)
    assert f.params["path_spend"]["max"] < eps * (1 - 1e-6)
    assert f.params["leaf_epsilon"]["max"] == pytest.approx(eps * (1 - alpha))
    i = ripost(t, eps, alpha, rng=seed)
    assert eps * (1 - 1e-9) <= i.params["path_spend"]["min"] and Fraction(i.spent) <= Fraction(eps)


def test_noise_scales_are_recorded():
    t = random_tensor(np.random.default_rng(3), (16, 16), 0.3, 50)
    v = ripost(t, 0.1, alpha=0.3, gamma=0.9, beta=0.4, variant="paper", rng=1)
    first = [n for n in v.params["noise"] if n["depth"] == 1]
    # phase 1 at depth 1: Delta_Sum = 1 over omega_1 = 0.2 of 0.1 x 0.3 x 0.9 x 0.4
    assert first[0]["phase"] == 1 and first[0]["test_laplace_scale"] == pytest.approx(1 / (0.2 * 0.1 * 0.3 * 0.9 * 0.4))
    assert first[1]["phase"] == 2 and first[1]["test_laplace_scale"] == pytest.approx(2 / (0.2 * 0.1 * 0.3 * 0.1 * 0.4))
    # improved: phase 1 is PrivTree's biased test on the whole phase budget (0.1 x 0.5 x 0.5), fanout 4
    imp = ripost(t, 0.1, rng=1).params["noise"]
    assert imp[0]["test_laplace_scale"] == pytest.approx((2 * 4 - 1) / 3 / (0.1 * 0.5 * 0.5))
    assert imp[0]["split_epsilon"] == 0.0


def test_leaf_noise_is_laplace_of_the_leaf_budget():
    """Noisy leaf value minus the true leaf sum is Laplace(1 / eps_p) (KS over many leaves)."""
    rng = np.random.default_rng(5)
    t = random_tensor(rng, (12, 12), 0.5, 40)
    dense = dense_array(t)
    resid = []
    for _ in range(40):
        v = ripost(t, 1.0, alpha=0.3, leaf_budget="fixed", rng=rng)
        sums = np.array([dense[tuple(slice(a, b) for a, b in zip(lo, hi))].sum() for lo, hi in zip(v.lo, v.hi)])
        resid.extend(v.values - sums)
    assert kstest(resid, laplace_dist(scale=1 / 0.7).cdf).pvalue > 1e-3


@pytest.mark.parametrize("kw,match", [
    (dict(epsilon=0.0), "epsilon"), (dict(epsilon=-1.0), "epsilon"), (dict(alpha=0.0), "alpha"),
    (dict(alpha=1.0), "alpha"), (dict(gamma=1.5), "gamma"), (dict(beta=-0.1), "beta"), (dict(k=0), "k"),
    (dict(k=3, os=2), "os"),
])
def test_ripost_bad_input(kw, match):
    t = random_tensor(np.random.default_rng(0))
    with pytest.raises(ValueError, match=match):
        ripost(t, **kw)


def test_ripost_separates_empty_region():
    """With a generous budget, a tensor whose records sit in one corner gets its empty region
    in few blocks and its data region answered accurately (the point of phase 1)."""
    dense = np.zeros((32, 32), dtype=np.int64)
    dense[:4, :4] = 50
    doms = (Domain.numeric("a", 0, 32, 32), Domain.numeric("b", 0, 32, 32))
    coords = np.argwhere(dense > 0)
    t = CountTensor(doms, coords, dense[dense > 0])
    w = Workload.random(t.shape, 500, 2, rng=0)
    errs = [rmse(ripost(t, 50.0, rng=s).estimates(w), true_answers(t, w)) for s in range(3)]
    uniform = rmse(np.full(500, 0.0) + answer_boxes(np.zeros((1, 2), int), np.array([[32, 32]]),
                                                    np.array([800.0]), t.shape, w), true_answers(t, w))
    assert np.mean(errs) < 0.1 * uniform


def _adult_fourteen(adult, rows=None):
    df, doms = adult
    cols = [c for c in df.columns if c != "fnlwgt"]
    if rows is not None:
        df = df.sample(rows, random_state=0)
    return df, CountTensor.from_frame(df, cols, {c: doms[c] for c in cols}, overflow="bin")


def _check_fourteen(df, t, v):
    """A view over a domain of more than 10^16 cells: its leaves partition the domain, it spent
    within epsilon, and it answers queries with finite estimates and noise deviations."""
    assert t.domain_size > 10 ** 16 and t.total == len(df)
    v.check()
    assert Fraction(v.spent) <= Fraction(0.1)
    ans = v.answer(["sex=Female", "age=17..30 income=>50K"])
    assert np.all(np.isfinite(ans["estimate"])) and np.all(ans["std"] > 0)


def test_adult_fourteen_columns_sample(adult):
    """The fourteen Adult columns in the default run: RIPOST as published (binary cuts, the
    variant that scales with the number of columns) on 2,000 rows, in seconds."""
    df, t = _adult_fourteen(adult, 2000)
    _check_fourteen(df, t, ripost(t, 0.1, variant="paper", rng=0))


@pytest.mark.slow
def test_adult_fourteen_columns(adult):
    """The whole table with the improved variant, whose quadtree halves all fourteen axes at once
    (16,384 children per split): over 10^5 blocks and more than a minute."""
    df, t = _adult_fourteen(adult)
    _check_fourteen(df, t, ripost(t, 0.1, rng=0))
