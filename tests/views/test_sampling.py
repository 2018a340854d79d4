"""The views' samplers: OpenDP's exponential choice selects with the right frequencies."""

from __future__ import annotations

import numpy as np
from scipy.stats import chisquare

from certdp.views import PrivacyBudget, exponential_choice


def test_opendp_exponential_choice_frequencies():
    """The secure path (OpenDP Gumbel noisy max) samples the exponential mechanism."""
    b = PrivacyBudget(1e9)
    scores = np.array([0.0, 1.0, 3.0])
    n = 3000
    got = np.bincount([exponential_choice(scores, 1.0, 1.0, b.root) for _ in range(n)], minlength=3)
    p = np.exp(scores / 2)
    p /= p.sum()
    assert chisquare(got, n * p).pvalue > 1e-4
