"""The LR-Geo tables' settings: ``--eps-cell`` with ``--settings paper`` replaces the paper's
epsilon and nothing else, and names its own results file."""

import math
from types import SimpleNamespace

import pytest

from benchmarks.paper003.tables import params_for, parse_args, tag

CELL = 1.2   # km, the Rome-scale city's location cell


def test_paper_settings_keep_the_papers_epsilon_unless_eps_cell_is_given():
    world = SimpleNamespace(cell=CELL)
    a = parse_args(["--part", "table", "--settings", "paper", "--dataset", "romecity"])
    P = params_for(world, a)
    assert P.epsilon == 10.0 and tag(a) == "romecity_paper"
    b = parse_args(["--part", "table", "--settings", "paper", "--dataset", "romecity", "--eps-cell", "1"])
    Q = params_for(world, b)
    assert Q.epsilon * CELL == pytest.approx(1.0)
    assert {**Q.__dict__, "epsilon": P.epsilon} == P.__dict__   # Gamma, r_obf, gamma, r_exp, table cell kept
    assert (P.Gamma, P.r_obf, P.cell) == (20.0, 4.0, 0.1)
    assert tag(b) == "romecity_paper_eps1"
    assert math.isinf(params_for(world, b, lrgeo_f=True).gamma)


def test_scaled_settings_default_to_one_per_cell():
    a = parse_args(["--part", "bounds", "--dataset", "gridcity"])
    assert a.eps_cell == 1.0 and tag(a) == "gridcity_eps1"
    assert params_for(SimpleNamespace(cell=0.25), a).epsilon == pytest.approx(4.0)
