"""Generators of bad (and good) inputs for the mechanism commands, and the oracle that judges
what ``certdp`` does with each.

Four families, each a hypothesis strategy of one *case* and a function running it:

- ``cli``: arguments of ``solve``, ``compare``, ``audit`` and ``perturb``, drawn from each
  command's own parameters (so a new option is generated too): numbers of every size and
  kind, text, choices, paths that cannot take a file, and datasets;
- ``road``: road-network CSV files (nodes, edges), valid ones mutated;
- ``embedding``: embedding files (``.npy`` with a word list, word2vec ``.bin``), valid ones
  mutated;
- ``mechanism``: mechanism files written by ``solve``, mutated (fields dropped, retyped,
  scaled, NaN or inf, pairs added or removed, tags changed, forged geometry).

The oracle (:func:`judge`): every run either succeeds with a result that is checked
independently (a mechanism file is audited against the instance rebuilt from the same options
and in decimal arithmetic by ``tests/independent_audit.py``; an audit that passes a mutated
file must be right about the owner's data) or ends with one ``Error:`` line and exit status 2
(1 for a limit reached or a missing extra; the audit's own 1, 3 and 4 for a file it does not
pass), never a traceback, never a partial file. Each run gets an outcome class; the tests
require a good class, and ``python -m tests.bad_inputs`` counts the classes into
``docs/bad-inputs.md``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import click
import numpy as np
from click.testing import CliRunner
from hypothesis import strategies as st

from certdp.cli import main
from certdp.cli.common import Integer, OutputFolder, OutputPath, Real

from .independent_audit import independent_audit, protected_pairs

GOOD = ("accepted, result verified", "refused: one Error line, exit 2", "stopped: one Error line, exit 1",
        "audit: failed (1)", "audit: unverifiable (3)", "audit: protects no pair (4)")
BAD = ("traceback", "unclear error", "partial file", "wrong result", "unexpected exit")


@dataclass(frozen=True)
class Case:
    """One run: the arguments, stdin, and files to write into the run's folder first."""

    family: str
    args: tuple[str, ...]
    stdin: str | None = None
    files: tuple[tuple[str, bytes], ...] = field(default=(), repr=False)
    owner: tuple[str, ...] = ()        # the owner's instance options of a mechanism-file case
    expect_out: str | None = None      # the file a successful run writes


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    exception: BaseException | None
    created: tuple[str, ...]
    leftovers: tuple[str, ...]


# ------------------------------------------------------------------------ the folder
def prepare(d: Path) -> None:
    """What every case's folder holds: a folder, a file, a FIFO, the valid data files."""
    (d / "adir").mkdir()
    (d / "afile").write_text("x")
    os.mkfifo(d / "fifo")
    (d / "nodes.csv").write_text(_csv(VALID_NODES))
    (d / "edges.csv").write_text(_csv(VALID_EDGES))
    rng = np.random.default_rng(0)
    np.save(d / "vec.npy", rng.normal(size=(8, 3)))
    (d / "vec.txt").write_text("\n".join(f"w{i}" for i in range(8)) + "\n")


def _files(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


def run(case: Case, d: Path) -> Outcome:
    """Run ``case`` in folder ``d`` (prepared), through the real command group."""
    for name, data in case.files:
        (d / name).write_bytes(data)
    before = _files(d)
    cwd = os.getcwd()
    os.chdir(d)
    try:
        res = CliRunner().invoke(main, list(case.args), input=case.stdin)
    finally:
        os.chdir(cwd)
    after = _files(d)
    created = tuple(sorted(after - before))
    leftovers = tuple(sorted(p for p in after if Path(p).name.startswith(".tmp-")))
    exc = None if isinstance(res.exception, SystemExit) else res.exception
    return Outcome(res.exit_code, res.stdout, res.stderr, exc, created, leftovers)


# ------------------------------------------------------------------------ the oracle
def _one_error_line(o: Outcome) -> bool:
    lines = [x for x in (o.stdout + o.stderr).splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("Error:")]
    return len(errors) == 1 and o.stderr.strip().splitlines()[-1].startswith("Error:")


def judge(case: Case, o: Outcome, d: Path) -> str:
    """The outcome class of a run (one of GOOD or BAD, with a reason after ': ' when bad)."""
    if o.exception is not None or "Traceback (most recent call last)" in o.stdout + o.stderr:
        return f"traceback: {type(o.exception).__name__}: {str(o.exception)[:200]}"
    if o.leftovers:
        return f"partial file: {o.leftovers}"
    command = case.args[0] if case.args else ""
    if case.family == "mechanism":
        why = _one_decision(case, o, d)
        if why:
            return f"wrong result: {why}"
    if command == "audit" and o.code in (1, 3, 4):
        return {1: "audit: failed (1)", 3: "audit: unverifiable (3)", 4: "audit: protects no pair (4)"}[o.code]
    if o.code in (1, 2):
        if o.created:
            return f"partial file: {o.created}"
        if not _one_error_line(o):
            return f"unclear error: {(o.stdout + o.stderr)[-300:]!r}"
        return GOOD[2] if o.code == 1 else GOOD[1]
    if o.code != 0:
        return f"unexpected exit: {o.code}"
    why = VERIFY[command](case, o, d)
    return GOOD[0] if why is None else f"wrong result: {why}"


def _mechanism_is_right(path: Path, owner: tuple[str, ...], d: Path) -> str | None:
    """A mechanism file written or passed: audited against the instance rebuilt from
    ``owner`` (the instance options), and in decimal arithmetic."""
    if "--seed" not in owner:      # the owner of a run that drew its seed reads it from the summary
        with np.load(d / path, allow_pickle=False) as f:
            seed = json.loads(str(f["metadata"])).get("seed") if "metadata" in f.files else None
        owner = (*owner, "--seed", str(seed)) if seed is not None else owner
    cwd = os.getcwd()
    os.chdir(d)
    try:
        res = CliRunner().invoke(main, ["audit", f"./{path}", "--allow-no-pairs", "--json", *owner])
    finally:
        os.chdir(cwd)
    if res.exit_code != 0:
        return f"its audit against the owner's instance gives {res.exit_code}: {res.output[-300:]!r}"
    ok, bad = independent_audit(d / path)
    return None if ok else f"the independent audit finds {bad} violated inequalities"


def _verify_solve(case: Case, o: Outcome, d: Path) -> str | None:
    args = list(case.args)
    if "--json" in args:
        try:
            s = json.loads(o.stdout)
        except ValueError:
            return f"--json printed no JSON: {o.stdout[:200]!r}"
        if s.get("audit_passed") is False:
            return "the summary says the audit failed"
    written = [c for c in o.created if c.endswith(".npz") and not Path(c).name.startswith(".")]
    if case.expect_out is not None:
        if case.expect_out not in written:
            return f"--out {case.expect_out} not written (created {o.created})"
        return _mechanism_is_right(Path(case.expect_out), case.owner, d)
    return None


def _verify_compare(case: Case, o: Outcome, d: Path) -> str | None:
    if "--json" in case.args:
        try:
            rows = json.loads(o.stdout)["rows"]
        except (ValueError, KeyError):
            return f"--json printed no table: {o.stdout[:200]!r}"
        if any(r.get("audit_passed") is False for r in rows):
            return "a row's mechanism fails its audit"
    if case.expect_out is not None:
        if case.expect_out not in o.created:
            return f"--out {case.expect_out} not written"
        try:
            json.loads((d / case.expect_out).read_text())
        except ValueError:
            return "the --out file is not JSON"
    return None


def _owner_space(case: Case, d: Path) -> Any:
    """The owner's instance an audit or perturb run checks the file against (rebuilt from the
    run's own options, as the command does), or None without ``--dataset``."""
    from certdp.cli.common import owner_space

    cmd = main.commands[case.args[0]]
    cwd = os.getcwd()
    os.chdir(d)
    try:
        params = cmd.make_context(case.args[0], list(case.args[1:])).params
        if case.args[0] == "perturb":
            params.pop("seed")           # perturb's --seed seeds its draws; the instance's is --instance-seed
        return owner_space(**params)
    finally:
        os.chdir(cwd)


def _owner_geometry(case: Case, d: Path) -> dict[str, Any] | None:
    """The owner's epsilon and geometry as plain arrays (None without ``--dataset``)."""
    space = _owner_space(case, d)
    if space is None:
        return None
    return {"epsilon": space.epsilon, "eta": space.eta, "metric": space.metric, "points": space.points,
            "distance_matrix": space.distance_matrix}


def _one_decision(case: Case, o: Outcome, d: Path) -> str | None:
    """``audit``, ``perturb`` and ``Mechanism.load`` decide alike on the same file and options."""
    from certdp.audit import MechanismFileError, audit_file
    from certdp.mechanism import Mechanism, UnverifiedMechanismError

    try:
        geometry = _owner_space(case, d)
    except ValueError:                   # the owner's options cannot be used (no seed recorded...)
        return None if o.code == 2 else f"{case.args[0]} exits {o.code} though its options cannot build the instance"
    p = d / case.args[1]
    try:
        rep = audit_file(p, space=geometry)
        expected = rep.exit_status
    except MechanismFileError:
        expected = 2
    try:
        Mechanism.load(p, space=geometry)
        loads = True
    except (MechanismFileError, UnverifiedMechanismError):
        loads = False
    if loads != (expected == 0):
        return f"Mechanism.load {'accepts' if loads else 'refuses'} a file whose audit gives {expected}"
    if case.args[0] == "audit" and o.code != expected:
        return f"certdp audit exits {o.code}, audit_file says {expected}"
    if case.args[0] == "perturb" and (o.code == 0) != loads:
        return f"perturb exits {o.code} on a file that Mechanism.load {'accepts' if loads else 'refuses'}"
    return None


def _verify_audit(case: Case, o: Outcome, d: Path) -> str | None:
    """A file that audit (or perturb) passes: exactly private, in decimal arithmetic, on every
    pair within eta of the owner's data (with --dataset) or of the file's own geometry; the
    pairs it lists are exactly those; and there is at least one unless --allow-no-pairs."""
    p = d / case.args[1]
    owner = _owner_geometry(case, d)
    with np.load(p, allow_pickle=False) as f:
        pairs = {(i, j) for i, j, _ in protected_pairs(f if owner is None else owner)}
        listed = {tuple(e) for e in f["edges"].tolist()} if "edges" in f.files else pairs
    if not pairs and "--allow-no-pairs" not in case.args:
        return "passed a file that protects no pair"
    if listed != pairs:
        return f"passed a file that lists {len(listed)} pairs where {len(pairs)} are within eta"
    ok, bad = independent_audit(p, owner=owner)
    return None if ok else f"passed a file with {bad} violated inequalities ({bad} = -1: not a valid matrix)"


def _verify_perturb(case: Case, o: Outcome, d: Path) -> str | None:
    lines = o.stdout.strip().splitlines()
    if not lines or lines[0] != "record,output":
        return f"perturb printed {o.stdout[:100]!r}"
    try:
        pairs = [tuple(int(x) for x in line.split(",")) for line in lines[1:]]
    except ValueError:
        return f"perturb printed {o.stdout[:100]!r}"
    with np.load(d / case.args[1], allow_pickle=False) as f:
        Z = np.asarray(f["matrix"], dtype=float)
    if any(not (0 <= r < Z.shape[0] and 0 <= k < Z.shape[1]) or Z[r, k] <= 0 for r, k in pairs):
        return "perturb drew an output of probability 0 or out of range"
    return _verify_audit(case, o, d)


VERIFY: dict[str, Callable[[Case, Outcome, Path], str | None]] = {
    "solve": _verify_solve, "compare": _verify_compare, "audit": _verify_audit, "perturb": _verify_perturb}


# ------------------------------------------------------------------------ values
NUMBER_TEXT = ["0", "-0", "1", "-1", "2", "1.5", "1e-300", "1e-13", "1e-12", "1e12", "1e13", "1e300", "1e400",
               "-1e400", "nan", "NaN", "inf", "-inf", "Infinity", "1e20", "100000000000000000000",
               "4294967295", "4294967296", "9223372036854775808", "0x10", "1_000", " 3 ", "", "abc", "٣", "1,5",
               "2.", ".5", "+7", "1e-320"]
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
numbers = st.one_of(st.sampled_from(NUMBER_TEXT), st.integers(-3, 40).map(str),
                    st.floats(allow_nan=True, allow_infinity=True).map(repr), texts)
OUT_PATHS = ["m", "m.npz", "sub/m", "adir", "adir/", "newdir/", ".", "..", "/dev/null", "fifo", "x" * 260,
             "afile/m", "/sys/certdp-generated", "", "m\x00", "~/m", "-", " ", "m.json"]
IN_PATHS = ["mech.npz", "nofile.npz", "adir", "/dev/null", "fifo", "afile", "", "x" * 300, "/sys", "-"]
DATASETS = ["grid:3x3", "grid:2x4", "grid:3x3", "gaussian:6:2", "gaussian:5:3", "road:nodes.csv,edges.csv:5",
            "embedding:vec.npy:5", "grid:1x1", "grid:0x3", "grid:3x", "grid:-1x3", "grid:99999x99999",
            "gaussian:1:2", "gaussian:6:0", "gaussian:6:-2", "gaussian:6:2:1", "road:nodes.csv:3",
            "road:nodes.csv,edges.csv:99", "road:nodes.csv,edges.csv:1", "road:edges.csv,nodes.csv:4",
            "embedding:vec.npy:99", "embedding:vec.txt:4", "embedding::3", "embedding:fifo:3", "embedding:adir:3",
            "moon:3", "", ":", "grid:3x3:3", "grid:３x３"]
METHOD_LISTS = ["expmech", "expmech,constopt,spanner", "lp,madlib", "laplace", "", ",", "foo", "lp,lp",
                "optmech,outputs", "benders"]


def _values_for(param: click.Parameter, fast: bool) -> st.SearchStrategy[str] | None:
    """Values for one option, drawn from its type (None: a flag)."""
    t = param.type
    name = param.name
    if isinstance(param, click.Option) and param.is_flag:
        return None
    if name == "dataset":
        return st.one_of(st.sampled_from(DATASETS), texts)
    if name in ("methods",):
        return st.one_of(st.sampled_from(METHOD_LISTS), texts)
    if name == "lambdas":
        return st.one_of(st.lists(numbers, min_size=0, max_size=3).map(",".join), texts)
    if isinstance(t, (OutputPath, OutputFolder)):
        return st.sampled_from(OUT_PATHS)
    if isinstance(t, click.Path):
        return st.sampled_from(IN_PATHS)
    if isinstance(t, click.Choice):
        allowed = [c for c in t.choices if not (name == "executor" and c in ("dask", "process"))]
        if fast and name == "method":
            allowed = [c for c in allowed if c != "benders"]
        return st.one_of(st.sampled_from(allowed), texts)
    if isinstance(t, (Integer, Real)):
        if name == "workers":       # a process pool per example is beyond a fuzzing budget
            return st.sampled_from(["0", "1", "2", "-1", "4294967295", "1e20", "x"])
        if name == "time_limit":
            return st.sampled_from(["0", "1e-12", "0.001", "30", "-5", "nan", "inf", "1e400", "x"])
        return numbers
    return texts


# options whose values reach the network or start a cluster: covered by their own tests
EXCLUDED = {"scheduler"}
BASES = {
    "solve": ["solve", "--dataset", "grid:3x3", "--epsilon", "1", "--eta", "1.5", "--quiet", "--time-limit", "30"],
    "compare": ["compare", "--dataset", "grid:3x3", "--epsilon", "1", "--eta", "1.5", "--quiet", "--methods",
                "expmech,constopt", "--time-limit", "30"],
    "audit": ["audit", "mech.npz"],
    "perturb": ["perturb", "mech.npz", "--seed", "1"],
}
INSTANCE = ("dataset", "cell", "outputs", "epsilon", "eta", "cost", "seed")


@st.composite
def cli_cases(draw: Any, mech: bytes, fast: bool = True) -> Case:
    """Arguments of solve, compare, audit or perturb: a valid run, with options added,
    replaced or dropped, each value drawn from the option's type (``mech``: the bytes of a
    valid mechanism file, ``mech.npz``, for audit and perturb)."""
    command = draw(st.sampled_from(list(BASES)))
    cmd = main.commands[command]
    args = list(BASES[command])
    params = [p for p in cmd.params if isinstance(p, click.Option) and p.name not in EXCLUDED]
    if draw(st.booleans()):        # drop one option of the base (a required one, maybe)
        i = draw(st.integers(1, len(args) - 1))
        del args[i:i + (2 if i + 1 < len(args) and not args[i + 1].startswith("--") else 1)]
    for _ in range(draw(st.integers(0, 4))):
        p = draw(st.sampled_from(params))
        values = _values_for(p, fast)
        args += [p.opts[0]] if values is None else [p.opts[0], draw(values)]
    if command in ("audit", "perturb") and args[1:2] == ["mech.npz"] and draw(st.integers(0, 4)) == 0:
        args[1] = draw(st.sampled_from(IN_PATHS))
    stdin = draw(st.one_of(st.just("0\n1\n"), st.text(max_size=20))) if command == "perturb" else None
    out = _final("--out", args)
    expect = None
    if out is not None and command in ("solve", "compare"):
        suffix = ".npz" if command == "solve" else ".json"
        expect = out if out.endswith(suffix) else out + suffix
    return Case("cli", tuple(args), stdin=stdin, files=(("mech.npz", mech),), owner=_instance_tokens(args),
                expect_out=expect)


def _final(opt: str, args: list[str]) -> str | None:
    """The value click keeps for ``opt`` (the last one given)."""
    value = None
    i = 0
    while i < len(args):
        if args[i] == opt and i + 1 < len(args):
            value = args[i + 1]
            i += 2
            continue
        i += 1
    return value


def _instance_tokens(args: list[str]) -> tuple[str, ...]:
    """The instance options among ``args`` (in order), as the owner repeats them to audit."""
    flags = {"--" + n for n in INSTANCE}
    out: list[str] = []
    i = 1
    while i < len(args):
        if args[i] in flags and i + 1 < len(args):
            out += args[i:i + 2]
            i += 2
        else:
            i += 1
    return tuple(out)


# ------------------------------------------------------------------------ data files
VALID_NODES = [["id", "lon", "lat"]] + [[str(100 + i), f"{24.90 + 0.004 * (i % 4):.4f}",
                                         f"{60.10 + 0.004 * (i // 4):.4f}"] for i in range(12)]
VALID_EDGES = [["u", "v", "length_m"]] + [[str(100 + i), str(100 + j), "440.0"] for i in range(12)
                                          for j in (i + 1, i + 4) if j < 12 and (j != i + 1 or (i % 4) != 3)]


def _csv(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


cells = st.one_of(st.sampled_from(NUMBER_TEXT), texts, st.integers(-10**6, 10**6).map(str))


@st.composite
def _mutated_table(draw: Any, rows: list[list[str]], broken: bool) -> bytes:
    """A valid CSV table, or (``broken``) one with 1 to 4 mutations (a cell, a row or a column
    changed), sometimes truncated or prefixed with stray bytes; the choices come from a seeded
    random source so that valid and broken tables both occur often."""
    rnd = draw(st.randoms(use_true_random=False))
    rows = [list(r) for r in rows]
    if not broken:
        return _csv(rows).encode()
    for _ in range(rnd.choice([1, 1, 2, 3, 4])):
        if not rows:
            break
        kind = rnd.choice(["cell", "cell", "cell", "drop row", "dup row", "drop column", "rename column",
                           "add column", "swap columns", "empty"])
        r, c = rnd.randrange(len(rows)), rnd.randrange(len(rows[0]) or 1)
        if kind == "cell" and len(rows) > 1:
            row = rows[max(r, 1)]
            if row:
                row[min(c, len(row) - 1)] = draw(cells)
        elif kind == "drop row" and len(rows) > 1:
            del rows[max(r, 1)]
        elif kind == "dup row":
            rows.append(list(rows[r]))
        elif kind == "drop column":
            rows = [row[:c] + row[c + 1:] for row in rows]
        elif kind == "rename column" and rows[0]:
            rows[0][min(c, len(rows[0]) - 1)] = draw(texts)
        elif kind == "add column":
            rows = [row + [draw(cells)] for row in rows]
        elif kind == "swap columns" and len(rows[0]) > 1:
            rows = [row[1:] + row[:1] for row in rows]
        elif kind == "empty":
            rows = []
    data = _csv(rows).encode()
    if rnd.random() < 0.1:
        data = data[:rnd.randrange(len(data) + 1)]
    if rnd.random() < 0.1:
        data = rnd.choice([b"\xef\xbb\xbf", b"\xff\xfe", b"\x00", b"\"", b"\xc3("]) + data
    return data


@st.composite
def road_cases(draw: Any) -> Case:
    """``solve --dataset road:nodes.csv,edges.csv:N`` on mutated road-network files."""
    rnd = draw(st.randoms(use_true_random=False))
    which = rnd.choice(["none", "nodes", "edges", "both", "nodes", "edges"])
    nodes = draw(_mutated_table(VALID_NODES, which in ("nodes", "both")))
    edges = draw(_mutated_table(VALID_EDGES, which in ("edges", "both")))
    n = rnd.choice(["3", "5", "12", "2", "4", "1", "13", "x"])
    args = ["solve", "--dataset", f"road:rn.csv,re.csv:{n}", "--epsilon", rnd.choice(["1", "10", "0.1"]),
            "--eta", rnd.choice(["0.5", "1", "inf", "0.01"]), "--cost", rnd.choice(["distance", "travel"]),
            "--seed", str(rnd.randrange(4)), "--quiet", "--out", "m"]
    return Case("road", tuple(args), files=(("rn.csv", nodes), ("re.csv", edges)),
                owner=_instance_tokens(args), expect_out="m.npz")


@st.composite
def embedding_cases(draw: Any) -> Case:
    """``solve --dataset embedding:FILE:N`` on generated .npy (with a word list) or .bin files,
    valid or broken (dtype, shape, NaN, inf, huge or tiny values, repeats, truncation,
    headers, word lists)."""
    rnd = draw(st.randoms(use_true_random=False))
    kind = rnd.choice(["npy", "npy", "bin"])
    rows, dim = rnd.choice([6, 8, 9, 2, 1, 0]), rnd.choice([3, 2, 1, 0])
    base = np.random.default_rng(rnd.randrange(4)).normal(size=(rows, dim))
    files: list[tuple[str, bytes]] = []
    if kind == "npy":
        dtype = rnd.choice(["float64"] * 4 + ["float32", "int64", "complex128", "bool", "U3", "object", "float16"])
        X = base.astype(dtype) if dtype != "object" else base.astype(object)
        shape = rnd.choice(["same"] * 6 + ["flat", "3d", "scalar"])
        X = {"same": X, "flat": X.reshape(-1), "3d": X.reshape(1, *X.shape),
             "scalar": np.asarray(X.flat[0] if X.size else 0)}[shape]
        if X.size and X.dtype.kind == "f" and rnd.random() < 0.3:
            X = X.copy()
            with np.errstate(all="ignore"):
                X.flat[rnd.randrange(X.size)] = rnd.choice([np.nan, np.inf, 1e200, 1e-320, 0.0, 1e300])
        if X.dtype.kind == "f" and rnd.random() < 0.1:
            with np.errstate(all="ignore"):
                X = X * rnd.choice([1e300, 1e-300, 1e154])
        if X.ndim >= 1 and len(X) > 1 and rnd.random() < 0.2:
            X = np.concatenate([X, X[:1]])       # a repeated vector
        buf = io.BytesIO()
        np.save(buf, X, allow_pickle=True)
        data = buf.getvalue()
        files.append(("emb.npy", data if rnd.random() < 0.9 else data[:rnd.randrange(len(data))]))
        n_words = len(X) if X.ndim >= 1 else 1
        text = rnd.choice(["\n".join(f"w{i}" for i in range(n_words))] * 3
                          + ["w0\n", None, "\udcff", "\n".join("w" for _ in range(n_words))])
        if text is not None:
            files.append(("emb.txt", text.encode("utf-8", "surrogateescape")))
        name = "emb.npy"
    else:
        count = rnd.choice([rows, rows, rows + 1, 0, -1])
        head = rnd.choice([f"{count} {dim}"] * 4 + [f"{count}", "x y", "", f"{count} {dim} 1", "99999999999 3"])
        body = b"".join(f"w{i} ".encode() + base[i].astype("<f4").tobytes() + b"\n" for i in range(rows))
        data = head.encode() + b"\n" + body
        if rnd.random() < 0.2:
            data = data[:rnd.randrange(len(data) + 1)]
        files.append(("emb.bin", data))
        name = "emb.bin"
    n = rnd.choice(["2", "4", "5", "9", "1", "x", "2", "4"])
    args = ["solve", "--dataset", f"embedding:{name}:{n}", "--epsilon", "1", "--eta",
            rnd.choice(["1", "3", "inf"]), "--seed", str(rnd.randrange(4)), "--quiet", "--out", "m"]
    return Case("embedding", tuple(args), files=tuple(files), owner=_instance_tokens(args), expect_out="m.npz")


# ------------------------------------------------------------------------ mechanism files
OWNER_INSTANCES = {   # the owner's instance of each base file: solve options and the geometry
    "grid": ("--dataset", "grid:3x3", "--epsilon", "1", "--eta", "1.5"),
    "gauss": ("--dataset", "gaussian:6:2", "--epsilon", "2", "--eta", "1.2", "--outputs", "4"),
}

def base_files(d: Path) -> dict[str, dict[str, np.ndarray]]:
    """Solve each owner's instance once (seed 1) and keep the arrays of its file."""
    out = {}
    for name, opts in OWNER_INSTANCES.items():
        p = d / f"{name}.npz"
        res = CliRunner().invoke(main, ["solve", *opts, "--seed", "1", "--quiet", "--out", str(p)])
        assert res.exit_code == 0, res.output
        with np.load(p) as f:
            out[name] = {k: f[k] for k in f.files}
    return out


FIELDS = ["format", "matrix", "epsilon", "eta", "metric", "points", "edges", "edge_distance", "output_records",
          "cost", "prior", "metadata"]
SCALES = [0.0, -1.0, 1e-300, 1e-3, 0.5, 0.99, 1.0 + 1e-12, 1.01, 2.0, 1000.0, 1e300]


def _retype(a: np.ndarray, kind: str) -> np.ndarray:
    """``a`` as another kind of array (a number array from a string one is all ones)."""
    number = a if a.dtype.kind in "fiub" else np.ones(a.shape)
    if kind == "str":
        return a.astype(str)
    if kind == "float":
        return number.astype(float) + (0.4 if number.dtype.kind in "iu" else 0.0)
    if kind == "int":
        with np.errstate(all="ignore"):
            return np.nan_to_num(number.astype(float)).astype(np.int64)
    if kind == "complex":
        return number.astype(complex) + 1e-3j
    if kind == "bool":
        return number.astype(bool)
    if kind == "object":
        return a.astype(object)
    if kind == "0-d":
        return np.asarray(a.flat[0]) if a.size else np.asarray(0.0)
    if kind == "1-d":
        return a.reshape(-1)
    return a.reshape(1, *a.shape)             # "3-d"


MUTATIONS = ["drop", "retype", "scale", "nonfinite", "add pair", "remove pair", "flip pair", "duplicate pair",
             "tag", "metric", "matrix", "metadata", "entry"] + ["forge"] * 4
TEXTS = ["certdp-mechanism/2", "scaledp-mechanism/2", "certdp-mechanism/3", "", "euclidean", "haversine",
         "precomputed", "manhattan", "Euclidean", "{}", "[]", "{\"seed\": 1}", "{\"seed\": \"1\"}", "[" * 40,
         "{\"a\": NaN}", "not json"]


@st.composite
def _mutation(draw: Any) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """One change to a mechanism file's arrays (the kinds in MUTATIONS)."""
    rnd = draw(st.randoms(use_true_random=False))
    kind, field = rnd.choice(MUTATIONS), rnd.choice(FIELDS)
    i, j, s = rnd.randrange(10**6), rnd.randrange(10**6), rnd.choice(SCALES)
    value = rnd.choice([np.nan, np.inf, -np.inf, -1.0, 0.0, 2.0, 1e-320])
    retype = rnd.choice(["str", "float", "int", "complex", "bool", "object", "0-d", "1-d", "3-d"])
    text = rnd.choice(TEXTS) if rnd.random() < 0.8 else draw(texts)
    forgery = rnd.choice(["precomputed 1e300", "points scaled", "eta scaled", "metric", "epsilon scaled"])
    identity, pairs = rnd.random() < 0.5, rnd.choice(["kept", "dropped", "consistent"])
    matrix = rnd.choice(["identity", "uniform", "rows permuted", "one entry +1e-12", "transposed", "one row only",
                         "negative entry", "scaled 2"])

    def apply(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with np.errstate(all="ignore"):     # a scaled or retyped array may overflow: that is the point
            return change(dict(a))

    def change(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        n = a["matrix"].shape[0] if "matrix" in a and np.ndim(a["matrix"]) == 2 else 1
        E = a.get("edges")
        if kind == "drop":
            a.pop(field, None)
        elif kind == "retype" and field in a:
            a[field] = _retype(np.asarray(a[field]), retype)
        elif kind == "scale" and field in a and np.asarray(a[field]).dtype.kind in "fiu":
            a[field] = np.asarray(a[field]) * s
        elif kind == "nonfinite" and field in a and np.asarray(a[field]).dtype.kind == "f" and np.size(a[field]):
            x = np.array(a[field], dtype=float)
            x.flat[i % x.size] = value
            a[field] = x
        elif kind in ("add pair", "remove pair", "flip pair", "duplicate pair") and isinstance(E, np.ndarray) \
                and E.ndim == 2 and E.shape[1:] == (2,) and "edge_distance" in a:
            dist = np.asarray(a["edge_distance"]).reshape(-1)
            if kind == "add pair":
                p, q = sorted((i % n, j % n))
                a["edges"] = np.vstack([E, [[p, q]]]).astype(E.dtype)
                a["edge_distance"] = np.append(dist, 1.0)
            elif len(E):
                k = i % len(E)
                if kind == "remove pair":
                    a["edges"], a["edge_distance"] = np.delete(E, k, 0), np.delete(dist, k)
                elif kind == "flip pair":
                    F = E.copy()
                    F[k] = F[k][::-1]
                    a["edges"] = F
                else:
                    a["edges"], a["edge_distance"] = np.vstack([E, E[k:k + 1]]), np.append(dist, dist[k])
        elif kind == "tag":
            a["format"] = np.array(text)
        elif kind == "metric":
            a["metric"] = np.array(text)
        elif kind == "metadata":
            a["metadata"] = np.array(text)
        elif kind == "matrix" and "matrix" in a and np.ndim(a["matrix"]) == 2:
            Z = np.array(a["matrix"], dtype=float)
            Z = {"identity": np.eye(*Z.shape), "uniform": np.full(Z.shape, 1.0 / Z.shape[1]),
                 "rows permuted": Z[::-1], "transposed": Z.T, "one row only": Z[:1], "scaled 2": 2 * Z,
                 "one entry +1e-12": Z + np.eye(*Z.shape) * 1e-12, "negative entry": Z - np.eye(*Z.shape) * 1e-3,
                 }[matrix]
            a["matrix"] = Z
        elif kind == "forge" and "points" in a and np.ndim(a["points"]) == 2 and np.ndim(a.get("matrix")) == 2:
            a = _forged(a, forgery, s, identity, pairs)
        elif kind == "entry" and "matrix" in a and np.ndim(a["matrix"]) == 2 and np.size(a["matrix"]):
            Z = np.array(a["matrix"], dtype=float)
            Z.flat[i % Z.size] = value if np.isfinite(value) else Z.flat[i % Z.size] * (1 + 1e-9)
            a["matrix"] = Z
        return a
    apply.__name__ = f"{kind} {field}"
    return apply


def _forged(a: dict[str, np.ndarray], forgery: str, s: float, identity: bool, pairs: str) -> dict[str, np.ndarray]:
    """The issue's attacks: a weaker guarantee in a file that stays whole (its geometry changed,
    the matrix maybe replaced by the identity, which releases every record), its pair list
    kept, dropped, or recomputed by the forger to agree with the forged geometry."""
    m = np.asarray(a["points"]).shape[0]
    if forgery == "precomputed 1e300":
        D = np.full((m, m), 1e300)
        np.fill_diagonal(D, 0.0)
        a = {k: v for k, v in a.items() if k != "points"}
        a.update(metric=np.array("precomputed"), distance_matrix=D)
    elif forgery == "points scaled":
        a["points"] = np.asarray(a["points"], dtype=float) * abs(s or 2.0)
    elif forgery == "eta scaled":
        a["eta"] = np.float64(float(np.asarray(a.get("eta", 1.0), dtype=float).reshape(-1)[0]) * abs(s or 0.5))
    elif forgery == "metric":
        a["metric"] = np.array("haversine")
    else:
        a["epsilon"] = np.float64(float(np.asarray(a.get("epsilon", 1.0), dtype=float).reshape(-1)[0]) * abs(s or 2.0))
    if identity:
        a["matrix"] = np.eye(m, np.shape(a["matrix"])[1])
    if pairs == "dropped":
        a.pop("edges", None)
        a.pop("edge_distance", None)
    elif pairs == "consistent":
        try:
            found = protected_pairs(a)
        except (KeyError, ValueError, TypeError, IndexError):
            found = []
        a["edges"] = np.array([(i, j) for i, j, _ in found], dtype=np.int64).reshape(-1, 2)
        a["edge_distance"] = np.array([d for _, _, d in found], dtype=np.float64)
    return a


@st.composite
def mechanism_cases(draw: Any, bases: dict[str, dict[str, np.ndarray]]) -> Case:
    """A valid mechanism file with 1 to 3 mutations, then audit (from the file alone or
    against the owner's data) or perturb."""
    rnd = draw(st.randoms(use_true_random=False))
    base = rnd.choice(sorted(bases))
    arrays = bases[base]
    for m in draw(st.lists(_mutation(), min_size=1, max_size=3)):
        arrays = m(arrays)
    buf = io.BytesIO()
    try:
        np.savez(buf, **arrays)
    except (TypeError, ValueError):
        np.savez(buf, matrix=np.array([1.0]))
    owner = OWNER_INSTANCES[base]
    how = rnd.choice(["alone", "owner", "perturb", "perturb owner"])
    args = {"alone": ["audit", "mech.npz"], "owner": ["audit", "mech.npz", *owner, "--seed", "1"],
            "perturb": ["perturb", "mech.npz", "--seed", "1"],
            "perturb owner": ["perturb", "mech.npz", "--seed", "1", *owner, "--instance-seed", "1"]}[how]
    return Case("mechanism", tuple(args), stdin="0\n1\n", files=(("mech.npz", buf.getvalue()),),
                owner=owner if "owner" in how else ())


def with_folder(fn: Callable[[Path], Any]) -> Any:
    """Run ``fn`` in a fresh prepared folder."""
    with tempfile.TemporaryDirectory() as t:
        d = Path(t)
        prepare(d)
        return fn(d)


FAMILIES: dict[str, Callable[[dict[str, bytes]], st.SearchStrategy[Case]]] = {
    "CLI arguments (solve, compare, audit, perturb)": lambda b: cli_cases(b["grid.npz"], fast=True),
    "road-network CSV files": lambda b: road_cases(),
    "embedding files (.npy + words, word2vec .bin)": lambda b: embedding_cases(),
    "mechanism files (valid files mutated)": lambda b: mechanism_cases(b["arrays"]),
}


class Blob(bytes):
    """File contents, shown by their size (hypothesis prints the arguments of a failing case)."""

    def __repr__(self) -> str:
        return f"<{len(self)} bytes>"


class Bases(dict):
    """The base files by name, shown by their names."""

    def __repr__(self) -> str:
        return f"<base files {sorted(self)}>"


def base_bytes(d: Path) -> dict[str, Any]:
    """The base mechanism files: their arrays (``arrays``) and the grid file's bytes."""
    arrays = Bases(base_files(d))
    return {"arrays": arrays, "grid.npz": Blob((d / "grid.npz").read_bytes())}


def outcome_class(case: Case) -> str:
    """Run ``case`` in a fresh folder and judge it."""
    return run_and_judge(case)[0]


def run_and_judge(case: Case) -> tuple[str, Outcome]:
    """Run ``case`` in a fresh folder: its outcome class and what it printed."""
    def go(d: Path) -> tuple[str, Outcome]:
        o = run(case, d)
        return judge(case, o, d), o
    return with_folder(go)


def sample(family: str, n: int, bases: dict[str, Any], record: Callable[[Case, str, Outcome], None]) -> None:
    """Draw ``n`` cases of ``family`` (derandomized: the same cases on every run) and record
    each with its outcome class and output."""
    from hypothesis import HealthCheck, Phase, given, settings

    @settings(max_examples=n, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def loop(data: Any) -> None:
        case = data.draw(FAMILIES[family](bases))
        record(case, *run_and_judge(case))

    loop()
