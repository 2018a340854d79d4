"""The one writer (`certdp._io.output_path`, `atomic_target`) as every ``--out`` uses it: a
path that cannot take a file is refused before any work, a write that fails midway leaves
nothing, and each failure is one line with exit status 2."""

from __future__ import annotations

import errno
import json
import math
import os
import resource
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp import _io
from certdp._io import OutputError, atomic_target, output_path
from certdp.cli import main
from certdp.cli.common import OutputFolder, OutputPath

SRC = str(Path(__file__).resolve().parents[1] / "src")

#: a run of each command that writes a file, given its --out
BASE = {
    "solve": ["solve", "--dataset", "grid:3x3", "--epsilon", "1", "--eta", "1.5", "--quiet"],
    "compare": ["compare", "--dataset", "grid:3x3", "--epsilon", "1", "--eta", "1.5", "--methods", "expmech",
                "--quiet"],
    "lrgeo": ["lrgeo", "--grid", "4x4", "--users", "2", "--quiet"],
    "view build": ["view", "build", "table.csv", "--columns", "a", "--domains", "domains.json", "--quiet"],
    "view compare": ["view", "compare", "table.csv", "--columns", "a", "--domains", "domains.json", "--reps", "1",
                     "--queries", "10", "--methods", "identity", "--quiet"],
    "demo": ["demo", "--rows", "2", "--cols", "3"],
    "sanitize": ["sanitize", "--embeddings", "vec.npy", "--epsilon", "1", "--vocabulary", "4", "--method", "expmech",
                 "--quiet"],
}
OUT = {"sanitize": "--save"}    # the option naming the file a command writes, when it is not --out


def _commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    found = {}
    for name, cmd in group.commands.items():
        full = f"{prefix}{name}"
        found[full] = cmd
        if isinstance(cmd, click.Group):
            found.update(_commands(cmd, full + " "))
    return found


def test_every_output_option_uses_the_one_writer_and_every_number_option_is_bounded():
    """The rule is in the option types, so a new command cannot forget it; BASE runs each."""
    from certdp.cli.common import Integer, Real

    writers = set()
    for name, cmd in _commands(main).items():
        for p in cmd.params:
            assert p.type is not click.INT and p.type is not click.FLOAT, (name, p.name)
            if isinstance(p.type, click.types.IntParamType):
                assert isinstance(p.type, Integer), (name, p.name)
            if isinstance(p.type, click.types.FloatParamType):
                assert isinstance(p.type, Real), (name, p.name)
            if isinstance(p.type, (OutputPath, OutputFolder)):
                writers.add(name)
            elif {"--out", "--save", "--plot", "--out-dir"} & set(p.opts):
                raise AssertionError(f"{name} {p.opts[0]} writes a file without the one writer's option type")
    assert writers == set(BASE)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "table.csv").write_text("a,b\n" + "".join(f"{i % 5},{i % 3}\n" for i in range(60)))
    (tmp_path / "domains.json").write_text('{"a": {"values": [0, 1, 2, 3, 4]}}')
    np.save(tmp_path / "vec.npy", np.random.default_rng(0).normal(size=(6, 2)))
    (tmp_path / "vec.txt").write_text("a\nb\nc\nd\ne\nf\n")
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    os.mkfifo(tmp_path / "fifo.json")
    monkeypatch.chdir(tmp_path)
    return tmp_path


BAD_FILES = {   # --out value -> what the message says
    "": "empty path",
    "adir": "folder",
    "adir/": "folder",
    "newdir/": "folder",
    ".": "folder",
    "/dev/null": "special file",
    "fifo.json": "special file",
    "x" * 260: "255 bytes",
    "afile/m": "not a folder",
    "/sys/certdp-test": "cannot be written",
}


@pytest.mark.parametrize("command", [c for c in BASE if c != "demo"])
@pytest.mark.parametrize("value", list(BAD_FILES), ids=lambda v: v[:20] or "empty")
def test_an_output_that_cannot_be_a_file_is_one_error_before_any_work(folder, command, value):
    if value.startswith("/sys") and os.access("/sys", os.W_OK) and os.geteuid() != 0:
        pytest.skip("/sys is writable here")
    before = sorted(p.name for p in folder.iterdir())
    res = CliRunner().invoke(main, [*BASE[command], OUT.get(command, "--out"), value], input="a b c\n")
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"Error: {OUT.get(command, '--out')}") and res.output.count("\n") == 1, res.output
    assert BAD_FILES[value] in res.output
    assert sorted(p.name for p in folder.iterdir()) == before
    assert not Path("/dev/null.npz").exists() and not Path("/dev/null.json").exists()


def test_a_folder_option_refuses_a_file(folder):
    res = CliRunner().invoke(main, [*BASE["demo"], "--out", "afile"])
    assert res.exit_code == 2 and res.output.startswith("Error: --out: afile is not a folder")


def test_the_suffix_is_added_and_missing_folders_made(folder):
    assert output_path("m", ".npz") == Path("m.npz")
    assert output_path("m.npz", ".npz") == Path("m.npz")
    assert output_path("a/b/m", ".json") == Path("a/b/m.json") and not Path("a").exists()
    with atomic_target("a/b/m.json", ".json") as tmp:
        Path(tmp).write_text("{}")
    assert Path("a/b/m.json").read_text() == "{}"
    assert oct(Path("a/b/m.json").stat().st_mode & 0o777) == oct(0o666 & ~_io._umask())


@pytest.mark.parametrize("code,says", [(errno.ENOSPC, "disk full"), (errno.EROFS, "read-only"),
                                       (errno.EACCES, "Permission denied"), (errno.EIO, "error")])
def test_a_write_that_fails_midway_is_one_error_and_leaves_nothing(folder, code, says):
    with pytest.raises(OutputError, match=says):
        with atomic_target("m.npz", ".npz") as tmp:
            Path(tmp).write_bytes(b"partial")
            raise OSError(code, os.strerror(code))
    assert not any(p.name.startswith(".tmp-") or p.name == "m.npz" for p in folder.iterdir())


def test_a_read_only_folder_is_refused_before_the_work(folder, monkeypatch):
    def read_only(*a, **kw):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))
    monkeypatch.setattr(_io, "_create_registered", read_only)
    res = CliRunner().invoke(main, [*BASE["solve"], "--out", "m"])
    assert res.exit_code == 2 and "read-only" in res.output and res.output.count("\n") == 1


def test_a_file_size_limit_hit_while_writing_is_one_error_and_leaves_nothing(tmp_path):
    """A real failed write: the process may write at most 1,000 bytes per file (as on a full
    disk, the write fails after the solve)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
    env = {**os.environ, "PYTHONPATH": SRC, "PYTHONDONTWRITEBYTECODE": "1"}
    res = subprocess.run([sys.executable, "-m", "certdp.cli", *BASE["solve"], "--out", str(tmp_path / "m")],
                         capture_output=True, text=True, env=env, preexec_fn=limit, timeout=300)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("Error: cannot write") and "file size limit" in res.stderr
    assert "Traceback" not in res.stderr and res.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_a_mechanism_saved_from_python_follows_the_same_rule(tmp_path):
    from certdp import build_space, parse_dataset, solve

    m = solve(build_space(parse_dataset("grid:2x3"), epsilon=1.0, eta=1.5, seed=0)).mechanism
    for bad in ("/dev/null", str(tmp_path) + "/", str(tmp_path)):
        with pytest.raises(OutputError):
            m.save(bad)
    assert not Path("/dev/null.npz").exists() and not Path(str(tmp_path) + ".npz").exists()
    assert m.save(tmp_path / "m") == tmp_path / "m.npz"
    assert np.load(tmp_path / "m.npz")["matrix"].shape == (6, 6)


READERS = {   # a command reading a file the user names, with {} for the name
    "audit": ["audit", "{}"],
    "perturb --input": ["perturb", "mech.npz", "--input", "{}"],
    "road nodes": ["solve", "--dataset", "road:{},edges.csv:3", "--epsilon", "1", "--eta", "1"],
    "embedding": ["solve", "--dataset", "embedding:{}:3", "--epsilon", "1", "--eta", "1"],
}


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("value", ["nofile", "adir", "fifo.json", "/dev/null", "x" * 300])
def test_a_file_to_read_that_is_not_one_is_one_error(folder, reader, value):
    """A missing file, a folder, a FIFO (which would block the read), a device or a name too
    long: one line naming it, exit status 2 (`_io.input_file`)."""
    from certdp import build_space, parse_dataset, solve

    solve(build_space(parse_dataset("grid:2x2"), epsilon=1.0, eta=1.5, seed=0)).mechanism.save("mech.npz")
    args = [a.replace("{}", value) for a in READERS[reader]]
    res = CliRunner().invoke(main, args, input="0\n")
    assert res.exit_code == 2 and res.output.startswith("Error:") and res.output.count("\n") == 1, res.output
    assert "Traceback" not in res.output


def _nesting(v) -> int:
    """The depth of brackets of a parsed JSON value."""
    if isinstance(v, list):
        return 1 + max((_nesting(x) for x in v), default=0)
    if isinstance(v, dict):
        return 1 + max((_nesting(x) for x in v.values()), default=0)
    return 0


_json_values = st.recursive(st.none() | st.integers() | st.text(alphabet='[]{}"\\ab\u00e9'),
                            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\a'), c,
                                                                                    max_size=3), max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(value=_json_values, chunk=st.sampled_from([1, 2, 3, 7, 1 << 22]))
def test_json_depth_is_the_parsed_nesting_whatever_the_strings_and_chunks(value, chunk):
    """Brackets, quotes and backslashes inside strings, and runs of backslashes across the
    scan's chunk boundaries, never change the depth it reads."""
    text = json.dumps(value, ensure_ascii=False)
    old = _io.DEPTH_CHUNK
    _io.DEPTH_CHUNK = chunk
    try:
        assert _io.json_depth(text) == _nesting(value)
    finally:
        _io.DEPTH_CHUNK = old


def test_json_depth_is_linear_in_an_unclosed_string_of_escaped_quotes():
    """'"' + '\\"' x n made the string regex backtrack quadratically (94 s at 3.9 KB); one pass
    here, so 2 MB of it is read (as one string, no bracket) at once."""
    assert _io.json_depth('"' + '\\"' * 1_000_000) == 0
    with pytest.raises(ValueError, match="not JSON|JSON"):
        _io.load_json('"' + '\\"' * 1_000_000, "a file")


@settings(max_examples=200, deadline=None)
@given(value=st.dictionaries(st.text(alphabet="abc", min_size=1, max_size=2), _json_values, min_size=1, max_size=4),
       data=st.data())
def test_json_with_a_key_twice_in_one_object_is_refused(value, data):
    """JSON keeps the last of two equal keys, so a file could read one way to another parser and
    another way to certdp: an object that holds a key twice is refused, anywhere it nests."""
    assert _io.load_json(json.dumps(value), "a file") == value
    key = data.draw(st.sampled_from(sorted(value)))
    text = json.dumps(value)
    twice = "{" + json.dumps(key) + ": 0, " + text[1:]
    with pytest.raises(ValueError, match="twice"):
        _io.load_json(twice, "a file")
    with pytest.raises(ValueError, match="twice"):
        _io.load_json('{"x": [1, ' + twice + "]}", "a file")


@settings(max_examples=100, deadline=None)
@given(digits=st.integers(309, 2000), sign=st.sampled_from([1, -1]))
def test_validators_refuse_integers_beyond_float_range_with_a_value_error(digits, sign):
    """A JSON integer of hundreds of digits is a number float() cannot hold (OverflowError):
    every validator refuses it as out of range instead."""
    from certdp import _validate as V

    big = sign * 10 ** digits
    for check in (V.positive_float, V.finite_float, V.nonneg_float, V.open_unit):
        with pytest.raises(ValueError):
            check("x", big)


@settings(max_examples=100, deadline=None)
@given(mantissa=st.integers(1, 9), exponent=st.integers(309, 5000), sign=st.sampled_from(["", "-"]))
def test_json_numbers_beyond_float_range_are_refused_naming_the_file(mantissa, exponent, sign):
    """Python's json reads 1e999 as inf, which certdp would then write back as invalid JSON or
    compute with: a number past float64 is refused where the file is read, naming it."""
    with pytest.raises(ValueError, match="a ledger.*beyond float64"):
        _io.load_json(f'{{"epsilon": {sign}{mantissa}.5e{exponent}}}', "a ledger")


@settings(max_examples=400, deadline=None)
@given(whole=st.integers(1, 330), frac=st.integers(0, 5), exp=st.none() | st.integers(-999, 999),
       pad=st.integers(0, 2), upper=st.booleans(), others=st.integers(0, 3))
def test_json_numbers_are_refused_exactly_when_they_leave_float64(whole, frac, exp, pad, upper, others):
    """Any float literal (up to 330 integer digits, exponents of 1-5 digits with leading zeros),
    among ordinary numbers: load_json refuses it exactly when float() makes it infinite, and
    otherwise reads the value float() reads, whether the text takes json's own float reader or
    the checked one."""
    literal = "7" * whole + ("." + "3" * frac if frac else "")
    if exp is not None:
        literal += ("E" if upper else "e") + ("-" if exp < 0 else "") + "0" * pad + str(abs(exp))
    if exp is None and not frac:
        literal += ".0"                     # a float literal, not a (possibly huge) integer
    text = "[" + ", ".join(["1.5"] * others + [literal]) + "]"
    want = float(literal)
    if math.isinf(want):
        with pytest.raises(ValueError, match="beyond float64"):
            _io.load_json(text, "a file")
    else:
        assert _io.load_json(text, "a file")[-1] == want


@settings(max_examples=200, deadline=None)
@given(digits=st.integers(1, 420), lead=st.sampled_from("123456789"), sign=st.sampled_from(["", "-"]))
def test_json_integers_are_refused_exactly_when_they_leave_float64(digits, lead, sign):
    """An integer literal of any length up to 420 digits: refused exactly when its magnitude is
    above float64's largest (every number certdp reads is used as a float somewhere)."""
    literal = sign + lead + "0" * (digits - 1)
    text = '{"n": [2, ' + literal + "]}"
    if abs(int(literal)) > sys.float_info.max:
        with pytest.raises(ValueError, match="beyond float64"):
            _io.load_json(text, "a file")
    else:
        assert _io.load_json(text, "a file")["n"][-1] == int(literal)


@pytest.mark.parametrize("when", ["after creating", "after replacing", "in the probe"])
def test_a_stop_at_each_step_of_a_write_leaves_no_temporary_file(tmp_path, when):
    """A stop (abandon_writes, as the signal handler calls it) right after a write's temporary
    file is created, right after it replaced its target, or inside the folder's probe: no
    temporary file is left, and the target counts as written exactly when it was replaced. (A
    stop between the file's creation and its registration left it behind.)"""
    code = f"""
import os, sys, json
sys.path.insert(0, {SRC!r})
from pathlib import Path
from certdp import _io
when, folder = {when!r}, Path({str(tmp_path)!r})
real_open, real_replace = os.open, os.replace
def stop():
    print(json.dumps([str(p) for p in _io.abandon_writes()])); sys.stdout.flush(); os._exit(0)
def opening(*a, **k):
    fd = real_open(*a, **k)
    if when != "after replacing":
        os.close(fd); stop()
    return fd
def replacing(*a, **k):
    real_replace(*a, **k); stop()
_io.os.open, _io.os.replace = opening, replacing
if when == "in the probe":
    _io.output_path(folder / "m.json")
with _io.atomic_target(folder / "m.json", ".json") as tmp:
    Path(tmp).write_text("{{}}")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    written = json.loads(r.stdout)
    left = sorted(p.name for p in tmp_path.iterdir())
    if when == "after replacing":
        assert left == ["m.json"] and written == [str(tmp_path / "m.json")]
    else:
        assert left == [] and written == []
