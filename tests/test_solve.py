"""The one entry point: every method through one registry, options checked once, one result
type, and an option the method does not take named in the error."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp import METHODS, Mechanism, SolveResult, Space, Status, build_space, solve
from certdp.cli import main
from certdp.datasets import gaussian, grid
from certdp.solve import check_options, option_table


def metric_space(n: int, dim: int = 2, eps: float = 2.0, seed: int = 0) -> Space:
    """Paper 002's setting: outputs = records, loss = distance, every pair protected."""
    return build_space(gaussian(n, dim, seed=seed), epsilon=eps, eta=math.inf)


@pytest.fixture(scope="module")
def small():
    return build_space(grid(4, 5), epsilon=2.0, eta=2.0, cost="travel", seed=1)


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_returns_one_result_type_with_a_status(small, method):
    res = solve(small, method, **({"subsets": 3} if method == "benders" else {}))
    assert isinstance(res, SolveResult) and res.method == method
    assert isinstance(res.status, Status) and res.status in ("optimal", "heuristic", "estimated")
    assert isinstance(res.message, str)
    # what the status promises (the table of certdp.Status)
    assert res.status.certified == isinstance(res.mechanism, Mechanism)
    assert res.status.bounded == (res.lower_bound is not None)
    assert json_status(res) == res.status.value
    if method in ("madlib", "laplace"):
        assert not isinstance(res.mechanism, Mechanism) and res.lower_bound is None
        assert 0 < res.expected_loss and res.stats["expected_loss_se"] > 0
    else:
        assert isinstance(res.mechanism, Mechanism) and res.mechanism.verification.passed


def test_the_exact_methods_agree_on_the_optimum(small):
    lp = solve(small, "lp")
    for method, opts in (("outputs", {"gap": 1e-6}), ("benders", {"subsets": 3, "gap": 1e-6})):
        res = solve(small, method, **opts)
        assert res.lower_bound <= lp.upper_bound * (1 + 1e-7)
        assert res.upper_bound == pytest.approx(lp.upper_bound, rel=1e-5)


@pytest.mark.parametrize("method,option", [("expmech", "subsets"), ("lp", "partition"), ("benders", "objective"),
                                           ("outputs", "subsets"), ("constopt", "gap"), ("madlib", "solver")])
def test_an_option_the_method_does_not_take_is_named(small, method, option):
    with pytest.raises(TypeError, match=f"{method!r} does not take {option}"):
        solve(small, method, **{option: 1})


def test_an_unknown_method_lists_the_methods(small):
    with pytest.raises(ValueError, match="unknown method 'simplex'.*lp, optmech"):
        solve(small, "simplex")


def test_the_space_must_be_a_space():
    with pytest.raises(TypeError, match="certdp.Space"):
        solve(np.eye(3), "lp")


@pytest.mark.parametrize("method,opts,match", [
    ("constopt", {"r": 0}, "r must be"),
    ("constopt", {"r": 10}, "r must be"),
    ("constopt", {"r": 2, "lambdas": []}, "lambdas"),
    ("constopt", {"r": 2, "lambdas": [0.1, -1.0]}, "lambdas"),
    ("spanner", {"delta": 0.5}, "delta"),
    ("laplace", {"draws": 0}, "draws"),
    ("laplace", {"q": 1.5}, "q must"),
    ("lp", {"solver": "magic"}, "solver"),
    ("lp", {"time_limit": -1}, "time_limit"),
    ("lp", {"objective": "median"}, "objective"),
    ("outputs", {"gap": 0.0}, "gap"),
    ("outputs", {"workers": 0}, "workers"),
    ("benders", {"subsets": 11}, "subsets"),
    ("benders", {"partition": "random"}, "partition"),
    ("benders", {"variant": "faster"}, "variant"),
])
def test_bad_values_name_the_option(method, opts, match):
    with pytest.raises((ValueError, TypeError), match=match):
        solve(metric_space(10), method, **opts)


def json_status(res: SolveResult) -> str:
    """The status as the ``--json`` summary writes it."""
    import json
    return json.loads(json.dumps(res.summary(), default=float))["status"]


def test_a_result_takes_only_a_status_member(small):
    res = solve(small, "expmech")
    with pytest.raises(TypeError, match="certdp.Status"):
        SolveResult(mechanism=res.mechanism, method="expmech", status="heuristic", upper_bound=1.0,
                    lower_bound=None, gap=None)


@pytest.mark.parametrize("method", list(METHODS))
def test_the_registry_matches_each_engine(method):
    """Every option is a keyword of the engine (whose default is the option's), the engine takes
    ``progress`` exactly when the method reports it, and help(solve) documents every option."""
    m = METHODS[method]
    params = inspect.signature(m.engine).parameters
    assert next(iter(params)) == "space"
    assert set(m.options) | set(m.fixed) <= set(params)
    assert ("progress" in params) == m.reports_progress
    for name, opt in m.options.items():
        assert opt.help and (opt.check is not None or opt.choices)
        if opt.default is None:
            shown = m.default(name)
            assert shown == ("none" if params[name].default is None else shown)
        assert f"        {name} (" in solve.__doc__
    assert f"    {method}: {m.summary}." in solve.__doc__


def test_the_command_line_offers_every_option_of_the_registry_with_its_choices():
    import click

    params = {p.name: p for p in main.commands["solve"].params}
    for name, entries in option_table().items():
        opt = entries[0][1]
        if not opt.command_line:
            assert name not in params or params[name].help != opt.help
            continue
        p = params[name]
        allowed = {c for _, o in entries for c in o.choices}
        assert (set(p.type.choices) == allowed) if allowed else not isinstance(p.type, click.Choice)
        assert all(o.help in p.help for _, o in entries)
    assert set(params["method"].type.choices) == set(METHODS)
    text = CliRunner().invoke(main, ["solve", "--help"], terminal_width=400).output
    assert "--no-reduce" in text and "--executor [threads|process|dask]" in text


@st.composite
def choices(draw):
    """A method, one of its options that names a choice, and a choice."""
    method = draw(st.sampled_from([m for m in METHODS.values() if any(o.choices for o in m.options.values())]))
    name = draw(st.sampled_from([n for n, o in method.options.items() if o.choices]))
    return method.name, name, draw(st.sampled_from(method.options[name].choices))


@settings(max_examples=60)
@given(choices(), st.text(min_size=1, max_size=8))
def test_a_choice_is_accepted_exactly_when_the_registry_lists_it(small_for_checks, case, other):
    method, name, value = case
    assert check_options(method, {name: value}, small_for_checks) == {name: value}
    if other not in METHODS[method].options[name].choices:
        with pytest.raises(ValueError, match=name):
            check_options(method, {name: other}, small_for_checks)


@pytest.fixture(scope="module")
def small_for_checks():
    return build_space(grid(3, 3), epsilon=1.0, eta=1.5, seed=0)


@pytest.mark.parametrize("call, match", [
    (lambda s: solve(s, "constopt", lambdas=None), "lambdas"),
    (lambda s: solve(s, "constopt", lambdas={1: 2}), "lambdas"),
    (lambda s: solve(s, ["lp"]), "unknown method"),
    (lambda s: solve(s, "benders", seed=2**40), "seed"),
    (lambda s: solve(s, "lp", tolerance=1e-11), "tolerance"),
])
def test_bad_options_are_refused_naming_the_option(call, match):
    s = build_space(gaussian(8, 2, seed=1), epsilon=1.0, eta=1.5, n_outputs=4, seed=1)
    with pytest.raises((TypeError, ValueError), match=match):
        call(s)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(2, 9), method=st.sampled_from(["lp", "outputs", "optmech"]))
def test_a_zero_cost_optimum_is_optimal_with_gap_zero(seed, n, method):
    """One output costs nothing for every record, so the optimum is 0: a dual bound a hair
    below 0 (-4e-16) read as an infinite gap and 'gap_limited'; every loss is >= 0, so the
    bound is at least 0 and the run is optimal."""
    rng = np.random.default_rng(seed)
    cost = np.c_[np.zeros(n), rng.uniform(0.1, 1.0, (n, 2))]
    s = Space(cost=cost, prior=rng.dirichlet(np.ones(n)), epsilon=float(rng.uniform(0.1, 3)), eta=1.0,
              points=rng.uniform(0, 2, (n, 2)))
    r = solve(s, method)
    assert r.upper_bound == 0.0 and r.lower_bound == 0.0 and r.gap == 0.0 and r.status == "optimal"
