"""The generic Benders engine (certdp.lp.benders) on block-ladder LPs that HiGHS solves whole:
it reaches their optimum with the bounds ordered at every round, learns feasibility cuts from
infeasible blocks, gives the same run on every executor, and stops at its limits with what it
has (a deadline checked on a fake clock, never on the wall clock)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_info

from certdp import Status
from certdp.lp.benders import BlockSolver, BlockSpec, MasterSpec, benders
from certdp.lp.executors import EXECUTORS, make_runner
from certdp.lp.highs import INF, solve_lp


@dataclass
class Ladder:
    """A block-ladder LP and its optimum, solved whole by HiGHS."""

    master: MasterSpec
    blocks: list[BlockSpec]
    optimum: float
    inner: np.ndarray    # the point (y*) the LP was built around: every block is feasible there

    def rows_hold(self, y: np.ndarray, xs: list[np.ndarray], tol: float = 1e-6) -> bool:
        """Whether ``(y, xs)`` satisfies every row and box of the LP."""
        m = self.master
        ok = np.all(m.A @ y >= m.r_lo - tol) and np.all(m.A @ y <= m.r_up + tol)
        ok &= np.all(y >= m.y_lo - tol) and np.all(y <= m.y_up + tol)
        for b, x in zip(self.blocks, xs):
            v = b.W @ x + b.T @ y[b.coupling]
            ok &= np.all(v >= b.lo - tol) and np.all(v <= b.up + tol)
            ok &= np.all(x >= b.x_lo - tol) and np.all(x <= b.x_up + tol)
        return bool(ok)

    def cost(self, y: np.ndarray, xs: list[np.ndarray]) -> float:
        return float(self.master.c @ y + sum(b.c @ x for b, x in zip(self.blocks, xs)))


def whole(master: MasterSpec, blocks: list[BlockSpec]) -> float:
    """The optimum of the LP in one HiGHS model."""
    ny = len(master.c)
    parts = [sp.hstack([master.A] + [sp.csr_matrix((master.A.shape[0], len(b.c))) for b in blocks], format="csr")]
    for i, b in enumerate(blocks):
        T = sp.csr_matrix((b.T.toarray() @ np.eye(ny)[b.coupling]))
        row = [T] + [b.W if j == i else sp.csr_matrix((b.W.shape[0], len(o.c))) for j, o in enumerate(blocks)]
        parts.append(sp.hstack(row, format="csr"))
    A = sp.vstack(parts, format="csr")
    sol = solve_lp(np.concatenate([master.c] + [b.c for b in blocks]), A,
                   np.concatenate([master.r_lo] + [b.lo for b in blocks]),
                   np.concatenate([master.r_up] + [b.up for b in blocks]),
                   np.concatenate([master.y_lo] + [b.x_lo for b in blocks]),
                   np.concatenate([master.y_up] + [b.x_up for b in blocks]))
    assert sol.status == "optimal"
    return float(sol.objective)


@st.composite
def ladders(draw) -> Ladder:
    """A feasible block-ladder LP built around a random point (y*, x*): every row holds at it,
    with room or (``tight``) as an equality, so many master points leave blocks infeasible.
    y[0] is fixed at 1 with cost 10: the optimum stays far from 0, where a relative gap means
    little, and y[0] acts as a constant in the blocks' rows."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_blocks = draw(st.integers(1, 4))
    ny = 1 + draw(st.integers(1, 3))
    tight = draw(st.booleans())
    y_star = np.r_[1.0, rng.uniform(0.1, 0.9, ny - 1)]
    y_lo, y_up = np.r_[1.0, np.zeros(ny - 1)], np.ones(ny)

    def rows_around(M: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        room = np.zeros(len(v)) if tight else rng.uniform(0.0, 0.3, len(v))
        lo, up = v - room, v + room
        if not tight:   # some rows one-sided
            lo = np.where(rng.random(len(v)) < 0.3, -INF, lo)
            up = np.where(rng.random(len(v)) < 0.3, INF, up)
        return lo, up

    A0 = rng.normal(size=(draw(st.integers(0, 2)), ny))
    r_lo, r_up = rows_around(A0, A0 @ y_star)
    master = MasterSpec(c=np.r_[10.0, rng.uniform(-1.0, 1.0, ny - 1)], A=sp.csr_matrix(A0), r_lo=r_lo, r_up=r_up,
                        y_lo=y_lo, y_up=y_up)
    blocks = []
    for _ in range(n_blocks):
        nx, m = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        coupling = np.sort(rng.choice(ny, size=draw(st.integers(1, ny)), replace=False)).astype(np.int64)
        W, T = rng.normal(size=(m, nx)), rng.normal(size=(m, len(coupling)))
        x_star = rng.uniform(0.1, 0.9, nx)
        lo, up = rows_around(W, W @ x_star + T @ y_star[coupling])
        blocks.append(BlockSpec(c=rng.uniform(-1.0, 1.0, nx), W=sp.csr_matrix(W), lo=lo, up=up, T=sp.csr_matrix(T),
                                coupling=coupling, x_lo=np.zeros(nx), x_up=np.ones(nx)))
    return Ladder(master, blocks, whole(master, blocks), y_star)


def _check_run(lad: Ladder, out, gap: float) -> None:
    for h in out.history:       # every cost counted once: the bounds never cross
        assert h["lower_bound"] <= h["upper_bound"] + 1e-7 * max(1.0, abs(h["upper_bound"]))
    assert out.lower_bound <= lad.optimum + 1e-7 * abs(lad.optimum)
    if out.y is not None:       # the upper bound is the cost of a point of the LP
        xs = [np.asarray(x) for x in out.x]
        assert lad.rows_hold(out.y, xs)
        assert lad.cost(out.y, xs) == pytest.approx(out.upper_bound, rel=1e-9, abs=1e-9)
        assert out.upper_bound >= lad.optimum - 1e-6 * abs(lad.optimum)
    if out.status is Status.OPTIMAL:
        assert out.gap <= gap


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(ladders())
def test_benders_reaches_the_optimum_that_highs_gives_directly(lad):
    out = benders(lad.master, lad.blocks, gap=1e-7, max_iterations=500)
    assert isinstance(out.status, Status)
    assert out.status is Status.OPTIMAL
    _check_run(lad, out, 1e-7)
    assert out.upper_bound == pytest.approx(lad.optimum, rel=1e-6)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(ladders(), st.sampled_from([0.2, 0.5, 1.0]), st.floats(0.0, 1.0), st.sampled_from([None, 0.3, 0.5, 0.9]),
       st.sampled_from([None, 1, 3]))
def test_the_in_out_core_and_the_repair_point_keep_the_optimum(lad, in_out, pull, level, cut_age):
    """Stabilised at a core where every block is feasible, solving the blocks also at a
    repaired point (here the master's point pulled towards the core, feasible or not), with
    the master's point taken in the level box about the core, and with idle cuts dropped from
    the master, the run reaches the LP's optimum with ordered bounds, and its upper bound is a
    point of the LP."""
    core = lad.inner
    assume(level is None or bool(np.all(core > 0)))

    def repair(y: np.ndarray) -> np.ndarray:
        return (1.0 - pull) * y + pull * core

    out = benders(lad.master, lad.blocks, gap=1e-7, max_iterations=500, core=core, in_out=in_out, repair=repair,
                  level=level, cut_age=cut_age)
    assert out.status is Status.OPTIMAL
    _check_run(lad, out, 1e-7)
    assert out.upper_bound == pytest.approx(lad.optimum, rel=1e-6)


@settings(max_examples=5, suppress_health_check=[HealthCheck.too_slow])
@given(ladders())
def test_a_level_box_refuses_a_core_it_cannot_scale_about(lad):
    """The box is multiplicative about the core: an entry at 0 would pin that variable at 0
    for good, so such a core (or a level outside (0, 1)) is refused before any solve."""
    core = lad.inner.copy()
    core[0] = 0.0
    with pytest.raises(ValueError, match="level box"):
        benders(lad.master, lad.blocks, core=core, level=0.5)
    for level in (0.0, 1.0):
        with pytest.raises(ValueError, match="level box"):
            benders(lad.master, lad.blocks, core=np.abs(lad.inner) + 1.0, level=level)


def _blas_threads() -> list[int]:
    return [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]


@settings(max_examples=10, suppress_health_check=[HealthCheck.too_slow])
@given(ladders())
def test_the_rounds_run_blas_on_one_thread_and_give_it_back(lad):
    """Inside the rounds (where the repair callback runs, beside the block solves) BLAS runs on
    one thread: a multithreaded BLAS call leaves OpenBLAS's workers spinning on a core the
    HiGHS solves need. The process's own setting is back when the run ends."""
    rng = np.random.default_rng(3)
    before, inside = _blas_threads(), []

    def repair(y: np.ndarray) -> np.ndarray:
        inside.append(_blas_threads())
        np.dot(rng.random(50_000), rng.random(50_000))   # a call OpenBLAS would spread over its threads
        return y

    out = benders(lad.master, lad.blocks, gap=1e-7, max_iterations=500, repair=repair)
    assert out.status is Status.OPTIMAL
    assert inside and all(t == [1] * len(before) for t in inside)
    assert _blas_threads() == before


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(ladders())
def test_a_block_started_from_another_models_basis_resumes_where_it_ended(lad):
    """A block solver's basis (status codes) given to a new model of the same block as its
    starting basis: solved at the same point, the new model needs no simplex iteration and finds
    the same value."""
    y = lad.inner
    for i, spec in enumerate(lad.blocks):
        first = BlockSolver(i, spec)
        r1 = first.solve(y[spec.coupling], 0.0)
        assert r1.feasible
        basis = first.basis()
        assert basis is not None
        again = BlockSolver(i, BlockSpec(**{**spec.__dict__, "basis": basis}))
        r2 = again.solve(y[spec.coupling], 0.0)
        assert r2.feasible and r2.iterations == 0
        assert r2.value == pytest.approx(r1.value, rel=1e-9, abs=1e-9)


def _forced_feasibility_cut() -> Ladder:
    """min -y + x over y in [0, 1], x in [0, 0.2], with the block row y - x <= 0.5, so y <= 0.7
    (optimum -0.5). The master's first point is y = 1, where the block is infeasible: only a
    feasibility cut moves it."""
    master = MasterSpec(c=np.array([-1.0]), A=sp.csr_matrix((0, 1)), r_lo=np.zeros(0), r_up=np.zeros(0),
                        y_lo=np.zeros(1), y_up=np.ones(1))
    block = BlockSpec(c=np.array([1.0]), W=sp.csr_matrix([[-1.0]]), lo=np.array([-INF]), up=np.array([0.5]),
                      T=sp.csr_matrix([[1.0]]), coupling=np.array([0]), x_lo=np.zeros(1), x_up=np.array([0.2]))
    return Ladder(master, [block], whole(master, [block]), np.array([0.5]))


def test_an_infeasible_block_teaches_the_master_a_feasibility_cut():
    lad = _forced_feasibility_cut()
    assert lad.optimum == pytest.approx(-0.7 + 0.2)
    out = benders(lad.master, lad.blocks, gap=1e-9, max_iterations=50)
    assert out.history[0]["feasibility_cuts"] >= 1
    assert out.status is Status.OPTIMAL and out.upper_bound == pytest.approx(lad.optimum, abs=1e-9)
    _check_run(lad, out, 1e-9)


@settings(max_examples=8, suppress_health_check=[HealthCheck.too_slow])
@given(ladders(), st.sampled_from([e for e in EXECUTORS if e != "dask"]), st.integers(1, 3))
def test_every_executor_gives_the_same_run(lad, executor, workers):
    """Each block sees the same right-hand sides whatever runs it: the same rounds, bounds and
    point, to the bit (Dask: tests/pmo/test_benders.py)."""
    serial = benders(lad.master, lad.blocks, gap=1e-7, max_iterations=500)
    runner = make_runner(lad.blocks, executor=executor, workers=workers)
    try:
        other = benders(lad.master, lad.blocks, gap=1e-7, max_iterations=500, runner=runner)
    finally:
        runner.close()
    assert other.iterations == serial.iterations and other.status == serial.status
    assert other.upper_bound == serial.upper_bound and other.lower_bound == serial.lower_bound
    assert np.array_equal(other.y, serial.y)


@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow])
@given(ladders(), st.integers(1, 3))
def test_the_round_limit_stops_the_run_with_its_best_bounds(lad, rounds):
    full = benders(lad.master, lad.blocks, gap=1e-7, max_iterations=500)
    out = benders(lad.master, lad.blocks, gap=1e-7, max_iterations=rounds)
    _check_run(lad, out, 1e-7)
    if full.iterations > rounds:
        assert out.status is Status.ITERATION_LIMIT and out.iterations == rounds == len(out.history)
    else:   # the same run
        assert out.status == full.status and out.upper_bound == full.upper_bound


@settings(max_examples=15,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lad=ladders(), readings=st.integers(3, 60))
def test_the_deadline_is_honoured_on_the_engine_clock(engine_clock, lad, readings):
    """With a time limit, no round starts after the deadline (each round's record says when it
    ended, on the engine's clock: a fake one, tests/conftest.py), every round before the last is
    the unlimited run's, and the run ends 'time_limit' only once the deadline has come. (The
    last round may differ: the deadline can fall inside it, and then its blocks are given the
    least time HiGHS takes, 1 ms, so whether they finish depends on the machine.)"""
    full = benders(lad.master, lad.blocks, gap=1e-7, max_iterations=500)
    limit = (readings + 0.5) * engine_clock.step     # between two readings of the clock
    start = engine_clock.now
    out = benders(lad.master, lad.blocks, gap=1e-7, max_iterations=500, time_limit=limit)
    _check_run(lad, out, 1e-7)
    started = [0.0] + [h["elapsed"] for h in out.history[:-1]]
    assert all(t < limit for t in started)                      # every round began before the deadline
    keys = ("lower_bound", "upper_bound", "cuts_added", "feasibility_cuts")
    same = out.history if out.status is not Status.TIME_LIMIT else out.history[:-1]
    assert [[h[k] for k in keys] for h in same] == [[h[k] for k in keys] for h in full.history[:len(same)]]
    if out.status is Status.TIME_LIMIT:
        assert engine_clock.now - start >= limit and out.iterations <= full.iterations
    else:
        assert out.status == full.status and out.iterations == full.iterations


@settings(max_examples=20, deadline=None)
@given(st.floats(0.1, 2.0), st.floats(0.1, 2.0), st.floats(-3.0, 3.0), st.floats(0.1, 0.9),
       st.sampled_from([0.3, 0.5, 0.7, 0.9]), st.integers(1, 3))
def test_a_level_run_closes_at_once_where_the_model_is_exact(a, b, c1, at, level, n_blocks):
    """Each block's value is linear in y (min x with x >= b y0 + a y1), so one cut per block makes
    the master's model exact. With a level alone the gap would shrink by about ``level`` a round
    (about 150 rounds to 1e-7 at 0.9); once the blocks, solved at the level point, cut nothing
    off, the next round takes the master's own optimum and the gap closes."""
    master = MasterSpec(c=np.array([10.0, c1]), A=sp.csr_matrix((0, 2)), r_lo=np.zeros(0), r_up=np.zeros(0),
                        y_lo=np.array([1.0, 0.0]), y_up=np.array([1.0, 1.0]))
    blocks = [BlockSpec(c=np.ones(1), W=sp.csr_matrix([[1.0]]), lo=np.zeros(1), up=np.full(1, INF),
                        T=sp.csr_matrix([[-b, -a]]), coupling=np.array([0, 1]), x_lo=np.zeros(1), x_up=np.full(1, 10.0))
              for _ in range(n_blocks)]
    optimum = 10.0 + n_blocks * b + min(0.0, c1 + n_blocks * a)
    out = benders(master, blocks, gap=1e-7, max_iterations=500, core=np.array([1.0, at]), level=level)
    assert out.status is Status.OPTIMAL
    assert out.upper_bound == pytest.approx(optimum, rel=1e-7)
    assert out.iterations <= 5
