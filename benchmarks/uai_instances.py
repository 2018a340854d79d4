"""Instances of the UAI paper's (paper 002) experiments, in one place.

Both kinds use the paper's setting: outputs = records (K = N), loss = distance, every pair
protected (eta = inf).

===========  ==========================================================================
text-N       N words of word2vec (shared/data/word2vec, the 2,000 most frequent lowercase
             words, unit vectors, distances 0.2-1.55), sampled with the clustered procedure
             of paper 002 section 5.1 (half random words, half among the 50 nearest of a
             word already chosen), seed 1. Euclidean distance.
loc-N        N points of interest of central Helsinki (shared/data/helsinki/helsinki_pois.csv,
             1,711 POIs; duplicates removed), sampled with seed 1, projected to planar
             kilometres (equirectangular at the sample's mean latitude) so that the Euclidean
             metric, and with it planar Laplace, applies. Stands in for the paper's Geolife
             bins (not available offline).
===========  ==========================================================================
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from scaledp import Space, build_space
from scaledp.datasets import clustered_embeddings, planar

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
WORDS = DATA / "word2vec" / "w2v_gnews_bolukbasi_top2000_lower.npy"
POIS = DATA / "helsinki" / "helsinki_pois.csv"
SEED = 1


def available(kind: str) -> bool:
    return (WORDS if kind == "text" else POIS).exists()


def load(kind: str, n: int, epsilon: float) -> Space:
    if kind == "text":
        ds = clustered_embeddings(WORDS, n, seed=SEED)
        return build_space(ds, epsilon=epsilon, eta=math.inf)
    if kind == "loc":
        import pandas as pd

        df = pd.read_csv(POIS).drop_duplicates(subset=["lat", "lon"])
        rng = np.random.default_rng(SEED)
        pick = np.sort(rng.choice(len(df), size=n, replace=False))
        lat = df["lat"].to_numpy()[pick]
        lon = df["lon"].to_numpy()[pick]
        lat0 = math.radians(float(lat.mean()))
        km = 6371.0088 * math.pi / 180.0
        xy = np.column_stack([(lon - lon.mean()) * km * math.cos(lat0), (lat - lat.mean()) * km])
        return build_space(planar(xy), epsilon=epsilon, eta=math.inf)
    raise ValueError(f"unknown instance kind {kind!r}")
