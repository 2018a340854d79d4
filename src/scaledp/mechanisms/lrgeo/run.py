"""One LR-Geo round end to end (users, server, solve, certification, measures) and the
baselines on the same instance. Used by the CLI and the benchmarks."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ...randomness import RNGLike, as_generator
from ...space import Space
from ..base import Mechanism
from .metrics import column_inference, relaxed_lower_bound, table_inference, violations
from .server import LRGeoServer, SolveInfo
from .table import ReferenceTable, build_table
from .user import LRGeoParams, LRGeoUser
from .world import World, project_km


@dataclass
class LRGeoRound:
    """Everything one round produced."""

    world: World
    params: LRGeoParams
    users: list[LRGeoUser]
    mechanisms: list[Mechanism]
    info: SolveInfo
    seconds: dict[str, float]
    report: dict[str, Any] = field(default_factory=dict)


def run_round(world: World, params: LRGeoParams, *, users: int | list[int] = 4, seed: RNGLike = 0,
              method: str = "benders", gap: float = 1e-4, table: ReferenceTable | None = None,
              measure: bool = True, time_limit: float | None = None,
              progress: Callable[[str], None] | None = None) -> LRGeoRound:
    """Draw users (or take the given locations), run the protocol and, with ``measure``, compute
    the true expected cost, the lower bound of Theorem 4.7, violations and inference."""
    rng = as_generator(seed)
    say = progress or (lambda s: None)
    t = {}
    t0 = time.perf_counter()
    if table is None:
        table = build_table(world, params.cell, params.table_band)
    t["table"] = time.perf_counter() - t0
    if isinstance(users, int):
        if not 1 <= users <= world.K:
            raise ValueError(f"users must be between 1 and K={world.K}, got {users}")
        locs = rng.choice(world.K, size=users, replace=False)
    else:
        locs = np.asarray(users, dtype=np.int64)
    server = LRGeoServer(world, table, params)
    t0 = time.perf_counter()
    us = [LRGeoUser(world, int(v), params, name=f"user-{n}", rng=rng) for n, v in enumerate(locs)]
    for u in us:
        server.enrol(u)
    t["users"] = time.perf_counter() - t0
    say(f"{len(us)} users, LR sets {min(u.n for u in us)}-{max(u.n for u in us)} locations; solving ({method})")
    resp, info = server.solve(method=method, gap=gap, time_limit=time_limit)
    t["solve"] = info.seconds
    t0 = time.perf_counter()
    mechs = []
    mix = 0.0
    for u in us:
        m, mx = u.mechanism(resp[u.name])
        mechs.append(m)
        mix = max(mix, mx)
    t["certify"] = time.perf_counter() - t0
    rnd = LRGeoRound(world, params, us, mechs, info, t)
    rep: dict[str, Any] = {"world": world.describe(), "users": len(us), "method": info.method,
                           "status": info.status, "lp_upper_bound": info.upper_bound,
                           "lp_lower_bound": info.lower_bound, "lp_gap": info.gap,
                           "iterations": info.iterations, "seconds": dict(t), "certify_mixing": mix,
                           "lr_set_sizes": [u.n for u in us], "obf_sizes": [int(len(u.obf)) for u in us]}
    if measure:
        say("measuring: true costs, lower bound, violations, inference")
        cbar = world.expected_cost
        own = [float(cbar[u.location] @ m.matrix[u.row_of_location]) for u, m in zip(us, mechs)]
        lr_obj = [float(np.mean(np.sum(cbar[u.lr] * m.matrix, axis=1))) for u, m in zip(us, mechs)]
        lbs = [relaxed_lower_bound(u.D_NV[:, u.lr], params.gamma, params.epsilon, u.lower_bound_costs(cbar),
                                   u.obf)[0] for u in us]
        rep["expected_cost_own_row"] = float(np.mean(own))
        rep["expected_cost_lr_sets"] = float(np.sum(lr_obj))
        rep["lower_bound"] = float(np.sum(lbs))
        rep["approximation_ratio"] = float(np.sum(lr_obj) / np.sum(lbs)) if np.sum(lbs) > 0 else math.inf
        v = violations(world, [u.lr for u in us], [m.matrix for m in mechs], params.epsilon, params.gamma)
        rep.update(v.summary())
        counts = []
        located = []
        for u in us:
            req = server.requests[u.name]
            tr = server.table_rows(*server.circles[u.name])
            counts.append(table_inference(req, tr.pair_beta, table.snap_max_km))
            ci = column_inference(req, world, params.gamma, params.Gamma)
            located.append(ci["rows_located"] == 1.0 and ci["candidate_locations"] == [u.location])
        allc = np.concatenate(counts)
        rep["table_inference_mean_rows"] = float(allc.mean()) if len(allc) else 0.0
        rep["table_inference_min_rows"] = int(allc.min()) if len(allc) else 0
        rep["users_located_by_columns"] = float(np.mean(located))
    rnd.report = rep
    return rnd


# ------------------------------------------------------------------- baselines
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
    from ..exponential import exponential_mechanism
    from ..noise import estimate_noise_mechanism
    from ..optimal import SolverLimitError, solve_pmo

    if name not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {name!r}")
    sp_ = world_space(world, params)
    cbar = world.expected_cost
    t0 = time.perf_counter()
    try:
        if name == "lp":
            res = solve_pmo(sp_, time_limit=time_limit)
            Z = res.mechanism.matrix
        elif name == "expmech":
            Z = exponential_mechanism(sp_).mechanism.matrix   # distance, not cost, in the exponent
        elif name == "constopt":
            from ..constopt import constopt_mechanism
            res = constopt_mechanism(sp_, time_limit=time_limit)
            Z = res.mechanism.matrix
        else:
            pts = project_km(world.latlon, world.lat0)
            esp = Space(cost=world.expected_cost, prior=sp_.prior, epsilon=params.epsilon, eta=params.gamma,
                        metric="euclidean", points=pts, output_records=np.arange(world.K), name=world.name)
            mc = estimate_noise_mechanism(esp, "laplace", draws=4000, seed=seed)
            secs = time.perf_counter() - t0
            return {"method": name, "status": "ok", "seconds": secs,
                    "expected_cost_own_row": float(np.mean(mc.per_record_loss[locations]))}
    except (SolverLimitError, TimeoutError) as exc:
        return {"method": name, "status": f"time_limit ({exc})", "seconds": time.perf_counter() - t0,
                "expected_cost_own_row": None}
    secs = time.perf_counter() - t0
    own = np.sum(cbar[locations] * Z[locations], axis=1)
    return {"method": name, "status": "ok", "seconds": secs, "expected_cost_own_row": float(own.mean())}
