"""Paper 000's Table 3 on our machine: Benders (the paper's algorithm and certdp's improved
one), the decomposition over outputs, and monolithic HiGHS (dual simplex, interior point) on
the same instance in the same run.

Instances (certdp.experiments.instances): the four kinds at 500 records, at the paper's
settings (``-paper``: epsilon x eta = 20, k-m-DV with 25 subsets) and at the calibrated
epsilon (epsilon x median neighbour distance = 1). Every solve has a wall-clock cap; a
decomposition stops at the requested gap (the paper's 1%). Reported per run: status, rounds,
seconds, the certified gap of the returned mechanism, the speed-up against the faster
monolithic solve of the same instance that finished, and the paper's own k-m-DV time.

    python -m benchmarks.paper000.decompositions --simplex-cap 300
    python -m benchmarks.paper000.decompositions --name decompositions_calibrated \
        --instances grid-500 road-500 text-500 gauss-500 --methods benders-paper benders outputs \
        --benders-cap 120 --outputs-cap 300

(At the calibrated epsilon monolithic HiGHS needs 1-10 minutes per instance: see
results/outputs_vs_monolithic.md; add ``--methods simplex ipm`` to time it in the same run.)
"""

from __future__ import annotations

import argparse
from typing import Any

from certdp import SolverLimitError, solve
from certdp.experiments import instances

from .._common import Steps, output_args, write_table

#: paper 000 Table 3, k-m-DV column: seconds to a 1% gap (mean over 10 instances), by kind
PAPER_SECONDS = {"road": 290.7, "grid": 161.4, "text": 27.2, "gauss": 185.1}
METHODS = ["simplex", "ipm", "benders-paper", "benders", "outputs", "outputs-process"]
DEFAULT_INSTANCES = ["grid-500-paper", "road-500-paper", "text-500-paper", "gauss-500-paper"]


def run(sp, method: str, a: argparse.Namespace, show: Any = None) -> tuple[Any, str | None, dict[str, Any]]:
    """One solve: (result, None, last round) or (None, why it returned nothing, last round);
    ``show`` gets the solve's progress too."""
    hist: list[dict[str, Any]] = []

    def keep(event) -> None:
        if event.stage == "round":
            hist[:] = [dict(event.record)]
        if show is not None:
            show(event)
    try:
        if method in ("simplex", "ipm"):
            cap = a.simplex_cap if method == "simplex" and a.simplex_cap else a.mono_cap
            r = solve(sp, "lp", solver=method, time_limit=cap, progress=keep)
        elif method.startswith("benders"):
            variant = "paper" if method == "benders-paper" else "improved"
            r = solve(sp, "benders", variant=variant, gap=a.gap, time_limit=a.benders_cap, progress=keep)
        else:   # outputs: pricing on threads; outputs-process: on worker processes
            executor = "process" if method == "outputs-process" else "threads"
            r = solve(sp, "outputs", gap=a.gap, time_limit=a.outputs_cap, executor=executor, progress=keep)
        return r, None, (hist[0] if hist else {})
    except SolverLimitError as exc:
        return None, str(exc), (hist[0] if hist else {})


def speed_ups(rows: list[list[Any]], gap: float) -> None:
    """Fill column 8 of one instance's rows: the faster monolithic solve that returned a
    mechanism, over each decomposition row within the gap (whatever order the methods ran in)."""
    mono = [r[6] for r in rows if r[3] in ("simplex", "ipm") and r[6] is not None and r[4] != "no mechanism"]
    for r in rows:
        within = r[7] is not None and r[7] <= gap and r[4] != "no mechanism"
        r[8] = min(mono) / r[6] if mono and within and r[3] not in ("simplex", "ipm") else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", nargs="+", default=DEFAULT_INSTANCES)
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS)
    ap.add_argument("--gap", type=float, default=1e-2, help="gap at which a decomposition stops (the paper's 1%%)")
    ap.add_argument("--benders-cap", type=float, default=300.0)
    ap.add_argument("--outputs-cap", type=float, default=600.0)
    ap.add_argument("--mono-cap", type=float, default=900.0)
    ap.add_argument("--simplex-cap", type=float, default=None, help="cap for dual simplex when different")
    ap.add_argument("--name", default="decompositions", help="results file name (without extension)")
    a = output_args(ap).parse_args()
    rows: list[list[Any]] = []
    raw: list[dict[str, Any]] = []

    def save() -> None:   # after every row: a killed run keeps what it measured
        write_table(a.name, "Paper 000 Table 3: decompositions against monolithic HiGHS (same instance, same run)",
                    ["instance", "eps", "eta", "method", "status", "rounds", "seconds", "certified gap",
                     "speed-up vs best monolithic", "paper k-m-DV s"], rows,
                    notes=[f"caps: Benders {a.benders_cap:g} s, outputs {a.outputs_cap:g} s, monolithic "
                           f"{a.mono_cap:g} s" + (f" (dual simplex {a.simplex_cap:g} s)" if a.simplex_cap else "")
                           + f"; decompositions stop at gap {a.gap:g}",
                           "benders-paper: the paper's algorithm (--variant paper); benders: certdp's default "
                           "(elastic blocks, a certified upper bound every round, in-out stabilisation, envelope "
                           "inequalities)",
                           "outputs: pricing on threads; outputs-process: on worker processes (--executor process; "
                           "the first such solve in a run also starts certdp's fork server)",
                           "rounds: Benders rounds, column-generation rounds, or simplex/IPM iterations",
                           "certified gap: of the returned mechanism against the run's rigorous lower bound",
                           "speed-up: seconds of the faster monolithic solve that returned a mechanism, over "
                           "this row's seconds (rows within the requested gap only)",
                           "paper k-m-DV s: paper 000 Table 3, 16-core desktop, MATLAB, its own instances "
                           "(Rome road network and grid, MATLAB word2vec, 3-d Gaussian)",
                           "instances: certdp.experiments.instances"], raw=raw, args=a)

    todo = list(instances.available(a.instances))
    with Steps("decompositions", len(todo) * len(a.methods)) as steps:
        for name, sp in todo:
            _instance(name, sp, a, rows, raw, steps, save)


def _instance(name: str, sp: Any, a: argparse.Namespace, rows: list, raw: list, steps: Steps, save: Any) -> None:
    """Every method on one instance: its rows, its raw records, the table saved after each."""
    kind = name.split("-")[0]
    paper_s = PAPER_SECONDS.get(kind) if "paper" in name else None
    first = len(rows)
    for method in a.methods:
        r, why, last = run(sp, method, a, steps)
        steps.done(f"{name} {method}: {'no mechanism' if r is None else r.status}")
        if r is None:   # no feasible point: the rounds run and the seconds spent
            rows.append([name, sp.epsilon, sp.eta, method, "no mechanism", last.get("iteration"),
                         last.get("elapsed"), None, None, paper_s])
            raw.append({"instance": name, "method": method, "error": why, "last_round": last})
        else:
            secs = r.timings["total"]
            rows.append([name, sp.epsilon, sp.eta, method, r.status, r.iterations, secs, r.gap, None, paper_s])
            raw.append({"instance": name, "method": method, "status": r.status, "seconds": secs,
                        "iterations": r.iterations, "gap": r.gap, "upper_bound": r.upper_bound,
                        "lower_bound": r.lower_bound, "timings": r.timings,
                        "stats": {k: v for k, v in r.stats.items()
                                  if k not in ("partition_labels", "boundary_mask")},
                        "history": list(r.history)})
        speed_ups(rows[first:], a.gap)
        print(rows[-1], flush=True)
        save()


if __name__ == "__main__":
    main()
