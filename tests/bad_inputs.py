"""Bad inputs for every subcommand, and what each must produce: an exit status of 1 to 4,
a message that names the option or file (a substring), no traceback, and no file written.

``python -m tests.bad_inputs [OUT.md]`` runs them all through the real command group, then
draws a fixed sample of each generator family of ``tests/generators.py``, and writes the
counts by outcome class and the table of listed cases (docs/bad-inputs.md is its output).
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

G = ["solve", "--dataset", "grid:4x5", "--epsilon", "1", "--eta", "1.5"]   # a valid small instance
G_OUT = G + ["--outputs", "5"]


@dataclass(frozen=True)
class Case:
    """One bad input: the arguments, what the message must mention, the exit status."""

    args: tuple[str, ...]
    expect: str
    code: int = 2
    stdin: str | None = None
    slow: bool = False
    note: str = ""


def c(args: list[str], expect: str, code: int = 2, **kw) -> Case:
    return Case(tuple(args), expect, code, **kw)


SOLVE = [
    c(["solve", "--dataset", "grid:4x5", "--epsilon", "-1", "--eta", "1"], "epsilon"),
    c(["solve", "--dataset", "grid:4x5", "--epsilon", "0", "--eta", "1"], "epsilon"),
    c(["solve", "--dataset", "grid:4x5", "--epsilon", "nan", "--eta", "1"], "epsilon"),
    c(["solve", "--dataset", "grid:4x5", "--epsilon", "inf", "--eta", "1"], "epsilon"),
    c(["solve", "--dataset", "grid:4x5", "--epsilon", "abc", "--eta", "1"], "--epsilon"),
    c(["solve", "--dataset", "grid:4x5", "--epsilon", "1", "--eta", "0"], "eta"),
    c(["solve", "--dataset", "grid:4x5", "--epsilon", "1", "--eta", "-2"], "eta"),
    c(["solve", "--dataset", "grid:4x5", "--epsilon", "1", "--eta", "nan"], "eta"),
    c(["solve", "--dataset", "grid:4x5", "--epsilon", "1"], "--eta"),
    c(["solve", "--epsilon", "1", "--eta", "1"], "--dataset"),
    c(["solve", "--dataset", "moon:4", "--epsilon", "1", "--eta", "1"], "dataset"),
    c(["solve", "--dataset", "grid", "--epsilon", "1", "--eta", "1"], "dataset"),
    c(["solve", "--dataset", "grid:axb", "--epsilon", "1", "--eta", "1"], "grid:ROWSxCOLS"),
    c(["solve", "--dataset", "grid:0x5", "--epsilon", "1", "--eta", "1"], "rows"),
    c(["solve", "--dataset", "grid:1x1", "--epsilon", "1", "--eta", "1"], "two cells"),
    c(["solve", "--dataset", "gaussian:10", "--epsilon", "1", "--eta", "1"], "gaussian:N:DIM"),
    c(["solve", "--dataset", "gaussian:ten:2", "--epsilon", "1", "--eta", "1"], "N must be an integer"),
    c(["solve", "--dataset", "gaussian:1:2", "--epsilon", "1", "--eta", "1"], "N must be >= 2"),
    c(["solve", "--dataset", "gaussian:10:0", "--epsilon", "1", "--eta", "1"], "dim"),
    c(["solve", "--dataset", "road:a.csv:3", "--epsilon", "1", "--eta", "1"], "road:NODES.csv,EDGES.csv:N"),
    c(["solve", "--dataset", "road:nofile.csv,nofile2.csv:10", "--epsilon", "1", "--eta", "1"], "not found"),
    c(["solve", "--dataset", "embedding::5", "--epsilon", "1", "--eta", "1"], "embedding:FILE:N"),
    c(["solve", "--dataset", "embedding:nofile.npy:5", "--epsilon", "1", "--eta", "1"], "not found"),
    c(["solve", "--dataset", "grid:100000x100000", "--epsilon", "1", "--eta", "1"], "GB of memory"),
    c(["solve", "--dataset", "gaussian:2000000:2", "--epsilon", "1", "--eta", "1"], "GB of memory"),
    c(G + ["--outputs", "50"], "n_outputs"),
    c(G + ["--outputs", "0"], "n_outputs"),
    c(G + ["--outputs", "-3"], "--outputs"),
    c(["solve", "--dataset", "grid:4x5", "--cell", "0", "--epsilon", "1", "--eta", "1"], "cell"),
    c(["solve", "--dataset", "grid:4x5", "--cell", "-1", "--epsilon", "1", "--eta", "1"], "cell"),
    c(["solve", "--dataset", "grid:4x5", "--cell", "nan", "--epsilon", "1", "--eta", "1"], "cell"),
    c(["solve", "--dataset", "gaussian:10:2", "--epsilon", "1", "--eta", "1", "--cost", "travel"], "travel"),
    c(["solve", "--dataset", "gaussian:10:2", "--epsilon", "1", "--eta", "1", "--cost", "time"], "--cost"),
    c(G + ["--method", "foo"], "--method"),
    c(G + ["--method", "expmech", "--subsets", "5"], "--subsets"),
    c(G + ["--method", "lp", "--partition", "metis"], "--partition"),
    c(G + ["--method", "outputs", "--executor", "serial"], "executor"),
    c(G + ["--method", "benders", "--executor", "serial"], "executor"),
    c(G + ["--method", "outputs", "--scheduler", "tcp://127.0.0.1:9"], "did not answer", slow=True),
    c(G + ["--method", "constopt", "--gap", "0.1"], "--gap"),
    c(G + ["--method", "lp", "--plot", "plots"], "--plot"),
    c(G + ["--method", "madlib", "--out", "m.npz"], "Monte Carlo"),
    c(G + ["--out", "m\x00.npz"], "NUL byte"),
    c(G + ["--tolerance", "nan"], "tolerance"),
    c(G + ["--tolerance", "0"], "tolerance"),
    c(G + ["--tolerance", "-1"], "tolerance"),
    c(G + ["--time-limit", "0"], "--time-limit"),
    c(G + ["--time-limit", "-5"], "--time-limit"),
    c(G + ["--time-limit", "nan"], "--time-limit"),
    c(G + ["--method", "outputs", "--gap", "0"], "gap"),
    c(G + ["--method", "benders", "--gap", "-1"], "gap"),
    c(G + ["--method", "lp", "--gap", "nan"], "gap"),
    c(G + ["--method", "outputs", "--max-iterations", "0"], "--max-iterations"),
    c(G + ["--method", "outputs", "--workers", "0"], "workers"),
    c(G + ["--method", "benders", "--workers", "-2"], "workers"),
    c(G + ["--method", "benders", "--subsets", "0"], "subsets"),
    c(G + ["--method", "benders", "--subsets", "1000"], "subsets"),
    c(G + ["--method", "constopt", "--r", "0"], "r must be"),
    c(G + ["--method", "constopt", "--r", "100"], "r must be"),
    c(G + ["--method", "constopt", "--lambdas", ""], "--lambdas"),
    c(G + ["--method", "constopt", "--lambdas", "a,b"], "--lambdas"),
    c(G + ["--method", "constopt", "--lambdas", "0.1,-2"], "--lambdas"),
    c(G + ["--method", "constopt", "--lambdas", "inf"], "--lambdas"),
    c(G + ["--method", "spanner", "--delta", "0.5"], "delta"),
    c(G + ["--method", "spanner", "--delta", "nan"], "delta"),
    c(G + ["--method", "madlib", "--draws", "0"], "draws"),
    c(G + ["--method", "laplace", "--draws", "-5"], "draws"),
    c(G + ["--method", "madlib", "--draws", "100000000000000000000"], "--draws"),
    c(G + ["--method", "madlib", "--draws", "4000000000"], "GB of memory"),
    c(G + ["--epsilon", "1e-300"], "--epsilon"),
    c(G + ["--out", "/dev/null"], "special file", note="a special file: no /dev/null.npz beside it"),
    c(G + ["--out", "sub/"], "folder", note="a folder: no sub.npz beside it"),
    c(G + ["--out", "x" * 300], "255 bytes"),
    c(G + ["--out", "-"], "standard output"),
    c(G + ["--seed", "-1"], "--seed"),
    c(G + ["--seed", "1.5"], "--seed"),
    c(G + ["--out", "."], "folder"),
    c(G + ["--out", "/etc/passwd/m.npz"], "not a folder"),
    c(G + ["--out", ""], "--out"),
    c(G + ["--method", "benders", "--scheduler", ""], "scheduler"),
    c(G + ["--objective", "median"], "--objective"),
    c(G + ["--solver", "magic"], "--solver"),
    c(G + ["--method", "spanner", "--solver", "auto"], "solver"),
    c(G + ["--method", "outputs", "--partition", "metis"], "--partition"),
    c(G + ["--method", "benders", "--scheduler", "tcp://127.0.0.1:9"], "did not answer", slow=True),
    c(["solve", "--dataset", "grid:20x25", "--outputs", "100", "--epsilon", "2", "--eta", "2", "--cost", "travel",
       "--method", "benders", "--variant", "paper", "--time-limit", "3"], "Benders", code=1, slow=True,
      note="a valid instance, a time limit too short for the paper's Benders to find a feasible point (the "
           "improved variant returns its first certified mechanism with status time_limit)"),
    c(["solve", "--dataset", "grid:20x25", "--outputs", "100", "--epsilon", "2", "--eta", "2", "--cost", "travel",
       "--time-limit", "1"], "time", code=1, slow=True,
      note="a valid instance, a time limit too short for any feasible point"),
]

FILES = [
    c(["audit", "nofile.npz"], "not found"),
    c(["audit", "m\x00.npz"], "NUL byte"),
    c(["audit", "empty.npz"], "empty"),
    c(["audit", "garbage.npz"], "not a readable"),
    c(["audit", "truncated.npz"], "truncated.npz"),
    c(["audit", "nomatrix.npz"], "matrix"),
    c(["audit", "single.npy"], "single array"),
    c(["audit", "flat.npz"], "2-D"),
    c(["audit", "."], "directory"),
    c(["audit", "naneps.npz"], "epsilon", code=1),
    c(["audit", "manhattan.npz"], "metric", code=3),
    c(["audit", "old.npz"], "cannot be checked", code=3),
    c(["audit", "tampered.npz"], "missing from its stored edges", code=1),
    c(["audit", "inflated.npz"], "stored edge distances differ", code=1),
    c(["audit", "negprior.npz"], "prior", code=1),
    c(["audit", "forged.npz"], "not pairs within eta", code=1,
      note="issue 50: the identity over a precomputed 1e300 matrix without points; its 20 listed pairs are not found"),
    c(["audit", "forged_nopairs.npz"], "protects no pair", code=4, note="the same, its pair list dropped"),
    c(["audit", "nopairs.npz"], "protects no pair", code=4, note="solved at eta 0.5: no two cells within eta"),
    c(["audit", "forged_nopairs.npz", "--dataset", "grid:3x3", "--epsilon", "1", "--eta", "1.5"],
      "differs from the owner's data", code=1),
    c(["audit", "mech.npz", "--dataset", "grid:3x3", "--epsilon", "1", "--eta", "1.2"], "differs from the owner's data",
      code=1, note="the owner's eta is not the file's"),
    c(["audit", "mech.npz", "--epsilon", "1"], "need --dataset"),
    c(["audit", "mech.npz", "--dataset", "grid:3x3"], "--epsilon and --eta"),
    c(["audit", "othertag.npz"], "not a certdp-mechanism/2"),
    c(["audit", "floatedges.npz"], "'edges' must hold integers"),
    c(["audit", "complex.npz"], "complex"),
    c(["perturb", "forged.npz"], "fails its audit", stdin="0\n"),
    c(["perturb", "forged_nopairs.npz"], "protects no pair", stdin="0\n"),
    c(["audit", "mech.npz", "--q", "1.5"], "q must"),
    c(["audit", "mech.npz", "--q", "0"], "q must"),
    c(["perturb", "nofile.npz"], "not found", stdin="0\n"),
    c(["perturb", "mech.npz", "--input", "nofile.csv"], "nofile.csv"),
    c(["perturb", "mech.npz"], "'1.5' is not a record index", stdin="1.5\n"),
    c(["perturb", "mech.npz"], "'abc' is not a record index", stdin="abc\n"),
    c(["perturb", "mech.npz"], "'1e20' is not a record index", stdin="1e20\n"),
    c(["perturb", "mech.npz"], "out of range", stdin="99\n"),
    c(["perturb", "mech.npz"], "out of range", stdin="-1\n"),
    c(["perturb", "mech.npz"], "no record indices", stdin=""),
    c(["perturb", "mech.npz"], "no record indices", stdin="record\n"),
    c(["perturb", "mech.npz"], "'foo' is not a record index", stdin="foo,bar\n1,2\n"),
    c(["perturb", "mech.npz", "--seed", "-1"], "--seed", stdin="0\n"),
    c(["perturb", "mech.npz", "--input", "garbage.npz"], "input line 1"),
    c(["perturb", "old.npz"], "cannot be checked", stdin="0\n"),
    c(["perturb", "tampered.npz"], "fails its audit", stdin="0\n"),
    c(["perturb", "empty.npz"], "empty", stdin="0\n"),
]

COMPARE = [
    c(["compare", "--dataset", "gaussian:8:2", "--epsilon", "1", "--eta", "inf", "--methods", ""], "--methods"),
    c(["compare", "--dataset", "gaussian:8:2", "--epsilon", "1", "--eta", "inf", "--methods", "foo"], "foo"),
    c(["compare", "--dataset", "gaussian:8:2", "--epsilon", "1", "--eta", "inf", "--tight-delta", "0"], "tight-delta"),
    c(["compare", "--dataset", "gaussian:8:2", "--epsilon", "1", "--eta", "inf", "--tight-delta", "1"], "tight-delta"),
    c(["compare", "--dataset", "gaussian:8:2", "--epsilon", "1", "--eta", "inf", "--q", "0"], "--q"),
    c(["compare", "--dataset", "gaussian:8:2", "--epsilon", "1", "--eta", "inf", "--methods", "expmech", "--r", "3"],
      "--r"),
    c(["compare", "--dataset", "gaussian:8:2", "--epsilon", "1"], "--eta"),
    c(["compare", "--dataset", "gaussian:8:2", "--epsilon", "1", "--eta", "inf", "--out", "."], "folder"),
]

LRGEO = [
    c(["lrgeo", "--grid", "6x6", "--epsilon", "-1"], "epsilon"),
    c(["lrgeo", "--grid", "axb"], "--grid"),
    c(["lrgeo", "--grid", "1x1"], "two cells"),
    c(["lrgeo", "--grid", "6x6", "--users", "0"], "users"),
    c(["lrgeo", "--grid", "6x6", "--users", "100000"], "users"),
    c(["lrgeo", "--dataset", "helsinki", "--data-dir", "/nonexistent"], "--data-dir"),
    c(["lrgeo", "--grid", "6x6", "--eta", "0"], "gamma"),
    c(["lrgeo", "--grid", "6x6", "--lr-radius", "0.0001"], "Gamma"),
    c(["lrgeo", "--grid", "6x6", "--r-exp", "100"], "r_exp"),
    c(["lrgeo", "--grid", "6x6", "--table-cell", "0"], "cell"),
    c(["lrgeo", "--grid", "6x6", "--gap", "0"], "--gap"),
    c(["lrgeo", "--grid", "6x6", "--method", "monolithic"], "--method lp"),
    c(["lrgeo", "--grid", "6x6", "--baselines", "foo"], "--baselines"),
    c(["lrgeo", "--grid", "6x6", "--time-limit", "-1"], "--time-limit"),
    c(["lrgeo", "--grid", "6x6", "--seed", "-3"], "--seed"),
    c(["lrgeo", "--grid", "6x6", "--out", "."], "folder"),
    c(["lrgeo", "--grid", "6x6", "--network", "nodes.csv"], "NODES.csv,EDGES.csv"),
    c(["lrgeo", "--grid", "6x6", "--network", "nodes.csv,edges.csv"], "no file"),
    c(["lrgeo", "--grid", "6x6", "--network", "table.csv,table.csv", "--dataset", "helsinki"], "not both"),
    c(["lrgeo", "serve", "--grid", "6x6", "--port", "70000"], "--port"),
    c(["lrgeo", "--grid", "6x6", "--bbox", "1,2,3"], "--bbox"),
    c(["lrgeo", "--grid", "6x6", "--bbox", "3,2,1,0"], "--bbox"),
    c(["lrgeo", "--grid", "6x6", "--bbox", "nan,0,1,1"], "--bbox"),
    c(["lrgeo", "--grid", "6x6", "--bbox", "24.9,60.1,25.0,60.2"], "--bbox"),
    c(["lrgeo", "serve", "--grid", "6x6", "--round-users", "0"], "--round-users"),
    c(["lrgeo", "serve", "--grid", "6x6", "--method", "monolithic"], "--method lp"),
    c(["lrgeo", "serve", "--grid", "6x6", "--round-wait", "0"], "--round-wait"),
    c(["lrgeo", "serve", "--grid", "6x6", "--max-pending", "0"], "--max-pending"),
    c(["lrgeo", "serve", "--grid", "axb"], "--grid"),
    c(["lrgeo", "serve", "--grid", "6x6", "--client-users", "0"], "--client-users"),
    c(["lrgeo", "serve", "--grid", "6x6", "--client-rate", "nan"], "--client-rate"),
    c(["lrgeo", "serve", "--grid", "6x6", "--user-rows", "0"], "--user-rows"),
    c(["lrgeo", "serve", "--grid", "6x6", "--user-seconds", "-1"], "--user-seconds"),
    c(["lrgeo", "serve", "--grid", "6x6", "--max-body-mb", "1e9"], "--max-body-mb"),
    c(["lrgeo", "serve", "--grid", "6x6", "--host", "no.such.host.invalid"], "--host"),
    c(["lrgeo", "user", "--server", "http://127.0.0.1:9", "--location", "3"], "cannot reach"),
    c(["lrgeo", "user", "--server", "http://127.0.0.1:9"], "--location"),
    c(["lrgeo", "user", "--server", "http://127.0.0.1:9", "--location", "3", "--lat", "1", "--lon", "2"],
      "--location"),
    c(["lrgeo", "user", "--server", "http://127.0.0.1:9", "--lat", "1"], "--lat"),
    c(["lrgeo", "user", "--server", "http://127.0.0.1:9", "--location", "3", "--wait", "0"], "--wait"),
    c(["lrgeo", "user", "--server", "http://127.0.0.1:9", "--location", "3", "--seed", "-1"], "--seed"),
    c(["lrgeo", "user", "--server", "http://127.0.0.1:9", "--location", "3", "--retries", "-1"], "--retries"),
]

VIEWS = [
    c(["view", "build", "notable.csv", "--columns", "a", "--out", "v.json"], "notable.csv"),
    c(["view", "build", "table.csv", "--columns", "", "--out", "v.json"], "--columns"),
    c(["view", "build", "table.csv", "--columns", "nosuch", "--domains", "domains.json", "--out", "v.json"], "nosuch"),
    c(["view", "build", "table.csv", "--columns", "a", "--domains", "domains.json", "--epsilon", "0", "--out",
       "v.json"], "epsilon"),
    c(["view", "build", "table.csv", "--columns", "a", "--domains", "domains.json", "--alpha", "1.5", "--out",
       "v.json"], "alpha"),
    c(["view", "build", "table.csv", "--columns", "a", "--domains", "domains.json", "--k", "5", "--os", "2", "--out",
       "v.json"], "os"),
    c(["view", "build", "table.csv", "--columns", "a", "--domains", "domains.json", "--out", "."], "folder"),
    c(["view", "build", "table.csv", "--columns", "a", "--domains", "nofile.json", "--out", "v.json"], "nofile.json"),
    c(["view", "build", "table.csv", "--columns", "a", "--domains", "garbage.npz", "--out", "v.json"], "--domains"),
    c(["view", "build", "table.csv", "--columns", "a", "--out", "v.json"], "domain"),
    c(["view", "build", "table.csv", "--columns", "a", "--domains", "domains.json", "--seed", "-1", "--out",
       "v.json"], "--seed"),
    c(["view", "build", "table.csv", "--columns", "a", "--domains", "domains.json", "--method", "hdmm",
       "--query-columns", "0", "--out", "v.json"], "--query-columns"),
    c(["view", "query", "noview.json", "a=1"], "noview.json"),
    c(["view", "query", "garbage.npz", "a=1"], "garbage.npz"),
    c(["view", "compare", "table.csv", "--columns", "a", "--domains", "domains.json", "--methods", "foo"], "foo"),
    c(["view", "compare", "table.csv", "--columns", "a", "--domains", "domains.json", "--reps", "0"], "reps"),
    c(["view", "compare", "table.csv", "--columns", "a", "--domains", "domains.json", "--queries", "0"],
      "--queries"),
]

S = ["sanitize", "--embeddings", "emb.npy", "--epsilon", "1", "--method", "expmech"]   # a valid sanitize

SANITIZE = [
    c(["sanitize", "--epsilon", "1"], "--embeddings", stdin="the cat"),
    c(["sanitize", "--embeddings", "noemb.npy", "--epsilon", "1"], "noemb.npy", stdin="the cat"),
    c(["sanitize", "--embeddings", "single.npy", "--epsilon", "1"], "single.npy", stdin="the cat",
      note="a 2 x 2 matrix without words gives no single-word vocabulary"),
    c(["sanitize", "--embeddings", "garbage.npz", "--epsilon", "1"], "garbage.npz", stdin="the cat"),
    c(S[:4] + ["0"] + S[5:], "epsilon", stdin="the cat"),
    c(S + ["--vocabulary", "1"], "--vocabulary", stdin="the cat"),
    c(S + ["--r", "3"], "--r", stdin="the cat"),
    c(S + ["--eta", "-1"], "eta", stdin="the cat"),
    c(S + ["--input", "nofile.txt"], "nofile.txt"),
    c(S + ["--save", "."], "--save", stdin="the cat"),
    c(["sanitize", "--mechanism", "mech.npz"], "vocabulary", stdin="the cat",
      note="a mechanism file without its words"),
    c(["sanitize", "--mechanism", "tampered.npz"], "tampered.npz", stdin="the cat"),
    c(G[:2] + ["area:60.2,24.9,60.1,25.0:0.5"] + G[3:], "south < north"),
    c(G[:2] + ["area:60.1,24.9,60.2,25.0:x"] + G[3:], "CELL_KM"),
    c(G[:2] + ["road:nodes.csv"] + G[3:], "road:NODES.csv,EDGES.csv"),
]

CASES = SOLVE + FILES + COMPARE + LRGEO + VIEWS + SANITIZE


def make_files(d: Path) -> None:
    """The files the cases refer to, in the folder the cases run in."""
    from certdp import build_space, parse_dataset, solve

    sp = build_space(parse_dataset("grid:3x3"), epsilon=1.0, eta=1.5, seed=1)
    mech = solve(sp).mechanism
    mech.save(d / "mech.npz")
    (d / "empty.npz").write_bytes(b"")
    (d / "garbage.npz").write_bytes(b"\x00\x01 this is not a zip file")
    raw = (d / "mech.npz").read_bytes()
    (d / "truncated.npz").write_bytes(raw[: len(raw) // 2])
    np.savez(d / "nomatrix.npz", epsilon=np.float64(1.0))
    np.save(d / "single.npy", np.eye(2))
    np.savez(d / "flat.npz", matrix=np.ones(3), epsilon=np.float64(1.0))
    with np.load(d / "mech.npz") as f:
        arrays = {k: f[k] for k in f.files}
    D = np.full((9, 9), 1e300)
    np.fill_diagonal(D, 0.0)
    forged = {**{k: v for k, v in arrays.items() if k != "points"}, "matrix": np.eye(9),
              "metric": np.array("precomputed"), "distance_matrix": D}
    np.savez(d / "forged.npz", **forged)
    np.savez(d / "forged_nopairs.npz", **{k: v for k, v in forged.items() if k not in ("edges", "edge_distance")})
    solve(build_space(parse_dataset("grid:3x3"), epsilon=1.0, eta=0.5, seed=1)).mechanism.save(d / "nopairs.npz")
    variants = {"naneps": {"epsilon": np.float64(np.nan)}, "manhattan": {"metric": np.array("manhattan")},
                "othertag": {"format": np.array("certdp-mechanism/3")},
                "floatedges": {"edges": arrays["edges"].astype(float)},
                "complex": {"matrix": arrays["matrix"] + 0j},
                "tampered": {"edges": np.zeros((0, 2), dtype=np.int64), "edge_distance": np.zeros(0)},
                "inflated": {"edge_distance": arrays["edge_distance"] * 1000},
                "negprior": {"prior": -arrays["prior"]}}
    for name, change in variants.items():
        np.savez(d / f"{name}.npz", **{**arrays, **change})
    np.savez(d / "old.npz", matrix=arrays["matrix"], epsilon=arrays["epsilon"], edges=arrays["edges"],
             edge_distance=arrays["edge_distance"])
    (d / "table.csv").write_text("a,b\n" + "".join(f"{i % 5},{i % 3}\n" for i in range(60)))
    np.save(d / "emb.npy", np.random.default_rng(0).standard_normal((6, 3)))
    (d / "emb.txt").write_text("the\ncat\ndog\nsat\nran\nmat\n")
    (d / "domains.json").write_text(json.dumps({"a": {"values": [0, 1, 2, 3, 4]}, "b": {"values": [0, 1, 2]}}))


def run_case(case: Case, d: Path) -> tuple[int, str, list[str]]:
    """Run one case in folder ``d``: (exit status, output, files it created)."""
    import os

    from click.testing import CliRunner

    from certdp.cli import main

    before = {p.name for p in d.iterdir()}
    cwd = os.getcwd()
    os.chdir(d)
    try:
        res = CliRunner().invoke(main, list(case.args), input=case.stdin)
    finally:
        os.chdir(cwd)
    created = sorted({p.name for p in d.iterdir()} - before)
    return res.exit_code, res.output, created


def judge(case: Case, code: int, output: str, created: list[str]) -> str:
    """'ok', or what is wrong with the outcome."""
    if "Traceback (most recent call last)" in output:
        return "traceback"
    if code != case.code:
        return f"exit {code}, expected {case.code}"
    if case.expect.lower() not in output.lower():
        return f"message does not mention {case.expect!r}"
    if created:
        return f"wrote {created}"
    return "ok"


#: cases drawn from each generator family for docs/bad-inputs.md (the tests draw their own)
DOCS_SAMPLE = {"CLI arguments (solve, compare, audit, perturb)": 400, "road-network CSV files": 300,
               "embedding files (.npy + words, word2vec .bin)": 300, "mechanism files (valid files mutated)": 600}


def generated_counts() -> tuple[list[str], int]:
    """The markdown table of outcome classes per generator family, and the number of bad ones."""
    from collections import Counter

    from .generators import BAD, GOOD, base_bytes, sample

    classes = list(GOOD) + list(BAD)
    rows, bad, examples = [], 0, []
    with tempfile.TemporaryDirectory() as t:
        bases = base_bytes(Path(t))
        for family, n in DOCS_SAMPLE.items():
            counts: Counter[str] = Counter()

            def record(case, verdict, outcome, counts=counts):
                cls = next(c for c in classes if verdict == c or verdict.startswith(c + ":"))
                counts[cls] += 1
                if cls in BAD:
                    examples.append(f"- {family}: `{' '.join(case.args)[:120]}`: {verdict[:200]}")
            sample(family, n, bases, record)
            bad += sum(counts[c] for c in BAD)
            rows.append(f"| {family} | {sum(counts.values())} | " + " | ".join(str(counts[c]) for c in classes) + " |")
    head = ["| generator family | cases | " + " | ".join(classes) + " |", "|---" * (len(classes) + 2) + "|"]
    return head + rows + ([""] + examples if examples else []), bad


def main(out: str | None = None) -> int:
    rows, failures = [], 0
    with tempfile.TemporaryDirectory() as t:
        d = Path(t)
        make_files(d)
        for case in CASES:
            code, output, created = run_case(case, d)
            verdict = judge(case, code, output, created)
            failures += verdict != "ok"
            msg = " ".join(output.strip().splitlines()[-1:])[:140].replace("|", "/")
            shown = " ".join(case.args).replace("\x00", "\\x00")     # a NUL byte, written as Python would
            rows.append(f"| `{shown[:90]}`{' (stdin ' + repr(case.stdin)[:20] + ')' if case.stdin is not None else ''} "
                        f"| {code} | {msg} | {verdict} |")
    generated, bad = generated_counts()
    text = "\n".join([
        "# Bad inputs and what certdp does with them", "",
        "Written by `python -m tests.bad_inputs docs/bad-inputs.md` (reproducible: the generators are "
        "derandomized, so the same cases are drawn on every run).", "",
        "## Generated inputs", "",
        f"The generators of `tests/generators.py` drew {sum(DOCS_SAMPLE.values())} cases ({bad} with a bad outcome). "
        "A good outcome is a result checked independently (a mechanism file audited against the instance rebuilt "
        "from the same options and in decimal arithmetic), one `Error:` line with exit status 2 (1 for a limit "
        "reached or a missing extra), or the audit's own status for a file it does not pass (1 failed, 3 "
        "unverifiable, 4 protects no pair). A bad outcome is a traceback, an error that is not one `Error:` line, "
        "a file left behind by a failed run, a wrong result (a file passed that is not private on the owner's "
        "pairs, or `audit`, `perturb` and `Mechanism.load` deciding differently) or another exit status. "
        "`tests/test_generated_inputs.py` runs a fixed sample of each family by default and thousands with "
        "`-m slow`.", "",
        *generated, "",
        "## Listed inputs", "",
        f"{len(CASES)} listed bad inputs ({failures} not as expected). Each must exit with 1 (a solver limit or a "
        "file that fails its audit), 2 (bad input), 3 (an unverifiable file) or 4 (a file that protects no pair), "
        "name the option or file, show no traceback and write nothing.", "",
        "| command | exit | message (last line) | verdict |", "|---|---|---|---|", *rows]) + "\n"
    print(text)
    if out:
        Path(out).write_text(text)
    return failures + bad


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1] if len(sys.argv) > 1 else None) else 0)
