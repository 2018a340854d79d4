"""View files: queried from the file alone, and checked on load. Valid files of every kind are
mutated by a generator; whatever comes out must either be refused with one clear error or
answer exactly what its own numbers say (recomputed here without certdp), never a traceback."""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certdp.cli import main
from certdp.views import Domain, MarginalView, SampleView, ViewFileError, build_view, load_view
from certdp.views.tensor import CountTensor
from certdp.views.view import Workload
from certdp.views.viewfile import content_digest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _tensor() -> CountTensor:
    rng = np.random.default_rng(5)
    n = 300
    df = pd.DataFrame({"age": rng.integers(0, 60, n), "sex": rng.choice(["F", "M"], n),
                       "city": rng.choice(["A", "B", "C", "D"], n)})
    doms = {"age": Domain.numeric("age", 0, 60, 6), "sex": Domain.categorical("sex", ["F", "M"]),
            "city": Domain.categorical("city", ["A", "B", "C"])}
    return CountTensor.from_frame(df, ["age", "sex", "city"], doms, overflow="bin")     # city D: <overflow>


def _marginal_view(t: CountTensor) -> MarginalView:
    dense = np.zeros(t.shape)
    dense[tuple(t.coords.T)] = t.counts
    axes_all = tuple(range(dense.ndim))
    return MarginalView(t.domains, lambda ax: dense.sum(axis=tuple(a for a in axes_all if a not in ax)), "mst",
                        1.0, 1.0, {"iters": 10}, {"mst: one-way marginals": 1.0}, n_blocks=3)


@pytest.fixture(scope="module")
def base_files(tmp_path_factory) -> dict[str, dict]:
    """One valid file of each kind: RIPOST leaves with one noise scale per leaf, Identity cells
    with one scale, HDMM with its Kronecker factors, synthetic records, marginals."""
    t = _tensor()
    d = tmp_path_factory.mktemp("views")
    views = {"ripost": build_view(t, "ripost", 1.0, rng=1), "identity": build_view(t, "identity", 1.0, rng=2),
             "hdmm": build_view(t, "hdmm", 1.0, rng=3),
             "records": SampleView(t.domains, t.coords, t.counts, "privbayes", 1.0, 1.0, {}, {"privbayes": 1.0}),
             "marginals": _marginal_view(t)}
    out = {}
    for k, v in views.items():
        p = v.save(d / f"{k}.json")
        out[k] = json.loads(p.read_text())
    return out


# ------------------------------------------------------------ the oracle (no certdp code)
def _sizes(d: dict) -> list[int]:
    return [(len(x["values"]) if "values" in x else x.get("bins", 100)) + (1 if x.get("overflow") else 0)
            for x in d["domains"]]


def _expected(d: dict, boxes: list[list[tuple[np.ndarray, np.ndarray]]]) -> tuple[np.ndarray, np.ndarray]:
    """Estimates and noise deviations of queries (each a list of boxes) from the file's numbers."""
    shape = _sizes(d)
    est, sd = np.zeros(len(boxes)), np.full(len(boxes), np.nan)
    sl = lambda lo, hi: tuple(slice(int(a), int(b)) for a, b in zip(lo, hi))   # noqa: E731
    if "values" in d:
        dense = np.zeros(shape)
        for lo, hi, v in zip(d["lo"], d["hi"], d["values"]):
            cells = dense[sl(lo, hi)]
            dense[sl(lo, hi)] += v / cells.size
        for i, q in enumerate(boxes):
            est[i] = sum(dense[sl(lo, hi)].sum() for lo, hi in q)
        nm = d["noise_model"]
        if nm and nm["kind"] == "laplace":
            scales = np.broadcast_to(np.asarray(nm["scale"], float), (len(d["values"]),))
            for i, q in enumerate(boxes):
                var = 0.0
                for (llo, lhi), b in zip(zip(d["lo"], d["hi"]), scales):
                    leaf = np.zeros(shape)
                    leaf[sl(llo, lhi)] = 1.0
                    f = sum(leaf[sl(lo, hi)].sum() for lo, hi in q) / leaf.sum()
                    var += f * f * 2 * b * b
                sd[i] = math.sqrt(var)
        elif nm and nm["kind"] == "kronecker-laplace":
            P = np.ones((1, 1))
            for f in nm["strategy"]:                 # the read-back, a left inverse by the normal equations
                a = np.asarray(f, float)
                P = np.kron(P, np.linalg.solve(a.T @ a, a.T))
            for i, q in enumerate(boxes):
                ind = np.zeros(shape)
                for lo, hi in q:
                    ind[sl(lo, hi)] = 1.0
                sd[i] = math.sqrt(2 * nm["scale"] ** 2 * float(np.sum((P.T @ ind.ravel()) ** 2)))
    elif "records" in d:
        dense = np.zeros(shape)
        for c, n in zip(d["records"]["coords"], d["records"]["counts"]):
            dense[tuple(c)] += n
        for i, q in enumerate(boxes):
            est[i] = sum(dense[sl(lo, hi)].sum() for lo, hi in q)
    else:
        table = {tuple(m["axes"]): np.asarray(m["values"], float).reshape([shape[a] for a in m["axes"]])
                 for m in d["marginals"]}
        for i, q in enumerate(boxes):
            for lo, hi in q:
                axes = tuple(j for j in range(len(shape)) if lo[j] > 0 or hi[j] < shape[j])
                m = table[axes or (0,)]
                est[i] += m[sl([lo[a] for a in axes], [hi[a] for a in axes])].sum()
    return est, sd


def _queries(shape: tuple[int, ...], seed: int) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Random single boxes (each restricting one or two columns), and queries of two disjoint
    boxes (a box cut in two along a column)."""
    rng = np.random.default_rng(seed)
    d = len(shape)
    out = []
    for _ in range(6):
        lo, hi = np.zeros(d, int), np.asarray(shape, int).copy()
        for a in rng.choice(d, size=min(d, int(rng.integers(1, 3))), replace=False):
            w = int(rng.integers(1, shape[a] + 1))
            lo[a] = int(rng.integers(0, shape[a] - w + 1))
            hi[a] = lo[a] + w
        out.append([(lo, hi)])
        a = int(rng.integers(d))
        if hi[a] - lo[a] >= 3:
            mid = int(rng.integers(lo[a] + 1, hi[a]))
            left_hi, right_lo = hi.copy(), lo.copy()
            left_hi[a] = mid
            right_lo[a] = mid + 1 if mid + 1 < hi[a] else mid
            out.append([(lo.copy(), left_hi), (right_lo, hi.copy())])
    return out


def _workload(queries) -> Workload:
    lo = np.asarray([b[0] for q in queries for b in q], dtype=np.int64)
    hi = np.asarray([b[1] for q in queries for b in q], dtype=np.int64)
    owner = np.asarray([i for i, q in enumerate(queries) for _ in q], dtype=np.int64)
    return Workload(lo, hi, owner, len(queries))


# ------------------------------------------------------------------------ the generator
_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.integers(-2**70, 2**70),
                       st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1e308, -0.0, 0.5, 1e-320]),
                       st.sampled_from(["", "xyz", "F", "laplace", "sha256:0", "1", "<overflow>"]))
_json = st.recursive(_json_leaf, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                        st.dictionaries(st.sampled_from(["a", "values", "low", "kind"]),
                                                                        kids, max_size=2)), max_leaves=6)


@st.composite
def mutations(draw, base: dict) -> tuple[dict, bool]:
    """A copy of ``base`` with one to three edits at random places (replace a value by another
    JSON value, delete or add a key or element, nudge a number), and whether the digest was
    recomputed afterwards (as someone editing the file on purpose would)."""
    d = copy.deepcopy(base)
    d.pop("digest")
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):                         # a number somewhere: a count, a corner, a scale, a bin
            numbers = list(_number_paths(d))
            parent, key = numbers[draw(st.integers(0, len(numbers) - 1))]
            x = parent[key]
            parent[key] = draw(st.sampled_from([x + 1, x - 1, -x, 2 * x, x + 0.5, float(x), 0, 1e15, 1e16]))
            continue
        node, path, depth = d, [], draw(st.integers(0, 4))
        while isinstance(node, (dict, list)) and node and len(path) < depth:
            key = draw(st.sampled_from(sorted(node))) if isinstance(node, dict) else draw(st.integers(0, len(node) - 1))
            path.append((node, key))
            node = node[key]
        op = draw(st.sampled_from(["replace", "nudge", "delete", "insert"]))
        if not path:
            if op == "delete" and d:
                d.pop(draw(st.sampled_from(sorted(d))))
            elif op == "insert":
                d[draw(st.sampled_from(["extra", "values", "records", "marginals"]))] = draw(_json)
            continue
        parent, key = path[-1]
        if op == "replace":
            parent[key] = draw(_json)
        elif op == "nudge" and isinstance(node, (int, float)) and not isinstance(node, bool):
            parent[key] = draw(st.sampled_from([node + 1, node - 1, -node, node * 2, node * 1e300 if node else 1e300,
                                                float(node), int(node) if math.isfinite(node) else 0, str(node)]))
        elif op == "delete":
            del parent[key]
        elif op == "insert" and isinstance(node, list):
            node.insert(draw(st.integers(0, len(node))), copy.deepcopy(node[0]) if node else draw(_json))
        elif op == "insert" and isinstance(node, dict):
            node[draw(st.sampled_from(["extra", "scale", "overflow", "bins"]))] = draw(_json)
    redigest = draw(st.booleans())
    d["digest"] = content_digest(d) if redigest else base["digest"]
    return d, redigest


def _number_paths(node):
    """(container, key) of every number in a parsed JSON document."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            yield node, k
        else:
            yield from _number_paths(v)


def _check_file(tmp: Path, d: dict, seed: int, changed: bool, redigest: bool) -> None:
    p = tmp / "v.json"
    try:
        p.write_text(json.dumps(d, allow_nan=False))
    except (ValueError, OverflowError):
        return                                          # not writable as JSON: not a file anyone can hand out
    try:
        v = load_view(p)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        assert msg and "\n" not in msg and str(p) in msg, msg
        loaded = None
    else:
        loaded = v
    if changed and not redigest:
        assert loaded is None, "an edited file passed its digest"
    res = CliRunner().invoke(main, ["view", "query", str(p), "nosuch=1"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    errors = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1 and errors[0].startswith("Error:"), res.output
    if loaded is None:
        return
    shape = loaded.shape
    assert list(shape) == _sizes(d)
    queries = _queries(shape, seed)
    try:
        want, want_sd = _expected(d, queries)
    except KeyError:                                    # a marginal the query needs is not in the file
        with pytest.raises(ValueError, match="marginals"):
            loaded.answer(_workload(queries))
        return
    got = loaded.answer(_workload(queries))
    scale = 1.0 + np.abs(want).max()
    assert np.allclose(got["estimate"], want, rtol=1e-9, atol=1e-9 * scale)
    assert np.array_equal(np.isnan(got["std"]), np.isnan(want_sd))
    ok = ~np.isnan(want_sd)
    assert np.allclose(got["std"][ok], want_sd[ok], rtol=1e-7, atol=1e-9)


KINDS = ["ripost", "identity", "hdmm", "records", "marginals"]


def _property(base_files, tmp_path, data):
    kind = data.draw(st.sampled_from(KINDS))
    base = base_files[kind]
    d, redigest = data.draw(mutations(base))
    _check_file(tmp_path, d, data.draw(st.integers(0, 1000)), d != base, redigest)


@given(st.data())
@settings(max_examples=60, derandomize=True)
def test_mutated_view_files_are_refused_or_answer_their_numbers(base_files, tmp_path_factory, data):
    _property(base_files, tmp_path_factory.mktemp("m"), data)


@pytest.mark.slow
@given(st.data())
@settings(max_examples=3000)
def test_mutated_view_files_many(base_files, tmp_path_factory, data):
    _property(base_files, tmp_path_factory.mktemp("m"), data)


@pytest.mark.parametrize("kind", KINDS)
def test_valid_files_answer_their_numbers(base_files, tmp_path, kind):
    _check_file(tmp_path, base_files[kind], 0, False, False)
    v = load_view(tmp_path / "v.json")
    assert v.method == base_files[kind]["method"]


# ------------------------------------------------------------- edits that must be refused
def _edited(base: dict, path: list, value) -> dict:
    d = copy.deepcopy(base)
    node = d
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return d


@pytest.mark.parametrize("path,value,redigest,match", [
    (["values", 0], 1e6, False, "digest"),                          # an edited count
    (["epsilon"], 100.0, False, "digest"),                          # an edited epsilon
    (["ledger", "leaf perturbation"], 1e-3, False, "digest"),       # an edited ledger
    (["epsilon"], -1.0, True, "epsilon"),
    (["spent"], 2.0, True, "spent"),
    (["epsilon"], 0.001, True, "spent|noise scale"),                # the leaves' noise was paid with more
    (["noise_model", "scale", 0], 1e-6, True, "noise scale"),
    (["hi", 0, 0], 6, True, "overlap|outside|uncovered"),
    (["lo", -1], [0, 0, 0], True, "overlap|uncovered"),           # the last leaf moved onto the origin
    (["hi", 0, 1], 99, True, "outside"),
    (["values", 0], "3", True, "values"),
    (["lo", 0, 0], 0.5, True, "lo"),
    (["domains", 0, "bins"], 7, True, "uncovered|outside|values"),
    (["domains", 1, "values"], "xyz", True, "domain"),
    (["format"], "certdp-view/1", True, "format"),
])
def test_edits_are_refused_with_one_clear_error(base_files, tmp_path, path, value, redigest, match):
    d = _edited(base_files["ripost"], path, value)
    assert d != base_files["ripost"], "the edit must change the file"
    if redigest:
        d["digest"] = content_digest(d)
    p = tmp_path / "v.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ViewFileError, match=match):
        load_view(p)
    res = CliRunner().invoke(main, ["view", "query", str(p), "age=0..10"])
    assert res.exit_code == 2 and res.output.startswith("Error:") and len(res.output.strip().splitlines()) == 1


def test_deeply_nested_view_file_is_refused(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text('{"format": "certdp-view/3", "params": ' + "[" * 100_000 + "]" * 100_000 + "}")
    res = CliRunner().invoke(main, ["view", "query", str(p), "a=1"])
    assert res.exit_code == 2 and "nests" in res.output and "Traceback" not in res.output


# ------------------------------------------------------------ a file and nothing else
def test_a_published_view_is_queried_from_the_file_alone(tmp_path):
    """The publisher builds a view from a CSV and a domain file; someone who receives only the
    view file queries it in a fresh folder, in a fresh process, by the command and in Python."""
    pub = tmp_path / "publisher"
    pub.mkdir()
    rng = np.random.default_rng(0)
    pd.DataFrame({"age": rng.integers(18, 90, 1000), "sex": rng.choice(["F", "M"], 1000)}).to_csv(pub / "t.csv",
                                                                                               index=False)
    (pub / "d.json").write_text(json.dumps({"age": {"low": 0, "high": 100, "bins": 50}, "sex": {"values": ["F", "M"]}}))
    res = CliRunner().invoke(main, ["view", "build", str(pub / "t.csv"), "--columns", "age,sex", "--domains",
                                    str(pub / "d.json"), "--epsilon", "1", "--out", str(pub / "view.json"), "--quiet"])
    assert res.exit_code == 0, res.output
    want = load_view(pub / "view.json").answer(["age=20..30", "age=20..30 sex=F"])
    reader = tmp_path / "reader"
    reader.mkdir()
    shutil.copy(pub / "view.json", reader / "view.json")
    shutil.rmtree(pub)
    env = {**os.environ, "PYTHONPATH": SRC}
    r = subprocess.run([sys.executable, "-m", "certdp.cli", "view", "query", "view.json", "age=20..30",
                        "age=20..30 sex=F", "--json"], cwd=reader, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [g["query"] for g in got] == ["age=20..30", "age=20..30 sex=F"]
    assert np.allclose([g["estimate"] for g in got], want["estimate"])
    assert np.allclose([g["std"] for g in got], want["std"]) and all(g["std"] > 0 for g in got)
    code = ("from certdp.views import load_view; "
            "print(load_view('view.json').answer(['age=20..30', 'age=20..30 sex=F']).to_json(orient='records'))")
    r = subprocess.run([sys.executable, "-c", code], cwd=reader, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert list(rows[0]) == ["query", "estimate", "std"]
    assert np.allclose([x["estimate"] for x in rows], want["estimate"])
    assert sorted(p.name for p in reader.iterdir()) == ["view.json"]


@settings(max_examples=20, deadline=None, derandomize=True)
@given(d=st.integers(1, 12), big=st.sampled_from([1.0, 1e5, 1e15]))
@example(d=12, big=1e15)
def test_query_json_is_json_when_the_noise_overflows(tmp_path_factory, d, big):
    """A file's strategy within the documented bound (entries >= 1e-15 in magnitude) can still
    make a query's variance overflow: `view query --json` then gives null, never Infinity (not
    JSON)."""
    import itertools

    from certdp.views.viewfile import content_digest

    cells = list(itertools.product([0, 1], repeat=d))
    f = {"format": "certdp-view/3", "method": "hdmm", "epsilon": 1.0, "spent": 1.0, "params": {}, "ledger": {"hdmm": 1.0},
         "domains": [{"name": f"c{i}", "values": [0, 1], "overflow": False} for i in range(d)],
         "lo": [list(c) for c in cells], "hi": [[x + 1 for x in c] for c in cells], "values": [0.0] * len(cells),
         "noise_model": {"kind": "kronecker-laplace", "scale": max(big, (2 / big) ** d),      # its sensitivity
                         "strategy": [[[1 / big, 1 / big], [1 / big, -1 / big]]] * d}}
    f["digest"] = content_digest(f)
    path = tmp_path_factory.mktemp("kron") / "v.json"
    path.write_text(json.dumps(f))
    res = CliRunner().invoke(main, ["view", "query", str(path), "c0=0", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the JSON output"))
    assert rows[0]["std"] is None or rows[0]["std"] > 0


def _spiral(side: int) -> tuple[np.ndarray, np.ndarray]:
    """A valid tiling of side x side cells by bars peeled off the region's four edges in turn:
    every cut that separates leaves splits off one."""
    lo, hi = [], []
    x0, y0, x1, y1, k = 0, 0, side, side, 0
    while x0 < x1 and y0 < y1:
        edge = k % 4
        if edge == 0:
            lo.append([x0, y0]); hi.append([x0 + 1, y1]); x0 += 1
        elif edge == 1:
            lo.append([x0, y0]); hi.append([x1, y0 + 1]); y0 += 1
        elif edge == 2:
            lo.append([x1 - 1, y0]); hi.append([x1, y1]); x1 -= 1
        else:
            lo.append([x0, y1 - 1]); hi.append([x1, y1]); y1 -= 1
        k += 1
    return np.asarray(lo), np.asarray(hi)


def test_partition_check_refuses_a_tiling_that_needs_a_cut_per_leaf_and_passes_halvings(monkeypatch):
    """The check's work is bounded (CUT_WORK visits a leaf plus CUT_ALLOWANCE): a spiral of bars,
    which only one leaf at a time can be cut from, passes within the allowance (it is valid) and
    is refused past it; a tiling by halvings of as many leaves passes either way."""
    from certdp.views import viewfile
    from certdp.views.viewfile import check_partition

    def fail(msg):
        return ValueError(msg)

    lo, hi = _spiral(1200)                               # about 2,400 bars, 2.9 million visits
    check_partition(lo, hi, (1200, 1200), fail)
    g = np.arange(0, 1200, 25)                           # 48 x 48 = 2,304 squares
    sq_lo = np.array(np.meshgrid(g, g, indexing="ij")).reshape(2, -1).T
    monkeypatch.setattr(viewfile, "CUT_ALLOWANCE", 0)
    with pytest.raises(ValueError, match="leaf visits"):
        check_partition(lo, hi, (1200, 1200), fail)
    check_partition(sq_lo, sq_lo + 25, (1200, 1200), fail)


def test_every_method_writes_one_layout_and_a_name_cannot_borrow_another(tmp_path):
    """The method's name decides the checks a file gets (a noise model, its kind): every method
    of the registry has one layout, and a file in another method's layout is refused."""
    from certdp.views.build import METHODS
    from certdp.views.view import LAYOUTS

    owners = [m for layout in LAYOUTS.values() for m in layout]
    assert sorted(owners) == sorted(METHODS)
    from certdp.views.tensor import CountTensor
    from certdp.views.viewfile import content_digest

    t = CountTensor.from_frame(pd.DataFrame({"a": ["x", "y", "x"]}), ["a"],
                               {"a": Domain.categorical("a", ["x", "y"])})
    path = Path(tmp_path) / "v.json"
    build_view(t, "identity", 1.0).save(path)
    d = json.loads(path.read_text())
    for other in ("mst", "privbayes"):
        d2 = {**d, "method": other}
        d2["digest"] = content_digest(d2)
        path.write_text(json.dumps(d2))
        with pytest.raises(ValueError, match="not written as 'values'"):
            load_view(path)
