"""Benders (paper 000 section 3.2, with and without our envelope cuts) and the decomposition
over outputs (``--outputs``) against monolithic HiGHS (dual simplex, IPM) on the same instance
in the same run (Tables 3-4 of paper 000). ``--partitioners`` with no names skips Benders.

Each solve has a time cap; the monolithic cap defaults to 15 minutes. Reported per run:
seconds, iterations, final certified gap, expected loss; and the speed ratio of Benders to
the better monolithic method.
"""

from __future__ import annotations

import argparse

from scaledp import SolverLimitError, solve
from scaledp.experiments import instances

from .._common import output_args, write_table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", nargs="+", default=["road-500"])
    ap.add_argument("--partitioners", nargs="*", default=["kmeans-rec", "kmeans-dv", "metis"])
    ap.add_argument("--solvers", nargs="*", default=["ipm", "simplex"])
    ap.add_argument("--subsets", type=int, default=25)
    ap.add_argument("--gap", type=float, default=1e-2)
    ap.add_argument("--benders-cap", type=float, default=600.0)
    ap.add_argument("--mono-cap", type=float, default=900.0)
    ap.add_argument("--simplex-cap", type=float, default=None,
                    help="cap for dual simplex if different (it failed to finish grid-500 in 900 s in monolithic.md)")
    ap.add_argument("--name", default="benders_vs_monolithic", help="results file name (without extension)")
    ap.add_argument("--outputs", action="store_true",
                    help="also run the decomposition over outputs (scaledp.pmo.outputs)")
    ap.add_argument("--outputs-cap", type=float, default=600.0)
    ap.add_argument("--paper-variant", action="store_true", help="also run without envelope cuts")
    a = output_args(ap).parse_args()
    rows, raw = [], []

    setup = []   # what this run ran, for the table's footer
    if a.partitioners:
        setup.append(f"Benders: M = {a.subsets} subsets, cap {a.benders_cap:g} s")
    if a.outputs:
        setup.append(f"decomposition over outputs: cap {a.outputs_cap:g} s")
    if a.solvers:
        setup.append(f"monolithic: cap {a.mono_cap:g} s" + (f" (dual simplex {a.simplex_cap:g} s)" if a.simplex_cap else ""))

    def save() -> None:  # after every row: a killed run keeps what it measured
        write_table(a.name, "Benders vs monolithic HiGHS (same instance, same run)",
                    ["instance", "method", "status", "seconds", "iterations", "final gap", "expected loss",
                     "loss below ExpMech", "speed-up vs best monolithic"], rows,
                    notes=["; ".join(setup + [f"stop at gap {a.gap:g}"]), "gap and loss are of the certified mechanism",
                           "instances: scaledp.experiments.instances"], raw=raw, args=a)

    def record(row: list, extra: list | None = None, note: object = "") -> None:
        print(row, note, flush=True)
        rows.append(row)
        raw.append(row + (extra or []))
        save()

    for name, sp in instances.available(a.instances):
        em = solve(sp, "expmech").upper_bound
        best_mono = None
        for solver in a.solvers:
            cap = a.simplex_cap if (solver == "simplex" and a.simplex_cap) else a.mono_cap
            try:
                r = solve(sp, "lp", solver=solver, time_limit=cap)
                row = [name, f"monolithic {solver}", r.status, r.timings["total"], r.iterations, r.gap, r.upper_bound,
                       1 - r.upper_bound / em, "-"]
                if r.status == "optimal":
                    best_mono = r.timings["total"] if best_mono is None else min(best_mono, r.timings["total"])
            except SolverLimitError:
                row = [name, f"monolithic {solver}", "time_limit (no feasible point)", cap, None, None, None,
                       None, "-"]
            record(row)
        for part in a.partitioners:
            for env in ([True, False] if a.paper_variant else [True]):
                label = f"benders {part}" + ("" if env else " (paper: no envelope cuts)")
                hist: list[dict] = []
                try:
                    r = solve(sp, "benders", partition=part, subsets=a.subsets, gap=a.gap,
                              time_limit=a.benders_cap, envelope_cuts=env, progress=lambda e: hist.append(e.record))
                except SolverLimitError as exc:  # no feasible point within the cap: record it, do not stop
                    last = hist[-1] if hist else {}
                    row = [name, label, "no feasible point", last.get("elapsed", a.benders_cap),
                           last.get("iteration", 0), None, None, None, None]
                    record(row, [hist], exc)
                    continue
                ratio = (best_mono / r.timings["total"]) if best_mono and r.status == "optimal" else None
                row = [name, label, r.status, r.timings["total"], r.iterations, r.gap, r.upper_bound,
                       1 - r.upper_bound / em, ratio]
                record(row, [r.stats["boundary_records"], r.timings])
        if a.outputs:
            r = solve(sp, "outputs", gap=a.gap, time_limit=a.outputs_cap)
            ratio = (best_mono / r.timings["total"]) if best_mono and r.status == "optimal" else None
            row = [name, "decomposition over outputs", r.status, r.timings["total"], r.iterations, r.gap,
                   r.upper_bound, 1 - r.upper_bound / em, ratio]
            record(row, [r.stats, r.timings, list(r.history)])


if __name__ == "__main__":
    main()
