"""The decomposition over outputs: exact within the requested gap, rigorous bound, certified."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp import build_space, solve
from certdp.datasets import gaussian, grid
from certdp.graph import MDPGraph
from certdp.pmo.outputs.config import EXACT_TOLERANCE, SECOND_PASS_WORK, UPPER_NEAR, OutputsConfig
from certdp.pmo.outputs.pricing import ThreadPricer, cone_rows
from certdp.pmo.outputs.solve import PricingLoop, solve_outputs

from ..mechanism_checks import check_exact_mdp, check_probabilities, check_sampling, check_save_load


@pytest.fixture(scope="module", params=["grid-travel", "gauss-disconnected"])
def case(request):
    if request.param == "grid-travel":
        space = build_space(grid(5, 6, 1.0), epsilon=1.0, eta=1.5, n_outputs=8, cost="travel", seed=3)
    else:  # eta small enough that the mDP graph falls apart into several components
        space = build_space(gaussian(40, 2, seed=2), epsilon=1.0, eta=0.45, n_outputs=10, cost="distance", seed=4)
    return space, solve(space).upper_bound


def test_reaches_the_monolithic_optimum_within_the_gap(case):
    space, optimum = case
    hist = []
    res = solve_outputs(space, gap=1e-4, progress=lambda e: hist.append(e.record))
    assert res.status == "optimal"
    assert res.mechanism.verification.passed
    assert res.lower_bound <= optimum * (1 + 1e-7) + 1e-12          # the bound is rigorous
    assert optimum * (1 - 1e-7) <= res.upper_bound <= optimum * (1 + 1e-4) + 1e-12
    assert res.gap <= 1e-4
    lbs = [h["lower_bound"] for h in hist]
    assert lbs == sorted(lbs)                                       # best bound so far
    for h in hist:
        assert h["lower_bound"] <= h["upper_bound"] * (1 + 1e-7) + 1e-12


def test_the_disconnected_case_really_is_disconnected():
    space = build_space(gaussian(40, 2, seed=2), epsilon=1.0, eta=0.45, n_outputs=10, cost="distance", seed=4)
    assert MDPGraph.from_space(space).components[0] > 1


def test_common_mechanism_checks_and_method_dispatch(case, tmp_path):
    space, optimum = case
    res = solve(space, method="outputs", gap=1e-3)
    assert res.method == "outputs"
    assert res.upper_bound <= optimum * (1 + 1e-3) + 1e-12
    m = res.mechanism
    check_probabilities(m.matrix)
    check_exact_mdp(m.matrix, m.epsilon, *space.neighbor_pairs)
    check_save_load(m, tmp_path)
    check_sampling(m)


def test_a_time_limit_still_returns_a_certified_mechanism_with_its_true_gap(case):
    space, optimum = case
    res = solve_outputs(space, gap=1e-9, max_iterations=1)
    assert res.status in ("iteration_limit", "optimal")
    assert res.mechanism.verification.passed
    assert res.upper_bound >= optimum * (1 - 1e-7)
    assert res.lower_bound <= optimum * (1 + 1e-7) + 1e-12
    assert np.isclose(res.gap, (res.upper_bound - res.lower_bound) / res.upper_bound)


def test_the_round_that_passes_the_cap_takes_an_upper_step(case, outputs_clock):
    space, optimum = case
    config = OutputsConfig(upper_every=50)     # no scheduled upper step after round 1's
    free: list = []
    solve_outputs(space, gap=1e-9, max_iterations=14, config=config, progress=lambda e: free.append(e.record))
    outputs_clock.now = 0.0     # the uncapped run read the clock too
    hist: list = []
    res = solve_outputs(space, gap=1e-9, time_limit=40, config=config, progress=lambda e: hist.append(e.record))
    hist, free = [h for h in hist if "upper_step" in h], [h for h in free if "upper_step" in h]
    assert res.status == "time_limit" and UPPER_NEAR < len(hist) < len(free)
    assert [h["upper_step"] for h in hist] == [True] + [False] * (len(hist) - 2) + [True]
    # the same rounds as without a cap; only the last one's upper bound is newer, and better
    assert [h["lower_bound"] for h in hist] == [h["lower_bound"] for h in free[:len(hist)]]
    assert hist[-1]["upper_bound"] < free[len(hist) - 1]["upper_bound"] == hist[-2]["upper_bound"]
    assert res.upper_bound == pytest.approx(hist[-1]["upper_bound"], rel=1e-12)
    assert res.mechanism.verification.passed and res.lower_bound <= optimum * (1 + 1e-7) + 1e-12


def test_a_step_fewer_than_upper_near_rounds_back_is_not_repeated_at_the_cap(case, outputs_clock):
    space, _ = case
    hist: list = []
    res = solve_outputs(space, gap=1e-9, time_limit=40, config=OutputsConfig(upper_every=4),
                        progress=lambda e: hist.append(e.record))
    rounds = [h for h in hist if "upper_step" in h]
    # steps at rounds 1, 5 and 9 (every 4); round 10 passes the cap, one round after a step
    assert res.status == "time_limit" and len(rounds) == 10
    assert [h["iteration"] for h in rounds if h["upper_step"]] == [1, 5, 9]


def test_the_result_does_not_depend_on_the_pricing_threads(case):
    space, _ = case
    one = solve_outputs(space, gap=1e-3, workers=1)
    two = solve_outputs(space, gap=1e-3, workers=2)
    assert one.iterations == two.iterations
    assert one.upper_bound == two.upper_bound and one.lower_bound == two.lower_bound
    assert np.array_equal(one.mechanism.matrix, two.mechanism.matrix)


def _loop(space, config=None):
    return PricingLoop(space, reduce=True, tolerance=1e-9, workers=1, executor="threads", scheduler=None,
                       config=config or OutputsConfig())


def test_the_master_is_solved_to_a_tenth_of_the_gap(case):
    cfg = OutputsConfig()
    EXACT_TOL, MASTER_TOL = EXACT_TOLERANCE, cfg.master_tolerance
    space, _ = case
    hist = []
    res = solve_outputs(space, gap=1e-4, progress=lambda e: hist.append(e.record))
    assert res.status == "optimal"
    assert hist[0]["master_tolerance"] == MASTER_TOL           # no upper bound yet
    for before, h in zip(hist, hist[1:]):
        assert EXACT_TOL <= h["master_tolerance"] <= max(EXACT_TOL, min(MASTER_TOL, cfg.gap_share * before["gap"]))


def test_a_loose_master_takes_fewer_steps_and_stays_near_the_optimum(case):
    space, _ = case
    d = _loop(space)
    # a wider box than the start's, so that some columns can enter and the interior-point
    # method has work to do (at the start's box every column of these cases is screened out)
    d.master.set_box(d.master.center, d.master.delta * 10)
    exact = d.master.solve(tol=1e-8).objective
    steps_exact = d.master.iterations
    loose = d.master.solve(tol=1e-2).objective
    assert 0 < d.master.iterations < steps_exact
    assert abs(loose - exact) <= 1e-2 * (1 + abs(exact))
    d.pricer.close()


def test_the_boxed_master_value_is_a_relaxation_of_the_free_master(case):
    """The value that decides whether a free-master solve can close the gap is never above
    the free master's own objective (over the same columns)."""
    space, _ = case
    d = _loop(space)
    lam = d.master.solve(tol=1e-8).duals
    cols = d.price(lam, smooth=False)[2]
    d.add(cols)
    center = d.master.center   # min_k c[i, k]: no column's reduced cost is negative there
    for f in (0.1, 1.0, 10.0):
        d.master.set_box(center, f * d.delta)
        boxed = d.master.solve(tol=1e-8)
        free = d.upper.free.solve(box=False)
        assert boxed.value <= free.objective * (1 + 1e-6) + 1e-9
    d.pricer.close()


def test_a_second_pricing_pass_brings_more_columns_and_stays_exact(case):
    space, optimum = case
    # only when nothing prices out: no first pass is ever productive enough
    one = solve_outputs(space, gap=1e-4, config=OutputsConfig(productive_share=np.inf))
    # every productive round: any first pass is productive and a second pass always cheap
    two = solve_outputs(space, gap=1e-4, config=OutputsConfig(productive_share=0.0))
    assert two.status == "optimal" and two.mechanism.verification.passed
    assert two.lower_bound <= optimum * (1 + 1e-7) + 1e-12
    assert optimum * (1 - 1e-7) <= two.upper_bound <= optimum * (1 + 1e-4) + 1e-12
    # from round 2 on (the first is not smoothed) each round priced twice
    added = lambda r: sum(h["cuts_added"] for h in r.history[1:3])             # noqa: E731
    pit = lambda r: [h["pricing_iterations"] for h in r.history[1:3]]          # noqa: E731
    assert len(two.history) >= 3 and added(two) > added(one) and pit(two) != pit(one)


def test_the_second_pass_follows_the_column_deficit_and_the_work_model():
    from certdp.pmo.outputs.master import ColumnMaster
    from certdp.pmo.outputs.solve import second_pass

    cfg = OutputsConfig()
    MASTER_FLOPS_PER_PRICING_ITERATION = SECOND_PASS_WORK

    def _second_pass(*args):
        return second_pass(*args, cfg)

    m = ColumnMaster(1000, tolerance=1e-9)
    m.add(np.ones((1000, 2000)), np.zeros(2000, dtype=np.int64), np.ones(2000))
    m.work = 1000.0 ** 2 * 2000 * 8                    # master: 1000^2 x 2000 x 8 flops
    even = 1000 * 2000 * 8 / MASTER_FLOPS_PER_PRICING_ITERATION
    K = 100
    # past N generated columns the work model decides
    assert _second_pass(60, 1000, K, int(even) - 1, m) and not _second_pass(60, 1000, K, int(even) + 1, m)
    # short of N columns a productive pass is always followed by a second one
    assert _second_pass(60, 999, K, int(even) + 1, m)
    # an unproductive first pass (fewer than K/2 columns) never is
    assert not _second_pass(49, 0, K, 0, m)


def test_the_run_does_not_depend_on_the_clock(monkeypatch):
    """Every decision of a run (the upper steps near the target included) follows rounds, work
    and columns, not seconds: upper steps that seem to take 1,000 s more each leave the path and
    the certified mechanism unchanged, so a run is the same on any machine and executor."""
    import time

    from certdp.pmo.outputs.incumbent import Incumbent

    space = build_space(grid(5, 6, 1.0), epsilon=1.0, eta=1.5, n_outputs=8, cost="travel", seed=3)

    def run():
        res = solve_outputs(space, gap=1e-3)
        steps = [h["iteration"] for h in res.history if h["free_master_seconds"] > 0]
        return res, [(h["iteration"], h["lower_bound"], h["upper_bound"]) for h in res.history], steps

    ref, path, steps = run()
    # the run has upper steps near the target (fewer than 5 rounds after the one before), at
    # least UPPER_EVERY rounds apart: the rule this test is about does fire
    near = [b - a for a, b in zip(steps, steps[1:]) if b - a < 5]
    assert near and min(near) >= UPPER_NEAR

    real, late = time.perf_counter, [0.0]
    upper_step = Incumbent.step

    def slow_upper_step(self, *args):
        out = upper_step(self, *args)
        late[0] += 1000.0
        return out

    monkeypatch.setattr(time, "perf_counter", lambda: real() + late[0])
    monkeypatch.setattr(Incumbent, "step", slow_upper_step)
    res, path2, steps2 = run()
    assert path2 == path and steps2 == steps
    assert late[0] == 1000.0 * len(steps)
    assert np.array_equal(res.mechanism.matrix, ref.mechanism.matrix)


def test_a_column_idle_once_is_kept_with_patience():
    from certdp.pmo.outputs.master import ColumnMaster

    m = ColumnMaster(2, tolerance=1e-9)
    m.add(np.eye(2), np.zeros(2, dtype=np.int64), np.array([1.0, 1.0]))
    m.add(np.ones((2, 1)), np.zeros(1, dtype=np.int64), np.array([5.0]))   # dear: idle
    lam, b = np.array([1.0, 1.0]), np.array([1.0, 1.0, 0.0])
    assert m.prune(lam, b, limit=0, patience=2) == 0 and m.n_cols == 3
    assert m.prune(lam, b, limit=0, patience=2) == 1 and m.n_cols == 2
    m.add(np.ones((2, 1)), np.zeros(1, dtype=np.int64), np.array([5.0]))
    assert m.prune(lam, b, limit=0) == 1 and m.n_cols == 2                  # patience 1: at once
    m.add(np.ones((2, 1)), np.zeros(1, dtype=np.int64), np.array([5.0]))
    m.prune(lam, b, limit=0, patience=2)
    m.prune(lam, np.array([1.0, 1.0, 1.0]), limit=0, patience=2)            # used again: reset
    assert m.prune(lam, b, limit=0, patience=2) == 0 and m.n_cols == 3


def test_the_master_splits_by_component_and_solves_the_same_lp(monkeypatch):
    """A master over five components (two of at least ``block_rows`` rows, three singletons solved
    together) is three dense LPs whose parts give the whole LP's optimum and optimal duals."""
    import certdp.pmo.outputs.master as po
    from certdp.lp.highs import INF, solve_lp

    rng = np.random.default_rng(3)
    comp = np.r_[np.zeros(5), np.ones(4), np.arange(2, 5)].astype(np.int64)   # 5 + 4 rows, 3 singletons
    n = comp.size
    m = po.ColumnMaster(n, 1e-9, comp, block_rows=4)
    for c in range(5):
        on = comp == c
        R = rng.uniform(0.1, 1.0, (n, 6)) * on[:, None]
        R[on, 0] = 1.0                                    # the all-ones column: feasible
        m.add(R, np.zeros(6, dtype=np.int64), rng.uniform(0.5, 2.0, 6))
    assert len(m._groups()) == 3                          # 5 rows, 4 rows, the 3 singletons
    calls = []
    real = po.solve_dense_lp
    monkeypatch.setattr(po, "solve_dense_lp", lambda R, *a, **k: calls.append(R.shape) or real(R, *a, **k))
    for box in (False, True):
        m.set_box(rng.uniform(0.0, 0.2, n), 0.3)       # slack costs delta -+ centre > 0: bounded
        sol = m.solve(box=box, tol=1e-10)
        A, c = m.R, m.cost
        if box:
            A = np.hstack([A, np.eye(n), -np.eye(n)])
            c = np.r_[c, m.delta + m.center, m.delta - m.center]
        ref = solve_lp(c, A, np.ones(n), np.ones(n), np.zeros(A.shape[1]), np.full(A.shape[1], INF))
        assert sol.value == pytest.approx(ref.objective, rel=1e-7)
        if not box:
            assert np.allclose(m.R @ sol.weights, 1.0, atol=1e-7)      # every row covered exactly
        # the duals are optimal (they need not be HiGHS's: the LP is degenerate): feasible for
        # the dual LP, and their value is the optimum
        y = sol.duals
        assert np.all(m.cost - m.R.T @ y >= -1e-6)
        if box:
            assert np.all(np.abs(y - m.center) <= m.delta + 1e-6)
        assert y.sum() == pytest.approx(ref.objective, rel=1e-7)
    assert sorted(calls[:3]) == sorted([(5, 6), (4, 6), (3, 18)])
    # a group whose columns were all pruned is covered by its slack, at the box's price
    keep = m.col_comp != 1
    m.keep(keep)
    sol = m.solve(box=True, tol=1e-10)
    on = comp == 1
    assert np.allclose(sol.duals[on], (m.delta + m.center)[on]) and np.allclose(m.R[on] @ sol.weights, 0.0)
    with pytest.raises(ValueError, match="one connected component"):
        m.add(np.ones((n, 1)), np.zeros(1, dtype=np.int64), np.ones(1))


def test_columns_no_dual_in_the_box_can_use_are_left_out_and_the_lp_is_the_same(monkeypatch):
    """Columns dearer than the box's upper edge lets their rows pay are left out of the dense
    solve; the value and the duals are still those of the whole LP (solved by HiGHS with every
    column), and every column left out has weight 0. With every column out, the slack covers
    every row at the box's upper edge, which is then the optimum."""
    import certdp.pmo.outputs.master as po
    from certdp.lp.highs import INF, solve_lp

    rng = np.random.default_rng(5)
    n = 12
    m = po.ColumnMaster(n, 1e-9)
    R = rng.uniform(0.0, 1.0, (n, 40))
    R[:, 0] = 1.0
    center = rng.uniform(0.3, 0.6, n)
    # every column dearer than the box's lower edge lets its rows pay (so the LP is bounded),
    # some of them dearer than its upper edge allows too
    m.add(R, np.zeros(40, dtype=np.int64), R.T @ (center - 0.2) + rng.uniform(0.1, 4.0, 40))
    m.set_box(center, 0.2)
    upper = m.delta + m.center
    dead = m.cost > R.T @ upper
    assert 0.1 * dead.size <= dead.sum() < dead.size          # the case screens some, not all
    shapes = []
    real = po.solve_dense_lp
    monkeypatch.setattr(po, "solve_dense_lp", lambda R, *a, **k: shapes.append(R.shape) or real(R, *a, **k))
    sol = m.solve(box=True, tol=1e-10)
    assert shapes == [(n, int((~dead).sum()))]
    A = np.hstack([m.R, np.eye(n), -np.eye(n)])
    c = np.r_[m.cost, upper, m.delta - m.center]
    ref = solve_lp(c, A, np.ones(n), np.ones(n), np.zeros(A.shape[1]), np.full(A.shape[1], INF))
    assert sol.value == pytest.approx(ref.objective, rel=1e-7)
    assert np.all(sol.weights[dead] == 0.0)
    assert np.all(m.cost - m.R.T @ sol.duals >= -1e-6) and np.all(np.abs(sol.duals - m.center) <= m.delta + 1e-6)
    assert sol.duals.sum() == pytest.approx(ref.objective, rel=1e-7)
    m.set_box(np.full(n, 0.02), 0.01)                     # now no column is worth its rows
    sol = m.solve(box=True, tol=1e-10)
    assert np.allclose(sol.duals, 0.03) and np.all(sol.weights == 0.0) and sol.slack == pytest.approx(n)
    assert len(shapes) == 1                               # no dense solve was needed


def _failing_dense_lp(R, g, rhs, slack_costs=None, **kw):
    """A dense interior-point solve that does not converge: the master falls back to HiGHS."""
    from certdp.lp.dense import DenseLPResult

    m = R.shape[0]
    return DenseLPResult(b=np.zeros(R.shape[1]), sp=np.zeros(m), sm=np.zeros(m), y=np.zeros(m),
                         primal_objective=0.0, dual_objective=0.0, iterations=200, status="iteration_limit",
                         error=1.0)


def test_a_master_the_dense_ipm_cannot_solve_goes_to_highs(case, monkeypatch):
    import certdp.pmo.outputs.master as po

    space, optimum = case

    monkeypatch.setattr(po, "solve_dense_lp", _failing_dense_lp)
    res = solve_outputs(space, gap=1e-3)
    assert res.stats["master_fallbacks"] > 0
    assert res.status == "optimal" and res.mechanism.verification.passed
    assert res.lower_bound <= optimum * (1 + 1e-7) + 1e-12 <= res.upper_bound * (1 + 2e-7) + 1e-12


@pytest.mark.parametrize("kw, match", [({"gap": 0.0}, "gap"), ({"gap": -1.0}, "gap"),
                                       ({"max_iterations": 0}, "max_iterations"), ({"workers": 0}, "workers"),
                                       ({"smoothing": 0.5}, "does not take smoothing"),
                                       ({"pricing": "dual"}, "does not take pricing")])
def test_bad_options(kw, match):
    space = build_space(grid(3, 3, 1.0), epsilon=1.0, eta=1.5, n_outputs=3, cost="travel", seed=1)
    with pytest.raises((ValueError, TypeError), match=match):
        solve(space, "outputs", **kw)


def test_rebalanced_master_matrix_is_used_and_stays_exact(monkeypatch):
    # high-dimensional points with a dense mDP graph, like the word vectors: there a hard
    # elastic master's exact cover lags, and the row-rebalanced stabilised matrix gives the bound
    import certdp.pmo.outputs.incumbent as po
    # the filled master would otherwise give the bound first, and a softer elastic master's repair
    no_fill = OutputsConfig(fill_after=10**9, elastic_width=1000.0)
    calls = []
    envelope = po.mdp_envelope
    monkeypatch.setattr(po, "mdp_envelope", lambda *a, **kw: calls.append(1) or envelope(*a, **kw))
    space = build_space(gaussian(60, 12, seed=5), epsilon=0.35, eta=6.0, n_outputs=12, cost="distance", seed=6)
    optimum = solve(space).upper_bound
    res = solve_outputs(space, gap=1e-3, config=no_fill)
    assert len(calls) == res.stats["rebalanced_tried"]
    assert res.stats["rebalanced_tried"] >= 1
    assert res.stats["rebalanced_best"] >= 1
    assert res.status == "optimal" and res.gap <= 1e-3
    assert res.mechanism.verification.passed
    assert res.lower_bound <= optimum * (1 + 1e-7) + 1e-12 <= res.upper_bound * (1 + 2e-7) + 2e-12
    assert res.upper_bound <= optimum * (1 + 1e-3) + 1e-12


def _word_like_space():
    return build_space(gaussian(60, 12, seed=5), epsilon=0.35, eta=6.0, n_outputs=12, cost="distance", seed=6)


#: On the word-like case a hard elastic master's cover leans on the all-ones columns (a softer
#: one's repair covers the rows there, and the filled master is not needed).
HARD = 1000.0


def test_the_filled_master_takes_over_where_the_cover_leans_on_the_all_ones_columns(tmp_path):
    # points like word vectors: the priced columns do not combine into an exact cover, so the
    # free master keeps the all-ones columns, and the filled master gives the bound
    space = _word_like_space()
    optimum = solve(space).upper_bound
    res = solve_outputs(space, gap=1e-3, config=OutputsConfig(elastic_width=HARD))
    assert res.stats["filled_tried"] >= 1 and res.stats["filled_best"] >= 1
    assert res.status == "optimal" and res.gap <= 1e-3
    assert res.mechanism.verification.passed
    assert res.lower_bound <= optimum * (1 + 1e-7) + 1e-12 <= res.upper_bound * (1 + 2e-7) + 2e-12
    m = res.mechanism                                    # the common checks, on the run the filled master served
    check_probabilities(m.matrix)
    check_exact_mdp(m.matrix, m.epsilon, *space.neighbor_pairs)
    check_save_load(m, tmp_path)
    check_sampling(m)
    # without it the same rounds certify less: the fill beat every other candidate somewhere
    without = solve_outputs(space, gap=1e-3, config=OutputsConfig(fill_after=10**9, elastic_width=HARD))
    assert without.stats["filled_tried"] == 0
    ahead = [w["upper_bound"] / f["upper_bound"] - 1 for f, w in zip(res.history, without.history)]
    assert max(ahead) > 1e-3 and min(ahead) > -1e-9


def test_a_filled_master_that_gives_up_is_not_tried_again(monkeypatch):
    # every solve stops at its first iteration
    monkeypatch.setattr("certdp.pmo.outputs.incumbent.FILL_ITERATIONS", 1e-9)
    res = solve_outputs(_word_like_space(), gap=1e-3, config=OutputsConfig(elastic_width=HARD))
    assert res.stats["filled_tried"] == 1 and res.stats["filled_given_up"] == 1
    assert res.stats["filled_best"] == 0
    assert res.status == "optimal" and res.mechanism.verification.passed


def test_the_filled_master_waits_for_a_constant_mechanism_near_the_bound(monkeypatch):
    # no constant mechanism costs no more than the lower bound here: none is near enough
    monkeypatch.setattr("certdp.pmo.outputs.incumbent.FILL_NEAR", 0.0)
    res = solve_outputs(_word_like_space(), gap=1e-3, config=OutputsConfig(elastic_width=HARD))
    assert res.stats["filled_tried"] == 0


def test_the_filled_master_is_not_tried_where_the_free_master_covers_the_rows(case):
    space, _ = case
    assert solve_outputs(space, gap=1e-4).stats["filled_tried"] == 0


def test_the_filled_master_solves_its_whole_lp_and_returns_a_mechanism(monkeypatch):
    """With its cone rows added as violated, the filled master reaches the optimum of the LP
    with every cone row, never costs more than the exact free master over the same columns,
    and its matrix is a mechanism up to the solver's tolerance. The columns are a run's."""
    import scipy.sparse as sps

    import certdp.pmo.outputs.incumbent as po
    from certdp.lp.highs import INF, solve_lp
    from certdp.pmo.outputs.master import FilledMaster

    made = []

    class Recording(FilledMaster):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.args, self.columns = args, []
            made.append(self)

        def attach(self, slots, owner, g):
            self.columns.append((self.store.gather(slots), np.asarray(owner), np.asarray(g)))
            super().attach(slots, owner, g)

    monkeypatch.setattr(po, "FilledMaster", Recording)
    space = _word_like_space()
    solve_outputs(space, gap=1e-3, config=OutputsConfig(elastic_width=HARD))
    assert len(made) == 1 and len(made[0].columns) >= 2
    A, fill_cost, k0, K, tol = made[0].args
    fm = FilledMaster(A, fill_cost, k0, K, tol)
    for cols in made[0].columns:
        fm.add(*cols)
    Z = fm.solve()
    assert Z is not None
    R = np.hstack([c[0] for c in made[0].columns])
    owner = np.concatenate([c[1] for c in made[0].columns])
    g = np.concatenate([c[2] for c in made[0].columns])
    C = space.weighted_cost / space.weighted_cost.max()
    N, nb, m = space.n_records, R.shape[1], A.shape[0]
    assert np.allclose(fill_cost, C[:, k0]) and np.allclose(g, (C.T @ R)[owner, np.arange(nb)])
    value = float(np.sum(C * Z))
    whole = solve_lp(np.r_[fill_cost, g], sps.vstack([sps.hstack([sps.identity(N), sps.csr_matrix(R)]),
                                                      sps.hstack([A, sps.csr_matrix((m, nb))])]),
                     np.r_[np.ones(N), np.full(m, -INF)], np.r_[np.ones(N), np.zeros(m)],
                     np.zeros(N + nb), np.full(N + nb, INF))
    assert whole.status == "optimal"
    assert value == pytest.approx(whole.objective, rel=1e-7)
    exact = solve_lp(g, sps.csr_matrix(R), np.ones(N), np.ones(N), np.zeros(nb), np.full(nb, INF))
    assert value <= exact.objective * (1 + 1e-9)
    assert value < exact.objective * (1 - 1e-5)           # and here the fill makes it cheaper
    assert fm.in_model.sum() < m                          # not every cone row was needed
    capped = FilledMaster(A, fill_cost, k0, K, tol, max_iterations=1)
    for cols in made[0].columns:
        capped.add(*cols)
    assert capped.solve() is None                         # a solve past its iterations gives up
    np.testing.assert_allclose(Z.sum(axis=1), 1.0, atol=1e-7)
    assert Z.min() >= 0
    graph = MDPGraph.from_space(space)
    ii, jj = graph.edges[:, 0], graph.edges[:, 1]
    ratio = np.exp(space.epsilon * graph.distance)[:, None]
    assert np.all(Z[ii] <= ratio * Z[jj] + 1e-7) and np.all(Z[jj] <= ratio * Z[ii] + 1e-7)


@pytest.mark.parametrize("start", ["every row", "no row"])
def test_the_pricer_solves_its_lps_with_rigorous_bounds(case, start):
    """The dual-form pricer returns, per output, a point of P and a bound that are both right:
    the point is feasible, its value equals the bound up to the solver's tolerance, and a fresh
    HiGHS solve of the primal LP agrees on the minimum; whether its working sets start with every
    cone row or grow from none."""
    from certdp.lp.highs import INF, solve_lp

    space, _ = case
    N = space.n_records
    g = MDPGraph.from_space(space)
    A = cone_rows(N, g.edges, g.distance, space.epsilon)
    C = space.weighted_cost / space.weighted_cost.max()
    rng = np.random.default_rng(0)
    dual = ThreadPricer(A, C, 1e-9, 1, OutputsConfig(working_set_from=np.inf if start == "every row" else 0.0))
    for scale in (0.5, 1.0, 2.0):                    # three rounds: the models are re-used
        lam = C.min(axis=1) + scale * rng.uniform(0, 0.5, N)
        bd, Zd, _ = dual.price(lam)
        assert np.any(bd < -1e-3)                    # not a trivial round: some output prices out
        for k in range(C.shape[1]):
            w = C[:, k] - lam
            ref = solve_lp(w, A, np.full(A.shape[0], -INF), np.zeros(A.shape[0]), np.zeros(N), np.ones(N))
            assert bd[k] <= ref.objective + 1e-9                                         # rigorous
            assert np.isclose(bd[k], min(ref.objective, 0.0), atol=1e-7)               # and tight
            z = Zd[:, k]
            assert np.all((z >= 0) & (z <= 1)) and np.max(A @ z) <= 1e-7             # z is in P
            assert np.isclose(w @ z, min(ref.objective, 0.0), atol=1e-7)             # and optimal
    sizes = [r.size for r in dual.group.rows]
    if start == "every row":
        assert sizes == [A.shape[0]] * C.shape[1]
    else:                                            # grown from none, to a part of the cone
        assert 0 < min(sizes) and max(sizes) < A.shape[0]


def test_the_repaired_elastic_master_gives_the_bound_and_reaches_the_optimum(case):
    space, optimum = case
    res = solve_outputs(space, gap=1e-4)
    assert res.stats["repaired_tried"] >= 1
    assert res.stats["repaired_best"] >= 1
    assert res.status == "optimal" and res.mechanism.verification.passed
    assert optimum * (1 - 1e-7) <= res.upper_bound <= optimum * (1 + 1e-4) + 1e-12


def test_when_the_repair_gives_up_the_exact_free_master_stands_in(case, monkeypatch):
    import certdp.pmo.outputs.incumbent as po
    calls = []

    def give_up(*args, **kwargs):
        calls.append(1)
        return None
    monkeypatch.setattr(po, "repair_rows", give_up)
    space, optimum = case
    res = solve_outputs(space, gap=1e-4)
    assert calls and res.stats["repaired_failed"] == len(calls) == res.stats["repaired_tried"]
    assert res.stats["repaired_best"] == 0
    assert res.status == "optimal" and res.mechanism.verification.passed
    assert optimum * (1 - 1e-7) <= res.upper_bound <= optimum * (1 + 1e-4) + 1e-12


def test_a_failed_repair_hardens_the_elastic_master_for_the_rest_of_the_run(case, monkeypatch):
    """After a repair fails, every later elastic master prices its slack ELASTIC_HARDEN times
    higher (it leaves fewer rows off 1 for the repair); the run still reaches the optimum."""
    import certdp.pmo.outputs.incumbent as po
    from certdp.pmo.outputs.config import ELASTIC_HARDEN
    from certdp.pmo.outputs.master import ColumnMaster
    widths, outcomes = [], iter([False, True, False])
    solve_master, repair = ColumnMaster.solve, po.repair_rows

    def recording(self, box=True, elastic=None, tol=1e-8):
        if elastic is not None:
            widths.append(np.asarray(elastic[1]).copy())
        return solve_master(self, box=box, elastic=elastic, tol=tol)

    def sometimes(*args, **kwargs):
        return repair(*args, **kwargs) if next(outcomes, True) else None
    monkeypatch.setattr(ColumnMaster, "solve", recording)
    monkeypatch.setattr(po, "repair_rows", sometimes)
    space, optimum = case
    res = solve_outputs(space, gap=1e-4, config=OutputsConfig(upper_every=1))
    assert res.stats["repaired_failed"] >= 1 and len(widths) >= 3
    factors = [float(np.max(b / a)) for a, b in zip(widths, widths[1:])]
    assert factors[0] == pytest.approx(ELASTIC_HARDEN) and factors[1] == pytest.approx(1.0)
    assert res.status == "optimal" and res.mechanism.verification.passed
    assert res.upper_bound <= optimum * (1 + 1e-4) + 1e-12

def test_a_failed_repair_is_retried_at_the_next_step_then_backs_off():
    """Upper steps are ``upper_every`` rounds apart: a first failure is retried at the next
    step; the failures of a row then skip 1, 2, 4 steps; a success is followed by a try at the
    next step, and a failure after it is retried at once again."""
    from certdp.pmo.outputs.incumbent import Backoff

    def pattern(outcomes: str, chances: int) -> str:
        """T where a chance is tried, . where it is skipped; tries fail or succeed in turn as
        ``outcomes`` says (F / S)."""
        b, seen, tries = Backoff(), "", iter(outcomes)
        for _ in range(chances):
            if b.ready():
                seen += "T"
                b.failed() if next(tries) == "F" else b.succeeded()
            else:
                seen += "."
        return seen

    assert pattern("F" * 5, 12) == "TT.T..T....T"
    assert pattern("FFSFF", 6) == "TT.TTT"


# ------------------------------------------------------------------ on Dask
def _dask_case():
    return build_space(grid(8, 8, 1.0), epsilon=1.0, eta=1.5, n_outputs=24, cost="travel", seed=3)


def test_pricing_on_a_dask_cluster_is_the_threaded_run():
    """A LocalCluster of two processes: the same certified matrix, bounds and rounds as threads."""
    pytest.importorskip("dask.distributed")
    space = _dask_case()
    a = solve_outputs(space, gap=1e-4, workers=2)
    b = solve_outputs(space, gap=1e-4, workers=2, executor="dask")
    assert b.stats["executor"] == "dask" and a.stats["executor"] == "threads"
    assert b.mechanism.verification.passed
    assert (a.upper_bound, a.lower_bound, a.iterations) == (b.upper_bound, b.lower_bound, b.iterations)
    assert np.array_equal(a.mechanism.matrix, b.mechanism.matrix)


def test_pricing_on_a_cluster_given_by_its_address_is_the_threaded_run():
    """``scheduler=ADDRESS`` (``--scheduler``): a cluster started elsewhere, reached by address."""
    pytest.importorskip("dask.distributed")
    from dask.distributed import LocalCluster

    space = _dask_case()
    a = solve_outputs(space, gap=1e-4, workers=2)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        b = solve_outputs(space, gap=1e-4, scheduler=cluster.scheduler_address)
        assert len(cluster.scheduler_info["workers"]) == 2      # still up: the run closed only its client
    assert b.stats["executor"] == "dask" and b.mechanism.verification.passed
    assert (a.upper_bound, a.lower_bound, a.iterations) == (b.upper_bound, b.lower_bound, b.iterations)
    assert np.array_equal(a.mechanism.matrix, b.mechanism.matrix)


def _run_killing_a_worker(monkeypatch, executor: str, kill):
    """Solve :func:`_dask_case` on ``executor``, calling ``kill(pricer)`` once, after round 2;
    returns the result and what ``kill`` returned."""
    import certdp.pmo.outputs.pricing as pricing

    cls = pricing.ProcessPricer if executor == "process" else pricing.DaskPricer
    seen = {}
    real_init = cls.__init__

    def init(self, *args, **kw):
        real_init(self, *args, **kw)
        seen["pricer"] = self

    def progress(ev):
        if ev.stage == "round" and ev.record.get("iteration") == 2 and "killed" not in seen:
            seen["killed"] = kill(seen["pricer"])

    monkeypatch.setattr(cls, "__init__", init)
    b = solve_outputs(_dask_case(), gap=1e-4, workers=2, executor=executor, progress=progress)
    return b, seen.get("killed")


def test_a_lost_dask_worker_is_replaced_and_the_run_is_unchanged(monkeypatch):
    """A worker killed after round 2: its pricing group is rebuilt on a live worker and replayed
    through the earlier rounds' duals, so the run ends exactly as the threaded one."""
    import os

    pytest.importorskip("dask.distributed")

    def kill(pricer):
        worker = sorted(pricer.client.scheduler_info()["workers"])[0]
        try:
            pricer.client.run(os._exit, 1, workers=[worker])
        except Exception:   # the worker dies before it can answer
            pass
        return worker

    a = solve_outputs(_dask_case(), gap=1e-4, workers=2)
    b, killed = _run_killing_a_worker(monkeypatch, "dask", kill)
    assert killed is not None and b.stats["pricing_replays"] >= 1
    assert b.mechanism.verification.passed
    assert (a.upper_bound, a.lower_bound) == (b.upper_bound, b.lower_bound)
    assert np.array_equal(a.mechanism.matrix, b.mechanism.matrix)


def test_pricing_on_local_processes_is_the_threaded_run():
    """``executor='process'``: two worker processes, each holding an interleaved half of the
    outputs; the same certified matrix, bounds and rounds as threads, and the workers are gone
    after the run."""
    space = _dask_case()
    a = solve_outputs(space, gap=1e-4, workers=2)
    seen = {}

    def progress(ev):
        if ev.stage == "round" and "procs" not in seen:
            import multiprocessing as mp
            seen["procs"] = [p for p in mp.active_children() if p.name.startswith(("Fork", "Spawn", "Process"))]

    b = solve_outputs(space, gap=1e-4, workers=2, executor="process", progress=progress)
    assert b.stats["executor"] == "process" and b.mechanism.verification.passed
    assert (a.upper_bound, a.lower_bound, a.iterations) == (b.upper_bound, b.lower_bound, b.iterations)
    assert np.array_equal(a.mechanism.matrix, b.mechanism.matrix)
    assert len(b.stats["pricing_calls"]) >= b.iterations
    assert len(seen["procs"]) == 2 and not any(p.is_alive() for p in seen["procs"])


def test_a_lost_worker_process_is_replaced_and_the_run_is_unchanged(monkeypatch):
    """A pricing process killed after round 2: its group is rebuilt in a new process and
    replayed through the earlier rounds' duals, so the run ends exactly as the threaded one."""

    def kill(pricer):
        proc = pricer.workers[1].proc
        proc.kill()
        proc.join(5)
        return proc.exitcode

    a = solve_outputs(_dask_case(), gap=1e-4, workers=2)
    b, killed = _run_killing_a_worker(monkeypatch, "process", kill)
    assert killed is not None and b.stats["pricing_replays"] == 1
    assert b.mechanism.verification.passed
    assert (a.upper_bound, a.lower_bound, a.iterations) == (b.upper_bound, b.lower_bound, b.iterations)
    assert np.array_equal(a.mechanism.matrix, b.mechanism.matrix)


def test_outputs_refuses_an_executor_it_has_not():
    with pytest.raises(ValueError, match="executor"):
        solve(_dask_case(), "outputs", executor="serial")


def test_new_columns_split_each_point_by_component_and_keep_those_that_price_out():
    from certdp.pmo.outputs.master import new_columns

    rng = np.random.default_rng(0)
    n, K, n_comp = 12, 3, 4
    comp = np.arange(n) % n_comp
    Z = rng.uniform(0.0, 1.0, (n, 5)) * (rng.uniform(size=(n, 5)) < 0.6)
    Z[:, 4] = Z[:, 0]                                  # a repeat gives no new piece
    C = rng.uniform(0.0, 1.0, (n, K))
    lam = np.full(n, 0.7)
    got = new_columns(Z, C, lam, comp, n_comp)
    # every (point, component) piece, in point-then-component order; keep rc < 0, no repeats
    want = []
    for j in range(Z.shape[1]):
        for c in range(n_comp):
            p = Z[:, j] * (comp == c)
            if p.any() and (C.T @ p).min() - lam @ p < -1e-9 and not any(np.allclose(p, q) for q in want):
                want.append(p)
    assert got.shape == (n, len(want)) and len(want) > 1
    assert np.allclose(got, np.column_stack(want))
    # every piece lives on one component
    assert all(np.unique(comp[got[:, s] > 0]).size == 1 for s in range(got.shape[1]))


def test_a_config_is_passed_through_solve_and_checked():
    """``solve(space, 'outputs', config=OutputsConfig(...))`` runs that tuning; values it cannot
    use are refused when the config is made, and anything but a config by ``solve``."""
    space = build_space(grid(5, 6, 1.0), epsilon=1.0, eta=1.5, n_outputs=8, cost="travel", seed=3)
    a = solve(space, "outputs", gap=1e-3, config=OutputsConfig(upper_every=1))
    assert a.stats["config"]["upper_every"] == 1 and a.mechanism.verification.passed
    steps = [h["iteration"] for h in a.history if h["free_master_seconds"] > 0]
    assert steps == list(range(1, len(a.history) + 1))          # an upper step every round
    for bad, err in (({"box": -0.1}, ValueError), ({"upper_every": 1.5}, TypeError),
                     ({"master_tolerance": 1e-9}, ValueError), ({"columns": float("nan")}, ValueError)):
        with pytest.raises(err):
            OutputsConfig(**bad)
    with pytest.raises(TypeError, match="OutputsConfig"):
        solve(space, "outputs", config={"box": 0.07})


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_rows_that_leave_the_working_set_change_no_minimum(seed):
    """Rows strictly slack for ``working_set_age`` solves in a row leave a pricing model; over
    rounds of random duals the pricer's bounds stay rigorous and tight and its points stay in
    P, as with every row kept, and rows do leave."""
    from certdp.lp.highs import INF, solve_lp

    space = build_space(grid(5, 6, 1.0), epsilon=1.0, eta=1.5, n_outputs=6, cost="travel", seed=3)
    N = space.n_records
    g = MDPGraph.from_space(space)
    A = cone_rows(N, g.edges, g.distance, space.epsilon)
    C = space.weighted_cost / space.weighted_cost.max()
    rng = np.random.default_rng(seed)
    config = OutputsConfig(working_set_from=0.0, working_set_batch=0.0)
    pricer = ThreadPricer(A, C, 1e-9, 1, config)
    for _ in range(3 * config.working_set_age):
        lam = C.min(axis=1) + rng.uniform(0, 1.0, N) * rng.uniform(0.1, 1.0)
        bd, Zd, _ = pricer.price(lam)
        for k in range(C.shape[1]):
            w = C[:, k] - lam
            ref = min(solve_lp(w, A, np.full(A.shape[0], -INF), np.zeros(A.shape[0]), np.zeros(N), np.ones(N)).objective, 0.0)
            assert bd[k] <= ref + 1e-9 and np.isclose(bd[k], ref, atol=1e-7)
            z = Zd[:, k]
            assert np.all((z >= 0) & (z <= 1)) and np.max(A @ z) <= 1e-7 and np.isclose(w @ z, ref, atol=1e-7)
    assert pricer.group.dropped > 0
    assert all(np.array_equal(np.flatnonzero(a), np.sort(r)) for a, r in zip(pricer.group.active, pricer.group.rows))


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(["gaussian", "grid"]), st.integers(40, 160), st.sampled_from([0.3, 0.6, 1.0, 1.5, 2.5, math.inf]),
       st.integers(0, 2**16))
def test_the_pricing_models_hold_no_more_rows_than_the_memory_estimate_counts(kind, n, eta, seed):
    """The memory estimate counts :func:`working_set_rows` cone rows per pricing model; no round
    of a run holds more, on Gaussian and grid records from sparse to every pair protected (on
    a grid, implied pairs leave the cone, which may then start full)."""
    from certdp.pmo.outputs.solve import working_set_rows

    side = max(3, int(round(math.sqrt(n))))
    data = gaussian(n, 2, seed=seed) if kind == "gaussian" else grid(side, side, 1.0)
    space = build_space(data, epsilon=1.0, eta=eta, n_outputs=12, cost="distance", seed=seed)
    res = solve(space, "outputs", gap=1e-2)
    held = max(h["pricing_rows"] for h in res.history)
    assert held <= space.n_outputs * working_set_rows(space.n_records, len(space.neighbor_pairs[0]), OutputsConfig())


def test_the_memory_estimate_covers_what_a_run_allocates():
    """The bytes ``solve`` checks before a run, less the interpreter's share, cover what a run
    allocates beyond its start, measured in a fresh interpreter as the growth of its peak
    (VmHWM: exec gives the child its own address space and high-water mark, where ru_maxrss
    would carry the test process's)."""
    import json
    import subprocess
    import sys

    code = ("import json; from certdp import build_space, solve; from certdp.datasets import gaussian; "
            "from certdp.solve import estimate_bytes; from certdp.pmo.outputs.solve import BASE_BYTES\n"
            "def hwm():\n"
            "    return next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
            "s = build_space(gaussian(500, 2, seed=5), epsilon=1.0, eta=0.6, n_outputs=60, cost='distance', seed=5)\n"
            "start = hwm(); r = solve(s, 'outputs', gap=1e-2)\n"
            "print(json.dumps({'grown': hwm() - start, 'estimate': estimate_bytes(s, 'outputs') - BASE_BYTES, "
            "'audited': bool(r.mechanism.verification.passed)}))")
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc (Linux) to read a process's own memory high-water mark")
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                    timeout=600).stdout.strip().splitlines()[-1])
    assert out["audited"] and out["grown"] > 20e6                     # the run did allocate
    assert out["grown"] <= out["estimate"]


def test_a_remote_cluster_holds_the_pricing_models_the_local_check_leaves_out(monkeypatch):
    """Pricing models on a Dask scheduler's workers are not counted against this machine; a
    run refused here for memory is told that they are the part a cluster would hold, and a
    scheduler with another executor is refused (it would price here)."""
    import certdp._validate as V
    from certdp.solve import _outputs_memory, estimate_bytes

    space = build_space(gaussian(120, 2, seed=1), epsilon=1.0, eta=0.8, n_outputs=20, cost="distance", seed=1)
    here = estimate_bytes(space, "outputs")
    remote = estimate_bytes(space, "outputs", {"scheduler": "tcp://127.0.0.1:1"})
    pricing = _outputs_memory(space, {})["pricing"]
    assert pricing > 0 and here - remote == pytest.approx(pricing)
    assert estimate_bytes(space, "outputs", {"executor": "process", "workers": 2}) > here   # two more interpreters
    monkeypatch.setattr(V, "memory_limit", lambda: int(remote + pricing / 2))
    with pytest.raises(ValueError, match="pricing models") as err:
        solve(space, "outputs")
    assert "needs about" in str(err.value) and "scheduler" in str(err.value)
    monkeypatch.setattr(V, "memory_limit", lambda: int(remote / 2))   # even without them it would not fit
    with pytest.raises(ValueError, match="needs about") as err:
        solve(space, "outputs")
    assert "scheduler" not in str(err.value)
    monkeypatch.undo()
    with pytest.raises(ValueError, match="executor must be 'dask'"):
        solve(space, "outputs", scheduler="tcp://127.0.0.1:1", executor="threads")
    with pytest.raises(TypeError, match="OutputsConfig"):
        estimate_bytes(space, "outputs", {"config": {"box": 0.07}})


def test_a_master_fallback_that_would_not_fit_is_refused(case, monkeypatch):
    """The master's HiGHS fallback (about 80 bytes an entry of its dense columns) checks the
    memory available before it builds anything."""
    import certdp._validate as V
    import certdp.pmo.outputs.master as po

    space, _ = case

    monkeypatch.setattr(po, "solve_dense_lp", _failing_dense_lp)
    monkeypatch.setattr(V, "available_memory", lambda: 1000)
    with pytest.raises(MemoryError, match="HiGHS fallback needs about"):
        solve_outputs(space, gap=1e-3)
