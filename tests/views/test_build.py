"""The one entry for a view: unknown parameters are refused."""

from __future__ import annotations

import numpy as np
import pytest

from certdp.views.build import build_view

from .tensors import random_tensor


def test_build_view_refuses_unknown_parameter():
    t = random_tensor(np.random.default_rng(0))
    with pytest.raises(ValueError, match="does not take"):
        build_view(t, "ripost", 0.1, 1, alhpa=0.3)
    with pytest.raises(ValueError, match="method"):
        build_view(t, "nosuch", 0.1, 1)
