"""Budget accounting and noise primitives of the views (paper 004): nothing can be overspent."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kstest
from scipy.stats import laplace as laplace_dist

from certdp.views import BudgetExceeded, PrivacyBudget, add_laplace, exponential_choice, laplace_release


def test_sequential_on_a_path_parallel_across_siblings():
    b = PrivacyBudget(1.0)
    b.root.charge(0.25, "root count")
    left, right = b.root.child("L"), b.root.child("R")
    left.charge(0.5)
    right.charge(0.75)                     # disjoint from left: parallel
    assert b.spent() == Fraction(1.0)
    with pytest.raises(BudgetExceeded):
        right.charge(0.01)                 # 0.25 + 0.75 + 0.01 on the root-R path
    with pytest.raises(BudgetExceeded):
        b.root.charge(0.01)                # would raise the R path too
    left.child("LL").charge(0.25)
    assert b.spent() == Fraction(1.0)


@given(st.integers(0, 10_000), st.floats(0.01, 10.0))
@settings(max_examples=200)
def test_random_trees_never_overspend(seed, total):
    """Random trees and random charges: every accepted charge keeps every path within the total,
    recomputed independently from the ledger of nodes."""
    rng = np.random.default_rng(seed)
    b = PrivacyBudget(total)
    nodes = [b.root]
    for _ in range(60):
        n = nodes[int(rng.integers(len(nodes)))]
        if rng.random() < 0.4:
            nodes.append(n.child(f"c{len(nodes)}"))
            continue
        eps = float(total * rng.random() * 0.4)
        if eps <= 0:
            continue
        try:
            n.charge(eps)
        except BudgetExceeded:
            pass
    # independent check: every root-to-leaf path sum, exactly
    worst = Fraction(0)
    stack = [(b.root, b.root.spent)]
    while stack:
        n, s = stack.pop()
        worst = max(worst, s)
        stack.extend((c, s + c.spent) for c in n.children)
    assert worst <= Fraction(total)
    assert worst == b.spent()
    for n in nodes:
        assert n.remaining() >= 0
        assert Fraction(n.remaining()) + n.path_spent() + n.below() <= Fraction(total)


def test_rounding_cannot_overspend():
    """In binary, three times the double 0.1 exceeds the double 0.3 (float addition rounds it
    back to look equal); exact accounting refuses the third charge."""
    b = PrivacyBudget(0.3)
    b.root.charge(0.1)
    b.root.charge(0.1)
    assert 0.1 + 0.1 + 0.1 > 0.3 or Fraction(0.1) * 3 > Fraction(0.3)
    with pytest.raises(BudgetExceeded):
        b.root.charge(0.1)
    assert b.spent() <= Fraction(0.3)


@pytest.mark.parametrize("rng", [None, 7])
def test_laplace_distribution(rng):
    """Noise around the given values (OpenDP adds it to them when rng is None)."""
    v = np.linspace(-50.0, 50.0, 20_000)
    x = add_laplace(v, 2.0, rng)
    assert x.shape == v.shape
    assert kstest(x - v, laplace_dist(scale=2.0).cdf).pvalue > 1e-3


def test_opendp_receives_the_values(monkeypatch):
    """The release path hands the true values to OpenDP's measurement (no numpy addition after)."""
    import certdp.views.sampling as S
    if S.BACKEND != "opendp":
        pytest.skip("OpenDP is not importable here")
    seen = []
    real = S._opendp_laplace

    def spy(values, scale):
        seen.append(values.copy())
        return real(values, scale)

    monkeypatch.setattr(S, "_opendp_laplace", spy)
    out = laplace_release(np.array([1e6, -3.0]), 1.0, 50.0, PrivacyBudget(100.0).root)
    assert len(seen) == 1 and np.array_equal(seen[0], [1e6, -3.0])
    assert abs(out[0] - 1e6) < 5.0 and abs(out[1] + 3.0) < 5.0


def test_release_charges_before_drawing():
    b = PrivacyBudget(1.0)
    out = laplace_release(np.array([3.0, 4.0]), 1.0, 0.6, b.root, rng=1)
    assert out.shape == (2,) and b.spent() == Fraction(0.6)
    with pytest.raises(BudgetExceeded):
        laplace_release(5.0, 1.0, 0.5, b.root, rng=1)
    assert b.spent() == Fraction(0.6)      # the refused release spent nothing


def test_exponential_choice_frequencies():
    b = PrivacyBudget(1e9)
    scores = np.array([0.0, 1.0, 2.0])
    eps, sens = 2.0, 1.0
    counts = np.bincount([exponential_choice(scores, sens, eps, b.root, rng=i) for i in range(6000)], minlength=3)
    p = np.exp(eps * scores / (2 * sens))
    p /= p.sum()
    assert np.all(np.abs(counts / 6000 - p) < 4 * np.sqrt(p * (1 - p) / 6000) + 1e-3)


@pytest.mark.parametrize("call,match", [
    (lambda b: b.root.charge(0.0), "epsilon"),
    (lambda b: b.root.charge(-1.0), "epsilon"),
    (lambda b: PrivacyBudget(0.0), "epsilon"),
    (lambda b: add_laplace(1.0, 0.0), "scale"),
    (lambda b: exponential_choice(np.array([]), 1.0, 0.1, b.root), "scores"),
    (lambda b: laplace_release(1.0, -1.0, 0.1, b.root), "sensitivity"),
])
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call(PrivacyBudget(1.0))
