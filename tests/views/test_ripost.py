"""RIPOST (paper 004, Algorithms 1-3): its series, its spend, its noise, its bad input."""

from __future__ import annotations

import importlib
from fractions import Fraction
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kstest
from scipy.stats import laplace as laplace_dist

from certdp.views.blocks import cut_scores
from certdp.views.budget import PrivacyBudget
from certdp.views.ripost import (VARIANTS, Block, DepthSeries, Design, least_halved_axes, midpoint_cuts,
                                 phase1_axes, ripost)
from certdp.views.tensor import CountTensor, Domain
from certdp.views.view import Workload, answer_boxes, rmse, true_answers

from .tensors import dense_array, random_tensor

ripost_module = importlib.import_module("certdp.views.ripost")


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


PAPER_DESIGN = VARIANTS["paper"]["design"]
IMPROVED_DESIGN = VARIANTS["improved"]["design"]
SINGLE_DEPARTURES = [{n: getattr(IMPROVED_DESIGN, n)} for n in Design.CHOICES]


def _plan_charges(eps, alpha, gamma, beta, series, depth=200):
    """Every charge Algorithm 1 can make: omega_i of a phase's test or cut budget, and eps_p."""
    e1, e2 = eps * alpha * gamma, eps * alpha * (1 - gamma)
    parts = {"phase 1 convergence": e1 * beta, "phase 1 split": e1 * (1 - beta),
             "phase 2 convergence": e2 * beta, "phase 2 split": e2 * (1 - beta)}
    plan = {what: {series.weight(i) * e for i in range(1, depth)} for what, e in parts.items()}
    plan["leaf perturbation"] = {eps * (1 - alpha)}
    return plan


@given(st.integers(0, 10_000), st.floats(0.01, 5.0), st.floats(0.05, 0.95), st.floats(0.05, 0.95),
       st.floats(0.05, 0.95), st.integers(1, 4), st.integers(0, 3))
@settings(max_examples=60)
def test_paper_variant_charges_exactly_algorithm_1(seed, eps, alpha, gamma, beta, k, extra):
    """variant='paper' is Algorithm 1: every charge in the accountant's ledger is one of the
    plan's (omega_i of eps_cc / eps_ss of its phase, eps_p on each leaf), the leaves all get
    eps_p, and no path exceeds epsilon (the series' tail is left unspent, as published)."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 7, size=int(rng.integers(1, 4))))
    t = random_tensor(rng, shape, float(rng.random()), 30)
    budgets = []

    class Recording(PrivacyBudget):
        def __init__(self, epsilon):
            super().__init__(epsilon)
            budgets.append(self)

    with patch.object(ripost_module, "PrivacyBudget", Recording):
        v = ripost(t, eps, alpha, gamma, beta, k=k, os=k + extra, variant="paper", rng=rng)
    assert v.params["departures"] == [] and v.params["leaf_budget"] == "fixed"
    assert Fraction(v.spent) <= Fraction(eps)
    v.check()
    plan = _plan_charges(eps, alpha, gamma, beta, DepthSeries(k, k + extra))
    budget_ledger = [(what, charged) for _, charged, what in budgets[0].ledger]
    for what, charged in budget_ledger:     # the leaves' eps_p may be an ulp lower (the path's exact rest)
        assert charged in plan[what] or (what == "leaf perturbation" and charged == pytest.approx(eps * (1 - alpha),
                                                                                               rel=1e-15)), what
    assert sum(1 for what, _ in budget_ledger if what == "leaf perturbation") == v.n_blocks
    assert v.params["leaf_epsilon"]["min"] == v.params["leaf_epsilon"]["max"] == pytest.approx(eps * (1 - alpha),
                                                                                                rel=1e-15)


@given(st.integers(0, 10_000), st.floats(0.01, 5.0), st.floats(0.05, 0.95), st.integers(0, len(SINGLE_DEPARTURES)))
@settings(max_examples=60)
def test_every_design_spends_at_most_epsilon_and_rest_spends_it_all(seed, eps, alpha, which):
    """The paper's algorithm with any one departure, and the improved variant: the accountant's
    exact largest path sum stays within epsilon, the leaves partition the domain, and with
    leaf_budget='rest' every root-to-leaf path spends the whole epsilon."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 9, size=int(rng.integers(1, 4))))
    t = random_tensor(rng, shape, float(rng.random()), 30)
    if which < len(SINGLE_DEPARTURES):
        kw, label = dict(variant="paper", **SINGLE_DEPARTURES[which]), list(SINGLE_DEPARTURES[which])[0]
    else:
        kw, label = dict(variant="improved"), None
    v = ripost(t, eps, alpha, rng=seed, **kw)
    assert Fraction(v.spent) <= Fraction(eps)
    v.check()
    if label is not None:
        assert [d.split("=")[0] for d in v.params["departures"]] == [label]
    if v.params["leaf_budget"] == "rest":
        assert v.params["path_spend"]["min"] >= eps * (1 - 1e-12)
    else:
        assert v.params["leaf_epsilon"]["max"] == pytest.approx(eps * (1 - alpha), rel=1e-15)


def test_improved_names_its_departures():
    t = random_tensor(np.random.default_rng(1), (8, 6), 0.4, 30)
    v = ripost(t, 1.0, rng=1)
    assert sorted(d.split("=")[0] for d in v.params["departures"]) == sorted(Design.CHOICES)
    with pytest.raises(ValueError, match="phase1"):
        ripost(t, 1.0, phase1="quadtree", rng=1)


@given(st.lists(st.integers(1, 40), min_size=1, max_size=16))
def test_phase1_axes_rule(shape):
    """Two axes per split (never more than can be cut, at least one): 2^m <= 2m."""
    m = phase1_axes(shape)
    cuttable = sum(s > 1 for s in shape)
    assert m == max(1, min(2, cuttable)) and 2 ** m <= 2 * m


@given(st.integers(0, 10_000), st.integers(1, 3))
@settings(max_examples=50)
def test_halving_takes_the_least_halved_axes(seed, m):
    """The axes halved are those with the largest share of their column left, so every column
    is halved in turn whatever its length."""
    rng = np.random.default_rng(seed)
    shape = rng.integers(1, 50, size=int(rng.integers(1, 6)))
    lo = np.array([int(rng.integers(0, s)) for s in shape])
    hi = np.array([int(rng.integers(a + 1, s + 1)) for a, s in zip(lo, shape)])
    b = Block(lo, hi, np.zeros(0, np.int64), PrivacyBudget(1.0).root)
    axes = least_halved_axes(b, m, shape.astype(float))
    share = (hi - lo) / shape
    cut = np.flatnonzero(hi - lo > 1)
    assert axes.size == min(m, cut.size) and set(axes) <= set(cut)
    rest = np.setdiff1d(cut, axes)
    if axes.size and rest.size:
        assert share[rest].max() <= share[axes].min()


@given(st.integers(0, 10_000))
@settings(max_examples=40)
def test_midpoint_scores_match_the_all_cuts_scores(seed):
    """Phase 2's midpoint candidates are scored exactly as Algorithm 3 scores those cuts."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(2, 9, size=int(rng.integers(1, 4))))
    t = random_tensor(rng, shape, float(rng.random()), 30)
    b = Block(np.zeros(len(shape), np.int64), np.asarray(shape), np.arange(t.counts.size), PrivacyBudget(1.0).root)
    x = t.counts.astype(float)
    axes, poss, scores = midpoint_cuts(t.coords, x, b)
    A, P, S = cut_scores(t.coords, x, b.lo, b.hi, "ae")
    for a, p, s in zip(axes, poss, scores):
        assert s == pytest.approx(S[(A == a) & (P == p)][0], abs=1e-9)


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
        v = ripost(t, 1.0, alpha=0.3, variant="paper", rng=rng)
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
    """The fourteen Adult columns, RIPOST as published (every cut of every axis scored) on
    2,000 rows, in seconds."""
    df, t = _adult_fourteen(adult, 2000)
    _check_fourteen(df, t, ripost(t, 0.1, variant="paper", rng=0))


def test_adult_fourteen_columns(adult):
    """The whole table with the improved variant, whose phase 1 halves two axes per split
    (fanout 4 whatever the number of columns): a second or so."""
    df, t = _adult_fourteen(adult)
    v = ripost(t, 0.1, rng=0)
    assert v.params["split_axes"] == 2
    _check_fourteen(df, t, v)
