"""RIPOST, its competitors, block scoring, views and queries (paper 004)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare, kstest
from scipy.stats import laplace as laplace_dist

from scaledp.cli import main
from scaledp.experiments.views import compare_views, share_converged_with_error
from scaledp.views import PrivacyBudget, exponential_choice
from scaledp.views.blocks import aggregation_error, cut_scores
from scaledp.views.build import build_view
from scaledp.views.competitors import hdpview, identity, privtree
from scaledp.views.ripost import DepthSeries, ripost
from scaledp.views.tensor import CountTensor, Domain
from scaledp.views.view import BlockView, Workload, answer_boxes, rmse, true_answers

from ..conftest import shared_file


def _tensor(rng: np.random.Generator, shape=(6, 5, 4), density=0.3, max_count=20) -> CountTensor:
    dense = (rng.random(shape) < density) * rng.integers(1, max_count + 1, size=shape)
    if dense.sum() == 0:
        dense.flat[0] = 1
    doms = tuple(Domain.numeric(f"x{i}", 0, s, s) for i, s in enumerate(shape))
    coords = np.argwhere(dense > 0)
    return CountTensor(doms, coords.astype(np.int64), dense[dense > 0].astype(np.int64))


def _dense(t: CountTensor) -> np.ndarray:
    d = np.zeros(t.shape)
    d[tuple(t.coords.T)] = t.counts
    return d


def _ae(a: np.ndarray) -> float:
    return float(np.abs(a - a.mean()).sum()) if a.size else 0.0


# ------------------------------------------------------------------ blocks and scores

@given(st.integers(0, 10_000))
@settings(max_examples=120, deadline=None)
def test_cut_scores_match_brute_force(seed):
    """Every cut's Min and AE score equals the score computed on the dense sub-array."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 4))
    shape = rng.integers(1, 6, size=d)
    dense = (rng.random(shape) < rng.random()) * rng.integers(1, 6, size=shape)
    lo = np.array([rng.integers(0, s) for s in shape])
    hi = np.array([rng.integers(a + 1, s + 1) for a, s in zip(lo, shape)])
    sub = dense[tuple(slice(a, b) for a, b in zip(lo, hi))]
    coords = np.argwhere(sub > 0) + lo
    x = sub[sub > 0]
    assert aggregation_error(x.astype(float), sub.size) == pytest.approx(_ae(sub), abs=1e-9)
    for metric in ("min", "ae"):
        axes, pos, sc = cut_scores(coords, x, lo, hi, metric)
        assert axes.size == int(np.sum(hi - lo - 1))
        for a, p, s in zip(axes, pos, sc):
            j = p - lo[a]
            left = np.take(sub, range(0, j), axis=a)
            right = np.take(sub, range(j, sub.shape[a]), axis=a)
            if metric == "ae":
                ref = -(_ae(left) + _ae(right))
            else:
                mn = lambda b: min(int((b > 0).sum()), int((b == 0).sum()))  # noqa: E731
                ref = -min(mn(left), mn(right))
            assert s == pytest.approx(ref, abs=1e-9)


def test_ae_of_huge_sparse_block_is_exact():
    # 10^18 cells, three non-zero: AE = 2 (S - n S / V) (the empty cells hold the mean)
    x = np.array([1.0, 2.0, 5.0])
    V = 1e18
    assert aggregation_error(x, V) == pytest.approx(2 * (8 - 3 * 8 / V))


# ------------------------------------------------------------------ the depth-free series

@pytest.mark.parametrize("k,os", [(1, 1), (2, 2), (4, 4), (3, 7)])
def test_series_weights_sum_within_one(k, os):
    s = DepthSeries(k, os)
    partial = sum(Fraction(k, (i + os) * (i + os + 1)) for i in range(1, 5000))
    assert partial < Fraction(k, os + 1) <= 1
    assert s.total == pytest.approx(k / (os + 1))
    assert s.weight(1) == pytest.approx(k / ((1 + os) * (2 + os)))
    assert s.weight(10) < s.weight(2)


@pytest.mark.parametrize("k,os,match", [(0, 1, "k"), (3, 2, "os"), (2, -1, "os")])
def test_series_bad_parameters(k, os, match):
    with pytest.raises(ValueError, match=match):
        DepthSeries(k, os)


# ------------------------------------------------------------------ budget: never overspent

@given(st.integers(0, 10_000), st.floats(0.01, 5.0), st.floats(0.05, 0.95), st.floats(0.05, 0.95),
       st.floats(0.05, 0.95), st.integers(1, 4), st.integers(0, 3))
@settings(max_examples=60, deadline=None)
def test_ripost_never_overspends(seed, eps, alpha, gamma, beta, k, extra):
    """Many tensors and parameters: the exact largest path sum of the charges stays within
    epsilon, the leaves partition the domain, and every leaf was perturbed."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 7, size=int(rng.integers(1, 4))))
    t = _tensor(rng, shape, float(rng.random()), 30)
    v = ripost(t, eps, alpha, gamma, beta, k=k, os=k + extra, rng=rng)
    assert Fraction(v.spent) <= Fraction(eps)
    v.check()
    assert v.ledger["leaf perturbation"] > 0
    assert v.n_blocks == int(v.ledger["leaf perturbation"] / (eps * (1 - alpha)) + 0.5)


@given(st.integers(0, 10_000), st.floats(0.01, 5.0))
@settings(max_examples=30, deadline=None)
def test_competitors_never_overspend(seed, eps):
    rng = np.random.default_rng(seed)
    t = _tensor(rng, tuple(int(s) for s in rng.integers(1, 6, size=3)), float(rng.random()))
    for v in (privtree(t, eps, rng=rng), privtree(t, eps, fanout="binary", rng=rng), hdpview(t, eps, rng=rng)):
        assert Fraction(v.spent) <= Fraction(eps)
        v.check()


def test_leaf_noise_is_laplace_of_the_leaf_budget():
    """Noisy leaf value minus the true leaf sum is Laplace(1 / eps_p) (KS over many leaves)."""
    rng = np.random.default_rng(5)
    t = _tensor(rng, (12, 12), 0.5, 40)
    dense = _dense(t)
    resid = []
    for _ in range(40):
        v = ripost(t, 1.0, alpha=0.3, rng=rng)
        sums = np.array([dense[tuple(slice(a, b) for a, b in zip(lo, hi))].sum() for lo, hi in zip(v.lo, v.hi)])
        resid.extend(v.values - sums)
    assert kstest(resid, laplace_dist(scale=1 / 0.7).cdf).pvalue > 1e-3


def test_opendp_exponential_choice_frequencies():
    """The secure path (OpenDP Gumbel noisy max) samples the exponential mechanism."""
    b = PrivacyBudget(1e9)
    scores = np.array([0.0, 1.0, 3.0])
    n = 3000
    got = np.bincount([exponential_choice(scores, 1.0, 1.0, b.root) for _ in range(n)], minlength=3)
    p = np.exp(scores / 2)
    p /= p.sum()
    assert chisquare(got, n * p).pvalue > 1e-4


# ------------------------------------------------------------------ views and queries

def test_view_answers_match_dense_sums():
    """With exact leaf sums, a query that is a union of whole leaves is answered exactly, and
    any query equals the uniform spread computed cell by cell."""
    rng = np.random.default_rng(2)
    t = _tensor(rng, (7, 6, 5), 0.4)
    dense = _dense(t)
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


def test_identity_answers_with_summed_area_table():
    rng = np.random.default_rng(8)
    t = _tensor(rng, (5, 4, 3), 0.5)
    v = identity(t, 1.0, rng=1)
    w = Workload.random(t.shape, 200, 3, rng=2)
    ref = [v.noisy[tuple(slice(a, b) for a, b in zip(lo, hi))].sum() for lo, hi in zip(w.lo, w.hi)]
    assert np.allclose(v.answer(w), ref)
    with pytest.raises(ValueError, match="max_cells"):
        identity(t, 1.0, max_cells=10)


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
    t = _tensor(rng)
    v = ripost(t, 0.5, rng=2)
    p = v.save(tmp_path / "v.json")
    u = BlockView.load(p)
    w = Workload.random(t.shape, 100, 2, rng=3)
    assert np.array_equal(u.answer(w), v.answer(w))
    assert u.spent == v.spent and u.params["k"] == 4 and u.columns == t.columns
    (tmp_path / "bad.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a"):
        BlockView.load(tmp_path / "bad.json")
    d = v.to_dict()
    d["values"] = d["values"][:-1]
    (tmp_path / "short.json").write_text(json.dumps(d))
    with pytest.raises(ValueError, match="inconsistent"):
        BlockView.load(tmp_path / "short.json")


@pytest.mark.parametrize("kw,match", [
    (dict(epsilon=0.0), "epsilon"), (dict(epsilon=-1.0), "epsilon"), (dict(alpha=0.0), "alpha"),
    (dict(alpha=1.0), "alpha"), (dict(gamma=1.5), "gamma"), (dict(beta=-0.1), "beta"), (dict(k=0), "k"),
    (dict(k=3, os=2), "os"),
])
def test_ripost_bad_input(kw, match):
    t = _tensor(np.random.default_rng(0))
    with pytest.raises(ValueError, match=match):
        ripost(t, **kw)


def test_build_view_refuses_unknown_parameter():
    t = _tensor(np.random.default_rng(0))
    with pytest.raises(ValueError, match="does not take"):
        build_view(t, "ripost", 0.1, 1, alhpa=0.3)
    with pytest.raises(ValueError, match="method"):
        build_view(t, "dawa", 0.1, 1)


def test_compare_views_and_convergence_share():
    rng = np.random.default_rng(4)
    t = _tensor(rng, (8, 8), 0.3, 50)
    rows, w, skipped = compare_views(t, ["ripost", "privtree", "identity"], 1.0, 200, 2, 2, rng=1)
    assert skipped == {}
    assert [r.method for r in rows] == ["ripost", "privtree", "identity"]
    assert rows[0].relative == 1.0 and all(r.rmse_mean > 0 for r in rows)
    v = ripost(t, 1.0, rng=2)
    share = share_converged_with_error(v, t)
    dense = _dense(t)
    ref = np.mean([_ae(dense[tuple(slice(a, b) for a, b in zip(lo, hi))]) > 0 for lo, hi in zip(v.lo, v.hi)])
    assert share == pytest.approx(ref)
    assert rmse(np.array([1.0, 3.0]), np.array([1.0, 1.0])) == pytest.approx(np.sqrt(2))


def test_ripost_separates_empty_region():
    """With a generous budget, a tensor whose records sit in one corner gets its empty region
    in few blocks and its data region answered accurately (the point of phase 1)."""
    dense = np.zeros((32, 32), dtype=np.int64)
    dense[:4, :4] = 50
    doms = (Domain.numeric("a", 0, 32, 32), Domain.numeric("b", 0, 32, 32))
    coords = np.argwhere(dense > 0)
    t = CountTensor(doms, coords, dense[dense > 0])
    w = Workload.random(t.shape, 500, 2, rng=0)
    errs = [rmse(ripost(t, 50.0, rng=s).answer(w), true_answers(t, w)) for s in range(3)]
    uniform = rmse(np.full(500, 0.0) + answer_boxes(np.zeros((1, 2), int), np.array([[32, 32]]),
                                                    np.array([800.0]), t.shape, w), true_answers(t, w))
    assert np.mean(errs) < 0.1 * uniform


# ------------------------------------------------------------------ real data and CLI

ADULT_COLS = ["age", "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
              "capital-gain", "capital-loss", "hours-per-week", "native-country", "income", "education-num"]


def test_adult_fourteen_columns():
    from scaledp.views import adult

    data = shared_file("adult", "adult.data")
    doms = adult.domains(data.with_name("adult.names"))
    df = adult.read(data)
    t = CountTensor.from_frame(df, ADULT_COLS, {c: doms[c] for c in ADULT_COLS}, overflow="bin")
    assert t.domain_size > 10 ** 16 and t.total == len(df)
    v = ripost(t, 0.1, rng=0)
    v.check()
    assert Fraction(v.spent) <= Fraction(0.1)
    w = Workload.parse(v.domains, ["sex=Female", "age=17..30 income=>50K"])
    ans = v.answer(w)
    assert np.all(np.isfinite(ans))


def _write_table(path, n=400, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n), "sex": rng.choice(["F", "M"], n),
                       "city": rng.choice(["A", "B", "C"], n)})
    df.to_csv(path, index=False)
    doms = {"age": {"low": 0, "high": 100, "bins": 20}, "sex": {"values": ["F", "M"]}, "city": {"values": ["A", "B", "C"]}}
    return df, doms


def test_cli_build_query_compare(tmp_path):
    table = tmp_path / "t.csv"
    df, doms = _write_table(table)
    (tmp_path / "d.json").write_text(json.dumps(doms))
    r = CliRunner()
    res = r.invoke(main, ["view", "build", str(table), "--columns", "age,sex,city", "--domains", str(tmp_path / "d.json"),
                          "--epsilon", "1", "--out", str(tmp_path / "v.json"), "--json", "--seed", "3"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["spent"] <= 1.0 and info["blocks"] >= 1
    res = r.invoke(main, ["view", "query", str(tmp_path / "v.json"), "age=20..40 sex=F", "city=A,C", "--json"])
    assert res.exit_code == 0, res.output
    answers = json.loads(res.output)
    assert [a["query"] for a in answers] == ["age=20..40 sex=F", "city=A,C"]
    res = r.invoke(main, ["view", "compare", str(table), "--columns", "age,sex", "--domains", str(tmp_path / "d.json"),
                          "--epsilon", "1", "--reps", "2", "--queries", "100", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["rows"]
    assert {row["method"] for row in rows} == {"ripost", "hdpview", "privtree", "identity"}


@pytest.mark.parametrize("args,match", [
    (["--columns", "age,height"], "height"),
    (["--columns", "age,sex", "--epsilon", "0"], "epsilon"),
    (["--columns", "age,sex", "--alpha", "1.2"], "alpha"),
    (["--columns", "age,sex", "--k", "3", "--os", "1"], "os"),
])
def test_cli_bad_input_writes_nothing(tmp_path, args, match):
    table = tmp_path / "t.csv"
    _, doms = _write_table(table)
    (tmp_path / "d.json").write_text(json.dumps(doms))
    out = tmp_path / "v.json"
    res = CliRunner().invoke(main, ["view", "build", str(table), "--domains", str(tmp_path / "d.json"), "--out", str(out),
                                    *args])
    assert res.exit_code == 2 and match in res.output
    assert not out.exists()


def test_cli_refuses_undeclared_domain_and_out_of_domain_values(tmp_path):
    table = tmp_path / "t.csv"
    _write_table(table)
    (tmp_path / "d.json").write_text(json.dumps({"age": {"low": 0, "high": 50, "bins": 10}, "sex": {"values": ["F", "M"]}}))
    r = CliRunner()
    res = r.invoke(main, ["view", "build", str(table), "--columns", "age,sex,city", "--domains", str(tmp_path / "d.json"),
                          "--out", str(tmp_path / "v.json")])
    assert res.exit_code == 2 and "city" in res.output
    res = r.invoke(main, ["view", "build", str(table), "--columns", "age,sex", "--domains", str(tmp_path / "d.json"),
                          "--out", str(tmp_path / "v.json")])
    assert res.exit_code == 2 and "outside the declared domain" in res.output
    res = r.invoke(main, ["view", "build", str(table), "--columns", "age,sex", "--domains", str(tmp_path / "d.json"),
                          "--overflow", "bin", "--out", str(tmp_path / "v.json"), "--seed", "1"])
    assert res.exit_code == 0, res.output
    res = r.invoke(main, ["view", "query", str(tmp_path / "v.json"), "weight=3"])
    assert res.exit_code == 2 and "unknown column" in res.output
