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

import numpy as np

from certdp import MDPGraph, SolverLimitError, solve
from certdp.experiments import instances
from certdp.pmo.benders import VARIANTS, BendersConfig
from certdp.pmo.partition import PARTITIONERS, partition

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


def design_config(design: str) -> BendersConfig:
    """The Benders configuration of a design: the improved variant ("improved"), or the
    published algorithm with the departures :data:`DESIGNS` names."""
    return VARIANTS["improved"] if design == "improved" else dataclasses.replace(PAPER, **DESIGNS[design])


def partition_run_args(ap: argparse.ArgumentParser, *, seeds: int, cap: float, name: str) -> argparse.ArgumentParser:
    """The arguments of a run of each partitioner on paper-size instances of each kind under one
    design (``partitioner_times``, ``subproblem_rounds``), with the script's own defaults."""
    ap.add_argument("--kinds", nargs="+", default=["text", "grid", "gauss", "road"])
    ap.add_argument("--size", type=int, default=500)
    ap.add_argument("--seeds", type=int, default=seeds, help="instances per kind (NAME-s1 ...)")
    ap.add_argument("--partitioners", nargs="+", choices=list(PARTITIONERS),
                    default=["kmeans-dv", "kmeans-rec", "kmeans-adj", "bsc"])
    ap.add_argument("--design", choices=["improved", *DESIGNS], default="improved")
    ap.add_argument("--cap", type=float, default=cap, help="seconds per solve")
    ap.add_argument("--gap", type=float, default=1e-2)
    ap.add_argument("--rounds", type=int, default=500, help="round limit (the paper's tables stop at 500)")
    ap.add_argument("--name", default=name)
    return ap


def sizes(sp: Any, cfg: BendersConfig) -> dict[str, Any]:
    """What a design gives the master before its first solve, counted without building it (as
    ``solve_benders`` chooses edges, partition and boundary): boundary records, mDP rows among
    them, initial cut rows, and the largest exp(eps d) among the master's rows."""
    g = MDPGraph.from_space(sp)
    keep = ~g.implied_edges() if cfg.reduce else np.ones(g.n_edges, dtype=bool)
    if cfg.ratio_cap is not None:
        keep &= sp.epsilon * g.distance <= cfg.ratio_cap
    e, d = g.edges[keep], g.distance[keep]
    part = partition(sp, "kmeans-dv", 25, seed=0, graph=g)
    bm = part.boundary_mask(e)
    b = np.flatnonzero(bm)
    both = bm[e[:, 0]] & bm[e[:, 1]]
    K = sp.n_outputs
    out = {"boundary": int(len(b)), "mdp_rows": int(2 * K * both.sum()), "initial_cut_rows": 0,
           "largest_log_ratio": float(sp.epsilon * d[both].max()) if both.any() else 0.0}
    if cfg.initial_cuts == "none" or len(b) < 2:
        return out
    D = MDPGraph(sp.n_records, e, d).path_distances(b)[:, b]
    pos = np.full(sp.n_records, -1)
    pos[b] = np.arange(len(b))
    adj = np.zeros((len(b), len(b)), dtype=bool)
    adj[pos[e[both, 0]], pos[e[both, 1]]] = adj[pos[e[both, 1]], pos[e[both, 0]]] = True
    iu, ju = np.triu_indices(len(b), 1)
    sel = ~adj[iu, ju] & np.isfinite(D[iu, ju])
    if cfg.initial_cuts == "subset":
        sel &= part.labels[b[iu]] == part.labels[b[ju]]
    cap = 700.0 if cfg.ratio_cap is None else min(cfg.ratio_cap, 700.0)
    ok = sel & (sp.epsilon * D[iu, ju] <= cap)
    out["initial_cut_rows"] = int(2 * K * ok.sum())
    if ok.any():
        out["largest_log_ratio"] = max(out["largest_log_ratio"], float(sp.epsilon * D[iu, ju][ok].max()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", nargs="+",
                    default=["text-500-paper", "grid-500-paper", "gauss-500-paper", "road-500-paper"])
    ap.add_argument("--designs", nargs="+", choices=list(DESIGNS), default=list(DESIGNS))
    ap.add_argument("--cap", type=float, default=45.0, help="seconds per solve")
    ap.add_argument("--name", default="paper_switches")
    ap.add_argument("--sizes-only", action="store_true", help="count each design's master, solve nothing")
    a = output_args(ap).parse_args()
    if a.sizes_only:
        return _sizes_table(a)
    rows: list[list[Any]] = []
    raw: list[dict[str, Any]] = []
    todo = list(instances.available(a.instances))
    with Steps("paper switches", len(todo) * len(a.designs)) as steps:
        for name, sp in todo:
            for design in a.designs:
                cfg = design_config(design)
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


def _sizes_table(a: argparse.Namespace) -> None:
    rows, raw = [], []
    for name, sp in instances.available(a.instances):
        for design in a.designs:
            st = sizes(sp, design_config(design))
            rows.append([name, design, st["boundary"], st["mdp_rows"], st["initial_cut_rows"],
                         f"e^{st['largest_log_ratio']:.1f}"])
            raw.append(st | {"instance": name, "design": design})
            print(rows[-1], flush=True)
    write_table(a.name, "Paper 000: the master each design starts from (counted, not solved)",
                ["instance", "design", "boundary records", "mDP rows among them", "initial cut rows",
                 "largest coefficient"], rows,
                notes=["as solve_benders builds it: k-m-DV, 25 subsets, seed 0; designs as in paper_switches.md",
                       "largest coefficient: the largest exp(eps d) or exp(eps D) in the master's first rows "
                       "(HiGHS refuses a model with a coefficient above 1e15 = e^34.5)",
                       "instances: certdp.experiments.instances"], raw=raw, args=a)


if __name__ == "__main__":
    main()
