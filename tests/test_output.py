"""Output for people, from the command line: tables that survive a pipe, a chosen format,
logging levels, progress with quantities, plot paths, the demo's picture, a quiet Dask run."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from certdp import build_space, parse_dataset, solve
from certdp.cli import main
from certdp.cli.common import Live
from certdp.progress import ProgressEvent

COMPARE = ["compare", "--dataset", "gaussian:25:2", "--epsilon", "3", "--eta", "inf", "--methods",
           "expmech,constopt", "--seed", "1", "--quiet"]


def run(args, **kw):
    return CliRunner().invoke(main, args, **kw)


def test_a_piped_table_is_markdown_and_never_cut():
    r = run(COMPARE)
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(ln for ln in lines if ln.startswith("| method"))
    assert header.split("|")[1:-1] == [f" {c} " for c in ("method", "epsilon", "sec", "variables", "constraints",
                                                          "non-zeros", "eps_tight(d=0.001)", "L_0.95", "worst",
                                                          "expected", "audit")]
    assert len(header) > 80
    rows = [ln for ln in lines if ln.startswith("| expmech") or ln.startswith("| constopt")]
    assert len(rows) == 2 and all(ln.rstrip().endswith("PASSED |") for ln in rows)
    assert not any("…" in ln for ln in lines)


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_machine_format_is_one_document_on_stdout(fmt):
    r = run([*COMPARE, "--format", fmt])
    assert r.exit_code == 0, r.stderr
    if fmt == "csv":
        table = list(csv.DictReader(io.StringIO(r.stdout)))
    else:
        table = json.loads(r.stdout)
    assert [row["method"] for row in table] == ["expmech", "constopt"]
    assert all(row["audit"] == "PASSED" for row in table)
    assert "uniform random output" in r.stderr       # the note under the table moved to stderr


def test_the_table_format_draws_boxes_as_wide_as_the_content():
    r = run([*COMPARE, "--format", "table"])
    assert r.exit_code == 0
    assert "┃ method" in r.stdout and max(len(ln) for ln in r.stdout.splitlines()) > 80


def test_a_bad_format_is_one_line_and_exit_2():
    r = run([*COMPARE, "--format", "xml"])
    assert r.exit_code == 2 and r.stderr.startswith("Error: ") and "--format" in r.stderr and r.stdout == ""


def test_verbose_logs_the_steps_and_quiet_says_nothing():
    args = ["solve", "--dataset", "grid:4x4", "--epsilon", "1", "--eta", "1.5", "--seed", "1"]
    loud = run(["-v", *args])
    assert loud.exit_code == 0
    assert "INFO certdp.solve: solving grid:4x4@1 with lp" in loud.stderr
    assert "INFO certdp.solve: lp on grid:4x4@1: optimal" in loud.stderr
    silent = run(["-q", *args])
    assert silent.exit_code == 0 and silent.stderr == "" and "optimal" in silent.stdout
    plain = run(args)
    assert "INFO" not in plain.stderr


def test_highs_iterations_and_objective_reach_the_progress_callback():
    space = build_space(parse_dataset("grid:5x6"), epsilon=2.0, eta=2.0, cost="travel", seed=1)
    for solver in ("simplex", "ipm"):
        seen: list[ProgressEvent] = []
        res = solve(space, "lp", solver=solver, progress=seen.append)
        lp = [e for e in seen if e.stage == "lp"]
        assert lp, f"no HiGHS iteration line reached the callback with {solver}"
        assert all("iteration" in e.record and "objective" in e.record for e in lp)
        assert lp[-1].record["iteration"] <= res.iterations
        assert f"HiGHS {solver}: iteration" in lp[-1].message


def test_the_progress_line_counts_builds_and_estimates_the_time_left():
    live = Live("compare", quiet=True)
    with live:
        live(ProgressEvent("build", "expmech done", {"done": 1, "total": 4}))
        time.sleep(0.05)
        line = live.line()
    assert "(1/4 done, about" in line and "s left)" in line and line.endswith("expmech done")
    live(ProgressEvent("build", "all done", {"done": 4, "total": 4}))
    assert "(4/4 done)" in live.line()


def test_view_compare_reports_every_build(tmp_path):
    import numpy as np
    import pandas as pd

    from certdp.experiments.views import compare_views
    from certdp.views import CountTensor
    from certdp.views.tensor import Domain

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 8, 300), "b": rng.integers(0, 5, 300)})
    tensor = CountTensor.from_frame(df, ["a", "b"], {"a": Domain.categorical("a", range(8)),
                                                     "b": Domain.categorical("b", range(5))})
    seen: list[ProgressEvent] = []
    compare_views(tensor, ["ripost", "identity"], 1.0, queries=50, reps=2, rng=0, progress=seen.append)
    builds = [e.record for e in seen if e.stage == "build"]
    assert [(b["done"], b["total"]) for b in builds] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert all(b["rmse"] >= 0 for b in builds)


def test_plot_says_where_it_wrote(tmp_path):
    r = run(["solve", "--dataset", "grid:4x5", "--epsilon", "1", "--eta", "1.5", "--method", "outputs",
             "--seed", "1", "--quiet", "--plot", str(tmp_path / "plots")])
    assert r.exit_code == 0, r.stderr
    written = [ln.split("plot written to ", 1)[1] for ln in r.stderr.splitlines() if "plot written to" in ln]
    assert written and all((tmp_path / "plots").joinpath(p.rsplit("/", 1)[-1]).is_file() for p in written)


def test_the_demo_writes_a_picture_and_says_where(tmp_path):
    r = run(["demo", "--rows", "4", "--cols", "5", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.stderr
    assert f"picture written to {tmp_path / 'demo.png'}" in r.stdout
    png = (tmp_path / "demo.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_a_successful_dask_run_is_quiet(tmp_path):
    pytest.importorskip("dask.distributed")
    p = subprocess.run([sys.executable, "-m", "certdp.cli", "solve", "--dataset", "grid:5x6", "--epsilon", "1",
                        "--eta", "1.5", "--method", "outputs", "--executor", "dask", "--workers", "2", "--seed", "1",
                        "--quiet", "--format", "json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "ERROR" not in p.stderr and "Traceback" not in p.stderr and "CommClosedError" not in p.stderr, p.stderr
    assert "Port" not in p.stderr, p.stderr
    assert json.loads(p.stdout)
