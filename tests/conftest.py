"""Shared fixtures: small instances of every kind, and the path to the real data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from certdp import Space, build_space
from certdp.datasets import gaussian, grid, latlon

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_file(*parts: str) -> Path:
    """Path under ../shared/data, or skip the test when it is absent."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"real data not available: {p}")
    return p


def small_spaces() -> dict[str, Space]:
    rng = np.random.default_rng(3)
    ll = np.column_stack([60.16 + 0.01 * rng.random(18), 24.93 + 0.02 * rng.random(18)])
    pts = rng.random((12, 2)) * 3
    from scipy.spatial.distance import cdist
    D = cdist(pts, pts)
    return {
        "grid": build_space(grid(4, 5, 1.0), epsilon=2.0, eta=2.0, cost="travel", seed=1),
        "grid_subsetK": build_space(grid(4, 5, 1.0), epsilon=1.0, eta=2.0, n_outputs=7, seed=2),
        "gaussian": build_space(gaussian(16, 3, seed=4), epsilon=3.0, eta=1.5, seed=4),
        "latlon": build_space(latlon(ll), epsilon=10.0, eta=0.6, n_outputs=9, seed=5),
        "precomputed": Space(cost=D[:, :6], prior=np.full(12, 1 / 12), epsilon=2.0, eta=1.0,
                             metric="precomputed", distance_matrix=D, output_records=np.arange(6)),
        "disconnected": build_space(
            __import__("certdp").datasets.planar(np.array([[0, 0], [0.5, 0], [1.0, 0.1], [5, 5], [5.4, 5], [9, 9]])),
            epsilon=2.0, eta=0.8, seed=6),
    }


@pytest.fixture(scope="session")
def spaces() -> dict[str, Space]:
    return small_spaces()
