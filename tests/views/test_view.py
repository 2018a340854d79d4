"""Views and range queries: answers against dense sums, workloads, parsing, save and load."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp.views.ripost import ripost
from certdp.views.tensor import Domain
from certdp.views.view import BlockView, Workload, answer_boxes, true_answers

from .tensors import dense_array, random_tensor


def test_view_answers_match_dense_sums():
    """With exact leaf sums, a query that is a union of whole leaves is answered exactly, and
    any query equals the uniform spread computed cell by cell."""
    rng = np.random.default_rng(2)
    t = random_tensor(rng, (7, 6, 5), 0.4)
    dense = dense_array(t)
    v = ripost(t, 2.0, rng=3)
    sums = np.array([dense[tuple(slice(a, b) for a, b in zip(lo, hi))].sum() for lo, hi in zip(v.lo, v.hi)])
    spread = np.zeros(t.shape)
    for lo, hi, s in zip(v.lo, v.hi, sums):
        blk = tuple(slice(a, b) for a, b in zip(lo, hi))
        spread[blk] = s / spread[blk].size
    w = Workload.random(t.shape, 300, 2, rng=4)
    ans = answer_boxes(v.lo, v.hi, sums, t.shape, w)
    ref = [spread[tuple(slice(a, b) for a, b in zip(lo, hi))].sum() for lo, hi in zip(w.lo, w.hi)]
    assert np.allclose(ans, ref)
    exact = [dense[tuple(slice(a, b) for a, b in zip(lo, hi))].sum() for lo, hi in zip(w.lo, w.hi)]
    assert np.allclose(true_answers(t, w), exact)
    whole = Workload(v.lo[:3], v.hi[:3], np.zeros(3, dtype=np.int64), 1)
    assert answer_boxes(v.lo, v.hi, sums, t.shape, whole)[0] == pytest.approx(sums[:3].sum())


def test_random_workload_shapes():
    w = Workload.random((10, 3, 7), 500, 2, rng=0)
    assert w.lo.shape == (500, 3) and np.all(w.lo < w.hi) and np.all(w.hi <= [10, 3, 7])
    restricted = ((w.lo > 0) | (w.hi < [10, 3, 7])).sum(axis=1)
    assert restricted.max() <= 2


def test_parse_queries():
    doms = (Domain.numeric("age", 0, 100, 10), Domain.categorical("sex", ["F", "M", "X"]))
    w = Workload.parse(doms, ["age=20..39", "sex=F,X age=..9", "age=55"])
    assert w.n_queries == 3
    assert w.lo[0].tolist() == [2, 0] and w.hi[0].tolist() == [4, 3]
    assert sorted(map(tuple, w.lo[w.owner == 1].tolist())) == [(0, 0), (0, 2)]
    assert w.lo[3].tolist() == [5, 0] and w.hi[3].tolist() == [6, 3]
    for bad, match in [("height=3", "unknown column"), ("age=", "empty"), ("age=30..20", "empty"),
                       ("sex=Q", "unknown value"), ("age=200..300", "outside"), ("age", "column=range")]:
        with pytest.raises(ValueError, match=match):
            Workload.parse(doms, [bad])


def test_save_load_roundtrip(tmp_path):
    rng = np.random.default_rng(1)
    t = random_tensor(rng)
    v = ripost(t, 0.5, rng=2)
    p = v.save(tmp_path / "v.json")
    u = BlockView.load(p)
    w = Workload.random(t.shape, 100, 2, rng=3)
    assert np.array_equal(u.estimates(w), v.estimates(w))
    assert np.array_equal(u.std(w), v.std(w))
    assert u.spent == v.spent and u.params["k"] == 4 and u.columns == t.columns
    (tmp_path / "bad.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a"):
        BlockView.load(tmp_path / "bad.json")


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_answers_and_variances_do_not_depend_on_the_chunking(data):
    """A query's boxes are cut into chunks that fit in memory, one query's boxes too when it has
    more than a chunk holds: answers and variances are those of the unchunked computation."""
    from certdp.views.view import answer_and_variance

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    d = len(shape)
    lo = np.array(np.meshgrid(*[np.arange(s) for s in shape], indexing="ij")).reshape(d, -1).T
    hi = lo + 1                                            # the cells as leaves
    vals = rng.normal(size=lo.shape[0])
    var_leaf = rng.random(lo.shape[0])
    n_q = data.draw(st.integers(1, 4))
    boxes = data.draw(st.integers(n_q, 30))
    owner = np.sort(np.r_[np.arange(n_q), rng.integers(0, n_q, boxes - n_q)])
    a = rng.integers(0, np.asarray(shape), (boxes, d))
    b = rng.integers(0, np.asarray(shape), (boxes, d))
    work = Workload(np.minimum(a, b), np.maximum(a, b) + 1, owner, n_q)
    whole = answer_and_variance(lo, hi, vals, shape, work, var_leaf, chunk_cells=10**12)
    tiny = answer_and_variance(lo, hi, vals, shape, work, var_leaf, chunk_cells=data.draw(st.integers(1, 50)))
    assert np.allclose(whole[0], tiny[0]) and np.allclose(whole[1], tiny[1])
