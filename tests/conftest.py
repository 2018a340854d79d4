"""Shared fixtures: small instances of every kind, a small table and the Adult table for the
views, the path to the real data, and a fake clock for the Benders engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import settings

from certdp import Space, build_space
from certdp.datasets import gaussian, grid, latlon

# No test depends on the wall clock: hypothesis's per-example deadline (200 ms) is one, and it
# fails examples that a loaded machine merely slows down.
settings.register_profile("certdp", deadline=None)
settings.load_profile("certdp")

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


def _write_table(path: Path, n: int = 400, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n), "sex": rng.choice(["F", "M"], n),
                       "city": rng.choice(["A", "B", "C"], n)})
    df.to_csv(path, index=False)
    doms = {"age": {"low": 0, "high": 100, "bins": 20}, "sex": {"values": ["F", "M"]}, "city": {"values": ["A", "B", "C"]}}
    return df, doms


@pytest.fixture
def write_table():
    """``write_table(path, n=400, seed=0)`` writes a CSV of ``n`` records (age, sex, city) and
    returns the frame and the columns' domains in the ``--domains`` JSON form."""
    return _write_table


@pytest.fixture(scope="session")
def adult():
    """The UCI Adult table (``../shared/data/adult``; the test skips when it is absent) and the
    public domains of its fifteen columns (:mod:`certdp.views.adult`)."""
    from certdp.views import adult as adult_table

    data = shared_file("adult", "adult.data")
    return adult_table.read(data), adult_table.domains(data.with_name("adult.names"))


class FakeClock:
    """``time.perf_counter`` for the Benders engine: ``step`` seconds pass at every reading, so
    a deadline falls after a fixed number of readings, whatever the machine. With a deadline
    between two readings and a large step, the time left that HiGHS is given is at least half a
    step, or, once the deadline has passed, the least it takes (1 ms)."""

    step = 1000.0

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += self.step
        return self.now

    def process_time(self) -> float:
        """No CPU time passes (the engines record it for the benchmarks and never read it)."""
        return 0.0


@pytest.fixture
def engine_clock(monkeypatch):
    """The clock of the Benders engine (:mod:`certdp.lp.benders`) replaced by a :class:`FakeClock`."""
    import certdp.lp.benders

    clock = FakeClock()
    monkeypatch.setattr(certdp.lp.benders, "time", clock)
    return clock


@pytest.fixture
def outputs_clock(monkeypatch):
    """The clock of the outputs decomposition (:mod:`certdp.pmo.outputs.solve`) replaced by a
    :class:`FakeClock` of 1 s a reading."""
    import certdp.pmo.outputs.solve

    clock = FakeClock()
    clock.step = 1.0
    monkeypatch.setattr(certdp.pmo.outputs.solve, "time", clock)
    return clock
