"""The views' samplers: OpenDP's exponential choice selects with the right frequencies."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import chisquare

from certdp.views import PrivacyBudget, exponential_choice

ADULT_COLS = ["age", "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
              "capital-gain", "capital-loss", "hours-per-week", "native-country", "income", "education-num"]


def _write_table(path, n=400, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n), "sex": rng.choice(["F", "M"], n),
                       "city": rng.choice(["A", "B", "C"], n)})
    df.to_csv(path, index=False)
    doms = {"age": {"low": 0, "high": 100, "bins": 20}, "sex": {"values": ["F", "M"]}, "city": {"values": ["A", "B", "C"]}}
    return df, doms


def test_opendp_exponential_choice_frequencies():
    """The secure path (OpenDP Gumbel noisy max) samples the exponential mechanism."""
    b = PrivacyBudget(1e9)
    scores = np.array([0.0, 1.0, 3.0])
    n = 3000
    got = np.bincount([exponential_choice(scores, 1.0, 1.0, b.root) for _ in range(n)], minlength=3)
    p = np.exp(scores / 2)
    p /= p.sum()
    assert chisquare(got, n * p).pvalue > 1e-4
