"""Bad input gets a clear ValueError/TypeError naming the argument, and nothing is written."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp import Space, build_space, parse_dataset
from certdp.datasets import gaussian, grid, load_road_network

D = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.5], [2.0, 1.5, 0.0]])
P = np.full(3, 1 / 3)


def space(**kw):
    args = dict(cost=D.copy(), prior=P, epsilon=1.0, eta=1.0, metric="precomputed", distance_matrix=D)
    args.update(kw)
    return Space(**args)


@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf")])
def test_epsilon_must_be_positive_and_finite(eps):
    with pytest.raises(ValueError, match="epsilon"):
        space(epsilon=eps)


def test_epsilon_must_be_a_number():
    with pytest.raises(TypeError, match="epsilon"):
        space(epsilon="1")


@pytest.mark.parametrize("eta", [0.0, -2.0, float("nan")])
def test_eta_must_be_positive(eta):
    with pytest.raises(ValueError, match="eta"):
        space(eta=eta)


@pytest.mark.parametrize("bad,match", [
    (np.array([[0, 1, np.nan], [1, 0, 1.5], [np.nan, 1.5, 0]]), "finite"),
    (np.array([[0, 1, np.inf], [1, 0, 1.5], [np.inf, 1.5, 0]]), "finite"),
    (np.array([[0, -1, 2], [-1, 0, 1.5], [2, 1.5, 0]]), "non-negative"),
    (np.array([[0, 1, 2], [1.1, 0, 1.5], [2, 1.5, 0]]), "symmetric"),
    (np.array([[0.1, 1, 2], [1, 0, 1.5], [2, 1.5, 0]]), "zero diagonal"),
    (np.array([[0, 0, 2], [0, 0, 1.5], [2, 1.5, 0]]), "distance 0"),
])
def test_distance_matrix_is_checked(bad, match):
    with pytest.raises(ValueError, match=match):
        space(distance_matrix=bad)


def test_duplicate_points_are_refused():
    from certdp.datasets import planar
    with pytest.raises(ValueError, match="distance 0"):
        build_space(planar(np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]])), epsilon=1.0, eta=1.0, seed=0)


@pytest.mark.parametrize("prior,match", [(np.array([0.5, 0.6, -0.1]), "non-negative"),
                                         (np.array([0.3, 0.3, 0.3]), "sum to 1")])
def test_prior_is_checked(prior, match):
    with pytest.raises(ValueError, match=match):
        space(prior=prior)


def test_more_outputs_than_records_is_refused():
    with pytest.raises(ValueError, match="n_outputs"):
        build_space(grid(2, 3), epsilon=1.0, eta=1.0, n_outputs=7, seed=0)


@pytest.mark.parametrize("spec", ["", "grid", "grid:axb", "gaussian:10", "road:a.csv:3", "moon:3", "embedding::5",
                                  "gaussian:ten:2"])
def test_unknown_or_malformed_dataset_spec(spec):
    with pytest.raises(ValueError, match="dataset"):
        parse_dataset(spec)


def test_travel_cost_needs_a_travel_model():
    with pytest.raises(ValueError, match="travel"):
        build_space(gaussian(5, 2, seed=0), epsilon=1.0, eta=1.0, cost="travel", seed=0)


def test_unknown_cost_model():
    with pytest.raises(ValueError, match="cost must be one of"):
        build_space(gaussian(5, 2, seed=0), epsilon=1.0, eta=1.0, cost="time", seed=0)


@pytest.mark.parametrize("nodes_text,match", [
    ("", "empty"),
    ("id,lon,lat\n", "no rows"),
    ("id,x,y\n1,2,3\n", "missing"),
    ("id,lon,lat\n1,24.9,60.1\n2,24.91,abc\n", "non-numeric|malformed"),
])
def test_empty_and_malformed_nodes_csv(tmp_path, nodes_text, match):
    nodes = tmp_path / "n.csv"
    edges = tmp_path / "e.csv"
    nodes.write_text(nodes_text)
    edges.write_text("u,v,length_m\n1,2,10\n")
    with pytest.raises(ValueError, match=match):
        load_road_network(nodes, edges)


def test_edges_naming_unknown_nodes_and_missing_files(tmp_path):
    nodes = tmp_path / "n.csv"
    edges = tmp_path / "e.csv"
    nodes.write_text("id,lon,lat\n1,24.9,60.1\n2,24.91,60.11\n")
    edges.write_text("u,v,length_m\n1,3,10\n")
    with pytest.raises(ValueError, match="missing from"):
        load_road_network(nodes, edges)
    with pytest.raises(ValueError, match="not found"):
        load_road_network(tmp_path / "nope.csv", edges)


def test_outputs_that_are_records_carry_their_coordinates():
    """The natural first try, ``space.output_points[outputs]``, maps drawn outputs to places."""
    from certdp import solve
    from certdp.datasets import latlon

    rng = np.random.default_rng(0)
    pts = np.column_stack([60.16 + 0.01 * rng.random(12), 24.93 + 0.02 * rng.random(12)])
    sp = build_space(latlon(pts), epsilon=5.0, eta=1.0, n_outputs=5, seed=3)
    assert np.array_equal(sp.output_points, pts[sp.output_records])
    mech = solve(sp, "expmech").mechanism
    assert np.array_equal(mech.output_points, sp.output_points)
    drawn = mech.perturb(np.arange(12), rng=1)
    assert sp.output_points[drawn].shape == (12, 2)


def test_output_points_that_contradict_output_records_are_refused():
    pts = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="output_points"):
        Space(cost=np.ones((3, 2)), prior=P, epsilon=1.0, eta=1.0, points=pts, output_records=np.array([0, 1]),
              output_points=pts[[1, 2]])


@settings(max_examples=300, deadline=None)
@given(diff=st.lists(st.floats(-1.0, 1.0, allow_subnormal=False), min_size=1, max_size=4),
       exponent=st.integers(-1070, 0))
def test_paired_euclidean_distances_are_accurate_at_every_scale(diff, exponent):
    """Down to differences of 1e-320 (squares far below float64's normal range), the distance
    is within a few ulps of the exact one (decimal arithmetic): a pair at 2.78e-162 was read as
    3.14e-162 and dropped from eta 2.8e-162."""
    import decimal

    from certdp.space import paired

    d = np.ldexp(np.array(diff), exponent)
    got = float(paired(d[None, :], np.zeros((1, d.size)), "euclidean")[0])
    ctx = decimal.Context(prec=50, Emin=decimal.MIN_EMIN, Emax=decimal.MAX_EMAX)
    exact = ctx.sqrt(sum((ctx.multiply(decimal.Decimal(float(x)), decimal.Decimal(float(x))) for x in d),
                         decimal.Decimal(0)))
    if exact == 0:
        assert got == 0
    elif exact > decimal.Decimal("1e-300"):   # within the normal range of the result
        assert abs(decimal.Decimal(got) - exact) <= exact * decimal.Decimal("1e-15")


def test_too_many_pairs_are_refused_before_they_are_built(monkeypatch):
    """Every record at one point with a finite eta (or eta inf) would build N^2 / 2 pairs: the
    count is taken first and refused against the memory this process may use."""
    from certdp import _validate
    from certdp.space import neighbor_pairs

    monkeypatch.setattr(_validate, "memory_limit", lambda: 10_000_000)
    pts = np.zeros((2_000, 2))
    for eta in (1.0, math.inf):
        with pytest.raises(ValueError, match="pairs of 2,000 records"):
            neighbor_pairs(eta, "euclidean", points=pts)
    with pytest.raises(ValueError, match="pairs of 2,000 records"):
        neighbor_pairs(1.0, "euclidean", points=np.zeros((2_000, 20)))   # the high-dimensional scan


def test_points_without_coordinates_and_a_vanishing_eta_are_refused():
    from certdp.space import check_points, neighbor_pairs

    with pytest.raises(ValueError, match="no coordinates"):
        check_points(np.zeros((3, 0)), "euclidean")
    with pytest.raises(ValueError, match="at least 1e-100"):
        neighbor_pairs(1e-160, "euclidean", points=np.zeros((3, 1)))
