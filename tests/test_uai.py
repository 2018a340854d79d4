"""Paper 002: OPTMech, ConstOPTMech, SpannerMech, Madlib / planar Laplace, epsilon_tight and
the packing lower bound, each against an independent computation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from scipy.sparse.csgraph import shortest_path
from scipy.spatial.distance import cdist
from scipy.stats import gamma, kstest

from scaledp import Space
from scaledp.audit import worst_case_loss
from scaledp.cli import main
from scaledp.datasets import build_space, clustered_vocabulary, gaussian, planar
from scaledp.lp.highs import INF, HighsLP
from scaledp.mechanisms.constopt import (LPTimeLimitError, assemble_constopt, constopt_mechanism, nearest_outputs,
                                         weighted_exponential_mechanism)
from scaledp.mechanisms.exponential import exponential_mechanism
from scaledp.mechanisms.noise import NoiseMechanism, estimate_noise_mechanism, laplace_noise
from scaledp.mechanisms.optimal import optmech, solve_pmo
from scaledp.mechanisms.spanner import greedy_spanner, spanner_mechanism
from scaledp.metrics import _pair_tight, epsilon_tight, packing_lower_bound


def metric_space(n: int, dim: int = 2, eps: float = 2.0, seed: int = 0) -> Space:
    """Paper 002's setting: outputs = records, loss = distance, every pair protected."""
    return build_space(gaussian(n, dim, seed=seed), epsilon=eps, eta=math.inf)


# ------------------------------------------------------------------ OPTMech
def naive_mdp_rows(u: int, n: int, K: int, nv: int, eps: float, D: np.ndarray, A: list, b: list) -> None:
    """Append every mDP row of record u (Eq. 2, all v != u, all outputs w) to A, b."""
    for v in range(n):
        if v == u:
            continue
        for w in range(K):
            row = np.zeros(nv)
            row[u * K + w] = 1.0
            row[v * K + w] = -math.exp(eps * D[u, v])
            A.append(row)
            b.append(0.0)


def naive_optmech(space: Space) -> float:
    """The worst-case LP written out with every constraint, solved by scipy's linprog."""
    n, K = space.n_records, space.n_outputs
    D = space.distance_rows()
    nv = n * K + 1
    A, b = [], []
    for u in range(n):
        naive_mdp_rows(u, n, K, nv, space.epsilon, D, A, b)
        row = np.zeros(nv)
        row[u * K:(u + 1) * K] = space.cost[u]
        row[-1] = -1.0
        A.append(row)
        b.append(0.0)
    Aeq = np.zeros((n, nv))
    for u in range(n):
        Aeq[u, u * K:(u + 1) * K] = 1.0
    c = np.zeros(nv)
    c[-1] = 1.0
    res = linprog(c, A_ub=np.array(A), b_ub=b, A_eq=Aeq, b_eq=np.ones(n), bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_optmech_matches_the_naive_lp_and_beats_the_others(seed):
    s = metric_space(7, seed=seed)
    r = optmech(s)
    assert r.objective == "worst"
    assert r.upper_bound == pytest.approx(naive_optmech(s), rel=1e-6)
    assert r.lower_bound <= r.upper_bound and r.gap < 1e-6
    others = [solve_pmo(s).mechanism, exponential_mechanism(s).mechanism, constopt_mechanism(s, r=2).mechanism,
              spanner_mechanism(s, delta=1.5).mechanism]
    for m in others:
        assert worst_case_loss(m.matrix, s.cost) >= r.upper_bound - 1e-7


def test_worst_objective_is_refused_by_benders():
    with pytest.raises(ValueError, match="objective"):
        solve_pmo(metric_space(6), method="benders", objective="worst")


# ------------------------------------------------------------------ ConstOPTMech
def naive_constopt_value(space: Space, r: int, lam: float) -> float:
    """The LP of Algorithm 1 written with every mDP constraint (2) and every equality (4)."""
    n, K = space.n_records, space.n_outputs
    eps = space.epsilon / 2
    D = space.distance_rows()
    F = nearest_outputs(D, r)
    free = np.zeros((n, K), bool)
    free[np.repeat(np.arange(n), r), F.reshape(-1)] = True
    nv = n * K + K + 1      # M, Y, k
    A, b, Aeq, beq = [], [], [], []
    for u in range(n):
        naive_mdp_rows(u, n, K, nv, eps, D, A, b)
        for w in range(K):
            if not free[u, w]:
                row = np.zeros(nv)
                row[u * K + w] = 1.0
                row[n * K + w] = -math.exp(-eps * D[u, w])
                Aeq.append(row)
                beq.append(0.0)
        row = np.zeros(nv)
        row[u * K:(u + 1) * K] = -1.0
        A.append(row)
        b.append(-1.0)
        row = np.zeros(nv)
        row[u * K:(u + 1) * K] = space.cost[u] + lam
        row[-1] = -1.0
        A.append(row)
        b.append(lam)
    c = np.zeros(nv)
    c[-1] = 1.0
    res = linprog(c, A_ub=np.array(A), b_ub=b, A_eq=np.array(Aeq), b_eq=beq, bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize("r,lam", [(1, 0.1), (3, 0.001), (5, 1.0)])
def test_constopt_reduced_lp_equals_the_paper_lp(r, lam):
    s = metric_space(8, seed=r)
    lp = assemble_constopt(s, r, lam, s.epsilon / 2)
    sol = HighsLP(lp.c, lp.A, lp.row_lower, lp.row_upper, np.zeros(lp.n_vars), np.full(lp.n_vars, INF)).solve()
    assert sol.objective == pytest.approx(naive_constopt_value(s, r, lam), rel=1e-7)
    # Theorem 1: variables exactly, constraints and non-zeros at most its bounds
    assert lp.counts["variables"] == lp.counts["theorem1_variables"]
    assert lp.counts["constraints"] <= lp.counts["theorem1_constraints"]
    assert lp.counts["nonzeros"] <= lp.counts["theorem1_nonzeros"]


def test_constopt_sweep_returns_the_best_lambda_and_is_epsilon_mdp():
    s = metric_space(15, seed=4)
    res = constopt_mechanism(s, r=4, lambdas=[0.001, 0.1, 1.0])
    losses = [row["worst_case_loss"] for row in res.stats["sweep"]]
    assert len(losses) == 3
    assert res.upper_bound == pytest.approx(min(losses), rel=1e-6)
    assert res.mechanism.verification.passed
    assert res.upper_bound >= optmech(s).upper_bound - 1e-7


def test_weighted_exponential_mechanism_fixes_the_black_hole():
    """Lemma 1's example: one outlier at distance 1 from a tight cluster."""
    n = 12
    pts = np.vstack([[0.0, 0.0], 1.0 + 1e-3 * np.random.default_rng(0).random((n - 1, 2))])
    pts[1:, 1] = 0.0
    pts[1:, 0] = 1.0 + 1e-3 * np.arange(n - 1)
    s = build_space(planar(pts), epsilon=4.0, eta=math.inf)
    plain = worst_case_loss(exponential_mechanism(s).mechanism.matrix, s.cost)
    Y = np.r_[1.0, np.full(n - 1, 1.0 / (n - 1))]
    weighted = weighted_exponential_mechanism(s, Y)
    assert weighted.mechanism.verification.passed
    assert weighted.upper_bound < plain


# ------------------------------------------------------------------ SpannerMech
@given(st.integers(0, 10_000), st.floats(1.0, 3.0))
@settings(max_examples=25, deadline=None)
def test_greedy_spanner_stretch(seed, delta):
    pts = np.random.default_rng(seed).random((25, 2))
    D = cdist(pts, pts)
    E, w = greedy_spanner(D, delta)
    G = np.zeros_like(D)
    G[E[:, 0], E[:, 1]] = w
    P = shortest_path(G, directed=False)
    off = ~np.eye(25, dtype=bool)
    assert np.all(P[off] <= delta * D[off] * (1 + 1e-9))
    assert len(E) <= 25 * 24 // 2


def test_spanner_with_stretch_one_is_optmech():
    s = metric_space(9, seed=3)
    assert spanner_mechanism(s, delta=1.0).upper_bound == pytest.approx(optmech(s).upper_bound, rel=1e-6)


# ------------------------------------------------------------------ Madlib / planar Laplace
@pytest.mark.parametrize("rng", [None, 5])
@pytest.mark.parametrize("dim", [2, 7])
def test_noise_radius_is_gamma_and_direction_uniform(rng, dim):
    eps = 1.7
    z = laplace_noise(4000, dim, eps, rng)
    assert kstest(np.linalg.norm(z, axis=1), gamma(a=dim, scale=1 / eps).cdf).pvalue > 1e-3
    u = z / np.linalg.norm(z, axis=1, keepdims=True)
    assert np.all(np.abs(u.mean(axis=0)) < 5 / math.sqrt(4000))
    if dim == 2:
        ang = (np.arctan2(u[:, 1], u[:, 0]) + math.pi) / (2 * math.pi)
        assert kstest(ang, "uniform").pvalue > 1e-3


def test_monte_carlo_estimate_has_honest_standard_errors():
    s = build_space(gaussian(20, 2, seed=1), epsilon=2.0, eta=math.inf)
    small = estimate_noise_mechanism(s, "laplace", draws=400, seed=1)
    big = estimate_noise_mechanism(s, "laplace", draws=40_000, seed=2)
    assert np.allclose(small.matrix.sum(axis=1), 1.0)
    assert small.expected_loss_se > 0 and small.quantile_loss_se > 0 and small.worst_case_loss_se > 0
    assert abs(small.expected_loss - big.expected_loss) < 5 * small.expected_loss_se
    # the release path samples the same distribution
    m = NoiseMechanism(s, "laplace")
    outs = m.perturb(np.zeros(20_000, dtype=np.int64), rng=3)
    freq = np.bincount(outs, minlength=s.n_outputs) / len(outs)
    assert np.max(np.abs(freq - big.matrix[0])) < 0.02


# ------------------------------------------------------------------ epsilon_tight
def brute_tight(Mu, Mv, delta):
    if Mu[Mv == 0].sum() > delta:
        return math.inf
    lo, hi = 0.0, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if np.maximum(Mu - mid * Mv, 0).sum() <= delta else (mid, hi)
    return hi


@given(st.integers(0, 10_000), st.sampled_from([1e-3, 0.05, 0.3]))
@settings(max_examples=60, deadline=None)
def test_pair_tightness_matches_bisection(seed, delta):
    rng = np.random.default_rng(seed)
    K = int(rng.integers(2, 9))
    Mu, Mv = rng.dirichlet(np.ones(K)), rng.dirichlet(np.ones(K))
    if seed % 3 == 0:
        Mv[rng.integers(K)] = 0
        Mv /= Mv.sum()
    if seed % 5 == 0:
        Mu = Mv.copy()
    t = _pair_tight(Mu[None], Mv[None], delta)[0]
    b = brute_tight(Mu, Mv, delta)
    assert (math.isinf(t) and math.isinf(b)) or t == pytest.approx(b, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("p,delta", [(0.9, 1e-3), (0.7, 0.05), (0.99, 0.01)])
def test_epsilon_tight_randomised_response_closed_form(p, delta):
    M = np.array([[p, 1 - p], [1 - p, p]])
    D = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert epsilon_tight(M, D, delta) == pytest.approx(math.log((p - delta) / (1 - p)), rel=1e-9)


def test_epsilon_tight_of_an_exact_mechanism_is_at_most_its_epsilon():
    s = metric_space(30, seed=2, eps=1.5)
    m = exponential_mechanism(s).mechanism
    et = epsilon_tight(m.matrix, s.distance_rows(), 1e-3)
    assert 0 < et <= 1.5 + 1e-9


# ------------------------------------------------------------------ lower bound
@given(st.integers(0, 10_000), st.floats(0.5, 6.0))
@settings(max_examples=12, deadline=None)
def test_packing_bound_never_exceeds_the_optimum(seed, eps):
    s = metric_space(8, seed=seed, eps=eps)
    lb = packing_lower_bound(s)
    assert 0 <= lb.bound <= optmech(s).upper_bound + 1e-9


def test_packing_bound_two_point_closed_form():
    """Two records at distance L with outputs = records: the output sets {s} stay disjoint up to
    r = L, N = 1 + exp(-eps L), so the bound is L / (1 + exp(eps L)): exactly the loss of the
    optimal randomised response."""
    s = build_space(planar(np.array([[0.0, 0.0], [2.0, 0.0]])), epsilon=1.0, eta=math.inf)
    lb = packing_lower_bound(s)
    L = 2.0
    assert lb.bound == pytest.approx(L * (1 - 1 / (1 + math.exp(-L))), rel=1e-12)
    assert lb.bound == pytest.approx(optmech(s).upper_bound, rel=1e-7)


# ------------------------------------------------------------------ data
def test_clustered_vocabulary_is_distinct_and_seeded():
    X = np.random.default_rng(0).random((300, 5))
    a = clustered_vocabulary(X, 60, seed=3)
    assert len(a) == 60 and len(set(a.tolist())) == 60
    assert np.array_equal(a, clustered_vocabulary(X, 60, seed=3))


# ------------------------------------------------------------------ bad input and CLI
@pytest.mark.parametrize("call,match", [
    (lambda s: constopt_mechanism(s, r=0), "r must be"),
    (lambda s: constopt_mechanism(s, r=10), "r must be"),
    (lambda s: constopt_mechanism(s, r=2, lambdas=[]), "lambdas"),
    (lambda s: constopt_mechanism(s, r=2, lambdas=[0.1, -1.0]), "lambdas"),
    (lambda s: spanner_mechanism(s, delta=0.5), "delta"),
    (lambda s: estimate_noise_mechanism(s, "laplace", draws=0), "draws"),
    (lambda s: epsilon_tight(np.eye(10), s.distance_rows(), 0.0), "delta"),
    (lambda s: epsilon_tight(np.eye(10), s.distance_rows(), 1.0), "delta"),
    (lambda s: estimate_noise_mechanism(s, "laplace", q=1.5), "q must"),
    (lambda s: NoiseMechanism(build_space(gaussian(10, 3, seed=0), epsilon=1.0, eta=math.inf), "laplace"),
     "2-D"),
])
def test_bad_input_names_the_argument(call, match):
    s = metric_space(10)
    with pytest.raises((ValueError, TypeError), match=match):
        call(s)


def test_madlib_refuses_latitude_longitude():
    from scaledp.datasets import latlon
    ll = np.column_stack([60.1 + 0.01 * np.arange(5), 24.9 + 0.01 * np.arange(5)])
    s = build_space(latlon(ll), epsilon=1.0, eta=math.inf)
    with pytest.raises(ValueError, match="euclidean"):
        NoiseMechanism(s, "madlib")


def test_time_limit_returns_no_mechanism():
    s = metric_space(60, seed=1)
    with pytest.raises(LPTimeLimitError):
        constopt_mechanism(s, r=10, time_limit=1e-4)


def test_cli_compare_and_solve(tmp_path):
    r = CliRunner().invoke(main, ["compare", "--dataset", "gaussian:12:2", "--epsilon", "2", "--seed", "1",
                                  "--methods", "expmech,optmech,constopt,spanner,laplace", "--r", "3",
                                  "--draws", "200", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    rows = {row["method"]: row for row in data["rows"]}
    assert set(rows) == {"expmech", "optmech", "constopt", "spanner", "laplace"}
    assert rows["optmech"]["worst_case_loss"] <= min(rows[m]["worst_case_loss"] for m in rows) + 1e-9
    assert data["packing_lower_bound"] <= rows["optmech"]["worst_case_loss"]
    r = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "2", "--eta", "inf",
                                  "--method", "constopt", "--r", "3", "--lambdas", "0.1,1", "--seed", "1",
                                  "--out", str(tmp_path / "c.npz"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["audit_passed"] is True
    r = CliRunner().invoke(main, ["audit", str(tmp_path / "c.npz")])
    assert r.exit_code == 0
    r = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "2", "--eta", "inf",
                                  "--method", "madlib", "--out", str(tmp_path / "m.npz")])
    assert r.exit_code == 2 and "Monte Carlo" in r.output
    r = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "2", "--eta", "inf",
                                  "--method", "constopt", "--lambdas", "0.1,-2"])
    assert r.exit_code == 2 and "lambdas" in r.output
