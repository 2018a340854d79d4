"""Dataset constructors: generated, synthetic files, and the real data in ../shared/data."""

from __future__ import annotations

import numpy as np
import pytest

from certdp import build_space, parse_dataset, solve
from certdp.datasets import clustered_vocabulary, embeddings, grid, read_word2vec_bin, road_network, travel_cost
from certdp.space import haversine_km

from ..conftest import shared_file


def test_haversine_uses_lat_lon_order():
    # one degree of latitude is ~111.2 km everywhere; one degree of longitude shrinks with cos(lat)
    assert haversine_km(np.array([60.0, 24.0]), np.array([61.0, 24.0])) == pytest.approx(111.19, rel=1e-3)
    assert haversine_km(np.array([60.0, 24.0]), np.array([60.0, 25.0])) == pytest.approx(55.6, rel=1e-2)


def test_grid_records_and_travel_cost():
    ds = grid(3, 4, 2.0)
    assert ds.points.shape == (12, 2) and ds.points[0].tolist() == [1.0, 1.0]
    sp = build_space(ds, epsilon=1.0, eta=2.0, cost="travel", destinations=np.array([0]), seed=0)
    # destination is cell 0; Manhattan path distances: |pd(i) - pd(k)|
    pd = np.abs(np.arange(12) // 4) * 2.0 + np.abs(np.arange(12) % 4) * 2.0
    assert np.allclose(sp.cost, np.abs(pd[:, None] - pd[None, :]))


def test_travel_cost_formula():
    rec = np.array([[1.0, 2.0], [3.0, 0.0]])
    out = np.array([[0.0, 0.0]])
    assert np.allclose(travel_cost(rec, out), [[1.5], [1.5]])
    assert np.allclose(travel_cost(rec, out, np.array([1.0, 0.0])), [[1.0], [3.0]])


def test_output_sampling_is_seeded():
    a = build_space(grid(5, 5), epsilon=1.0, eta=1.0, n_outputs=7, seed=11)
    b = build_space(grid(5, 5), epsilon=1.0, eta=1.0, n_outputs=7, seed=11)
    assert np.array_equal(a.output_records, b.output_records) and len(a.output_records) == 7


def test_word2vec_binary_reader(tmp_path):
    vecs = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    with open(tmp_path / "w.bin", "wb") as f:
        f.write(b"3 4\n")
        for w, v in zip(["alpha", "beta", "gamma"], vecs):
            f.write(w.encode() + b" " + v.astype("<f4").tobytes() + b"\n")
    words, got = read_word2vec_bin(tmp_path / "w.bin")
    assert words == ["alpha", "beta", "gamma"]
    assert np.array_equal(got, vecs.astype(np.float64))
    ds = embeddings(tmp_path / "w.bin", n=2, seed=0)
    assert ds.n_records == 2 and set(ds.labels) <= {"alpha", "beta", "gamma"}


def test_tiny_road_network(tmp_path):
    (tmp_path / "n.csv").write_text("id,lon,lat\n1,24.90,60.10\n2,24.901,60.10\n3,24.902,60.10\n4,24.903,60.1005\n")
    (tmp_path / "e.csv").write_text("u,v,length_m\n1,2,60\n2,3,60\n3,4,80\n")
    ds = road_network(tmp_path / "n.csv", tmp_path / "e.csv", n=3, seed=0)
    sp = build_space(ds, epsilon=20.0, eta=0.2, cost="travel", seed=0)
    assert sp.metric == "haversine" and sp.n_records == 3
    res = solve(sp)
    assert res.mechanism.verification.passed


def test_helsinki_road_network():
    nodes = shared_file("helsinki", "helsinki_walking_nodes.csv")
    edges = shared_file("helsinki", "helsinki_walking_edges.csv")
    ds = parse_dataset(f"road:{nodes},{edges}:60", seed=3)
    sp = build_space(ds, epsilon=10.0, eta=0.15, n_outputs=20, cost="travel", seed=3)
    assert sp.n_records == 60 and sp.n_outputs == 20
    assert np.all(sp.cost >= 0) and sp.cost.max() < 5  # km, central Helsinki
    res = solve(sp)
    assert res.mechanism.verification.passed and res.gap < 1e-6


def test_word2vec_top2000():
    npy = shared_file("word2vec", "w2v_gnews_bolukbasi_top2000_lower.npy")
    ds = parse_dataset(f"embedding:{npy}:40", seed=1)
    assert ds.points.shape == (40, 300) and ds.labels is not None
    d = build_space(ds, epsilon=3.0, eta=0.9, n_outputs=10, seed=1)
    assert 0.1 < d.cost[d.cost > 0].min() and d.cost.max() < 1.6


def test_clustered_vocabulary_is_distinct_and_seeded():
    X = np.random.default_rng(0).random((300, 5))
    a = clustered_vocabulary(X, 60, seed=3)
    assert len(a) == 60 and len(set(a.tolist())) == 60
    assert np.array_equal(a, clustered_vocabulary(X, 60, seed=3))
