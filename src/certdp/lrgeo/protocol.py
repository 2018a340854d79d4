"""One LR-Geo round end to end: users draw their LR sets and upload coefficients, the server
solves CLR-Geo, and every user certifies its matrix (paper 003, Fig. 4)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..datasets.city import World
from ..mechanism import Mechanism
from ..progress import Progress, report
from ..randomness import RNGLike, as_generator
from .memory import check_round
from .server import LRGeoServer, SolveInfo
from .table import ReferenceTable, build_table
from .user import LRGeoParams, LRGeoUser


@dataclass
class LRGeoRound:
    """Everything one round produced (the server is kept for measuring what it learned)."""

    world: World
    params: LRGeoParams
    users: list[LRGeoUser]
    mechanisms: list[Mechanism]
    info: SolveInfo
    server: LRGeoServer
    seconds: dict[str, float]
    certify_mixing: float = 0.0


def run_round(world: World, params: LRGeoParams, *, users: int | list[int] = 4, seed: RNGLike = 0,
              method: str = "benders", gap: float = 1e-4, table: ReferenceTable | None = None,
              time_limit: float | None = None, progress: Progress | None = None,
              max_memory: float | None = None) -> LRGeoRound:
    """Draw ``users`` locations (or take the given ones), run the protocol and certify every
    user's matrix on its LR pairs. :func:`certdp.lrgeo.measures.measure_round` measures it.

    Before anything is allocated the round's memory is estimated
    (:func:`certdp.lrgeo.memory.check_round`); above ``max_memory`` bytes (default: the memory
    available) it is refused with :class:`certdp.lrgeo.memory.MemoryLimitError`, naming the
    estimate and the largest setting that fits."""
    rng = as_generator(seed)
    n_users = users if isinstance(users, int) else len(users)
    if not 1 <= n_users <= world.K:
        raise ValueError(f"users must be between 1 and K={world.K}, got {n_users}")
    check_round(world, params, n_users, limit=max_memory)
    t: dict[str, float] = {}
    t0 = time.perf_counter()
    if table is None:
        table = build_table(world, params.cell, params.table_band)
    t["table"] = time.perf_counter() - t0
    if isinstance(users, int):
        locs = rng.choice(world.K, size=users, replace=False)
    else:
        locs = np.asarray(users, dtype=np.int64)
    server = LRGeoServer(world, table, params)
    t0 = time.perf_counter()
    us = [LRGeoUser(world, int(v), params, name=f"user-{n}", rng=rng) for n, v in enumerate(locs)]
    for u in us:
        server.enrol(u)
    t["users"] = time.perf_counter() - t0
    report(progress, "solve", f"{len(us)} users, LR sets {min(u.n for u in us)}-{max(u.n for u in us)} "
           f"locations; solving ({method})")
    resp, info = server.solve(method=method, gap=gap, time_limit=time_limit)
    t["solve"] = info.seconds
    t0 = time.perf_counter()
    mechs, mix = [], 0.0
    for u in us:
        m, mx = u.mechanism(resp[u.name])
        mechs.append(m)
        mix = max(mix, mx)
    t["certify"] = time.perf_counter() - t0
    return LRGeoRound(world, params, us, mechs, info, server, t, mix)
