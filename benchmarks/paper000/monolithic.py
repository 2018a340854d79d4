"""Monolithic HiGHS solves of the PMO LP on grid instances: the baseline Benders must beat.

Grid maps of 1 km cells, eta = 2 km, epsilon = 2/km, K = 100 outputs sampled from the records,
travel cost to 100 sampled destinations (paper 000 Eq. 48), N = 100, 250, 500. Dual simplex and
IPM (with crossover), each with a time limit (default 15 minutes), after the exact reductions.
ExpMech on the same instance gives the utility comparison.
"""

from __future__ import annotations

import argparse

from certdp import SolverLimitError, build_space, solve
from certdp.datasets import grid

from .._common import output_args, write_table

SHAPES = {100: (10, 10), 250: (10, 25), 500: (20, 25)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 250, 500])
    ap.add_argument("--solvers", nargs="+", default=["simplex", "ipm"])
    ap.add_argument("--time-limit", type=float, default=900.0)
    ap.add_argument("--seed", type=int, default=1)
    a = output_args(ap).parse_args()
    rows, raw = [], []
    for n in a.sizes:
        r, c = SHAPES[n]
        space = build_space(grid(r, c, 1.0), epsilon=2.0, eta=2.0, n_outputs=100, cost="travel", seed=a.seed)
        em = solve(space, "expmech")
        best = None
        for solver in a.solvers:
            print(f"N={n} {solver} ...", flush=True)
            try:
                res = solve(space, solver=solver, time_limit=a.time_limit)
                row = [n, 100, solver, res.status, res.timings["total"], res.timings["solve"], res.iterations,
                       res.stats["constraints_before"], res.stats["constraints_after"], res.upper_bound,
                       res.lower_bound, res.gap, em.upper_bound, 1 - res.upper_bound / em.upper_bound]
                best = res.upper_bound if best is None else min(best, res.upper_bound)
            except SolverLimitError as exc:
                row = [n, 100, solver, "time_limit (no feasible point)", a.time_limit, None, None, None, None,
                       None, None, None, em.upper_bound, None]
                print(exc)
            rows.append(row)
            raw.append(row)
            print(row, flush=True)
    write_table("monolithic", "Monolithic HiGHS on grid instances (the baseline for Benders)",
                ["N", "K", "solver", "status", "total s", "solve s", "iterations", "constraints before",
                 "constraints after", "expected loss", "lower bound", "gap", "ExpMech loss", "LP vs ExpMech"],
                rows, notes=["grid of 1 km cells, eta = 2 km, epsilon = 2/km, K = 100 sampled outputs, travel cost "
                             "to 100 sampled destinations, seed " + str(a.seed),
                             f"time limit {a.time_limit:g} s per solve; constraints counted as 2 E K + N",
                             "LP vs ExpMech: relative reduction of expected loss of the optimal mechanism"],
                raw=raw, args=a)


if __name__ == "__main__":
    main()
