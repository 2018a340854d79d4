"""How much each tuning value of the outputs decomposition matters: every field of
:class:`~certdp.pmo.outputs.config.OutputsConfig` halved and doubled, on three road networks at
two sizes of the growing-density family, time (CPU seconds) and rounds to a 1% certified gap
against the defaults in the same process.

    python -m benchmarks.paper000.sensitivity [--networks helsinki goldcoast sydney | text-eta]
        [--sizes 500 1000] [--box 0] [--fields box columns ...] [--factors 0.5 2] [--repeats 2] [--cap 600] [--jobs 1]

One process per instance: it builds the instance once and solves it with the defaults
``--repeats`` times, at the start, the end and evenly between (their spread is the noise and
drift of this machine), and once per changed value.
The table gives, per field and instance, the ratio of CPU seconds (and rounds) to the
defaults' median; a field *matters* where some ratio leaves the defaults' spread by more than
10%. CPU seconds, not wall seconds: the machine is shared. Every run's matrix is audited.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import fields, replace

from .._common import end_with_parent, output_args, write_table
from .growing import commit


def variants(names: list[str] | None, factors: tuple[float, ...] = (0.5, 2.0)):
    """(field, factor, config) for every chosen field times each of ``factors`` (integers
    rounded, at least 1)."""
    from certdp.pmo.outputs.config import OutputsConfig

    base = OutputsConfig()
    out = []
    for f in fields(OutputsConfig):
        if names and f.name not in names:
            continue
        v = getattr(base, f.name)
        for factor in factors:
            new = max(1, round(v * factor)) if f.type == "int" else v * factor
            try:
                out.append((f.name, factor, replace(base, **{f.name: new})))
            except ValueError:      # e.g. a tolerance doubled past its cap: not a valid tuning
                continue
    return out


def instance(network: str, n: int, box: int):
    """Box ``box`` of ``network`` in the growing-density family, or, for ``KIND-MODE`` (e.g.
    ``text-eta``), the scaling instance of that kind and mode (word vectors exercise the
    filled free master, which road networks never call for)."""
    from certdp.experiments.instances import growing, scaling

    if "-" in network:
        kind, mode = network.split("-")
        return scaling(kind, n, mode)
    return growing(network, n, box)


def _child(network: str, n: int, box: int, names, factors, repeats: int, cap: float, gap: float, conn) -> None:
    end_with_parent()
    from certdp import solve
    from certdp.cli.mechanisms import exact
    from certdp.pmo.outputs.config import OutputsConfig

    space = instance(network, n, box)
    changed = variants(names, factors)
    runs: list = []
    for r in range(repeats):   # the defaults spread over the sequence: their range includes the drift of the load
        runs.append(("defaults", 1.0, OutputsConfig()))
        runs += changed[r * len(changed) // max(repeats - 1, 1):(r + 1) * len(changed) // max(repeats - 1, 1)] \
            if r < repeats - 1 else []
    for name, factor, config in runs:
        try:
            c0, t0 = time.process_time(), time.perf_counter()
            res = solve(space, "outputs", gap=gap, time_limit=cap, config=config)
            conn.send({"field": name, "factor": factor, "cpu": time.process_time() - c0,
                       "wall": time.perf_counter() - t0, "rounds": res.iterations, "gap": res.gap,
                       "loss": res.upper_bound, "audit": bool(exact(res).verification.passed),
                       "status": res.status})
        except Exception as exc:   # reported in the table, not raised
            conn.send({"field": name, "factor": factor, "status": f"error: {type(exc).__name__}: {exc}"})
    conn.send(None)


def run_instances(keys: list[tuple[str, int]], box: int, names, factors, repeats: int, cap: float, gap: float,
                  jobs: int):
    """Yield each run's record as it ends, ``jobs`` instances at a time (one process each)."""
    import multiprocessing as mp
    from multiprocessing.connection import Connection, wait
    from multiprocessing.context import SpawnProcess

    ctx = mp.get_context("spawn")
    todo = list(keys)
    live: dict[Connection, tuple[SpawnProcess, str, int]] = {}
    while todo or live:
        while todo and len(live) < jobs:
            network, n = todo.pop(0)
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(network, n, box, names, factors, repeats, cap, gap, send))
            proc.start()
            send.close()   # the child holds the only writing end: its death reads as the end of the pipe
            live[recv] = (proc, network, n)
        ready = wait(list(live), timeout=cap + 900)
        for recv in [c for c in live if c in ready]:
            proc, network, n = live[recv]
            try:
                msg = recv.recv()
            except EOFError:
                msg = None
            if msg is None:
                del live[recv]
                proc.join(5)
                if proc.is_alive():
                    proc.kill()
                continue
            yield {"network": network, "n": n, "box": box, **msg}


def table(raw: list[dict], a, load, started: str) -> None:
    keys = sorted({(r["network"], r["n"]) for r in raw}, key=lambda k: (k[1], k[0]))
    base = {}
    for key in keys:
        ok = [r for r in raw if (r["network"], r["n"]) == key and r["field"] == "defaults" and "cpu" in r]
        if ok:
            cpu = [r["cpu"] for r in ok]
            base[key] = (statistics.median(cpu), min(cpu), max(cpu), statistics.median(r["rounds"] for r in ok))
    rows = [["defaults", "-"] + [f"{base[k][0]:.1f} s ({base[k][1]:.1f}-{base[k][2]:.1f}), {base[k][3]:g} r"
                                 if k in base else "-" for k in keys] + ["-"]]
    names = [f.name for f in fields(__import__("certdp.pmo.outputs.config", fromlist=["OutputsConfig"]).OutputsConfig)]
    for name in names:
        for factor in a.factors:
            cells, worst = [], 0.0
            for key in keys:
                r = next((r for r in raw if (r["network"], r["n"]) == key and r["field"] == name
                          and r["factor"] == factor), None)
                if r is None or key not in base:
                    cells.append("-")
                    continue
                if "cpu" not in r:
                    cells.append(r["status"][:40])
                    worst = max(worst, 1.0)
                    continue
                med, lo, hi, rounds = base[key]
                ratio = r["cpu"] / med
                out = max(r["cpu"] / hi - 1.0, 1.0 - r["cpu"] / lo, 0.0)   # beyond the defaults' spread
                if r["gap"] > a.gap * 1.0001:
                    out = max(out, 1.0)
                worst = max(worst, out)
                cells.append(f"{ratio:.2f} ({r['rounds']} r{'' if r['gap'] <= a.gap * 1.0001 else ', gap %.3g' % r['gap']})")
            if any(c != "-" for c in cells):
                rows.append([name, f"x{factor:g}", *cells, "yes" if worst > 0.10 else "no"])
    notes = [f"commit {commit()}; started {started}; load average (1, 5, 15 min) at start "
             f"{', '.join(f'{x:.2f}' for x in load[0])}, at the end {', '.join(f'{x:.2f}' for x in load[-1])}",
             "each cell: CPU seconds to the gap / the defaults' median, and the rounds; the defaults' row gives their "
             f"median CPU seconds, range over {a.repeats} runs and rounds; 'matters': some ratio leaves the "
             "defaults' range by more than 10% (or the run misses the gap)",
             f"instances: box {a.box} of each network (growing-density family); cap {a.cap:g} s; every matrix audited: "
             f"{all(r.get('audit', True) for r in raw)}"]
    write_table(a.name, "Sensitivity of the outputs decomposition to its tuning (CPU seconds to a 1% gap)",
                ["field", "factor", *[f"{k[0]}-{k[1]}" for k in keys], "matters"], rows, notes=notes,
                raw={"load": load, "commit": commit(), "runs": raw}, args=a)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--networks", nargs="+", default=["helsinki", "goldcoast", "sydney"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000])
    ap.add_argument("--box", type=int, default=0)
    ap.add_argument("--fields", nargs="*", default=None, help="only these OutputsConfig fields")
    ap.add_argument("--factors", type=float, nargs="+", default=[0.5, 2.0],
                    help="each chosen field is multiplied by each of these (default: halved and doubled)")
    ap.add_argument("--repeats", type=int, default=3, help="runs with the defaults per instance (at least 2)")
    ap.add_argument("--cap", type=float, default=600.0)
    ap.add_argument("--gap", type=float, default=0.01)
    ap.add_argument("--jobs", type=int, default=1, help="instances solved side by side (one process each)")
    ap.add_argument("--name", default="sensitivity")
    a = output_args(ap).parse_args()
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    load = [os.getloadavg()]
    raw: list[dict] = []
    keys = [(network, n) for n in a.sizes for network in a.networks]
    for r in run_instances(keys, a.box, a.fields, tuple(a.factors), a.repeats, a.cap, a.gap, a.jobs):
        raw.append(r)
        print(r, flush=True)
        table(raw, a, load + [os.getloadavg()], started)


if __name__ == "__main__":
    main()
