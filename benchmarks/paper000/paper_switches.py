"""The published Benders algorithm (``variant='paper'``) and each departure from it, one at a
time, on paper 000's four instances at its settings (epsilon x eta = 20, k-m-DV, 25 subsets,
gap 1%).

Every switch is a field of :class:`certdp.pmo.benders.BendersConfig`; ``paper`` has all of
them off. ``ratio_cap`` is the one the numerics force first: as published the initial cuts
carry exp(eps D) for path distances D far beyond eta, and HiGHS refuses coefficients above
1e15. At eps x eta = 20 every pair that is not a neighbour has eps D > 20, so a cap of 20
keeps every mDP row and no initial cut, and the improved variant's cap of 16 also drops the
rows of neighbours farther than 0.8 eta. The other switches are measured on top of caps that
HiGHS takes.

    python -m benchmarks.paper000.paper_switches --cap 45
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from certdp import SolverLimitError, solve
from certdp.experiments import instances
from certdp.pmo.benders import VARIANTS

from .._common import Steps, output_args, write_table

PAPER = VARIANTS["paper"]
#: name -> the departures switched on (fields of BendersConfig) over the published algorithm
DESIGNS: dict[str, dict[str, Any]] = {
    "paper": {},
    "cap 34.5": {"ratio_cap": 34.5},
    "cap 34.5 + clean cuts": {"ratio_cap": 34.5, "clean_cuts": True},
    "cap 25": {"ratio_cap": 25.0},
    "cap 25 + subset cuts": {"ratio_cap": 25.0, "initial_cuts": "subset"},
    "cap 25 + clean cuts": {"ratio_cap": 25.0, "clean_cuts": True},
    "cap 20": {"ratio_cap": 20.0},
    "cap 20 + reduce": {"ratio_cap": 20.0, "reduce": True},
    "cap 20 + clean cuts": {"ratio_cap": 20.0, "clean_cuts": True},
    "cap 16": {"ratio_cap": 16.0},
    "cap 16 + subset + reduce + clean": {"ratio_cap": 16.0, "initial_cuts": "subset", "reduce": True,
                                         "clean_cuts": True},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", nargs="+",
                    default=["text-500-paper", "grid-500-paper", "gauss-500-paper", "road-500-paper"])
    ap.add_argument("--designs", nargs="+", choices=list(DESIGNS), default=list(DESIGNS))
    ap.add_argument("--cap", type=float, default=45.0, help="seconds per solve")
    ap.add_argument("--name", default="paper_switches")
    a = output_args(ap).parse_args()
    rows: list[list[Any]] = []
    raw: list[dict[str, Any]] = []
    todo = list(instances.available(a.instances))
    with Steps("paper switches", len(todo) * len(a.designs)) as steps:
        for name, sp in todo:
            for design in a.designs:
                cfg = dataclasses.replace(PAPER, **DESIGNS[design])
                last: dict[str, Any] = {}

                def keep(event, last=last) -> None:
                    if event.stage == "round":
                        last.clear()
                        last.update(event.record)
                try:
                    r = solve(sp, "benders", config=cfg, gap=1e-2, time_limit=a.cap, progress=keep)
                    st = r.stats
                    row = [name, design, r.status, r.iterations, r.timings["total"], r.gap, st["boundary_records"],
                           st["initial_cuts"], st["initial_cuts_left_out"], st["cuts"], st["skipped_cuts"]]
                    raw.append({"instance": name, "design": design, "config": dataclasses.asdict(cfg),
                                "status": r.status, "iterations": r.iterations, "gap": r.gap,
                                "upper_bound": r.upper_bound, "lower_bound": r.lower_bound,
                                "stats": {k: v for k, v in st.items() if k not in ("partition_labels", "boundary_mask")},
                                "history": list(r.history)})
                except SolverLimitError as exc:
                    row = [name, design, "no mechanism: " + str(exc)[:90], last.get("iteration"),
                           last.get("elapsed"), None, None, None, None, None, None]
                    raw.append({"instance": name, "design": design, "config": dataclasses.asdict(cfg),
                                "error": str(exc), "last_round": dict(last)})
                rows.append(row)
                steps.done(f"{name} {design}: {row[2]}")
                print(row, flush=True)
                write_table(a.name, "Paper 000: the published Benders algorithm and each departure, one at a time",
                            ["instance", "design", "status", "rounds", "seconds", "certified gap", "boundary records",
                             "initial cut rows", "initial cut rows left out", "cuts in master", "cuts skipped"], rows,
                            notes=["design: the departures switched on over variant 'paper' (BendersConfig fields): "
                                   "cap X = ratio_cap X (rows and initial cuts with eps d > X left out); subset = "
                                   "initial_cuts 'subset'; reduce = implied edges dropped before partitioning; clean "
                                   "= clean_cuts",
                                   f"every solve: k-m-DV, 25 subsets, seed 0, gap 1%, cap {a.cap:g} s wall clock",
                                   "variant: paper with the listed fields changed (config in the JSON)",
                                   "no mechanism: no round gave a feasible point (or HiGHS refused the model); rounds "
                                   "and seconds are the last round's",
                                   "instances: certdp.experiments.instances"], raw=raw, args=a)


if __name__ == "__main__":
    main()
