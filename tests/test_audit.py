"""Exact verification, the losses of a file, and the audit of a file written without certdp."""

from __future__ import annotations

import numpy as np
import pytest

from certdp import Mechanism, verify
from certdp.audit import MechanismFileError, audit_file
from certdp.certify import certify
from certdp.measures import expected_loss, quantile_loss, worst_case_loss
from certdp.space import Geometry

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
    from certdp.pmo.upper import rebalance_rows
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
    g = Geometry(1.0, "precomputed", distance_matrix=np.array([[0.0, 1.0], [1.0, 0.0]]))
    m = Mechanism(Z, np.log(3.0) * 1.0000001, EDGE, D1, geometry=g, cost=c, prior=p, metadata={"method": "hand"})
    rep = audit_file(m.save(tmp_path / "h.npz"))
    assert rep.passed and rep.verify.passed and rep.expected_loss == pytest.approx(0.5)


def third_party_file(path, matrix, epsilon=1.0, **extra):
    """A mechanism file written with numpy alone: two records 1 km apart on a line."""
    arrays = dict(format=np.array("certdp-mechanism/2"), matrix=np.asarray(matrix, dtype=float),
                  epsilon=np.float64(epsilon), eta=np.float64(1.5),
                  metric=np.array("euclidean"), points=np.array([[0.0], [1.0]]), edges=EDGE, edge_distance=D1)
    arrays.update(extra)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


def test_audit_file_works_on_a_file_written_without_certdp(tmp_path):
    """The format is plain numpy: a third party's file is audited the same way."""
    bad = audit_file(third_party_file(tmp_path / "bad.npz", [[0.9, 0.1], [0.1, 0.9]]))
    assert bad.status == "failed" and bad.verify.violations == 2   # ln(9) > 1: a real violation
    assert bad.expected_loss is None
    good = audit_file(third_party_file(tmp_path / "good.npz", [[0.7, 0.3], [0.3, 0.7]]))   # ln(7/3) < 1
    assert good.status == "passed" and good.verify.pairs_checked == 1


def test_a_file_without_coordinates_or_eta_is_unverifiable(tmp_path):
    p = tmp_path / "old.npz"
    np.savez(p, matrix=np.array([[0.7, 0.3], [0.3, 0.7]]), epsilon=np.float64(1.0), edges=EDGE, edge_distance=D1)
    rep = audit_file(p)
    assert rep.status == "unverifiable" and not rep.passed and rep.verify is None
    assert any("eta" in w for w in rep.problems) and any("metric" in w for w in rep.problems)


@pytest.mark.parametrize("tamper,match", [
    (dict(edges=np.zeros((0, 2), dtype=np.int64), edge_distance=np.zeros(0)), "missing from its stored edges"),
    (dict(edge_distance=D1 * 1000), "stored edge distances differ"),
    (dict(prior=np.array([1.5, -0.5])), "prior is not a probability vector"),
    (dict(prior=np.array([0.2, 0.2])), "prior is not a probability vector"),
    (dict(cost=np.array([[0.0, np.nan], [1.0, 0.0]])), "cost has NaN"),
])
def test_a_tampered_file_fails(tmp_path, tamper, match):
    rep = audit_file(third_party_file(tmp_path / "t.npz", [[0.7, 0.3], [0.3, 0.7]], **tamper))
    assert rep.status == "failed" and any(match in w for w in rep.problems), rep.problems


def test_the_pairs_come_from_the_file_not_from_its_edge_list(tmp_path):
    """A deterministic matrix with its pair list emptied: the recomputed pair catches it."""
    rep = audit_file(third_party_file(tmp_path / "t.npz", [[1.0, 0.0], [0.0, 1.0]],
                                      edges=np.zeros((0, 2), dtype=np.int64), edge_distance=np.zeros(0)))
    assert rep.status == "failed" and rep.verify.violations == 2 and rep.verify.pairs_checked == 1


@pytest.mark.parametrize("content", [b"", b"garbage, not a zip file", b"PK\x03\x04truncated"])
def test_an_unreadable_file_is_a_clear_error(tmp_path, content):
    p = tmp_path / "x.npz"
    p.write_bytes(content)
    with pytest.raises(MechanismFileError, match="x.npz"):
        audit_file(p)


def test_a_truncated_certdp_file_is_a_clear_error(tmp_path):
    p = third_party_file(tmp_path / "t.npz", [[0.7, 0.3], [0.3, 0.7]])
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(MechanismFileError, match="t.npz"):
        audit_file(p)


def test_quantile_rejects_bad_q():
    with pytest.raises(ValueError, match="q must lie in"):
        quantile_loss(np.eye(2), np.ones((2, 2)), 0.0)


def test_verify_decides_overflow_zeros_and_nan_exactly():
    E2, d = np.array([[0, 1]]), np.array([1.0])
    # a positive entry against a zero one violates mDP at any finite eps d, even when exp(eps d) overflows
    assert verify(np.eye(2), 1000.0, E2, d).violations == 2
    assert verify(np.eye(2), 1.0, E2, d).violations == 2
    # exp(800) overflows, but e^800 * 1e-320 is only about e^63: 1e-320 against 1 is still fine there...
    Z = np.array([[1.0 - 1e-320, 1e-320], [1e-320, 1.0 - 1e-320]])
    assert verify(Z, 800.0, E2, d).passed
    # ...and at eps d = 710 it is not: e^710 * 1e-320 is about e^-26
    assert verify(Z, 710.0, E2, d).violations == 2
    bad = np.array([[np.nan, 1.0], [0.5, 0.5]])
    assert not verify(bad, 1.0, E2, d).passed


def test_certify_makes_an_overflowing_deterministic_matrix_exactly_private():
    Zc, rep = certify(np.eye(3), 1.0, np.array([[0, 1], [1, 2]]), np.array([1500.0, 2000.0]))
    assert rep.verify.passed and Zc.min() > 0 and rep.mixing < 1e-12
