"""The noise's standard deviation a view reports with each answer: checked against the spread
of the estimates over many independent releases, and NaN where the method does not make it
known."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

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
    assert any(len(a) > len(a[0]) for a in d["noise_model"]["strategy"])     # extra rows: P is not the identity
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


# ------------------------------------------------------------ what a file's noise model may claim
def _cells_file(path, method: str, shape: tuple[int, ...], eps: float, noise_model) -> Path:
    """A view file of one leaf per cell (zero counts) over columns of ``shape`` cells."""
    import itertools

    from certdp.views.viewfile import FORMAT, content_digest

    cells = list(itertools.product(*[range(n) for n in shape]))
    d = {"format": FORMAT, "method": method, "epsilon": eps, "spent": eps, "params": {}, "ledger": {method: eps},
         "domains": [{"name": f"c{i}", "values": [str(v) for v in range(n)], "overflow": False}
                     for i, n in enumerate(shape)],
         "lo": [list(c) for c in cells], "hi": [[x + 1 for x in c] for c in cells], "values": [0.0] * len(cells),
         "noise_model": noise_model}
    d["digest"] = content_digest(d)
    path.write_text(json.dumps(d))
    return path


def _box_queries(shape: tuple[int, ...]) -> list[str]:
    """Every single cell, and on every column every selection of values (contiguous or not,
    the whole column meaning no restriction), combined across columns: query strings."""
    import itertools

    def subsets(n):
        return [c for r in range(1, n + 1) for c in itertools.combinations(range(n), r)]

    qs = []
    for sel in itertools.product(*[subsets(n) for n in shape]):
        terms = [f"c{i}={','.join(map(str, s))}" for i, s in enumerate(sel) if len(s) < shape[i]]
        qs.append(" ".join(terms) if terms else "")
    return [q for q in qs if q]


def _strategy_factor(data, n: int) -> list:
    """One strategy factor over ``n`` cells: a random m x n matrix of some magnitude, or the
    inverse of a random read-back whose first row is 1e7 times the others (so a query of
    several cells cancels entries of 1e7 against entries of 1)."""
    mag = 10.0 ** data.draw(st.integers(-15, 15), label="magnitude")
    if n >= 2 and data.draw(st.booleans(), label="ill-conditioned"):
        P = np.asarray(data.draw(st.lists(st.floats(-1, 1), min_size=n * n, max_size=n * n)), float).reshape(n, n)
        P[0] *= 1e7
        if abs(np.linalg.det(P)) > 1e-6:
            return np.clip(np.linalg.inv(P) * mag, -1e15, 1e15).tolist()
    m = data.draw(st.integers(n, 2 * n), label="rows")
    a = np.asarray(data.draw(st.lists(st.floats(-1, 1), min_size=m * n, max_size=m * n)), float).reshape(m, n)
    return np.clip(a * mag, -1e15, 1e15).tolist()


def _check_claims(path, shape, eps):
    """Load ``path``: refused with a named reason, or every query's deviation at least
    sqrt(2) / epsilon (finite or inf), never NaN for a query of the language."""
    from certdp.views.viewfile import ViewFileError

    try:
        v = load_view(path)
    except ViewFileError as exc:
        assert any(w in str(exc) for w in ("below sensitivity/epsilon", "full column rank", "magnitude", "matrix"))
        event(f"refused: {str(exc).split(': ', 1)[1][:30]}")
        return None
    event("loaded")
    std = v.answer(_box_queries(shape))["std"].to_numpy()
    assert not np.any(np.isnan(std))
    assert np.all(std >= math.sqrt(2) / eps * (1 - 1e-6)), (std.min(), math.sqrt(2) / eps)
    return std


@settings(max_examples=80, deadline=None, derandomize=True)
@given(data=st.data())
def test_no_kronecker_file_claims_less_noise_than_its_epsilon_allows(tmp_path_factory, data):
    """Any strategy a file may state (random matrices, tall or square, entries from 1e-15 to
    1e15 in magnitude, some near singular, some rank deficient) with any scale at or around its
    floor: the file is refused, or every query of values selected on each column reports a
    deviation of at least sqrt(2) / epsilon. That is the least any unbiased linear Laplace
    release at epsilon has (for a query q and a cell j in it, (P^T q)^T a_j = 1, so
    ||P^T q||_2 ||a_j||_1 >= 1 and 2 b^2 ||P^T q||^2 >= 2 / epsilon^2); a file that states the
    read-back P on its own (certdp-view/2) could claim any deviation."""
    shape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3), label="shape"))
    eps = data.draw(st.sampled_from([0.1, 1.0, 7.0, 1e15]), label="eps")
    strategy = [_strategy_factor(data, n) for n in shape]
    log_sens = sum(math.log(max(float(np.abs(np.asarray(a)).sum(axis=0).max()), 1e-300)) for a in strategy)
    factor = data.draw(st.sampled_from([0.0, 0.3, 0.999, 1.0, 1.0 + 1e-12, 2.0, 1e3]), label="scale factor")
    scale = min(math.exp(max(log_sens - math.log(eps), -700)) * factor, 1e15)
    p = _cells_file(tmp_path_factory.mktemp("k") / "v.json", "hdmm", shape, eps,
                    {"kind": "kronecker-laplace", "scale": scale, "strategy": strategy})
    _check_claims(p, shape, eps)


def test_the_deviations_a_stranger_found_below_the_bound_are_not(tmp_path):
    """Files that loaded and reported a deviation below sqrt(2) / epsilon, each now either refused
    or at the bound: a query of two boxes whose cross terms cancel (1e7 against 0.01 in P), 22
    columns whose running product underflowed, a scale whose square underflowed, a sensitivity
    whose product underflowed to a floor of 0 (and a scale of 0 that then loaded); strategy
    entries below 1e-15 are now refused outright (a read-back past float64)."""
    P = np.array([[1e7, 0, 0.01], [0, 1.0, 0], [-1e7, 0, 0.01]])
    A = np.linalg.inv(P)
    sens = float(np.abs(A).sum(0).max())
    cases = [((3,), 1.0, sens, [A.tolist()]),
             ((1,) * 22, 1.0, 1.0, [[[1e15]]] * 11 + [[[1e-15]]] * 11),
             ((1,), 1e15, 1e-165, [[[1e-150]]]),
             ((1, 1), 1.0, 0.0, [[[1e-200]]] * 2),
             ((1,) * 44, 1.0, 0.0, [[[1e15]]] * 11 + [[[1e-15]]] * 33)]
    from certdp.views.viewfile import ViewFileError

    for i, (shape, eps, scale, strategy) in enumerate(cases):
        p = _cells_file(tmp_path / f"v{i}.json", "hdmm", shape, eps,
                        {"kind": "kronecker-laplace", "scale": scale, "strategy": strategy})
        if scale == 0.0 or any(0 < abs(x) < 1e-15 for a in strategy for row in a for x in row):
            with pytest.raises(ViewFileError, match="below sensitivity/epsilon|below 1e-15 in magnitude"):
                load_view(p)
            continue
        std = load_view(p).answer(_box_queries(shape)[:50])["std"].to_numpy()
        assert np.all(std >= math.sqrt(2) / eps * (1 - 1e-9)), (i, std.min())
    two = load_view(tmp_path / "v0.json").answer(["c0=0,2"])["std"].to_numpy()[0]
    assert two == pytest.approx(math.sqrt(2), rel=1e-6)      # its exact value: 2 b^2 ||P^T q||^2 = 2


@pytest.mark.parametrize("eps", [0.1, 1.0, 7.0, 1e15])
@pytest.mark.parametrize("method", ["identity", "hdmm"])
def test_a_scale_within_rounding_below_its_floor_reports_the_floor(tmp_path, method, eps):
    """A scale up to 1e-9 below sensitivity / epsilon loads (an honest builder's quotient, up to
    rounding), and its deviations are those of the floor itself: none below sqrt(2) / epsilon by
    more than float64 rounding (it was 5e-10 below with the recorded scale)."""
    shape = (3,)
    if method == "hdmm":
        strategy = [[[2.0, 0, 0], [0, 2.0, 0], [0, 0, 2.0]]]      # sensitivity 2; a cell's std is sqrt(2) b / 2
        model = {"kind": "kronecker-laplace", "scale": 2.0 / eps * (1 - 5e-10), "strategy": strategy}
    else:
        model = {"kind": "laplace", "scale": [1.0 / eps * (1 - 5e-10)] * 3}
    std = load_view(_cells_file(tmp_path / "v.json", method, shape, eps, model)).answer(_box_queries(shape))["std"]
    assert std.min() >= math.sqrt(2) / eps * (1 - 1e-14), (std.min() * eps / math.sqrt(2) - 1)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(c=st.floats(-6, 6), axis=st.integers(0, 1), rescale=st.booleans())
def test_a_rescaled_strategy_keeps_its_deviations_or_raises_them(tmp_path_factory, c, axis, rescale):
    """HDMM's own file with one strategy factor multiplied by 10^c: with the scale multiplied
    too, it loads and reports the same deviations (the sensitivity and the read-back move
    together); with the scale kept, a grown factor is refused (its sensitivity is above scale x
    epsilon) and a shrunk one reports larger deviations. No edit of the strategy shrinks a claim."""
    from certdp.views.viewfile import ViewFileError, content_digest

    t = CountTensor.from_frame(FRAME, ["x", "c"], DOMS)
    p = build_view(t, "hdmm", 0.5, rng=1).save(tmp_path_factory.mktemp("h") / "h.json")
    d = json.loads(p.read_text())
    queries = ["x=10..30 c=A,C", "c=B", "x=40"]
    before = load_view(p).answer(queries)["std"].to_numpy()
    f = 10.0 ** c
    d["noise_model"]["strategy"][axis] = (np.asarray(d["noise_model"]["strategy"][axis]) * f).tolist()
    if rescale:
        d["noise_model"]["scale"] *= f
    d["digest"] = content_digest({k: v for k, v in d.items() if k != "digest"})
    p.write_text(json.dumps(d))
    if not rescale and f > 1 + 1e-6:
        with pytest.raises(ViewFileError, match="below sensitivity/epsilon"):
            load_view(p)
        return
    after = load_view(p).answer(queries)["std"].to_numpy()
    if rescale:
        assert np.allclose(after, before, rtol=1e-6)
    else:
        assert np.all(after >= before * (1 - 1e-9))


@pytest.mark.parametrize("method", ["ripost", "privtree", "hdpview", "identity", "hdmm", "dawa"])
@pytest.mark.parametrize("kind", ["laplace", "kronecker-laplace", None])
def test_a_noise_model_of_another_method_is_refused(tmp_path, method, kind):
    """Each block method's file carries the noise model that method writes (noise.NOISE_MODELS):
    a RIPOST file cannot borrow a Kronecker model, HDMM cannot claim per-leaf Laplace, no method
    that writes one can leave it out (null), and DAWA, which records none, cannot carry one."""
    from certdp.views.noise import NOISE_MODELS
    from certdp.views.viewfile import ViewFileError

    shape = (3, 2)
    model = ({"kind": "laplace", "scale": 1.0} if kind == "laplace" else None if kind is None else
             {"kind": "kronecker-laplace", "scale": 1.0, "strategy": [np.eye(n).tolist() for n in shape]})
    p = _cells_file(tmp_path / "v.json", method, shape, 1.0, model)
    if NOISE_MODELS[method] == kind:
        assert load_view(p).method == method
    else:
        with pytest.raises(ViewFileError, match="noise model"):
            load_view(p)


@pytest.mark.parametrize("model", [
    {"kind": "laplace", "scale": "1.0"}, {"kind": "laplace", "scale": [True] * 6},
    {"kind": "laplace", "scale": " 1e0 "},
    {"kind": "laplace", "scale": []}, {"kind": "laplace", "scale": 0.0}, {"kind": "laplace", "scale": -1.0},
    {"kind": "kronecker-laplace", "scale": -1.0, "strategy": [np.eye(3).tolist(), np.eye(2).tolist()]},
    {"kind": "kronecker-laplace", "scale": 1e-300, "strategy": [(np.eye(3) * 3e-309).tolist(), np.eye(2).tolist()]},
    {"kind": "kronecker-laplace", "scale": 2.0, "strategy": [[["1", "0", "0"], ["0", "1", "0"], ["0", "0", "1"]],
                                                             [[1, 0], [0, 1]]]},
    {"kind": "kronecker-laplace", "scale": 2.0, "strategy": [np.eye(3).tolist(), [[True, False], [False, True]]]},
    {"kind": "kronecker-laplace", "scale": 2.0, "strategy": [np.eye(3).tolist(), np.ones((5, 2)).tolist()]}])
def test_noise_numbers_are_json_numbers_of_the_right_shape(tmp_path, model):
    """Scales and strategy entries are JSON numbers (not strings numpy would parse, not
    booleans), scales positive, a strategy factor between n and 2 n rows."""
    from certdp.views.viewfile import ViewFileError

    method = "identity" if model["kind"] == "laplace" else "hdmm"
    with pytest.raises(ViewFileError):
        load_view(_cells_file(tmp_path / "v.json", method, (3, 2), 1.0, model))


def test_a_strategy_over_a_column_hdmm_would_refuse_is_refused(tmp_path):
    """A strategy's pseudo-inverse costs m n^2 (80 s at n = 4,000): a view file's strategy is held
    to the columns HDMM builds (noise.MAX_HDMM_AXIS), before any of that work."""
    from certdp.views.noise import MAX_HDMM_AXIS
    from certdp.views.viewfile import ViewFileError

    n = MAX_HDMM_AXIS + 1
    p = _cells_file(tmp_path / "v.json", "hdmm", (n,), 1.0, {"kind": "kronecker-laplace", "scale": 1.0,
                                                             "strategy": [np.eye(n).tolist()]})
    with pytest.raises(ViewFileError, match="at most 500 cells"):
        load_view(p)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(data=st.data())
def test_leaf_deviations_of_hand_built_workloads_match_the_cells(data):
    """A Workload built by hand (boxes anywhere, of any queries, overlapping, spanning leaves and
    restricting different axes within one query): each answer's variance is sum_l f_l^2 2 b_l^2
    with f_l the query's summed share of leaf l, counted cell by cell. (Grouping boxes by the
    axes each box restricts squared each group's share apart: a leaf tiled by three boxes of
    one query reported 1.0 where sqrt(2) is exact.)"""
    from certdp.views.view import Workload

    t = CountTensor.from_frame(FRAME, ["x", "c"], DOMS)
    v = build_view(t, "ripost", 0.3, rng=4)
    shape = v.shape
    n_q = data.draw(st.integers(1, 3))
    rows = data.draw(st.lists(st.tuples(*[st.tuples(st.integers(0, n - 1), st.integers(1, n)) for n in shape],
                                        st.integers(0, n_q - 1)), min_size=1, max_size=6))
    lo = np.asarray([[min(a, b - 1) for a, b in r[:-1]] for r in rows])
    hi = np.asarray([[max(a + 1, b) for a, b in r[:-1]] for r in rows])
    owner = np.asarray([r[-1] for r in rows])
    work = Workload(lo, hi, owner, n_q)
    got = v.std(work) ** 2
    scale = np.broadcast_to(v.noise.scale, (v.n_blocks,))
    cell_leaf = np.zeros(shape, dtype=np.int64)
    for l, (a, b) in enumerate(zip(v.lo, v.hi)):
        cell_leaf[tuple(slice(x, y) for x, y in zip(a, b))] = l
    vol = np.prod(v.hi - v.lo, axis=1)
    want = np.zeros(n_q)
    for q in range(n_q):
        share = np.zeros(v.n_blocks)
        for a, b in zip(lo[owner == q], hi[owner == q]):
            share += np.bincount(cell_leaf[tuple(slice(x, y) for x, y in zip(a, b))].ravel(), minlength=v.n_blocks)
        share /= vol
        want[q] = float(np.sum(share ** 2 * 2 * scale ** 2))
    assert np.allclose(got, want, rtol=1e-9, atol=1e-12)


def test_a_query_of_many_boxes_over_many_columns_is_refused_before_it_is_built():
    """The boxes a call may expand to shrink with the columns (view.MAX_QUERY_ENTRIES box
    coordinates): 983,040 boxes over 60 columns held 4.8 GB."""
    from certdp.views.view import MAX_QUERY_ENTRIES, Workload

    doms = [Domain.categorical(f"c{i}", ["a", "b", "c", "d"]) for i in range(60)]
    query = " ".join(f"c{i}=a,c" for i in range(19))                       # 2^19 = 524,288 boxes
    with pytest.raises(ValueError, match=f"more than {MAX_QUERY_ENTRIES // 60:,} boxes over 60 columns"):
        Workload.parse(doms, [query])
    assert Workload.parse(doms[:4], ["c0=a,c c1=a,c c2=b,d"]).lo.shape == (8, 4)
