"""Comparisons at a matched epsilon_tight (paper 002's way of comparing mechanisms)."""

import json
import math

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp import build_space, solve
from certdp.cli import main
from certdp.datasets import gaussian
from certdp.experiments.compare import Matched, compare_row, match_tight, order_factors


@pytest.fixture(scope="module")
def space():
    return build_space(gaussian(30, 2, seed=3), epsilon=4.0, eta=math.inf, seed=3)


@pytest.mark.parametrize("method", ["expmech", "constopt", "optmech"])
def test_match_tight_reaches_the_target_and_reports_what_it_tried(space, method):
    if method == "optmech":   # its LP has n^3 rows: a smaller space keeps the calibration's solves quick
        space = build_space(gaussian(15, 2, seed=3), epsilon=4.0, eta=math.inf, seed=3)
    cal = match_tight(space, method, 1.5, {"r": 5} if method == "constopt" else {})
    assert cal.matched
    assert abs(cal.epsilon_tight - 1.5) <= 0.015
    # the row is measured again from the returned result, at the epsilon found
    row = compare_row(space.with_epsilon(cal.epsilon), cal.result)
    assert row.epsilon == pytest.approx(cal.epsilon)
    assert row.epsilon_tight == pytest.approx(cal.epsilon_tight)
    assert any(e == cal.epsilon and t == cal.epsilon_tight for e, t in cal.trials)
    assert len(cal.trials) <= 24


def test_match_tight_from_either_side_finds_the_same_epsilon(space):
    a = match_tight(space.with_epsilon(0.2), "expmech", 1.0)
    b = match_tight(space.with_epsilon(50.0), "expmech", 1.0)
    assert a.matched and b.matched
    assert a.epsilon == pytest.approx(b.epsilon, rel=0.03)


def test_match_tight_proportional_steps_reach_the_target_in_fewer_solves(space):
    # SpannerMech's epsilon_tight is nearly proportional to epsilon: from a start well off the
    # target, the step to epsilon x target / epsilon_tight lands closer than doubling does
    plain = match_tight(space.with_epsilon(1.0), "spanner", 1.5)
    steered = match_tight(space.with_epsilon(1.0), "spanner", 1.5, proportional=True)
    assert plain.matched and steered.matched
    assert abs(steered.epsilon_tight - 1.5) <= 0.015
    assert len(steered.trials) < len(plain.trials)
    # a step is never more than a doubling or halving
    for (e0, _), (e1, _) in zip(steered.trials, steered.trials[1:]):
        assert 0.5 - 1e-12 <= e1 / e0 <= 2.0 + 1e-12


def test_match_tight_says_when_it_cannot_reach_the_target(space):
    # a "method" that ignores epsilon: its epsilon_tight never moves, so no epsilon matches
    fixed = solve(space.with_epsilon(1.0), "expmech")
    cal = match_tight(space, "expmech", 3.0, run=lambda sp, m, o: fixed, max_trials=6)
    assert not cal.matched and len(cal.trials) == 6
    assert cal.epsilon_tight == pytest.approx(compare_row(space, fixed).epsilon_tight)


def test_match_tight_refuses_a_bad_target(space):
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="target"):
            match_tight(space, "expmech", bad)


def test_constopt_selects_lambda_by_the_loss_asked_for(space):
    worst = solve(space, "constopt", r=5, select="worst")
    quant = solve(space, "constopt", r=5, select="quantile", q=0.95)
    sweep = worst.stats["sweep"]
    assert [s["lambda"] for s in sweep] == [0.001, 0.1, 1.0, 10.0, 50.0]
    assert worst.stats["lambda"] == min(sweep, key=lambda s: s["worst_case_loss"])["lambda"]
    assert quant.stats["lambda"] == min(sweep, key=lambda s: s["quantile_loss"])["lambda"]
    with pytest.raises(ValueError):
        solve(space, "constopt", select="median")


def test_cli_compare_match_tight_json_rows():
    res = CliRunner().invoke(main, ["compare", "--dataset", "gaussian:20:2", "--epsilon", "3", "--eta", "inf",
                                    "--seed", "2", "--methods", "expmech,constopt", "--r", "4", "--match-tight", "1.2",
                                    "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["match_tight"] == 1.2
    for row in report["rows"]:
        for key in ("method", "epsilon", "epsilon_tight", "quantile_loss", "worst_case_loss", "expected_loss",
                    "seconds", "matched"):
            assert key in row
        assert row["matched"] and abs(row["epsilon_tight"] - 1.2) <= 0.012
    assert {r["method"] for r in report["rows"]} == {"expmech", "constopt"}


def test_cli_compare_refuses_a_bad_match_tight():
    res = CliRunner().invoke(main, ["compare", "--dataset", "gaussian:8:2", "--epsilon", "1", "--eta", "inf",
                                    "--methods", "expmech", "--match-tight", "-1"])
    assert res.exit_code == 2 and "match-tight" in res.output


@given(st.integers(0, 10_000), st.floats(0.5, 6.0))
@settings(max_examples=8)
def test_order_factors_multiply_to_the_ratio_and_expmech_is_a_point_of_the_lp(seed, eps):
    sp = build_space(gaussian(14, 2, seed=seed), epsilon=eps, eta=math.inf, seed=seed)

    def at(method, e, **opts):
        res = solve(sp.with_epsilon(e), method, **opts)
        return Matched(res, e, compare_row(sp.with_epsilon(e), res).epsilon_tight, True, (), 0.0)

    c = at("constopt", eps, r=3, lambdas=[0.001, 1.0])
    e = at("expmech", 0.8 * eps)
    f = order_factors(sp, c, e)
    product = f["objective"] * f["calibration"] * f["equaliser"] * f["spread"]
    assert product == pytest.approx(f["quantile_ratio"], rel=1e-9)
    assert f["worst_ratio"] == pytest.approx(f["objective"] * f["calibration"], rel=1e-9)
    # ExpMech at ConstOPT's epsilon is a feasible point of ConstOPT's LP, so the LP's optimum is
    # no higher there (up to the solver's tolerance and the exact repair of its answer)
    assert f["lp_objective"] <= f["expmech_lp_objective"] * (1 + 1e-6) + 1e-9
    assert f["z_spread"] >= 1.0 and f["max_row_sum"] >= 1.0 - 1e-9
