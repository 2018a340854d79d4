"""Paper 004's comparison: R-RMSE rows and the share of leaves converged with error."""

from __future__ import annotations

import numpy as np
import pytest

from certdp.experiments.views import compare_views, share_converged_with_error
from certdp.views.ripost import ripost
from certdp.views.view import rmse

from ..views.tensors import brute_ae, dense_array, random_tensor

def test_compare_views_and_convergence_share():
    rng = np.random.default_rng(4)
    t = random_tensor(rng, (8, 8), 0.3, 50)
    rows, w, skipped = compare_views(t, ["ripost", "privtree", "identity"], 1.0, 200, 2, 2, rng=1)
    assert skipped == {}
    assert [r.method for r in rows] == ["ripost", "privtree", "identity"]
    assert rows[0].relative == 1.0 and all(r.rmse_mean > 0 for r in rows)
    v = ripost(t, 1.0, rng=2)
    share = share_converged_with_error(v, t)
    dense = dense_array(t)
    ref = np.mean([brute_ae(dense[tuple(slice(a, b) for a, b in zip(lo, hi))]) > 0 for lo, hi in zip(v.lo, v.hi)])
    assert share == pytest.approx(ref)
    assert rmse(np.array([1.0, 3.0]), np.array([1.0, 1.0])) == pytest.approx(np.sqrt(2))
