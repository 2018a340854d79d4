"""LR-Geo's baselines: the whole-world mechanisms of the other methods, measured at the users'
own rows (paper 003, section 5)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..datasets.city import World, project_km
from ..family.additive import estimate_noise_mechanism
from ..lp.outcome import SolverLimitError
from ..lrgeo.user import LRGeoParams
from ..mechanism import Mechanism
from ..randomness import RNGLike
from ..solve import solve
from ..space import Space

BASELINES = ("lp", "constopt", "laplace", "expmech")


def world_space(world: World, params: LRGeoParams) -> Space:
    """The full problem over all K locations (uniform prior) for the foundation's solvers."""
    return Space(cost=world.expected_cost, prior=np.full(world.K, 1.0 / world.K), epsilon=params.epsilon,
                 eta=params.gamma, metric="haversine", points=world.latlon, output_records=np.arange(world.K),
                 name=world.name, unit="km")


def run_baseline(name: str, world: World, params: LRGeoParams, locations: np.ndarray, *,
                 time_limit: float | None = 1800.0, seed: RNGLike = 0) -> dict[str, Any]:
    """Seconds and expected cost at the users' own rows of one baseline; ``status`` says if it
    hit the time limit."""
    if name not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {name!r}")
    sp_ = world_space(world, params)
    cbar = world.expected_cost
    t0 = time.perf_counter()
    try:
        if name in ("lp", "constopt", "expmech"):   # expmech: distance, not cost, in the exponent
            mech = (solve(sp_, name) if name == "expmech" else solve(sp_, name, time_limit=time_limit)).mechanism
            assert isinstance(mech, Mechanism)   # an exact method: a certified matrix
            Z = mech.matrix
        else:
            pts = project_km(world.latlon, world.lat0)
            esp = Space(cost=world.expected_cost, prior=sp_.prior, epsilon=params.epsilon, eta=params.gamma,
                        metric="euclidean", points=pts, output_records=np.arange(world.K), name=world.name)
            mc = estimate_noise_mechanism(esp, "laplace", draws=4000, seed=seed)
            secs = time.perf_counter() - t0
            return {"method": name, "status": "ok", "seconds": secs,
                    "expected_cost_own_row": float(np.mean(mc.per_record_loss[locations]))}
    except SolverLimitError as exc:
        return {"method": name, "status": f"time_limit ({exc})", "seconds": time.perf_counter() - t0,
                "expected_cost_own_row": None}
    secs = time.perf_counter() - t0
    own = np.sum(cbar[locations] * Z[locations], axis=1)
    return {"method": name, "status": "ok", "seconds": secs, "expected_cost_own_row": float(own.mean())}
