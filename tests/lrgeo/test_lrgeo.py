"""LR-Geo (paper 003): protocol, solve, privacy and bounds."""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certdp import solve
from certdp.audit import verify
from certdp.cli import main
from certdp.datasets.city import grid_city, helsinki, load_world
from certdp.experiments.lrgeo import world_space
from certdp.lrgeo.measures import (column_inference, measure_round, relaxed_bounds, violation_bounds,
                                   violations)
from certdp.lrgeo.memory import MemoryLimitError, estimate_round
from certdp.lrgeo.messages import ObfuscationRequest, ObfuscationResponse, ProtocolError, TableRequest, TableResponse
from certdp.lrgeo.protocol import run_round
from certdp.lrgeo.server import LRGeoServer
from certdp.lrgeo.table import build_table
from certdp.lrgeo.user import LRGeoParams, LRGeoUser, geo_ind_path_distance

from ..conftest import SHARED_DATA
from ..mechanism_checks import check_exact_mdp, check_probabilities, check_sampling, check_save_load

HELSINKI = SHARED_DATA / "helsinki"      # ../shared/data, as every test that reads real data


@pytest.fixture(scope="module")
def city():
    return grid_city(8, 8, cell_km=0.25, seed=3)


@pytest.fixture(scope="module")
def params(city):
    return LRGeoParams.scaled(city.cell, eps_cell=1.0, table_cells=0.25)


@pytest.fixture(scope="module")
def table(city, params):
    return build_table(city, params.cell, params.table_band)


def _setup(city, params, table, locs, seed=0):
    srv = LRGeoServer(city, table, params)
    rng = np.random.default_rng(seed)
    users = [LRGeoUser(city, int(v), params, name=f"u{t}", rng=rng) for t, v in enumerate(locs)]
    for u in users:
        srv.enrol(u)
    return srv, users


# ------------------------------------------------------------------ bad input
def test_params_reject_bad_values(city):
    c = city.cell
    with pytest.raises(ValueError, match="Gamma"):
        LRGeoParams(epsilon=1, gamma=2 * c, Gamma=c, r_obf=3 * c, r_exp=c, cell=c / 4)
    with pytest.raises(ValueError, match="r_exp"):
        LRGeoParams(epsilon=1, gamma=c, Gamma=2 * c, r_obf=c, r_exp=2 * c, cell=c / 4)
    with pytest.raises(ValueError, match="cell"):
        LRGeoParams(epsilon=1, gamma=c, Gamma=2 * c, r_obf=3 * c, r_exp=c, cell=0.0)


def test_single_location_lr_set_is_refused(city):
    c = city.cell
    P = LRGeoParams(epsilon=1, gamma=0.5 * c, Gamma=0.5 * c, r_obf=2 * c, r_exp=c, cell=c / 4)
    with pytest.raises(ValueError, match="single location"):
        LRGeoUser(city, 0, P, rng=0)


def test_uncovering_circle_is_refused(city, params, table):
    srv = LRGeoServer(city, table, params)
    u = LRGeoUser(city, 27, params, rng=0)
    req = u.table_request()
    small = TableRequest(user=req.user, center=req.center, radius_km=params.Gamma / 2)
    with pytest.raises(ProtocolError, match="does not cover"):
        u.obfuscation_request(srv.handle_table_request(small))


def test_bad_messages_leave_server_state_unchanged(city, params, table):
    srv, users = _setup(city, params, table, [9, 45])
    good = srv.requests["u0"]
    before = dict(srv.requests)
    n, o = good.D_NO.shape
    bad_variants = {
        "shape": dict(D_NO=good.D_NO[:, :-1]),
        "nan": dict(D_NO=np.where(np.eye(n, o, dtype=bool), np.nan, good.D_NO)),
        "negative": dict(D_NN=-good.D_NN),
        "asymmetric": dict(D_NN=good.D_NN + np.triu(np.full((n, n), 0.01), 1)),
    }
    for what, change in bad_variants.items():
        fields = dict(user="u0", D_NN=good.D_NN, columns=good.columns, D_NO=good.D_NO, C_NO=good.C_NO, p=good.p)
        fields.update(change)
        with pytest.raises(ProtocolError):
            srv.submit(ObfuscationRequest(**fields))
    # a well-formed message that fails the server's own checks: a column out of range
    with pytest.raises(ProtocolError, match="columns"):
        srv.submit(ObfuscationRequest(user="u0", D_NN=good.D_NN, columns=good.columns + city.K, D_NO=good.D_NO,
                                      C_NO=good.C_NO, p=good.p))
    # missing costs within r_obf
    with pytest.raises(ProtocolError, match="C_NO"):
        srv.submit(ObfuscationRequest(user="u0", D_NN=good.D_NN, columns=good.columns, D_NO=good.D_NO,
                                      C_NO=np.full(good.C_NO.shape, np.nan), p=good.p))
    assert srv.requests == before and srv.requests["u0"] is good


def test_messages_round_trip_through_json(city, params, table):
    srv, users = _setup(city, params, table, [9, 45])
    tr = users[0].table_request()
    tr2 = TableRequest.from_json(tr.to_json())
    assert tr2.user == tr.user and np.array_equal(tr2.center, tr.center) and tr2.radius_km == tr.radius_km
    resp_t = srv.handle_table_request(tr)
    back = TableResponse.from_json(resp_t.to_json())
    assert np.array_equal(back.pair_key, resp_t.pair_key) and np.allclose(back.pair_beta, resp_t.pair_beta)
    req = srv.requests["u0"]
    r2 = ObfuscationRequest.from_json(req.to_json())
    assert np.array_equal(np.isnan(r2.C_NO), np.isnan(req.C_NO))
    assert np.allclose(np.nan_to_num(r2.C_NO), np.nan_to_num(req.C_NO)) and np.array_equal(r2.columns, req.columns)
    resp, _ = srv.solve(method="lp")
    o2 = ObfuscationResponse.from_json(resp["u0"].to_json())
    assert np.allclose(o2.y, resp["u0"].y)
    with pytest.raises(ProtocolError):
        ObfuscationRequest.from_json(json.dumps({"type": "ObfuscationRequest", "user": "x"}))


# ------------------------------------------------------------- cost bounds
def test_estimated_costs_bound_the_true_costs(city, params, table):
    """Lemma B.1 / B.2: p(beta - e - e) <= c <= p(beta + e + e)."""
    _, users = _setup(city, params, table, [0, 20, 63])
    cbar = city.expected_cost
    for u in users:
        req = u.obfuscation_request(LRGeoServer(city, table, params).handle_table_request(u.table_request()))
        true = cbar[np.ix_(u.lr, u.obf)] * req.p[:, None]
        m = ~np.isnan(req.C_NO)
        assert m.any()
        assert np.all(req.C_NO[m] >= true[m] - 1e-12)
        assert np.all(u.c_low[m] <= true[m] + 1e-12)
        # a location reported as itself costs nothing, and the user knows it (tc(i, i) = 0)
        rows, cols = np.nonzero(u.lr[:, None] == u.obf[None, :])
        assert len(rows) == u.n and np.all(req.C_NO[rows, cols] == 0.0)


# ------------------------------------------------------------------- solving
def test_benders_matches_monolithic_and_matrices_pass_the_audit(city, params, table):
    srv, users = _setup(city, params, table, [9, 27, 45])
    rb, ib = srv.solve(method="benders", gap=1e-6, fallback=False)
    rm, im = srv.solve(method="lp")
    assert ib.method == "benders" and ib.status == "optimal"
    assert ib.lower_bound <= ib.upper_bound + 1e-9
    assert im.lower_bound <= im.upper_bound + 1e-9
    assert abs(ib.upper_bound - im.upper_bound) <= 1e-5 * im.upper_bound
    for u in users:
        mech, mix = u.mechanism(rb[u.name])
        E, d = u.lr_pairs()
        assert len(E) > 0
        assert verify(mech.matrix, params.epsilon, E, d).passed
        assert mix < 1e-4
        np.testing.assert_allclose(mech.matrix.sum(axis=1), 1.0, atol=1e-9)


def test_benders_solves_the_paper_epsilon_without_fallback(city):
    """At the paper's 10/km (12 per cell) y' is about 2e-9 and cuts on it never exceeded HiGHS's
    tolerances; in the scaled master u = H y' with the uniform core as start, Benders reaches the
    monolithic optimum itself, and every matrix passes the exact audit."""
    P = LRGeoParams.scaled(city.cell, eps_cell=12.0, table_cells=0.25)
    srv, users = _setup(city, P, build_table(city, P.cell, P.table_band), [9, 27, 45, 60])
    rb, ib = srv.solve(method="benders", gap=1e-3, fallback=False)
    _, im = srv.solve(method="lp")
    assert ib.method == "benders" and ib.status == "optimal" and ib.gap <= 1e-3
    assert im.lower_bound * (1 - 1e-6) <= ib.upper_bound <= im.upper_bound * (1 + 1e-3)
    assert ib.lower_bound <= im.upper_bound * (1 + 1e-9)
    for u in users:
        mech, _ = u.mechanism(rb[u.name])
        E, d = u.lr_pairs()
        assert verify(mech.matrix, P.epsilon, E, d).passed


def test_user_mechanisms_pass_the_common_checks(city, params, table, tmp_path):
    """Probabilities, exact Geo-Ind on the LR pairs, save/load with audit, sampling. LR-Geo
    matrices cover a user's LR rows, not a whole Space, so the checks run on those pairs;
    the user's matrix stores no costs (it knows only estimates)."""
    srv, users = _setup(city, params, table, [9, 45])
    resp, _ = srv.solve(method="benders", gap=1e-6)
    for u in users:
        mech, _ = u.mechanism(resp[u.name])
        E, d = u.lr_pairs()
        assert mech.matrix.shape == (u.n, city.K) and len(mech.edges) == len(E)
        check_probabilities(mech.matrix)
        check_exact_mdp(mech.matrix, params.epsilon, E, d)
        check_save_load(mech, tmp_path, with_cost=False)
        check_sampling(mech)


def test_exponential_entries_satisfy_geo_ind_across_users(city, params, table):
    """Theorem 4.4: every violation between users involves at least one free (LP) entry."""
    srv, users = _setup(city, params, table, [10, 19, 37, 44])
    resp, _ = srv.solve(method="lp")
    Zs = [u.assemble(resp[u.name]) for u in users]
    free = []
    for u in users:
        F = np.zeros((u.n, city.K), dtype=bool)
        F[:, u.obf] = u.D_NV[:, u.obf] <= params.r_exp
        free.append(F)
    H = city.haversine
    for a in range(len(users)):
        for b in range(a + 1, len(users)):
            D = H[np.ix_(users[a].lr, users[b].lr)]
            i, j = np.nonzero(D <= params.gamma)
            f = np.exp(params.epsilon * D[i, j])[:, None]
            for X, Y, FX, FY in ((Zs[a][i], Zs[b][j], free[a][i], free[b][j]),
                                 (Zs[b][j], Zs[a][i], free[b][j], free[a][i])):
                bad = X > f * Y * (1 + 1e-9) + 1e-15
                assert not np.any(bad & ~FX & ~FY)
    v = violations(city, [u.lr for u in users], Zs, params.epsilon, params.gamma)
    assert v.cross_checked > 0 and 0 <= v.ratio <= v.cross_ratio <= 1


def test_lower_bound_is_below_the_optimal_geo_ind_mechanism(params):
    """Theorem 4.7 on a small city: the relaxed bound of each user's LR rows is below what the
    full optimal Geo-Ind mechanism over all K locations pays on those rows."""
    w = grid_city(6, 6, cell_km=0.25, seed=5)
    P = LRGeoParams.scaled(w.cell, eps_cell=1.0, table_cells=0.25)
    tab = build_table(w, P.cell, P.table_band)
    srv, users = _setup(w, P, tab, [7, 21, 28])
    full = solve(world_space(w, P)).mechanism.matrix
    cbar = w.expected_cost
    for u in users:
        lb, _ = relaxed_bounds(u.D_NV[:, u.lr], P.gamma, P.epsilon, u.lower_bound_costs(cbar))
        opt_rows = float(np.mean(np.sum(cbar[u.lr] * full[u.lr], axis=1)))
        assert 0 < lb <= opt_rows + 1e-9


def test_run_round_reports_and_lrgeo_f(city, params, table):
    rnd = run_round(city, params, users=3, seed=2, table=table)
    r = measure_round(rnd)
    assert r["lower_bound"] <= r["expected_cost_lr_sets"] + 1e-9
    assert r["approximation_ratio"] >= 1.0 - 1e-9 and r["approximation_ratio_true_cost"] >= 1.0 - 1e-9
    # Theorem 4.6: the LP's objective bounds the true cost of its matrices (certification only
    # mixes in a little of the exponential mechanism)
    assert r["approximation_ratio"] >= r["approximation_ratio_true_cost"] * (1 - 1e-3)
    assert 0 <= r["violation_ratio"] <= r["cross_user_violation_ratio"] <= 1
    assert r["violation_tolerance"] == 1e-9 and r["method"] in ("benders", "benders->lp", "lp")
    assert r["users_located_by_columns"] == 1.0   # the price of sharing y: see messages.py
    PF = LRGeoParams(epsilon=params.epsilon, gamma=math.inf, Gamma=params.Gamma, r_obf=params.r_obf,
                     r_exp=params.r_exp, cell=params.cell)
    rf = run_round(city, PF, users=2, seed=2, table=table)
    assert all(m.verification.passed for m in rf.mechanisms)
    rep = measure_round(rf, lower_bound=False)   # the cost without Theorem 4.7's bound
    assert rep["lower_bound"] is rep["approximation_ratio"] is rep["approximation_ratio_true_cost"] is None
    assert rep["expected_cost_own_row"] >= 0 and rep["expected_cost_lr_sets"] > 0


def test_cli_lrgeo_json():
    res = CliRunner().invoke(main, ["lrgeo", "--dataset", "gridcity", "--grid", "6x6", "--users", "2", "--json",
                                    "--baselines", "expmech"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["users"] == 2 and rep["baselines"][0]["method"] == "expmech"
    assert rep["lower_bound"] <= rep["expected_cost_lr_sets"] + 1e-9
    bad = CliRunner().invoke(main, ["lrgeo", "--grid", "6x6", "--r-exp", "5", "--r-obf", "1"])
    assert bad.exit_code == 2 and "r_exp" in bad.output


def test_helsinki_world():
    if not (HELSINKI / "helsinki_walking_nodes.csv").is_file():
        pytest.skip(f"Helsinki data not found in {HELSINKI}")
    w = helsinki(HELSINKI).block(8, 8)
    P = LRGeoParams.scaled(w.cell, eps_cell=1.0, table_cells=0.25)
    rnd = run_round(w, P, users=2, seed=0)
    assert all(m.verification.passed for m in rnd.mechanisms)
    rep = measure_round(rnd)
    assert rep["lower_bound"] <= rep["expected_cost_lr_sets"] + 1e-9


def _write_network(city, folder):
    """The generated city's road graph in the Helsinki CSV format (id,lon,lat and u,v,length_m)."""
    import pandas as pd
    import scipy.sparse as sps

    road = city.road
    pd.DataFrame({"id": road.ids, "lon": road.latlon[:, 1], "lat": road.latlon[:, 0]}).to_csv(folder / "n.csv",
                                                                                              index=False)
    g = sps.triu(road.graph).tocoo()
    pd.DataFrame({"u": road.ids[g.row], "v": road.ids[g.col], "length_m": g.data * 1000}).to_csv(folder / "e.csv",
                                                                                               index=False)
    return f"{folder / 'n.csv'},{folder / 'e.csv'}"


def test_cli_lrgeo_on_any_network(tmp_path):
    net = _write_network(grid_city(8, 8, cell_km=0.5, seed=2), tmp_path)
    res = CliRunner().invoke(main, ["lrgeo", "--network", net, "--grid", "5x5", "--users", "2", "--json", "--seed", "1",
                                    "--scaled-settings", "--quiet"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["users"] == 2 and rep["lower_bound"] <= rep["expected_cost_lr_sets"] + 1e-9
    # the paper's settings are the defaults on a network
    res = CliRunner().invoke(main, ["lrgeo", "--network", net, "--grid", "5x5", "--users", "2", "--json", "--seed", "1",
                                    "--lr-radius", "3", "--table-cell", "0.2", "--quiet"])
    assert res.exit_code == 0, res.output
    p = json.loads(res.stdout)["params"]
    assert p["epsilon"] == 10.0 and p["r_obf"] == 4.0 and p["lr_radius"] == 3.0
    for bad, why in ((["--network", "nope.csv"], "NODES.csv,EDGES.csv"), (["--network", "a.csv,b.csv"], "no file"),
                     (["--network", net, "--dataset", "helsinki"], "not both")):
        r = CliRunner().invoke(main, ["lrgeo", "--grid", "5x5", *bad])
        assert r.exit_code == 2 and why in r.output, r.output


def test_violations_count_as_the_paper_with_a_tolerance_and_distance_zero_apart(city):
    K = city.K
    rows = [np.array([0, 1]), np.array([1, 2])]          # location 1 is in both users' LR sets
    Z = [np.full((2, K), 1.0 / K), np.full((2, K), 1.0 / K)]
    gamma = float(city.haversine[0, 2]) * 1.01           # every cross pair is a neighbour pair
    v = violations(city, rows, Z, 1.0, gamma)
    assert v.cross_violations == 0 and v.paper_pairs == 4 * 3 * K
    assert v.cross_checked == 2 * 4 * K and v.zero_checked == 2 * K
    Z[1][0, 0] += 1e-12                                   # float noise at distance 0: not a violation
    assert violations(city, rows, Z, 1.0, gamma).cross_violations == 0
    Z[1][0, 0] += 1e-6                                    # a real one, at distance 0
    v = violations(city, rows, Z, 1.0, gamma)
    assert v.cross_violations == v.zero_violations == 1
    assert v.ratio == 1 / (4 * 3 * K) and v.cross_ratio == 1 / (2 * 4 * K)
    assert v.summary()["positive_distance_violation_ratio"] == 0.0
    assert v.errors[0] == pytest.approx(1e-6, rel=1e-3)
    assert v.summary()["max_error"] == pytest.approx(1e-6, rel=1e-3)
    Z[1][0, 0] = 1.0 / K                                  # checked, nothing violated: an error of 0
    assert violations(city, rows, Z, 1.0, gamma).summary()["max_error"] == 0.0
    far = violations(city, [rows[0][:1], rows[1][1:]], [Z[0][:1], Z[1][1:]], 1.0, gamma=0.0)
    # LR sets {0} and {2}, no two rows within gamma: nothing checked, no error measured
    assert far.cross_checked == 0
    assert far.summary()["max_error"] is None and far.summary()["p99_error"] is None
    assert far.cross_ratio is None and far.summary()["positive_distance_violation_ratio"] is None


def test_hidden_centre_keeps_the_server_from_locating_users(city, params, table):
    """The remedy for the column leak (LRGeoParams.hide): the server still finds each LR set's
    centre, but every location within hide of it could be the user's; the matrices stay
    certified and the user's Gamma-ball stays inside its LR set."""
    base = measure_round(run_round(city, params, users=3, seed=5, table=table))
    assert base["users_located_by_columns"] == 1.0 and base["server_estimate_error_km"] == 0.0
    hidden = LRGeoParams(**{**params.__dict__, "hide": params.Gamma})
    rnd = run_round(city, hidden, users=3, seed=5, table=table)
    rep = measure_round(rnd)
    assert all(m.verification.passed for m in rnd.mechanisms)
    assert rep["users_located_by_columns"] == 0.0 and rep["server_candidates_mean"] > 3
    for u in rnd.users:
        assert city.haversine[u.centre, u.location] <= hidden.hide + 1e-9 or math.isinf(hidden.gamma)
        ball = np.flatnonzero(geo_ind_path_distance(city, params.gamma, u.location, params.Gamma) <= params.Gamma)
        assert set(ball) <= set(u.lr)
        ci = column_inference(rnd.server.requests[u.name], city, hidden, u.location)
        assert u.location in ci["candidate_locations"] and ci["candidate_centres"] == [u.centre]
    assert sum(u.n for u in rnd.users) > sum(base["lr_set_sizes"])


def test_relaxed_lower_bound_survives_ratios_beyond_floats_reach():
    """At the paper's 10 per km with 3.6 km neighbours exp(eps d) is 4e15; such pairs are left
    out (a relaxation), so the bound stays valid instead of HiGHS calling the LP infeasible."""
    D = np.array([[0.0, 3.6, 7.2], [3.6, 0.0, 3.6], [7.2, 3.6, 0.0]])
    c = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]]) / 3
    lb, _ = relaxed_bounds(D, 4.0, 10.0, c)
    assert 0.0 <= lb <= 1e-9          # every row may keep its own location: cost 0
    lb1, _ = relaxed_bounds(D, 4.0, 0.2, c)
    assert lb1 > 0.05                 # a small epsilon keeps the pairs and forces spreading


def test_bbox_lays_the_grid_over_that_area_of_the_network(tmp_path):
    city = grid_city(8, 8, cell_km=0.5, seed=2)
    net = _write_network(city, tmp_path)
    lon_min, lat_min, lon_max, lat_max = city.bbox
    box = (lon_min, lat_min, (lon_min + lon_max) / 2, (lat_min + lat_max) / 2)    # the south-west quarter
    w = load_world("gridcity", 4, 4, network=net, bbox=",".join(map(str, box)))
    assert w.bbox == box and w.K == 16
    assert np.all((w.latlon[:, 1] > box[0]) & (w.latlon[:, 1] < box[2]))
    assert np.all((w.latlon[:, 0] > box[1]) & (w.latlon[:, 0] < box[3]))
    res = CliRunner().invoke(main, ["lrgeo", "--network", net, "--bbox", ",".join(map(str, box)), "--grid", "4x4",
                                    "--users", "2", "--json", "--seed", "1", "--scaled-settings", "--quiet"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["world"]["bbox"] == [round(v, 7) for v in box]


_finite = st.floats(-200, 200, allow_nan=False)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(box=st.one_of(st.lists(st.one_of(_finite, st.just(math.nan), st.just(math.inf)), min_size=3, max_size=5),
                     st.text(max_size=30)))
def test_a_bad_bbox_is_one_line_naming_it(tmp_path, box):
    """Any four numbers, a NaN, an inverted or empty box, a box away from the network, or
    text: either the grid covers that area of the network, or one ValueError naming bbox."""
    city = _small_city()
    net = _written(tmp_path)
    text = box if isinstance(box, str) else ",".join(map(str, box))
    try:
        w = load_world("gridcity", 3, 3, network=net, bbox=text)
    except ValueError as exc:
        assert str(exc).startswith("bbox") and "\n" not in str(exc)
        return
    lon_min, lat_min, lon_max, lat_max = w.bbox
    assert lon_min < lon_max and lat_min < lat_max and all(map(math.isfinite, w.bbox))
    ll = city.road.latlon     # the box holds a node of the network
    assert np.any((ll[:, 1] >= lon_min) & (ll[:, 1] <= lon_max) & (ll[:, 0] >= lat_min) & (ll[:, 0] <= lat_max))


def test_cli_refuses_a_bad_bbox_with_exit_2(tmp_path):
    net = _write_network(_small_city(), tmp_path)
    for box in ("10,10,11,11", "45.1,10,45,10.1", "nan,1,2,3", "1,2,3", "a,b,c,d"):
        for cmd in (["lrgeo"], ["lrgeo", "serve", "--port", "0"]):
            r = CliRunner().invoke(main, [*cmd, "--network", net, "--bbox", box, "--grid", "3x3", "--quiet"])
            assert r.exit_code == 2 and r.output.startswith("Error: --bbox") and r.output.count("\n") == 1, r.output
    r = CliRunner().invoke(main, ["lrgeo", "--dataset", "gridcity", "--bbox", "1,2,3,4", "--grid", "3x3"])
    assert r.exit_code == 2 and "--bbox" in r.output


@functools.lru_cache(maxsize=1)
def _small_city():
    return grid_city(6, 6, cell_km=0.5, seed=3)


def _written(tmp_path):
    folder = tmp_path / "net"
    if not (folder / "n.csv").is_file():
        folder.mkdir(exist_ok=True)
        _write_network(_small_city(), folder)
    return f"{folder / 'n.csv'},{folder / 'e.csv'}"


@settings(max_examples=25)
@given(rows=st.integers(3, 12), cols=st.integers(3, 12), gamma=st.floats(1.0, 3.0), lr=st.floats(1.0, 5.0),
       r_obf=st.floats(0.5, 4.0), r_exp=st.floats(0.0, 1.0), seed=st.integers(0, 2**16))
def test_the_memory_estimate_counts_bound_every_users_arrays(rows, cols, gamma, lr, r_obf, r_exp, seed):
    """The counts the estimate is made of (from the grid alone) bound every user's LR set,
    obfuscation range, free entries and Geo-Ind neighbours, wherever the user is."""
    w = grid_city(rows, cols, cell_km=0.3, seed=seed % 7)
    c = w.cell
    P = LRGeoParams(epsilon=1.0 / c, gamma=gamma * c, Gamma=max(lr, gamma) * c, r_obf=r_obf * c,
                    r_exp=min(r_exp, r_obf) * c, cell=c / 4)
    est = estimate_round(w, P, 2)
    loc = int(np.random.default_rng(seed).integers(w.K))
    u = LRGeoUser(w, loc, P, rng=seed) if _lr_ok(w, P, loc) else None
    if u is None:
        return
    counts = est.counts
    assert u.n <= counts.lr and len(u.obf) <= counts.columns
    D = u.D_NV[:, u.obf]
    assert (D <= P.r_exp).sum(axis=1).max() <= counts.free
    E, _ = u.lr_pairs()
    assert np.bincount(E.ravel(), minlength=u.n).max(initial=0) <= counts.neighbours
    assert est.total == sum(est.parts.values()) and estimate_round(w, P, 3).total > est.total


def _lr_ok(w, P, loc) -> bool:
    return int((geo_ind_path_distance(w, P.gamma, loc, P.lr_radius) <= P.lr_radius).sum()) >= 2


def test_a_round_that_would_not_fit_is_refused_before_anything_is_allocated():
    w = grid_city(12, 12, cell_km=0.5, seed=1)
    P = LRGeoParams.scaled(w.cell, eps_cell=1.0)
    need = estimate_round(w, P, 6).total
    with pytest.raises(MemoryLimitError) as info:
        run_round(w, P, users=6, seed=0, max_memory=need - 1)
    msg = str(info.value)
    assert "needs about" in msg and "fits: at most" in msg and "\n" not in msg
    assert "travel" not in w.__dict__ and "haversine" not in w.__dict__     # nothing was computed
    most = int(msg.split("at most ")[1].split(" user")[0])
    assert 1 <= most < 6
    assert estimate_round(w, P, most).total <= need - 1 < estimate_round(w, P, most + 1).total
    side = int(msg.split("grid of at most ")[1].split("x")[0])
    assert 2 <= side < 12
    rnd = run_round(w, P, users=2, seed=0, max_memory=need)   # within the limit: the round runs
    assert all(m.verification.passed for m in rnd.mechanisms)
    r = CliRunner().invoke(main, ["lrgeo", "--grid", "12x12", "--users", "6", "--max-memory", "0.001", "--quiet"])
    assert r.exit_code == 2 and r.output.startswith("Error: a round of 6 users") and r.output.count("\n") == 1


@settings(max_examples=8, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), side=st.integers(5, 7), eps_cell=st.floats(0.5, 4.0),
       r_exp_cells=st.floats(0.0, 3.3), users=st.integers(2, 4))
def test_violation_ratio_is_below_proposition_4_5s_bounds(seed, side, eps_cell, r_exp_cells, users):
    """Eq. 29 (each pair of users) and Eq. 30 (all users) bound the measured GV ratio, with
    the paper's denominators, on generated cities and parameters."""
    w = grid_city(side, side, cell_km=0.25, seed=seed)
    P = LRGeoParams.scaled(w.cell, eps_cell=eps_cell, r_exp_cells=r_exp_cells, table_cells=0.25)
    rnd = run_round(w, P, users=users, seed=seed)
    rows = [u.lr for u in rnd.users]
    v = violations(w, rows, [m.matrix for m in rnd.mechanisms], P.epsilon, P.gamma)
    eq30, eq29 = violation_bounds(w, rows, P.r_exp)
    assert 0.0 <= v.ratio <= eq30 + 1e-12 <= 1.0 + 1e-12
    measured = v.pair_ratios(w.K)
    for a in range(users):
        for b in range(a + 1, users):
            assert 0.0 <= measured[a, b] <= eq29[a, b] + 1e-12


@given(seed=st.integers(0, 10_000), r_exp=st.floats(0.0, 1.0))
@settings(max_examples=25)
def test_proposition_4_5_counts_match_the_sets(city, seed, r_exp):
    """Eq. 29-30 from the column counts equal the same formulas with A_i counted as sets."""
    rng = np.random.default_rng(seed)
    rows = [rng.choice(city.K, size=int(rng.integers(2, 6)), replace=False) for _ in range(3)]
    K, H = city.K, city.haversine
    A = {int(i): set(np.flatnonzero(H[i] > r_exp).tolist()) for r in rows for i in r}
    n = [len(r) for r in rows]
    both = {(a, b): sum(len(A[int(i)] & A[int(j)]) for i in rows[a] for j in rows[b])
            for a in range(3) for b in range(a + 1, 3)}
    eq30, eq29 = violation_bounds(city, rows, r_exp)
    for (a, b), s in both.items():
        t = n[a] + n[b]
        assert eq29[a, b] == pytest.approx(1 - (2 * s + (n[a] ** 2 + n[b] ** 2 - n[a] - n[b]) * K)
                                           / (t * (t - 1) * K), abs=1e-12)
    N = sum(n)
    assert eq30 == pytest.approx(1 - (2 * sum(both.values()) + sum(x * x - x for x in n) * K) / (N * (N - 1) * K),
                                 abs=1e-12)


def _relaxed_optimum(D: np.ndarray, gamma: float, eps: float, c: np.ndarray) -> float:
    """Eq. 31-32 solved whole by scipy's linprog, written from the paper: rows sum to 1, entries
    in [0, 1], x[i,k] <= exp(eps d) x[j,k] both ways for every pair within gamma, but those
    whose ratio exceeds e^16 (HiGHS mis-solves coefficients that far apart; leaving them out
    relaxes the LP, and a certified matrix keeps them, so the optimum stays between the
    bounds)."""
    from scipy.optimize import linprog

    n, K = c.shape
    rows, cols, vals = [], [], []
    r = 0
    for i in range(n):
        for j in range(n):
            if i != j and D[i, j] <= gamma and eps * D[i, j] <= 16.0:
                for k in range(K):
                    rows += [r, r]
                    cols += [i * K + k, j * K + k]
                    vals += [1.0, -math.exp(eps * D[i, j])]
                    r += 1
    A_ub = np.zeros((r, n * K))
    A_ub[rows, cols] = vals
    A_eq = np.kron(np.eye(n), np.ones((1, K)))
    res = linprog(c.ravel(), A_ub=A_ub if r else None, b_ub=np.zeros(r) if r else None, A_eq=A_eq,
                  b_eq=np.ones(n), bounds=(0, 1), method="highs")
    assert res.status == 0
    return float(res.fun)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 7), st.integers(1, 6), st.integers(0, 2**32 - 1), st.floats(0.3, 3.0),
       st.floats(0.2, 12.0), st.floats(-0.5, 0.0), st.booleans())
def test_relaxed_bounds_hold_the_relaxed_optimum_between_them(n, K, seed, gamma, eps, low, rounding):
    """Over random LR rows (any number of pairs within gamma, eps x gamma up to 36, costs that
    may be below 0 as Eq. 33's estimates can be, distances a few ulps asymmetric as rounding
    makes them): the relaxed LP's optimum, solved whole by another solver on the longer
    reading of each distance, lies between the two bounds; away from the large ratios where the
    engine may stall, they are within its gap."""
    rng = np.random.default_rng(seed)
    P = rng.uniform(0, 3, (n, 2))
    D = np.sqrt(((P[:, None, :] - P[None, :, :]) ** 2).sum(-1))
    if rounding:
        D = D * (1.0 + 4e-16 * rng.integers(-4, 5, D.shape))
        np.fill_diagonal(D, 0.0)
    c = rng.uniform(low, 1.0, (n, K)) / n
    opt = _relaxed_optimum(np.maximum(D, D.T), gamma, eps, c)
    lb, ub = relaxed_bounds(D, gamma, eps, c, gap=1e-4)
    assert lb <= opt + 1e-9 and opt <= ub + 1e-9
    if eps * gamma <= 4.0:     # far from the ratios where the engine may stall short of its gap
        spread = float(np.sum(c.max(axis=1) - c.min(axis=1)))   # the shifted objective's scale
        assert ub - lb <= 1e-4 * spread + 1e-9


def test_relaxed_lower_bound_of_flat_rows_is_their_cost():
    D = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert relaxed_bounds(D, 2.0, 1.0, np.array([[0.25, 0.25], [-0.5, -0.5]])) == pytest.approx((-0.25, -0.25))
    with pytest.raises(ValueError, match="c_low"):
        relaxed_bounds(D, 2.0, 1.0, np.zeros(3))
