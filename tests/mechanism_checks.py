"""The checks every mechanism must pass: probabilities, exact mDP, save/load, sampling.
Shared by the common suite (``test_mechanism.py``) and mechanisms whose rows are not
a whole :class:`Space` (LR-Geo's per-user matrices)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from certdp import Mechanism, verify
from certdp.audit import audit_file


def check_probabilities(Z: np.ndarray) -> None:
    assert np.all(Z >= 0) and np.all(Z <= 1)
    assert np.max(np.abs(Z.sum(axis=1) - 1)) <= 1e-9


def check_exact_mdp(Z: np.ndarray, epsilon: float, edges: np.ndarray, dist: np.ndarray) -> None:
    f = np.exp(epsilon * dist)[:, None]
    assert np.all(Z[edges[:, 0]] <= f * Z[edges[:, 1]])
    assert np.all(Z[edges[:, 1]] <= f * Z[edges[:, 0]])
    assert verify(Z, epsilon, edges, dist).passed


def check_save_load(m: Mechanism, tmp_path, *, with_cost: bool = True) -> None:
    """``with_cost``: the mechanism stores its costs, and the audited loss must match."""
    p = m.save(tmp_path / "m.npz")
    m2 = Mechanism.load(p)
    assert np.array_equal(m2.matrix, m.matrix)
    assert m2.epsilon == m.epsilon
    assert np.array_equal(m2.edges, m.edges) and np.array_equal(m2.edge_distance, m.edge_distance)
    assert m2.metadata["method"] == m.metadata["method"]
    rep = audit_file(p)
    assert rep.verify.passed
    if with_cost:
        assert rep.expected_loss == pytest.approx(m.expected_loss(), rel=1e-12)


def check_sampling(m: Mechanism) -> None:
    rng = np.random.default_rng(12345)
    row = int(np.argmax(np.count_nonzero(m.matrix > 1e-3, axis=1)))
    n = 20000
    draws = m.sample(row, size=n, rng=rng)
    p = m.matrix[row]
    assert np.all(p[draws] > 0), "drew an output of probability 0"
    obs = np.bincount(draws, minlength=m.n_outputs)
    big = p * n >= 5  # chi-square validity: pool small cells
    f_obs = np.append(obs[big], obs[~big].sum())
    f_exp = np.append(p[big] * n, p[~big].sum() * n)
    keep = f_exp > 0
    stat = chisquare(f_obs[keep], f_exp[keep] * f_obs[keep].sum() / f_exp[keep].sum())
    assert stat.pvalue > 1e-4
