"""The outputs decomposition on real road networks at growing density (issue 49): every network
of :data:`certdp.experiments.instances.NETWORKS` in several boxes, the worst case beside the
median, and what each part of a round costs.

    python -m benchmarks.paper000.growing [--networks helsinki goldcoast sydney city]
        [--sizes 1000 2000] [--boxes 0 1 2] [--cap 600] [--executor threads] [--heldout]
        [--jobs 1] [--name growing] [--config KEY=VALUE ...] [--baseline SRC] [--rounds 500]

Instances: :func:`certdp.experiments.instances.growing` (about (N - 1) / 48 neighbours a
record, eta 2 km where the network allows it, epsilon x the median neighbour distance = 1,
K = 100). ``--heldout`` runs the networks of ``$CERTDP_HELDOUT/roads`` instead (to confirm,
never to tune). Every solve runs in its own process (``--jobs`` of them side by side), with
``time_limit`` = ``--cap``; the table is rewritten after every run. Each row gives the wall and CPU seconds (the machine is
shared: CPU seconds and counts are steadier than wall seconds), and per part of a round
(the stabilised master, pricing, the upper bound): wall and CPU seconds, the dense masters'
flops, the pricing simplex iterations and cone rows in the models, and the peak memory after
each part. The results file records the commit and the machine's load at start and end.
``--baseline SRC`` runs every instance a second time with certdp imported from SRC (the ``src``
folder of another commit, e.g. from ``git archive``), side by side in the same run: the
comparison of two designs on the same instances under the same load.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from .._common import end_with_parent, output_args, write_table

PARTS = ("master", "pricing", "upper")


def commit() -> str:
    """The commit of the checkout that runs (with '+' when it has uncommitted changes)."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_config(items: list[str]):
    """``KEY=VALUE`` pairs into an :class:`~certdp.pmo.outputs.config.OutputsConfig`."""
    from dataclasses import fields

    from certdp.pmo.outputs.config import OutputsConfig

    types = {f.name: f.type for f in fields(OutputsConfig)}
    values: dict[str, Any] = {}   # each an int or a float, as its field is
    for item in items:
        key, _, value = item.partition("=")
        if key not in types:
            raise SystemExit(f"Error: --config {item}: OutputsConfig has no field {key!r}")
        values[key] = int(value) if types[key] == "int" else float(value)
    return OutputsConfig(**values)


def _child(network: str, n: int, box: int, cap: float, gap: float, executor: str, config_items: list[str], conn,
           src: str | None = None, rounds: int = 500, scheduler: str | None = None) -> None:
    end_with_parent()
    import resource
    import sys

    if src:                                            # the baseline design: certdp from SRC
        sys.path.insert(0, src)
    # the configuration travels as text and is built here, from the certdp this run imports:
    # an OutputsConfig sent from the parent would import the parent's certdp before SRC, and
    # carry this design's defaults into the baseline's run
    config = parse_config(config_items) if config_items else None

    from certdp import solve
    from certdp.experiments.instances import growing
    from certdp.mechanism import Mechanism  # (not cli.mechanisms.exact: a --baseline SRC may predate it)

    from .scale import _TreeMemory

    try:
        tree = _TreeMemory(_worker_pids(scheduler)) if executor != "threads" else None
        t0 = time.perf_counter()
        space = growing(network, n, box)
        build = time.perf_counter() - t0
        i, _ = space.neighbor_pairs
        cpu0 = time.process_time()
        options: dict[str, Any] = {"scheduler": scheduler} if scheduler else {}
        res = solve(space, "outputs", gap=gap, time_limit=cap, executor=executor, config=config,
                    max_iterations=rounds, **options)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        h = res.history
        out = {"status": res.status, "rounds": res.iterations, "seconds": res.timings["total"],
               "cpu_seconds": time.process_time() - cpu0 + usage.ru_utime + usage.ru_stime,
               "gap": res.gap, "loss": res.upper_bound, "lower": res.lower_bound,
               "audit": isinstance(res.mechanism, Mechanism) and bool(res.mechanism.verification.passed),
               "candidates": {k: v for k, v in res.stats.items()
                              if k.endswith(("_tried", "_best", "_failed", "_given_up"))},
               "config": res.stats.get("config"), "certdp": sys.modules["certdp"].__file__,
               **{f"{k}_seconds": float(v) for k, v in res.timings.items() if k != "total"},
               **{f"{p}_cpu": float(sum(r.get(f"{p}_cpu", 0.0) for r in h)) for p in PARTS},
               **{f"{p}_peak_mb": float(max((r.get(f"{p}_peak_mb", 0.0) for r in h), default=0.0)) for p in PARTS},
               "master_flops": h[-1]["master_flops"] if h else 0.0, "free_flops": h[-1]["free_flops"] if h else 0.0,
               "pricing_iterations": int(sum(r["pricing_iterations"] for r in h)),
               "pricing_rows": h[-1]["pricing_rows"] if h else 0, "columns": res.stats["columns"],
               "history": [dict(r) for r in h]}
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        out.update(build_seconds=build, neighbours=2 * len(i) / space.n_records, epsilon=space.epsilon,
                   eta=space.eta, pairs=len(i), peak_mb=max(peak, tree.close()) if tree is not None else peak)
        conn.send(out)
    except Exception as exc:                           # reported in the table, not raised
        conn.send({"status": f"error: {type(exc).__name__}: {exc}"})


def _worker_pids(scheduler: str | None) -> tuple[int, ...]:
    """The process ids of the workers of the Dask cluster at ``scheduler`` (started apart on
    this machine), so that their memory counts in the run's peak; none without one."""
    if not scheduler:
        return ()
    from distributed import Client

    with Client(scheduler, timeout=30) as client:
        return tuple(int(p) for p in client.run(os.getpid).values())


def run_all(keys: list[tuple], cap: float, gap: float, executor: str, config_items: list[str], jobs: int,
            rounds: int = 500, scheduler: str | None = None):
    """Yield each run's record as it ends, ``jobs`` solves at a time (one process each); a key
    is ``(network, N, box, design, src)``."""
    import multiprocessing as mp
    from multiprocessing.connection import Connection, wait
    from multiprocessing.context import SpawnProcess

    ctx = mp.get_context("spawn")
    todo = list(keys)
    live: dict[Connection, tuple[SpawnProcess, str, int, int, str, float]] = {}
    while todo or live:
        while todo and len(live) < jobs:
            network, n, box, design, src = todo.pop(0)
            print(f"{network} N={n} box {box} {design} ...", flush=True)
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(network, n, box, cap, gap, executor, config_items, send, src,
                                                    rounds, scheduler))
            proc.start()
            send.close()   # the child holds the only writing end: its death reads as the end of the pipe
            live[recv] = (proc, network, n, box, design, time.monotonic())
        ready = wait(list(live), timeout=60)
        for recv in list(live):
            proc, network, n, box, design, started = live[recv]
            if recv in ready:
                try:
                    res = recv.recv()
                except EOFError:
                    res = {"status": f"the solving process ended without an answer (exit code {proc.exitcode})"}
            elif time.monotonic() - started > cap + 1800:
                res = {"status": f"killed after {cap + 1800:g} s"}
            else:
                continue
            del live[recv]
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()
            yield {"network": network, "n": n, "box": box, "design": design, **res}


def _summary(raw: list[dict], gap: float) -> list[list]:
    """Per network and size: the median and the worst run over the boxes."""
    rows = []
    for key in sorted({(r["network"], r["n"], r["design"]) for r in raw}, key=lambda k: (k[1], k[0], k[2])):
        sel = [r for r in raw if (r["network"], r["n"], r["design"]) == key and "seconds" in r]
        if not sel:
            continue
        secs = [r["seconds"] for r in sel]
        cpu = [r["cpu_seconds"] for r in sel]
        worst = max(sel, key=lambda r: (r["gap"] > gap * 1.0001, r["seconds"]))
        rows.append([key[0], key[1], key[2], len(sel), f"{statistics.median(r['neighbours'] for r in sel):.1f}",
                     statistics.median(secs), worst["seconds"], statistics.median(cpu), max(cpu),
                     statistics.median(r["rounds"] for r in sel), max(r["rounds"] for r in sel),
                     max(r["gap"] for r in sel), max(r["peak_mb"] for r in sel),
                     sum(r["gap"] <= gap * 1.0001 for r in sel), all(r["audit"] for r in sel)])
    return rows


def _parts(r: dict) -> dict[str, float]:
    """What a round of run ``r`` costs, per part (a run cut by the cap counts the rounds it
    finished): CPU seconds of the stabilised master and of pricing per round (pricing's first
    round apart: it builds the working sets), CPU seconds per upper step, and the counts that do
    not depend on the machine's load: the dense masters' Gflop (per round, and per upper step
    for the free master), pricing simplex iterations per round after the first, and the cone
    rows in the pricing models at the end."""
    h = r["history"]
    rounds, later = len(h), h[1:] or h
    steps = [x for x in h if x.get("free_master_seconds", 0.0) > 0 or x.get("upper_cpu", 0.0) > 0.01]
    n_steps = max(1, len(steps))
    return {"pairs": r["pairs"], "rounds": rounds,
            "master_cpu": sum(x["master_cpu"] for x in h) / rounds, "master_gflop": h[-1]["master_flops"] / 1e9 / rounds,
            "pricing_cpu_first": h[0]["pricing_cpu"], "pricing_cpu": sum(x["pricing_cpu"] for x in later) / len(later),
            "pricing_its": sum(x["pricing_iterations"] for x in later) / len(later),
            "cone_rows": h[-1]["pricing_rows"],
            "upper_cpu": sum(x["upper_cpu"] for x in steps) / n_steps,
            "free_gflop": h[-1]["free_flops"] / 1e9 / n_steps, "cpu": r["cpu_seconds"] / rounds,
            "columns": r["columns"] / r["n"], "peak_mb": r["peak_mb"]}


def _per_round(raw: list[dict]) -> list[str]:
    """The table of :func:`_parts`, a row per run."""
    out = ["", "Per round, by part (runs cut by the cap count the rounds they finished):", "",
           "| network | N | design | pairs | rounds | master CPU s / round | master Gflop / round | pricing CPU s "
           "round 1 | pricing CPU s / later round | simplex its / later round | cone rows | upper CPU s / step "
           "| free Gflop / step | peak MB |", "|" + "---|" * 14]
    keys = ("pairs", "rounds", "master_cpu", "master_gflop", "pricing_cpu_first", "pricing_cpu", "pricing_its",
            "cone_rows", "upper_cpu", "free_gflop", "peak_mb")
    for r in sorted((r for r in raw if r.get("history")), key=lambda r: (r["n"], r["network"], r["design"])):
        p = _parts(r)
        out.append("| " + " | ".join(_fmt(v) for v in [r["network"], r["n"], r["design"], *(p[k] for k in keys)]) + " |")
    return out


def _ratios(raw: list[dict]) -> list[str]:
    """This design against the baseline on each instance both finished: CPU seconds, peak
    memory and rounds as ratios (this / baseline), and each one's wall seconds and gap (a
    capped run may end past its cap by a round and an upper step)."""
    done = {(r["network"], r["n"], r["box"], r["design"]): r for r in raw if "seconds" in r}
    pairs = [(k[:3], r, done[(*k[:3], "baseline")]) for k, r in done.items()
             if k[3] == "this" and (*k[:3], "baseline") in done]
    if not pairs:
        return []
    out = ["", "This design against the baseline, same instances, same run (ratios this / baseline):", "",
           "| network | N | box | CPU s | peak MB | rounds | seconds (this, baseline) | gap (this, baseline) |",
           "|---|---|---|---|---|---|---|---|"]
    for k, r, b in sorted(pairs, key=lambda p: (p[0][1], p[0][0], p[0][2])):
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {r['cpu_seconds'] / b['cpu_seconds']:.3f} | "
                   f"{r['peak_mb'] / b['peak_mb']:.3f} | {r['rounds']} / {b['rounds']} | "
                   f"{r['seconds']:.1f}, {b['seconds']:.1f} | {r['gap']:.4f}, {b['gap']:.4f} |")
    return out


def table(raw: list[dict], a, load: list[tuple[float, float, float]], started: str,
          solved_by: str | None = None, solved_with: str | None = None) -> None:
    """Write the tables; ``solved_by`` is the commit of the runs (the checkout's by default),
    ``solved_with`` their command (this one by default)."""
    from .._common import command

    solved_by = solved_by or commit()
    solved_with = solved_with or command()
    rows = []
    for r in raw:
        if "seconds" not in r:
            rows.append([r["network"], r["n"], r["box"], r["design"], "-", r["status"]] + ["-"] * 14)
            continue
        rows.append([r["network"], r["n"], r["box"], r["design"], f"{r['neighbours']:.1f}", r["status"], r["rounds"],
                     r["seconds"], r["cpu_seconds"], r["gap"], r["peak_mb"], r["audit"],
                     *(r[f"{p}_cpu"] for p in PARTS), r["master_flops"] / 1e9, r["free_flops"] / 1e9,
                     r["pricing_iterations"] / 1e6, r["pricing_rows"], r["columns"]])
    summary = _summary(raw, a.gap)
    notes = [f"solved by `{solved_with}`", f"commit {solved_by}; started {started}; load average (1, 5, 15 min) at start "
             f"{', '.join(f'{x:.2f}' for x in load[0])}" + (f", at the end {', '.join(f'{x:.2f}' for x in load[-1])}"
                                                            if len(load) > 1 else ""),
             f"cap {a.cap:g} s per solve; stop at a {a.gap:g} certified gap; pricing on {a.executor}"
             + (f" (the cluster at {a.scheduler}, started apart)" if a.scheduler else "")
             + ("" if a.executor == "threads" else " (peak MB: the solving process and its workers together)"),
             "CPU s: the solving process's CPU seconds (all its threads and child processes); master / pricing / "
             "upper CPU s: per part of the rounds; Gflop: the dense masters' work, (rows^2 x columns + rows^3 / 3) "
             "x interior-point steps; Msimplex: pricing simplex iterations; cone rows: in the pricing models at "
             "the end (their LPs' size beyond N)",
             f"configuration: {a.config_items or 'the defaults'}",
             "", "Median and worst case over the boxes (worst: the slowest run, or one that missed the gap):", "",
             "| network | N | design | boxes | neighbours | median s | worst s | median CPU s | worst CPU s | median rounds "
             "| worst rounds | worst gap | worst peak MB | at the gap | all audited |",
             "|" + "---|" * 15]
    notes += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in summary]
    notes += _per_round(raw) + _ratios(raw)
    write_table(a.name, "Outputs decomposition on road networks at growing density (K = 100, 1% gap)",
                ["network", "N", "box", "design", "neighbours", "status", "rounds", "seconds", "CPU s", "gap", "peak MB",
                 "audit", "master CPU s", "pricing CPU s", "upper CPU s", "master Gflop", "free Gflop",
                 "Msimplex", "cone rows", "columns"], rows, notes=notes,
                raw={"load": load, "commit": solved_by, "command": solved_with, "runs": raw}, args=a)


#: The quantities of the growth model: name, unit, and its key in :func:`_parts`.
GROWTH = (
    ("neighbour pairs", "", "pairs"),
    ("rounds", "to 1% (a run cut by the cap: its rounds, a lower bound)", "rounds"),
    ("stabilised master", "Gflop / round", "master_gflop"),
    ("stabilised master", "CPU s / round", "master_cpu"),
    ("pricing", "simplex its / round after the first", "pricing_its"),
    ("pricing", "CPU s / round after the first", "pricing_cpu"),
    ("upper step", "CPU s / step", "upper_cpu"),
    ("a round, every part", "CPU s / round", "cpu"),
    ("pricing", "cone rows in the models at the end", "cone_rows"),
    ("columns", "in the store at the end, / N", "columns"),
    ("peak", "MB", "peak_mb"),
)


def _slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of log y on log x."""
    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-12)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def growth(runs: list[dict], sizes: list[int], to: tuple[int, ...] = (10000, 20000)) -> tuple[list[list], list[str]]:
    """How each part of a run grows with N over the family: per quantity of :data:`GROWTH`, the
    worst value over the networks and boxes at each size of ``sizes``, the slope of log(worst) on
    log N over those sizes, and the worst value carried by that slope to the sizes ``to``.
    Returns the rows and notes that turn them into a time and a memory at those sizes."""
    done = [r for r in runs if r.get("history") and r["n"] in sizes]
    at = sorted({r["n"] for r in done})
    if len(at) < 2:
        raise SystemExit(f"Error: the growth model needs runs at two sizes or more of {sizes}, got {at}")
    cut = [r for r in done if r["gap"] > 0.01 * 1.0001]
    # the rounds to 1% are known only where no run was cut by the cap: the slope is fitted there,
    # and carried from the largest such size (a size with a cut run gives a lower bound only)
    whole = [n for n in at if not any(r["n"] == n for r in cut)]
    parts = [(r["n"], _parts(r)) for r in done]
    rows, worst = [], {}
    for name, unit, key in GROWTH:
        w = [max(p[key] for m, p in parts if m == n) for n in at]
        fit = whole if name == "rounds" else at
        if len(fit) < 2:
            rows.append([name, unit, "-", *w, "-", "-"])
            worst[(name, unit)] = (math.nan, math.nan)
            continue
        b = _slope(fit, [w[at.index(n)] for n in fit])
        last = w[at.index(fit[-1])]
        worst[(name, unit)] = (b, last)
        rows.append([name, unit, f"{b:.2f}", *w, *(last * (m / fit[-1]) ** b for m in to)])
    ratio = statistics.median(r["seconds"] / r["cpu_seconds"] for r in done)
    skipped = [r for r in runs if r["n"] in sizes and not r.get("history")]
    counts = ", ".join(f"{n:,}: {sum(r['n'] == n for r in done)}" for n in at)
    notes = [f"sizes fitted: {', '.join(map(str, at))} (rounds: {', '.join(map(str, whole)) or 'none'}); runs per size "
             f"{counts} (a worst of fewer runs sits lower, which flattens a slope); "
             + ("left out, with no rounds: " + ", ".join(f"{r['network']} {r['n']}" for r in skipped) + "; "
                if skipped else "")
             + f"runs: {len(done)} ({len(cut)} cut by the cap before 1%: "
             + (", ".join(f"{r['network']} {r['n']} box {r['box']} at {r['gap']:.2%} after {len(r['history'])} rounds"
                          for r in cut) or "none") + ")",
             f"wall / CPU seconds, median over the runs: {ratio:.2f} (2 cores)"]
    b_r, r_last = worst[("rounds", GROWTH[1][1])]
    b_c, c_last = worst[("a round, every part", "CPU s / round")]
    b_p, p_last = worst[("peak", "MB")]
    # without two sizes of known rounds, the most rounds any run took at any size (a run cut
    # by the cap included: its rounds are a lower bound on its own) is carried as a floor, on
    # the assumption that the worst case's rounds do not fall as N grows
    floor = len(whole) < 2
    if floor:
        r_last = max(len(r["history"]) for r in done)
    for m in to:
        rounds = r_last if floor else r_last * (m / whole[-1]) ** b_r
        cpu = c_last * (m / at[-1]) ** b_c
        dense = 8.0 * m * m * (1 + worst[("columns", "in the store at the end, / N")][1]) / 1e9
        least = "at least " if floor else ""
        notes.append(f"{m:,} records, carried by the slopes: {least}{rounds:.0f} rounds"
                     + (" (the most of any run at any size, carried as a floor: no two sizes reached 1% "
                        "in every run, and the worst case's rounds are assumed not to fall as N grows)" if floor else "")
                     + f" x {cpu:,.0f} CPU s = {least}{rounds * cpu / 3600:,.1f} CPU h, "
                     f"{least}{rounds * cpu * ratio / 3600:,.1f} h of wall time on 2 cores; "
                     f"peak {p_last * (m / at[-1]) ** b_p / 1e3:,.1f} GB, of which the dense master's normal "
                     f"equations and column store alone are {dense:,.1f} GB (8 N^2 x (1 + columns / N) bytes)")
    return rows, notes


def _load_runs(paths: list[str]) -> list[dict]:
    """The runs of the results files ``paths``; ``FILE#DESIGN`` takes only that design's runs of
    a file run with ``--baseline`` (``this`` by default, and a file without designs has only
    ``this``)."""
    import json

    runs = []
    for p in paths:
        path, _, design = p.partition("#")
        saved = json.loads(Path(path).read_text())
        runs += [{**r, "source": Path(path).name} for r in saved.get("results", saved)["runs"]
                 if r.get("design", "this") == (design or "this")]
    return runs


def model_table(paths: list[str], sizes: list[int], a) -> None:
    """Write the growth model of the runs in the results files ``paths`` (:func:`_load_runs`)."""
    runs = _load_runs(paths)
    rows, notes = growth(runs, sizes)
    sources = "; ".join(f"`{Path(p).name}`" for p in paths)   # (a #DESIGN stays in the name)
    write_table(a.name, "How a run of the outputs decomposition grows with N on road networks at growing density",
                ["part", "unit", "slope in N", *(f"worst at {n:,}" for n in sorted({r['n'] for r in runs if r['n'] in sizes
                                                                                   and r.get('history')})),
                 "carried to 10,000", "carried to 20,000"], rows,
                notes=[f"runs from {sources}", *notes,
                       "the worst value at each size is over every network and box of that size; the slope is fitted "
                       "to those worst values, so the carried values are the family's worst case if the growth holds"],
                raw={"sources": paths, "sizes": sizes, "rows": rows}, args=a)


def memory_check(runs: list[dict], k: int = 100) -> tuple[list[list], list[list]]:
    """The engine's memory estimate (:func:`certdp.pmo.outputs.solve.memory_parts`, what
    :func:`certdp.solve` checks before a run) against each run's measured peak, and its
    working-set rule (:func:`~certdp.pmo.outputs.solve.working_set_rows`) against the most cone
    rows the run's pricing models held; per run, then per size (the least and the largest
    ratio: below 1 the estimate under-counts)."""
    from dataclasses import fields

    from certdp.pmo.outputs.config import OutputsConfig
    from certdp.pmo.outputs.solve import memory_parts, working_set_rows

    known = {f.name for f in fields(OutputsConfig)}
    rows = []
    for r in runs:
        if not r.get("history") or not r.get("peak_mb") or not r.get("pairs"):
            continue
        cfg = OutputsConfig(**{f: v for f, v in (r.get("config") or {}).items() if f in known})
        parts = memory_parts(r["n"], k, r["pairs"], cfg)
        est, peak = sum(parts.values()) / 1e9, r["peak_mb"] * 2**20 / 1e9
        held = max(h["pricing_rows"] for h in r["history"])
        rows.append([r["source"], r["network"], r["n"], r["box"], r.get("design", "this"), 2 * r["pairs"] / r["n"],
                     peak, est, est / peak, parts["pricing"] / 1e9, held / (k * working_set_rows(r["n"], r["pairs"], cfg))])
    by_n = []
    for n in sorted({x[2] for x in rows}):
        at = [x for x in rows if x[2] == n]
        by_n.append([n, len(at), min(x[8] for x in at), statistics.median(x[8] for x in at), max(x[8] for x in at),
                     max(x[10] for x in at)])
    return rows, by_n


def memory_table(paths: list[str], a) -> None:
    """Write :func:`memory_check` of the runs in the results files ``paths``."""
    rows, by_n = memory_check(_load_runs(paths))
    if not rows:
        raise SystemExit("Error: no run with a peak, pairs and rounds in " + ", ".join(paths))
    under = [x for x in rows if x[8] < 1]
    write_table(a.name, "The outputs decomposition's memory estimate against the measured peak of recorded runs",
                ["results file", "network", "N", "box", "design", "neighbours", "peak GB", "estimate GB",
                 "estimate / peak", "of it pricing GB", "most cone rows held / the working-set rule"], rows,
                notes=["estimate: `certdp.pmo.outputs.solve.memory_parts` at K = 100 and the run's configuration, the "
                       "bytes `certdp.solve` checks against the machine before the run starts (pricing included: "
                       "every run here priced on this machine); peak: the run's resident peak (with its workers)",
                       f"runs under-counted (estimate / peak < 1): {len(under)} of {len(rows)}", "",
                       "| N | runs | least estimate / peak | median | largest | most rows held / the rule, largest |",
                       "|---|---|---|---|---|---|",
                       *("| " + " | ".join(_fmt(v) for v in x) + " |" for x in by_n)],
                raw={"sources": paths, "runs": rows, "by_n": by_n}, args=a)


def _fmt(v) -> str:
    from .._common import fmt

    return fmt(v)


def main() -> None:
    from certdp.experiments.instances import NETWORKS, heldout_networks

    ap = argparse.ArgumentParser()
    ap.add_argument("--tables-from", default=None, metavar="JSON",
                    help="write the tables again from a results file's runs (nothing is solved)")
    ap.add_argument("--model-from", nargs="+", default=None, metavar="JSON[#DESIGN]",
                    help="write the growth model of these results files' runs at --sizes (nothing is solved); "
                         "#DESIGN takes one design's runs of a --baseline file (default: this)")
    ap.add_argument("--memory-from", nargs="+", default=None, metavar="JSON[#DESIGN]",
                    help="compare the engine's memory estimate with these results files' measured peaks "
                         "(nothing is solved)")
    ap.add_argument("--networks", nargs="+", default=list(NETWORKS))
    ap.add_argument("--heldout", action="store_true", help="run the held-out networks instead (confirm only)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000])
    ap.add_argument("--boxes", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--cap", type=float, default=600.0)
    ap.add_argument("--rounds", type=int, default=500, help="round limit (the same work for every design)")
    ap.add_argument("--gap", type=float, default=0.01)
    ap.add_argument("--executor", default="threads", choices=["threads", "process", "dask"])
    ap.add_argument("--scheduler", default=None, metavar="ADDRESS",
                    help="price on the Dask cluster at ADDRESS (implies --executor dask; its workers' memory counts "
                         "in the peak, so they must run on this machine)")
    ap.add_argument("--jobs", type=int, default=1, help="solves side by side (one process each)")
    ap.add_argument("--name", default="growing")
    ap.add_argument("--baseline", default=None, metavar="SRC",
                    help="also run every instance with certdp imported from SRC (another commit's src folder)")
    ap.add_argument("--config", dest="config_items", nargs="*", default=[], metavar="KEY=VALUE",
                    help="OutputsConfig fields to change")
    a = output_args(ap).parse_args()
    if a.scheduler:
        a.executor = "dask"
    parse_config(a.config_items)                       # a bad field fails here, before any run
    if a.model_from:
        model_table(a.model_from, a.sizes, a)
        return
    if a.memory_from:
        memory_table(a.memory_from, a)
        return
    if a.tables_from:
        import json

        saved = json.loads(Path(a.tables_from).read_text())
        saved = saved.get("results", saved)   # a results file nests the runs' record under "results"
        runs = [{"design": "this", **r} for r in saved["runs"]]
        table(runs, a, saved["load"], "as recorded", saved["commit"], saved.get("command"))
        return
    networks = heldout_networks() if a.heldout else a.networks
    if a.heldout and not networks:
        print("no held-out networks ($CERTDP_HELDOUT/roads is unset or empty): nothing to run")
        return
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    load = [os.getloadavg()]
    raw: list[dict] = []
    designs = [("this", None)] + ([("baseline", str(Path(a.baseline).resolve()))] if a.baseline else [])
    keys = [(network, n, box, *d) for n in a.sizes for network in networks for box in a.boxes for d in designs]
    for r in run_all(keys, a.cap, a.gap, a.executor, a.config_items, a.jobs, a.rounds, a.scheduler):
        raw.append(r)
        print(r["network"], r["n"], r["box"], {k: r.get(k) for k in ("status", "rounds", "seconds", "cpu_seconds",
                                                                    "gap", "peak_mb")}, flush=True)
        table(raw, a, load + [os.getloadavg()], started)
    if not raw:
        print("nothing to run")


if __name__ == "__main__":
    main()
