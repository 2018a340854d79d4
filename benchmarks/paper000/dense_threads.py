"""The dense interior-point method on a real stabilised master of the outputs decomposition:
how its columns are read and how many threads it runs on, alone and
beside processes that keep cores busy (a shared machine).

    python -m benchmarks.paper000.dense_threads [--networks helsinki city] [--n 2000] [--rounds 8]
        [--reps 2] [--busy 0 1 2]

The master is the one of round ``--rounds`` of :func:`certdp.experiments.instances.growing`
(box 0), built by the engine's own rounds (stabilised master, pricing, new columns; no upper
steps); its largest part (the whole LP, or on Helsinki the largest connected component's rows)
is then solved, each way in the same process, to the tolerance of that round:

- ``store, OpenBLAS threads``: the columns read from the run's column store at every product
  (:class:`~certdp.lp.dense.DenseColumns` over slots, restricted to the part's rows), OpenBLAS
  on every core;
- ``array, OpenBLAS threads``: the part's columns gathered once into one array, OpenBLAS on
  every core;
- ``array, one thread``: the same on one BLAS thread;
- ``array, halves on 2 threads`` (the engine): one BLAS thread, the normal equations formed as
  three products of the two halves of the rows on two threads (:meth:`DenseColumns.gram`).

Each is run ``--reps`` times beside each number of ``--busy`` processes that spin on a core
each (0: nothing else of this benchmark runs; the machine is shared, so its load is recorded).
Wall and CPU seconds (the solving process's), and the interior-point iterations, which are the
same for every way (the same LP).

A second table solves the same master, the engine's way, to the round's tolerance and to 1e-8
(an exact master's), with and without the method's two economies: Gondzio's centrality
correctors (``lp.dense._CORRECTORS`` set to 0 without them) and the normal equations solved
to a share of the stopping tolerance (``lp.dense._RESIDUAL_SHARE`` 0: to 1e-10 relative every
time): iterations, single-precision factors and CPU seconds.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

from .._common import output_args, write_table


def _spin() -> None:
    while True:
        pass


def master_part(network: str, n: int, rounds: int):
    """The stabilised master's largest part after ``rounds`` rounds: (store, slots, rows, costs,
    slack costs, tolerance)."""
    from certdp.experiments.instances import growing
    from certdp.lp.outcome import relative_gap
    from certdp.pmo.outputs.config import EXACT_TOLERANCE, OutputsConfig
    from certdp.pmo.outputs.solve import PricingLoop

    space = growing(network, n, 0)
    cfg = OutputsConfig()
    loop = PricingLoop(space, reduce=True, tolerance=1e-9, workers=2, executor="threads", scheduler=None,
                       config=cfg)
    master = loop.master
    try:
        for it in range(1, rounds + 1):
            g = relative_gap(loop.upper.ub, loop.lb) if np.isfinite(loop.upper.ub) else None
            g_now = np.inf if g is None else g
            tol = max(EXACT_TOLERANCE, min(cfg.master_tolerance, cfg.gap_share * g_now))
            lam, b, *_ = master.solve(tol=tol)
            if it == rounds:
                break
            lb_here, lam_lb, cols, _ = loop.price(lam, smooth=it > 1 and loop.alpha > 0)
            if lb_here > loop.lb:
                loop.lb = lb_here
                master.set_box(lam_lb, master.delta)
            master.prune(lam, b, int(cfg.columns * n), weight=1e-3, reduced=1e-4, patience=2)
            loop.add(cols)
    finally:
        loop.pricer.close()
    costs = (master.delta + master.center, master.delta - master.center)
    live = master._screen(costs)
    if master.split:
        comps, rows = max(master.split, key=lambda p: p[1].size)
        cols = np.flatnonzero(np.isin(master.col_comp, comps) & live)
    else:
        rows, cols = np.arange(n), np.flatnonzero(live)
    return master.store, master.slots[cols], rows, master.cost[cols], (costs[0][rows], costs[1][rows]), tol


def timed(way: str, store, slots, rows, g, costs, tol) -> dict:
    from certdp.lp import dense

    rhs = np.ones(rows.size)
    whole = rows.size == store.m
    t0, c0 = time.perf_counter(), time.process_time()
    if way == "store, OpenBLAS threads":
        R = dense.DenseColumns(store=store, slots=slots, rows=None if whole else rows)
        r = dense._solve(R, g, rhs, costs, tol, 200, True, None)
    elif way == "array, OpenBLAS threads":
        R = dense.DenseColumns(store.gather(slots, None if whole else rows))
        r = dense._solve(R, g, rhs, costs, tol, 200, True, None)
    elif way == "array, one thread":
        with threadpool_limits(limits=1, user_api="blas"):
            R = dense.DenseColumns(store.gather(slots, None if whole else rows))
            r = dense._solve(R, g, rhs, costs, tol, 200, True, None)
    else:
        r = dense.solve_dense_lp(store.gather(slots, None if whole else rows), g, rhs, costs, tol=tol, threads=2)
    return {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "iterations": r.iterations,
            "objective": r.primal_objective}


WAYS = ("store, OpenBLAS threads", "array, OpenBLAS threads", "array, one thread", "array, halves on 2 threads")
ECONOMIES = {"both (the engine)": (3, 0.1), "no correctors": (0, 0.1), "refined to 1e-10": (3, 0.0),
             "neither": (0, 0.0)}


def economies(network: str, store, slots, rows, g, costs, round_tol: float, reps: int) -> list[list]:
    """The master solved with and without the centrality correctors and the loose solves."""
    from certdp.lp import dense

    whole = rows.size == store.m
    R = store.gather(slots, None if whole else rows)
    saved = dense._CORRECTORS, dense._RESIDUAL_SHARE
    out = []
    try:
        for tol in (round_tol, 1e-8):
            for name, (correctors, share) in ECONOMIES.items():
                dense._CORRECTORS, dense._RESIDUAL_SHARE = correctors, share
                cpus = []
                for _ in range(reps):
                    c0 = time.process_time()
                    r = dense.solve_dense_lp(R, g, np.ones(rows.size), costs, tol=tol, threads=1)
                    cpus.append(time.process_time() - c0)
                out.append([network, f"{tol:.0e}", name, r.iterations, r.single_factors, statistics.median(cpus),
                            r.primal_objective])
                print(out[-1], flush=True)
    finally:
        dense._CORRECTORS, dense._RESIDUAL_SHARE = saved
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--networks", nargs="+", default=["helsinki", "city"])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 1, 2], help="spinning processes beside the solves")
    a = output_args(ap).parse_args()
    rows, raw, econ = [], [], []
    load0 = os.getloadavg()
    for network in a.networks:
        store, slots, part_rows, g, costs, tol = master_part(network, a.n, a.rounds)
        econ += economies(network, store, slots, part_rows, g, costs, tol, a.reps)
        for busy in a.busy:
            hogs = [mp.get_context("spawn").Process(target=_spin, daemon=True) for _ in range(busy)]
            for hog in hogs:
                hog.start()
            time.sleep(1.0 if hogs else 0.0)
            try:
                for way in WAYS:
                    runs = [timed(way, store, slots, part_rows, g, costs, tol) for _ in range(a.reps)]
                    walls, cpus = [r["wall"] for r in runs], [r["cpu"] for r in runs]
                    raw.append({"network": network, "busy": busy, "way": way, "rows": int(part_rows.size),
                                "columns": int(slots.size), "tolerance": tol, "runs": runs})
                    rows.append([network, part_rows.size, slots.size, busy, way,
                                 runs[0]["iterations"], statistics.median(walls), max(walls),
                                 statistics.median(cpus)])
                    print(rows[-1], flush=True)
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.join()
    base = {(r[0], r[3]): r[6] for r in rows if r[4] == "array, one thread"}
    for r in rows:
        r.append(r[6] / base[(r[0], r[3])])
    load1 = os.getloadavg()
    write_table("dense_threads", "Dense IPM on a stabilised master: columns read per product or once, BLAS threads",
                ["network", "rows", "columns", "spinning processes", "way", "IPM iterations", "median wall s",
                 "max wall s", "median CPU s", "wall / one thread"], rows,
                notes=[f"master of round {a.rounds} at N = {a.n} (box 0), its largest part, the round's tolerance; "
                       f"{a.reps} solves each way",
                       f"load average (1, 5, 15 min) at start {load0[0]:.2f}, {load0[1]:.2f}, {load0[2]:.2f}, "
                       f"at the end {load1[0]:.2f}, {load1[1]:.2f}, {load1[2]:.2f} (the machine is shared: "
                       "the spinning processes are this benchmark's own, at its priority)"],
                raw=raw, args=a)
    write_table("dense_economies", "Dense IPM on a stabilised master: centrality correctors and loose solves",
                ["network", "tolerance", "economies", "IPM iterations", "single-precision factors", "median CPU s",
                 "objective"], econ,
                notes=[f"the same masters as dense_threads.md (round {a.rounds}, N = {a.n}, box 0, largest part); "
                       f"one BLAS thread; {a.reps} solves each"], raw=econ, args=a)


if __name__ == "__main__":
    main()
