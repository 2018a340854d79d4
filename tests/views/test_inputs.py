"""Domain files and `view build` arguments from generators, through the real command: each run
either builds a view that counts the rows where the declared domain says they fall, or fails
with one `Error:` line, exit status 2 and nothing written; never a traceback."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certdp.cli import main
from certdp.views import load_view
from certdp.views.view import Workload

ROWS = 60
RNG = np.random.default_rng(3)
TABLE = pd.DataFrame({"a": RNG.integers(0, 10, ROWS), "b": RNG.integers(-20, 21, ROWS) / 4,
                      "c": RNG.choice(["x", "y", "z"], ROWS)})
GOOD_DOMAINS = {"a": {"low": 0, "high": 10, "bins": 10}, "b": {"low": -5, "high": 5, "bins": 8},
                "c": {"values": ["x", "y", "z"]}}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("inputs")
    TABLE.to_csv(d / "t.csv", index=False)
    (d / "d.json").write_text(json.dumps(GOOD_DOMAINS))
    return d


def _run(args: list[str]):
    res = CliRunner().invoke(main, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert "Traceback" not in res.output, res.output
    return res


def _one_error(res) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error:"), res.output
    return lines[0]


# --------------------------------------------------------------- the reported failures
@pytest.mark.parametrize("args,match", [
    (["--method", "mst", "--epsilon", "1e-300"], "epsilon"),
    (["--method", "aim", "--epsilon", "1e-300"], "epsilon"),
    (["--method", "dawa", "--epsilon", "1e300"], "epsilon"),
    (["--method", "ripost", "--epsilon", "nan"], "epsilon"),
    (["--method", "privtree", "--epsilon", "inf"], "epsilon"),
])
def test_epsilons_outside_the_range_are_refused_before_any_work(folder, args, match):
    out = folder / "v_eps.json"
    res = _run(["view", "build", str(folder / "t.csv"), "--columns", "a,c", "--domains", str(folder / "d.json"),
                "--out", str(out), *args])
    assert match in _one_error(res) and not out.exists()


@pytest.mark.parametrize("domain,match", [
    ({"low": -1e308, "high": 1e308}, "cannot be binned"),                  # high - low overflows
    ({"low": 1e16, "high": 1e16 + 4, "bins": 8}, "cannot be binned"),       # neighbouring edges round to one
    ({"values": "xyz"}, "must be a list"),                                  # not three values x, y, z
    ({"values": ["x", "y", "x"]}, "repeats"),
    ({"values": [1, "1"]}, "repeats"),
    ({"low": 0, "high": 10, "bin": 5}, "unknown keys"),                     # a misspelt bins
    ({"low": "0", "high": 10}, "must be a number"),
    ({"low": 0, "high": 10, "bins": 2.5}, "integer"),
    ({"values": ["x"], "low": 0, "high": 1}, "not both"),
    ({"values": [["x"]]}, "string, an integer"),
    ([1, 2], "must be an object"),
])
def test_bad_domains_are_one_clear_error(folder, tmp_path, domain, match):
    (tmp_path / "d.json").write_text(json.dumps({"a": domain, "c": GOOD_DOMAINS["c"]}))
    out = tmp_path / "v.json"
    res = _run(["view", "build", str(folder / "t.csv"), "--columns", "a,c", "--domains", str(tmp_path / "d.json"),
                "--out", str(out), "--seed", "1"])
    line = _one_error(res)
    assert match in line and "--domains" in line and not out.exists()


def test_deeply_nested_domains_file_is_refused(folder, tmp_path):
    (tmp_path / "d.json").write_text('{"a": {"values": ' + "[" * 50_000 + "]" * 50_000 + "}}")
    res = _run(["view", "build", str(folder / "t.csv"), "--columns", "a", "--domains", str(tmp_path / "d.json"),
                "--out", str(tmp_path / "v.json")])
    assert "nests" in _one_error(res)


def test_a_wide_domain_that_float64_can_bin_counts_right(folder, tmp_path):
    """+-1e307 is wide but representable: the values 0..9 fall in the middle bin, as the
    declared bins say (with +-1e308 every value used to land in bin 0)."""
    (tmp_path / "d.json").write_text(json.dumps({"a": {"low": -1e307, "high": 1e307, "bins": 4}}))
    res = _run(["view", "build", str(folder / "t.csv"), "--columns", "a", "--domains", str(tmp_path / "d.json"),
                "--method", "identity", "--epsilon", "1e6", "--seed", "1", "--out", str(tmp_path / "v.json")])
    assert res.exit_code == 0, res.output
    est = load_view(tmp_path / "v.json").answer(["a=-1e307..-1", "a=0..1"])["estimate"]
    assert abs(est[0]) < 0.01 and abs(est[1] - ROWS) < 0.01


# ------------------------------------------------------------ domain files, generated
_wild_numbers = st.one_of(st.sampled_from([1e308, -1e308, 1e307, 1e-300, 5e-324, 1e16, 2.0**53 + 1, 0.1, 0.3]),
                         st.floats(), st.integers(-2**70, 2**70))
_scalars = st.one_of(st.integers(-3, 12), st.floats(-3, 12), st.sampled_from(["x", "y", "z", "w", "1", "<overflow>"]),
                     st.booleans(), st.none())
_flags = st.one_of(st.booleans(), st.integers(0, 1), st.none(), st.just("yes"))
_valid_numeric = st.builds(lambda lo, width, bins, over: {"low": lo, "high": lo + width, "bins": bins, **over},
                           st.one_of(st.integers(-25, 10), st.floats(-25, 10)), st.one_of(st.integers(1, 40),
                                                                                         st.floats(0.01, 40)),
                           st.integers(1, 100), st.sampled_from([{}, {"overflow": True}, {"overflow": False}]))
_wild_numeric = st.fixed_dictionaries({"low": st.one_of(st.integers(-25, 25), st.floats(-30, 30), _wild_numbers),
                                       "high": st.one_of(st.integers(-25, 25), st.floats(-30, 30), _wild_numbers)},
                                      optional={"bins": st.one_of(st.integers(-2, 150), st.floats(0, 200),
                                                                  st.text(max_size=2), st.booleans()),
                                                "overflow": _flags})
_valid_categorical = st.builds(lambda vals, over: {"values": vals, **over},
                               st.lists(st.one_of(st.sampled_from(["x", "y", "z", "w"]), st.integers(-3, 12)),
                                        min_size=1, max_size=8, unique_by=str),
                               st.sampled_from([{}, {"overflow": True}]))
_wild_values = st.one_of(st.lists(_scalars, max_size=7), st.text("xyz", max_size=4), _scalars,
                         st.dictionaries(st.text(max_size=2), _scalars, max_size=2))
_wild_categorical = st.fixed_dictionaries({"values": _wild_values}, optional={"overflow": _flags})
_domain = st.one_of(_valid_numeric, _valid_numeric, _valid_categorical, _valid_categorical, _wild_numeric,
                    _wild_categorical, _valid_numeric.map(lambda d: {**d, "bin": 3}), st.lists(_scalars, max_size=2),
                    _scalars)


@st.composite
def domain_files(draw) -> tuple[str, list[str]]:
    cols = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
    doms = {c: draw(_domain) for c in cols}
    if draw(st.integers(0, 9)) == 0:
        doms["zz"] = draw(_domain)
    return json.dumps(doms, allow_nan=True), cols


def _codes(values: list, dom: dict) -> tuple[list[int | None], int]:
    """The code of each value under the declared domain (None: outside it) and the number of
    codes before any overflow bin. Numeric bins are ``[e_k, e_k+1)`` (the last one closed) with
    the edges ``low + ((high - low) k) / bins`` of docs/views.md, which are first checked to be
    the declared real edges up to rounding."""
    if "values" in dom:
        vals = dom["values"]
        return [next((k for k, v in enumerate(vals) if v == x), None) for x in values], len(vals)
    lo, hi, b = float(dom["low"]), float(dom["high"]), dom.get("bins", 100)
    edges = [lo + ((hi - lo) * k) / b for k in range(b)] + [hi]
    size = max(abs(Fraction(lo)), abs(Fraction(hi)))
    for k, e in enumerate(edges):
        exact = Fraction(lo) + (Fraction(hi) - Fraction(lo)) * k / b
        assert math.isfinite(e) and abs(Fraction(e) - exact) <= size * Fraction(1, 10**12), (dom, k, e)
    assert all(x < y for x, y in zip(edges, edges[1:])), dom
    codes: list[int | None] = []
    for x in values:
        if not isinstance(x, (int, float)) or math.isnan(x) or not lo <= x <= hi:
            codes.append(None)
        else:
            codes.append(b - 1 if x == hi else max(k for k in range(b) if edges[k] <= x))
    return codes, b


def _domain_property(folder: Path, tmp: Path, text: str, cols: list[str]) -> None:
    (tmp / "d.json").write_text(text)
    out = tmp / "v.json"
    out.unlink(missing_ok=True)                     # one folder serves every generated case
    res = _run(["view", "build", str(folder / "t.csv"), "--columns", ",".join(cols), "--domains", str(tmp / "d.json"),
                "--method", "identity", "--epsilon", "1e6", "--seed", "1", "--overflow", "bin", "--quiet",
                "--out", str(out)])
    if res.exit_code != 0:
        _one_error(res)
        assert not out.exists()
        return
    doms = json.loads(text)
    v = load_view(out)
    assert list(v.columns) == cols
    for j, c in enumerate(cols):
        codes, base = _codes(TABLE[c].tolist(), doms[c])
        outside = sum(k is None for k in codes)
        size = base + 1                  # --overflow bin: every column has its bin, used or not
        assert v.shape[j] == size, (c, doms[c], v.shape)
        want = [sum(k == i for k in codes) for i in range(base)] + [outside] * (size - base)
        lo = np.zeros((size, len(cols)), dtype=np.int64)
        hi = np.tile(np.asarray(v.shape, dtype=np.int64), (size, 1))
        lo[:, j], hi[:, j] = np.arange(size), np.arange(size) + 1
        est = v.estimates(Workload(lo, hi, np.arange(size), size))
        assert np.allclose(est, want, atol=0.01), (c, doms[c], est, want)


@given(domain_files())
@settings(max_examples=40, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_domain_files(folder, tmp_path, case):
    _domain_property(folder, tmp_path, *case)


@pytest.mark.slow
@given(domain_files())
@settings(max_examples=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_domain_files_many(folder, tmp_path, case):
    _domain_property(folder, tmp_path, *case)


# ---------------------------------------------------------- build arguments, generated
_wild_text = st.one_of(st.floats().map(repr), st.integers(-5, 10).map(str),
                       st.sampled_from(["nan", "inf", "-inf", "-0", "1e-300", "1e400", "abc", "", "0x10", "1e-9", "1e6",
                                        "1e-10", "2e6", "99999999999999999999"]))
_eps_text = st.one_of(st.floats(0.01, 20).map(repr), st.floats(0.01, 20).map(repr), st.sampled_from(["0.5", "1", "3"]),
                      _wild_text)
_share_text = st.one_of(st.floats(0.05, 0.95).map(repr), st.floats(0.05, 0.95).map(repr), _wild_text)
_int_text = st.one_of(st.integers(1, 8).map(str), st.integers(1, 8).map(str),
                      st.sampled_from(["0", "99999999999999999999", "1.5", "x", "-1"]))
FAST = ["ripost", "privtree", "hdpview", "identity", "hdmm"]
ALL = FAST * 3 + ["dawa", "mst", "aim", "privbayes"]        # the model-based ones take seconds to minutes


@st.composite
def build_args(draw, methods) -> list[str]:
    args = ["--method", draw(st.sampled_from(methods)), "--epsilon", draw(_eps_text)]
    valid_cols = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True).map(",".join)
    cols = draw(st.one_of(valid_cols, valid_cols, valid_cols, st.sampled_from(["", "a,a", "a,nosuch", ",", "a, c"])))
    args += ["--columns", cols]
    for opt, strat in [("--alpha", _share_text), ("--gamma", _share_text), ("--beta", _share_text), ("--k", _int_text),
                       ("--os", _int_text), ("--query-columns", _int_text), ("--seed", _int_text),
                       ("--variant", st.sampled_from(["paper", "improved", "other"])),
                       ("--leaf-budget", st.sampled_from(["rest", "fixed", "all"])),
                       ("--overflow", st.sampled_from(["refuse", "bin", "drop"]))]:
        if draw(st.integers(0, 4)) == 0:
            args += [opt, draw(strat)]
    if "--seed" not in args:
        args += ["--seed", "1"]
    return args


def _args_property(folder: Path, tmp: Path, args: list[str]) -> None:
    out = tmp / "v.json"
    out.unlink(missing_ok=True)
    res = _run(["view", "build", str(folder / "t.csv"), "--domains", str(folder / "d.json"), "--quiet", "--json",
                "--out", str(out), *args])
    if res.exit_code != 0:
        _one_error(res)
        assert not out.exists()
        return
    v = load_view(out)
    eps = float(args[args.index("--epsilon") + 1])
    assert v.epsilon == eps and 0 < v.spent <= eps and v.method == args[1]
    cols = [c.strip() for c in args[args.index("--columns") + 1].split(",")]
    assert list(v.columns) == cols
    assert np.isfinite(v.answer(f"{cols[0]}=" + ("x" if cols[0] == "c" else "0..3"))["estimate"]).all()


@given(build_args(FAST))
@settings(max_examples=40, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_build_arguments(folder, tmp_path, args):
    _args_property(folder, tmp_path, args)


@pytest.mark.slow
@given(build_args(ALL))
@settings(max_examples=1000, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_build_arguments_many(folder, tmp_path, args):
    _args_property(folder, tmp_path, args)


@pytest.mark.parametrize("method", ["ripost", "hdpview", "privtree", "identity"])
def test_a_domain_beyond_float_range_is_built_or_refused_in_one_line(tmp_path, method):
    """160 columns of 100 bins: 10^320 cells, past float64. The decomposition methods build (the
    count is printed as 10^320; PrivTree halves one axis at a time past 16), the dense ones
    refuse; none leaves a traceback or a warning."""
    cols = [f"c{i}" for i in range(160)]
    rng = np.random.default_rng(0)
    pd.DataFrame(rng.integers(0, 100, (5, 160)), columns=cols).to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "d.json").write_text(json.dumps({c: {"low": 0, "high": 100, "bins": 100} for c in cols}))
    out = tmp_path / "v.json"
    res = _run(["view", "build", str(tmp_path / "t.csv"), "--columns", ",".join(cols), "--domains",
                str(tmp_path / "d.json"), "--method", method, "--epsilon", "1", "--out", str(out)])
    assert "Traceback" not in res.output and "Warning" not in res.output, res.output
    if method == "identity":
        assert res.exit_code == 2 and "10^320 cells" in res.output and not out.exists()
    else:
        assert res.exit_code == 0 and "10^320 cells" in res.output, res.output
        assert load_view(out).shape == (100,) * 160
