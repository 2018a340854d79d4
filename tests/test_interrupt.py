"""Ctrl-C during a run with worker processes: exit 130, a one-line message, no partial file,
no worker left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

RUNS = {
    # both runs last about 30 s, so Ctrl-C at the first progress line (5 s) lands mid-run: a
    # run that is already exiting when it arrives dies of the signal itself (exit -2)
    "benders": ["--dataset", "grid:15x20", "--outputs", "10", "--method", "benders", "--subsets", "5",
                "--gap", "1e-12"],
    "outputs-process": ["--dataset", "grid:20x25", "--outputs", "50", "--method", "outputs", "--executor",
                        "process", "--gap", "1e-9"],
}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_ctrl_c_during_a_run_with_two_worker_processes(tmp_path, run):
    out = tmp_path / "m.npz"
    args = [sys.executable, "-m", "certdp.cli", "solve", *RUNS[run], "--epsilon", "1", "--eta", "1.5",
            "--cost", "travel", "--workers", "2", "--out", str(out)]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    first = p.stderr.readline()               # the first progress line (after 5 s): the workers run
    assert b"round" in first, first
    os.killpg(p.pid, signal.SIGINT)          # what a terminal's Ctrl-C does: the whole process group
    _, err = p.communicate(timeout=60)
    deadline = time.time() + 10
    left = ["?"]
    while time.time() < deadline:
        left = subprocess.run(["pgrep", "-g", str(p.pid)], capture_output=True, text=True).stdout.split()
        if not left:
            break
        time.sleep(0.5)
    text = err.decode()
    assert p.returncode == 130, text
    assert "interrupted" in text and "Traceback" not in text, text
    assert not out.exists() and not list(tmp_path.iterdir())
    assert left == [], subprocess.run(["ps", "-o", "pid,stat,args", "-g", str(p.pid)], capture_output=True,
                                      text=True).stdout
