"""How fast the ``certdp`` command stops when it is asked to (Ctrl-C, SIGTERM), phase by phase,
and whether every stop keeps its promises.

Each run of :data:`RUNS` is interrupted at send times drawn from a generator
(:func:`send_times`: uniform over the length of an uninterrupted run of it, measured first in
the same session). The signal goes to the run's whole process group, as a terminal's Ctrl-C
does. The command reports each stop (``CERTDP_INTERRUPT_REPORT``, :mod:`certdp.cli.interrupt`):
where its main thread was, and how long the stop took from the signal's arrival, as the kernel
stamped it, to the moment before the process exits. The harness adds what it saw itself (from
sending to the exit), checks the promises (:func:`broken_promises`: exit status 128 + the
signal, one line and no traceback, no partial file, no process left) and groups the
latencies by phase: the module of the innermost certdp function the main thread was in.

A signal that comes while the interpreter itself starts, before the command's first line runs
(0.3 s after the process starts on a 2-core machine at a load of 14; the command notes when
its stop handling is in place), ends the process as Python does by default: killed by the
signal (the shell reports 130 or 143), or for SIGINT Python's KeyboardInterrupt traceback
(with exit status 1 while Python imports its site packages); no file, no process. The harness
accepts that, and only that, from a run with nothing on record. Likewise at the other end: a
signal in the last moments of the exit of a command that has returned (on record), once
Python has put its default handlers back, ends the process by itself, with everything written.

    python -m benchmarks.cli.interrupt_latency [--samples 20] [--runs lp benders-process] [--seed 0]

``tests/test_interrupt.py`` runs a small derandomized sample of the same harness in the
default suite, and many in the slow one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[2]

LINE = ("interrupted by ", " during ", ": stopped in ")


@dataclass(frozen=True)
class Run:
    """A command line (``{dir}`` stands for the run's own folder) and the files it writes."""

    args: tuple[str, ...]
    writes: tuple[str, ...] = ()


_GRID = ("--epsilon", "1", "--eta", "1.5", "--cost", "travel", "--seed", "1", "--quiet")

RUNS: dict[str, Run] = {
    # dataset, graph, LP assembly, a monolithic HiGHS solve, certification, the file
    "lp": Run(("solve", "--dataset", "grid:10x10", "--outputs", "40", *_GRID, "--out", "{dir}/m.npz"), ("m.npz",)),
    # partition, worker start-up (fork server), Benders rounds on two processes
    "benders-process": Run(("solve", "--dataset", "grid:10x12", "--outputs", "10", "--method", "benders", "--subsets",
                            "4", "--executor", "process", "--workers", "2", "--gap", "1e-6", *_GRID,
                            "--out", "{dir}/m.npz"), ("m.npz",)),
    # the outputs decomposition's rounds, pricing on two processes
    "outputs-process": Run(("solve", "--dataset", "grid:12x12", "--outputs", "30", "--method", "outputs",
                            "--executor", "process", "--workers", "2", "--gap", "1e-6", *_GRID,
                            "--out", "{dir}/m.npz"), ("m.npz",)),
    # the same on a Dask LocalCluster
    "outputs-dask": Run(("solve", "--dataset", "grid:10x10", "--outputs", "20", "--method", "outputs",
                         "--executor", "dask", "--workers", "2", "--gap", "1e-6", *_GRID,
                         "--out", "{dir}/m.npz"), ("m.npz",)),
    # a RIPOST view of a table
    "view": Run(("view", "build", "{dir}/t.csv", "--columns", "a,b,c", "--domains", "{dir}/d.json", "--epsilon", "1",
                 "--seed", "1", "--quiet", "--out", "{dir}/v.json"), ("v.json",)),
    # an LR-Geo round
    "lrgeo": Run(("lrgeo", "--grid", "8x8", "--users", "6", "--seed", "1", "--quiet", "--out", "{dir}/r.json"),
                 ("r.json",)),
    # the LR-Geo service: its start-up, then waiting for users
    "serve": Run(("lrgeo", "serve", "--grid", "6x6", "--port", "0", "--quiet")),
    # two files written one after the other
    "demo": Run(("demo", "--rows", "6", "--cols", "6", "--out", "{dir}/demo"), ("demo/demo_lp.npz", "demo/demo_expmech.npz")),
}

SERVE_SECONDS = 8.0
"""The length given to a run of the service, which runs until it is stopped."""


def prepare(folder: Path) -> None:
    """The inputs of the runs that read files: a table of 20,000 rows and its domains."""
    rng = random.Random(0)
    lines = ["a,b,c"] + [f"{rng.randrange(40)},{rng.randrange(30)},{rng.randrange(20)}" for _ in range(20_000)]
    (folder / "t.csv").write_text("\n".join(lines) + "\n")
    (folder / "d.json").write_text(json.dumps({"a": {"low": 0, "high": 40, "bins": 40}, "b": {"low": 0, "high": 30,
                                               "bins": 30}, "c": {"low": 0, "high": 20, "bins": 20}}))


@dataclass
class Outcome:
    """One interrupted run, as the harness saw it."""

    run: str
    folder: Path
    signal: str
    at: float                      # seconds after the start the signal was sent (inf: never)
    status: int | None = None
    stderr: str = ""
    report: dict[str, Any] | None = None
    sent_at: float | None = None           # time.time() when the signal was sent
    seconds_to_exit: float | None = None   # from sending the signal to the exit, as the harness saw it
    left: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    finished_first: bool = False   # the run had ended before the send time


def _env(token: str, report: Path) -> dict[str, str]:
    env = dict(os.environ, CERTDP_INTERRUPT_REPORT=str(report), CERTDP_HARNESS_TOKEN=token)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def processes_with(token: str, wait: float = 30.0) -> list[str]:
    """Processes still alive that carry ``token`` in their environment (every process a run
    started inherits it), after waiting up to ``wait`` seconds for them to go."""
    import psutil

    deadline = time.monotonic() + wait
    while True:
        alive = []
        for p in psutil.process_iter(["pid", "name"]):
            try:
                if p.status() != psutil.STATUS_ZOMBIE and p.environ().get("CERTDP_HARNESS_TOKEN") == token:
                    alive.append(f"{p.pid} {' '.join(p.cmdline())[:100]}")
            except psutil.Error:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


@contextmanager
def _signals_not_ignored() -> Iterator[None]:
    """A command keeps ignoring the stop signals it starts with ignored (a background job of a
    non-interactive shell ignores SIGINT, ``nohup`` SIGHUP), and would inherit that from the
    harness run that way: while a run starts, give them a handler here, which its exec resets
    to the default."""
    stops = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
    saved = {s: signal.getsignal(s) for s in stops}
    for s in stops:
        if saved[s] == signal.SIG_IGN:
            signal.signal(s, lambda *_: None)
    try:
        yield
    finally:
        for s in stops:
            signal.signal(s, saved[s])


def interrupt(name: str, at: float, sig: int, folder: Path, to_group: bool = True) -> Outcome:
    """Start run ``name`` in ``folder`` (a fresh, empty folder but for :func:`prepare`'s inputs),
    send ``sig`` ``at`` seconds later (unless it has ended) to its process group, as a
    terminal's Ctrl-C does, or to the command alone (``to_group`` False), as ``kill PID`` does,
    and collect what happened."""
    run = RUNS[name]
    token = uuid.uuid4().hex
    report = folder.parent / f"{folder.name}.report.json"
    args = [a.replace("{dir}", str(folder)) for a in run.args]
    with _signals_not_ignored():
        proc = subprocess.Popen([sys.executable, "-m", "certdp.cli", *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True, env=_env(token, report), cwd=folder)
    out = Outcome(name, folder, signal.Signals(sig).name, at)
    try:
        proc.wait(timeout=None if math.isinf(at) else at)
        out.finished_first = True
    except subprocess.TimeoutExpired:
        sent = time.monotonic()
        out.sent_at = time.time()
        try:
            if to_group:
                os.killpg(proc.pid, sig)
            else:
                os.kill(proc.pid, sig)
        except ProcessLookupError:
            out.finished_first, out.sent_at = True, None
        proc.wait()
        out.seconds_to_exit = time.monotonic() - sent
    out.status = proc.returncode
    assert proc.stderr is not None
    out.stderr = proc.stderr.read().decode("utf-8", "replace")
    proc.stderr.close()
    if report.exists():
        out.report = json.loads(report.read_text())
        report.unlink()
    out.left = processes_with(token)
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.name not in ("t.csv", "d.json"):
            out.files.append(str(p.relative_to(folder)))
    return out


def broken_promises(o: Outcome) -> list[str]:
    """What the run did not do that the command promises (empty when all is kept)."""
    bad = []
    if o.left:
        bad.append(f"processes left: {o.left}")
    r = o.report
    if r is None:   # it never started: the signal came while the interpreter started, and ended it
        by_python = o.status == -getattr(signal, o.signal) or (o.status == 1 and o.stderr.endswith("KeyboardInterrupt\n"))
        if not by_python or o.sent_at is None:
            bad.append(f"exit status {o.status} and nothing on record")
        return bad + ([f"files: {o.files}"] if o.files else [])
    if "Traceback" in o.stderr:
        bad.append("a traceback on stderr")
    if any(Path(f).name.startswith(".tmp-") for f in o.files):
        bad.append(f"temporary files left: {o.files}")
    if "exit_status" not in r and "completed" not in r:
        return bad + [f"started, then exit status {o.status} with no stop and no return on record"]
    if "exit_status" not in r:          # no stop: the command returned
        # a signal in the last moments of the exit, once Python has put the default handlers
        # back, ends the process by itself: everything was written by then
        killed_exiting = o.sent_at is not None and o.status == -getattr(signal, o.signal)
        if o.status != 0 and not killed_exiting:
            bad.append(f"exit status {o.status} after the command returned")
        if set(o.files) != set(RUNS[o.run].writes):
            bad.append(f"returned with files {o.files}")
        if (o.sent_at is not None and not r.get("late") and not killed_exiting and r.get("completed") is not None
                and o.sent_at < r["completed"]):
            bad.append(f"the signal was lost: sent at {o.sent_at:.3f}, the command returned at {r['completed']:.3f}")
        return bad
    return bad + _stop_kept(o, r)


def _stop_kept(o: Outcome, r: dict[str, Any]) -> list[str]:
    """What a stop did not do of what it promises."""
    bad = []
    lines = [ln for ln in o.stderr.splitlines() if ln.startswith(LINE[0])]
    if o.status != 128 + getattr(signal, r["signal"]) or r["exit_status"] != o.status:
        bad.append(f"exit status {o.status} for {r['signal']}")
    if len(lines) != 1 or not all(part in lines[0] for part in LINE):
        bad.append(f"not one stop line: {lines}")
    elif ("nothing was written" in lines[0]) != (not r["written"]):
        bad.append(f"the line and the report disagree on what was written: {lines[0]}")
    written = {Path(w).resolve() for w in r["written"]}
    unreported = [f for f in o.files if (o.folder / f).resolve() not in written]
    if unreported:
        bad.append(f"files left that the stop does not report as written: {unreported}")
    if any(not w.exists() for w in written):
        bad.append(f"files reported as written that are not there: {sorted(map(str, written))}")
    if not (math.isfinite(r["latency"]) and r["latency"] >= 0):
        bad.append(f"latency {r['latency']}")
    if r["finished_by"] not in ("main", "watchdog"):
        bad.append(f"finished by {r['finished_by']}")
    return bad


def phase(o: Outcome) -> str:
    """Where the main thread was when the signal arrived: the module of the innermost certdp
    function on its stack, 'imports' while a certdp module is being imported, 'start-up'
    before any certdp function runs."""
    stack = (o.report or {}).get("stack") or []
    if not stack:
        return "start-up"
    return "imports" if stack[0].endswith(":<module>") else stack[0].split(":", 1)[0]


def send_times(length: float, rng: random.Random) -> Iterator[float]:
    """Send times drawn uniformly over a run of ``length`` seconds, without end."""
    while True:
        yield rng.uniform(0.0, length)


def run_length(name: str, folder: Path) -> float:
    """Seconds an uninterrupted run of ``name`` lasts (the service: :data:`SERVE_SECONDS`)."""
    if name == "serve":
        return SERVE_SECONDS
    t0 = time.monotonic()
    o = interrupt(name, math.inf, signal.SIGINT, folder)
    if o.status != 0:
        raise RuntimeError(f"run {name} failed: {o.stderr[-2000:]}")
    return time.monotonic() - t0


def main() -> None:
    from benchmarks._common import output_args

    ap = output_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--runs", nargs="*", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--samples", type=int, default=20, help="interruptions per run")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    outcomes: list[Outcome] = []
    lengths: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.runs:
            base = Path(tmp) / f"{name}-length"
            base.mkdir()
            prepare(base)
            lengths[name] = run_length(name, base)
            times = send_times(lengths[name], rng)
            for k in range(args.samples):
                folder = Path(tmp) / f"{name}-{k}"
                folder.mkdir()
                prepare(folder)
                sig = rng.choice((signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
                o = interrupt(name, next(times), sig, folder, to_group=rng.random() < 0.5)
                outcomes.append(o)
                print(f"{name} at {o.at:6.2f} s {o.signal}: status {o.status}, {phase(o)}, "
                      f"latency {(o.report or {}).get('latency', float('nan')):.3f} s, "
                      f"exit after {o.seconds_to_exit or float('nan'):.3f} s, broken: {broken_promises(o)}", flush=True)
    _table(outcomes, lengths, args)


def _table(outcomes: list[Outcome], lengths: dict[str, float], args: argparse.Namespace) -> None:
    from benchmarks._common import write_table

    # the runs the command stopped, each with its report
    stopped = [(o, o.report) for o in outcomes if o.report is not None and "latency" in o.report]
    by: dict[str, list[tuple[Outcome, dict[str, Any]]]] = {}
    for o, rep in stopped:
        by.setdefault(phase(o), []).append((o, rep))
    rows = []
    for ph, os_ in sorted(by.items(), key=lambda kv: -max(rep["latency"] for _, rep in kv[1])):
        lat = [rep["latency"] for _, rep in os_]
        seen = [o.seconds_to_exit for o, _ in os_ if o.seconds_to_exit is not None]
        rows.append([ph, len(os_), ", ".join(sorted({o.run for o, _ in os_})), 1000 * statistics.median(lat),
                     1000 * max(lat), 1000 * max(seen) if seen else None,
                     sum(rep["finished_by"] == "watchdog" for _, rep in os_)])
    from certdp.cli.interrupt import GRACE

    broken = [(o.run, o.at, o.signal, broken_promises(o)) for o in outcomes if broken_promises(o)]
    worst = max((rep["latency"] for _, rep in stopped), default=float("nan"))
    worst_seen = max((o.seconds_to_exit for o, _ in stopped if o.seconds_to_exit is not None), default=float("nan"))
    per_run = {name: max((rep["latency"] for o, rep in stopped if o.run == name), default=float("nan"))
               for name in lengths}
    early = sum(o.report is None for o in outcomes)
    notes = [f"{len(outcomes)} runs interrupted at random times by SIGINT, SIGTERM or SIGHUP, sent to the process "
             f"group or to the command alone: {len(stopped)} stopped, {early} ended by the signal while the "
             f"interpreter started, {len(outcomes) - len(stopped) - early} had returned or were returning. "
             f"Worst latency {1000 * worst:.0f} ms; worst from sending to the exit {1000 * worst_seen:.0f} ms.",
             "worst latency per run (ms): " + ", ".join(f"{k} {1000 * v:.0f}" for k, v in per_run.items()),
             "latency: from the signal's arrival (stamped by the kernel) to the moment before exit, as the command "
             "reports it; send to exit: the same seen from outside, with the delivery and the process's teardown.",
             "by the watchdog: stops finished by the watchdog because the main thread was inside a native call "
             f"({GRACE:g} s after the signal); imports: while a certdp module was being imported.",
             "lengths of uninterrupted runs (s): " + ", ".join(f"{k} {v:.1f}" for k, v in lengths.items()),
             f"promises broken: {broken or 'none'}"]
    write_table("interrupt_latency", "Stop latency of the certdp command by phase",
                ["phase (innermost certdp module)", "stops", "runs", "median latency (ms)", "worst latency (ms)",
                 "worst send to exit (ms)", "by the watchdog"], rows, notes,
                raw=[o.__dict__ for o in outcomes], args=args)


if __name__ == "__main__":
    main()
