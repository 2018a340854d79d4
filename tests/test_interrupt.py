"""Stopping the command (Ctrl-C, SIGTERM, SIGHUP): runs of every kind, interrupted at generated
times, keep the stop's promises (exit status 128 + the signal, one line and no traceback, no
partial file, no process left), and the command reports where it was and how long it took.

The runs and the checks are the harness of ``benchmarks/cli/interrupt_latency.py``, which
measures the latencies by phase. Nothing here depends on timing: a signal may land in any
phase, or after the run has ended, and every outcome has its promises checked; the latency is
checked to be reported, not bounded (the benchmark reports its worst case)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from benchmarks.cli.interrupt_latency import RUNS, broken_promises, interrupt, phase, prepare

ROOT = Path(__file__).resolve().parents[1]

NOMINAL = {"lp": 8.0, "benders-process": 10.0, "outputs-process": 6.0, "view": 5.0, "lrgeo": 4.0, "serve": 5.0,
           "demo": 3.0, "outputs-dask": 8.0}
"""Seconds of each run within which the send times are drawn (about a run's length on an idle
two-core machine; on a slower one the signals land earlier in the run, which is as good)."""

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]

_common = dict(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                       HealthCheck.data_too_large])


def _check(folder: Path, run: str, fraction: float, sig: int, to_group: bool) -> None:
    prepare(folder)
    o = interrupt(run, fraction * NOMINAL[run], sig, folder, to_group=to_group)
    event(f"{run}: " + ("stopped in " + phase(o) if o.report and "exit_status" in o.report
                        else "returned first" if o.report else "ended while the interpreter started"))
    assert broken_promises(o) == [], (o.stderr, o.report)
    if o.report is not None and "exit_status" in o.report:      # stopped (not returned first)
        assert o.report["signal"] == signal.Signals(sig).name
        assert o.report["arrival_source"] in ("kernel", "handler", "watchdog")
        assert all(":" in f for f in o.report["stack"]) and phase(o)


FRACTIONS = st.integers(0, 40).map(lambda k: k / 40)
"""Where in a run the signal is sent (hypothesis draws integers more evenly than floats)."""


@settings(derandomize=True, max_examples=12, **_common)
@given(run=st.sampled_from(sorted(set(NOMINAL) - {"outputs-dask"})), fraction=FRACTIONS,
       sig=st.sampled_from(SIGNALS), to_group=st.booleans())
def test_a_stop_at_any_time_keeps_its_promises(tmp_path_factory, run, fraction, sig, to_group):
    """A small derandomized sample: any run, any signal, sent to the process group (a
    terminal's Ctrl-C) or to the command alone (``kill PID``), at a time drawn within the run."""
    _check(tmp_path_factory.mktemp(run), run, fraction, sig, to_group)


@pytest.mark.slow
@settings(max_examples=80, **_common)
@given(run=st.sampled_from(sorted(NOMINAL)), fraction=st.floats(0, 1.2), sig=st.sampled_from(SIGNALS),
       to_group=st.booleans())
def test_many_stops_at_random_times_keep_their_promises(tmp_path_factory, run, fraction, sig, to_group):
    _check(tmp_path_factory.mktemp(run), run, fraction, sig, to_group)


def test_the_harness_runs_are_the_benchmarks_runs():
    assert set(NOMINAL) == set(RUNS)


def test_the_command_starts_without_the_heavy_imports():
    """``import certdp.cli`` loads neither numpy nor the engines, so that the command's signal
    handling is in place before they are imported (a Ctrl-C during them is then answered like
    anywhere else)."""
    code = "import sys, certdp.cli; print(sorted(m for m in ('numpy', 'scipy', 'highspy', 'certdp.solve') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), check=True)
    assert r.stdout.strip() == "[]", r.stdout


def test_a_large_highs_solve_in_the_main_thread_stops_at_ctrl_c_and_stays_usable(monkeypatch, request):
    """Library use: Ctrl-C during a large HiGHS solve in the main thread (sent here from HiGHS's
    own tenth poll, so that it surely lands inside the solve) raises KeyboardInterrupt as soon
    as HiGHS returns from its next iteration, not at the end of the solve, and the model can
    be solved again (an exception inside HiGHS's callback would have left it broken)."""
    import highspy

    from certdp.lp import highs

    polls = []

    def poll_and_interrupt_once(*args):
        polls.append(1)
        if len(polls) == 10:
            os.kill(os.getpid(), signal.SIGINT)
        highs._poll.__wrapped__(*args)

    poll_and_interrupt_once.__wrapped__ = highs._poll
    monkeypatch.setattr(highs, "_poll", poll_and_interrupt_once)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)   # Python's own, even under nohup
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    rng = np.random.default_rng(0)
    m, n = 600, 2000
    A = sp.random(m, n, density=0.05, random_state=1, format="csr")
    assert A.nnz >= highs.INTERRUPTIBLE_NONZEROS
    c = -rng.random(n)

    def model():
        return highs.HighsLP(c, A, np.full(m, -np.inf), np.ones(m), np.zeros(n), np.full(n, 10.0), presolve=False)

    lp = model()
    with pytest.raises(KeyboardInterrupt):
        lp.solve()
    assert lp.h.getModelStatus() == highspy.HighsModelStatus.kInterrupt
    polled, stopped_at = len(polls), int(lp.h.getInfo().simplex_iteration_count)
    again, fresh = lp.solve(), model().solve()
    assert 10 <= polled <= 12 and stopped_at < 20 < fresh.iterations
    assert again.status == fresh.status == "optimal"
    assert again.objective == pytest.approx(fresh.objective, rel=1e-9)


def test_a_write_under_way_is_removed_when_the_process_stops(tmp_path):
    """What the stop calls from any thread: the temporary file of a write under way goes, the
    files already written are named, and no write completes afterwards."""
    import certdp._io as io

    done = tmp_path / "done.json"
    io.write_json(done, {"a": 1})
    with pytest.raises(io.OutputError, match="half.npz"):
        with io.atomic_target(tmp_path / "half.npz", ".npz") as tmp:
            Path(tmp).write_bytes(b"partial")
            try:
                written = io.abandon_writes(wait=0.1)
            finally:
                io._registry.release()          # (a stopping process never gives it back)
            assert not Path(tmp).exists()
            assert done in written and tmp_path / "half.npz" not in written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.json"]


def test_a_command_run_in_process_leaves_the_signal_handling_as_it_found_it():
    """Click's test runner (or any program embedding the group) gets its handlers, wakeup fd
    and unpolled-solve setting back after the command."""
    from click.testing import CliRunner

    from certdp import _interrupt
    from certdp.cli import main

    before = {s: signal.getsignal(s) for s in SIGNALS}
    r = CliRunner().invoke(main, ["solve", "--dataset", "grid:3x3", "--epsilon", "1", "--eta", "1.5", "--quiet"])
    assert r.exit_code == 0, r.output
    assert {s: signal.getsignal(s) for s in SIGNALS} == before
    assert not _interrupt.stops_enforced()
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd)
    assert fd == -1


_BENCHMARK = """
import multiprocessing as mp, os, sys, time
sys.path.insert(0, {root!r})
from benchmarks._common import end_with_parent

def solve(path, guarded):
    if guarded:
        end_with_parent()
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(60)

if __name__ == "__main__":
    mp.get_context("spawn").Process(target=solve, args=(sys.argv[1], sys.argv[2] == "1")).start()
    time.sleep(60)
"""


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an orphan's end may wait to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
@pytest.mark.parametrize("guarded", [True, False])
def test_a_killed_benchmark_leaves_no_solve_running(tmp_path, guarded):
    """A benchmark's solve runs in a child process (``benchmarks/_common.end_with_parent``): when
    the benchmark is killed (SIGKILL: no handler of its own runs), the child ends within seconds;
    the same child without the guard outlives it, which is what the guard is for."""
    import time

    script, pid_file = tmp_path / "bench.py", tmp_path / "child.pid"
    script.write_text(_BENCHMARK.format(root=str(ROOT)))
    parent = subprocess.Popen([sys.executable, str(script), str(pid_file), "1" if guarded else "0"])
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        child = int(pid_file.read_text())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5     # the guard looks once a second
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _running(child) is not guarded
    finally:
        parent.kill()
        if pid_file.exists() and pid_file.read_text() and _running(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
