"""The location obfuscator as a location-privacy engineer uses it: a DataFrame of lat/lon
points and a public area in, the same DataFrame with perturbed points out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp import Mechanism
from certdp.audit import audit_file
from certdp.locations import LocationObfuscator
from certdp.space import haversine_km, neighbor_pairs

from .mechanism_checks import check_exact_mdp, check_probabilities, check_sampling, check_save_load

AREA = "area:60.160,24.930,60.172,24.950:0.4"       # 4 x 3 cells of 0.4 km in central Helsinki
BOX = (60.160, 24.930, 60.172, 24.950)


def trips(n: int = 6, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"user": [f"u{i}" for i in range(n)],
                         "lat": rng.uniform(BOX[0], BOX[2], n), "lon": rng.uniform(BOX[1], BOX[3], n)},
                        index=pd.Index(np.arange(100, 100 + n), name="trip"))


@pytest.fixture(scope="module")
def fitted() -> LocationObfuscator:
    return LocationObfuscator(AREA, epsilon=3.0, eta=1.0, method="lp", seed=1, rng=2).fit()


def test_transform_keeps_the_frame_and_moves_points_to_output_locations(fitted):
    df = trips()
    out = fitted.transform(df)
    assert out.index.equals(df.index) and list(out.columns) == list(df.columns)
    assert out["user"].tolist() == df["user"].tolist()
    outs = set(map(tuple, fitted.outputs_[["lat", "lon"]].to_numpy().round(12)))
    assert all(tuple(p) in outs for p in out[["lat", "lon"]].to_numpy().round(12))
    assert df["lat"].tolist() == trips()["lat"].tolist(), "the input frame must not change"


def test_the_mechanism_is_certified_and_audited(fitted, tmp_path):
    m = fitted.mechanism_
    check_probabilities(m.matrix)
    g = m.geometry
    edges, dist = neighbor_pairs(g.eta, g.metric, points=g.points)
    assert len(edges) == len(m.edges) > 0
    check_exact_mdp(m.matrix, m.epsilon, edges, dist)
    check_save_load(m, tmp_path)
    check_sampling(m)
    rep = audit_file(fitted.save(tmp_path / "area"))
    assert rep.passed


def test_draws_through_the_frame_follow_the_mechanism(fitted):
    """Many copies of one point: the perturbed locations' frequencies are the mechanism's row."""
    from scipy.stats import chisquare

    n = 4000
    df = pd.DataFrame({"lat": np.full(n, 60.1655), "lon": np.full(n, 24.9405)})
    rec = int(fitted.snap(df.iloc[:1])["location"].iloc[0])
    obf = LocationObfuscator(mechanism=fitted.mechanism_, rng=np.random.default_rng(5)).fit()
    out = obf.transform(df)
    lookup = {tuple(p): k for k, p in enumerate(obf.outputs_[["lat", "lon"]].to_numpy())}
    counts = np.bincount([lookup[tuple(p)] for p in out[["lat", "lon"]].to_numpy()], minlength=len(lookup))
    p = fitted.mechanism_.matrix[rec]
    big = p * n >= 5
    f_obs = np.append(counts[big], counts[~big].sum())
    f_exp = np.append(p[big], p[~big].sum()) * n
    keep = f_exp > 0
    assert chisquare(f_obs[keep], f_exp[keep] * f_obs[keep].sum() / f_exp[keep].sum()).pvalue > 1e-4


def test_snap_names_the_nearest_location_and_its_distance(fitted):
    df = trips(20, seed=3)
    s = fitted.snap(df)
    locs = fitted.locations_[["lat", "lon"]].to_numpy()
    d = haversine_km(df[["lat", "lon"]].to_numpy()[:, None, :], locs[None, :, :])
    assert s.index.equals(df.index)
    assert np.array_equal(s["location"].to_numpy(), d.argmin(axis=1))
    assert np.allclose(s["snap_km"].to_numpy(), d.min(axis=1), rtol=1e-9, atol=1e-12)
    assert (s["snap_km"] <= fitted.max_snap_km_).all()


@settings(max_examples=30)
@given(st.floats(BOX[0], BOX[2]), st.floats(BOX[1], BOX[3]))
def test_every_point_of_the_box_is_inside_the_area(fitted, lat, lon):
    df = pd.DataFrame({"lat": [lat], "lon": [lon]})
    assert fitted.snap(df)["snap_km"].iloc[0] <= fitted.max_snap_km_
    out = fitted.transform(df)
    assert len(out) == 1


@pytest.mark.parametrize("lat,lon", [(60.30, 24.94), (60.165, 25.2), (-60.165, 24.94)])
def test_a_point_outside_the_area_is_an_error_naming_the_row(fitted, lat, lon):
    df = pd.DataFrame({"lat": [60.165, lat], "lon": [24.94, lon]}, index=["home", "far"])
    with pytest.raises(ValueError, match="'far'.*outside the area"):
        fitted.transform(df)


@pytest.mark.parametrize("frame,match", [
    (pd.DataFrame({"latitude": [60.165], "lon": [24.94]}), "no column 'lat'"),
    (pd.DataFrame({"lat": [np.nan], "lon": [24.94]}), "non-finite"),
    (pd.DataFrame({"lat": ["north"], "lon": [24.94]}), "must be numbers"),
    (pd.DataFrame({"lat": [160.0], "lon": [24.94]}), r"\|lat\| <= 90"),
])
def test_bad_tables_are_refused(fitted, frame, match):
    with pytest.raises(ValueError, match=match):
        fitted.transform(frame)


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(TypeError, match="DataFrame"):
        LocationObfuscator(AREA, epsilon=1.0, eta=1.0, method="expmech", seed=0).fit().transform([[60.1, 24.9]])
    with pytest.raises(ValueError, match="not fitted"):
        LocationObfuscator(AREA, epsilon=1.0, eta=1.0).transform(trips())
    with pytest.raises(ValueError, match="area must be"):
        LocationObfuscator("grid:3x4", epsilon=1.0, eta=1.0).fit()
    with pytest.raises(ValueError, match="epsilon and eta"):
        LocationObfuscator(AREA).fit()
    with pytest.raises(ValueError, match="epsilon"):
        LocationObfuscator(AREA, epsilon=-1.0, eta=1.0).fit()
    with pytest.raises(TypeError, match="does not take"):
        LocationObfuscator(AREA, epsilon=1.0, eta=1.0, method="expmech", options={"gap": 0.1}).fit()
    with pytest.raises(ValueError, match="south < north"):
        LocationObfuscator("area:60.2,24.9,60.1,25.0:0.5", epsilon=1.0, eta=1.0).fit()
    with pytest.raises(ValueError, match="no matrix"):
        LocationObfuscator(AREA, epsilon=1.0, eta=1.0, method="laplace", seed=0).fit()
    from certdp import build_space, solve
    from certdp.datasets import grid
    planar = solve(build_space(grid(3, 3), epsilon=1.0, eta=1.5, seed=0), "expmech").mechanism
    with pytest.raises(ValueError, match="haversine"):
        LocationObfuscator(mechanism=planar).fit()
    with pytest.raises(ValueError, match="max_snap_km"):
        LocationObfuscator(AREA, epsilon=1.0, eta=1.0, method="expmech", max_snap_km=0.0, seed=0).fit()


def test_a_saved_mechanism_is_loaded_audited_and_reproducible_when_seeded(fitted, tmp_path):
    path = fitted.save(tmp_path / "helsinki.npz")
    df = trips(10)
    a = LocationObfuscator(mechanism=path, rng=7).fit().transform(df)
    b = LocationObfuscator(mechanism=str(path), rng=7).fit().transform(df)
    assert a.equals(b)
    Z = np.load(path)
    bad = dict(Z)
    bad["matrix"] = np.eye(Z["matrix"].shape[0], Z["matrix"].shape[1])
    np.savez(tmp_path / "tampered.npz", **bad)
    with pytest.raises(ValueError, match="fails its audit"):
        LocationObfuscator(mechanism=tmp_path / "tampered.npz").fit()


def _road_files(tmp_path):
    """A small street network in the Helsinki CSV format: a 4 x 4 lattice of 150 m blocks."""
    rows = []
    for r in range(4):
        for c in range(4):
            rows.append((r * 4 + c + 1000, 24.940 + c * 0.0027, 60.165 + r * 0.00135))
    nodes = pd.DataFrame(rows, columns=["id", "lon", "lat"])
    ids = nodes["id"]
    edges = [(a, a + 1) for a in ids if (a - 1000) % 4 != 3] + [(a, a + 4) for a in ids if a - 1000 < 12]
    e = pd.DataFrame(edges, columns=["u", "v"])
    e["length_m"] = 150.0
    nodes.to_csv(tmp_path / "nodes.csv", index=False)
    e.to_csv(tmp_path / "edges.csv", index=False)
    return f"road:{tmp_path / 'nodes.csv'},{tmp_path / 'edges.csv'}"


def test_a_road_network_with_travel_cost(tmp_path):
    obf = LocationObfuscator(_road_files(tmp_path), epsilon=4.0, eta=0.4, cost="travel", method="outputs",
                             options={"gap": 1e-3}, seed=3, rng=1).fit()
    assert obf.result_.gap <= 1e-3 + 1e-12
    assert len(obf.locations_) == 16 and obf.locations_["label"].iloc[0] == "1000"
    df = pd.DataFrame({"lat": [60.1652, 60.1685], "lon": [24.9401, 24.9470]}, index=["x", "y"])
    s = obf.snap(df)
    assert s["label"].tolist() == ["1000", "1015"]
    out = obf.transform(df)
    assert out.index.equals(df.index)
    # the labels travel with a saved mechanism
    again = LocationObfuscator(mechanism=obf.save(tmp_path / "road.npz")).fit()
    assert again.locations_["label"].tolist() == obf.locations_["label"].tolist()
    with pytest.raises(ValueError, match="outside the area"):
        obf.transform(pd.DataFrame({"lat": [60.20], "lon": [24.94]}))


def test_a_table_of_locations_as_the_area_and_a_pipeline():
    from sklearn.base import clone
    from sklearn.pipeline import make_pipeline

    places = pd.DataFrame({"lat": [60.1650, 60.1660, 60.1675, 60.1690], "lon": [24.940, 24.943, 24.946, 24.941]},
                          index=["cafe", "park", "station", "library"])
    obf = LocationObfuscator(places, epsilon=5.0, eta=0.5, method="expmech", seed=0, rng=4)
    pipe = make_pipeline(clone(obf))
    out = pipe.fit_transform(pd.DataFrame({"lat": [60.1651], "lon": [24.9401]}))
    assert out.shape == (1, 2)
    assert obf.fit().snap(pd.DataFrame({"lat": [60.1676], "lon": [24.9461]}))["label"].tolist() == ["station"]
    with pytest.raises(ValueError, match="repeats a location"):
        LocationObfuscator(pd.concat([places, places.iloc[:1]]), epsilon=1.0, eta=1.0).fit()


def test_a_geodataframe_comes_back_as_a_geodataframe(fitted):
    gpd = pytest.importorskip("geopandas")
    df = trips(5)
    gdf = gpd.GeoDataFrame(df[["user"]], geometry=gpd.points_from_xy(df["lon"], df["lat"]), crs="EPSG:4326")
    out = fitted.transform(gdf)
    assert isinstance(out, gpd.GeoDataFrame) and out.crs == gdf.crs and out.index.equals(gdf.index)
    outs = set(map(tuple, fitted.outputs_[["lon", "lat"]].to_numpy().round(12)))
    assert all((round(p.x, 12), round(p.y, 12)) in outs for p in out.geometry)
    with pytest.raises(ValueError, match="to_crs"):
        fitted.transform(gdf.to_crs("EPSG:3067"))


def test_the_outputs_of_a_mechanism_are_places():
    """A loaded mechanism knows its output locations (records' coordinates)."""
    obf = LocationObfuscator(AREA, epsilon=2.0, eta=1.0, method="expmech", outputs=5, seed=2).fit()
    m: Mechanism = obf.mechanism_
    assert m.output_points.shape == (5, 2)
    assert np.array_equal(m.output_points, m.geometry.points[m.output_records])
