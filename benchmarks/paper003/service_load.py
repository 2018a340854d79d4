"""LR-Geo as a service under load: one server process (`certdp lrgeo serve`) and 10, 50 and 100
concurrent users (threads of this process, each a full LRGeoClient: its own LR set,
coefficients, upload, wait and certification), with rounds of 4 and of 10 users.

Reported per (users, round size): the users' latency percentiles (from their first request to
their certified matrix), rounds per second, the server's peak memory (VmHWM) and CPU seconds,
how its rounds were solved (method, status, the worst certified gap a user received), and where
a user's time goes (table request, upload, waiting for the round and its solve, certifying),
with the server's own solve seconds per round. Both sides share the 2-core machine. Every
user's matrix passes the exact verification or the user counts as failed (the client builds a
:class:`certdp.Mechanism`, which verifies it exactly).

    python -m benchmarks.paper003.service_load [--grid 20x20] [--users 10 50 100] [--round-users 4 10]

With ``--network NODES.csv,EDGES.csv [--bbox ...]`` the server runs on a road network at paper
003's settings (the table is ``service_load_NAME``); a full-size round over a 47 x 49 km box of
Sydney needs a body limit of about 79 MiB and a solve longer than the default 10 s per user:

    python -m benchmarks.paper003.service_load --network ../shared/data/roads/sydney_nodes.csv,\
        ../shared/data/roads/sydney_edges.csv --bbox 150.95,-34.05,151.46,-33.61 --grid 40x40 \
        --users 4 --round-users 4 --round-wait 600 --max-body-mb 80 --user-seconds 600
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

from certdp.datasets.city import grid_city, load_world
from certdp.lp.outcome import relative_gap
from certdp.lrgeo.client import LRGeoClient

from .._common import output_args, write_table


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memory_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process (/proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(grid: str, round_users: int, round_wait: float, server_args: list[str]) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "certdp.cli", "lrgeo", "serve", "--grid", grid, "--port",
                             str(port), "--round-users", str(round_users), "--round-wait", str(round_wait),
                             "--client-users", "1000", "--client-rate", "100000", "--quiet", *server_args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    for _ in range(3000):
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return proc, url
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(proc.communicate()[1].decode()) from None
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not start")


def run(grid: str, users: int, round_users: int, round_wait: float, seed: int, server_args: list[str],
        network: str | None = None, bbox: str | None = None) -> dict:
    rows, cols = (int(v) for v in grid.split("x"))
    world = grid_city(rows, cols) if network is None else load_world("gridcity", rows, cols, network=network, bbox=bbox)
    proc, url = _start(grid, round_users, round_wait, server_args)
    try:
        locs = np.random.default_rng(seed).choice(world.K, size=users, replace=users > world.K)
        results: list[dict] = []
        errors: list[str] = []
        lock = threading.Lock()

        def one(i: int) -> None:
            try:
                r = LRGeoClient(url, world=world, timeout=120).obfuscate(int(locs[i]), rng=seed + i, wait=600)
                with lock:
                    results.append(r)
            except Exception as exc:   # counted and reported, not hidden
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=one, args=(i,)) for i in range(users)]
        cpu0, c0 = _cpu_seconds(proc.pid), time.process_time()
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall, users_cpu = time.perf_counter() - t0, time.process_time() - c0
        with urllib.request.urlopen(url + "/stats", timeout=10) as r:
            stats = json.loads(r.read())
        mem, cpu1 = _memory_mb(proc.pid), _cpu_seconds(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    lat = np.array([r["seconds"]["total"] for r in results]) if results else np.zeros(1)
    part = {k: float(np.mean([r["seconds"][k] for r in results])) if results else None
            for k in ("table", "upload", "wait", "certify")}
    rounds = stats["rounds"]
    gaps = [relative_gap(r["upper_bound"], r["lower_bound"]) for r in results]
    return {"users": users, "round_users": round_users, "ok": len(results), "errors": errors[:5],
            "verified": sum(r["verified"] for r in results), "wall": wall, "users_cpu": users_cpu,
            "server_cpu": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
            "methods": sorted({f"{r['method']} {r['status']}" for r in rounds}),
            "worst_gap": max((g for g in gaps if g is not None), default=None),
            "lr_sets": sorted(r["lr_set_size"] for r in results),
            "p50": float(np.percentile(lat, 50)), "p90": float(np.percentile(lat, 90)),
            "p99": float(np.percentile(lat, 99)), "rounds": len(rounds), "rounds_per_s": len(rounds) / wall,
            "closed_by_time": sum(r["closed_by"] == "time" for r in rounds),
            "solve_mean": float(np.mean([r["solve_seconds"] for r in rounds])) if rounds else None,
            "solve_total": float(np.sum([r["solve_seconds"] for r in rounds])) if rounds else None,
            "server_mb": mem, "table_seconds": stats["table_seconds"], **{f"user_{k}": v for k, v in part.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", default="20x20", help="ROWSxCOLS (gridcity at the scaled settings, or over --network)")
    ap.add_argument("--network", default=None, help="NODES.csv,EDGES.csv: a road network at paper 003's settings")
    ap.add_argument("--bbox", default=None, help="LON_MIN,LAT_MIN,LON_MAX,LAT_MAX: the area of --network")
    ap.add_argument("--users", type=int, nargs="+", default=[10, 50, 100])
    ap.add_argument("--round-users", type=int, nargs="+", default=[4, 10])
    ap.add_argument("--round-wait", type=float, default=2.0)
    ap.add_argument("--max-body-mb", type=float, default=None, help="the server's --max-body-mb (default: its own)")
    ap.add_argument("--user-seconds", type=float, default=None, help="the server's --user-seconds (default: its own)")
    ap.add_argument("--seed", type=int, default=0)
    a = output_args(ap).parse_args()
    if a.bbox is not None and a.network is None:
        ap.error("--bbox needs --network")
    rows, raw = [], []
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    server = ["--max-pending", str(2 * max(a.users + a.round_users))]
    server += [] if a.network is None else ["--network", a.network] + ([] if a.bbox is None else ["--bbox", a.bbox])
    server += [] if a.max_body_mb is None else ["--max-body-mb", f"{a.max_body_mb:g}"]
    server += [] if a.user_seconds is None else ["--user-seconds", f"{a.user_seconds:g}"]
    if a.network is None:
        name, title = "service_load", f"LR-Geo service under load (gridcity {a.grid}, scaled settings)"
    else:
        net = Path(a.network.split(",")[0]).stem.removesuffix("_nodes")
        name = f"service_load_{net}"
        title = (f"LR-Geo service on the {net} road network ({a.grid} grid"
                 f"{'' if a.bbox is None else ' over ' + a.bbox}, paper 003's settings)")
    for m in a.round_users:
        for n in a.users:
            r = run(a.grid, n, m, a.round_wait, a.seed, server, a.network, a.bbox)
            raw.append(r)
            rows.append([n, m, f"{r['verified']}/{n}", ", ".join(r["methods"]), r["worst_gap"], r["p50"], r["p90"],
                         r["p99"], r["rounds"], r["rounds_per_s"], r["solve_mean"], r["user_table"], r["user_upload"],
                         r["user_wait"], r["user_certify"], r["server_cpu"], r["users_cpu"], r["server_mb"]])
            print(rows[-1], flush=True)
            write_table(name, title, [
                "users", "round size", "certified", "rounds solved by", "worst gap", "p50 s", "p90 s", "p99 s",
                "rounds", "rounds/s", "server solve s/round", "user: table s", "user: upload s", "user: wait s",
                "user: certify s", "server CPU s", "users CPU s", "server peak MB"], rows, notes=[
                (f"round closes after its size in uploads or {a.round_wait:g} s after its first upload; users are "
                 "threads of the benchmark process, all started at once; server and users share the 2 cores"),
                ("certified: users whose matrix passed the exact verification (the client's Mechanism); worst gap: "
                 "the largest relative gap of the bounds a user received; rounds solved by: method and status of "
                 "the server's rounds (benders: no fallback to the whole LP)"),
                ("user: table = request and receive the reference-table rows; upload = build and send the "
                 "coefficients; wait = round filling, queueing behind earlier rounds and the solve; certify = "
                 "certify and sample locally"),
                ("server CPU s: the server process's user + system CPU seconds from the first user's request to the "
                 "last result (its world and table, built at start, apart); users CPU s: this process's (all users)"),
                "server peak MB: VmHWM of the server process (includes the world and the reference table)",
                f"server options: {' '.join(server)}"], raw=raw, args=a)


if __name__ == "__main__":
    main()
