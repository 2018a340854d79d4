"""The outputs decomposition's pricing on threads and on a Dask LocalCluster, same instance,
same run: rounds, seconds, the certified result (identical by construction, checked here), and
per round the pricing's wall time against the slowest worker's compute time, from which a
model of the speed-up with W workers follows.

    python -m benchmarks.paper000.dask_pricing [--instances grid-500 text-500] [--workers 1 2]

The model, per round: ``T(W) = C / W + o + z``, with C the pricing compute of one round on
one core (the threaded run's pricing seconds per round with one thread), o the fixed cost of a
round trip to the actors, and z the transfer of the answers (the N x K minimisers, 8 N K bytes
a round, which do not shrink with W). Assumptions: outputs take equal time (groups are
contiguous blocks of outputs, so the slowest group sets the pace), the workers have a core
each, and the master's own time (which Dask does not touch) is left out. ``o + z`` is measured
as the mean of wall minus the slowest group's compute; the speed-up of the pricing is then
``(C + o1) / (C / W + o + z)`` against one thread, bounded by ``C / (o + z)``.
"""

from __future__ import annotations

import argparse

import numpy as np

from certdp import solve
from certdp.cli.mechanisms import exact
from certdp.experiments import instances

from .._common import output_args, write_table


def run(name: str, executor: str, workers: int, gap: float) -> dict:
    space = instances.load(name)
    res = solve(space, "outputs", gap=gap, workers=workers, executor=executor)
    calls = res.stats.get("pricing_calls", [])
    rounds = max(1, len(calls))
    out = {"instance": name, "executor": executor, "workers": workers, "status": res.status,
           "rounds": res.iterations, "seconds": res.timings["total"], "pricing_seconds": res.timings["pricing"],
           "upper_bound": res.upper_bound, "lower_bound": res.lower_bound, "gap": res.gap,
           "audit": bool(exact(res).verification.passed), "replays": res.stats.get("pricing_replays", 0)}
    if calls:
        out["overhead_per_call"] = float(np.mean([c["wall"] - c["compute_max"] for c in calls]))
        out["compute_per_call"] = float(np.mean([c["compute_sum"] for c in calls]))
        out["calls"] = rounds
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", nargs="+", default=["grid-500"])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--gap", type=float, default=1e-2)
    a = output_args(ap).parse_args()
    rows, raw, notes = [], [], []
    for name in a.instances:
        base = run(name, "threads", 1, a.gap)
        results = [base] + [run(name, "threads", w, a.gap) for w in a.workers if w > 1]
        results += [run(name, "dask", w, a.gap) for w in a.workers]
        raw.extend(results)
        for r in results:
            same = (r["upper_bound"], r["lower_bound"]) == (base["upper_bound"], base["lower_bound"])
            rows.append([name, r["executor"], r["workers"], r["rounds"], r["seconds"], r["pricing_seconds"],
                         base["pricing_seconds"] / r["pricing_seconds"], r["gap"], "yes" if same else "NO",
                         r.get("compute_per_call"), r.get("overhead_per_call"), "yes" if r["audit"] else "NO"])
            print(rows[-1], flush=True)
        dask = [r for r in results if r["executor"] == "dask"]
        if dask:
            C = base["pricing_seconds"] / max(1, base["rounds"])        # one round's pricing on one core
            oz = float(np.mean([r["overhead_per_call"] for r in dask]))
            model = ", ".join(f"W={w}: {C / (C / w + oz):.2f}x" for w in (1, 2, 4, 8, 16, 32))
            notes.append(f"{name}: C = {C:.3g} s of pricing per round on one core, o + z = {oz:.3g} s per call; "
                         f"modelled pricing speed-up against one thread {model}; bound C / (o + z) = {C / oz:.1f}x")
    write_table("dask_pricing", "Outputs decomposition: pricing on threads and on a Dask LocalCluster",
                ["instance", "executor", "workers", "rounds", "seconds", "pricing s", "pricing speed-up vs 1 thread",
                 "certified gap", "same bounds as 1 thread", "pricing compute per call (s)",
                 "wall - slowest compute per call (s)", "audit"], rows,
                notes=["Dask: a LocalCluster of W single-threaded worker processes on this machine (2 cores); "
                       "threads: W pricing threads in one process.", *notes,
                       "Model assumptions: see the module docstring (equal outputs, a core per worker, master "
                       "time left out)."], raw=raw, args=a)


if __name__ == "__main__":
    main()
