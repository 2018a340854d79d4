"""The command line: JSON keys, audit exit codes, perturb, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from certdp.cli import main

KEYS = {"method", "n_records", "n_outputs", "expected_loss", "lower_bound", "upper_bound", "gap", "seconds",
        "constraints_before", "constraints_after"}


def test_solve_json_audit_and_perturb(tmp_path):
    r = CliRunner()
    out = tmp_path / "m.npz"
    res = r.invoke(main, ["solve", "--dataset", "grid:4x5", "--outputs", "8", "--epsilon", "2", "--eta", "2",
                          "--cost", "travel", "--seed", "1", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert KEYS <= set(s)
    assert s["n_records"] == 20 and s["n_outputs"] == 8 and s["method"] == "lp"
    assert s["lower_bound"] <= s["upper_bound"] and s["constraints_after"] < s["constraints_before"]
    a = r.invoke(main, ["audit", str(out), "--json"])
    assert a.exit_code == 0 and json.loads(a.stdout)["verify"]["passed"]
    p = r.invoke(main, ["perturb", str(out), "--seed", "3"], input="record\n0\n4\n19\n")
    assert p.exit_code == 0, p.output
    lines = p.output.strip().splitlines()
    assert lines[0] == "record,output" and len(lines) == 4
    assert all(0 <= int(x.split(",")[1]) < 8 for x in lines[1:])


def test_expmech_method(tmp_path):
    res = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "2", "--eta", "1",
                                    "--method", "expmech", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["method"] == "expmech"


def test_audit_exit_codes_failed_unverifiable_unreadable(tmp_path):
    p = tmp_path / "bad.npz"
    np.savez(p, format=np.array("certdp-mechanism/2"), matrix=np.array([[0.99, 0.01], [0.01, 0.99]]),
             epsilon=np.float64(1.0), eta=np.float64(2.0), metric=np.array("euclidean"), points=np.array([[0.0], [1.0]]))
    res = CliRunner().invoke(main, ["audit", str(p)])
    assert res.exit_code == 1 and "FAILED" in res.output
    old = tmp_path / "old.npz"
    np.savez(old, matrix=np.array([[0.6, 0.4], [0.4, 0.6]]), epsilon=np.float64(1.0),
             edges=np.array([[0, 1]]), edge_distance=np.array([1.0]))
    res = CliRunner().invoke(main, ["audit", str(old)])
    assert res.exit_code == 3 and "cannot be checked" in res.output
    res = CliRunner().invoke(main, ["perturb", str(old)], input="0\n")
    assert res.exit_code == 2 and "cannot be checked" in res.output
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    res = CliRunner().invoke(main, ["audit", str(empty)])
    assert res.exit_code == 2 and "empty" in res.output and "Traceback" not in res.output


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
    s = json.loads(res.stdout)
    assert s["method"] == "benders" and s["iterations"] >= 1 and s["gap"] <= 1e-3 + 1e-12
    for name in ("convergence.png", "partition.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_output_decomposition_from_the_cli(tmp_path):
    res = CliRunner().invoke(main, ["solve", "--dataset", "grid:4x5", "--outputs", "6", "--epsilon", "2", "--eta", "1.5",
                                    "--method", "outputs", "--gap", "1e-3", "--seed", "2", "--plot", str(tmp_path),
                                    "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["method"] == "outputs" and s["iterations"] >= 1 and s["gap"] <= 1e-3 + 1e-12 and s["audit_passed"]
    assert (tmp_path / "convergence.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "partition.png").exists()


def test_cli_compare_and_solve(tmp_path):
    r = CliRunner().invoke(main, ["compare", "--dataset", "gaussian:12:2", "--epsilon", "2", "--eta", "inf", "--seed", "1",
                                  "--methods", "expmech,optmech,constopt,spanner,laplace", "--r", "3",
                                  "--draws", "200", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    rows = {row["method"]: row for row in data["rows"]}
    assert set(rows) == {"expmech", "optmech", "constopt", "spanner", "laplace"}
    assert rows["optmech"]["worst_case_loss"] <= min(rows[m]["worst_case_loss"] for m in rows) + 1e-9
    assert data["packing_lower_bound"] <= rows["optmech"]["worst_case_loss"]
    r = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "2", "--eta", "inf",
                                  "--method", "constopt", "--r", "3", "--lambdas", "0.1,1", "--seed", "1",
                                  "--out", str(tmp_path / "c.npz"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["audit_passed"] is True
    r = CliRunner().invoke(main, ["audit", str(tmp_path / "c.npz")])
    assert r.exit_code == 0
    r = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "2", "--eta", "inf",
                                  "--method", "madlib", "--out", str(tmp_path / "m.npz")])
    assert r.exit_code == 2 and "Monte Carlo" in r.output
    r = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "2", "--eta", "inf",
                                  "--method", "constopt", "--lambdas", "0.1,-2"])
    assert r.exit_code == 2 and "lambdas" in r.output


# ------------------------------------------------------------------ views (paper 004)
def test_cli_build_query_compare(tmp_path, write_table):
    table = tmp_path / "t.csv"
    df, doms = write_table(table)
    (tmp_path / "d.json").write_text(json.dumps(doms))
    r = CliRunner()
    res = r.invoke(main, ["view", "build", str(table), "--columns", "age,sex,city", "--domains", str(tmp_path / "d.json"),
                          "--epsilon", "1", "--out", str(tmp_path / "v.json"), "--json", "--seed", "3"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info["spent"] <= 1.0 and info["blocks"] >= 1
    res = r.invoke(main, ["view", "query", str(tmp_path / "v.json"), "age=20..40 sex=F", "city=A,C", "--json"])
    assert res.exit_code == 0, res.output
    answers = json.loads(res.stdout)
    assert [a["query"] for a in answers] == ["age=20..40 sex=F", "city=A,C"]
    res = r.invoke(main, ["view", "compare", str(table), "--columns", "age,sex", "--domains", str(tmp_path / "d.json"),
                          "--epsilon", "1", "--reps", "2", "--queries", "100", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert {row["method"] for row in rows} == {"ripost", "hdpview", "privtree", "identity"}


@pytest.mark.parametrize("args,match", [
    (["--columns", "age,height"], "height"),
    (["--columns", "age,sex", "--epsilon", "0"], "epsilon"),
    (["--columns", "age,sex", "--alpha", "1.2"], "alpha"),
    (["--columns", "age,sex", "--k", "3", "--os", "1"], "os"),
])
def test_cli_bad_input_writes_nothing(tmp_path, write_table, args, match):
    table = tmp_path / "t.csv"
    _, doms = write_table(table)
    (tmp_path / "d.json").write_text(json.dumps(doms))
    out = tmp_path / "v.json"
    res = CliRunner().invoke(main, ["view", "build", str(table), "--domains", str(tmp_path / "d.json"), "--out", str(out),
                                    *args])
    assert res.exit_code == 2 and match in res.output
    assert not out.exists()


def test_cli_refuses_undeclared_domain_and_out_of_domain_values(tmp_path, write_table):
    table = tmp_path / "t.csv"
    write_table(table)
    (tmp_path / "d.json").write_text(json.dumps({"age": {"low": 0, "high": 50, "bins": 10}, "sex": {"values": ["F", "M"]}}))
    r = CliRunner()
    res = r.invoke(main, ["view", "build", str(table), "--columns", "age,sex,city", "--domains", str(tmp_path / "d.json"),
                          "--out", str(tmp_path / "v.json")])
    assert res.exit_code == 2 and "city" in res.output
    res = r.invoke(main, ["view", "build", str(table), "--columns", "age,sex", "--domains", str(tmp_path / "d.json"),
                          "--out", str(tmp_path / "v.json")])
    assert res.exit_code == 2 and "outside the declared domain" in res.output
    res = r.invoke(main, ["view", "build", str(table), "--columns", "age,sex", "--domains", str(tmp_path / "d.json"),
                          "--overflow", "bin", "--out", str(tmp_path / "v.json"), "--seed", "1"])
    assert res.exit_code == 0, res.output
    res = r.invoke(main, ["view", "query", str(tmp_path / "v.json"), "weight=3"])
    assert res.exit_code == 2 and "unknown column" in res.output


@pytest.mark.parametrize("extra,flag", [(["--method", "expmech", "--subsets", "5"], "--subsets"),
                                        (["--method", "lp", "--partition", "metis"], "--partition"),
                                        (["--method", "expmech", "--scheduler", "tcp://127.0.0.1:9"], "--scheduler"),
                                        (["--method", "constopt", "--gap", "0.1"], "--gap"),
                                        (["--method", "lp", "--plot", "plots"], "--plot")])
def test_an_option_the_method_does_not_take_is_an_error(tmp_path, extra, flag):
    out = tmp_path / "m.npz"
    res = CliRunner().invoke(main, ["solve", "--dataset", "grid:3x4", "--epsilon", "1", "--eta", "1.5", *extra,
                                    "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert flag in res.output and "Traceback" not in res.output
    assert not out.exists()


def test_compare_refuses_an_option_no_listed_method_takes():
    res = CliRunner().invoke(main, ["compare", "--dataset", "gaussian:8:2", "--epsilon", "1", "--eta", "inf",
                                    "--methods", "expmech,optmech", "--r", "3"])
    assert res.exit_code == 2 and "--r" in res.output


@pytest.mark.parametrize("args", [["--cell", "1000", "--eta", "2000", "--epsilon", "1"],   # metres given as km
                                  ["--cell", "1", "--eta", "2", "--epsilon", "1000"]])
def test_huge_epsilon_times_distance_gives_a_truly_private_matrix_and_a_warning(tmp_path, args):
    """exp(eps d) overflows: the solver's deterministic matrix must not pass as private."""
    from .independent_audit import independent_audit

    out = tmp_path / "m.npz"
    res = CliRunner().invoke(main, ["solve", "--dataset", "grid:4x5", "--outputs", "5", *args, "--seed", "1",
                                    "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["audit_passed"] and "no protection in practice" in s["message"]
    passed, bad = independent_audit(out)
    assert passed, f"{bad} violated inequalities"
    with np.load(out) as f:
        assert f["matrix"].min() > 0          # no positive entry faces a zero one
    assert CliRunner().invoke(main, ["audit", str(out)]).exit_code == 0


def test_the_independent_audit_catches_what_the_old_float_check_missed(tmp_path):
    """A deterministic matrix at eps d = 2000: inf * 0 = nan once let it pass."""
    from .independent_audit import independent_audit

    p = tmp_path / "d.npz"
    np.savez(p, format=np.array("certdp-mechanism/2"), matrix=np.eye(2), epsilon=np.float64(1.0),
             eta=np.float64(2000.0), metric=np.array("euclidean"), points=np.array([[0.0], [2000.0]]))
    assert independent_audit(p) == (False, 2)
    res = CliRunner().invoke(main, ["audit", str(p), "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["verify"]["violations"] == 2


@pytest.mark.parametrize("method", ["lp", "outputs"])
def test_the_seed_is_drawn_recorded_and_the_written_path_reported(tmp_path, method):
    out = tmp_path / "noext"
    res = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "1", "--eta", "1",
                                    "--method", method, "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["out"] == str(tmp_path / "noext.npz") and (tmp_path / "noext.npz").exists() and not out.exists()
    with np.load(s["out"]) as f:
        assert json.loads(str(f["metadata"]))["seed"] == s["seed"]
    again = CliRunner().invoke(main, ["solve", "--dataset", "gaussian:12:2", "--epsilon", "1", "--eta", "1",
                                      "--method", method, "--seed", str(s["seed"]), "--json"])
    assert json.loads(again.stdout)["expected_loss"] == pytest.approx(s["expected_loss"], rel=1e-9)   # the same instance


@pytest.mark.parametrize("method", ["hdmm", "dawa", "identity", "mst", "aim", "privbayes"])
def test_cli_every_view_method_builds_saves_and_answers(tmp_path, write_table, method):
    """Each method through `view build` and `view query`: at a large epsilon the saved view's
    answer is close to the true count."""
    need = {"mst": "mbi", "aim": "mbi", "privbayes": "DataSynthesizer"}.get(method)
    if need:
        pytest.importorskip(need)
    from certdp.views.tensor import CountTensor, Domain
    from certdp.views.view import Workload, true_answers

    table = tmp_path / "t.csv"
    df, doms = write_table(table, n=2000)
    (tmp_path / "d.json").write_text(json.dumps(doms))
    r = CliRunner()
    res = r.invoke(main, ["view", "build", str(table), "--columns", "age,sex,city", "--domains", str(tmp_path / "d.json"),
                          "--epsilon", "50", "--method", method, "--out", str(tmp_path / "v.json"), "--json",
                          "--seed", "3"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["spent"] <= 50.0
    q = "age=20..40 sex=F"
    res = r.invoke(main, ["view", "query", str(tmp_path / "v.json"), q, "--json"])
    assert res.exit_code == 0, res.output
    doms_ = {"age": Domain.numeric("age", 0, 100, 20), "sex": Domain.categorical("sex", ["F", "M"]),
             "city": Domain.categorical("city", ["A", "B", "C"])}
    t = CountTensor.from_frame(df, ["age", "sex", "city"], doms_)
    truth = true_answers(t, Workload.parse(t.domains, [q]))[0]
    tol = 0.25 * truth if method == "privbayes" else 0.05 * truth + 5     # PrivBayes samples its records
    assert abs(json.loads(res.stdout)[0]["estimate"] - truth) <= tol


def test_cli_view_methods_are_the_library_registry():
    """`view build --method` lists exactly the methods build_view knows (the CLI keeps its own
    list so that starting the command does not import every view module)."""
    from certdp.views.build import METHODS

    build = next(c for c in main.commands["view"].commands["build"].params if c.name == "method")
    assert set(build.type.choices) == set(METHODS)


def test_the_owners_seed_is_the_owners_not_the_files(tmp_path):
    """A file solved on one draw of the owner's data (gaussian records drawn with seed 7) must
    not pass against it because it records seed 7: without the owner's --seed the audit and
    perturb refuse (exit 2), with the owner's seed 1 it fails (perturb refuses it), with 7 it
    passes; an instance
    that draws nothing with its seed (a grid, every output) needs none."""
    r = CliRunner()
    inst = ["--dataset", "gaussian:12:2", "--epsilon", "1", "--eta", "1.5"]
    out = tmp_path / "m.npz"
    assert r.invoke(main, ["solve", *inst, "--seed", "7", "--quiet", "--out", str(out)]).exit_code == 0
    refused = r.invoke(main, ["audit", str(out), *inst])
    assert refused.exit_code == 2 and "--seed" in refused.output
    assert r.invoke(main, ["audit", str(out), *inst, "--seed", "1"]).exit_code == 1
    assert r.invoke(main, ["audit", str(out), *inst, "--seed", "7"]).exit_code == 0
    p = r.invoke(main, ["perturb", str(out), *inst, "--seed", "3"], input="0\n")
    assert p.exit_code == 2 and "--seed" in p.output
    bad = r.invoke(main, ["perturb", str(out), *inst, "--instance-seed", "1"], input="0\n")
    assert bad.exit_code == 2 and "fails its audit" in bad.output
    ok = r.invoke(main, ["perturb", str(out), *inst, "--instance-seed", "7", "--seed", "3"], input="0\n")
    assert ok.exit_code == 0 and ok.output.splitlines()[0] == "record,output"
    grid = ["--dataset", "grid:3x4", "--epsilon", "1", "--eta", "1.5"]
    g = tmp_path / "g.npz"
    assert r.invoke(main, ["solve", *grid, "--seed", "5", "--quiet", "--out", str(g)]).exit_code == 0
    assert r.invoke(main, ["audit", str(g), *grid]).exit_code == 0


@pytest.mark.parametrize("text", ["\u0663\n", "\uff11\n", "\U0001d7d9\n", "1_0\n"])
def test_perturb_reads_ascii_record_indices_only(tmp_path, text):
    """str.isdigit takes Arabic-Indic, full-width and mathematical digits; int() then reads them
    as numbers, so a record index could come from text no CSV tool shows as one."""
    out = tmp_path / "g.npz"
    grid = ["--dataset", "grid:3x3", "--epsilon", "1", "--eta", "1.5"]
    assert CliRunner().invoke(main, ["solve", *grid, "--seed", "1", "--quiet", "--out", str(out)]).exit_code == 0
    res = CliRunner().invoke(main, ["perturb", str(out)], input=text)
    assert res.exit_code == 2 and "is not a record index" in res.output
