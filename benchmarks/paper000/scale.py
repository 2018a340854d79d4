"""The outputs decomposition from 500 to 5,000 records: rounds, seconds, certified gap and peak
memory, with neighbours held constant (``density``) and with eta fixed on a fixed area
(``eta``: neighbours grow with N), against monolithic HiGHS in the same run where it finishes
within its cap; a PNG of seconds and rounds against N with the fitted growth exponent.

    python -m benchmarks.paper000.scale [--kinds grid gauss] [--modes density eta]
        [--sizes 500 1000 2000 5000] [--cap 1800] [--mono-max 1000] [--mono-cap 600]

Every solve runs in its own process (peak memory is that process's maximum resident set,
interpreter and instance included) with ``time_limit`` = ``--cap``; the table is rewritten after
every run, so a long run loses nothing. Instances: :func:`certdp.experiments.instances.scaling`
(K = 100, epsilon x median neighbour distance = 1). The growth exponent is the least-squares
slope of log seconds (log rounds) on log N over the sizes that reached the 1% gap.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from certdp.lp.executors import EXECUTORS

from .._common import end_with_parent, output_args, target, write_table


def _round_line(event) -> None:
    """A long solve shows its rounds (the child's stdout is the benchmark's)."""
    if event.stage == "round":
        print(f"  {event.message}", flush=True)


class _TreeMemory:
    """The largest resident set of this process and all its descendants together (the pricing
    workers of ``--executor process`` or ``dask`` live in other processes), and of
    ``extra_pids`` (the workers of a Dask cluster started apart on this machine), sampled every
    half second on a thread; shared pages count once per process, so it errs high."""

    def __init__(self, extra_pids: tuple[int, ...] = ()) -> None:
        import threading

        import psutil   # installed with the distributed extra, which the other executors need

        self.me = psutil.Process()
        self.extra = [psutil.Process(pid) for pid in extra_pids]   # a cluster's workers on this machine
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            total = 0
            for p in [self.me, *self.me.children(recursive=True), *self.extra]:
                try:
                    total += p.memory_info().rss
                except Exception:   # a process that ended between the listing and the read
                    pass
            self.peak = max(self.peak, total)

    def close(self) -> float:
        self.stop.set()
        self.thread.join()
        return self.peak / 2**20


def _child(kind: str, n: int, mode: str, method: str, cap: float, gap: float, executor: str, conn) -> None:
    end_with_parent()
    import resource

    from certdp import SolverLimitError, solve
    from certdp.cli.mechanisms import exact
    from certdp.experiments.instances import scaling

    try:
        tree = _TreeMemory() if executor != "threads" else None
        t0 = time.perf_counter()
        space = scaling(kind, n, mode)
        build = time.perf_counter() - t0
        i, _ = space.neighbor_pairs
        opts = ({"gap": gap, "progress": _round_line, "executor": executor} if method == "outputs"
                else {"solver": "simplex"})
        try:
            res = solve(space, method, time_limit=cap, **opts)
            calls = res.stats.get("pricing_calls") or []
            out = {"status": res.status, "rounds": res.iterations, "seconds": res.timings["total"],
                   "gap": res.gap, "loss": res.upper_bound, "lower": res.lower_bound,
                   "audit": bool(exact(res).verification.passed), "executor": res.stats.get("executor", "-"),
                   # how often each upper-bound candidate was tried, gave the best, failed or was
                   # given up (outputs only)
                   "candidates": {k: v for k, v in res.stats.items()
                                  if k.endswith(("_tried", "_best", "_failed", "_given_up"))},
                   **{f"{k}_seconds": float(v) for k, v in res.timings.items() if k != "total"},
                   **({"pricing_wall_seconds": sum(c["wall"] for c in calls),
                       "pricing_slowest_group_seconds": sum(c["compute_max"] for c in calls),
                       "pricing_compute_seconds": sum(c["compute_sum"] for c in calls),
                       "pricing_calls": len(calls)} if calls else {})}
        except SolverLimitError as exc:
            out = {"status": f"limit, nothing feasible ({exc})", "seconds": cap}
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        out.update(build_seconds=build, pairs_per_record=2 * len(i) / space.n_records, epsilon=space.epsilon,
                   peak_mb=max(peak, tree.close()) if tree is not None else peak)
        conn.send(out)
    except Exception as exc:                           # reported in the table, not raised
        conn.send({"status": f"error: {type(exc).__name__}: {exc}"})


def run_one(kind, n, mode, method, cap, gap, executor="threads") -> dict:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(kind, n, mode, method, cap, gap, executor, send))
    proc.start()
    res = recv.recv() if recv.poll(cap + 600) else {"status": f"killed after {cap + 600:g} s"}
    if proc.is_alive():
        proc.kill()
    proc.join()
    return {"kind": kind, "n": n, "mode": mode, "method": method, **res}


def exponent(rows: list[dict], key: str, gap: float) -> float | None:
    """Least-squares slope of log ``key`` on log N over the runs that reached ``gap``."""
    pts = [(r["n"], r[key]) for r in rows if r.get("gap") is not None and r["gap"] <= gap * 1.01 and r.get(key)]
    if len({n for n, _ in pts}) < 2:
        return None
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


def plot(raw: list[dict], a) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for kind in a.kinds:
        for mode in a.modes:
            rows = sorted((r for r in raw if r["kind"] == kind and r["mode"] == mode and r["method"] == "outputs"
                           and r.get("rounds")), key=lambda r: r["n"])
            if not rows:
                continue
            for ax, key in zip(axes, ("seconds", "rounds")):
                e = exponent(rows, key, a.gap)
                lab = f"{kind}, {mode}" + (f" (N^{e:.2f})" if e is not None else "")
                ax.plot([r["n"] for r in rows], [r[key] for r in rows], marker="o", label=lab)
    for ax, key in zip(axes, ("seconds", "rounds")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("records N")
        ax.set_ylabel(key)
        ax.legend(fontsize=7)
    fig.suptitle("decomposition over outputs, K = 100, to a 1% certified gap")
    fig.tight_layout()
    fig.savefig(target("scale", ".png", a), dpi=120)
    plt.close(fig)


def table(raw: list[dict], a) -> None:
    rows = []
    for r in raw:
        parts = [r.get(k) for k in ("rounds", "seconds", "master_seconds", "free_master_seconds", "pricing_seconds",
                                    "certify_seconds", "gap", "peak_mb", "audit")]
        rows.append([r["kind"], r["mode"], r["n"], r["method"], f"{r.get('pairs_per_record', float('nan')):.1f}",
                     r["status"], *parts])
    notes = [f"cap {a.cap:g} s per outputs solve, {a.mono_cap:g} s per monolithic one (dual simplex, N <= "
             f"{a.mono_max}); stop at a {a.gap:g} certified gap; peak MB is the solving process's maximum RSS",
             f"pricing on {a.executor}" + ("" if a.executor == "threads" else
                                           " (peak MB: the solving process and its workers together)")]
    for kind in a.kinds:
        for mode in a.modes:
            sel = [r for r in raw if r["kind"] == kind and r["mode"] == mode and r["method"] == "outputs"]
            es, er = exponent(sel, "seconds", a.gap), exponent(sel, "rounds", a.gap)
            if es is not None:
                notes.append(f"{kind}, {mode}: seconds grow as N^{es:.2f}, rounds as N^{er:.2f} "
                             f"(sizes that reached the {a.gap:g} gap)")
    write_table("scale", "Decomposition over outputs by number of records (K = 100)",
                ["kind", "mode", "N", "method", "neighbours", "status", "rounds", "seconds", "master s",
                 "free master s", "pricing s", "certify s", "gap", "peak MB", "audit"], rows,
                notes=notes, raw=raw, args=a)
    plot(raw, a)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kinds", nargs="+", default=["grid", "gauss"], choices=["grid", "gauss", "road", "text", "city"])
    ap.add_argument("--modes", nargs="+", default=["density", "eta"], choices=["density", "eta"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 5000])
    ap.add_argument("--cap", type=float, default=1800.0)
    ap.add_argument("--gap", type=float, default=0.01)
    ap.add_argument("--mono-max", type=int, default=1000)
    ap.add_argument("--mono-cap", type=float, default=600.0)
    ap.add_argument("--executor", default="threads", choices=EXECUTORS,
                    help="where the outputs decomposition prices (a LocalCluster of 2 workers for dask)")
    a = output_args(ap).parse_args()
    raw: list[dict] = []
    for kind in a.kinds:
        for mode in a.modes:
            for n in a.sizes:
                for method in (["outputs"] + (["lp"] if n <= a.mono_max else [])):
                    print(f"{kind} {mode} N={n} {method} ...", flush=True)
                    r = run_one(kind, n, mode, method, a.cap if method == "outputs" else a.mono_cap, a.gap,
                                a.executor)
                    raw.append(r)
                    print({k: r.get(k) for k in ("status", "rounds", "seconds", "gap", "peak_mb")}, flush=True)
                    table(raw, a)
    if not raw:
        print("nothing to run")


if __name__ == "__main__":
    main()
