"""The noise's standard deviation a view reports with each answer: checked against the spread
of the estimates over many independent releases, and NaN where the method does not make it
known."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from certdp.views import BlockView, DenseView, Domain, MarginalView, SampleView, build_view, load_view
from certdp.views.noise import LeafLaplace
from certdp.views.tensor import CountTensor

from .test_viewfile import _expected

RNG = np.random.default_rng(11)
N = 2000
FRAME = pd.DataFrame({"x": RNG.integers(0, 64, N), "c": RNG.choice(["A", "B", "C", "D"], N)})
DOMS = {"x": Domain.numeric("x", 0, 64, 32), "c": Domain.categorical("c", ["A", "B", "C", "D"])}
QUERIES = ["x=10..30", "c=A,C", "x=..20 c=B,D", "x=40"]


def _spread(views, queries):
    est = np.asarray([v.answer(queries)["estimate"].to_numpy() for v in views])
    return est.std(axis=0, ddof=1)


@pytest.mark.parametrize("method", ["identity", "hdmm"])
def test_reported_std_matches_the_spread_over_releases(method):
    """300 releases with independent noise: the standard deviation of each query's estimate
    matches the one every release reports (a chi-square bound: 300 draws give the sample
    standard deviation within about 12% with probability above 0.999)."""
    t = CountTensor.from_frame(FRAME, ["x", "c"], DOMS)
    views = [build_view(t, method, 0.5, rng=s) for s in range(300)]
    reported = views[0].answer(QUERIES)["std"].to_numpy()
    assert np.allclose([v.answer(QUERIES)["std"].to_numpy() for v in views], reported)
    assert np.all(np.abs(_spread(views, QUERIES) / reported - 1) < 0.15)


def test_leaf_formula_with_partial_overlaps():
    """A decomposition's leaves, counts redrawn with fresh Laplace noise of the recorded scales:
    the estimates of queries that cut leaves spread as the reported deviation says."""
    t = CountTensor.from_frame(FRAME, ["x", "c"], DOMS)
    v = build_view(t, "ripost", 0.3, rng=4)
    assert isinstance(v.noise, LeafLaplace) and v.n_blocks > 3
    dense = np.zeros(t.shape)
    dense[tuple(t.coords.T)] = t.counts
    sums = np.asarray([dense[tuple(slice(a, b) for a, b in zip(lo, hi))].sum() for lo, hi in zip(v.lo, v.hi)])
    scale = np.broadcast_to(v.noise.scale, sums.shape)
    g = np.random.default_rng(0)
    redraws = [BlockView(v.domains, v.lo, v.hi, sums + g.laplace(0.0, scale), v.method, v.epsilon, v.spent, {}, {},
                         v.noise) for _ in range(400)]
    queries = ["x=11..29", "x=3..50 c=A,C", "c=B"]
    reported = v.answer(queries)["std"].to_numpy()
    assert np.all(np.abs(_spread(redraws, queries) / reported - 1) < 0.15)


def test_kronecker_std_against_the_full_matrix(tmp_path):
    """HDMM's deviation, computed axis by axis with the cross terms of a query of several boxes,
    equals 2 b^2 ||P^T q||^2 with P the full Kronecker product, from the saved file."""
    t = CountTensor.from_frame(FRAME, ["x", "c"], DOMS)
    v = build_view(t, "hdmm", 0.5, rng=1)
    p = v.save(tmp_path / "h.json")
    d = json.loads(p.read_text())
    assert max(abs(np.asarray(f) - np.eye(len(f), len(f[0]))).max() for f in d["noise_model"]["factors"]) > 0.01
    loaded = load_view(p)
    work = loaded.workload(["x=10..30 c=A,C", "c=B,D", "x=..5"])
    boxes = [[(work.lo[i], work.hi[i]) for i in np.flatnonzero(work.owner == q)] for q in range(work.n_queries)]
    assert max(len(b) for b in boxes) == 2
    _, want = _expected(d, boxes)
    assert np.allclose(loaded.std(work), want, rtol=1e-9)
    assert np.allclose(v.answer(["x=10..30 c=A,C"])["std"], want[0], rtol=1e-9)


def test_std_is_nan_where_the_method_does_not_make_it_known():
    t = CountTensor.from_frame(FRAME, ["x", "c"], DOMS)
    dense = np.zeros(t.shape)
    dense[tuple(t.coords.T)] = t.counts
    views = [DenseView(t.domains, dense, "dawa", 1.0, 1.0),           # DAWA's views carry no noise model
             SampleView(t.domains, t.coords, t.counts, "privbayes", 1.0, 1.0),
             MarginalView(t.domains, lambda ax: dense.sum(axis=tuple(a for a in (0, 1) if a not in ax)), "mst", 1.0,
                          1.0)]
    for v in views:
        a = v.answer(QUERIES)
        assert list(a.columns) == ["query", "estimate", "std"] and list(a["query"]) == QUERIES
        assert a["std"].isna().all() and np.all(np.isfinite(a["estimate"]))
