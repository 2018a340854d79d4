"""Exact verification, the losses of a file, and the audit of a file written without scaledp."""

from __future__ import annotations

import numpy as np
import pytest

from scaledp import Mechanism, verify
from scaledp.audit import audit_file
from scaledp.measures import expected_loss, quantile_loss, worst_case_loss

EDGE = np.array([[0, 1]])
D1 = np.array([1.0])


def _cone_matrix(n: int, k: int, eps: float, seed: int):
    """Records on a line (neighbours within 1.5), and a matrix whose every column is a sum of
    tents exp(-eps D(., a)) (so exactly in the mDP cone) but whose rows do not sum to 1."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, n / 2, n))
    E = np.array([(i, j) for i in range(n) for j in range(i + 1, n) if x[j] - x[i] <= 1.5])
    d = x[E[:, 1]] - x[E[:, 0]]
    D = np.abs(x[:, None] - x[None, :])       # on a line with these edges, the path distance
    tents = np.exp(-eps * D)
    W = rng.exponential(1.0, (n, k)) * (rng.random((n, k)) < 0.2)
    Z = tents @ W
    Z /= Z.sum(axis=1).mean()                 # mean row sum 1; single rows stay off 1
    cost = np.abs(x[:, None] - rng.uniform(0, n / 2, k)[None, :])
    return Z, cost, E, d


def _nearly_stochastic(seed: int):
    """A mechanism with exact row sums (rebalanced cone matrix), plus a small tent added to one
    output: every column is still in the mDP cone, but the rows near the tent's centre are off
    1 (rows far away by less than 1e-7)."""
    from scaledp.pmo.upper import rebalance_rows
    n, k, eps = 30, 8, 1.3
    Z, cost, E, d = _cone_matrix(n, k, eps, seed)
    Z2 = rebalance_rows(Z, cost, eps, E, d)
    rng = np.random.default_rng(seed)
    x = np.sort(np.random.default_rng(seed).uniform(0, n / 2, n))   # _cone_matrix's positions
    a, q = int(rng.integers(n)), int(rng.integers(k))
    Z3 = Z2.copy()
    Z3[:, q] += 1e-4 * np.exp(-eps * np.abs(x - x[a]))
    return Z3, cost, eps, E, d


def test_verify_catches_a_tiny_entry_next_to_zero():
    Z = np.array([[1e-9, 1 - 1e-9], [0.0, 1.0]])
    rep = verify(Z, 1.0, EDGE, D1)
    assert not rep.passed
    assert rep.violations == 1
    assert rep.worst_pair == (0, 1, 0)
    assert rep.max_loss_per_distance == np.inf


def test_verify_reports_realised_loss_per_distance():
    e = 0.7
    a = np.exp(e) / (1 + np.exp(e))
    Z = np.array([[a, 1 - a], [1 - a, a]])  # randomised response: loss exactly e per unit
    rep = verify(Z, 1.0, EDGE, D1)
    assert rep.passed and rep.violations == 0
    assert rep.max_loss_per_distance == pytest.approx(e, rel=1e-12)
    assert not verify(Z, 0.69, EDGE, D1).passed


def test_verify_checks_row_sums_and_signs():
    assert not verify(np.array([[0.5, 0.5 + 2e-9], [0.5, 0.5]]), 1.0, EDGE, D1).passed
    assert not verify(np.array([[-1e-12, 1.0], [0.0, 1.0]]), 1.0, EDGE, D1).passed


def test_losses_on_a_hand_computed_example(tmp_path):
    Z = np.array([[0.75, 0.25], [0.25, 0.75]])
    c = np.array([[0.0, 2.0], [2.0, 0.0]])
    p = np.array([0.5, 0.5])
    assert expected_loss(Z, c, p) == pytest.approx(0.5)
    assert worst_case_loss(Z, c) == pytest.approx(0.5)
    assert quantile_loss(Z, c, 0.95) == pytest.approx(0.5)
    m = Mechanism(Z, np.log(3.0) * 1.0000001, EDGE, D1, cost=c, prior=p, metadata={"method": "hand"})
    rep = audit_file(m.save(tmp_path / "h.npz"))
    assert rep.verify.passed and rep.expected_loss == pytest.approx(0.5)


def test_audit_file_works_on_a_file_written_without_scaledp(tmp_path):
    """The format is plain numpy: a third party's file is audited the same way."""
    p = tmp_path / "third_party.npz"
    np.savez(p, matrix=np.array([[0.9, 0.1], [0.1, 0.9]]), epsilon=np.float64(1.0), edges=EDGE, edge_distance=D1)
    rep = audit_file(p)
    assert not rep.verify.passed  # ln(9) > 1: a real violation is reported
    assert rep.verify.violations == 2
    assert rep.expected_loss is None


def test_quantile_rejects_bad_q():
    with pytest.raises(ValueError, match="q must lie in"):
        quantile_loss(np.eye(2), np.ones((2, 2)), 0.0)
