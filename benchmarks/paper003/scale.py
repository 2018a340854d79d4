"""LR-Geo at paper 003's size on real road networks (issue 49): memory per part, time per part
(wall and process CPU), and the Benders solve, over several boxes and seeds.

Settings: the paper's (eps 10/km, Gamma 20 km, r_obf 4 km, 0.1 km reference table), a 40 x 40
grid over a 47 x 49 km box (the size of the paper's Rome region) of Sydney, over the whole Gold
Coast network, and (with ``--heldout``, to confirm only) over boxes of the held-out networks.

Each instance runs in its own process under an address-space cap (``--cap-gb``), so that its
peak memory is its own. Per part, the measured growth of the resident set while the part runs
(the peak above the resident set at its start, ``/proc/self/clear_refs``) stands beside the
estimate :func:`certdp.lrgeo.memory.estimate_round` made before anything was allocated:

- world: the locations' Haversine and travel matrices (K x K);
- table: the reference table (:func:`certdp.lrgeo.table.build_table`);
- lr_sets: the users' LR sets, costs and uploads;
- blocks: the LP blocks of CLR-Geo (:meth:`certdp.lrgeo.server.LRGeoServer.build`);
- solve: the Benders solve (the blocks again, their HiGHS models and the master);
- certify: the users' certification of their matrices.

The round's time is reported per part in wall seconds and in process CPU seconds (the machine
is shared: wall time also counts waiting for a core). The Benders solve is split into its
block solves and its master (CPU seconds, from the engine's history).

    python -m benchmarks.paper003.scale [--users 4 10] [--seeds 0 1 2] [--only goldcoast] [--max-rounds 300]
        [--timeout-min 60] [--heldout]

With --only the table is scale_NAME (scale_goldcoast); each run notes its blocks, the CPU seconds of
one block solve (every call of the engine timed) and the gap by round.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .._common import output_args, write_table

#: (lon_min, lat_min, lon_max, lat_max), as :func:`certdp.datasets.city.grid_world` takes a box
Box = tuple[float, float, float, float]
#: 47 x 49 km boxes of Sydney: the west, the centre, the south
SYDNEY_BOXES: dict[str, Box] = {
    "sydney-centre": (150.95, -34.05, 151.46, -33.61),
    "sydney-west": (150.60, -33.95, 151.11, -33.51),
    "sydney-north": (150.90, -33.75, 151.41, -33.31),
}
#: boxes of the held-out networks of the same size, about their middle (confirmation only)
HELDOUT = ("birmingham", "chicago", "philadelphia")


def _bbox(box: list[float] | None) -> Box | None:
    """A box from its JSON list (a child's argument, a results file)."""
    if box is None:
        return None
    lon_min, lat_min, lon_max, lat_max = box
    return (lon_min, lat_min, lon_max, lat_max)


def _box_around(nodes_csv: Path, width_km: float = 47.0, height_km: float = 49.0) -> Box:
    """A width x height km box centred on the median node of a network."""
    import math

    import numpy as np

    ll = np.loadtxt(nodes_csv, delimiter=",", skiprows=1, usecols=(1, 2))
    lon, lat = float(np.median(ll[:, 0])), float(np.median(ll[:, 1]))
    dlat = height_km / 111.195 / 2
    dlon = width_km / (111.195 * math.cos(math.radians(lat))) / 2
    return (lon - dlon, lat - dlat, lon + dlon, lat + dlat)


def instances(heldout: bool) -> list[tuple[str, Path, Box | None]]:
    """(name, folder with NAME_nodes.csv / NAME_edges.csv, bbox or None for the whole network)."""
    from certdp.experiments.instances import data_dir

    roads = data_dir() / "roads"
    if heldout:
        d = Path(os.environ.get("CERTDP_HELDOUT", "/work/heldout")) / "roads"
        return [(n, d, _box_around(d / f"{n}_nodes.csv")) for n in HELDOUT if (d / f"{n}_nodes.csv").is_file()]
    out = [(name, roads, box) for name, box in SYDNEY_BOXES.items()]
    return out + [("goldcoast", roads, None)]


# ------------------------------------------------------------------------- one instance, in a child
def _rss() -> tuple[int, int]:
    """(resident, peak resident) bytes of this process."""
    vals = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                vals[k] = int(v.split()[0]) * 1024
    return vals["VmRSS"], vals["VmHWM"]


class _Part:
    """Measures one part: peak resident growth, wall and CPU seconds."""

    def __init__(self, out: dict, name: str) -> None:
        self.out, self.name = out, name

    def __enter__(self) -> _Part:  # noqa: PYI034
        with open("/proc/self/clear_refs", "w") as f:   # the peak restarts from the resident set
            f.write("5")
        self.rss0 = _rss()[0]
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.out[self.name] = {"bytes": max(0, _rss()[1] - self.rss0), "wall": time.perf_counter() - self.t0,
                               "cpu": time.process_time() - self.c0}
        print(self.name, self.out[self.name], file=sys.stderr, flush=True)


def _round_line(ev) -> None:
    """Each Benders round on stderr (what a run stopped from outside had reached)."""
    r = ev.record
    if "gap" in r:
        print(f"round {r['iteration']}: gap {r['gap']:.3g}, blocks CPU {r.get('sub_cpu', 0):.2f} s, master CPU "
              f"{r.get('master_cpu', 0):.3f} s, scaled bounds {r['lower_bound']:.6g} {r['upper_bound']:.6g}", file=sys.stderr,
              flush=True)


class _BlockClock:
    """Every block solve of the Benders engine (its own models and the repair's): the block, the
    process CPU seconds, the simplex iterations and the HiGHS runs of each call, in call order.
    A call is one run of the block's live model when that run ends optimal with duals; each
    further run is the live model's second run or a fresh model the engine built after it
    (``BlockSolver._attempts``). Each
    run is noted as its status, CPU seconds and iterations. The engine keeps only the sums per
    round; the cost of one block solve against the block's size is what separates a large block
    from many rounds."""

    def __init__(self) -> None:
        from certdp.lp import benders, highs

        self.calls: list[tuple[int, float, int, list[tuple[str, float, int]]]] = []
        self._runs: list[tuple[str, float, int]] | None = None    # the HiGHS runs of the block call under way
        self._patched = [(benders.BlockSolver, "solve", benders.BlockSolver.solve),
                         (highs.HighsLP, "solve", highs.HighsLP.solve)]
        clock, block_solve, lp_solve = self, benders.BlockSolver.solve, highs.HighsLP.solve

        def timed(solver, *a, **kw):
            clock._runs = []
            c0 = time.process_time()
            res = block_solve(solver, *a, **kw)
            clock.calls.append((solver.index, time.process_time() - c0, int(res.iterations), clock._runs))
            clock._runs = None     # the master's runs are not a block's
            return res

        def run(lp, *a, **kw):
            c0 = time.process_time()
            sol = lp_solve(lp, *a, **kw)
            if clock._runs is not None:
                    clock._runs.append((sol.status + ("" if sol.row_dual is not None else " (no duals)"),
                                    round(time.process_time() - c0, 4), int(sol.iterations)))
            return sol

        setattr(benders.BlockSolver, "solve", timed)   # noqa: B010 (the engine's classes, this process only)
        setattr(highs.HighsLP, "solve", run)   # noqa: B010

    def close(self) -> None:
        for cls, name, orig in self._patched:
            setattr(cls, name, orig)


def run_one(name: str, folder: str, bbox: list[float] | None, users: int, seed: int,
            max_rounds: int) -> dict:
    import numpy as np

    from certdp.audit import verify
    from certdp.datasets.city import grid_world
    from certdp.datasets.road import load_road_network
    from certdp.lrgeo.memory import estimate_round
    from certdp.lrgeo.server import LRGeoServer
    from certdp.lrgeo.table import build_table
    from certdp.lrgeo.user import LRGeoParams, LRGeoUser

    road = load_road_network(Path(folder) / f"{name}_nodes.csv", Path(folder) / f"{name}_edges.csv")
    world = grid_world(road, 40, 40, bbox=_bbox(bbox), name=name)
    P = LRGeoParams.paper(world.cell)
    est = estimate_round(world, P, users, rounds=max_rounds)
    parts: dict[str, dict] = {}
    rng = np.random.default_rng(seed)
    with _Part(parts, "world"):
        _ = world.haversine, world.travel
    with _Part(parts, "table"):
        table = build_table(world, P.cell, P.table_band)
    server = LRGeoServer(world, table, P)
    with _Part(parts, "lr_sets"):
        locs = rng.choice(world.K, size=users, replace=False)
        us = [LRGeoUser(world, int(v), P, name=f"user-{t}", rng=rng) for t, v in enumerate(locs)]
        for u in us:
            server.enrol(u)
    with _Part(parts, "blocks"):
        built = server.build()
        rows = sum(b.spec.W.shape[0] for b in built[1])
        nnz = sum(b.spec.W.nnz + b.spec.T.nnz for b in built[1])
        sizes = [[int(b.spec.W.shape[0]), int(b.spec.W.shape[1]), int(b.spec.W.nnz + b.spec.T.nnz)] for b in built[1]]
    del built
    print("block sizes " + json.dumps({"lr_sizes": [u.n for u in us], "block_sizes": sizes}), file=sys.stderr, flush=True)
    clock = _BlockClock()
    try:
        with _Part(parts, "solve"):
            resp, info = server.solve(gap=1e-4, max_iterations=max_rounds, fallback=False, progress=_round_line)
    finally:
        clock.close()
    with _Part(parts, "certify"):
        mechs = [u.mechanism(resp[u.name])[0] for u in us]
    certified = sum(bool(verify(m.matrix, m.epsilon, m.edges, m.edge_distance).passed) for m in mechs)
    hist = info.history
    return {"instance": name, "bbox": bbox, "users": users, "seed": seed, "K": world.K,
            "cell_km": world.cell_km, "lr_sizes": [u.n for u in us], "columns": [len(u.obf) for u in us],
            "block_rows": rows, "block_nnz": nnz, "block_sizes": sizes, "block_calls": clock.calls,
            "max_rounds": max_rounds, "parts": parts, "estimate": est.parts,
            "estimate_total": est.total, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "method": info.method, "status": info.status, "gap": info.gap, "iterations": info.iterations,
            "sub_cpu": sum(h.get("sub_cpu", 0.0) for h in hist), "master_cpu": sum(h.get("master_cpu", 0.0) for h in hist),
            "certified": certified, "table_pairs": len(table.pair_key),
            "master_rows": [h.get("master_rows") for h in hist], "cuts_added": sum(h.get("cuts_added", 0) for h in hist),
            "history": [[h["iteration"], h["gap"], h.get("sub_cpu", 0.0), h.get("master_cpu", 0.0)] for h in hist]}


def _estimate(name: str, folder: Path, bbox: list[float] | None, users: int, rounds: int) -> tuple[dict, int]:
    from certdp.datasets.city import grid_world
    from certdp.datasets.road import load_road_network
    from certdp.lrgeo.memory import estimate_round
    from certdp.lrgeo.user import LRGeoParams

    net = name.split("-")[0]
    road = load_road_network(Path(folder) / f"{net}_nodes.csv", Path(folder) / f"{net}_edges.csv")
    world = grid_world(road, 40, 40, bbox=_bbox(bbox), name=net)
    est = estimate_round(world, LRGeoParams.paper(world.cell), users, rounds=rounds)
    return est.parts, est.total


# ------------------------------------------------------------------------------------ the table
def _partial(err: list[str]) -> dict:
    """What a stopped or failed instance had reached, read from its stderr: its blocks and the
    Benders rounds (round, gap, blocks CPU s, master CPU s)."""
    out: dict = {"history": []}
    pat = re.compile(r"round (\d+): gap (\S+), blocks CPU (\S+) s, master CPU (\S+) s")
    for ln in err:
        if ln.startswith("block sizes "):
            out.update(json.loads(ln[len("block sizes "):]))
        elif (m := pat.match(ln)) is not None:
            out["history"].append([int(m[1]), float(m[2]), float(m[3]), float(m[4])])
    return out


def _child(args: list, cap_gb: float, timeout_min: float | None) -> dict | tuple[str, dict]:
    """Run one instance in its own capped process; its stderr (parts, rounds) is echoed as it
    comes. A run that is stopped or fails gives (why, what it had reached)."""
    cmd = ["prlimit", f"--as={int(cap_gb * 1e9)}", "--", sys.executable, "-m", "benchmarks.paper003.scale",
           "--child", json.dumps(args)]
    err: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as p:
        assert p.stdout is not None and p.stderr is not None
        pout, perr = p.stdout, p.stderr

        def echo() -> None:
            for line in perr:
                err.append(line.rstrip())
                print(f"[{args[0]} {args[3]} users] {line.rstrip()}", file=sys.stderr, flush=True)

        out: list[str] = []
        reader = threading.Thread(target=echo, daemon=True)
        reader.start()
        collect = threading.Thread(target=lambda: out.append(pout.read()), daemon=True)
        collect.start()
        try:
            p.wait(timeout=None if timeout_min is None else 60 * timeout_min)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            reader.join(5)
            rounds = [ln for ln in err if ln.startswith("round ")]
            return (f"stopped at --timeout-min {timeout_min:g} ({(rounds or ['before the first round'])[-1][:120]})",
                    _partial(err))
        reader.join(5)
        collect.join()
    if p.returncode != 0:
        return f"failed ({(err or ['no output'])[-1][:120]})", _partial(err)
    return json.loads(out[0].strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, nargs="+", default=[4, 10])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--only", nargs="+", default=None, help="instance names to run")
    ap.add_argument("--heldout", action="store_true", help="the held-out networks (to confirm, never to tune)")
    ap.add_argument("--cap-gb", type=float, default=6.0, help="address-space cap per instance")
    ap.add_argument("--jobs", type=int, default=1, help="instances run at once (each in its own process)")
    from certdp.lrgeo.memory import MAX_ROUNDS
    ap.add_argument("--max-rounds", type=int, default=MAX_ROUNDS,
                    help=f"Benders rounds at most (the server's default: {MAX_ROUNDS})")
    ap.add_argument("--timeout-min", type=float, default=None,
                    help="wall minutes an instance may run before it is stopped (default: no limit)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rewrite", default=None, metavar="RAW.json",
                    help="write the table of a run's raw JSON (RAW.md beside it) again, with the estimates and notes of "
                         "the current code")
    output_args(ap)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(run_one(*json.loads(args.child)), default=float))
        return
    if args.rewrite is not None:
        raw = json.loads(Path(args.rewrite).read_text())
        runs = raw["results"] if isinstance(raw, dict) else raw    # write_table's raw JSON: the runs
        args.measured = (raw.get("command"), raw.get("commit")) if isinstance(raw, dict) else (None, None)
        folders = {name: folder for name, folder, _ in instances(False) + instances(True)}
        for r in runs:
            if "error" not in r:
                r["estimate"], r["estimate_total"] = _estimate(r["instance"], folders[r["instance"]], r["bbox"],
                                                               r["users"], r["max_rounds"])
        _write(runs, args)
        return
    todo = [(name, folder, bbox, users, seed) for name, folder, bbox in instances(args.heldout)
            if not args.only or name in args.only for users in args.users for seed in args.seeds]

    def one(job: tuple) -> dict:
        name, folder, bbox, users, seed = job
        r = _child([name.split("-")[0], str(folder), None if bbox is None else list(bbox), users, seed,
                    args.max_rounds], args.cap_gb, args.timeout_min)
        if isinstance(r, dict):
            r["instance"] = name
            return r
        return {"instance": name, "users": users, "seed": seed, "error": r[0], **r[1]}

    runs = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:    # each instance is its own process
        for r in pool.map(one, todo):
            runs.append(r)
            print(json.dumps(r, default=float)[:400], file=sys.stderr, flush=True)
    _write(runs, args)


def _blocks_text(r: dict) -> str:
    """A run's blocks as LR set / LP rows / columns per user ('' before the blocks were built)."""
    return ", ".join(f"{n}/{w[0]}/{w[1]}" for n, w in zip(r.get("lr_sizes", []), r.get("block_sizes", [])))


def _block_note(r: dict) -> str:
    """One run's blocks (per user: LR set, LP rows, columns), the CPU seconds and simplex
    iterations of one block solve (median and worst over every call of the engine; the first
    call of each block, at the core point, apart) and the gap at rounds 1, 2, 5, 10, 20, ..."""
    calls = r["block_calls"]
    nb = len(r["block_sizes"])
    first, rest = calls[:nb], calls[nb:]
    per = {i: [c for c in rest if c[0] == i] for i in range(nb)}
    blocks = _blocks_text(r)
    cpu_rows = ", ".join(f"{statistics.median([c[1] for c in per[i]] or [0]):.3f}" for i in range(nb))
    hist = r.get("history", [])
    marks = [k for k in (1, 2, 5, 10, 20, 30, 50, 75, 100, 150, 200, 300) if k <= len(hist)]
    if hist and len(hist) not in marks:
        marks.append(len(hist))
    traj = ", ".join(f"{k}: {hist[k - 1][1]:.2g}" for k in marks)
    # a call whose live model ends optimal with duals returns at once; an infeasible one gives a
    # feasibility cut; any other end of the live model (a numerical failure) sends the engine to
    # a second run of the live model from its basis set again, then to fresh models, solved from
    # scratch with presolve
    runs = [c[3] for c in calls if len(c) > 3 and c[3]]
    failed = [r for r in runs if not r[0][0].startswith(("optimal", "infeasible")) or r[0][0] == "optimal (no duals)"]
    refits = (f"; live model failed numerically in {len(failed)} of {len(calls)} calls "
              f"({', '.join(sorted({r[0][0] for r in failed})) or '-'}): {sum(r[0][1] for r in failed):.1f} CPU s in those "
              f"runs and {sum(x[1] for r in failed for x in r[1:]):.1f} in the runs after them (the live model's "
              f"second run ended optimal in {sum(len(r) > 1 and r[1][0] == 'optimal' for r in failed)}), of "
              f"{sum(c[1] for c in calls):.1f} in all block calls")
    return (f"{r['instance']}, {r['users']} users, seed {r['seed']}: blocks (LR set / LP rows / columns per user) "
            f"{blocks}; first solve at the core point CPU s {', '.join(f'{c[1]:.2f}' for c in first)}; later block "
            f"solves: {len(rest)}, CPU s median {statistics.median([c[1] for c in rest] or [0]):.3f}, worst "
            f"{max([c[1] for c in rest] or [0]):.2f}, simplex iterations median "
            f"{statistics.median([c[2] for c in rest] or [0]):.0f}; per user median CPU s {cpu_rows}; "
            f"gap by round {traj}{refits}")


def _stopped_note(r: dict) -> str:
    """A stopped run's blocks and gap trajectory (from its stderr)."""
    hist = r["history"]
    blocks = _blocks_text(r)
    step = max(1, len(hist) // 12)
    traj = ", ".join(f"{h[0]}: {h[1]:.2g}" for h in hist[::step] + ([hist[-1]] if (len(hist) - 1) % step else []))
    return (f"{r['instance']}, {r['users']} users, seed {r['seed']} ({r['error'].split(' (')[0]}): blocks (LR set / LP "
            f"rows / columns per user) {blocks or 'not reached'}; {len(hist)} rounds, blocks CPU s "
            f"{sum(h[2] for h in hist):.1f}, master CPU s {sum(h[3] for h in hist):.2f}; gap by round {traj}")


def _mb(b: float) -> float:
    return round(b / 2**20, 1)


def _write(runs: list[dict], args: argparse.Namespace) -> None:
    parts = ("world", "table", "lr_sets", "blocks", "solve", "certify")
    cols = ["instance", "users", "seed", "LR sets", "iterations", "gap", "method", "certified",
            "peak MB", "estimate MB"] + [f"{p} MB (est.)" for p in parts] + \
        ["solve wall s", "solve CPU s", "blocks CPU s", "master CPU s", "round wall s", "round CPU s"]
    rows = []
    for r in runs:
        if "error" in r:
            rows.append([r["instance"], r["users"], r["seed"], r["error"]] + [""] * (len(cols) - 4))
            continue
        P, E = r["parts"], r["estimate"]
        rows.append([r["instance"], r["users"], r["seed"], f"{min(r['lr_sizes'])}-{max(r['lr_sizes'])}",
                     r["iterations"], r["gap"], r["method"], f"{r['certified']}/{r['users']}", _mb(r["peak"]),
                     _mb(r["estimate_total"])]
                    + [f"{_mb(P[p]['bytes'])} ({_mb(E.get(p, 0))})" for p in parts]
                    + [P["solve"]["wall"], P["solve"]["cpu"], r["sub_cpu"], r["master_cpu"],
                       sum(P[p]["wall"] for p in parts), sum(P[p]["cpu"] for p in parts)])
    notes = []
    ok = [r for r in runs if "error" not in r]
    for users in sorted({r["users"] for r in ok}):
        sel = [r for r in ok if r["users"] == users]
        cpu = [r["parts"]["solve"]["cpu"] for r in sel]
        wall = [r["parts"]["solve"]["wall"] for r in sel]
        peak = [r["peak"] for r in sel]
        notes.append(f"{users} users, {len(sel)} runs: solve CPU s median {statistics.median(cpu):.2f}, worst "
                     f"{max(cpu):.2f}; solve wall s median {statistics.median(wall):.2f}, worst {max(wall):.2f}; peak "
                     f"MB median {_mb(statistics.median(peak))}, worst {_mb(max(peak))}; worst gap "
                     f"{max(r['gap'] for r in sel):.2g}; methods {sorted({r['method'] for r in sel})}; certified "
                     f"{sum(r['certified'] for r in sel)}/{sum(r['users'] for r in sel)}")
    for r in ok:
        to = [sum(h[2] + h[3] for h in r.get("history", [])[:i + 1]) for i, h in enumerate(r.get("history", []))
              if h[1] <= 1e-3]
        if to:
            notes.append(f"{r['instance']}, {r['users']} users, seed {r['seed']}: Benders CPU s to gap 1e-3 {to[0]:.2f} "
                         f"(round {len(r['history']) - len(to) + 1}), to the end {r['sub_cpu'] + r['master_cpu']:.2f} "
                         f"({r['iterations']} rounds)")
        kept = [v for v in r.get("master_rows", []) if v is not None]
        if kept:
            notes.append(f"{r['instance']}, {r['users']} users, seed {r['seed']}: master rows (cuts kept) most "
                         f"{max(kept)}, at the end {kept[-1]}, of {r.get('cuts_added')} cuts added (a cut idle for "
                         "certdp.lrgeo.server.CUT_AGE rounds leaves)")
    notes.extend(_block_note(r) for r in ok if r.get("block_calls"))
    notes.extend(_stopped_note(r) for r in runs if "error" in r and r.get("history"))
    notes.append("Per part: measured growth of the resident set (estimate made before allocating, "
                 "certdp.lrgeo.memory.estimate_round). Wall seconds on a shared machine; CPU seconds of the process.")
    if args.rewrite:
        cmd, commit = getattr(args, "measured", (None, None))
        notes.append(f"Measurements from the run whose raw JSON is {Path(args.rewrite).name}"
                     + (f" (command `{cmd}`, commit {commit})" if cmd else "") + "; estimates and notes from the "
                     "current code (--rewrite).")
    name = "scale_heldout" if args.heldout else "scale" + ("" if not args.only else "_" + "_".join(args.only))
    if args.rewrite:
        name = Path(args.rewrite).stem     # a rewrite replaces the table of its raw JSON
    write_table(name, "LR-Geo at paper 003's settings on real road networks (40 x 40 grid)", cols, rows,
                notes=notes, raw=runs, args=args)


if __name__ == "__main__":
    main()
