"""Paper 004's comparison: R-RMSE rows and the share of leaves converged with error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp.experiments.views import compare_views, leaf_kinds, share_converged_with_error
from certdp.views.build import build_view
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


@given(st.integers(0, 10_000), st.sampled_from(["ripost", "privtree", "hdpview"]), st.floats(0.05, 20.0),
       st.sampled_from([(1, 9), (7, 6), (3, 4, 5)]), st.floats(0.05, 0.9))
@settings(max_examples=40)
def test_leaf_kinds_partition_the_leaves_as_brute_force_does(seed, method, eps, shape, density):
    """Each leaf is one kind; the shares match a brute-force count over the dense tensor."""
    rng = np.random.default_rng(seed)
    t = random_tensor(rng, shape, density, 5)
    v = build_view(t, method, eps, seed)
    kinds = leaf_kinds(v, t)
    dense = dense_array(t)
    boxes = [dense[tuple(slice(a, b) for a, b in zip(lo, hi))] for lo, hi in zip(v.lo, v.hi)]
    single = np.array([b.size == 1 for b in boxes])
    empty = np.array([b.size > 1 and b.sum() == 0 for b in boxes])
    positive = np.array([brute_ae(b) > 1e-9 for b in boxes])
    assert kinds["single_cell"] == pytest.approx(single.mean())
    assert kinds["empty"] == pytest.approx(empty.mean())
    assert kinds["ae_positive"] == pytest.approx(positive.mean()) == share_converged_with_error(v, t)
    assert not (positive & single).any()
    assert sum(kinds[k] for k in ("ae_positive", "single_cell", "empty", "uniform")) == pytest.approx(1.0)
    tested = ~single
    assert kinds["ae_positive_of_tested"] == pytest.approx(positive[tested].mean() if tested.any() else 0.0)
