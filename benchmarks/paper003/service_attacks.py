"""Hostile uploads and clients against the LR-Geo service's scheduler, each next to two honest
users in the same round (gridcity 20 x 20, scaled settings, eps 1 per cell), each in its own
process so that its memory peak is its own.

Reported per attack: what the service answered the attacker and how fast, whether the honest
users got their certified matrices, the round's solve seconds against the same round without
the attacker (the baseline, measured in the same run), and the process's peak memory.

    python -m benchmarks.paper003.service_attacks [--grid 20x20]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import time
from typing import Any

import numpy as np

from certdp.datasets.city import grid_city
from certdp.lrgeo.messages import ObfuscationRequest, ProtocolError, TableRequest
from certdp.lrgeo.service import Limits, RoundScheduler, TooMany
from certdp.lrgeo.user import LRGeoParams, LRGeoUser

from .._common import end_with_parent, output_args, write_table


def _flood(body: dict, n: int, d: float) -> dict:
    o = len(body["columns"])
    D = np.full((n, n), d)
    np.fill_diagonal(D, 0.0)
    return {**body, "D_NN": D.tolist(), "D_NO": [[0.0] * o for _ in range(n)], "C_NO": [[0.001] * o for _ in range(n)],
            "p": [1.0 / n] * n}


def _costs(body: dict, c: float) -> dict:
    return {**body, "C_NO": [[c if v is not None else None for v in row] for row in body["C_NO"]]}


ATTACKS = {
    "none (baseline)": None,
    "100 rows at distance 0, all free": lambda b, P: _flood(b, 100, 0.0),
    "100 rows just within eta, all free": lambda b, P: _flood(b, 100, P.gamma * 0.99),
    "costs of 1e5 km": lambda b, P: _costs(b, 1e5),
    "costs of 1e300 km": lambda b, P: _costs(b, 1e300),
    "899 table requests from one client": "tables",
}


def run(grid: str, name: str, queue) -> None:
    end_with_parent()
    rows, cols = (int(v) for v in grid.split("x"))
    world = grid_city(rows, cols)
    P = LRGeoParams.scaled(world.cell, eps_cell=1.0)
    attack = ATTACKS[name]
    out: dict[str, Any] = {"attack": name, "answer": "-", "answer_s": None, "honest": "-", "round_s": None}
    with RoundScheduler(world, P, limits=Limits(round_users=3 if callable(attack) else 2, round_wait=2.0)) as s:
        honest = []
        for loc, seed in ((50, 1), (250, 2)):
            u = LRGeoUser(world, loc, P, name="unassigned", rng=seed)
            g = s.table(u.table_request(), "honest")
            u.name = g.user
            honest.append((u, g.token, u.obfuscation_request(g.table)))
        if attack == "tables":
            asked = honest[0][0].table_request()
            t0 = time.perf_counter()
            refused = 0
            for _ in range(899):
                try:
                    s.table(TableRequest(user="x", center=asked.center, radius_km=asked.radius_km), "attacker")
                except TooMany:
                    refused += 1
            out["answer"] = f"{899 - refused} granted, {refused} refused (429)"
            out["answer_s"] = time.perf_counter() - t0
            try:
                s.table(asked, "newcomer")
                out["answer"] += "; a new client is served"
            except Exception as exc:   # reported in the table
                out["answer"] += f"; a new client is refused ({type(exc).__name__})"
        for u, token, req in honest:
            s.upload(u.name, token, req)
        if callable(attack):
            u = LRGeoUser(world, 120, P, name="unassigned", rng=3)
            g = s.table(u.table_request(), "attacker")
            u.name = g.user
            body = attack(json.loads(u.obfuscation_request(g.table).to_json()), P)
            t0 = time.perf_counter()
            try:
                s.upload(u.name, g.token, ObfuscationRequest.from_json(json.dumps(body)))
                out["answer"] = "accepted"
            except ProtocolError as exc:
                out["answer"] = f"refused: {str(exc)[:90]}"
            out["answer_s"] = time.perf_counter() - t0
            out["bytes"] = len(json.dumps(body))
        states = [s.result(u.name, token, wait=30.0)[0] for u, token, _ in honest]
        out["honest"] = f"{states.count('done')}/2 certified"
        rec = s.stats().rounds
        out["round_s"] = rec[0].solve_seconds if rec else None
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", default="20x20", help="gridcity ROWSxCOLS (scaled settings)")
    a = output_args(ap).parse_args()
    ctx = mp.get_context("spawn")
    results = []
    for name in ATTACKS:
        q = ctx.Queue()
        p = ctx.Process(target=run, args=(a.grid, name, q))
        p.start()
        results.append(q.get(timeout=600))
        p.join()
    base = results[0]["round_s"]
    rows = [[r["attack"], r.get("bytes", "-"), r["answer"], r["answer_s"], r["honest"], r["round_s"],
             None if r["round_s"] is None or not base else r["round_s"] / base, r["peak_mb"]] for r in results]
    write_table("service_attacks", f"LR-Geo service: hostile uploads and clients (gridcity {a.grid})", [
        "attack", "body bytes", "the service's answer", "answer s", "honest users", "round solve s",
        "round s / baseline", "peak MB"], rows, notes=[
        ("each attack in its own process with two honest users in the same round (in process, no HTTP); the "
         "baseline is the same round without the attacker"),
        "peak MB: the process's VmHWM, world and reference table included"], raw=results, args=a)


if __name__ == "__main__":
    main()
