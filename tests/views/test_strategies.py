"""HDMM, DAWA and AIM: their spend, their strategies and their answers; saving every kind of view."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import check_grad

from certdp.views import build_view
from certdp.views.strategies import (_best_partition, _pidentity_loss, _tree, _tree_matrix, hdmm_strategy,
                                      level_weights, range_gram)
from certdp.views.tensor import CountTensor, Domain
from certdp.views.view import BlockView, DenseView, Workload, load_view, true_answers

from .tensors import dense_array, random_tensor


def test_range_gram_counts_the_ranges_holding_both_cells():
    n = 7
    brute = np.zeros((n, n))
    for a in range(n):
        for b in range(a, n):
            v = np.zeros(n)
            v[a:b + 1] = 1
            brute += np.outer(v, v)
    assert np.allclose(range_gram(n), brute / (n * (n + 1) / 2))


def test_pidentity_gradient_is_the_derivative():
    x = np.random.default_rng(0).random(3 * 12)
    f = lambda t: _pidentity_loss(t, 3, 12, range_gram(12))[0]          # noqa: E731
    g = lambda t: _pidentity_loss(t, 3, 12, range_gram(12))[1]          # noqa: E731
    assert check_grad(f, g, x) < 1e-5 * np.linalg.norm(g(x))


def test_hdmm_strategy_has_sensitivity_one_and_beats_identity_on_ranges():
    A = hdmm_strategy((40, 3), 2)
    for a in A:
        assert np.allclose(np.abs(a).sum(axis=0), 1.0)                   # every column: L1 norm 1
    g = range_gram(40)
    err = float(np.trace(np.linalg.solve(A[0].T @ A[0], g)))
    assert err < float(np.trace(g))                                      # Identity's error on the same ranges


@given(st.integers(0, 1000), st.floats(0.05, 5.0))
@settings(max_examples=10)
def test_hdmm_and_dawa_spend_exactly_epsilon(seed, eps):
    t = random_tensor(np.random.default_rng(seed), (9, 5, 3))
    for method in ("hdmm", "dawa"):
        v = build_view(t, method, eps, rng=seed)
        assert Fraction(v.spent) <= Fraction(eps) and v.spent == pytest.approx(eps, rel=1e-12)
        assert isinstance(v, DenseView) and v.noisy.shape == t.shape


def test_hdmm_and_dawa_answer_the_truth_at_large_epsilon():
    t = random_tensor(np.random.default_rng(3), (16, 6), 0.6, 50)
    w = Workload.random(t.shape, 200, 2, rng=1)
    truth = true_answers(t, w)
    for method in ("hdmm", "dawa"):
        v = build_view(t, method, 1e5, rng=2)
        assert np.abs(v.estimates(w) - truth).max() < 1.0
    assert np.allclose(build_view(t, "hdmm", 1e6, rng=2).noisy, dense_array(t), atol=0.05)


def test_dawa_partition_is_exact_on_noise_free_costs():
    """Aligned dyadic intervals: a flat line stays one bucket, a step splits at the step."""
    from certdp.views.strategies import _dyadic_deviations

    flat = _best_partition([dv + 1.0 for dv in _dyadic_deviations(np.full(16, 5.0))], 16)
    assert flat.tolist() == [0]
    step = np.r_[np.zeros(8), np.full(8, 100.0)]
    assert _best_partition([dv + 1.0 for dv in _dyadic_deviations(step)], 16).tolist() == [0, 8]
    odd = _best_partition([dv + 1.0 for dv in _dyadic_deviations(np.ones(11))], 11)
    assert odd[0] == 0 and np.all(np.diff(odd) > 0) and odd[-1] < 11


def test_dawa_hierarchy_covers_every_bucket_once_per_level():
    for m in (1, 2, 5, 13):
        levels = _tree(m)
        B = _tree_matrix(levels, m, np.ones(len(levels))).toarray()
        assert np.allclose(B.sum(axis=0), len(levels))
        w = level_weights(len(levels))
        assert sum(w) == pytest.approx(1.0) and min(w) > 0


def test_dense_methods_refuse_huge_domains_with_a_clear_error():
    t = random_tensor(np.random.default_rng(0), (40, 40, 40))
    with pytest.raises(ValueError, match="max_cells"):
        build_view(t, "dawa", 1.0, rng=0, max_cells=1000)
    with pytest.raises(ValueError, match="max_cells"):
        build_view(t, "hdmm", 1.0, rng=0, max_cells=1000)


@given(st.integers(0, 1000), st.floats(0.05, 5.0), st.integers(1, 3))
@settings(max_examples=2)     # about 10 CPU seconds an example, whatever its size
def test_aim_spends_exactly_its_epsilon(seed, eps, d):
    pytest.importorskip("mbi")
    rng = np.random.default_rng(seed)
    t = random_tensor(rng, tuple(int(s) for s in rng.integers(2, 5, size=d)), 0.5, 40)
    v = build_view(t, "aim", eps, rng=seed, iters=30, round_iters=10)
    assert Fraction(v.spent) <= Fraction(eps) and v.spent == pytest.approx(eps, rel=1e-9)
    assert v.params["measured"][:d] == [[f"c{a}"] for a in range(d)]


def _chain(n=4000):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 6, n)
    b = (a + (rng.random(n) < 0.2)) % 6
    c = (b + (rng.random(n) < 0.2)) % 6
    doms = {k: Domain.numeric(k, 0, 6, 6) for k in "abc"}
    return CountTensor.from_frame(pd.DataFrame({"a": a, "b": b, "c": c}), list("abc"), doms)


@pytest.mark.slow
def test_aim_measures_two_way_marginals_and_answers_close_at_large_epsilon():
    pytest.importorskip("mbi")
    t = _chain()
    v = build_view(t, "aim", 20.0, rng=1, iters=300, round_iters=50)
    assert any(len(m) == 2 for m in v.params["measured"])
    w = Workload.random(t.shape, 300, 2, rng=2)
    assert np.sqrt(np.mean((v.estimates(w) - true_answers(t, w)) ** 2)) < 0.02 * 4000


def test_every_view_kind_saves_and_loads_with_the_same_answers(tmp_path):
    t = random_tensor(np.random.default_rng(5), (8, 4, 3), 0.5, 30)
    w = Workload.random(t.shape, 100, 2, rng=3)
    methods = ["ripost", "hdmm", "dawa", "identity"]
    for module, method in (("mbi", "mst"), ("DataSynthesizer", "privbayes")):
        try:
            __import__(module)
            methods.append(method)
        except ImportError:
            pass
    for m in methods:
        v = build_view(t, m, 2.0, rng=1)
        back = load_view(v.save(tmp_path / f"{m}.json"))
        assert back.method == m and back.spent == v.spent
        assert np.allclose(back.estimates(w), v.estimates(w))
    if "mst" in methods:
        three = Workload.random(t.shape, 5, 3, rng=3)
        with pytest.raises(ValueError, match="at most 2 columns"):
            load_view(tmp_path / "mst.json").estimates(three)
        with pytest.raises(ValueError, match="not one of blocks"):
            BlockView.load(tmp_path / "mst.json")
