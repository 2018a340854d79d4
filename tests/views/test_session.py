"""A budget across releases: a Session and the ledger file, as a publisher uses them, from a
DataFrame, a CSV and the command line."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certdp.cli import main
from certdp.views import BudgetExceeded, Domain, LedgerError, Session, build_view, table_digest
from certdp.views.tensor import CountTensor

SRC = str(Path(__file__).resolve().parents[2] / "src")
DOMS = {"age": Domain.numeric("age", 0, 100, 20), "sex": Domain.categorical("sex", ["F", "M"])}
DOMS_JSON = {"age": {"low": 0, "high": 100, "bins": 20}, "sex": {"values": ["F", "M"]}}


def _frame(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 80, n), "sex": rng.choice(["F", "M"], n),
                         "city": rng.choice(["A", "B", "C"], n)})


def test_averaging_many_views_is_refused_past_the_total(tmp_path):
    """The attack of issue 50: 200 Identity views at 0.1, averaged, give back the true counts.
    Directly through build_view nothing stops it; through a Session of total 1 the eleventh
    release is refused (ten of 0.1 fit exactly), and so are releases from a second session on
    the same ledger, even with the rows shuffled and the ages stored as floats."""
    df = _frame()
    t = CountTensor.from_frame(df, ["age", "sex"], DOMS)
    dense = np.zeros(t.shape)
    dense[tuple(t.coords.T)] = t.counts
    mean = np.mean([build_view(t, "identity", 0.1, rng=s).noisy for s in range(200)], axis=0)
    assert np.abs(mean - dense).mean() < 1.5        # one view is off by 10 on average, their mean by 0.8

    led = tmp_path / "ledger.json"
    s = Session(df, 1.0, ledger=led)
    views = [s.build_view("identity", 0.1, columns=["age", "sex"], domains=DOMS) for _ in range(10)]
    assert len(views) == 10 and s.spent == 1.0 and s.remaining == 0.0
    with pytest.raises(BudgetExceeded, match="before any noise"):
        s.build_view("identity", 0.1, columns=["age", "sex"], domains=DOMS)
    other = Session(df.sample(frac=1.0, random_state=1).astype({"age": float}), ledger=led)
    assert other.digest == s.digest and other.remaining == 0.0
    with pytest.raises(BudgetExceeded):
        other.build_view("privtree", 0.01, columns=["sex"], domains=DOMS)
    assert [r["status"] for r in other.releases] == ["released"] * 10


@pytest.mark.parametrize("kw,match", [(dict(method="identity", rng=7), "reproducible"),
                                      (dict(method="identity", rng=np.random.default_rng(7)), "reproducible"),
                                      (dict(method="privbayes"), "exact number of records")])
def test_a_ledger_refuses_what_is_not_a_release(tmp_path, kw, match):
    """Seeded noise (reproducible from the seed) and PrivBayes (numpy noise, the record count
    exact) are not private releases: a ledger refuses to count them, before any charge."""
    s = Session(_frame(), 1.0, ledger=tmp_path / "l.json")
    with pytest.raises(ValueError, match=match):
        s.build_view(epsilon=0.1, columns=["age", "sex"], domains=DOMS, **kw)
    assert s.spent == 0 and s.releases == []
    free = Session(_frame(), 1.0)                 # no ledger: an experiment may be seeded
    if kw["method"] == "identity":
        free.build_view(epsilon=0.1, columns=["age", "sex"], domains=DOMS, **kw)
        assert free.spent == 0.1


def test_a_refused_release_draws_no_noise_and_charges_nothing(tmp_path, monkeypatch):
    import certdp.views.sampling as S

    drawn = []
    real = S.add_laplace
    monkeypatch.setattr(S, "add_laplace", lambda *a, **k: drawn.append(1) or real(*a, **k))
    import certdp.views.competitors as C
    monkeypatch.setattr(C, "add_laplace", S.add_laplace)
    s = Session(_frame(), 0.5, ledger=tmp_path / "l.json")
    s.build_view("identity", 0.4, columns=["age"], domains=DOMS)
    assert len(drawn) == 1
    with pytest.raises(BudgetExceeded):
        s.build_view("identity", 0.2, columns=["age"], domains=DOMS)
    assert len(drawn) == 1 and s.spent == 0.4


def test_bad_request_costs_nothing(tmp_path):
    """A request the build would refuse is refused before the charge."""
    s = Session(_frame(), 1.0, ledger=tmp_path / "l.json")
    for kw in [dict(method="ripost", alpha=1.5), dict(method="nosuch"), dict(method="identity", max_cells=3),
               dict(method="ripost", alhpa=0.3), dict(method="mst", epsilon=1e-300)]:
        kw = {"epsilon": 0.1, **kw}
        with pytest.raises((ValueError, TypeError)):
            s.build_view(columns=["age", "sex"], domains=DOMS, **kw)
    with pytest.raises(ValueError, match="domain"):
        s.build_view("identity", 0.1, columns=["age", "city"], domains=DOMS)
    assert s.spent == 0 and s.releases == []


def test_a_crash_after_the_charge_never_gives_the_budget_back(tmp_path):
    """A process killed while building (after its charge) leaves the charge in the ledger: the
    budget is lost, never spent twice."""
    led = tmp_path / "l.json"
    code = f"""
import os, sys
sys.path.insert(0, {SRC!r})
import pandas as pd, numpy as np
from certdp.views import Session, Domain
import certdp.views.session as S
S.build_checked = lambda *a, **k: os._exit(9)      # dies between the charge and the release
rng = np.random.default_rng(0)
df = pd.DataFrame({{"age": rng.integers(18, 80, 500), "sex": rng.choice(["F", "M"], 500),
                   "city": rng.choice(["A", "B", "C"], 500)}})
Session(df, 1.0, ledger={str(led)!r}).build_view("identity", 0.7, columns=["age"],
                                                 domains={{"age": Domain.numeric("age", 0, 100, 20)}})
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 9, r.stderr
    s = Session(_frame(), ledger=led)
    assert s.spent == 0.7 and s.releases[0]["status"] == "charged"
    with pytest.raises(BudgetExceeded):
        s.build_view("identity", 0.4, columns=["age"], domains=DOMS)


def _charge_many(args):
    led, seed = args
    df = _frame()
    s = Session(df, 2.0, ledger=led)
    done = 0
    for i in range(40):
        try:
            s.build_view("privtree", 0.05, columns=["age", "sex"], domains=DOMS)
            done += 1
        except BudgetExceeded:
            pass
    return done


def test_concurrent_processes_never_spend_past_the_total(tmp_path):
    """Four processes, 40 releases of 0.05 each against a total of 2: exactly 40 are accepted in
    all, and the ledger's sum is the total."""
    led = str(tmp_path / "l.json")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        done = pool.map(_charge_many, [(led, k) for k in range(4)])
    assert sum(done) == 40
    entry = next(iter(json.loads(Path(led).read_text())["tables"].values()))
    assert len(entry["releases"]) == 40 and sorted(r["release"] for r in entry["releases"]) == list(range(1, 41))


def test_the_ledger_refuses_edits_and_a_new_total(tmp_path):
    led = tmp_path / "l.json"
    df = _frame()
    Session(df, 1.0, ledger=led).build_view("identity", 0.5, columns=["sex"], domains=DOMS)
    with pytest.raises(LedgerError, match="total budget of 1"):
        Session(df, 5.0, ledger=led)
    assert Session(df, 1.0, ledger=led).remaining == 0.5
    with pytest.raises(LedgerError, match="total budget"):
        Session(df.iloc[:100], ledger=led)              # another table: it needs its own total
    text = led.read_text()
    led.write_text(text.replace('"epsilon":0.5', '"epsilon":0.05'))
    with pytest.raises(LedgerError, match="digest"):
        Session(df, 1.0, ledger=led)
    led.write_text(text[:-20])
    with pytest.raises(LedgerError):
        Session(df, 1.0, ledger=led)


def test_in_memory_session_and_tensor_sessions():
    df = _frame()
    s = Session(df, 0.3)
    v = s.build_view("ripost", 0.2, columns=["age", "sex"], domains=DOMS, rng=1)
    assert v.epsilon == 0.2 and s.remaining == pytest.approx(0.1)
    df.loc[0, "age"] = 99                                # the session keeps its own copy
    assert table_digest(s.table) == s.digest != table_digest(df)
    with pytest.raises(BudgetExceeded):
        s.build_view("ripost", 0.2, columns=["age"], domains=DOMS)
    t = CountTensor.from_frame(df, ["age", "sex"], DOMS)
    ts = Session(t, 1.0)
    ts.build_view("privtree", 0.5, rng=1)
    with pytest.raises(ValueError, match="count tensor"):
        ts.build_view("privtree", 0.1, columns=["age"])
    with pytest.raises(ValueError, match="total_epsilon"):
        Session(df)
    with pytest.raises((ValueError, TypeError)):
        Session(df, float("nan"))
    with pytest.raises(TypeError):
        Session(df.to_numpy(), 1.0)


# ------------------------------------------------------------------- the table's digest
_decimals = st.integers(-999_999, 999_999).map(lambda k: k / 100)     # 6 digits: the same in float32 and 64
_cells = st.one_of(st.integers(-10**6, 10**6), _decimals, st.sampled_from(["a", "b", "naïve", ""]), st.none())


@st.composite
def frames(draw):
    n = draw(st.integers(1, 12))
    kinds = draw(st.lists(st.sampled_from(["int", "float", "str", "mixed"]), min_size=1, max_size=4))
    cols = {}
    for j, k in enumerate(kinds):
        if k == "int":
            cols[f"c{j}"] = draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n))
        elif k == "float":
            cols[f"c{j}"] = draw(st.lists(_decimals, min_size=n, max_size=n))
        elif k == "str":
            cols[f"c{j}"] = draw(st.lists(st.text("abc, \"\n", max_size=3), min_size=n, max_size=n))
        else:
            cols[f"c{j}"] = draw(st.lists(_cells, min_size=n, max_size=n))
    return pd.DataFrame(cols)


def _digest_property(df, seed, tmp):
    """The digest does not depend on row order, column order, pandas' dtypes or a CSV round
    trip, and changes when one value changes."""
    rng = np.random.default_rng(seed)
    d = table_digest(df)
    shuffled = df.sample(frac=1.0, random_state=seed)[list(rng.permutation(df.columns))]
    assert table_digest(shuffled) == d
    retyped = df.copy()
    for c in df.columns:
        s = df[c]
        if pd.api.types.is_integer_dtype(s):
            retyped[c] = s.astype(rng.choice(["float64", "Int64", "object"]))
        elif pd.api.types.is_float_dtype(s):
            retyped[c] = s.astype(rng.choice(["float32", "object"])) if s.notna().all() else s.astype("object")
        elif s.map(lambda v: isinstance(v, str)).all():
            retyped[c] = s.astype(rng.choice(["category", "string"]))
    assert table_digest(retyped) == d
    plain = all(df[c].map(lambda v: isinstance(v, str) and v.strip() == v and v != "").all()
                or pd.api.types.is_numeric_dtype(df[c]) for c in df.columns)
    if plain and df.notna().all().all():                 # in a CSV, a missing number and "" are one empty field
        p = tmp / "t.csv"
        df.to_csv(p, index=False)
        assert table_digest(pd.read_csv(p, keep_default_na=False)) == d
    changed = df.copy()
    col = df.columns[0]
    changed[col] = changed[col].astype(object)
    changed.iloc[0, 0] = "a value no generator makes"
    assert table_digest(changed) != d


@given(frames(), st.integers(0, 1000))
@settings(max_examples=40, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_table_digest_is_canonical(tmp_path, df, seed):
    _digest_property(df, seed, tmp_path)


@pytest.mark.slow
@given(frames(), st.integers(0, 10**6))
@settings(max_examples=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_table_digest_is_canonical_many(tmp_path, df, seed):
    _digest_property(df, seed, tmp_path)


def test_digest_of_a_csv_and_its_frame_agree(tmp_path):
    """The command line (reading the CSV) and a Python session (the DataFrame) share one ledger
    entry, so their releases add up."""
    df = _frame()
    table = tmp_path / "t.csv"
    df.to_csv(table, index=False)
    (tmp_path / "d.json").write_text(json.dumps(DOMS_JSON))
    led = tmp_path / "l.json"
    Session(df, 1.0, ledger=led).build_view("identity", 0.6, columns=["age"], domains=DOMS)
    r = CliRunner().invoke(main, ["view", "build", str(table), "--columns", "age,sex", "--domains",
                                  str(tmp_path / "d.json"), "--ledger", str(led), "--epsilon", "0.5",
                                  "--out", str(tmp_path / "v.json")])
    assert r.exit_code == 2 and "before any noise" in r.output and r.output.count("Error:") == 1
    assert not (tmp_path / "v.json").exists()


# ----------------------------------------------------------------------- the command line
def test_cli_ledger_until_the_total_is_spent(tmp_path):
    df = _frame()
    table = tmp_path / "t.csv"
    df.to_csv(table, index=False)
    (tmp_path / "d.json").write_text(json.dumps(DOMS_JSON))
    led = tmp_path / "l.json"
    base = ["view", "build", str(table), "--columns", "age,sex", "--domains", str(tmp_path / "d.json"),
            "--ledger", str(led)]
    r = CliRunner()
    res = r.invoke(main, base + ["--epsilon", "0.3", "--out", str(tmp_path / "v0.json")])
    assert res.exit_code == 2 and "--total-budget" in res.output
    res = r.invoke(main, base + ["--total-budget", "0.2", "--epsilon", "0.3", "--out", str(tmp_path / "v0.json")])
    assert res.exit_code == 2 and "before any noise" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.json", "t.csv"]          # nothing written
    outs = []
    for i in range(4):
        out = tmp_path / f"v{i}.json"
        res = r.invoke(main, base + ["--total-budget", "1", "--epsilon", "0.3", "--out", str(out), "--json"])
        outs.append((res.exit_code, out.exists()))
        if res.exit_code == 0:
            info = json.loads(res.stdout)
            assert info["table_spent"] == pytest.approx(0.3 * (i + 1)) and info["table_total"] == 1.0
    assert outs == [(0, True)] * 3 + [(2, False)]
    assert "refused before any noise was drawn" in res.output and "Traceback" not in res.output
    res = r.invoke(main, base + ["--total-budget", "2", "--epsilon", "0.05", "--out", str(tmp_path / "w.json")])
    assert res.exit_code == 2 and "cannot become 2" in res.output
    res = r.invoke(main, base + ["--epsilon", "0.1", "--out", str(tmp_path / "w.json")])
    assert res.exit_code == 0, res.output
    res = r.invoke(main, ["view", "ledger", str(led), "--json"])
    rows = json.loads(res.stdout)
    assert len(rows) == 1 and rows[0]["spent"] == pytest.approx(1.0) and rows[0]["releases"] == 4
    for bad, match in [(["--total-budget", "1"], "--ledger"),
                       (["--ledger", str(led), "--accept-data-leak"], "accept-data-leak"),
                       (["--ledger", str(tmp_path), "--total-budget", "1"], "ledger"),
                       (["--ledger", str(led), "--seed", "3"], "reproducible"),
                       (["--ledger", str(led), "--out", str(led)], "names the ledger"),
                       (["--ledger", str(led), "--method", "privbayes"], "exact number of records")]:
        args = ["view", "build", str(table), "--columns", "age,sex", "--domains", str(tmp_path / "d.json"),
                "--out", str(tmp_path / "x.json"), *bad]
        res = r.invoke(main, args)
        assert res.exit_code == 2 and match in res.output and "Traceback" not in res.output, res.output
        assert not (tmp_path / "x.json").exists()


def test_cli_view_compare_charges_no_ledger(tmp_path):
    """`view compare` is an experiment on the publisher's own data (its errors are measured
    against the true answers, not private): it takes no --ledger."""
    table = tmp_path / "t.csv"
    _frame().to_csv(table, index=False)
    (tmp_path / "d.json").write_text(json.dumps(DOMS_JSON))
    res = CliRunner().invoke(main, ["view", "compare", str(table), "--columns", "age,sex", "--domains",
                                    str(tmp_path / "d.json"), "--ledger", str(tmp_path / "l.json")])
    assert res.exit_code == 2 and "--ledger" in res.output
    assert not (tmp_path / "l.json").exists()
    assert "not private" in CliRunner().invoke(main, ["view", "compare", "--help"]).output


def test_ledger_file_is_never_left_half_written(tmp_path):
    """Every write replaces the ledger whole: after many releases no temporary file is left and
    the ledger reads back."""
    led = tmp_path / "l.json"
    s = Session(_frame(), 10.0, ledger=led)
    for i in range(5):
        s.build_view("identity", 0.1, columns=["sex"], domains=DOMS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.json", "l.json.lock"]
    assert len(Session(_frame(), ledger=led).releases) == 5
    os.chmod(tmp_path, 0o500)
    try:
        if os.access(tmp_path, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(LedgerError):
            s.build_view("identity", 0.1, columns=["sex"], domains=DOMS)
    finally:
        os.chmod(tmp_path, 0o700)
    assert len(Session(_frame(), ledger=led).releases) == 5
