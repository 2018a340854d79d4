"""PrivTree, HDPView and Identity: their spend and their answers."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp.views.competitors import hdpview, identity, privtree
from certdp.views.view import Workload

from .tensors import random_tensor


@given(st.integers(0, 10_000), st.floats(0.01, 5.0))
@settings(max_examples=30)
def test_competitors_never_overspend(seed, eps):
    rng = np.random.default_rng(seed)
    t = random_tensor(rng, tuple(int(s) for s in rng.integers(1, 6, size=3)), float(rng.random()))
    for v in (privtree(t, eps, rng=rng), privtree(t, eps, fanout="binary", rng=rng), hdpview(t, eps, rng=rng)):
        assert Fraction(v.spent) <= Fraction(eps)
        v.check()


def test_identity_answers_with_summed_area_table():
    rng = np.random.default_rng(8)
    t = random_tensor(rng, (5, 4, 3), 0.5)
    v = identity(t, 1.0, rng=1)
    w = Workload.random(t.shape, 200, 3, rng=2)
    ref = [v.noisy[tuple(slice(a, b) for a, b in zip(lo, hi))].sum() for lo, hi in zip(w.lo, w.hi)]
    assert np.allclose(v.estimates(w), ref)
    with pytest.raises(ValueError, match="max_cells"):
        identity(t, 1.0, max_cells=10)


def test_privbayes_spends_epsilon_once_and_keeps_the_domain():
    """PrivBayes (DataSynthesizer): charged epsilon once, n synthetic records inside the
    declared domain (values absent from the data included), answers close to the truth at a
    large epsilon on data with one strong dependency."""
    pytest.importorskip("DataSynthesizer")
    from certdp.views import build_view
    from certdp.views.tensor import CountTensor, Domain
    from certdp.views.view import true_answers

    rng = np.random.default_rng(0)
    a = rng.integers(0, 6, 3000)
    b = np.where(rng.random(3000) < 0.9, a % 3, rng.integers(0, 3, 3000))     # b depends on a
    doms = (Domain.numeric("a", 0, 8, 8), Domain.numeric("b", 0, 4, 4))       # a = 6, 7 and b = 3 never occur
    t = CountTensor.from_frame(pd.DataFrame({"a": a, "b": b}), ["a", "b"], {"a": doms[0], "b": doms[1]})
    v = build_view(t, "privbayes", 5.0, rng=1)
    assert Fraction(v.spent) == Fraction(5.0) and v.ledger == {"privbayes": 5.0}
    assert int(v.counts.sum()) == 3000
    assert np.all(v.coords >= 0) and np.all(v.coords < np.asarray(t.shape))
    w = Workload.random(t.shape, 200, 2, rng=2)
    err = np.sqrt(np.mean((v.estimates(w) - true_answers(t, w)) ** 2))
    assert err < 0.1 * 3000
    with pytest.raises(ValueError, match="two columns"):
        build_view(CountTensor.from_frame(pd.DataFrame({"a": a}), ["a"], {"a": doms[0]}), "privbayes", 1.0, rng=1)


def test_privbayes_never_forks_a_process_that_runs_jax_threads():
    """DataSynthesizer's pool is a pool of threads, so PrivBayes run after an ``mbi`` method in
    the same process (jax's threads alive) forks nothing: no "os.fork() ... JAX is
    multithreaded" warning, and the same release as on its own."""
    pytest.importorskip("DataSynthesizer")
    jax = pytest.importorskip("jax")
    import warnings

    from certdp.views import build_view
    from certdp.views.tensor import CountTensor, Domain

    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"a": rng.integers(0, 4, 500), "b": rng.integers(0, 3, 500), "c": rng.integers(0, 2, 500)})
    doms = {"a": Domain.numeric("a", 0, 4, 4), "b": Domain.numeric("b", 0, 3, 3), "c": Domain.numeric("c", 0, 2, 2)}
    t = CountTensor.from_frame(frame, ["a", "b", "c"], doms)
    alone = build_view(t, "privbayes", 2.0, rng=4)
    jax.numpy.arange(8.0).sum().block_until_ready()      # jax's runtime threads are up
    with warnings.catch_warnings(record=True) as caught:     # jax warns from an at-fork hook
        warnings.simplefilter("always")
        again = build_view(t, "privbayes", 2.0, rng=4)
    assert not [w for w in caught if "fork" in str(w.message)]
    assert np.array_equal(again.coords, alone.coords) and np.array_equal(again.counts, alone.counts)


@given(st.integers(0, 1000), st.floats(0.05, 5.0), st.integers(2, 4))
@settings(max_examples=3)     # several CPU seconds an example, whatever its size
def test_mst_spends_exactly_its_epsilon(seed, eps, d):
    """MST's three steps (one-way marginals, d - 1 exponential choices, the tree's two-way
    marginals) never overspend, whatever the rounding of the thirds, and spend it all."""
    pytest.importorskip("mbi")
    from certdp.views import build_view

    rng = np.random.default_rng(seed)
    t = random_tensor(rng, tuple(int(s) for s in rng.integers(2, 5, size=d)), 0.5, 40)
    v = build_view(t, "mst", eps, rng=seed, iters=50)
    assert Fraction(v.spent) <= Fraction(eps) and v.spent == pytest.approx(eps, rel=1e-12)
    assert len(v.params["tree"]) == d - 1


def test_mst_answers_from_its_model():
    """At a large epsilon on data that is a tree of dependencies, MST's answers are close to the
    truth, also for a pair of columns it did not measure together; totals are the record count."""
    pytest.importorskip("mbi")
    from certdp.views import build_view
    from certdp.views.tensor import CountTensor, Domain
    from certdp.views.view import true_answers

    rng = np.random.default_rng(0)
    a = rng.integers(0, 6, 4000)
    b = (a + (rng.random(4000) < 0.2)) % 6
    c = (b + (rng.random(4000) < 0.2)) % 6
    doms = {k: Domain.numeric(k, 0, 6, 6) for k in "abc"}
    t = CountTensor.from_frame(pd.DataFrame({"a": a, "b": b, "c": c}), list("abc"), doms)
    v = build_view(t, "mst", 20.0, rng=1)
    w = Workload.random(t.shape, 300, 2, rng=2)
    err = np.sqrt(np.mean((v.estimates(w) - true_answers(t, w)) ** 2))
    assert err < 0.02 * 4000
    whole = Workload(np.zeros((1, 3), dtype=np.int64), np.asarray([t.shape]), np.zeros(1, dtype=np.int64), 1)
    assert v.estimates(whole)[0] == pytest.approx(4000, rel=0.02)


def test_privbayes_from_a_script_without_a_main_guard_finishes(tmp_path):
    """A script that calls PrivBayes at its top level, with no ``if __name__ == "__main__"``:
    worker processes from a fork server or spawn re-import that script, fail, and the pool
    starts others without end (it hung). No process is started, so it finishes."""
    pytest.importorskip("DataSynthesizer")
    import subprocess
    import sys

    script = tmp_path / "release.py"
    script.write_text(
        "import numpy as np, pandas as pd\n"
        "from certdp.views import Domain, build_view\n"
        "from certdp.views.tensor import CountTensor\n"
        "g = np.random.default_rng(0)\n"
        "frame = pd.DataFrame({c: g.integers(0, 3, 300) for c in 'abc'})\n"
        "doms = {c: Domain.numeric(c, 0, 3, 3) for c in 'abc'}\n"
        "v = build_view(CountTensor.from_frame(frame, list('abc'), doms), 'privbayes', 1.0, rng=1)\n"
        "print(int(v.counts.sum()))\n")
    done = subprocess.run([sys.executable, "-W", "ignore", str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "300"


def test_privbayes_builds_at_once_from_threads_are_the_builds_one_at_a_time():
    """DataSynthesizer seeds the process's global random state and the build swaps stdout and
    its Pool: two builds at once from threads gave other records for the same seed and could
    leave stdout captured. They now run one at a time, so each thread gets the records its seed
    gives alone, and stdout and the Pool are back as they were."""
    pytest.importorskip("DataSynthesizer")
    import sys
    import threading

    import DataSynthesizer.lib.PrivBayes as pb

    from certdp.views import build_view
    from certdp.views.tensor import CountTensor, Domain

    rng = np.random.default_rng(5)
    frame = pd.DataFrame({c: rng.integers(0, 4, 400) for c in "abcd"})
    t = CountTensor.from_frame(frame, list("abcd"), {c: Domain.numeric(c, 0, 4, 4) for c in "abcd"})
    alone = {s: build_view(t, "privbayes", 1.0, rng=s) for s in (7, 8)}
    stdout, pool = sys.stdout, pb.Pool
    got: dict[int, object] = {}
    threads = [threading.Thread(target=lambda s=s: got.__setitem__(s, build_view(t, "privbayes", 1.0, rng=s)))
               for s in (7, 8, 7)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sys.stdout is stdout and pb.Pool is pool
    for s, v in got.items():
        assert np.array_equal(v.coords, alone[s].coords) and np.array_equal(v.counts, alone[s].counts)
