"""LR-Geo as a service under load: one server process (`certdp lrgeo serve`) and 10, 50 and 100
concurrent users (threads of this process, each a full LRGeoClient: its own LR set,
coefficients, upload, wait and certification), with rounds of 4 and of 10 users.

Reported per (users, round size): the users' latency percentiles (from their first request to
their certified matrix), rounds per second, the server's peak memory (VmHWM), and where a
user's time goes (table request, upload, waiting for the round and its solve, certifying),
with the server's own solve seconds per round. Both sides share the 2-core machine.

    python -m benchmarks.paper003.service_load [--grid 20x20] [--users 10 50 100] [--round-users 4 10]
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

import numpy as np

from certdp.datasets.city import grid_city
from certdp.lrgeo.client import LRGeoClient

from .._common import output_args, write_table


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memory_mb(pid: int) -> float | None:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _start(grid: str, round_users: int, round_wait: float) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "certdp.cli", "lrgeo", "serve", "--grid", grid, "--port",
                             str(port), "--round-users", str(round_users), "--round-wait", str(round_wait),
                             "--max-pending", "1000", "--client-users", "1000", "--client-rate", "100000", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return proc, url
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode()) from None
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not start")


def run(grid: str, users: int, round_users: int, round_wait: float, seed: int) -> dict:
    proc, url = _start(grid, round_users, round_wait)
    try:
        rows, cols = (int(v) for v in grid.split("x"))
        world = grid_city(rows, cols)
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
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        with urllib.request.urlopen(url + "/stats", timeout=10) as r:
            stats = json.loads(r.read())
        mem = _memory_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    lat = np.array([r["seconds"]["total"] for r in results]) if results else np.zeros(1)
    part = {k: float(np.mean([r["seconds"][k] for r in results])) if results else None
            for k in ("table", "upload", "wait", "certify")}
    rounds = stats["rounds"]
    return {"users": users, "round_users": round_users, "ok": len(results), "errors": errors[:5],
            "verified": all(r["verified"] for r in results), "wall": wall,
            "p50": float(np.percentile(lat, 50)), "p90": float(np.percentile(lat, 90)),
            "p99": float(np.percentile(lat, 99)), "rounds": len(rounds), "rounds_per_s": len(rounds) / wall,
            "closed_by_time": sum(r["closed_by"] == "time" for r in rounds),
            "solve_mean": float(np.mean([r["solve_seconds"] for r in rounds])) if rounds else None,
            "solve_total": float(np.sum([r["solve_seconds"] for r in rounds])) if rounds else None,
            "server_mb": mem, "table_seconds": stats["table_seconds"], **{f"user_{k}": v for k, v in part.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", default="20x20", help="gridcity ROWSxCOLS (scaled settings)")
    ap.add_argument("--users", type=int, nargs="+", default=[10, 50, 100])
    ap.add_argument("--round-users", type=int, nargs="+", default=[4, 10])
    ap.add_argument("--round-wait", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    a = output_args(ap).parse_args()
    rows, raw = [], []
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for m in a.round_users:
        for n in a.users:
            r = run(a.grid, n, m, a.round_wait, a.seed)
            raw.append(r)
            rows.append([n, m, f"{r['ok']}/{n}", r["p50"], r["p90"], r["p99"], r["rounds"], r["rounds_per_s"],
                         r["solve_mean"], r["user_table"], r["user_upload"], r["user_wait"], r["user_certify"],
                         r["server_mb"]])
            print(rows[-1], flush=True)
            write_table("service_load", f"LR-Geo service under load (gridcity {a.grid}, scaled settings)", [
                "users", "round size", "certified", "p50 s", "p90 s", "p99 s", "rounds", "rounds/s",
                "server solve s/round", "user: table s", "user: upload s", "user: wait s", "user: certify s",
                "server peak MB"], rows, notes=[
                f"round closes after its size in uploads or {a.round_wait:g} s after its first upload; users are "
                "threads of the benchmark process, all started at once; server and users share the 2 cores",
                "user: table = request and receive the reference-table rows; upload = build and send the "
                "coefficients; wait = round filling, queueing behind earlier rounds and the solve; certify = "
                "certify and sample locally",
                "server peak MB: VmHWM of the server process (includes the reference table)"], raw=raw, args=a)


if __name__ == "__main__":
    main()
