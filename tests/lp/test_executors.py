"""Executors: a worker lost mid-run is replaced and replayed (the run is unchanged, to the bit),
or reported when it cannot be (WorkerLost; exit status 5 of the command)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from certdp import build_space
from certdp.datasets import grid
from certdp.lp import executors
from certdp.lp.executors import BlockGroup, ProcessRunner, WorkerLost
from certdp.pmo.benders import solve_benders

ROOT = Path(__file__).resolve().parents[2]


class DyingGroup(BlockGroup):
    """A BlockGroup that kills its own process (SIGKILL, as the out-of-memory killer does) at its
    ``die_at``-th call, while ``marker`` (a file counting the deaths so far) holds fewer than
    ``times``; only the group that holds block 0 dies. Without arguments, they come from the
    environment (CERTDP_TEST_DIE=marker:die_at:times), for a run of the command."""

    def __init__(self, items, tolerance, marker=None, die_at=None, times=None):
        super().__init__(items, tolerance)
        if marker is None:
            marker, die_at, times = os.environ["CERTDP_TEST_DIE"].rsplit(":", 2)
        self.marker, self.die_at, self.times = Path(marker), int(die_at), int(times)
        self.calls = 0

    def solve(self, payload, time_limit=None):
        self.calls += 1
        deaths = len(self.marker.read_text()) if self.marker.exists() else 0
        if 0 in self.solvers and self.calls == self.die_at and deaths < self.times:
            self.marker.write_text("x" * (deaths + 1))
            os.kill(os.getpid(), signal.SIGKILL)
        return super().solve(payload, time_limit)


class DyingRunner(ProcessRunner):
    """A ProcessRunner whose groups are :class:`DyingGroup` s."""

    def __init__(self, blocks, marker, die_at, times):
        self.die = (str(marker), die_at, times)
        super().__init__(blocks, workers=2)

    def _items(self, g):
        return (*super()._items(g), *self.die)


@pytest.fixture(scope="module")
def small():
    return build_space(grid(4, 6, 1.0), epsilon=2.0, eta=1.5, n_outputs=8, cost="travel", seed=3)


def _run(space, **kw):
    return solve_benders(space, partition="metis", subsets=4, gap=1e-4, seed=0, **kw)


def test_a_killed_worker_process_is_replaced_and_the_run_is_unchanged(small, tmp_path, monkeypatch):
    """Killed at its third call: its blocks are rebuilt in a new process and replayed through the
    two rounds they had answered, and the run ends exactly as an undisturbed one."""
    monkeypatch.setattr(executors, "BlockGroup", DyingGroup)
    runners = []

    def factory(blocks):
        runners.append(DyingRunner(blocks, tmp_path / "deaths", die_at=3, times=1))
        return runners[-1]

    serial = _run(small)
    hit = _run(small, runner_factory=factory)
    assert (tmp_path / "deaths").read_text() == "x" and runners[0].replays == 1
    assert hit.mechanism.verification.passed
    assert (hit.iterations, hit.upper_bound, hit.lower_bound) == (serial.iterations, serial.upper_bound,
                                                                  serial.lower_bound)
    assert np.array_equal(hit.mechanism.matrix, serial.mechanism.matrix)


def test_a_worker_process_that_dies_again_is_reported_with_its_signal(small, tmp_path, monkeypatch):
    """The replacement dies at the same call: a second loss in one round is reported, naming the
    blocks and the signal, and no worker process is left."""
    monkeypatch.setattr(executors, "BlockGroup", DyingGroup)
    runners = []

    def factory(blocks):
        runners.append(DyingRunner(blocks, tmp_path / "deaths", die_at=2, times=5))
        return runners[-1]

    with pytest.raises(WorkerLost, match=r"Benders blocks \[.*\].*killed by SIGKILL"):
        _run(small, runner_factory=factory)
    assert (tmp_path / "deaths").read_text() == "xx"
    assert runners[0].work.held == [] or not any(w.proc.is_alive() for w in runners[0].work.held)


def test_the_command_reports_a_lost_worker_with_exit_status_4(tmp_path):
    """``certdp solve --method benders --executor process`` whose worker dies twice: one line,
    exit status 5, nothing written, no traceback."""
    out = tmp_path / "m.npz"
    script = ("import certdp.lp.executors as ex\n"
              "from tests.lp.test_executors import DyingGroup\n"
              "ex.BlockGroup = DyingGroup\n"
              "from certdp.cli import main\n"
              "main()\n")
    env = dict(os.environ, CERTDP_TEST_DIE=f"{tmp_path / 'deaths'}:2:5",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    r = subprocess.run([sys.executable, "-c", script, "solve", "--dataset", "grid:4x6", "--outputs", "8",
                        "--epsilon", "2", "--eta", "1.5", "--method", "benders", "--subsets", "4", "--partition",
                        "metis", "--executor", "process", "--workers", "2", "--quiet", "--out", str(out)],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 5, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: the worker process holding Benders blocks"), r.stderr
    assert "killed by SIGKILL" in lines[0]
    assert not out.exists() and not list(tmp_path.glob(".tmp-*"))


def test_a_lost_dask_worker_is_replaced_and_the_run_is_unchanged(small):
    """A LocalCluster worker killed (SIGKILL) after round 2: its actor's blocks are rebuilt on a
    live worker and replayed, and the run ends exactly as an undisturbed one."""
    pytest.importorskip("dask.distributed")
    seen = {}

    def factory(blocks):
        seen["runner"] = executors.DaskRunner(blocks, workers=2)
        return seen["runner"]

    def progress(ev):
        if ev.record.get("iteration") == 2 and "killed" not in seen:
            runner = seen["runner"]
            worker = sorted(runner.client.scheduler_info()["workers"])[0]
            pid = runner.client.run(os.getpid, workers=[worker])[worker]
            os.kill(pid, signal.SIGKILL)
            seen["killed"] = pid

    serial = _run(small)
    hit = _run(small, runner_factory=factory, progress=progress)
    assert "killed" in seen and seen["runner"].replays >= 1
    assert hit.mechanism.verification.passed
    assert (hit.iterations, hit.upper_bound, hit.lower_bound) == (serial.iterations, serial.upper_bound,
                                                                  serial.lower_bound)
    assert np.array_equal(hit.mechanism.matrix, serial.mechanism.matrix)
