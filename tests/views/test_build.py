"""The one entry for a view: unknown parameters are refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from certdp.views.build import build_view

from .tensors import random_tensor

ADULT_COLS = ["age", "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
              "capital-gain", "capital-loss", "hours-per-week", "native-country", "income", "education-num"]


def _write_table(path, n=400, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n), "sex": rng.choice(["F", "M"], n),
                       "city": rng.choice(["A", "B", "C"], n)})
    df.to_csv(path, index=False)
    doms = {"age": {"low": 0, "high": 100, "bins": 20}, "sex": {"values": ["F", "M"]}, "city": {"values": ["A", "B", "C"]}}
    return df, doms


def test_build_view_refuses_unknown_parameter():
    t = random_tensor(np.random.default_rng(0))
    with pytest.raises(ValueError, match="does not take"):
        build_view(t, "ripost", 0.1, 1, alhpa=0.3)
    with pytest.raises(ValueError, match="method"):
        build_view(t, "nosuch", 0.1, 1)
