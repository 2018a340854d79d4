"""The output decomposition's pricing LPs in their primal and in their LP-dual form, whole solves
on the same instances in the same run (``solve_pmo_outputs(pricing="primal" | "dual")``).

The primal form (``min w'z, A z <= 0, 0 <= z <= 1``; M = 2 x edges rows, N columns) was the
only one up to session 8; the dual form (N rows, M + N columns, only the right-hand side
changes) is the default since session 9. Both give rigorous bounds from the same formula, so
each run stops at the same gap; the table shows rounds, seconds in pricing and in total, the
certified gap and the ratios primal / dual.
"""

from __future__ import annotations

import argparse

from scaledp.mechanisms.pmo_outputs import solve_pmo_outputs

import instances
from _common import write_table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default="pricing_forms", help="results/NAME.md and .json")
    ap.add_argument("--instances", nargs="+", default=["grid-500", "road-500", "gauss-500", "text-500"])
    ap.add_argument("--gap", type=float, default=1e-2)
    ap.add_argument("--cap", type=float, default=600.0, help="time limit per solve, seconds")
    a = ap.parse_args()
    rows, raw = [], []
    for name, sp in instances.available(a.instances):
        res = {}
        for form in ("primal", "dual"):
            r = solve_pmo_outputs(sp, gap=a.gap, time_limit=a.cap, pricing=form)
            res[form] = r
            rows.append([name, form, r.status, r.iterations, r.timings["pricing"], r.timings["total"], r.gap,
                         r.upper_bound, "-", "-"])
            raw.append({"instance": name, "pricing": form, "status": r.status, "iterations": r.iterations,
                        "gap": r.gap, "upper_bound": r.upper_bound, "lower_bound": r.lower_bound,
                        "timings": r.timings, "stats": r.stats})
            print(f"{name} {form}: {r.status}, {r.iterations} rounds, pricing {r.timings['pricing']:.1f} s, "
                  f"total {r.timings['total']:.1f} s, gap {r.gap:.4f}", flush=True)
        p, d = res["primal"], res["dual"]
        rows[-1][-2] = p.timings["pricing"] / d.timings["pricing"]
        rows[-1][-1] = p.timings["total"] / d.timings["total"]
    write_table(a.name, "Pricing LPs in primal and in dual form (decomposition over outputs)",
                ["instance", "pricing form", "status", "rounds", "pricing s", "total s", "final gap",
                 "upper bound", "pricing primal/dual", "total primal/dual"],
                rows, notes=[f"stop at gap {a.gap}, cap {a.cap:g} s per solve; 2 pricing threads "
                             "(one per core); the ratios are on the dual row",
                             "instances: benchmarks/instances.py"], raw=raw)


if __name__ == "__main__":
    main()
