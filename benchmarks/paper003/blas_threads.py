"""LR-Geo's Benders rounds with BLAS on one thread (the engine) against BLAS on every core (the
process default), on the same users, in the same process, alternately.

The engine runs its rounds under :func:`certdp.lp.dense.single_threaded_blas`. The baseline
replaces that context with a null one, so the rounds' numpy calls may start OpenBLAS's worker
threads (which then spin for their timeout before they sleep). Per run: the process CPU
seconds of the solve, the CPU seconds of the thread that ran it (the repair's thread
included: it ends with the solve), the CPU seconds of every other thread (OpenBLAS's workers,
HiGHS's scheduler), wall seconds, rounds and gap. Settings: paper 003's, a 40 x 40 grid over
the boxes of :mod:`benchmarks.paper003.scale`.

    python -m benchmarks.paper003.blas_threads [--only sydney-west] [--users 4] [--reps 2] [--name NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from pathlib import Path

from .._common import output_args, write_table
from .scale import SYDNEY_BOXES


def _thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process, by thread id."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:    # the thread ended meanwhile
            continue
        out[t] = (int(fields[11]) + int(fields[12])) / tick
    return out


def _run(server, engine: bool) -> dict:
    from unittest import mock

    from certdp.lp import benders

    swap = contextlib.nullcontext() if engine else mock.patch.object(benders, "single_threaded_blas", contextlib.nullcontext)
    main = str(os.getpid())
    with swap:
        before = _thread_cpu()
        c0, t0 = time.process_time(), time.perf_counter()
        _, info = server.solve(gap=1e-4, max_iterations=300, fallback=False)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        after = _thread_cpu()
    others = sum(v - before.get(t, 0.0) for t, v in after.items() if t != main)
    return {"cpu": cpu, "others": others, "main": cpu - others, "wall": wall, "rounds": info.iterations,
            "gap": info.gap, "status": str(info.status)}


def main() -> None:
    ap = output_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--only", nargs="+", default=list(SYDNEY_BOXES), help="boxes of scale.SYDNEY_BOXES")
    ap.add_argument("--users", type=int, nargs="+", default=[4])
    ap.add_argument("--reps", type=int, default=2, help="runs of each side per box, alternately")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="blas_threads", help="the results file's name")
    args = ap.parse_args()
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    import numpy as np

    from certdp.datasets.city import grid_world
    from certdp.datasets.road import load_road_network
    from certdp.experiments.instances import data_dir
    from certdp.lrgeo.server import LRGeoServer
    from certdp.lrgeo.table import build_table
    from certdp.lrgeo.user import LRGeoParams, LRGeoUser

    roads = Path(data_dir()) / "roads"
    if not (roads / "sydney_nodes.csv").is_file():
        raise SystemExit(f"no Sydney network under {roads}")
    road = load_road_network(roads / "sydney_nodes.csv", roads / "sydney_edges.csv")
    rows, raw = [], []
    for box in args.only:
        world = grid_world(road, 40, 40, bbox=SYDNEY_BOXES[box], name="sydney")
        P = LRGeoParams.paper(world.cell)
        table = build_table(world, P.cell, P.table_band)
        for users in args.users:
            server = LRGeoServer(world, table, P)
            rng = np.random.default_rng(args.seed)
            for t, v in enumerate(rng.choice(world.K, size=users, replace=False)):
                server.enrol(LRGeoUser(world, int(v), P, name=f"user-{t}", rng=rng))
            runs: dict[str, list[dict]] = {"one thread (engine)": [], "every core (baseline)": []}
            for _ in range(args.reps):
                for side, engine in (("every core (baseline)", False), ("one thread (engine)", True)):
                    r = _run(server, engine)
                    runs[side].append(r)
                    raw.append({"box": box, "users": users, "side": side, **r})
            base = statistics.median(r["cpu"] for r in runs["every core (baseline)"])
            for side, rs in runs.items():
                med = {k: statistics.median(r[k] for r in rs) for k in ("cpu", "main", "others", "wall")}
                rows.append([box, users, side, len(rs), med["cpu"], max(r["cpu"] for r in rs), med["main"],
                             med["others"], med["wall"], rs[0]["rounds"], max(r["gap"] for r in rs),
                             med["cpu"] / base])
    write_table(args.name, "LR-Geo's Benders rounds: BLAS on one thread against every core (paper 003's settings)",
                ["box", "users", "BLAS in the rounds", "runs", "CPU s (median)", "CPU s (worst)", "solving thread CPU s",
                 "other threads CPU s", "wall s", "rounds", "worst gap", "CPU / baseline"], rows,
                notes=[f"seed {args.seed}; {args.reps} runs of each side per box, alternately, in one process",
                       "other threads: OpenBLAS's workers and HiGHS's scheduler; wall seconds on a shared machine"],
                raw=raw, args=args)


if __name__ == "__main__":
    main()
