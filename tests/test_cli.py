"""The command line: JSON keys, audit exit codes, perturb, and bad input."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from scaledp.cli import main

KEYS = {"method", "n_records", "n_outputs", "expected_loss", "lower_bound", "upper_bound", "gap", "seconds",
        "constraints_before", "constraints_after"}


def test_solve_json_audit_and_perturb(tmp_path):
    r = CliRunner()
    out = tmp_path / "m.npz"
    res = r.invoke(main, ["solve", "--dataset", "grid:4x5", "--outputs", "8", "--epsilon", "2", "--eta", "2",
                          "--cost", "travel", "--seed", "1", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    assert KEYS <= set(s)
    assert s["n_records"] == 20 and s["n_outputs"] == 8 and s["method"] == "lp"
    assert s["lower_bound"] <= s["upper_bound"] and s["constraints_after"] < s["constraints_before"]
    a = r.invoke(main, ["audit", str(out), "--json"])
    assert a.exit_code == 0 and json.loads(a.output)["verify"]["passed"]
    p = r.invoke(main, ["perturb", str(out), "--seed", "3"], input="record\n0\n4\n19\n")
    assert p.exit_code == 0, p.output
    lines = p.output.strip().splitlines()
    assert lines[0] == "record,output" and len(lines) == 4
    assert all(0 <= int(x.split(",")[1]) < 8 for x in lines[1:])


def test_expmech_method(tmp_path):
    res = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "2", "--eta", "1",
                                    "--method", "expmech", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["method"] == "expmech"


def test_audit_fails_with_exit_1_on_a_violating_file(tmp_path):
    p = tmp_path / "bad.npz"
    np.savez(p, matrix=np.array([[0.99, 0.01], [0.01, 0.99]]), epsilon=np.float64(1.0),
             edges=np.array([[0, 1]]), edge_distance=np.array([1.0]))
    res = CliRunner().invoke(main, ["audit", str(p)])
    assert res.exit_code == 1
    assert "FAILED" in res.output


def test_bad_input_is_a_usage_error_and_writes_nothing(tmp_path):
    out = tmp_path / "never.npz"
    for args in (["--dataset", "grid:4x5", "--epsilon", "-1", "--eta", "2"],
                 ["--dataset", "grid:4x5", "--epsilon", "1", "--eta", "0"],
                 ["--dataset", "moon:4", "--epsilon", "1", "--eta", "1"],
                 ["--dataset", "grid:4x5", "--epsilon", "1", "--eta", "1", "--outputs", "50"]):
        res = CliRunner().invoke(main, ["solve", *args, "--out", str(out)])
        assert res.exit_code == 2, res.output
        assert "Error" in res.output
        assert not out.exists()


def test_perturb_rejects_bad_records(tmp_path):
    r = CliRunner()
    out = tmp_path / "m.npz"
    assert r.invoke(main, ["solve", "--dataset", "grid:3x3", "--epsilon", "1", "--eta", "1.5", "--out", str(out)]).exit_code == 0
    res = r.invoke(main, ["perturb", str(out)], input="0\n99\n")
    assert res.exit_code == 2 and "records must be in" in res.output


def test_benders_from_the_cli_with_plots(tmp_path):
    res = CliRunner().invoke(main, ["solve", "--dataset", "grid:4x5", "--outputs", "6", "--epsilon", "2", "--eta", "1.5",
                                    "--method", "benders", "--partition", "metis", "--subsets", "3", "--gap", "1e-3",
                                    "--seed", "2", "--plot", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    assert s["method"] == "benders" and s["iterations"] >= 1 and s["gap"] <= 1e-3 + 1e-12
    for name in ("convergence.png", "partition.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_output_decomposition_from_the_cli(tmp_path):
    res = CliRunner().invoke(main, ["solve", "--dataset", "grid:4x5", "--outputs", "6", "--epsilon", "2", "--eta", "1.5",
                                    "--method", "outputs", "--gap", "1e-3", "--seed", "2", "--plot", str(tmp_path),
                                    "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    assert s["method"] == "outputs" and s["iterations"] >= 1 and s["gap"] <= 1e-3 + 1e-12 and s["audit_passed"]
    assert (tmp_path / "convergence.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "partition.png").exists()


def test_cli_compare_and_solve(tmp_path):
    r = CliRunner().invoke(main, ["compare", "--dataset", "gaussian:12:2", "--epsilon", "2", "--seed", "1",
                                  "--methods", "expmech,optmech,constopt,spanner,laplace", "--r", "3",
                                  "--draws", "200", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    rows = {row["method"]: row for row in data["rows"]}
    assert set(rows) == {"expmech", "optmech", "constopt", "spanner", "laplace"}
    assert rows["optmech"]["worst_case_loss"] <= min(rows[m]["worst_case_loss"] for m in rows) + 1e-9
    assert data["packing_lower_bound"] <= rows["optmech"]["worst_case_loss"]
    r = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "2", "--eta", "inf",
                                  "--method", "constopt", "--r", "3", "--lambdas", "0.1,1", "--seed", "1",
                                  "--out", str(tmp_path / "c.npz"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["audit_passed"] is True
    r = CliRunner().invoke(main, ["audit", str(tmp_path / "c.npz")])
    assert r.exit_code == 0
    r = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "2", "--eta", "inf",
                                  "--method", "madlib", "--out", str(tmp_path / "m.npz")])
    assert r.exit_code == 2 and "Monte Carlo" in r.output
    r = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "2", "--eta", "inf",
                                  "--method", "constopt", "--lambdas", "0.1,-2"])
    assert r.exit_code == 2 and "lambdas" in r.output
