"""Paper 002's instances (:func:`certdp.experiments.instances.uai`) from any data file."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from certdp.experiments.instances import uai


def test_paper002_locations_from_any_csv_one_subset_per_seed(tmp_path):
    rng = np.random.default_rng(0)
    csv = tmp_path / "nodes.csv"
    pd.DataFrame({"id": range(60), "lon": 24.9 + 0.05 * rng.random(60), "lat": 60.1 + 0.05 * rng.random(60)}).to_csv(
        csv, index=False)
    a, b, a2 = (uai("loc", 20, 1.0, seed=s, source=csv) for s in (1, 2, 1))
    assert a.n_records == 20 and math.isinf(a.eta)
    assert np.array_equal(a.points, a2.points) and not np.array_equal(a.points, b.points)
    # planar kilometres: a 0.05-degree box at latitude 60 is 2.8 x 5.6 km
    assert 0.5 < float(np.ptp(a.points[:, 1])) < 6.0
    with pytest.raises(FileNotFoundError):
        uai("loc", 20, 1.0, source=tmp_path / "missing.csv")


def test_paper002_vocabulary_from_any_embedding_file(tmp_path):
    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(80, 5))
    np.save(tmp_path / "emb.npy", vecs)
    (tmp_path / "emb.txt").write_text("\n".join(f"w{i}" for i in range(80)))
    a, b = (uai("text", 25, 2.0, seed=s, source=tmp_path / "emb.npy") for s in (1, 2))
    assert a.n_records == b.n_records == 25
    # every record is one of the file's vectors
    assert all(np.isclose(vecs, p).all(axis=1).any() for p in a.points)
    assert not np.array_equal(a.points, b.points)
